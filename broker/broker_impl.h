/* broker_impl.h - the interface a broker flavor implements (the files of broker/ only): the
 * vtable, the wrapper that holds it with the recorder, and the recording hook. Not installed,
 * not part of the API: an embedder opens brokers with sbx_broker_open* and never sees a
 * vtable (compiled hidden like every non-public symbol). */
#ifndef SBX_BROKER_IMPL_H
#define SBX_BROKER_IMPL_H

#include "sbx/broker.h"

typedef struct sbx_broker_vtable {
    const char *flavor;
    sbx_status (*submit)(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                         const sbx_engine_hooks *hooks, sbx_completion **out);
    sbx_status (*submit_async)(sbx_broker *b, const sbx_request *req, const sbx_broker_async *cb);
    sbx_status (*describe)(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err);
    sbx_status (*result)(sbx_broker *b, const char *subject, const char *task_id, int64_t wait_ms,
                         sbx_completion **out);
    void (*discard)(sbx_broker *b, const char *subject, const char *task_id);
    bool (*load)(sbx_broker *b, sbx_broker_load *out); /* optional */
    void (*close)(sbx_broker *b);
    void (*destroy)(sbx_broker *b);
} sbx_broker_vtable;

/* Wraps a broker implementation: the common part (vtable, recorder) around impl. The vtable's
 * destroy frees impl (and must not free b); sbx_broker_free frees the wrapper. NULL on ENOMEM. */
sbx_broker *sbx_broker_wrap(const sbx_broker_vtable *vt, void *impl);
/* The impl pointer given to sbx_broker_wrap. */
void *sbx_broker_impl(const sbx_broker *b);

/* Appends one Recording frame (req, c, this broker's flavor, the two timestamps in unix ms)
 * when recording is on (sbx_broker_record_to); a no-op otherwise. Thread-safe. Implementations
 * call it once per completed request, before handing the completion out. finished_at_ms 0: now
 * (the clock is read only when recording); started_at_ms 0 (recording began while the request
 * ran): the finish. */
void sbx_broker_record(sbx_broker *b, const sbx_request *req, const sbx_completion *c,
                       int64_t started_at_ms, int64_t finished_at_ms);
/* A request's start for sbx_broker_record: now when recording is on, else 0 (no clock read on
 * the hot path: a request costs a few microseconds, a clock read on a VM a few hundred ns). */
int64_t sbx_broker_record_start(const sbx_broker *b);

#endif
