/* embedded.c - the embedded broker (DESIGN §6): runs the engine inline in the caller's thread,
 * always synchronously. It keeps the bounded completion LRU for result()/discard() and dedups
 * like every in-process broker, by (principal subject, task_id) (tasks.h): a task running in
 * another thread is joined, a done one returns its stored completion.
 * This file must not start threads.
 */
#include <stdlib.h>

#include "broker/tasks.h"
#include "broker/broker_impl.h"

typedef struct embedded {
    sbx_engine *engine; /* borrowed */
    bt_store store;
} embedded;

static sbx_status emb_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                             const sbx_engine_hooks *hooks, sbx_completion **out)
{
    (void)wait_ms; /* always synchronous */
    embedded *e = sbx_broker_impl(b);
    const char *id = req->task_id != NULL ? req->task_id : "";
    const char *subject = sbx_request_subject(req);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    bool keyed = id[0] != '\0' && sbx_request_digest(req, digest);
    pthread_mutex_lock(&e->store.mu);
    bt_task *t = keyed ? bt_find(&e->store, subject, id) : NULL;
    if (t != NULL && !bt_same_request(t, digest)) {
        pthread_mutex_unlock(&e->store.mu);
        *out = bt_conflict(subject, id);
        return SBX_OK;
    }
    if (t != NULL) {
        bt_wait(&e->store, t, SBX_WAIT_FOREVER, out);
        pthread_mutex_unlock(&e->store.mu);
        if (*out == NULL)
            *out = sbx_completion_fail(id, SBX_E_INTERNAL, "out of memory copying a completion");
        return SBX_OK;
    }
    t = keyed ? bt_insert(&e->store, subject, id, digest) : NULL;
    if (t != NULL)
        t->state = BT_RUNNING;
    pthread_mutex_unlock(&e->store.mu);

    int64_t started = sbx_broker_record_start(b);
    sbx_completion *c = sbx_engine_process(e->engine, req, hooks);
    if (c == NULL)
        c = sbx_completion_fail(id, SBX_E_INTERNAL, "out of memory producing a completion");
    sbx_broker_record(b, req, c, started, 0);
    if (t == NULL) { /* no task_id (the engine refused it) or no memory: nothing to keep */
        *out = c;
        return SBX_OK;
    }
    bt_done_prepare(t, c); /* t is ours until bt_complete publishes it; c stays ours */
    pthread_mutex_lock(&e->store.mu);
    if (bt_abandoned(hooks, c))
        t->discarded = true; /* answers those waiting, not kept (tasks.h) */
    bt_task *dead = NULL;
    bt_waiter *fire = bt_complete(&e->store, t, NULL, &dead); /* none: joiners here block */
    pthread_mutex_unlock(&e->store.mu);
    bt_fire(fire);
    bt_free_dead(dead);
    *out = c;
    return SBX_OK;
}

/* No thread to run it on: runs inline, like submit, then calls back. */
static sbx_status emb_submit_async(sbx_broker *b, const sbx_request *req,
                                   const sbx_broker_async *cb)
{
    sbx_engine_hooks hooks = {
        .on_output = cb->on_output, .on_output_arg = cb->arg, .cancel = cb->cancel};
    sbx_completion *c = NULL;
    sbx_status st = emb_submit(b, req, SBX_WAIT_FOREVER, &hooks, &c);
    cb->on_done(cb->arg, st, c);
    return st;
}

static sbx_status emb_describe(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    embedded *e = sbx_broker_impl(b);
    return sbx_engine_describe(e->engine, out, err);
}

static sbx_status emb_result(sbx_broker *b, const char *subject, const char *task_id,
                             int64_t wait_ms, sbx_completion **out)
{
    embedded *e = sbx_broker_impl(b);
    pthread_mutex_lock(&e->store.mu);
    bt_task *t = bt_find(&e->store, subject, task_id);
    sbx_status st = SBX_OK;
    if (t == NULL || t->discarded)
        st = SBX_E_INVALID_ARGUMENT;
    else
        bt_wait(&e->store, t, wait_ms, out);
    pthread_mutex_unlock(&e->store.mu);
    return st;
}

static void emb_discard(sbx_broker *b, const char *subject, const char *task_id)
{
    embedded *e = sbx_broker_impl(b);
    pthread_mutex_lock(&e->store.mu);
    bt_discard(&e->store, subject, task_id);
    pthread_mutex_unlock(&e->store.mu);
}

static void emb_close(sbx_broker *b)
{
    (void)b; /* nothing runs outside the callers' own threads */
}

static void emb_destroy(sbx_broker *b)
{
    embedded *e = sbx_broker_impl(b);
    bt_store_destroy(&e->store);
    free(e);
}

static const sbx_broker_vtable embedded_vtable = {
    .flavor = "embedded",
    .submit = emb_submit,
    .submit_async = emb_submit_async,
    .describe = emb_describe,
    .result = emb_result,
    .discard = emb_discard,
    .close = emb_close,
    .destroy = emb_destroy,
};

sbx_status sbx_broker_open_embedded(sbx_engine *engine, sbx_broker **out, sbx_error *err)
{
    *out = NULL;
    if (engine == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "embedded broker needs an engine");
    embedded *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the embedded broker");
    e->engine = engine;
    /* broker.lru_size of the engine's configuration, as the other brokers honour it */
    const sbx_config *cfg = sbx_engine_config(engine);
    int64_t lru = cfg != NULL ? cfg->broker.lru_size : 0;
    bt_store_init(&e->store, lru > 0 ? (size_t)lru : SBX_BROKER_DEFAULT_LRU_SIZE);
    *out = sbx_broker_wrap(&embedded_vtable, e);
    if (*out == NULL) {
        bt_store_destroy(&e->store);
        free(e);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the embedded broker");
    }
    return SBX_OK;
}
