/* test_audit_local.c - a security reviewer's attacks on a local sandbox that tests/escape/ does
 * not already try: foreign syscall ABIs (x32, i386 int 0x80), the rest of Docker's refused
 * syscall set, syscalls outside the allow-list, mknod (FIFOs only), ioctl/clone flag tricks, fd
 * leaks into programs, the agent's socket and /proc entry, capability sets, sensitive /proc files,
 * the cgroup view, /dev contents and /dev/shm size, host IPC objects (abstract unix sockets, SysV
 * shared memory), signals to PID 1, the file API on /proc and /.sbx, and a symlink-swap race
 * against the file API. Each test asserts containment. A test whose attack currently succeeds is
 * kept but skipped with a message starting "KNOWN ESCAPE:" (see the audit report for the fix).
 * Attack programs only ever target the sandbox itself and the host's loopback/unix sockets.
 */
#include "tests/local/local_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

typedef struct audit {
    lt_env env;
    sbx_sandbox *sb;
} audit;

static audit *A;

/* The name of a descriptor the test process holds open without O_CLOEXEC while the sandbox is
 * created, as an embedding program or a test runner might: it must not reach the sandbox. */
#define AUDIT_HOST_FD_NAME "sbx-audit-host-fd"

static int setup(void **state)
{
    A = calloc(1, sizeof *A);
    lt_open(&A->env);
    int host_fd = memfd_create(AUDIT_HOST_FD_NAME, 0);
    assert_true(host_fd >= 0);
    A->sb = lt_create(&A->env);
    close(host_fd);
    *state = A;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    lt_destroy(&A->env, A->sb);
    lt_close(&A->env);
    free(A);
    return 0;
}

/* Runs a shell line in the shared sandbox; returns stdout+stderr as a string (caller frees). */
static char *sh_out(const char *line)
{
    sbx_result *r = lt_run(&A->env, A->sb, line);
    size_t n = r->stdout.len + r->stderr.len;
    char *s = malloc(n + 1);
    assert_non_null(s);
    if (r->stdout.len)
        memcpy(s, r->stdout.data, r->stdout.len);
    if (r->stderr.len)
        memcpy(s + r->stdout.len, r->stderr.data, r->stderr.len);
    s[n] = '\0';
    sbx_message_free((ProtobufCMessage *)r);
    return s;
}

/* Writes a python program into the sandbox through the file API and runs it unbuffered;
 * its output ends with "rc=<exit status as the shell reports it>". Caller frees. */
static char *py_out(const char *code)
{
    static int seq;
    char path[64];
    snprintf(path, sizeof path, "/workspace/audit_%d.py", ++seq);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = path;
    w.content.data = (uint8_t *)code;
    w.content.len = strlen(code);
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_result *r = sbx_result_new();
    if (A->env.ops->write_file(A->sb, &w, &o, r, &err) != SBX_OK)
        fail_msg("write %s: %s", path, err.message);
    sbx_message_free((ProtobufCMessage *)r);
    char line[160];
    snprintf(line, sizeof line, "python3 -u %s 2>&1; echo rc=$?", path);
    return sh_out(line);
}

/* Skips a test whose attack currently succeeds, naming it so the suite stays green while the
 * escape is open (cmocka prints the message; the report has the reproduction and fix). */
#define KNOWN_ESCAPE(...)                                                                          \
    do {                                                                                           \
        print_message("KNOWN ESCAPE: " __VA_ARGS__);                                               \
        print_message("\n");                                                                       \
        skip();                                                                                    \
    } while (0)

static void expect_in(const char *out, const char *want, const char *what)
{
    if (!strstr(out, want))
        fail_msg("%s: expected '%s' in:\n%s", what, want, out);
}

static void expect_not_in(const char *out, const char *bad, const char *what)
{
    if (strstr(out, bad))
        fail_msg("%s: found '%s' in:\n%s", what, bad, out);
}

#define PY_SYSCALL                                                                                 \
    "import ctypes, errno\n"                                                                       \
    "libc = ctypes.CDLL(None, use_errno=True)\n"                                                   \
    "libc.syscall.restype = ctypes.c_long\n"                                                       \
    "buf = ctypes.create_string_buffer(4096)\n"                                                    \
    "def sc(name, nr, *a):\n"                                                                      \
    "    ctypes.set_errno(0)\n"                                                                    \
    "    args = [ctypes.c_long(x) if isinstance(x, int) else x for x in a]\n"                      \
    "    r = libc.syscall(ctypes.c_long(nr), *args)\n"                                             \
    "    e = ctypes.get_errno()\n"                                                                 \
    "    print(name, 'ret=%d' % r, errno.errorcode.get(e, str(e)))\n"

/* ---- foreign syscall ABIs ---------------------------------------------------------------- */

/* x32 syscalls carry the native AUDIT_ARCH with bit 30 set in the number: a filter that only
 * checks the arch would let keyctl through as 0x40000000|250. */
static void test_audit_x32_abi_syscall_kills_the_program(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "print('before', flush=True)\n"
                                  "sc('x32_keyctl', 0x40000000 | 250, 0, 0, 0, 0)\n"
                                  "print('SURVIVED')\n");
    expect_in(out, "before", "x32 probe started");
    expect_not_in(out, "SURVIVED", "x32 syscall");
    expect_in(out, "rc=159", "x32 syscall is killed with SIGSYS");
    free(out);
}

/* The int 0x80 probe: getpid through the i386 entry, from a 64-bit process. */
#define PY_INT80                                                                                   \
    "import ctypes, mmap\n"                                                                        \
    "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ|mmap.PROT_WRITE|mmap.PROT_EXEC)\n"                \
    "m.write(b'\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3')\n"                                       \
    "f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))\n"         \
    "print('before', flush=True)\n"                                                                \
    "print('SURVIVED', f())\n"

/* Whether this kernel serves int 0x80 to a 64-bit process at all, asked of the host (the probe
 * is a harmless getpid). Some kernels (no IA32 emulation, or a hypervisor that does not route
 * vector 0x80) answer it with a general protection fault, SIGSEGV, before any syscall table. */
static bool host_serves_int80(void)
{
    char path[] = "/tmp/sbx-audit-int80-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, PY_INT80, strlen(PY_INT80)) == (ssize_t)strlen(PY_INT80));
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "python3 %s 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[256] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int rc = pclose(p);
    unlink(path);
    if (strstr(out, "SURVIVED") != NULL)
        return true;
    /* Not served: the probe died of SIGSEGV on the host too (sh reports it as a status). */
    assert_true(strstr(out, "before") != NULL);
    assert_true(WIFSIGNALED(rc) ? WTERMSIG(rc) == SIGSEGV : WEXITSTATUS(rc) == 128 + SIGSEGV);
    return false;
}

/* int 0x80 enters the i386 table, where 250 etc. mean other syscalls: must be killed. Where the
 * kernel does not serve int 0x80 at all (SIGSEGV on the host too) the program must still die
 * without a result; the filter's own refusal is then untestable on this kernel. */
static void test_audit_i386_int80_kills_the_program(void **state)
{
    (void)state;
    char *out = py_out(PY_INT80);
    expect_in(out, "before", "int80 probe started");
    expect_not_in(out, "SURVIVED", "int 0x80");
    if (host_serves_int80()) {
        expect_in(out, "rc=159", "int 0x80 is killed with SIGSYS");
    } else {
        print_message("this kernel does not serve int 0x80 (SIGSEGV on the host too): the "
                      "filter's refusal of it is not exercised here\n");
        expect_in(out, "rc=139", "int 0x80 dies as it does on the host");
    }
    free(out);
}

static void test_audit_docker_refused_syscalls_are_refused(void **state)
{
    (void)state;
    /* x86_64 numbers; every line must print EPERM (the filter), never reach the kernel */
    char *out = py_out(PY_SYSCALL "sc('keyctl', 250, 0, 0, 0, 0)\n"
                                  "sc('add_key', 248, b'user', b'x', buf, 1, -4)\n"
                                  "sc('request_key', 249, b'user', b'x', 0, 0)\n"
                                  "sc('bpf', 321, 0, buf, 48)\n"
                                  "sc('perf_event_open', 298, buf, 0, -1, -1, 0)\n"
                                  "sc('userfaultfd', 323, 0)\n"
                                  "sc('unshare', 272, 0)\n"
                                  "sc('setns', 308, 0, 0)\n"
                                  "sc('umount2', 166, b'/proc', 2)\n"
                                  "sc('open_by_handle_at', 304, 3, buf, 0)\n"
                                  "sc('name_to_handle_at', 303, -100, b'/', buf, buf, 0)\n"
                                  "sc('kexec_load', 246, 0, 0, 0, 0)\n"
                                  "sc('kexec_file_load', 320, -1, -1, 0, b'', 0)\n"
                                  "sc('delete_module', 176, b'x', 0)\n"
                                  "sc('acct', 163, 0)\n"
                                  "sc('swapon', 167, b'/x', 0)\n"
                                  "sc('swapoff', 168, b'/x')\n"
                                  "sc('reboot', 169, 0xfee1dead, 672274793, 0x1234567, 0)\n"
                                  "sc('syslog', 103, 3, buf, 100)\n"
                                  "sc('iopl', 172, 3)\n"
                                  "sc('ioperm', 173, 0, 10, 1)\n"
                                  "sc('clock_settime', 227, 0, buf)\n"
                                  "sc('settimeofday', 164, buf, 0)\n"
                                  "sc('clock_adjtime', 305, 0, buf)\n"
                                  "sc('fsopen', 430, b'tmpfs', 0)\n"
                                  "sc('fsconfig', 431, -1, 0, 0, 0, 0)\n"
                                  "sc('fsmount', 432, -1, 0, 0)\n"
                                  "sc('fspick', 433, -100, b'/', 0)\n"
                                  "sc('open_tree', 428, -100, b'/', 1)\n"
                                  "sc('move_mount', 429, -1, b'', -1, b'', 0)\n"
                                  "sc('mount_setattr', 442, -1, b'', 0, buf, 32)\n"
                                  "sc('io_uring_setup', 425, 8, buf)\n"
                                  "sc('io_uring_enter', 426, -1, 0, 0, 0, 0, 0)\n"
                                  "sc('io_uring_register', 427, -1, 0, 0, 0)\n"
                                  "sc('process_vm_readv', 310, 1, buf, 1, buf, 1, 0)\n"
                                  "sc('process_vm_writev', 311, 1, buf, 1, buf, 1, 0)\n"
                                  "sc('ptrace', 101, 0, 0, 0, 0)\n"
                                  "sc('kcmp', 312, 1, 1, 0, 0, 0)\n"
                                  "sc('lookup_dcookie', 212, 0, buf, 10)\n"
                                  "sc('fanotify_init', 300, 0, 0)\n"
                                  "sc('quotactl', 179, 0, b'/', 0, buf)\n"
                                  "sc('vhangup', 153)\n"
                                  "sc('nfsservctl', 180, 0, 0, 0)\n"
                                  "sc('uselib', 134, b'/x')\n"
                                  "sc('ustat', 136, 0, buf)\n"
                                  "sc('sysfs', 139, 1, 0, 0)\n"
                                  "sc('set_mempolicy', 238, 0, 0, 0)\n"
                                  "sc('get_mempolicy', 239, 0, 0, 0, 0, 0)\n"
                                  "sc('mbind', 237, 0, 0, 0, 0, 0, 0)\n"
                                  "sc('migrate_pages', 256, 0, 64, buf, buf)\n"
                                  "sc('move_pages', 279, 0, 0, 0, 0, 0, 0)\n"
                                  "sc('chroot', 161, b'/tmp')\n"
                                  "sc('sethostname', 170, b'x', 1)\n"
                                  "sc('setdomainname', 171, b'x', 1)\n"
                                  "print('done')\n");
    expect_in(out, "done", "probe finished");
    const char *names[] = {"keyctl",
                           "add_key",
                           "request_key",
                           "bpf",
                           "perf_event_open",
                           "userfaultfd",
                           "unshare",
                           "setns",
                           "umount2",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "kexec_load",
                           "kexec_file_load",
                           "delete_module",
                           "acct",
                           "swapon",
                           "swapoff",
                           "reboot",
                           "syslog",
                           "iopl",
                           "ioperm",
                           "clock_settime",
                           "settimeofday",
                           "clock_adjtime",
                           "fsopen",
                           "fsconfig",
                           "fsmount",
                           "fspick",
                           "open_tree",
                           "move_mount",
                           "mount_setattr",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "process_vm_readv",
                           "process_vm_writev",
                           "ptrace",
                           "kcmp",
                           "lookup_dcookie",
                           "fanotify_init",
                           "quotactl",
                           "vhangup",
                           "nfsservctl",
                           "uselib",
                           "ustat",
                           "sysfs",
                           "set_mempolicy",
                           "get_mempolicy",
                           "mbind",
                           "migrate_pages",
                           "move_pages",
                           "chroot",
                           "sethostname",
                           "setdomainname"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char want[96];
        snprintf(want, sizeof want, "\n%s ret=-1 EPERM\n", names[i]);
        char *line = strstr(out, want);
        if (!line && strncmp(out, want + 1, strlen(want + 1)) != 0)
            fail_msg("%s was not refused by the filter:\n%s", names[i], out);
    }
    free(out);
}

/* Docker refuses pidfd_getfd and process_madvise without CAP_SYS_PTRACE (they act on another
 * process: pidfd_getfd copies its file descriptors). */
static void test_audit_pidfd_getfd_and_process_madvise_are_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('pidfd_getfd', 438, -1, 0, 0)\n"
                                  "sc('process_madvise', 440, -1, buf, 1, 0, 0)\n");
    bool refused =
        strstr(out, "pidfd_getfd ret=-1 EPERM") && strstr(out, "process_madvise ret=-1 EPERM");
    if (!refused) {
        free(out);
        KNOWN_ESCAPE("policy not enforced: pidfd_getfd/process_madvise reach the "
                     "kernel (Docker refuses both without CAP_SYS_PTRACE); add them to "
                     "agent/confine.c refused[]");
    }
    free(out);
}

/* clone with a namespace flag, also with junk in the upper 32 bits; clone3 is ENOSYS. */
static void test_audit_clone_namespace_flags_are_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('clone_newuser', 56, 0x10000000 | 17, 0, 0, 0, 0)\n"
                                  "sc('clone_newnet', 56, 0x40000000 | 17, 0, 0, 0, 0)\n"
                                  "sc('clone_newns_hi', 56, 0x20000 | 17 | (1 << 32), 0, 0, 0, 0)\n"
                                  "sc('clone_newtime', 56, 0x80 | 17, 0, 0, 0, 0)\n"
                                  "sc('clone3', 435, buf, 88)\n"
                                  "sc('unshare_user', 272, 0x10000000)\n");
    expect_in(out, "clone_newuser ret=-1 EPERM", "clone(CLONE_NEWUSER)");
    expect_in(out, "clone_newnet ret=-1 EPERM", "clone(CLONE_NEWNET)");
    expect_in(out, "clone_newns_hi ret=-1 EPERM", "clone(CLONE_NEWNS | 1<<32)");
    expect_in(out, "clone_newtime ret=-1 EPERM", "clone(CLONE_NEWTIME)");
    expect_in(out, "clone3 ret=-1 ENOSYS", "clone3");
    expect_in(out, "unshare_user ret=-1 EPERM", "unshare(CLONE_NEWUSER)");
    free(out);
}

/* TIOCSTI / TIOCLINUX (CVE-2017-5226 class), including with junk in the upper 32 bits of the
 * request (the kernel truncates it; a filter comparing all 64 bits would miss it). On a pipe
 * the kernel itself would answer ENOTTY: EPERM proves the filter caught it. */
static void test_audit_terminal_injection_ioctls_are_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('tiocsti', 16, 1, 0x5412, buf)\n"
                                  "sc('tiocsti_hi', 16, 1, 0x5412 | (1 << 32), buf)\n"
                                  "sc('tioclinux', 16, 1, 0x541C, buf)\n");
    expect_in(out, "tiocsti ret=-1 EPERM", "TIOCSTI");
    expect_in(out, "tiocsti_hi ret=-1 EPERM", "TIOCSTI with high bits");
    expect_in(out, "tioclinux ret=-1 EPERM", "TIOCLINUX");
    free(out);
}

/* Address-space weakening personalities (READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE). */
static void test_audit_weak_personality_is_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('rie', 135, 0x0400000)\n"
                                  "sc('norand', 135, 0x0040000)\n"
                                  "sc('pagezero', 135, 0x0100000)\n");
    expect_in(out, "rie ret=-1 EPERM", "READ_IMPLIES_EXEC");
    expect_in(out, "norand ret=-1 EPERM", "ADDR_NO_RANDOMIZE");
    expect_in(out, "pagezero ret=-1 EPERM", "MMAP_PAGE_ZERO");
    free(out);
}

/* AF_VSOCK reaches the hypervisor; AF_PACKET needs CAP_NET_RAW the program must not have. */
static void test_audit_vsock_and_packet_sockets_are_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('vsock', 41, 40, 1, 0)\n"
                                  "sc('packet', 41, 17, 3, 0)\n"
                                  "sc('raw', 41, 2, 3, 1)\n");
    expect_in(out, "vsock ret=-1", "AF_VSOCK");
    expect_in(out, "packet ret=-1", "AF_PACKET");
    expect_in(out, "raw ret=-1", "SOCK_RAW");
    free(out);
}

/* The family is an int: the kernel drops the upper 32 bits, so a filter comparing all 64 would
 * let (1 << 32) | AF_VSOCK through to a hypervisor socket (this host has AF_VSOCK). */
static void test_audit_vsock_with_junk_in_the_upper_bits_is_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('vsock_hi', 41, 40 | (1 << 32), 1, 0)\n"
                                  "sc('vsock_hi_dgram', 41, 40 | (7 << 40), 2, 0)\n");
    expect_in(out, "vsock_hi ret=-1 EAFNOSUPPORT", "AF_VSOCK | 1<<32");
    expect_in(out, "vsock_hi_dgram ret=-1 EAFNOSUPPORT", "AF_VSOCK | 7<<40");
    free(out);
}

/* Programs raise their OOM score to the maximum so the OOM killer takes them, never the agent:
 * the write failed (EACCES) while /proc/self of the forked child belonged to the host's root. */
static void test_audit_programs_carry_the_highest_oom_score(void **state)
{
    (void)state;
    char *out = sh_out("echo adj=$(cat /proc/self/oom_score_adj)");
    expect_in(out, "adj=1000", "oom_score_adj of a program");
    free(out);
}

/* The writable tmpfs mounts cap their inodes at one per 4 KiB of their size: empty files cost
 * no size, and /dev/shm (64 MiB) held 40,000 of them (the kernel's default cap is half the host's
 * RAM pages, about 1 KiB of kernel memory each). Before: all 40,000 were made. */
static void test_audit_tmpfs_inodes_are_capped(void **state)
{
    (void)state;
    char *out = py_out("import os\n"
                       "n = 0\n"
                       "try:\n"
                       "    while n < 40000:\n"
                       "        os.close(os.open('/dev/shm/f%d' % n, os.O_CREAT | os.O_WRONLY))\n"
                       "        n += 1\n"
                       "except OSError as e:\n"
                       "    print('errno', e.errno)\n"
                       "print('made', n)\n"
                       "for i in range(n):\n"
                       "    os.unlink('/dev/shm/f%d' % i)\n");
    expect_in(out, "errno 28", "creating 40,000 empty files in /dev/shm (64 MiB)");
    expect_not_in(out, "made 40000", "creating 40,000 empty files in /dev/shm (64 MiB)");
    free(out);
    out = sh_out("grep -E ' /(tmp|workspace|dev/shm) ' /proc/self/mounts");
    expect_in(out, "/tmp tmpfs", "/tmp's mount");
    for (const char *p = out; (p = strstr(p, "tmpfs")) != NULL; p++)
        if (strstr(p, "nr_inodes=") == NULL || strchr(p, '\n') < strstr(p, "nr_inodes="))
            fail_msg("a writable tmpfs without nr_inodes in:\n%s", out);
    free(out);
}

/* ---- the allow-list ---------------------------------------------------------------------- */

/* A syscall the filter does not name is refused with ENOSYS before the kernel sees it: each of
 * these would get another answer from this kernel (cachestat(-1): EBADF; listmount with a bad
 * request: EFAULT or EINVAL; mseal of nothing: 0; lsm_list_modules with no room: E2BIG or
 * EFAULT). memfd_secret, which Docker allows, is refused by name (EPERM). */
static void test_audit_syscalls_outside_the_allow_list_are_refused(void **state)
{
    (void)state;
    char *out = py_out(PY_SYSCALL "sc('cachestat', 451, -1, buf, buf, 0)\n"
                                  "sc('listmount', 458, 8, buf, 1, 0)\n"
                                  "sc('mseal', 462, 0, 0, 0)\n"
                                  "sc('lsm_list_modules', 461, 8, buf, 0)\n"
                                  "sc('memfd_secret', 447, 0)\n"
                                  "sc('getpid', 39)\n");
    expect_in(out, "cachestat ret=-1 ENOSYS", "cachestat (not in the allow-list)");
    expect_in(out, "listmount ret=-1 ENOSYS", "listmount (not in the allow-list)");
    expect_in(out, "mseal ret=-1 ENOSYS", "mseal (not in the allow-list)");
    expect_in(out, "lsm_list_modules ret=-1 ENOSYS", "lsm_list_modules (not in the allow-list)");
    expect_in(out, "memfd_secret ret=-1 EPERM", "memfd_secret (refused by name)");
    expect_not_in(out, "getpid ret=-1", "getpid (allowed)");
    free(out);
}

/* mkfifo works (mknod of S_IFIFO); every other mknod is refused by the filter, devices first.
 * The paths' parent does not exist, so the kernel itself would answer ENOENT: EPERM proves the
 * filter. Junk above the 16 bits the kernel keeps changes nothing. */
static void test_audit_mknod_allows_fifos_only(void **state)
{
    (void)state;
    char *out = sh_out("mkfifo /tmp/audit_fifo && test -p /tmp/audit_fifo && echo fifo-ok; "
                       "rm -f /tmp/audit_fifo");
    expect_in(out, "fifo-ok", "mkfifo");
    free(out);
    out = py_out(PY_SYSCALL "S_IFCHR, S_IFBLK, S_IFIFO, S_IFREG, S_IFSOCK = "
                            "0o020000, 0o060000, 0o010000, 0o100000, 0o140000\n"
                            "sc('chr', 133, b'/nonexistent/c', S_IFCHR | 0o600, 0x0103)\n"
                            "sc('blk', 133, b'/nonexistent/b', S_IFBLK | 0o600, 0x0800)\n"
                            "sc('reg', 133, b'/nonexistent/r', S_IFREG | 0o600, 0)\n"
                            "sc('sock', 133, b'/nonexistent/s', S_IFSOCK | 0o600, 0)\n"
                            "sc('at_chr', 259, -100, b'/nonexistent/c', S_IFCHR | 0o600, 0x0103)\n"
                            "sc('at_chr_hi', 259, -100, b'/nonexistent/c', "
                            "S_IFCHR | (S_IFIFO << 16) | (1 << 40), 0x0103)\n"
                            "sc('fifo', 133, b'/nonexistent/f', S_IFIFO | 0o600, 0)\n"
                            "sc('at_fifo', 259, -100, b'/tmp/audit_fifo2', S_IFIFO | 0o600, 0)\n");
    expect_in(out, "chr ret=-1 EPERM", "mknod(S_IFCHR)");
    expect_in(out, "blk ret=-1 EPERM", "mknod(S_IFBLK)");
    expect_in(out, "reg ret=-1 EPERM", "mknod(S_IFREG)");
    expect_in(out, "sock ret=-1 EPERM", "mknod(S_IFSOCK)");
    expect_in(out, "at_chr ret=-1 EPERM", "mknodat(S_IFCHR)");
    expect_in(out, "at_chr_hi ret=-1 EPERM", "mknodat(S_IFCHR with a FIFO above bit 16)");
    expect_in(out, "fifo ret=-1 ENOENT", "mknod(S_IFIFO) reaches the kernel");
    expect_in(out, "at_fifo ret=0", "mknodat(S_IFIFO) makes a FIFO");
    free(out);
}

/* ---- what a program inherits ------------------------------------------------------------- */

/* Nothing of the agent's (listening socket, client sockets, root fd, kernel pipes, journals)
 * may be open in a program: only 0, 1, 2 (and the fd listdir itself opens). */
static void test_audit_no_agent_fds_leak_into_programs(void **state)
{
    (void)state;
    char *out = py_out("import os\n"
                       "fds = sorted(int(x) for x in os.listdir('/proc/self/fd'))\n"
                       "print('fds', fds)\n"
                       "for fd in fds:\n"
                       "    try: print(fd, os.readlink('/proc/self/fd/%d' % fd))\n"
                       "    except OSError: pass\n");
    expect_in(out, "fds [0, 1, 2, 3]", "only stdio (+ listdir's own fd) is open");
    expect_not_in(out, "socket:", "no socket leaks");
    free(out);
}

/* Whether any process of the sandbox's tree (PID 1 and its children: the spare, the
 * programs) holds a descriptor whose target contains `needle`. */
static bool sandbox_tree_holds_fd(long pid1, const char *needle)
{
    char path[128], target[256];
    long pids[64];
    size_t n = 0;
    pids[n++] = pid1;
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid1, pid1);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        long c;
        while (n < 64 && fscanf(f, "%ld", &c) == 1)
            pids[n++] = c;
        fclose(f);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "/proc/%ld/fd", pids[i]);
        DIR *d = opendir(path);
        assert_non_null(d);
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char link[200];
            snprintf(link, sizeof link, "%s/%.64s", path, de->d_name);
            ssize_t len = readlink(link, target, sizeof target - 1);
            if (len <= 0)
                continue;
            target[len] = '\0';
            if (strstr(target, needle) != NULL) {
                print_message("pid %ld holds fd %s -> %s\n", pids[i], de->d_name, target);
                closedir(d);
                return true;
            }
        }
        closedir(d);
    }
    return false;
}

/* A descriptor the host process left open without O_CLOEXEC when it created the sandbox is
 * not in the agent (the sandbox's PID 1) nor in any process it forked. */
static void test_audit_host_fds_do_not_reach_the_sandbox(void **state)
{
    (void)state;
    char meta[700], line[256];
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(A->sb));
    FILE *m = fopen(meta, "r");
    assert_non_null(m);
    long pid1 = 0;
    while (fgets(line, sizeof line, m) != NULL)
        if (strncmp(line, "pid ", 4) == 0)
            pid1 = strtol(line + 4, NULL, 10);
    fclose(m);
    assert_true(pid1 > 1);
    free(sh_out("true")); /* a program ran: the tree is as it is in use */
    assert_false(sandbox_tree_holds_fd(pid1, AUDIT_HOST_FD_NAME));
}

/* The program's capability sets are all empty and it cannot gain privileges. */
static void test_audit_every_capability_set_is_empty(void **state)
{
    (void)state;
    char *out = sh_out("grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' "
                       "/proc/self/status");
    const char *want[] = {"CapInh:\t0000000000000000",
                          "CapPrm:\t0000000000000000",
                          "CapEff:\t0000000000000000",
                          "CapBnd:\t0000000000000000",
                          "CapAmb:\t0000000000000000",
                          "NoNewPrivs:\t1",
                          "Seccomp:\t2"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        expect_in(out, want[i], "/proc/self/status");
    free(out);
}

/* The program's uid is neither the agent's (0 inside) nor the host's root. */
static void test_audit_program_uid_is_not_the_agents(void **state)
{
    (void)state;
    if (getuid() != 0)
        skip();
    char *out = sh_out("id -u; awk '{print \"map\", $1, $2}' /proc/self/uid_map");
    expect_not_in(out, "\n0\n", "program uid");
    assert_true(strncmp(out, "0\n", 2) != 0);
    expect_not_in(out, "map 0 0", "sandbox root maps to host root");
    free(out);
}

/* ---- the agent ---------------------------------------------------------------------------- */

/* The agent's socket directory is out of a program's reach: it cannot connect, list, remove or
 * replace the socket (a replaced socket would let it impersonate the agent to the host). */
static void test_audit_agent_socket_is_out_of_reach(void **state)
{
    (void)state;
    char *out = py_out("import os, socket\n"
                       "s = socket.socket(socket.AF_UNIX)\n"
                       "try:\n"
                       "    s.connect('/.sbx/agent.sock'); s.settimeout(3)\n"
                       "    s.sendall(b'\\x04\\x00\\x00\\x00\\x08\\x01\\x52\\x00')\n"
                       "    print('CONNECTED', s.recv(100))\n"
                       "except OSError as e: print('connect refused', e.errno)\n"
                       "try: os.listdir('/.sbx'); print('LISTED')\n"
                       "except OSError as e: print('list refused', e.errno)\n"
                       "try: os.unlink('/.sbx/agent.sock'); print('REMOVED')\n"
                       "except OSError as e: print('unlink refused', e.errno)\n");
    expect_not_in(out, "CONNECTED b'\\x", "agent answered a program");
    expect_not_in(out, "LISTED", "program listed /.sbx");
    expect_not_in(out, "REMOVED", "program removed the agent socket");
    free(out);
    /* and the agent still serves the host */
    char *alive = sh_out("echo still-served");
    expect_in(alive, "still-served", "agent alive");
    free(alive);
}

/* PID 1 is invisible to programs (hidepid): no cmdline, environ, fds or maps of the agent. */
static void test_audit_agent_is_hidden_in_proc(void **state)
{
    (void)state;
    char *out = sh_out("for f in status cmdline environ maps; do "
                       "cat /proc/1/$f >/dev/null 2>&1 && echo READ-$f; done; "
                       "ls /proc/1/fd >/dev/null 2>&1 && echo READ-fd; echo checked");
    expect_in(out, "checked", "probe ran");
    expect_not_in(out, "READ-", "agent's /proc entry");
    free(out);
}

/* SIGSTOP/SIGTERM/SIGKILL/SIGUSR1 from inside do not stop or end the agent. */
static void test_audit_signals_to_pid1_from_inside_are_ignored(void **state)
{
    (void)state;
    free(sh_out("kill -STOP 1; kill -USR1 1; kill -HUP 1; kill -INT 1; kill -QUIT 1; "
                "kill -TERM 1; kill -KILL 1; echo sent"));
    usleep(300000);
    char *out = sh_out("echo still-served");
    expect_in(out, "still-served", "agent after signals");
    free(out);
}

/* A program that keeps sending SIGSTOP to every process it may signal (kill(-1)) catches the
 * agent's vfork child in the instant between its switch to the program uid and its execve:
 * the child stops there, and PID 1 waits for it inside clone(CLONE_VFORK) forever -- no more
 * commands, file operations or pings, and the idle TTL can never end the sandbox. */
static void test_audit_program_cannot_wedge_the_agent_with_sigstop(void **state)
{
    (void)state;
    sbx_policy *p = lt_policy(getuid() == 0 ? 512 : 0, getuid() == 0 ? 256 : 0);
    sbx_sandbox *sb = lt_create_with(&A->env, p);
    sbx_message_free((ProtobufCMessage *)p);
    sbx_result *r = lt_run(&A->env, sb,
                           "nohup python3 -c \"import os, signal, time\n"
                           "end = time.time() + 8\n"
                           "while time.time() < end:\n"
                           "    try: os.kill(-1, signal.SIGSTOP)\n"
                           "    except OSError: pass\" >/dev/null 2>&1 </dev/null & echo spawned");
    sbx_message_free((ProtobufCMessage *)r);
    /* execs back to back while the stopper runs: each is a chance for it to hit the window */
    int64_t until = sbx_monotonic_ms() + 7500;
    while (sbx_monotonic_ms() < until) {
        sbx_error err = {0};
        sbx_status st = lt_sh(&A->env, sb, "true", 300, &r, &err);
        sbx_message_free((ProtobufCMessage *)r);
        if (st != SBX_OK && st != SBX_E_TIMEOUT)
            break;
    }
    sleep(2); /* the stopper has ended */
    sbx_error err = {0};
    sbx_status st = lt_sh(&A->env, sb, "echo alive", 10000, &r, &err);
    bool alive = st == SBX_OK && lt_stdout_has(r, "alive");
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(&A->env, sb);
    if (!alive)
        KNOWN_ESCAPE("a program wedged the agent: SIGSTOP sent to all its processes stops a "
                     "vfork child between setresuid and execve, and PID 1 waits in "
                     "clone(CLONE_VFORK) forever (%s); spawn without CLONE_VFORK (fork, or "
                     "CLONE_VM with an exec-status pipe the agent polls with a timeout)",
                     err.message);
}

/* ---- /proc, /sys, /dev, cgroups ---------------------------------------------------------- */

static void test_audit_sensitive_proc_files_are_refused(void **state)
{
    (void)state;
    char *out = sh_out("for f in /proc/sysrq-trigger /proc/sys/kernel/core_pattern "
                       "/proc/sys/vm/drop_caches /proc/sys/kernel/modprobe "
                       "/proc/sys/kernel/hostname; do "
                       "(printf x > $f) 2>/dev/null && echo WROTE-$f; done; "
                       "for f in /proc/kcore /proc/kmsg /proc/timer_list /proc/sched_debug; do "
                       "head -c 1 $f >/dev/null 2>&1 && echo READ-$f; done; echo checked");
    expect_in(out, "checked", "probe ran");
    expect_not_in(out, "WROTE-", "write to a host-wide /proc file");
    expect_not_in(out, "READ-", "read of a kernel-memory /proc file");
    free(out);
}

/* The cgroup namespace shows the sandbox's cgroups as "/" (the command's own as "/cmd-N"), and
 * no cgroupfs (nor /sys) is mounted: no release_agent (CVE-2022-0492), no way to move out of
 * the limits. */
static void test_audit_cgroups_are_neither_visible_nor_writable(void **state)
{
    (void)state;
    char *out = sh_out("awk -F: '$3 != \"/\" && $3 !~ /^[/]cmd-[0-9]+$/ "
                       "{print \"HOSTPATH\", $0}' /proc/self/cgroup; "
                       "grep -E ' - cgroup2? ' /proc/self/mountinfo && echo CGROUPFS; "
                       "ls /sys/fs/cgroup >/dev/null 2>&1 && echo SYSFS; echo checked");
    expect_in(out, "checked", "probe ran");
    expect_not_in(out, "HOSTPATH", "host cgroup path visible");
    expect_not_in(out, "CGROUPFS", "cgroupfs mounted");
    expect_not_in(out, "SYSFS", "/sys reachable");
    free(out);
}

/* /dev holds only harmless nodes, is read-only, and nothing new can be created in it. */
static void test_audit_dev_holds_only_harmless_nodes(void **state)
{
    (void)state;
    char *out = sh_out("ls -A /dev | tr '\\n' ' '; echo; touch /dev/sbx-x 2>/dev/null && "
                       "echo CREATED; ln -s /proc /dev/sbx-l 2>/dev/null && echo LINKED; "
                       "echo checked");
    expect_in(out, "checked", "probe ran");
    expect_not_in(out, "CREATED", "file created in /dev");
    expect_not_in(out, "LINKED", "symlink created in /dev");
    static const char *allowed[] = {"fd",    "full",   "null", "random",  "shm", "stderr",
                                    "stdin", "stdout", "tty",  "urandom", "zero"};
    char *list = strndup(out, (size_t)(strchr(out, '\n') - out));
    for (char *save, *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        bool ok = false;
        for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
            ok = ok || strcmp(t, allowed[i]) == 0;
        if (!ok)
            fail_msg("unexpected /dev entry '%s' in: %s", t, out);
    }
    free(list);
    free(out);
}

/* /dev/shm is a writable tmpfs too: it must be size-bounded like /tmp. */
static void test_audit_dev_shm_is_bounded(void **state)
{
    (void)state;
    char *out = sh_out("dd if=/dev/zero of=/dev/shm/fill bs=1M count=200 2>&1; "
                       "echo size=$(stat -c %s /dev/shm/fill); rm -f /dev/shm/fill");
    expect_in(out, "No space left", "filling /dev/shm stops");
    char *s = strstr(out, "size=");
    assert_non_null(s);
    long size = -1;
    sscanf(s, "size=%ld", &size);
    assert_true(size >= 0 && size <= 128L << 20);
    free(out);
}

/* ---- host IPC objects ------------------------------------------------------------------- */

/* Abstract unix sockets live in the network namespace: under DENY the host's are unreachable
 * (X11, dbus, systemd and container runtimes listen on such names). */
static void test_audit_host_abstract_unix_socket_is_unreachable(void **state)
{
    (void)state;
    int srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(srv >= 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    char name[64];
    int nl = snprintf(name, sizeof name, "sbx-audit-%d-%ld", (int)getpid(), (long)random());
    memcpy(sa.sun_path + 1, name, (size_t)nl);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)nl);
    assert_int_equal(bind(srv, (struct sockaddr *)&sa, len), 0);
    assert_int_equal(listen(srv, 4), 0);
    char code[512];
    snprintf(code, sizeof code,
             "import socket\ns = socket.socket(socket.AF_UNIX)\n"
             "try: s.connect('\\0%s'); print('CONNECTED')\n"
             "except OSError as e: print('refused', e.errno)\n",
             name);
    char *out = py_out(code);
    expect_in(out, "refused", "abstract socket connect");
    expect_not_in(out, "CONNECTED", "host abstract socket reached under DENY");
    free(out);
    close(srv);
}

/* SysV shared memory lives in the IPC namespace: a host segment is invisible inside. */
static void test_audit_host_sysv_shared_memory_is_invisible(void **state)
{
    (void)state;
    key_t key = (key_t)(0x5b0000 + (getpid() & 0xffff));
    int id = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666);
    assert_true(id >= 0);
    char code[512];
    snprintf(code, sizeof code,
             "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             "r = libc.shmget(%d, 0, 0o666)\n"
             "print('FOUND' if r >= 0 else 'absent', ctypes.get_errno())\n",
             (int)key);
    char *out = py_out(code);
    shmctl(id, IPC_RMID, NULL);
    expect_in(out, "absent", "host shm segment");
    expect_not_in(out, "FOUND", "host SysV shm visible inside");
    free(out);
}

/* ---- file API ---------------------------------------------------------------------------- */

static sbx_status list_path(const char *path, sbx_result **out)
{
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = (char *)path;
    *out = sbx_result_new();
    return A->env.ops->list_files(A->sb, &ls, &o, *out, &err);
}

/* Listing /proc (the agent's fds!), /.sbx or a symlink to them through the file API is refused. */
static void test_audit_file_api_does_not_list_proc_or_agent_dir(void **state)
{
    (void)state;
    free(sh_out("ln -sfn /proc/1/fd /workspace/agentfds; ln -sfn /.sbx /workspace/sbxdir"));
    const char *paths[] = {"/proc/1/fd", "/proc", "/.sbx", "agentfds", "sbxdir"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        sbx_result *r;
        sbx_status st = list_path(paths[i], &r);
        if (st == SBX_OK)
            fail_msg("file API listed %s (%zu entries)", paths[i], r->n_files);
        sbx_message_free((ProtobufCMessage *)r);
    }
}

/* A program swaps a workspace path between a directory and a symlink to /.sbx while the host
 * writes files under it: no write may land in the agent's host directory. */
static void test_audit_file_api_symlink_swap_race_stays_inside(void **state)
{
    (void)state;
    free(sh_out("mkdir -p /workspace/race_t; cd /workspace; "
                "( i=0; while [ $i -lt 3000 ]; do ln -sfn /.sbx race; rm -f race; "
                "mv -T race_t race; mv -T race race_t; i=$((i+1)); done ) "
                ">/dev/null 2>&1 </dev/null & echo started"));
    sbx_exec_opts o = lt_opts(0, NULL);
    for (int i = 0; i < 200; i++) {
        char path[64];
        snprintf(path, sizeof path, "race/pwn%d", i);
        Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
        w.path = path;
        w.content.data = (uint8_t *)"x";
        w.content.len = 1;
        sbx_error err = {0};
        sbx_result *r = sbx_result_new();
        (void)A->env.ops->write_file(A->sb, &w, &o, r, &err);
        sbx_message_free((ProtobufCMessage *)r);
    }
    char box[700];
    snprintf(box, sizeof box, "%s/box", sbx_local_state_dir(A->sb));
    DIR *d = opendir(box);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, "pwn", 3) == 0)
            fail_msg("the file API wrote %s/%s on the host", box, de->d_name);
    closedir(d);
}

/* Contract strings are UTF-8 (protobuf `string`): a program that names a file with bytes that
 * are not UTF-8 must not make the host emit an invalid string (a strict decoder -- Python's
 * protobuf, our own remote broker -- then refuses the whole completion). */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0)
            return false;
        p++;
        for (int i = 0; i < n; i++, p++)
            if ((*p >> 6) != 2)
                return false;
    }
    return true;
}

static void test_audit_file_listing_never_emits_invalid_utf8(void **state)
{
    (void)state;
    free(sh_out(
        "mkdir -p /workspace/utf8 && cd /workspace/utf8 && touch \"$(printf 'bad\\377name')\""));
    sbx_result *r;
    sbx_status st = list_path("/workspace/utf8", &r);
    bool bad = false;
    for (size_t i = 0; st == SBX_OK && i < r->n_files; i++)
        bad = bad || (r->files[i]->path && !valid_utf8(r->files[i]->path));
    sbx_message_free((ProtobufCMessage *)r);
    if (bad)
        KNOWN_ESCAPE("policy not enforced: a file name that is not UTF-8 reaches the host's "
                     "completion as an invalid protobuf string (list_files); the agent or "
                     "sbx_agent_list_files must escape or refuse such names");
}

/* ---- host-side state ------------------------------------------------------------------------ */

/* The state directory and the socket are private to the sandbox's owner on the host. */
static void test_audit_host_state_dir_is_private(void **state)
{
    (void)state;
    const char *dir = sbx_local_state_dir(A->sb);
    struct stat st;
    assert_int_equal(lstat(dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0077, 0);
    char p[700];
    snprintf(p, sizeof p, "%s/box", dir);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 0077, 0);
    snprintf(p, sizeof p, "%s/box/agent.sock", dir);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0077, 0);
    snprintf(p, sizeof p, "%s/meta", dir);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 0077, 0);
    assert_int_equal(lstat(A->env.runtime_dir, &st), 0);
    assert_int_equal(st.st_mode & 0066, 0); /* others may traverse (0711), never list or write */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_audit_x32_abi_syscall_kills_the_program),
        cmocka_unit_test(test_audit_i386_int80_kills_the_program),
        cmocka_unit_test(test_audit_docker_refused_syscalls_are_refused),
        cmocka_unit_test(test_audit_pidfd_getfd_and_process_madvise_are_refused),
        cmocka_unit_test(test_audit_clone_namespace_flags_are_refused),
        cmocka_unit_test(test_audit_terminal_injection_ioctls_are_refused),
        cmocka_unit_test(test_audit_weak_personality_is_refused),
        cmocka_unit_test(test_audit_vsock_and_packet_sockets_are_refused),
        cmocka_unit_test(test_audit_vsock_with_junk_in_the_upper_bits_is_refused),
        cmocka_unit_test(test_audit_syscalls_outside_the_allow_list_are_refused),
        cmocka_unit_test(test_audit_mknod_allows_fifos_only),
        cmocka_unit_test(test_audit_programs_carry_the_highest_oom_score),
        cmocka_unit_test(test_audit_tmpfs_inodes_are_capped),
        cmocka_unit_test(test_audit_no_agent_fds_leak_into_programs),
        cmocka_unit_test(test_audit_host_fds_do_not_reach_the_sandbox),
        cmocka_unit_test(test_audit_every_capability_set_is_empty),
        cmocka_unit_test(test_audit_program_uid_is_not_the_agents),
        cmocka_unit_test(test_audit_agent_socket_is_out_of_reach),
        cmocka_unit_test(test_audit_agent_is_hidden_in_proc),
        cmocka_unit_test(test_audit_signals_to_pid1_from_inside_are_ignored),
        cmocka_unit_test(test_audit_program_cannot_wedge_the_agent_with_sigstop),
        cmocka_unit_test(test_audit_sensitive_proc_files_are_refused),
        cmocka_unit_test(test_audit_cgroups_are_neither_visible_nor_writable),
        cmocka_unit_test(test_audit_dev_holds_only_harmless_nodes),
        cmocka_unit_test(test_audit_dev_shm_is_bounded),
        cmocka_unit_test(test_audit_host_abstract_unix_socket_is_unreachable),
        cmocka_unit_test(test_audit_host_sysv_shared_memory_is_invisible),
        cmocka_unit_test(test_audit_file_api_does_not_list_proc_or_agent_dir),
        cmocka_unit_test(test_audit_file_api_symlink_swap_race_stays_inside),
        cmocka_unit_test(test_audit_file_listing_never_emits_invalid_utf8),
        cmocka_unit_test(test_audit_host_state_dir_is_private),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
