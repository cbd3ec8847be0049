/* commands.c - the agent's command table: each program it started (or each call into the python
 * kernel), its bounded output journals, the clients that follow it, and its end. Builds a
 * program's argv and environment from a request, starts it (spawn.c, or the waiting spare),
 * and serves the requests about a command: exec, stdin, signal and attach.
 *
 * Output is journalled per stream (the last AGENT_JOURNAL_BYTES) so a client that went away can
 * attach again from an offset; a command runs on when its clients leave. Killing a command's
 * whole tree is sweep.c's; confining the program is confine.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serve_impl.h"

command agent_commands[AGENT_MAX_COMMANDS];
static uint64_t next_command_id = 1, finished_counter;
uint8_t agent_chunk[AGENT_CHUNK];

/* env of one request as NAME=VALUE strings: bounded by the frame size. */
static char arena[AGENT_ARENA_BYTES];
static size_t arena_used;
char *agent_argv_tab[AGENT_MAX_ARGV + 4];
size_t agent_argv_n;
char *agent_env_tab[AGENT_MAX_ENV + 8];
size_t agent_env_n;
static char exec_path[PATH_MAX];

/* ---- request argv/env into NULL-terminated tables ------------------------------------- */

/* A new request: its argv and env tables, and the arena their strings live in, start empty. */
void request_reset(void)
{
    arena_used = 0;
    agent_argv_n = agent_env_n = 0;
}

void commands_drop_scratch(void)
{
    arena_used = 0;
    agent_drop_pages(arena, sizeof arena);
    agent_drop_pages(agent_chunk, sizeof agent_chunk);
}

static char *arena_alloc(size_t n)
{
    if (n > sizeof arena - arena_used)
        return NULL;
    char *p = arena + arena_used;
    arena_used += n;
    return p;
}

/* Collects env entries (NAME=VALUE in the arena); false on a malformed name. */
bool collect_env(const sbx_v1_AgentEnv *env, pb_size_t n)
{
    for (pb_size_t i = 0; i < n; i++) {
        size_t nl = strlen(env[i].name), vl = strlen(env[i].value);
        if (nl == 0 || strchr(env[i].name, '=') || agent_env_n >= AGENT_MAX_ENV)
            return false;
        char *dst = arena_alloc(nl + vl + 2);
        if (!dst)
            return false;
        memcpy(dst, env[i].name, nl);
        dst[nl] = '=';
        memcpy(dst + nl + 1, env[i].value, vl + 1);
        agent_env_tab[agent_env_n++] = dst;
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

void sub_del(command *c, int ci)
{
    /* Written only when it changes: a client that leaves is taken out of every used slot, and
     * after a spare's fork each slot's page written is a copy-on-write fault. */
    if (c->subs & (1ull << ci))
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
        agent_ev.id = c->sub_req[ci];
        send_event(ci);
    }
}

static void output_event(command *c, int stream, uint64_t offset, const uint8_t *p, size_t n)
{
    event_begin(0, sbx_v1_AgentEvent_output_tag);
    agent_ev.body.output.command_id = c->id;
    agent_ev.body.output.stream = stream == 0 ? sbx_v1_AgentStream_AGENT_STREAM_STDOUT
                                              : sbx_v1_AgentStream_AGENT_STREAM_STDERR;
    agent_ev.body.output.offset = offset;
    agent_ev.body.output.data.size = (pb_size_t)n;
    memcpy(agent_ev.body.output.data.bytes, p, n);
}

static void send_output(command *c, int stream, uint64_t offset, const uint8_t *p, size_t n)
{
    if (!c->subs)
        return;
    output_event(c, stream, offset, p, n);
    send_to_subs(c);
}

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
bool pump(command *c, int stream)
{
    int fd = c->out_fd[stream];
    if (fd < 0)
        return false;
    ssize_t r = read(fd, agent_chunk, sizeof agent_chunk);
    if (r > 0) {
        take_output(c, stream, agent_chunk, (size_t)r);
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
            ssize_t r = read(c->out_fd[s], agent_chunk, sizeof agent_chunk);
            if (r > 0) {
                take_output(c, s, agent_chunk, (size_t)r);
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

int running_count(void)
{
    int n = 0;
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        n += agent_commands[i].used && agent_commands[i].running;
    return n;
}

/* ---- commands ------------------------------------------------------------------------ */

static command *find_command(uint64_t id)
{
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++)
        if (agent_commands[i].used && agent_commands[i].id == id)
            return &agent_commands[i];
    return NULL;
}

/* A free slot, else the slot of the command that finished longest ago; NULL when every slot
 * holds a running command. */
command *alloc_command(void)
{
    command *best = NULL;
    for (int i = 0; i < AGENT_MAX_COMMANDS; i++) {
        command *c = &agent_commands[i];
        if (!c->used)
            return c;
        if (!c->running && (!best || c->finished_seq < best->finished_seq))
            best = c;
    }
    return best;
}

void command_init(command *c, int ci, uint64_t req_id, uint64_t timeout_ms, uint64_t limit)
{
    /* the slot's previous command: its cgroup goes now, or stays to the provider's cleanup
     * while a process it left in the background runs */
    if (c->used) { /* a slot never used holds nothing (and a zero cg_fd) */
        cgroup_release(c);
        if (c->cg_fd >= 0)
            close(c->cg_fd);
    }
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
    memcpy(&agent_ev.body.exit, &c->exit, offsetof(sbx_v1_AgentExit, value));
    memcpy(agent_ev.body.exit.value, c->exit.value,
           strnlen(c->exit.value, sizeof c->exit.value - 1) + 1);
    agent_ev.body.exit.kernel_restarted = c->exit.kernel_restarted;
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

/* Ends c: fills its AgentExit from the wait status and flags, and reports it. */
void finish(command *c, int exit_code_override, bool have_override, const char *value)
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
    c->by_shutdown =
        agent_shutdown_at_ms != 0 && x->outcome != sbx_v1_AgentOutcome_AGENT_OUTCOME_OK;
    c->running = false;
    c->finished_seq = ++finished_counter;
    agent_last_activity_ms = now_ms();
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
void build_env(char **tab, size_t *n)
{
    static char home[AGENT_MAX_PATH + 8];
    snprintf(home, sizeof home, "HOME=%s", agent_cfg.workdir);
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
const char *resolve_exec(const char *argv0, char **env, size_t n)
{
    if (strchr(argv0, '/'))
        return argv0;
    const char *path = env_get(env, n, "PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        size_t name_len = strlen(argv0);
        if (len && len + name_len + 2 < sizeof exec_path) {
            memcpy(exec_path, path, len);
            exec_path[len] = '/';
            memcpy(exec_path + len + 1, argv0, name_len + 1);
            if (access(exec_path, X_OK) == 0)
                return exec_path;
        }
        if (!colon)
            break;
        path = colon + 1;
    }
    return argv0;
}

/* Which uid a request gets; false (with a reason) when it would be the agent's own. */
bool pick_uid(uint32_t uid, uint32_t gid, uid_t *u, gid_t *g, bool *keep)
{
    *u = uid ? (uid_t)uid : agent_cfg.prog_uid;
    *g = gid ? (gid_t)gid : agent_cfg.prog_gid;
    *keep = false;
    if (*u == agent_uid) {
        if (!agent_cfg.shared_uid)
            return false;
        *keep = true;
    }
    return true;
}

/* Tells the starting client ci the command's id; a detached start stops following it there
 * (AgentAttach follows it later, from any connection). */
void send_started(command *c, int ci, uint64_t req_id, bool detach)
{
    event_begin(req_id, sbx_v1_AgentEvent_started_tag);
    agent_ev.body.started.command_id = c->id;
    agent_ev.body.started.pid = c->pid;
    send_event(ci);
    if (detach)
        sub_del(c, ci);
}

/* After a command started: the next command's spare, which joins its cgroup while this one
 * runs. Before the first of them, the agent's own filter (confine_seccomp_agent), which every
 * later fork inherits, each of their programs then adding 4 instructions to it instead of the
 * whole policy: nothing privileged is left to do by then (the mounts and the socket's seal are
 * in serve_setup), and it is loaded while this command runs rather than before the first
 * request is served. The first command's process was forked before it and loaded the whole
 * policy itself. A one-shot agent forks nothing more: the load would cost without saving. */
static void next_spare(void)
{
    static bool agent_filter_tried;
    if (agent_cfg.one_shot)
        return;
    if (!agent_filter_tried) {
        agent_filter_tried = true;
        confine_seccomp_agent();
    }
    spare_make();
}

void start_program(int ci, uint64_t req_id, char **argv, const char *cwd, uint32_t uid,
                   uint32_t gid, uint64_t timeout_ms, uint64_t limit, bool with_stdin, bool detach)
{
    uid_t u;
    gid_t g;
    bool keep;
    if (!agent_seccomp_ready) {
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
                   "%d agent_commands are already running in this sandbox; wait for one to end",
                   AGENT_MAX_COMMANDS);
        return;
    }
    command_init(c, ci, req_id, timeout_ms, limit);
    build_env(agent_env_tab, &agent_env_n);
    const char *dir = cwd && *cwd ? cwd : agent_cfg.workdir;
    if (spare_take(c, argv, agent_env_tab, agent_env_n, dir, u, g, keep, with_stdin)) {
        send_started(c, ci, req_id, detach);
        next_spare();
        return;
    }
    int cg_procs = cgroup_make(c);
    pid_t pid = spawn(argv, agent_env_tab, agent_env_n, cwd && *cwd ? cwd : agent_cfg.workdir, u, g,
                      keep, with_stdin, c->out_fd, &c->in_fd, -1, -1, cg_procs, c->cg_fd);
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
    next_spare();
}

void handle_exec(int ci, uint64_t id, sbx_v1_AgentExec *x)
{
    static char sh[] = "/bin/sh", dash_c[] = "-c";
    for (pb_size_t i = 0; i < x->argv_count && agent_argv_n < AGENT_MAX_ARGV; i++)
        agent_argv_tab[agent_argv_n++] = x->argv[i];
    if (!collect_env(x->env, x->env_count)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "an environment name is empty or contains '='");
        return;
    }
    if (agent_argv_n == 0) {
        if (x->shell[0] == '\0') {
            send_error(ci, id, EC_INVALID_ARGUMENT, "exec needs argv or a shell line");
            return;
        }
        agent_argv_tab[0] = sh;
        agent_argv_tab[1] = dash_c;
        agent_argv_tab[2] = x->shell;
        agent_argv_n = 3;
    }
    agent_argv_tab[agent_argv_n] = NULL;
    start_program(ci, id, agent_argv_tab, x->cwd, x->uid, x->gid, x->timeout_ms,
                  x->output_limit_bytes, x->stdin_follows, x->detach);
}

/* Writes all of p to a pipe the program reads, while keeping c's output pipes drained so a
 * program that writes before it reads cannot deadlock us. Gives up at c's deadline. */
bool write_to_program(command *c, int fd, const uint8_t *p, size_t n)
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

/* ---- stdin, signal, attach ------------------------------------------------------------ */

void handle_stdin(int ci, uint64_t id, sbx_v1_AgentStdin *x)
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

void handle_signal(int ci, uint64_t id, sbx_v1_AgentSignal *x)
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
        signal_group(c->pid, x->signo);
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
        agent_ev.id = id;
        send_event(ci);
        if (agent_clients[ci].fd < 0)
            return; /* the write failed and dropped the client */
        from += n;
    }
}

void handle_attach(int ci, uint64_t id, sbx_v1_AgentAttach *x)
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
    agent_ev.body.started.command_id = c->id;
    agent_ev.body.started.pid = c->pid;
    send_event(ci);
    for (int s = 0; s < 2 && agent_clients[ci].fd >= 0; s++)
        replay(c, s, want[s], ci, id);
    if (agent_clients[ci].fd < 0)
        return;
    if (c->running)
        sub_add(c, ci, id); /* live output and the exit from here on */
    else
        send_exit_to(c, ci, id);
}
