/* worker.h - sbx-worker as a library (DESIGN §7): a gRPC server over HTTP/2 (nghttp2) that
 * serves sbx.v1.Execution, grpc.health.v1.Health (Check and Watch) and server reflection
 * (grpc.reflection.v1 and v1alpha), h2c on loopback and h2 over TLS with
 * ALPN `h2`, and hands every execution to a broker (the thread broker's pool in production).
 *
 * One event-loop thread (the one calling sbx_worker_run) owns every socket and never blocks;
 * executions run on the broker's threads and post their completions back. The `sbx-worker`
 * executable and `sbx worker serve` are thin wrappers around this API.
 * This module must not read the configuration file (it is handed a loaded sbx_config).
 */
#ifndef SBX_WORKER_H
#define SBX_WORKER_H

#include <stdint.h>
#include <stdio.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef struct sbx_worker sbx_worker;

/* Binds the listener of cfg->worker (port 0 = an ephemeral port, see sbx_worker_port), loads
 * the TLS material and the callers' tokens, and checks the security rules: a non-loopback
 * listener without TLS or without callers is SBX_E_CONFIG naming the fix.
 * cfg, engine and broker are borrowed and must outlive the worker; broker, a thread broker
 * (anything else is SBX_E_CONFIG), runs the executions through its asynchronous submit and
 * answers Describe. engine may be NULL (it is kept for the embedders that pass it). */
sbx_status sbx_worker_new(const sbx_config *cfg, sbx_engine *engine, sbx_broker *broker,
                          sbx_worker **out, sbx_error *err);

/* The TCP port the listener is bound to. */
int sbx_worker_port(const sbx_worker *w);
/* The TCP port of the Prometheus listener (worker.metrics_listen: GET /metrics in the text
 * exposition format); 0 when none is configured. */
int sbx_worker_metrics_port(const sbx_worker *w);

/* Sends one JSON line per call and per authentication failure (time, task_id, caller,
 * principal, profile, provider, operation, grpc_status, status, error_code, duration_ms,
 * bytes_out) to path (NULL: stderr), for lines at `level` and above (error | warn | info |
 * debug; NULL: info). Without this call the library worker logs nothing. Lines are written by
 * their own thread from a bounded queue, never by the event loop. Call before sbx_worker_run. */
sbx_status sbx_worker_log_to(sbx_worker *w, const char *path, const char *level, sbx_error *err);

/* Reopens the log file and the record file (after logrotate moved them). Async-signal-safe
 * (the SIGHUP handler of serve.c calls it); the loop thread does the work. */
void sbx_worker_reopen(sbx_worker *w);

/* Serves until sbx_worker_shutdown, then drains: GOAWAY to every connection, new calls refused
 * (UNAVAILABLE), in-flight calls finish (up to cfg->worker.drain_timeout_ms, after which they
 * are cancelled). Returns SBX_OK after a clean drain. */
sbx_status sbx_worker_run(sbx_worker *w, sbx_error *err);

/* Starts the drain. Async-signal-safe and callable from any thread. */
void sbx_worker_shutdown(sbx_worker *w);

/* Frees a worker that is not running. NULL is fine. */
void sbx_worker_free(sbx_worker *w);

/* Exit statuses of `sbx-worker` and `sbx worker serve` (one table for both; the same numbers
 * as the sbx command's table for the codes they share). */
enum sbx_worker_exit {
    SBX_WORKER_EXIT_OK = 0,     /* drained cleanly after SIGTERM/SIGINT */
    SBX_WORKER_EXIT_FAILED = 1, /* a runtime failure after start (the message says which) */
    SBX_WORKER_EXIT_USAGE = 2,  /* bad command line */
    SBX_WORKER_EXIT_CONFIG = 3, /* configuration error (file, key, --flag or a file it names) */
};

/* Command-line settings of a worker process; NULL fields keep the configuration's value. */
typedef struct sbx_worker_serve_opts {
    const char *config_path;    /* NULL: $SBX_CONFIG or the built-in default */
    const char *listen;         /* replaces worker.listen ("127.0.0.1:0": ephemeral) */
    const char *log_level;      /* replaces worker.log_level */
    const char *metrics_listen; /* replaces worker.metrics_listen */
} sbx_worker_serve_opts;

/* The whole life of a worker process (worker/serve.c), for `sbx-worker` and `sbx worker serve`:
 * loads the configuration with the options applied before it is validated, opens the engine
 * and the broker, serves until SIGTERM/SIGINT (handlers installed here), drains. SIGHUP reopens
 * the log file and the record file. Prints one line "sbx-worker listening on port N (...)" on
 * log once ready, then JSON log lines (worker.log_file, else log), and errors to log. Returns
 * an sbx_worker_exit status. */
int sbx_worker_serve(const sbx_worker_serve_opts *opts, FILE *log);

/* The usage text of the options above, shared by both commands' --help. */
#define SBX_WORKER_SERVE_OPTIONS_HELP                                                              \
    "  --config FILE            configuration file (default $SBX_CONFIG, else built-in)\n"         \
    "  --listen HOST:PORT       replaces worker.listen (port 0: an ephemeral port)\n"              \
    "  --log-level LEVEL        replaces worker.log_level: error | warn | info | debug\n"          \
    "  --metrics-listen H:P     replaces worker.metrics_listen (Prometheus GET /metrics)\n"        \
    "Signals: SIGTERM/SIGINT drain (health turns NOT_SERVING, in-flight calls finish, exit 0);\n"  \
    "SIGHUP reopens worker.log_file and worker.record (after logrotate moved them).\n"             \
    "sandbox.worker.serve picks what is served: grpc (the default), queue (pulls requests from\n"  \
    "the NATS JetStream queue of sandbox.broker.queue; prints \"sbx-worker consuming\n"            \
    "queue ...\" once ready), or both.\n"                                                          \
    "Exit status: 0 drained, 1 runtime failure, 2 usage error, 3 configuration error.\n"

/* Parses one option of the table above at argv[*i] into opts (advancing *i past its value).
 * Returns 1 when it was one, 0 when it is not an option of this table, -1 when its value is
 * missing (the caller reports a usage error). */
int sbx_worker_serve_parse_arg(sbx_worker_serve_opts *opts, int argc, char **argv, int *i);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
