/* confine.c - what a program gets before it runs inside the sandbox: its own uid/gid (never
 * the agent's), no capabilities in any set, no_new_privs, rlimits, and the allow-list seccomp
 * filter of seccomp_policy.c (modelled on Docker's default profile, without io_uring, ptrace or
 * memfd_secret), embedded as BPF compiled at build time.
 *
 * Runs in the forked child between fork() and execve(); the agent is single-threaded, so
 * anything may be called here. It must never return to the agent's loop on failure: a program
 * that cannot be confined does not run (exit 126 with a line on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

/* Core files could leak memory contents of the program into the workspace at great size. */
#define CONFINE_RLIMIT_CORE 0
/* Largest single file a program may write: the writable mounts are size-bounded tmpfs anyway;
 * this stops a runaway write from filling them with one file. 4 GiB. */
#define CONFINE_RLIMIT_FSIZE (4ull << 30)
/* Signals queued to the program's uid: the host default (~1/12 of RAM pages' worth) lets one uid
 * pin ~100k; ample for any program (docker's DOCKER_ULIMIT_SIGPENDING is the same). */
#define CONFINE_RLIMIT_SIGPENDING 1024
/* Locked memory and POSIX message-queue bytes of the program's uid: the kernel's own defaults
 * (8 MiB since Linux 5.16; 800 KiB), set here so a sandbox never inherits what the process that
 * started it was given (a worker under LimitMEMLOCK=infinity, a root shell's `ulimit -l
 * unlimited`): unlimited mlock pins host memory the kernel can never reclaim, and rootless
 * sandboxes have no memory cgroup to bound it. Only ever lowered, never raised. */
#define CONFINE_RLIMIT_MEMLOCK (8ull << 20)
#define CONFINE_RLIMIT_MSGQUEUE 819200ull

static void die(const char *what, int err)
{
    char line[256];
    int n = snprintf(line, sizeof line, "sbx-agent: cannot confine program: %s: %s\n", what,
                     strerror(err));
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    _exit(126);
}

/* The filters, compiled to BPF at build time from seccomp_policy.c (sbx-seccomp-gen): loading
 * one is one prctl, with nothing to compile in the agent or per program. */
#include "seccomp_delta.h"
#include "seccomp_policy_bpf.h"

int confine_seccomp_prepare(void)
{
    return sizeof seccomp_policy_bpf / sizeof seccomp_policy_bpf[0] <= BPF_MAXINSNS ? 0 : -E2BIG;
}

/* Whether this process (the agent, and so each fork of it) runs under the agent's filter: then
 * a program adds only seccomp_delta.h's instructions to be under the programs' policy. */
static bool agent_filtered;

static int load(struct sock_filter *insn, size_t n)
{
    struct sock_fprog prog = {(unsigned short)n, insn};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return -errno;
    return 0;
}

int confine_seccomp_agent(void)
{
    int rc = load(seccomp_agent_bpf, sizeof seccomp_agent_bpf / sizeof seccomp_agent_bpf[0]);
    if (rc == 0)
        agent_filtered = true;
    return rc;
}

int confine_seccomp(void)
{
    if (agent_filtered)
        return load(seccomp_delta_bpf, sizeof seccomp_delta_bpf / sizeof seccomp_delta_bpf[0]);
    return load(seccomp_policy_bpf, sizeof seccomp_policy_bpf / sizeof seccomp_policy_bpf[0]);
}

/* This process's bounding set is empty (confine_empty_bounding) and so is every fork's. */
static bool bounding_empty;

/* Drops every capability still in the bounding set: 0, or -errno of a drop that failed with
 * more than EPERM (a process without CAP_SETPCAP keeps what it cannot drop; *empty says). */
static int drop_bounding(bool *empty)
{
    *empty = true;
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
            continue; /* dropping one not in the set succeeds too: one call per capability */
        if (errno == EINVAL)
            break; /* past CAP_LAST_CAP */
        if (errno != EPERM)
            return -errno;
        /* No CAP_SETPCAP (checked before the capability's number): keep what is left. */
        int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in < 0)
            break;
        if (in == 1)
            *empty = false;
    }
    return 0;
}

void confine_empty_bounding(void)
{
    bool empty = false;
    if (drop_bounding(&empty) == 0)
        bounding_empty = empty;
}

/* resource at most max (soft and hard): lowered when above, left alone when already below. */
static void lower_rlimit(int resource, const char *name, rlim_t max)
{
    struct rlimit rl;
    if (getrlimit(resource, &rl) < 0)
        die(name, errno);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= max && rl.rlim_cur <= max)
        return;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > max)
        rl.rlim_max = max;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > rl.rlim_max)
        rl.rlim_cur = rl.rlim_max;
    if (setrlimit(resource, &rl) < 0)
        die(name, errno);
}

void confine_prepare(uint64_t nofile)
{
    struct rlimit rl = {CONFINE_RLIMIT_CORE, CONFINE_RLIMIT_CORE};
    if (setrlimit(RLIMIT_CORE, &rl) < 0)
        die("RLIMIT_CORE", errno);
    rl.rlim_cur = rl.rlim_max = (rlim_t)CONFINE_RLIMIT_FSIZE;
    if (setrlimit(RLIMIT_FSIZE, &rl) < 0 && errno != EPERM)
        die("RLIMIT_FSIZE", errno);
    rl.rlim_cur = rl.rlim_max = CONFINE_RLIMIT_SIGPENDING;
    if (setrlimit(RLIMIT_SIGPENDING, &rl) < 0 && errno != EPERM)
        die("RLIMIT_SIGPENDING", errno);
    lower_rlimit(RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", (rlim_t)CONFINE_RLIMIT_MEMLOCK);
    lower_rlimit(RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", (rlim_t)CONFINE_RLIMIT_MSGQUEUE);
    if (nofile) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)nofile;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && errno != EPERM)
            die("RLIMIT_NOFILE", errno);
    }
    /* Bounding set first (needs CAP_SETPCAP, which the agent still has), then ambient; a fork
     * of an agent that emptied its own bounding set inherits an empty one. */
    bool empty = bounding_empty;
    int rc = empty ? 0 : drop_bounding(&empty);
    if (rc != 0)
        die("PR_CAPBSET_DROP", -rc);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        die("PR_CAP_AMBIENT_CLEAR_ALL", errno);
}

/* What the agent still does once it serves, and the capability (of the sandbox's user
 * namespace) each needs: signal programs of another uid (KILL); take a program's fsuid for the
 * file API and set a program's ids before its execve (SETUID, SETGID); read /proc/PID of
 * programs behind hidepid=2 for the sweep (SYS_PTRACE; the ptrace syscall itself stays refused
 * by its filter); work in its own and the cgroups' directories as their root (CHOWN,
 * DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID). */
#define AGENT_KEPT_CAPS                                                                            \
    ((1ULL << CAP_KILL) | (1ULL << CAP_SETUID) | (1ULL << CAP_SETGID) | (1ULL << CAP_SYS_PTRACE) | \
     (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH) |            \
     (1ULL << CAP_FOWNER) | (1ULL << CAP_FSETID))

int confine_agent_caps(void)
{
    /* First: a fork then loads its seccomp filter under no_new_privs, not CAP_SYS_ADMIN. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -errno;
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        uint32_t keep = (uint32_t)(AGENT_KEPT_CAPS >> (32 * i));
        data[i].effective &= keep;
        data[i].permitted &= keep;
        data[i].inheritable = 0;
    }
    if (syscall(SYS_capset, &hdr, data) < 0)
        return -errno;
    return 0;
}

/* confine_identity without its last step: session, OOM score, uid and gid, no capabilities,
 * no_new_privs. */
static void identity_steps(uid_t uid, gid_t gid, bool keep_uid)
{
    /* A fresh session: no controlling terminal shared with the agent, and the program's
     * process group id is its session id, which is what timeouts kill. */
    if (setsid() < 0)
        die("setsid", errno);
    /* The OOM killer must pick the program, never PID 1 (which the launcher protected).
     * Raising the score needs no privilege, but /proc/self of a non-dumpable process (we are
     * a fork of the agent, which is) belongs to the host's root, which no uid of the sandbox
     * is: open() failed with EACCES. Dumpable for this one write is safe: nothing of the
     * program's runs yet, and it is cleared right after (execve then decides for the
     * program, as it always did). */
    if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
        die("PR_SET_DUMPABLE", errno);
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) { /* best effort: PID 1's own -1000 is what protects the agent */
        ssize_t w = write(fd, "1000", 4);
        (void)w;
        close(fd);
    }
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        die("PR_SET_DUMPABLE", errno);
    if (!keep_uid) {
        if (setgroups(0, NULL) < 0 && errno != EPERM)
            die("setgroups", errno);
        if (setresgid(gid, gid, gid) < 0)
            die("setresgid", errno);
        if (setresuid(uid, uid, uid) < 0)
            die("setresuid", errno);
    }
    /* Permitted, effective and inheritable: all empty (setresuid to non-zero cleared them
     * already; with a shared uid 0 they must be cleared by hand). */
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &hdr, data) < 0)
        die("capset", errno);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die("PR_SET_NO_NEW_PRIVS", errno);
}

void confine_identity(uid_t uid, gid_t gid, bool keep_uid)
{
    identity_steps(uid, gid, keep_uid);
    int rc = confine_seccomp();
    if (rc != 0)
        die("seccomp", -rc);
}

void confine_identity_filtered(uid_t uid, gid_t gid, bool keep_uid)
{
    /* Fail closed: a process that reached here without its filter does not run unfiltered. */
    if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER)
        die("seccomp", EPERM);
    identity_steps(uid, gid, keep_uid);
}

void confine_program(uid_t uid, gid_t gid, bool keep_uid, uint64_t nofile)
{
    confine_prepare(nofile);
    confine_identity(uid, gid, keep_uid);
}
