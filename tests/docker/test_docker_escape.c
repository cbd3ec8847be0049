/* test_docker_escape.c - programs in a managed docker sandbox that try to leave it, each test
 * one attempt, each asserting containment: host files, host processes, the agent (PID 1),
 * capabilities, mounts, the network under DENY (a server this test runs on the host's
 * 127.0.0.1), the pids limit and the memory limit, and per-user kernel quotas (inotify, queued
 * signals) one container takes from another. The escape tests of the local provider
 * that apply to containers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "docker_test.h"
#include "sbx/contract.h"

extern const sbx_provider_ops sbx_provider_docker;
static const sbx_provider_ops *ops = &sbx_provider_docker;

typedef struct fixture {
    dt_env env;
    char *runtime_dir;
    void *provider;
    sbx_policy *policy;
    sbx_principal *principal;
    sbx_sandbox *sb; /* one sandbox for every attempt: containment must survive them all */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    *state = f;
    if (dt_agent_path() == NULL)
        return 0; /* every test skips */
    dt_env_load(&f->env);
    f->runtime_dir = dt_tempdir();
    char image[160];
    snprintf(image, sizeof(image), "image=%s", f->env.image_python);
    const char *opts[] = {image, NULL};
    f->provider = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, opts);
    f->policy = sbx_policy_new();
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    f->policy->memory_mb = 128;
    f->policy->pids = 64;
    f->principal = sbx_principal_new();
    sbx_session_handle *h = sbx_session_handle_new();
    sbx_set_string(&h->session_id, "escape");
    sbx_error err;
    if (ops->create(f->provider, h, f->principal, f->policy, &f->sb, &err) != SBX_OK)
        fail_msg("create: %s", err.message);
    sbx_message_free(&h->base);
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->provider != NULL) {
        char *id = strdup(f->sb->id);
        ops->sandbox_close(f->sb);
        sbx_error err;
        ops->destroy(f->provider, id, &err);
        free(id);
        dt_provider_close(f->provider);
        dt_rmtree(f->runtime_dir);
        free(f->runtime_dir);
        sbx_message_free((ProtobufCMessage *)f->policy);
        sbx_message_free((ProtobufCMessage *)f->principal);
        dt_env_free(&f->env);
    }
    free(f);
    return 0;
}

#define NEED_AGENT(f)                                                                              \
    do {                                                                                           \
        if ((f)->provider == NULL)                                                                 \
            skip();                                                                                \
    } while (0)

/* Runs a shell line; returns its stdout as a NUL-terminated static string. */
static const char *sh(fixture *f, const char *line, int *exit_code)
{
    static char out[8192];
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    sbx_status st = ops->run_command(f->sb, &op, &o, r, &err);
    if (st != SBX_OK)
        fail_msg("run '%s': %s: %s", line, sbx_status_name(st), err.message);
    size_t n = r->stdout.len < sizeof(out) - 1 ? r->stdout.len : sizeof(out) - 1;
    if (n > 0)
        memcpy(out, r->stdout.data, n);
    out[n] = '\0';
    if (exit_code != NULL)
        *exit_code = r->exit_code;
    sbx_message_free((ProtobufCMessage *)r);
    return out;
}

static void test_docker_escape_host_files_are_not_visible(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    char *dir = dt_tempdir();
    char path[600], line[800];
    snprintf(path, sizeof(path), "%s/host-secret", dir);
    FILE *fp = fopen(path, "we");
    assert_non_null(fp);
    fputs("TOPSECRET\n", fp);
    fclose(fp);
    snprintf(line, sizeof(line), "cat %s 2>/dev/null; cat /etc/shadow 2>/dev/null; echo done",
             path);
    assert_string_equal(sh(f, line, NULL), "done\n");
    dt_rmtree(dir);
    free(dir);
}

static void test_docker_escape_host_processes_are_not_visible(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* PID 1 is the sandbox's own agent, not the host's init; only a handful of pids exist. */
    const char *out =
        sh(f, "tr '\\0' ' ' < /proc/1/cmdline; echo; ls /proc | grep -c '^[0-9]'", NULL);
    assert_non_null(strstr(out, "sbx-agent"));
    const char *count = strchr(out, '\n') + 1;
    assert_true(atoi(count) < 16);
}

static void test_docker_escape_programs_run_unprivileged_without_capabilities(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    const char *out = sh(f,
                         "id -u; grep -E '^Cap(Eff|Prm|Amb)' /proc/self/status | "
                         "awk '{print $2}'",
                         NULL);
    /* the container's own uid of docker.uid_base's range (default 1400000000), never root's */
    long uid = strtol(out, NULL, 10);
    assert_true(uid >= 1400000000L && uid < 1400000000L + 65536L);
    assert_string_equal(strchr(out, '\n') + 1,
                        "0000000000000000\n0000000000000000\n0000000000000000\n");
}

/* The agent (the container's PID 1, host root without a user namespace) keeps, of the six the
 * container is given, only those it uses once it serves: SETUID, SETGID, KILL, CHOWN, FOWNER,
 * DAC_OVERRIDE (SETPCAP goes once its bounding set is empty), with no_new_privs. Read from the
 * host: a program cannot see PID 1's status. */
static void test_docker_escape_agent_keeps_only_the_capabilities_it_uses(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    sh(f, "true", NULL); /* it served a program: it is as it is in use */
    json_t *j = dt_container_inspect(&f->env, f->sb->id);
    assert_non_null(j);
    long pid = (long)json_integer_value(json_object_get(json_object_get(j, "State"), "Pid"));
    json_decref(j);
    assert_true(pid > 1);
    char path[64], line[256], eff[256] = "", prm[256] = "", nnp[256] = "";
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *st = fopen(path, "r");
    assert_non_null(st);
    while (fgets(line, sizeof line, st) != NULL) {
        if (strncmp(line, "CapEff:", 7) == 0)
            snprintf(eff, sizeof eff, "%s", line);
        else if (strncmp(line, "CapPrm:", 7) == 0)
            snprintf(prm, sizeof prm, "%s", line);
        else if (strncmp(line, "NoNewPrivs:", 11) == 0)
            snprintf(nnp, sizeof nnp, "%s", line);
    }
    fclose(st);
    /* CHOWN 0, DAC_OVERRIDE 1, FOWNER 3, KILL 5, SETGID 6, SETUID 7 */
    assert_string_equal(eff, "CapEff:\t00000000000000eb\n");
    assert_string_equal(prm, "CapPrm:\t00000000000000eb\n");
    assert_string_equal(nnp, "NoNewPrivs:\t1\n");
}

/* Runs a shell line in sb (any managed sandbox of the fixture's provider); its stdout. */
static char *sh_in(fixture *f, sbx_sandbox *sb, const char *line)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 120000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    sbx_status st = ops->run_command(sb, &op, &o, r, &err);
    char *out = st == SBX_OK
                    ? strndup(r->stdout.len ? (const char *)r->stdout.data : "", r->stdout.len)
                    : strdup(err.message);
    sbx_message_free((ProtobufCMessage *)r);
    return out;
}

static sbx_sandbox *create_in(fixture *f)
{
    sbx_sandbox *sb = NULL;
    sbx_error err;
    if (ops->create(f->provider, NULL, f->principal, f->policy, &sb, &err) != SBX_OK)
        fail_msg("create: %s", err.message);
    return sb;
}

static void destroy_in(fixture *f, sbx_sandbox *sb)
{
    char *id = strdup(sb->id);
    ops->sandbox_close(sb);
    sbx_error err;
    ops->destroy(f->provider, id, &err);
    free(id);
}

/* Two containers' programs are two host uids: the kernel's per-user counts are not shared. */
static void test_docker_escape_each_container_has_its_own_program_uid(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    sbx_sandbox *other = create_in(f);
    char *a = strdup(sh(f, "id -u", NULL));
    char *b = sh_in(f, other, "id -u");
    destroy_in(f, other);
    if (strcmp(a, b) == 0)
        fail_msg("two containers' programs share uid %s", a);
    free(a);
    free(b);
}

/* A program in container A takes a per-user kernel quota until the kernel refuses, and keeps
 * it; a program in container B must still get one. take_one is a python expression, < 0 when
 * refused; want_errno what A's last refusal must be. */
static void quota_stays_in_the_container(fixture *f, const char *take_one, int want_errno,
                                         const char *check_in_b, const char *b_ok)
{
    sbx_sandbox *a = create_in(f);
    sbx_sandbox *b = create_in(f);
    char line[2048];
    snprintf(line, sizeof(line),
             "python3 -u -c \"import ctypes, os, signal, time\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])\n"
             "n = 0\n"
             "while n < 1000000:\n"
             "    ctypes.set_errno(0)\n"
             "    if %s < 0: break\n"
             "    n += 1\n"
             "print('held', n, ctypes.get_errno())\n"
             "time.sleep(120)\" > /tmp/quota.out 2>&1 &\n"
             "for i in $(seq 600); do grep -q held /tmp/quota.out && break; sleep 0.1; done; "
             "cat /tmp/quota.out",
             take_one);
    char *held = sh_in(f, a, line);
    char want[32];
    snprintf(want, sizeof(want), " %d\n", want_errno);
    bool reached = strstr(held, "held ") != NULL && strstr(held, want) != NULL;
    char *other = reached ? sh_in(f, b, check_in_b) : strdup("");
    destroy_in(f, b);
    destroy_in(f, a);
    if (!reached)
        fail_msg("container A did not reach its limit (errno %d): %s", want_errno, held);
    if (strstr(other, b_ok) == NULL)
        fail_msg("container B failed while A held its quota: %s", other);
    free(held);
    free(other);
}

/* inotify instances are counted per uid (fs.inotify.max_user_instances, 128 by default): with
 * every container's programs one uid (65534) a program holding them all took them from every
 * other container. */
static void test_docker_escape_inotify_exhaustion_stays_in_the_container(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    quota_stays_in_the_container(f, "libc.inotify_init1(0)", 24 /* EMFILE */,
                                 "python3 -c \"import ctypes; libc = ctypes.CDLL(None); "
                                 "print('other', libc.inotify_init1(0) >= 0)\"",
                                 "other True");
}

/* Queued signals are counted per uid too, bounded per process by RLIMIT_SIGPENDING (the
 * container's ulimit): A is refused at its limit, B's own uid still queues. */
static void test_docker_escape_sigqueue_exhaustion_stays_in_the_container(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    quota_stays_in_the_container(
        f, "libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), 0)", 11 /* EAGAIN */,
        "python3 -c \"import ctypes, os, signal; libc = ctypes.CDLL(None); "
        "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN]); "
        "print('other', libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), 0))\"",
        "other 0");
}

/* Locked memory and POSIX message-queue bytes are the provider's limits, never the daemon's
 * own (a dockerd under LimitMEMLOCK=infinity would let a program pin host memory): 64 KiB and
 * the kernel's 800 KiB. Before, a container had whatever the daemon had (8 MiB here). */
static void test_docker_escape_locked_memory_and_mqueue_bytes_are_bounded(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    const char *out = sh(f,
                         "grep -E '^Max (locked memory|msgqueue size)' /proc/self/limits | "
                         "awk '{print $(NF-2), $(NF-1)}'",
                         NULL);
    assert_string_equal(out, "65536 65536\n819200 819200\n");
}

static void test_docker_escape_agent_cannot_be_killed_by_the_program(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    int code = 0;
    sh(f, "kill -9 1", &code);
    assert_int_not_equal(code, 0);
    /* Still answering. */
    assert_string_equal(sh(f, "echo alive", NULL), "alive\n");
}

static void test_docker_escape_agent_cannot_be_ptraced(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* PTRACE_ATTACH (16) to PID 1, the agent: a different uid and no CAP_SYS_PTRACE. */
    assert_string_equal(sh(f,
                           "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
                           "print(l.ptrace(16, 1, 0, 0), ctypes.get_errno() != 0)'",
                           NULL),
                        "-1 True\n");
}

static void test_docker_escape_io_uring_is_refused(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* io_uring_setup (425): refused by the agent's seccomp filter (and Docker's profile). */
    assert_string_equal(sh(f,
                           "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
                           "b = ctypes.create_string_buffer(120); "
                           "print(l.syscall(425, 4, b), ctypes.get_errno() != 0)'",
                           NULL),
                        "-1 True\n");
}

static void test_docker_escape_mount_is_refused(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    int code = 0;
    sh(f, "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m", &code);
    assert_int_not_equal(code, 0);
    sh(f, "mount -o remount,rw /", &code);
    assert_int_not_equal(code, 0);
}

static void test_docker_escape_network_deny_reaches_nothing_on_the_host(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* A server on the host's loopback, ephemeral port: under DENY the container has its own
     * network namespace with loopback only, so this address is its own, empty loopback. */
    int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(srv, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(srv, 4), 0);
    socklen_t len = sizeof(sa);
    getsockname(srv, (struct sockaddr *)&sa, &len);
    char line[256];
    snprintf(line, sizeof(line),
             "ls /sys/class/net; echo x | nc -w 2 127.0.0.1 %d && echo CONNECTED; "
             "tail -n +2 /proc/net/route | wc -l; echo end",
             ntohs(sa.sin_port));
    /* Loopback only and no route: no packet can leave (checked without sending any). */
    assert_string_equal(sh(f, line, NULL), "lo\n0\nend\n");
    close(srv);
}

static void test_docker_escape_pids_limit_holds_a_fork_bomb(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* 200 sleepers against a limit of 64: forks fail (the shell says "can't fork"), the
     * sandbox survives. grep is started before the bomb, so it has its pid. */
    const char *out = sh(f,
                         "{ for i in $(seq 200); do sleep 2 & done; wait; } 2>&1 | "
                         "grep -c fork",
                         NULL);
    assert_true(atoi(out) > 0);
    assert_string_equal(sh(f, "echo alive", NULL), "alive\n");
}

static void test_docker_escape_memory_bomb_is_killed_with_outcome_oom(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "sh";
    op.code = "python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'";
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_code(f->sb, &op, &o, r, &err), SBX_OK);
    /* 512 MiB never fits in 128: the kernel's OOM killer ends it, and the container cgroup's
     * OOM counter makes that outcome OOM (not a mere SIGKILL), as on the local provider. */
    if (r->outcome != SBX__V1__OUTCOME__OUTCOME_OOM)
        fail_msg("outcome %d exit %d signal %d, wanted OOM", r->outcome, r->exit_code, r->signal);
    assert_true(r->stdout.len == 0 ||
                memmem(r->stdout.data, r->stdout.len, "536870912", 9) == NULL);
    sbx_message_free((ProtobufCMessage *)r);
    assert_string_equal(sh(f, "echo alive", NULL), "alive\n");
}

static void test_docker_escape_file_api_cannot_leave_the_container(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    /* The host's /etc/hostname exists; inside, ../../ from the workspace is the container's
     * own root. Whatever comes back must be the container's file, never the host's. */
    char host[256] = "";
    FILE *fp = fopen("/etc/hostname", "re");
    if (fp != NULL) {
        if (fgets(host, sizeof(host), fp) == NULL)
            host[0] = '\0';
        fclose(fp);
    }
    sh(f, "ln -sf /etc /workspace/etc-link", NULL);
    const char *paths[] = {"../../../../etc/hostname", "/workspace/etc-link/hostname",
                           "/etc/hostname"};
    for (size_t i = 0; i < 3; i++) {
        Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
        rd.path = (char *)paths[i];
        sbx_exec_opts o = {.principal = f->principal,
                           .policy = f->policy,
                           .deadline_mono_ms = sbx_monotonic_ms() + 60000};
        sbx_result *r = sbx_result_new();
        sbx_error err;
        if (ops->read_file(f->sb, &rd, &o, r, &err) == SBX_OK && r->n_files == 1 && host[0]) {
            /* Docker writes the container's own /etc/hostname: its id, not the host's name. */
            assert_false(r->files[0]->content.len == strlen(host) &&
                         memcmp(r->files[0]->content.data, host, strlen(host)) == 0);
        }
        sbx_message_free((ProtobufCMessage *)r);
    }
}

/* Nothing a program or the file API writes lands on the container's writable layer, which only
 * the daemon's storage bounds (its disk, shared with every container and the host): the root
 * is read-only, and the image's world-writable /var/tmp is a size-bounded tmpfs like /tmp and
 * the workspace. The fixture's policy sets neither fs_write nor disk_mb; before, its root was
 * writable and /var/tmp was on that layer. */
static void test_docker_escape_program_cannot_fill_the_daemons_disk(void **state)
{
    fixture *f = *state;
    NEED_AGENT(f);
    int code = -1;
    const char *out = sh(f,
                         "echo x > /var/tmp/f && grep -c '^[^ ]* /var/tmp tmpfs .*size=' "
                         "/proc/mounts; grep -c '^[^ ]* / [^ ]* ro[, ]' /proc/mounts",
                         &code);
    assert_string_equal(out, "1\n1\n");
    assert_int_equal(code, 0);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "/etc/sbx-escape";
    w.content.data = (uint8_t *)"x";
    w.content.len = 1;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_not_equal(ops->write_file(f->sb, &w, &o, r, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    assert_string_equal(sh(f, "cat /etc/sbx-escape 2>/dev/null; echo end", NULL), "end\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_escape_host_files_are_not_visible),
        cmocka_unit_test(test_docker_escape_host_processes_are_not_visible),
        cmocka_unit_test(test_docker_escape_programs_run_unprivileged_without_capabilities),
        cmocka_unit_test(test_docker_escape_agent_keeps_only_the_capabilities_it_uses),
        cmocka_unit_test(test_docker_escape_each_container_has_its_own_program_uid),
        cmocka_unit_test(test_docker_escape_inotify_exhaustion_stays_in_the_container),
        cmocka_unit_test(test_docker_escape_sigqueue_exhaustion_stays_in_the_container),
        cmocka_unit_test(test_docker_escape_locked_memory_and_mqueue_bytes_are_bounded),
        cmocka_unit_test(test_docker_escape_agent_cannot_be_killed_by_the_program),
        cmocka_unit_test(test_docker_escape_agent_cannot_be_ptraced),
        cmocka_unit_test(test_docker_escape_io_uring_is_refused),
        cmocka_unit_test(test_docker_escape_mount_is_refused),
        cmocka_unit_test(test_docker_escape_network_deny_reaches_nothing_on_the_host),
        cmocka_unit_test(test_docker_escape_pids_limit_holds_a_fork_bomb),
        cmocka_unit_test(test_docker_escape_memory_bomb_is_killed_with_outcome_oom),
        cmocka_unit_test(test_docker_escape_file_api_cannot_leave_the_container),
        cmocka_unit_test(test_docker_escape_program_cannot_fill_the_daemons_disk),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
