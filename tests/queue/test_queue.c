/* test_queue.c - the queue transport end to end: a real nats-server with JetStream, three real
 * sbx-worker processes consuming it, queue brokers in this process. Sessions follow their
 * node, retries join the first completion fleet-wide, reused task ids are refused or kept
 * apart by principal, the workers' callers table applies, a node that is down is reported as
 * unavailable naming it, output streams, and result() works from another connection; a worker
 * whose NATS client hangs in its close still exits on SIGTERM; a call no server takes ends
 * within its wait.
 *
 * usage: test_queue_fleet PATH/sbx-worker PATH/hang_nats_close.so
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
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "queue/fleet.h"
#include "sbx/broker.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define FAILED SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED
/* Sessions and executions of the routing test (the 20 x 20). */
#define SESSIONS 20
#define EXECS 20
/* Nothing here should take long; a hang is a failure, not a wait. */
#define WAIT_MS 120000

static const char *worker_bin;
static const char *hang_close_so; /* natsConnection_Close never returns (LD_PRELOAD) */
static fleet F;
static sbx_broker *B;

static sbx_request *request(const char *profile, const char *subject)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, subject);
    return r;
}

static sbx_request *shell(const char *profile, const char *subject, const char *line)
{
    sbx_request *r = request(profile, subject);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

static sbx_completion *submit(sbx_broker *b, const sbx_request *r, const sbx_engine_hooks *h)
{
    sbx_completion *c = NULL;
    sbx_broker_submit(b, r, WAIT_MS, h, &c);
    assert_non_null(c);
    return c;
}

static const char *out(const sbx_completion *c)
{
    static __thread char buf[4096];
    size_t n = c->result != NULL ? c->result->stdout.len : 0;
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    if (n > 0)
        memcpy(buf, c->result->stdout.data, n);
    buf[n] = '\0';
    return buf;
}

static int group_setup(void **state)
{
    (void)state;
    fleet_init(&F, worker_bin);
    fleet_start_nats(&F, 1);
    for (int i = 0; i < 3; i++)
        fleet_start_worker(&F, i);
    B = fleet_broker(&F, NULL);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sbx_broker_free(B);
    fleet_stop(&F);
    return 0;
}

static void test_queue_one_shot_runs_on_a_worker_delivered_once(void **state)
{
    (void)state;
    sbx_request *r = shell("oneshot", "alice", "echo through the queue");
    sbx_completion *c = submit(B, r, NULL);
    assert_int_equal(c->status, OK_STATUS);
    assert_string_equal(out(c), "through the queue\n");
    assert_int_equal(c->deliveries, 1);
    assert_string_equal(sbx_broker_flavor(B), "queue");
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* ---- 20 sessions x 20 executions: each sees the file written by its first ---------------- */

typedef struct session_run {
    int index;
    int seen;  /* executions that saw the file */
    int moved; /* completions naming another node than the first */
    char node[64];
} session_run;

static void *session_main(void *arg)
{
    session_run *s = arg;
    char content[64];
    snprintf(content, sizeof content, "written by the first exec of session %d", s->index);
    sbx_request *w = request("fake", "alice");
    w->write_file = malloc(sizeof(*w->write_file));
    sbx__v1__write_file__init(w->write_file);
    sbx_set_string(&w->write_file->path, "/work/first.txt");
    sbx_set_bytes(&w->write_file->content, content, strlen(content));
    w->write_file->mkdirs = 1;
    w->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    sbx_completion *c = NULL;
    sbx_broker_submit(B, w, WAIT_MS, NULL, &c);
    sbx_request_free(w);
    if (c == NULL || c->status != OK_STATUS || c->session == NULL) {
        sbx_completion_free(c);
        return NULL;
    }
    snprintf(s->node, sizeof s->node, "%s", c->session->node);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    for (int i = 1; i < EXECS; i++) {
        sbx_request *r = request(NULL, "alice");
        r->session = (sbx_session_handle *)sbx_message_copy(&h->base);
        r->read_file = malloc(sizeof(*r->read_file));
        sbx__v1__read_file__init(r->read_file);
        sbx_set_string(&r->read_file->path, "/work/first.txt");
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_READ_FILE;
        sbx_completion *rc = NULL;
        sbx_broker_submit(B, r, WAIT_MS, NULL, &rc);
        sbx_request_free(r);
        if (rc != NULL && rc->status == OK_STATUS && rc->result != NULL &&
            rc->result->n_files == 1 && rc->result->files[0]->content.len == strlen(content) &&
            memcmp(rc->result->files[0]->content.data, content, strlen(content)) == 0)
            s->seen++;
        if (rc != NULL && rc->session != NULL && strcmp(rc->session->node, s->node) != 0)
            s->moved++;
        if (rc != NULL && rc->session != NULL) {
            sbx_message_free(&h->base);
            h = (sbx_session_handle *)sbx_message_copy(&rc->session->base);
        }
        sbx_completion_free(rc);
    }
    sbx_message_free(&h->base);
    return NULL;
}

static void test_queue_20_sessions_x_20_execs_each_see_the_first_exec_file(void **state)
{
    (void)state;
    session_run runs[SESSIONS];
    pthread_t tids[SESSIONS];
    for (int i = 0; i < SESSIONS; i++) {
        memset(&runs[i], 0, sizeof runs[i]);
        runs[i].index = i;
        assert_int_equal(pthread_create(&tids[i], NULL, session_main, &runs[i]), 0);
    }
    int nodes_used[3] = {0, 0, 0};
    for (int i = 0; i < SESSIONS; i++) {
        pthread_join(tids[i], NULL);
        assert_int_equal(runs[i].seen, EXECS - 1);
        assert_int_equal(runs[i].moved, 0);
        for (int n = 0; n < 3; n++)
            if (strcmp(runs[i].node, F.node[n]) == 0)
                nodes_used[n]++;
    }
    printf("queue: %d sessions x %d execs, sessions per node: %d %d %d\n", SESSIONS, EXECS,
           nodes_used[0], nodes_used[1], nodes_used[2]);
    assert_int_equal(nodes_used[0] + nodes_used[1] + nodes_used[2], SESSIONS);
}

/* ---- idempotency, fleet-wide, by principal ------------------------------------------------ */

static void test_queue_retry_from_another_connection_gets_the_first_completion(void **state)
{
    (void)state;
    sbx_request *r = shell("oneshot", "tenant-a", "echo once");
    sbx_completion *c1 = submit(B, r, NULL);
    assert_int_equal(c1->status, OK_STATUS);
    sbx_broker *other = fleet_broker(&F, NULL);
    sbx_completion *c2 = submit(other, r, NULL);
    /* Byte for byte the first completion (a re-run would differ in its timestamps). */
    size_t n1 = 0, n2 = 0;
    uint8_t *p1 = sbx_message_pack(&c1->base, &n1), *p2 = sbx_message_pack(&c2->base, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(p1, p2, n1);
    /* result() from yet another connection reads the same completion. */
    sbx_completion *c3 = NULL;
    assert_int_equal(sbx_broker_result(other, "tenant-a", r->task_id, WAIT_MS, &c3), SBX_OK);
    assert_non_null(c3);
    assert_string_equal(out(c3), "once\n");
    free(p1);
    free(p2);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
    sbx_broker_free(other);
    sbx_request_free(r);
}

static void test_queue_another_principal_reusing_a_task_id_gets_its_own_task(void **state)
{
    (void)state;
    sbx_request *a = shell("oneshot", "tenant-a", "echo tenant-a secret");
    sbx_completion *ca = submit(B, a, NULL);
    assert_string_equal(out(ca), "tenant-a secret\n");
    sbx_request *b = shell("oneshot", "tenant-b", "echo tenant-b own");
    sbx_set_string(&b->task_id, a->task_id);
    sbx_completion *cb = submit(B, b, NULL);
    assert_int_equal(cb->status, OK_STATUS);
    assert_string_equal(out(cb), "tenant-b own\n");
    /* And tenant-b cannot read tenant-a's completion by its id. */
    sbx_completion *cr = NULL;
    assert_int_equal(sbx_broker_result(B, "tenant-b", a->task_id, WAIT_MS, &cr), SBX_OK);
    assert_string_equal(out(cr), "tenant-b own\n");
    sbx_completion_free(cr);
    cr = NULL;
    assert_int_equal(sbx_broker_result(B, "tenant-c", a->task_id, 1000, &cr),
                     SBX_E_INVALID_ARGUMENT);
    assert_null(cr);
    sbx_completion_free(ca);
    sbx_completion_free(cb);
    sbx_request_free(a);
    sbx_request_free(b);
}

static void test_queue_same_principal_other_request_same_id_is_refused(void **state)
{
    (void)state;
    sbx_request *a = shell("oneshot", "tenant-a", "echo first body");
    sbx_completion *ca = submit(B, a, NULL);
    assert_int_equal(ca->status, OK_STATUS);
    sbx_request *b = shell("oneshot", "tenant-a", "echo other body");
    sbx_set_string(&b->task_id, a->task_id);
    sbx_completion *cb = submit(B, b, NULL);
    assert_int_equal(cb->status, FAILED);
    assert_int_equal(cb->error_code, SBX_E_INVALID_ARGUMENT);
    assert_null(cb->result);
    /* Another profile under the same id is another request too. */
    sbx_request *p = shell("fake", "tenant-a", "echo first body");
    sbx_set_string(&p->task_id, a->task_id);
    sbx_completion *cp = submit(B, p, NULL);
    assert_int_equal(cp->error_code, SBX_E_INVALID_ARGUMENT);
    sbx_completion_free(ca);
    sbx_completion_free(cb);
    sbx_completion_free(cp);
    sbx_request_free(a);
    sbx_request_free(b);
    sbx_request_free(p);
}

/* ---- the workers' callers table ----------------------------------------------------------- */

static void test_queue_message_without_a_valid_token_is_unauthenticated(void **state)
{
    (void)state;
    setenv("SBX_TEST_QUEUE_WRONG", "not-the-token", 1);
    sbx_broker *wrong = fleet_broker(&F, "SBX_TEST_QUEUE_WRONG");
    sbx_request *r = shell("oneshot", "alice", "echo never");
    sbx_completion *c = submit(wrong, r, NULL);
    assert_int_equal(c->error_code, SBX_E_UNAUTHENTICATED);
    assert_null(c->result);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(wrong);
}

static void test_queue_caller_may_not_assert_an_unlisted_principal(void **state)
{
    (void)state;
    sbx_request *r = shell("oneshot", "mallory", "echo never");
    sbx_completion *c = submit(B, r, NULL);
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(c->error, "mallory"));
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* ... nor choose the identity a provider acts as (credentials, groups): refused. */
static void test_queue_caller_held_to_subjects_may_not_choose_the_identity(void **state)
{
    (void)state;
    sbx_request *r = shell("oneshot", "alice", "echo never");
    sbx_add_string(&r->principal->n_groups, &r->principal->groups, "system:masters");
    sbx_completion *c = submit(B, r, NULL);
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(c->error, "credentials or groups"));
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* ---- streaming and pending results -------------------------------------------------------- */

typedef struct collected {
    pthread_mutex_t mu;
    size_t bytes;
    useconds_t delay; /* a slow consumer: each chunk takes this long */
} collected;

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    (void)stream;
    (void)data;
    (void)offset;
    collected *c = arg;
    if (c->delay > 0)
        usleep(c->delay);
    pthread_mutex_lock(&c->mu);
    c->bytes += len;
    pthread_mutex_unlock(&c->mu);
}

/* Streams `yes lines` to a consumer taking delay_us per chunk; every byte arrives before the
 * call returns. */
static void stream_yes(int lines, useconds_t delay_us)
{
    collected col = {.mu = PTHREAD_MUTEX_INITIALIZER, .delay = delay_us};
    sbx_engine_hooks hooks = {.on_output = on_output, .on_output_arg = &col};
    char line[32];
    snprintf(line, sizeof line, "yes %d", lines);
    sbx_request *r = shell("oneshot", "alice", line);
    sbx_completion *c = submit(B, r, &hooks);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->stdout.len, 2 * lines);
    assert_int_equal(col.bytes, 2 * lines);
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* Core NATS is at most once, but on loopback nothing is lost: every byte arrived. */
static void test_queue_streams_output_chunks_then_the_completion(void **state)
{
    (void)state;
    stream_yes(5000, 0);
}

/* A caller slower than the worker still gets every chunk before the call returns: the chunks
 * and the completion arrive on two subscriptions, each with its own delivery queue, and the
 * completion overtook the chunks still queued (CI: 5,788 of 10,000 bytes; here 1,000 chunks
 * at 1 ms each, so the completion is always first). */
static void test_queue_slow_output_consumer_gets_every_chunk(void **state)
{
    (void)state;
    stream_yes(1000, 1000);
}

/* ---- asynchronous submit: the completion and output reach the callbacks ----------------- */

typedef struct async_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    sbx_status st;
    sbx_completion *c;
    size_t bytes;
} async_done;

static void async_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                         uint64_t offset)
{
    (void)stream;
    (void)data;
    (void)offset;
    async_done *d = arg;
    pthread_mutex_lock(&d->mu);
    d->bytes += len;
    pthread_mutex_unlock(&d->mu);
}

static void async_on_done(void *arg, sbx_status st, sbx_completion *c)
{
    async_done *d = arg;
    pthread_mutex_lock(&d->mu);
    d->calls++;
    d->st = st;
    d->c = c;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void test_queue_async_submit_hands_output_and_completion_to_callbacks(void **state)
{
    (void)state;
    async_done d = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    sbx_broker_async cb = {.on_output = async_output, .on_done = async_on_done, .arg = &d};
    sbx_request *r = shell("oneshot", "alice", "yes 500");
    assert_int_equal(sbx_broker_submit_async(B, r, &cb), SBX_OK);
    pthread_mutex_lock(&d.mu);
    while (d.calls == 0)
        pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    assert_int_equal(d.calls, 1);
    assert_non_null(d.c);
    assert_int_equal(d.c->status, OK_STATUS);
    assert_int_equal(d.c->result->stdout.len, 1000);
    assert_int_equal(d.bytes, 1000);
    sbx_completion_free(d.c);
    sbx_request_free(r);

    /* The queue reaches no worker in particular: describe says so instead of guessing. */
    Sbx__V1__DescribeResponse *desc = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_describe(B, &desc, &err), SBX_E_CAPABILITY);
    assert_null(desc);
    assert_non_null(strstr(err.message, "ask a worker"));
}

static void test_queue_pending_task_is_collected_later_with_result(void **state)
{
    (void)state;
    sbx_request *r = shell("slow", "alice", "echo later");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(B, r, 0, NULL, &c), SBX_OK);
    assert_null(c); /* pending */
    sbx_broker *other = fleet_broker(&F, NULL);
    assert_int_equal(sbx_broker_result(other, "alice", r->task_id, WAIT_MS, &c), SBX_OK);
    assert_non_null(c);
    assert_string_equal(out(c), "later\n");
    sbx_completion_free(c);
    sbx_broker_free(other);
    sbx_request_free(r);
}

static void *cancel_soon(void *arg)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 300 * 1000000};
    nanosleep(&ts, NULL);
    *(volatile int *)arg = 1;
    return NULL;
}

static void test_queue_cancellation_ends_the_call(void **state)
{
    (void)state;
    volatile int cancel = 0;
    sbx_engine_hooks hooks = {.cancel = &cancel};
    sbx_request *r = shell("sleepy", "alice", "echo slow");
    pthread_t t;
    pthread_create(&t, NULL, cancel_soon, (void *)&cancel);
    sbx_completion *c = submit(B, r, &hooks);
    pthread_join(t, NULL);
    assert_int_equal(c->error_code, SBX_E_TIMEOUT);
    assert_non_null(strstr(c->error, "cancelled"));
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* ---- a node that is down ------------------------------------------------------------------ */

static void test_queue_session_of_a_stopped_node_ends_unavailable_naming_it(void **state)
{
    (void)state;
    sbx_request *w = shell("fake", "alice", "echo hi");
    sbx_completion *c1 = submit(B, w, NULL);
    assert_int_equal(c1->status, OK_STATUS);
    int owner = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(c1->session->node, F.node[i]) == 0)
            owner = i;
    assert_true(owner >= 0);
    fleet_kill_worker(&F, owner, SIGKILL);
    sbx_request *r = shell(NULL, "alice", "echo again");
    r->session = (sbx_session_handle *)sbx_message_copy(&c1->session->base);
    sbx_completion *c2 = submit(B, r, NULL);
    assert_int_equal(c2->status, FAILED);
    assert_int_equal(c2->error_code, SBX_E_BROKER);
    assert_string_equal(c2->node, F.node[owner]);
    /* Asked explicitly, any other node starts the session over. */
    sbx_request *m = shell(NULL, "alice", "echo moved");
    m->session = (sbx_session_handle *)sbx_message_copy(&c1->session->base);
    m->recreate_elsewhere = 1;
    sbx_completion *c3 = submit(B, m, NULL);
    assert_int_equal(c3->status, OK_STATUS);
    assert_string_equal(out(c3), "moved\n");
    assert_string_not_equal(c3->session->node, F.node[owner]);
    fleet_start_worker(&F, owner);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
    sbx_request_free(w);
    sbx_request_free(r);
    sbx_request_free(m);
}

/* A worker's shutdown does not wait forever on its NATS client: libnats 3.4 once hung in
 * natsConnection_Close after the drain, and the worker never exited on SIGTERM. Here a worker
 * whose natsConnection_Close never returns (preloaded) exits 0 within the bound, saying so. */
static void test_queue_worker_exits_on_sigterm_when_the_nats_close_hangs(void **state)
{
    (void)state;
    const int slot = 3;
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan != NULL ? strdup(asan) : NULL;
    char opts[512];
    /* ASan checks that its runtime is the first library loaded; the preload comes first */
    snprintf(opts, sizeof opts, "%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    setenv("LD_PRELOAD", hang_close_so, 1);
    fleet_start_worker(&F, slot);
    unsetenv("LD_PRELOAD");
    if (saved != NULL)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    pid_t pid = F.worker_pid[slot];
    assert_int_equal(kill(pid, SIGTERM), 0);
    int status = 0, waited = 0;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && waited < 30000) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        waited += 50;
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    F.worker_pid[slot] = 0;
    char log[600], line[512];
    snprintf(log, sizeof log, "%s/worker-%d.log", F.dir, slot);
    FILE *f = fopen(log, "r");
    bool said = false;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        said = said || strstr(line, "NATS connection did not close within") != NULL;
    if (f != NULL)
        fclose(f);
    if (got != pid)
        fail_msg("the worker did not exit within 30 s of SIGTERM (killed)");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_true(said);
}

/* ---- servers that do not take the task --------------------------------------------------- */

/* A fleet whose servers answer every publish with "no responders" (here its stream is deleted
 * under a connected broker; seen for a few tasks after a NATS server was killed in a cluster)
 * fails a call once the caller's wait is spent (at least the enqueue's 5 s), not 45 s later,
 * naming the server it reached and the way out. Before, a call with a 1 s wait blocked 45 s. */
static void test_queue_submit_gives_up_within_its_wait_when_no_server_takes_it(void **state)
{
    (void)state;
    static fleet G; /* NATS alone, no worker: F's fleet keeps its stream */
    fleet_init(&G, worker_bin);
    fleet_start_nats(&G, 1);
    sbx_broker *b = fleet_broker(&G, NULL);
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsConnection_ConnectTo(&nc, G.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    assert_int_equal(js_DeleteStream(js, "sbx_tasks", NULL, &jerr), NATS_OK);
    sbx_request *r = shell("fake", "alice", "echo never");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sbx_completion *c = NULL;
    sbx_broker_submit(b, r, 1000, NULL, &c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_non_null(c);
    assert_int_equal(c->status, FAILED);
    assert_int_equal(c->error_code, SBX_E_BROKER);
    if (strstr(c->error, "connected to nats://127.0.0.1:") == NULL ||
        strstr(c->error, "same task_id") == NULL)
        fail_msg("the error does not name the server and the retry: %s", c->error);
    if (took > 30)
        fail_msg("the call took %.1f s; its wait was 1 s", took);
    sbx_completion_free(c);
    sbx_request_free(r);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    sbx_broker_free(b);
    fleet_stop(&G);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s PATH/sbx-worker PATH/hang_nats_close.so\n", argv[0]);
        return 2;
    }
    worker_bin = argv[1];
    hang_close_so = argv[2];
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_one_shot_runs_on_a_worker_delivered_once),
        cmocka_unit_test(test_queue_20_sessions_x_20_execs_each_see_the_first_exec_file),
        cmocka_unit_test(test_queue_retry_from_another_connection_gets_the_first_completion),
        cmocka_unit_test(test_queue_another_principal_reusing_a_task_id_gets_its_own_task),
        cmocka_unit_test(test_queue_same_principal_other_request_same_id_is_refused),
        cmocka_unit_test(test_queue_message_without_a_valid_token_is_unauthenticated),
        cmocka_unit_test(test_queue_caller_may_not_assert_an_unlisted_principal),
        cmocka_unit_test(test_queue_caller_held_to_subjects_may_not_choose_the_identity),
        cmocka_unit_test(test_queue_streams_output_chunks_then_the_completion),
        cmocka_unit_test(test_queue_slow_output_consumer_gets_every_chunk),
        cmocka_unit_test(test_queue_async_submit_hands_output_and_completion_to_callbacks),
        cmocka_unit_test(test_queue_pending_task_is_collected_later_with_result),
        cmocka_unit_test(test_queue_cancellation_ends_the_call),
        cmocka_unit_test(test_queue_session_of_a_stopped_node_ends_unavailable_naming_it),
        cmocka_unit_test(test_queue_worker_exits_on_sigterm_when_the_nats_close_hangs),
        cmocka_unit_test(test_queue_submit_gives_up_within_its_wait_when_no_server_takes_it),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
