/* serve.c - sbx-agent's PID 1 loop: accepts host connections on the unix socket (and, in a
 * pod, on TCP after a credential), decodes length-prefixed AgentRequest frames (nanopb, static
 * buffers) and dispatches them, frames the events every handler answers with, reaps every
 * child, forwards signals from outside, and exits after the idle TTL.
 *
 * One thread, one poll loop, no heap: every buffer is a named static with a bound. The agent
 * trusts its host connection more than the programs it runs, but still bounds everything it
 * reads from it. Connections from inside the sandbox (a peer whose pid is visible in our pid
 * namespace) are refused: only the host, outside the namespace, drives us.
 * The requests themselves are served by commands.c (exec, stdin, signal, attach), kernel.c
 * (stateful run_code) and file_ops.c (the file API); serve_impl.h lists who does what.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "request.h"
#include "serve_impl.h"

/* How long programs get to exit after an outside SIGTERM is forwarded, before PID 1 exits
 * (which SIGKILLs the whole namespace). */
#define AGENT_TERM_GRACE_MS 2000

agent_config agent_cfg;
static int listen_fd = -1, sig_fd = -1, tcp_fd = -1;
client agent_clients[AGENT_MAX_CLIENTS];
/* Slots below this were ever handed out (and set up); the rest are free and untouched: setting up
 * all 64 at start faulted in 18 pages of the array, each fault costing ~15 us on a paravirtualised
 * host, on every sandbox's boot path. */
static int clients_hw;
/* A host has been served (end_with_host counts hang-ups only after the first). */
static bool host_seen;
static int64_t start_ms;
int64_t agent_last_activity_ms, agent_shutdown_at_ms;
uid_t agent_uid;
bool agent_seccomp_ready;

static uint8_t rx[AGENT_MAX_FRAME];
static uint8_t tx[4 + AGENT_MAX_FRAME];
static agent_requests requests;
sbx_v1_AgentEvent agent_ev;

/* ---- framing ------------------------------------------------------------------------- */

static bool write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void drop_client(int ci);

/* Sends ev to client ci; on failure the client is dropped (its commands keep running). */
void send_event(int ci)
{
    if (ci < 0 || ci >= clients_hw || agent_clients[ci].fd < 0)
        return;
    pb_ostream_t os = pb_ostream_from_buffer(tx + 4, AGENT_MAX_FRAME);
    if (!pb_encode(&os, sbx_v1_AgentEvent_fields, &agent_ev))
        return; /* cannot happen with static sizes below the frame limit */
    uint32_t n = (uint32_t)os.bytes_written;
    tx[0] = (uint8_t)n;
    tx[1] = (uint8_t)(n >> 8);
    tx[2] = (uint8_t)(n >> 16);
    tx[3] = (uint8_t)(n >> 24);
    if (!write_all(agent_clients[ci].fd, tx, 4 + (size_t)n))
        drop_client(ci);
}

void event_begin(uint64_t id, pb_size_t which)
{
    /* No field of an earlier event may leak into this one. Only the member about to be filled
     * is cleared: clearing the whole 34 KiB union per event would keep it all resident. */
    size_t member;
    switch (which) {
    case sbx_v1_AgentEvent_started_tag: member = sizeof agent_ev.body.started; break;
    case sbx_v1_AgentEvent_output_tag: member = offsetof(sbx_v1_AgentOutput, data.bytes); break;
    case sbx_v1_AgentEvent_exit_tag: member = offsetof(sbx_v1_AgentExit, value) + 1; break;
    case sbx_v1_AgentEvent_entry_tag: member = sizeof agent_ev.body.entry; break;
    case sbx_v1_AgentEvent_error_tag: member = sizeof agent_ev.body.error; break;
    case sbx_v1_AgentEvent_pong_tag: member = sizeof agent_ev.body.pong; break;
    case sbx_v1_AgentEvent_written_tag: member = sizeof agent_ev.body.written; break;
    default: member = sizeof agent_ev.body; break;
    }
    memset(&agent_ev.body, 0, member);
    agent_ev.id = id;
    agent_ev.which_body = which;
}

void send_error(int ci, uint64_t id, uint32_t code, const char *fmt, ...)
{
    event_begin(id, sbx_v1_AgentEvent_error_tag);
    agent_ev.body.error.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(agent_ev.body.error.message, sizeof agent_ev.body.error.message, fmt, ap);
    va_end(ap);
    send_event(ci);
}

uint32_t errno_code(int e)
{
    switch (e) {
    case EACCES:
    case EPERM:
    case EROFS:
    case ELOOP:
    case EXDEV: return EC_PERMISSION_DENIED;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EMFILE:
    case ENFILE:
    case ENOMEM:  /* the sandbox's memory limit */
    case ENOBUFS: /* the same, for kernel buffers */
    case EAGAIN:  /* openat2 still racing the host's renames after its retries: try again */
        return EC_RESOURCE_EXHAUSTED;
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case EEXIST:
    case ENXIO:     /* a FIFO without a reader, or a socket */
    case ETXTBSY:   /* a program runs from the file */
    case EBUSY:     /* a mount point */
    case ENOTEMPTY: /* a directory with entries */
    case EOVERFLOW:
    case ENODEV:
    case EOPNOTSUPP: return EC_INVALID_ARGUMENT;
    default: return EC_INTERNAL; /* EIO, EBADF, EFAULT...: nothing the caller can change */
    }
}

const char *errno_words(int e)
{
    switch (e) {
    case ENXIO: /* what the file API takes for it too: a device, a FIFO with a reader */
        return "not a regular file (a FIFO, a socket or a device): the file API reads and writes "
               "regular files";
    case ETXTBSY: return "a program is running from it (text file busy)";
    default: return strerror(e);
    }
}

/* ---- connections ---------------------------------------------------------------------- */

static void drop_client(int ci)
{
    client *cl = &agent_clients[ci];
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
    if (cl->wfd >= 0)
        close(cl->wfd);
    cl->wfd = -1;
    code_drop(cl);
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        if (agent_commands[i].used)
            sub_del(&agent_commands[i], ci); /* keeps running; reattach by id */
    agent_last_activity_ms = now_ms();
}

/* A free slot (fd -1), set up the first time it is handed out; -1 when all are taken. */
static int free_client_slot(void)
{
    for (int i = 0; i < clients_hw; i++)
        if (agent_clients[i].fd < 0)
            return i;
    if (clients_hw == AGENT_MAX_CLIENTS)
        return -1;
    agent_clients[clients_hw].fd = -1;
    agent_clients[clients_hw].wfd = -1;
    return clients_hw++;
}

static void accept_client(void)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    /* Only the host drives the agent. A peer inside our pid namespace (a sandboxed program
     * that found the socket) has a visible pid; the host's shows as 0. */
    struct ucred cr;
    socklen_t len = sizeof cr;
    /* (Only meaningful as PID 1 of a namespace; a debugging agent run on the host itself
     * relies on the socket's 0600 mode alone.) */
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || (getpid() == 1 && cr.pid != 0)) {
        close(fd);
        return;
    }
    int ci = free_client_slot();
    if (ci < 0) { /* cannot happen: the listener is polled only while a slot is free */
        close(fd);
        return;
    }
    struct timeval tv = {AGENT_IO_TIMEOUT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    agent_clients[ci].fd = fd;
    agent_clients[ci].wfd = -1;
    agent_clients[ci].wfailed_req = 0;
    agent_clients[ci].authed = true;
    host_seen = true;
    agent_last_activity_ms = now_ms();
}

static int unauth_count(void)
{
    int n = 0;
    for (int i = 0; i < clients_hw; i++)
        n += agent_clients[i].fd >= 0 && !agent_clients[i].authed;
    return n;
}

/* A TCP peer may be anyone on the pod network: it gets a slot, but no frame is read from it
 * until it has sent the credential (read_auth). At most AGENT_MAX_UNAUTH wait at once. */
static void accept_tcp(void)
{
    int fd = accept4(tcp_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    /* At the bound, the oldest silent peer makes room: the host sends its credential at once,
     * so refusing the newest would lock it out for as long as someone keeps 8 peers open. */
    if (unauth_count() >= AGENT_MAX_UNAUTH) {
        int oldest = -1;
        for (int i = 0; i < clients_hw; i++)
            if (agent_clients[i].fd >= 0 && !agent_clients[i].authed &&
                (oldest < 0 || agent_clients[i].accept_seq < agent_clients[oldest].accept_seq))
                oldest = i;
        if (oldest >= 0)
            drop_client(oldest);
    }
    int ci = free_client_slot();
    if (ci < 0) {
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    agent_clients[ci].fd = fd;
    agent_clients[ci].wfd = -1;
    agent_clients[ci].wfailed_req = 0;
    agent_clients[ci].authed = false;
    agent_clients[ci].auth_len = 0;
    agent_clients[ci].since_ms = now_ms();
    static uint64_t accepted;
    agent_clients[ci].accept_seq = ++accepted;
}

/* Collects the credential of a TCP client without blocking (the peer is untrusted until then).
 * A wrong or incomplete one closes the connection. Once it matches, the socket becomes a
 * blocking one with the I/O timeouts of every client. */
static void read_auth(int ci)
{
    client *cl = &agent_clients[ci];
    ssize_t r = recv(cl->fd, cl->auth + cl->auth_len, AGENT_AUTH_LEN - cl->auth_len, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        drop_client(ci);
        return;
    }
    cl->auth_len += (uint32_t)r;
    if (cl->auth_len < AGENT_AUTH_LEN)
        return;
    unsigned diff = (unsigned)memcmp(cl->auth, SBX_AGENT_AUTH_MAGIC, SBX_AGENT_AUTH_MAGIC_LEN);
    for (unsigned i = 0; i < SBX_AGENT_TOKEN_LEN; i++) /* constant time over the token */
        diff |= (unsigned)(cl->auth[SBX_AGENT_AUTH_MAGIC_LEN + i] ^ agent_cfg.token[i]);
    memset(cl->auth, 0, sizeof cl->auth);
    if (diff != 0) {
        drop_client(ci);
        return;
    }
    int fl = fcntl(cl->fd, F_GETFL);
    if (fl >= 0)
        fcntl(cl->fd, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval tv = {AGENT_IO_TIMEOUT_MS / 1000, 0};
    setsockopt(cl->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(cl->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    cl->authed = true;
    host_seen = true;
    agent_last_activity_ms = now_ms();
}

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

void agent_drop_pages(void *p, size_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1), b = ((uintptr_t)p + n) & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

void agent_drop_scratch(void)
{
    agent_drop_pages(rx, sizeof rx);
    agent_drop_pages(tx, sizeof tx);
    agent_drop_pages(&requests, sizeof requests);
    agent_drop_pages(&agent_ev, sizeof agent_ev);
    commands_drop_scratch();
    kernel_drop_scratch();
}

static void handle_client(int ci)
{
    client *cl = &agent_clients[ci];
    if (!cl->authed) {
        read_auth(ci);
        return;
    }
    uint8_t hdr[4];
    if (!read_full(cl->fd, hdr, 4)) {
        drop_client(ci);
        return;
    }
    uint32_t n = get_u32(hdr);
    if (n > AGENT_MAX_FRAME || !read_full(cl->fd, rx, n)) {
        drop_client(ci); /* an oversized or cut frame: the stream cannot be resynchronised */
        return;
    }
    agent_last_activity_ms = now_ms();
    request_reset();
    const char *why = NULL;
    sbx_v1_AgentRequest *r = NULL;
    if (!agent_request_decode(&requests, rx, n, &r, &why)) {
        send_error(ci, r->id, EC_INVALID_ARGUMENT, "malformed request: %s", why);
        return;
    }
    switch (r->which_body) {
    case sbx_v1_AgentRequest_exec_tag: handle_exec(ci, r->id, &r->body.exec); break;
    case sbx_v1_AgentRequest_code_tag: handle_code(ci, r->id, &r->body.code); break;
    case sbx_v1_AgentRequest_stdin_tag: handle_stdin(ci, r->id, &r->body.stdin); break;
    case sbx_v1_AgentRequest_file_write_tag:
        handle_file_write(ci, r->id, &r->body.file_write);
        break;
    case sbx_v1_AgentRequest_file_read_tag: handle_file_read(ci, r->id, &r->body.file_read); break;
    case sbx_v1_AgentRequest_file_list_tag: handle_file_list(ci, r->id, &r->body.file_list); break;
    case sbx_v1_AgentRequest_signal_tag: handle_signal(ci, r->id, &r->body.signal); break;
    case sbx_v1_AgentRequest_attach_tag: handle_attach(ci, r->id, &r->body.attach); break;
    case sbx_v1_AgentRequest_ping_tag:
        event_begin(r->id, sbx_v1_AgentEvent_pong_tag);
        memset(&agent_ev.body.pong, 0, sizeof agent_ev.body.pong);
        agent_ev.body.pong.nonce = r->body.ping.nonce;
        snprintf(agent_ev.body.pong.version, sizeof agent_ev.body.pong.version, "%s",
                 AGENT_VERSION);
        agent_ev.body.pong.uptime_ms = (uint64_t)(now_ms() - start_ms);
        agent_ev.body.pong.running = (uint32_t)running_count();
        agent_ev.body.pong.uid = (uint32_t)agent_uid;
        agent_ev.body.pong.shared_uid = agent_cfg.shared_uid;
        send_event(ci);
        break;
    default: send_error(ci, r->id, EC_INVALID_ARGUMENT, "request carries no known operation");
    }
}

/* ---- children and signals ------------------------------------------------------------- */

static void reap(void)
{
    for (;;) {
        int st;
        struct rusage ru;
        pid_t pid = wait4(-1, &st, WNOHANG, &ru);
        if (pid <= 0)
            return;
        if (pid == spare_pid()) {
            spare_drop(false);
            continue;
        }
        if (pid == agent_py.pid) {
            int busy = agent_py.busy;
            agent_py.pid = 0;
            agent_py.died_before = true;
            if (busy >= 0) {
                command *c = &agent_commands[busy];
                c->wait_status = st;
                c->ru = ru;
                c->exited = true;
                agent_py.busy = -1;
                finish(c, 0, false, NULL);
            }
            kernel_reset();
            continue;
        }
        for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
            command *c = &agent_commands[i];
            if (c->used && c->running && !c->is_kernel && c->pid == pid) {
                c->wait_status = st;
                c->ru = ru;
                c->exited = true;
                finish(c, 0, false, NULL);
                break;
            }
        }
        /* anything else is an orphan reparented to us: reaped, nothing to report */
    }
}

static void handle_signals(void)
{
    struct signalfd_siginfo si;
    while (read(sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD)
            continue; /* reap() runs after every poll */
        /* Forward only what comes from outside the sandbox (pid 0 here): a program must not
         * be able to stop the agent by signalling PID 1. */
        if (si.ssi_pid != 0)
            continue;
        for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
            if (agent_commands[i].used && agent_commands[i].running && agent_commands[i].pid > 0)
                signal_group(agent_commands[i].pid, (int)si.ssi_signo);
        if (agent_py.pid > 0)
            kill(-agent_py.pid, (int)si.ssi_signo);
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP ||
            si.ssi_signo == SIGQUIT)
            agent_shutdown_at_ms = now_ms() + AGENT_TERM_GRACE_MS;
    }
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, len + 1);
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    mode_t old = umask(0077);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc < 0 || listen(fd, AGENT_LISTEN_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* "A.B.C.D:PORT" -> a listening TCP socket (fd), or -errno. */
static int listen_tcp(const char *spec)
{
    char host[64];
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || (size_t)(colon - spec) >= sizeof host)
        return -EINVAL;
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    char *end;
    long port = strtol(colon + 1, &end, 10);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    if (*end != '\0' || port < 1 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return -EINVAL;
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, AGENT_LISTEN_BACKLOG) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Once the socket listens, the sandbox's view of its directory becomes read-only: a program
 * that shares our uid (rootless boxes) could otherwise unlink the socket and bind its own in
 * its place -- the host's next connection would then talk to an impostor -- or fill the host
 * directory behind the bind, outside every size limit. The host's side stays writable (the
 * remount changes only this bind). Best effort: without CAP_SYS_ADMIN (a docker container)
 * the directory's 0700 mode, owned by another uid than programs', is the protection. */
static void seal_socket_dir(const char *socket_path)
{
    char dir[AGENT_MAX_PATH];
    snprintf(dir, sizeof dir, "%s", socket_path);
    char *slash = strrchr(dir, '/');
    if (getpid() != 1 || !slash || slash == dir)
        return; /* an agent run by hand on a host must never remount the host's directories */
    *slash = '\0';
    struct statvfs sv;
    unsigned long keep = 0;
    if (statvfs(dir, &sv) == 0) { /* flags a user namespace may not clear */
        if (sv.f_flag & ST_NOATIME)
            keep |= MS_NOATIME;
        if (sv.f_flag & ST_NODIRATIME)
            keep |= MS_NODIRATIME;
        if (sv.f_flag & ST_RELATIME)
            keep |= MS_RELATIME;
    }
    mount(NULL, dir, NULL,
          MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | keep, NULL);
}

/* The agent's setup, in the order its safety needs: not dumpable, the signals it forwards, the
 * seccomp filter before any program, the spare's cgroup, the listeners, then the first spare.
 * 0, or 1 after a line on stderr. */
static int serve_setup(void)
{
    agent_uid = getuid();
    start_ms = agent_last_activity_ms = now_ms();
    /* Client and command slots are set up when first handed out (free_client_slot,
     * command_init), not here: touching every one faulted in some 34 pages of these arrays. */
    /* Nobody in the sandbox may read our memory through /proc (same-uid in rootless boxes). */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    confine_empty_bounding();
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    int forwarded[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof forwarded / sizeof forwarded[0]; i++)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sig_fd < 0) {
        fprintf(stderr, "sbx-agent: signalfd: %s\n", strerror(errno));
        return 1;
    }
    /* Without a filter no program runs (each child fails closed in confine_seccomp); the
     * agent still serves files and pings, which is what valgrind (no seccomp()) exercises. */
    agent_seccomp_ready = confine_seccomp_prepare() == 0;
    spare_init();
    /* the idle TTL counts from here, not from before the setup above (slow under valgrind) */
    start_ms = agent_last_activity_ms = now_ms();
    if (files_init(agent_cfg.workdir) < 0) {
        fprintf(stderr, "sbx-agent: cannot open the root directory: %s\n", strerror(errno));
        return 1;
    }
    listen_fd = listen_on(agent_cfg.socket_path);
    if (listen_fd < 0) {
        fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", agent_cfg.socket_path,
                strerror(-listen_fd));
        return 1;
    }
    seal_socket_dir(agent_cfg.socket_path);
    if (agent_cfg.tcp_listen != NULL) {
        tcp_fd = listen_tcp(agent_cfg.tcp_listen);
        if (tcp_fd < 0) {
            fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", agent_cfg.tcp_listen,
                    strerror(-tcp_fd));
            return 1;
        }
    }
    if (agent_cfg.ready_fd >= 0) {
        ssize_t w = write(agent_cfg.ready_fd, "OK\n", 3);
        (void)w;
        close(agent_cfg.ready_fd);
    }
    /* Nothing privileged is left to do: the agent parses what programs write from here on, so
     * it drops what it does not need before the first of them runs. */
    int rc = confine_agent_caps();
    if (rc != 0) {
        fprintf(stderr, "sbx-agent: cannot drop its capabilities: %s\n", strerror(-rc));
        return 1;
    }
    /* The first command's spare, forked once the host can connect: its filter load overlaps
     * the host's connect and request instead of delaying that command. */
    spare_make();
    return 0;
}

/* The poll set of one round of the loop: each entry's kind, and for a client or a command's
 * pipe its index. */
enum { K_LISTEN, K_SIG, K_CLIENT, K_OUT0, K_OUT1, K_KREP, K_KOUT0, K_KOUT1, K_TCP };
static struct pollfd pfd[3 + AGENT_MAX_CLIENTS + AGENT_MAX_COMMANDS * 2 + 4];
static int kind[sizeof pfd / sizeof pfd[0]], index_of[sizeof pfd / sizeof pfd[0]];

/* Fills the poll set for this round and returns its size. On the way, drops a TCP peer whose
 * time to authenticate ran out and kills a command whose deadline passed; lowers *wake to the
 * next such time; counts the authenticated clients in *clients_open. */
static int poll_build(int64_t now, int64_t *wake, int *clients_open)
{
    int n = 0;
    /* With every client slot taken the listener is not polled: new connections wait in
     * the backlog (queued, never refused) until a client leaves. */
    if (free_client_slot() >= 0) {
        pfd[n] = (struct pollfd){listen_fd, POLLIN, 0};
        kind[n++] = K_LISTEN;
        if (tcp_fd >= 0) {
            pfd[n] = (struct pollfd){tcp_fd, POLLIN, 0};
            kind[n++] = K_TCP;
        }
    }
    pfd[n] = (struct pollfd){sig_fd, POLLIN, 0};
    kind[n++] = K_SIG;
    for (int i = 0; i < clients_hw; i++) {
        if (agent_clients[i].fd >= 0 && !agent_clients[i].authed) {
            /* an unauthenticated TCP peer keeps its slot only so long */
            int64_t end = agent_clients[i].since_ms + AGENT_IO_TIMEOUT_MS;
            if (now >= end) {
                drop_client(i);
                continue;
            }
            if (*wake < 0 || end < *wake)
                *wake = end;
        }
        if (agent_clients[i].fd >= 0) {
            pfd[n] = (struct pollfd){agent_clients[i].fd, POLLIN, 0};
            kind[n] = K_CLIENT;
            index_of[n++] = i;
            *clients_open += agent_clients[i].authed;
        }
    }
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
        command *c = &agent_commands[i];
        if (!c->used || !c->running)
            continue;
        if (c->deadline_ms && !c->timed_out) {
            if (now >= c->deadline_ms) {
                c->timed_out = true;
                kill_tree(c);
            } else if (*wake < 0 || c->deadline_ms < *wake) {
                *wake = c->deadline_ms;
            }
        }
        if (c->is_kernel)
            continue;
        for (int s = 0; s < 2; s++)
            if (c->out_fd[s] >= 0) {
                pfd[n] = (struct pollfd){c->out_fd[s], POLLIN, 0};
                kind[n] = s == 0 ? K_OUT0 : K_OUT1;
                index_of[n++] = i;
            }
    }
    if (agent_py.pid > 0) {
        if (agent_py.rep_fd >= 0) {
            pfd[n] = (struct pollfd){agent_py.rep_fd, POLLIN, 0};
            kind[n++] = K_KREP;
        }
        for (int s = 0; s < 2; s++)
            if (agent_py.out_fd[s] >= 0) {
                pfd[n] = (struct pollfd){agent_py.out_fd[s], POLLIN, 0};
                kind[n++] = s == 0 ? K_KOUT0 : K_KOUT1;
            }
    }
    return n;
}

/* Serves what poll reported ready among the first n entries (r of them). An entry whose fd
 * was closed or reused by an earlier one this round is skipped. */
static void poll_dispatch(int n, int r)
{
    for (int i = 0; r > 0 && i < n; i++) {
        if (!pfd[i].revents)
            continue;
        switch (kind[i]) {
        case K_LISTEN: accept_client(); break;
        case K_TCP: accept_tcp(); break;
        case K_SIG: handle_signals(); break;
        case K_CLIENT:
            if (agent_clients[index_of[i]].fd == pfd[i].fd)
                handle_client(index_of[i]);
            break;
        case K_OUT0:
        case K_OUT1:
            if (agent_commands[index_of[i]].out_fd[kind[i] - K_OUT0] == pfd[i].fd)
                pump(&agent_commands[index_of[i]], kind[i] - K_OUT0);
            break;
        case K_KREP:
            if (agent_py.rep_fd == pfd[i].fd)
                kernel_reply();
            break;
        case K_KOUT0:
        case K_KOUT1:
            if (agent_py.out_fd[kind[i] - K_KOUT0] == pfd[i].fd)
                kernel_output(kind[i] - K_KOUT0);
            break;
        }
    }
}

int agent_serve(const agent_config *config)
{
    agent_cfg = *config;
    if (serve_setup() != 0)
        return 1;
    int64_t trimmed_at = -1; /* agent_last_activity_ms when the buffers were last given back */
    int64_t host_due = agent_cfg.end_with_host && agent_cfg.first_host_s > 0
                           ? now_ms() + agent_cfg.first_host_s * 1000
                           : -1;
    for (;;) {
        int clients_open = 0;
        int64_t now = now_ms(), wake = -1;
        int n = poll_build(now, &wake, &clients_open);
        int running = running_count();
        if (agent_shutdown_at_ms) {
            if (running == 0 || now >= agent_shutdown_at_ms)
                return 0;
            if (wake < 0 || agent_shutdown_at_ms < wake)
                wake = agent_shutdown_at_ms;
        }
        /* No request for AGENT_TRIM_IDLE_MS: the per-request buffers' pages go back to the
         * host (most of an idle agent's private memory); a burst of requests keeps them. Clients
         * may stay connected and commands run: nothing in those buffers outlives a request. */
        if (trimmed_at != agent_last_activity_ms) {
            int64_t trim_at = agent_last_activity_ms + AGENT_TRIM_IDLE_MS;
            if (now >= trim_at) {
                agent_drop_scratch();
                trimmed_at = agent_last_activity_ms;
            } else if (wake < 0 || trim_at < wake) {
                wake = trim_at;
            }
        }
        if (agent_cfg.end_with_host && host_seen && clients_open == 0)
            return 0; /* the one-shot's host hung up (or died): PID 1 exits, the kernel ends
                       * every program of the box */
        if (host_due >= 0 && !host_seen) {
            if (now >= host_due)
                return 0; /* its owner died before it connected: nobody will */
            if (wake < 0 || host_due < wake)
                wake = host_due;
        }
        if (agent_cfg.idle_ttl_s > 0 && clients_open == 0 && running == 0) {
            int64_t idle_end = agent_last_activity_ms + agent_cfg.idle_ttl_s * 1000;
            if (now >= idle_end)
                return 0; /* PID 1 exits: the kernel tears the sandbox down */
            if (wake < 0 || idle_end < wake)
                wake = idle_end;
        }
        int timeout = wake < 0 ? -1 : (int)(wake - now > INT_MAX ? INT_MAX : wake - now);
        int r = poll(pfd, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            return 1;
        poll_dispatch(n, r);
        reap();
    }
}
