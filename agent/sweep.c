/* sweep.c - ending a command's whole process tree: each command's own cgroup (made, killed until
 * empty, released), and where no cgroup is delegated the /proc sweeps by session and process
 * group (and, for the only command running, of everything but the python kernel).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/proc.h"
#include "serve_impl.h"

/* ---- process tree control ------------------------------------------------------------ */

uint8_t agent_dents[16384];

/* Calls fn(pid, pgrp, session) for every process in our pid namespace but us. */
static void each_process(void (*fn)(pid_t, pid_t, pid_t, void *), void *arg)
{
    int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return;
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, agent_dents, sizeof agent_dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(agent_dents + off);
            off += d->d_reclen;
            char *end;
            long pid = strtol(d->d_name, &end, 10);
            if (*end || pid <= 1)
                continue;
            char path[64], buf[512];
            snprintf(path, sizeof path, "/proc/%ld/stat", pid);
            if (sbx_read_small(path, 0, buf, sizeof buf) <= 0)
                continue;
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
    if (agent_py.pid == 0 || sid != agent_py.pid)
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
 * write fd on its tasks (v1) or cgroup.procs (v2) for a child to join with, or -1 (no delegation:
 * the /proc sweeps remain). */
int cgroup_create(char name[32], int *dir_fd)
{
    static uint64_t seq;
    *dir_fd = -1;
    if (agent_cfg.cgroup_fd < 0)
        return -1;
    snprintf(name, 32, "cmd-%llu", (unsigned long long)++seq);
    if (mkdirat(agent_cfg.cgroup_fd, name, 0755) < 0 && errno != EEXIST)
        return -1;
    *dir_fd = openat(agent_cfg.cgroup_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dir_fd < 0) {
        unlinkat(agent_cfg.cgroup_fd, name, AT_REMOVEDIR);
        return -1;
    }
    /* v1: the tasks file. The child that joins writes "0", itself, and is one thread: the
     * kernel then moves it without its global threadgroup lock, whose write side waits for an
     * RCU grace period (~5 ms here, on every command after a quiet moment). v2 has no tasks
     * file outside threaded subtrees: cgroup.procs. */
    int procs = openat(*dir_fd, "tasks", O_WRONLY | O_CLOEXEC);
    if (procs < 0)
        procs = openat(*dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0) {
        close(*dir_fd);
        *dir_fd = -1;
        unlinkat(agent_cfg.cgroup_fd, name, AT_REMOVEDIR);
    }
    return procs;
}

/* Whether the delegated cgroup is on cgroup v2 (asked once). */
static bool cgroup_v2(void)
{
    static int v2 = -1;
    struct statfs fs;
    if (v2 < 0)
        v2 = agent_cfg.cgroup_fd >= 0 && fstatfs(agent_cfg.cgroup_fd, &fs) == 0 &&
             fs.f_type == CGROUP2_SUPER_MAGIC;
    return v2 == 1;
}

pid_t agent_fork_into_cgroup(int dir_fd)
{
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_INTO_CGROUP;
    ca.exit_signal = SIGCHLD;
    ca.cgroup = (uint64_t)dir_fd;
    return (pid_t)syscall(SYS_clone3, &ca, sizeof ca);
}

/* A command's process (a spare, or one spawned directly) born in its cgroup dir_fd when the
 * delegation is v2; -1 when not (v1, where a write to tasks does not wait; an older kernel; a
 * refusal): the caller forks and joins by a write, which reports the error. */
pid_t fork_into_cgroup(int dir_fd)
{
    return dir_fd >= 0 && cgroup_v2() ? agent_fork_into_cgroup(dir_fd) : -1;
}

int cgroup_make(command *c)
{
    return cgroup_create(c->cg_name, &c->cg_fd);
}

/* Removes a finished command's cgroup once nothing runs in it, when its slot is reused (until
 * then its counters, pids.events among them, stay readable from the host). A background
 * process the command left keeps it until that ends or the sandbox goes: the provider removes
 * the rest. */
void cgroup_release(command *c)
{
    if (c->cg_fd < 0)
        return;
    if (unlinkat(agent_cfg.cgroup_fd, c->cg_name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
        close(c->cg_fd);
        c->cg_fd = -1;
    }
}

/* Kills c's whole process tree: its session/process group, and anything that moved to
 * another group but kept the session. When c is the only thing running (the usual case),
 * also every process that escaped with setsid, except the idle python kernel. */
void signal_group(pid_t pid, int sig)
{
    if (kill(-pid, sig) < 0 && errno == ESRCH)
        kill(pid, sig);
}

void kill_tree(command *c)
{
    if (c->pid <= 0)
        return;
    pid_t target = c->pid;
    signal_group(target, SIGKILL);
    if (c->cg_fd >= 0 && cgroup_kill(c->cg_fd))
        return; /* the cgroup held every process the command ever started, and is empty */
    each_process(kill_if_in_session, &target);
    /* "Everything but the kernel" is the sandbox only when we are PID 1 of its own pid
     * namespace. An agent that is not (run by hand, in a pod that shares its pid namespace, in
     * a test) would SIGKILL every process it may signal on the host or in the pod. */
    if (!c->is_kernel && running_count() <= 1 && getpid() == 1)
        each_process(kill_unless_kernel, NULL);
}
