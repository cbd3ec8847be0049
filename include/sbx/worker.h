/* worker.h - sbx-worker as a library (DESIGN §7): a gRPC server over HTTP/2 (nghttp2) that
 * serves sbx.v1.Execution and grpc.health.v1.Health, h2c on loopback and h2 over TLS with
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

/* Serves until sbx_worker_shutdown, then drains: GOAWAY to every connection, new calls refused
 * (UNAVAILABLE), in-flight calls finish (up to cfg->worker.drain_timeout_ms, after which they
 * are cancelled). Returns SBX_OK after a clean drain. */
sbx_status sbx_worker_run(sbx_worker *w, sbx_error *err);

/* Starts the drain. Async-signal-safe and callable from any thread. */
void sbx_worker_shutdown(sbx_worker *w);

/* Frees a worker that is not running. NULL is fine. */
void sbx_worker_free(sbx_worker *w);

/* The whole life of a worker process (worker/serve.c), for `sbx-worker` and `sbx worker serve`:
 * loads config_path (NULL: $SBX_CONFIG or the built-in default; listen, when not NULL,
 * replaces worker.listen, e.g. "127.0.0.1:0" for an ephemeral port), opens the engine and the
 * broker, serves until SIGTERM/SIGINT (handlers installed here), drains. Prints one line
 * "sbx-worker listening on port N" and errors to log. Returns the exit status: 0 after a clean
 * drain, 2 for a configuration error, 1 otherwise. */
int sbx_worker_serve_main(const char *config_path, const char *listen_addr, FILE *log);

#ifdef __cplusplus
}
#endif
#endif
