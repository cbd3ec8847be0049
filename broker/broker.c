/* broker.c - what every broker shares (DESIGN §6): the public entry points that dispatch to a
 * flavor's vtable, the recorder hookup, and sbx_broker_open by configured flavor.
 * This file must not run requests or know any flavor's internals.
 */
#include "broker/broker_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/recorder.h"

struct sbx_broker {
    const sbx_broker_vtable *vt;
    void *impl;
    pthread_mutex_t rec_mu; /* guards recorder (swapped by record_to while workers append) */
    sbx_recorder *recorder;
    bool closed; /* close() ran (idempotence); guarded by rec_mu */
};

sbx_broker *sbx_broker_wrap(const sbx_broker_vtable *vt, void *impl)
{
    sbx_broker *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return NULL;
    b->vt = vt;
    b->impl = impl;
    pthread_mutex_init(&b->rec_mu, NULL);
    return b;
}

void *sbx_broker_impl(const sbx_broker *b)
{
    return b != NULL ? b->impl : NULL;
}

const char *sbx_broker_flavor(const sbx_broker *b)
{
    return b != NULL ? b->vt->flavor : "none";
}

sbx_status sbx_broker_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                             const sbx_engine_hooks *hooks, sbx_completion **out)
{
    *out = NULL;
    if (b == NULL || req == NULL) {
        *out = sbx_completion_fail(req != NULL ? req->task_id : "", SBX_E_INVALID_ARGUMENT,
                                   "sbx_broker_submit: no broker or no request");
        return SBX_E_INVALID_ARGUMENT;
    }
    if (wait_ms < 0 && wait_ms != SBX_WAIT_FOREVER)
        wait_ms = 0;
    return b->vt->submit(b, req, wait_ms, hooks, out);
}

sbx_status sbx_broker_submit_async(sbx_broker *b, const sbx_request *req,
                                   const sbx_broker_async *cb)
{
    if (cb == NULL || cb->on_done == NULL)
        return SBX_E_INVALID_ARGUMENT; /* nobody to hand a completion to */
    if (b == NULL || req == NULL) {
        sbx_completion *c =
            sbx_completion_fail(req != NULL ? req->task_id : "", SBX_E_INVALID_ARGUMENT,
                                "sbx_broker_submit_async: no broker or no request");
        if (c != NULL)
            cb->on_done(cb->arg, SBX_E_INVALID_ARGUMENT, c);
        return SBX_E_INVALID_ARGUMENT;
    }
    return b->vt->submit_async(b, req, cb);
}

sbx_status sbx_broker_describe(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    *out = NULL;
    if (b == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_broker_describe: no broker");
    return b->vt->describe(b, out, err);
}

sbx_status sbx_broker_result(sbx_broker *b, const char *subject, const char *task_id,
                             int64_t wait_ms, sbx_completion **out)
{
    *out = NULL;
    if (b == NULL || task_id == NULL)
        return SBX_E_INVALID_ARGUMENT;
    return b->vt->result(b, subject != NULL ? subject : "", task_id, wait_ms, out);
}

void sbx_broker_discard(sbx_broker *b, const char *subject, const char *task_id)
{
    if (b != NULL && task_id != NULL && b->vt->discard != NULL)
        b->vt->discard(b, subject != NULL ? subject : "", task_id);
}

bool sbx_broker_get_load(sbx_broker *b, sbx_broker_load *out)
{
    memset(out, 0, sizeof(*out));
    return b != NULL && b->vt->load != NULL && b->vt->load(b, out);
}

void sbx_broker_close(sbx_broker *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->rec_mu);
    bool was = b->closed;
    b->closed = true;
    pthread_mutex_unlock(&b->rec_mu);
    if (!was && b->vt->close != NULL)
        b->vt->close(b);
}

void sbx_broker_free(sbx_broker *b)
{
    if (b == NULL)
        return;
    sbx_broker_close(b);
    if (b->vt->destroy != NULL)
        b->vt->destroy(b);
    sbx_recorder_close(b->recorder);
    pthread_mutex_destroy(&b->rec_mu);
    free(b);
}

sbx_status sbx_broker_record_to(sbx_broker *b, const char *path, sbx_error *err)
{
    return sbx_broker_record_rotating(b, path, 0, 0, err);
}

sbx_status sbx_broker_record_rotating(sbx_broker *b, const char *path, uint64_t max_bytes,
                                      unsigned keep, sbx_error *err)
{
    sbx_recorder *r = NULL;
    if (path != NULL) {
        sbx_status st = sbx_recorder_open_rotating(path, max_bytes, keep, &r, err);
        if (st != SBX_OK)
            return st;
    }
    pthread_mutex_lock(&b->rec_mu);
    sbx_recorder *old = b->recorder;
    __atomic_store_n(&b->recorder, r, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&b->rec_mu);
    sbx_recorder_close(old);
    return SBX_OK;
}

void sbx_broker_record(sbx_broker *b, const sbx_request *req, const sbx_completion *c,
                       int64_t started_at_ms, int64_t finished_at_ms)
{
    if (b == NULL || req == NULL || c == NULL)
        return;
    /* Unlocked peek: recording is off on the hot path almost always. A racing record_to is
     * settled under the lock below. */
    if (__atomic_load_n(&b->recorder, __ATOMIC_RELAXED) == NULL)
        return;
    if (finished_at_ms == 0)
        finished_at_ms = sbx_now_ms();
    if (started_at_ms == 0)
        started_at_ms = finished_at_ms;
    sbx_recording rec = SBX__V1__RECORDING__INIT;
    rec.request = (sbx_request *)req;
    rec.completion = (sbx_completion *)c;
    rec.broker = (char *)b->vt->flavor;
    rec.started_at_ms = started_at_ms;
    rec.finished_at_ms = finished_at_ms;
    pthread_mutex_lock(&b->rec_mu);
    if (b->recorder != NULL)
        sbx_recorder_append(b->recorder, &rec, NULL);
    pthread_mutex_unlock(&b->rec_mu);
}

int64_t sbx_broker_record_start(const sbx_broker *b)
{
    return b != NULL && __atomic_load_n(&b->recorder, __ATOMIC_RELAXED) != NULL ? sbx_now_ms() : 0;
}

sbx_status sbx_broker_open(const sbx_config *cfg, sbx_engine *engine, sbx_broker **out,
                           sbx_error *err)
{
    *out = NULL;
    const char *flavor = cfg != NULL && cfg->broker.flavor != NULL ? cfg->broker.flavor : "thread";
    if (strcmp(flavor, "remote") == 0) {
        sbx_remote_config remote = cfg->broker.remote;
        remote.lru_size = cfg->broker.lru_size; /* one lru_size for every flavor */
        return sbx_broker_open_remote(&remote, out, err);
    }
    if (strcmp(flavor, "queue") == 0)
        return sbx_broker_open_queue(&cfg->broker.queue, out, err);
    if (engine == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "broker flavor '%s' runs the engine in this process: pass an engine",
                             flavor);
    if (strcmp(flavor, "embedded") == 0)
        return sbx_broker_open_embedded(engine, out, err);
    if (strcmp(flavor, "thread") == 0) {
        if (cfg == NULL) /* the default flavor, with the default sizes */
            return sbx_broker_open_thread(engine, NULL, out, err);
        sbx_thread_broker_opts o = {
            .threads = (int)cfg->broker.threads,
            .queue_depth = (int)cfg->broker.queue_depth,
            .lru_size = (int)cfg->broker.lru_size,
            .principal_threads = (int)cfg->broker.principal_threads,
        };
        return sbx_broker_open_thread(engine, &o, out, err);
    }
    return sbx_error_set(err, SBX_E_CONFIG,
                         "unknown broker flavor '%s'; use embedded, thread, remote or queue",
                         flavor);
}
