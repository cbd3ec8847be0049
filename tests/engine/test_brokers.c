/* test_brokers.c - the in-process brokers (DESIGN §6): embedded and thread submit/result/
 * discard/close, promotion to a pending task, the bounded queue, draining close, task_id dedup,
 * the completion LRU, and one session serialized while different sessions run in parallel.
 * The fake provider's gate holds operations so every ordering here is forced, not timed.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "providers/fake/fake.h"
#include "sbx/broker.h"
#include "sbx/replay.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED

typedef fx_env env;

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    fx_add_profile(t->cfg, "other", "fake");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

static sbx_broker *thread_broker_share(env *t, int threads, int depth, int lru, int share)
{
    sbx_thread_broker_opts o = {threads, depth, lru, share};
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_thread(t->e, &o, &b, NULL), SBX_OK);
    return b;
}

static sbx_broker *thread_broker(env *t, int threads, int depth, int lru)
{
    sbx_thread_broker_opts o = {threads, depth, lru, 0};
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_thread(t->e, &o, &b, NULL), SBX_OK);
    return b;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (generously: a loaded CI machine) until the fake has counted n operations. */
static void wait_ops(sbx_fake *f, uint64_t n)
{
    for (int i = 0; i < 60000 && sbx_fake_ops(f) < n; i++)
        sleep_ms(1);
    assert_true(sbx_fake_ops(f) >= n);
}

/* Opens the provider and returns its fake (a first request creates nothing lasting). */
static sbx_fake *warm(env *t, sbx_session_handle **handle)
{
    sbx_request *r = fx_shell("default", "echo warm");
    sbx_completion *c = sbx_engine_process(t->e, r, NULL);
    sbx_request_free(r);
    if (handle != NULL)
        *handle = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    return sbx_fake_get("default");
}

static void test_brokers_embedded_runs_inline_and_keeps_result(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    assert_string_equal(sbx_broker_flavor(b), "embedded");
    sbx_request *r = fx_shell("default", "echo hi");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 0, NULL, &c), SBX_OK);
    assert_non_null(c); /* wait 0 still completes: embedded is synchronous */
    assert_string_equal(fx_stdout(c), "hi\n");
    sbx_completion *again = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r), r->task_id, 0, &again), SBX_OK);
    assert_non_null(again);
    assert_string_equal(fx_stdout(again), "hi\n");
    sbx_broker_discard(b, sbx_request_subject(r), r->task_id);
    sbx_completion *gone = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r), r->task_id, 0, &gone),
                     SBX_E_INVALID_ARGUMENT);
    assert_null(gone);
    sbx_completion_free(c);
    sbx_completion_free(again);
    sbx_request_free(r);
    sbx_broker_close(b);
    sbx_broker_close(b); /* idempotent */
    sbx_broker_free(b);
}

static void test_brokers_thread_promotes_after_wait_and_result_later(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    sbx_broker *b = thread_broker(t, 2, 8, 8);
    sbx_fake_set_gate(f, true);
    sbx_request *r = fx_shell("default", "echo later");
    char task_id[SBX_UUID_LEN];
    snprintf(task_id, sizeof(task_id), "%s", r->task_id);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 20, NULL, &c), SBX_OK);
    assert_null(c);      /* pending: the gate holds it past wait_ms */
    sbx_request_free(r); /* the broker kept its own copy */
    assert_int_equal(sbx_broker_result(b, "alice", task_id, 0, &c), SBX_OK);
    assert_null(c); /* still pending */
    sbx_fake_set_gate(f, false);
    assert_int_equal(sbx_broker_result(b, "alice", task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
    assert_non_null(c);
    assert_string_equal(fx_stdout(c), "later\n");
    sbx_completion_free(c);
    sbx_broker_free(b);
}

static void test_brokers_thread_full_queue_is_resource_exhausted(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 1, 2, 8);
    sbx_fake_set_gate(f, true);
    sbx_request *r[4];
    sbx_completion *c = NULL;
    for (int i = 0; i < 4; i++)
        r[i] = fx_shell("default", "echo q");
    assert_int_equal(sbx_broker_submit(b, r[0], 0, NULL, &c), SBX_OK);
    wait_ops(f, base + 1); /* the only executor holds r[0] at the gate */
    assert_int_equal(sbx_broker_submit(b, r[1], 0, NULL, &c), SBX_OK);
    assert_int_equal(sbx_broker_submit(b, r[2], 0, NULL, &c), SBX_OK);
    assert_null(c);
    assert_int_equal(sbx_broker_submit(b, r[3], 0, NULL, &c), SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(c);
    assert_int_equal(c->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(c->error, "queue_depth"));
    sbx_completion_free(c);
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c),
            SBX_OK);
        assert_int_equal(c->status, OK_STATUS);
        sbx_completion_free(c);
    }
    for (int i = 0; i < 4; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

typedef struct opener {
    sbx_fake *f;
    int after_ms;
} opener;

static void *open_gate_later(void *arg)
{
    opener *o = arg;
    sleep_ms(o->after_ms);
    sbx_fake_set_gate(o->f, false);
    return NULL;
}

static void test_brokers_thread_close_drains_in_flight_work(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *r[5];
    sbx_completion *c = NULL;
    for (int i = 0; i < 5; i++) {
        r[i] = fx_shell("default", "echo drained");
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
        assert_null(c);
    }
    opener o = {f, 50};
    pthread_t th;
    pthread_create(&th, NULL, open_gate_later, &o);
    sbx_broker_close(b); /* returns only once all five ran */
    pthread_join(th, NULL);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, 0, &c),
                         SBX_OK);
        assert_non_null(c);
        assert_string_equal(fx_stdout(c), "drained\n");
        sbx_completion_free(c);
    }
    sbx_request *late = fx_shell("default", "echo late");
    assert_int_equal(sbx_broker_submit(b, late, 0, NULL, &c), SBX_E_BROKER);
    assert_int_equal(c->error_code, SBX_E_BROKER);
    sbx_completion_free(c);
    sbx_request_free(late);
    sbx_broker_close(b); /* idempotent */
    for (int i = 0; i < 5; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

static void test_brokers_thread_dedups_task_id(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *r = fx_shell("default", "echo once");
    sbx_completion *c1 = NULL, *c2 = NULL, *c3 = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 0, NULL, &c1), SBX_OK);
    assert_int_equal(sbx_broker_submit(b, r, 0, NULL, &c2), SBX_OK); /* joins the queued task */
    assert_null(c1);
    assert_null(c2);
    sbx_fake_set_gate(f, false);
    assert_int_equal(
        sbx_broker_result(b, sbx_request_subject(r), r->task_id, SBX_WAIT_FOREVER, &c1), SBX_OK);
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c3), SBX_OK); /* done */
    assert_non_null(c3);
    assert_string_equal(c3->session->sandbox_id, c1->session->sandbox_id);
    assert_int_equal(sbx_fake_ops(f), base + 1);
    sbx_completion_free(c1);
    sbx_completion_free(c3);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* ---- idempotency is scoped by principal and request (both in-process brokers) ---------------- */

static sbx_broker *open_flavor(env *t, const char *flavor)
{
    sbx_broker *b = NULL;
    if (strcmp(flavor, "embedded") == 0)
        assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    else
        b = thread_broker(t, 2, 16, 16);
    return b;
}

static sbx_completion *submit_wait(sbx_broker *b, const sbx_request *r)
{
    sbx_completion *c = NULL;
    sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c);
    assert_non_null(c);
    return c;
}

/* tenant-b sends tenant-a's task_id with its own command: it runs tenant-b's command and never
 * sees tenant-a's stdout or session handle. */
static void other_principal_reusing_id_is_another_task(env *t, const char *flavor)
{
    sbx_broker *b = open_flavor(t, flavor);
    sbx_request *a = fx_shell("default", "echo secret-of-a");
    fx_subject(a, "tenant-a");
    sbx_completion *ca = submit_wait(b, a);
    assert_string_equal(fx_stdout(ca), "secret-of-a\n");

    sbx_request *bq = fx_shell("default", "echo mine");
    fx_subject(bq, "tenant-b");
    sbx_set_string(&bq->task_id, a->task_id);
    sbx_completion *cb = submit_wait(b, bq);
    assert_int_equal(cb->status, OK_STATUS);
    assert_string_equal(fx_stdout(cb), "mine\n");
    assert_string_not_equal(cb->session->sandbox_id, ca->session->sandbox_id);
    /* each principal's result() finds its own task only */
    sbx_completion *again = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-a", a->task_id, 0, &again), SBX_OK);
    assert_string_equal(fx_stdout(again), "secret-of-a\n");
    sbx_completion_free(again);
    assert_int_equal(sbx_broker_result(b, "tenant-b", a->task_id, 0, &again), SBX_OK);
    assert_string_equal(fx_stdout(again), "mine\n");
    sbx_completion_free(again);
    assert_int_equal(sbx_broker_result(b, "tenant-c", a->task_id, 0, &again),
                     SBX_E_INVALID_ARGUMENT);
    sbx_completion_free(ca);
    sbx_completion_free(cb);
    sbx_request_free(a);
    sbx_request_free(bq);
    sbx_broker_free(b);
}

static void test_brokers_embedded_other_principal_reusing_id_is_another_task(void **state)
{
    other_principal_reusing_id_is_another_task(*state, "embedded");
}

static void test_brokers_thread_other_principal_reusing_id_is_another_task(void **state)
{
    other_principal_reusing_id_is_another_task(*state, "thread");
}

/* The same principal reusing a task_id with another body, or for another profile, is refused
 * with INVALID_ARGUMENT naming the id; it is never answered with the first completion and runs
 * nothing. A retry that differs only in its deadline joins the first. */
static void same_principal_other_request_is_refused(env *t, const char *flavor)
{
    sbx_broker *b = open_flavor(t, flavor);
    sbx_fake *f = warm(t, NULL);
    sbx_request *first = fx_shell("default", "echo first");
    sbx_completion *c1 = submit_wait(b, first);
    assert_string_equal(fx_stdout(c1), "first\n");
    uint64_t ops = sbx_fake_ops(f);

    sbx_request *other_body = fx_shell("default", "echo second");
    sbx_set_string(&other_body->task_id, first->task_id);
    sbx_completion *c2 = submit_wait(b, other_body);
    assert_int_equal(c2->error_code, SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(c2->error, first->task_id));
    assert_non_null(strstr(c2->error, "different request"));
    assert_true(c2->result == NULL || c2->result->stdout.len == 0);

    sbx_request *other_profile = fx_shell("other", "echo first");
    sbx_set_string(&other_profile->task_id, first->task_id);
    sbx_completion *c3 = submit_wait(b, other_profile);
    assert_int_equal(c3->error_code, SBX_E_INVALID_ARGUMENT);
    assert_true(c3->result == NULL || c3->result->stdout.len == 0);
    assert_int_equal(sbx_fake_ops(f), ops);

    sbx_request *retry = (sbx_request *)sbx_message_copy(&first->base);
    retry->deadline_ms = sbx_now_ms() + 60000; /* a transport field: still the same request */
    sbx_completion *c4 = submit_wait(b, retry);
    assert_int_equal(c4->status, OK_STATUS);
    assert_string_equal(fx_stdout(c4), "first\n");
    assert_string_equal(c4->session->sandbox_id, c1->session->sandbox_id);
    assert_int_equal(sbx_fake_ops(f), ops);

    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
    sbx_completion_free(c4);
    sbx_request_free(first);
    sbx_request_free(other_body);
    sbx_request_free(other_profile);
    sbx_request_free(retry);
    sbx_broker_free(b);
}

static void test_brokers_embedded_same_principal_other_request_is_refused(void **state)
{
    same_principal_other_request_is_refused(*state, "embedded");
}

static void test_brokers_thread_same_principal_other_request_is_refused(void **state)
{
    same_principal_other_request_is_refused(*state, "thread");
}

/* A request still queued behind a gate is refused the same way: the check does not wait for
 * the first completion. */
static void test_brokers_thread_reused_id_refused_while_first_is_pending(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *first = fx_shell("default", "echo first");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, first, 0, NULL, &c), SBX_OK);
    assert_null(c);
    sbx_request *other = fx_shell("default", "echo other");
    sbx_set_string(&other->task_id, first->task_id);
    assert_int_equal(sbx_broker_submit(b, other, 0, NULL, &c), SBX_OK);
    assert_non_null(c);
    assert_int_equal(c->error_code, SBX_E_INVALID_ARGUMENT);
    sbx_completion_free(c);
    sbx_fake_set_gate(f, false);
    assert_int_equal(sbx_broker_result(b, "alice", first->task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "first\n");
    sbx_completion_free(c);
    sbx_request_free(first);
    sbx_request_free(other);
    sbx_broker_free(b);
}

static void test_brokers_thread_lru_evicts_oldest_completion(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 8, 2);
    sbx_request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = fx_shell("default", "echo x");
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        sbx_completion_free(c);
    }
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[0]), r[0]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[2]), r[2]->task_id, 0, &c), SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    for (int i = 0; i < 3; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* One principal's flood evicts its own completions, not the one another keeps for its retry:
 * the LRU (8 here) is one store for every principal, and eviction took the oldest entry,
 * whoever's it was, so tenant-b's retry ran its task a second time. */
static void test_brokers_thread_lru_flood_of_one_principal_evicts_its_own(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    sbx_broker *b = thread_broker(t, 1, 8, 8);
    sbx_request *kept = fx_shell("default", "echo once");
    fx_subject(kept, "tenant-b");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, kept, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    sbx_completion_free(c);
    sbx_request *flood[20];
    for (int i = 0; i < 20; i++) {
        flood[i] = fx_shell("default", "echo x");
        fx_subject(flood[i], "tenant-a");
        c = NULL;
        assert_int_equal(sbx_broker_submit(b, flood[i], SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        sbx_completion_free(c);
    }
    uint64_t ops = sbx_fake_ops(f);
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-b", kept->task_id, 0, &c), SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    c = NULL;
    assert_int_equal(sbx_broker_submit(b, kept, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "once\n");
    assert_int_equal(sbx_fake_ops(f), ops); /* answered from the store: not run again */
    sbx_completion_free(c);
    /* The flood is bounded: tenant-a's oldest went, its newest is kept. */
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-a", flood[0]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_broker_result(b, "tenant-a", flood[19]->task_id, 0, &c), SBX_OK);
    sbx_completion_free(c);
    for (int i = 0; i < 20; i++)
        sbx_request_free(flood[i]);
    sbx_request_free(kept);
    sbx_broker_free(b);
}

/* More principals than the LRU holds, one completion each: the oldest goes, never the one that
 * just ended (its retry must find it). With a fair share rounded down to nothing, every newest
 * entry evicted itself. */
static void test_brokers_thread_lru_of_many_principals_keeps_the_newest(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 8, 2);
    sbx_request *r[4];
    char who[16];
    for (int i = 0; i < 4; i++) {
        r[i] = fx_shell("default", "echo x");
        snprintf(who, sizeof who, "tenant-%d", i);
        fx_subject(r[i], who);
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        sbx_completion_free(c);
    }
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-3", r[3]->task_id, 0, &c), SBX_OK);
    sbx_completion_free(c);
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-2", r[2]->task_id, 0, &c), SBX_OK);
    sbx_completion_free(c);
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-0", r[0]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* The byte bound is shared the same way: tenant-a's 2 MB completions past 64 MiB evict its own,
 * never tenant-b's small one stored first. */
static void test_brokers_thread_lru_bytes_of_one_principal_evict_its_own(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 8, 1000);
    sbx_request *kept = fx_shell("default", "echo once");
    fx_subject(kept, "tenant-b");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, kept, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    sbx_completion_free(c);
    for (int i = 0; i < 40; i++) {
        sbx_request *big = fx_shell("default", "yes 1000000");
        fx_subject(big, "tenant-a");
        c = NULL;
        assert_int_equal(sbx_broker_submit(b, big, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        sbx_completion_free(c);
        sbx_request_free(big);
    }
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-b", kept->task_id, 0, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "once\n");
    sbx_completion_free(c);
    sbx_request_free(kept);
    sbx_broker_free(b);
}

/* The LRU is bounded by bytes too: completions of 2 MB each (`yes 1000000`) push the oldest
 * out long before broker.lru_size (1,000) is reached. */
#define BIG_TASKS 48

static void test_brokers_thread_lru_is_bounded_by_bytes(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 8, 1000);
    sbx_request *r[BIG_TASKS];
    for (int i = 0; i < BIG_TASKS; i++) {
        r[i] = fx_shell("default", "yes 1000000");
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        assert_true(c->result->stdout.len >= 1000000);
        sbx_completion_free(c);
    }
    /* 48 x 2 MB do not fit in BT_LRU_BYTES_MAX (64 MiB): the first went, the last is kept */
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[0]), r[0]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[BIG_TASKS - 1]),
                                       r[BIG_TASKS - 1]->task_id, 0, &c),
                     SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    for (int i = 0; i < BIG_TASKS; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

static void test_brokers_thread_serializes_one_session(void **state)
{
    env *t = *state;
    sbx_session_handle *h = NULL;
    sbx_fake *f = warm(t, &h);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *r[4];
    sbx_completion *c = NULL;
    for (int i = 0; i < 4; i++) {
        r[i] = fx_shell("default", "echo s");
        fx_session(r[i], h);
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
    }
    wait_ops(f, base + 1);
    sleep_ms(100); /* three idle executors: none may pick up the same session meanwhile */
    assert_int_equal(sbx_fake_ops(f), base + 1);
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c),
            SBX_OK);
        assert_int_equal(c->status, OK_STATUS);
        sbx_completion_free(c);
        sbx_request_free(r[i]);
    }
    assert_false(sbx_fake_overlap_seen(f));
    sbx_message_free(&h->base);
    sbx_broker_free(b);
}

/* Session ids are the caller's choice (the CLI names its sessions "default:<profile>"): two
 * principals using the same id have two sessions, which run in parallel. Keyed by the id
 * alone, one principal's request waited for the other's, in the broker's session queue and in
 * the engine's session lock. */
static void test_brokers_thread_one_session_id_of_two_principals_runs_in_parallel(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
    sbx_fake_set_gate(f, true);
    const char *who[2] = {"alice", "bob"};
    sbx_request *r[2];
    sbx_completion *c = NULL;
    for (int i = 0; i < 2; i++) {
        r[i] = fx_shell("default", "echo s");
        fx_subject(r[i], who[i]);
        r[i]->session = sbx_session_handle_new();
        sbx_set_string(&r[i]->session->session_id, "default:shared");
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
    }
    for (int i = 0; i < 5000 && sbx_fake_ops(f) < base + 2; i++)
        sleep_ms(1);
    uint64_t inside = sbx_fake_ops(f) - base; /* both in the provider at once */
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c),
            SBX_OK);
        assert_int_equal(c->status, OK_STATUS);
        sbx_completion_free(c);
        sbx_request_free(r[i]);
    }
    sbx_broker_free(b);
    assert_true(inside >= 2);
}

static void test_brokers_thread_runs_sessions_in_parallel(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    /* One principal's: principal_threads 4 gives it every thread (by default, 3 of 4). */
    sbx_broker *b = thread_broker_share(t, 4, 16, 16, 4);
    sbx_fake_set_gate(f, true);
    sbx_request *r[4];
    sbx_completion *c = NULL;
    for (int i = 0; i < 4; i++) {
        r[i] = fx_shell("default", "echo p"); /* four fresh sessions */
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
    }
    wait_ops(f, base + 4); /* all four are inside the provider at once */
    assert_true(sbx_fake_max_parallel(f) >= 4);
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c),
            SBX_OK);
        sbx_completion_free(c);
        sbx_request_free(r[i]);
    }
    sbx_broker_free(b);
}

static void test_brokers_discarded_task_result_is_unknown(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 8, 8);
    sbx_request *r = fx_shell("default", "echo x");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    sbx_completion_free(c);
    sbx_broker_discard(b, sbx_request_subject(r), r->task_id);
    sbx_broker_discard(b, "alice", "no-such-task"); /* unknown ids are fine */
    c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r), r->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    assert_null(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* The embedded broker keeps broker.lru_size completions (of the engine's configuration), like
 * the thread broker; it used a fixed 1024. */
static void test_brokers_embedded_lru_is_broker_lru_size(void **state)
{
    env *t = *state;
    t->cfg->broker.lru_size = 2;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    sbx_request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = fx_shell("default", "echo x");
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
        sbx_completion_free(c);
    }
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[0]), r[0]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r[2]), r[2]->task_id, 0, &c), SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    for (int i = 0; i < 3; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* principal_threads above threads is refused at open, naming both (config.c refuses it in a
 * file; this is an embedder's opts). */
static void test_brokers_thread_principal_threads_above_threads_is_refused(void **state)
{
    env *t = *state;
    sbx_thread_broker_opts o = {2, 8, 8, 3};
    sbx_broker *b = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_open_thread(t->e, &o, &b, &err), SBX_E_CONFIG);
    assert_null(b);
    assert_non_null(strstr(err.message, "principal_threads 3 is more than threads 2"));
}

static void test_brokers_open_by_flavor(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    free(t->cfg->broker.flavor);
    t->cfg->broker.flavor = strdup("embedded");
    assert_int_equal(sbx_broker_open(t->cfg, t->e, &b, NULL), SBX_OK);
    assert_string_equal(sbx_broker_flavor(b), "embedded");
    sbx_broker_free(b);
    free(t->cfg->broker.flavor);
    t->cfg->broker.flavor = strdup("thread");
    assert_int_equal(sbx_broker_open(t->cfg, t->e, &b, NULL), SBX_OK);
    assert_string_equal(sbx_broker_flavor(b), "thread");
    sbx_broker_free(b);
    free(t->cfg->broker.flavor);
    t->cfg->broker.flavor = strdup("carrier-pigeon");
    sbx_error err;
    assert_int_equal(sbx_broker_open(t->cfg, t->e, &b, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "embedded, thread, remote or queue"));
}

/* No config: the default flavor, a thread broker with the default sizes, and it runs requests
 * (it used to read the sizes through the NULL config). */
static void test_brokers_open_without_config_is_a_default_thread_broker(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open(NULL, t->e, &b, NULL), SBX_OK);
    assert_string_equal(sbx_broker_flavor(b), "thread");
    sbx_completion *c = NULL;
    sbx_request *r = fx_code("default", "python", "print(6 * 7)");
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "42\n");
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

static void test_brokers_thread_records_frames_that_replay_identically(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    char path[600];
    snprintf(path, sizeof(path), "%s/thread.rec", fx_tmpdir(t->cfg));
    assert_int_equal(sbx_broker_record_to(b, path, NULL), SBX_OK);
    sbx_completion *c = NULL;
    sbx_request *r1 = fx_code("default", "python", "v = 5");
    assert_int_equal(sbx_broker_submit(b, r1, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    sbx_request *r2 = fx_code("default", "python", "print(v * 2)");
    fx_session(r2, c->session);
    sbx_completion_free(c);
    assert_int_equal(sbx_broker_submit(b, r2, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "10\n");
    sbx_completion_free(c);
    assert_int_equal(sbx_broker_record_to(b, NULL, NULL), SBX_OK);
    sbx_recording **recs = NULL;
    size_t n = 0;
    assert_int_equal(sbx_recordings_load(path, 100, &recs, &n, NULL), SBX_OK);
    assert_int_equal(n, 2);
    assert_string_equal(recs[0]->broker, "thread");
    assert_true(recs[1]->finished_at_ms >= recs[1]->started_at_ms);
    sbx_recordings_free(recs, n);
    /* The follow-up request's session is followed into the replay: identical completions. */
    sbx_broker *emb = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &emb, NULL), SBX_OK);
    sbx_replay_report rep;
    assert_int_equal(sbx_replay_file(path, emb, &rep, NULL), SBX_OK);
    assert_int_equal(rep.total, 2);
    if (rep.differing != 0)
        fail_msg("%s", rep.text);
    sbx_replay_report_clear(&rep);
    sbx_request_free(r1);
    sbx_request_free(r2);
    sbx_broker_free(emb);
    sbx_broker_free(b);
}

typedef struct chunks {
    char text[256];
    size_t n;
} chunks;

static void collect(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                    uint64_t offset)
{
    chunks *ch = arg;
    (void)offset;
    if (stream == SBX__V1__STREAM__STREAM_STDOUT && ch->n + len < sizeof(ch->text)) {
        memcpy(ch->text + ch->n, data, len);
        ch->n += len;
    }
}

static void test_brokers_hooks_stream_output_chunks(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 4, 4);
    chunks ch = {0};
    sbx_engine_hooks hooks = {collect, &ch, NULL};
    sbx_request *r = fx_shell("default", "echo one; echo two");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, &hooks, &c), SBX_OK);
    assert_string_equal(ch.text, "one\ntwo\n");
    assert_string_equal(fx_stdout(c), "one\ntwo\n");
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* A submit with a bounded wait lends its hooks only while it waits: a task still running when
 * it returns calls them no more (the caller may have freed what they point to). Before: the
 * executor called the returned submit's on_output when the task printed, later. */
static void test_brokers_hooks_are_not_called_after_a_bounded_submit_returned(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 4, 4);
    chunks ch = {0};
    sbx_engine_hooks hooks = {collect, &ch, NULL};
    sbx_request *r = fx_shell("default", "echo early; sleep 300; echo late");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 150, &hooks, &c), SBX_OK);
    assert_null(c); /* pending */
    size_t seen = ch.n;
    assert_true(seen == 0 || strcmp(ch.text, "early\n") == 0);
    /* Joining the task waits for its end: the output printed after the return went nowhere. */
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "early\nlate\n");
    assert_int_equal(ch.n, seen);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

static void *set_flag_soon(void *arg)
{
    usleep(100 * 1000);
    *(volatile int *)arg = 1;
    return NULL;
}

/* The cancel flag of a bounded-wait submit still ends its task while it waits. */
static void test_brokers_cancel_flag_of_a_bounded_submit_ends_the_task(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 4, 4);
    volatile int cancel = 0;
    sbx_engine_hooks hooks = {NULL, NULL, &cancel};
    sbx_request *r = fx_shell("default", "sleep 30000");
    pthread_t th;
    pthread_create(&th, NULL, set_flag_soon, (void *)&cancel);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 20000, &hooks, &c), SBX_OK);
    pthread_join(th, NULL);
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_non_null(strstr(c->error, "cancel"));
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

static void test_brokers_cancel_hook_abandons_execution(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    volatile int cancel = 1;
    sbx_engine_hooks hooks = {NULL, NULL, &cancel};
    sbx_request *r = fx_shell("default", "sleep 60000");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, &hooks, &c), SBX_OK);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_non_null(strstr(c->error, "cancelled"));
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* The embedded broker keeps no cancelled completion for the task id either: the same request
 * without the flag runs. Before: it got the stored "cancelled". */
static void test_brokers_embedded_cancelled_task_is_not_the_answer_to_its_retry(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    volatile int cancel = 1;
    sbx_engine_hooks hooks = {NULL, NULL, &cancel};
    sbx_request *r = fx_shell("default", "echo once");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, &hooks, &c), SBX_OK);
    assert_int_not_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "once\n");
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* ---- asynchronous submit and describe ---------------------------------------------------- */

/* What on_done callbacks received, for a test to wait on. */
typedef struct dones {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    sbx_status st[8];
    sbx_completion *c[8];
    pthread_t thread[8]; /* the thread each on_done ran on */
    chunks out;
} dones;

static void dones_init(dones *d)
{
    memset(d, 0, sizeof(*d));
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
}

static void dones_free(dones *d)
{
    for (int i = 0; i < d->n; i++)
        sbx_completion_free(d->c[i]);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
}

static void on_done(void *arg, sbx_status st, sbx_completion *c)
{
    dones *d = arg;
    pthread_mutex_lock(&d->mu);
    assert_true(d->n < 8);
    d->st[d->n] = st;
    d->thread[d->n] = pthread_self();
    d->c[d->n++] = c;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void on_chunk(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                     uint64_t offset)
{
    dones *d = arg;
    collect(&d->out, stream, data, len, offset);
}

static void wait_dones(dones *d, int n)
{
    pthread_mutex_lock(&d->mu);
    while (d->n < n)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static int dones_count(dones *d)
{
    pthread_mutex_lock(&d->mu);
    int n = d->n;
    pthread_mutex_unlock(&d->mu);
    return n;
}

static void test_brokers_thread_async_streams_output_and_calls_back(void **state)
{
    env *t = *state;
    sbx_broker *b = thread_broker(t, 1, 4, 4);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_output = on_chunk, .on_done = on_done, .arg = &d};
    sbx_request *r = fx_shell("default", "echo one; echo two");
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    wait_dones(&d, 1);
    assert_int_equal(d.st[0], SBX_OK);
    assert_int_equal(d.c[0]->status, OK_STATUS);
    assert_string_equal(fx_stdout(d.c[0]), "one\ntwo\n");
    assert_string_equal(d.out.text, "one\ntwo\n");
    /* The task is kept like any other: result() finds it. */
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(r), r->task_id, 0, &c), SBX_OK);
    assert_string_equal(fx_stdout(c), "one\ntwo\n");
    sbx_completion_free(c);
    dones_free(&d);
    sbx_request_free(r);
    sbx_broker_free(b);
}

static void test_brokers_thread_async_retry_joins_and_done_task_answers_at_once(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    sbx_request *r = fx_shell("default", "echo once");
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK); /* joins the running task */
    wait_ops(f, base + 1);
    assert_int_equal(dones_count(&d), 0);
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 2);
    /* Done: the stored completion is the answer, given before submit_async returns. */
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    assert_int_equal(dones_count(&d), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(d.st[i], SBX_OK);
        assert_string_equal(fx_stdout(d.c[i]), "once\n");
    }
    assert_int_equal(sbx_fake_ops(f), base + 1);
    /* The same task_id with another request: refused at once, never joined. */
    sbx_request *other = fx_shell("default", "echo other");
    sbx_set_string(&other->task_id, r->task_id);
    assert_int_equal(sbx_broker_submit_async(b, other, &cb), SBX_OK);
    assert_int_equal(dones_count(&d), 4);
    assert_int_equal(d.c[3]->error_code, SBX_E_INVALID_ARGUMENT);
    dones_free(&d);
    sbx_request_free(other);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* run_here (the worker's inline run): with a slot free at once the request runs inside
 * submit_async, on the caller's thread, and on_done has been called when it returns; with every
 * slot taken it is queued as without, and an executor runs it later. */
static void test_brokers_thread_async_run_here_runs_on_the_callers_thread_when_free(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 1, 16, 16);
    dones d;
    dones_init(&d);
    sbx_broker_async here = {
        .on_output = on_chunk, .on_done = on_done, .arg = &d, .run_here = true};
    sbx_request *r1 = fx_shell("default", "echo here");
    assert_int_equal(sbx_broker_submit_async(b, r1, &here), SBX_OK);
    assert_int_equal(dones_count(&d), 1); /* ran before submit_async returned */
    assert_true(pthread_equal(d.thread[0], pthread_self()));
    assert_int_equal(d.c[0]->status, OK_STATUS);
    assert_string_equal(fx_stdout(d.c[0]), "here\n");
    assert_string_equal(d.out.text, "here\n");
    /* The one slot taken by a task held at the fake's gate: queued, run by the executor. */
    sbx_fake_set_gate(f, true);
    sbx_broker_async plain = {.on_done = on_done, .arg = &d};
    sbx_request *r2 = fx_shell("default", "echo held");
    sbx_request *r3 = fx_shell("default", "echo queued");
    assert_int_equal(sbx_broker_submit_async(b, r2, &plain), SBX_OK);
    wait_ops(f, base + 2);
    sbx_broker_async here2 = {.on_done = on_done, .arg = &d, .run_here = true};
    assert_int_equal(sbx_broker_submit_async(b, r3, &here2), SBX_OK);
    assert_int_equal(dones_count(&d), 1); /* queued, not run here */
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 3);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(d.c[i]->status, OK_STATUS);
        assert_false(pthread_equal(d.thread[i], pthread_self()));
    }
    assert_string_equal(fx_stdout(d.c[2]), "queued\n");
    dones_free(&d);
    sbx_request_free(r1);
    sbx_request_free(r2);
    sbx_request_free(r3);
    sbx_broker_free(b);
}

/* A caller blocking on its own request, on a thread of its own. */
typedef struct blocker {
    sbx_broker *b;
    sbx_request *r;
    sbx_completion *c;
} blocker;

static void *block_on_own_request(void *arg)
{
    blocker *bl = arg;
    sbx_broker_submit(bl->b, bl->r, SBX_WAIT_FOREVER, NULL, &bl->c);
    return NULL;
}

/* A blocking submitter runs its own task on its thread; an asynchronous submit of the same task
 * joins it while it runs. Both get the completion, once the task ran once: the copy made for
 * the blocking owner is its own, never handed to the joiner (which left the owner with an
 * "out of memory" failure for a task that succeeded). */
static void test_brokers_thread_async_joiner_of_a_blocking_owners_task(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *r = fx_shell("default", "echo once");
    blocker o = {b, r, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, block_on_own_request, &o), 0);
    wait_ops(f, base + 1); /* running on the owner's thread */
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK); /* joins it */
    sbx_fake_set_gate(f, false);
    pthread_join(th, NULL);
    wait_dones(&d, 1);
    assert_non_null(o.c);
    if (o.c->status != OK_STATUS)
        fail_msg("the owner got: %s", o.c->error);
    assert_string_equal(fx_stdout(o.c), "once\n");
    assert_int_equal(d.st[0], SBX_OK);
    assert_int_equal(d.c[0]->status, OK_STATUS);
    assert_string_equal(fx_stdout(d.c[0]), "once\n");
    assert_int_equal(sbx_fake_ops(f), base + 1);
    sbx_completion_free(o.c);
    dones_free(&d);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* A joiner that went away (its cancel flag set) stops waiting at the next join of the task: a
 * client joining a long task and resetting, again and again, held one waiter per join until the
 * task ended (the worker's calls and their budget). The creator, whose hooks run the task, waits
 * on; the task runs once. Before: the gone joiner was answered only when the task ended. */
static void test_brokers_thread_async_gone_joiners_are_answered_at_the_next_join(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    dones creator, gone, last;
    dones_init(&creator);
    dones_init(&gone);
    dones_init(&last);
    volatile int creator_gone = 0, joiner_gone = 0;
    sbx_broker_async cb = {.cancel = &creator_gone, .on_done = on_done, .arg = &creator};
    sbx_broker_async j1 = {.cancel = &joiner_gone, .on_done = on_done, .arg = &gone};
    sbx_broker_async j2 = {.on_done = on_done, .arg = &last};
    sbx_request *r = fx_shell("default", "echo once");
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    wait_ops(f, base + 1);
    assert_int_equal(sbx_broker_submit_async(b, r, &j1), SBX_OK);
    joiner_gone = 1;
    assert_int_equal(sbx_broker_submit_async(b, r, &j2), SBX_OK);
    assert_int_equal(dones_count(&gone), 1); /* answered by the join, the task still gated */
    assert_non_null(strstr(gone.c[0]->error, "went away"));
    assert_int_equal(dones_count(&creator), 0);
    assert_int_equal(dones_count(&last), 0);
    sbx_fake_set_gate(f, false);
    wait_dones(&creator, 1);
    wait_dones(&last, 1);
    assert_string_equal(fx_stdout(creator.c[0]), "once\n");
    assert_string_equal(fx_stdout(last.c[0]), "once\n");
    assert_int_equal(dones_count(&gone), 1);
    assert_int_equal(sbx_fake_ops(f), base + 1);
    dones_free(&creator);
    dones_free(&gone);
    dones_free(&last);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* A task ended because its caller went away is not the stored answer of its task id: the
 * same request again (a retry after the broken connection that cancelled it) runs anew. Before:
 * the retry got "the caller went away" for as long as the completion was stored. */
static void test_brokers_thread_a_cancelled_task_is_not_the_answer_to_its_retry(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    volatile int gone = 0;
    sbx_broker_async cb = {.cancel = &gone, .on_done = on_done, .arg = &d};
    sbx_request *r = fx_shell("default", "echo once");
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    wait_ops(f, base + 1);
    gone = 1;
    wait_dones(&d, 1);
    assert_int_equal(d.c[0]->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    sbx_fake_set_gate(f, false);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_string_equal(fx_stdout(c), "once\n");
    sbx_completion_free(c);
    dones_free(&d);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* A retry that joined while its creator's call went away gets the task run for it, not the
 * creator's cancellation: the remote broker resends after the broken connection that cancelled
 * the first call, and the resend arrives while that call is still being cancelled. Before: the
 * joiner got the creator's TIMED_OUT "the caller went away". */
static void test_brokers_thread_a_live_joiner_inherits_a_cancelled_task(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    dones first, retry;
    dones_init(&first);
    dones_init(&retry);
    volatile int gone = 0, here = 0;
    sbx_broker_async cb1 = {.cancel = &gone, .on_done = on_done, .arg = &first};
    sbx_broker_async cb2 = {.cancel = &here, .on_done = on_done, .arg = &retry};
    sbx_request *r = fx_shell("default", "echo once");
    sbx_request *again = (sbx_request *)sbx_message_copy(&r->base);
    assert_int_equal(sbx_broker_submit_async(b, r, &cb1), SBX_OK);
    wait_ops(f, base + 1); /* running, held at the gate */
    assert_int_equal(sbx_broker_submit_async(b, again, &cb2), SBX_OK); /* joins */
    gone = 1;
    wait_dones(&first, 1);
    assert_int_equal(first.c[0]->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    sbx_request_free(r); /* the creator's loan ended with its on_done */
    sbx_fake_set_gate(f, false);
    wait_dones(&retry, 1);
    assert_int_equal(retry.c[0]->status, OK_STATUS);
    assert_string_equal(fx_stdout(retry.c[0]), "once\n");
    /* And the task id now answers with that run. */
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, sbx_request_subject(again), again->task_id, 0, &c),
                     SBX_OK);
    assert_non_null(c);
    assert_string_equal(fx_stdout(c), "once\n");
    sbx_completion_free(c);
    dones_free(&first);
    dones_free(&retry);
    sbx_request_free(again);
    sbx_broker_free(b);
}

static void test_brokers_thread_async_full_queue_and_cancelled_task(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 1, 1, 8);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    volatile int cancel = 0;
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    sbx_broker_async cancellable = {.cancel = &cancel, .on_done = on_done, .arg = &d};
    sbx_request *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = fx_shell("default", "echo q");
    assert_int_equal(sbx_broker_submit_async(b, r[0], &cb), SBX_OK);
    wait_ops(f, base + 1); /* the only slot holds r[0] at the gate */
    assert_int_equal(sbx_broker_submit_async(b, r[1], &cancellable), SBX_OK); /* queued */
    assert_int_equal(sbx_broker_submit_async(b, r[2], &cb), SBX_E_RESOURCE_EXHAUSTED);
    assert_int_equal(dones_count(&d), 1); /* the refusal was called back already */
    assert_int_equal(d.st[0], SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(d.c[0]->error, "queue_depth"));
    cancel = 1; /* the caller of r[1] goes away while it waits: it never runs */
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 3);
    assert_int_equal(sbx_fake_ops(f), base + 1);
    int cancelled = d.c[1]->error != NULL && strstr(d.c[1]->error, "cancelled") ? 1 : 2;
    assert_non_null(strstr(d.c[cancelled]->error, "cancelled before it ran"));
    assert_string_equal(fx_stdout(d.c[3 - cancelled]), "q\n");
    dones_free(&d);
    for (int i = 0; i < 3; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* One principal's flood cannot take the whole queue: past its share (all but a quarter of
 * queue_depth) its next request is refused, naming the principal, and another principal's
 * request still finds room. Before: tenant-a filled all 8 places and tenant-b was refused. */
static void test_brokers_thread_one_principal_cannot_fill_the_queue(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 1, 8, 16);
    sbx_fake_set_gate(f, true);
    sbx_request *a[8];
    sbx_completion *c = NULL;
    for (int i = 0; i < 8; i++) {
        a[i] = fx_shell("default", "echo a");
        fx_subject(a[i], "tenant-a");
    }
    assert_int_equal(sbx_broker_submit(b, a[0], 0, NULL, &c), SBX_OK);
    wait_ops(f, base + 1); /* the only slot holds a[0] at the gate */
    for (int i = 1; i <= 6; i++) {
        assert_int_equal(sbx_broker_submit(b, a[i], 0, NULL, &c), SBX_OK);
        assert_null(c);
    }
    assert_int_equal(sbx_broker_submit(b, a[7], 0, NULL, &c), SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(c);
    assert_non_null(strstr(c->error, "principal 'tenant-a'"));
    assert_non_null(strstr(c->error, "queue_depth"));
    sbx_completion_free(c);
    c = NULL;
    sbx_request *other = fx_shell("default", "echo b");
    fx_subject(other, "tenant-b");
    assert_int_equal(sbx_broker_submit(b, other, 0, NULL, &c), SBX_OK);
    assert_null(c); /* queued */
    sbx_fake_set_gate(f, false);
    assert_int_equal(sbx_broker_result(b, "tenant-b", other->task_id, SBX_WAIT_FOREVER, &c),
                     SBX_OK);
    assert_string_equal(fx_stdout(c), "b\n");
    sbx_completion_free(c);
    for (int i = 0; i <= 6; i++) {
        assert_int_equal(sbx_broker_result(b, "tenant-a", a[i]->task_id, SBX_WAIT_FOREVER, &c),
                         SBX_OK);
        assert_string_equal(fx_stdout(c), "a\n");
        sbx_completion_free(c);
    }
    for (int i = 0; i < 8; i++)
        sbx_request_free(a[i]);
    sbx_request_free(other);
    sbx_broker_free(b);
}

/* Slots go round-robin over principals: tenant-b's one request, queued behind tenant-a's five,
 * runs after at most one more of tenant-a's, not after all of them (before: oldest first, so
 * it ran last). */
static void test_brokers_thread_grants_slots_round_robin_by_principal(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 1, 16, 16);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    sbx_request *r[7];
    for (int i = 0; i < 7; i++) {
        r[i] = fx_shell("default", i < 6 ? "echo a" : "echo b");
        fx_subject(r[i], i < 6 ? "tenant-a" : "tenant-b");
    }
    assert_int_equal(sbx_broker_submit_async(b, r[0], &cb), SBX_OK);
    wait_ops(f, base + 1); /* the only slot holds r[0] at the gate */
    for (int i = 1; i < 7; i++)
        assert_int_equal(sbx_broker_submit_async(b, r[i], &cb), SBX_OK);
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 7);
    int b_at = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(fx_stdout(d.c[i]), "b\n") == 0)
            b_at = i;
    assert_int_equal(b_at, 2); /* r[0], then one of tenant-a's, then tenant-b's */
    dones_free(&d);
    for (int i = 0; i < 7; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* One principal's tasks hold at most principal_threads slots (by default all but a quarter of
 * threads): tenant-a's five long commands take three of four slots, and tenant-b's request
 * runs at once on the fourth. Before: tenant-a's took all four, and tenant-b's waited until
 * one of them ended (minutes, for a command that runs that long). */
static void test_brokers_thread_one_principal_cannot_hold_every_slot(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    sbx_request *r[6];
    for (int i = 0; i < 6; i++) {
        r[i] = fx_shell("default", i < 5 ? "echo a" : "echo b");
        fx_subject(r[i], i < 5 ? "tenant-a" : "tenant-b");
    }
    for (int i = 0; i < 5; i++)
        assert_int_equal(sbx_broker_submit_async(b, r[i], &cb), SBX_OK);
    wait_ops(f, base + 3); /* three of tenant-a's at the gate */
    sbx_broker_load load = {0};
    assert_true(sbx_broker_get_load(b, &load));
    assert_int_equal(load.running, 3);
    assert_int_equal(load.queued, 2);
    assert_int_equal(sbx_broker_submit_async(b, r[5], &cb), SBX_OK);
    wait_ops(f, base + 4); /* tenant-b's, on the fourth slot */
    assert_true(sbx_broker_get_load(b, &load));
    assert_int_equal(load.running, 4);
    assert_int_equal(load.queued, 2); /* tenant-a's last two still wait for one of its own */
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 6); /* and every one ends: a principal at its share gets its slots back */
    int bs = 0;
    for (int i = 0; i < 6; i++)
        bs += strcmp(fx_stdout(d.c[i]), "b\n") == 0;
    assert_int_equal(bs, 1);
    dones_free(&d);
    for (int i = 0; i < 6; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

/* A CancelCommand of a principal at its share takes a free slot past it, ahead of the
 * principal's other waiting tasks: the long commands its share is spent on (attaches following
 * them) may be the very ones it ends. Before, it waited behind them until one ended. */
static void test_brokers_thread_cancel_passes_its_principals_share(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
    sbx_fake_set_gate(f, true);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_done = on_done, .arg = &d};
    sbx_request *r[5];
    for (int i = 0; i < 5; i++) {
        r[i] = fx_shell("default", "echo a");
        fx_subject(r[i], "tenant-a");
    }
    /* the last one a CancelCommand (the fake cannot cancel: the engine answers it at once) */
    sbx__v1__run_command__free_unpacked(r[4]->run_command, NULL);
    r[4]->cancel_command = malloc(sizeof(*r[4]->cancel_command));
    sbx__v1__cancel_command__init(r[4]->cancel_command);
    r[4]->cancel_command->command_id = 1;
    r[4]->op_case = SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND;
    for (int i = 0; i < 4; i++)
        assert_int_equal(sbx_broker_submit_async(b, r[i], &cb), SBX_OK);
    wait_ops(f, base + 3); /* tenant-a's share, at the gate; its fourth waits */
    assert_int_equal(sbx_broker_submit_async(b, r[4], &cb), SBX_OK);
    for (int i = 0; i < 10000 && dones_count(&d) < 1; i++)
        sleep_ms(1);
    int answered_before_the_gate = dones_count(&d);
    sbx_broker_load load = {0};
    assert_true(sbx_broker_get_load(b, &load));
    sbx_fake_set_gate(f, false);
    wait_dones(&d, 5);
    assert_int_equal(answered_before_the_gate, 1); /* the cancel, while the others were held */
    assert_int_equal(load.queued, 1);              /* tenant-a's fourth command still waits */
    dones_free(&d);
    for (int i = 0; i < 5; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
}

static void test_brokers_embedded_async_calls_back_before_returning(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    dones d;
    dones_init(&d);
    sbx_broker_async cb = {.on_output = on_chunk, .on_done = on_done, .arg = &d};
    sbx_request *r = fx_shell("default", "echo inline");
    assert_int_equal(sbx_broker_submit_async(b, r, &cb), SBX_OK);
    assert_int_equal(dones_count(&d), 1);
    assert_string_equal(fx_stdout(d.c[0]), "inline\n");
    assert_string_equal(d.out.text, "inline\n");
    dones_free(&d);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* Blocking callers run their own requests on their own threads, yet never more at once than
 * the broker's threads. */
static void test_brokers_thread_blocking_callers_stay_within_the_slots(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 2, 16, 16);
    sbx_fake_set_gate(f, true);
    enum { N = 8 };
    blocker bl[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        bl[i] = (blocker){b, fx_shell("default", "echo mine"), NULL}; /* own sessions */
        pthread_create(&th[i], NULL, block_on_own_request, &bl[i]);
    }
    wait_ops(f, base + 2); /* both slots are taken at the gate */
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_non_null(bl[i].c);
        assert_string_equal(fx_stdout(bl[i].c), "mine\n");
        assert_string_equal(bl[i].c->task_id, bl[i].r->task_id);
        sbx_completion_free(bl[i].c);
        sbx_request_free(bl[i].r);
    }
    assert_int_equal(sbx_fake_ops(f), base + N);
    assert_true(sbx_fake_max_parallel(f) <= 2);
    sbx_broker_free(b);
}

static void test_brokers_describe_lists_the_engine_profiles(void **state)
{
    env *t = *state;
    for (int flavor = 0; flavor < 2; flavor++) {
        sbx_broker *b = open_flavor(t, flavor == 0 ? "embedded" : "thread");
        Sbx__V1__DescribeResponse *d = NULL;
        assert_int_equal(sbx_broker_describe(b, &d, NULL), SBX_OK);
        assert_int_equal(d->n_profiles, 2);
        assert_string_equal(d->profiles[0]->name, "default");
        assert_string_equal(d->profiles[1]->name, "other");
        assert_string_equal(d->profiles[0]->provider, "fake");
        sbx_message_free(&d->base);
        sbx_broker_free(b);
    }
}

/* Threads of this process (/proc/self/task). */
static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The thread count once it is want, or after 5 s: a joined thread can still be listed under
 * /proc/self/task for a moment (pthread_join returns at its exit's futex wake, before the kernel
 * has released it; seen once in CI). */
static int thread_count_settled(int want)
{
    int n = thread_count();
    for (int i = 0; i < 500 && n != want; i++) {
        usleep(10000);
        n = thread_count();
    }
    return n;
}

/* Executors start on demand: open makes none (the CLI, which only waits, paid for a thread it
 * never used), a blocking submit runs on its caller's thread and makes none, and parallel work
 * grows the pool only to what runs at once (here 3 of 16). */
static void test_brokers_thread_starts_executors_on_demand(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base_ops = sbx_fake_ops(f);
    int base = thread_count();
    sbx_broker *b = thread_broker(t, 16, 16, 16);
    assert_int_equal(thread_count(), base);
    sbx_request *one = fx_shell("default", "echo inline");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, one, SBX_WAIT_FOREVER, NULL, &c), SBX_OK);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
    sbx_request_free(one);
    assert_int_equal(thread_count(), base);
    sbx_fake_set_gate(f, true);
    sbx_request *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = fx_shell("default", "echo p"); /* three fresh sessions, none waited for */
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
    }
    wait_ops(f, base_ops + 1 + 3); /* all three inside the provider at once */
    assert_int_equal(thread_count(), base + 3);
    sbx_fake_set_gate(f, false);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c),
            SBX_OK);
        sbx_completion_free(c);
        sbx_request_free(r[i]);
    }
    sbx_broker_free(b);
    assert_int_equal(thread_count_settled(base), base);
}

/* No executor thread can be made (here: no address space left for its stack): a submit nobody
 * waits for is answered RESOURCE_EXHAUSTED at once, saying why, instead of being queued with
 * nobody to run it. In a child process, whose address space the limit shrinks. Not under ASan,
 * which reserves terabytes of address space at start. */
static void test_brokers_thread_without_an_executor_answers_at_once(void **state)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)state;
    skip();
#else
    env *t = *state;
    warm(t, NULL);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
    sbx_request *r = fx_shell("default", "echo nobody-runs-me");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        FILE *f = fopen("/proc/self/status", "r");
        unsigned long vm_kb = 0;
        char line[256];
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (sscanf(line, "VmSize: %lu kB", &vm_kb) == 1)
                break;
        if (f != NULL)
            fclose(f);
        struct rlimit rl = {(vm_kb + 1024) * 1024, (vm_kb + 1024) * 1024};
        /* Stacks bigger than any in glibc's cache of freed thread stacks, which would
         * otherwise serve the thread without a new mapping. */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, (size_t)64 << 20);
        if (vm_kb == 0 || pthread_setattr_default_np(&attr) != 0 || setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(2);
        sbx_completion *c = NULL;
        sbx_status st = sbx_broker_submit(b, r, 0, NULL, &c);
        bool ok = st == SBX_E_RESOURCE_EXHAUSTED && c != NULL &&
                  c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED &&
                  strstr(c->error, "cannot start an executor thread") != NULL;
        if (!ok)
            fprintf(stderr, "submit: status %d, completion: %s\n", (int)st,
                    c != NULL && c->error != NULL ? c->error : "(none)");
        _exit(ok ? 0 : 1);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
    sbx_request_free(r);
    sbx_broker_free(b);
#endif
}

/* ---- a finite wait across the submitter's unlock ----------------------------------------- */

/* This binary's syscall(2): the real one, then, after a FUTEX_WAKE made on a thread armed for
 * it, a stop until released. A submitter wakes a parked executor between releasing the store's
 * lock and taking it back, so the stop holds it exactly there. */
static __thread bool hold_after_wake;
static bool held_at_wake;
static sem_t signal_held, signal_released;

long syscall(long number, ...)
{
    static long (*real)(long, ...);
    if (real == NULL)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    long r = real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (hold_after_wake && number == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAKE) {
        hold_after_wake = false;
        held_at_wake = true;
        sem_post(&signal_held);
        while (sem_wait(&signal_released) != 0) {
        }
    }
    return r;
}

typedef struct held_submit {
    sbx_broker *b;
    sbx_request *r;
    sbx_status st;
    sbx_completion *c;
} held_submit;

static void *held_submit_main(void *arg)
{
    held_submit *h = arg;
    hold_after_wake = true;
    h->st = sbx_broker_submit(h->b, h->r, 0, NULL, &h->c);
    if (hold_after_wake) { /* no executor was parked: the test fails below, instead of hanging */
        hold_after_wake = false;
        sem_post(&signal_held);
    }
    return NULL;
}

/* A submit with a finite wait keeps its task alive across the moment it releases the store's
 * lock to wake an executor: meanwhile the executor may run the task to its end and a discard
 * (or the completion LRU) free it, and the submitter then waited on freed memory (a use after
 * free, then a double free of the task and its completion). */
static void test_brokers_thread_finite_wait_keeps_its_task_across_the_wake(void **state)
{
    env *t = *state;
    warm(t, NULL);
    sbx_broker *b = thread_broker(t, 2, 8, 1);
    /* A first task starts the executor, which then parks: the held submit has one to wake. */
    sbx_request *first = fx_shell("default", "echo first");
    sbx_completion *fc = NULL;
    assert_int_equal(sbx_broker_submit(b, first, 0, NULL, &fc), SBX_OK);
    for (int i = 0; i < 60000 && fc == NULL; i++) {
        sleep_ms(1);
        sbx_broker_result(b, sbx_request_subject(first), first->task_id, 0, &fc);
    }
    assert_non_null(fc);
    sbx_completion_free(fc);
    sbx_request_free(first);
    sleep_ms(50);
    held_at_wake = false;
    assert_int_equal(sem_init(&signal_held, 0, 0), 0);
    assert_int_equal(sem_init(&signal_released, 0, 0), 0);
    held_submit h = {b, fx_shell("default", "echo held"), SBX_OK, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, held_submit_main, &h), 0);
    while (sem_wait(&signal_held) != 0) {
    }
    /* the submitter is stopped outside the lock: the executor runs the task to its end */
    sbx_broker_load load = {0};
    for (int i = 0; i < 60000; i++) {
        assert_true(sbx_broker_get_load(b, &load));
        if (load.running == 0 && load.queued == 0)
            break;
        sleep_ms(1);
    }
    sbx_broker_discard(b, sbx_request_subject(h.r), h.r->task_id);
    sem_post(&signal_released);
    pthread_join(th, NULL);
    assert_true(held_at_wake);
    assert_int_equal(load.running + load.queued, 0);
    assert_int_equal(h.st, SBX_OK);
    assert_non_null(h.c);
    assert_int_equal(h.c->status, OK_STATUS);
    sbx_completion_free(h.c);
    sbx_request_free(h.r);
    sbx_broker_free(b);
    sem_destroy(&signal_held);
    sem_destroy(&signal_released);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, fx_env_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_brokers_embedded_runs_inline_and_keeps_result),
        T(test_brokers_thread_promotes_after_wait_and_result_later),
        T(test_brokers_thread_full_queue_is_resource_exhausted),
        T(test_brokers_thread_close_drains_in_flight_work),
        T(test_brokers_thread_dedups_task_id),
        T(test_brokers_embedded_other_principal_reusing_id_is_another_task),
        T(test_brokers_thread_other_principal_reusing_id_is_another_task),
        T(test_brokers_embedded_same_principal_other_request_is_refused),
        T(test_brokers_thread_same_principal_other_request_is_refused),
        T(test_brokers_thread_reused_id_refused_while_first_is_pending),
        T(test_brokers_thread_lru_evicts_oldest_completion),
        T(test_brokers_thread_lru_flood_of_one_principal_evicts_its_own),
        T(test_brokers_thread_lru_of_many_principals_keeps_the_newest),
        T(test_brokers_thread_lru_bytes_of_one_principal_evict_its_own),
        T(test_brokers_thread_lru_is_bounded_by_bytes),
        T(test_brokers_thread_finite_wait_keeps_its_task_across_the_wake),
        T(test_brokers_thread_one_session_id_of_two_principals_runs_in_parallel),
        T(test_brokers_embedded_lru_is_broker_lru_size),
        T(test_brokers_thread_serializes_one_session),
        T(test_brokers_thread_runs_sessions_in_parallel),
        T(test_brokers_thread_starts_executors_on_demand),
        T(test_brokers_thread_without_an_executor_answers_at_once),
        T(test_brokers_discarded_task_result_is_unknown),
        T(test_brokers_open_by_flavor),
        T(test_brokers_open_without_config_is_a_default_thread_broker),
        T(test_brokers_thread_records_frames_that_replay_identically),
        T(test_brokers_hooks_stream_output_chunks),
        T(test_brokers_hooks_are_not_called_after_a_bounded_submit_returned),
        T(test_brokers_cancel_flag_of_a_bounded_submit_ends_the_task),
        T(test_brokers_cancel_hook_abandons_execution),
        T(test_brokers_embedded_cancelled_task_is_not_the_answer_to_its_retry),
        T(test_brokers_thread_async_streams_output_and_calls_back),
        T(test_brokers_thread_async_retry_joins_and_done_task_answers_at_once),
        T(test_brokers_thread_async_run_here_runs_on_the_callers_thread_when_free),
        T(test_brokers_thread_async_joiner_of_a_blocking_owners_task),
        T(test_brokers_thread_async_gone_joiners_are_answered_at_the_next_join),
        T(test_brokers_thread_a_cancelled_task_is_not_the_answer_to_its_retry),
        T(test_brokers_thread_async_full_queue_and_cancelled_task),
        T(test_brokers_thread_a_live_joiner_inherits_a_cancelled_task),
        T(test_brokers_thread_one_principal_cannot_fill_the_queue),
        T(test_brokers_thread_grants_slots_round_robin_by_principal),
        T(test_brokers_thread_one_principal_cannot_hold_every_slot),
        T(test_brokers_thread_principal_threads_above_threads_is_refused),
        T(test_brokers_thread_cancel_passes_its_principals_share),
        T(test_brokers_embedded_async_calls_back_before_returning),
        T(test_brokers_thread_blocking_callers_stay_within_the_slots),
        T(test_brokers_describe_lists_the_engine_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
