/* queue.c - sbx-worker's JetStream consumer (see worker_queue.h): the worker's side of the
 * queue transport of broker/queue.c.
 *
 * Two durable pull consumers: "workers" on N.work, shared by the whole fleet (a worker pulls
 * one message per free consumer thread, so requests go to whoever has capacity), and
 * "node_<node>" on N.node.<node>, this node's own (requests for sessions whose host-local
 * sandbox lives here). Each message is claimed in the completion bucket by compare-and-set
 * before it runs, so two deliveries never both run a task, and its completion is stored by a
 * compare-and-set on that claim before the message is acknowledged. A worker killed
 * mid-execution never acknowledges: JetStream redelivers after ack_wait and the next delivery
 * takes the claim over (at-least-once; completion.deliveries counts the deliveries). While a
 * request runs its message is kept alive (in-progress acks) so a slow execution is not
 * redelivered while its worker lives.
 *
 * The callers table of sandbox.worker.auth applies exactly as on gRPC: when callers are
 * configured a message must carry a caller's bearer token (header Sbx-Authorization), and the
 * principal subject it asserts must be one that caller may assert.
 *
 * Threads: `capacity` consumer threads per subject, each with its own pull subscription, and
 * one heartbeat thread. This file must not touch the gRPC server (server.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "broker/jetstream.h"
#include "worker/worker_internal.h"
#include "worker/worker_queue.h"

/* How long one pull waits for a message before looking at the stop flag again. */
#define QUEUE_FETCH_WAIT_MS 1000
/* Pause after a failed pull (the connection is reconnecting): short, it is not a busy loop. */
#define QUEUE_FETCH_RETRY_MS 200
/* Attempts to store a completion when the bucket's server does not answer (a cluster electing
 * a leader); then the message stays unacknowledged and is redelivered. */
#define QUEUE_STORE_ATTEMPTS 120
#define QUEUE_STORE_RETRY_MS 250
/* How long a stopping worker waits for its NATS connection to close once every in-flight
 * request is done and acknowledged; then it exits without it (a close takes milliseconds, but
 * libnats 3.4 once hung in it forever, and the worker with it). */
#define QUEUE_CLOSE_WAIT_MS 5000
/* Attempts at reading a task's record while the bucket does not answer (30 s: longer than a
 * JetStream leader election). */
#define QUEUE_BUCKET_ATTEMPTS 120
/* Attempts of the claim's compare-and-set when the record changes under it (the submitter's
 * unavailable verdict or cancellation racing the claim). */
#define QUEUE_CLAIM_ATTEMPTS 4
/* Deliveries of one message before JetStream stops redelivering it: a request that kills every
 * worker that takes it must not take the fleet down one worker at a time. */
#define QUEUE_MAX_DELIVER 5

typedef struct worker_queue worker_queue;

/* A request in flight, for the heartbeat. */
typedef struct inflight {
    struct inflight *next, *prev;
    natsMsg *msg;
} inflight;

/* The cancel flag of one running request. Freed by the last of the request and its cancel
 * subscription (whose on-complete callback says nats.c will not call the handler again). */
typedef struct cancel_box {
    volatile int flag;
    atomic_int refs;
} cancel_box;

typedef struct consumer_thread {
    worker_queue *q;
    bool node_bound; /* N.node.<node> (else N.work) */
    pthread_t tid;
    bool started;
} consumer_thread;

struct worker_queue {
    const sbx_config *cfg; /* borrowed */
    sbx_broker *broker;    /* borrowed: runs the requests */
    FILE *log;
    worker_auth auth;
    sbxq_conn *q;
    int capacity;
    char work_subject[SBXQ_SUBJECT_MAX];
    char node_subject[SBXQ_SUBJECT_MAX];
    char node_consumer[SBXQ_SUBJECT_MAX];
    consumer_thread *threads;
    int n_threads;
    atomic_int stop;
    pthread_mutex_t mu; /* guards inflight, log writes and hb_stop */
    pthread_cond_t hb_cv;
    inflight *inflight;
    bool hb_stop;
    pthread_t hb;
    bool hb_started;
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void note(worker_queue *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(worker_queue *q, const char *fmt, ...)
{
    if (q->log == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&q->mu);
    fprintf(q->log, "sbx-worker: queue: ");
    vfprintf(q->log, fmt, ap);
    fputc('\n', q->log);
    fflush(q->log);
    pthread_mutex_unlock(&q->mu);
    va_end(ap);
}

/* ---- heartbeat ---------------------------------------------------------------------------- */

static void *heartbeat_main(void *arg)
{
    worker_queue *q = arg;
    /* A third of the ack wait: two beats may be lost before JetStream redelivers. */
    int64_t every = q->cfg->broker.queue.ack_wait_ms / 3;
    if (every < 1)
        every = 1;
    pthread_mutex_lock(&q->mu);
    while (!q->hb_stop) {
        struct timespec ts = sbx_mono_after_ms(every);
        pthread_cond_timedwait(&q->hb_cv, &q->mu, &ts);
        for (inflight *f = q->inflight; f != NULL && !q->hb_stop; f = f->next)
            natsMsg_InProgress(f->msg, NULL);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static void track(worker_queue *q, inflight *f, natsMsg *msg)
{
    pthread_mutex_lock(&q->mu);
    f->msg = msg;
    f->prev = NULL;
    f->next = q->inflight;
    if (q->inflight != NULL)
        q->inflight->prev = f;
    q->inflight = f;
    pthread_mutex_unlock(&q->mu);
}

static void untrack(worker_queue *q, inflight *f)
{
    pthread_mutex_lock(&q->mu);
    if (f->prev != NULL)
        f->prev->next = f->next;
    else
        q->inflight = f->next;
    if (f->next != NULL)
        f->next->prev = f->prev;
    pthread_mutex_unlock(&q->mu);
}

/* ---- one request -------------------------------------------------------------------------- */

static void on_cancel(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
    (void)nc;
    (void)sub;
    ((cancel_box *)closure)->flag = 1;
    natsMsg_Destroy(msg);
}

static void cancel_release(void *arg)
{
    cancel_box *c = arg;
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        free(c);
}

typedef struct output_ctx {
    worker_queue *q;
    const char *subject;
} output_ctx;

/* Publishes output chunks on N.out.<key>, each within the server's max_payload. */
static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    output_ctx *o = arg;
    /* Room for the chunk's own fields (stream, offset, length prefixes). */
    size_t max = o->q->q->max_payload > 64 ? (size_t)o->q->q->max_payload - 64 : 1;
    for (size_t done = 0; done < len;) {
        size_t n = len - done < max ? len - done : max;
        Sbx__V1__OutputChunk chunk = SBX__V1__OUTPUT_CHUNK__INIT;
        chunk.stream = stream;
        chunk.data.data = (uint8_t *)data + done;
        chunk.data.len = n;
        chunk.offset = offset + done;
        size_t plen = 0;
        uint8_t *bytes = sbx_message_pack(&chunk.base, &plen);
        if (bytes != NULL)
            natsConnection_Publish(o->q->q->nc, o->subject, bytes, (int)plen);
        free(bytes);
        done += n;
    }
}

/* Stores record under key by compare-and-set on rev, retrying while the server does not answer.
 * NATS_OK, or the failure (a lost claim is JSStreamWrongLastSequenceErr's status). */
static natsStatus store(worker_queue *q, const char *key, const uint8_t *record, size_t len,
                        uint64_t rev, uint64_t *new_rev)
{
    natsStatus s = NATS_ERR;
    for (int attempt = 0; attempt < QUEUE_STORE_ATTEMPTS; attempt++) {
        s = kvStore_Update(new_rev, q->q->kv, key, record, (int)len, rev);
        if (s == NATS_OK || (s != NATS_TIMEOUT && s != NATS_NO_RESPONDERS &&
                             s != NATS_CONNECTION_DISCONNECTED && s != NATS_NOT_YET_CONNECTED))
            return s;
        sleep_ms(QUEUE_STORE_RETRY_MS);
    }
    return s;
}

/* The completion of a request that did not run (refused, or its node's wait passed). */
static sbx_completion *refusal(const sbx_request *req, sbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static sbx_completion *refusal(const sbx_request *req, sbx_status code, const char *fmt, ...)
{
    sbx_error err;
    va_list ap;
    va_start(ap, fmt);
    sbx_error_vset(&err, code, fmt, ap);
    va_end(ap);
    return sbx_completion_from_error(req->task_id != NULL ? req->task_id : "", &err);
}

/* Packs the DONE record of c, replacing a completion that cannot cross the server's
 * max_payload by a RESOURCE_EXHAUSTED one that says so. */
static uint8_t *done_record(worker_queue *q, const sbx_request *req, const uint8_t *digest,
                            uint64_t seq, uint32_t deliveries, sbx_completion **c, size_t *len)
{
    const char *node = q->cfg->node;
    uint8_t *r = sbxq_record_pack(SBXQ_DONE, digest, seq, deliveries, node, *c, len);
    if (r != NULL && (int64_t)*len > q->q->max_payload) {
        free(r);
        size_t was = *len;
        sbx_completion_free(*c);
        *c = refusal(req, SBX_E_RESOURCE_EXHAUSTED,
                     "queue transport: the completion is %zu bytes, above the NATS server's "
                     "max_payload (%lld); lower the policy's output_limit_bytes or raise "
                     "max_payload",
                     was, (long long)q->q->max_payload);
        if (*c != NULL)
            (*c)->deliveries = deliveries;
        r = *c != NULL ? sbxq_record_pack(SBXQ_DONE, digest, seq, deliveries, node, *c, len) : NULL;
    }
    return r;
}

/* The refusal of a message whose caller the workers' callers table does not accept (no valid
 * token, a subject it may not assert, an identity it may not choose), or NULL. */
static sbx_completion *caller_verdict(worker_queue *q, natsMsg *msg, const sbx_request *req,
                                      const char *subject)
{
    if (!q->auth.required)
        return NULL;
    const char *auth = NULL;
    const worker_caller *caller = NULL;
    if (natsMsgHeader_Get(msg, SBXQ_HDR_AUTH, &auth) == NATS_OK && auth != NULL)
        caller = worker_auth_by_token(&q->auth, auth, strlen(auth));
    if (caller == NULL)
        return refusal(req, SBX_E_UNAUTHENTICATED,
                       "the queue message carries no valid bearer token (%s); set "
                       "sandbox.broker.queue.token_env to a token of "
                       "sandbox.worker.auth.callers",
                       SBXQ_HDR_AUTH);
    if (!worker_caller_may_assert(caller, subject))
        return refusal(req, SBX_E_PERMISSION_DENIED,
                       "caller '%s' may not assert principal '%s'; add it to the caller's "
                       "subjects",
                       caller->config->name, subject);
    if (!worker_caller_may_choose_identity(caller, req->principal))
        return refusal(req, SBX_E_PERMISSION_DENIED, WORKER_IDENTITY_REFUSAL, caller->config->name);
    return NULL;
}

/* The submitter's SBXQ_HDR_REVISION, or 0 (none, or not a revision). */
static uint64_t header_revision(natsMsg *msg)
{
    const char *v = NULL;
    if (natsMsgHeader_Get(msg, SBXQ_HDR_REVISION, &v) != NATS_OK || v == NULL || v[0] < '1' ||
        v[0] > '9')
        return 0;
    uint64_t n = 0;
    for (const char *p = v; *p; p++) {
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - 9) / 10)
            return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    return n;
}

/* Writes the claim of this delivery (or its verdict, DONE) over the record at revision at by
 * compare-and-set (at 0: creates it). CLAIM_RUN: claimed, *rev its revision; CLAIM_DONE: the
 * verdict stored and announced; CLAIM_LOST: the record moved on, or the bucket did not answer;
 * CLAIM_NOMEM. */
enum { CLAIM_LOST, CLAIM_RUN, CLAIM_DONE, CLAIM_NOMEM };
static int claim_at(worker_queue *q, const char *key, const uint8_t *digest, uint64_t seq,
                    uint32_t deliveries, const sbx_completion *verdict, uint64_t at, uint64_t *rev)
{
    size_t rlen = 0;
    uint8_t *r = sbxq_record_pack(verdict != NULL ? SBXQ_DONE : SBXQ_CLAIMED, digest, seq,
                                  deliveries, q->cfg->node, verdict, &rlen);
    if (r == NULL)
        return CLAIM_NOMEM;
    natsStatus s = at > 0 ? kvStore_Update(rev, q->q->kv, key, r, (int)rlen, at)
                          : kvStore_Create(rev, q->q->kv, key, r, (int)rlen);
    int how = s != NATS_OK ? CLAIM_LOST : verdict != NULL ? CLAIM_DONE : CLAIM_RUN;
    if (how == CLAIM_DONE)
        sbxq_notify(q->q, key, r, rlen);
    free(r);
    return how;
}

/* Long because it is one queue message's life in order (decode, heartbeat, the refusals decided
 * before a claim, the claim loop, run, store, ack), and the heartbeat started early must stop at
 * its one exit. */
static void handle(worker_queue *q, natsMsg *msg, bool node_bound)
{
    jsMsgMetaData *meta = NULL;
    if (natsMsg_GetMetaData(&meta, msg) != NATS_OK) {
        note(q, "dropping a message without JetStream metadata on %s", natsMsg_GetSubject(msg));
        natsMsg_Term(msg, NULL);
        return;
    }
    uint64_t seq = meta->Sequence.Stream;
    uint32_t deliveries =
        meta->NumDelivered > UINT32_MAX ? UINT32_MAX : (uint32_t)meta->NumDelivered;
    int64_t published_ms = meta->Timestamp / 1000000;
    jsMsgMetaData_Destroy(meta);

    sbx_request *req = NULL;
    sbx_error err = {0};
    if (sbx_request_decode((const uint8_t *)natsMsg_GetData(msg),
                           (size_t)natsMsg_GetDataLength(msg),
                           (size_t)q->cfg->worker.max_message_bytes, &req, &err) != SBX_OK ||
        req->task_id == NULL || req->task_id[0] == '\0') {
        /* No task to answer: nobody can be waiting on a key we cannot compute. */
        note(q, "dropping message %llu: not an sbx.v1 request with a task_id (%s)",
             (unsigned long long)seq, err.message[0] ? err.message : "no task_id");
        sbx_request_free(req);
        natsMsg_Term(msg, NULL);
        return;
    }
    /* From here on the heartbeat keeps the message ours while we wait on the bucket or run. */
    inflight f;
    track(q, &f, msg);
    const char *subject = sbx_request_subject(req);
    char key[SBXQ_KEY_LEN];
    sbxq_key(subject, req->task_id, key);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    sbx_request_digest(req, digest);

    /* Decided before any claim: requests that will not run. */
    sbx_completion *verdict = caller_verdict(q, msg, req, subject);
    /* The submitter's word on its record's revision is taken only from a caller the callers
     * table vouches for as this principal: the claim below is written with this worker's rights,
     * and from anyone else it would let a tenant who knows another's task_id overwrite that
     * tenant's record (the read the compare-and-set replaces is what refuses them: their
     * request's digest is not the record's). */
    uint64_t queued_at = q->auth.required && verdict == NULL ? header_revision(msg) : 0;
    if (verdict == NULL && node_bound &&
        wall_ms() - published_ms > q->cfg->broker.queue.node_wait_ms)
        verdict = sbxq_unavailable(req->task_id, q->cfg->node, q->cfg->broker.queue.node_wait_ms);

    /* Claim (or find the task finished, or owned by a live delivery). First at the revision
     * the submitter made the record QUEUED (SBXQ_HDR_REVISION, vouched for above): nothing
     * written since, so the record is still that, and the compare-and-set alone claims it (one
     * round trip to the bucket instead of two); else read it. */
    uint64_t rev = 0;
    int how = queued_at > 0 ? claim_at(q, key, digest, seq, deliveries, verdict, queued_at, &rev)
                            : CLAIM_LOST;
    if (how == CLAIM_NOMEM)
        goto out_keep;
    if (how == CLAIM_DONE)
        goto out_ack;
    bool run = how == CLAIM_RUN;
    for (int attempt = 0; attempt < QUEUE_CLAIM_ATTEMPTS && !run; attempt++) {
        uint8_t *data = NULL;
        size_t len = 0;
        int found = sbxq_get(q->q, key, &data, &len, &rev, &err);
        /* The bucket's leader may be moving to another server: the message is kept alive by
         * the heartbeat meanwhile, instead of spending its deliveries. */
        for (int again = 1; found < 0 && again < QUEUE_BUCKET_ATTEMPTS; again++) {
            sleep_ms(QUEUE_STORE_RETRY_MS);
            found = sbxq_get(q->q, key, &data, &len, &rev, &err);
        }
        if (found < 0) {
            note(q, "task %s: %s; leaving the message for redelivery", req->task_id, err.message);
            free(data);
            goto out_keep;
        }
        sbxq_record rec;
        if (found == 1 && !sbxq_record_parse(data, len, &rec)) {
            note(q, "task %s: its record does not decode; dropping the message", req->task_id);
            free(data);
            goto out_term;
        }
        if (found == 1 && memcmp(rec.digest, digest, SBX_REQUEST_DIGEST_LEN) != 0) {
            /* Another request under this key made the task; its submitter was refused. */
            free(data);
            goto out_ack;
        }
        if (found == 1 && rec.state == SBXQ_DONE) {
            sbxq_notify(q->q, key, data, len); /* a waiter may have missed it */
            free(data);
            goto out_ack;
        }
        if (found == 1 && rec.state == SBXQ_CLAIMED) {
            if (rec.seq != seq) { /* a second message of the same task (a resubmit) */
                free(data);
                goto out_ack;
            }
            if (deliveries <= rec.deliveries) { /* a delivery older than the claim's */
                free(data);
                goto out_keep;
            }
            note(q,
                 "task %s: delivery %u takes over from delivery %u on node '%s' (its worker "
                 "stopped without completing; at-least-once)",
                 req->task_id, deliveries, rec.deliveries, rec.node);
        }
        free(data);
        how = claim_at(q, key, digest, seq, deliveries, verdict, found == 1 ? rev : 0, &rev);
        if (how == CLAIM_NOMEM)
            goto out_keep;
        if (how == CLAIM_DONE)
            goto out_ack;
        run = how == CLAIM_RUN;
    }
    if (!run)
        goto out_keep;

    {
        char csubj[SBXQ_SUBJECT_MAX], osubj[SBXQ_SUBJECT_MAX];
        sbxq_subject(q->q, "cancel", key, csubj);
        sbxq_subject(q->q, "out", key, osubj);
        cancel_box *cb = calloc(1, sizeof(*cb));
        natsSubscription *csub = NULL;
        if (cb != NULL) {
            atomic_store(&cb->refs, 1);
            if (natsConnection_Subscribe(&csub, q->q->nc, csubj, on_cancel, cb) == NATS_OK) {
                atomic_fetch_add(&cb->refs, 1);
                if (natsSubscription_SetOnCompleteCB(csub, cancel_release, cb) != NATS_OK)
                    atomic_fetch_add(&cb->refs, 1); /* never freed rather than freed early */
            }
        }
        const char *want_stream = NULL;
        output_ctx octx = {.q = q, .subject = osubj};
        sbx_engine_hooks hooks = {.cancel = cb != NULL ? &cb->flag : NULL};
        if (natsMsgHeader_Get(msg, SBXQ_HDR_STREAM, &want_stream) == NATS_OK) {
            hooks.on_output = on_output;
            hooks.on_output_arg = &octx;
        }
        sbx_completion *c = NULL;
        sbx_broker_submit(q->broker, req, SBX_WAIT_FOREVER, &hooks, &c);
        sbxq_unsubscribe(q->q, csub, false);
        if (cb != NULL)
            cancel_release(cb);
        if (c == NULL)
            c = refusal(req, SBX_E_INTERNAL, "the worker's broker returned no completion");
        if (c == NULL)
            goto out_keep;
        c->deliveries = deliveries;
        if (deliveries > 1)
            sbx_completion_add_notice(c,
                                      "delivered %u times (at-least-once: an earlier delivery's "
                                      "worker stopped before completing, so it ran again)",
                                      deliveries);
        size_t rlen = 0;
        uint8_t *r = done_record(q, req, digest, seq, deliveries, &c, &rlen);
        sbx_completion_free(c);
        if (r == NULL)
            goto out_keep;
        uint64_t nrev = 0;
        natsStatus s = store(q, key, r, rlen, rev, &nrev);
        if (s == NATS_OK)
            sbxq_notify(q->q, key, r, rlen);
        free(r);
        if (s != NATS_OK) {
            note(q, "task %s: storing its completion failed (%s): %s", req->task_id,
                 natsStatus_GetText(s),
                 "another delivery took the task over, or the bucket is unreachable; the "
                 "message is left to JetStream");
            goto out_keep;
        }
    }
out_ack:
    untrack(q, &f);
    natsMsg_Ack(msg, NULL);
    goto out;
out_keep:
    untrack(q, &f);
    goto out;
out_term:
    untrack(q, &f);
    natsMsg_Term(msg, NULL);
out:
    sbx_completion_free(verdict);
    sbx_request_free(req);
    natsMsg_Destroy(msg);
}

/* ---- consumers ---------------------------------------------------------------------------- */

static sbx_status ensure_consumer(worker_queue *q, const char *durable, const char *filter,
                                  int64_t max_ack_pending, sbx_error *err)
{
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetConsumerInfo(&ci, q->q->js, q->q->stream, durable, NULL, &jerr);
    if (s == NATS_OK) {
        jsConsumerInfo_Destroy(ci);
        return SBX_OK;
    }
    if (s != NATS_NOT_FOUND)
        return sbxq_fail(err, SBX_E_BROKER, s, "looking up consumer %s", durable);
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable;
    cc.FilterSubject = filter;
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = q->cfg->broker.queue.ack_wait_ms * 1000000LL;
    cc.MaxDeliver = QUEUE_MAX_DELIVER;
    cc.MaxAckPending = max_ack_pending;
    s = js_AddConsumer(&ci, q->q->js, q->q->stream, &cc, NULL, &jerr);
    jsConsumerInfo_Destroy(ci);
    if (s != NATS_OK && jerr != JSConsumerNameExistErr)
        return sbxq_fail(err, SBX_E_BROKER, s, "creating consumer %s (JetStream error %d)", durable,
                         (int)jerr);
    return SBX_OK;
}

static void *consumer_main(void *arg)
{
    consumer_thread *t = arg;
    worker_queue *q = t->q;
    const char *durable = t->node_bound ? q->node_consumer : "workers";
    const char *subject = t->node_bound ? q->node_subject : q->work_subject;
    natsSubscription *sub = NULL;
    while (!atomic_load(&q->stop)) {
        if (sub == NULL) {
            jsSubOptions so;
            jsSubOptions_Init(&so);
            so.Stream = q->q->stream;
            so.Consumer = durable;
            jsErrCode jerr = 0;
            natsStatus s = js_PullSubscribe(&sub, q->q->js, subject, durable, NULL, &so, &jerr);
            if (s != NATS_OK) {
                sub = NULL;
                sleep_ms(QUEUE_FETCH_RETRY_MS);
                continue;
            }
        }
        natsMsgList list = {0};
        natsStatus s = natsSubscription_Fetch(&list, sub, 1, QUEUE_FETCH_WAIT_MS, NULL);
        if (s == NATS_TIMEOUT)
            continue;
        if (s != NATS_OK) {
            sleep_ms(QUEUE_FETCH_RETRY_MS);
            continue;
        }
        for (int i = 0; i < list.Count; i++) {
            handle(q, list.Msgs[i], t->node_bound);
            list.Msgs[i] = NULL; /* handle destroyed it */
        }
        natsMsgList_Destroy(&list);
    }
    sbxq_unsubscribe(q->q, sub, false);
    return NULL;
}

sbx_status worker_queue_start(const sbx_config *cfg, sbx_broker *broker, int capacity, FILE *log,
                              worker_queue **out, sbx_error *err)
{
    *out = NULL;
    if (cfg->broker.queue.url == NULL)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "sandbox.worker.serve includes the queue, but "
                             "sandbox.broker.queue.url is not set (nats://HOST:PORT or "
                             "tls://HOST:PORT of the NATS servers)");
    worker_queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    q->cfg = cfg;
    q->broker = broker;
    q->log = log;
    q->capacity = capacity > 0 ? capacity : (int)cfg->broker.threads;
    if (q->capacity < 1)
        q->capacity = 1;
    pthread_mutex_init(&q->mu, NULL);
    sbx_cond_init_mono(&q->hb_cv);
    sbx_status st = worker_auth_init(&q->auth, &cfg->worker, err);
    char client[512];
    snprintf(client, sizeof client, "sbx-worker %s", cfg->node);
    if (st == SBX_OK)
        st = sbxq_connect(&cfg->broker.queue, client, &q->q, err);
    if (st == SBX_OK) {
        snprintf(q->work_subject, sizeof q->work_subject, "%s.work", q->q->name);
        sbxq_node_subject(q->q, cfg->node, q->node_subject);
        sbxq_node_consumer(cfg->node, q->node_consumer);
        /* The shared consumer's pending limit is the fleet's, not this worker's: each worker
         * bounds itself by pulling only with a free thread. The node's is this worker's. */
        st = ensure_consumer(q, "workers", q->work_subject, -1, err);
    }
    if (st == SBX_OK)
        st = ensure_consumer(q, q->node_consumer, q->node_subject, q->capacity, err);
    if (st == SBX_OK) {
        q->threads = calloc((size_t)q->capacity * 2, sizeof(*q->threads));
        if (q->threads == NULL)
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    for (int i = 0; st == SBX_OK && q->threads != NULL && i < q->capacity * 2; i++) {
        consumer_thread *t = &q->threads[i];
        t->q = q;
        t->node_bound = i >= q->capacity;
        if (pthread_create(&t->tid, NULL, consumer_main, t) != 0)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "cannot start a consumer thread");
        else
            t->started = true;
        q->n_threads = i + 1;
    }
    if (st == SBX_OK) {
        if (pthread_create(&q->hb, NULL, heartbeat_main, q) != 0)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "cannot start the heartbeat thread");
        else
            q->hb_started = true;
    }
    if (st != SBX_OK) {
        worker_queue_stop(q);
        return st;
    }
    *out = q;
    return SBX_OK;
}

void worker_queue_stop(worker_queue *q)
{
    if (q == NULL)
        return;
    atomic_store(&q->stop, 1);
    for (int i = 0; i < q->n_threads; i++)
        if (q->threads[i].started)
            pthread_join(q->threads[i].tid, NULL);
    if (q->hb_started) {
        pthread_mutex_lock(&q->mu);
        q->hb_stop = true;
        pthread_cond_broadcast(&q->hb_cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->hb, NULL);
    }
    free(q->threads);
    if (!sbxq_close_within(q->q, QUEUE_CLOSE_WAIT_MS))
        note(q,
             "the NATS connection did not close within %d ms of the drain (the client library "
             "hangs in it); going on without it",
             QUEUE_CLOSE_WAIT_MS);
    worker_auth_free(&q->auth);
    pthread_cond_destroy(&q->hb_cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}
