/* test_queue_unsubscribe.c - ending a subscription while libnats' read loop is using it.
 *
 * libnats 3.4 (Debian 12's) looks a subscription up in its read loop and then uses it without
 * holding a reference (nats.c #637, fixed in nats.c 3.6.1). A caller whose call ended at that
 * moment freed the subscription under it: ci's test_queue_fleet died of SIGABRT in
 * natsConn_processMsg. Here the read loop is held in that window on purpose (libnats' own test
 * hook, a message filter, runs between the lookup and the use), the subscription is ended and
 * the freed memory would be scribbled over (this test runs with glibc's tcache off and
 * MALLOC_PERTURB_ set, see CMakeLists.txt), and the read loop then goes on: it must find the
 * subscription intact. Needs nats-server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <nats/nats.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "broker/jetstream.h"
#include "queue/fleet.h"

/* libnats' test hook (exported by libnats 3.4): f runs in the read loop for every message,
 * after the message's subscription was looked up and before it is used. */
typedef void (*nats_filter)(natsConnection *nc, natsMsg **msg, void *closure);
void natsConn_setFilterWithClosure(natsConnection *nc, nats_filter f, void *closure);

#define HELD_SUBJECT "sbxtest.held"
/* How long the read loop stays held once the subscription has ended. */
#define HOLD_MS 300

typedef struct held {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered;  /* the read loop is in the window */
    int released; /* the test let it go on */
} held;

static void hold_read_loop(natsConnection *nc, natsMsg **msg, void *closure)
{
    (void)nc;
    held *h = closure;
    if (strcmp(natsMsg_GetSubject(*msg), HELD_SUBJECT) != 0)
        return;
    pthread_mutex_lock(&h->mu);
    h->entered = 1;
    pthread_cond_broadcast(&h->cv);
    while (!h->released)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static void drop(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    (void)closure;
    natsMsg_Destroy(msg);
}

static void *release_later(void *arg)
{
    held *h = arg;
    usleep(HOLD_MS * 1000);
    pthread_mutex_lock(&h->mu);
    h->released = 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* The brokers' configuration of the fleet (its queue block outlives every connection). */
static sbx_config *CFG;

/* A connection to the fleet's NATS server, as a queue broker or worker makes it. */
static sbxq_conn *queue_conn(void)
{
    sbxq_conn *c = NULL;
    sbx_error err = {0};
    assert_int_equal(sbxq_connect(&CFG->broker.queue, "test", &c, &err), SBX_OK);
    return c;
}

/* A full batch ends while the read loop holds the first: the batch's flush waits for the read
 * loop, so nothing is freed under it, and every one is freed after. */
static void test_subscription_ended_while_the_read_loop_uses_it_stays_valid(void **state)
{
    (void)state;
    sbxq_conn *c = queue_conn();
    held h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    natsSubscription *subs[SBXQ_RETIRE_BATCH];
    for (int i = 0; i < SBXQ_RETIRE_BATCH; i++)
        assert_int_equal(natsConnection_Subscribe(
                             &subs[i], c->nc, i == 0 ? HELD_SUBJECT : "sbxtest.other", drop, NULL),
                         NATS_OK);
    assert_int_equal(natsConnection_Flush(c->nc), NATS_OK); /* the server has every SUB */
    natsConn_setFilterWithClosure(c->nc, hold_read_loop, &h);
    assert_int_equal(natsConnection_PublishString(c->nc, HELD_SUBJECT, "x"), NATS_OK);
    pthread_mutex_lock(&h.mu);
    while (!h.entered)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);

    /* The read loop holds subs[0]. End it, give the library's delivery thread time to drop
     * its own reference (before the fix: the last, so the memory was freed and perturbed). */
    sbxq_unsubscribe(c, subs[0], false);
    usleep(100 * 1000);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, release_later, &h), 0);
    /* The rest of the batch: the last one's flush cannot finish before the read loop goes on
     * (it handles the PONG after the held message), so it returns after the release. */
    for (int i = 1; i < SBXQ_RETIRE_BATCH; i++)
        sbxq_unsubscribe(c, subs[i], false);
    pthread_mutex_lock(&h.mu);
    int released = h.released;
    pthread_mutex_unlock(&h.mu);
    pthread_mutex_lock(&c->retired_mu);
    size_t waiting = c->n_retired;
    pthread_mutex_unlock(&c->retired_mu);
    /* The read loop goes on with the held message (before the fix: into freed memory), and
     * a round trip through it shows that it did and that the connection still works. */
    pthread_join(t, NULL);
    natsConn_setFilterWithClosure(c->nc, NULL, NULL);
    assert_int_equal(natsConnection_Flush(c->nc), NATS_OK);
    assert_true(released);
    assert_int_equal(waiting, 0); /* the batch was freed once the read loop was past it */
    sbxq_close(c);
}

/* Fewer than a batch: they wait, and closing the connection frees them (ASan's leak check
 * would name one that is never freed). */
static void test_subscriptions_ended_below_a_batch_are_freed_by_close(void **state)
{
    (void)state;
    sbxq_conn *c = queue_conn();
    for (int i = 0; i < 3; i++) {
        natsSubscription *sub = NULL;
        assert_int_equal(natsConnection_Subscribe(&sub, c->nc, "sbxtest.few", drop, NULL), NATS_OK);
        sbxq_unsubscribe(c, sub, false);
    }
    assert_int_equal(c->n_retired, 3);
    sbxq_unsubscribe(c, NULL, false); /* nothing to end */
    assert_int_equal(c->n_retired, 3);
    sbxq_close(c);
}

/* Runs last (it kills the group's server): while the connection is away no flush can prove
 * anything, so a full batch is kept, and what ends meanwhile joins it; close frees them all
 * (ASan's leak check would name one it did not). */
static void test_a_batch_ended_while_the_server_is_away_is_kept_until_close(void **state)
{
    fleet *f = *state;
    sbxq_conn *c = queue_conn();
    natsSubscription *subs[SBXQ_RETIRE_BATCH + 1];
    for (int i = 0; i <= SBXQ_RETIRE_BATCH; i++)
        assert_int_equal(natsConnection_Subscribe(&subs[i], c->nc, "sbxtest.away", drop, NULL),
                         NATS_OK);
    assert_int_equal(natsConnection_Flush(c->nc), NATS_OK);
    fleet_kill_nats(f, 0);
    for (int waited = 0;
         natsConnection_Status(c->nc) == NATS_CONN_STATUS_CONNECTED && waited < 5000; waited += 10)
        usleep(10 * 1000);
    assert_int_not_equal(natsConnection_Status(c->nc), NATS_CONN_STATUS_CONNECTED);
    for (int i = 0; i < SBXQ_RETIRE_BATCH; i++)
        sbxq_unsubscribe(c, subs[i], false);
    assert_int_equal(c->n_retired, SBXQ_RETIRE_BATCH); /* the reap found no server: kept */
    assert_false(c->reaping);
    sbxq_unsubscribe(c, subs[SBXQ_RETIRE_BATCH], false);
    assert_int_equal(c->n_retired, SBXQ_RETIRE_BATCH + 1); /* tried again, all still kept */
    sbxq_close(c);
}

static int setup(void **state)
{
    static fleet f;
    fleet_init(&f, NULL);
    fleet_start_nats(&f, 1);
    CFG = fleet_client_config(&f);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    sbx_config_free(CFG);
    fleet_stop(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subscription_ended_while_the_read_loop_uses_it_stays_valid),
        cmocka_unit_test(test_subscriptions_ended_below_a_batch_are_freed_by_close),
        cmocka_unit_test(test_a_batch_ended_while_the_server_is_away_is_kept_until_close),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
