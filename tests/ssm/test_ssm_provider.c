/* test_ssm_provider.c - the ec2_ssm provider against the SigV4-verifying fake SSM/STS endpoint:
 * attach (GONE cases), SendCommand + polling (InvocationDoesNotExist, Pending/InProgress,
 * throttling), CancelCommand at the deadline, SSM's truncation notice, quoting of argv / env /
 * stdin / run_as, user mode through STS AssumeRole and its cache, credentials from the
 * environment and the shared file, and secret redaction. One behaviour per test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>

#include <cmocka.h>

#include "ssm_harness.h"

typedef struct fixture {
    harness h;
    sbx_sandbox *sb;
    sbx_result *r;
} fixture;

static int setup_open(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    harness_init(&f->h);
    f->r = sbx_result_new();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sbx_provider_ec2_ssm.sandbox_close(f->sb);
    sbx_message_free((ProtobufCMessage *)f->r);
    harness_free(&f->h);
    free(f);
    return 0;
}

/* Opens and attaches with the current options and principal. */
static void open_attach(fixture *f)
{
    sbx_status st = harness_open(&f->h);
    if (st != SBX_OK)
        print_error("open: %s\n", f->h.err.message);
    assert_int_equal(st, SBX_OK);
    st = harness_attach(&f->h, NULL, &f->sb);
    if (st != SBX_OK)
        print_error("attach: %s\n", f->h.err.message);
    assert_int_equal(st, SBX_OK);
}

static void expect_stdout(fixture *f, const char *want)
{
    char *out = result_stdout(f->r);
    assert_string_equal(out, want);
    free(out);
}

/* ---- attach ------------------------------------------------------------------------------- */

static void test_ssm_attach_online_instance(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_string_equal(f->sb->id, H_INSTANCE);
    assert_int_equal(ssm_fake_calls(f->h.fake, "DescribeInstanceInformation"), 1);
}

static void test_ssm_attach_unregistered_instance_is_gone(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, "i-0fedcba9876543210", &f->sb), SBX_E_GONE);
    assert_null(f->sb);
    assert_non_null(strstr(f->h.err.message, "not registered"));
}

static void test_ssm_attach_connection_lost_is_gone(void **state)
{
    fixture *f = *state;
    ssm_fake_add_instance(f->h.fake, "i-0aaaaaaaaaaaaaaaa", "ConnectionLost", NULL);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, "i-0aaaaaaaaaaaaaaaa", &f->sb), SBX_E_GONE);
    assert_non_null(strstr(f->h.err.message, "ConnectionLost"));
}

static void test_ssm_attach_malformed_id_is_gone_without_a_call(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, "i-; rm -rf /", &f->sb), SBX_E_GONE);
    assert_int_equal(ssm_fake_calls(f->h.fake, "DescribeInstanceInformation"), 0);
}

static void test_ssm_attach_windows_instance_is_capability(void **state)
{
    fixture *f = *state;
    ssm_fake_add_instance(f->h.fake, "i-0bbbbbbbbbbbbbbbb", "Online", "Windows");
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, "i-0bbbbbbbbbbbbbbbb", &f->sb), SBX_E_CAPABILITY);
}

static void test_ssm_create_is_capability(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    sbx_session_handle *hd = sbx_session_handle_new();
    sbx_error err = {0};
    assert_int_equal(
        sbx_provider_ec2_ssm.create(f->h.state, hd, f->h.principal, f->h.policy, &f->sb, &err),
        SBX_E_CAPABILITY);
    assert_null(f->sb);
    sbx_message_free((ProtobufCMessage *)hd);
    assert_int_equal(sbx_provider_ec2_ssm.traits, SBX_PROVIDER_ATTACHES);
}

static void test_ssm_destroy_never_touches_the_instance(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.destroy(f->h.state, H_INSTANCE, &err), SBX_OK);
    assert_int_equal(sbx_provider_ec2_ssm.destroy(f->h.state, H_INSTANCE, &err), SBX_OK);
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->h.fake)), 0);
}

/* ---- running ------------------------------------------------------------------------------ */

static void test_ssm_run_returns_output_and_exit_status(void **state)
{
    fixture *f = *state;
    open_attach(f);
    const char *argv[] = {"echo", "hello", "world", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "hello world\n");
    assert_int_equal(f->r->exit_code, 0);
    assert_int_equal(f->r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    assert_non_null(result_data(f->r, "command_id"));
    assert_null(result_data(f->r, "notice"));
    assert_int_equal(ssm_fake_signature_failures(f->h.fake), 0);
}

static void test_ssm_nonzero_exit_is_a_result_not_an_error(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "echo oops >&2\nexit 3", 0, f->r), SBX_OK);
    assert_int_equal(f->r->exit_code, 3);
    assert_int_equal(f->r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    char *e = result_stderr(f->r);
    assert_string_equal(e, "oops\n");
    free(e);
}

static void test_ssm_polls_through_invocation_does_not_exist(void **state)
{
    fixture *f = *state;
    ssm_fake_set_invisible_polls(f->h.fake, 4);
    open_attach(f);
    const char *argv[] = {"echo", "ok", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "ok\n");
    /* 4 x InvocationDoesNotExist, Pending, then Success. */
    assert_true(ssm_fake_calls(f->h.fake, "GetCommandInvocation") >= 6);
}

static void test_ssm_invocation_that_never_appears_is_provision(void **state)
{
    fixture *f = *state;
    ssm_fake_set_invisible_polls(f->h.fake, 1000000);
    harness_option(&f->h, "invocation_wait_ms", "150");
    open_attach(f);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_E_PROVISION);
    assert_non_null(strstr(f->h.err.message, "InvocationDoesNotExist"));
}

static void test_ssm_waits_while_in_progress(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "echo a\nsleep 0.3\necho b", 0, f->r), SBX_OK);
    expect_stdout(f, "a\nb\n");
    assert_true(ssm_fake_calls(f->h.fake, "GetCommandInvocation") >= 3);
}

static void test_ssm_throttling_is_retried(void **state)
{
    fixture *f = *state;
    open_attach(f);
    ssm_fake_throttle(f->h.fake, "SendCommand", 2);
    ssm_fake_throttle(f->h.fake, "GetCommandInvocation", 2);
    const char *argv[] = {"echo", "after throttling", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "after throttling\n");
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 3);
}

static void test_ssm_polling_rides_out_a_throttling_burst(void **state)
{
    fixture *f = *state;
    open_attach(f);
    /* 7 throttled polls: more than one GetCommandInvocation call's own retries (5). */
    ssm_fake_throttle(f->h.fake, "GetCommandInvocation", 7);
    const char *argv[] = {"echo", "still here", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "still here\n");
    assert_int_equal(ssm_fake_calls(f->h.fake, "CancelCommand"), 0);
}

static void test_ssm_polling_gives_up_after_persistent_errors_and_cancels(void **state)
{
    fixture *f = *state;
    open_attach(f);
    ssm_fake_throttle(f->h.fake, "GetCommandInvocation", 1000000);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "sleep 60", 0, f->r),
                     SBX_E_RESOURCE_EXHAUSTED);
    assert_int_equal(ssm_fake_calls(f->h.fake, "CancelCommand"), 1);
}

static void test_ssm_persistent_throttling_is_resource_exhausted(void **state)
{
    fixture *f = *state;
    open_attach(f);
    ssm_fake_throttle(f->h.fake, "SendCommand", 1000);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(f->h.err.message, "ThrottlingException"));
}

static void test_ssm_deadline_sends_cancel_command(void **state)
{
    fixture *f = *state;
    open_attach(f);
    /* 1.5 s: SendCommand must be answered before the deadline even on a loaded machine (the
     * test is about what happens at the deadline, not about how fast it comes). */
    sbx_status st =
        harness_run(&f->h, f->sb, NULL, "echo started\nsleep 60\necho never", 1500, f->r);
    assert_int_equal(st, SBX_E_TIMEOUT);
    assert_int_equal(f->r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_int_equal(ssm_fake_calls(f->h.fake, "CancelCommand"), 1);
    char status[32];
    assert_true(ssm_fake_last_status(f->h.fake, status, sizeof(status)));
    assert_string_equal(status, "Cancelled");
    expect_stdout(f, "started\n"); /* what was printed before the deadline */
}

typedef struct canceller {
    ssm_fake *fake;
    volatile int flag;
} canceller;

/* Sets the cancel flag once the command is running (SendCommand answered, first poll seen):
 * ordered by the fake's own counters, not by time. */
static void *cancel_when_running(void *arg)
{
    canceller *c = arg;
    while (ssm_fake_calls(c->fake, "GetCommandInvocation") < 1)
        usleep(2000);
    c->flag = 1;
    return NULL;
}

static void test_ssm_cancel_flag_sends_cancel_command(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "sleep 60";
    canceller c = {.fake = f->h.fake, .flag = 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, cancel_when_running, &c), 0);
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy, .cancel = &c.flag};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err), SBX_E_TIMEOUT);
    pthread_join(t, NULL);
    assert_int_equal(f->r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_int_equal(ssm_fake_calls(f->h.fake, "CancelCommand"), 1);
}

static void test_ssm_cancel_before_sending_sends_nothing(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "echo never";
    volatile int cancel = 1;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy, .cancel = &cancel};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err), SBX_E_TIMEOUT);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
}

static void test_ssm_execution_timeout_follows_the_deadline(void **state)
{
    fixture *f = *state;
    open_attach(f);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 5000, f->r), SBX_OK);
    assert_int_equal(ssm_fake_last_execution_timeout(f->h.fake), 5);
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_last_execution_timeout(f->h.fake), 3600);
}

static void test_ssm_timed_out_in_ssm_is_timeout(void **state)
{
    fixture *f = *state;
    harness_option(&f->h, "execution_timeout_s", "1");
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "echo x\nsleep 30", 0, f->r), SBX_E_TIMEOUT);
    assert_int_equal(f->r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_string_equal(result_data(f->r, "status_details"), "ExecutionTimedOut");
}

static void test_ssm_stdout_truncation_is_flagged_with_a_notice(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "repeat 30000 x", 0, f->r), SBX_OK);
    assert_int_equal(f->r->stdout.len, 24000);
    assert_true(f->r->stdout_truncated);
    assert_false(f->r->stderr_truncated);
    const char *notice = result_data(f->r, "notice");
    assert_non_null(notice);
    assert_non_null(strstr(notice, "24,000"));
}

static void test_ssm_stderr_truncation_is_flagged_with_a_notice(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "repeat 9000 e >&2", 0, f->r), SBX_OK);
    assert_int_equal(f->r->stderr.len, 8000);
    assert_true(f->r->stderr_truncated);
    assert_non_null(strstr(result_data(f->r, "notice"), "8,000"));
}

static void test_ssm_truncation_counts_characters_not_bytes(void **state)
{
    fixture *f = *state;
    open_attach(f);
    /* 23,999 two-byte characters: under SSM's 24,000-character limit, though 47,998 bytes. */
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "repeat 23999 \xc3\xa9", 0, f->r), SBX_OK);
    assert_int_equal(f->r->stdout.len, 47998);
    assert_false(f->r->stdout_truncated);
    assert_null(result_data(f->r, "notice"));
}

static void test_ssm_working_directory_is_sent(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "pwd";
    op.cwd = "/srv/app";
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err), SBX_OK);
    expect_stdout(f, "/srv/app\n");
    char cwd[256];
    assert_true(ssm_fake_last_working_directory(f->h.fake, cwd, sizeof(cwd)));
    assert_string_equal(cwd, "/srv/app");
}

/* ---- quoting ------------------------------------------------------------------------------ */

static void test_ssm_hostile_argv_stays_literal(void **state)
{
    fixture *f = *state;
    open_attach(f);
    const char *argv[] = {"echo", "$(id)", "a'b", "; exit 7", "`x` && y | z", "'\\''", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "$(id) a'b ; exit 7 `x` && y | z '\\''\n");
    assert_int_equal(f->r->exit_code, 0);
    char script[4096];
    assert_true(ssm_fake_last_script(f->h.fake, script, sizeof(script)));
    assert_string_equal(script, "'echo' '$(id)' 'a'\\''b' '; exit 7' '`x` && y | z' "
                                "''\\''\\'\\'''\\'''\n");
}

static void test_ssm_env_values_are_quoted(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    const char *argv[] = {"printenv", "GREETING", NULL};
    op.argv = (char **)argv;
    op.n_argv = 2;
    Sbx__V1__RunCommand__EnvEntry e;
    sbx__v1__run_command__env_entry__init(&e);
    e.key = "GREETING";
    e.value = "it's $HOME; exit 9";
    Sbx__V1__RunCommand__EnvEntry *ep = &e;
    op.env = &ep;
    op.n_env = 1;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err), SBX_OK);
    expect_stdout(f, "it's $HOME; exit 9\n");
}

static void test_ssm_hostile_env_name_is_refused_before_sending(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "true";
    Sbx__V1__RunCommand__EnvEntry e;
    sbx__v1__run_command__env_entry__init(&e);
    e.key = "X=1; rm -rf / #";
    e.value = "v";
    Sbx__V1__RunCommand__EnvEntry *ep = &e;
    op.env = &ep;
    op.n_env = 1;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
}

static void test_ssm_stdin_is_fed_to_the_program(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    const char *argv[] = {"cat", NULL};
    op.argv = (char **)argv;
    op.n_argv = 1;
    const char *in = "line one\nit's $(two)\n";
    op.stdin.data = (uint8_t *)in;
    op.stdin.len = strlen(in);
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err), SBX_OK);
    expect_stdout(f, in);
}

static void test_ssm_stdin_with_nul_is_refused(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "cat";
    op.stdin.data = (uint8_t *)"a\0b";
    op.stdin.len = 3;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_command(f->sb, &op, &o, f->r, &err),
                     SBX_E_INVALID_ARGUMENT);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
}

static void test_ssm_run_as_goes_through_sudo(void **state)
{
    fixture *f = *state;
    harness_credential(&f->h, "run_as", "deploy");
    open_attach(f);
    const char *argv[] = {"whoami", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "deploy\n");
    char script[4096];
    assert_true(ssm_fake_last_script(f->h.fake, script, sizeof(script)));
    assert_int_equal(strncmp(script, "sudo -n -u 'deploy' -- sh -c ", 29), 0);
}

static void test_ssm_run_as_keeps_hostile_arguments_literal(void **state)
{
    fixture *f = *state;
    harness_credential(&f->h, "run_as", "deploy");
    open_attach(f);
    const char *argv[] = {"echo", "'; whoami; echo '", "$(reboot)", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    expect_stdout(f, "'; whoami; echo ' $(reboot)\n");
}

static void test_ssm_hostile_run_as_user_is_refused(void **state)
{
    const char *bad[] = {
        "root -u x", "-u", "a;b", "$(id)", "o'neil", "x\ny", "averyveryveryveryverylongusername1",
        "../etc"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fixture *f = *state;
        harness_free(&f->h);
        harness_init(&f->h);
        sbx_provider_ec2_ssm.sandbox_close(f->sb);
        f->sb = NULL;
        harness_credential(&f->h, "run_as", bad[i]);
        open_attach(f);
        const char *argv[] = {"true", NULL};
        sbx_status st = harness_run(&f->h, f->sb, argv, NULL, 0, f->r);
        if (st != SBX_E_INVALID_ARGUMENT)
            print_error("run_as '%s' was not refused\n", bad[i]);
        assert_int_equal(st, SBX_E_INVALID_ARGUMENT);
        assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
    }
}

static void test_ssm_run_code_bash_runs_through_bash(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCode op;
    sbx__v1__run_code__init(&op);
    op.language = "bash";
    op.code = "echo from bash";
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_code(f->sb, &op, &o, f->r, &err), SBX_OK);
    expect_stdout(f, "from bash\n");
    char script[256];
    assert_true(ssm_fake_last_script(f->h.fake, script, sizeof(script)));
    assert_string_equal(script, "bash -c 'echo from bash'\n");
}

static void test_ssm_run_code_python_is_capability(void **state)
{
    fixture *f = *state;
    open_attach(f);
    Sbx__V1__RunCode op;
    sbx__v1__run_code__init(&op);
    op.language = "python";
    op.code = "print(1)";
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.run_code(f->sb, &op, &o, f->r, &err), SBX_E_CAPABILITY);
}

/* ---- user mode ---------------------------------------------------------------------------- */

static void test_ssm_user_mode_signs_with_the_assumed_role(void **state)
{
    fixture *f = *state;
    harness_user(&f->h, "alice@example.com", H_ROLE);
    open_attach(f);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 1);
    char akid[64], session[80];
    assert_true(ssm_fake_last_access_key(f->h.fake, "SendCommand", akid, sizeof(akid)));
    assert_int_equal(strncmp(akid, "ASIAFAKE", 8), 0);
    assert_true(ssm_fake_last_access_key(f->h.fake, "AssumeRole", akid, sizeof(akid)));
    assert_string_equal(akid, SSM_FAKE_ACCESS_KEY_ID);
    assert_true(ssm_fake_last_role_session_name(f->h.fake, session, sizeof(session)));
    assert_string_equal(session, "sbx-alice@example.com");
    assert_int_equal(ssm_fake_signature_failures(f->h.fake), 0);
}

static void test_ssm_user_mode_credentials_are_cached(void **state)
{
    fixture *f = *state;
    harness_user(&f->h, "alice", H_ROLE);
    open_attach(f); /* attach: first AssumeRole */
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 1);
}

static void test_ssm_user_mode_cache_is_per_subject_and_role(void **state)
{
    fixture *f = *state;
    harness_user(&f->h, "alice", H_ROLE);
    open_attach(f);
    harness_user(&f->h, "bob", H_ROLE);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 2);
    harness_user(&f->h, "alice", "arn:aws:iam::123456789012:role/another-role");
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 3);
    harness_user(&f->h, "alice", H_ROLE);
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 3);
}

static void test_ssm_user_mode_credentials_near_expiry_are_renewed(void **state)
{
    fixture *f = *state;
    /* Issued credentials live 120 s; the refresh margin is 300 s: always "about to expire". */
    ssm_fake_set_credential_lifetime(f->h.fake, 120);
    harness_user(&f->h, "alice", H_ROLE);
    open_attach(f);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    int after_one = ssm_fake_calls(f->h.fake, "AssumeRole");
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_true(ssm_fake_calls(f->h.fake, "AssumeRole") > after_one);
}

static void test_ssm_user_mode_margin_zero_keeps_short_credentials(void **state)
{
    fixture *f = *state;
    ssm_fake_set_credential_lifetime(f->h.fake, 120);
    harness_option(&f->h, "credential_refresh_margin_s", "0");
    harness_user(&f->h, "alice", H_ROLE);
    open_attach(f);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 1);
}

static void test_ssm_user_mode_without_role_is_permission_denied(void **state)
{
    fixture *f = *state;
    harness_user(&f->h, "alice", NULL);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_PERMISSION_DENIED);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 0);
    assert_int_equal(ssm_fake_calls(f->h.fake, "DescribeInstanceInformation"), 0);
}

static void test_ssm_user_mode_uses_the_profile_role(void **state)
{
    fixture *f = *state;
    harness_option(&f->h, "role_arn", H_ROLE);
    harness_user(&f->h, "carol", NULL);
    open_attach(f);
    assert_int_equal(ssm_fake_calls(f->h.fake, "AssumeRole"), 1);
}

static void test_ssm_user_mode_access_denied_is_permission_denied(void **state)
{
    fixture *f = *state;
    ssm_fake_deny_role(f->h.fake, H_ROLE);
    harness_user(&f->h, "mallory", H_ROLE);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(f->h.err.message, "AccessDenied"));
    assert_int_equal(ssm_fake_calls(f->h.fake, "DescribeInstanceInformation"), 0);
}

/* ---- credentials and secrets -------------------------------------------------------------- */

static void test_ssm_credentials_from_shared_file(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/sbx-ssm-creds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/credentials", dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp,
            "[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = nope\n\n"
            "# the profile under test\n[sbx-test]\naws_access_key_id = %s\n"
            "aws_secret_access_key=%s\nregion = us-east-1\n",
            SSM_FAKE_ACCESS_KEY_ID, SSM_FAKE_SECRET_KEY);
    fclose(fp);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    harness_option(&f->h, "credentials_file", path);
    harness_option(&f->h, "aws_profile", "sbx-test");
    open_attach(f);
    assert_int_equal(ssm_fake_signature_failures(f->h.fake), 0);
    unlink(path);
    rmdir(dir);
}

static void test_ssm_credentials_file_profile_from_env(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/sbx-ssm-creds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/credentials", dir);
    FILE *fp = fopen(path, "w");
    fprintf(fp, "[ci]\naws_access_key_id=%s\naws_secret_access_key=%s\n", SSM_FAKE_ACCESS_KEY_ID,
            SSM_FAKE_SECRET_KEY);
    fclose(fp);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    setenv("AWS_PROFILE", "ci", 1);
    open_attach(f);
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unsetenv("AWS_PROFILE");
    unlink(path);
    rmdir(dir);
}

static void test_ssm_missing_credentials_is_config(void **state)
{
    fixture *f = *state;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    harness_option(&f->h, "credentials_file", "/nonexistent/sbx/credentials");
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_CONFIG);
    assert_non_null(strstr(f->h.err.message, "AWS_ACCESS_KEY_ID"));
}

static void test_ssm_secret_env_named_in_config_is_used(void **state)
{
    fixture *f = *state;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("SBX_TEST_SSM_AKID", SSM_FAKE_ACCESS_KEY_ID, 1);
    setenv("SBX_TEST_SSM_SECRET", SSM_FAKE_SECRET_KEY, 1);
    harness_option(&f->h, "access_key_id_env", "SBX_TEST_SSM_AKID");
    harness_option(&f->h, "secret_access_key_env", "SBX_TEST_SSM_SECRET");
    open_attach(f);
    unsetenv("SBX_TEST_SSM_AKID");
    unsetenv("SBX_TEST_SSM_SECRET");
}

static void test_ssm_wrong_secret_is_config_and_never_echoed(void **state)
{
    fixture *f = *state;
    const char *secret = "WRONGsecretKEY/ShouldNeverAppear+1234567";
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_CONFIG);
    assert_int_equal(ssm_fake_signature_failures(f->h.fake), 1);
    assert_null(strstr(f->h.err.message, secret));
    assert_non_null(strstr(f->h.err.message, "InvalidSignatureException"));
    /* The secret never travels: only a signature derived from it does. */
    assert_false(fake_http_log_contains(ssm_fake_ssm_http(f->h.fake), secret));
}

static void test_ssm_server_echoed_session_token_is_redacted(void **state)
{
    fixture *f = *state;
    const char *token = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKENvalue1234567890";
    setenv("AWS_SECRET_ACCESS_KEY", "WRONGsecretKEY/ForThisTest+1234567", 1);
    setenv("AWS_SESSION_TOKEN", token, 1);
    ssm_fake_echo_token_in_errors(f->h.fake, true);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_CONFIG);
    assert_null(strstr(f->h.err.message, token));
    assert_non_null(strstr(f->h.err.message, "[REDACTED]"));
    unsetenv("AWS_SESSION_TOKEN");
}

static void test_ssm_secrets_never_reach_results_or_the_wire(void **state)
{
    fixture *f = *state;
    harness_user(&f->h, "alice", H_ROLE);
    open_attach(f);
    const char *argv[] = {"echo", "x", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_OK);
    assert_false(fake_http_log_contains(ssm_fake_ssm_http(f->h.fake), SSM_FAKE_SECRET_KEY));
    assert_false(fake_http_log_contains(ssm_fake_sts_http(f->h.fake), SSM_FAKE_SECRET_KEY));
    assert_false(fake_http_log_contains(ssm_fake_ssm_http(f->h.fake), "fakeSecret/"));
    size_t len = 0;
    uint8_t *packed = sbx_message_pack((const ProtobufCMessage *)f->r, &len);
    assert_non_null(packed);
    assert_null(memmem(packed, len, "fakeSecret/", 11));
    assert_null(memmem(packed, len, "FQoGZXIvYXdzEFAKE", 17));
    free(packed);
}

static void test_ssm_plain_http_to_a_remote_host_is_refused(void **state)
{
    fixture *f = *state;
    harness_option(&f->h, "ssm_endpoint", "http://ssm.example.com/");
    assert_int_equal(harness_open(&f->h), SBX_E_CONFIG);
    assert_non_null(strstr(f->h.err.message, "https"));
}

/* A DNS name that merely starts like a loopback address resolves wherever its owner likes: plain
 * http to it would send the signed request and the session token in clear text. */
static void test_ssm_plain_http_to_a_lookalike_loopback_name_is_refused(void **state)
{
    fixture *f = *state;
    const char *urls[] = {"http://127.attacker.example/", "http://127.0.0.1.attacker.example/"};
    const char *keys[] = {"ssm_endpoint", "sts_endpoint"};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 2; i++) {
            harness_option(&f->h, keys[k], urls[i]);
            if (harness_open(&f->h) != SBX_E_CONFIG)
                fail_msg("%s '%s' was accepted", keys[k], urls[i]);
            assert_non_null(strstr(f->h.err.message, "https"));
            assert_non_null(strstr(f->h.err.message, urls[i]));
            harness_option(&f->h, keys[k],
                           k == 0 ? ssm_fake_ssm_url(f->h.fake) : ssm_fake_sts_url(f->h.fake));
        }
    assert_int_equal(harness_open(&f->h), SBX_OK); /* the loopback fake itself is fine */
}

static void test_ssm_missing_region_is_config(void **state)
{
    fixture *f = *state;
    sbx_options_free(f->h.options);
    f->h.options = sbx_options_new(sbx_provider_ec2_ssm.options);
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    assert_int_equal(harness_open(&f->h), SBX_E_CONFIG);
    assert_non_null(strstr(f->h.err.message, "region"));
}

/* ---- HTTP faults (shared fake framework) ---------------------------------------------------- */

static void test_ssm_idempotent_call_survives_one_503(void **state)
{
    fixture *f = *state;
    fake_fault fault = {.status = 503, .body = "{\"__type\":\"ServiceUnavailable\"}", .times = 1};
    fake_http_fault(ssm_fake_ssm_http(f->h.fake), "POST", "/", &fault);
    open_attach(f); /* DescribeInstanceInformation is retried */
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->h.fake)), 2);
}

static void test_ssm_send_command_5xx_is_not_retried(void **state)
{
    fixture *f = *state;
    open_attach(f);
    fake_fault fault = {.status = 500, .body = "{\"__type\":\"InternalServerError\"}", .times = 1};
    fake_http_fault(ssm_fake_ssm_http(f->h.fake), "POST", "/", &fault);
    const char *argv[] = {"true", NULL};
    assert_int_equal(harness_run(&f->h, f->sb, argv, NULL, 0, f->r), SBX_E_PROVISION);
    /* Describe + exactly one SendCommand attempt: repeating it could run the command twice. */
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->h.fake)), 2);
}

static void test_ssm_invalid_json_answer_is_provision(void **state)
{
    fixture *f = *state;
    fake_fault fault = {.invalid_json = true, .times = 1};
    fake_http_fault(ssm_fake_ssm_http(f->h.fake), "POST", "/", &fault);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_PROVISION);
    assert_non_null(strstr(f->h.err.message, "JSON"));
}

static void test_ssm_truncated_answer_is_retried(void **state)
{
    fixture *f = *state;
    fake_fault fault = {.truncate = true, .times = 1};
    fake_http_fault(ssm_fake_ssm_http(f->h.fake), "POST", "/", &fault);
    open_attach(f);
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->h.fake)), 2);
}

static void test_ssm_endpoint_that_never_answers_times_out(void **state)
{
    fixture *f = *state;
    harness_option(&f->h, "request_timeout_ms", "200");
    fake_fault fault = {.delay_ms = 5000, .times = -1};
    fake_http_fault(ssm_fake_ssm_http(f->h.fake), "POST", "/", &fault);
    assert_int_equal(harness_open(&f->h), SBX_OK);
    assert_int_equal(harness_attach(&f->h, NULL, &f->sb), SBX_E_TIMEOUT);
}

/* ---- files -------------------------------------------------------------------------------- */

static sbx_status do_write(fixture *f, const char *path, const void *data, size_t len,
                           uint32_t mode, bool mkdirs)
{
    Sbx__V1__WriteFile op;
    sbx__v1__write_file__init(&op);
    op.path = (char *)path;
    op.content.data = (uint8_t *)data;
    op.content.len = len;
    op.mode = mode;
    op.mkdirs = mkdirs;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error_clear(&f->h.err);
    return sbx_provider_ec2_ssm.write_file(f->sb, &op, &o, f->r, &f->h.err);
}

static sbx_status do_read(fixture *f, const char *path, uint64_t offset, uint64_t max,
                          sbx_result *r)
{
    Sbx__V1__ReadFile op;
    sbx__v1__read_file__init(&op);
    op.path = (char *)path;
    op.offset = offset;
    op.max_bytes = max;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error_clear(&f->h.err);
    return sbx_provider_ec2_ssm.read_file(f->sb, &op, &o, r, &f->h.err);
}

static sbx_status do_list(fixture *f, const char *path, sbx_result *r)
{
    Sbx__V1__ListFiles op;
    sbx__v1__list_files__init(&op);
    op.path = (char *)path;
    sbx_exec_opts o = {.principal = f->h.principal, .policy = f->h.policy};
    sbx_error_clear(&f->h.err);
    return sbx_provider_ec2_ssm.list_files(f->sb, &op, &o, r, &f->h.err);
}

static void test_ssm_file_round_trip_is_byte_identical(void **state)
{
    fixture *f = *state;
    open_attach(f);
    static const uint8_t content[] = "bin \0\x01\xff'\"$(x)`y`\n\r\nend";
    assert_int_equal(do_write(f, "/tmp/data.bin", content, sizeof(content), 0, false), SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/tmp/data.bin", 0, 0, r), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_int_equal(r->files[0]->content.len, sizeof(content));
    assert_memory_equal(r->files[0]->content.data, content, sizeof(content));
    assert_int_equal(r->files[0]->size, sizeof(content));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_large_file_moves_in_chunks(void **state)
{
    fixture *f = *state;
    open_attach(f);
    size_t n = 60 * 1024;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 131 + (i >> 8));
    assert_int_equal(do_write(f, "/srv/big.bin", data, n, 0, false), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 3); /* 22 KiB per command */
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/srv/big.bin", 0, 0, r), SBX_OK);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 3 + 4); /* 17,000 per command */
    assert_int_equal(r->files[0]->content.len, n);
    assert_memory_equal(r->files[0]->content.data, data, n);
    sbx_message_free((ProtobufCMessage *)r);
    free(data);
}

static void test_ssm_read_honours_offset_and_max_bytes(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(do_write(f, "/tmp/abc", "0123456789", 10, 0, false), SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/tmp/abc", 3, 4, r), SBX_OK);
    assert_int_equal(r->files[0]->content.len, 4);
    assert_memory_equal(r->files[0]->content.data, "3456", 4);
    assert_int_equal(r->files[0]->size, 10);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_read_over_the_limit_is_cut_with_a_notice(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "repeat 300000 q > /tmp/huge", 0, f->r),
                     SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/tmp/huge", 0, 0, r), SBX_OK);
    assert_int_equal(r->files[0]->content.len, 256 * 1024);
    assert_int_equal(r->files[0]->size, 300000);
    assert_non_null(result_data(r, "notice"));
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_write_mode_and_listing(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(do_write(f, "/home/app/secret.txt", "s3cr3t", 6, 0600, true), SBX_OK);
    assert_int_equal(do_write(f, "/home/app/with space\nand newline", "x", 1, 0, false), SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_list(f, "/home/app", r), SBX_OK);
    assert_int_equal(r->n_files, 2);
    assert_string_equal(r->files[0]->path, "/home/app/secret.txt");
    assert_int_equal(r->files[0]->mode, 0100600);
    assert_int_equal(r->files[0]->size, 6);
    assert_string_equal(r->files[1]->path, "/home/app/with space\nand newline");
    assert_int_equal(r->files[1]->mode, 0100644);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_write_without_mkdirs_into_missing_dir_is_refused(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(do_write(f, "/srv/no/such/dir/f", "x", 1, 0, false), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(f->h.err.message, "/srv/no/such/dir/f"));
    assert_int_equal(do_write(f, "/srv/no/such/dir/f", "x", 1, 0, true), SBX_OK);
}

static void test_ssm_read_missing_file_is_invalid_argument(void **state)
{
    fixture *f = *state;
    open_attach(f);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/tmp/nope", 0, 0, r), SBX_E_INVALID_ARGUMENT);
    assert_int_equal(r->n_files, 0);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_relative_paths_need_a_workdir(void **state)
{
    fixture *f = *state;
    open_attach(f);
    assert_int_equal(do_write(f, "rel.txt", "x", 1, 0, false), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(f->h.err.message, "workdir"));
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
}

static void test_ssm_relative_paths_resolve_under_workdir(void **state)
{
    fixture *f = *state;
    harness_option(&f->h, "workdir", "/srv");
    open_attach(f);
    assert_int_equal(do_write(f, "rel.txt", "xyz", 3, 0, false), SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_read(f, "/srv/rel.txt", 0, 0, r), SBX_OK);
    assert_memory_equal(r->files[0]->content.data, "xyz", 3);
    sbx_message_free((ProtobufCMessage *)r);
    /* commands without cwd run there too */
    assert_int_equal(harness_run(&f->h, f->sb, NULL, "pwd", 0, f->r), SBX_OK);
    expect_stdout(f, "/srv\n");
}

static void test_ssm_hostile_file_path_stays_literal(void **state)
{
    fixture *f = *state;
    open_attach(f);
    const char *path = "/tmp/x'; rm -rf ~ #$(id) `reboot`";
    assert_int_equal(do_write(f, path, "ok", 2, 0, false), SBX_OK);
    sbx_result *r = sbx_result_new();
    assert_int_equal(do_list(f, "/tmp", r), SBX_OK);
    bool found = false;
    for (size_t i = 0; i < r->n_files; i++)
        found |= strcmp(r->files[i]->path, path) == 0;
    assert_true(found);
    sbx_message_free((ProtobufCMessage *)r);
}

static void test_ssm_write_over_the_limit_is_resource_exhausted(void **state)
{
    fixture *f = *state;
    open_attach(f);
    size_t n = 256 * 1024 + 1;
    char *data = calloc(1, n);
    assert_int_equal(do_write(f, "/tmp/too-big", data, n, 0, false), SBX_E_RESOURCE_EXHAUSTED);
    assert_int_equal(ssm_fake_calls(f->h.fake, "SendCommand"), 0);
    free(data);
}

static void test_ssm_files_run_as_the_user(void **state)
{
    fixture *f = *state;
    harness_credential(&f->h, "run_as", "deploy");
    open_attach(f);
    assert_int_equal(do_write(f, "/tmp/mine", "m", 1, 0, false), SBX_OK);
    char script[256];
    assert_true(ssm_fake_last_script(f->h.fake, script, sizeof(script)));
    assert_int_equal(strncmp(script, "sudo -n -u 'deploy' -- sh -c ", 29), 0);
}

/* ---- capabilities and policy -------------------------------------------------------------- */

static void test_ssm_capabilities_are_honest(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    sbx_capabilities caps;
    sbx__v1__capabilities__init(&caps);
    sbx_provider_ec2_ssm.capabilities(f->h.state, &caps);
    assert_int_equal(caps.isolation, SBX__V1__ISOLATION__ISOLATION_NONE);
    assert_true(caps.shell);
    assert_true(caps.attaches_external);
    assert_false(caps.provisions);
    assert_true(caps.principal_user);
    assert_true(caps.files);
    assert_false(caps.policy_network || caps.policy_filesystem || caps.policy_resources);
    for (size_t i = 0; i < caps.n_languages; i++) {
        assert_string_not_equal(caps.languages[i], "python");
        free(caps.languages[i]);
    }
    free(caps.languages);
}

static void test_ssm_check_policy_lists_every_unenforceable_dimension(void **state)
{
    fixture *f = *state;
    assert_int_equal(harness_open(&f->h), SBX_OK);
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->cpu = 1;
    p->memory_mb = 512;
    p->pids = 64;
    p->disk_mb = 100;
    p->timeout_ms = 1000;
    sbx_add_string(&p->n_fs_write, &p->fs_write, "/tmp");
    sbx_strlist l = {0};
    sbx_error err = {0};
    assert_int_equal(sbx_provider_ec2_ssm.check_policy(f->h.state, p, &l, &err), SBX_OK);
    const char *want[] = {"network_egress=deny", "fs_write", "cpu", "memory_mb", "pids", "disk_mb"};
    for (size_t i = 0; i < 6; i++)
        assert_true(sbx_strlist_contains(&l, want[i]));
    assert_false(sbx_strlist_contains(&l, "timeout_ms"));
    assert_int_equal(l.n, 6);
    sbx_strlist_clear(&l);
    sbx_message_free((ProtobufCMessage *)p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup_open, teardown)
        T(test_ssm_attach_online_instance),
        T(test_ssm_attach_unregistered_instance_is_gone),
        T(test_ssm_attach_connection_lost_is_gone),
        T(test_ssm_attach_malformed_id_is_gone_without_a_call),
        T(test_ssm_attach_windows_instance_is_capability),
        T(test_ssm_create_is_capability),
        T(test_ssm_destroy_never_touches_the_instance),
        T(test_ssm_run_returns_output_and_exit_status),
        T(test_ssm_nonzero_exit_is_a_result_not_an_error),
        T(test_ssm_polls_through_invocation_does_not_exist),
        T(test_ssm_invocation_that_never_appears_is_provision),
        T(test_ssm_waits_while_in_progress),
        T(test_ssm_throttling_is_retried),
        T(test_ssm_polling_rides_out_a_throttling_burst),
        T(test_ssm_polling_gives_up_after_persistent_errors_and_cancels),
        T(test_ssm_persistent_throttling_is_resource_exhausted),
        T(test_ssm_deadline_sends_cancel_command),
        T(test_ssm_cancel_flag_sends_cancel_command),
        T(test_ssm_cancel_before_sending_sends_nothing),
        T(test_ssm_execution_timeout_follows_the_deadline),
        T(test_ssm_timed_out_in_ssm_is_timeout),
        T(test_ssm_stdout_truncation_is_flagged_with_a_notice),
        T(test_ssm_stderr_truncation_is_flagged_with_a_notice),
        T(test_ssm_truncation_counts_characters_not_bytes),
        T(test_ssm_working_directory_is_sent),
        T(test_ssm_hostile_argv_stays_literal),
        T(test_ssm_env_values_are_quoted),
        T(test_ssm_hostile_env_name_is_refused_before_sending),
        T(test_ssm_stdin_is_fed_to_the_program),
        T(test_ssm_stdin_with_nul_is_refused),
        T(test_ssm_run_as_goes_through_sudo),
        T(test_ssm_run_as_keeps_hostile_arguments_literal),
        T(test_ssm_hostile_run_as_user_is_refused),
        T(test_ssm_run_code_bash_runs_through_bash),
        T(test_ssm_run_code_python_is_capability),
        T(test_ssm_user_mode_signs_with_the_assumed_role),
        T(test_ssm_user_mode_credentials_are_cached),
        T(test_ssm_user_mode_cache_is_per_subject_and_role),
        T(test_ssm_user_mode_credentials_near_expiry_are_renewed),
        T(test_ssm_user_mode_margin_zero_keeps_short_credentials),
        T(test_ssm_user_mode_without_role_is_permission_denied),
        T(test_ssm_user_mode_uses_the_profile_role),
        T(test_ssm_user_mode_access_denied_is_permission_denied),
        T(test_ssm_credentials_from_shared_file),
        T(test_ssm_credentials_file_profile_from_env),
        T(test_ssm_missing_credentials_is_config),
        T(test_ssm_secret_env_named_in_config_is_used),
        T(test_ssm_wrong_secret_is_config_and_never_echoed),
        T(test_ssm_server_echoed_session_token_is_redacted),
        T(test_ssm_secrets_never_reach_results_or_the_wire),
        T(test_ssm_plain_http_to_a_remote_host_is_refused),
        T(test_ssm_plain_http_to_a_lookalike_loopback_name_is_refused),
        T(test_ssm_missing_region_is_config),
        T(test_ssm_idempotent_call_survives_one_503),
        T(test_ssm_send_command_5xx_is_not_retried),
        T(test_ssm_invalid_json_answer_is_provision),
        T(test_ssm_truncated_answer_is_retried),
        T(test_ssm_endpoint_that_never_answers_times_out),
        T(test_ssm_file_round_trip_is_byte_identical),
        T(test_ssm_large_file_moves_in_chunks),
        T(test_ssm_read_honours_offset_and_max_bytes),
        T(test_ssm_read_over_the_limit_is_cut_with_a_notice),
        T(test_ssm_write_mode_and_listing),
        T(test_ssm_write_without_mkdirs_into_missing_dir_is_refused),
        T(test_ssm_read_missing_file_is_invalid_argument),
        T(test_ssm_relative_paths_need_a_workdir),
        T(test_ssm_relative_paths_resolve_under_workdir),
        T(test_ssm_hostile_file_path_stays_literal),
        T(test_ssm_write_over_the_limit_is_resource_exhausted),
        T(test_ssm_files_run_as_the_user),
        T(test_ssm_capabilities_are_honest),
        T(test_ssm_check_policy_lists_every_unenforceable_dimension),
#undef T
    };
    return cmocka_run_group_tests_name("ssm_provider", tests, NULL, NULL);
}
