/* test_worker_hostile.c - sbx-worker under hostile clients, in-process (the fixture's worker on
 * the fake provider): floods of silent connections, connections that trickle bytes or hold
 * streams open, idle connections. Each test attacks, then asserts that a legitimate caller is
 * served during the attack and that the process's resident memory grew by less than a named
 * bound. The attackers are nghttp2 client sessions or raw sockets bound to other loopback
 * addresses (127.0.0.2 ...), so the per-address limits see them as other peers. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include "worker/worker_fixture.h"
#include "worker/worker_internal.h"

/* Under AddressSanitizer freed memory stays resident in its quarantine (256 MiB by default) and
 * would count as memory the worker holds: a small quarantine keeps RSS a measure of that. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "quarantine_size_mb=8";
}

/* Growth of this process's resident memory an attack may cause (the worker runs in-process;
 * the attackers' own sockets and sessions are small). Generous for ASan's shadow and
 * quarantine, far below what an unbounded attack pins (hundreds of MiB). */
#define HOSTILE_RSS_GROWTH_MAX_KB (96L * 1024)
/* Longest a test waits for the worker to close a connection it must close. */
#define HOSTILE_WAIT_MS 30000

static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':' && sscanf(line + n + 1, "%ld", &kb) == 1)
            break;
    fclose(f);
    assert_true(kb > 0);
    return kb;
}

/* Starts measuring: the peak resident size (VmHWM) is reset to the current one (clear_refs
 * "5", Linux 4.0), and that is returned. */
static long rss_start(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    assert_non_null(f);
    fputs("5", f);
    fclose(f);
    return status_kb("VmRSS");
}

/* How much the peak resident size rose above base since rss_start. */
static long rss_peak_growth(long base)
{
    return status_kb("VmHWM") - base;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP connection to the worker from the loopback address src. */
static int connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
    return fd;
}

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/* An empty SETTINGS frame: length 0, type 4, flags 0, stream 0. */
static const uint8_t EMPTY_SETTINGS[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

/* A connection that sends the preface and an empty SETTINGS, then nothing. */
static int silent_connection(const char *src, int port)
{
    int fd = connect_from(src, port);
    uint8_t hello[sizeof PREFACE - 1 + sizeof EMPTY_SETTINGS];
    memcpy(hello, PREFACE, sizeof PREFACE - 1);
    memcpy(hello + sizeof PREFACE - 1, EMPTY_SETTINGS, sizeof EMPTY_SETTINGS);
    assert_int_equal(send(fd, hello, sizeof hello, MSG_NOSIGNAL), (ssize_t)sizeof hello);
    return fd;
}

/* True when the worker closed fd (EOF or reset), after reading what it sent. */
static bool closed_by_worker(int fd)
{
    uint8_t buf[4096];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n == 0)
            return true;
        return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
}

static size_t count_open(const int *fds, size_t n)
{
    size_t open = 0;
    for (size_t i = 0; i < n; i++)
        if (!closed_by_worker(fds[i]))
            open++;
    return open;
}

static void close_all(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

/* ---- an HTTP/2 client session over a blocking socket (nghttp2) -------------------------- */

/* The request body of one stream: the 5-byte gRPC prefix, then `left` filler bytes. */
typedef struct h2body {
    struct h2body *next;
    uint8_t prefix[5];
    size_t prefix_off;
    size_t left;
    const uint8_t *data; /* the message itself (then left counts down its bytes), or NULL: 'x's */
    size_t off;
    bool endless; /* filler for ever */
    bool hold;    /* after the body, keep the stream open (never END_STREAM) */
} h2body;

typedef struct h2peer {
    int fd;
    nghttp2_session *s;
    bool goaway, eof;
    int responses;   /* streams the worker ended */
    int grpc_status; /* of the last one, -1 none */
    int statuses;    /* grpc-status values received */
    int resets;      /* streams the worker reset (RST_STREAM with an error code) */
    size_t sent;     /* bytes written to the socket */
    h2body *bodies;
    const char *authorization; /* sent as the authorization header when set */
    bool mute_on_answer;       /* sends nothing once a stream ended (what it writes is dropped) */
    int32_t first_closed;      /* the stream the worker ended first, 0 none */
} h2peer;

static ssize_t peer_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *arg)
{
    (void)s;
    (void)flags;
    h2peer *p = arg;
    if (p->mute_on_answer && p->responses > 0)
        return (ssize_t)len;
    ssize_t n = send(p->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0)
        p->sent += (size_t)n;
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? NGHTTP2_ERR_WOULDBLOCK
                                                       : NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
}

static int peer_frame(nghttp2_session *s, const nghttp2_frame *frame, void *arg)
{
    (void)s;
    h2peer *p = arg;
    if (frame->hd.type == NGHTTP2_GOAWAY)
        p->goaway = true;
    return 0;
}

static int peer_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                       size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                       void *arg)
{
    (void)s;
    (void)frame;
    (void)flags;
    h2peer *p = arg;
    if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0 && valuelen < 8) {
        p->statuses++;
        char v[8];
        memcpy(v, value, valuelen);
        v[valuelen] = '\0';
        p->grpc_status = atoi(v);
    }
    return 0;
}

static int peer_close(nghttp2_session *s, int32_t stream_id, uint32_t code, void *arg)
{
    (void)s;
    h2peer *p = arg;
    if (p->responses++ == 0)
        p->first_closed = stream_id;
    if (code != NGHTTP2_NO_ERROR)
        p->resets++;
    return 0;
}

static ssize_t peer_body(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    (void)s;
    (void)stream_id;
    (void)arg;
    h2body *b = src->ptr;
    if (b->hold && b->prefix_off == sizeof b->prefix && b->left == 0)
        return NGHTTP2_ERR_DEFERRED;
    size_t n = 0;
    while (b->prefix_off < sizeof b->prefix && n < length)
        buf[n++] = b->prefix[b->prefix_off++];
    size_t fill = length - n;
    if (!b->endless && fill > b->left)
        fill = b->left;
    if (b->data)
        memcpy(buf + n, b->data + b->off, fill);
    else
        memset(buf + n, 'x', fill);
    b->off += fill;
    n += fill;
    if (!b->endless) {
        b->left -= fill;
        if (b->left == 0 && !b->hold)
            *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

static void peer_open(h2peer *p, const char *src, int port)
{
    memset(p, 0, sizeof *p);
    p->grpc_status = -1;
    p->fd = connect_from(src, port);
    nghttp2_session_callbacks *cb;
    assert_int_equal(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_send_callback(cb, peer_send);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, peer_frame);
    nghttp2_session_callbacks_set_on_header_callback(cb, peer_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, peer_close);
    assert_int_equal(nghttp2_session_client_new(&p->s, cb, p), 0);
    nghttp2_session_callbacks_del(cb);
    assert_int_equal(nghttp2_submit_settings(p->s, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

/* Sends what the session has, reads what arrives within wait_ms; false once the worker closed
 * the connection. */
static bool peer_pump(h2peer *p, int wait_ms)
{
    if (p->eof)
        return false;
    if (nghttp2_session_send(p->s) != 0) {
        p->eof = true;
        return false;
    }
    struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
    if (poll(&pfd, 1, wait_ms) <= 0)
        return true;
    uint8_t buf[16384];
    ssize_t n = recv(p->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0 || nghttp2_session_mem_recv(p->s, buf, (size_t)n) < 0) {
        p->eof = true;
        return false;
    }
    return nghttp2_session_send(p->s) == 0 || (p->eof = true, false);
}

static void peer_free(h2peer *p)
{
    while (p->bodies) {
        h2body *b = p->bodies;
        p->bodies = b->next;
        free(b);
    }
    nghttp2_session_del(p->s);
    close(p->fd);
}

#define HNV(n, v)                                                                                  \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE         \
    }

enum body_end { BODY_ENDS, BODY_HELD, BODY_ENDLESS };

/* Starts a gRPC call to path whose message announces `announced` bytes and carries `body`
 * filler bytes, then ends the stream (BODY_ENDS), keeps it open (BODY_HELD), or sends filler
 * for ever (BODY_ENDLESS). */
static int32_t peer_call_data(h2peer *p, const char *path, uint32_t announced, size_t body,
                              enum body_end end, const uint8_t *data)
{
    nghttp2_nv hdrs[] = {
        HNV(":method", "POST"),
        HNV(":scheme", "http"),
        HNV(":authority", "127.0.0.1"),
        {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), NGHTTP2_NV_FLAG_NONE},
        HNV("content-type", "application/grpc"),
        HNV("te", "trailers"),
        {(uint8_t *)"authorization", (uint8_t *)p->authorization, 13,
         p->authorization ? strlen(p->authorization) : 0, NGHTTP2_NV_FLAG_NONE}};
    h2body *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->next = p->bodies;
    p->bodies = b;
    b->prefix[0] = 0;
    b->prefix[1] = (uint8_t)(announced >> 24);
    b->prefix[2] = (uint8_t)(announced >> 16);
    b->prefix[3] = (uint8_t)(announced >> 8);
    b->prefix[4] = (uint8_t)announced;
    b->left = body;
    b->endless = end == BODY_ENDLESS;
    b->hold = end == BODY_HELD;
    b->data = data;
    nghttp2_data_provider prd = {.source.ptr = b, .read_callback = peer_body};
    size_t n_hdrs = sizeof hdrs / sizeof hdrs[0] - (p->authorization ? 0 : 1);
    int32_t id = nghttp2_submit_request(p->s, NULL, hdrs, n_hdrs, &prd, p);
    assert_true(id > 0);
    return id;
}

static int32_t peer_call(h2peer *p, const char *path, uint32_t announced, size_t body,
                         enum body_end end)
{
    return peer_call_data(p, path, announced, body, end, NULL);
}

/* One Health/Check on p, answered: true when it got grpc-status 0. */
static bool peer_health_check(h2peer *p)
{
    int before = p->responses;
    peer_call(p, "/grpc.health.v1.Health/Check", 0, 0, BODY_ENDS);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p->responses == before && now_ms() < until)
        if (!peer_pump(p, 100))
            return false;
    return p->responses > before && p->grpc_status == 0;
}

/* ---- the legitimate caller ------------------------------------------------------------- */

static void assert_served(sbx_broker *b)
{
    sbx_request *req = fixture_command("echo served", NULL);
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, req, 60000, NULL, &c), SBX_OK);
    assert_non_null(c);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "legitimate call: %s: %s\n", sbx_status_name((sbx_status)c->error_code),
                c->error);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void assert_new_caller_served(worker_fixture *f)
{
    sbx_broker *b = fixture_client(f, NULL, NULL, NULL);
    assert_served(b);
    sbx_broker_free(b);
}

/* ---- limits the tests shrink -------------------------------------------------------------- */

#define TEST_MAX_CONNECTIONS 64
#define TEST_UNPROVEN_PER_PEER 16

static void small_caps(sbx_worker *w)
{
    worker_limits l;
    worker_get_limits(w, &l);
    l.max_connections = TEST_MAX_CONNECTIONS;
    l.max_unproven_per_peer = TEST_UNPROVEN_PER_PEER;
    l.first_request_us = 120 * 1000000LL; /* the deadline must not be what saves the caller */
    worker_set_limits(w, &l);
}

static void short_deadlines(sbx_worker *w)
{
    worker_limits l;
    worker_get_limits(w, &l);
    l.first_request_us = 1000000; /* 1 s */
    l.idle_us = 1000000;
    worker_set_limits(w, &l);
}

/* ---- connection floods ----------------------------------------------------------------- */

#define FLOOD_ONE_PEER 200

/* One address opens many silent connections: it keeps at most its per-peer share, the rest are
 * shed, and another caller connects and is served. */
static void test_worker_silent_connections_of_one_address_keep_only_their_share(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = small_caps};
    fixture_start(&f, &o);
    long rss0 = rss_start();
    int fds[FLOOD_ONE_PEER];
    for (size_t i = 0; i < FLOOD_ONE_PEER; i++)
        fds[i] = silent_connection("127.0.0.2", f.port);
    assert_new_caller_served(&f);
    size_t open = count_open(fds, FLOOD_ONE_PEER);
    fprintf(stderr, "silent flood from one address: %zu of %d still open (limit %d)\n", open,
            FLOOD_ONE_PEER, TEST_UNPROVEN_PER_PEER);
    assert_true(open <= TEST_UNPROVEN_PER_PEER);
    long grown = rss_peak_growth(rss0);
    fprintf(stderr, "RSS peak grew by %ld kB under the flood\n", grown);
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB);
    close_all(fds, FLOOD_ONE_PEER);
    fixture_stop(&f);
}

#define FLOOD_PEERS 8
#define FLOOD_PER_PEER 16

/* Many addresses fill the connection cap with silent connections: the caller whose connection
 * proved itself keeps it, and a new caller is admitted (a silent one is shed for it). */
static void test_worker_at_the_connection_cap_silent_connections_are_shed_first(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = small_caps};
    fixture_start(&f, &o);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    assert_served(b);
    h2peer proven;
    peer_open(&proven, "127.0.0.1", f.port);
    assert_true(peer_health_check(&proven));
    long rss0 = rss_start();

    int fds[FLOOD_PEERS * FLOOD_PER_PEER];
    size_t n = 0;
    for (int p = 0; p < FLOOD_PEERS; p++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 10 + p);
        for (int i = 0; i < FLOOD_PER_PEER; i++)
            fds[n++] = silent_connection(src, f.port);
    }
    assert_true(peer_health_check(&proven)); /* the same connection: it was not shed */
    assert_served(b);
    assert_new_caller_served(&f);
    size_t open = count_open(fds, n);
    fprintf(stderr, "silent flood from %d addresses: %zu of %zu still open (cap %d)\n", FLOOD_PEERS,
            open, n, TEST_MAX_CONNECTIONS);
    assert_true(open < TEST_MAX_CONNECTIONS);
    long grown = rss_peak_growth(rss0);
    fprintf(stderr, "RSS peak grew by %ld kB under the flood\n", grown);
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB);
    close_all(fds, n);
    peer_free(&proven);
    sbx_broker_free(b);
    fixture_stop(&f);
}

/* A connection that keeps sending (PINGs, a request stream that never ends) but never a
 * complete request is closed at the first-request deadline, with a GOAWAY. */
static void test_worker_trickling_connection_is_shed_at_the_first_request_deadline(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = short_deadlines};
    fixture_start(&f, &o);
    h2peer p;
    peer_open(&p, "127.0.0.3", f.port);
    peer_call(&p, "/sbx.v1.Execution/Execute", 1000, 10, BODY_HELD);
    assert_true(peer_pump(&p, 0));
    assert_new_caller_served(&f);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    uint8_t ping[8] = {0};
    while (now_ms() < until) {
        nghttp2_submit_ping(p.s, NGHTTP2_FLAG_NONE, ping);
        if (!peer_pump(&p, 100))
            break;
    }
    assert_true(p.eof);
    assert_true(p.goaway);
    peer_free(&p);
    assert_new_caller_served(&f);
    fixture_stop(&f);
}

#define UNPROVEN_STREAMS_TRIED 200
/* WORKER_UNPROVEN_STREAMS (server_impl.h): streams a connection may open before it proved
 * itself. */
#define UNPROVEN_STREAMS_KEPT 16

/* A connection that never completes a request opens 200 streams that never end: all but a few
 * are refused (REFUSED_STREAM) at once, so it pins a few calls, not 1,024. */
static void test_worker_unproven_connection_may_hold_only_a_few_streams(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    long rss0 = rss_start();
    h2peer p;
    peer_open(&p, "127.0.0.8", f.port);
    for (int i = 0; i < UNPROVEN_STREAMS_TRIED; i++)
        peer_call(&p, "/sbx.v1.Execution/Execute", 100, 10, BODY_HELD);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p.responses < UNPROVEN_STREAMS_TRIED - UNPROVEN_STREAMS_KEPT && now_ms() < until &&
           peer_pump(&p, 50)) {
    }
    fprintf(stderr, "%d streams on an unproven connection: %d refused\n", UNPROVEN_STREAMS_TRIED,
            p.responses);
    assert_int_equal(p.responses, UNPROVEN_STREAMS_TRIED - UNPROVEN_STREAMS_KEPT);
    assert_new_caller_served(&f);
    assert_true(rss_peak_growth(rss0) < HOSTILE_RSS_GROWTH_MAX_KB / 4);
    peer_free(&p);
    fixture_stop(&f);
}

/* A proven connection with nothing open is sent GOAWAY after the idle timeout and closed. */
static void test_worker_idle_connection_gets_goaway_and_is_closed(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = short_deadlines};
    fixture_start(&f, &o);
    h2peer p;
    peer_open(&p, "127.0.0.4", f.port);
    assert_true(peer_health_check(&p));
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (now_ms() < until && peer_pump(&p, 100)) {
    }
    assert_true(p.goaway);
    assert_true(p.eof);
    peer_free(&p);
    fixture_stop(&f);
}

/* The same after an Execute: its answer is written by the executor that ran it while the loop
 * sleeps (worker/jobs.c), which leaves the connection idle without waking the loop; the loop
 * must still send the GOAWAY about one idle period later, not never, even when the client
 * sends nothing more (not even a WINDOW_UPDATE for the answer, which would wake the loop). */
static void test_worker_idle_connection_after_an_execute_gets_goaway(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = short_deadlines};
    fixture_start(&f, &o);
    /* 200 ms: the loop is asleep when it ends, so its executor answers the call itself */
    sbx_request *req = fixture_command("sleep 200", NULL);
    size_t len = protobuf_c_message_get_packed_size(&req->base);
    uint8_t *msg = malloc(len);
    assert_non_null(msg);
    protobuf_c_message_pack(&req->base, msg);
    h2peer p;
    peer_open(&p, "127.0.0.4", f.port);
    p.mute_on_answer = true;
    peer_call_data(&p, "/sbx.v1.Execution/Execute", (uint32_t)len, len, BODY_ENDS, msg);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p.responses == 0 && now_ms() < until && peer_pump(&p, 50)) {
    }
    assert_int_equal(p.grpc_status, 0);
    int64_t answered = now_ms();
    while (!p.eof && now_ms() < until && peer_pump(&p, 100)) {
    }
    int64_t waited = now_ms() - answered;
    fprintf(stderr, "idle after an Execute: GOAWAY %s, closed after %lld ms (idle limit 1000)\n",
            p.goaway ? "sent" : "never sent", (long long)waited);
    assert_true(p.goaway);
    assert_true(p.eof);
    assert_true(waited < 5000); /* one idle period late at most, and slow CI */
    peer_free(&p);
    free(msg);
    sbx_request_free(req);
    fixture_stop(&f);
}

/* A packed Execute request for shell, in *msg (the caller frees it); its length. */
static size_t packed_command(const char *shell, uint8_t **msg)
{
    sbx_request *req = fixture_command(shell, NULL);
    size_t len = protobuf_c_message_get_packed_size(&req->base);
    *msg = malloc(len);
    assert_non_null(*msg);
    protobuf_c_message_pack(&req->base, *msg);
    sbx_request_free(req);
    return len;
}

/* The loop thread runs the Executes a turn read itself, one after the other (worker/jobs.c).
 * A slow one first must not hold up a quick one read with it: once the slow one outlasts the
 * cover, the standby hands the quick one to an executor. Both are sent in one write, so the
 * worker reads them together; checked by order, not by time: the quick call's stream ends
 * first. Without the hand-off the quick call waited for the slow one's 4 s. */
static void test_worker_call_read_behind_a_slow_one_is_not_held_up(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    uint8_t *slow, *quick;
    size_t slow_len = packed_command("sleep 4000; echo slow", &slow);
    size_t quick_len = packed_command("echo quick", &quick);
    h2peer p;
    peer_open(&p, "127.0.0.5", f.port);
    assert_true(peer_health_check(&p)); /* the handshake done: what follows goes out at once */
    int32_t slow_id = peer_call_data(&p, "/sbx.v1.Execution/Execute", (uint32_t)slow_len, slow_len,
                                     BODY_ENDS, slow);
    int32_t quick_id = peer_call_data(&p, "/sbx.v1.Execution/Execute", (uint32_t)quick_len,
                                      quick_len, BODY_ENDS, quick);
    p.first_closed = 0;
    p.responses = 0;
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p.responses < 2 && now_ms() < until && peer_pump(&p, 50)) {
    }
    assert_int_equal(p.responses, 2);
    assert_int_equal(p.grpc_status, 0);
    assert_int_equal(p.first_closed, quick_id);
    assert_true(slow_id != quick_id);
    peer_free(&p);
    free(slow);
    free(quick);
    fixture_stop(&f);
}

/* ---- memory ---------------------------------------------------------------------------- */

#define ENDLESS_STREAMS 64
/* What an unbounded worker takes from the attack below: 64 streams x 16 MiB. */
#define ENDLESS_BYTES_MAX ((size_t)ENDLESS_STREAMS * (16u << 20))
/* The attacker stops when the worker has taken nothing for this long (its windows are spent). */
#define ENDLESS_QUIET_MS 1000

/* Pushes p's streams until the worker stops taking bytes, all of them went, or the wait ends. */
static void push_until_stalled(h2peer *p, size_t max_bytes)
{
    size_t last = p->sent;
    int64_t quiet_since = now_ms(), until = now_ms() + HOSTILE_WAIT_MS;
    while (now_ms() < until && p->sent < max_bytes && peer_pump(p, 20)) {
        if (p->sent != last) {
            last = p->sent;
            quiet_since = now_ms();
        } else if (now_ms() - quiet_since > ENDLESS_QUIET_MS) {
            break;
        }
    }
}

/* One connection opens 64 streams, each announcing a 16 MiB message and sending filler that
 * never ends: the worker keeps at most its per-connection budget (streams past it are refused
 * RESOURCE_EXHAUSTED and their windows are not granted again), and serves another caller. */
static void test_worker_streams_that_never_end_pin_bounded_memory(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    long rss0 = rss_start();
    h2peer p;
    peer_open(&p, "127.0.0.5", f.port);
    for (int i = 0; i < ENDLESS_STREAMS; i++)
        peer_call(&p, "/sbx.v1.Execution/Execute", 16u << 20, 0, BODY_ENDLESS);
    push_until_stalled(&p, ENDLESS_BYTES_MAX);
    long grown = rss_peak_growth(rss0);
    fprintf(stderr,
            "64 endless streams: %zu bytes sent, %d answered RESOURCE_EXHAUSTED, %d refused, RSS "
            "peak grew by %ld kB\n",
            p.sent, p.statuses, p.responses, grown);
    assert_new_caller_served(&f);
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB);
    peer_free(&p);
    fixture_stop(&f);
}

#define HELD_CONNECTIONS 6
#define HELD_STREAMS 8
#define HELD_BYTES (2u << 20)
#define TEST_CONN_BUFFER (8u << 20)
#define TEST_BUFFER_TOTAL (24u << 20)

static void small_buffers(sbx_worker *w)
{
    worker_limits l;
    worker_get_limits(w, &l);
    l.conn_buffer_max = TEST_CONN_BUFFER;
    l.buffer_total_max = TEST_BUFFER_TOTAL;
    worker_set_limits(w, &l);
}

/* Connections from several addresses each hold streams with half-sent 4 MiB messages: what the
 * worker keeps is bounded by its total, the streams past it are refused RESOURCE_EXHAUSTED. */
static void test_worker_held_requests_on_many_connections_stay_within_the_total(void **state)
{
    (void)state;
    worker_fixture f;
    worker_fixture_opts o = {.before_run = small_buffers};
    fixture_start(&f, &o);
    long rss0 = rss_start();
    h2peer peers[HELD_CONNECTIONS];
    int refused = 0;
    for (int i = 0; i < HELD_CONNECTIONS; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 20 + i);
        peer_open(&peers[i], src, f.port);
        for (int k = 0; k < HELD_STREAMS; k++)
            peer_call(&peers[i], "/sbx.v1.Execution/Execute", 2 * HELD_BYTES, HELD_BYTES,
                      BODY_HELD);
        push_until_stalled(&peers[i], SIZE_MAX);
    }
    for (int i = 0; i < HELD_CONNECTIONS; i++) {
        peer_pump(&peers[i], 100); /* the answers to refused streams */
        refused += peers[i].statuses;
    }
    long grown = rss_peak_growth(rss0);
    fprintf(stderr,
            "%d connections x %d held streams of %u bytes: %d refused, RSS peak grew by %ld kB "
            "(total budget %u kB)\n",
            HELD_CONNECTIONS, HELD_STREAMS, HELD_BYTES, refused, grown, TEST_BUFFER_TOTAL >> 10);
    /* 48 streams x 2 MiB do not fit in 24 MiB: at least half were refused */
    assert_true(refused >= HELD_CONNECTIONS * HELD_STREAMS / 2);
    assert_true(grown < (long)(TEST_BUFFER_TOTAL >> 10) + HOSTILE_RSS_GROWTH_MAX_KB / 2);
    for (int i = 0; i < HELD_CONNECTIONS; i++)
        peer_free(&peers[i]);
    assert_new_caller_served(&f);
    fixture_stop(&f);
}

#define TENANT_A_ENV "SBX_HOSTILE_TENANT_A_TOKEN"
#define TENANT_B_ENV "SBX_HOSTILE_TENANT_B_TOKEN"
#define SHARE_CONNECTIONS 6
#define SHARE_WRITE (4608u << 10) /* 4.5 MiB: more than a quarter of TEST_BUFFER_TOTAL is left */

/* A worker configuration in a new directory made from the template dir (path receives the
 * file's name): the fake provider, a thread broker, two token callers, tenant-a and tenant-b,
 * each allowed its own subject. */
static void write_two_tenants(char *dir, char *path, size_t path_size)
{
    setenv(TENANT_A_ENV, "tenant-a-token-0123456789", 1);
    setenv(TENANT_B_ENV, "tenant-b-token-0123456789", 1);
    assert_non_null(mkdtemp(dir));
    snprintf(path, path_size, "%s/worker.yaml", dir);
    FILE *cf = fopen(path, "w");
    assert_non_null(cf);
    fprintf(cf,
            "sandbox:\n"
            "  default_profile: fake\n"
            "  secret_file: %s/secret\n"
            "  runtime_dir: %s/run\n"
            "  broker: { flavor: thread, threads: 4, queue_depth: 4096 }\n"
            "  worker:\n"
            "    auth:\n"
            "      callers:\n"
            "        - { name: tenant-a, token_env: " TENANT_A_ENV ", subjects: [tenant-a] }\n"
            "        - { name: tenant-b, token_env: " TENANT_B_ENV ", subjects: [tenant-b] }\n"
            "  profiles:\n"
            "    fake: { type: fake, scope: per_call }\n",
            dir, dir);
    fclose(cf);
}

/* tenant-b writes a SHARE_WRITE file through the worker, and it succeeds. */
static void assert_tenant_b_writes(worker_fixture *f)
{
    sbx_broker *b = fixture_client(f, NULL, NULL, TENANT_B_ENV);
    sbx_request *r = fixture_command("true", "tenant-b");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    sbx__v1__run_command__free_unpacked(r->run_command, NULL);
    r->run_command = NULL;
    r->write_file = malloc(sizeof(*r->write_file));
    sbx__v1__write_file__init(r->write_file);
    sbx_set_string(&r->write_file->path, "/work/big.bin");
    uint8_t *big = calloc(1, SHARE_WRITE);
    assert_non_null(big);
    sbx_set_bytes(&r->write_file->content, big, SHARE_WRITE);
    free(big);
    r->write_file->mkdirs = 1;
    sbx_completion *c = NULL;
    assert_int_equal(sbx_broker_submit(b, r, 60000, NULL, &c), SBX_OK);
    assert_non_null(c);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "tenant-b: %s: %s\n", sbx_status_name((sbx_status)c->error_code), c->error);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    sbx_request_free(r);
    sbx_broker_free(b);
}

/* One caller's held requests cannot refuse another caller's: tenant-a holds 2 MiB streams on six
 * connections (each charges 4 MiB, one per connection fits its 8 MiB) until it stalls; it may
 * hold three quarters of the worker's 24 MiB, so tenant-b's 4.5 MiB write still fits. Before:
 * tenant-a's streams took five sixths of the total and tenant-b got RESOURCE_EXHAUSTED. */
static void test_worker_one_caller_cannot_take_every_callers_buffer_room(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-hostile-share-XXXXXX";
    char path[sizeof dir + 16];
    write_two_tenants(dir, path, sizeof path);
    worker_fixture f;
    worker_fixture_opts o = {.config_path = path, .before_run = small_buffers};
    fixture_start(&f, &o);
    h2peer peers[SHARE_CONNECTIONS];
    for (int i = 0; i < SHARE_CONNECTIONS; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 40 + i);
        peer_open(&peers[i], src, f.port);
        peers[i].authorization = "Bearer tenant-a-token-0123456789";
        for (int k = 0; k < 2; k++)
            peer_call(&peers[i], "/sbx.v1.Execution/Execute", 2 * HELD_BYTES, HELD_BYTES,
                      BODY_HELD);
        push_until_stalled(&peers[i], SIZE_MAX);
    }
    assert_tenant_b_writes(&f);
    int refused = 0;
    for (int i = 0; i < SHARE_CONNECTIONS; i++) {
        peer_pump(&peers[i], 100);
        refused += peers[i].statuses;
        peer_free(&peers[i]);
    }
    fprintf(stderr, "tenant-a: %d of %d held streams refused\n", refused, 2 * SHARE_CONNECTIONS);
    fixture_stop(&f);
    unlink(path);
    rmdir(dir);
}

#define UNREAD_CALLS 24
#define UNREAD_OUTPUT "yes 1000000" /* 2 MB of stdout: a 2 MiB answer buffer */
#define UNREAD_ANSWER (2u << 20)

/* One caller's unread answers cannot take the room every caller's requests need: tenant-a runs
 * 24 commands that print 2 MB each (half Execute, half ExecuteStream) on a connection whose
 * stream windows are 0, so it reads nothing. Its answers may hold three quarters of the
 * worker's 24 MiB; the calls whose answers pass that are reset (RESOURCE_EXHAUSTED in the log,
 * their jobs cancelled), and tenant-b's 4.5 MiB write is served. Before: every answer stayed in
 * the worker, charged to nothing (24 x 2 MiB here; calls x output limit in general), and no
 * stream was reset. */
static void test_worker_unread_answers_of_one_caller_are_bounded_by_its_share(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-hostile-unread-XXXXXX";
    char path[sizeof dir + 16];
    write_two_tenants(dir, path, sizeof path);
    worker_fixture f;
    worker_fixture_opts o = {.config_path = path, .before_run = small_buffers};
    fixture_start(&f, &o);
    h2peer p;
    peer_open(&p, "127.0.0.60", f.port);
    p.authorization = "Bearer tenant-a-token-0123456789";
    nghttp2_settings_entry zero = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
    assert_int_equal(nghttp2_submit_settings(p.s, NGHTTP2_FLAG_NONE, &zero, 1), 0);
    sbx_request *r = fixture_command(UNREAD_OUTPUT, "tenant-a");
    size_t len = 0;
    uint8_t *msg = sbx_message_pack(&r->base, &len);
    assert_non_null(msg);
    for (int i = 0; i < UNREAD_CALLS; i++)
        peer_call_data(&p, i % 2 ? "/sbx.v1.Execution/ExecuteStream" : "/sbx.v1.Execution/Execute",
                       (uint32_t)len, len, BODY_ENDS, msg);
    /* tenant-a may keep this many answers (its share, WORKER_CALLER_SHARE); the rest are reset */
    int kept = (int)((TEST_BUFFER_TOTAL - TEST_BUFFER_TOTAL / 4) / UNREAD_ANSWER);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p.resets < UNREAD_CALLS - kept && now_ms() < until && peer_pump(&p, 50)) {
    }
    fprintf(stderr, "tenant-a: %d calls of 2 MB unread: %d reset, %d kept at most\n", UNREAD_CALLS,
            p.resets, kept);
    /* all but `kept` (less one: the requests themselves count too) */
    assert_in_range(p.resets, UNREAD_CALLS - kept, UNREAD_CALLS - kept + 1);
    assert_tenant_b_writes(&f);
    peer_free(&p);
    free(msg);
    sbx_request_free(r);
    fixture_stop(&f);
    unlink(path);
    rmdir(dir);
}

#define TOKEN_ENV "SBX_HOSTILE_TEST_TOKEN"

/* On a worker that requires authentication, a caller without credentials gets UNAUTHENTICATED
 * when its headers arrive and none of its body is kept: 64 streams of 16 MiB pin nothing, and
 * the caller with a token is served meanwhile. */
static void test_worker_unauthenticated_streams_buffer_nothing(void **state)
{
    (void)state;
    setenv(TOKEN_ENV, "hostile-test-token", 1);
    worker_fixture f;
    worker_fixture_opts o = {.token_env = TOKEN_ENV, .subjects = "*"};
    fixture_start(&f, &o);
    long rss0 = rss_start();
    h2peer p;
    peer_open(&p, "127.0.0.6", f.port);
    for (int i = 0; i < ENDLESS_STREAMS; i++)
        peer_call(&p, "/sbx.v1.Execution/Execute", 16u << 20, 16u << 20, BODY_HELD);
    push_until_stalled(&p, ENDLESS_BYTES_MAX);
    long grown = rss_peak_growth(rss0);
    fprintf(stderr,
            "64 unauthenticated streams: %zu bytes sent, %d answered (status %d), %d refused, "
            "RSS peak grew by %ld kB\n",
            p.sent, p.statuses, p.grpc_status, p.responses, grown);
    /* each answered UNAUTHENTICATED, or refused outright past WORKER_UNPROVEN_STREAMS */
    assert_int_equal(p.statuses + p.responses, ENDLESS_STREAMS);
    assert_int_equal(p.grpc_status, 16); /* UNAUTHENTICATED */
    sbx_broker *b = fixture_client(&f, NULL, NULL, TOKEN_ENV);
    assert_served(b);
    sbx_broker_free(b);
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB / 4);
    peer_free(&p);
    fixture_stop(&f);
}

#define REFLECTION_REQUESTS 20000
#define REFLECTION_FILE "sbx/v1/execution.proto"
#define REFLECTION_PATH "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"

/* A client that does not authenticate sends reflection requests on one stream and reads none of
 * the answers (its window is 0): the answers it leaves unread stop at the stream's limit, the
 * stream is reset (RESOURCE_EXHAUSTED in the worker's log), and an authenticated caller is
 * served. Before: each 29-byte
 * request left an 8 KiB answer in the worker, 20,000 of them about 160 MB (audit: 1.2 GB from
 * 5 MB sent, before the first-request deadline). */
static void test_worker_unread_reflection_answers_are_bounded(void **state)
{
    (void)state;
    setenv(TOKEN_ENV, "hostile-test-token", 1);
    worker_fixture f;
    worker_fixture_opts o = {.token_env = TOKEN_ENV, .subjects = "*"};
    fixture_start(&f, &o);
    long rss0 = rss_start();
    h2peer p;
    peer_open(&p, "127.0.0.7", f.port);
    nghttp2_settings_entry zero = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0};
    assert_int_equal(nghttp2_submit_settings(p.s, NGHTTP2_FLAG_NONE, &zero, 1), 0);
    /* ServerReflectionRequest{file_by_filename (3): REFLECTION_FILE}, framed, many times */
    size_t body = 2 + strlen(REFLECTION_FILE), one = 5 + body;
    uint8_t *msgs = malloc(one * REFLECTION_REQUESTS);
    assert_non_null(msgs);
    for (size_t i = 0; i < REFLECTION_REQUESTS; i++) {
        uint8_t *m = msgs + i * one;
        m[0] = m[1] = m[2] = m[3] = 0;
        m[4] = (uint8_t)body;
        m[5] = 0x1a;
        m[6] = (uint8_t)strlen(REFLECTION_FILE);
        memcpy(m + 7, REFLECTION_FILE, strlen(REFLECTION_FILE));
    }
    /* The first prefix is the call's own; the rest of the bytes follow it as its body. */
    peer_call_data(&p, REFLECTION_PATH, (uint32_t)body, one * REFLECTION_REQUESTS - 5, BODY_HELD,
                   msgs + 5);
    push_until_stalled(&p, SIZE_MAX);
    peer_pump(&p, 200);
    long grown = rss_peak_growth(rss0);
    fprintf(stderr,
            "%d reflection requests with no answer read: %zu bytes sent, grpc-status %d, RSS "
            "peak grew by %ld kB\n",
            REFLECTION_REQUESTS, p.sent, p.grpc_status, grown);
    assert_int_equal(p.responses, 1); /* reset: its trailers could not pass its zero window */
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB / 4);
    sbx_broker *b = fixture_client(&f, NULL, NULL, TOKEN_ENV);
    assert_served(b);
    sbx_broker_free(b);
    peer_free(&p);
    free(msgs);
    fixture_stop(&f);
}

/* ---- decoded size ------------------------------------------------------------------------ */

#define EMPTY_ARGS (4u << 20)

/* An Execute whose argv holds 4 M empty strings (8 MiB on the wire) is refused INVALID_ARGUMENT
 * naming argv before it is decoded (it took 300 MB), and another caller is served. */
static void test_worker_request_with_millions_of_empty_args_is_refused_undecoded(void **state)
{
    (void)state;
    worker_fixture f;
    fixture_start(&f, NULL);
    /* ExecutionRequest{profile: "fake" (2), run_command (11): RunCommand{argv (1): "" x 4M}} */
    size_t inner = 2 * (size_t)EMPTY_ARGS;
    size_t len = 6 + 1 + 4 + inner;
    uint8_t *msg = malloc(len);
    assert_non_null(msg);
    uint8_t *w = msg;
    memcpy(w,
           "\x12\x04"
           "fake",
           6);
    w += 6;
    *w++ = 11 << 3 | 2;
    for (size_t v = inner; v; v >>= 7) /* 8 MiB: a 4-byte varint */
        *w++ = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
    for (size_t i = 0; i < EMPTY_ARGS; i++) {
        *w++ = 1 << 3 | 2;
        *w++ = 0;
    }
    assert_int_equal((size_t)(w - msg), len);
    long rss0 = rss_start();
    h2peer p;
    peer_open(&p, "127.0.0.7", f.port);
    peer_call_data(&p, "/sbx.v1.Execution/Execute", (uint32_t)len, len, BODY_ENDS, msg);
    int64_t until = now_ms() + HOSTILE_WAIT_MS;
    while (p.statuses == 0 && now_ms() < until && peer_pump(&p, 50)) {
    }
    long grown = rss_peak_growth(rss0);
    fprintf(stderr,
            "argv of %u empty strings (%zu bytes): grpc-status %d, RSS peak grew by %ld kB\n",
            EMPTY_ARGS, len, p.grpc_status, grown);
    assert_int_equal(p.grpc_status, 3); /* INVALID_ARGUMENT */
    assert_new_caller_served(&f);
    assert_true(grown < HOSTILE_RSS_GROWTH_MAX_KB / 2);
    peer_free(&p);
    free(msg);
    fixture_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_silent_connections_of_one_address_keep_only_their_share),
        cmocka_unit_test(test_worker_at_the_connection_cap_silent_connections_are_shed_first),
        cmocka_unit_test(test_worker_trickling_connection_is_shed_at_the_first_request_deadline),
        cmocka_unit_test(test_worker_idle_connection_gets_goaway_and_is_closed),
        cmocka_unit_test(test_worker_idle_connection_after_an_execute_gets_goaway),
        cmocka_unit_test(test_worker_call_read_behind_a_slow_one_is_not_held_up),
        cmocka_unit_test(test_worker_unproven_connection_may_hold_only_a_few_streams),
        cmocka_unit_test(test_worker_streams_that_never_end_pin_bounded_memory),
        cmocka_unit_test(test_worker_held_requests_on_many_connections_stay_within_the_total),
        cmocka_unit_test(test_worker_one_caller_cannot_take_every_callers_buffer_room),
        cmocka_unit_test(test_worker_unread_answers_of_one_caller_are_bounded_by_its_share),
        cmocka_unit_test(test_worker_unauthenticated_streams_buffer_nothing),
        cmocka_unit_test(test_worker_unread_reflection_answers_are_bounded),
        cmocka_unit_test(test_worker_request_with_millions_of_empty_args_is_refused_undecoded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
