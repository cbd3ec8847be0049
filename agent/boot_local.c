/* boot_local.c - `sbx-agent boot ...`: the local provider's launcher. It builds a sandbox out
 * of Linux namespaces and becomes its PID 1 (the agent), detached from whoever started it.
 *
 *   P (this process, host namespaces)          C (clone: new user/pid/mount/ipc/uts namespaces;
 *     waits for "go <uid base> <slot>" on stdin      cgroup after the move; under DENY net, made
 *                                                     by a helper beside the mounts: netns_join)
 *     (--wait-go: meanwhile the provider makes
 *     the state dir, uid slot, cgroups and meta)
 *     joins the sandbox's cgroups (v1: itself;
 *     v2: forks itself into the cgroup, the fork
 *     goes on as P: fork_into_v2)
 *     clone() ------------------------------------>  waits for "go"
 *     writes uid_map/gid_map, oom_score_adj -1000
 *     "go" --------------------------------------->  starts the net helper, mounts a minimal root,
 *                                                     enters the helper's net namespace,
 * pivot_root, listens on /.sbx/agent.sock
 *     <------------------------------------------- "OK" (or "ERR <why>")
 *     prints "pid=<C's host pid>", exits            serves until destroyed or idle
 *     (--reap: stays as C's reaper, reap.c)
 *
 * Being a separate static program (not a fork of the host process) means the setup runs
 * single-threaded with no locks held, whatever the host process is (a threaded worker, an
 * ASan build). Every bind source is opened before anything is mounted and bound through its
 * fd, so a path swapped for a symlink mid-setup cannot redirect a mount (runc CVE class).
 * This file must not serve the protocol (serve.c) or confine programs (confine.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <linux/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "providers/common/raw_syscall.h"

/* Read-only binds one sandbox may have (the default list has 9). */
#define BOOT_MAX_BINDS 64
/* cgroup.procs files to join (memory, pids, cpu on v1; one on v2). */
#define BOOT_MAX_CGROUPS 8
/* The sandbox root tmpfs only holds mountpoints and a few /etc files. */
#define BOOT_ROOT_TMPFS_OPTS "size=1m,nr_inodes=4096,mode=0755"
/* /dev is a tiny tmpfs with bind-mounted device nodes and symlinks. */
#define BOOT_DEV_TMPFS_OPTS "size=64k,nr_inodes=64,mode=0755"
/* How long P waits for C to report ready (a loaded host: generous). */
#define BOOT_READY_TIMEOUT_S 30

typedef struct bind {
    const char *path; /* where it appears in the sandbox (same as on the host) */
    int fd;           /* -1 for a symlink; else 0 until C opens the source (O_PATH) */
    char link[256];   /* symlink target when the host path is a symlink */
    bool is_dir;
} bind_t;

static bind_t binds[BOOT_MAX_BINDS];
static int n_binds;
static const char *cgroup_procs[BOOT_MAX_CGROUPS];
static int n_cgroups;
static const char *cgroup_delegate;   /* the cgroup the agent makes per-command cgroups in */
static const agent_reap_plan *reaper; /* --reap: what the launcher removes once the init ends */
static pid_t *v2_init; /* --reap on v2: the init's pid, from the launcher in the cgroup to P */
static int ready_pipe[2] = {-1, -1}, go_pipe[2] = {-1, -1};

/* C reports a setup failure to P (which prints it for the provider) and exits. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    char msg[900], line[1000];
    int e = errno;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "ERR %s (%s)\n", msg, strerror(e));
    if (n > 0) {
        ssize_t w = write(ready_pipe[1] >= 0 ? ready_pipe[1] : 2, line,
                          (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    _exit(1);
}

/* Said after a mountpoint the sandbox cannot make: a rootfs directory belongs to the host, and
 * the sandbox's root (another host uid) may not write to it. Empty without --rootfs. */
static const char *mountpoint_hint = "";

/* Reads C's one-line report from ready_pipe into reply (NUL-ended): until a newline, or EOF once
 * C is gone (P closed its own write end after the clone). */
static void read_reply(char *reply, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t r = read(ready_pipe[0], reply + got, cap - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got >= cap - 1 || memchr(reply, '\n', got))
            break;
    }
    reply[got] = '\0';
}

/* The path of name (e.g. "/tasks"; "" for the directory itself) in the cgroup of
 * cgroup_procs[i], into out; false when it does not fit. */
static bool beside_procs(int i, const char *name, char *out, size_t cap)
{
    const char *slash = strrchr(cgroup_procs[i], '/');
    return slash != NULL && snprintf(out, cap, "%.*s%s", (int)(slash - cgroup_procs[i]),
                                     cgroup_procs[i], name) < (int)cap;
}

/* On cgroup v1, P joins each hierarchy itself before the clone, so C is born in the sandbox's
 * cgroups: it writes "0" (itself, one thread: P has no other) to the cgroup's tasks file.
 * Moving one thread that is the caller skips the kernel's global threadgroup lock, whose write
 * side waits for an RCU grace period; writing a pid to cgroup.procs takes it: ~5 ms per
 * create here, which the old move of C overlapped with C's mounts but C then waited for. A
 * hierarchy this does not join (v2 has no tasks file; or the join failed) is left for the move
 * of C by pid after the clone (pending[i]), which reports any error. */
static void join_cgroups_early(bool pending[BOOT_MAX_CGROUPS])
{
    for (int i = 0; i < n_cgroups; i++) {
        char tasks[PATH_MAX];
        pending[i] = true;
        if (!beside_procs(i, "/tasks", tasks, sizeof tasks))
            continue;
        int fd = open(tasks, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        pending[i] = write(fd, "0", 1) != 1;
        close(fd);
    }
}

/* On cgroup v2 (one cgroup, no tasks file) P forks a second launcher into it
 * (agent_fork_into_cgroup), which does the rest of P's work (the clone of C, its id maps, the
 * handshake, the pid on stdout) while P waits for it and exits as it does: C is born in the
 * cgroup. Without this P moves C there by pid, which waits for an RCU grace period that C, done
 * with its mounts, then waits out. The second launcher dies with P. Returns in it, or in P when the
 * kernel cannot (v1, an older kernel, a refusal: the move by pid remains); never returns in P
 * otherwise. */
static void fork_into_v2(bool pending[BOOT_MAX_CGROUPS])
{
    char dir[PATH_MAX];
    if (n_cgroups != 1 || !pending[0] || !beside_procs(0, "", dir, sizeof dir))
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    pid_t launcher = getpid();
    /* --reap: the init is q's child; when q exits, it is inherited by P (a subreaper), which
     * stays outside the cgroup as its reaper */
    if (reaper != NULL && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        return;
    pid_t *init = NULL; /* shared with q, which clones the init */
    if (reaper != NULL) {
        init = mmap(NULL, sizeof *init, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (init == MAP_FAILED)
            init = NULL; /* reaped, not watched: the owner's death is left to the sweep */
    }
    pid_t q = agent_fork_into_cgroup(fd);
    close(fd);
    if (q < 0)
        return;
    if (q == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != launcher)
            _exit(1);
        pending[0] = false;
        reaper = NULL; /* P reaps, outside the cgroup */
        v2_init = init;
        return;
    }
    int st = 0;
    while (waitpid(q, &st, 0) < 0)
        if (errno != EINTR)
            _exit(1);
    if (WIFSIGNALED(st))
        fprintf(stderr, "sbx-agent boot: the launcher in the sandbox's cgroup died of signal %d\n",
                WTERMSIG(st));
    if (reaper != NULL && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        agent_reap_plan plan = *reaper;
        plan.init = init != NULL ? *init : 0;
        agent_reap(&plan);
    }
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

/* --reap on v1: the launcher, about to stay as the reaper, leaves the cgroups it joined before
 * the clone for their parents (the provider's), as cheaply as it joined them ("0" to tasks), so
 * that they can be removed once the sandbox has ended. False when it is still in one. */
static bool leave_cgroups(const bool pending[BOOT_MAX_CGROUPS])
{
    for (int i = 0; i < n_cgroups; i++) {
        char tasks[PATH_MAX];
        if (pending[i])
            continue; /* never joined: C was moved there by pid */
        if (!beside_procs(i, "", tasks, sizeof tasks))
            return false;
        char *slash = strrchr(tasks, '/');
        if (slash == NULL || (size_t)(slash - tasks) + sizeof "/tasks" > sizeof tasks)
            return false;
        memcpy(slash, "/tasks", sizeof "/tasks");
        int fd = open(tasks, O_WRONLY | O_CLOEXEC);
        bool ok = fd >= 0 && write(fd, "0", 1) == 1;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return false;
    }
    return true;
}

/* C ended before P was done with it (P's write to go_pipe failed, or the cgroup move found it
 * gone): C's own report says why (a rootfs without its mountpoints, say), else fallback. Before,
 * the write to the closed go_pipe killed P with SIGPIPE and the provider saw no message at all
 * (a race C won under ASan). */
static int child_failed(pid_t pid, const char *fallback)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    char reply[1024];
    read_reply(reply, sizeof reply);
    if (strncmp(reply, "ERR ", 4) == 0)
        fprintf(stderr, "sbx-agent boot: sandbox setup failed: %s", reply + 4);
    else
        fprintf(stderr, "sbx-agent boot: %s\n", fallback);
    return 1;
}

static void mkdirs(const char *path, mode_t mode)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            fail("mkdir %s%s", buf, mountpoint_hint);
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        fail("mkdir %s%s", buf, mountpoint_hint);
}

static void write_file(const char *path, const char *content)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        fail("create %s", path);
    size_t n = strlen(content);
    if (write(fd, content, n) != (ssize_t)n)
        fail("write %s", path);
    close(fd);
}

/* MS_* flags that a remount must keep: in a user namespace the kernel refuses to clear
 * flags the parent mount has locked (nosuid, nodev, noexec, atime). */
static unsigned long kept_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) != 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        f |= MS_RELATIME;
    return f;
}

static void bind_fd(int fd, const char *dst, bool readonly, bool is_dir)
{
    char src[64];
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    if (is_dir) {
        mkdirs(dst, 0755);
    } else {
        int f = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (f < 0)
            fail("create mountpoint %s", dst);
        close(f);
    }
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        fail("bind %s", dst);
    if (readonly && mount(NULL, dst, NULL,
                          MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept_flags(dst), NULL) < 0)
        fail("remount %s read-only", dst);
    /* MS_REC carried every mount below the source along (a tmpfs, another disk), and the
     * remount above changed only the top one: make the whole subtree read-only and nosuid, or
     * a program writes to the host through a submount of a "read-only" bind. */
    if (readonly && is_dir) {
        struct mount_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
        if (syscall(SYS_mount_setattr, AT_FDCWD, dst, AT_RECURSIVE, &attr, sizeof attr) < 0)
            fail("make %s and the mounts below it read-only (mount_setattr, Linux 5.12+)", dst);
    }
}

/* The empty second layer of every overlay below (overlayfs without an upper layer needs two
 * lower ones): the root tmpfs's /proc directory, created empty before the overlays and only
 * later covered by procfs. An overlay keeps its own reference to the layer's directory, so what
 * is mounted on top afterwards is not what it sees. */
#define BOOT_EMPTY_LAYER "./proc"
/* Largest host file a bind list names (e.g. /etc/ld.so.cache) that is copied into the root
 * tmpfs; the root tmpfs holds them all (BOOT_ROOT_TMPFS_OPTS). */
#define BOOT_MAX_COPIED_FILE (512 * 1024)

/* A read-only directory bind presented as an overlay of the host directory (open as fd):
 * the same files, but each is an inode of the overlay's, not the host's. So a program's
 * inotify_add_watch on it sees only what goes through this overlay (not the host's, nor another
 * sandbox's, accesses), and its flock/fcntl locks lock the overlay inode and never block the host
 * or another sandbox. Mount flags the host path has that matter for safety (nodev, noexec) are
 * kept; the overlay is read-only and nosuid.
 * The kernel refuses an overlay (in a user namespace) of a directory that has a mount below it:
 * its submounts are locked to it, and an overlay would show what they cover. Such a directory,
 * and any when overlayfs is missing, is bound as before (recursive, read-only): its inodes stay
 * the host's (docs/security.md names the gap). */
static void overlay_fd(int fd, const char *dst)
{
    char src[64], opts[128];
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    mkdirs(dst, 0755);
    snprintf(opts, sizeof opts, "lowerdir=%s:%s", src, BOOT_EMPTY_LAYER);
    unsigned long flags = MS_RDONLY | MS_NOSUID | (kept_flags(src) & (MS_NODEV | MS_NOEXEC));
    if (mount("overlay", dst, "overlay", flags, opts) < 0)
        bind_fd(fd, dst, true, true);
}

/* A read-only file bind: a private copy in the root tmpfs (mode 0444), for the same reason as
 * overlay_fd (an overlay needs a directory). Read through the fd opened before any mount, so a
 * path swapped since cannot substitute another file. A snapshot: later host changes to the file
 * are not seen. */
static void copy_fd(int fd, const char *dst)
{
    char src[64];
    snprintf(src, sizeof src, "/proc/self/fd/%d", fd);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode))
        fail("read %s (a bound file must be a regular file)", dst + 1);
    if (st.st_size > BOOT_MAX_COPIED_FILE)
        fail("%s is %lld bytes; a bound file is copied and may hold at most %d: bind its "
             "directory instead",
             dst + 1, (long long)st.st_size, BOOT_MAX_COPIED_FILE);
    /* Streamed through a small buffer: a static one of the largest size stayed resident in
     * every idle agent (PID 1 is this process), 48 KiB for /etc/ld.so.cache alone. */
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
    if (out < 0)
        fail("create %s", dst);
    char buf[16384];
    for (size_t total = 0; total < BOOT_MAX_COPIED_FILE;) {
        size_t want =
            BOOT_MAX_COPIED_FILE - total < sizeof buf ? BOOT_MAX_COPIED_FILE - total : sizeof buf;
        ssize_t got = read(in, buf, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            fail("read %s", dst + 1);
        if (got == 0)
            break;
        for (size_t off = 0; off < (size_t)got;) {
            ssize_t n = write(out, buf + off, (size_t)got - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                fail("write %s (the root tmpfs is full: %s)", dst, BOOT_ROOT_TMPFS_OPTS);
            off += (size_t)n;
        }
        total += (size_t)got;
    }
    close(in);
    close(out);
}

/* The inode cap of a writable tmpfs of mb MiB (SBX_TMPFS_INODES_PER_MB, core/limits.h). */
static unsigned long tmpfs_inodes(unsigned long mb)
{
    unsigned long long n = mb * SBX_TMPFS_INODES_PER_MB;
    return (unsigned long)(n < SBX_TMPFS_INODES_MIN ? SBX_TMPFS_INODES_MIN : n);
}

/* Per-user kernel counts of the sandbox's user namespace (/proc/sys/user, Linux 4.9): each uid
 * inside may hold at most these, whatever the host's sysctls allow (the kernel checks every
 * namespace up to the host's, where the whole sandbox counts as its own host uid). Only root
 * of the namespace, with CAP_SYS_RESOURCE in it, may set them: set here, before the agent
 * drops its capabilities, so no program can raise them.
 *   inotify instances: the host default is 128 per user; a file watcher needs one or a few
 *   inotify watches: ~1 KiB of kernel memory each; the kernel's old default, 8 MiB in all
 * Namespaces: none at all, set later (no_more_namespaces), once the boot made its last one. */
#define BOOT_INOTIFY_INSTANCES "64"
#define BOOT_INOTIFY_WATCHES "8192"

static void limit_user_counts(void)
{
    static const char *const limits[][2] = {
        {"./proc/sys/user/max_inotify_instances", BOOT_INOTIFY_INSTANCES},
        {"./proc/sys/user/max_inotify_watches", BOOT_INOTIFY_WATCHES},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        int fd = open(limits[i][0], O_WRONLY | O_CLOEXEC);
        size_t len = strlen(limits[i][1]);
        if (fd < 0 || write(fd, limits[i][1], len) != (ssize_t)len)
            fail("set %s to %s", limits[i][0] + 1, limits[i][1]);
        close(fd);
    }
}

/* No namespace of any kind may be made inside the sandbox from here on: each kind's count in the
 * sandbox's user namespace is 0, which the kernel checks for every process in it. Programs'
 * filters refuse unshare and clone with namespace flags already, but the agent's own filter
 * lets clone3 through (its forks into v2 cgroups), whose flags seccomp cannot read: a nested
 * user namespace would hand whoever took the agent over every capability again (in it), and
 * the others need CAP_SYS_ADMIN, which the agent drops (confine_agent_caps). Set after the
 * cgroup namespace, the last one the boot makes. time: Linux 5.6 and later. */
static void no_more_namespaces(void)
{
    static const char *const kinds[] = {"user", "mnt", "pid",    "ipc",
                                        "uts",  "net", "cgroup", "time"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "./proc/sys/user/max_%s_namespaces", kinds[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && strcmp(kinds[i], "time") == 0)
            continue;
        if (fd < 0 || write(fd, "0", 1) != 1)
            fail("set %s to 0", path + 1);
        close(fd);
    }
}

static void tmpfs(const char *dst, unsigned long flags, const char *opts)
{
    mkdirs(dst, 0755);
    if (mount("tmpfs", dst, "tmpfs", flags, opts) < 0)
        fail("mount tmpfs on %s (%s)", dst, opts);
}

static void loopback_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail("socket for loopback setup");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strcpy(ifr.ifr_name, "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        fail("read loopback flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        fail("bring loopback up");
    close(s);
}

#if SBX_RAW_SYSCALL
/* Under DENY, the sandbox's network namespace is made by a helper that runs beside C's mounts:
 * a network namespace costs the kernel 0.35-0.4 ms to make here, more than the rest of the
 * clone, and nothing of C's setup before its loopback needs it. The helper shares C's memory
 * and descriptor table (CLONE_VM | CLONE_FILES, on a stack of its own) and makes raw system
 * calls only, so it touches neither C's errno nor anything else of C's: it unshares the network
 * namespace, brings its loopback up, opens it (the descriptor lands in C's table) and exits;
 * C waits for it and enters the namespace (netns_join). */
#define BOOT_NETNS_STACK (16 * 1024)
static struct {
    long fd;  /* the namespace, opened by the helper */
    long err; /* 0, or the failed step's -errno */
    const char *step;
    char *stack; /* the helper's, until netns_join (mapped: the agent keeps none of it) */
} netns_job;

SBX_RAW_BARE __attribute__((noinline)) static int netns_helper(void *arg)
{
    (void)arg;
    long r = sbx_raw3(SYS_unshare, CLONE_NEWNET, 0, 0);
    long s = r < 0 ? r : sbx_raw3(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    for (size_t i = 0; i < sizeof ifr; i++)
        ((volatile char *)&ifr)[i] = 0;
    ifr.ifr_name[0] = 'l';
    ifr.ifr_name[1] = 'o';
    if (r < 0) {
        netns_job.step = "create the network namespace";
    } else if (s < 0) {
        netns_job.step = "socket for loopback setup";
        r = s;
    } else if ((r = sbx_raw3(SYS_ioctl, s, SIOCGIFFLAGS, (long)&ifr)) < 0) {
        netns_job.step = "read loopback flags";
    } else {
        ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
        if ((r = sbx_raw3(SYS_ioctl, s, SIOCSIFFLAGS, (long)&ifr)) < 0)
            netns_job.step = "bring loopback up";
    }
    if (s >= 0)
        sbx_raw3(SYS_close, s, 0, 0);
    if (r >= 0) {
        static const char path[] = "/proc/thread-self/ns/net";
        r = sbx_raw3(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC);
        if (r < 0)
            netns_job.step = "open the network namespace";
        else
            netns_job.fd = r;
    }
    netns_job.err = r < 0 ? r : 0;
    sbx_raw3(SYS_exit, 0, 0, 0);
    return 0;
}

/* Starts the helper; -1 when it cannot be (C makes the namespace itself then). */
static pid_t netns_start(void)
{
    netns_job.fd = -1;
    netns_job.err = 0;
    netns_job.step = NULL;
    netns_job.stack = mmap(NULL, BOOT_NETNS_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (netns_job.stack == MAP_FAILED)
        return -1;
    pid_t pid = clone(netns_helper, netns_job.stack + BOOT_NETNS_STACK,
                      CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
    if (pid < 0)
        munmap(netns_job.stack, BOOT_NETNS_STACK);
    return pid;
}
#endif

/* C enters the network namespace the helper made (waiting for it), or makes it itself. */
static void netns_join(pid_t helper)
{
#if SBX_RAW_SYSCALL
    if (helper > 0) {
        int st = 0;
        while (waitpid(helper, &st, 0) < 0)
            if (errno != EINTR)
                fail("wait for the network namespace");
        munmap(netns_job.stack, BOOT_NETNS_STACK);
        if (netns_job.err < 0) {
            errno = (int)-netns_job.err;
            fail("%s", netns_job.step);
        }
        if (netns_job.fd < 0 || setns((int)netns_job.fd, CLONE_NEWNET) < 0)
            fail("enter the network namespace");
        close((int)netns_job.fd);
        return;
    }
#else
    (void)helper;
#endif
    if (unshare(CLONE_NEWNET) < 0)
        fail("create the network namespace");
    loopback_up();
}

typedef struct boot_opts {
    const char *box;    /* host dir for /.sbx */
    const char *rootfs; /* NULL: tmpfs root with binds */
    bool net_deny;
    bool rootless;
    unsigned long uid_base; /* root mode: sandbox ids 0..65535 map to uid_base.. on the host */
    long uid_slot;          /* the provider's slot of uid_base, from "go" (-1: none) */
    unsigned long ws_mb, tmp_mb, shm_mb;
    agent_config agent;
} boot_opts;

/* Opens a bind source in C's own mount namespace: a bind of a mount that belongs to another
 * namespace (an fd P opened) is refused by the kernel. O_NOFOLLOW: the host path was checked
 * not to be a symlink in P; one that became a symlink since is refused, not followed. */
static int open_source(const char *path, int extra)
{
    int fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW | extra);
    if (fd < 0)
        fail("open %s (the sandbox's mapped root needs search permission on it)", path);
    return fd;
}

/* True when path is strictly below dir ("/tmp/x" is below "/tmp"; "/tmpx" is not). */
static bool below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Binds (or symlinks) the read-only host paths into the new root, which is the cwd: those
 * below the private /tmp or the workspace (below_private) or all the others. The private
 * tmpfs mounts go between the two passes, so that an extra_binds entry under /tmp lands on the
 * tmpfs instead of being hidden under it. */
static void place_binds(const boot_opts *o, bool below_private)
{
    char dst[4200];
    for (int i = 0; i < n_binds; i++) {
        if ((below(binds[i].path, "/tmp") || below(binds[i].path, o->agent.workdir)) !=
            below_private)
            continue;
        snprintf(dst, sizeof dst, ".%s", binds[i].path);
        if (binds[i].fd < 0) {
            char parent[4200];
            snprintf(parent, sizeof parent, "%s", dst);
            char *slash = strrchr(parent, '/');
            if (slash && slash != parent) {
                *slash = '\0';
                mkdirs(parent, 0755);
            }
            if (symlink(binds[i].link, dst) < 0 && errno != EEXIST)
                fail("symlink %s", binds[i].path);
            continue;
        }
        if (binds[i].is_dir) {
            overlay_fd(binds[i].fd, dst);
        } else if (below_private) { /* a copy there would be the program's to replace */
            bind_fd(binds[i].fd, dst, true, false);
        } else {
            char parent[4200];
            snprintf(parent, sizeof parent, "%s", dst);
            char *slash = strrchr(parent, '/');
            if (slash && slash != parent) {
                *slash = '\0';
                mkdirs(parent, 0755);
            }
            copy_fd(binds[i].fd, dst);
        }
        close(binds[i].fd);
    }
}

/* Long because it builds the sandbox's root in the order the kernel requires (cgroup fd while host
 * mounts are visible, root tmpfs, binds, /dev, /tmp and workspace, /proc, pivot_root); splitting
 * it would only pass the same boot_opts to each step. */
static void child_setup(const boot_opts *o)
{
    char c;
    close(go_pipe[1]);
    close(ready_pipe[0]);
    if (read(go_pipe[0], &c, 1) != 1)
        _exit(1); /* P died before writing our id maps */
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        fail("become root of the new user namespace");
    pid_t netns = -1;
#if SBX_RAW_SYSCALL
    if (o->net_deny)
        netns = netns_start();
#endif
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        fail("make mounts private");
    int box_fd = open_source(o->box, O_DIRECTORY);
    /* The delegated cgroup, opened while the host's cgroup mounts are still in our view: the
     * agent reaches it only through this fd (no cgroupfs is mounted inside the sandbox). */
    int cg_fd = -1;
    if (cgroup_delegate) {
        cg_fd = open(cgroup_delegate, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (cg_fd < 0)
            fail("open the delegated cgroup %s", cgroup_delegate);
    }
    int rootfs_fd = o->rootfs ? open_source(o->rootfs, O_DIRECTORY) : -1;
    for (int i = 0; i < n_binds; i++)
        if (binds[i].fd == 0)
            binds[i].fd = open_source(binds[i].path, 0);
    /* The new root: /tmp is free to shadow in our private mount namespace (every source we
     * need is already open as an fd). */
    const char *root = "/tmp";
    if (rootfs_fd >= 0) {
        char src[64];
        snprintf(src, sizeof src, "/proc/self/fd/%d", rootfs_fd);
        if (mount(src, root, NULL, MS_BIND | MS_REC, NULL) < 0)
            fail("bind the rootfs directory %s", o->rootfs);
        mountpoint_hint = " (a rootfs directory needs its mountpoints made beforehand, owned by "
                          "root: /proc, /dev, /tmp, /.sbx and the workdir)";
        /* MS_REC brought the host's mounts below the directory along (a tmpfs, another disk),
         * writable: all of them read-only and nosuid now, as the root itself is made at the
         * end; the top one stays writable until then for the mountpoints. */
        struct mount_attr attr;
        memset(&attr, 0, sizeof attr);
        attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
        if (syscall(SYS_mount_setattr, AT_FDCWD, root, AT_RECURSIVE, &attr, sizeof attr) < 0)
            fail("make the mounts below the rootfs directory read-only (mount_setattr, Linux "
                 "5.12+)");
        memset(&attr, 0, sizeof attr);
        attr.attr_clr = MOUNT_ATTR_RDONLY;
        if (syscall(SYS_mount_setattr, AT_FDCWD, root, 0, &attr, sizeof attr) < 0)
            fail("make the rootfs directory writable for its mountpoints");
    } else if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, BOOT_ROOT_TMPFS_OPTS) < 0) {
        fail("mount the root tmpfs");
    }
    if (chdir(root) < 0)
        fail("enter the new root");
    char dst[4200];
    mkdirs(BOOT_EMPTY_LAYER, 0555); /* before the overlays: their empty layer */
    place_binds(o, false);
    if (rootfs_fd < 0) {
        mkdirs("./etc", 0755);
        char passwd[512];
        snprintf(passwd, sizeof passwd,
                 "root:x:0:0:root:/root:/bin/sh\nsandbox:x:%u:%u:sandbox:%s:/bin/sh\n"
                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                 (unsigned)o->agent.prog_uid, (unsigned)o->agent.prog_gid, o->agent.workdir);
        write_file("./etc/passwd", passwd);
        char group[256];
        snprintf(group, sizeof group, "root:x:0:\nsandbox:x:%u:\nnogroup:x:65534:\n",
                 (unsigned)o->agent.prog_gid);
        write_file("./etc/group", group);
        write_file("./etc/hosts", "127.0.0.1 localhost sbx\n::1 localhost sbx\n");
        write_file("./etc/hostname", "sbx\n");
    }
    /* /dev: a private tmpfs with the harmless device nodes bound from the host. */
    tmpfs("./dev", MS_NOSUID | MS_NOEXEC, BOOT_DEV_TMPFS_OPTS);
    static const char *devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        char host[64];
        snprintf(host, sizeof host, "/dev/%s", devices[i]);
        int fd = open(host, O_PATH | O_CLOEXEC);
        if (fd < 0)
            fail("open host %s", host);
        snprintf(dst, sizeof dst, "./dev/%s", devices[i]);
        bind_fd(fd, dst, false, false);
        close(fd);
    }
    static const char *links[][2] = {{"/proc/self/fd", "./dev/fd"},
                                     {"/proc/self/fd/0", "./dev/stdin"},
                                     {"/proc/self/fd/1", "./dev/stdout"},
                                     {"/proc/self/fd/2", "./dev/stderr"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (symlink(links[i][0], links[i][1]) < 0)
            fail("symlink %s", links[i][1]);
    char opts[160];
    snprintf(opts, sizeof opts, "size=%lum,nr_inodes=%lu,mode=1777", o->shm_mb,
             tmpfs_inodes(o->shm_mb));
    tmpfs("./dev/shm", MS_NOSUID | MS_NODEV, opts);
    if (mount(NULL, "./dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) <
        0)
        fail("remount /dev read-only");
    /* Writable, size-bounded places: private /tmp and the workspace. */
    snprintf(opts, sizeof opts, "size=%lum,nr_inodes=%lu,mode=1777", o->tmp_mb,
             tmpfs_inodes(o->tmp_mb));
    tmpfs("./tmp", MS_NOSUID | MS_NODEV, opts);
    snprintf(opts, sizeof opts, "size=%lum,nr_inodes=%lu,mode=0755,uid=%u,gid=%u", o->ws_mb,
             tmpfs_inodes(o->ws_mb), (unsigned)o->agent.prog_uid, (unsigned)o->agent.prog_gid);
    snprintf(dst, sizeof dst, ".%s", o->agent.workdir);
    tmpfs(dst, MS_NOSUID | MS_NODEV, opts);
    place_binds(o, true);
    /* A fresh /proc of our pid namespace; hidepid=2 hides the agent from programs that run
     * under another uid. */
    mkdirs("./proc", 0555);
    if (mount("proc", "./proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2") < 0 &&
        mount("proc", "./proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        fail("mount /proc (a host /proc with locked over-mounts forbids it)");
    limit_user_counts();
    /* The agent's own directory: the socket the host reaches. */
    bind_fd(box_fd, "./.sbx", false, true);
    close(box_fd);
    if (o->net_deny)
        netns_join(netns);
    if (sethostname("sbx", 3) < 0)
        fail("set the hostname");
    /* We were born in the sandbox's cgroups (v1), or P moved us there while we mounted (v2: a
     * move of another process waits for an RCU grace period, which overlaps with the setup
     * above). Only now does our cgroup namespace begin, rooted at the sandbox's own cgroup. */
    if (read(go_pipe[0], &c, 1) != 1 || c != 'c')
        fail("join the sandbox cgroups (the launcher could not)");
    close(go_pipe[0]);
    if (unshare(CLONE_NEWCGROUP) < 0)
        fail("create the cgroup namespace");
    no_more_namespaces();
    /* pivot_root onto itself, then lazily detach the old root: nothing of the host's mount
     * tree stays reachable (a plain chroot would leave it under us). */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        fail("pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        fail("detach the host root");
    if (chdir("/") < 0)
        fail("chdir /");
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags("/"), NULL) < 0)
        fail("remount the sandbox root read-only");
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        fail("open /dev/null");
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    close(null);
    setsid();
    agent_config ac = o->agent;
    ac.ready_fd = ready_pipe[1];
    ac.cgroup_fd = cg_fd;
    _exit(agent_serve(&ac));
}

static int write_proc(pid_t pid, const char *file, const char *content)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, content, strlen(content));
    int e = errno;
    close(fd);
    return n == (ssize_t)strlen(content) ? 0 : -e;
}

static unsigned long num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || end == s) {
        fprintf(stderr, "sbx-agent boot: %s must be a number, got '%s'\n", what, s);
        exit(2);
    }
    return v;
}

static void add_bind(const char *path)
{
    if (n_binds >= BOOT_MAX_BINDS) {
        fprintf(stderr, "sbx-agent boot: more than %d binds\n", BOOT_MAX_BINDS);
        exit(2);
    }
    if (path[0] != '/' || strstr(path, "/..") || strcmp(path, "/") == 0) {
        fprintf(stderr, "sbx-agent boot: bind '%s' must be an absolute path below /\n", path);
        exit(2);
    }
    struct stat st;
    if (lstat(path, &st) < 0)
        return; /* optional: absent on this host */
    bind_t *b = &binds[n_binds];
    b->path = path;
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlink(path, b->link, sizeof b->link - 1);
        if (n <= 0)
            return;
        b->link[n] = '\0';
        b->fd = -1;
    } else {
        b->fd = 0; /* opened by C, in its own mount namespace */
        b->is_dir = S_ISDIR(st.st_mode);
    }
    n_binds++;
}

/* --wait-go: the provider starts the launcher before the sandbox's cgroups, state dir and uid
 * slot exist (its exec overlaps making them) and then writes "go <uid base> <uid slot>\n" on its
 * stdin (slot -1: none, rootless).
 * Until then nothing is touched. false: the provider gave up (its end closed, or anything
 * else), and the launcher exits without a word. stdin is /dev/null afterwards, as the init
 * and its programs expect. */
static bool await_go(boot_opts *o)
{
    char line[64];
    size_t n = 0;
    while (n < sizeof line - 1) {
        ssize_t r = read(0, line + n, sizeof line - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        n += (size_t)r;
        if (memchr(line, '\n', n) != NULL)
            break;
    }
    line[n] = '\0';
    char *end = NULL;
    if (strncmp(line, "go ", 3) != 0)
        return false;
    errno = 0;
    unsigned long uid = strtoul(line + 3, &end, 10);
    if (errno != 0 || end == line + 3 || *end != ' ' || uid > 0xfffffffful)
        return false;
    const char *slot_text = end + 1;
    long slot = strtol(slot_text, &end, 10);
    if (errno != 0 || end == slot_text || *end != '\n' || slot < -1)
        return false;
    if (!o->rootless)
        o->uid_base = uid;
    o->uid_slot = slot;
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul < 0 || dup2(nul, 0) < 0)
        return false;
    close(nul);
    return true;
}

/* Long because it is the boot's process choreography (parse, user namespace as the sandbox's uid,
 * the P/C handshake over pipes, cgroup move, exec of the agent), whose file descriptors and pids
 * are shared by every step (also past clang-tidy's 200 lines, hence the NOLINT). */
int boot_local_main(int argc, char **argv) /* NOLINT(readability-function-size) */
{
    bool wait_go = false, reap = false;
    const char *slot_dir = "";
    /* The provider's process, which --reap watches (reap.c): named by --owner. Not getppid()
     * here: an owner killed right after it sent "go", while the kernel still exec'd this
     * launcher, has already handed it to a subreaper or init, which getppid() then names, so the
     * reaper watched a process that lives on (or, for init, nothing) and the sandbox ran on
     * until a sweep (test_local_leak, ci171). Without --owner: the parent, as before. */
    pid_t owner = 0;
    boot_opts o;
    memset(&o, 0, sizeof o);
    o.agent.socket_path = "/.sbx/agent.sock";
    o.agent.workdir = "/workspace";
    o.agent.prog_uid = 1000;
    o.agent.prog_gid = 1000;
    o.agent.idle_ttl_s = AGENT_DEFAULT_IDLE_TTL_S;
    o.agent.rlimit_nofile = 1024;
    o.agent.ready_fd = -1;
    o.agent.cgroup_fd = -1;
    o.net_deny = true;
    o.uid_base = 0;
    o.ws_mb = 1024;
    o.tmp_mb = 256;
    o.shm_mb = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--rootless") == 0) {
            o.rootless = true;
            continue;
        }
        if (strcmp(a, "--one-shot") == 0) {
            o.agent.one_shot = true;
            continue;
        }
        if (strcmp(a, "--wait-go") == 0) {
            wait_go = true;
            continue;
        }
        if (strcmp(a, "--reap") == 0) {
            reap = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "sbx-agent boot: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (strcmp(a, "--box") == 0)
            o.box = v;
        else if (strcmp(a, "--rootfs") == 0)
            o.rootfs = v;
        else if (strcmp(a, "--bind") == 0)
            add_bind(v);
        else if (strcmp(a, "--net") == 0)
            o.net_deny = strcmp(v, "allow") != 0;
        else if (strcmp(a, "--uid-base") == 0)
            o.uid_base = num(v, a);
        else if (strcmp(a, "--cgroup-procs") == 0 && n_cgroups < BOOT_MAX_CGROUPS)
            cgroup_procs[n_cgroups++] = v;
        else if (strcmp(a, "--cgroup-delegate") == 0)
            cgroup_delegate = v;
        else if (strcmp(a, "--uid-slots") == 0)
            slot_dir = v;
        else if (strcmp(a, "--owner") == 0)
            owner = (pid_t)num(v, a);
        else if (strcmp(a, "--workspace-mb") == 0)
            o.ws_mb = num(v, a);
        else if (strcmp(a, "--tmp-mb") == 0)
            o.tmp_mb = num(v, a);
        else if (strcmp(a, "--shm-mb") == 0)
            o.shm_mb = num(v, a);
        else if (strcmp(a, "--prog-uid") == 0)
            o.agent.prog_uid = (uid_t)num(v, a);
        else if (strcmp(a, "--prog-gid") == 0)
            o.agent.prog_gid = (gid_t)num(v, a);
        else if (strcmp(a, "--idle-ttl") == 0)
            o.agent.idle_ttl_s = (int64_t)num(v, a);
        else if (strcmp(a, "--nofile") == 0)
            o.agent.rlimit_nofile = num(v, a);
        else if (strcmp(a, "--workdir") == 0)
            o.agent.workdir = v;
        else {
            fprintf(stderr, "sbx-agent boot: unknown option %s\n", a);
            return 2;
        }
    }
    if (!o.box) {
        fprintf(stderr, "sbx-agent boot: --box DIR is required\n");
        return 2;
    }
    if (owner <= 0)
        owner = getppid();
    if (o.agent.workdir[0] != '/' || strstr(o.agent.workdir, "..")) {
        fprintf(stderr, "sbx-agent boot: --workdir must be an absolute path without '..'\n");
        return 2;
    }
    if (o.rootless) {
        /* One uid is mapped: programs share it with the agent (see AgentPong.shared_uid). */
        o.agent.prog_uid = 0;
        o.agent.prog_gid = 0;
        o.agent.shared_uid = true;
    }
    o.uid_slot = -1;
    if (wait_go && !await_go(&o))
        return 1;
    /* --reap (a one-shot sandbox): the launcher stays as the sandbox's reaper (reap.c) */
    static char state_dir[PATH_MAX], cg_dir[BOOT_MAX_CGROUPS][PATH_MAX];
    static const char *cg_dirs[BOOT_MAX_CGROUPS];
    agent_reap_plan plan = {state_dir, slot_dir, o.uid_slot, cg_dirs, 0, owner, 0};
    for (int i = 0; reap && i < n_cgroups; i++)
        if (beside_procs(i, "", cg_dir[i], sizeof cg_dir[i]))
            cg_dirs[plan.n_cgroups++] = cg_dir[i];
    if (reap) {
        const char *slash = strrchr(o.box, '/');
        snprintf(state_dir, sizeof state_dir, "%.*s", slash ? (int)(slash - o.box) : 0, o.box);
        if (state_dir[0] != '/') {
            fprintf(stderr, "sbx-agent boot: --reap needs an absolute --box\n");
            return 2;
        }
        reaper = &plan;
    }
    /* As root, before the effective ids change below; before the pipes, which a launcher
     * forked into v2's cgroup (fork_into_v2) must be the only holder of. */
    bool pending[BOOT_MAX_CGROUPS] = {false}; /* set for each of the n_cgroups below */
    join_cgroups_early(pending);
    fork_into_v2(pending);
    if (pipe2(ready_pipe, O_CLOEXEC) < 0 || pipe2(go_pipe, O_CLOEXEC) < 0) {
        fprintf(stderr, "sbx-agent boot: pipe: %s\n", strerror(errno));
        return 1;
    }
    unsigned long flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
                          SIGCHLD; /* CLONE_NEWCGROUP: after the cgroup move */
    /* CLONE_NEWNET: C makes its network namespace itself (netns_join) */
    uid_t uid = getuid();
    gid_t gid = getgid();
    /* Root mode: the user namespace is created as the sandbox's own host uid (uid_base, the
     * uid its root maps to), not as host root. The kernel charges per-user counts (inotify
     * instances and watches, queued signals, user namespaces, mqueue bytes) of everything in
     * the namespace to its creator: with host root as the creator, a program that used up
     * its 128 inotify instances or its queued signals took them from host root and from every
     * other sandbox. Only the effective ids change (the real and saved ones stay root), so
     * we return to root right after, to write the id maps. */
    bool own_uid = !o.rootless && uid == 0 && o.uid_base > 0;
    if (own_uid && (setresgid((gid_t)-1, (gid_t)o.uid_base, (gid_t)-1) < 0 ||
                    setresuid((uid_t)-1, (uid_t)o.uid_base, (uid_t)-1) < 0)) {
        fprintf(stderr, "sbx-agent boot: cannot become the sandbox's uid %lu: %s\n", o.uid_base,
                strerror(errno));
        return 1;
    }
    pid_t pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, 0);
    if (pid != 0 && own_uid &&
        (setresuid((uid_t)-1, 0, (uid_t)-1) < 0 || setresgid((gid_t)-1, 0, (gid_t)-1) < 0)) {
        fprintf(stderr, "sbx-agent boot: cannot return to root: %s\n", strerror(errno));
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
        }
        return 1;
    }
    if (pid < 0 && errno == EAGAIN) {
        fprintf(stderr,
                "sbx-agent boot: no process left for the sandbox's init (clone: %s): the host's "
                "process limits or the sandbox's pids limit, which its launcher counts against "
                "while it boots, are reached\n",
                strerror(EAGAIN));
        return 1;
    }
    if (pid < 0) {
        int e = errno;
        fprintf(stderr,
                "sbx-agent boot: kernel feature missing: cannot create user/pid/mount/net/ipc/"
                "uts/cgroup namespaces (clone: %s). Fix: enable unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces>0; "
                "on Ubuntu 24.04+ also kernel.apparmor_restrict_unprivileged_userns=0), or run "
                "as root\n",
                strerror(e));
        return 1;
    }
    if (pid == 0)
        child_setup(&o);
    close(go_pipe[0]);
    close(ready_pipe[1]);
    /* A write to C's go_pipe after C died must fail (EPIPE), not kill P: P then says what C
     * reported. Only P ignores it: C, cloned before, keeps the default its programs expect. */
    signal(SIGPIPE, SIG_IGN);
    char map[128];
    int rc;
    if (o.rootless) {
        rc = write_proc(pid, "setgroups", "deny");
        if (rc == 0) {
            snprintf(map, sizeof map, "0 %u 1\n", (unsigned)uid);
            rc = write_proc(pid, "uid_map", map);
        }
        if (rc == 0) {
            snprintf(map, sizeof map, "0 %u 1\n", (unsigned)gid);
            rc = write_proc(pid, "gid_map", map);
        }
    } else {
        snprintf(map, sizeof map, "0 %lu 65536\n", o.uid_base);
        rc = write_proc(pid, "uid_map", map);
        if (rc == 0)
            rc = write_proc(pid, "gid_map", map);
        /* The OOM killer must take programs (which raise their own score), never PID 1. */
        if (rc == 0)
            write_proc(pid, "oom_score_adj", "-1000");
    }
    if (rc != 0) {
        fprintf(stderr, "sbx-agent boot: cannot write the user namespace id map: %s\n",
                strerror(-rc));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    if (write(go_pipe[1], "g", 1) != 1)
        return child_failed(pid, "the sandbox init exited before its setup began");
    /* Move C (and so everything it will ever start) into the sandbox's cgroups it was not born
     * in (v2) while it sets up its mounts; then let it enter its cgroup namespace. */
    char pidtext[32];
    snprintf(pidtext, sizeof pidtext, "%d", (int)pid);
    for (int i = 0; i < n_cgroups; i++) {
        if (!pending[i])
            continue; /* joined before the clone: C was born there */
        int fd = open(cgroup_procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, pidtext, strlen(pidtext)) != (ssize_t)strlen(pidtext)) {
            char why[600];
            snprintf(why, sizeof why, "cannot move the sandbox into cgroup %s: %s", cgroup_procs[i],
                     strerror(errno));
            if (fd >= 0)
                close(fd);
            return child_failed(pid, why);
        }
        close(fd);
    }
    if (write(go_pipe[1], "c", 1) != 1)
        return child_failed(pid, "the sandbox init exited during setup");
    close(go_pipe[1]);
    alarm(BOOT_READY_TIMEOUT_S); /* a wedged child must not hang the provider forever */
    char reply[1024];
    read_reply(reply, sizeof reply);
    size_t got = strlen(reply);
    if (strncmp(reply, "OK", 2) != 0) {
        fprintf(stderr, "sbx-agent boot: sandbox setup failed: %s\n",
                got > 4 ? reply + 4 : "the sandbox init exited during setup");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 1;
    }
    /* --reap: stay as the sandbox's reaper, out of the sandbox's cgroups before the report, so
     * that once the provider goes on the sandbox's pids limit no longer counts the launcher
     * (pids 2 is the init and one command: left after the report, the first command failed with
     * EAGAIN whenever the launcher was still leaving, ci151). One that cannot leave the cgroups
     * it would remove exits as without --reap, and the provider's destroy removes the sandbox
     * itself. */
    bool reaping = reaper != NULL && leave_cgroups(pending);
    if (v2_init != NULL) /* the launcher forked into v2's cgroup: P reaps, and needs the pid */
        *v2_init = pid;
    printf("pid=%d\n", (int)pid);
    fflush(stdout);
    if (reaping) {
        plan.init = pid;
        agent_reap(reaper);
    }
    return 0;
}
