/* bench_fleet.c - throughput of a worker fleet through the queue (NATS JetStream) and through
 * HAProxy (gRPC), with 1, 2 and 3 workers, and the latency the queue adds over direct gRPC.
 * Every request has its own task id (a generator that reuses one request would measure only the
 * dedup store). Real parts: nats-server, sbx-worker processes (worker.serve: both), haproxy,
 * all on loopback and started here (tests/queue/fleet.c).
 *
 * Workloads on the fake provider: "noop" (per_call, returns at once: the transport's own cost)
 * and "20ms" (every operation sleeps 20 ms: a worker's 4 threads bound its rate, so more
 * workers should add throughput).
 *
 * usage: bench_fleet PATH/sbx-worker [HAPROXY] [REQUESTS]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "queue/fleet.h"
#include "sbx/broker.h"

/* Concurrent callers of a throughput run: above the fleet's 3 x 4 threads, so capacity (not
 * the callers) bounds the rate. */
#define CALLERS 32
/* Sequential requests of a latency run. */
#define LATENCY_REQUESTS 300

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static sbx_request *request(const char *profile)
{
    sbx_request *r = sbx_request_new(); /* a fresh uuid task_id each */
    sbx_set_string(&r->profile, profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "alice");
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, "echo bench");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

typedef struct run {
    sbx_broker *b;
    const char *profile;
    int total;
    atomic_int next;
    atomic_int failed;
} run;

static void *caller(void *arg)
{
    run *r = arg;
    while (atomic_fetch_add(&r->next, 1) < r->total) {
        sbx_request *req = request(r->profile);
        sbx_completion *c = NULL;
        sbx_broker_submit(r->b, req, 120000, NULL, &c);
        if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            atomic_fetch_add(&r->failed, 1);
        sbx_completion_free(c);
        sbx_request_free(req);
    }
    return NULL;
}

/* Requests per second of `total` requests from CALLERS threads. */
static double throughput(sbx_broker *b, const char *profile, int total, int *failed)
{
    run r = {.b = b, .profile = profile, .total = total};
    pthread_t t[CALLERS];
    int64_t start = now_us();
    for (int i = 0; i < CALLERS; i++)
        pthread_create(&t[i], NULL, caller, &r);
    for (int i = 0; i < CALLERS; i++)
        pthread_join(t[i], NULL);
    int64_t us = now_us() - start;
    *failed = atomic_load(&r.failed);
    return total * 1e6 / (double)us;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median and p99 of sequential round trips, in microseconds. */
static void latency(sbx_broker *b, int64_t *median, int64_t *p99)
{
    static int64_t samples[LATENCY_REQUESTS];
    for (int i = 0; i < LATENCY_REQUESTS; i++) {
        sbx_request *req = request("oneshot");
        sbx_completion *c = NULL;
        int64_t t0 = now_us();
        sbx_broker_submit(b, req, 120000, NULL, &c);
        samples[i] = now_us() - t0;
        sbx_completion_free(c);
        sbx_request_free(req);
    }
    qsort(samples, LATENCY_REQUESTS, sizeof samples[0], cmp64);
    *median = samples[LATENCY_REQUESTS / 2];
    *p99 = samples[LATENCY_REQUESTS * 99 / 100];
}

static sbx_broker *remote(const char *endpoint)
{
    sbx_remote_config rc = {0};
    rc.endpoint = (char *)endpoint;
    rc.token_env = FLEET_TOKEN_ENV;
    rc.connect_timeout_ms = 5000;
    sbx_broker *b = NULL;
    sbx_error err;
    if (sbx_broker_open_remote(&rc, &b, &err) != SBX_OK) {
        fprintf(stderr, "bench_fleet: remote broker: %s\n", err.message);
        exit(1);
    }
    return b;
}

static pid_t haproxy_start(const char *bin, const fleet *f, int workers, int port)
{
    char path[512];
    snprintf(path, sizeof path, "%s/haproxy-%d.cfg", f->dir, workers);
    FILE *fp = fopen(path, "w");
    if (fp == NULL)
        exit(1);
    /* The pool of deploy/haproxy.cfg (one-shot requests: hash of x-sbx-task-id), n servers. */
    fprintf(fp,
            "global\n    maxconn 4096\n    tune.bufsize 65536\n"
            "    tune.h2.initial-window-size 1048576\n"
            "defaults\n    mode http\n    timeout connect 2s\n    timeout client 1h\n"
            "    timeout server 1h\n    retries 2\n    retry-on conn-failure empty-response\n"
            "    option redispatch 1\n"
            "frontend f\n    bind 127.0.0.1:%d proto h2\n    default_backend pool\n"
            "backend pool\n    balance hdr(x-sbx-task-id)\n    hash-type consistent\n",
            port);
    for (int i = 0; i < workers; i++)
        fprintf(fp, "    server w%d 127.0.0.1:%d proto h2 check inter 1s fall 2 rise 1\n", i,
                f->grpc_port[i]);
    fclose(fp);
    pid_t pid = fork();
    if (pid == 0) {
        execl(bin, bin, "-db", "-q", "-f", path, (char *)NULL);
        _exit(127);
    }
    usleep(1500 * 1000); /* binds and passes its first checks */
    return pid;
}

/* A free loopback port for HAProxy (bound, then released). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        exit(1);
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/sbx-worker [HAPROXY] [REQUESTS]\n", argv[0]);
        return 2;
    }
    const char *haproxy = argc > 2 ? argv[2] : "/usr/sbin/haproxy";
    int total = argc > 3 ? atoi(argv[3]) : 600;
    signal(SIGPIPE, SIG_IGN);
    static fleet F;
    fleet_init(&F, argv[1]);
    F.serve = "both";
    F.no_record = true;
    F.ack_wait_ms = 30000;
    fleet_start_nats(&F, 1);
    sbx_broker *q = fleet_broker(&F, NULL);
    printf("fleet benchmark: %d requests per run, %d callers, unique task ids, workers of 4 "
           "threads, fake provider\n",
           total, CALLERS);
    printf("%-8s %-10s %12s %12s\n", "workers", "workload", "queue req/s", "haproxy req/s");
    for (int n = 1; n <= 3; n++) {
        fleet_start_worker(&F, n - 1);
        int port = free_port();
        pid_t hp = haproxy_start(haproxy, &F, n, port);
        char endpoint[64];
        snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
        sbx_broker *lb = remote(endpoint);
        const char *profiles[] = {"oneshot", "slow"};
        const char *names[] = {"noop", "20ms"};
        for (int p = 0; p < 2; p++) {
            int fq = 0, fh = 0;
            throughput(q, profiles[p], total / 10, &fq); /* warm-up */
            double tq = throughput(q, profiles[p], total, &fq);
            throughput(lb, profiles[p], total / 10, &fh);
            double th = throughput(lb, profiles[p], total, &fh);
            printf("%-8d %-10s %12.0f %12.0f%s\n", n, names[p], tq, th,
                   fq || fh ? "  (some requests failed)" : "");
            fflush(stdout);
        }
        sbx_broker_free(lb);
        kill(hp, SIGTERM);
        waitpid(hp, NULL, 0);
    }
    /* Latency with one worker busy with nothing else: stop two. */
    fleet_kill_worker(&F, 1, SIGTERM);
    fleet_kill_worker(&F, 2, SIGTERM);
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", F.grpc_port[0]);
    sbx_broker *direct = remote(endpoint);
    int64_t dm, d99, qm, q99;
    latency(direct, &dm, &d99); /* warm-up */
    latency(direct, &dm, &d99);
    latency(q, &qm, &q99);
    printf("latency of one no-op request, one worker: direct gRPC median %lld us (p99 %lld), "
           "queue median %lld us (p99 %lld): the queue adds %lld us\n",
           (long long)dm, (long long)d99, (long long)qm, (long long)q99, (long long)(qm - dm));
    sbx_broker_free(direct);
    sbx_broker_free(q);
    fleet_stop(&F);
    return 0;
}
