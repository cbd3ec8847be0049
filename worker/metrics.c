/* metrics.c - the worker's Prometheus metrics (observe.h): counters and latency histograms as
 * fixed arrays of relaxed atomics (a finished call costs a few atomic adds, no lock, no
 * allocation), and a tiny HTTP/1.1 server on its own thread and listener that renders them in
 * the text exposition format (version 0.0.4) at GET /metrics. The scrape thread handles one
 * connection at a time with short socket timeouts: scrapers are few, and a slow one delays only
 * other scrapes, never a call. Metrics carry no principal, task or token: labels are bounded
 * enums only, so the series count is fixed and nothing secret is exposed.
 * This file must not touch the gRPC listener, connections or calls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/strbuf.h"
#include "sbx/status.h"
#include "worker/observe.h"
#include "worker/worker_internal.h"

/* Longest scrape request read: Prometheus sends a few hundred bytes of headers. */
#define METRICS_MAX_REQUEST (8u << 10)
/* Socket timeout for one scrape, both ways: a scraper that stalls longer is dropped. */
#define METRICS_IO_TIMEOUT_S 5
#define METRICS_LISTEN_BACKLOG 16
/* First allocation of the exposition text: a worker with a few profiles fits without growing. */
#define WORKER_METRICS_TEXT_START 16384

static const double latency_bounds[WORKER_LATENCY_BUCKETS] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120};

typedef atomic_uint_fast64_t counter;

struct worker_metrics {
    counter calls[WORKER_OP_COUNT][WORKER_COMPLETION_STATUSES][WORKER_ERROR_CODES];
    counter grpc[WORKER_RPC_COUNT][WORKER_GRPC_CODES];
    counter latency[WORKER_OP_COUNT][WORKER_LATENCY_BUCKETS]; /* not cumulative: per bucket */
    counter latency_inf[WORKER_OP_COUNT];
    counter latency_sum_us[WORKER_OP_COUNT];
    counter bytes_out[WORKER_OP_COUNT];
    counter auth_failures[2]; /* unauthenticated, principal_not_allowed */
    int64_t start_unix;
    worker_gauge_fn sampler;
    void *sampler_arg;
    int listen_fd, stop_fd, port;
    pthread_t thread;
    bool running;
};

static const char *const op_names[WORKER_OP_COUNT] = {"run_code",
                                                      "run_command",
                                                      "install_packages",
                                                      "write_file",
                                                      "read_file",
                                                      "list_files",
                                                      "destroy",
                                                      "attach_command",
                                                      "cancel_command",
                                                      "pause",
                                                      "resume",
                                                      "snapshot",
                                                      "list_snapshots",
                                                      "delete_snapshot",
                                                      "expose",
                                                      "describe",
                                                      "health",
                                                      "reflection",
                                                      "none"};
static const char *const rpc_names[WORKER_RPC_COUNT] = {
    "Execute", "ExecuteStream", "Describe", "Check", "Watch", "ServerReflectionInfo", "other"};
static const char *const grpc_names[WORKER_GRPC_CODES] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};
static const char *const completion_names[WORKER_COMPLETION_STATUSES] = {"NONE", "SUCCEEDED",
                                                                         "FAILED", "TIMED_OUT"};

const char *worker_op_name(worker_op op)
{
    return (unsigned)op < WORKER_OP_COUNT ? op_names[op] : "none";
}

const char *worker_rpc_name(worker_rpc rpc)
{
    return (unsigned)rpc < WORKER_RPC_COUNT ? rpc_names[rpc] : "other";
}

static void add(counter *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static uint64_t get(counter *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static int clamp(int v, int n)
{
    return v >= 0 && v < n ? v : 0;
}

void worker_metrics_call(worker_metrics *m, const worker_call_sample *s)
{
    if (!m)
        return;
    int op = clamp((int)s->op, WORKER_OP_COUNT);
    add(&m->calls[op][clamp(s->completion_status, WORKER_COMPLETION_STATUSES)]
                 [clamp(s->error_code, WORKER_ERROR_CODES)],
        1);
    add(&m->grpc[clamp((int)s->rpc, WORKER_RPC_COUNT)][clamp(s->grpc_status, WORKER_GRPC_CODES)],
        1);
    int64_t us = s->duration_us > 0 ? s->duration_us : 0;
    double secs = (double)us / 1e6;
    int b = 0;
    while (b < WORKER_LATENCY_BUCKETS && secs > latency_bounds[b])
        b++;
    if (b < WORKER_LATENCY_BUCKETS)
        add(&m->latency[op][b], 1);
    else
        add(&m->latency_inf[op], 1);
    add(&m->latency_sum_us[op], (uint64_t)us);
    add(&m->bytes_out[op], s->bytes_out);
    if (s->auth_failure)
        add(&m->auth_failures[s->principal_refused ? 1 : 0], 1);
}

/* ---- rendering ----------------------------------------------------------------------------- */

static void header(sbx_strbuf *t, const char *name, const char *type, const char *help)
{
    sbx_strbuf_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Long because it writes the Prometheus exposition family by family, a few lines each, in the
 * order of the text format. */
char *worker_metrics_render(worker_metrics *m, size_t *len)
{
    sbx_strbuf t = {0};
    if (!sbx_strbuf_reserve(&t, WORKER_METRICS_TEXT_START))
        return NULL;

    header(&t, "sbx_worker_calls_total", "counter",
           "Finished calls by operation, completion status (NONE: no completion, the call was "
           "refused or failed in transport) and contract error code.");
    for (int op = 0; op < WORKER_OP_COUNT; op++)
        for (int st = 0; st < WORKER_COMPLETION_STATUSES; st++)
            for (int ec = 0; ec < WORKER_ERROR_CODES; ec++) {
                uint64_t v = get(&m->calls[op][st][ec]);
                if (v)
                    sbx_strbuf_printf(
                        &t,
                        "sbx_worker_calls_total{operation=\"%s\",status=\"%s\",error_code=\"%s\"} "
                        "%llu\n",
                        op_names[op], completion_names[st], sbx_status_name((sbx_status)ec),
                        (unsigned long long)v);
            }
    header(&t, "sbx_worker_grpc_responses_total", "counter",
           "gRPC responses by method and grpc-status.");
    for (int r = 0; r < WORKER_RPC_COUNT; r++)
        for (int g = 0; g < WORKER_GRPC_CODES; g++) {
            uint64_t v = get(&m->grpc[r][g]);
            if (v)
                sbx_strbuf_printf(
                    &t, "sbx_worker_grpc_responses_total{method=\"%s\",grpc_code=\"%s\"} %llu\n",
                    rpc_names[r], grpc_names[g], (unsigned long long)v);
        }
    header(&t, "sbx_worker_call_duration_seconds", "histogram",
           "Time from the request's headers to the end of the response, by operation.");
    for (int op = 0; op < WORKER_OP_COUNT; op++) {
        uint64_t cum = 0;
        uint64_t counts[WORKER_LATENCY_BUCKETS];
        for (int b = 0; b < WORKER_LATENCY_BUCKETS; b++)
            counts[b] = get(&m->latency[op][b]);
        uint64_t inf = get(&m->latency_inf[op]);
        uint64_t total = inf;
        for (int b = 0; b < WORKER_LATENCY_BUCKETS; b++)
            total += counts[b];
        if (total == 0)
            continue;
        for (int b = 0; b < WORKER_LATENCY_BUCKETS; b++) {
            cum += counts[b];
            sbx_strbuf_printf(
                &t, "sbx_worker_call_duration_seconds_bucket{operation=\"%s\",le=\"%g\"} %llu\n",
                op_names[op], latency_bounds[b], (unsigned long long)cum);
        }
        sbx_strbuf_printf(
            &t, "sbx_worker_call_duration_seconds_bucket{operation=\"%s\",le=\"+Inf\"} %llu\n",
            op_names[op], (unsigned long long)total);
        sbx_strbuf_printf(&t, "sbx_worker_call_duration_seconds_sum{operation=\"%s\"} %.6f\n",
                          op_names[op], (double)get(&m->latency_sum_us[op]) / 1e6);
        sbx_strbuf_printf(&t, "sbx_worker_call_duration_seconds_count{operation=\"%s\"} %llu\n",
                          op_names[op], (unsigned long long)total);
    }
    header(&t, "sbx_worker_response_bytes_total", "counter",
           "gRPC message bytes sent in responses (completions and output events), by operation.");
    for (int op = 0; op < WORKER_OP_COUNT; op++) {
        uint64_t v = get(&m->bytes_out[op]);
        if (v)
            sbx_strbuf_printf(&t, "sbx_worker_response_bytes_total{operation=\"%s\"} %llu\n",
                              op_names[op], (unsigned long long)v);
    }
    header(&t, "sbx_worker_auth_failures_total", "counter",
           "Calls refused because the caller did not authenticate (unauthenticated) or asserted "
           "a principal it may not (principal_not_allowed).");
    sbx_strbuf_printf(&t, "sbx_worker_auth_failures_total{reason=\"unauthenticated\"} %llu\n",
                      (unsigned long long)get(&m->auth_failures[0]));
    sbx_strbuf_printf(&t, "sbx_worker_auth_failures_total{reason=\"principal_not_allowed\"} %llu\n",
                      (unsigned long long)get(&m->auth_failures[1]));

    worker_gauges g = {0};
    if (m->sampler)
        m->sampler(m->sampler_arg, &g);
    header(&t, "sbx_worker_executions_in_flight", "gauge",
           "Executions running on the worker's executor threads.");
    sbx_strbuf_printf(&t, "sbx_worker_executions_in_flight %llu\n",
                      (unsigned long long)g.executions_running);
    header(&t, "sbx_worker_executions_queued", "gauge",
           "Executions waiting for an executor thread.");
    sbx_strbuf_printf(&t, "sbx_worker_executions_queued %llu\n",
                      (unsigned long long)g.executions_queued);
    header(&t, "sbx_worker_executions_queue_limit", "gauge",
           "Most executions that may wait (broker.queue_depth); more are RESOURCE_EXHAUSTED.");
    sbx_strbuf_printf(&t, "sbx_worker_executions_queue_limit %llu\n",
                      (unsigned long long)g.queue_limit);
    header(&t, "sbx_sandboxes_live", "gauge",
           "Sandboxes alive per profile as this worker knows them: those its provider listed "
           "on this node at its start (made before a restart), plus those it "
           "created, minus those it removed (one per live session of a per_session profile).");
    for (size_t i = 0; i < g.n_profiles; i++)
        sbx_strbuf_printf(&t, "sbx_sandboxes_live{profile=\"%s\",provider=\"%s\"} %llu\n",
                          g.profiles[i].profile, g.profiles[i].provider,
                          (unsigned long long)g.profiles[i].sandboxes_live);
    header(&t, "sbx_sandboxes_created_total", "counter", "Sandboxes created, per profile.");
    for (size_t i = 0; i < g.n_profiles; i++)
        sbx_strbuf_printf(&t, "sbx_sandboxes_created_total{profile=\"%s\",provider=\"%s\"} %llu\n",
                          g.profiles[i].profile, g.profiles[i].provider,
                          (unsigned long long)g.profiles[i].sandboxes_created);
    header(&t, "sbx_sandboxes_removed_total", "counter",
           "Sandboxes destroyed, or found gone on reconnect, per profile.");
    for (size_t i = 0; i < g.n_profiles; i++)
        sbx_strbuf_printf(&t, "sbx_sandboxes_removed_total{profile=\"%s\",provider=\"%s\"} %llu\n",
                          g.profiles[i].profile, g.profiles[i].provider,
                          (unsigned long long)g.profiles[i].sandboxes_removed);
    header(&t, "sbx_worker_draining", "gauge", "1 while the worker drains (SIGTERM).");
    sbx_strbuf_printf(&t, "sbx_worker_draining %d\n", g.draining ? 1 : 0);
    header(&t, "sbx_worker_log_lines_dropped_total", "counter",
           "Log lines dropped because the log writer was behind.");
    sbx_strbuf_printf(&t, "sbx_worker_log_lines_dropped_total %llu\n",
                      (unsigned long long)g.log_lines_dropped);
    header(&t, "sbx_worker_start_time_seconds", "gauge", "Unix time the worker started.");
    sbx_strbuf_printf(&t, "sbx_worker_start_time_seconds %lld\n", (long long)m->start_unix);
    header(&t, "sbx_worker_info", "gauge", "The worker's version.");
    sbx_strbuf_printf(&t, "sbx_worker_info{version=\"%s\"} 1\n", SBX_VERSION);
    *len = t.len;
    return sbx_strbuf_take(&t); /* NULL when out of memory: never a cut exposition */
}

/* ---- the scrape listener --------------------------------------------------------------- */

/* Sets fd's receive and send timeouts to what is left until deadline (monotonic us); false once
 * it passed. SO_RCVTIMEO bounds one recv, not the request: a client sending a byte every few
 * seconds would otherwise hold the scrape thread for hours. */
static bool time_left(int fd, int64_t deadline)
{
    int64_t left = deadline - sbx_monotonic_us();
    if (left <= 0)
        return false;
    struct timeval tv = {.tv_sec = left / 1000000, .tv_usec = left % 1000000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return true;
}

static void send_all(int fd, const char *p, size_t n, int64_t deadline)
{
    while (n > 0 && time_left(fd, deadline)) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, const char *status, const char *ctype, const char *body, size_t len,
                    bool head_only)
{
    /* The answer has a deadline of its own, as the request had. */
    int64_t deadline = sbx_monotonic_us() + METRICS_IO_TIMEOUT_S * 1000000LL;
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, ctype, len);
    send_all(fd, hdr, (size_t)n, deadline);
    if (!head_only)
        send_all(fd, body, len, deadline);
}

static void serve_one(worker_metrics *m, int fd)
{
    int64_t deadline = sbx_monotonic_us() + METRICS_IO_TIMEOUT_S * 1000000LL;
    char req[METRICS_MAX_REQUEST + 1];
    size_t got = 0;
    while (got < METRICS_MAX_REQUEST && time_left(fd, deadline)) {
        ssize_t n = recv(fd, req + got, METRICS_MAX_REQUEST - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        /* A NUL is no part of an HTTP request: refused at once, instead of hiding the end of
         * the head from the search below until the deadline (5 s of the one scrape thread). */
        if (memchr(req + got, '\0', (size_t)n) != NULL) {
            static const char bad[] = "a NUL byte is not allowed in an HTTP request\n";
            respond(fd, "400 Bad Request", "text/plain; charset=utf-8", bad, sizeof bad - 1, false);
            return;
        }
        size_t from = got > 3 ? got - 3 : 0; /* the end may straddle two reads */
        got += (size_t)n;
        if (memmem(req + from, got - from, "\r\n\r\n", 4) ||
            memmem(req + from, got - from, "\n\n", 2))
            break;
    }
    req[got] = '\0';
    static const char text[] = "text/plain; charset=utf-8";
    bool head = strncmp(req, "HEAD ", 5) == 0;
    if (strncmp(req, "GET ", 4) != 0 && !head) {
        static const char msg[] = "only GET /metrics is served here\n";
        respond(fd, "405 Method Not Allowed", text, msg, sizeof msg - 1, false);
        return;
    }
    const char *path = req + (head ? 5 : 4);
    size_t plen = strcspn(path, " ?\r\n");
    if (!(plen == 8 && memcmp(path, "/metrics", 8) == 0)) {
        static const char msg[] = "not found: the metrics are at /metrics\n";
        respond(fd, "404 Not Found", text, msg, sizeof msg - 1, head);
        return;
    }
    size_t len = 0;
    char *body = worker_metrics_render(m, &len);
    if (!body) {
        static const char msg[] = "out of memory rendering the metrics\n";
        respond(fd, "500 Internal Server Error", text, msg, sizeof msg - 1, head);
        return;
    }
    respond(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len, head);
    free(body);
}

static void *scrape_main(void *arg)
{
    worker_metrics *m = arg;
    struct pollfd pfd[2] = {{.fd = m->listen_fd, .events = POLLIN},
                            {.fd = m->stop_fd, .events = POLLIN}};
    for (;;) {
        int n = poll(pfd, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (pfd[1].revents & POLLIN))
            break;
        if (pfd[0].revents & POLLIN) {
            int fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            serve_one(m, fd);
            shutdown(fd, SHUT_WR);
            close(fd);
        }
    }
    return NULL;
}

sbx_status worker_metrics_new(const char *listen_addr, worker_gauge_fn sampler, void *sampler_arg,
                              worker_metrics **out, sbx_error *err)
{
    *out = NULL;
    worker_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return sbx_error_set(err, SBX_E_INTERNAL, "worker metrics: out of memory");
    m->sampler = sampler;
    m->sampler_arg = sampler_arg;
    m->listen_fd = m->stop_fd = -1;
    m->start_unix = (int64_t)time(NULL);
    if (listen_addr) {
        m->listen_fd = worker_listen("worker.metrics_listen", listen_addr, "127.0.0.1:9464",
                                     METRICS_LISTEN_BACKLOG, 0, NULL, &m->port, err);
        if (m->listen_fd < 0) {
            free(m);
            return err ? err->code : SBX_E_CONFIG;
        }
        m->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (m->stop_fd < 0 || pthread_create(&m->thread, NULL, scrape_main, m) != 0) {
            worker_metrics_free(m);
            return sbx_error_set(err, SBX_E_INTERNAL,
                                 "worker metrics: cannot start the scrape thread");
        }
        m->running = true;
    }
    *out = m;
    return SBX_OK;
}

int worker_metrics_port(const worker_metrics *m)
{
    return m ? m->port : 0;
}

void worker_metrics_free(worker_metrics *m)
{
    if (!m)
        return;
    if (m->running) {
        uint64_t one = 1;
        ssize_t r = write(m->stop_fd, &one, sizeof one);
        (void)r;
        pthread_join(m->thread, NULL);
    }
    if (m->listen_fd >= 0)
        close(m->listen_fd);
    if (m->stop_fd >= 0)
        close(m->stop_fd);
    free(m);
}
