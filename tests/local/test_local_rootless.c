/* test_local_rootless.c - the local provider without root: an unprivileged uid (65534) opens
 * it and gets real sandboxes through unprivileged user namespaces, resource limits that need
 * cgroups are reported unenforceable (strict refuses them), and destroy leaves nothing.
 * Each test forks and drops privileges in the child; skipped only when the kernel forbids
 * unprivileged user namespaces.
 */
#include "tests/local/local_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>

#include "providers/common/agent_client.h"
#include "support/die_with_parent.h"

/* Exit status of a child that found unprivileged user namespaces disabled. */
#define ROOTLESS_UNSUPPORTED 77

static char agent_copy[128];

/* Copies sbx-agent where uid 65534 can run it (the build tree may not be reachable). */
static void copy_agent(void)
{
    char src[4096];
    sbx_error err = {0};
    assert_int_equal(sbx_agent_binary_path(src, sizeof src, &err), SBX_OK);
    char dir[] = "/tmp/sbxa-XXXXXX";
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0755);
    snprintf(agent_copy, sizeof agent_copy, "%s/sbx-agent", dir);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(agent_copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

static void remove_agent_copy(void)
{
    unlink(agent_copy);
    char *slash = strrchr(agent_copy, '/');
    *slash = '\0';
    rmdir(agent_copy);
}

static void drop_privileges(void)
{
    if (getuid() == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
            setresuid(65534, 65534, 65534) < 0) {
            fprintf(stderr, "cannot drop to uid 65534: %s\n", strerror(errno));
            _exit(2);
        }
    }
    setenv("SBX_AGENT", agent_copy, 1);
    unsetenv("XDG_RUNTIME_DIR");
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rootless check failed at line %d: ", __LINE__);                       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* Runs body in a child as uid 65534; skips when user namespaces are unavailable. */
static void run_rootless(void (*body)(void))
{
    copy_agent();
    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        drop_privileges();
        sbx_test_die_with_parent(parent, SIGKILL); /* after the uid change, which clears it */
        body();
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    remove_agent_copy();
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == ROOTLESS_UNSUPPORTED) {
        print_message("skipped: unprivileged user namespaces are disabled on this kernel\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void open_provider(lt_env *e)
{
    e->ops = sbx_provider_lookup("local");
    snprintf(e->runtime_dir, sizeof e->runtime_dir, "/tmp/sbxr-XXXXXX");
    CHECK(mkdtemp(e->runtime_dir) != NULL, "mkdtemp: %s", strerror(errno));
    sbx_provider_ctx ctx = {0};
    ctx.profile = "rootless";
    ctx.runtime_dir = e->runtime_dir;
    sbx_error err = {0};
    CHECK(e->ops->open(&ctx, &e->state, &err) == SBX_OK, "open: %s", err.message);
}

static sbx_sandbox *create_or_skip(lt_env *e, sbx_policy *p)
{
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    sbx_status st = e->ops->create(e->state, NULL, NULL, p, &sb, &err);
    if (st == SBX_E_PROVISION && strstr(err.message, "user namespaces")) {
        fprintf(stderr, "%s\n", err.message);
        _exit(ROOTLESS_UNSUPPORTED);
    }
    CHECK(st == SBX_OK, "create: %s", err.message);
    return sb;
}

static void body_runs_programs(void)
{
    lt_env e;
    open_provider(&e);
    sbx_policy *p = lt_policy(0, 0);
    sbx_sandbox *sb = create_or_skip(&e, p);
    sbx_result *r;
    sbx_error err = {0};
    CHECK(lt_sh(&e, sb,
                "python3 -c 'print(6*7)'; grep CapEff /proc/self/status; "
                "grep NoNewPrivs /proc/self/status; touch /usr/x 2>&1; cat /etc/shadow 2>&1",
                0, &r, &err) == SBX_OK,
          "run: %s", err.message);
    CHECK(lt_stdout_has(r, "42"), "python did not run");
    CHECK(lt_stdout_has(r, "CapEff:\t0000000000000000"), "capabilities left");
    CHECK(lt_stdout_has(r, "NoNewPrivs:\t1"), "no_new_privs not set");
    CHECK(lt_stdout_has(r, "Read-only") || lt_stdout_has(r, "Permission denied"), "/usr writable");
    CHECK(lt_stdout_has(r, "No such file"), "/etc/shadow visible");
    sbx_message_free((ProtobufCMessage *)r);
    CHECK(lt_py(&e, sb, "y = 5\ny * 3", &r, &err) == SBX_OK, "code: %s", err.message);
    CHECK(strcmp(r->value, "15") == 0, "python value '%s'", r->value);
    sbx_message_free((ProtobufCMessage *)r);
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    e.ops->sandbox_close(sb);
    CHECK(e.ops->destroy(e.state, id, &err) == SBX_OK, "destroy");
    CHECK(lt_count_dir(e.runtime_dir) == 0, "state left in %s", e.runtime_dir);
    sbx_message_free((ProtobufCMessage *)p);
    e.ops->close(e.state);
    lt_remove_runtime_dir(e.runtime_dir);
}

static void body_strict_refuses_unenforceable_limits(void)
{
    lt_env e;
    open_provider(&e);
    sbx_policy *p = lt_policy(256, 64);
    sbx_strlist un = {0};
    sbx_error err = {0};
    CHECK(e.ops->check_policy(e.state, p, &un, &err) == SBX_OK, "check_policy");
    CHECK(sbx_strlist_contains(&un, "memory_mb") && sbx_strlist_contains(&un, "pids"),
          "memory_mb/pids not reported unenforceable");
    sbx_strlist_clear(&un);
    sbx_sandbox *sb = NULL;
    CHECK(e.ops->create(e.state, NULL, NULL, p, &sb, &err) == SBX_E_POLICY,
          "strict create with limits was not refused: %s", err.message);
    CHECK(strstr(err.message, "memory_mb") != NULL, "message does not name memory_mb: %s",
          err.message);
    CHECK(lt_count_dir(e.runtime_dir) == 0, "a refused create left state");
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    e.ops->capabilities(e.state, &caps);
    CHECK(!caps.policy_resources, "rootless claims to enforce resources");
    for (size_t i = 0; i < caps.n_languages; i++)
        free(caps.languages[i]);
    free(caps.languages);
    sbx_message_free((ProtobufCMessage *)p);
    e.ops->close(e.state);
    lt_remove_runtime_dir(e.runtime_dir);
}

static void test_local_rootless_runs_confined_programs(void **state)
{
    (void)state;
    run_rootless(body_runs_programs);
}

static void test_local_rootless_strict_refuses_cgroup_limits(void **state)
{
    (void)state;
    run_rootless(body_strict_refuses_unenforceable_limits);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_rootless_runs_confined_programs),
        cmocka_unit_test(test_local_rootless_strict_refuses_cgroup_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
