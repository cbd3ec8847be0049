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
#include <time.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "providers/fake/fake.h"
#include "sbx/broker.h"
#include "sbx/recorder.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED

typedef struct env {
    sbx_config *cfg;
    sbx_engine *e;
} env;

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    env *t = *state;
    sbx_engine_free(t->e);
    fx_config_free(t->cfg);
    free(t);
    return 0;
}

static sbx_broker *thread_broker(env *t, int threads, int depth, int lru)
{
    sbx_thread_broker_opts o = {threads, depth, lru};
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
    assert_int_equal(sbx_broker_result(b, r->task_id, 0, &again), SBX_OK);
    assert_non_null(again);
    assert_string_equal(fx_stdout(again), "hi\n");
    sbx_broker_discard(b, r->task_id);
    sbx_completion *gone = NULL;
    assert_int_equal(sbx_broker_result(b, r->task_id, 0, &gone), SBX_E_INVALID_ARGUMENT);
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
    assert_null(c); /* pending: the gate holds it past wait_ms */
    sbx_request_free(r); /* the broker kept its own copy */
    assert_int_equal(sbx_broker_result(b, task_id, 0, &c), SBX_OK);
    assert_null(c); /* still pending */
    sbx_fake_set_gate(f, false);
    assert_int_equal(sbx_broker_result(b, task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
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
        assert_int_equal(sbx_broker_result(b, r[i]->task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
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
        assert_int_equal(sbx_broker_result(b, r[i]->task_id, 0, &c), SBX_OK);
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
    assert_int_equal(sbx_broker_result(b, r->task_id, SBX_WAIT_FOREVER, &c1), SBX_OK);
    assert_int_equal(sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c3), SBX_OK); /* done */
    assert_non_null(c3);
    assert_string_equal(c3->session->sandbox_id, c1->session->sandbox_id);
    assert_int_equal(sbx_fake_ops(f), base + 1);
    sbx_completion_free(c1);
    sbx_completion_free(c3);
    sbx_request_free(r);
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
    assert_int_equal(sbx_broker_result(b, r[0]->task_id, 0, &c), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(sbx_broker_result(b, r[2]->task_id, 0, &c), SBX_OK);
    assert_non_null(c);
    sbx_completion_free(c);
    for (int i = 0; i < 3; i++)
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
        assert_int_equal(sbx_broker_result(b, r[i]->task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
        assert_int_equal(c->status, OK_STATUS);
        sbx_completion_free(c);
        sbx_request_free(r[i]);
    }
    assert_false(sbx_fake_overlap_seen(f));
    sbx_message_free(&h->base);
    sbx_broker_free(b);
}

static void test_brokers_thread_runs_sessions_in_parallel(void **state)
{
    env *t = *state;
    sbx_fake *f = warm(t, NULL);
    uint64_t base = sbx_fake_ops(f);
    sbx_broker *b = thread_broker(t, 4, 16, 16);
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
        assert_int_equal(sbx_broker_result(b, r[i]->task_id, SBX_WAIT_FOREVER, &c), SBX_OK);
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
    sbx_broker_discard(b, r->task_id);
    sbx_broker_discard(b, "no-such-task"); /* unknown ids are fine */
    c = NULL;
    assert_int_equal(sbx_broker_result(b, r->task_id, 0, &c), SBX_E_INVALID_ARGUMENT);
    assert_null(c);
    sbx_request_free(r);
    sbx_broker_free(b);
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
    assert_non_null(strstr(err.message, "embedded, thread or remote"));
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

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_brokers_embedded_runs_inline_and_keeps_result),
        T(test_brokers_thread_promotes_after_wait_and_result_later),
        T(test_brokers_thread_full_queue_is_resource_exhausted),
        T(test_brokers_thread_close_drains_in_flight_work),
        T(test_brokers_thread_dedups_task_id),
        T(test_brokers_thread_lru_evicts_oldest_completion),
        T(test_brokers_thread_serializes_one_session),
        T(test_brokers_thread_runs_sessions_in_parallel),
        T(test_brokers_discarded_task_result_is_unknown),
        T(test_brokers_open_by_flavor),
        T(test_brokers_thread_records_frames_that_replay_identically),
        T(test_brokers_hooks_stream_output_chunks),
        T(test_brokers_cancel_hook_abandons_execution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
