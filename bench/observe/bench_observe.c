/* bench_observe.c - the per-call cost of the worker's observability (worker/observe.h): the
 * metrics update alone, the whole end-of-call hook with logging off (level warn, so a
 * successful call writes no line) and on (one JSON line queued to a writer on /dev/null), and
 * one scrape (rendering every metric). Medians of several rounds, in CPU ns per call. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/contract.h"
#include "worker/observe.h"

/* Calls per round: enough that a round takes milliseconds and clock noise is negligible. */
#define CALLS_PER_ROUND 200000
#define ROUNDS 7
#define SCRAPES 200

static int64_t now_ns(void)
{
    struct timespec ts;
    /* CPU time of the whole process (the log writer thread included): on a shared, loaded host
     * wall time mostly measures the wait for a core, not the work. */
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return v[n / 2];
}

static double bench_metrics_only(worker_metrics *m)
{
    double r[ROUNDS];
    worker_call_sample s = {.rpc = WORKER_RPC_EXECUTE,
                            .op = WORKER_OP_RUN_COMMAND,
                            .completion_status = 1,
                            .duration_us = 1234,
                            .bytes_out = 133};
    for (int k = 0; k < ROUNDS; k++) {
        int64_t t0 = now_ns();
        for (int i = 0; i < CALLS_PER_ROUND; i++) {
            s.duration_us = 100 + (i & 1023);
            worker_metrics_call(m, &s);
        }
        r[k] = (double)(now_ns() - t0) / CALLS_PER_ROUND;
    }
    return median(r, ROUNDS);
}

static double bench_call_end(worker_obs *obs, const sbx_request *req, const sbx_config *cfg)
{
    double r[ROUNDS];
    worker_call_obs o;
    memset(&o, 0, sizeof o);
    o.caller = "ci";
    o.has_completion = true;
    o.completion_status = 1;
    snprintf(o.provider, sizeof o.provider, "fake");
    for (int k = 0; k < ROUNDS; k++) {
        int64_t t0 = now_ns();
        for (int i = 0; i < CALLS_PER_ROUND; i++) {
            worker_call_obs_begin(&o);
            o.bytes_out = 133;
            worker_call_obs_end(obs, &o, WORKER_RPC_EXECUTE, req, 0, cfg);
        }
        r[k] = (double)(now_ns() - t0) / CALLS_PER_ROUND;
    }
    return median(r, ROUNDS);
}

int main(void)
{
    sbx_config *cfg = NULL;
    if (sbx_config_default(&cfg, NULL) != SBX_OK)
        return 1;
    /* the log writer's stderr goes to /dev/null for this program */
    int devnull = open("/dev/null", O_WRONLY);
    int saved = dup(STDERR_FILENO);
    dup2(devnull, STDERR_FILENO);

    worker_metrics *m = NULL;
    worker_metrics_new(NULL, NULL, NULL, &m, NULL);
    double metrics_ns = bench_metrics_only(m);
    double scrape[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        int64_t t0 = now_ns();
        for (int i = 0; i < SCRAPES; i++) {
            size_t len;
            free(worker_metrics_render(m, &len));
        }
        scrape[k] = (double)(now_ns() - t0) / SCRAPES / 1000.0;
    }
    double scrape_us = median(scrape, ROUNDS);
    worker_metrics_free(m);

    sbx_request *req = sbx_request_new();
    req->profile = strdup("default");
    req->principal = calloc(1, sizeof *req->principal);
    sbx__v1__principal__init(req->principal);
    req->principal->subject = strdup("agent-1");

    worker_obs *obs = NULL;
    worker_obs_new(cfg, NULL, NULL, &obs, NULL);
    worker_obs_log_to(obs, NULL, "warn", NULL);
    double quiet_ns = bench_call_end(obs, req, cfg);
    worker_obs_log_to(obs, NULL, "info", NULL);
    double logged_ns = bench_call_end(obs, req, cfg);
    worker_obs_free(obs);

    dup2(saved, STDERR_FILENO);
    printf("\nobserve: worker log line + metrics per finished call (median of %d rounds of %d)\n",
           ROUNDS, CALLS_PER_ROUND);
    printf("  metrics update only                  %8.1f CPU ns/call\n", metrics_ns);
    printf("  end-of-call hook, log level warn     %8.1f CPU ns/call (metrics, no line)\n",
           quiet_ns);
    printf("  end-of-call hook, log level info     %8.1f CPU ns/call (metrics + one JSON line)\n",
           logged_ns);
    printf("  one scrape (render every metric)     %8.1f CPU us\n", scrape_us);
    sbx_request_free(req);
    sbx_config_free(cfg);
    close(devnull);
    close(saved);
    return 0;
}
