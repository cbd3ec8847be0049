/* fuzz_worker_metrics.c - libFuzzer harness for the worker's Prometheus scrape endpoint
 * (worker/metrics.c: serve_one reads an HTTP request head of at most 8 KiB from any client
 * that reaches metrics_listen, routes GET/HEAD /metrics, answers and closes). The real
 * listener runs on loopback (worker_metrics_new, its own thread) with a few calls and a
 * profile recorded, and each input is one connection.
 *
 * Input: byte 0 is where the request is cut in two sends with a pause between (0: one send),
 * the rest is the request. What is sent is what the server reads: the bytes up to the end of
 * the first "\r\n\r\n" or "\n\n", or up to a NUL before it (answered 400 as soon as it is
 * read), at most 8 KiB (bytes past them would stay unread, and closing over unread bytes
 * resets the connection). The client half-closes only
 * when the server would otherwise wait for more (no head end, under 8 KiB), so a server that
 * missed a head end hangs the input.
 *
 * Properties: no crash, leak or hang; every connection gets an answer within 3 s, one
 * well-formed HTTP/1.1 head (a status line, Content-Type, a Content-Length, Connection: close)
 * with exactly that many body bytes (none for HEAD); the status is the one a reading of the
 * request as the endpoint documents it gives (400 for a NUL before the head's end, 405 for a
 * method other than GET or HEAD, 200 for the path /metrics up to a space, '?' or line end, 404
 * otherwise); a 200 carries the exposition. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz/fuzz_oracle.h"
#include "worker/observe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The endpoint's request bound (metrics.c's METRICS_MAX_REQUEST). */
#define FUZZ_METRICS_MAX_REQUEST 8192
/* How long an answer may take (the endpoint's own timeout is 5 s). */
#define FUZZ_METRICS_ANSWER_MS 3000
/* Largest answer read: the exposition of a few calls and one profile is a few KiB. */
#define FUZZ_METRICS_MAX_ANSWER (1u << 20)

static worker_metrics *metrics;
static int port;

static void sampler(void *arg, worker_gauges *out)
{
    (void)arg;
    out->executions_running = 1;
    out->queue_limit = 64;
    out->n_profiles = 1;
    out->profiles[0].profile = "default";
    out->profiles[0].provider = "fake";
    out->profiles[0].sandboxes_live = 2;
}

static void at_exit(void)
{
    worker_metrics_free(metrics);
}

static void setup(void)
{
    sbx_error err = {0};
    if (worker_metrics_new("127.0.0.1:0", sampler, NULL, &metrics, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_worker_metrics: %s\n", err.message);
        abort();
    }
    port = worker_metrics_port(metrics);
    worker_call_sample s = {.rpc = WORKER_RPC_EXECUTE,
                            .op = WORKER_OP_RUN_CODE,
                            .completion_status = 1,
                            .duration_us = 1500,
                            .bytes_out = 120};
    worker_metrics_call(metrics, &s);
    s.auth_failure = true;
    s.grpc_status = 16;
    worker_metrics_call(metrics, &s);
    atexit(at_exit);
}

/* The status the endpoint documents for the request it read (a C string). */
static int expected_status(const char *req, bool *head)
{
    *head = strncmp(req, "HEAD ", 5) == 0;
    if (strncmp(req, "GET ", 4) != 0 && !*head)
        return 405;
    const char *path = req + (*head ? 5 : 4);
    size_t plen = strcspn(path, " ?\r\n");
    return plen == 8 && memcmp(path, "/metrics", 8) == 0 ? 200 : 404;
}

/* Where the server stops reading: the end of the first head end, or a NUL before it (then
 * *nul), at most the request bound. *ended says whether a head end or a NUL is there. */
static size_t request_extent(const uint8_t *p, size_t n, bool *ended, bool *nul_first)
{
    if (n > FUZZ_METRICS_MAX_REQUEST)
        n = FUZZ_METRICS_MAX_REQUEST;
    const uint8_t *nul = memchr(p, 0, n);
    size_t text = nul ? (size_t)(nul - p) : n;
    *ended = false;
    *nul_first = false;
    for (size_t i = 0; i < text; i++) {
        if (i + 2 <= text && p[i] == '\n' && p[i + 1] == '\n') {
            *ended = true;
            return i + 2;
        }
        if (i + 4 <= text && memcmp(p + i, "\r\n\r\n", 4) == 0) {
            *ended = true;
            return i + 4;
        }
    }
    if (nul != NULL) {
        *ended = *nul_first = true;
        return text + 1;
    }
    return n;
}

static int connect_endpoint(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    FUZZ_REQUIRE(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0,
                 "cannot connect to the metrics endpoint: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        FUZZ_REQUIRE(w > 0, "send to the endpoint failed: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}

/* Reads the whole answer (until the server closes) into a NUL-ended malloc'd buffer. */
static char *read_answer(int fd, size_t *len)
{
    char *buf = malloc(FUZZ_METRICS_MAX_ANSWER + 1);
    if (!buf)
        abort();
    size_t got = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        FUZZ_REQUIRE(spent < FUZZ_METRICS_ANSWER_MS, "no whole answer within %d ms (%zu bytes)",
                     FUZZ_METRICS_ANSWER_MS, got);
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, FUZZ_METRICS_ANSWER_MS - (int)spent) <= 0)
            continue;
        ssize_t r = recv(fd, buf + got, FUZZ_METRICS_MAX_ANSWER - got, 0);
        FUZZ_REQUIRE(r >= 0, "the answer was cut: %s after %zu bytes", strerror(errno), got);
        if (r == 0)
            break;
        got += (size_t)r;
        FUZZ_REQUIRE(got < FUZZ_METRICS_MAX_ANSWER, "an answer over %u bytes",
                     FUZZ_METRICS_MAX_ANSWER);
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

static void check_answer(const char *a, size_t len, int want, bool head)
{
    int status = 0;
    FUZZ_REQUIRE(sscanf(a, "HTTP/1.1 %3d ", &status) == 1 && status == want,
                 "answered %d, the request asks for %d: %.40s", status, want, a);
    const char *end = strstr(a, "\r\n\r\n");
    FUZZ_REQUIRE(end != NULL, "an answer without a head end");
    size_t hlen = (size_t)(end - a) + 4;
    FUZZ_REQUIRE(memchr(a, '\0', hlen) == NULL, "a NUL in the answer's head");
    const char *cl = strstr(a, "\r\nContent-Length: ");
    FUZZ_REQUIRE(cl != NULL && cl < end, "an answer without Content-Length");
    FUZZ_REQUIRE(strstr(a, "\r\nContent-Type: ") != NULL && strstr(a, "\r\nContent-Type: ") < end,
                 "an answer without Content-Type");
    FUZZ_REQUIRE(strstr(a, "\r\nConnection: close\r\n") != NULL &&
                     strstr(a, "\r\nConnection: close\r\n") < end + 2,
                 "an answer without Connection: close");
    size_t clen = strtoul(cl + 18, NULL, 10);
    size_t body = len - hlen;
    FUZZ_REQUIRE(body == (head ? 0 : clen), "Content-Length %zu with %zu body bytes (%s)", clen,
                 body, head ? "HEAD" : "GET");
    if (status == 200 && !head)
        FUZZ_REQUIRE(strncmp(a + hlen, "# HELP sbx_worker_calls_total ", 30) == 0,
                     "a 200 without the exposition");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!metrics)
        setup();
    if (size == 0)
        return 0;
    size_t cut = data[0];
    const uint8_t *req = data + 1;
    bool ended = false, nul_first = false;
    size_t n = request_extent(req, size - 1, &ended, &nul_first);
    char *text = malloc(n + 1);
    if (!text)
        abort();
    memcpy(text, req, n);
    text[n] = '\0';
    bool head = false;
    int want = expected_status(text, &head);
    if (nul_first) {
        want = 400;
        head = false; /* the refusal carries its reason, HEAD or not */
    }
    free(text);

    int fd = connect_endpoint();
    if (cut > 0 && cut < n) {
        send_all(fd, req, cut);
        struct timespec pause = {0, 200000}; /* the server mostly reads the first part alone */
        nanosleep(&pause, NULL);
        send_all(fd, req + cut, n - cut);
    } else {
        send_all(fd, req, n);
    }
    if (!ended && n < FUZZ_METRICS_MAX_REQUEST)
        shutdown(fd, SHUT_WR);
    size_t len = 0;
    char *answer = read_answer(fd, &len);
    close(fd);
    check_answer(answer, len, want, head);
    free(answer);
    return 0;
}
