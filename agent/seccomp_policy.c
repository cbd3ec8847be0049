/* seccomp_policy.c - the seccomp policy of programs, as libseccomp rules: an allow-list
 * modelled on Docker's default profile, the syscalls refused by name, and the argument rules.
 * It runs at build time only (sbx-seccomp-gen compiles it to BPF, which sbx-agent embeds):
 * compiling ~350 rules costs libseccomp some 13 million instructions, more than the whole
 * start of a sandbox. This file must not load a filter or run in the agent.
 */
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>

#include "seccomp_policy.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* Longest syscall name in the tables below, plus room (the longest today has 28 characters). */
#define POLICY_MAX_SYSCALL_NAME 48

/* The allow-list: Docker's default profile (moby profiles/seccomp/default.json, itself an
 * allow-list) for the x86_64/aarch64 names, minus what `refused` below takes out. Everything not
 * named here or given a rule in seccomp_policy_build fails with ENOSYS: a syscall newer than this
 * list (memfd_secret's successors, cachestat, ...) looks unimplemented, so libc falls back to an
 * older call instead of failing the way EPERM would make it. Names a given architecture lacks
 * (chown32, socketcall, ...) resolve to no number and are skipped. Held back by rule instead
 * of listed: clone (no namespace flags), socket (no AF_VSOCK), ioctl (no TIOCSTI/TIOCLINUX),
 * personality (Docker's five values), mknod/mknodat (FIFOs only). Each entry is one group of
 * space-separated names. */
static const char *const allowed[] = {
    /* files and directories */
    "access chdir chmod chown chown32 close close_range copy_file_range creat dup dup2 dup3 "
    "faccessat faccessat2 fadvise64 fadvise64_64 fallocate fchdir fchmod fchmodat fchown "
    "fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fremovexattr "
    "fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futimesat "
    "getcwd getdents getdents64 getxattr inotify_add_watch inotify_init inotify_init1 "
    "inotify_rm_watch lchown lchown32 lgetxattr link linkat listxattr llistxattr _llseek "
    "lremovexattr lseek lsetxattr lstat lstat64 mkdir mkdirat newfstatat open openat openat2 "
    "pread64 preadv preadv2 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv "
    "removexattr rename renameat renameat2 rmdir sendfile sendfile64 setxattr splice stat "
    "stat64 statfs statfs64 statx symlink symlinkat sync sync_file_range syncfs tee truncate "
    "truncate64 umask unlink unlinkat utime utimensat utimensat_time64 utimes vmsplice write "
    "writev ",
    /* asynchronous I/O (the old aio, not io_uring), polling, events */
    "io_cancel io_destroy io_getevents io_pgetevents io_pgetevents_time64 io_setup io_submit "
    "epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 epoll_wait "
    "epoll_wait_old eventfd eventfd2 poll ppoll ppoll_time64 pselect6 pselect6_time64 select "
    "_newselect signalfd signalfd4 timerfd_create timerfd_gettime timerfd_gettime64 "
    "timerfd_settime timerfd_settime64 pipe pipe2 ",
    /* memory */
    "brk madvise membarrier memfd_create mincore mlock mlock2 mlockall mmap mmap2 mprotect "
    "mremap msync munlock munlockall munmap pkey_alloc pkey_free pkey_mprotect remap_file_pages ",
    /* processes, threads, signals, scheduling */
    "arch_prctl modify_ldt capget capset execve execveat exit exit_group fork vfork futex "
    "futex_time64 futex_waitv get_robust_list set_robust_list get_thread_area set_thread_area "
    "set_tid_address getcpu getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups "
    "getgroups32 getpgid getpgrp getpid getppid getpriority getresgid getresgid32 getresuid "
    "getresuid32 getrlimit getrusage getsid gettid getuid getuid32 ioprio_get ioprio_set kill "
    "tgkill tkill pidfd_open pidfd_send_signal prctl prlimit64 process_mrelease restart_syscall "
    "rseq rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend "
    "rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sigaltstack sigprocmask sigreturn "
    "sched_getaffinity sched_getattr sched_getparam sched_get_priority_max "
    "sched_get_priority_min sched_getscheduler sched_rr_get_interval "
    "sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam "
    "sched_setscheduler sched_yield seccomp landlock_add_rule landlock_create_ruleset "
    "landlock_restrict_self setfsgid setfsgid32 setfsuid setfsuid32 setgid setgid32 setgroups "
    "setgroups32 setpgid setpriority setregid setregid32 setresgid setresgid32 setresuid "
    "setresuid32 setreuid setreuid32 setrlimit ugetrlimit setsid setuid setuid32 wait4 waitid "
    "waitpid ",
    /* time (reading it; setting it is refused) */
    "alarm clock_getres clock_getres_time64 clock_gettime clock_gettime64 clock_nanosleep "
    "clock_nanosleep_time64 getitimer setitimer gettimeofday nanosleep pause time times "
    "timer_create timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime "
    "timer_settime64 ",
    /* sockets (socket itself by rule) */
    "accept accept4 bind connect getpeername getsockname getsockopt listen recv recvfrom "
    "recvmmsg recvmmsg_time64 recvmsg send sendmmsg sendmsg sendto setsockopt shutdown "
    "socketcall socketpair ",
    /* System V and POSIX IPC (namespaced: the sandbox has its own IPC namespace) */
    "ipc mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 mq_timedsend "
    "mq_timedsend_time64 mq_unlink msgctl msgget msgrcv msgsnd semctl semget semop semtimedop "
    "semtimedop_time64 shmat shmctl shmdt shmget ",
    /* the rest */
    "getrandom sysinfo uname ",
};

/* Refused with EPERM by name (a program that asks gets a clear "not permitted", and the audit
 * tests tell a filter refusal from the kernel's own answer). Docker's profile leaves all of these
 * out unless a capability the program never holds is granted, except the ones marked (+): those
 * Docker allows and sbx does not. */
static const struct {
    const char *name;
    const char *why;
} refused[] = {
    {"acct", "process accounting: host-wide switch (CAP_SYS_PACCT)"},
    {"add_key", "kernel keyrings are not namespaced"},
    {"request_key", "kernel keyrings are not namespaced"},
    {"keyctl", "kernel keyrings are not namespaced"},
    {"bpf", "eBPF programs: large kernel attack surface"},
    {"perf_event_open", "perf: side channels and a history of kernel bugs"},
    {"userfaultfd", "stalls kernel page faults: a classic race-exploit primitive"},
    {"io_uring_setup", "(+) io_uring: bypasses seccomp for its ops; many kernel exploits"},
    {"io_uring_enter", "(+) io_uring"},
    {"io_uring_register", "(+) io_uring"},
    {"memfd_secret", "(+) memory removed from the kernel's direct map: hides a program's memory "
                     "from the host's own inspection, and is young code"},
    {"kexec_load", "replaces the running kernel"},
    {"kexec_file_load", "replaces the running kernel"},
    {"init_module", "loads a kernel module"},
    {"finit_module", "loads a kernel module"},
    {"delete_module", "unloads a kernel module"},
    {"create_module", "legacy module loading"},
    {"get_kernel_syms", "legacy module interface"},
    {"query_module", "legacy module interface"},
    {"ptrace", "(+) tracing other processes (the agent among them)"},
    {"process_vm_readv", "(+) reads another process's memory"},
    {"process_vm_writev", "(+) writes another process's memory"},
    {"kcmp", "compares kernel objects of other processes (info leak)"},
    {"pidfd_getfd", "copies another process's file descriptors (CAP_SYS_PTRACE in Docker)"},
    {"process_madvise", "advises on another process's memory (CAP_SYS_PTRACE in Docker)"},
    {"set_mempolicy_home_node", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"mount", "mount table changes"},
    {"umount", "mount table changes"},
    {"umount2", "mount table changes"},
    {"pivot_root", "root filesystem changes"},
    {"fsopen", "new mount API"},
    {"fsconfig", "new mount API (CVE-2022-0185)"},
    {"fsmount", "new mount API"},
    {"fspick", "new mount API"},
    {"move_mount", "new mount API"},
    {"open_tree", "new mount API"},
    {"mount_setattr", "new mount API"},
    {"unshare", "new namespaces widen the kernel attack surface"},
    {"setns", "joining other namespaces"},
    {"swapon", "host swap"},
    {"swapoff", "host swap"},
    {"reboot", "reboots the host or the pid namespace"},
    {"syslog", "kernel log: address leaks"},
    {"open_by_handle_at", "opens files by handle, bypassing the mount root (shocker)"},
    {"name_to_handle_at", "(+) file handles: pairs with open_by_handle_at"},
    {"quotactl", "filesystem quotas (CAP_SYS_ADMIN)"},
    {"quotactl_fd", "filesystem quotas (CAP_SYS_ADMIN)"},
    {"settimeofday", "host clock"},
    {"clock_settime", "host clock"},
    {"clock_adjtime", "(+) host clock (read-only use needs no syscall of its own)"},
    {"adjtimex", "(+) host clock"},
    {"stime", "host clock"},
    {"sethostname", "UTS name (CAP_SYS_ADMIN in Docker)"},
    {"setdomainname", "UTS name (CAP_SYS_ADMIN in Docker)"},
    {"iopl", "raw I/O port access"},
    {"ioperm", "raw I/O port access"},
    {"lookup_dcookie", "profiling interface (CAP_SYS_ADMIN)"},
    {"nfsservctl", "kernel nfs daemon control"},
    {"uselib", "legacy shared library loading"},
    {"ustat", "obsolete; leaks device info"},
    {"sysfs", "obsolete filesystem type query"},
    {"_sysctl", "obsolete sysctl interface"},
    {"vhangup", "terminal hangup (CAP_SYS_TTY_CONFIG)"},
    {"pciconfig_read", "PCI configuration space"},
    {"pciconfig_write", "PCI configuration space"},
    {"pciconfig_iobase", "PCI configuration space"},
    {"fanotify_init", "filesystem-wide monitoring (CAP_SYS_ADMIN)"},
    {"fanotify_mark", "(+) no use without fanotify_init"},
    {"get_mempolicy", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"set_mempolicy", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"mbind", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"move_pages", "NUMA page moves of other processes"},
    {"migrate_pages", "NUMA page moves of other processes"},
    {"vm86", "virtual 8086 mode"},
    {"vm86old", "virtual 8086 mode"},
    {"chroot", "changes root: no use inside the sandbox"},
};

static int add_by_name(scmp_filter_ctx ctx, uint32_t action, const char *name)
{
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0; /* not a syscall on this architecture (or a multiplexer it lacks) */
    return seccomp_rule_add(ctx, action, nr, 0);
}

/* Adds one rule per space-separated name of `names`. */
static int add_each(scmp_filter_ctx ctx, uint32_t action, const char *names)
{
    /* zeroed: libseccomp's lookup compares with a vector strcmp that reads past the NUL */
    char name[POLICY_MAX_SYSCALL_NAME] = {0};
    int rc = 0;
    for (const char *p = names; rc == 0 && *p;) {
        size_t n = strcspn(p, " ");
        if (n >= sizeof name)
            return -ENAMETOOLONG; /* a typo in the table: fail closed */
        memset(name, 0, sizeof name);
        memcpy(name, p, n);
        if (n)
            rc = add_by_name(ctx, action, name);
        p += n + (p[n] == ' ');
    }
    return rc;
}

/* Low 32 bits of argument `arg` equal to v: the kernel declares these arguments int or unsigned
 * int and drops the upper half, so a filter comparing all 64 bits would let (1 << 32) | v past
 * a rule on v. */
static struct scmp_arg_cmp low32_eq(unsigned arg, uint32_t v)
{
    return (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, v};
}

/* Allows nr unless the low 32 bits of `arg` are a or b (a == b for one value), with rules that
 * never overlap: libseccomp lets an unconditional rule win over every conditional rule of the
 * same syscall, so "allow, except ..." has to be spelt as the union of the other cases. Those
 * are: some bit on which a and b agree differs from theirs (one rule per such bit), or every
 * such bit matches and the bits where a and b differ form neither a nor b (one rule per
 * combination; a and b here differ in at most 3 bits). */
static int allow_unless_low32(scmp_filter_ctx ctx, int nr, unsigned arg, uint32_t a, uint32_t b)
{
    uint32_t differ = a ^ b;
    int rc = 0;
    for (unsigned bit = 0; rc == 0 && bit < 32; bit++) {
        uint32_t m = 1u << bit;
        if (differ & m)
            continue;
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
                              (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, m, (~a) & m});
    }
    /* enumerate the subsets of `differ` (at most 2^3 here) */
    uint32_t sub = 0;
    do {
        uint32_t v = (a & ~differ) | sub;
        if (rc == 0 && v != a && v != b)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, low32_eq(arg, v));
        sub = (sub - differ) & differ;
    } while (rc == 0 && sub != 0);
    return rc;
}

int seccomp_policy_build(scmp_filter_ctx *out, bool for_agent)
{
    /* Default deny (ENOSYS, see `allowed`). Non-native architectures (i386 via int 0x80, x32
     * via bit 30 of the number) are killed outright by libseccomp's bad-arch action: their
     * numbers mean other syscalls, and a program that uses them is attacking the filter. */
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
    if (!ctx)
        return -ENOMEM;
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc != 0) /* kernels before 4.14 (and valgrind) lack KILL_PROCESS: kill the thread */
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD);
    /* A binary search over the syscall number instead of a linear chain of ~350 compares:
     * every syscall of every program runs this filter. */
    if (rc == 0)
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    for (size_t i = 0; rc == 0 && i < sizeof allowed / sizeof allowed[0]; i++)
        rc = add_each(ctx, SCMP_ACT_ALLOW, allowed[i]);
    for (size_t i = 0; rc == 0 && i < sizeof refused / sizeof refused[0]; i++)
        rc = add_by_name(ctx, SCMP_ACT_ERRNO(EPERM), refused[i].name);
    /* clone3 passes its flags in memory seccomp cannot read: it is left to the default, ENOSYS,
     * which makes libc fall back to clone, whose flags we can check (Docker does the same;
     * libseccomp refuses a rule that repeats the default action). */
    /* clone without any namespace flag (Docker's mask 0x7E020000 plus CLONE_NEWTIME); with one,
     * EPERM: one rule per bit, each matching when that bit is set. The kernel reads only the
     * low 32 bits of the flags, and so do these masks. */
    const uint32_t ns_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                              CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME;
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags, 0));
    for (unsigned bit = 0; rc == 0 && bit < 32; bit++) {
        uint32_t f = 1u << bit;
        if (ns_flags & f)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
    }
    /* Every socket family but AF_VSOCK, which reaches the hypervisor (Docker refuses it).
     * AF_NETLINK stays (ip, glibc); AF_PACKET and raw sockets need CAP_NET_RAW, never held. */
    if (rc == 0)
        rc = allow_unless_low32(ctx, SCMP_SYS(socket), 0, AF_VSOCK, AF_VSOCK);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                              low32_eq(0, AF_VSOCK));
    /* Every ioctl but TIOCSTI / TIOCLINUX, which push input into a terminal another process
     * reads (CVE-2017-5226). */
    if (rc == 0)
        rc = allow_unless_low32(ctx, SCMP_SYS(ioctl), 1, TIOCSTI, TIOCLINUX);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, low32_eq(1, TIOCSTI));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              low32_eq(1, TIOCLINUX));
    /* personality: Docker's values only (PER_LINUX, PER_LINUX32, UNAME26 and both, and the
     * 0xffffffff query); EPERM for the flags that weaken the address space (READ_IMPLIES_EXEC,
     * ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT), ENOSYS for the rest. */
    static const uint32_t persona_ok[] = {0x0u, 0x8u, 0x20000u, 0x20008u, 0xffffffffu};
    for (size_t i = 0; rc == 0 && i < sizeof persona_ok / sizeof persona_ok[0]; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                              low32_eq(0, persona_ok[i]));
    static const uint32_t weak_persona[] = {0x0400000u, 0x0040000u, 0x0100000u, 0x0200000u};
    for (size_t i = 0; rc == 0 && i < sizeof weak_persona / sizeof weak_persona[0]; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, weak_persona[i], weak_persona[i]));
    /* mknod/mknodat: FIFOs only (mkfifo is mknod(S_IFIFO)); every other file type, devices
     * first, EPERM. The kernel keeps the low 16 bits of the mode, S_IFMT among them. */
    static const struct {
        const char *name;
        unsigned mode_arg;
    } mknods[] = {{"mknod", 1}, {"mknodat", 2}};
    for (size_t i = 0; rc == 0 && i < sizeof mknods / sizeof mknods[0]; i++) {
        int nr = seccomp_syscall_resolve_name(mknods[i].name);
        if (nr == __NR_SCMP_ERROR || nr < 0)
            continue;
        for (uint32_t type = 0; rc == 0 && type <= (S_IFMT >> 12); type++) {
            uint32_t fmt = type << 12;
            rc = seccomp_rule_add(
                ctx, fmt == S_IFIFO ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EPERM), nr, 1,
                (struct scmp_arg_cmp){mknods[i].mode_arg, SCMP_CMP_MASKED_EQ, S_IFMT, fmt});
        }
    }
    /* The agent's fork_into_cgroup (clone3 with CLONE_INTO_CGROUP: a fork born in its v2
     * cgroup, without the wait a write to cgroup.procs costs). */
    if (rc == 0 && for_agent)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone3), 0);
    if (rc != 0) {
        seccomp_release(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}
