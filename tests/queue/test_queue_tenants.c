/* test_queue_tenants.c - the NATS queue as a tenant boundary: a real nats-server whose users are
 * the workers (every right) and two tenants that hold only the rights deploy/README gives a
 * submitter (their partition's subjects and bucket keys, their own inbox), one sbx-worker, and
 * queue brokers logged in as the tenants. A tenant's work runs with those rights alone (the
 * template is enough), and another tenant's connection cannot read its output, its completion
 * notices or its records, nor cancel its task, nor have a worker overwrite its record.
 *
 * usage: test_queue_tenants PATH/sbx-worker
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

#include "broker/jetstream.h"
#include "queue/fleet.h"
#include "sbx/broker.h"

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define WAIT_MS 60000

static const char *worker_bin;
static fleet F;

static sbx_request *shell(const char *profile, const char *subject, const char *line)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, subject);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

static int group_setup(void **state)
{
    (void)state;
    fleet_init(&F, worker_bin);
    F.tenants = true;
    fleet_start_nats(&F, 1);
    fleet_start_worker(&F, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    fleet_stop(&F);
    return 0;
}

/* Submits r through b and checks that it succeeded. */
static void submit_ok(sbx_broker *b, const sbx_request *r)
{
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, WAIT_MS, NULL, &c), SBX_OK);
    assert_non_null(c);
    if (c->status != OK_STATUS)
        fail_msg("%s", c->error);
    sbx_completion_free(c);
}

typedef struct chunks {
    pthread_mutex_t mu;
    char text[256];
    size_t len;
} chunks;

static void on_chunk(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                     uint64_t offset)
{
    (void)stream;
    (void)offset;
    chunks *c = arg;
    pthread_mutex_lock(&c->mu);
    if (len > sizeof c->text - 1 - c->len)
        len = sizeof c->text - 1 - c->len;
    memcpy(c->text + c->len, data, len);
    c->len += len;
    pthread_mutex_unlock(&c->mu);
}

/* Runs line as tenant-a through b and checks its completion and its streamed output. */
static void run_as_tenant_a(sbx_broker *b, const char *line, const char *expect)
{
    sbx_request *r = shell("oneshot", "tenant-a", line);
    chunks got = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sbx_engine_hooks hooks = {.on_output = on_chunk, .on_output_arg = &got};
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, WAIT_MS, &hooks, &c), SBX_OK);
    assert_non_null(c);
    if (c->status != OK_STATUS)
        fprintf(stderr, "tenant-a: %s\n", c->error);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->stdout.len, strlen(expect));
    assert_memory_equal(c->result->stdout.data, expect, strlen(expect));
    assert_string_equal(got.text, expect);
    sbx_completion_free(c);
    c = NULL; /* and result() reads its record back */
    assert_int_equal(sbx_broker_result(b, "tenant-a", r->task_id, WAIT_MS, &c), SBX_OK);
    assert_non_null(c);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
    sbx_request_free(r);
}

/* A NATS user with the wrong password gets no connection, and the error names the settings to
 * check (not whether nats-server runs: it does). */
static void test_queue_wrong_nats_password_is_refused_naming_the_credentials(void **state)
{
    (void)state;
    sbx_config *c = fleet_client_config(&F);
    sbx_queue_config *q = &c->broker.queue;
    q->user = strdup("tenant-a");
    q->password_env = strdup("SBX_TEST_NATS_WRONG_PASSWORD");
    setenv("SBX_TEST_NATS_WRONG_PASSWORD", "not-the-password", 1);
    sbx_broker *b = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_broker_open_queue(q, &b, &err), SBX_E_BROKER);
    assert_null(b);
    if (strstr(err.message, "Authorization Violation") == NULL ||
        strstr(err.message, "do user and password_env, or nkey and nkey_seed_env, match?") ==
            NULL ||
        strstr(err.message, "is nats-server running") != NULL)
        fail_msg("'%s'", err.message);
    sbx_config_free(c);
}

/* A tenant's broker needs no right beyond its partition and its inbox. */
static void test_queue_tenant_runs_with_its_partition_rights_alone(void **state)
{
    (void)state;
    sbx_broker *a = fleet_tenant_broker(&F, "tenant-a");
    run_as_tenant_a(a, "echo work of tenant-a", "work of tenant-a\n");
    sbx_broker_free(a);
    sbx_broker *b = fleet_tenant_broker(&F, "tenant-b");
    sbx_request *r = shell("oneshot", "tenant-b", "echo work of tenant-b");
    submit_ok(b, r);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* ---- tenant-b's own NATS connection, looking for tenant-a's data ------------------------- */

typedef struct spy {
    pthread_mutex_t mu;
    int messages;   /* delivered to its subscriptions */
    int violations; /* permission errors the server sent it */
} spy;

static void spy_msg(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    spy *s = closure;
    pthread_mutex_lock(&s->mu);
    s->messages++;
    pthread_mutex_unlock(&s->mu);
    natsMsg_Destroy(msg);
}

static void spy_error(natsConnection *nc, natsSubscription *sub, natsStatus err, void *closure)
{
    (void)nc;
    (void)sub;
    spy *s = closure;
    pthread_mutex_lock(&s->mu);
    if (err == NATS_NOT_PERMITTED)
        s->violations++;
    pthread_mutex_unlock(&s->mu);
}

static natsConnection *spy_connect(spy *s)
{
    natsOptions *o = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    const char *url = F.url;
    assert_int_equal(natsOptions_SetServers(o, &url, 1), NATS_OK);
    assert_int_equal(natsOptions_SetUserInfo(o, "tenant-b", "tenant-b-pass"), NATS_OK);
    assert_int_equal(natsOptions_SetCustomInboxPrefix(o, "_INBOX_tenant-b"), NATS_OK);
    assert_int_equal(natsOptions_SetErrorHandler(o, spy_error, s), NATS_OK);
    natsConnection *nc = NULL;
    assert_int_equal(natsConnection_Connect(&nc, o), NATS_OK);
    natsOptions_Destroy(o);
    return nc;
}

static int spy_count(spy *s, int *violations)
{
    pthread_mutex_lock(&s->mu);
    int n = s->messages;
    *violations = s->violations;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* tenant-b subscribes to every subject tenant-a's output, completion notices and records travel
 * on: the server refuses each subscription, and nothing of tenant-a's task reaches it. */
static void test_queue_tenant_cannot_read_another_tenants_output_or_records(void **state)
{
    (void)state;
    spy s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    natsConnection *nc = spy_connect(&s);
    static const char *const subjects[] = {
        "sbx.out.>",      "sbx.done.>", "sbx.out.s-tenant-a.*", "sbx.done.s-tenant-a.*",
        "$KV.sbx_done.>", "_INBOX.>",   "_INBOX_tenant-a.>"};
    natsSubscription *subs[sizeof subjects / sizeof subjects[0]];
    for (size_t i = 0; i < sizeof subjects / sizeof subjects[0]; i++)
        assert_int_equal(natsConnection_Subscribe(&subs[i], nc, subjects[i], spy_msg, &s), NATS_OK);
    natsConnection_Flush(nc);
    sbx_broker *a = fleet_tenant_broker(&F, "tenant-a");
    sbx_request *r = shell("oneshot", "tenant-a", "echo secret of tenant-a");
    run_as_tenant_a(a, "echo secret of tenant-a", "secret of tenant-a\n");
    sleep_ms(200); /* anything published reaches the subscriptions it may reach by now */
    int violations = 0;
    assert_int_equal(spy_count(&s, &violations), 0);
    assert_true(violations >= (int)(sizeof subjects / sizeof subjects[0]));

    /* Its records: reading the key of a task of tenant-a's from the bucket is refused. */
    submit_ok(a, r);
    char key[SBXQ_KEY_LEN];
    sbxq_key("tenant-a", r->task_id, key);
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    kvStore *kv = NULL;
    assert_int_equal(js_KeyValue(&kv, js, "sbx_done"), NATS_OK);
    kvEntry *e = NULL;
    natsStatus got = kvStore_Get(&e, kv, key);
    fprintf(stderr, "tenant-b reading tenant-a's record: %s\n", natsStatus_GetText(got));
    assert_int_not_equal(got, NATS_OK);
    assert_null(e);
    kvStore_Destroy(kv);
    jsCtx_Destroy(js);
    for (size_t i = 0; i < sizeof subjects / sizeof subjects[0]; i++)
        natsSubscription_Destroy(subs[i]);
    natsConnection_Destroy(nc);
    sbx_request_free(r);
    sbx_broker_free(a);
}

/* tenant-b publishes the cancel of tenant-a's running task: refused, and the task ends well. */
static void test_queue_tenant_cannot_cancel_another_tenants_task(void **state)
{
    (void)state;
    spy s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    natsConnection *nc = spy_connect(&s);
    sbx_broker *a = fleet_tenant_broker(&F, "tenant-a");
    sbx_request *r = shell("sleepy", "tenant-a", "echo survived");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(a, r, 0, NULL, &c), SBX_OK);
    assert_null(c); /* pending: it runs for 3 s */
    sleep_ms(1000);
    char key[SBXQ_KEY_LEN], subject[SBXQ_SUBJECT_MAX];
    sbxq_key("tenant-a", r->task_id, key);
    snprintf(subject, sizeof subject, "sbx.cancel.%s", key);
    natsConnection_Publish(nc, subject, NULL, 0);
    natsConnection_Flush(nc);
    assert_int_equal(sbx_broker_result(a, "tenant-a", r->task_id, WAIT_MS, &c), SBX_OK);
    assert_non_null(c);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->stdout.len, strlen("survived\n"));
    int violations = 0;
    spy_count(&s, &violations);
    assert_true(violations >= 1);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(a);
    natsConnection_Destroy(nc);
}

/* A connection with the workers' rights (every right on the stream and the bucket). */
static natsConnection *worker_connect(void)
{
    natsOptions *o = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    const char *url = F.url;
    assert_int_equal(natsOptions_SetServers(o, &url, 1), NATS_OK);
    assert_int_equal(natsOptions_SetUserInfo(o, "worker", "worker-pass"), NATS_OK);
    natsConnection *nc = NULL;
    assert_int_equal(natsConnection_Connect(&nc, o), NATS_OK);
    natsOptions_Destroy(o);
    return nc;
}

/* The latest revision of key in the bucket, read with the workers' rights (what a tenant could
 * guess: revisions are the bucket stream's sequence numbers, which its own records show). */
static uint64_t record_revision(const char *key)
{
    natsConnection *nc = worker_connect();
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    kvStore *kv = NULL;
    assert_int_equal(js_KeyValue(&kv, js, "sbx_done"), NATS_OK);
    kvEntry *e = NULL;
    assert_int_equal(kvStore_Get(&e, kv, key), NATS_OK);
    uint64_t rev = kvEntry_Revision(e);
    kvEntry_Destroy(e);
    kvStore_Destroy(kv);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return rev;
}

/* Queues r on sbx.work through nc as a hand-made message: SBXQ_HDR_REVISION revision and
 * SBXQ_HDR_AUTH auth when not NULL, Nats-Msg-Id msg_id. */
static void publish_raw(natsConnection *nc, const sbx_request *r, const char *revision,
                        const char *auth, const char *msg_id)
{
    jsCtx *js = NULL;
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    size_t len = 0;
    uint8_t *bytes = sbx_message_pack(&r->base, &len);
    assert_non_null(bytes);
    natsMsg *msg = NULL;
    assert_int_equal(natsMsg_Create(&msg, "sbx.work", NULL, (const char *)bytes, (int)len),
                     NATS_OK);
    free(bytes);
    if (revision != NULL)
        assert_int_equal(natsMsgHeader_Set(msg, SBXQ_HDR_REVISION, revision), NATS_OK);
    if (auth != NULL)
        assert_int_equal(natsMsgHeader_Set(msg, SBXQ_HDR_AUTH, auth), NATS_OK);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = msg_id;
    jsPubAck *pa = NULL;
    assert_int_equal(js_PublishMsg(&pa, js, msg, &po, NULL), NATS_OK);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(msg);
    jsCtx_Destroy(js);
}

/* Waits until the workers' consumer has nothing pending or unacknowledged (every message
 * queued so far was taken and finished with). */
static void wait_consumer_idle(void)
{
    natsConnection *wc = worker_connect();
    jsCtx *wjs = NULL;
    assert_int_equal(natsConnection_JetStream(&wjs, wc, NULL), NATS_OK);
    bool idle = false;
    for (int i = 0; i < 200 && !idle; i++) {
        jsConsumerInfo *ci = NULL;
        if (js_GetConsumerInfo(&ci, wjs, "sbx_tasks", "workers", NULL, NULL) == NATS_OK) {
            idle = ci->NumPending == 0 && ci->NumAckPending == 0;
            jsConsumerInfo_Destroy(ci);
        }
        if (!idle)
            sleep_ms(50);
    }
    jsCtx_Destroy(wjs);
    natsConnection_Destroy(wc);
    assert_true(idle);
}

static void expect_stdout(const sbx_completion *c, const char *want)
{
    assert_non_null(c);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->stdout.len, strlen(want));
    assert_memory_equal(c->result->stdout.data, want, strlen(want));
}

/* tenant-b, without a token that may assert tenant-a, queues a request of its own under
 * tenant-a's principal and task_id, naming the revision of tenant-a's finished record
 * (SBXQ_HDR_REVISION): the worker refuses it without writing that record, and tenant-a's
 * completion stays its own. A worker that took the revision of any caller at its word would
 * have written its refusal over tenant-a's completion by compare-and-set. */
static void test_queue_tenant_cannot_overwrite_another_tenants_record(void **state)
{
    (void)state;
    sbx_broker *a = fleet_tenant_broker(&F, "tenant-a");
    sbx_request *r = shell("oneshot", "tenant-a", "echo kept by tenant-a");
    submit_ok(a, r);
    char key[SBXQ_KEY_LEN];
    sbxq_key("tenant-a", r->task_id, key);
    uint64_t rev = record_revision(key);

    spy s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    natsConnection *nc = spy_connect(&s);
    sbx_request *forged = shell("oneshot", "tenant-a", "echo written by tenant-b");
    sbx_set_string(&forged->task_id, r->task_id);
    char revision[24];
    snprintf(revision, sizeof revision, "%llu", (unsigned long long)rev);
    /* not the task's key as Nats-Msg-Id: JetStream would drop it as a copy */
    publish_raw(nc, forged, revision, NULL, "forged-by-tenant-b");
    wait_consumer_idle();

    if (record_revision(key) != rev)
        fail_msg("tenant-b's forged request wrote tenant-a's record");
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_result(a, "tenant-a", r->task_id, WAIT_MS, &c), SBX_OK);
    expect_stdout(c, "kept by tenant-a\n");
    sbx_completion_free(c);
    natsConnection_Destroy(nc);
    sbx_request_free(forged);
    sbx_request_free(r);
    sbx_broker_free(a);
}

/* A vouched caller's revision that is not the record's (stale, zero, too large, not a number)
 * is no claim: the worker reads the record as without the header, and the task runs once. */
static void test_queue_revision_that_is_not_the_records_still_runs_the_task(void **state)
{
    (void)state;
    static const char *const revisions[] = {"1", "0", "18446744073709551616", "12x", "-5"};
    char auth[128];
    snprintf(auth, sizeof auth, "Bearer %s", getenv(FLEET_TOKEN_ENV));
    spy s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    natsConnection *nc = spy_connect(&s);
    sbx_broker *b = fleet_tenant_broker(&F, "tenant-b");
    for (size_t i = 0; i < sizeof revisions / sizeof revisions[0]; i++) {
        char line[64], want[64];
        snprintf(line, sizeof line, "echo revision %zu", i);
        snprintf(want, sizeof want, "revision %zu\n", i);
        sbx_request *r = shell("oneshot", "tenant-b", line);
        publish_raw(nc, r, revisions[i], auth, r->task_id);
        wait_consumer_idle(); /* result() of a task with no record yet is "no such task" */
        sbx_completion *c = NULL;
        assert_int_equal(sbx_broker_result(b, "tenant-b", r->task_id, WAIT_MS, &c), SBX_OK);
        if (c == NULL || c->status != OK_STATUS)
            fail_msg("revision '%s': %s", revisions[i], c != NULL ? c->error : "no completion");
        expect_stdout(c, want);
        sbx_completion_free(c);
        sbx_request_free(r);
    }
    sbx_broker_free(b);
    natsConnection_Destroy(nc);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/sbx-worker\n", argv[0]);
        return 2;
    }
    worker_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_wrong_nats_password_is_refused_naming_the_credentials),
        cmocka_unit_test(test_queue_tenant_runs_with_its_partition_rights_alone),
        cmocka_unit_test(test_queue_tenant_cannot_read_another_tenants_output_or_records),
        cmocka_unit_test(test_queue_tenant_cannot_cancel_another_tenants_task),
        cmocka_unit_test(test_queue_tenant_cannot_overwrite_another_tenants_record),
        cmocka_unit_test(test_queue_revision_that_is_not_the_records_still_runs_the_task),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
