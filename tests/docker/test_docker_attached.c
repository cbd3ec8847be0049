/* test_docker_attached.c - the docker provider attached to a container sbx did not create,
 * against the real private dockerd of the ctest fixture: commands through the exec API,
 * files through the archive API, GONE for removed or stopped containers, destroy leaves the
 * container alone. One behaviour per test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "docker_test.h"
#include "sbx/contract.h"

extern const sbx_provider_ops sbx_provider_docker;
static const sbx_provider_ops *ops = &sbx_provider_docker;

typedef struct fixture {
    dt_env env;
    char *container; /* a running python container, sleeping */
    void *provider;  /* attached to it */
    sbx_sandbox *sb;
    sbx_policy *policy;
    sbx_principal *principal;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    dt_env_load(&f->env);
    const char *argv[] = {"sleep", "600", NULL};
    f->container = dt_container_run(&f->env, f->env.image_python, argv);
    f->provider = dt_provider_open(&f->env, SBX_ENV_ATTACHED, f->container, NULL, NULL);
    f->policy = sbx_policy_new();
    f->principal = sbx_principal_new();
    sbx_error err;
    sbx_status st = ops->attach(f->provider, f->container, f->principal, f->policy, &f->sb, &err);
    if (st != SBX_OK)
        fail_msg("attach: %s", err.message);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ops->sandbox_close(f->sb);
    dt_provider_close(f->provider);
    dt_container_remove(&f->env, f->container);
    free(f->container);
    sbx_message_free((ProtobufCMessage *)f->policy);
    sbx_message_free((ProtobufCMessage *)f->principal);
    dt_env_free(&f->env);
    free(f);
    return 0;
}

static sbx_exec_opts opts_for(fixture *f, int64_t timeout_ms)
{
    sbx_exec_opts o = {.principal = f->principal, .policy = f->policy};
    if (timeout_ms > 0)
        o.deadline_mono_ms = sbx_monotonic_ms() + timeout_ms;
    return o;
}

static sbx_status shell(fixture *f, const char *line, const char *stdin_text, int64_t timeout_ms,
                        uint64_t output_limit, sbx_result **out, sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    if (stdin_text != NULL) {
        op.stdin.data = (uint8_t *)stdin_text;
        op.stdin.len = strlen(stdin_text);
    }
    sbx_exec_opts o = opts_for(f, timeout_ms);
    o.output_limit_bytes = output_limit;
    *out = sbx_result_new();
    return ops->run_command(f->sb, &op, &o, *out, err);
}

static void test_docker_attached_command_separates_stdout_stderr_and_exit_code(void **state)
{
    fixture *f = *state;
    sbx_result *r;
    sbx_error err;
    assert_int_equal(shell(f, "echo out; echo err >&2; exit 3", NULL, 30000, 0, &r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 3);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    assert_int_equal(r->stdout.len, 4);
    assert_memory_equal(r->stdout.data, "out\n", 4);
    assert_int_equal(r->stderr.len, 4);
    assert_memory_equal(r->stderr.data, "err\n", 4);
    sbx_message_free((ProtobufCMessage *)r);
}

/* The exec API keeps no journal: detached commands are not declared, and refused. */
static void test_docker_attached_refuses_detached_commands(void **state)
{
    fixture *f = *state;
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    ops->capabilities(f->provider, &caps);
    assert_false(caps.detach);
    for (size_t i = 0; i < caps.n_languages; i++)
        free(caps.languages[i]);
    free(caps.languages);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "true";
    op.detach = true;
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_command(f->sb, &op, &o, r, &err), SBX_E_CAPABILITY);
    Sbx__V1__AttachCommand at = SBX__V1__ATTACH_COMMAND__INIT;
    at.command_id = 1;
    assert_int_equal(ops->attach_command(f->sb, &at, &o, r, &err), SBX_E_CAPABILITY);
    Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;
    cc.command_id = 1;
    assert_int_equal(ops->cancel_command(f->sb, &cc, &o, r, &err), SBX_E_CAPABILITY);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_argv_runs_without_a_shell(void **state)
{
    fixture *f = *state;
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"echo", "a;b", "$HOME"};
    op.argv = argv;
    op.n_argv = 3;
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_command(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    assert_int_equal(r->stdout.len, strlen("a;b $HOME\n"));
    assert_memory_equal(r->stdout.data, "a;b $HOME\n", r->stdout.len);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_stdin_env_and_cwd_reach_the_program(void **state)
{
    fixture *f = *state;
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "cat; echo \":$GREETING:$(pwd)\"";
    op.stdin.data = (uint8_t *)"piped";
    op.stdin.len = 5;
    Sbx__V1__RunCommand__EnvEntry e = SBX__V1__RUN_COMMAND__ENV_ENTRY__INIT;
    e.key = "GREETING";
    e.value = "hi there";
    Sbx__V1__RunCommand__EnvEntry *envp[] = {&e};
    op.env = envp;
    op.n_env = 1;
    op.cwd = "/etc";
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_command(f->sb, &op, &o, r, &err), SBX_OK);
    const char want[] = "piped:hi there:/etc\n";
    assert_int_equal(r->stdout.len, strlen(want));
    assert_memory_equal(r->stdout.data, want, strlen(want));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_large_stdin_and_output_do_not_deadlock(void **state)
{
    fixture *f = *state;
    /* 1 MiB through cat while cat writes it back: both directions must flow at once. */
    size_t n = 1024 * 1024;
    char *big = malloc(n + 1);
    memset(big, 'z', n);
    big[n] = '\0';
    sbx_result *r;
    sbx_error err;
    assert_int_equal(shell(f, "cat", big, 60000, 0, &r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    assert_int_equal(r->stdout.len, n);
    sbx_message_free((ProtobufCMessage *)r);
    free(big);
}

static void test_docker_attached_deadline_kills_the_process_tree(void **state)
{
    fixture *f = *state;
    sbx_result *r;
    sbx_error err;
    int64_t t0 = sbx_monotonic_ms();
    sbx_status st =
        shell(f, "echo started; sleep 300 & sleep 300; echo never", NULL, 1500, 0, &r, &err);
    assert_int_equal(st, SBX_E_TIMEOUT);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_true(r->stdout.len >= 8);
    assert_memory_equal(r->stdout.data, "started\n", 8);
    /* Generous bound for a loaded machine: far less than the 300 s the program wanted. */
    assert_true(sbx_monotonic_ms() - t0 < 60000);
    sbx_message_free((ProtobufCMessage *)r);
    /* Neither sleep survives: both were in the exec's process tree. Orphans of the killed shell
     * stay as zombies of the container's PID 1 (`sleep 600`, which never reaps), so count only
     * live ones: exactly one remains, PID 1 itself. */
    assert_int_equal(shell(f, "ps -o stat,comm | grep -v '^Z' | grep -c 'sleep' || true", NULL,
                           30000, 0, &r, &err),
                     SBX_OK);
    assert_memory_equal(r->stdout.data, "1\n", 2);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_output_limit_truncates_and_stops_the_program(void **state)
{
    fixture *f = *state;
    sbx_result *r;
    sbx_error err;
    assert_int_equal(shell(f, "yes", NULL, 60000, 4096, &r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT);
    assert_int_equal(r->stdout.len, 4096);
    assert_true(r->stdout_truncated);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_python_code_runs(void **state)
{
    fixture *f = *state;
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = "import sys\nprint(6*7)\nsys.exit(0)";
    sbx_exec_opts o = opts_for(f, 60000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_code(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    assert_int_equal(r->stdout.len, 3);
    assert_memory_equal(r->stdout.data, "42\n", 3);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_python_exception_is_a_result(void **state)
{
    fixture *f = *state;
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = "raise ValueError('boom')";
    sbx_exec_opts o = opts_for(f, 60000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_code(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(memmem(r->stderr.data, r->stderr.len, "ValueError: boom", 16));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_write_then_read_file_roundtrips(void **state)
{
    fixture *f = *state;
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "/tmp/deep/er/file.bin";
    uint8_t content[3000];
    for (size_t i = 0; i < sizeof(content); i++)
        content[i] = (uint8_t)(i * 7);
    w.content.data = content;
    w.content.len = sizeof(content);
    w.mode = 0640;
    w.mkdirs = true;
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    if (ops->write_file(f->sb, &w, &o, r, &err) != SBX_OK)
        fail_msg("write_file: %s", err.message);
    sbx_message_free((ProtobufCMessage *)r);

    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/tmp/deep/er/file.bin";
    r = sbx_result_new();
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_int_equal(r->files[0]->content.len, sizeof(content));
    assert_memory_equal(r->files[0]->content.data, content, sizeof(content));
    assert_int_equal(r->files[0]->mode, 0640);
    assert_int_equal(r->files[0]->size, sizeof(content));
    sbx_message_free((ProtobufCMessage *)r);

    /* A window: offset and max_bytes. */
    rd.offset = 1000;
    rd.max_bytes = 10;
    r = sbx_result_new();
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->files[0]->content.len, 10);
    assert_memory_equal(r->files[0]->content.data, content + 1000, 10);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_write_without_mkdirs_into_missing_dir_is_refused(void **state)
{
    fixture *f = *state;
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "/tmp/no/such/dir/file";
    w.content.data = (uint8_t *)"x";
    w.content.len = 1;
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->write_file(f->sb, &w, &o, r, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "mkdirs"));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_relative_paths_resolve_in_the_workdir(void **state)
{
    fixture *f = *state;
    /* The helper container's WorkingDir is /tmp. */
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "rel.txt";
    w.content.data = (uint8_t *)"relative";
    w.content.len = 8;
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->write_file(f->sb, &w, &o, r, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_equal(shell(f, "cat /tmp/rel.txt", NULL, 30000, 0, &r, &err), SBX_OK);
    assert_int_equal(r->stdout.len, 8);
    assert_memory_equal(r->stdout.data, "relative", 8);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_read_missing_file_names_the_path(void **state)
{
    fixture *f = *state;
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/tmp/definitely-missing";
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "/tmp/definitely-missing"));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_read_follows_symlinks_inside_the_container(void **state)
{
    fixture *f = *state;
    sbx_result *r;
    sbx_error err;
    assert_int_equal(
        shell(f, "echo target > /tmp/t.txt && ln -sf t.txt /tmp/link", NULL, 30000, 0, &r, &err),
        SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/tmp/link";
    sbx_exec_opts o = opts_for(f, 30000);
    r = sbx_result_new();
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->files[0]->content.len, 7);
    assert_memory_equal(r->files[0]->content.data, "target\n", 7);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_list_shows_direct_children_only(void **state)
{
    fixture *f = *state;
    sbx_result *r;
    sbx_error err;
    assert_int_equal(shell(f,
                           "mkdir -p /tmp/ls/sub/deeper && echo 12345 > /tmp/ls/a && "
                           "touch /tmp/ls/sub/deeper/x",
                           NULL, 30000, 0, &r, &err),
                     SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    Sbx__V1__ListFiles op = SBX__V1__LIST_FILES__INIT;
    op.path = "/tmp/ls";
    sbx_exec_opts o = opts_for(f, 30000);
    r = sbx_result_new();
    assert_int_equal(ops->list_files(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 2);
    bool saw_a = false, saw_sub = false;
    for (size_t i = 0; i < r->n_files; i++) {
        if (strcmp(r->files[i]->path, "a") == 0) {
            saw_a = true;
            assert_int_equal(r->files[i]->size, 6);
            assert_int_equal(r->files[i]->kind, SBX__V1__FILE_KIND__FILE_KIND_REGULAR);
        }
        if (strcmp(r->files[i]->path, "sub") == 0) {
            saw_sub = true;
            assert_int_equal(r->files[i]->kind, SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY);
        }
    }
    assert_true(saw_a && saw_sub);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_docker_attached_destroy_leaves_the_container_running(void **state)
{
    fixture *f = *state;
    sbx_error err;
    assert_int_equal(ops->destroy(f->provider, f->container, &err), SBX_OK);
    json_t *j = dt_container_inspect(&f->env, f->container);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(json_object_get(j, "State"), "Running")));
    json_decref(j);
}

static void test_docker_attached_removed_container_is_gone(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    dt_container_remove(&f->env, id);
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_E_GONE);
    assert_null(sb);
    assert_non_null(strstr(err.message, "No such container"));
    free(id);
}

static void test_docker_attached_stopped_container_is_gone(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    dt_container_stop(&f->env, id);
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, "not running"));
    /* An attached container is not ours: stopped, it is left where it is. */
    json_t *j = dt_container_inspect(&f->env, id);
    assert_non_null(j);
    json_decref(j);
    dt_container_remove(&f->env, id);
    free(id);
}

static void test_docker_attached_container_removed_under_a_live_handle_is_gone(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_OK);
    dt_container_remove(&f->env, id);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "true";
    sbx_exec_opts o = opts_for(f, 30000);
    sbx_result *r = sbx_result_new();
    assert_int_equal(ops->run_command(sb, &op, &o, r, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, "No such container"));
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(sb);
    free(id);
}

static void test_docker_attached_policy_dimensions_are_listed_unenforceable(void **state)
{
    fixture *f = *state;
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->memory_mb = 64;
    p->cpu = 0.5;
    sbx_strlist list = {0};
    sbx_error err;
    assert_int_equal(ops->check_policy(f->provider, p, &list, &err), SBX_OK);
    assert_true(sbx_strlist_contains(&list, "network_egress=deny"));
    assert_true(sbx_strlist_contains(&list, "memory_mb"));
    assert_true(sbx_strlist_contains(&list, "cpu"));
    sbx_strlist_clear(&list);
    sbx_message_free((ProtobufCMessage *)p);
}

static void test_docker_attached_no_daemon_is_provision_with_the_socket_named(void **state)
{
    (void)state;
    extern const sbx_provider_ops sbx_provider_docker;
    sbx_options *o = sbx_options_new(sbx_provider_docker.options);
    sbx_error err;
    assert_int_equal(sbx_options_set(o, "socket", "/tmp/sbx-no-such-docker.sock", &err), SBX_OK);
    sbx_provider_ctx ctx = {.profile = "p",
                            .options = o,
                            .environment = SBX_ENV_ATTACHED,
                            .attach_to = "x",
                            .node = "n"};
    void *st = NULL;
    assert_int_equal(sbx_provider_docker.open(&ctx, &st, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "/tmp/sbx-no-such-docker.sock"));
    assert_null(st);
    sbx_options_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_attached_command_separates_stdout_stderr_and_exit_code),
        cmocka_unit_test(test_docker_attached_refuses_detached_commands),
        cmocka_unit_test(test_docker_attached_argv_runs_without_a_shell),
        cmocka_unit_test(test_docker_attached_stdin_env_and_cwd_reach_the_program),
        cmocka_unit_test(test_docker_attached_large_stdin_and_output_do_not_deadlock),
        cmocka_unit_test(test_docker_attached_deadline_kills_the_process_tree),
        cmocka_unit_test(test_docker_attached_output_limit_truncates_and_stops_the_program),
        cmocka_unit_test(test_docker_attached_python_code_runs),
        cmocka_unit_test(test_docker_attached_python_exception_is_a_result),
        cmocka_unit_test(test_docker_attached_write_then_read_file_roundtrips),
        cmocka_unit_test(test_docker_attached_write_without_mkdirs_into_missing_dir_is_refused),
        cmocka_unit_test(test_docker_attached_relative_paths_resolve_in_the_workdir),
        cmocka_unit_test(test_docker_attached_read_missing_file_names_the_path),
        cmocka_unit_test(test_docker_attached_read_follows_symlinks_inside_the_container),
        cmocka_unit_test(test_docker_attached_list_shows_direct_children_only),
        cmocka_unit_test(test_docker_attached_destroy_leaves_the_container_running),
        cmocka_unit_test(test_docker_attached_removed_container_is_gone),
        cmocka_unit_test(test_docker_attached_stopped_container_is_gone),
        cmocka_unit_test(test_docker_attached_container_removed_under_a_live_handle_is_gone),
        cmocka_unit_test(test_docker_attached_policy_dimensions_are_listed_unenforceable),
        cmocka_unit_test(test_docker_attached_no_daemon_is_provision_with_the_socket_named),
    };
    /* One helper container for the whole group keeps the run short; tests that need a
     * container of their own make one. */
    return cmocka_run_group_tests(tests, setup, teardown);
}
