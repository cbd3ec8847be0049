/* queue.c - the queue broker (DESIGN §6): the caller's side of the NATS JetStream transport.
 * A request goes to the shared work subject (one-shot and new-session requests: whichever
 * worker has capacity pulls it) or to its node's own subject (an existing host-local session),
 * as the same sbx.v1 bytes every broker carries; its completion comes back through the
 * fleet's completion bucket (jetstream.h), so a retry from any process joins or returns the
 * first completion and result() works from anywhere.
 *
 * Idempotency, fleet-wide: the task's record is created atomically in the bucket under the
 * hash of (principal subject, task_id) before its message is published (with that hash as the
 * Nats-Msg-Id, so a retry within the dedup window is dropped by JetStream as well). A record
 * made by a different request (sbx_request_digest) is refused as in the in-process brokers.
 * Delivery is at-least-once (a worker killed mid-execution: the request runs again elsewhere;
 * completion.deliveries says how often it was delivered).
 *
 * Threads: submit/result run on the caller's threads; nats.c delivers completions and output
 * chunks on its own threads into a per-call waiter. This file must not run requests.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "broker/jetstream.h"
#include "broker/tasks.h"
#include "broker/broker_impl.h"

/* How often a waiter re-reads the bucket: the completion subject is core NATS (at most once),
 * so a notice lost to a reconnect is found by the next poll. */
#define QUEUE_POLL_MS 1000
/* Longest bearer token read from token_env: far above any real token, bounds the header. */
#define QUEUE_TOKEN_MAX 4096
/* How long a JetStream publish waits for the stream's acknowledgement, and how often it is
 * tried: a cluster that lost the stream's leader elects another within seconds, and sending
 * the same Nats-Msg-Id again is safe (JetStream drops the copy). */
#define QUEUE_PUBLISH_WAIT_MS 5000
/* How long a publish or the task record's creation is retried while the servers do not answer
 * (a loaded cluster electing a new leader takes seconds, sometimes tens of them), at most: a
 * caller's shorter wait ends it sooner, though not before QUEUE_PUBLISH_WAIT_MS (queue_submit). */
#define QUEUE_RETRY_FOR_MS 45000
/* Pause between attempts of either. */
#define QUEUE_RETRY_MS 250
/* A waiter whose every look at the bucket failed for this long gives up (all servers gone). */
#define QUEUE_GIVE_UP_MS 60000
/* Longest wait, once a call has its completion, for the output chunks published before it that
 * the client library has not handed to the caller yet (their subscription's own queue and
 * thread: the completion can overtake them on a loaded host). */
#define QUEUE_OUTPUT_DRAIN_MS 10000
/* Asynchronous submits waiting at once: each holds a thread (QUEUE_ASYNC_STACK of stack) that
 * waits on the bucket like a blocking caller; past this a submit is RESOURCE_EXHAUSTED. */
#define QUEUE_ASYNC_MAX 1024
#define QUEUE_ASYNC_STACK (256 * 1024)

/* Failures worth another attempt: the server did not answer, or the connection is being
 * re-established to another server of the cluster. */
static bool transient(natsStatus s)
{
    return s == NATS_TIMEOUT || s == NATS_NO_RESPONDERS || s == NATS_CONNECTION_DISCONNECTED ||
           s == NATS_NOT_YET_CONNECTED;
}

static void pause_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

typedef struct queue_broker {
    sbx_broker *self;
    sbx_queue_config cfg; /* deep copy: the connection refers to it on every reconnect */
    sbxq_conn *q;
    char *token; /* bearer token for the workers' callers table, or NULL */
    pthread_mutex_t mu;
    pthread_cond_t idle;
    int active; /* submit/result calls in progress; guarded by mu */
    int async;  /* asynchronous submits in progress (each also counted in active); mu */
    bool closing;
} queue_broker;

/* One call waiting for a task. The nats.c threads fill it; mu guards everything. Freed by the
 * last of its holders: the call and each subscription (whose on-complete callback runs once
 * nats.c will never call its handler again). */
typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    uint8_t *record; /* the latest DONE record published on N.done.<key> */
    size_t record_len;
    const sbx_engine_hooks *hooks; /* cleared when the call returns */
} waiter;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_done(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    waiter *w = closure;
    int n = natsMsg_GetDataLength(msg);
    uint8_t *copy = malloc(n > 0 ? (size_t)n : 1);
    if (copy != NULL) {
        memcpy(copy, natsMsg_GetData(msg), (size_t)n);
        pthread_mutex_lock(&w->mu);
        free(w->record);
        w->record = copy;
        w->record_len = (size_t)n;
        pthread_cond_broadcast(&w->cv);
        pthread_mutex_unlock(&w->mu);
    }
    natsMsg_Destroy(msg);
}

static void on_output(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    waiter *w = closure;
    ProtobufCMessage *m = NULL;
    sbx_error err;
    size_t n = (size_t)natsMsg_GetDataLength(msg);
    Sbx__V1__OutputChunk *chunk =
        sbx_message_decode(&sbx__v1__output_chunk__descriptor,
                           (const uint8_t *)natsMsg_GetData(msg), n, n, &m, &err) == SBX_OK
            ? (Sbx__V1__OutputChunk *)m
            : NULL;
    /* Under mu: the call clears hooks before it returns, and the hooks are only valid until. */
    pthread_mutex_lock(&w->mu);
    if (chunk != NULL && w->hooks != NULL && w->hooks->on_output != NULL)
        w->hooks->on_output(w->hooks->on_output_arg, chunk->stream, chunk->data.data,
                            chunk->data.len, chunk->offset);
    pthread_mutex_unlock(&w->mu);
    if (chunk != NULL)
        sbx__v1__output_chunk__free_unpacked(chunk, NULL);
    natsMsg_Destroy(msg);
}

static sbx_status fail_out(sbx_completion **out, const char *task_id, const sbx_error *err)
{
    *out = sbx_completion_from_error(task_id, err);
    return err->code;
}

/* What a record means for a caller with digest: *out set when the task is finished for it
 * (its completion, or the refusal of a reused task_id). */
static void judge(const uint8_t *data, size_t len, const char *subject, const char *task_id,
                  const uint8_t *digest, sbxq_record *rec, bool *valid, sbx_completion **out)
{
    *out = NULL;
    *valid = sbxq_record_parse(data, len, rec);
    if (!*valid)
        return;
    if (digest != NULL && memcmp(rec->digest, digest, SBX_REQUEST_DIGEST_LEN) != 0) {
        *out = bt_conflict(subject, task_id);
        return;
    }
    if (rec->state == SBXQ_DONE) {
        *out = sbxq_record_completion(rec, task_id);
        if (*out == NULL)
            *out = sbx_completion_fail(task_id, SBX_E_BROKER,
                                       "queue broker: the stored completion of task '%s' does "
                                       "not decode (the bucket holds foreign data)",
                                       task_id);
    }
}

/* Waits for key's DONE record until deadline (monotonic ms; < 0: forever). digest NULL: any
 * request's (result()). node: a node-bound request, ended as unavailable when nobody claims it
 * within node_wait_ms of since. */
/* Long because it is one wait loop over the bucket (poll, node-bound claim check, bucket-failure
 * timing, backoff sleep) whose three pieces of state are read by every branch. */
static sbx_status await(queue_broker *b, waiter *w, const char *key, const char *subject,
                        const char *task_id, const uint8_t *digest, const char *node, int64_t since,
                        int64_t deadline, sbx_completion **out)
{
    *out = NULL;
    int64_t next_poll = 0; /* the first look is a poll: a completion may already be there */
    bool node_checked = false;
    int64_t failing_since = -1; /* the bucket has not answered since then */
    for (;;) {
        sbxq_record rec;
        bool valid = false;
        pthread_mutex_lock(&w->mu);
        uint8_t *pushed = w->record;
        size_t pushed_len = w->record_len;
        w->record = NULL;
        pthread_mutex_unlock(&w->mu);
        if (pushed != NULL) {
            judge(pushed, pushed_len, subject, task_id, digest, &rec, &valid, out);
            free(pushed);
            if (*out != NULL)
                return SBX_OK;
        }
        int64_t now = now_ms();
        bool node_due = node != NULL && !node_checked && now - since >= b->cfg.node_wait_ms;
        const sbx_engine_hooks *hooks = w->hooks;
        bool cancelled = hooks != NULL && hooks->cancel != NULL && *hooks->cancel;
        if (now < next_poll && !node_due && !cancelled)
            goto sleep;
        next_poll = now + QUEUE_POLL_MS;
        uint8_t *data = NULL;
        size_t len = 0;
        uint64_t rev = 0;
        sbx_error err = {0};
        int found = sbxq_get(b->q, key, &data, &len, &rev, &err);
        if (found < 0) {
            /* The connection moves to another server: keep waiting, boundedly. */
            if (failing_since < 0)
                failing_since = now;
            if (now - failing_since >= QUEUE_GIVE_UP_MS)
                return fail_out(out, task_id, &err);
            next_poll = now + QUEUE_RETRY_MS;
            goto sleep;
        }
        failing_since = -1;
        if (found == 0 && digest == NULL) {
            *out = NULL;
            return sbx_error_set(&err, SBX_E_INVALID_ARGUMENT,
                                 "queue broker: no task '%s' for principal '%s' (never submitted, "
                                 "or older than completion_ttl_s)",
                                 task_id, subject);
        }
        if (found == 1) {
            judge(data, len, subject, task_id, digest, &rec, &valid, out);
            if (*out != NULL) {
                free(data);
                return SBX_OK;
            }
        }
        /* A node-bound request nobody claimed in time: end it as unavailable, by the same
         * compare-and-set a worker's claim uses, so exactly one of the two wins. */
        if (node_due)
            node_checked = true;
        if (node_due && found == 1 && valid && rec.state == SBXQ_QUEUED) {
            sbx_completion *c = sbxq_unavailable(task_id, node, b->cfg.node_wait_ms);
            size_t rlen = 0;
            uint8_t *r =
                c != NULL ? sbxq_record_pack(SBXQ_DONE, rec.digest, 0, 0, node, c, &rlen) : NULL;
            uint64_t nrev = 0;
            if (r != NULL && kvStore_Update(&nrev, b->q->kv, key, r, (int)rlen, rev) == NATS_OK) {
                sbxq_notify(b->q, key, r, rlen);
                free(r);
                free(data);
                *out = c;
                return SBX_OK;
            }
            free(r);
            sbx_completion_free(c);
        }
        if (cancelled) {
            /* Not yet claimed: no worker will run it. Claimed: its worker abandons it. */
            char csubj[SBXQ_SUBJECT_MAX];
            sbxq_subject(b->q, "cancel", key, csubj);
            natsConnection_Publish(b->q->nc, csubj, NULL, 0);
            if (found == 1 && valid && rec.state == SBXQ_QUEUED) {
                sbx_completion *c =
                    sbx_completion_fail(task_id, SBX_E_TIMEOUT, "queue broker: cancelled");
                size_t rlen = 0;
                uint8_t *r =
                    c != NULL ? sbxq_record_pack(SBXQ_DONE, rec.digest, 0, 0, "", c, &rlen) : NULL;
                uint64_t nrev = 0;
                if (r != NULL && kvStore_Update(&nrev, b->q->kv, key, r, (int)rlen, rev) == NATS_OK)
                    sbxq_notify(b->q, key, r, rlen);
                free(r);
                sbx_completion_free(c);
            }
            free(data);
            *out = sbx_completion_fail(task_id, SBX_E_TIMEOUT, "queue broker: cancelled");
            return SBX_OK;
        }
        free(data);
    sleep:
        if (deadline >= 0 && now >= deadline)
            return SBX_OK; /* pending */
        int64_t wake = next_poll;
        if (deadline >= 0 && deadline < wake)
            wake = deadline;
        if (node != NULL && !node_checked && since + b->cfg.node_wait_ms < wake)
            wake = since + b->cfg.node_wait_ms;
        if (hooks != NULL && hooks->cancel != NULL && now + 50 < wake)
            wake = now + 50; /* cancellation is a flag: look at it often */
        struct timespec ts = sbx_mono_after_ms(wake - now);
        pthread_mutex_lock(&w->mu);
        if (w->record == NULL)
            pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        pthread_mutex_unlock(&w->mu);
    }
}

static bool enter(queue_broker *b)
{
    pthread_mutex_lock(&b->mu);
    bool ok = !b->closing;
    if (ok)
        b->active++;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

static void leave(queue_broker *b)
{
    pthread_mutex_lock(&b->mu);
    if (--b->active == 0)
        pthread_cond_broadcast(&b->idle);
    pthread_mutex_unlock(&b->mu);
}

static waiter *waiter_new(const sbx_engine_hooks *hooks)
{
    waiter *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    sbx_cond_init_mono(&w->cv);
    w->hooks = hooks;
    w->refs = 1;
    return w;
}

static void waiter_release(void *arg)
{
    waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    bool last = --w->refs == 0;
    pthread_mutex_unlock(&w->mu);
    if (!last)
        return;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->record);
    free(w);
}

/* Subscribes w to subject; w gains a reference that the subscription's end releases. */
static natsStatus waiter_subscribe(queue_broker *b, waiter *w, const char *subject,
                                   natsMsgHandler handler, natsSubscription **sub)
{
    natsStatus s = natsConnection_Subscribe(sub, b->q->nc, subject, handler, w);
    if (s != NATS_OK)
        return s;
    pthread_mutex_lock(&w->mu);
    w->refs++;
    pthread_mutex_unlock(&w->mu);
    s = natsSubscription_SetOnCompleteCB(*sub, waiter_release, w);
    if (s != NATS_OK) { /* cannot know when the handler stops: keep w forever (never happens) */
        sbxq_unsubscribe(b->q, *sub, false);
        *sub = NULL;
    }
    return s;
}

/* Ends the call's use of w: no output callback runs after this returns. completed: the call
 * has its completion, so every chunk the worker published before it is handed over first (the
 * drain delivers what the output subscription b still queues, and what the server sent before
 * it saw the unsubscribe); otherwise what is left of the output is dropped. */
static void waiter_finish(queue_broker *qb, waiter *w, natsSubscription *a, natsSubscription *b,
                          bool completed)
{
    bool drained = completed && b != NULL && natsSubscription_Drain(b) == NATS_OK &&
                   natsSubscription_WaitForDrainCompletion(b, QUEUE_OUTPUT_DRAIN_MS) == NATS_OK;
    pthread_mutex_lock(&w->mu);
    w->hooks = NULL;
    pthread_mutex_unlock(&w->mu);
    sbxq_unsubscribe(qb->q, a, false);
    sbxq_unsubscribe(qb->q, b, drained);
    waiter_release(w);
}

/* Publishes the request to its subject with the key as Nats-Msg-Id and rev, the revision of
 * its QUEUED record (SBXQ_HDR_REVISION), retrying a transient failure until the monotonic time
 * until. */
static sbx_status publish(queue_broker *b, const sbx_request *req, const char *key, uint64_t rev,
                          const char *subject_to, bool stream, int64_t until, sbx_error *err)
{
    size_t len = 0;
    uint8_t *bytes = sbx_message_pack(&req->base, &len);
    if (bytes == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory packing the request");
    if ((int64_t)len > b->q->max_payload) {
        free(bytes);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "queue broker: the request is %zu bytes, above the NATS server's "
                             "max_payload (%lld); raise max_payload in nats-server's config",
                             len, (long long)b->q->max_payload);
    }
    natsMsg *msg = NULL;
    natsStatus s = natsMsg_Create(&msg, subject_to, NULL, (const char *)bytes, (int)len);
    free(bytes);
    if (s == NATS_OK && b->token != NULL) {
        char auth[QUEUE_TOKEN_MAX + 16];
        snprintf(auth, sizeof auth, "Bearer %s", b->token);
        s = natsMsgHeader_Set(msg, SBXQ_HDR_AUTH, auth);
    }
    if (s == NATS_OK && stream)
        s = natsMsgHeader_Set(msg, SBXQ_HDR_STREAM, "1");
    if (s == NATS_OK && rev > 0) {
        char r[24];
        snprintf(r, sizeof r, "%llu", (unsigned long long)rev);
        s = natsMsgHeader_Set(msg, SBXQ_HDR_REVISION, r);
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MsgId = key;
    po.MaxWait = QUEUE_PUBLISH_WAIT_MS;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    int64_t first = now_ms();
    for (int attempt = 0; s == NATS_OK || (transient(s) && now_ms() < until); attempt++) {
        if (attempt > 0)
            pause_ms(QUEUE_RETRY_MS);
        jsPubAck_Destroy(pa);
        pa = NULL;
        s = js_PublishMsg(&pa, b->q->js, msg, &po, &jerr);
        if (s == NATS_OK)
            break;
    }
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(msg);
    if (s != NATS_OK) {
        /* which server answered, and for how long: "no responders" that outlasts a failover
         * is one server's view of the stream, worth naming */
        char url[256] = "";
        if (natsConnection_GetConnectedUrl(b->q->nc, url, sizeof url) != NATS_OK || !url[0])
            snprintf(url, sizeof url, "no server");
        return sbxq_fail(err, SBX_E_BROKER, s,
                         "publishing to %s (JetStream error %d; tried for %lld ms, connected to "
                         "%s; submit the same task_id again to retry)",
                         subject_to, (int)jerr, (long long)(now_ms() - first), url);
    }
    return SBX_OK;
}

/* Long because it is the fleet's submit protocol in order (checks, node binding, the record as
 * first-submitter-wins, publish, await) and each step's failure is the completion built at its one
 * exit. */
static sbx_status queue_submit(sbx_broker *base, const sbx_request *req, int64_t wait_ms,
                               const sbx_engine_hooks *hooks, sbx_completion **out)
{
    queue_broker *b = sbx_broker_impl(base);
    const char *task_id = req->task_id != NULL ? req->task_id : "";
    sbx_error err = {0};
    *out = NULL;
    /* The caller's wait bounds the call, retries of the record and the publish included, but
     * the enqueue always gets QUEUE_PUBLISH_WAIT_MS (a call that waits for nothing still means
     * its task to be queued): servers that do not answer fail it (BROKER, retry with the same
     * task_id) after max(wait_ms, that), not QUEUE_RETRY_FOR_MS later. */
    int64_t start = now_ms();
    int64_t retry_for = QUEUE_RETRY_FOR_MS;
    if (wait_ms >= 0 && wait_ms < retry_for)
        retry_for = wait_ms > QUEUE_PUBLISH_WAIT_MS ? wait_ms : QUEUE_PUBLISH_WAIT_MS;
    int64_t until = start + retry_for;
    if (task_id[0] == '\0' || strlen(task_id) > 64) {
        sbx_error_set(&err, SBX_E_INVALID_ARGUMENT,
                      "request task_id is %s; set a uuid of at most 64 bytes (sbx_request_new "
                      "does)",
                      task_id[0] ? "longer than 64 bytes" : "empty");
        return fail_out(out, task_id, &err);
    }
    if (!enter(b)) {
        sbx_error_set(&err, SBX_E_BROKER, "queue broker is closed");
        return fail_out(out, task_id, &err);
    }
    const char *subject = sbx_request_subject(req);
    char key[SBXQ_KEY_LEN];
    sbxq_key(subject, task_id, key);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    if (!sbx_request_digest(req, digest)) {
        leave(b);
        sbx_error_set(&err, SBX_E_INTERNAL, "could not digest the request");
        return fail_out(out, task_id, &err);
    }
    /* An existing host-local session is bound to its node (the engine stamps node only for
     * host-local providers); recreate_elsewhere lets any worker take it. */
    const sbx_session_handle *h = req->session;
    const char *node = h != NULL && h->node != NULL && h->node[0] && h->sandbox_id != NULL &&
                               h->sandbox_id[0] && !req->recreate_elsewhere
                           ? h->node
                           : NULL;
    char to[SBXQ_SUBJECT_MAX];
    if (node != NULL)
        sbxq_node_subject(b->q, node, to);
    else
        snprintf(to, sizeof to, "%s.work", b->q->name);

    waiter *w = waiter_new(hooks);
    if (w == NULL) {
        leave(b);
        sbx_error_set(&err, SBX_E_INTERNAL, "out of memory");
        return fail_out(out, task_id, &err);
    }
    natsSubscription *done_sub = NULL, *out_sub = NULL;
    char subj[SBXQ_SUBJECT_MAX];
    sbxq_subject(b->q, "done", key, subj);
    natsStatus s = waiter_subscribe(b, w, subj, on_done, &done_sub);
    bool stream = hooks != NULL && hooks->on_output != NULL;
    if (s == NATS_OK && stream) {
        sbxq_subject(b->q, "out", key, subj);
        s = waiter_subscribe(b, w, subj, on_output, &out_sub);
    }
    sbx_status st = SBX_OK;
    if (s != NATS_OK)
        st = sbxq_fail(&err, SBX_E_BROKER, s, "subscribing to %s", subj);

    /* The record first: creating it is the fleet-wide "first submitter wins". */
    size_t rlen = 0;
    uint8_t *rec =
        st == SBX_OK ? sbxq_record_pack(SBXQ_QUEUED, digest, 0, 0, "", NULL, &rlen) : NULL;
    if (st == SBX_OK && rec == NULL)
        st = sbx_error_set(&err, SBX_E_INTERNAL, "out of memory");
    bool send = false;
    uint64_t rev = 0; /* of the QUEUED record made or found */
    if (st == SBX_OK) {
        s = kvStore_Create(&rev, b->q->kv, key, rec, (int)rlen);
        while (transient(s) && now_ms() < until) {
            pause_ms(QUEUE_RETRY_MS);
            s = kvStore_Create(&rev, b->q->kv, key, rec, (int)rlen);
        }
        if (s == NATS_OK) {
            send = true;
        } else {
            /* Exists: a retry (join it) or a reused task_id (refused). A retry of a task
             * still QUEUED publishes again: its first submitter may have died before
             * publishing, and within the dedup window JetStream drops the copy. */
            uint8_t *data = NULL;
            size_t len = 0;
            int found = sbxq_get(b->q, key, &data, &len, &rev, &err);
            if (found < 0) {
                st = err.code;
            } else if (found == 1) {
                sbxq_record r;
                bool valid = false;
                judge(data, len, subject, task_id, digest, &r, &valid, out);
                if (*out == NULL && valid && r.state == SBXQ_QUEUED)
                    send = true;
                if (!valid && *out == NULL)
                    *out = sbx_completion_fail(task_id, SBX_E_BROKER,
                                               "queue broker: the record of task '%s' does not "
                                               "decode (the bucket holds foreign data)",
                                               task_id);
            } else {
                /* Expired between the two calls: start over as a new task. */
                send = kvStore_Create(&rev, b->q->kv, key, rec, (int)rlen) == NATS_OK;
                if (!send)
                    st = sbxq_fail(&err, SBX_E_BROKER, s, "creating task record %s", key);
            }
            free(data);
        }
    }
    free(rec);
    int64_t since = now_ms();
    if (st == SBX_OK && *out == NULL && send)
        st = publish(b, req, key, rev, to, stream, until, &err);
    if (st == SBX_OK && *out == NULL) {
        int64_t deadline = wait_ms < 0 ? -1 : start + wait_ms;
        st = await(b, w, key, subject, task_id, digest, node, since, deadline, out);
    }
    waiter_finish(b, w, done_sub, out_sub, st == SBX_OK && *out != NULL);
    leave(b);
    if (st != SBX_OK && *out == NULL)
        return fail_out(out, task_id, &err);
    if (st != SBX_OK) /* await's failure completion, already in *out */
        return st;
    if (*out != NULL) {
        int64_t t = (int64_t)time(NULL) * 1000;
        sbx_broker_record(b->self, req, *out, t, t);
    }
    return SBX_OK;
}

static sbx_status queue_result(sbx_broker *base, const char *subject, const char *task_id,
                               int64_t wait_ms, sbx_completion **out)
{
    queue_broker *b = sbx_broker_impl(base);
    *out = NULL;
    if (task_id == NULL || !enter(b))
        return SBX_E_INVALID_ARGUMENT;
    char key[SBXQ_KEY_LEN];
    sbxq_key(subject != NULL ? subject : "", task_id, key);
    waiter *w = waiter_new(NULL);
    natsSubscription *done_sub = NULL;
    char subj[SBXQ_SUBJECT_MAX];
    sbxq_subject(b->q, "done", key, subj);
    sbx_status st = SBX_E_BROKER;
    if (w != NULL && waiter_subscribe(b, w, subj, on_done, &done_sub) == NATS_OK) {
        int64_t since = now_ms();
        st = await(b, w, key, subject != NULL ? subject : "", task_id, NULL, NULL, since,
                   wait_ms < 0 ? -1 : since + wait_ms, out);
    }
    if (w != NULL)
        waiter_finish(b, w, done_sub, NULL, false);
    leave(b);
    return st;
}

/* One asynchronous submit: a thread that waits as a blocking caller would and hands the
 * completion to on_done. The queue's waits are on the bucket, so a thread per waiting call
 * is the simple shape; QUEUE_ASYNC_MAX bounds them. */
typedef struct async_call {
    queue_broker *b;
    const sbx_request *req; /* borrowed until on_done (sbx_broker_submit_async) */
    sbx_broker_async cb;
    sbx_engine_hooks hooks;
} async_call;

static void *async_main(void *arg)
{
    async_call *a = arg;
    sbx_completion *c = NULL;
    sbx_status st =
        queue_submit(a->b->self, a->req, SBX_WAIT_FOREVER,
                     a->cb.on_output != NULL || a->cb.cancel != NULL ? &a->hooks : NULL, &c);
    queue_broker *b = a->b;
    a->cb.on_done(a->cb.arg, st, c);
    free(a);
    pthread_mutex_lock(&b->mu);
    b->async--;
    pthread_mutex_unlock(&b->mu);
    leave(b);
    return NULL;
}

static sbx_status queue_submit_async(sbx_broker *base, const sbx_request *req,
                                     const sbx_broker_async *cb)
{
    queue_broker *b = sbx_broker_impl(base);
    const char *task_id = req->task_id != NULL ? req->task_id : "";
    sbx_status st = SBX_OK;
    const char *why = NULL;
    pthread_mutex_lock(&b->mu);
    if (b->closing) {
        st = SBX_E_BROKER;
        why = "queue broker is closed";
    } else if (b->async >= QUEUE_ASYNC_MAX) {
        st = SBX_E_RESOURCE_EXHAUSTED;
        why = "queue broker: too many asynchronous submits waiting (QUEUE_ASYNC_MAX); retry "
              "later";
    } else {
        b->active++;
        b->async++;
    }
    pthread_mutex_unlock(&b->mu);
    async_call *a = st == SBX_OK ? calloc(1, sizeof(*a)) : NULL;
    if (st == SBX_OK && a != NULL) {
        a->b = b;
        a->req = req;
        a->cb = *cb;
        a->hooks.on_output = cb->on_output;
        a->hooks.on_output_arg = cb->arg;
        a->hooks.cancel = cb->cancel;
        pthread_attr_t attr;
        pthread_t tid;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, QUEUE_ASYNC_STACK);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, async_main, a);
        pthread_attr_destroy(&attr);
        if (rc == 0)
            return SBX_OK;
        free(a);
        a = NULL;
    }
    if (st == SBX_OK) { /* no memory or no thread: undo the counts */
        st = SBX_E_RESOURCE_EXHAUSTED;
        why = "queue broker: cannot start a thread for an asynchronous submit";
        pthread_mutex_lock(&b->mu);
        b->async--;
        pthread_mutex_unlock(&b->mu);
        leave(b);
    }
    sbx_completion *c = sbx_completion_fail(task_id, st, "%s", why);
    if (c != NULL)
        cb->on_done(cb->arg, st, c);
    return st;
}

/* The queue reaches no worker in particular, so it has none to ask. */
static sbx_status queue_describe(sbx_broker *base, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    (void)base;
    *out = NULL;
    return sbx_error_set(err, SBX_E_CAPABILITY,
                         "the queue broker reaches no worker in particular, so it cannot "
                         "describe one: ask a worker over gRPC (broker flavor remote, "
                         "endpoint URL) for its profiles and capabilities");
}

/* The bucket's TTL forgets every task; nothing is held here per task. */
static void queue_discard(sbx_broker *base, const char *subject, const char *task_id)
{
    (void)base;
    (void)subject;
    (void)task_id;
}

static void queue_close(sbx_broker *base)
{
    queue_broker *b = sbx_broker_impl(base);
    pthread_mutex_lock(&b->mu);
    b->closing = true;
    while (b->active > 0)
        pthread_cond_wait(&b->idle, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void config_free(sbx_queue_config *c)
{
    free(c->url);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->user);
    free(c->password_env);
    free(c->nkey);
    free(c->nkey_seed_env);
    free(c->token_env);
    free(c->name);
}

static void queue_destroy(sbx_broker *base)
{
    queue_broker *b = sbx_broker_impl(base);
    sbxq_close(b->q);
    config_free(&b->cfg);
    if (b->token != NULL) {
        memset(b->token, 0, strlen(b->token));
        free(b->token);
    }
    pthread_cond_destroy(&b->idle);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static const sbx_broker_vtable queue_vtable = {
    .flavor = "queue",
    .submit = queue_submit,
    .submit_async = queue_submit_async,
    .describe = queue_describe,
    .result = queue_result,
    .discard = queue_discard,
    .close = queue_close,
    .destroy = queue_destroy,
};

static bool dup(char **dst, const char *src)
{
    *dst = NULL;
    return src == NULL || (*dst = strdup(src)) != NULL;
}

sbx_status sbx_broker_open_queue(const sbx_queue_config *cfg, sbx_broker **out, sbx_error *err)
{
    *out = NULL;
    if (cfg == NULL || cfg->url == NULL)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "broker flavor queue needs sandbox.broker.queue.url (nats://HOST:PORT "
                             "or tls://HOST:PORT of the NATS servers)");
    queue_broker *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    b->cfg = *cfg;
    bool ok = dup(&b->cfg.url, cfg->url) && dup(&b->cfg.ca_file, cfg->ca_file) &&
              dup(&b->cfg.cert_file, cfg->cert_file) && dup(&b->cfg.key_file, cfg->key_file) &&
              dup(&b->cfg.user, cfg->user) && dup(&b->cfg.password_env, cfg->password_env) &&
              dup(&b->cfg.nkey, cfg->nkey) && dup(&b->cfg.nkey_seed_env, cfg->nkey_seed_env) &&
              dup(&b->cfg.token_env, cfg->token_env) && dup(&b->cfg.name, cfg->name);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->idle, NULL);
    sbx_status st = ok ? SBX_OK : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    if (st == SBX_OK && cfg->token_env != NULL) {
        const char *t = getenv(cfg->token_env);
        if (t == NULL || t[0] == '\0' || strlen(t) > QUEUE_TOKEN_MAX)
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "queue broker: environment variable %s "
                               "(sandbox.broker.queue.token_env) is %s; export the bearer token "
                               "the workers' callers table expects",
                               cfg->token_env, t == NULL || t[0] == '\0' ? "not set" : "too long");
        else if ((b->token = strdup(t)) == NULL)
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    if (st == SBX_OK)
        st = sbxq_connect(&b->cfg, "sbx queue broker", &b->q, err);
    if (st == SBX_OK && (b->self = sbx_broker_wrap(&queue_vtable, b)) == NULL)
        st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    if (st != SBX_OK) {
        sbxq_close(b->q);
        b->q = NULL;
        config_free(&b->cfg);
        free(b->token);
        pthread_cond_destroy(&b->idle);
        pthread_mutex_destroy(&b->mu);
        free(b);
        return st;
    }
    *out = b->self;
    return SBX_OK;
}
