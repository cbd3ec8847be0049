/* confine.c - what a program gets before it runs inside the sandbox: its own uid/gid (never
 * the agent's), no capabilities in any set, no_new_privs, rlimits, and a seccomp filter that
 * refuses at least what Docker's default profile refuses plus io_uring.
 *
 * Runs in the forked child between fork() and execve(); the agent is single-threaded, so
 * anything may be called here. It must never return to the agent's loop on failure: a program
 * that cannot be confined does not run (exit 126 with a line on stderr).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

/* Core files could leak memory contents of the program into the workspace at great size. */
#define CONFINE_RLIMIT_CORE 0
/* Largest single file a program may write: the writable mounts are size-bounded tmpfs anyway;
 * this stops a runaway write from filling them with one file. 4 GiB. */
#define CONFINE_RLIMIT_FSIZE (4ull << 30)

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

/* Syscalls refused with EPERM. Docker's default profile refuses every one of these (they are
 * outside its allowlist unless a capability the program never has is granted); io_uring is
 * refused because most 2022-2023 kernel exploits in kCTF went through it (moby #46762). */
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
    {"io_uring_setup", "io_uring: bypasses seccomp for its ops; many kernel exploits"},
    {"io_uring_enter", "io_uring"},
    {"io_uring_register", "io_uring"},
    {"kexec_load", "replaces the running kernel"},
    {"kexec_file_load", "replaces the running kernel"},
    {"init_module", "loads a kernel module"},
    {"finit_module", "loads a kernel module"},
    {"delete_module", "unloads a kernel module"},
    {"create_module", "legacy module loading"},
    {"get_kernel_syms", "legacy module interface"},
    {"query_module", "legacy module interface"},
    {"ptrace", "tracing other processes (the agent among them)"},
    {"process_vm_readv", "reads another process's memory"},
    {"process_vm_writev", "writes another process's memory"},
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
    {"name_to_handle_at", "file handles: pairs with open_by_handle_at"},
    {"quotactl", "filesystem quotas (CAP_SYS_ADMIN)"},
    {"quotactl_fd", "filesystem quotas (CAP_SYS_ADMIN)"},
    {"settimeofday", "host clock"},
    {"clock_settime", "host clock"},
    {"clock_adjtime", "host clock"},
    {"adjtimex", "host clock"},
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
    {"get_mempolicy", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"set_mempolicy", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"mbind", "NUMA policy (CAP_SYS_NICE in Docker)"},
    {"move_pages", "NUMA page moves of other processes"},
    {"migrate_pages", "NUMA page moves of other processes"},
    {"vm86", "virtual 8086 mode"},
    {"vm86old", "virtual 8086 mode"},
    {"mknod", "device nodes (CAP_MKNOD is dropped; belt and braces)"},
    {"mknodat", "device nodes"},
    {"chroot", "changes root: no use inside the sandbox"},
};

static int deny(scmp_filter_ctx ctx, int nr, int err)
{
    if (nr == __NR_SCMP_ERROR || nr < 0)
        return 0; /* not a syscall on this architecture */
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t)err), nr, 0);
}

/* The filter compiled once per agent (libseccomp's compile costs ~0.3 ms, more than the rest
 * of a warm exec), loaded in each child with one prctl. BPF_MAXINSNS bounds a program. */
static struct sock_filter compiled[BPF_MAXINSNS];
static unsigned short compiled_len;

static int build_filter(scmp_filter_ctx *out);

int confine_seccomp_prepare(void)
{
    if (compiled_len)
        return 0;
    scmp_filter_ctx ctx;
    int rc = build_filter(&ctx);
    if (rc != 0)
        return rc;
    int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        seccomp_release(ctx);
        return -errno;
    }
    rc = seccomp_export_bpf(ctx, fd);
    seccomp_release(ctx);
    struct stat st;
    if (rc == 0 && (fstat(fd, &st) < 0 || st.st_size <= 0 || (size_t)st.st_size > sizeof compiled ||
                    st.st_size % (off_t)sizeof(struct sock_filter) != 0))
        rc = -EINVAL;
    if (rc == 0 && pread(fd, compiled, (size_t)st.st_size, 0) != st.st_size)
        rc = -EIO;
    close(fd);
    if (rc == 0)
        compiled_len = (unsigned short)((size_t)st.st_size / sizeof(struct sock_filter));
    return rc;
}

int confine_seccomp(void)
{
    if (compiled_len == 0) {
        int rc = confine_seccomp_prepare();
        if (rc != 0)
            return rc;
    }
    struct sock_fprog prog = {compiled_len, compiled};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return -errno;
    return 0;
}

static int build_filter(scmp_filter_ctx *out)
{
    /* Default allow, explicit deny list: programs are arbitrary (python, compilers, shells).
     * Non-native architectures (i386 via int 0x80, x32) are killed outright by libseccomp's
     * bad-arch action: their syscall numbers would bypass this list. */
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (rc != 0) /* kernels before 4.14 (and valgrind) lack KILL_PROCESS: kill the thread */
        rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_THREAD);
    for (size_t i = 0; rc == 0 && i < sizeof refused / sizeof refused[0]; i++)
        rc = deny(ctx, seccomp_syscall_resolve_name(refused[i].name), EPERM);
    /* clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc fall back to
     * clone, whose flags we can check (Docker does the same). */
    if (rc == 0)
        rc = deny(ctx, seccomp_syscall_resolve_name("clone3"), ENOSYS);
    /* clone with any namespace flag (Docker's mask 0x7E020000 plus CLONE_NEWTIME): one rule
     * per bit, each matching when that bit is set. */
    const uint64_t ns_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                              CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | CLONE_NEWTIME;
    for (int bit = 0; rc == 0 && bit < 32; bit++) {
        uint64_t f = 1ull << bit;
        if (ns_flags & f)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
    }
    /* AF_VSOCK reaches the hypervisor (Docker refuses it); AF_NETLINK stays (ip, glibc).
     * AF_PACKET needs CAP_NET_RAW, which programs never hold. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                              SCMP_A0(SCMP_CMP_EQ, AF_VSOCK));
    /* TIOCSTI / TIOCLINUX push input into a terminal another process reads (CVE-2017-5226). */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX));
    /* personality: refuse the flags that weaken the address space (READ_IMPLIES_EXEC,
     * ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT); Docker allows only a handful of
     * plain values for the same reason. */
    static const uint32_t weak_persona[] = {0x0400000u, 0x0040000u, 0x0100000u, 0x0200000u};
    for (size_t i = 0; rc == 0 && i < sizeof weak_persona / sizeof weak_persona[0]; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, weak_persona[i], weak_persona[i]));
    if (rc != 0) {
        seccomp_release(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

void confine_program(uid_t uid, gid_t gid, bool keep_uid, uint64_t nofile)
{
    /* A fresh session: no controlling terminal shared with the agent, and the program's
     * process group id is its session id, which is what timeouts kill. */
    if (setsid() < 0)
        die("setsid", errno);
    /* The OOM killer must pick the program, never PID 1 (which the launcher protected). */
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = write(fd, "1000", 4);
        (void)w;
        close(fd);
    }
    struct rlimit rl = {CONFINE_RLIMIT_CORE, CONFINE_RLIMIT_CORE};
    if (setrlimit(RLIMIT_CORE, &rl) < 0)
        die("RLIMIT_CORE", errno);
    rl.rlim_cur = rl.rlim_max = (rlim_t)CONFINE_RLIMIT_FSIZE;
    if (setrlimit(RLIMIT_FSIZE, &rl) < 0 && errno != EPERM)
        die("RLIMIT_FSIZE", errno);
    if (nofile) {
        rl.rlim_cur = rl.rlim_max = (rlim_t)nofile;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && errno != EPERM)
            die("RLIMIT_NOFILE", errno);
    }
    /* Bounding set first (needs CAP_SETPCAP, which the agent still has), then ambient. */
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) < 0)
            break; /* past CAP_LAST_CAP */
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
            die("PR_CAPBSET_DROP", errno);
    }
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        die("PR_CAP_AMBIENT_CLEAR_ALL", errno);
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
    int rc = confine_seccomp();
    if (rc != 0)
        die("seccomp", -rc);
}
