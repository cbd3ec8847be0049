/* test_worker.c - sbx-worker over the wire, in-process: the engine (fake provider) behind the
 * thread broker behind the worker's HTTP/2 event loop, called through the remote broker (libcurl)
 * and raw sockets. One behaviour per test. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "providers/fake/fake.h"
#include "worker/worker_fixture.h"
#include "support/switches.h"

static sbx_completion *run(sbx_broker *b, sbx_request *req, const sbx_engine_hooks *hooks)
{
    sbx_completion *c = NULL;
    sbx_status st = sbx_broker_submit(b, req, 180000, hooks, &c);
    assert_int_equal(st, SBX_OK);
    assert_non_null(c);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "completion %s: %s: %s\n", c->task_id,
                sbx_status_name((sbx_status)c->error_code), c->error);
    return c;
}

static void test_worker_execute_returns_engine_completion(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("echo hello worker", NULL);
    sbx_completion *c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_string_equal(c->task_id, req->task_id);
    assert_non_null(c->result);
    assert_int_equal(c->result->stdout.len, strlen("hello worker\n"));
    assert_memory_equal(c->result->stdout.data, "hello worker\n", c->result->stdout.len);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_failed_completion_keeps_its_code(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("echo x", NULL);
    sbx_set_string(&req->profile, "no-such-profile");
    sbx_completion *c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX_E_CONFIG); /* the engine's code, not a transport one */
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

typedef struct collected {
    size_t bytes, chunks;
} collected;

static void collect_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                           uint64_t offset)
{
    (void)data;
    collected *col = arg;
    if (stream == SBX__V1__STREAM__STREAM_STDOUT) {
        assert_int_equal(offset, col->bytes); /* in order, nothing lost */
        col->bytes += len;
    }
    col->chunks++;
}

static void test_worker_execute_stream_delivers_output_then_completion(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    /* 200,000 lines "y\n": 400 KB streamed through HTTP/2 flow control */
    sbx_request *req = fixture_command("yes 200000", NULL);
    collected col = {0};
    sbx_engine_hooks hooks = {.on_output = collect_output, .on_output_arg = &col};
    sbx_completion *c = run(b, req, &hooks);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_true(col.chunks >= 1);
    assert_int_equal(col.bytes, 400000);
    assert_int_equal(c->result->stdout.len, 400000);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_same_task_id_runs_once(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    /* two clients = two connections, so the client cannot be the one deduplicating */
    sbx_broker *b1 = fixture_client(&f, NULL, NULL, NULL);
    sbx_broker *b2 = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("sleep 300; echo once", NULL);
    sbx_completion *first = NULL, *second = NULL;
    assert_int_equal(sbx_broker_submit(b1, req, 0, NULL, &first), SBX_OK);
    assert_null(first);
    usleep(100 * 1000); /* the first is in flight: the second joins it */
    second = run(b2, req, NULL);
    assert_int_equal(sbx_broker_result(b1, sbx_request_subject(req), req->task_id, 60000, &first),
                     SBX_OK);
    assert_non_null(first);
    sbx_completion *third = run(b2, req, NULL); /* after it finished: the stored one */
    sbx_fake *fake = sbx_fake_get("fake");
    assert_non_null(fake);
    assert_int_equal(sbx_fake_ops(fake), 1);
    assert_memory_equal(second->result->stdout.data, "once\n", 5);
    assert_memory_equal(third->result->stdout.data, "once\n", 5);
    sbx_completion_free(first);
    sbx_completion_free(second);
    sbx_completion_free(third);
    sbx_request_free(req);
    sbx_broker_free(b1);
    sbx_broker_free(b2);
    fixture_stop(&f);
}

/* Starts a 4 s call on slow_b, waits pause_ms, then runs a quick call on quick_b (another
 * client, or the same): the quick one must be answered while the slow one still runs. Checked
 * by order, not by time; the slow one then ends as it should. */
static void assert_quick_call_passes_a_slow_one(sbx_broker *slow_b, sbx_broker *quick_b,
                                                int pause_ms)
{
    sbx_request *slow = fixture_command("sleep 4000; echo slow", NULL);
    sbx_request *quick = fixture_command("echo quick", NULL);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(slow_b, slow, 0, NULL, &c), SBX_OK);
    assert_null(c);
    if (pause_ms > 0)
        usleep((useconds_t)pause_ms * 1000);
    sbx_completion *q = run(quick_b, quick, NULL);
    assert_memory_equal(q->result->stdout.data, "quick\n", 6);
    const char *subject = sbx_request_subject(slow);
    assert_int_equal(sbx_broker_result(slow_b, subject, slow->task_id, 0, &c), SBX_OK);
    assert_null(c); /* still running when the quick one was answered */
    assert_int_equal(sbx_broker_result(slow_b, subject, slow->task_id, 60000, &c), SBX_OK);
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_memory_equal(c->result->stdout.data, "slow\n", 5);
    sbx_completion_free(c);
    sbx_completion_free(q);
    sbx_request_free(slow);
    sbx_request_free(quick);
}

/* The loop thread runs the Executes it reads itself (worker/jobs.c). A slow one must not keep
 * the other connections waiting: once it outlasts WORKER_INLINE_COVER_US the standby serves
 * them, and the quick call on the second connection is answered while the slow one, started
 * first (and so run by the loop thread), still runs. Without the standby the quick call waited
 * for the slow one to end. */
static void test_worker_slow_call_does_not_hold_up_another_connection(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b1 = fixture_client(&f, NULL, NULL, NULL);
    sbx_broker *b2 = fixture_client(&f, NULL, NULL, NULL);
    assert_quick_call_passes_a_slow_one(b1, b2, 200); /* the slow call running by then */
    sbx_broker_free(b1);
    sbx_broker_free(b2);
    fixture_stop(&f);
}

/* A fresh client over h2c opens its connection with a probe the others wait for (libcurl
 * 7.88 cannot reuse a prior-knowledge connection: broker/remote.c). The probe is a Health Check
 * of its own: when it was the first request itself, a slow first call held every call after it
 * on the client back until it ended, here 4 s. */
static void test_remote_first_call_on_a_new_connection_does_not_hold_up_the_next(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    assert_quick_call_passes_a_slow_one(b, b, 0);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* The worker's dedup store is keyed by (principal subject, task_id): tenant-b sending tenant-a's
 * task_id with its own command runs its own command and never receives tenant-a's completion;
 * tenant-a reusing its id with another command is refused, never answered with the first. */
static void test_worker_task_id_is_scoped_by_principal_and_request(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *ba = fixture_client(&f, NULL, NULL, NULL);
    sbx_broker *bb = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *a = fixture_command("echo secret-of-a", "tenant-a");
    sbx_completion *ca = run(ba, a, NULL);
    assert_int_equal(ca->result->stdout.len, 12);
    assert_memory_equal(ca->result->stdout.data, "secret-of-a\n", 12);

    sbx_request *b = fixture_command("echo mine", "tenant-b");
    sbx_set_string(&b->task_id, a->task_id);
    sbx_completion *cb = run(bb, b, NULL);
    assert_int_equal(cb->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_int_equal(cb->result->stdout.len, 5);
    assert_memory_equal(cb->result->stdout.data, "mine\n", 5);

    sbx_request *again = fixture_command("echo other", "tenant-a");
    sbx_set_string(&again->task_id, a->task_id);
    sbx_completion *cc = run(bb, again, NULL); /* another connection: the worker decides */
    assert_int_equal(cc->error_code, SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(cc->error, "different request"));
    assert_true(cc->result == NULL || cc->result->stdout.len == 0);

    sbx_fake *fake = sbx_fake_get("fake");
    assert_non_null(fake);
    assert_int_equal(sbx_fake_ops(fake), 2);
    sbx_completion_free(ca);
    sbx_completion_free(cb);
    sbx_completion_free(cc);
    sbx_request_free(a);
    sbx_request_free(b);
    sbx_request_free(again);
    sbx_broker_free(ba);
    sbx_broker_free(bb);
    fixture_stop(&f);
}

static void test_worker_deadline_exceeded_cancels_the_execution(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("echo started; sleep 60000; echo never", NULL);
    req->deadline_ms = sbx_now_ms() + 500;
    sbx_completion *c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_int_equal(c->error_code, SBX_E_TIMEOUT);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f); /* returns only once the cancelled execution ended (no 60 s wait) */
}

static void test_worker_oversized_request_is_resource_exhausted(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.max_message_bytes = 1024};
    fixture_start(&f, &o);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    char big[4096];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "echo ", 5);
    sbx_request *req = fixture_command(big, NULL);
    sbx_completion *c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX_E_RESOURCE_EXHAUSTED);
    sbx_completion_free(c);
    sbx_request_free(req);
    /* and the worker still serves */
    req = fixture_command("echo ok", NULL);
    c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* Sends raw bytes on a fresh TCP connection and returns what came back (NUL-terminated). */
static size_t raw_exchange(int port, const void *data, size_t len, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    assert_int_equal(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == cap - 1)
            break;
    }
    out[got] = '\0';
    close(fd);
    return got;
}

static void assert_still_serves(worker_fixture *f)
{
    sbx_broker *b = fixture_client(f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("echo still here", NULL);
    sbx_completion *c = run(b, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
}

static void test_worker_http1_request_is_refused_and_serving_continues(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    static const char http1[] = "POST /sbx.v1.Execution/Execute HTTP/1.1\r\nHost: x\r\n"
                                "content-type: application/grpc\r\ncontent-length: 0\r\n\r\n";
    char out[1024];
    raw_exchange(f.port, http1, sizeof http1 - 1, out, sizeof out);
    assert_non_null(strstr(out, "HTTP/1.1 505"));
    assert_still_serves(&f);
    fixture_stop(&f);
}

static void test_worker_random_bytes_are_refused_and_serving_continues(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    unsigned char junk[4096];
    srand(12345);
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)rand();
    char out[1024];
    raw_exchange(f.port, junk, sizeof junk, out, sizeof out);
    /* a valid preface followed by garbage frames: a GOAWAY, then the connection closes */
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    unsigned char bad[sizeof preface - 1 + sizeof junk];
    memcpy(bad, preface, sizeof preface - 1);
    memcpy(bad + sizeof preface - 1, junk, sizeof junk);
    raw_exchange(f.port, bad, sizeof bad, out, sizeof out);
    assert_still_serves(&f);
    fixture_stop(&f);
}

static void test_worker_silent_connection_is_dropped_after_the_handshake_deadline(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 60};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0); /* the worker closed it (EOF, not our timeout) */
    close(fd);
    assert_still_serves(&f);
    fixture_stop(&f);
}

#define MANY_STREAMS 1000

static void test_worker_thousand_concurrent_streams_on_one_connection(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.threads = 16};
    fixture_start(&f, &o);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request **reqs = calloc(MANY_STREAMS, sizeof *reqs);
    for (int i = 0; i < MANY_STREAMS; i++) {
        char line[64];
        snprintf(line, sizeof line, "sleep 20; echo %d", i);
        reqs[i] = fixture_command(line, NULL);
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, reqs[i], 0, NULL, &c), SBX_OK);
        sbx_completion_free(c);
    }
    for (int i = 0; i < MANY_STREAMS; i++) {
        sbx_completion *c = NULL;
        assert_int_equal(
            sbx_broker_result(b, sbx_request_subject(reqs[i]), reqs[i]->task_id, 120000, &c),
            SBX_OK);
        assert_non_null(c);
        assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
        char want[32];
        int n = snprintf(want, sizeof want, "%d\n", i);
        assert_int_equal(c->result->stdout.len, (size_t)n);
        assert_memory_equal(c->result->stdout.data, want, (size_t)n);
        sbx_completion_free(c);
        sbx_request_free(reqs[i]);
    }
    free(reqs);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* Describe goes through the broker interface: the remote broker calls the worker's Describe. */
static void test_remote_describe_lists_the_worker_profiles(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    Sbx__V1__DescribeResponse *d = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_describe(b, &d, &err), SBX_OK);
    assert_non_null(d);
    assert_true(d->n_profiles >= 1);
    bool found = false;
    for (size_t i = 0; i < d->n_profiles; i++)
        if (strcmp(d->profiles[i]->name, "fake") == 0 &&
            strcmp(d->profiles[i]->provider, "fake") == 0)
            found = d->profiles[i]->capabilities != NULL;
    assert_true(found);
    sbx_message_free(&d->base);
    sbx_broker_free(b);
    fixture_stop(&f);
}

typedef struct async_done {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    sbx_completion *c[4];
    collected out;
} async_done;

static void remote_on_done(void *arg, sbx_status st, sbx_completion *c)
{
    async_done *d = arg;
    assert_int_equal(st, SBX_OK);
    pthread_mutex_lock(&d->mu);
    d->c[d->n++] = c;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void remote_on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                             uint64_t offset)
{
    async_done *d = arg;
    collect_output(&d->out, stream, data, len, offset);
}

/* The remote broker's asynchronous submit: the transfer thread streams output and calls back;
 * a second submit of the same task while it runs joins it. */
static void test_remote_async_submit_streams_and_calls_back(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    async_done d = {.n = 0};
    pthread_mutex_init(&d.mu, NULL);
    pthread_cond_init(&d.cv, NULL);
    sbx_request *req = fixture_command("yes 1000", NULL);
    sbx_broker_async cb = {.on_output = remote_on_output, .on_done = remote_on_done, .arg = &d};
    assert_int_equal(sbx_broker_submit_async(b, req, &cb), SBX_OK);
    sbx_broker_async join = {.on_done = remote_on_done, .arg = &d};
    assert_int_equal(sbx_broker_submit_async(b, req, &join), SBX_OK);
    pthread_mutex_lock(&d.mu);
    while (d.n < 2)
        pthread_cond_wait(&d.cv, &d.mu);
    pthread_mutex_unlock(&d.mu);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(d.c[i]->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
        assert_int_equal(d.c[i]->result->stdout.len, 2000);
        sbx_completion_free(d.c[i]);
    }
    assert_int_equal(d.out.bytes, 2000);
    pthread_mutex_destroy(&d.mu);
    pthread_cond_destroy(&d.cv);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* Context switches so far of this process's thread named name (-1: none such). */
static long thread_switches(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    long total = -1;
    struct dirent *e;
    char path[300], line[128];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool match = fgets(line, sizeof line, f) && strncmp(line, name, strlen(name)) == 0 &&
                     line[strlen(name)] == '\n';
        fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (match)
            total = sbx_test_switches_at(path);
    }
    closedir(d);
    return total;
}

/* An idle client's transfer thread (named sbx-remote) sleeps until a submit wakes it (it woke
 * every second), and the next submit is still answered. */
static void test_remote_idle_client_sleeps(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    for (int round = 0; round < 2; round++) {
        sbx_request *req = fixture_command("echo hi", NULL);
        sbx_completion *c = run(b, req, NULL);
        assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
        sbx_completion_free(c);
        sbx_request_free(req);
        if (round == 1)
            break;
        usleep(100000);
        long before = thread_switches("sbx-remote");
        usleep(2200000);
        long woke = thread_switches("sbx-remote") - before;
        assert_true(before >= 0 && woke <= 1); /* 2 or 3 when it woke every second */
    }
    sbx_broker_free(b);
    fixture_stop(&f);
}

static void test_worker_non_loopback_without_tls_refuses_to_start(void **state)
{
    (void)state;
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    char dir[] = "/tmp/sbx-worker-cfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n  default_profile: fake\n  secret_file: %s/secret\n"
             "  profiles:\n    fake: { type: fake }\n",
             dir);
    assert_int_equal(sbx_config_load_string(yaml, strlen(yaml), "t.yaml", &cfg, &err), SBX_OK);
    free(cfg->worker.listen);
    cfg->worker.listen = strdup("0.0.0.0:0");
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_worker *w = NULL;
    assert_int_equal(sbx_engine_new(cfg, &engine, &err), SBX_OK);
    assert_int_equal(sbx_broker_open_embedded(engine, &broker, &err), SBX_OK);
    assert_int_equal(sbx_worker_new(cfg, engine, broker, &w, &err), SBX_E_CONFIG);
    assert_null(w);
    assert_non_null(strstr(err.message, "requires TLS"));
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The loop must never block: a broker that would run executions on it is refused. */
static void test_worker_refuses_a_broker_that_is_not_the_thread_broker(void **state)
{
    (void)state;
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    char dir[] = "/tmp/sbx-worker-cfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n  default_profile: fake\n  secret_file: %s/secret\n"
             "  profiles:\n    fake: { type: fake }\n",
             dir);
    assert_int_equal(sbx_config_load_string(yaml, strlen(yaml), "t.yaml", &cfg, &err), SBX_OK);
    free(cfg->worker.listen);
    cfg->worker.listen = strdup("127.0.0.1:0");
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_worker *w = NULL;
    assert_int_equal(sbx_engine_new(cfg, &engine, &err), SBX_OK);
    assert_int_equal(sbx_broker_open_embedded(engine, &broker, &err), SBX_OK);
    assert_int_equal(sbx_worker_new(cfg, engine, broker, &w, &err), SBX_E_CONFIG);
    assert_null(w);
    assert_non_null(strstr(err.message, "broker.flavor to 'thread'"));
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_remote_unreachable_worker_is_a_broker_failure(void **state)
{
    (void)state;
    /* a port nobody listens on: bind one, remember it, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    close(fd);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    sbx_remote_config rc = {.endpoint = endpoint, .connect_timeout_ms = 5000};
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_remote(&rc, &b, NULL), SBX_OK);
    sbx_request *req = fixture_command("echo x", NULL);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, req, 60000, NULL, &c), SBX_OK);
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX_E_BROKER);
    assert_string_equal(c->task_id, req->task_id);
    sbx_completion_free(c);
    sbx_request_free(req);
    sbx_broker_free(b);
}

static void test_remote_plaintext_to_a_non_loopback_host_is_refused(void **state)
{
    (void)state;
    sbx_remote_config rc = {.endpoint = "http://192.0.2.10:7443"};
    sbx_broker *b = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_open_remote(&rc, &b, &err), SBX_E_CONFIG);
    assert_null(b);
    assert_non_null(strstr(err.message, "https://"));
}

/* A remote broker to f's worker keeping lru_size completions (its config in *cfg). */
static sbx_broker *remote_with_lru(const worker_fixture *f, int lru_size, sbx_config **cfg)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  broker: { flavor: remote, lru_size: %d, remote: { endpoint: '%s' } }\n"
             "  profiles:\n"
             "    fake: { type: fake, scope: per_call }\n",
             lru_size, f->endpoint);
    sbx_error err = {0};
    assert_int_equal(sbx_config_load_string(yaml, strlen(yaml), "lru.yaml", cfg, &err), SBX_OK);
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open(*cfg, NULL, &b, &err), SBX_OK);
    return b;
}

/* broker.lru_size bounds the remote broker's completions kept for result() as it bounds the
 * in-process brokers' (it was a fixed 1024). A task joined by a second submit stays kept, so
 * three of them done with lru_size 2 evict the oldest. */
static void test_remote_keeps_broker_lru_size_completions(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_config *cfg = NULL;
    sbx_broker *b = remote_with_lru(&f, 2, &cfg);
    sbx_request *r[3];
    for (int i = 0; i < 3; i++) {
        /* slow enough that the submit without waiting never finds it done (it would then be
         * collected, and the test would keep one task less) */
        r[i] = fixture_command("sleep 200; echo kept", NULL);
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
        sbx_completion_free(c);
        c = run(b, r[i], NULL); /* joins the task: a copy, the task stays kept */
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
    sbx_config_free(cfg);
    fixture_stop(&f);
}

/* One principal's flood through a remote broker (a gateway carrying many principals) evicts
 * its own kept completions first once it holds half of them: tenant-b's survives tenant-a's six
 * through an LRU of 4. Before: the oldest went, tenant-b's first. */
static void test_remote_lru_flood_of_one_principal_evicts_its_own(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_config *cfg = NULL;
    sbx_broker *b = remote_with_lru(&f, 4, &cfg);
    sbx_request *r[7];
    for (int i = 0; i < 7; i++) {
        r[i] = fixture_command("sleep 200; echo kept", i == 0 ? "tenant-b" : "tenant-a");
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_submit(b, r[i], 0, NULL, &c), SBX_OK);
        sbx_completion_free(c);
        c = run(b, r[i], NULL); /* joins the task: a copy, the task stays kept */
        sbx_completion_free(c);
    }
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-b", r[0]->task_id, 0, &c), SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    c = NULL;
    assert_int_equal(sbx_broker_result(b, "tenant-a", r[1]->task_id, 0, &c),
                     SBX_E_INVALID_ARGUMENT);
    for (int i = 0; i < 7; i++)
        sbx_request_free(r[i]);
    sbx_broker_free(b);
    sbx_config_free(cfg);
    fixture_stop(&f);
}

/* A blocking submitter of a task another caller already sent (a joiner), on its own thread. */
typedef struct joiner {
    sbx_broker *b;
    const sbx_request *req;
    sbx_status st;
    sbx_completion *c;
} joiner;

static void *joiner_main(void *arg)
{
    joiner *j = arg;
    j->st = sbx_broker_submit(j->b, j->req, 60000, NULL, &j->c);
    return NULL;
}

static void assert_joined(joiner *j)
{
    assert_int_equal(j->st, SBX_OK);
    assert_non_null(j->c);
    assert_int_equal(j->c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_int_equal(j->c->result->stdout.len, strlen("joined\n"));
    assert_memory_equal(j->c->result->stdout.data, "joined\n", strlen("joined\n"));
    sbx_completion_free(j->c);
}

/* Callers blocked on one task each get its completion: the first to wake does not free the task
 * under the others. */
static void test_remote_blocking_joiners_all_get_the_completion(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("sleep 800; echo joined", NULL);
    joiner j[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        j[i] = (joiner){.b = b, .req = req};
        assert_int_equal(pthread_create(&th[i], NULL, joiner_main, &j[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        assert_joined(&j[i]);
    }
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* The first submitter stops waiting and discards the task while another caller is blocked on
 * it: the joiner still gets the completion (the task is not freed under it). */
static void test_remote_joiner_gets_the_completion_its_submitter_discarded(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    sbx_request *req = fixture_command("sleep 1500; echo joined", NULL);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, req, 0, NULL, &c), SBX_OK);
    assert_null(c); /* still running */
    joiner j = {.b = b, .req = req};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, joiner_main, &j), 0);
    usleep(300 * 1000); /* the joiner blocks on the task meanwhile (no assertion on time) */
    sbx_broker_discard(b, sbx_request_subject(req), req->task_id);
    pthread_join(th, NULL);
    assert_joined(&j);
    sbx_request_free(req);
    sbx_broker_free(b);
    fixture_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_execute_returns_engine_completion),
        cmocka_unit_test(test_worker_failed_completion_keeps_its_code),
        cmocka_unit_test(test_worker_execute_stream_delivers_output_then_completion),
        cmocka_unit_test(test_worker_same_task_id_runs_once),
        cmocka_unit_test(test_worker_slow_call_does_not_hold_up_another_connection),
        cmocka_unit_test(test_remote_first_call_on_a_new_connection_does_not_hold_up_the_next),
        cmocka_unit_test(test_worker_task_id_is_scoped_by_principal_and_request),
        cmocka_unit_test(test_worker_deadline_exceeded_cancels_the_execution),
        cmocka_unit_test(test_worker_oversized_request_is_resource_exhausted),
        cmocka_unit_test(test_worker_http1_request_is_refused_and_serving_continues),
        cmocka_unit_test(test_worker_random_bytes_are_refused_and_serving_continues),
        cmocka_unit_test(test_worker_thousand_concurrent_streams_on_one_connection),
        cmocka_unit_test(test_worker_silent_connection_is_dropped_after_the_handshake_deadline),
        cmocka_unit_test(test_worker_non_loopback_without_tls_refuses_to_start),
        cmocka_unit_test(test_remote_describe_lists_the_worker_profiles),
        cmocka_unit_test(test_remote_async_submit_streams_and_calls_back),
        cmocka_unit_test(test_remote_idle_client_sleeps),
        cmocka_unit_test(test_worker_refuses_a_broker_that_is_not_the_thread_broker),
        cmocka_unit_test(test_remote_unreachable_worker_is_a_broker_failure),
        cmocka_unit_test(test_remote_plaintext_to_a_non_loopback_host_is_refused),
        cmocka_unit_test(test_remote_keeps_broker_lru_size_completions),
        cmocka_unit_test(test_remote_lru_flood_of_one_principal_evicts_its_own),
        cmocka_unit_test(test_remote_blocking_joiners_all_get_the_completion),
        cmocka_unit_test(test_remote_joiner_gets_the_completion_its_submitter_discarded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
