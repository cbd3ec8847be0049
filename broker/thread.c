/* thread.c - the thread broker (DESIGN §6): N executor threads and a bounded queue in the
 * caller's process. submit() waits up to wait_ms and otherwise leaves the task pending for
 * result(); a full queue is RESOURCE_EXHAUSTED, never an unbounded pile-up; close() drains.
 *
 * One session's requests run one at a time and in order: a request whose session is busy waits
 * in that session's backlog instead of occupying an executor (which would block on the engine's
 * session lock while other sessions starve). Different sessions run in parallel. A task_id seen
 * again by the same principal joins the existing task (queued, running or done) instead of
 * running twice; reused with a different request it is refused (tasks.h).
 * Locking: everything below is guarded by store.mu; executors run requests without it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/tasks.h"
#include "sbx/broker.h"

/* Most executor threads: beyond this, threads cost memory and context switches while providers
 * wait on I/O; scale out with more workers instead. */
#define THREAD_BROKER_MAX_THREADS 1024
/* Largest queue: bounds memory held by accepted, not yet running requests. */
#define THREAD_BROKER_MAX_QUEUE (1 << 20)
/* Largest completion LRU accepted from configuration. */
#define THREAD_BROKER_MAX_LRU (1 << 20)
/* Session backlog buckets: a power of two above the concurrent sessions of one worker. */
#define SESSION_BUCKETS 1024

/* A session with work queued or running. Freed when idle (nothing running, empty backlog). */
typedef struct bt_session {
    struct bt_session *next;
    uint64_t hash;
    bool busy; /* one of its tasks is in the ready queue or running */
    bt_task *backlog_head, *backlog_tail;
    char id[];
} bt_session;

typedef struct thread_broker {
    sbx_broker *self;    /* wrapper, for recording */
    sbx_engine *engine;  /* borrowed */
    bt_store store;      /* its mu guards every field below */
    pthread_cond_t work; /* ready queue non-empty, or closing */
    pthread_cond_t idle; /* queued + running reached zero */
    bt_task *ready_head, *ready_tail;
    bt_session *sessions[SESSION_BUCKETS];
    int queued; /* accepted, not yet running (ready + backlogs) */
    int running;
    int queue_depth;
    bool closing;
    pthread_t *threads;
    int n_threads;
} thread_broker;

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static bt_session *session_get(thread_broker *tb, const char *id)
{
    uint64_t h = hash_id(id);
    bt_session **bucket = &tb->sessions[h & (SESSION_BUCKETS - 1)];
    for (bt_session *s = *bucket; s != NULL; s = s->next)
        if (s->hash == h && strcmp(s->id, id) == 0)
            return s;
    size_t len = strlen(id);
    bt_session *s = calloc(1, sizeof(*s) + len + 1);
    if (s == NULL)
        return NULL;
    memcpy(s->id, id, len + 1);
    s->hash = h;
    s->next = *bucket;
    *bucket = s;
    return s;
}

static void session_release(thread_broker *tb, bt_session *s)
{
    bt_session **pp = &tb->sessions[s->hash & (SESSION_BUCKETS - 1)];
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    free(s);
}

static void ready_push(thread_broker *tb, bt_task *t)
{
    t->qnext = NULL;
    if (tb->ready_tail != NULL)
        tb->ready_tail->qnext = t;
    else
        tb->ready_head = t;
    tb->ready_tail = t;
    pthread_cond_signal(&tb->work);
}

/* Queues t: straight to the ready queue, or behind its session's running task. */
static void enqueue(thread_broker *tb, bt_task *t)
{
    tb->queued++;
    bt_session *s = t->session;
    if (s != NULL && s->busy) {
        t->qnext = NULL;
        if (s->backlog_tail != NULL)
            s->backlog_tail->qnext = t;
        else
            s->backlog_head = t;
        s->backlog_tail = t;
        return;
    }
    if (s != NULL)
        s->busy = true;
    ready_push(tb, t);
}

/* The session's running task finished: start its next one, or forget the idle session. */
static void session_done(thread_broker *tb, bt_session *s)
{
    if (s == NULL)
        return;
    bt_task *next = s->backlog_head;
    if (next != NULL) {
        s->backlog_head = next->qnext;
        if (s->backlog_head == NULL)
            s->backlog_tail = NULL;
        ready_push(tb, next);
        return;
    }
    session_release(tb, s);
}

static void *executor(void *arg)
{
    thread_broker *tb = arg;
    pthread_mutex_lock(&tb->store.mu);
    for (;;) {
        while (tb->ready_head == NULL && !(tb->closing && tb->queued == 0))
            pthread_cond_wait(&tb->work, &tb->store.mu);
        bt_task *t = tb->ready_head;
        if (t == NULL)
            break; /* closing and drained */
        tb->ready_head = t->qnext;
        if (tb->ready_head == NULL)
            tb->ready_tail = NULL;
        t->qnext = NULL;
        __atomic_store_n(&t->state, BT_RUNNING, __ATOMIC_RELEASE);
        tb->queued--;
        tb->running++;
        t->refs++; /* keep t alive while unlocked */
        const sbx_request *req = t->req;
        const sbx_engine_hooks *hooks = t->hooks;
        pthread_mutex_unlock(&tb->store.mu);

        sbx_completion *c = sbx_engine_process(tb->engine, req, hooks);
        if (c == NULL)
            c = sbx_completion_fail(t->id, SBX_E_INTERNAL, "out of memory producing a completion");
        sbx_broker_record(tb->self, req, c, t->started_at_ms, sbx_now_ms());

        pthread_mutex_lock(&tb->store.mu);
        t->refs--;
        bt_session *s = t->session;
        t->session = NULL;
        bt_complete(&tb->store, t, c); /* may free t (discarded, no waiter) */
        session_done(tb, s);
        tb->running--;
        if (tb->queued == 0 && tb->running == 0)
            pthread_cond_broadcast(&tb->idle);
        if (tb->closing && tb->queued == 0)
            pthread_cond_broadcast(&tb->work);
    }
    pthread_mutex_unlock(&tb->store.mu);
    return NULL;
}

static sbx_status tb_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                            const sbx_engine_hooks *hooks, sbx_completion **out)
{
    thread_broker *tb = sbx_broker_impl(b);
    const char *id = req->task_id != NULL ? req->task_id : "";
    if (id[0] == '\0') {
        /* The engine refuses it without touching anything; no task to keep. */
        *out = sbx_engine_process(tb->engine, req, NULL);
        return SBX_OK;
    }
    const char *subject = sbx_request_subject(req);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    if (!sbx_request_digest(req, digest)) {
        *out =
            sbx_completion_fail(id, SBX_E_RESOURCE_EXHAUSTED, "out of memory queueing a request");
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    pthread_mutex_lock(&tb->store.mu);
    bt_task *t = bt_find(&tb->store, subject, id);
    if (t != NULL && !t->discarded) {
        if (!bt_same_request(t, digest)) {
            pthread_mutex_unlock(&tb->store.mu);
            *out = bt_conflict(subject, id);
            return SBX_OK;
        }
        bt_wait(&tb->store, t, wait_ms, out); /* dedup: join, never run twice */
        pthread_mutex_unlock(&tb->store.mu);
        return SBX_OK;
    }
    if (tb->closing) {
        pthread_mutex_unlock(&tb->store.mu);
        *out = sbx_completion_fail(id, SBX_E_BROKER, "the thread broker is closed; open a new one");
        return SBX_E_BROKER;
    }
    if (tb->queued >= tb->queue_depth) {
        int depth = tb->queue_depth;
        pthread_mutex_unlock(&tb->store.mu);
        *out = sbx_completion_fail(id, SBX_E_RESOURCE_EXHAUSTED,
                                   "the thread broker's queue is full (%d requests waiting); "
                                   "retry later or raise broker.queue_depth",
                                   depth);
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    /* A caller that waits forever keeps req alive until the completion: borrow it. Otherwise
     * the request must outlive the caller's wait: copy it. */
    bool borrow = wait_ms == SBX_WAIT_FOREVER;
    sbx_request *copy = borrow ? NULL : sbx_request_copy(req);
    const char *sid = req->session != NULL ? req->session->session_id : NULL;
    bt_session *s = sid != NULL && sid[0] != '\0' ? session_get(tb, sid) : NULL;
    /* A discarded entry with this id may still be running: the new entry is inserted at the
     * head of the bucket chain and shadows it; the old one finishes unseen. */
    bt_task *nt = (!borrow && copy == NULL) || (sid != NULL && sid[0] != '\0' && s == NULL)
                      ? NULL
                      : bt_insert(&tb->store, subject, id, digest);
    if (nt == NULL) {
        if (s != NULL && !s->busy && s->backlog_head == NULL)
            session_release(tb, s);
        pthread_mutex_unlock(&tb->store.mu);
        sbx_request_free(copy);
        *out =
            sbx_completion_fail(id, SBX_E_RESOURCE_EXHAUSTED, "out of memory queueing a request");
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    nt->req_owned = copy;
    nt->req = borrow ? req : copy;
    nt->hooks = hooks; /* broker.h: the caller keeps them valid until the completion */
    nt->session = s;
    nt->started_at_ms = sbx_now_ms();
    enqueue(tb, nt);
    bt_wait(&tb->store, nt, wait_ms, out);
    pthread_mutex_unlock(&tb->store.mu);
    return SBX_OK;
}

static sbx_status tb_result(sbx_broker *b, const char *subject, const char *task_id,
                            int64_t wait_ms, sbx_completion **out)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    bt_task *t = bt_find(&tb->store, subject, task_id);
    sbx_status st = SBX_OK;
    if (t == NULL || t->discarded)
        st = SBX_E_INVALID_ARGUMENT;
    else
        bt_wait(&tb->store, t, wait_ms, out);
    pthread_mutex_unlock(&tb->store.mu);
    return st;
}

static void tb_discard(sbx_broker *b, const char *subject, const char *task_id)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    bt_discard(&tb->store, subject, task_id);
    pthread_mutex_unlock(&tb->store.mu);
}

static void tb_close(sbx_broker *b)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    tb->closing = true;
    pthread_cond_broadcast(&tb->work);
    while (tb->queued > 0 || tb->running > 0)
        pthread_cond_wait(&tb->idle, &tb->store.mu);
    pthread_mutex_unlock(&tb->store.mu);
    for (int i = 0; i < tb->n_threads; i++)
        pthread_join(tb->threads[i], NULL);
    tb->n_threads = 0;
}

static void tb_destroy(sbx_broker *b)
{
    thread_broker *tb = sbx_broker_impl(b);
    if (tb == NULL)
        return;
    bt_store_destroy(&tb->store);
    pthread_cond_destroy(&tb->work);
    pthread_cond_destroy(&tb->idle);
    free(tb->threads);
    free(tb);
}

static const sbx_broker_vtable thread_vtable = {
    .flavor = "thread",
    .submit = tb_submit,
    .result = tb_result,
    .discard = tb_discard,
    .close = tb_close,
    .destroy = tb_destroy,
};

sbx_status sbx_broker_open_thread(sbx_engine *engine, const sbx_thread_broker_opts *opts,
                                  sbx_broker **out, sbx_error *err)
{
    *out = NULL;
    if (engine == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "thread broker needs an engine");
    int threads = opts != NULL && opts->threads > 0 ? opts->threads : 16;
    int depth = opts != NULL && opts->queue_depth > 0 ? opts->queue_depth : 1024;
    int lru = opts != NULL && opts->lru_size > 0 ? opts->lru_size : BT_DEFAULT_LRU;
    if (threads > THREAD_BROKER_MAX_THREADS || depth > THREAD_BROKER_MAX_QUEUE ||
        lru > THREAD_BROKER_MAX_LRU)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "thread broker: threads %d (max %d), queue_depth %d (max %d), "
                             "lru_size %d (max %d) out of range",
                             threads, THREAD_BROKER_MAX_THREADS, depth, THREAD_BROKER_MAX_QUEUE,
                             lru, THREAD_BROKER_MAX_LRU);
    thread_broker *tb = calloc(1, sizeof(*tb));
    if (tb == NULL || (tb->threads = calloc((size_t)threads, sizeof(pthread_t))) == NULL) {
        free(tb);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the thread broker");
    }
    tb->engine = engine;
    tb->queue_depth = depth;
    bt_store_init(&tb->store, (size_t)lru);
    pthread_cond_init(&tb->work, NULL);
    pthread_cond_init(&tb->idle, NULL);
    sbx_broker *b = sbx_broker_wrap(&thread_vtable, tb);
    if (b == NULL) {
        bt_store_destroy(&tb->store);
        free(tb->threads);
        free(tb);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the thread broker");
    }
    tb->self = b;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&tb->threads[i], NULL, executor, tb) != 0) {
            sbx_broker_free(b);
            return sbx_error_set(err, SBX_E_INTERNAL,
                                 "thread broker: cannot start executor thread %d of %d", i + 1,
                                 threads);
        }
        tb->n_threads++;
    }
    *out = b;
    return SBX_OK;
}
