/* fuzz_worker_h2.c - libFuzzer harness for everything sbx-worker decodes from a caller: the real
 * worker (its event loop on a thread, the engine over the fake provider, the thread broker,
 * a token caller) serves a loopback TCP connection, and each input becomes what a client writes
 * on it after a valid preface and SETTINGS: a sequence of HTTP/2 frames built from the input's
 * records (request HEADERS whose fields -- :method, :path, content-type, grpc-timeout,
 * grpc-encoding, authorization, x-sbx-node -- the input chooses or spells, HPACK-encoded by
 * nghttp2's deflater; gRPC-framed DATA with correct or lying length prefixes, split anywhere;
 * HealthCheck and authenticated Execute calls whose message bytes come from the input; raw
 * frames; raw bytes). So nghttp2's session, the worker's callbacks (on_header, call_body,
 * call_dispatch), grpc-timeout and authorization parsing, HealthCheckRequest and
 * ExecuteRequest decoding all see fuzzed bytes in the order a real client could send them.
 *
 * Properties: no crash, leak or sanitizer report in the worker; every byte the worker sends
 * back is well-formed HTTP/2 framing (9-byte headers, lengths within the default
 * SETTINGS_MAX_FRAME_SIZE); the worker answers a PING sent after the input or ends the
 * connection (it never hangs it); and after every input a new connection is served (Health).
 * Commands run in the fake provider's interpreter, never on the host. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/broker.h"
#include "sbx/engine.h"
#include "sbx/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The token of the one configured caller (through this env var). */
#define FUZZ_TOKEN_ENV "SBX_FUZZ_WORKER_TOKEN"
#define FUZZ_TOKEN "fuzz-worker-token-0123456789"
/* Longest time the harness waits for the worker to answer the PING after a well-framed input:
 * far more than a loaded machine needs (it is answered by the loop thread at once). */
#define FUZZ_PING_BUDGET_MS 5000
/* ... and after an input with raw bytes, which may leave a frame unfinished (the PING is then
 * payload, and the worker rightly waits for the rest). */
#define FUZZ_RAW_BUDGET_MS 200
/* Most time given to the answers of the calls the input ended once the PING is acked (the
 * fake provider answers in about a millisecond; a call the input made slow is left behind). */
#define FUZZ_ANSWER_MS 100
/* Streams whose ends are tracked (the harness opens ids below this). */
#define FUZZ_TRACKED_STREAMS 1024
/* Default SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2): the worker never raises it. */
#define H2_MAX_FRAME 16384
/* Most frames built from one input, and most bytes written (inputs are small anyway). */
#define FUZZ_MAX_RECORDS 64
#define FUZZ_MAX_OUT (1u << 20)
/* Largest header block the harness builds (the worker's header list limit is 16 KiB). */
#define FUZZ_MAX_BLOCK (32u << 10)

static struct {
    bool ready;
    char dir[256];
    sbx_config *cfg;
    sbx_engine *engine;
    sbx_broker *broker;
    sbx_worker *worker;
    pthread_t thread;
    int port;
    bool trace; /* $SBX_FUZZ_TRACE set: print every frame the worker sends */
} g;

static void *loop_main(void *arg)
{
    (void)arg;
    sbx_error err = {0};
    if (sbx_worker_run(g.worker, &err) != SBX_OK)
        fprintf(stderr, "fuzz_worker_h2: worker loop: %s\n", err.message);
    return NULL;
}

static void stop_worker(void)
{
    if (!g.ready)
        return;
    sbx_worker_shutdown(g.worker);
    pthread_join(g.thread, NULL);
    sbx_worker_free(g.worker);
    sbx_broker_free(g.broker);
    sbx_engine_free(g.engine);
    sbx_config_free(g.cfg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fuzz_worker_h2: could not remove %s\n", g.dir);
    g.ready = false;
}

static void start_worker(void)
{
    signal(SIGPIPE, SIG_IGN);
    g.trace = getenv("SBX_FUZZ_TRACE") != NULL;
    setenv(FUZZ_TOKEN_ENV, FUZZ_TOKEN, 1);
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(g.dir, sizeof g.dir, "%s/sbx-fuzz-worker-XXXXXX", tmp);
    if (!mkdtemp(g.dir))
        abort();
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  default_profile: fake\n"
             "  secret_file: %s/secret\n"
             "  runtime_dir: %s/run\n"
             "  node: fuzz-node\n"
             "  broker: { flavor: thread, threads: 2, queue_depth: 64 }\n"
             "  profiles:\n"
             "    fake: { type: fake, scope: per_call }\n",
             g.dir, g.dir);
    sbx_error err = {0};
    if (sbx_config_load_string(yaml, strlen(yaml), "fuzz-worker.yaml", &g.cfg, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_worker_h2: config: %s\n", err.message);
        abort();
    }
    sbx_worker_config *wc = &g.cfg->worker;
    free(wc->listen);
    wc->listen = strdup("127.0.0.1:0");
    wc->drain_timeout_ms = 2000;
    wc->callers = calloc(1, sizeof *wc->callers);
    wc->n_callers = 1;
    wc->callers[0].name = strdup("fuzz-caller");
    wc->callers[0].token_env = strdup(FUZZ_TOKEN_ENV);
    wc->callers[0].subjects = calloc(1, sizeof(char *));
    wc->callers[0].subjects[0] = strdup("alice");
    wc->callers[0].n_subjects = 1;
    if (sbx_engine_new(g.cfg, &g.engine, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_worker_h2: engine: %s\n", err.message);
        abort();
    }
    sbx_thread_broker_opts bo = {.threads = 2, .queue_depth = 64, .lru_size = 64};
    if (sbx_broker_open_thread(g.engine, &bo, &g.broker, &err) != SBX_OK ||
        sbx_worker_new(g.cfg, g.engine, g.broker, &g.worker, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_worker_h2: worker: %s\n", err.message);
        abort();
    }
    g.port = sbx_worker_port(g.worker);
    if (pthread_create(&g.thread, NULL, loop_main, NULL) != 0)
        abort();
    g.ready = true;
    atexit(stop_worker);
}

/* ---- reading the input ------------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static uint8_t u8(rd *r)
{
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

static uint16_t u16(rd *r)
{
    uint16_t hi = u8(r);
    return (uint16_t)(hi << 8 | u8(r));
}

/* Up to want bytes of the input (fewer at its end). */
static const uint8_t *take(rd *r, size_t want, size_t *got)
{
    *got = want < r->n ? want : r->n;
    const uint8_t *p = r->p;
    r->p += *got;
    r->n -= *got;
    return p;
}

/* ---- building what the client writes ---------------------------------------------------- */

typedef struct out {
    uint8_t *b;
    size_t len, cap;
    bool full;
    bool raw;      /* raw bytes were written: the framing may be broken */
    bool settings; /* a raw SETTINGS frame may have raised the peer's max frame size */
    uint8_t ended[FUZZ_TRACKED_STREAMS / 8]; /* streams the client ended (END_STREAM sent) */
} out;

static void put(out *o, const void *d, size_t n)
{
    if (n == 0)
        return;
    if (o->full || o->len + n > FUZZ_MAX_OUT) {
        o->full = true;
        return;
    }
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *p = realloc(o->b, cap);
        if (!p)
            abort();
        o->b = p;
        o->cap = cap;
    }
    memcpy(o->b + o->len, d, n);
    o->len += n;
}

static void frame(out *o, uint8_t type, uint8_t flags, uint32_t sid, const uint8_t *payload,
                  size_t len)
{
    uint8_t h[9] = {
        (uint8_t)(len >> 16),        (uint8_t)(len >> 8),  (uint8_t)len,        type,        flags,
        (uint8_t)(sid >> 24 & 0x7f), (uint8_t)(sid >> 16), (uint8_t)(sid >> 8), (uint8_t)sid};
    put(o, h, sizeof h);
    put(o, payload, len);
    if ((type == 0 || type == 1) && (flags & 1) && sid < FUZZ_TRACKED_STREAMS && !o->full)
        o->ended[sid / 8] |= (uint8_t)(1u << (sid % 8));
}

enum { F_DATA = 0, F_HEADERS = 1, F_SETTINGS = 4, F_PING = 6, F_GOAWAY = 7, F_CONT = 9 };
enum { FL_END_STREAM = 1, FL_ACK = 1, FL_END_HEADERS = 4 };

typedef struct conn_state {
    nghttp2_hd_deflater *hd;
    uint32_t next_sid;  /* next new client stream */
    uint32_t open[256]; /* streams opened so far */
    size_t n_open;
} conn_state;

static uint32_t new_stream(conn_state *cs)
{
    uint32_t sid = cs->next_sid;
    cs->next_sid += 2;
    if (cs->n_open < sizeof cs->open / sizeof cs->open[0])
        cs->open[cs->n_open++] = sid;
    return sid;
}

static uint32_t some_stream(conn_state *cs, uint8_t pick)
{
    if (cs->n_open == 0 || pick == 0xff)
        return pick == 0xff ? 0 : 1; /* stream 0 or a stream never opened */
    return cs->open[pick % cs->n_open];
}

/* A fuzzed header value: up to 63 bytes of the input. */
static void fuzzed_value(rd *r, char *buf, size_t cap, size_t *len)
{
    size_t got;
    const uint8_t *p = take(r, u8(r) & 63, &got);
    if (got >= cap)
        got = cap - 1;
    memcpy(buf, p, got);
    *len = got;
}

typedef struct hdrs {
    nghttp2_nv nv[16];
    size_t n;
    char fz[6][64];
    size_t fzlen[6];
} hdrs;

static void add(hdrs *h, const char *name, const char *value, size_t vlen)
{
    if (h->n == sizeof h->nv / sizeof h->nv[0])
        return;
    h->nv[h->n++] =
        (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), vlen, NGHTTP2_NV_FLAG_NONE};
}

static void addz(hdrs *h, const char *name, const char *value)
{
    add(h, name, value, strlen(value));
}

static const char *const PATHS[] = {"/sbx.v1.Execution/Execute",  "/sbx.v1.Execution/ExecuteStream",
                                    "/sbx.v1.Execution/Describe", "/grpc.health.v1.Health/Check",
                                    "/sbx.v1.Execution/Nope",     "/"};

/* Request headers from two selector bytes and, where they say "fuzzed", input bytes. */
static void request_headers(rd *r, hdrs *h, int force_path, bool force_auth)
{
    static char too_long[4200];
    if (too_long[0] == '\0') {
        memcpy(too_long, "Bearer ", 7);
        memset(too_long + 7, 'a', sizeof too_long - 8);
    }
    static const char bearer[] = "Bearer " FUZZ_TOKEN;
    uint8_t a = u8(r), b = u8(r);
    int fz = 0;
    switch (a & 3) {
    case 0: addz(h, ":method", "POST"); break;
    case 1: addz(h, ":method", "GET"); break;
    case 2: break;
    default:
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        add(h, ":method", h->fz[fz], h->fzlen[fz]);
        fz++;
    }
    addz(h, ":scheme", "http");
    addz(h, ":authority", "127.0.0.1");
    int path = force_path >= 0 ? force_path : (a >> 2 & 7);
    if (path < 6) {
        addz(h, ":path", PATHS[path]);
    } else if (path == 6) {
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        add(h, ":path", h->fz[fz], h->fzlen[fz]);
        fz++;
    } else if (b & 0x80) { /* the streams that outlive one message */
        addz(h, ":path",
             (b & 0x40) ? "/grpc.health.v1.Health/Watch"
                        : "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
    }
    switch (a >> 5 & 7) {
    case 0:
    case 1: addz(h, "content-type", "application/grpc"); break;
    case 2: addz(h, "content-type", "application/grpc+proto"); break;
    case 3: addz(h, "content-type", "application/grpc;charset=x"); break;
    case 4: addz(h, "content-type", "text/plain"); break;
    case 5: break;
    default:
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        add(h, "content-type", h->fz[fz], h->fzlen[fz]);
        fz++;
    }
    addz(h, "te", "trailers");
    int auth = force_auth ? 1 : (b & 7);
    if (auth == 1 || auth == 2)
        addz(h, "authorization", bearer);
    else if (auth == 3)
        addz(h, "authorization", too_long);
    else if (auth == 4 || auth == 5) {
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        if (auth == 4 && h->fzlen[fz] + 7 < sizeof h->fz[fz]) { /* "Bearer " + fuzz */
            memmove(h->fz[fz] + 7, h->fz[fz], h->fzlen[fz]);
            memcpy(h->fz[fz], "Bearer ", 7);
            h->fzlen[fz] += 7;
        }
        add(h, "authorization", h->fz[fz], h->fzlen[fz]);
        fz++;
    }
    switch (b >> 3 & 3) {
    case 0: break;
    case 1: addz(h, "grpc-timeout", (b & 0x80) ? "1m" : "20S"); break;
    default:
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        add(h, "grpc-timeout", h->fz[fz], h->fzlen[fz]);
        fz++;
    }
    switch (b >> 5 & 3) {
    case 0: break;
    case 1: addz(h, "grpc-encoding", (b & 0x80) ? "identity" : "gzip"); break;
    case 2: addz(h, "x-sbx-node", "fuzz-node"); break;
    default:
        fuzzed_value(r, h->fz[fz], sizeof h->fz[fz], &h->fzlen[fz]);
        add(h, (b & 0x80) ? "x-sbx-node" : "grpc-encoding", h->fz[fz], h->fzlen[fz]);
        fz++;
    }
}

/* A HEADERS frame (split into CONTINUATION frames when split is set). */
static void headers_frame(out *o, conn_state *cs, uint32_t sid, const hdrs *h, bool end_stream,
                          uint8_t split)
{
    uint8_t block[FUZZ_MAX_BLOCK];
    ssize_t n = nghttp2_hd_deflate_hd(cs->hd, block, sizeof block, h->nv, h->n);
    if (n < 0)
        return;
    size_t len = (size_t)n, first = len;
    if (split && len > 1)
        first = split % len;
    if (first > H2_MAX_FRAME)
        first = H2_MAX_FRAME;
    uint8_t fl = (uint8_t)(end_stream ? FL_END_STREAM : 0);
    frame(o, F_HEADERS, (uint8_t)(fl | (first == len ? FL_END_HEADERS : 0)), sid, block, first);
    for (size_t off = first; off < len;) {
        size_t k = len - off < H2_MAX_FRAME ? len - off : H2_MAX_FRAME;
        frame(o, F_CONT, off + k == len ? FL_END_HEADERS : 0, sid, block + off, k);
        off += k;
    }
}

/* A gRPC message (5-byte prefix, then msg) as DATA frames, split at `split` when non-zero. */
static void grpc_data(out *o, uint32_t sid, uint8_t mflags, uint32_t mlen, const uint8_t *msg,
                      size_t len, bool end_stream, size_t split)
{
    size_t total = 5 + len;
    uint8_t *buf = malloc(total);
    if (!buf)
        abort();
    buf[0] = mflags;
    buf[1] = (uint8_t)(mlen >> 24);
    buf[2] = (uint8_t)(mlen >> 16);
    buf[3] = (uint8_t)(mlen >> 8);
    buf[4] = (uint8_t)mlen;
    if (len)
        memcpy(buf + 5, msg, len);
    size_t off = 0;
    do {
        size_t k = total - off;
        if (split && off == 0 && split < k)
            k = split;
        if (k > H2_MAX_FRAME)
            k = H2_MAX_FRAME;
        bool last = off + k == total;
        frame(o, F_DATA, (uint8_t)(last && end_stream ? FL_END_STREAM : 0), sid, buf + off, k);
        off += k;
    } while (off < total);
    free(buf);
}

/* One record of the input. */
static void record(rd *r, out *o, conn_state *cs)
{
    uint8_t op = u8(r);
    switch (op % 7) {
    case 0: { /* request headers (or trailers on an open stream) */
        hdrs h = {0};
        request_headers(r, &h, -1, false);
        uint8_t f = u8(r);
        uint32_t sid = (f & 2) ? some_stream(cs, u8(r)) : new_stream(cs);
        headers_frame(o, cs, sid, &h, f & 1, (f & 4) ? u8(r) : 0);
        break;
    }
    case 1: { /* a gRPC message on an open stream */
        uint8_t f = u8(r);
        uint32_t sid = some_stream(cs, u8(r));
        size_t len;
        const uint8_t *msg = take(r, u16(r), &len);
        uint32_t mlen = (uint32_t)len;
        uint8_t mflags = 0;
        if (f & 2)
            mflags = u8(r);
        if (f & 4) {
            mlen = (uint32_t)u16(r) << 16;
            mlen |= u16(r);
        }
        grpc_data(o, sid, mflags, mlen, msg, len, f & 1, (f & 8) ? u8(r) : 0);
        break;
    }
    case 2: { /* a raw frame: any type, flags and stream */
        uint8_t type = u8(r), flags = u8(r), pick = u8(r);
        uint32_t sid = (pick & 0x80) ? some_stream(cs, pick) : (pick & 0x40) ? 0 : pick;
        size_t len;
        const uint8_t *p = take(r, u8(r), &len);
        frame(o, type, flags, sid, p, len);
        if (type == F_SETTINGS)
            o->settings = true;
        break;
    }
    case 3: { /* raw bytes */
        size_t len;
        const uint8_t *p = take(r, u8(r), &len);
        put(o, p, len);
        o->raw = true;
        break;
    }
    case 4: { /* a Health check whose service name comes from the input */
        hdrs h = {0};
        request_headers(r, &h, 3, false);
        uint32_t sid = new_stream(cs);
        headers_frame(o, cs, sid, &h, false, 0);
        size_t len;
        const uint8_t *svc = take(r, u8(r) & 127, &len);
        uint8_t msg[160];
        size_t mlen = 0;
        if (len) {
            msg[mlen++] = 0x0a; /* field 1, length-delimited */
            msg[mlen++] = (uint8_t)len;
            memcpy(msg + mlen, svc, len);
            mlen += len;
        }
        grpc_data(o, sid, 0, (uint32_t)mlen, msg, mlen, true, 0);
        break;
    }
    case 5:   /* an authenticated Execute or ExecuteStream whose request comes from the input */
    case 6: { /* ... or Describe (no message body decoded beyond its frame) */
        hdrs h = {0};
        request_headers(r, &h, op % 7 == 6 ? 2 : (op & 8) ? 1 : 0, true);
        uint32_t sid = new_stream(cs);
        headers_frame(o, cs, sid, &h, false, 0);
        size_t len;
        const uint8_t *msg = take(r, u16(r), &len);
        grpc_data(o, sid, 0, (uint32_t)len, msg, len, true, (op & 16) ? u8(r) : 0);
        break;
    }
    }
}

/* ---- talking to the worker ------------------------------------------------------------- */

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        abort();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        /* Interrupted (libFuzzer's timers): the connection goes on; wait for its outcome. */
        int e = errno;
        if (e == EINTR || e == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            while (poll(&pfd, 1, 5000) < 0 && errno == EINTR)
                ;
            socklen_t sl = sizeof e;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) != 0)
                e = errno;
        }
        if (e != 0 && e != EINTR && e != EINPROGRESS) {
            fprintf(stderr, "fuzz finding: cannot connect to the worker: %s\n", strerror(e));
            abort();
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static const uint8_t PING_OPAQUE[8] = {'s', 'b', 'x', 'f', 'u', 'z', 'z', '!'};

/* What the worker sent back, checked frame by frame as it arrives. */
typedef struct reader {
    uint8_t hdr[9];
    size_t hdr_len;
    size_t payload_left;
    uint8_t type, flags;
    uint8_t ping[8];
    size_t ping_len;
    size_t max_frame;
    uint32_t sid;
    uint8_t answered[FUZZ_TRACKED_STREAMS / 8]; /* streams the worker ended or reset */
    bool ping_acked, goaway, closed;
} reader;

/* Every stream the client ended has been answered. */
static bool all_answered(const out *o, const reader *rdr)
{
    for (size_t i = 0; i < sizeof o->ended; i++)
        if (o->ended[i] & ~rdr->answered[i])
            return false;
    return true;
}

static void reader_feed(reader *rd_, const uint8_t *p, size_t n)
{
    while (n > 0) {
        if (rd_->payload_left == 0 && rd_->hdr_len < 9) {
            size_t k = 9 - rd_->hdr_len < n ? 9 - rd_->hdr_len : n;
            memcpy(rd_->hdr + rd_->hdr_len, p, k);
            rd_->hdr_len += k;
            p += k;
            n -= k;
            if (rd_->hdr_len < 9)
                return;
            size_t len = (size_t)rd_->hdr[0] << 16 | (size_t)rd_->hdr[1] << 8 | rd_->hdr[2];
            rd_->type = rd_->hdr[3];
            rd_->flags = rd_->hdr[4];
            rd_->sid = ((uint32_t)rd_->hdr[5] & 0x7f) << 24 | (uint32_t)rd_->hdr[6] << 16 |
                       (uint32_t)rd_->hdr[7] << 8 | rd_->hdr[8];
            bool ends = rd_->type == 3 || ((rd_->type == 0 || rd_->type == 1) && (rd_->flags & 1));
            if (ends && rd_->sid < FUZZ_TRACKED_STREAMS)
                rd_->answered[rd_->sid / 8] |= (uint8_t)(1u << (rd_->sid % 8));
            FUZZ_REQUIRE(len <= rd_->max_frame, "the worker sent a frame of %zu bytes", len);
            FUZZ_REQUIRE(rd_->type <= F_CONT, "the worker sent a frame of type %u", rd_->type);
            rd_->payload_left = len;
            rd_->ping_len = 0;
            if (g.trace)
                fprintf(stderr, "worker -> frame type %u flags 0x%02x stream %u length %zu\n",
                        rd_->type, rd_->flags, rd_->sid, len);
            if (rd_->type == F_GOAWAY)
                rd_->goaway = true;
            if (len == 0) {
                rd_->hdr_len = 0;
                continue;
            }
        }
        size_t k = rd_->payload_left < n ? rd_->payload_left : n;
        if (rd_->type == F_PING && (rd_->flags & FL_ACK))
            for (size_t i = 0; i < k && rd_->ping_len < 8; i++)
                rd_->ping[rd_->ping_len++] = p[i];
        rd_->payload_left -= k;
        p += k;
        n -= k;
        if (rd_->payload_left == 0) {
            if (rd_->type == F_PING && (rd_->flags & FL_ACK) && rd_->ping_len == 8 &&
                memcmp(rd_->ping, PING_OPAQUE, 8) == 0)
                rd_->ping_acked = true;
            rd_->hdr_len = 0;
        }
    }
}

/* Writes everything (the worker reads while we write) and reads back until the PING is acked
 * (then a little longer for answers), the connection ends, or the budget is spent. */
static void exchange(int fd, const out *o, reader *rdr, int64_t budget_ms)
{
    size_t off = 0;
    int64_t start = sbx_monotonic_ms();
    int64_t acked_at = 0;
    rdr->max_frame = o->settings ? (1u << 24) - 1 : H2_MAX_FRAME;
    for (;;) {
        int64_t now = sbx_monotonic_ms();
        if (now - start > budget_ms)
            return;
        if (acked_at && (all_answered(o, rdr) || now - acked_at > FUZZ_ANSWER_MS))
            return;
        struct pollfd pfd = {.fd = fd, .events = POLLIN | (off < o->len ? POLLOUT : 0)};
        int pr = poll(&pfd, 1, 10);
        if (pr < 0 && errno != EINTR)
            abort();
        if (pr <= 0)
            continue;
        if ((pfd.revents & POLLOUT) && off < o->len) {
            ssize_t w = send(fd, o->b + off, o->len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                off = o->len; /* the worker closed: read what it said */
        }
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
            uint8_t buf[16384];
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                rdr->closed = true;
                return;
            }
            if (n > 0)
                reader_feed(rdr, buf, (size_t)n);
            if (rdr->ping_acked && !acked_at)
                acked_at = sbx_monotonic_ms();
        }
    }
}

/* The worker still serves a fresh, well-behaved client: a Health check answered. */
static void check_health(void)
{
    nghttp2_hd_deflater *hd = NULL;
    if (nghttp2_hd_deflate_new(&hd, 4096) != 0)
        abort();
    conn_state cs = {.hd = hd, .next_sid = 1};
    out o = {0};
    put(&o, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    frame(&o, F_SETTINGS, 0, 0, NULL, 0);
    hdrs h = {0};
    addz(&h, ":method", "POST");
    addz(&h, ":scheme", "http");
    addz(&h, ":authority", "127.0.0.1");
    addz(&h, ":path", PATHS[3]);
    addz(&h, "content-type", "application/grpc");
    headers_frame(&o, &cs, new_stream(&cs), &h, false, 0);
    grpc_data(&o, 1, 0, 0, NULL, 0, true, 0);
    frame(&o, F_PING, 0, 0, PING_OPAQUE, 8);
    int fd = dial();
    reader rdr = {0};
    exchange(fd, &o, &rdr, FUZZ_PING_BUDGET_MS);
    FUZZ_REQUIRE(rdr.ping_acked, "a fresh client is no longer served after an input");
    close(fd);
    free(o.b);
    nghttp2_hd_deflate_del(hd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g.ready)
        start_worker();
    nghttp2_hd_deflater *hd = NULL;
    if (nghttp2_hd_deflate_new(&hd, 4096) != 0)
        abort();
    conn_state cs = {.hd = hd, .next_sid = 1};
    out o = {0};
    put(&o, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    frame(&o, F_SETTINGS, 0, 0, NULL, 0);
    rd r = {data, size};
    for (int i = 0; i < FUZZ_MAX_RECORDS && r.n > 0; i++)
        record(&r, &o, &cs);
    frame(&o, F_PING, 0, 0, PING_OPAQUE, 8);

    int fd = dial();
    reader rdr = {0};
    bool framed = !o.raw && !o.full;
    exchange(fd, &o, &rdr, framed ? FUZZ_PING_BUDGET_MS : FUZZ_RAW_BUDGET_MS);
    /* After a well-framed input the PING is answered unless the worker ended the connection
     * (GOAWAY for a protocol error, or a close). */
    FUZZ_REQUIRE(!framed || rdr.ping_acked || rdr.goaway || rdr.closed,
                 "the worker neither answered the PING nor ended the connection in %d ms",
                 FUZZ_PING_BUDGET_MS);
    close(fd);
    free(o.b);
    nghttp2_hd_deflate_del(hd);
    check_health();
    return 0;
}
