/* serve.c - sbx-agent's PID 1 loop: accepts host connections on the unix socket, decodes
 * length-prefixed AgentRequest frames (nanopb, static buffers), starts and tracks commands
 * with bounded output journals, drives the persistent python kernel, serves the file API,
 * reaps every child, forwards signals from outside, and exits after the idle TTL.
 *
 * One thread, one poll loop, no heap: every buffer below is a named static with a bound.
 * The agent trusts its host connection more than the programs it runs, but still bounds
 * everything it reads from it. Connections from inside the sandbox (a peer whose pid is
 * visible in our pid namespace) are refused: only the host, outside the namespace, drives us.
 * This file must not resolve file paths itself (files.c) or confine programs (confine.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include <pb_decode.h>
#include <pb_encode.h>

#include "agent.h"
#include "sbx/v1/agent.pb.h"

/* sbx.v1.ErrorCode values carried in AgentError.code. */
enum {
    EC_TIMEOUT = 4,
    EC_PROVISION = 5,
    EC_GONE = 6,
    EC_PERMISSION_DENIED = 9,
    EC_INVALID_ARGUMENT = 10,
    EC_RESOURCE_EXHAUSTED = 11,
    EC_INTERNAL = 12,
};

/* How long programs get to exit after an outside SIGTERM is forwarded, before PID 1 exits
 * (which SIGKILLs the whole namespace). */
#define AGENT_TERM_GRACE_MS 2000
/* Bytes of the kernel's reply header: status, exit code, value length (3 x u32). */
#define KERNEL_REPLY_HEADER 12
/* Longest value display the kernel may send (it cuts at 4000; AgentExit.value holds 4096). */
#define KERNEL_MAX_VALUE 4000

typedef struct journal {
    uint8_t buf[AGENT_JOURNAL_BYTES];
    uint64_t total; /* bytes ever produced on this stream; buf holds the newest */
} journal;

typedef struct command {
    bool used;
    bool running;   /* not yet finished */
    bool is_kernel; /* a call into the python kernel (pid/fds belong to the kernel) */
    uint64_t id;
    /* The clients following it: bit ci set means client ci gets its output and exit, echoing
     * sub_req[ci] (the request that started or attached it). Several clients may follow one
     * command (two attached terminals, a cancel waiting for the end); one that goes away only
     * leaves the set, the command runs on. */
    uint64_t subs;
    uint64_t sub_req[AGENT_MAX_CLIENTS];
    pid_t pid; /* also the process group and session id */
    int cg_fd; /* directory fd of the command's own cgroup, or -1 (none delegated) */
    char cg_name[32];
    int out_fd[2];  /* read ends of stdout, stderr (-1 when closed) */
    int in_fd;      /* write end of stdin, or -1 */
    uint64_t limit; /* per-stream output limit */
    bool truncated[2];
    bool timed_out, output_limited, exited;
    int wait_status;
    struct rusage ru;
    int64_t start_us, deadline_ms; /* deadline 0 = none */
    uint64_t finished_seq;         /* order of completion, for slot reuse */
    sbx_v1_AgentExit exit;         /* kept for reattach after the end */
    bool by_shutdown;              /* ended by the sandbox's own shutdown, not by itself */
    journal j[2];
} command;

typedef struct client {
    int fd; /* -1 when free */
    /* A TCP client is served only once it sent SBX_AGENT_AUTH_MAGIC + the token (authed); until
     * then its bytes go to auth[] and it is dropped AGENT_IO_TIMEOUT_MS after accept. Unix
     * clients are authed at accept (the peer check). */
    bool authed;
    uint8_t auth[AGENT_AUTH_LEN];
    uint32_t auth_len;
    int64_t since_ms;
    uint64_t accept_seq; /* order of acceptance: the oldest silent peer is evicted first */
    /* an in-progress chunked file write */
    int wfd;
    uint64_t wreq, woffset, wfailed_req;
    char wpath[AGENT_MAX_PATH];
} client;

typedef struct kernel {
    pid_t pid; /* 0 when not running */
    int ctl_fd, rep_fd;
    int out_fd[2];
    int busy;         /* command index, or -1 */
    bool died_before; /* a previous kernel died: the next call reports a restart */
    int in_fd;        /* write end of its framed stdin (kernel_python.c), or -1 */
} kernel;

static agent_config cfg;
static int listen_fd = -1, sig_fd = -1, tcp_fd = -1;
static client clients[AGENT_MAX_CLIENTS];
static command commands[AGENT_MAX_COMMANDS];
static kernel py = {0, -1, -1, {-1, -1}, -1, false, -1};
static uint64_t next_command_id = 1, finished_counter;
static int64_t start_ms, last_activity_ms, shutdown_at_ms;
static uid_t agent_uid;
static bool seccomp_ready; /* the filter compiled; programs may run */

static uint8_t rx[AGENT_MAX_FRAME];
static uint8_t tx[4 + AGENT_MAX_FRAME];
static uint8_t chunk[AGENT_CHUNK];
static sbx_v1_AgentRequest req;
static sbx_v1_AgentEvent ev;

/* env of one request as NAME=VALUE strings: bounded by the frame size. */
static char arena[AGENT_MAX_FRAME + AGENT_MAX_ENV * 2 + 4096];
static size_t arena_used;
static char *argv_tab[AGENT_MAX_ARGV + 4];
static size_t argv_n;
static char *env_tab[AGENT_MAX_ENV + 8];
static size_t env_n;
static uint8_t code_buf[AGENT_MAX_CODE];
static size_t code_len;
static uint64_t code_req;
static char exec_path[PATH_MAX];

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
    return now_us() / 1000;
}

static char *arena_alloc(size_t n)
{
    if (n > sizeof arena - arena_used)
        return NULL;
    char *p = arena + arena_used;
    arena_used += n;
    return p;
}

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
static void send_event(int ci)
{
    if (ci < 0 || ci >= AGENT_MAX_CLIENTS || clients[ci].fd < 0)
        return;
    pb_ostream_t os = pb_ostream_from_buffer(tx + 4, AGENT_MAX_FRAME);
    if (!pb_encode(&os, sbx_v1_AgentEvent_fields, &ev))
        return; /* cannot happen with static sizes below the frame limit */
    uint32_t n = (uint32_t)os.bytes_written;
    tx[0] = (uint8_t)n;
    tx[1] = (uint8_t)(n >> 8);
    tx[2] = (uint8_t)(n >> 16);
    tx[3] = (uint8_t)(n >> 24);
    if (!write_all(clients[ci].fd, tx, 4 + (size_t)n))
        drop_client(ci);
}

static void event_begin(uint64_t id, pb_size_t which)
{
    /* No field of an earlier event may leak into this one. Only the member about to be filled
     * is cleared: clearing the whole 34 KiB union per event would keep it all resident. */
    size_t member;
    switch (which) {
    case sbx_v1_AgentEvent_started_tag: member = sizeof ev.body.started; break;
    case sbx_v1_AgentEvent_output_tag: member = offsetof(sbx_v1_AgentOutput, data.bytes); break;
    case sbx_v1_AgentEvent_exit_tag: member = offsetof(sbx_v1_AgentExit, value) + 1; break;
    case sbx_v1_AgentEvent_entry_tag: member = sizeof ev.body.entry; break;
    case sbx_v1_AgentEvent_error_tag: member = sizeof ev.body.error; break;
    case sbx_v1_AgentEvent_pong_tag: member = sizeof ev.body.pong; break;
    case sbx_v1_AgentEvent_written_tag: member = sizeof ev.body.written; break;
    default: member = sizeof ev.body; break;
    }
    memset(&ev.body, 0, member);
    ev.id = id;
    ev.which_body = which;
}

static void send_error(int ci, uint64_t id, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void send_error(int ci, uint64_t id, uint32_t code, const char *fmt, ...)
{
    event_begin(id, sbx_v1_AgentEvent_error_tag);
    ev.body.error.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.body.error.message, sizeof ev.body.error.message, fmt, ap);
    va_end(ap);
    send_event(ci);
}

static uint32_t errno_code(int e)
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
    case ENFILE: return EC_RESOURCE_EXHAUSTED;
    case ENOENT:
    case ENOTDIR:
    case EISDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case EEXIST: return EC_INVALID_ARGUMENT;
    default: return EC_INTERNAL;
    }
}

/* ---- request argv/env into NULL-terminated tables ------------------------------------- */

/* Collects env entries (NAME=VALUE in the arena); false on a malformed name. */
static bool collect_env(const sbx_v1_AgentEnv *env, pb_size_t n)
{
    for (pb_size_t i = 0; i < n; i++) {
        size_t nl = strlen(env[i].name), vl = strlen(env[i].value);
        if (nl == 0 || strchr(env[i].name, '=') || env_n >= AGENT_MAX_ENV)
            return false;
        char *dst = arena_alloc(nl + vl + 2);
        if (!dst)
            return false;
        memcpy(dst, env[i].name, nl);
        dst[nl] = '=';
        memcpy(dst + nl + 1, env[i].value, vl + 1);
        env_tab[env_n++] = dst;
    }
    return true;
}

/* ---- journal and output ------------------------------------------------------------- */

static void journal_append(journal *j, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t pos = (size_t)(j->total % AGENT_JOURNAL_BYTES);
        size_t room = AGENT_JOURNAL_BYTES - pos;
        size_t take = n - i < room ? n - i : room;
        memcpy(j->buf + pos, p + i, take);
        j->total += take;
        i += take;
    }
}

_Static_assert(AGENT_MAX_CLIENTS <= 64, "command.subs is a 64-bit set of client indexes");

static void sub_add(command *c, int ci, uint64_t req_id)
{
    c->subs |= 1ull << ci;
    c->sub_req[ci] = req_id;
}

static void sub_del(command *c, int ci)
{
    c->subs &= ~(1ull << ci);
}

/* Sends ev to every client following c, each with its own request id. A client whose write
 * fails is dropped (and so leaves the set) on the way. */
static void send_to_subs(command *c)
{
    uint64_t set = c->subs;
    while (set) {
        int ci = __builtin_ctzll(set);
        set &= set - 1;
        ev.id = c->sub_req[ci];
        send_event(ci);
    }
}

static void output_event(command *c, int stream, uint64_t offset, const uint8_t *p, size_t n)
{
    event_begin(0, sbx_v1_AgentEvent_output_tag);
    ev.body.output.command_id = c->id;
    ev.body.output.stream = stream == 0 ? sbx_v1_AgentStream_AGENT_STREAM_STDOUT
                                        : sbx_v1_AgentStream_AGENT_STREAM_STDERR;
    ev.body.output.offset = offset;
    ev.body.output.data.size = (pb_size_t)n;
    memcpy(ev.body.output.data.bytes, p, n);
}

static void send_output(command *c, int stream, uint64_t offset, const uint8_t *p, size_t n)
{
    if (!c->subs)
        return;
    output_event(c, stream, offset, p, n);
    send_to_subs(c);
}

static void kill_tree(command *c);

/* Takes n bytes of stream output for c: journal, stream to the subscriber, enforce limit. */
static void take_output(command *c, int stream, const uint8_t *p, size_t n)
{
    journal *j = &c->j[stream];
    if (c->truncated[stream])
        return;
    if (j->total + n > c->limit) {
        n = j->total < c->limit ? (size_t)(c->limit - j->total) : 0;
        c->truncated[stream] = true;
        if (!c->output_limited && c->running) {
            c->output_limited = true;
            kill_tree(c);
        }
    }
    if (n == 0)
        return;
    uint64_t off = j->total;
    journal_append(j, p, n);
    send_output(c, stream, off, p, n);
}

/* Reads what is available on one output pipe. Returns false at EOF or error (fd closed). */
static bool pump(command *c, int stream)
{
    int fd = c->out_fd[stream];
    if (fd < 0)
        return false;
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r > 0) {
        take_output(c, stream, chunk, (size_t)r);
        return true;
    }
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (!c->is_kernel)
        close(fd);
    c->out_fd[stream] = -1;
    return false;
}

/* Reads every byte already in the pipes (non-blocking). */
static void drain(command *c)
{
    for (int s = 0; s < 2; s++) {
        int guard = 0;
        while (c->out_fd[s] >= 0 && guard++ < 1 << 16) {
            ssize_t r = read(c->out_fd[s], chunk, sizeof chunk);
            if (r > 0) {
                take_output(c, s, chunk, (size_t)r);
                continue;
            }
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0 || (r < 0 && errno != EAGAIN)) {
                if (!c->is_kernel)
                    close(c->out_fd[s]);
                c->out_fd[s] = -1;
            }
            break;
        }
    }
}

/* ---- process tree control ------------------------------------------------------------ */

static uint8_t dents[16384];

/* Calls fn(pid, pgrp, session) for every process in our pid namespace but us. */
static void each_process(void (*fn)(pid_t, pid_t, pid_t, void *), void *arg)
{
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(dents + off);
            off += d->d_reclen;
            char *end;
            long pid = strtol(d->d_name, &end, 10);
            if (*end || pid <= 1)
                continue;
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%ld/stat", pid);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            ssize_t r = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (r <= 0)
                continue;
            buf[r] = '\0';
            char *p = strrchr(buf, ')');
            char state;
            int ppid, pgrp, sid;
            if (!p || sscanf(p + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4)
                continue;
            fn((pid_t)pid, (pid_t)pgrp, (pid_t)sid, arg);
        }
    }
    close(dfd);
}

static void kill_if_in_session(pid_t pid, pid_t pgrp, pid_t sid, void *arg)
{
    pid_t target = *(pid_t *)arg;
    if (pgrp == target || sid == target)
        kill(pid, SIGKILL);
}

static void kill_unless_kernel(pid_t pid, pid_t pgrp, pid_t sid, void *arg)
{
    (void)pgrp;
    (void)arg;
    if (py.pid == 0 || sid != py.pid)
        kill(pid, SIGKILL);
}

/* ---- per-command cgroups ------------------------------------------------------------- */

static char cg_list[16384];

/* SIGKILLs every task of the cgroup at dir_fd until it lists none: each process a command
 * started, however it forked, double-forked or setsid'd, is in its cgroup, and a task with
 * SIGKILL pending cannot fork, so each round meets only tasks forked before the last one (and
 * tasks still on their way out). v2's cgroup.kill signals all of them at once, but returns
 * before they are gone: the rounds below still wait for the list to empty (without that wait a
 * TIMEOUT completion went out while the command's processes still lived: test_local_cgroup_v2
 * found 60 left). True once empty. */
static bool cgroup_kill(int dir_fd)
{
    int kfd = openat(dir_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC);
    if (kfd >= 0) {
        if (write(kfd, "1", 1) != 1) {
            /* the rounds below kill one by one instead */
        }
        close(kfd);
    }
    int64_t give_up = now_ms() + AGENT_CGROUP_KILL_MS;
    for (int round = 0; now_ms() < give_up; round++) {
        int fd = openat(dir_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return false;
        int listed = 0;
        for (;;) {
            ssize_t r = read(fd, cg_list, sizeof cg_list - 1);
            if (r <= 0)
                break;
            cg_list[r] = '\0';
            /* the kernel writes whole lines per read; a pid cut at the buffer's end is met
             * again next round */
            for (char *p = cg_list; *p;) {
                char *end;
                long pid = strtol(p, &end, 10);
                if (end == p)
                    break;
                if (pid > 1) {
                    kill((pid_t)pid, SIGKILL);
                    listed++;
                }
                p = end + (*end == '\n');
            }
        }
        close(fd);
        if (listed == 0)
            return true;
        struct timespec ts = {0, round < 10 ? 100000 : 1000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* Makes a fresh child of the delegated cgroup, named into name; fills *dir_fd and returns a
 * write fd on its cgroup.procs for a child to join with, or -1 (no delegation: the /proc sweeps
 * remain). */
static int cgroup_create(char name[32], int *dir_fd)
{
    static uint64_t seq;
    *dir_fd = -1;
    if (cfg.cgroup_fd < 0)
        return -1;
    snprintf(name, 32, "cmd-%llu", (unsigned long long)++seq);
    if (mkdirat(cfg.cgroup_fd, name, 0755) < 0 && errno != EEXIST)
        return -1;
    *dir_fd = openat(cfg.cgroup_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0) {
        unlinkat(cfg.cgroup_fd, name, AT_REMOVEDIR);
        return -1;
    }
    int procs = openat(*dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0) {
        close(*dir_fd);
        *dir_fd = -1;
        unlinkat(cfg.cgroup_fd, name, AT_REMOVEDIR);
    }
    return procs;
}

static int cgroup_make(command *c)
{
    return cgroup_create(c->cg_name, &c->cg_fd);
}

/* Removes a finished command's cgroup once nothing runs in it, when its slot is reused (until
 * then its counters, pids.events among them, stay readable from the host). A background
 * process the command left keeps it until that ends or the sandbox goes: the provider removes
 * the rest. */
static void cgroup_release(command *c)
{
    if (c->cg_fd < 0)
        return;
    if (unlinkat(cfg.cgroup_fd, c->cg_name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
        close(c->cg_fd);
        c->cg_fd = -1;
    }
}

static int running_count(void)
{
    int n = 0;
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        n += commands[i].used && commands[i].running;
    return n;
}

/* Kills c's whole process tree: its session/process group, and anything that moved to
 * another group but kept the session. When c is the only thing running (the usual case),
 * also every process that escaped with setsid, except the idle python kernel. */
static void kill_tree(command *c)
{
    if (c->pid <= 0)
        return;
    pid_t target = c->pid;
    kill(-target, SIGKILL);
    if (c->cg_fd >= 0 && cgroup_kill(c->cg_fd))
        return; /* the cgroup held every process the command ever started, and is empty */
    each_process(kill_if_in_session, &target);
    /* "Everything but the kernel" is the sandbox only when we are PID 1 of its own pid
     * namespace. An agent that is not (run by hand, in a pod that shares its pid namespace, in
     * a test) would SIGKILL every process it may signal on the host or in the pod. */
    if (!c->is_kernel && running_count() <= 1 && getpid() == 1)
        each_process(kill_unless_kernel, NULL);
}

/* ---- commands ------------------------------------------------------------------------ */

static command *find_command(uint64_t id)
{
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        if (commands[i].used && commands[i].id == id)
            return &commands[i];
    return NULL;
}

/* A free slot, else the slot of the command that finished longest ago; NULL when every slot
 * holds a running command. */
static command *alloc_command(void)
{
    command *best = NULL;
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
        command *c = &commands[i];
        if (!c->used)
            return c;
        if (!c->running && (!best || c->finished_seq < best->finished_seq))
            best = c;
    }
    return best;
}

static void command_init(command *c, int ci, uint64_t req_id, uint64_t timeout_ms, uint64_t limit)
{
    /* the slot's previous command: its cgroup goes now, or stays to the provider's cleanup
     * while a process it left in the background runs */
    cgroup_release(c);
    if (c->cg_fd >= 0)
        close(c->cg_fd);
    c->cg_fd = -1;
    c->used = true;
    c->running = true;
    c->is_kernel = false;
    c->id = next_command_id++;
    c->subs = 0;
    sub_add(c, ci, req_id);
    c->pid = 0;
    c->out_fd[0] = c->out_fd[1] = -1;
    c->in_fd = -1;
    c->limit = limit ? limit : AGENT_DEFAULT_OUTPUT_LIMIT;
    c->truncated[0] = c->truncated[1] = false;
    c->timed_out = c->output_limited = c->exited = false;
    c->wait_status = 0;
    memset(&c->ru, 0, sizeof c->ru);
    c->start_us = now_us();
    c->deadline_ms = timeout_ms ? c->start_us / 1000 + (int64_t)timeout_ms : 0;
    c->j[0].total = c->j[1].total = 0;
    memset(&c->exit, 0, offsetof(sbx_v1_AgentExit, value) + 1);
    c->exit.kernel_restarted = false;
    c->by_shutdown = false;
}

/* The end of c, to client ci under request id. */
static void send_exit_to(command *c, int ci, uint64_t id)
{
    if (c->by_shutdown) {
        /* Not the program's answer: the machinery stopped it (container stop, daemon restart,
         * host shutdown). Reported as an error so the host never reads it as a result. */
        send_error(ci, id, EC_PROVISION,
                   "the sandbox was shut down from outside (PID 1 got a termination signal: "
                   "container stop, daemon restart or host shutdown) while the program ran; it "
                   "ended with %s %d",
                   c->exit.signal ? "signal" : "exit status",
                   c->exit.signal ? (int)c->exit.signal : (int)c->exit.exit_code);
        return;
    }
    event_begin(id, sbx_v1_AgentEvent_exit_tag);
    /* the exit record is small but for its value string: copy just what is used */
    memcpy(&ev.body.exit, &c->exit, offsetof(sbx_v1_AgentExit, value));
    memcpy(ev.body.exit.value, c->exit.value, strnlen(c->exit.value, sizeof c->exit.value - 1) + 1);
    ev.body.exit.kernel_restarted = c->exit.kernel_restarted;
    send_event(ci);
}

/* The end of c, to every client following it; then nobody follows it any more (a later
 * attach gets the end at once). */
static void send_exit(command *c)
{
    uint64_t set = c->subs;
    c->subs = 0;
    while (set) {
        int ci = __builtin_ctzll(set);
        set &= set - 1;
        send_exit_to(c, ci, c->sub_req[ci]);
    }
}

static void kernel_stdin_end(command *c);

/* Ends c: fills its AgentExit from the wait status and flags, and reports it. */
static void finish(command *c, int exit_code_override, bool have_override, const char *value)
{
    drain(c);
    for (int s = 0; s < 2; s++) {
        if (c->out_fd[s] >= 0 && !c->is_kernel)
            close(c->out_fd[s]);
        c->out_fd[s] = -1;
    }
    if (c->is_kernel)
        kernel_stdin_end(c);
    else if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = -1;
    sbx_v1_AgentExit *x = &c->exit;
    x->command_id = c->id;
    int st = c->wait_status;
    if (have_override) {
        x->exit_code = exit_code_override;
    } else if (WIFEXITED(st)) {
        x->exit_code = WEXITSTATUS(st);
    } else if (WIFSIGNALED(st)) {
        x->signal = WTERMSIG(st);
    }
    if (c->timed_out)
        x->outcome = sbx_v1_AgentOutcome_AGENT_OUTCOME_TIMED_OUT;
    else if (c->output_limited)
        x->outcome = sbx_v1_AgentOutcome_AGENT_OUTCOME_OUTPUT_LIMIT;
    else if (x->signal)
        x->outcome = sbx_v1_AgentOutcome_AGENT_OUTCOME_SIGNALED;
    else if (x->exit_code == 0)
        x->outcome = sbx_v1_AgentOutcome_AGENT_OUTCOME_OK;
    else
        x->outcome = sbx_v1_AgentOutcome_AGENT_OUTCOME_NONZERO;
    x->wall_us = (uint64_t)(now_us() - c->start_us);
    x->cpu_us = (uint64_t)(c->ru.ru_utime.tv_sec + c->ru.ru_stime.tv_sec) * 1000000u +
                (uint64_t)(c->ru.ru_utime.tv_usec + c->ru.ru_stime.tv_usec);
    x->max_rss_kb = (uint64_t)c->ru.ru_maxrss;
    x->stdout_truncated = c->truncated[0];
    x->stderr_truncated = c->truncated[1];
    x->stdout_bytes = c->j[0].total;
    x->stderr_bytes = c->j[1].total;
    if (value)
        snprintf(x->value, sizeof x->value, "%s", value);
    c->by_shutdown = shutdown_at_ms != 0 && x->outcome != sbx_v1_AgentOutcome_AGENT_OUTCOME_OK;
    c->running = false;
    c->finished_seq = ++finished_counter;
    last_activity_ms = now_ms();
    send_exit(c);
}

/* ---- starting programs --------------------------------------------------------------- */

static const char *env_get(char **env, size_t n, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

/* Completes a program environment: the request's entries (already in tab[0..*n)) win over
 * same-named defaults, which are appended; NULL-terminated. tab holds AGENT_MAX_ENV + 8. */
static void build_env(char **tab, size_t *n)
{
    static char home[AGENT_MAX_PATH + 8];
    snprintf(home, sizeof home, "HOME=%s", cfg.workdir);
    static char *defaults[] = {
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        NULL,
        "LANG=C.UTF-8",
        "PYTHONDONTWRITEBYTECODE=1",
        "TERM=dumb",
    };
    defaults[1] = home;
    for (size_t d = 0; d < sizeof defaults / sizeof defaults[0]; d++) {
        size_t nl = (size_t)(strchr(defaults[d], '=') - defaults[d]);
        bool have = false;
        for (size_t i = 0; i < *n; i++)
            if (strncmp(tab[i], defaults[d], nl + 1) == 0)
                have = true;
        if (!have && *n < AGENT_MAX_ENV + 7)
            tab[(*n)++] = defaults[d];
    }
    tab[*n] = NULL;
}

/* Finds argv0 along PATH of the program environment (no heap needed). */
static const char *resolve_exec(const char *argv0, char **env, size_t n)
{
    if (strchr(argv0, '/'))
        return argv0;
    const char *path = env_get(env, n, "PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        if (len && len + strlen(argv0) + 2 < sizeof exec_path) {
            memcpy(exec_path, path, len);
            exec_path[len] = '/';
            strcpy(exec_path + len + 1, argv0);
            if (access(exec_path, X_OK) == 0)
                return exec_path;
        }
        if (!colon)
            break;
        path = colon + 1;
    }
    return argv0;
}

static void child_fail(const char *what, const char *arg)
{
    char line[512];
    int n = snprintf(line, sizeof line, "sbx-agent: %s %s: %s\n", what, arg, strerror(errno));
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    _exit(errno == ENOENT ? 127 : 126);
}

/* Which uid a request gets; false (with a reason) when it would be the agent's own. */
static bool pick_uid(uint32_t uid, uint32_t gid, uid_t *u, gid_t *g, bool *keep)
{
    *u = uid ? (uid_t)uid : cfg.prog_uid;
    *g = gid ? (gid_t)gid : cfg.prog_gid;
    *keep = false;
    if (*u == agent_uid) {
        if (!cfg.shared_uid)
            return false;
        *keep = true;
    }
    return true;
}

typedef struct spawn_args {
    char **argv, **env;
    const char *cwd, *path;
    uid_t u;
    gid_t g;
    bool keep;
    int in, out, err, extra3, extra4;
    int cg_procs;  /* the command's cgroup.procs to join first, or -1 */
    bool prepared; /* confine_prepare already ran (a spare): only confine_identity is left */
} spawn_args;

/* The child's own stack (it shares our memory until execve). 64 KiB: confinement and libc's
 * error paths need a few KiB. */
static char spawn_stack[64 * 1024] __attribute__((aligned(16)));

static int spawn_child(void *arg)
{
    spawn_args *a = arg;
    /* Into the command's cgroup before anything else: every process this child ever starts
     * is born there, so a kill of the cgroup reaches all of them. A child that cannot join
     * does not run (the command would escape its timeout). */
    if (a->cg_procs >= 0 && write(a->cg_procs, "0", 1) != 1)
        child_fail("cannot join the command's cgroup", "");
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
    int in = a->in >= 0 ? a->in : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        in = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* reads fail with EISDIR */
    /* Move the kernel fds out of the way of 0..2 before dup2 places them at 3 and 4. */
    int e3 = a->extra3 >= 0 ? fcntl(a->extra3, F_DUPFD_CLOEXEC, 10) : -1;
    int e4 = a->extra4 >= 0 ? fcntl(a->extra4, F_DUPFD_CLOEXEC, 10) : -1;
    if (dup2(in, 0) < 0 || dup2(a->out, 1) < 0 || dup2(a->err, 2) < 0)
        _exit(126);
    if ((e3 >= 0 && dup2(e3, 3) < 0) || (e4 >= 0 && dup2(e4, 4) < 0))
        _exit(126);
    /* Nothing else of the agent's leaks in: sockets, the root fd, other pipes. */
    int first = e4 >= 0 ? 5 : (e3 >= 0 ? 4 : 3);
    if (syscall(SYS_close_range, first, ~0u, 0) < 0)
        for (int fd = first; fd < 1024; fd++)
            close(fd);
    if (a->prepared)
        confine_identity(a->u, a->g, a->keep);
    else
        confine_program(a->u, a->g, a->keep, cfg.rlimit_nofile);
    if (a->cwd && *a->cwd && chdir(a->cwd) < 0)
        child_fail("cannot enter working directory", a->cwd);
    execve(a->path, a->argv, a->env);
    child_fail("cannot execute", a->argv[0]);
    return 127;
}

/* Forks a confined program. fds: extra fds to place at 3 and 4 (or -1). Returns pid or -errno
 * and fills the pipes. */
static pid_t spawn(char **argv, char **env, size_t env_count, const char *cwd, uid_t u, gid_t g,
                   bool keep, bool with_stdin, int *out_r, int *in_w, int extra3, int extra4,
                   int cg_procs)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
        (with_stdin && pipe2(pi, O_CLOEXEC) < 0)) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (po[i] >= 0)
                close(po[i]);
            if (pe[i] >= 0)
                close(pe[i]);
            if (pi[i] >= 0)
                close(pi[i]);
        }
        return -e;
    }
    const char *path = resolve_exec(argv[0], env, env_count);
    spawn_args sa = {argv,  env,   cwd,    path,   u,        g,    keep, with_stdin ? pi[0] : -1,
                     po[1], pe[1], extra3, extra4, cg_procs, false};
    /* A plain fork (no CLONE_VM|CLONE_VFORK): with vfork the agent sleeps until the child
     * execs, so a program that SIGSTOPs every process of its uid (kill(-1, SIGSTOP)) catches
     * the child between setresuid and execve and wedges PID 1 forever. The page-table copy of
     * this small static agent costs a fraction of a millisecond; the child's copy of
     * spawn_stack is its own. */
    pid_t pid = clone(spawn_child, spawn_stack + sizeof spawn_stack, SIGCHLD, &sa);
    if (pid < 0) {
        int e = errno;
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        if (with_stdin) {
            close(pi[0]);
            close(pi[1]);
        }
        return -e;
    }
    close(po[1]);
    close(pe[1]);
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    out_r[0] = po[0];
    out_r[1] = pe[0];
    if (with_stdin) {
        close(pi[0]);
        *in_w = pi[1];
    }
    return pid;
}

/* ---- the spare: the next command's first process, forked ahead ------------------------- */

/* Joining a cgroup v1 waits for an RCU grace period whenever no other migration happened just
 * before (measured: 7-12 ms on a loaded host, against 8 us back to back), which every exec
 * would pay on its critical path. So after each command starts, the agent forks the next
 * one's first process ahead of time: it joins a fresh cgroup while nothing waits for it, then
 * blocks until an exec hands it what to run through a shared mapping and one byte on a pipe.
 * Its stdout/stderr/stdin pipes are made before the fork, so no descriptor has to be passed.
 * It runs as the agent (root of the sandbox, non-dumpable) until then, like any child between
 * fork and confinement, but with confine_prepare's part done: its rlimits set and its bounding
 * set empty, so the go byte leaves only confine_identity's syscalls on the exec's path. Without a
 * delegated cgroup there is no spare. The first is forked as soon as the agent listens; a one-shot
 * agent (cfg.one_shot) forks no other. */
typedef struct spare_job {
    char *argv[AGENT_MAX_ARGV + 4];
    char *env[AGENT_MAX_ENV + 8];
    char path[PATH_MAX];
    char cwd[AGENT_MAX_PATH];
    uid_t u;
    gid_t g;
    bool keep, with_stdin;
    char strings[AGENT_MAX_FRAME + sizeof arena]; /* every string argv and env point at */
} spare_job;

typedef struct spare {
    pid_t pid;    /* 0: none */
    int go_fd;    /* write end: one byte starts it */
    int out_r[2]; /* read ends of its stdout and stderr pipes */
    int in_w;     /* write end of its stdin pipe */
    int cg_fd;    /* its cgroup */
    char cg_name[32];
} spare;

static spare_job *job; /* MAP_SHARED: the spare sees what the agent writes after the fork */
static spare next_spare = {0, -1, {-1, -1}, -1, -1, ""};

/* The cgroup.procs of the cgroup cgroup_probe made, kept for the first spare (spare_make):
 * one cgroup made and removed fewer per sandbox. -1 once used or dropped. */
static int probe_procs = -1;

/* At start: a delegation that does not work (a host that chowned nothing) is dropped here, not
 * in each command. The cgroup it makes to find out is the first spare's. */
static void cgroup_probe(void)
{
    if (cfg.cgroup_fd < 0)
        return;
    int procs = cgroup_create(next_spare.cg_name, &next_spare.cg_fd);
    bool ok = procs >= 0 && next_spare.cg_fd >= 0;
    if (ok)
        probe_procs = procs;
    if (!ok) {
        fprintf(stderr,
                "sbx-agent: the delegated cgroup is not writable (%s): commands are "
                "tracked by session only\n",
                strerror(errno));
        close(cfg.cgroup_fd);
        cfg.cgroup_fd = -1;
    }
}

static void spare_drop(bool kill_it)
{
    if (next_spare.pid > 0 && kill_it)
        kill(next_spare.pid, SIGKILL); /* reaped by reap() like any orphan */
    int *fds[] = {&next_spare.go_fd, &next_spare.out_r[0], &next_spare.out_r[1], &next_spare.in_w};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    if (next_spare.cg_fd >= 0) {
        close(next_spare.cg_fd);
        if (!kill_it) /* a spare that died on its own: its cgroup is empty */
            unlinkat(cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
    }
    next_spare.cg_fd = -1;
    next_spare.pid = 0;
}

/* Closes every fd from 3 up but the n in keep. */
static void close_all_but(int *keep, size_t n)
{
    for (size_t i = 1; i < n; i++) /* sort (n is 5) */
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned from = 3;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < (int)from)
            continue;
        if ((unsigned)keep[i] > from &&
            syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0) < 0)
            for (unsigned fd = from; fd < (unsigned)keep[i]; fd++)
                close((int)fd);
        from = (unsigned)keep[i] + 1;
    }
    if (syscall(SYS_close_range, from, ~0u, 0) < 0)
        for (unsigned fd = from; fd < 1024; fd++)
            close((int)fd);
}

/* Forks the next spare (no-op without a delegated cgroup or when one is waiting). */
static void spare_make(void)
{
    if (next_spare.pid > 0 || !job || cfg.cgroup_fd < 0 || !seccomp_ready)
        return;
    int procs = probe_procs; /* the probe's cgroup, unused yet, or a new one */
    probe_procs = -1;
    if (procs < 0)
        procs = cgroup_create(next_spare.cg_name, &next_spare.cg_fd);
    if (procs < 0)
        return;
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1}, go[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(pi, O_CLOEXEC) < 0 ||
        pipe2(go, O_CLOEXEC) < 0) {
        int all[] = {po[0], po[1], pe[0], pe[1], pi[0], pi[1], go[0], go[1], procs};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] >= 0)
                close(all[i]);
        close(next_spare.cg_fd);
        next_spare.cg_fd = -1;
        unlinkat(cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* Nothing of the agent's may stay open in here while we wait: a copy of a client
         * socket or of a program's stdin pipe would keep it from ever reaching EOF. */
        int keep[] = {procs, go[0], po[1], pe[1], pi[0]};
        close_all_but(keep, sizeof keep / sizeof keep[0]);
        if (write(procs, "0", 1) != 1)
            _exit(126);
        /* What does not depend on the job is done while nothing waits for it; a failure
         * ends the spare (exit 126) and the next exec spawns as without one. */
        confine_prepare(cfg.rlimit_nofile);
        char b;
        if (read(go[0], &b, 1) != 1)
            _exit(0); /* the agent dropped us */
        spawn_args sa = {job->argv,
                         job->env,
                         job->cwd[0] ? job->cwd : NULL,
                         job->path,
                         job->u,
                         job->g,
                         job->keep,
                         job->with_stdin ? pi[0] : -1,
                         po[1],
                         pe[1],
                         -1,
                         -1,
                         -1,
                         true};
        spawn_child(&sa);
        _exit(127);
    }
    close(procs);
    close(po[1]);
    close(pe[1]);
    close(pi[0]);
    close(go[0]);
    if (pid < 0) {
        close(po[0]);
        close(pe[0]);
        close(pi[1]);
        close(go[1]);
        close(next_spare.cg_fd);
        next_spare.cg_fd = -1;
        unlinkat(cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
        return;
    }
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    next_spare.pid = pid;
    next_spare.go_fd = go[1];
    next_spare.out_r[0] = po[0];
    next_spare.out_r[1] = pe[0];
    next_spare.in_w = pi[1];
}

/* Copies s into the job's string area at *used; NULL when it does not fit. */
static char *job_string(const char *s, size_t *used)
{
    size_t n = strlen(s) + 1;
    if (n > sizeof job->strings - *used)
        return NULL;
    char *d = job->strings + *used;
    memcpy(d, s, n);
    *used += n;
    return d;
}

/* Hands the command to the waiting spare; false (nothing changed) when there is none or the
 * command does not fit the job, and the caller spawns directly. */
static bool spare_take(command *c, char **argv, char **env, size_t env_count, const char *cwd,
                       uid_t u, gid_t g, bool keep, bool with_stdin)
{
    if (next_spare.pid <= 0)
        return false;
    size_t used = 0, i = 0;
    for (; i < AGENT_MAX_ARGV + 3 && argv[i]; i++)
        if (!(job->argv[i] = job_string(argv[i], &used)))
            return false;
    job->argv[i] = NULL;
    for (i = 0; i < env_count && i < AGENT_MAX_ENV + 7; i++)
        if (!(job->env[i] = job_string(env[i], &used)))
            return false;
    job->env[i] = NULL;
    const char *path = resolve_exec(argv[0], env, env_count);
    if (strlen(path) >= sizeof job->path || (cwd && strlen(cwd) >= sizeof job->cwd))
        return false;
    snprintf(job->path, sizeof job->path, "%s", path);
    snprintf(job->cwd, sizeof job->cwd, "%s", cwd ? cwd : "");
    job->u = u;
    job->g = g;
    job->keep = keep;
    job->with_stdin = with_stdin;
    if (write(next_spare.go_fd, "g", 1) != 1) { /* it died: reap() drops it */
        return false;
    }
    c->pid = next_spare.pid;
    c->out_fd[0] = next_spare.out_r[0];
    c->out_fd[1] = next_spare.out_r[1];
    if (with_stdin) {
        c->in_fd = next_spare.in_w;
    } else {
        close(next_spare.in_w);
        c->in_fd = -1;
    }
    c->cg_fd = next_spare.cg_fd;
    memcpy(c->cg_name, next_spare.cg_name, sizeof c->cg_name);
    close(next_spare.go_fd);
    next_spare = (spare){0, -1, {-1, -1}, -1, -1, ""};
    return true;
}

/* Tells the starting client ci the command's id; a detached start stops following it there
 * (AgentAttach follows it later, from any connection). */
static void send_started(command *c, int ci, uint64_t req_id, bool detach)
{
    event_begin(req_id, sbx_v1_AgentEvent_started_tag);
    ev.body.started.command_id = c->id;
    ev.body.started.pid = c->pid;
    send_event(ci);
    if (detach)
        sub_del(c, ci);
}

static void start_program(int ci, uint64_t req_id, char **argv, const char *cwd, uint32_t uid,
                          uint32_t gid, uint64_t timeout_ms, uint64_t limit, bool with_stdin,
                          bool detach)
{
    uid_t u;
    gid_t g;
    bool keep;
    if (!seccomp_ready) {
        send_error(ci, req_id, EC_INTERNAL,
                   "the seccomp filter could not be built on this kernel: programs do not run "
                   "unconfined");
        return;
    }
    if (!pick_uid(uid, gid, &u, &g, &keep)) {
        send_error(ci, req_id, EC_PERMISSION_DENIED,
                   "programs never run as the agent's uid %u; ask for another uid", (unsigned)u);
        return;
    }
    command *c = alloc_command();
    if (!c) {
        send_error(ci, req_id, EC_RESOURCE_EXHAUSTED,
                   "%d commands are already running in this sandbox; wait for one to end",
                   AGENT_MAX_COMMANDS);
        return;
    }
    command_init(c, ci, req_id, timeout_ms, limit);
    build_env(env_tab, &env_n);
    const char *dir = cwd && *cwd ? cwd : cfg.workdir;
    if (spare_take(c, argv, env_tab, env_n, dir, u, g, keep, with_stdin)) {
        send_started(c, ci, req_id, detach);
        if (!cfg.one_shot)
            spare_make(); /* the next one joins its cgroup while this command runs */
        return;
    }
    int cg_procs = cgroup_make(c);
    pid_t pid = spawn(argv, env_tab, env_n, cwd && *cwd ? cwd : cfg.workdir, u, g, keep, with_stdin,
                      c->out_fd, &c->in_fd, -1, -1, cg_procs);
    if (cg_procs >= 0)
        close(cg_procs);
    if (pid < 0) {
        cgroup_release(c);
        c->used = false;
        send_error(ci, req_id, EC_RESOURCE_EXHAUSTED, "cannot start %s: %s", argv[0],
                   strerror((int)-pid));
        return;
    }
    c->pid = pid;
    send_started(c, ci, req_id, detach);
    if (!cfg.one_shot)
        spare_make();
}

static void handle_exec(int ci, uint64_t id, sbx_v1_AgentExec *x)
{
    static char sh[] = "/bin/sh", dash_c[] = "-c";
    for (pb_size_t i = 0; i < x->argv_count && argv_n < AGENT_MAX_ARGV; i++)
        argv_tab[argv_n++] = x->argv[i];
    if (!collect_env(x->env, x->env_count)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "an environment name is empty or contains '='");
        return;
    }
    if (argv_n == 0) {
        if (x->shell[0] == '\0') {
            send_error(ci, id, EC_INVALID_ARGUMENT, "exec needs argv or a shell line");
            return;
        }
        argv_tab[0] = sh;
        argv_tab[1] = dash_c;
        argv_tab[2] = x->shell;
        argv_n = 3;
    }
    argv_tab[argv_n] = NULL;
    start_program(ci, id, argv_tab, x->cwd, x->uid, x->gid, x->timeout_ms, x->output_limit_bytes,
                  x->stdin_follows, x->detach);
}

/* ---- the python kernel --------------------------------------------------------------- */

static void kernel_reset(void)
{
    if (py.pid > 0) {
        kill(-py.pid, SIGKILL);
        kill(py.pid, SIGKILL);
    }
    if (py.ctl_fd >= 0)
        close(py.ctl_fd);
    if (py.rep_fd >= 0)
        close(py.rep_fd);
    if (py.in_fd >= 0)
        close(py.in_fd);
    for (int s = 0; s < 2; s++)
        if (py.out_fd[s] >= 0)
            close(py.out_fd[s]);
    py.pid = 0;
    py.ctl_fd = py.rep_fd = py.in_fd = py.out_fd[0] = py.out_fd[1] = -1;
    py.busy = -1;
}

static int kernel_start(uid_t u, gid_t g, bool keep)
{
    int ctl[2], rep[2];
    if (pipe2(ctl, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(rep, O_CLOEXEC) < 0) {
        int e = errno;
        close(ctl[0]);
        close(ctl[1]);
        return -e;
    }
    static char python[] = "python3", dash_c[] = "-c";
    static char *kargv[4];
    kargv[0] = python;
    kargv[1] = dash_c;
    kargv[2] = (char *)agent_python_kernel;
    kargv[3] = NULL;
    static char *kenv[AGENT_MAX_ENV + 8];
    size_t kenv_n = 0;
    build_env(kenv, &kenv_n);
    pid_t pid = spawn(kargv, kenv, kenv_n, cfg.workdir, u, g, keep, true, py.out_fd, &py.in_fd,
                      ctl[0], rep[1], -1);
    close(ctl[0]);
    close(rep[1]);
    if (pid < 0) {
        close(ctl[1]);
        close(rep[0]);
        return (int)pid;
    }
    py.pid = pid;
    py.ctl_fd = ctl[1];
    py.rep_fd = rep[0];
    py.busy = -1;
    return 0;
}

static bool put_u32(uint8_t *p, size_t cap, size_t *len, uint32_t v)
{
    if (*len + 4 > cap)
        return false;
    p[(*len)++] = (uint8_t)v;
    p[(*len)++] = (uint8_t)(v >> 8);
    p[(*len)++] = (uint8_t)(v >> 16);
    p[(*len)++] = (uint8_t)(v >> 24);
    return true;
}

/* Writes all of p to a pipe the program reads, while keeping c's output pipes drained so a
 * program that writes before it reads cannot deadlock us. Gives up at c's deadline. */
static bool write_to_program(command *c, int fd, const uint8_t *p, size_t n)
{
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        struct pollfd pf[3] = {
            {fd, POLLOUT, 0}, {c->out_fd[0], POLLIN, 0}, {c->out_fd[1], POLLIN, 0}};
        int timeout = 1000;
        if (c->deadline_ms) {
            int64_t left = c->deadline_ms - now_ms();
            if (left <= 0)
                return false;
            timeout = left < 1000 ? (int)left : 1000;
        }
        if (poll(pf, 3, timeout) < 0 && errno != EINTR)
            return false;
        if (pf[0].revents & (POLLERR | POLLHUP))
            return false;
        for (int s = 0; s < 2; s++)
            if (pf[1 + s].revents)
                pump(c, s);
    }
    return true;
}

/* One frame of a kernel call's stdin (n == 0: its end). false when the kernel is gone. */
static bool kernel_stdin(command *c, const uint8_t *p, size_t n)
{
    uint8_t l4[4];
    size_t z = 0;
    put_u32(l4, 4, &z, (uint32_t)n);
    return write_to_program(c, c->in_fd, l4, 4) && (n == 0 || write_to_program(c, c->in_fd, p, n));
}

/* Ends a kernel call's stdin once (the kernel reads exactly one end per call). */
static void kernel_stdin_end(command *c)
{
    if (c->in_fd >= 0)
        kernel_stdin(c, NULL, 0);
    c->in_fd = -1; /* the pipe is the kernel's, kept for its next call */
}

static void handle_code_complete(int ci, uint64_t id, sbx_v1_AgentCode *x);

static void handle_code(int ci, uint64_t id, sbx_v1_AgentCode *x)
{
    /* Chunks accumulate until `more` is false. A new request id starts a new buffer. */
    if (code_req != id) {
        code_req = id;
        code_len = 0;
    }
    if (code_len + x->code.size > sizeof code_buf) {
        code_req = 0;
        send_error(ci, id, EC_RESOURCE_EXHAUSTED, "code is larger than %u bytes",
                   (unsigned)sizeof code_buf);
        return;
    }
    memcpy(code_buf + code_len, x->code.bytes, x->code.size);
    code_len += x->code.size;
    if (x->more)
        return;
    code_req = 0;
    handle_code_complete(ci, id, x);
}

/* Long because it is one run_code in order (the stateful kernel's one-call-at-a-time path, or a
 * one-shot interpreter: request with cwd and env pairs, then its stdin), and both paths share the
 * command slot it fills. */
static void handle_code_complete(int ci, uint64_t id, sbx_v1_AgentCode *x)
{
    if (!collect_env(x->env, x->env_count)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "an environment name is empty or contains '='");
        return;
    }
    if (memchr(code_buf, '\0', code_len)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "code contains a NUL byte");
        return;
    }
    bool python = strcmp(x->language, "python") == 0 || strcmp(x->language, "python3") == 0;
    if (!python || !x->stateful) {
        static char bash[] = "bash", sh[] = "sh", python3[] = "python3", dash_c[] = "-c";
        if (code_len >= sizeof code_buf) {
            send_error(ci, id, EC_RESOURCE_EXHAUSTED, "code is larger than %u bytes",
                       (unsigned)sizeof code_buf - 1);
            return;
        }
        code_buf[code_len] = '\0';
        char *code = (char *)code_buf;
        if (python)
            argv_tab[0] = python3;
        else if (strcmp(x->language, "bash") == 0)
            argv_tab[0] = access("/bin/bash", X_OK) == 0 ? bash : sh;
        else if (strcmp(x->language, "sh") == 0)
            argv_tab[0] = sh;
        else {
            send_error(ci, id, EC_INVALID_ARGUMENT,
                       "language '%s' is not offered; use python, bash or sh", x->language);
            return;
        }
        argv_tab[1] = dash_c;
        argv_tab[2] = code;
        argv_tab[3] = NULL;
        argv_n = 3;
        start_program(ci, id, argv_tab, x->cwd, x->uid, x->gid, x->timeout_ms,
                      x->output_limit_bytes, x->stdin_follows, x->detach);
        return;
    }
    /* Stateful python: one call at a time into the persistent kernel. */
    uid_t u;
    gid_t g;
    bool keep;
    if (!pick_uid(x->uid, x->gid, &u, &g, &keep)) {
        send_error(ci, id, EC_PERMISSION_DENIED, "programs never run as the agent's uid");
        return;
    }
    if (py.busy >= 0) {
        send_error(ci, id, EC_RESOURCE_EXHAUSTED,
                   "the python kernel is busy with another call; calls of one session run "
                   "one at a time");
        return;
    }
    if (!seccomp_ready) {
        send_error(ci, id, EC_INTERNAL, "the seccomp filter could not be built on this kernel");
        return;
    }
    bool restarted = false;
    if (py.pid == 0) {
        restarted = py.died_before;
        int rc = kernel_start(u, g, keep);
        if (rc < 0) {
            send_error(ci, id, EC_RESOURCE_EXHAUSTED, "cannot start the python kernel: %s",
                       strerror(-rc));
            return;
        }
    }
    command *c = alloc_command();
    if (!c) {
        send_error(ci, id, EC_RESOURCE_EXHAUSTED, "every command slot is busy");
        return;
    }
    command_init(c, ci, id, x->timeout_ms, x->output_limit_bytes);
    c->is_kernel = true;
    c->pid = py.pid;
    c->out_fd[0] = py.out_fd[0];
    c->out_fd[1] = py.out_fd[1];
    c->exit.kernel_restarted = restarted;
    py.busy = (int)(c - commands);
    send_started(c, ci, id, x->detach);
    /* request: code, cwd, env pairs (the env entries sit in env_tab as NAME=VALUE) */
    static uint8_t hdr[4 + AGENT_MAX_PATH + 4];
    size_t hl = 0;
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)code_len);
    bool ok = write_to_program(c, py.ctl_fd, hdr, hl) &&
              write_to_program(c, py.ctl_fd, code_buf, code_len);
    hl = 0;
    size_t cwdl = strnlen(x->cwd, AGENT_MAX_PATH - 1);
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)cwdl);
    memcpy(hdr + hl, x->cwd, cwdl);
    hl += cwdl;
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)env_n);
    ok = ok && write_to_program(c, py.ctl_fd, hdr, hl);
    for (size_t i = 0; ok && i < env_n; i++) {
        char *eq = strchr(env_tab[i], '=');
        size_t nl = (size_t)(eq - env_tab[i]), vl = strlen(eq + 1);
        uint8_t l4[4];
        size_t z = 0;
        put_u32(l4, 4, &z, (uint32_t)nl);
        ok = write_to_program(c, py.ctl_fd, l4, 4) &&
             write_to_program(c, py.ctl_fd, (uint8_t *)env_tab[i], nl);
        z = 0;
        put_u32(l4, 4, &z, (uint32_t)vl);
        ok = ok && write_to_program(c, py.ctl_fd, l4, 4) &&
             write_to_program(c, py.ctl_fd, (uint8_t *)eq + 1, vl);
    }
    /* its stdin: AgentStdin frames follow, or it has none (the end goes at once) */
    c->in_fd = py.in_fd;
    if (ok && !x->stdin_follows)
        kernel_stdin_end(c);
    if (!ok) {
        /* the kernel died or the deadline passed: its SIGCHLD or the deadline ends the call */
        if (c->deadline_ms && now_ms() >= c->deadline_ms) {
            c->timed_out = true;
            kill_tree(c);
        }
    }
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The kernel replied (or its reply pipe closed). */
static void kernel_reply(void)
{
    static uint8_t rep[KERNEL_REPLY_HEADER + KERNEL_MAX_VALUE + 1];
    ssize_t r = read(py.rep_fd, rep, sizeof rep - 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (py.busy < 0) {
        if (r <= 0) { /* closed between calls: the SIGCHLD path cleans up */
            close(py.rep_fd);
            py.rep_fd = -1;
        }
        return;
    }
    command *c = &commands[py.busy];
    if (r < KERNEL_REPLY_HEADER) {
        /* kernel gone mid-call: wait for SIGCHLD to report its status */
        if (r <= 0) {
            close(py.rep_fd);
            py.rep_fd = -1;
        }
        return;
    }
    uint32_t status = get_u32(rep), code = get_u32(rep + 4), vlen = get_u32(rep + 8);
    if (vlen > KERNEL_MAX_VALUE || (size_t)r < KERNEL_REPLY_HEADER + vlen)
        vlen = (size_t)r >= KERNEL_REPLY_HEADER ? (uint32_t)((size_t)r - KERNEL_REPLY_HEADER) : 0;
    if (vlen > KERNEL_MAX_VALUE)
        vlen = KERNEL_MAX_VALUE;
    rep[KERNEL_REPLY_HEADER + vlen] = '\0';
    /* the value is the program's text: it must be a C string for AgentExit.value */
    for (uint32_t i = 0; i < vlen; i++)
        if (rep[KERNEL_REPLY_HEADER + i] == '\0')
            rep[KERNEL_REPLY_HEADER + i] = '?';
    int exit_code = status == 0 ? 0 : (int)(code & 0xff);
    if (status != 0 && exit_code == 0 && status == 1)
        exit_code = 1;
    py.busy = -1;
    finish(c, exit_code, true, (const char *)rep + KERNEL_REPLY_HEADER);
}

/* ---- stdin, signal, attach ------------------------------------------------------------ */

static void handle_stdin(int ci, uint64_t id, sbx_v1_AgentStdin *x)
{
    command *c = find_command(x->command_id);
    if (!c || !c->running || c->in_fd < 0) {
        /* the command ended (or never read stdin): drop the bytes quietly */
        (void)ci;
        (void)id;
        return;
    }
    if (c->is_kernel) {
        if (x->data.size && !kernel_stdin(c, x->data.bytes, x->data.size))
            c->in_fd = -1; /* the kernel is gone; its SIGCHLD ends the call */
        else if (x->eof)
            kernel_stdin_end(c);
        return;
    }
    if (x->data.size && !write_to_program(c, c->in_fd, x->data.bytes, x->data.size)) {
        close(c->in_fd);
        c->in_fd = -1;
        return;
    }
    if (x->eof) {
        close(c->in_fd);
        c->in_fd = -1;
    }
}

static void handle_signal(int ci, uint64_t id, sbx_v1_AgentSignal *x)
{
    command *c = find_command(x->command_id);
    if (!c) {
        send_error(ci, id, EC_GONE, "no command %llu in this sandbox",
                   (unsigned long long)x->command_id);
        return;
    }
    if (x->signo <= 0 || x->signo >= 65) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "signal %d is not a signal number", x->signo);
        return;
    }
    if (!c->running)
        return;
    if (x->signo == SIGKILL) {
        kill_tree(c);
    } else {
        kill(-c->pid, x->signo);
    }
}

/* The first byte of a stream its journal still holds. */
static uint64_t journal_first(const journal *j)
{
    return j->total > AGENT_JOURNAL_BYTES ? j->total - AGENT_JOURNAL_BYTES : 0;
}

/* Sends client ci (request id) what the journal holds of one stream from `from` on. */
static void replay(command *c, int stream, uint64_t from, int ci, uint64_t id)
{
    journal *j = &c->j[stream];
    while (from < j->total) {
        size_t pos = (size_t)(from % AGENT_JOURNAL_BYTES);
        size_t n = (size_t)(j->total - from);
        if (n > AGENT_JOURNAL_BYTES - pos)
            n = AGENT_JOURNAL_BYTES - pos;
        if (n > AGENT_CHUNK)
            n = AGENT_CHUNK;
        output_event(c, stream, from, j->buf + pos, n);
        ev.id = id;
        send_event(ci);
        if (clients[ci].fd < 0)
            return; /* the write failed and dropped the client */
        from += n;
    }
}

static void handle_attach(int ci, uint64_t id, sbx_v1_AgentAttach *x)
{
    command *c = find_command(x->command_id);
    if (!c) {
        send_error(ci, id, EC_GONE,
                   "command %llu is not known to this sandbox (it ended long ago or never ran)",
                   (unsigned long long)x->command_id);
        return;
    }
    /* What fell out of the journal is gone: say which range is still kept rather than hand
     * back output with a hole the caller did not ask for. */
    uint64_t want[2] = {x->stdout_offset, x->stderr_offset};
    for (int s = 0; s < 2; s++) {
        const journal *j = &c->j[s];
        if (want[s] < journal_first(j)) {
            const char *name = s == 0 ? "stdout" : "stderr";
            send_error(ci, id, EC_INVALID_ARGUMENT,
                       "%s offset %llu of command %llu is no longer kept: the journal keeps the "
                       "last %u bytes of each stream and now holds %s bytes %llu to %llu; attach "
                       "from offset %llu or later",
                       name, (unsigned long long)want[s], (unsigned long long)c->id,
                       (unsigned)AGENT_JOURNAL_BYTES, name, (unsigned long long)journal_first(j),
                       (unsigned long long)j->total, (unsigned long long)journal_first(j));
            return;
        }
    }
    event_begin(id, sbx_v1_AgentEvent_started_tag);
    ev.body.started.command_id = c->id;
    ev.body.started.pid = c->pid;
    send_event(ci);
    for (int s = 0; s < 2 && clients[ci].fd >= 0; s++)
        replay(c, s, want[s], ci, id);
    if (clients[ci].fd < 0)
        return;
    if (c->running)
        sub_add(c, ci, id); /* live output and the exit from here on */
    else
        send_exit_to(c, ci, id);
}

/* ---- files ---------------------------------------------------------------------------- */

/* File operations run with the program's fsuid/fsgid: the file API can touch exactly what a
 * program could, and what it creates belongs to the program. */
static void as_program(uint32_t uid, uint32_t gid)
{
    uid_t u = uid ? (uid_t)uid : cfg.prog_uid;
    gid_t g = gid ? (gid_t)gid : cfg.prog_gid;
    if (u == agent_uid && !cfg.shared_uid)
        u = cfg.prog_uid;
    setfsgid(g);
    setfsuid(u);
}

static void as_agent(void)
{
    setfsuid(agent_uid);
    setfsgid(getgid());
}

static void write_fail(int ci, uint64_t id, int err, const char *path)
{
    client *cl = &clients[ci];
    if (cl->wfd >= 0)
        close(cl->wfd);
    cl->wfd = -1;
    cl->wfailed_req = id;
    const char *why = files_last_error();
    send_error(ci, id, errno_code(err), "cannot write %s: %s%s%s", path, strerror(err),
               *why ? "; " : "", why);
}

static void handle_file_write(int ci, uint64_t id, sbx_v1_AgentFileWrite *x)
{
    client *cl = &clients[ci];
    if (cl->wfailed_req == id)
        return; /* the rest of a write that already failed (the host sends without waiting) */
    if (x->offset == 0 || x->append) {
        if (cl->wfd >= 0)
            close(cl->wfd);
        mode_t mode = x->mode ? (mode_t)(x->mode & 07777) : 0644;
        /* append: continue an existing file (a chunked upload), never create or truncate it */
        int flags = x->append ? O_WRONLY | O_NONBLOCK : O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK;
        as_program(x->uid, x->gid);
        int fd = files_open(x->path, flags, mode & 0777, x->mkdirs);
        as_agent();
        if (fd < 0) {
            cl->wfd = -1;
            write_fail(ci, id, -fd, x->path);
            return;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            cl->wfd = -1;
            write_fail(ci, id, EINVAL, x->path);
            return;
        }
        if (x->append && (uint64_t)st.st_size != x->offset) {
            close(fd);
            cl->wfd = -1;
            cl->wfailed_req = id;
            send_error(ci, id, EC_INVALID_ARGUMENT,
                       "cannot append to %s at offset %llu: the file is %llu bytes long", x->path,
                       (unsigned long long)x->offset, (unsigned long long)st.st_size);
            return;
        }
        cl->wfd = fd;
        cl->wreq = id;
        cl->woffset = x->append ? x->offset : 0;
        snprintf(cl->wpath, sizeof cl->wpath, "%s", x->path);
    } else if (cl->wfd < 0 || cl->wreq != id || x->offset != cl->woffset) {
        send_error(ci, id, EC_INVALID_ARGUMENT,
                   "file chunk at offset %llu does not continue a write in progress",
                   (unsigned long long)x->offset);
        cl->wfailed_req = id;
        return;
    }
    size_t done = 0;
    while (done < x->data.size) {
        ssize_t w =
            pwrite(cl->wfd, x->data.bytes + done, x->data.size - done, (off_t)(cl->woffset + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            write_fail(ci, id, errno, cl->wpath);
            return;
        }
        done += (size_t)w;
    }
    cl->woffset += done;
    if (x->last) {
        struct stat st;
        uint64_t size = fstat(cl->wfd, &st) == 0 ? (uint64_t)st.st_size : cl->woffset;
        close(cl->wfd);
        cl->wfd = -1;
        event_begin(id, sbx_v1_AgentEvent_written_tag);
        snprintf(ev.body.written.path, sizeof ev.body.written.path, "%s", cl->wpath);
        ev.body.written.size = size;
        send_event(ci);
    }
}

static void handle_file_read(int ci, uint64_t id, sbx_v1_AgentFileRead *x)
{
    as_program(0, 0);
    int fd = files_open(x->path, O_RDONLY | O_NONBLOCK, 0, false);
    as_agent();
    if (fd < 0) {
        const char *why = files_last_error();
        send_error(ci, id, errno_code(-fd), "cannot read %s: %s%s%s", x->path, strerror(-fd),
                   *why ? "; " : "", why);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        send_error(ci, id, EC_INVALID_ARGUMENT, "cannot read %s: not a regular file", x->path);
        return;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t off = x->offset < size ? x->offset : size;
    uint64_t end = size;
    if (x->max_bytes && off + x->max_bytes < end)
        end = off + x->max_bytes;
    for (;;) {
        size_t want = end - off > AGENT_CHUNK ? AGENT_CHUNK : (size_t)(end - off);
        ssize_t r = want ? pread(fd, ev.body.file_data.data.bytes, want, (off_t)off) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            send_error(ci, id, errno_code(e), "cannot read %s: %s", x->path, strerror(e));
            return;
        }
        /* event_begin must not clobber the data just read into ev */
        ev.id = id;
        ev.which_body = sbx_v1_AgentEvent_file_data_tag;
        snprintf(ev.body.file_data.path, sizeof ev.body.file_data.path, "%s", x->path);
        ev.body.file_data.offset = off;
        ev.body.file_data.data.size = (pb_size_t)r;
        ev.body.file_data.size = size;
        ev.body.file_data.mode = (uint32_t)(st.st_mode & 07777);
        off += (uint64_t)r;
        ev.body.file_data.eof = (r == 0 || off >= end);
        send_event(ci);
        if (ev.body.file_data.eof || clients[ci].fd < 0)
            break;
    }
    close(fd);
}

static void handle_file_list(int ci, uint64_t id, sbx_v1_AgentFileList *x)
{
    as_program(0, 0);
    int fd = files_open(x->path, O_RDONLY | O_DIRECTORY, 0, false);
    as_agent();
    if (fd < 0) {
        const char *why = files_last_error();
        send_error(ci, id, errno_code(-fd), "cannot list %s: %s%s%s", x->path, strerror(-fd),
                   *why ? "; " : "", why);
        return;
    }
    for (;;) {
        long n = syscall(SYS_getdents64, fd, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n && clients[ci].fd >= 0;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(dents + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
                continue;
            struct stat st;
            if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            event_begin(id, sbx_v1_AgentEvent_entry_tag);
            sbx_v1_AgentFileEntry *e = &ev.body.entry;
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", d->d_name);
            e->kind = S_ISREG(st.st_mode)   ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_REGULAR
                      : S_ISDIR(st.st_mode) ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_DIRECTORY
                      : S_ISLNK(st.st_mode) ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_SYMLINK
                                            : sbx_v1_AgentFileKind_AGENT_FILE_KIND_OTHER;
            e->mode = (uint32_t)(st.st_mode & 07777);
            e->size = (uint64_t)st.st_size;
            e->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
            send_event(ci);
        }
    }
    close(fd);
    event_begin(id, sbx_v1_AgentEvent_entry_tag);
    memset(&ev.body.entry, 0, sizeof ev.body.entry);
    ev.body.entry.last = true;
    send_event(ci);
}

/* ---- connections ---------------------------------------------------------------------- */

static void drop_client(int ci)
{
    client *cl = &clients[ci];
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
    if (cl->wfd >= 0)
        close(cl->wfd);
    cl->wfd = -1;
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        if (commands[i].used)
            sub_del(&commands[i], ci); /* keeps running; reattach by id */
    last_activity_ms = now_ms();
}

static int free_client_slot(void)
{
    for (int i = 0; i < AGENT_MAX_CLIENTS; i++)
        if (clients[i].fd < 0)
            return i;
    return -1;
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
    clients[ci].fd = fd;
    clients[ci].wfd = -1;
    clients[ci].wfailed_req = 0;
    clients[ci].authed = true;
    last_activity_ms = now_ms();
}

static int unauth_count(void)
{
    int n = 0;
    for (int i = 0; i < AGENT_MAX_CLIENTS; i++)
        n += clients[i].fd >= 0 && !clients[i].authed;
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
        for (int i = 0; i < AGENT_MAX_CLIENTS; i++)
            if (clients[i].fd >= 0 && !clients[i].authed &&
                (oldest < 0 || clients[i].accept_seq < clients[oldest].accept_seq))
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
    clients[ci].fd = fd;
    clients[ci].wfd = -1;
    clients[ci].wfailed_req = 0;
    clients[ci].authed = false;
    clients[ci].auth_len = 0;
    clients[ci].since_ms = now_ms();
    static uint64_t accepted;
    clients[ci].accept_seq = ++accepted;
}

/* Collects the credential of a TCP client without blocking (the peer is untrusted until then).
 * A wrong or incomplete one closes the connection. Once it matches, the socket becomes a
 * blocking one with the I/O timeouts of every client. */
static void read_auth(int ci)
{
    client *cl = &clients[ci];
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
        diff |= (unsigned)(cl->auth[SBX_AGENT_AUTH_MAGIC_LEN + i] ^ cfg.token[i]);
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
    last_activity_ms = now_ms();
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

static void handle_client(int ci)
{
    client *cl = &clients[ci];
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
    last_activity_ms = now_ms();
    arena_used = 0;
    argv_n = env_n = 0;
    memset(&req, 0, offsetof(sbx_v1_AgentRequest, body));
    pb_istream_t is = pb_istream_from_buffer(rx, n);
    if (!pb_decode(&is, sbx_v1_AgentRequest_fields, &req)) {
        send_error(ci, req.id, EC_INVALID_ARGUMENT, "malformed request: %s", PB_GET_ERROR(&is));
        return;
    }
    switch (req.which_body) {
    case sbx_v1_AgentRequest_exec_tag: handle_exec(ci, req.id, &req.body.exec); break;
    case sbx_v1_AgentRequest_code_tag: handle_code(ci, req.id, &req.body.code); break;
    case sbx_v1_AgentRequest_stdin_tag: handle_stdin(ci, req.id, &req.body.stdin); break;
    case sbx_v1_AgentRequest_file_write_tag:
        handle_file_write(ci, req.id, &req.body.file_write);
        break;
    case sbx_v1_AgentRequest_file_read_tag:
        handle_file_read(ci, req.id, &req.body.file_read);
        break;
    case sbx_v1_AgentRequest_file_list_tag:
        handle_file_list(ci, req.id, &req.body.file_list);
        break;
    case sbx_v1_AgentRequest_signal_tag: handle_signal(ci, req.id, &req.body.signal); break;
    case sbx_v1_AgentRequest_attach_tag: handle_attach(ci, req.id, &req.body.attach); break;
    case sbx_v1_AgentRequest_ping_tag:
        event_begin(req.id, sbx_v1_AgentEvent_pong_tag);
        memset(&ev.body.pong, 0, sizeof ev.body.pong);
        ev.body.pong.nonce = req.body.ping.nonce;
        snprintf(ev.body.pong.version, sizeof ev.body.pong.version, "%s", AGENT_VERSION);
        ev.body.pong.uptime_ms = (uint64_t)(now_ms() - start_ms);
        ev.body.pong.running = (uint32_t)running_count();
        ev.body.pong.uid = (uint32_t)agent_uid;
        ev.body.pong.shared_uid = cfg.shared_uid;
        send_event(ci);
        break;
    default: send_error(ci, req.id, EC_INVALID_ARGUMENT, "request carries no known operation");
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
        if (pid == next_spare.pid) {
            spare_drop(false);
            continue;
        }
        if (pid == py.pid) {
            int busy = py.busy;
            py.pid = 0;
            py.died_before = true;
            if (busy >= 0) {
                command *c = &commands[busy];
                c->wait_status = st;
                c->ru = ru;
                c->exited = true;
                py.busy = -1;
                finish(c, 0, false, NULL);
            }
            kernel_reset();
            continue;
        }
        for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
            command *c = &commands[i];
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
            if (commands[i].used && commands[i].running && commands[i].pid > 0)
                kill(-commands[i].pid, (int)si.ssi_signo);
        if (py.pid > 0)
            kill(-py.pid, (int)si.ssi_signo);
        if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP ||
            si.ssi_signo == SIGQUIT)
            shutdown_at_ms = now_ms() + AGENT_TERM_GRACE_MS;
    }
}

static int listen_on(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    strcpy(sa.sun_path, path);
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

/* Long because it is the agent's setup in the order its safety needs (not dumpable, the seccomp
 * filter before any program, listeners, the spare) followed by the one poll loop, whose descriptor
 * table every step fills. */
int agent_serve(const agent_config *config)
{
    cfg = *config;
    agent_uid = getuid();
    start_ms = last_activity_ms = now_ms();
    for (int i = 0; i < AGENT_MAX_CLIENTS; i++) {
        clients[i].fd = -1;
        clients[i].wfd = -1;
    }
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        commands[i].cg_fd = -1;
    /* Nobody in the sandbox may read our memory through /proc (same-uid in rootless boxes). */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
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
    seccomp_ready = confine_seccomp_prepare() == 0;
    cgroup_probe();
    if (cfg.cgroup_fd >= 0) {
        job = mmap(NULL, sizeof *job, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (job == MAP_FAILED)
            job = NULL; /* no spares: every exec joins its cgroup on its own */
    }
    if (probe_procs >= 0 && (!job || !seccomp_ready)) { /* no spare will take the probe's */
        close(probe_procs);
        probe_procs = -1;
        close(next_spare.cg_fd);
        next_spare.cg_fd = -1;
        unlinkat(cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
    }
    /* the idle TTL counts from here, not from before the setup above (slow under valgrind) */
    start_ms = last_activity_ms = now_ms();
    if (files_init(cfg.workdir) < 0) {
        fprintf(stderr, "sbx-agent: cannot open the root directory: %s\n", strerror(errno));
        return 1;
    }
    listen_fd = listen_on(cfg.socket_path);
    if (listen_fd < 0) {
        fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", cfg.socket_path,
                strerror(-listen_fd));
        return 1;
    }
    seal_socket_dir(cfg.socket_path);
    if (cfg.tcp_listen != NULL) {
        tcp_fd = listen_tcp(cfg.tcp_listen);
        if (tcp_fd < 0) {
            fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", cfg.tcp_listen,
                    strerror(-tcp_fd));
            return 1;
        }
    }
    if (cfg.ready_fd >= 0) {
        ssize_t w = write(cfg.ready_fd, "OK\n", 3);
        (void)w;
        close(cfg.ready_fd);
    }
    /* The first command's spare, forked once the host can connect: its cgroup join (the RCU
     * wait above) overlaps the host's connect and request instead of delaying that command. */
    spare_make();
    static struct pollfd pfd[3 + AGENT_MAX_CLIENTS + AGENT_MAX_COMMANDS * 2 + 4];
    static int kind[sizeof pfd / sizeof pfd[0]], index_of[sizeof pfd / sizeof pfd[0]];
    enum { K_LISTEN, K_SIG, K_CLIENT, K_OUT0, K_OUT1, K_KREP, K_KOUT0, K_KOUT1, K_TCP };
    for (;;) {
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
        int clients_open = 0;
        int64_t now = now_ms(), wake = -1;
        for (int i = 0; i < AGENT_MAX_CLIENTS; i++) {
            if (clients[i].fd >= 0 && !clients[i].authed) {
                /* an unauthenticated TCP peer keeps its slot only so long */
                int64_t end = clients[i].since_ms + AGENT_IO_TIMEOUT_MS;
                if (now >= end) {
                    drop_client(i);
                    continue;
                }
                if (wake < 0 || end < wake)
                    wake = end;
            }
            if (clients[i].fd >= 0) {
                pfd[n] = (struct pollfd){clients[i].fd, POLLIN, 0};
                kind[n] = K_CLIENT;
                index_of[n++] = i;
                clients_open += clients[i].authed;
            }
        }
        for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
            command *c = &commands[i];
            if (!c->used || !c->running)
                continue;
            if (c->deadline_ms && !c->timed_out) {
                if (now >= c->deadline_ms) {
                    c->timed_out = true;
                    kill_tree(c);
                } else if (wake < 0 || c->deadline_ms < wake) {
                    wake = c->deadline_ms;
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
        if (py.pid > 0) {
            if (py.rep_fd >= 0) {
                pfd[n] = (struct pollfd){py.rep_fd, POLLIN, 0};
                kind[n++] = K_KREP;
            }
            for (int s = 0; s < 2; s++)
                if (py.out_fd[s] >= 0) {
                    pfd[n] = (struct pollfd){py.out_fd[s], POLLIN, 0};
                    kind[n++] = s == 0 ? K_KOUT0 : K_KOUT1;
                }
        }
        int running = running_count();
        if (shutdown_at_ms) {
            if (running == 0 || now >= shutdown_at_ms)
                return 0;
            if (wake < 0 || shutdown_at_ms < wake)
                wake = shutdown_at_ms;
        }
        if (cfg.idle_ttl_s > 0 && clients_open == 0 && running == 0) {
            int64_t idle_end = last_activity_ms + cfg.idle_ttl_s * 1000;
            if (now >= idle_end)
                return 0; /* PID 1 exits: the kernel tears the sandbox down */
            if (wake < 0 || idle_end < wake)
                wake = idle_end;
        }
        int timeout = wake < 0 ? -1 : (int)(wake - now > INT_MAX ? INT_MAX : wake - now);
        int r = poll(pfd, (nfds_t)n, timeout);
        if (r < 0 && errno != EINTR)
            return 1;
        for (int i = 0; r > 0 && i < n; i++) {
            if (!pfd[i].revents)
                continue;
            switch (kind[i]) {
            case K_LISTEN: accept_client(); break;
            case K_TCP: accept_tcp(); break;
            case K_SIG: handle_signals(); break;
            case K_CLIENT:
                if (clients[index_of[i]].fd == pfd[i].fd)
                    handle_client(index_of[i]);
                break;
            case K_OUT0:
            case K_OUT1:
                if (commands[index_of[i]].out_fd[kind[i] - K_OUT0] == pfd[i].fd)
                    pump(&commands[index_of[i]], kind[i] - K_OUT0);
                break;
            case K_KREP:
                if (py.rep_fd == pfd[i].fd)
                    kernel_reply();
                break;
            case K_KOUT0:
            case K_KOUT1: {
                int s = kind[i] - K_KOUT0;
                if (py.out_fd[s] != pfd[i].fd)
                    break;
                if (py.busy >= 0) {
                    pump(&commands[py.busy], s);
                } else {
                    /* output between calls (a background thread): keep the pipe drained */
                    ssize_t got = read(py.out_fd[s], chunk, sizeof chunk);
                    if (got == 0) {
                        close(py.out_fd[s]);
                        py.out_fd[s] = -1;
                    }
                }
                break;
            }
            }
        }
        reap();
    }
}
