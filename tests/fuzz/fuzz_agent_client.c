/* fuzz_agent_client.c - libFuzzer harness for the host side of the agent protocol
 * (providers/common/agent_client.c): frame reassembly (4-byte little-endian length prefix,
 * SBX_AGENT_MAX_FRAME), AgentEvent decoding and the event state machine of every operation
 * (ping, run_command, run_code, reattach, signal, write_file, read_file, list_files). The
 * agent lives beside untrusted code, so every byte it sends is hostile.
 *
 * The harness plays the agent on a real unix socket: the input's first byte picks the
 * operation(s), the rest is a sequence of records that become what the "agent" writes (events
 * whose request id the harness sets to one the client will use, so the fuzzer reaches past the
 * id filter; frames taken verbatim; lying length prefixes; raw bytes), all written before the
 * call and followed by end of stream, so every call ends without a timer.
 *
 * Properties: no crash, leak or hang; a failure carries a text; output handed to the caller
 * never exceeds what the agent sent nor the output limit; a listing never holds more than
 * SBX_AGENT_MAX_ENTRIES names, none with '/'. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/agent_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes the fake agent may queue before the call (its socket buffer is raised to hold them). */
#define FUZZ_AGENT_MAX_OUT (768u << 10)
/* Deadline of every call: never reached (the fake agent's end of stream ends each call). */
#define FUZZ_CALL_MS 10000
/* The output limit when the input asks for a small one. */
#define FUZZ_SMALL_LIMIT 100

static struct {
    char dir[80];
    char path[100]; /* below sun_path's 108 bytes */
    int listen_fd;
} g = {.listen_fd = -1};

static void cleanup(void)
{
    if (g.listen_fd >= 0)
        close(g.listen_fd);
    unlink(g.path);
    rmdir(g.dir);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (strlen(tmp) > 40)
        tmp = "/tmp"; /* a unix socket path must stay short */
    snprintf(g.dir, sizeof g.dir, "%s/sbx-fuzz-agent-XXXXXX", tmp);
    if (!mkdtemp(g.dir))
        abort();
    snprintf(g.path, sizeof g.path, "%s/agent.sock", g.dir);
    g.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g.path);
    if (g.listen_fd < 0 || bind(g.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(g.listen_fd, 4) != 0)
        abort();
    atexit(cleanup);
}

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
    uint16_t lo = u8(r);
    return (uint16_t)(lo | u8(r) << 8);
}

static const uint8_t *take(rd *r, size_t want, size_t *got)
{
    *got = want < r->n ? want : r->n;
    const uint8_t *p = r->p;
    r->p += *got;
    r->n -= *got;
    return p;
}

typedef struct out {
    uint8_t *b;
    size_t len;
} out;

static void put(out *o, const void *d, size_t n)
{
    if (n > FUZZ_AGENT_MAX_OUT - o->len)
        n = FUZZ_AGENT_MAX_OUT - o->len;
    memcpy(o->b + o->len, d, n);
    o->len += n;
}

static void put_prefix(out *o, uint32_t n)
{
    uint8_t h[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    put(o, h, 4);
}

/* One record of the input into what the agent writes. */
static void record(rd *r, out *o)
{
    uint8_t tag = u8(r);
    size_t len;
    switch (tag % 4) {
    case 0: { /* an event, for request id 1..4 (the client numbers its requests from 1) */
        const uint8_t *p = take(r, u16(r), &len);
        Sbx__V1__AgentEvent *e = sbx__v1__agent_event__unpack(NULL, len, p);
        if (!e) {
            put_prefix(o, (uint32_t)len);
            put(o, p, len);
            break;
        }
        e->id = 1 + (uint64_t)(tag >> 2 & 3);
        size_t n = sbx__v1__agent_event__get_packed_size(e);
        uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
            abort();
        sbx__v1__agent_event__pack(e, buf);
        put_prefix(o, (uint32_t)n);
        put(o, buf, n);
        free(buf);
        sbx__v1__agent_event__free_unpacked(e, NULL);
        break;
    }
    case 1: { /* a frame taken verbatim (the id is whatever the bytes say) */
        const uint8_t *p = take(r, u16(r), &len);
        put_prefix(o, (uint32_t)len);
        put(o, p, len);
        break;
    }
    case 2: { /* a length prefix that lies, then some bytes */
        uint32_t n = (uint32_t)u16(r) | (uint32_t)u16(r) << 16;
        put_prefix(o, n);
        const uint8_t *p = take(r, u8(r), &len);
        put(o, p, len);
        break;
    }
    default: { /* raw bytes */
        const uint8_t *p = take(r, u8(r), &len);
        put(o, p, len);
        break;
    }
    }
}

typedef struct seen {
    uint64_t bytes;
} seen;

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    (void)offset;
    (void)data;
    seen *s = arg;
    FUZZ_REQUIRE(stream == SBX__V1__STREAM__STREAM_STDOUT ||
                     stream == SBX__V1__STREAM__STREAM_STDERR,
                 "output on stream %d", (int)stream);
    FUZZ_REQUIRE(len <= SBX_AGENT_CHUNK, "an output chunk of %zu bytes", len);
    s->bytes += len;
}

static void check_failure(sbx_status st, const sbx_error *err)
{
    if (st != SBX_OK)
        FUZZ_REQUIRE(err->code == st && err->message[0] != '\0', "failure %d without a text",
                     (int)st);
}

static void check_result(const sbx_result *res, const out *o, const seen *s, uint64_t limit)
{
    FUZZ_REQUIRE(s->bytes <= o->len, "the caller saw %llu output bytes, the agent sent %zu",
                 (unsigned long long)s->bytes, o->len);
    FUZZ_REQUIRE(res->stdout.len <= limit && res->stderr.len <= limit,
                 "output over the limit (%zu, %zu > %llu)", res->stdout.len, res->stderr.len,
                 (unsigned long long)limit);
}

/* Runs operation `op` on c and checks what it made of the agent's bytes. */
static void run_op(sbx_agent_conn *c, int op, const out *o, bool small)
{
    sbx_error err = {0};
    sbx_status st;
    int64_t deadline = sbx_monotonic_ms() + FUZZ_CALL_MS;
    seen s = {0};
    uint64_t limit = small ? FUZZ_SMALL_LIMIT : SBX_AGENT_MAX_OUTPUT;
    sbx_exec_opts eo = {.deadline_mono_ms = deadline,
                        .output_limit_bytes = small ? FUZZ_SMALL_LIMIT : 0,
                        .on_output = on_output,
                        .on_output_arg = &s};
    sbx_result *res = sbx_result_new();
    if (!res)
        abort();
    switch (op) {
    case 0: {
        sbx_agent_pong pong;
        st = sbx_agent_ping(c, deadline, &pong, &err);
        if (st == SBX_OK)
            FUZZ_REQUIRE(strlen(pong.version) < sizeof pong.version, "pong version overran");
        break;
    }
    case 1:
    case 2: {
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        char *argv[] = {"echo", "hello"};
        if (op == 1) {
            rc.argv = argv;
            rc.n_argv = 2;
        } else {
            rc.shell = "echo hello; cat";
            rc.stdin.data = (uint8_t *)"input";
            rc.stdin.len = 5;
        }
        uint64_t cid = 0;
        st = sbx_agent_run_command(c, &rc, NULL, &eo, res, &cid, &err);
        check_result(res, o, &s, limit);
        break;
    }
    case 3:
    case 4: {
        Sbx__V1__RunCode code = SBX__V1__RUN_CODE__INIT;
        code.language = "python";
        code.code = "print(1)\n1+1";
        uint64_t cid = 0;
        st = sbx_agent_run_code(c, &code, op == 3, NULL, &eo, res, &cid, &err);
        check_result(res, o, &s, limit);
        break;
    }
    case 5:
        st = sbx_agent_reattach(c, 7, 0, 100, &eo, res, &err);
        check_result(res, o, &s, limit);
        break;
    case 6: st = sbx_agent_signal(c, 7, 9, &err); break;
    case 7: {
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        wf.path = "/workspace/a.txt";
        wf.content.data = (uint8_t *)"content of a file\n";
        wf.content.len = 18;
        wf.mkdirs = true;
        uint64_t size = 0;
        st = sbx_agent_write_file(c, &wf, NULL, deadline, &size, &err);
        break;
    }
    case 8: {
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        rf.path = "/workspace/a.txt";
        st = sbx_agent_read_file(c, &rf, deadline, res, &err);
        if (st == SBX_OK) {
            FUZZ_REQUIRE(res->n_files == 1, "a read gave %zu files", res->n_files);
            FUZZ_REQUIRE(res->files[0]->content.len <= o->len, "read more than the agent sent");
        }
        break;
    }
    default: {
        Sbx__V1__ListFiles lf = SBX__V1__LIST_FILES__INIT;
        lf.path = "/workspace";
        st = sbx_agent_list_files(c, &lf, deadline, res, &err);
        FUZZ_REQUIRE(res->n_files <= SBX_AGENT_MAX_ENTRIES, "%zu entries", res->n_files);
        for (size_t i = 0; i < res->n_files; i++)
            FUZZ_REQUIRE(strchr(res->files[i]->path, '/') == NULL, "an entry name with '/': %s",
                         res->files[i]->path);
        break;
    }
    }
    check_failure(st, &err);
    if (getenv("SBX_FUZZ_TRACE"))
        fprintf(stderr, "op %d: status %d %s (stdout %zu, files %zu)\n", op, (int)st,
                st ? err.message : "", res->stdout.len, res->n_files);
    sbx_message_free(&res->base);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g.listen_fd < 0)
        setup();
    if (size == 0)
        return 0;
    rd r = {data + 1, size - 1};
    out o = {0};
    o.b = malloc(FUZZ_AGENT_MAX_OUT);
    if (!o.b)
        abort();
    while (r.n > 0 && o.len < FUZZ_AGENT_MAX_OUT)
        record(&r, &o);

    sbx_agent_conn *c = NULL;
    sbx_error err = {0};
    if (sbx_agent_connect(g.path, sbx_monotonic_ms() + FUZZ_CALL_MS, &c, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_agent_client: connect: %s\n", err.message);
        abort();
    }
    int agent = accept4(g.listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (agent < 0)
        abort();
    int buf = (int)FUZZ_AGENT_MAX_OUT * 2;
    setsockopt(agent, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(agent, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    /* Everything the agent says is queued now (the socket holds it), then end of stream. */
    fcntl(agent, F_SETFL, O_NONBLOCK);
    size_t off = 0;
    while (off < o.len) {
        ssize_t w = send(agent, o.b + off, o.len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* a full buffer: the rest is cut, the client sees end of stream early */
        off += (size_t)w;
    }
    shutdown(agent, SHUT_WR);

    uint8_t sel = data[0];
    run_op(c, (sel & 0x0f) % 10, &o, sel & 0x80);
    if (sel & 0x40) /* a second call on the same connection: stale events must be skipped */
        run_op(c, (sel >> 4 & 3) + 1, &o, sel & 0x80);
    sbx_agent_close(c);
    close(agent);
    free(o.b);
    return 0;
}
