/* observe.c - turns a finished call into its log line and its metrics (observe.h): classifies
 * the call (operation, completion status, error code, authentication failure), writes one JSON
 * line at a level that fits its outcome, and adds it to the counters. Also owns the worker's
 * log and metrics objects and lifecycle lines. It reads only the call's own record and request,
 * never a connection, and must not block (log.c queues, metrics.c adds atomics).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/observe.h"

/* gRPC codes named here (the full table lives in worker_internal.h with the wire code). */
#define OBS_GRPC_CANCELLED 1
#define OBS_GRPC_PERMISSION_DENIED 7
#define OBS_GRPC_INTERNAL 13
#define OBS_GRPC_UNAUTHENTICATED 16

struct worker_obs {
    worker_log *log; /* NULL: no log lines (a library caller that did not ask for them) */
    worker_metrics *metrics;
    worker_gauge_fn sampler;
    void *sampler_arg;
};

static void sample(void *arg, worker_gauges *out)
{
    worker_obs *obs = arg;
    if (obs->sampler)
        obs->sampler(obs->sampler_arg, out);
    out->log_lines_dropped = worker_log_dropped(obs->log);
}

sbx_status worker_obs_new(const sbx_config *cfg, worker_gauge_fn sampler, void *sampler_arg,
                          worker_obs **out, sbx_error *err)
{
    *out = NULL;
    worker_obs *obs = calloc(1, sizeof *obs);
    if (!obs)
        return sbx_error_set(err, SBX_E_INTERNAL, "worker: out of memory");
    obs->sampler = sampler;
    obs->sampler_arg = sampler_arg;
    sbx_status st = worker_metrics_new(cfg ? cfg->worker.metrics_listen : NULL, sample, obs,
                                       &obs->metrics, err);
    if (st != SBX_OK) {
        free(obs);
        return st;
    }
    *out = obs;
    return SBX_OK;
}

sbx_status worker_obs_log_to(worker_obs *obs, const char *path, const char *level, sbx_error *err)
{
    worker_log_level lv = WORKER_LOG_INFO;
    if (level && !worker_log_level_parse(level, &lv))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "log level '%s' is not accepted; accepted: error, warn, info, debug",
                             level);
    worker_log *log = NULL;
    sbx_status st = worker_log_open(path, lv, &log, err);
    if (st != SBX_OK)
        return st;
    worker_log_close(obs->log);
    obs->log = log;
    return SBX_OK;
}

int worker_obs_metrics_port(const worker_obs *obs)
{
    return obs ? worker_metrics_port(obs->metrics) : 0;
}

void worker_obs_reopen(worker_obs *obs)
{
    if (obs)
        worker_log_reopen(obs->log);
}

void worker_obs_event(worker_obs *obs, worker_log_level level, const char *event,
                      const char *int_key, int64_t value)
{
    if (!obs || !worker_log_enabled(obs->log, level))
        return;
    worker_json j;
    worker_json_begin(&j, level, event);
    if (int_key)
        worker_json_int(&j, int_key, value);
    worker_json_end(&j);
    worker_log_line(obs->log, j.buf, j.len);
}

void worker_obs_free(worker_obs *obs)
{
    if (!obs)
        return;
    worker_metrics_free(obs->metrics); /* first: its thread samples the log's counter */
    worker_log_close(obs->log);
    free(obs);
}

/* ---- per call ---------------------------------------------------------------------------- */

void worker_call_obs_begin(worker_call_obs *o)
{
    o->start_us = sbx_monotonic_us();
}

void worker_call_obs_decided(worker_call_obs *o, int grpc_status, const char *message)
{
    if (o->status_set)
        return;
    o->status_set = true;
    o->grpc_status = grpc_status;
    snprintf(o->message, sizeof o->message, "%s", message ? message : "");
}

void worker_call_obs_completion(worker_call_obs *o, const sbx_completion *comp)
{
    if (!comp)
        return;
    o->has_completion = true;
    o->completion_status = (int)comp->status;
    o->error_code = (int)comp->error_code;
    const char *provider = comp->session && comp->session->provider ? comp->session->provider : "";
    snprintf(o->provider, sizeof o->provider, "%s", provider);
}

static worker_op op_of(worker_rpc rpc, const sbx_request *req)
{
    if (rpc == WORKER_RPC_DESCRIBE)
        return WORKER_OP_DESCRIBE;
    if (rpc == WORKER_RPC_HEALTH_CHECK || rpc == WORKER_RPC_HEALTH_WATCH)
        return WORKER_OP_HEALTH;
    if (rpc == WORKER_RPC_REFLECTION)
        return WORKER_OP_REFLECTION;
    if (!req)
        return WORKER_OP_NONE;
    switch (req->op_case) {
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE: return WORKER_OP_RUN_CODE;
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND: return WORKER_OP_RUN_COMMAND;
    case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES: return WORKER_OP_INSTALL_PACKAGES;
    case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE: return WORKER_OP_WRITE_FILE;
    case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE: return WORKER_OP_READ_FILE;
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES: return WORKER_OP_LIST_FILES;
    case SBX__V1__EXECUTION_REQUEST__OP_DESTROY: return WORKER_OP_DESTROY;
    case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND: return WORKER_OP_ATTACH_COMMAND;
    case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND: return WORKER_OP_CANCEL_COMMAND;
    case SBX__V1__EXECUTION_REQUEST__OP_PAUSE: return WORKER_OP_PAUSE;
    case SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT: return WORKER_OP_SNAPSHOT;
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS: return WORKER_OP_LIST_SNAPSHOTS;
    case SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT: return WORKER_OP_DELETE_SNAPSHOT;
    case SBX__V1__EXECUTION_REQUEST__OP_RESUME: return WORKER_OP_RESUME;
    case SBX__V1__EXECUTION_REQUEST__OP_EXPOSE: return WORKER_OP_EXPOSE;
    default: return WORKER_OP_NONE;
    }
}

static const char *grpc_name(int code)
{
    static const char *const names[WORKER_GRPC_CODES] = {"OK",
                                                         "CANCELLED",
                                                         "UNKNOWN",
                                                         "INVALID_ARGUMENT",
                                                         "DEADLINE_EXCEEDED",
                                                         "NOT_FOUND",
                                                         "ALREADY_EXISTS",
                                                         "PERMISSION_DENIED",
                                                         "RESOURCE_EXHAUSTED",
                                                         "FAILED_PRECONDITION",
                                                         "ABORTED",
                                                         "OUT_OF_RANGE",
                                                         "UNIMPLEMENTED",
                                                         "INTERNAL",
                                                         "UNAVAILABLE",
                                                         "DATA_LOSS",
                                                         "UNAUTHENTICATED"};
    return code >= 0 && code < WORKER_GRPC_CODES ? names[code] : "UNKNOWN";
}

static const char *completion_name(int status)
{
    static const char *const names[WORKER_COMPLETION_STATUSES] = {NULL, "SUCCEEDED", "FAILED",
                                                                  "TIMED_OUT"};
    return status > 0 && status < WORKER_COMPLETION_STATUSES ? names[status] : NULL;
}

/* The profile a request ran on: its own, else the configured default. */
static const char *profile_of(const sbx_request *req, const sbx_config *cfg)
{
    if (req && req->profile && req->profile[0])
        return req->profile;
    return cfg && cfg->default_profile ? cfg->default_profile : NULL;
}

void worker_call_obs_end(worker_obs *obs, const worker_call_obs *o, worker_rpc rpc,
                         const sbx_request *req, int final_status, const sbx_config *cfg)
{
    if (!obs)
        return;
    int64_t duration = sbx_monotonic_us() - o->start_us;
    worker_op op = op_of(rpc, req);
    bool worker_refused = !o->has_completion; /* decided by the worker, not by the engine */
    bool unauthenticated = final_status == OBS_GRPC_UNAUTHENTICATED;
    bool principal_refused = worker_refused && final_status == OBS_GRPC_PERMISSION_DENIED;
    worker_call_sample s = {
        .rpc = rpc,
        .op = op,
        .grpc_status = final_status,
        .completion_status = o->has_completion ? o->completion_status : 0,
        .error_code = o->has_completion ? o->error_code : 0,
        .duration_us = duration,
        .bytes_out = o->bytes_out,
        .auth_failure = unauthenticated || principal_refused,
        .principal_refused = principal_refused,
    };
    worker_metrics_call(obs->metrics, &s);

    worker_log_level level = WORKER_LOG_INFO;
    if ((rpc == WORKER_RPC_HEALTH_CHECK && final_status == 0) || rpc == WORKER_RPC_HEALTH_WATCH)
        level = WORKER_LOG_DEBUG; /* probes every few seconds would drown the calls */
    if (s.auth_failure)
        level = WORKER_LOG_WARN;
    if (final_status == OBS_GRPC_INTERNAL || (o->has_completion && o->error_code == SBX_E_INTERNAL))
        level = WORKER_LOG_ERROR;
    if (!worker_log_enabled(obs->log, level))
        return;
    worker_json j;
    worker_json_begin(&j, level, s.auth_failure ? "auth_failure" : "call");
    worker_json_str(&j, "method", worker_rpc_name(rpc));
    worker_json_str(&j, "task_id", req && req->task_id && req->task_id[0] ? req->task_id : NULL);
    worker_json_str(&j, "caller", o->caller);
    worker_json_str(&j, "cert_cn", o->cert_cn[0] ? o->cert_cn : NULL);
    const char *subject =
        req && req->principal && req->principal->subject ? req->principal->subject : NULL;
    worker_json_str(&j, "principal", subject && subject[0] ? subject : NULL);
    if (req)
        worker_json_str(&j, "profile", profile_of(req, cfg));
    if (req) {
        const char *provider = o->provider[0] ? o->provider : NULL;
        const sbx_profile_config *p = provider ? NULL : sbx_config_profile(cfg, req->profile);
        worker_json_str(&j, "provider", provider ? provider : p ? p->type : NULL);
    }
    worker_json_str(&j, "operation", worker_op_name(op));
    worker_json_str(&j, "grpc_status", grpc_name(final_status));
    worker_json_str(&j, "status", o->has_completion ? completion_name(o->completion_status) : NULL);
    if (o->has_completion)
        worker_json_str(&j, "error_code", sbx_status_name((sbx_status)o->error_code));
    if (s.auth_failure)
        worker_json_str(&j, "reason",
                        principal_refused ? "principal_not_allowed" : "unauthenticated");
    if (final_status != 0 && o->message[0])
        worker_json_str(&j, "message", o->message);
    if (final_status == OBS_GRPC_CANCELLED && !o->status_set)
        worker_json_str(&j, "message", "the client went away before the response ended");
    worker_json_ms(&j, "duration_ms", duration);
    worker_json_int(&j, "bytes_out", (int64_t)o->bytes_out);
    worker_json_end(&j);
    worker_log_line(obs->log, j.buf, j.len);
}
