/* bench_brokers.c - per-request overhead and throughput of the in-process brokers, with no-op
 * requests (`true` on the fake provider) so only the machinery is measured:
 *   engine        sbx_engine_process called directly (the floor)
 *   embedded      sbx_broker_submit through the embedded broker
 *   thread        sbx_broker_submit through the thread broker, one caller at a time
 *                 (dispatch overhead = thread median - engine median)
 *   thread xN     N callers, each on its own session, against T executor threads: requests/s
 *   floor xN      the same callers through the least hand-off of that shape (gate_enter)
 * The three N-caller runs go round by round (thread, pipelined, floor; ROUNDS times), and each
 * row is the median round, the broker/floor ratio the median of the rounds' own ratios: a VM
 * whose speed moves by a third within seconds (this one) then moves both sides of a ratio.
 * Prints one table row per line. Usage: bench_brokers [REQUESTS] [SESSIONS] [THREADS] [ROUNDS]
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"

static const char *config_yaml = "sandbox:\n"
                                 "  profiles:\n"
                                 "    default:\n"
                                 "      type: fake\n"
                                 "      policy: { network_egress: deny, timeout_ms: 60000 }\n";

static sbx_request *noop_request(const sbx_session_handle *h)
{
    sbx_request *r = sbx_request_new();
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "bench");
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_add_string(&r->run_command->n_argv, &r->run_command->argv, "true");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    if (h != NULL)
        r->session = (sbx_session_handle *)sbx_message_copy(&h->base);
    return r;
}

/* A new task id per run (the brokers dedup by task id). */
static void renew(sbx_request *r)
{
    char id[SBX_UUID_LEN];
    sbx_uuid_v4(id);
    sbx_set_string(&r->task_id, id);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct stats {
    double median_us, p99_us;
} stats;

static stats summarize(int64_t *ns, size_t n)
{
    qsort(ns, n, sizeof(*ns), cmp_i64);
    stats s = {(double)ns[n / 2] / 1000.0, (double)ns[(n * 99) / 100] / 1000.0};
    return s;
}

/* CPU time (user + system) of the whole process so far, in microseconds. On a shared, loaded
 * host wall-clock throughput says more about the neighbours than about sbx; CPU per request
 * says what the machinery costs. */
static double cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static sbx_session_handle *new_session(sbx_engine *e)
{
    sbx_request *r = noop_request(NULL);
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    sbx_request_free(r);
    return h;
}

/* Latency of n sequential requests on one session; b NULL = engine directly. */
static stats latency(sbx_engine *e, sbx_broker *b, size_t n)
{
    sbx_session_handle *h = new_session(e);
    sbx_request *r = noop_request(h);
    int64_t *ns = malloc(n * sizeof(*ns));
    for (size_t i = 0; i < n; i++) {
        renew(r);
        int64_t t0 = now_ns();
        sbx_completion *c = NULL;
        if (b == NULL)
            c = sbx_engine_process(e, r, NULL);
        else
            sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c);
        ns[i] = now_ns() - t0;
        if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED) {
            fprintf(stderr, "bench: request failed: %s\n", c != NULL ? c->error : "none");
            exit(1);
        }
        sbx_completion_free(c);
    }
    stats s = summarize(ns, n);
    free(ns);
    sbx_request_free(r);
    sbx_message_free(&h->base);
    return s;
}

/* The hand-off floor: the least a broker can do for blocking callers whose requests run on
 * their own threads, at most T at once -- one mutex, a FIFO of waiting callers, a slot handed by
 * a finishing caller straight to the oldest waiter, which sleeps on a futex word of its own and
 * is woken after the unlock (so it never wakes only to block on the mutex) -- around the same
 * engine call, with no task table, dedup, completion store, copies or fairness. The thread
 * broker's rows are read against it: on a host whose wake-ups are expensive (a paravirtualised
 * VM) the floor says what any design of this shape reaches there. */
typedef struct gate_waiter {
    struct gate_waiter *next;
    uint32_t granted;
} gate_waiter;

static struct {
    pthread_mutex_t mu;
    int free_slots;
    gate_waiter *head, *tail;
} gate = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void gate_enter(gate_waiter *w)
{
    pthread_mutex_lock(&gate.mu);
    if (gate.free_slots > 0 && gate.head == NULL) {
        gate.free_slots--;
        pthread_mutex_unlock(&gate.mu);
        return;
    }
    w->granted = 0;
    w->next = NULL;
    if (gate.tail != NULL)
        gate.tail->next = w;
    else
        gate.head = w;
    gate.tail = w;
    pthread_mutex_unlock(&gate.mu);
    while (__atomic_load_n(&w->granted, __ATOMIC_ACQUIRE) == 0)
        syscall(SYS_futex, &w->granted, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

static void gate_leave(void)
{
    pthread_mutex_lock(&gate.mu);
    gate_waiter *w = gate.head;
    if (w != NULL) { /* the slot goes straight to the oldest waiter */
        gate.head = w->next;
        if (gate.head == NULL)
            gate.tail = NULL;
        __atomic_store_n(&w->granted, 1, __ATOMIC_RELEASE);
    } else {
        gate.free_slots++;
    }
    pthread_mutex_unlock(&gate.mu);
    if (w != NULL) /* w stays valid: its owner loops on the word until it sees it set */
        syscall(SYS_futex, &w->granted, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

typedef struct client {
    sbx_engine *e;
    sbx_broker *b;
    size_t n;
    int64_t *ns;
    pthread_barrier_t *start;
} client;

static void *client_main(void *arg)
{
    client *cl = arg;
    sbx_session_handle *h = new_session(cl->e);
    sbx_request *r = noop_request(h);
    gate_waiter w = {.next = NULL};
    pthread_barrier_wait(cl->start);
    for (size_t i = 0; i < cl->n; i++) {
        renew(r);
        int64_t t0 = now_ns();
        sbx_completion *c = NULL;
        if (cl->b != NULL) {
            sbx_broker_submit(cl->b, r, SBX_WAIT_FOREVER, NULL, &c);
        } else { /* the hand-off floor */
            gate_enter(&w);
            c = sbx_engine_process(cl->e, r, NULL);
            gate_leave();
        }
        cl->ns[i] = now_ns() - t0;
        if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED) {
            fprintf(stderr, "bench: request failed: %s\n", c != NULL ? c->error : "none");
            exit(1);
        }
        sbx_completion_free(c);
    }
    sbx_request_free(r);
    sbx_message_free(&h->base);
    return NULL;
}

/* N callers on their own sessions, each blocking on its own request: through broker b, or
 * through the hand-off floor when b is NULL. */
static double throughput(sbx_engine *e, sbx_broker *b, int sessions, size_t per, stats *lat)
{
    pthread_t *th = calloc((size_t)sessions, sizeof(*th));
    client *cl = calloc((size_t)sessions, sizeof(*cl));
    int64_t *all = malloc((size_t)sessions * per * sizeof(*all));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)sessions + 1);
    for (int i = 0; i < sessions; i++) {
        cl[i] = (client){e, b, per, all + (size_t)i * per, &start};
        pthread_create(&th[i], NULL, client_main, &cl[i]);
    }
    pthread_barrier_wait(&start);
    int64_t t0 = now_ns();
    for (int i = 0; i < sessions; i++)
        pthread_join(th[i], NULL);
    double secs = (double)(now_ns() - t0) / 1e9;
    *lat = summarize(all, (size_t)sessions * per);
    pthread_barrier_destroy(&start);
    free(all);
    free(cl);
    free(th);
    return (double)sessions * (double)per / secs;
}

/* Pipelined: each driver thread owns a group of sessions, submits one request per session with
 * wait 0 (pending), then collects every completion with result() -- the worker's pattern (an
 * event loop submitting, completions collected later). 64 sessions stay in flight. */
typedef struct driver {
    sbx_engine *e;
    sbx_broker *b;
    int sessions;
    size_t rounds;
    pthread_barrier_t *start;
} driver;

static void *driver_main(void *arg)
{
    driver *d = arg;
    sbx_request **r = calloc((size_t)d->sessions, sizeof(*r));
    for (int i = 0; i < d->sessions; i++) {
        sbx_session_handle *h = new_session(d->e);
        r[i] = noop_request(h);
        sbx_message_free(&h->base);
    }
    pthread_barrier_wait(d->start);
    for (size_t k = 0; k < d->rounds; k++) {
        for (int i = 0; i < d->sessions; i++) {
            renew(r[i]);
            sbx_completion *c = NULL;
            sbx_broker_submit(d->b, r[i], 0, NULL, &c);
            sbx_completion_free(c);
        }
        for (int i = 0; i < d->sessions; i++) {
            sbx_completion *c = NULL;
            sbx_broker_result(d->b, sbx_request_subject(r[i]), r[i]->task_id, SBX_WAIT_FOREVER, &c);
            if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED) {
                fprintf(stderr, "bench: request failed: %s\n", c != NULL ? c->error : "none");
                exit(1);
            }
            sbx_completion_free(c);
            sbx_broker_discard(d->b, sbx_request_subject(r[i]), r[i]->task_id);
        }
    }
    for (int i = 0; i < d->sessions; i++)
        sbx_request_free(r[i]);
    free(r);
    return NULL;
}

static double pipelined(sbx_engine *e, sbx_broker *b, int sessions, int drivers, size_t total)
{
    pthread_t *th = calloc((size_t)drivers, sizeof(*th));
    driver *d = calloc((size_t)drivers, sizeof(*d));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)drivers + 1);
    size_t rounds = total / (size_t)sessions;
    for (int i = 0; i < drivers; i++) {
        d[i] = (driver){e, b, sessions / drivers, rounds, &start};
        pthread_create(&th[i], NULL, driver_main, &d[i]);
    }
    pthread_barrier_wait(&start);
    int64_t t0 = now_ns();
    for (int i = 0; i < drivers; i++)
        pthread_join(th[i], NULL);
    double secs = (double)(now_ns() - t0) / 1e9;
    pthread_barrier_destroy(&start);
    free(d);
    free(th);
    return (double)(rounds * (size_t)(sessions / drivers) * (size_t)drivers) / secs;
}

/* Rounds of the N-caller runs (the fourth argument; at most BENCH_MAX_ROUNDS). */
#define BENCH_ROUNDS 5
#define BENCH_MAX_ROUNDS 31

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static double max_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static double median_of(const double *v, int n)
{
    double s[BENCH_MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(*s));
    qsort(s, (size_t)n, sizeof(*s), cmp_double);
    return s[n / 2];
}

/* The N-caller runs of one round: rates (requests/s), CPU per request (us), and the blocking
 * run's latencies. */
typedef struct round_result {
    double rps, prps, frps, blocking_cpu, pipelined_cpu, floor_cpu;
    stats par, flat;
} round_result;

static round_result one_round(sbx_engine *e, sbx_broker *thr, int sessions, int threads, size_t n)
{
    round_result r;
    size_t per = n / (size_t)sessions > 50 ? n / (size_t)sessions : 50;
    double c0 = cpu_us();
    r.rps = throughput(e, thr, sessions, per * 5, &r.par);
    double c1 = cpu_us();
    r.prps = pipelined(e, thr, sessions, 2, n * 10);
    double c2 = cpu_us();
    gate.free_slots = threads;
    r.frps = throughput(e, NULL, sessions, per * 5, &r.flat);
    double c3 = cpu_us();
    r.floor_cpu = (c3 - c2) / ((double)sessions * (double)(per * 5));
    r.blocking_cpu = (c1 - c0) / ((double)sessions * (double)(per * 5));
    r.pipelined_cpu = (c2 - c1) / (double)((n * 10 / (size_t)sessions) * (size_t)sessions);
    return r;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
    int sessions = argc > 2 ? atoi(argv[2]) : 64;
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    int rounds = argc > 4 ? atoi(argv[4]) : BENCH_ROUNDS;
    if (n < 100 || sessions < 1 || threads < 1 || rounds < 1 || rounds > BENCH_MAX_ROUNDS) {
        fprintf(stderr, "usage: %s [REQUESTS>=100] [SESSIONS] [THREADS] [ROUNDS 1..%d]\n", argv[0],
                BENCH_MAX_ROUNDS);
        return 2;
    }
    sbx_config *cfg = NULL;
    sbx_error err;
    if (sbx_config_load_string(config_yaml, strlen(config_yaml), "bench.yaml", &cfg, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    char dir[] = "/tmp/sbx-bench-XXXXXX", secret[64];
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        sbx_config_free(cfg);
        return 1;
    }
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    free(cfg->secret_file);
    cfg->secret_file = strdup(secret);
    sbx_engine *e = NULL;
    sbx_broker *emb = NULL, *thr = NULL;
    sbx_thread_broker_opts o = {threads, 4096, 1024, 0};
    if (sbx_engine_new(cfg, &e, &err) || sbx_broker_open_embedded(e, &emb, &err) ||
        sbx_broker_open_thread(e, &o, &thr, &err)) {
        fprintf(stderr, "%s\n", err.message);
        sbx_broker_free(emb);
        sbx_engine_free(e);
        sbx_config_free(cfg);
        unlink(secret); /* the engine may have made it before the broker failed */
        rmdir(dir);
        return 1;
    }
    latency(e, NULL, n / 10); /* warm up: provider opened, caches hot */
    stats eng = latency(e, NULL, n);
    stats em = latency(e, emb, n);
    stats th = latency(e, thr, n);
    double v[8][BENCH_MAX_ROUNDS], ratio[BENCH_MAX_ROUNDS], p99[2][BENCH_MAX_ROUNDS];
    for (int i = 0; i < rounds; i++) {
        round_result r = one_round(e, thr, sessions, threads, n);
        double row[8] = {r.rps,           r.prps,      r.frps,          r.blocking_cpu,
                         r.pipelined_cpu, r.floor_cpu, r.par.median_us, r.flat.median_us};
        for (int k = 0; k < 8; k++)
            v[k][i] = row[k];
        ratio[i] = r.rps / r.frps;
        p99[0][i] = r.par.p99_us;
        p99[1][i] = r.flat.p99_us;
    }
    double rps = median_of(v[0], rounds), prps = median_of(v[1], rounds);
    double frps = median_of(v[2], rounds), blocking_cpu = median_of(v[3], rounds);
    double pipelined_cpu = median_of(v[4], rounds), floor_cpu = median_of(v[5], rounds);
    stats par = {median_of(v[6], rounds), median_of(p99[0], rounds)};
    stats flat = {median_of(v[7], rounds), median_of(p99[1], rounds)};
    printf("%-34s %12s %12s %14s\n", "brokers (no-op requests, fake)", "median us", "p99 us",
           "requests/s");
    printf("%-34s %12.2f %12.2f %14s\n", "engine direct", eng.median_us, eng.p99_us, "-");
    printf("%-34s %12.2f %12.2f %14s\n", "embedded broker", em.median_us, em.p99_us, "-");
    printf("%-34s %12.2f %12.2f %14s\n", "thread broker, 1 caller", th.median_us, th.p99_us, "-");
    char label[64];
    snprintf(label, sizeof(label), "thread broker, %d sessions, %d thr", sessions, threads);
    printf("%-34s %12.2f %12.2f %14.0f\n", label, par.median_us, par.p99_us, rps);
    snprintf(label, sizeof(label), "thread broker, %d sessions pipelined", sessions);
    printf("%-34s %12s %12s %14.0f\n", label, "-", "-", prps);
    printf("%-34s %12.2f %12s %14.0f\n", "  CPU us/request blocking; 2-core cap", blocking_cpu, "-",
           2e6 / blocking_cpu);
    printf("%-34s %12.2f %12s %14.0f\n", "  CPU us/request pipelined; 2-core cap", pipelined_cpu,
           "-", 2e6 / pipelined_cpu);
    snprintf(label, sizeof(label), "hand-off floor, %d sessions, %d slots", sessions, threads);
    printf("%-34s %12.2f %12.2f %14.0f\n", label, flat.median_us, flat.p99_us, frps);
    printf("%-34s %12.2f %12s %14.0f\n", "  CPU us/request floor; 2-core cap", floor_cpu, "-",
           2e6 / floor_cpu);
    printf("%-34s %12.2f %12s %14s\n", "  thread broker / floor, blocking",
           median_of(ratio, rounds), "-", "(1.00 = the floor)");
    printf("%-34s %12.2f %12s %14s\n", "thread dispatch overhead (median)",
           th.median_us - eng.median_us, "-", "(target <= 20 us)");
    printf("(target >= 100000 requests/s on 2 cores with 64 sessions; this host has %ld cores; "
           "N-caller rows: median of %d rounds, blocking rates %.0f..%.0f)\n",
           sysconf(_SC_NPROCESSORS_ONLN), rounds, min_of(v[0], rounds), max_of(v[0], rounds));
    sbx_broker_free(thr);
    sbx_broker_free(emb);
    sbx_engine_free(e);
    sbx_config_free(cfg);
    unlink(secret);
    rmdir(dir);
    return 0;
}
