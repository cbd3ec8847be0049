/* engine.h - the one place that turns an ExecutionRequest into an ExecutionCompletion
 * (DESIGN §5). Every broker and the worker call it; nothing else talks to providers.
 *
 * sbx_engine_process never fails to produce a completion: machinery failures are FAILED or
 * TIMED_OUT completions with an error code, and a failing program is a SUCCEEDED completion
 * whose result says so. The engine is thread-safe: requests of one session are serialized by a
 * per-session lock, different sessions run in parallel.
 */
#ifndef SBX_ENGINE_H
#define SBX_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef struct sbx_engine sbx_engine;

/* Per-call hooks: streaming output and cancellation. May be NULL. Borrowed for the call. */
typedef struct sbx_engine_hooks {
    sbx_output_fn on_output; /* output chunks as they are produced */
    void *on_output_arg;
    const volatile int *cancel; /* non-zero: abandon (client gone, gRPC deadline) */
} sbx_engine_hooks;

/* Creates an engine over cfg (borrowed: must outlive the engine). Reads or creates the binding
 * secret (cfg->secret_file, 0600). Providers are opened lazily, once per profile. */
sbx_status sbx_engine_new(const sbx_config *cfg, sbx_engine **out, sbx_error *err);
/* What an engine has done with one profile's sandboxes since it started (metrics). */
typedef struct sbx_engine_profile_stats {
    const char *profile;        /* the profile's name (valid while the engine lives) */
    const char *provider;       /* its provider */
    uint64_t sandboxes_created; /* made by create (new sessions, one-shots, recreations) */
    uint64_t sandboxes_removed; /* destroyed by the engine, or found gone on reconnect */
    uint64_t sandboxes_live;    /* listed + created - removed: held alive. listed: the
                                   per_session sandboxes the provider reported alive on this node,
                                   made before this engine; counted when the profile opens under
                                   principal_sandboxes, else by sbx_engine_sweep (a worker's
                                   start). A provider's own idle expiry is seen when the session
                                   next reconnects. */
} sbx_engine_profile_stats;

/* Fills out[0..cap) with one entry per configured profile, in configuration order; returns the
 * count. Thread-safe, no provider call. */
size_t sbx_engine_stats(sbx_engine *e, sbx_engine_profile_stats *out, size_t cap);

/* Closes every opened provider. NULL is fine. */
void sbx_engine_free(sbx_engine *engine);

/* Runs one request. Always returns a completion (NULL only when memory is exhausted); the
 * caller frees it with sbx_completion_free. req is borrowed. */
sbx_completion *sbx_engine_process(sbx_engine *engine, const sbx_request *req,
                                   const sbx_engine_hooks *hooks);

/* Profiles and their capabilities (for Describe and `sbx providers`). Free with
 * sbx_message_free. */
sbx_status sbx_engine_describe(sbx_engine *engine, Sbx__V1__DescribeResponse **out, sbx_error *err);

/* Sweeps every managed profile whose provider can (ops->sweep): removes per_call sandboxes
 * whose owner process is gone and dead sandboxes, appending "profile: sandbox_id" of each to
 * *removed (the caller reports and clears it). A profile whose provider cannot open is
 * skipped; the first sweep error is returned after the others ran. Then it counts the
 * per_session sandboxes each provider still lists (ops->list_held) for sandboxes_live. Workers
 * call it at start. */
sbx_status sbx_engine_sweep(sbx_engine *engine, sbx_strlist *removed, sbx_error *err);

/* idle_action: pause. Pauses every session of such a profile that this engine saw used and that
 * has been idle (no request, no detached command running) for longer than its profile's
 * idle_timeout_s, appending "profile: sandbox_id" of each to *paused (may be NULL). The next
 * request on a paused session resumes it (its completion says so). An engine with such a
 * profile runs this itself in a thread of its own, a few times per timeout; call it to pause
 * at a moment of your choosing. The first pause error is returned after the others ran. */
sbx_status sbx_engine_idle_pass(sbx_engine *engine, sbx_strlist *paused, sbx_error *err);

/* Session lock objects currently held or waited for (they are freed when unused); for tests
 * and metrics. */
size_t sbx_engine_session_locks(sbx_engine *engine);

/* The configuration the engine runs on. */
const sbx_config *sbx_engine_config(const sbx_engine *engine);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
