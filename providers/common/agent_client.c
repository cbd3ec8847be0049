/* agent_client.c - host side of the sbx-agent protocol: framing, strict decoding of agent
 * events, command runs with deadlines and streaming, reattach, signals and file transfers.
 * See agent_client.h. This file must not create boxes or know their layout.
 */
#include "providers/common/agent_client.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "core/strbuf.h"

/* Bounds of the agent's static request fields (agent.options; max_size counts the NUL). A
 * command that does not fit AgentExec is sent as a chunked AgentCode "sh" script instead. */
#define EXEC_MAX_ARGV 64
#define EXEC_MAX_ARG 511
#define EXEC_MAX_SHELL 8191
#define EXEC_MAX_ENV 16
#define EXEC_MAX_ENV_NAME 127
#define EXEC_MAX_ENV_VALUE 1023
#define EXEC_MAX_CWD 1023

struct sbx_agent_conn {
    int fd;
    uint64_t next_id; /* request ids, unique per connection */
    bool broken;      /* a framing or transport error: the stream cannot be trusted further */
    uint8_t *rx;      /* SBX_AGENT_MAX_FRAME bytes */
};

/* Growing byte buffer for one output stream, bounded by its limit. */
typedef struct out_buf {
    uint8_t *data;
    size_t len, cap;
    uint64_t base;  /* stream offset of data[0] (reattach from an offset) */
    uint64_t limit; /* bytes kept at most */
    bool truncated;
} out_buf;

static bool out_append(out_buf *b, uint64_t offset, const uint8_t *p, size_t n)
{
    /* Only contiguous data is kept: a chunk that overlaps what we hold is trimmed, one that
     * leaves a gap (the journal dropped bytes) restarts the base when nothing is held yet. */
    uint64_t have_end = b->base + b->len;
    if (b->len == 0 && offset > have_end)
        b->base = have_end = offset;
    if (offset + n <= have_end)
        return true;
    if (offset > have_end)
        return true; /* a gap after data we hold: cannot splice; keep what is contiguous */
    size_t skip = (size_t)(have_end - offset);
    p += skip;
    n -= skip;
    if (b->len + n > b->limit) {
        n = b->len < b->limit ? (size_t)(b->limit - b->len) : 0;
        b->truncated = true;
    }
    if (n == 0)
        return true;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d)
            return false;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return true;
}

/* ---- binary lookup --------------------------------------------------------------------- */

static bool is_executable(const char *p)
{
    struct stat st;
    return p && *p && stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

sbx_status sbx_agent_binary_path(char *out, size_t cap, sbx_error *err)
{
    const char *env = getenv("SBX_AGENT");
    if (env && *env) {
        if (!is_executable(env))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "SBX_AGENT=%s is not an executable file; point it at a built "
                                 "sbx-agent or unset it",
                                 env);
        snprintf(out, cap, "%s", env);
        return SBX_OK;
    }
#ifdef SBX_AGENT_BUILD_PATH
    if (is_executable(SBX_AGENT_BUILD_PATH)) {
        snprintf(out, cap, "%s", SBX_AGENT_BUILD_PATH);
        return SBX_OK;
    }
#endif
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            static const char *rel[] = {"/sbx-agent", "/../libexec/sbx/sbx-agent",
                                        "/../agent/sbx-agent"};
            for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
                char cand[PATH_MAX + 64];
                snprintf(cand, sizeof cand, "%.*s%s", (int)(slash - self), self, rel[i]);
                if (is_executable(cand)) {
                    snprintf(out, cap, "%s", cand);
                    return SBX_OK;
                }
            }
        }
    }
    if (is_executable("/usr/libexec/sbx/sbx-agent")) {
        snprintf(out, cap, "%s", "/usr/libexec/sbx/sbx-agent");
        return SBX_OK;
    }
    return sbx_error_set(err, SBX_E_PROVISION,
                         "sbx-agent not found (looked at $SBX_AGENT, the build tree, beside this "
                         "program and /usr/libexec/sbx/sbx-agent); build it or set SBX_AGENT");
}

/* ---- connection and framing ----------------------------------------------------------- */

static int remaining_ms(int64_t deadline)
{
    int64_t left = deadline - sbx_monotonic_ms();
    if (left <= 0)
        return 0;
    return left > INT_MAX ? INT_MAX : (int)left;
}

static sbx_status conn_from_fd(int fd, sbx_agent_conn **out, sbx_error *err);

sbx_status sbx_agent_connect(const char *path, int64_t deadline, sbx_agent_conn **out,
                             sbx_error *err)
{
    *out = NULL;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "agent socket path %s is longer than %zu bytes; use a shorter "
                             "runtime directory",
                             path, sizeof sa.sun_path - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + 5000;
    /* Non-blocking: a unix connect to a full backlog would otherwise block past the deadline
     * (a busy or stopped agent); EAGAIN is retried until the deadline instead. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "socket: %s", strerror(errno));
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        int e = errno;
        if (e == EINTR)
            continue;
        /* EAGAIN: the backlog is full on a busy agent; retry until the deadline */
        if (e == EAGAIN && remaining_ms(deadline) > 0) {
            usleep(2000);
            continue;
        }
        close(fd);
        /* No listener is not proof that the sandbox is gone (the caller decides that from the
         * sandbox's own processes): the code says only what was seen. */
        if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR)
            return sbx_error_set(err, SBX_E_GONE, "no agent listens on %s (%s)", path, strerror(e));
        if (e == EAGAIN)
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "the agent at %s did not accept the connection in time (busy "
                                 "or stopped)",
                                 path);
        return sbx_error_set(err, SBX_E_PROVISION, "cannot connect to the agent at %s: %s", path,
                             strerror(e));
    }
    return conn_from_fd(fd, out, err);
}

/* Wraps a connected socket (made blocking again) into a connection; closes fd on failure. */
static sbx_status conn_from_fd(int fd, sbx_agent_conn **out, sbx_error *err)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    sbx_agent_conn *c = calloc(1, sizeof *c);
    uint8_t *rx = malloc(SBX_AGENT_MAX_FRAME);
    if (!c || !rx) {
        free(c);
        free(rx);
        close(fd);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    c->fd = fd;
    c->rx = rx;
    c->next_id = 1;
    *out = c;
    return SBX_OK;
}

sbx_status sbx_agent_connect_tcp(const char *ipv4, int port,
                                 const uint8_t token[SBX_AGENT_TOKEN_LEN], int64_t deadline,
                                 sbx_agent_conn **out, sbx_error *err)
{
    *out = NULL;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    if (port < 1 || port > 65535 || inet_pton(AF_INET, ipv4, &sa.sin_addr) != 1)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "agent address %s:%d is not an IPv4 address "
                             "and port",
                             ipv4, port);
    sa.sin_port = htons((uint16_t)port);
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + 5000;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "socket: %s", strerror(errno));
    int e = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        e = errno;
        if (e == EINPROGRESS) {
            /* A black-holed pod IP answers nothing: wait only until the deadline. */
            struct pollfd p = {fd, POLLOUT, 0};
            int r;
            do
                r = poll(&p, 1, remaining_ms(deadline));
            while (r < 0 && errno == EINTR);
            socklen_t len = sizeof e;
            if (r == 0)
                e = ETIMEDOUT;
            else if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
                e = errno;
        }
    }
    if (e != 0) {
        close(fd);
        if (e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH)
            return sbx_error_set(err, SBX_E_GONE, "no agent listens on %s:%d (%s)", ipv4, port,
                                 strerror(e));
        if (e == ETIMEDOUT)
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "the agent at %s:%d did not accept the connection in time", ipv4,
                                 port);
        return sbx_error_set(err, SBX_E_PROVISION, "cannot connect to the agent at %s:%d: %s", ipv4,
                             port, strerror(e));
    }
    int one = 1; /* request/answer frames: do not hold small writes back */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t hello[SBX_AGENT_AUTH_MAGIC_LEN + SBX_AGENT_TOKEN_LEN];
    memcpy(hello, SBX_AGENT_AUTH_MAGIC, SBX_AGENT_AUTH_MAGIC_LEN);
    memcpy(hello + SBX_AGENT_AUTH_MAGIC_LEN, token, SBX_AGENT_TOKEN_LEN);
    /* 36 bytes into a fresh connection's empty send buffer: one send takes them all. */
    ssize_t w = send(fd, hello, sizeof hello, MSG_NOSIGNAL);
    memset(hello, 0, sizeof hello);
    if (w != (ssize_t)sizeof hello) {
        e = errno;
        close(fd);
        return sbx_error_set(err, SBX_E_PROVISION,
                             "cannot send the credential to the agent at "
                             "%s:%d: %s",
                             ipv4, port, w < 0 ? strerror(e) : "short write");
    }
    return conn_from_fd(fd, out, err);
}

void sbx_agent_close(sbx_agent_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->rx);
    free(c);
}

static sbx_status broken(sbx_agent_conn *c, sbx_error *err, const char *what)
{
    c->broken = true;
    return sbx_error_set(err, SBX_E_PROVISION, "cannot send to the agent: %s", what);
}

/* Sends one request frame before the deadline. */
/* Reads what the agent sent while a request waits for room in the socket (send_request_reading):
 * one event; anything but SBX_OK stops the sending. */
typedef sbx_status (*reader_fn)(void *arg, sbx_error *err);

/* Sends r whole; while the socket has no room and reader is given, what the agent sends
 * meanwhile goes to reader (an agent writing a program's output to us reads no more of our
 * frames until we read, so a sender that only waits would wait for ever). */
static sbx_status send_request_reading(sbx_agent_conn *c, const Sbx__V1__AgentRequest *r,
                                       int64_t deadline, reader_fn reader, void *reader_arg,
                                       sbx_error *err)
{
    if (c->broken)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "the agent connection failed earlier; reconnect");
    size_t n = sbx__v1__agent_request__get_packed_size(r);
    if (n > SBX_AGENT_MAX_FRAME)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "request of %zu bytes exceeds the agent frame limit of %u bytes "
                             "(shorten argv/env, or move data into a file)",
                             n, SBX_AGENT_MAX_FRAME);
    uint8_t *buf = malloc(4 + n);
    if (!buf)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    buf[0] = (uint8_t)n;
    buf[1] = (uint8_t)(n >> 8);
    buf[2] = (uint8_t)(n >> 16);
    buf[3] = (uint8_t)(n >> 24);
    sbx__v1__agent_request__pack(r, buf + 4);
    size_t off = 0, total = 4 + n;
    sbx_status st = SBX_OK;
    while (off < total) {
        ssize_t w = send(c->fd, buf + off, total - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {c->fd, (short)(reader ? POLLOUT | POLLIN : POLLOUT), 0};
            int ms = remaining_ms(deadline);
            if (ms == 0 || poll(&p, 1, ms) == 0) {
                st = sbx_error_set(err, SBX_E_TIMEOUT, "the agent did not take a request in time");
                c->broken = true;
                break;
            }
            if (reader && (p.revents & (POLLIN | POLLHUP | POLLERR)) && !(p.revents & POLLOUT)) {
                st = reader(reader_arg, err);
                if (st != SBX_OK) {
                    if (off > 0)
                        c->broken = true; /* a frame cut short: the stream is out of step */
                    break;
                }
            }
            continue;
        }
        st = broken(c, err, strerror(errno));
        break;
    }
    free(buf);
    return st;
}

static sbx_status send_request(sbx_agent_conn *c, const Sbx__V1__AgentRequest *r, int64_t deadline,
                               sbx_error *err)
{
    return send_request_reading(c, r, deadline, NULL, NULL, err);
}

static bool recv_exact(sbx_agent_conn *c, uint8_t *p, size_t n, int64_t deadline, sbx_status *st,
                       sbx_error *err, const volatile int *cancel)
{
    while (n) {
        struct pollfd pf = {c->fd, POLLIN, 0};
        int ms = remaining_ms(deadline);
        if (cancel && ms > 100)
            ms = 100;
        int r = poll(&pf, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            if (cancel && *cancel) {
                *st = sbx_error_set(err, SBX_E_TIMEOUT, "cancelled");
                return false;
            }
            if (remaining_ms(deadline) > 0)
                continue;
            *st = sbx_error_set(err, SBX_E_TIMEOUT, "the agent did not answer in time");
            return false;
        }
        ssize_t got = recv(c->fd, p, n, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got <= 0) {
            c->broken = true;
            *st = sbx_error_set(err, SBX_E_PROVISION,
                                "the agent closed the connection (%s): the sandbox may have "
                                "been destroyed",
                                got == 0 ? "end of stream" : strerror(errno));
            return false;
        }
        p += got;
        n -= (size_t)got;
    }
    return true;
}

/* Receives the next event for request id `id` (events for other ids are stale and skipped).
 * *ev is freed by the caller with sbx__v1__agent_event__free_unpacked. */
/* The next event, whatever request it answers (the caller tells its own from stale ones). */
static sbx_status recv_one(sbx_agent_conn *c, int64_t deadline, const volatile int *cancel,
                           Sbx__V1__AgentEvent **ev, sbx_error *err)
{
    *ev = NULL;
    if (c->broken)
        return sbx_error_set(err, SBX_E_PROVISION, "the agent connection failed earlier");
    uint8_t hdr[4];
    sbx_status st = SBX_OK;
    /* A hostile agent that keeps the socket full (stale events, endless output) must not
     * hold us past the deadline: recv_exact only notices it when no data is waiting. */
    if (remaining_ms(deadline) == 0)
        return sbx_error_set(err, SBX_E_TIMEOUT, "the agent did not answer in time");
    if (cancel && *cancel)
        return sbx_error_set(err, SBX_E_TIMEOUT, "cancelled");
    if (!recv_exact(c, hdr, 4, deadline, &st, err, cancel))
        return st;
    uint32_t n =
        (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
    if (n > SBX_AGENT_MAX_FRAME) {
        c->broken = true;
        return sbx_error_set(err, SBX_E_PROVISION,
                             "the agent sent a frame of %u bytes (limit %u): refusing a "
                             "misbehaving agent",
                             n, SBX_AGENT_MAX_FRAME);
    }
    /* a frame, once started, must arrive whole even past a cancel */
    if (!recv_exact(c, c->rx, n, deadline + SBX_AGENT_DEADLINE_GRACE_MS, &st, err, NULL)) {
        c->broken = true;
        return st;
    }
    Sbx__V1__AgentEvent *e = sbx__v1__agent_event__unpack(NULL, n, c->rx);
    if (!e) {
        c->broken = true;
        return sbx_error_set(err, SBX_E_PROVISION, "the agent sent a malformed event (%u bytes)",
                             n);
    }
    *ev = e;
    return SBX_OK;
}

/* The next event answering request id; events of other (earlier) requests are dropped. */
static sbx_status recv_event(sbx_agent_conn *c, uint64_t id, int64_t deadline,
                             const volatile int *cancel, Sbx__V1__AgentEvent **ev, sbx_error *err)
{
    for (;;) {
        sbx_status st = recv_one(c, deadline, cancel, ev, err);
        if (st != SBX_OK)
            return st;
        Sbx__V1__AgentEvent *e = *ev;
        if (e == NULL) {
            /* recv_one answers SBX_OK only with an event; should that ever change, the stream
             * is out of step and the callers must not read a missing event */
            c->broken = true;
            sbx_error_set(err, SBX_E_INTERNAL, "the agent connection returned no event");
            return SBX_E_INTERNAL;
        }
        if (e->id == id && e->body_case != SBX__V1__AGENT_EVENT__BODY__NOT_SET)
            return SBX_OK;
        sbx__v1__agent_event__free_unpacked(e, NULL);
        *ev = NULL;
    }
}

static sbx_status agent_error(const Sbx__V1__AgentError *e, sbx_error *err)
{
    sbx_status code = (e->code >= 1 && e->code <= 13) ? (sbx_status)e->code : SBX_E_INTERNAL;
    return sbx_error_set(err, code, "agent: %.1500s", e->message ? e->message : "");
}

sbx_status sbx_agent_ping(sbx_agent_conn *c, int64_t deadline, sbx_agent_pong *out, sbx_error *err)
{
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + 5000;
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentPing ping = SBX__V1__AGENT_PING__INIT;
    r.id = c->next_id++;
    ping.nonce = (uint64_t)sbx_monotonic_us();
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_PING;
    r.ping = &ping;
    sbx_status st = send_request(c, &r, deadline, err);
    if (st != SBX_OK)
        return st;
    Sbx__V1__AgentEvent *e;
    st = recv_event(c, r.id, deadline, NULL, &e, err);
    if (st != SBX_OK)
        return st;
    if (e->body_case != SBX__V1__AGENT_EVENT__BODY_PONG || e->pong->nonce != ping.nonce) {
        sbx__v1__agent_event__free_unpacked(e, NULL);
        c->broken = true;
        return sbx_error_set(err, SBX_E_PROVISION, "the agent answered a ping with junk");
    }
    if (out) {
        memset(out, 0, sizeof *out);
        snprintf(out->version, sizeof out->version, "%s", e->pong->version);
        out->uptime_ms = e->pong->uptime_ms;
        out->running = e->pong->running;
        out->uid = e->pong->uid;
        out->shared_uid = e->pong->shared_uid;
    }
    sbx__v1__agent_event__free_unpacked(e, NULL);
    return SBX_OK;
}

/* ---- commands -------------------------------------------------------------------------- */

typedef struct run_state {
    out_buf out[2];
    uint64_t want[2]; /* next stream offset the output hook gets (never a byte twice) */
    uint64_t command_id;
    bool exited;
    bool follower; /* attached to a command it did not start: a deadline or a cancel stops
                      following, never the command */
} run_state;

static void fill_exit(sbx_result *r, const Sbx__V1__AgentExit *x, run_state *rs)
{
    r->exit_code = x->exit_code;
    r->signal = x->signal;
    int oc = (int)x->outcome;
    r->outcome =
        (oc >= 1 && oc <= 6) ? (Sbx__V1__Outcome)oc : SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED;
    r->wall_us = x->wall_us;
    r->cpu_us = x->cpu_us;
    r->max_rss_kb = x->max_rss_kb;
    r->stdout_truncated = x->stdout_truncated || rs->out[0].truncated;
    r->stderr_truncated = x->stderr_truncated || rs->out[1].truncated;
    if (x->value && x->value[0])
        sbx_set_string(&r->value, x->value);
    if (x->kernel_restarted)
        sbx_result_set_data(r, "kernel_restarted", "true");
}

/* Takes one event of the command's request into rs and result. */
static sbx_status take_event(const Sbx__V1__AgentEvent *e, const sbx_exec_opts *o,
                             sbx_result *result, uint64_t *command_id, run_state *rs,
                             sbx_error *err)
{
    switch (e->body_case) {
    case SBX__V1__AGENT_EVENT__BODY_STARTED:
        rs->command_id = e->started->command_id;
        if (command_id)
            *command_id = rs->command_id;
        return SBX_OK;
    case SBX__V1__AGENT_EVENT__BODY_OUTPUT: {
        const Sbx__V1__AgentOutput *out = e->output;
        int s = out->stream == SBX__V1__AGENT_STREAM__AGENT_STREAM_STDOUT   ? 0
                : out->stream == SBX__V1__AGENT_STREAM__AGENT_STREAM_STDERR ? 1
                                                                            : -1;
        if (s < 0 || out->data.len > SBX_AGENT_CHUNK || out->offset > (1ull << 62))
            return SBX_OK; /* junk: ignore the chunk, keep following */
        if (!out_append(&rs->out[s], out->offset, out->data.data, out->data.len))
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory for output");
        /* the hook sees each byte once, from the offset asked for on */
        uint64_t end = out->offset + out->data.len;
        if (o && o->on_output && end > rs->want[s]) {
            size_t skip = out->offset < rs->want[s] ? (size_t)(rs->want[s] - out->offset) : 0;
            o->on_output(o->on_output_arg,
                         s == 0 ? SBX__V1__STREAM__STREAM_STDOUT : SBX__V1__STREAM__STREAM_STDERR,
                         out->data.data + skip, out->data.len - skip, out->offset + skip);
        }
        if (end > rs->want[s])
            rs->want[s] = end;
        return SBX_OK;
    }
    case SBX__V1__AGENT_EVENT__BODY_EXIT:
        fill_exit(result, e->exit, rs);
        rs->exited = true;
        return SBX_OK;
    case SBX__V1__AGENT_EVENT__BODY_ERROR: return agent_error(e->error, err);
    default: return SBX_OK; /* events of other kinds cannot belong to a command: ignore */
    }
}

/* Collects events for one command until it exits (or the deadline passes). */
static sbx_status follow(sbx_agent_conn *c, uint64_t id, const sbx_exec_opts *o, sbx_result *result,
                         uint64_t *command_id, run_state *rs, sbx_error *err)
{
    int64_t exec_deadline = o && o->deadline_mono_ms ? o->deadline_mono_ms : 0;
    int64_t wait_until = exec_deadline ? exec_deadline + SBX_AGENT_DEADLINE_GRACE_MS
                                       : sbx_monotonic_ms() + (int64_t)365 * 24 * 3600 * 1000;
    const volatile int *cancel = o ? o->cancel : NULL;
    sbx_status st = SBX_OK;
    while (!rs->exited) { /* its end may have come while its stdin was sent */
        Sbx__V1__AgentEvent *e;
        st = recv_event(c, id, wait_until, cancel, &e, err);
        if (st != SBX_OK)
            break;
        st = take_event(e, o, result, command_id, rs, err);
        sbx__v1__agent_event__free_unpacked(e, NULL);
        if (st != SBX_OK)
            break;
    }
    if (st == SBX_E_TIMEOUT && rs->follower) {
        /* stopped following; the command runs on and can be attached to again */
        st = sbx_error_set(err, SBX_E_TIMEOUT,
                           "stopped following command %llu (%s); it runs on: attach again "
                           "from stdout offset %llu, stderr offset %llu",
                           (unsigned long long)rs->command_id,
                           o && o->cancel && *o->cancel ? "cancelled" : "the deadline passed",
                           (unsigned long long)rs->out[0].base + rs->out[0].len,
                           (unsigned long long)rs->out[1].base + rs->out[1].len);
    } else if (st == SBX_E_TIMEOUT && rs->command_id) {
        /* the agent did not report in time (or the caller cancelled): kill the tree */
        sbx_error ignored;
        if (!c->broken)
            sbx_agent_signal(c, rs->command_id, SIGKILL, &ignored);
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    }
    /* what was printed so far goes into the result in every case */
    result->stdout_offset = rs->out[0].base;
    result->stderr_offset = rs->out[1].base;
    for (int s = 0; s < 2; s++) {
        ProtobufCBinaryData *f = s == 0 ? &result->stdout : &result->stderr;
        if (rs->out[s].len) {
            free(f->data);
            f->data = rs->out[s].data;
            f->len = rs->out[s].len;
            rs->out[s].data = NULL;
        }
        free(rs->out[s].data);
    }
    result->command_id = rs->command_id;
    if (rs->command_id) {
        char idbuf[32];
        snprintf(idbuf, sizeof idbuf, "%llu", (unsigned long long)rs->command_id);
        sbx_result_set_data(result, "command_id", idbuf);
    }
    if (st == SBX_OK && result->outcome == SBX__V1__OUTCOME__OUTCOME_TIMED_OUT)
        st = sbx_error_set(err, SBX_E_TIMEOUT,
                           "the program ran past its deadline and was killed "
                           "with its whole process tree");
    return st;
}

static void run_state_init(run_state *rs, const sbx_exec_opts *o)
{
    memset(rs, 0, sizeof *rs);
    uint64_t limit = o && o->output_limit_bytes ? o->output_limit_bytes : SBX_AGENT_MAX_OUTPUT;
    if (limit > SBX_AGENT_MAX_OUTPUT)
        limit = SBX_AGENT_MAX_OUTPUT;
    rs->out[0].limit = rs->out[1].limit = limit;
}

static uint64_t timeout_of(const sbx_exec_opts *o, sbx_error *err, sbx_status *st)
{
    *st = SBX_OK;
    if (!o || !o->deadline_mono_ms)
        return 0;
    int64_t left = o->deadline_mono_ms - sbx_monotonic_ms();
    if (left <= 0) {
        *st = sbx_error_set(err, SBX_E_TIMEOUT, "the deadline passed before the program started");
        return 0;
    }
    return (uint64_t)left;
}

/* Converts a contract env map into AgentEnv pointers (borrowing the strings). The map entry
 * types of RunCommand and RunCode differ, so the caller passes their keys and values. */
static Sbx__V1__AgentEnv **env_from_map(size_t n, char *const *keys, size_t key_stride,
                                        char *const *values, Sbx__V1__AgentEnv *storage)
{
    (void)key_stride;
    Sbx__V1__AgentEnv **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        sbx__v1__agent_env__init(&storage[i]);
        storage[i].name = keys[i];
        storage[i].value = values[i];
        v[i] = &storage[i];
    }
    return v;
}

/* Keys and values of a map, as two arrays (malloc'd together; free keys). */
#define SPLIT_MAP(n, entries, keys, values)                                                        \
    do {                                                                                           \
        keys = calloc((n)*2 + 1, sizeof(char *));                                                  \
        values = keys ? keys + (n) : NULL;                                                         \
        for (size_t i_ = 0; keys && i_ < (n); i_++) {                                              \
            keys[i_] = (entries)[i_]->key;                                                         \
            values[i_] = (entries)[i_]->value;                                                     \
        }                                                                                          \
    } while (0)

/* What a run does with the events that arrive while its stdin is still being sent. */
typedef struct stdin_reader {
    sbx_agent_conn *c;
    uint64_t id;
    int64_t deadline;
    const sbx_exec_opts *o;
    sbx_result *result;
    uint64_t *command_id;
    run_state *rs;
} stdin_reader;

static sbx_status read_while_sending(void *arg, sbx_error *err)
{
    stdin_reader *sr = arg;
    Sbx__V1__AgentEvent *e;
    sbx_status st = recv_one(sr->c, sr->deadline, NULL, &e, err);
    if (st != SBX_OK)
        return st;
    if (e->id == sr->id && e->body_case != SBX__V1__AGENT_EVENT__BODY__NOT_SET)
        st = take_event(e, sr->o, sr->result, sr->command_id, sr->rs, err);
    sbx__v1__agent_event__free_unpacked(e, NULL);
    return st;
}

/* Sends stdin in chunks after the agent reported the start; with sr, the command's events that
 * arrive meanwhile are taken (its output, maybe its end: then the rest is not sent). */
static sbx_status send_stdin(sbx_agent_conn *c, uint64_t id, uint64_t command_id,
                             const ProtobufCBinaryData *data, int64_t deadline, stdin_reader *sr,
                             sbx_error *err)
{
    size_t off = 0;
    do {
        if (sr != NULL && sr->rs->exited)
            return SBX_OK; /* it ended (the agent drops stdin for it anyway) */
        Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
        Sbx__V1__AgentStdin in = SBX__V1__AGENT_STDIN__INIT;
        r.id = id;
        r.body_case = SBX__V1__AGENT_REQUEST__BODY_STDIN;
        r.stdin = &in;
        in.command_id = command_id;
        size_t n = data->len - off > SBX_AGENT_CHUNK ? SBX_AGENT_CHUNK : data->len - off;
        in.data.data = data->data + off;
        in.data.len = n;
        off += n;
        in.eof = off >= data->len;
        sbx_status st =
            send_request_reading(c, &r, deadline, sr ? read_while_sending : NULL, sr, err);
        if (st != SBX_OK)
            return st;
    } while (off < data->len);
    return SBX_OK;
}

/* Waits for the Started event (to learn the command id before sending stdin). */
static sbx_status await_started(sbx_agent_conn *c, uint64_t id, int64_t deadline, run_state *rs,
                                uint64_t *command_id, sbx_error *err)
{
    Sbx__V1__AgentEvent *e;
    sbx_status st = recv_event(c, id, deadline, NULL, &e, err);
    if (st != SBX_OK)
        return st;
    if (e->body_case == SBX__V1__AGENT_EVENT__BODY_ERROR) {
        st = agent_error(e->error, err);
    } else if (e->body_case != SBX__V1__AGENT_EVENT__BODY_STARTED) {
        c->broken = true;
        st = sbx_error_set(err, SBX_E_PROVISION, "the agent did not report the start first");
    } else {
        rs->command_id = e->started->command_id;
        if (command_id)
            *command_id = rs->command_id;
    }
    sbx__v1__agent_event__free_unpacked(e, NULL);
    return st;
}

/* A detached start: the command id once the agent reports the start, stdin sent whole. */
static sbx_status start_detached(sbx_agent_conn *c, Sbx__V1__AgentRequest *r,
                                 const ProtobufCBinaryData *stdin_data, sbx_result *result,
                                 uint64_t *command_id, run_state *rs, sbx_error *err)
{
    int64_t io_deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    sbx_status st = send_request(c, r, io_deadline, err);
    if (st == SBX_OK)
        st = await_started(c, r->id, io_deadline, rs, command_id, err);
    if (st == SBX_OK && stdin_data && stdin_data->len)
        st = send_stdin(c, r->id, rs->command_id, stdin_data, io_deadline, NULL, err);
    for (int s = 0; s < 2; s++)
        free(rs->out[s].data);
    if (st != SBX_OK)
        return st;
    result->command_id = rs->command_id;
    char idbuf[32];
    snprintf(idbuf, sizeof idbuf, "%llu", (unsigned long long)rs->command_id);
    sbx_result_set_data(result, "command_id", idbuf);
    return SBX_OK;
}

static sbx_status run_request(sbx_agent_conn *c, Sbx__V1__AgentRequest *r,
                              const ProtobufCBinaryData *stdin_data, const sbx_exec_opts *o,
                              sbx_result *result, uint64_t *command_id, run_state *rs,
                              sbx_error *err)
{
    int64_t io_deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    sbx_status st = send_request(c, r, io_deadline, err);
    if (st != SBX_OK)
        return st;
    if (stdin_data && stdin_data->len) {
        st = await_started(c, r->id, io_deadline, rs, command_id, err);
        /* Its output is taken while the stdin goes (cat of a large input), and its end if it
         * ends first; the stdin's own deadline is the operation's. */
        stdin_reader sr = {c, r->id, io_deadline, o, result, command_id, rs};
        if (st == SBX_OK)
            st = send_stdin(c, r->id, rs->command_id, stdin_data, io_deadline, &sr, err);
        if (st != SBX_OK) {
            for (int s = 0; s < 2; s++)
                free(rs->out[s].data);
            return st;
        }
    }
    return follow(c, r->id, o, result, command_id, rs, err);
}

static bool env_fits(size_t n, char **keys, char **values)
{
    if (n > EXEC_MAX_ENV)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strlen(keys[i]) > EXEC_MAX_ENV_NAME || strlen(values[i]) > EXEC_MAX_ENV_VALUE)
            return false;
    return true;
}

static bool exec_fits(const Sbx__V1__RunCommand *op, char **keys, char **values)
{
    if (op->n_argv > EXEC_MAX_ARGV || (op->shell && strlen(op->shell) > EXEC_MAX_SHELL))
        return false;
    for (size_t i = 0; i < op->n_argv; i++)
        if (strlen(op->argv[i]) > EXEC_MAX_ARG)
            return false;
    return env_fits(op->n_env, keys, values);
}

/* The sh script equivalent of a command too big for AgentExec: exports, then `exec argv...`
 * or the shell line itself. NULL with err set on a name sh cannot export. */
static char *command_as_script(const Sbx__V1__RunCommand *op, char **keys, char **values,
                               sbx_error *err)
{
    sbx_strbuf b = {0};
    for (size_t i = 0; i < op->n_env; i++) {
        if (!sbx_shell_name_ok(keys[i])) {
            sbx_strbuf_free(&b);
            sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                          "environment name '%.200s' is not a valid variable name", keys[i]);
            return NULL;
        }
        sbx_strbuf_printf(&b, "export %s=", keys[i]);
        sbx_strbuf_shell_quote(&b, values[i], strlen(values[i]));
        sbx_strbuf_putc(&b, '\n');
    }
    if (op->n_argv) {
        sbx_strbuf_puts(&b, "exec");
        for (size_t i = 0; i < op->n_argv; i++) {
            sbx_strbuf_putc(&b, ' ');
            sbx_strbuf_shell_quote(&b, op->argv[i], strlen(op->argv[i]));
        }
    } else {
        sbx_strbuf_puts(&b, op->shell);
    }
    char *script = sbx_strbuf_take(&b);
    if (script == NULL)
        sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    return script;
}

static sbx_status run_code_as(sbx_agent_conn *c, const Sbx__V1__RunCode *op, bool stateful,
                              bool detach, const sbx_agent_identity *who, const sbx_exec_opts *o,
                              sbx_result *result, uint64_t *command_id, sbx_error *err);

sbx_status sbx_agent_run_command(sbx_agent_conn *c, const Sbx__V1__RunCommand *op,
                                 const sbx_agent_identity *who, const sbx_exec_opts *o,
                                 sbx_result *result, uint64_t *command_id, sbx_error *err)
{
    sbx_status st;
    uint64_t timeout = timeout_of(o, err, &st);
    if (st != SBX_OK)
        return st;
    if (op->n_argv == 0 && (!op->shell || !op->shell[0]))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "run_command needs argv or a shell line");
    if (op->cwd && strlen(op->cwd) > EXEC_MAX_CWD)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "cwd is longer than %d bytes",
                             EXEC_MAX_CWD);
    char **keys, **values;
    SPLIT_MAP(op->n_env, op->env, keys, values);
    if (!keys)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    if (!exec_fits(op, keys, values)) {
        /* too big for the agent's static AgentExec: the same command as a chunked script */
        char *script = command_as_script(op, keys, values, err);
        free(keys);
        if (!script)
            return err ? err->code : SBX_E_INVALID_ARGUMENT;
        Sbx__V1__RunCode code = SBX__V1__RUN_CODE__INIT;
        code.language = "sh";
        code.code = script;
        code.cwd = op->cwd;
        code.stdin = op->stdin;
        st = run_code_as(c, &code, false, op->detach, who, o, result, command_id, err);
        free(script);
        return st;
    }
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentExec x = SBX__V1__AGENT_EXEC__INIT;
    Sbx__V1__AgentEnv *env_storage = calloc(op->n_env ? op->n_env : 1, sizeof *env_storage);
    Sbx__V1__AgentEnv **env =
        env_storage ? env_from_map(op->n_env, keys, 0, values, env_storage) : NULL;
    free(keys);
    if (!env) {
        free(env_storage);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_EXEC;
    r.exec = &x;
    x.n_argv = op->n_argv;
    x.argv = op->argv;
    x.shell = op->shell;
    x.n_env = op->n_env;
    x.env = env;
    x.cwd = op->cwd;
    x.uid = who ? who->uid : 0;
    x.gid = who ? who->gid : 0;
    x.timeout_ms = timeout;
    x.output_limit_bytes = o ? o->output_limit_bytes : 0;
    x.stdin_follows = op->stdin.len > 0;
    x.detach = op->detach;
    run_state rs;
    run_state_init(&rs, o);
    st = op->detach ? start_detached(c, &r, &op->stdin, result, command_id, &rs, err)
                    : run_request(c, &r, &op->stdin, o, result, command_id, &rs, err);
    free(env);
    free(env_storage);
    return st;
}

sbx_status sbx_agent_run_code(sbx_agent_conn *c, const Sbx__V1__RunCode *op, bool stateful,
                              const sbx_agent_identity *who, const sbx_exec_opts *o,
                              sbx_result *result, uint64_t *command_id, sbx_error *err)
{
    return run_code_as(c, op, stateful, false, who, o, result, command_id, err);
}

static sbx_status run_code_as(sbx_agent_conn *c, const Sbx__V1__RunCode *op, bool stateful,
                              bool detach, const sbx_agent_identity *who, const sbx_exec_opts *o,
                              sbx_result *result, uint64_t *command_id, sbx_error *err)
{
    sbx_status st;
    uint64_t timeout = timeout_of(o, err, &st);
    if (st != SBX_OK)
        return st;
    if ((op->cwd && strlen(op->cwd) > EXEC_MAX_CWD) || (op->language && strlen(op->language) > 31))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "cwd or language name is too long");
    char **keys, **values;
    SPLIT_MAP(op->n_env, op->env, keys, values);
    if (keys && !env_fits(op->n_env, keys, values)) {
        free(keys);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "run_code takes at most %d environment variables of at most %d "
                             "bytes each; pass more through a file",
                             EXEC_MAX_ENV, EXEC_MAX_ENV_VALUE);
    }
    Sbx__V1__AgentEnv *env_storage = calloc(op->n_env ? op->n_env : 1, sizeof *env_storage);
    Sbx__V1__AgentEnv **env =
        env_storage && keys ? env_from_map(op->n_env, keys, 0, values, env_storage) : NULL;
    free(keys);
    if (!env) {
        free(env_storage);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    uint64_t id = c->next_id++;
    const char *code = op->code ? op->code : "";
    size_t len = strlen(code), off = 0;
    bool use_stdin = op->stdin.len > 0; /* the stateful kernel reads it as sys.stdin */
    do {
        Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
        Sbx__V1__AgentCode x = SBX__V1__AGENT_CODE__INIT;
        r.id = id;
        r.body_case = SBX__V1__AGENT_REQUEST__BODY_CODE;
        r.code = &x;
        size_t n = len - off > SBX_AGENT_CHUNK ? SBX_AGENT_CHUNK : len - off;
        x.code.data = (uint8_t *)code + off;
        x.code.len = n;
        off += n;
        x.more = off < len;
        x.language = op->language;
        x.stateful = stateful;
        x.n_env = op->n_env;
        x.env = env;
        x.cwd = op->cwd;
        x.uid = who ? who->uid : 0;
        x.gid = who ? who->gid : 0;
        x.timeout_ms = timeout;
        x.output_limit_bytes = o ? o->output_limit_bytes : 0;
        x.stdin_follows = use_stdin;
        x.detach = detach;
        if (x.more) {
            st = send_request(c, &r, sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS, err);
            if (st != SBX_OK)
                break;
            continue;
        }
        run_state rs;
        run_state_init(&rs, o);
        const ProtobufCBinaryData *in = use_stdin ? &op->stdin : NULL;
        st = detach ? start_detached(c, &r, in, result, command_id, &rs, err)
                    : run_request(c, &r, in, o, result, command_id, &rs, err);
    } while (off < len);
    free(env);
    free(env_storage);
    return st;
}

sbx_status sbx_agent_reattach(sbx_agent_conn *c, uint64_t command_id, uint64_t stdout_offset,
                              uint64_t stderr_offset, const sbx_exec_opts *o, sbx_result *result,
                              sbx_error *err)
{
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentAttach a = SBX__V1__AGENT_ATTACH__INIT;
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_ATTACH;
    r.attach = &a;
    a.command_id = command_id;
    a.stdout_offset = stdout_offset;
    a.stderr_offset = stderr_offset;
    run_state rs;
    run_state_init(&rs, o);
    rs.out[0].base = rs.want[0] = stdout_offset;
    rs.out[1].base = rs.want[1] = stderr_offset;
    rs.follower = true;
    return run_request(c, &r, NULL, o, result, NULL, &rs, err);
}

sbx_status sbx_agent_cancel(sbx_agent_conn *c, uint64_t command_id, int signo,
                            int64_t deadline_mono_ms, sbx_result *result, sbx_error *err)
{
    if (signo <= 0)
        signo = SIGKILL;
    /* Follow it (without its output) to learn it exists and, after the signal, how it ends. */
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentAttach a = SBX__V1__AGENT_ATTACH__INIT;
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_ATTACH;
    r.attach = &a;
    a.command_id = command_id;
    a.stdout_offset = a.stderr_offset = UINT64_MAX;
    int64_t io_deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    run_state rs;
    run_state_init(&rs, NULL);
    rs.follower = true;
    rs.out[0].base = rs.out[1].base = rs.want[0] = rs.want[1] = UINT64_MAX;
    sbx_status st = send_request(c, &r, io_deadline, err);
    if (st == SBX_OK)
        st = await_started(c, r.id, io_deadline, &rs, NULL, err);
    if (st == SBX_OK)
        st = sbx_agent_signal(c, command_id, signo, err);
    if (st != SBX_OK)
        return st;
    int64_t wait = sbx_monotonic_ms() + SBX_AGENT_CANCEL_WAIT_MS;
    if (deadline_mono_ms > 0 && deadline_mono_ms < wait)
        wait = deadline_mono_ms;
    sbx_exec_opts o = {.deadline_mono_ms = wait - SBX_AGENT_DEADLINE_GRACE_MS};
    st = follow(c, r.id, &o, result, NULL, &rs, err);
    result->stdout_offset = result->stderr_offset = 0;
    result->command_id = command_id;
    if (st == SBX_E_TIMEOUT && !rs.exited) {
        /* a signal it may handle (SIGTERM, SIGINT): it was delivered, the command still runs */
        sbx_error_clear(err);
        char note[160];
        snprintf(note, sizeof note,
                 "signal %d was sent to command %llu, which still runs; attach to follow it or "
                 "cancel it without a signal number (SIGKILL) to stop it",
                 signo, (unsigned long long)command_id);
        sbx_result_set_data(result, "notice", note);
        return SBX_OK;
    }
    return st;
}

sbx_status sbx_agent_signal(sbx_agent_conn *c, uint64_t command_id, int signo, sbx_error *err)
{
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentSignal s = SBX__V1__AGENT_SIGNAL__INIT;
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_SIGNAL;
    r.signal = &s;
    s.command_id = command_id;
    s.signo = signo;
    return send_request(c, &r, sbx_monotonic_ms() + 5000, err);
}

/* ---- files ------------------------------------------------------------------------------ */

sbx_status sbx_agent_write_file(sbx_agent_conn *c, const Sbx__V1__WriteFile *op,
                                const sbx_agent_identity *who, int64_t deadline, uint64_t *size_out,
                                sbx_error *err)
{
    if (!op->path || !op->path[0])
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "write_file needs a path");
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    uint64_t id = c->next_id++;
    size_t off = 0;
    sbx_status st = SBX_OK;
    Sbx__V1__AgentEvent *early = NULL; /* our answer, read while still sending */
    do {
        Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
        Sbx__V1__AgentFileWrite w = SBX__V1__AGENT_FILE_WRITE__INIT;
        r.id = id;
        r.body_case = SBX__V1__AGENT_REQUEST__BODY_FILE_WRITE;
        r.file_write = &w;
        w.path = op->path;
        size_t n =
            op->content.len - off > SBX_AGENT_CHUNK ? SBX_AGENT_CHUNK : op->content.len - off;
        w.data.data = op->content.data + off;
        w.data.len = n;
        w.offset = op->offset + off;
        w.append = op->offset > 0 && off == 0; /* continue the file WriteFile.offset names */
        w.mode = op->mode ? op->mode : 0644;
        w.mkdirs = op->mkdirs;
        w.uid = who ? who->uid : 0;
        w.gid = who ? who->gid : 0;
        off += n;
        w.last = off >= op->content.len;
        st = send_request(c, &r, deadline, err);
        if (st != SBX_OK)
            return st;
        /* An early error (path refused) arrives while we still send: notice it. What else is
         * waiting answers earlier requests (the end of a command that timed out, the output of
         * one a cancel's signal left running) and is dropped: stopping for it left the agent
         * waiting for the rest and the file cut at its first chunk. */
        struct pollfd p = {c->fd, POLLIN, 0};
        while (early == NULL && !w.last && poll(&p, 1, 0) == 1) {
            Sbx__V1__AgentEvent *ev;
            st = recv_one(c, deadline, NULL, &ev, err);
            if (st != SBX_OK)
                return st;
            if (ev->id == id && ev->body_case != SBX__V1__AGENT_EVENT__BODY__NOT_SET)
                early = ev;
            else
                sbx__v1__agent_event__free_unpacked(ev, NULL);
        }
    } while (early == NULL && off < op->content.len);
    Sbx__V1__AgentEvent *e = early;
    if (e == NULL)
        st = recv_event(c, id, deadline, NULL, &e, err);
    if (st != SBX_OK)
        return st;
    if (e->body_case == SBX__V1__AGENT_EVENT__BODY_WRITTEN) {
        if (size_out)
            *size_out = e->written->size;
    } else if (e->body_case == SBX__V1__AGENT_EVENT__BODY_ERROR) {
        st = agent_error(e->error, err);
        sbx__v1__agent_event__free_unpacked(e, NULL);
        if (off < op->content.len) {
            /* we stopped sending midway: tell the agent the write is over (it ignores the
             * rest of a failed write) so the stream stays in step */
            Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
            Sbx__V1__AgentFileWrite w = SBX__V1__AGENT_FILE_WRITE__INIT;
            r.id = id;
            r.body_case = SBX__V1__AGENT_REQUEST__BODY_FILE_WRITE;
            r.file_write = &w;
            w.path = op->path;
            w.offset = op->offset + off;
            w.last = true;
            sbx_error ignored;
            send_request(c, &r, deadline, &ignored);
        }
        return st;
    } else {
        st = sbx_error_set(err, SBX_E_PROVISION, "the agent answered a write with junk");
        c->broken = true;
    }
    sbx__v1__agent_event__free_unpacked(e, NULL);
    return st;
}

sbx_status sbx_agent_read_file(sbx_agent_conn *c, const Sbx__V1__ReadFile *op, int64_t deadline,
                               sbx_result *result, sbx_error *err)
{
    if (!op->path || !op->path[0])
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "read_file needs a path");
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    if (op->max_bytes > SBX_AGENT_MAX_READ)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "read of %llu bytes exceeds the %llu byte limit of one result; "
                             "read in ranges with offset/max_bytes",
                             (unsigned long long)op->max_bytes,
                             (unsigned long long)SBX_AGENT_MAX_READ);
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentFileRead rd = SBX__V1__AGENT_FILE_READ__INIT;
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_FILE_READ;
    r.file_read = &rd;
    rd.path = op->path;
    rd.offset = op->offset;
    rd.max_bytes = op->max_bytes;
    sbx_status st = send_request(c, &r, deadline, err);
    if (st != SBX_OK)
        return st;
    out_buf content = {NULL, 0, 0, op->offset, SBX_AGENT_MAX_READ, false};
    uint64_t size = 0;
    uint32_t mode = 0;
    for (;;) {
        Sbx__V1__AgentEvent *e;
        st = recv_event(c, r.id, deadline, NULL, &e, err);
        if (st != SBX_OK)
            break;
        if (e->body_case == SBX__V1__AGENT_EVENT__BODY_ERROR) {
            st = agent_error(e->error, err);
            sbx__v1__agent_event__free_unpacked(e, NULL);
            break;
        }
        if (e->body_case != SBX__V1__AGENT_EVENT__BODY_FILE_DATA) {
            sbx__v1__agent_event__free_unpacked(e, NULL);
            c->broken = true;
            st = sbx_error_set(err, SBX_E_PROVISION, "the agent answered a read with junk");
            break;
        }
        Sbx__V1__AgentFileData *d = e->file_data;
        bool eof = d->eof;
        if (d->offset != content.base + content.len || d->data.len > SBX_AGENT_CHUNK) {
            unsigned long long bad_offset = (unsigned long long)d->offset; /* d dies with e */
            sbx__v1__agent_event__free_unpacked(e, NULL);
            c->broken = true;
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "the agent sent file data out of order (offset %llu)", bad_offset);
            break;
        }
        if (content.len + d->data.len > SBX_AGENT_MAX_READ) {
            sbx__v1__agent_event__free_unpacked(e, NULL);
            c->broken = true; /* the rest of the stream is abandoned */
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "%s is larger than the %llu byte limit of one result; read it in "
                               "ranges with offset/max_bytes",
                               op->path, (unsigned long long)SBX_AGENT_MAX_READ);
            break;
        }
        if (!out_append(&content, d->offset, d->data.data, d->data.len)) {
            sbx__v1__agent_event__free_unpacked(e, NULL);
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory reading %s", op->path);
            c->broken = true;
            break;
        }
        size = d->size;
        mode = d->mode;
        sbx__v1__agent_event__free_unpacked(e, NULL);
        if (eof)
            break;
    }
    if (st != SBX_OK) {
        free(content.data);
        return st;
    }
    sbx_file *f = sbx_file_new();
    if (!f || !sbx_set_string(&f->path, op->path)) {
        free(content.data);
        sbx_message_free((ProtobufCMessage *)f);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    f->content.data = content.data;
    f->content.len = content.len;
    f->size = size;
    f->mode = mode;
    f->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
    if (!sbx_result_add_file(result, f)) {
        sbx_message_free((ProtobufCMessage *)f);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    return SBX_OK;
}

sbx_status sbx_agent_list_files(sbx_agent_conn *c, const Sbx__V1__ListFiles *op, int64_t deadline,
                                sbx_result *result, sbx_error *err)
{
    if (deadline == 0)
        deadline = sbx_monotonic_ms() + SBX_AGENT_DEFAULT_OP_MS;
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentFileList ls = SBX__V1__AGENT_FILE_LIST__INIT;
    r.id = c->next_id++;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_FILE_LIST;
    r.file_list = &ls;
    ls.path = op->path && op->path[0] ? op->path : ".";
    sbx_status st = send_request(c, &r, deadline, err);
    if (st != SBX_OK)
        return st;
    size_t count = 0;
    for (;;) {
        Sbx__V1__AgentEvent *e;
        st = recv_event(c, r.id, deadline, NULL, &e, err);
        if (st != SBX_OK)
            return st;
        if (e->body_case == SBX__V1__AGENT_EVENT__BODY_ERROR) {
            st = agent_error(e->error, err);
            sbx__v1__agent_event__free_unpacked(e, NULL);
            return st;
        }
        if (e->body_case != SBX__V1__AGENT_EVENT__BODY_ENTRY) {
            sbx__v1__agent_event__free_unpacked(e, NULL);
            c->broken = true;
            return sbx_error_set(err, SBX_E_PROVISION, "the agent answered a listing with junk");
        }
        Sbx__V1__AgentFileEntry *en = e->entry;
        bool last = en->last;
        if (en->name && en->name[0]) {
            /* NAME_MAX: no file name is longer; a longer one is a hostile agent making each of
             * SBX_AGENT_MAX_ENTRIES entries cost a whole frame of host memory */
            if (++count > SBX_AGENT_MAX_ENTRIES || strlen(en->name) > NAME_MAX ||
                strchr(en->name, '/') || strcmp(en->name, "..") == 0) {
                sbx__v1__agent_event__free_unpacked(e, NULL);
                c->broken = true;
                return sbx_error_set(
                    err, count > SBX_AGENT_MAX_ENTRIES ? SBX_E_RESOURCE_EXHAUSTED : SBX_E_PROVISION,
                    "listing of %s: %s", ls.path,
                    count > SBX_AGENT_MAX_ENTRIES ? "too many entries"
                                                  : "the agent sent a bad name");
            }
            sbx_file *f = sbx_file_new();
            if (!f || !sbx_set_text(&f->path, en->name, strlen(en->name))) {
                sbx_message_free((ProtobufCMessage *)f);
                sbx__v1__agent_event__free_unpacked(e, NULL);
                return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
            }
            int k = (int)en->kind;
            f->kind =
                (k >= 1 && k <= 4) ? (Sbx__V1__FileKind)k : SBX__V1__FILE_KIND__FILE_KIND_OTHER;
            f->mode = en->mode;
            f->size = en->size;
            f->mtime_ms = en->mtime_ms;
            if (!sbx_result_add_file(result, f)) {
                sbx_message_free((ProtobufCMessage *)f);
                sbx__v1__agent_event__free_unpacked(e, NULL);
                return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
            }
        }
        sbx__v1__agent_event__free_unpacked(e, NULL);
        if (last)
            return SBX_OK;
    }
}
