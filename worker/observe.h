/* observe.h - what the worker tells operators, private to worker/: one JSON log line per call
 * and per authentication failure (log.c writes them from its own thread), Prometheus metrics
 * served on a separate listener (metrics.c), and the glue that turns a finished call into both
 * (observe.c). server.c only fills a worker_call_obs at a few points of a call's life and hands
 * it over when the call is freed; nothing here touches a connection or blocks the event loop.
 */
#ifndef SBX_WORKER_OBSERVE_H
#define SBX_WORKER_OBSERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/engine.h"
#include "sbx/status.h"

/* ---- the JSON log (log.c) -------------------------------------------------------------------- */

typedef enum worker_log_level {
    WORKER_LOG_ERROR = 0,
    WORKER_LOG_WARN = 1,
    WORKER_LOG_INFO = 2,
    WORKER_LOG_DEBUG = 3,
} worker_log_level;

typedef struct worker_log worker_log;

/* "error" | "warn" | "info" | "debug" -> level; false for anything else. */
bool worker_log_level_parse(const char *name, worker_log_level *out);
const char *worker_log_level_name(worker_log_level level);

/* Starts the writer thread. path NULL: stderr (never reopened); else the file is opened for
 * appending (created 0640) and reopened by worker_log_reopen. */
sbx_status worker_log_open(const char *path, worker_log_level level, worker_log **out,
                           sbx_error *err);
/* True when a line at this level would be written (cheap: check before formatting). */
bool worker_log_enabled(const worker_log *log, worker_log_level level);
/* Queues one line (a JSON object without its newline). Never blocks on I/O: when the writer is
 * behind by more than the queue holds, the line is dropped and counted. Any thread. */
void worker_log_line(worker_log *log, const char *line, size_t len);
/* Asks the writer to reopen the file (after logrotate moved it). Any thread. */
void worker_log_reopen(worker_log *log);
/* Lines dropped because the writer was behind. */
uint64_t worker_log_dropped(const worker_log *log);
/* Writes what is queued, stops the thread, closes the file. NULL is fine. */
void worker_log_close(worker_log *log);

/* A JSON object built field by field into a fixed buffer (strings are escaped and cut at
 * WORKER_LOG_FIELD_MAX bytes; the line is cut at WORKER_LOG_LINE_MAX). */
#define WORKER_LOG_LINE_MAX 4096
#define WORKER_LOG_FIELD_MAX 512
typedef struct worker_json {
    char buf[WORKER_LOG_LINE_MAX];
    size_t len;
    bool full;
} worker_json;
/* Opens the object with "time" (RFC 3339, UTC, ms), "level" and "event". */
void worker_json_begin(worker_json *j, worker_log_level level, const char *event);
void worker_json_str(worker_json *j, const char *key, const char *value); /* NULL: skipped */
void worker_json_int(worker_json *j, const char *key, int64_t value);
void worker_json_ms(worker_json *j, const char *key, int64_t us); /* microseconds as ms.us */
void worker_json_end(worker_json *j);

/* ---- metrics (metrics.c) ----------------------------------------------------------------- */

/* What a call was, for labels: the request's operation, or the RPC when it has none. */
typedef enum worker_op {
    WORKER_OP_RUN_CODE = 0,
    WORKER_OP_RUN_COMMAND,
    WORKER_OP_INSTALL_PACKAGES,
    WORKER_OP_WRITE_FILE,
    WORKER_OP_READ_FILE,
    WORKER_OP_LIST_FILES,
    WORKER_OP_DESTROY,
    WORKER_OP_ATTACH_COMMAND,
    WORKER_OP_CANCEL_COMMAND,
    WORKER_OP_PAUSE,
    WORKER_OP_RESUME,
    WORKER_OP_SNAPSHOT,
    WORKER_OP_LIST_SNAPSHOTS,
    WORKER_OP_DELETE_SNAPSHOT,
    WORKER_OP_EXPOSE,
    WORKER_OP_DESCRIBE,
    WORKER_OP_HEALTH,
    WORKER_OP_REFLECTION,
    WORKER_OP_NONE, /* refused before a request was decoded (auth, size, unknown method) */
    WORKER_OP_COUNT
} worker_op;
const char *worker_op_name(worker_op op);

/* RPCs, for the gRPC status counter. */
typedef enum worker_rpc {
    WORKER_RPC_EXECUTE = 0,
    WORKER_RPC_EXECUTE_STREAM,
    WORKER_RPC_DESCRIBE,
    WORKER_RPC_HEALTH_CHECK,
    WORKER_RPC_HEALTH_WATCH,
    WORKER_RPC_REFLECTION,
    WORKER_RPC_OTHER,
    WORKER_RPC_COUNT
} worker_rpc;
const char *worker_rpc_name(worker_rpc rpc);

/* gRPC status codes 0..16. */
#define WORKER_GRPC_CODES 17
/* Completion statuses (UNSPECIFIED = no completion, SUCCEEDED, FAILED, TIMED_OUT). */
#define WORKER_COMPLETION_STATUSES 4
/* Contract error codes NONE..WRONG_NODE (the last of sbx_status). */
#define WORKER_ERROR_CODES (SBX_E_WRONG_NODE + 1)
/* Latency buckets (seconds): from a fake provider's sub-millisecond answers to the default
 * 120 s policy timeout, roughly x2.5 apart so quantiles stay within a bucket's factor. */
#define WORKER_LATENCY_BUCKETS 16

/* Profiles whose sandboxes are reported (the configuration's own limit on profiles). */
#define WORKER_METRICS_PROFILES_MAX 256

/* Values the metrics thread samples at scrape time (filled by server.c's sampler). */
typedef struct worker_gauges {
    uint64_t executions_running; /* the broker's requests holding an execution slot */
    uint64_t executions_queued;  /* accepted by the broker, waiting for a slot */
    uint64_t queue_limit;        /* the broker's queue_depth */
    bool draining;
    uint64_t log_lines_dropped;
    /* the engine's sandboxes per profile (sbx_engine_stats); profile names come from the
     * configuration (at most its profile limit), so the series are bounded */
    sbx_engine_profile_stats profiles[WORKER_METRICS_PROFILES_MAX];
    size_t n_profiles;
} worker_gauges;
typedef void (*worker_gauge_fn)(void *arg, worker_gauges *out);

typedef struct worker_metrics worker_metrics;

/* Binds listen_addr (host:port; port 0 = ephemeral) and starts the scrape thread; sampler is
 * called from that thread. listen_addr NULL: counters only, no listener. */
sbx_status worker_metrics_new(const char *listen_addr, worker_gauge_fn sampler, void *sampler_arg,
                              worker_metrics **out, sbx_error *err);
int worker_metrics_port(const worker_metrics *m); /* 0 when there is no listener */

/* One finished call (any thread; lock-free atomic adds). */
typedef struct worker_call_sample {
    worker_rpc rpc;
    worker_op op;
    int grpc_status;       /* 0..16 */
    int completion_status; /* 0..3 */
    int error_code;        /* 0..13 */
    int64_t duration_us;
    uint64_t bytes_out;
    bool auth_failure;      /* refused as unauthenticated or for a principal it may not assert */
    bool principal_refused; /* the auth failure was the principal, not the credentials */
} worker_call_sample;
void worker_metrics_call(worker_metrics *m, const worker_call_sample *s);
/* The text exposition of every metric into a malloc'd string (*len set); NULL on OOM. */
char *worker_metrics_render(worker_metrics *m, size_t *len);
/* Stops the scrape thread, closes the listener. NULL is fine. */
void worker_metrics_free(worker_metrics *m);

/* ---- per call (observe.c) -------------------------------------------------------------------- */

/* Filled by server.c during one call: begin/decided/completion on the threads named. */
typedef struct worker_call_obs {
    int64_t start_us;   /* loop thread, when the request headers began */
    uint64_t bytes_out; /* loop thread: response bytes queued (prefix + message) */
    bool status_set;    /* a status was decided (call_decide) */
    int grpc_status;
    char message[256];  /* the decided grpc-message (for failures) */
    const char *caller; /* the authenticated caller's name (borrowed from the config) */
    char cert_cn[256];  /* the TLS client certificate's CN, when one was presented */
    /* written by the executor thread before it posts the final result (post's lock orders it
     * before the loop's reads) */
    bool has_completion;
    int completion_status;
    int error_code;
    char provider[32];
} worker_call_obs;

typedef struct worker_obs worker_obs;

/* Metrics listener from cfg->worker.metrics_listen (NULL: counters only). */
sbx_status worker_obs_new(const sbx_config *cfg, worker_gauge_fn sampler, void *sampler_arg,
                          worker_obs **out, sbx_error *err);
/* Sends log lines to path (NULL: stderr) at level and above; replaces an earlier log. */
sbx_status worker_obs_log_to(worker_obs *obs, const char *path, const char *level, sbx_error *err);
int worker_obs_metrics_port(const worker_obs *obs);
/* Reopens the log file (SIGHUP). */
void worker_obs_reopen(worker_obs *obs);
/* A structured line for a lifecycle event ("listening", "draining", ...), with an optional
 * integer field. */
void worker_obs_event(worker_obs *obs, worker_log_level level, const char *event,
                      const char *int_key, int64_t value);
void worker_obs_free(worker_obs *obs);

void worker_call_obs_begin(worker_call_obs *o);
void worker_call_obs_decided(worker_call_obs *o, int grpc_status, const char *message);
void worker_call_obs_completion(worker_call_obs *o, const sbx_completion *comp);
/* The call is over: one log line and the metrics. req may be NULL (refused before decoding);
 * final_status is the gRPC status the client received (CANCELLED when it went away first). */
void worker_call_obs_end(worker_obs *obs, const worker_call_obs *o, worker_rpc rpc,
                         const sbx_request *req, int final_status, const sbx_config *cfg);

#endif
