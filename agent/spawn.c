/* spawn.c - starting a confined program: the clone of a child that joins its command's cgroup,
 * takes its pipes, is confined (confine.c) and execs; and the spare, the next command's first
 * process forked ahead of time so that joining a cgroup stays off an exec's critical path.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "serve_impl.h"

/* ---- spawning ------------------------------------------------------------------------ */

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

typedef struct spawn_args {
    char **argv, **env;
    const char *cwd, *path;
    uid_t u;
    gid_t g;
    bool keep;
    int in, out, err, extra3, extra4;
    int hold;      /* an fd (close-on-exec) left open until execve, or -1 */
    int cg_procs;  /* the command's cgroup.procs to join first, or -1 */
    bool prepared; /* confine_prepare and the filter ran (a spare): confine_identity_filtered */
} spawn_args;

/* The child's own stack (it shares our memory until execve). 64 KiB: confinement and libc's
 * error paths need a few KiB. */
static char spawn_stack[64 * 1024] __attribute__((aligned(16)));

/* Closes fds from..to (to ~0u: every fd from `from` up). */
static void close_from_to(unsigned from, unsigned to)
{
    if (from > to)
        return;
    if (syscall(SYS_close_range, from, to, 0) < 0)
        for (unsigned fd = from; fd <= to && fd < 1024; fd++)
            close((int)fd);
}

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
    if (a->hold >= first) { /* a spare's go socket: execve closes it (spare_take) */
        close_from_to(first, a->hold - 1);
        first = a->hold + 1;
    }
    close_from_to(first, ~0u);
    if (a->prepared)
        confine_identity_filtered(a->u, a->g, a->keep);
    else
        confine_program(a->u, a->g, a->keep, agent_cfg.rlimit_nofile);
    if (a->cwd && *a->cwd && chdir(a->cwd) < 0)
        child_fail("cannot enter working directory", a->cwd);
    execve(a->path, a->argv, a->env);
    child_fail("cannot execute", a->argv[0]);
    return 127;
}

/* Forks a confined program. fds: extra fds to place at 3 and 4 (or -1). Returns pid or -errno
 * and fills the pipes. */
pid_t spawn(char **argv, char **env, size_t env_count, const char *cwd, uid_t u, gid_t g, bool keep,
            bool with_stdin, int *out_r, int *in_w, int extra3, int extra4, int cg_procs,
            int cg_dir)
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
    spawn_args sa = {argv,  env,   cwd,    path,   u,  g,        keep, with_stdin ? pi[0] : -1,
                     po[1], pe[1], extra3, extra4, -1, cg_procs, false};
    /* A plain fork (no CLONE_VM|CLONE_VFORK): with vfork the agent sleeps until the child
     * execs, so a program that SIGSTOPs every process of its uid (kill(-1, SIGSTOP)) catches
     * the child between setresuid and execve and wedges PID 1 forever. The page-table copy of
     * this small static agent costs a fraction of a millisecond; the child's copy of
     * spawn_stack is its own. */
    pid_t pid = fork_into_cgroup(cg_dir); /* v2: born in the command's cgroup */
    if (pid == 0) {
        sa.cg_procs = -1;
        spawn_child(&sa);
        _exit(127);
    }
    if (pid < 0)
        pid = clone(spawn_child, spawn_stack + sizeof spawn_stack, SIGCHLD, &sa);
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

/* Joining a cgroup by writing to cgroup.procs waits for an RCU grace period whenever no other
 * migration happened just before (measured: 5-19 ms, against 8 us back to back); a spare is
 * born in its v2 cgroup (fork_into_cgroup) or writes "0" to v1's tasks, neither of which
 * waits, but loading the seccomp filter costs 0.3-0.4 ms. So after each command starts, the
 * agent forks the next one's first process ahead of time: it joins a fresh cgroup and loads
 * the filter while nothing waits for it, then
 * blocks until an exec hands it what to run through a shared mapping and one byte on a socket
 * (the mapping is written again only once that spare has execed: job_reader).
 * Its stdout/stderr/stdin pipes are made before the fork, so no descriptor has to be passed.
 * It runs as the agent (root of the sandbox, non-dumpable) until then, like any child between
 * fork and confinement, but with confine_prepare's part done and the seccomp filter loaded: its
 * rlimits set, its bounding set empty, its syscalls filtered, so the go byte leaves only
 * confine_identity_filtered's few syscalls on the exec's path. Without a
 * delegated cgroup there is no spare. The first is forked as soon as the agent listens; a one-shot
 * agent (agent_cfg.one_shot) forks no other. */
typedef struct spare_job {
    char *argv[AGENT_MAX_ARGV + 4];
    char *env[AGENT_MAX_ENV + 8];
    char path[PATH_MAX];
    char cwd[AGENT_MAX_PATH];
    uid_t u;
    gid_t g;
    bool keep, with_stdin;
    char strings[AGENT_MAX_FRAME + AGENT_ARENA_BYTES]; /* every string argv and env point at */
} spare_job;

typedef struct spare {
    pid_t pid;    /* 0: none */
    int go_fd;    /* its end of a socket pair: one byte starts it, EOF says it let go of the job */
    int out_r[2]; /* read ends of its stdout and stderr pipes */
    int in_w;     /* write end of its stdin pipe */
    int cg_fd;    /* its cgroup */
    char cg_name[32];
} spare;

static spare_job *job; /* MAP_SHARED: the spare sees what the agent writes after the fork */
static spare next_spare = {0, -1, {-1, -1}, -1, -1, ""};

/* The go socket of the spare last handed the job, until it lets go of it: every spare shares
 * the one job mapping, and a spare reads its argv and env from it until execve has copied them
 * (on a loaded host, long after the agent has answered and taken the next request). Its end of
 * the pair is close-on-exec and kept open until execve (spawn_args.hold), so EOF here means the
 * job may be rewritten. -1: nobody reads it. */
static int job_reader = -1;

/* Whether the job mapping may be written: nobody reads it, or its reader execed or died. */
static bool job_free(void)
{
    if (job_reader < 0)
        return true;
    char b;
    ssize_t r = recv(job_reader, &b, 1, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return false; /* still reading it */
    close(job_reader);
    job_reader = -1;
    return true;
}

/* The cgroup.procs of the cgroup cgroup_probe made, kept for the first spare (spare_make):
 * one cgroup made and removed fewer per sandbox. -1 once used or dropped. */
static int probe_procs = -1;

/* At start: a delegation that does not work (a host that chowned nothing) is dropped here, not
 * in each command. The cgroup it makes to find out is the first spare's. */
static void cgroup_probe(void)
{
    if (agent_cfg.cgroup_fd < 0)
        return;
    int procs = cgroup_create(next_spare.cg_name, &next_spare.cg_fd);
    bool ok = procs >= 0 && next_spare.cg_fd >= 0;
    if (ok)
        probe_procs = procs;
    if (!ok) {
        fprintf(stderr,
                "sbx-agent: the delegated cgroup is not writable (%s): agent_commands are "
                "tracked by session only\n",
                strerror(errno));
        close(agent_cfg.cgroup_fd);
        agent_cfg.cgroup_fd = -1;
    }
}

void spare_drop(bool kill_it)
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
            unlinkat(agent_cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
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
void spare_make(void)
{
    if (next_spare.pid > 0 || !job || agent_cfg.cgroup_fd < 0 || !agent_seccomp_ready)
        return;
    int procs = probe_procs; /* the probe's cgroup, unused yet, or a new one */
    probe_procs = -1;
    if (procs < 0)
        procs = cgroup_create(next_spare.cg_name, &next_spare.cg_fd);
    if (procs < 0)
        return;
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pi[2] = {-1, -1}, go[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 || pipe2(pi, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0) {
        int all[] = {po[0], po[1], pe[0], pe[1], pi[0], pi[1], go[0], go[1], procs};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] >= 0)
                close(all[i]);
        close(next_spare.cg_fd);
        next_spare.cg_fd = -1;
        unlinkat(agent_cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
        return;
    }
    /* v2: born in its cgroup (fork_into_cgroup); else forked, and it joins by a write */
    pid_t pid = fork_into_cgroup(next_spare.cg_fd);
    bool born_in = pid == 0;
    if (pid < 0)
        pid = fork();
    if (pid == 0) {
        /* Nothing of the agent's may stay open in here while we wait: a copy of a client
         * socket or of a program's stdin pipe would keep it from ever reaching EOF. */
        int keep[] = {procs, go[0], po[1], pe[1], pi[0]};
        close_all_but(keep, sizeof keep / sizeof keep[0]);
        if (!born_in && write(procs, "0", 1) != 1)
            _exit(126);
        /* The agent's per-request buffers are nothing to a spare (its job comes through the
         * shared mapping): dropping its copies frees the pages they pinned and spares the
         * agent a page copy on its next write to each. */
        agent_drop_scratch();
        /* What does not depend on the job is done while nothing waits for it; a failure
         * ends the spare (exit 126) and the next exec spawns as without one. */
        confine_prepare(agent_cfg.rlimit_nofile);
        /* The filter too: loading it JIT-compiles some 750 BPF instructions (0.3-0.4 ms here),
         * which the exec would otherwise wait for. Everything this process does after it
         * (waiting, taking the job, confine_identity_filtered, execve) is allowed by it, and
         * the kernel lets it load one under the agent's no_new_privs (confine_agent_caps). */
        if (confine_seccomp() != 0)
            _exit(126);
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
                         go[0],
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
        unlinkat(agent_cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
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

/* Hands the command to the waiting spare; false (nothing changed) when there is none, when the
 * spare before it has not taken its job yet (job_free), or when the command does not fit the
 * job, and the caller spawns directly. */
bool spare_take(command *c, char **argv, char **env, size_t env_count, const char *cwd, uid_t u,
                gid_t g, bool keep, bool with_stdin)
{
    if (next_spare.pid <= 0 || !job_free())
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
    job_reader = next_spare.go_fd; /* the job stays its own until it lets go */
    next_spare = (spare){0, -1, {-1, -1}, -1, -1, ""};
    return true;
}

/* At start, once the seccomp filter is known: drops a delegation that does not work
 * (cgroup_probe) and maps the job a spare reads, or keeps no spare at all. */
void spare_init(void)
{
    cgroup_probe();
    if (agent_cfg.cgroup_fd >= 0) {
        job = mmap(NULL, sizeof *job, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (job == MAP_FAILED)
            job = NULL; /* no spares: every exec joins its cgroup on its own */
    }
    if (probe_procs >= 0 && (!job || !agent_seccomp_ready)) { /* no spare will take the probe's */
        close(probe_procs);
        probe_procs = -1;
        close(next_spare.cg_fd);
        next_spare.cg_fd = -1;
        unlinkat(agent_cfg.cgroup_fd, next_spare.cg_name, AT_REMOVEDIR);
    }
}

/* The waiting spare's pid, 0 when there is none (reap tells it from a command's process). */
pid_t spare_pid(void)
{
    return next_spare.pid;
}
