/* bench_egress.c - what the egress proxy (network_egress allowlist, providers/common/egress.c)
 * adds, medians, inside a test network namespace of its own (never a public address):
 *   connect+GET  a new TCP connection to 198.51.100.1:80, a GET with Host: allowed.test, the
 *                small answer read to its end; direct (a socket of this namespace) vs proxied
 *                (a socket made in an allowlist sandbox's namespace through sbx_netns_call, so
 *                it goes through the sandbox's proxy: sniff the Host, ask the test resolver,
 *                connect, splice)
 *   100 MiB      the same for a 100 MiB answer, read to its end
 * Root only (network namespaces, the local provider as root). Usage: bench_egress [RUNS]
 * Timing belongs here, never in pass/fail tests.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/common/egress.h"
#include "providers/common/netns.h"
#include "providers/local/local.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

#define BIG (100L << 20)

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_egress: %s: %s\n", what, why ? why : "");
    exit(1);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(int64_t *us, size_t n)
{
    qsort(us, n, sizeof *us, cmp_i64);
    return (double)us[n / 2] / 1000.0;
}

static int bound(int type, uint32_t ip, uint16_t port)
{
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(ip);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        (type == SOCK_STREAM && listen(s, 64) != 0))
        die("bind", "198.51.100.x");
    return s;
}

static void *conn_thread(void *arg)
{
    int c = (int)(intptr_t)arg;
    char buf[4096];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf - 1 && (n = read(c, buf + len, sizeof buf - 1 - len)) > 0) {
        len += (size_t)n;
        buf[len] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    bool big = strstr(buf, "GET /big") != NULL;
    char head[128];
    int hl = snprintf(head, sizeof head, "HTTP/1.0 200 OK\r\nContent-Length: %ld\r\n\r\n",
                      big ? BIG : 2L);
    (void)!write(c, head, (size_t)hl);
    if (big) {
        static char chunk[1 << 16];
        for (long sent = 0; sent < BIG;) {
            ssize_t w = write(c, chunk, sizeof chunk);
            if (w <= 0)
                break;
            sent += w;
        }
    } else {
        (void)!write(c, "ok", 2);
    }
    close(c);
    return NULL;
}

static void *http_server(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        pthread_t t;
        if (pthread_create(&t, NULL, conn_thread, (void *)(intptr_t)c) == 0)
            pthread_detach(t);
        else
            close(c);
    }
    return NULL;
}

static void *resolver(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        uint8_t q[SBX_EGRESS_DNS_MAX], r[SBX_EGRESS_DNS_MAX];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
        sbx_egress_dns_query dq;
        if (n <= 0 || sbx_egress_dns_query_parse(q, (size_t)n, &dq) != SBX_EGRESS_OK)
            continue;
        uint32_t a = htonl(0xC6336401u);
        size_t rn = sbx_egress_dns_reply_build(q, &dq, 0, &a, dq.qtype == 1, 60, r, sizeof r);
        sendto(fd, r, rn, 0, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

/* In the sandbox's namespace: count unconnected TCP sockets. */
static int make_sockets(void *arg, int *fds, size_t max, size_t *n)
{
    size_t want = *(size_t *)arg;
    for (*n = 0; *n < want && *n < max; (*n)++) {
        fds[*n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[*n] < 0)
            return 1;
    }
    return 0;
}

/* connect, GET path, read to the end: microseconds. */
static int64_t fetch(int s, const char *path, long expect_body)
{
    int64_t t0 = sbx_monotonic_us();
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(80)};
    a.sin_addr.s_addr = htonl(0xC6336401u);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect", "198.51.100.1:80");
    char req[128];
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: allowed.test\r\n\r\n", path);
    if (write(s, req, (size_t)rl) != rl)
        die("write", path);
    static char buf[1 << 16];
    long total = 0;
    ssize_t n;
    while ((n = read(s, buf, sizeof buf)) > 0)
        total += n;
    int64_t us = sbx_monotonic_us() - t0;
    close(s);
    if (total < expect_body)
        die("short answer", path);
    return us;
}

static long sandbox_pid(const char *runtime_dir, const char *id)
{
    char path[512], line[256];
    snprintf(path, sizeof path, "%s/%s/meta", runtime_dir, id);
    FILE *f = fopen(path, "r");
    long pid = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "pid %ld", &pid) == 1)
            break;
    if (f)
        fclose(f);
    return pid;
}

static int run(int runs)
{
    if (sbx_egress_lo_up() != 0 || sbx_egress_local_route(0xC6336400u, 24) != 0)
        die("test network", "lo / local route");
    static int web, dns;
    web = bound(SOCK_STREAM, 0xC6336401u, 80);
    dns = bound(SOCK_DGRAM, 0xC6336435u, 53);
    pthread_t t;
    pthread_create(&t, NULL, http_server, &web);
    pthread_create(&t, NULL, resolver, &dns);

    const sbx_provider_ops *ops = sbx_provider_lookup("local");
    char rt[] = "/tmp/sbx-bench-egress-XXXXXX";
    if (!ops || !mkdtemp(rt))
        die("local provider", "lookup or runtime dir");
    sbx_options *o = sbx_options_new(ops->options);
    sbx_error err = {0};
    sbx_options_set(o, "egress_resolver", "198.51.100.53", &err);
    sbx_provider_ctx ctx = {.profile = "bench", .runtime_dir = rt, .node = "bench", .options = o};
    void *state = NULL;
    if (ops->open(&ctx, &state, &err) != SBX_OK)
        die("open", err.message);
    sbx_options_free(o);
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    static char *allow[] = {"allowed.test"};
    p->network_allow = allow;
    p->n_network_allow = 1;
    sbx_sandbox *sb = NULL;
    if (ops->create(state, NULL, NULL, p, &sb, &err) != SBX_OK)
        die("create", err.message);
    p->network_allow = NULL;
    p->n_network_allow = 0;
    sbx_message_free((ProtobufCMessage *)p);
    long pid = sandbox_pid(rt, sb->id);

    int64_t *direct = calloc((size_t)runs, sizeof *direct);
    int64_t *proxied = calloc((size_t)runs, sizeof *proxied);
    int64_t dbig[5], pbig[5];
    for (int i = 0; i < runs; i++) {
        int fds[1];
        size_t n = 0, one = 1;
        if (sbx_netns_call((pid_t)pid, make_sockets, &one, fds, 1, &n, &err) != SBX_OK || n != 1)
            die("netns", err.message);
        proxied[i] = fetch(fds[0], "/small", 2);
        direct[i] = fetch(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "/small", 2);
    }
    for (int i = 0; i < 5; i++) {
        int fds[1];
        size_t n = 0, one = 1;
        if (sbx_netns_call((pid_t)pid, make_sockets, &one, fds, 1, &n, &err) != SBX_OK || n != 1)
            die("netns", err.message);
        pbig[i] = fetch(fds[0], "/big", BIG);
        dbig[i] = fetch(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "/big", BIG);
    }
    double d = median_ms(direct, (size_t)runs), pr = median_ms(proxied, (size_t)runs);
    double db = median_ms(dbig, 5), pb = median_ms(pbig, 5);
    printf("egress proxy (medians; %d connections, 5 downloads)\n", runs);
    printf("  connect+GET   direct %8.3f ms  proxied %8.3f ms  added %8.3f ms\n", d, pr, pr - d);
    printf("  100 MiB GET   direct %8.1f ms  proxied %8.1f ms  added %8.1f ms (%.0f vs %.0f "
           "MiB/s)\n",
           db, pb, pb - db, 100.0 / (db / 1000.0), 100.0 / (pb / 1000.0));
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    ops->sandbox_close(sb);
    ops->destroy(state, id, &err);
    ops->close(state);
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%s/%s", rt, SBX_LOCAL_SWEEP_STAMP);
    unlink(stamp); /* the provider's sweep stamp: else the rmdir fails and the dir stays */
    rmdir(rt);
    free(direct);
    free(proxied);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 51;
    if (runs < 1)
        runs = 1;
    if (geteuid() != 0) {
        printf("bench_egress: skipped (needs root)\n");
        return 0;
    }
    pid_t child = fork();
    if (child == 0) {
        if (unshare(CLONE_NEWNET) != 0)
            die("unshare", "CLONE_NEWNET");
        int rc = run(runs);
        fflush(stdout);
        _exit(rc);
    }
    int wst = 0;
    waitpid(child, &wst, 0);
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 1;
}
