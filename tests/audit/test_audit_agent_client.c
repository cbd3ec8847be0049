/* test_audit_agent_client.c - the host side of the agent protocol against a hostile agent.
 * A program that takes over a sandbox's agent socket (or a compromised agent) speaks to the
 * host's client: each test starts an impostor on a private unix socket (a forked child) that
 * answers the client's first request with crafted frames, and asserts the client stays bounded:
 * deadlines hold under a flood, oversized frames and names are refused, nothing crashes.
 * A test whose attack currently succeeds is skipped with "KNOWN ESCAPE:" (see the report).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "providers/common/agent_client.h"
#include "sbx/contract.h"
#include "support/die_with_parent.h"

#define KNOWN_ESCAPE(...)                                                                          \
    do {                                                                                           \
        print_message("KNOWN ESCAPE: " __VA_ARGS__);                                               \
        print_message("\n");                                                                       \
        skip();                                                                                    \
    } while (0)

/* How long an impostor keeps misbehaving before it gives up and closes: far past every
 * deadline the tests give the client, so a client that returns before it did so on its own. */
#define IMPOSTOR_MAX_MS 20000
/* When a client given a 1 s deadline must have returned: generous bounds for a loaded machine
 * (a frame once started gets SBX_AGENT_DEADLINE_GRACE_MS more; a command's deadline also gets
 * that grace), far below the impostor's misbehaviour. Not a timing measurement: a client that
 * ignores its deadline under a flood returns only when the flood pauses or ends. */
#define STALE_FLOOD_BOUND_MS 8000
#define OUTPUT_FLOOD_BOUND_MS 12000

typedef void (*impostor_fn)(int fd, uint64_t request_id);

typedef struct impostor {
    char dir[64];
    char path[128];
    pid_t pid;
} impostor;

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Sends one event frame (4-byte little-endian length + protobuf). */
static bool send_event(int fd, const Sbx__V1__AgentEvent *ev)
{
    size_t n = sbx__v1__agent_event__get_packed_size(ev);
    uint8_t *buf = malloc(4 + n);
    if (!buf)
        return false;
    buf[0] = (uint8_t)n;
    buf[1] = (uint8_t)(n >> 8);
    buf[2] = (uint8_t)(n >> 16);
    buf[3] = (uint8_t)(n >> 24);
    sbx__v1__agent_event__pack(ev, buf + 4);
    bool ok = write_all(fd, buf, 4 + n);
    free(buf);
    return ok;
}

static bool read_all(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Starts an impostor agent: it accepts one connection, reads one request and hands its id
 * to fn. The child exits when fn returns. */
static void impostor_start(impostor *im, impostor_fn fn)
{
    snprintf(im->dir, sizeof im->dir, "/tmp/sbx-audit-imp-XXXXXX");
    assert_non_null(mkdtemp(im->dir));
    snprintf(im->path, sizeof im->path, "%s/agent.sock", im->dir);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(ls >= 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    assert_true(strlen(im->path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, im->path, strlen(im->path) + 1);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 1), 0);
    pid_t parent = getpid();
    im->pid = fork();
    assert_true(im->pid >= 0);
    if (im->pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        alarm((IMPOSTOR_MAX_MS + 5000) / 1000); /* never outlive the test */
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            _exit(1);
        uint8_t hdr[4];
        if (!read_all(fd, hdr, 4))
            _exit(1);
        uint32_t n = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
                     (uint32_t)hdr[3] << 24;
        uint8_t *body = malloc(n ? n : 1);
        if (!body || !read_all(fd, body, n))
            _exit(1);
        Sbx__V1__AgentRequest *req = sbx__v1__agent_request__unpack(NULL, n, body);
        if (!req)
            _exit(1);
        fn(fd, req->id);
        _exit(0);
    }
    close(ls);
}

static void impostor_stop(impostor *im)
{
    kill(im->pid, SIGKILL);
    waitpid(im->pid, NULL, 0);
    unlink(im->path);
    rmdir(im->dir);
}

static sbx_agent_conn *connect_to(const impostor *im)
{
    sbx_agent_conn *c = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_agent_connect(im->path, sbx_monotonic_ms() + 10000, &c, &err), SBX_OK);
    return c;
}

/* ---- impostors ------------------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    return sbx_monotonic_ms();
}

/* Bytes of frames an impostor writes per send: many frames at once, so the client's socket
 * never runs dry (a client that only checks its deadline when no data is waiting then never
 * checks it). */
#define FLOOD_BLOCK (256 * 1024)

/* Sends the packed frame of ev repeatedly, FLOOD_BLOCK bytes per send, until the time is up
 * or the client closes. fix(ev, i) may change the event before frame i is packed. */
static void flood(int fd, Sbx__V1__AgentEvent *ev, void (*fix)(Sbx__V1__AgentEvent *, uint64_t))
{
    static uint8_t block[FLOOD_BLOCK + 64 * 1024];
    uint64_t seq = 0;
    int64_t end = now_ms() + IMPOSTOR_MAX_MS;
    while (now_ms() < end) {
        size_t used = 0;
        while (used < FLOOD_BLOCK) {
            if (fix)
                fix(ev, seq++);
            size_t n = sbx__v1__agent_event__get_packed_size(ev);
            block[used] = (uint8_t)n;
            block[used + 1] = (uint8_t)(n >> 8);
            block[used + 2] = (uint8_t)(n >> 16);
            block[used + 3] = (uint8_t)(n >> 24);
            sbx__v1__agent_event__pack(ev, block + used + 4);
            used += 4 + n;
        }
        if (!write_all(fd, block, used))
            return;
    }
}

/* Floods events for another request id without pause (each is "stale" to the client). */
static void flood_stale_events(int fd, uint64_t id)
{
    (void)id;
    Sbx__V1__AgentEvent ev = SBX__V1__AGENT_EVENT__INIT;
    Sbx__V1__AgentPong pong = SBX__V1__AGENT_PONG__INIT;
    ev.id = 987654321;
    ev.body_case = SBX__V1__AGENT_EVENT__BODY_PONG;
    ev.pong = &pong;
    flood(fd, &ev, NULL);
}

static void next_output_offset(Sbx__V1__AgentEvent *ev, uint64_t seq)
{
    ev->output->offset = seq * ev->output->data.len;
}

/* Streams output for the client's command forever, never an exit. */
static void flood_output(int fd, uint64_t id)
{
    Sbx__V1__AgentEvent ev = SBX__V1__AGENT_EVENT__INIT;
    Sbx__V1__AgentStarted started = SBX__V1__AGENT_STARTED__INIT;
    ev.id = id;
    ev.body_case = SBX__V1__AGENT_EVENT__BODY_STARTED;
    ev.started = &started;
    started.command_id = 1;
    started.pid = 2;
    if (!send_event(fd, &ev))
        return;
    static uint8_t data[512];
    memset(data, 'A', sizeof data);
    Sbx__V1__AgentOutput out = SBX__V1__AGENT_OUTPUT__INIT;
    ev.body_case = SBX__V1__AGENT_EVENT__BODY_OUTPUT;
    ev.output = &out;
    out.command_id = 1;
    out.stream = SBX__V1__AGENT_STREAM__AGENT_STREAM_STDOUT;
    out.data.data = data;
    out.data.len = sizeof data;
    flood(fd, &ev, next_output_offset);
}

/* Answers a listing with one entry whose name is far longer than any file name (NAME_MAX is
 * 255; the real agent's AgentFileEntry.name holds 256 bytes). */
static void oversized_entry_name(int fd, uint64_t id)
{
    size_t len = 150 * 1024;
    char *name = malloc(len + 1);
    if (!name)
        return;
    memset(name, 'n', len);
    name[len] = '\0';
    Sbx__V1__AgentEvent ev = SBX__V1__AGENT_EVENT__INIT;
    Sbx__V1__AgentFileEntry en = SBX__V1__AGENT_FILE_ENTRY__INIT;
    ev.id = id;
    ev.body_case = SBX__V1__AGENT_EVENT__BODY_ENTRY;
    ev.entry = &en;
    en.name = name;
    en.kind = SBX__V1__AGENT_FILE_KIND__AGENT_FILE_KIND_REGULAR;
    send_event(fd, &ev);
    en.name = (char *)"";
    en.last = true;
    send_event(fd, &ev);
    free(name);
    char b;
    (void)recv(fd, &b, 1, 0); /* until the client closes */
}

/* A frame header announcing 4 GiB. */
static void huge_frame_header(int fd, uint64_t id)
{
    (void)id;
    uint8_t hdr[4] = {0xff, 0xff, 0xff, 0xff};
    write_all(fd, hdr, 4);
    char b;
    (void)recv(fd, &b, 1, 0);
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* A flood of events for other requests must not hold the client past its deadline. */
static void test_audit_client_deadline_holds_under_a_stale_event_flood(void **state)
{
    (void)state;
    impostor im;
    impostor_start(&im, flood_stale_events);
    sbx_agent_conn *c = connect_to(&im);
    sbx_error err = {0};
    int64_t t0 = sbx_monotonic_ms();
    sbx_status st = sbx_agent_ping(c, t0 + 1000, NULL, &err);
    int64_t took = sbx_monotonic_ms() - t0;
    sbx_agent_close(c);
    impostor_stop(&im);
    assert_int_not_equal(st, SBX_OK);
    if (took > STALE_FLOOD_BOUND_MS)
        KNOWN_ESCAPE("a hostile agent that floods stale events held the host %lld ms past a "
                     "1000 ms ping deadline (%s: %s); recv_exact()/recv_event() must check the "
                     "deadline even while data keeps arriving",
                     (long long)took, sbx_status_name(st), err.message);
}

/* Output that never ends must not hold a command past its deadline (+ grace). */
static void test_audit_client_deadline_holds_under_endless_output(void **state)
{
    (void)state;
    impostor im;
    impostor_start(&im, flood_output);
    sbx_agent_conn *c = connect_to(&im);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)"true";
    sbx_exec_opts o;
    memset(&o, 0, sizeof o);
    int64_t t0 = sbx_monotonic_ms();
    o.deadline_mono_ms = t0 + 1000;
    o.output_limit_bytes = 4096;
    sbx_result *r = sbx_result_new();
    sbx_error err = {0};
    sbx_status st = sbx_agent_run_command(c, &op, NULL, &o, r, NULL, &err);
    int64_t took = sbx_monotonic_ms() - t0;
    sbx_agent_close(c);
    impostor_stop(&im);
    assert_true(r->stdout.len <= 4096); /* the output limit held either way */
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_not_equal(st, SBX_OK);
    if (took > OUTPUT_FLOOD_BOUND_MS)
        KNOWN_ESCAPE("a hostile agent that streams output without end held the host %lld ms "
                     "past a 1000 ms command deadline (%s: %s); follow() must stop at deadline "
                     "+ grace even while output arrives",
                     (long long)took, sbx_status_name(st), err.message);
}

/* A directory entry name longer than any file name is refused: 100000 entries (the client's
 * cap) of 160 KiB each would be 16 GiB of host memory. */
static void test_audit_client_refuses_oversized_entry_names(void **state)
{
    (void)state;
    impostor im;
    impostor_start(&im, oversized_entry_name);
    sbx_agent_conn *c = connect_to(&im);
    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = (char *)"/workspace";
    sbx_result *r = sbx_result_new();
    sbx_error err = {0};
    sbx_status st = sbx_agent_list_files(c, &ls, sbx_monotonic_ms() + 10000, r, &err);
    size_t longest = 0;
    for (size_t i = 0; i < r->n_files; i++)
        if (r->files[i]->path && strlen(r->files[i]->path) > longest)
            longest = strlen(r->files[i]->path);
    sbx_message_free((ProtobufCMessage *)r);
    sbx_agent_close(c);
    impostor_stop(&im);
    if (st == SBX_OK && longest > 255)
        KNOWN_ESCAPE("the host accepts a %zu-byte directory entry name from the agent (file "
                     "names are at most 255 bytes): a hostile agent can make one listing cost "
                     "up to 100000 x 160 KiB = 16 GiB of host memory; refuse names over 255 "
                     "bytes in sbx_agent_list_files",
                     longest);
}

/* A 4 GiB frame header is refused at once, without allocating or waiting for the bytes. */
static void test_audit_client_refuses_a_4gib_frame(void **state)
{
    (void)state;
    impostor im;
    impostor_start(&im, huge_frame_header);
    sbx_agent_conn *c = connect_to(&im);
    sbx_error err = {0};
    sbx_status st = sbx_agent_ping(c, sbx_monotonic_ms() + 10000, NULL, &err);
    sbx_agent_close(c);
    impostor_stop(&im);
    assert_int_equal(st, SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "frame"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audit_client_deadline_holds_under_a_stale_event_flood),
        cmocka_unit_test(test_audit_client_deadline_holds_under_endless_output),
        cmocka_unit_test(test_audit_client_refuses_oversized_entry_names),
        cmocka_unit_test(test_audit_client_refuses_a_4gib_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
