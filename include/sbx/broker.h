/* broker.h - the common broker interface (DESIGN §6): embedded (inline), thread (bounded pool)
 * and remote (gRPC client of sbx-worker). The same request gives the same completion through
 * any of them.
 *
 * submit_async() queues a request and returns at once; its output chunks and its completion
 * reach callbacks (libuv's uv__work_submit / uv__work_done model: the thread broker runs it on
 * an executor and calls back from there, the remote broker from its transfer thread). submit()
 * is the blocking form on the same path: it returns a completion when it is ready within
 * wait_ms, or leaves the task pending (*out == NULL) so the caller collects it later with
 * result(). In-process brokers keep a bounded LRU of recent completions for result(). close()
 * is idempotent and drains in-flight work; free() releases the broker (closing it first if
 * needed).
 */
#ifndef SBX_BROKER_H
#define SBX_BROKER_H

#include <stdint.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/engine.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef struct sbx_broker sbx_broker;

/* Wait forever (only where the caller really means it). */
#define SBX_WAIT_FOREVER (-1)

typedef struct sbx_thread_broker_opts {
    int threads;           /* executor threads (>= 1) */
    int queue_depth;       /* queued, not yet running requests; full -> RESOURCE_EXHAUSTED; one
                            * principal may hold all but a quarter of it (from 4 up) */
    int lru_size;          /* completions kept for result() */
    int principal_threads; /* the most threads one principal's requests hold at once (<= threads);
                            * 0: all but a quarter of threads (all of them below 4) */
} sbx_thread_broker_opts;

/* engine is borrowed and must outlive the broker. */
sbx_status sbx_broker_open_embedded(sbx_engine *engine, sbx_broker **out, sbx_error *err);
sbx_status sbx_broker_open_thread(sbx_engine *engine, const sbx_thread_broker_opts *opts,
                                  sbx_broker **out, sbx_error *err);
/* A gRPC client of sbx-worker (broker/remote.c). */
sbx_status sbx_broker_open_remote(const sbx_remote_config *remote, sbx_broker **out,
                                  sbx_error *err);
/* The caller's side of the NATS JetStream queue (broker/queue.c): requests go to the fleet's
 * work queue or to their session's node, completions come back through the fleet's bucket, so
 * idempotency and result() hold across processes. cfg is copied. */
sbx_status sbx_broker_open_queue(const sbx_queue_config *cfg, sbx_broker **out, sbx_error *err);
/* By cfg->broker.flavor; engine may be NULL for `remote` and `queue`. */
sbx_status sbx_broker_open(const sbx_config *cfg, sbx_engine *engine, sbx_broker **out,
                           sbx_error *err);

/* "embedded", "thread", "remote" or "queue". */
const char *sbx_broker_flavor(const sbx_broker *b);

/* Submits req (borrowed). Returns SBX_OK and either *out = the completion (caller frees) or
 * *out = NULL when wait_ms elapsed first (pending; collect with sbx_broker_result).
 * Idempotent: the same principal submitting the same task_id again joins the first task (or
 * gets its stored completion) instead of running twice; the same task_id with a different
 * request (sbx_request_digest) gets an INVALID_ARGUMENT completion, never the first one's.
 * A task its caller cancelled (the hooks' cancel flag) and that did not succeed is not stored:
 * the same task_id again runs anew (a retry after the broken connection that cancelled it).
 * A full queue or a closed broker is an error status with *out = a FAILED completion saying so.
 * hooks (may be NULL) stream output and carry cancellation while the call waits: they must stay
 * valid until it returns, and are not used after it (a task still running when wait_ms elapses
 * streams no more output to them and no longer reads their cancel flag). */
sbx_status sbx_broker_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                             const sbx_engine_hooks *hooks, sbx_completion **out);
/* What submit_async calls back. on_done is called exactly once per submit_async, with
 * ownership of c (NULL only when out of memory): on an executor thread (thread), the transfer
 * thread (remote), the caller's own thread (embedded, which runs the request inline), or -- for an
 * answer known at once (a stored completion of the same task, a refused or conflicting request) --
 * inside submit_async before it returns. on_output (may be NULL) gets the task's output chunks on
 * the thread running it, and cancel (may be NULL) abandons it when set non-zero. arg is passed to
 * both callbacks. Everything pointed to must stay valid until on_done has been called. */
typedef void (*sbx_broker_done_fn)(void *arg, sbx_status st, sbx_completion *c);
typedef struct sbx_broker_async {
    sbx_output_fn on_output;
    const volatile int *cancel;
    sbx_broker_done_fn on_done;
    void *arg;
    /* The caller's thread may run the request itself: when the thread broker can grant it a
     * slot at once (a slot free, its session idle, its principal under its share), it runs
     * inside submit_async, on_output and on_done on this thread before it returns, and no
     * executor is woken for it; otherwise it is queued as without. The embedded broker always
     * runs inline; the others ignore it. */
    bool run_here;
} sbx_broker_async;

/* Queues req (borrowed until on_done) and returns without waiting. Dedup and conflicts are as
 * for sbx_broker_submit (a retry joins the running task and gets a copy of its completion; a
 * joiner's on_output sees nothing). Returns SBX_OK when the request was accepted, or the
 * refusal (queue full: SBX_E_RESOURCE_EXHAUSTED; closed: SBX_E_BROKER), whose FAILED
 * completion on_done has then already received. Never blocks on the request itself, except
 * on the embedded broker, which has no thread to run it on. */
sbx_status sbx_broker_submit_async(sbx_broker *b, const sbx_request *req,
                                   const sbx_broker_async *cb);

/* The profiles and capabilities of whatever runs this broker's requests: the
 * engine for embedded and thread, the worker's Describe RPC for remote. Blocking (a provider
 * may open to report its capabilities). Free *out with sbx_message_free. */
sbx_status sbx_broker_describe(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err);

/* What a broker that runs requests itself holds right now (the thread broker; metrics). */
typedef struct sbx_broker_load {
    uint64_t running;     /* requests holding an execution slot */
    uint64_t queued;      /* accepted, waiting for a slot (ready queue and session backlogs) */
    uint64_t queue_limit; /* the most that may wait (broker.queue_depth) */
} sbx_broker_load;

/* Fills *out and returns true for a broker that keeps its own queue (thread); false (and *out
 * zeroed) for the others, whose queue is elsewhere. Thread-safe, never blocks on a request. */
bool sbx_broker_get_load(sbx_broker *b, sbx_broker_load *out);

/* Collects a task's completion, waiting up to wait_ms. A task is named by the subject of its
 * request's principal ("" for none; sbx_request_subject) and its task_id: another principal's
 * task with the same id is another task. *out NULL: still pending. An unknown (or discarded,
 * or evicted) task is SBX_E_INVALID_ARGUMENT. */
sbx_status sbx_broker_result(sbx_broker *b, const char *subject, const char *task_id,
                             int64_t wait_ms, sbx_completion **out);
/* Forgets a task (named as for result): its completion is dropped when it arrives. Unknown
 * tasks are fine. */
void sbx_broker_discard(sbx_broker *b, const char *subject, const char *task_id);
/* Stops accepting work and waits for in-flight work to finish. Idempotent. */
void sbx_broker_close(sbx_broker *b);
/* Closes (if needed) and frees. NULL is fine. */
void sbx_broker_free(sbx_broker *b);

/* Appends one Recording frame per completed request to path (created 0600 if absent).
 * NULL path stops recording. */
sbx_status sbx_broker_record_to(sbx_broker *b, const char *path, sbx_error *err);
/* The same with the file rotated by size (sbx_recorder_open_rotating). Calling it again with
 * the same path reopens the file (SIGHUP after logrotate moved it). */
sbx_status sbx_broker_record_rotating(sbx_broker *b, const char *path, uint64_t max_bytes,
                                      unsigned keep, sbx_error *err);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
