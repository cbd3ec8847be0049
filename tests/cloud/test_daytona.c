/* test_daytona.c - the daytona provider against the fake Daytona (tests/fakes/fake_daytona):
 * policy -> request fields (asserted from the fake's request log), resources in Daytona's
 * units, snapshot refusals, the asynchronous create, toolbox exec with its 408 timeout, files,
 * and error mapping (401, 404 -> GONE, 429 retried, 5xx on create not retried, invalid JSON).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cloud/cloud_test_util.h"
#include "fakes/fake_daytona.h"

extern const sbx_provider_ops sbx_provider_daytona;

#define KEY "dtn_test_key_9a8b7c6d5e4f3a2b"

typedef struct fx {
    fake_daytona *fake;
    char env_name[64];
    sbx_options *opts;
    void *state;
    sbx_session_handle *session;
    sbx_principal *principal;
    sbx_policy *policy;
    sbx_sandbox *sb;
} fx;

static const sbx_provider_ops *ops = &sbx_provider_daytona;

static void fx_open(fx *f, const char *const *extra)
{
    const char *kv[32] = {"api_key_env", f->env_name, "api_url", fake_daytona_url(f->fake)};
    size_t n = 4;
    for (size_t i = 0; extra && extra[i]; i++)
        kv[n++] = extra[i];
    kv[n] = NULL;
    sbx_options_free(f->opts);
    f->opts = cloud_options(ops, kv);
    if (f->state)
        ops->close(f->state);
    f->state = NULL;
    sbx_provider_ctx ctx = {
        .profile = "dtest", .options = f->opts, .environment = SBX_ENV_MANAGED, .node = "n1"};
    sbx_error err;
    assert_int_equal(ops->open(&ctx, &f->state, &err), SBX_OK);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->fake = fake_daytona_start(KEY);
    assert_non_null(f->fake);
    cloud_unique_env(f->env_name, sizeof f->env_name, "SBX_TEST_DAYTONA_KEY");
    setenv(f->env_name, KEY, 1);
    fx_open(f, NULL);
    f->session = sbx_session_handle_new();
    sbx_set_string(&f->session->session_id, "sess-dt");
    f->principal = sbx_principal_new();
    sbx_set_string(&f->principal->subject, "bob");
    f->policy = cloud_policy(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ops->sandbox_close(f->sb);
    ops->close(f->state);
    sbx_options_free(f->opts);
    sbx_message_free(&f->session->base);
    sbx_message_free(&f->principal->base);
    sbx_message_free(&f->policy->base);
    fake_daytona_stop(f->fake);
    unsetenv(f->env_name);
    free(f);
    return 0;
}

static void create(fx *f)
{
    sbx_error err;
    sbx_status s = ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err);
    if (s != SBX_OK)
        fail_msg("create: %s", err.message);
}

static json_t *logged_json(fx *f, const char *method, const char *pattern)
{
    const fake_request *r = fake_http_log_last(fake_daytona_http(f->fake), method, pattern);
    assert_non_null(r);
    json_t *j = json_loadb((const char *)r->body, r->body_len, 0, NULL);
    assert_non_null(j);
    return j;
}

static void add_allow(fx *f, const char *e)
{
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, e);
}

static size_t logged(fx *f, const char *method, const char *pattern)
{
    return fake_http_log_matching(fake_daytona_http(f->fake), method, pattern);
}

/* ---- create and policy mapping ---- */

static void test_daytona_create_waits_for_started_and_labels_the_session(void **state)
{
    fx *f = *state;
    create(f);
    assert_true(fake_daytona_exists(f->fake, f->sb->id));
    assert_true(logged(f, "GET", "/sandbox/*") >= 2); /* creating -> started */
    json_t *b = logged_json(f, "POST", "/sandbox");
    json_t *labels = json_object_get(b, "labels");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.session")), "sess-dt");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.profile")), "dtest");
    assert_int_equal(json_integer_value(json_object_get(b, "autoStopInterval")), 15);
    assert_null(json_object_get(b, "cpu"));
    assert_null(json_object_get(b, "memory"));
    json_decref(b);
    const fake_request *q = fake_http_log_last(fake_daytona_http(f->fake), "POST", "/sandbox");
    assert_string_equal(fake_request_header(q, "Authorization"), "Bearer " KEY);
}

/* ExposePort: the API's preview URL and token; an unknown sandbox is GONE, a malformed id is
 * refused before any call. */
static void test_daytona_expose_is_the_preview_url(void **state)
{
    fx *f = *state;
    create(f);
    char *url = NULL, *token = NULL;
    sbx_error err;
    assert_int_equal(sbx_provider_daytona.expose(f->state, f->sb->id, 3000, &url, &token, &err),
                     SBX_OK);
    char want[256];
    snprintf(want, sizeof want, "https://3000-%s.proxy.daytona.fake", f->sb->id);
    assert_string_equal(url, want);
    snprintf(want, sizeof want, "preview-token-%s", f->sb->id);
    assert_string_equal(token, want);
    assert_int_equal(logged(f, "GET", "/sandbox/*/ports/*/preview-url"), 1);
    free(url);
    free(token);
    assert_int_equal(
        sbx_provider_daytona.expose(f->state, "dfake-9999-sbx", 3000, &url, &token, &err),
        SBX_E_GONE);
    assert_int_equal(sbx_provider_daytona.expose(f->state, "../../x", 3000, &url, &token, &err),
                     SBX_E_GONE);
    assert_int_equal(logged(f, "GET", "/sandbox/*/ports/*/preview-url"), 2);
    assert_null(url);
}

static void test_daytona_deny_is_network_block_all(void **state)
{
    fx *f = *state;
    create(f);
    json_t *b = logged_json(f, "POST", "/sandbox");
    assert_true(json_is_true(json_object_get(b, "networkBlockAll")));
    assert_null(json_object_get(b, "networkAllowList"));
    json_decref(b);
}

static void test_daytona_allowlist_is_cidr_list(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    add_allow(f, "10.0.0.0/8");
    add_allow(f, "1.2.3.4");
    add_allow(f, "pypi.org"); /* lenient callers only: dropped, never widened */
    create(f);
    json_t *b = logged_json(f, "POST", "/sandbox");
    assert_false(json_is_true(json_object_get(b, "networkBlockAll")));
    assert_string_equal(json_string_value(json_object_get(b, "networkAllowList")),
                        "10.0.0.0/8,1.2.3.4/32");
    json_decref(b);
}

static void test_daytona_allow_sends_no_restriction(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    create(f);
    json_t *b = logged_json(f, "POST", "/sandbox");
    assert_true(json_is_false(json_object_get(b, "networkBlockAll")));
    assert_null(json_object_get(b, "networkAllowList"));
    json_decref(b);
}

static void test_daytona_image_mode_sends_resources_in_daytona_units(void **state)
{
    fx *f = *state;
    const char *extra[] = {"image", "python:3.12-slim", NULL};
    fx_open(f, extra);
    f->policy->cpu = 2;
    f->policy->memory_mb = 2048;
    f->policy->disk_mb = 4097; /* rounds up to 5 GB */
    create(f);
    json_t *b = logged_json(f, "POST", "/sandbox");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(b, "buildInfo"), "dockerfileContent")),
        "FROM python:3.12-slim\n");
    assert_int_equal(json_integer_value(json_object_get(b, "cpu")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "memory")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "disk")), 5);
    assert_null(json_object_get(b, "snapshot"));
    json_decref(b);
}

static void test_daytona_check_policy_lists_rounding_in_image_mode(void **state)
{
    fx *f = *state;
    const char *extra[] = {"image", "python:3.12-slim", NULL};
    fx_open(f, extra);
    f->policy->cpu = 1.5;
    f->policy->memory_mb = 1536;
    f->policy->disk_mb = 2048;
    sbx_strlist l = {0};
    sbx_error err;
    assert_int_equal(ops->check_policy(f->state, f->policy, &l, &err), SBX_OK);
    assert_int_equal(l.n, 2);
    char *all = sbx_strlist_join(&l, "; ");
    assert_non_null(strstr(all, "cpu (Daytona allocates whole cores"));
    assert_non_null(strstr(all, "memory_mb (Daytona allocates whole GB"));
    free(all);
    sbx_strlist_clear(&l);
}

static void test_daytona_check_policy_in_snapshot_mode(void **state)
{
    fx *f = *state;
    f->policy->memory_mb = 512; /* the default snapshot gives 1 GB: not enforced */
    f->policy->cpu = 1;         /* equal: enforced */
    f->policy->pids = 100;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    add_allow(f, "pypi.org");
    add_allow(f, "10.1.0.0/16");
    sbx_strlist l = {0};
    sbx_error err;
    assert_int_equal(ops->check_policy(f->state, f->policy, &l, &err), SBX_OK);
    char *all = sbx_strlist_join(&l, "; ");
    assert_int_equal(l.n, 3);
    assert_non_null(strstr(all, "pids"));
    assert_non_null(strstr(all, "memory_mb (the snapshot gives 1 GB)"));
    assert_non_null(strstr(all, "network_allow=pypi.org"));
    assert_null(strstr(all, "cpu"));
    free(all);
    sbx_strlist_clear(&l);
}

static void test_daytona_more_than_ten_cidrs_is_unenforceable(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    for (int i = 0; i < 11; i++) {
        char c[32];
        snprintf(c, sizeof c, "10.%d.0.0/16", i);
        add_allow(f, c);
    }
    sbx_strlist l = {0};
    sbx_error err;
    assert_int_equal(ops->check_policy(f->state, f->policy, &l, &err), SBX_OK);
    assert_int_equal(l.n, 1);
    assert_non_null(strstr(l.items[0], "at most 10"));
    sbx_strlist_clear(&l);
}

static void test_daytona_request_larger_than_snapshot_is_policy_without_calls(void **state)
{
    fx *f = *state;
    f->policy->cpu = 2;
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_POLICY);
    assert_non_null(strstr(err.message, "2 cores"));
    assert_non_null(strstr(err.message, "never shrunk"));
    assert_int_equal(fake_http_log_count(fake_daytona_http(f->fake)), 0);
}

static void test_daytona_failed_start_is_provision_and_cleaned_up(void **state)
{
    fx *f = *state;
    fake_daytona_fail_next_create(f->fake, "no capacity in region");
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "no capacity in region"));
    assert_int_equal(logged(f, "DELETE", "/sandbox/*"), 1);
    assert_int_equal(fake_daytona_live(f->fake), 0);
}

static void test_daytona_missing_key_is_config_naming_the_variable(void **state)
{
    fx *f = *state;
    unsetenv(f->env_name);
    fx_open(f, NULL);
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_CONFIG);
    assert_non_null(strstr(err.message, f->env_name));
}

static void test_daytona_wrong_key_is_config_with_hint(void **state)
{
    fx *f = *state;
    setenv(f->env_name, "dtn_wrong_key_123456789", 1);
    fx_open(f, NULL);
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "returned 401: Invalid API key"));
    assert_non_null(strstr(err.message, f->env_name));
    assert_null(strstr(err.message, "dtn_wrong_key_123456789"));
}

/* ---- attach / destroy ---- */

static void test_daytona_attach_unknown_is_gone(void **state)
{
    fx *f = *state;
    sbx_error err;
    assert_int_equal(ops->attach(f->state, "nope", f->principal, f->policy, &f->sb, &err),
                     SBX_E_GONE);
    assert_non_null(strstr(err.message, "nope"));
}

static void test_daytona_attach_starts_an_auto_stopped_sandbox(void **state)
{
    fx *f = *state;
    create(f);
    char id[64];
    snprintf(id, sizeof id, "%s", f->sb->id);
    ops->sandbox_close(f->sb);
    f->sb = NULL;
    fake_daytona_autostop(f->fake, id);
    sbx_error err;
    assert_int_equal(ops->attach(f->state, id, f->principal, f->policy, &f->sb, &err), SBX_OK);
    assert_int_equal(logged(f, "POST", "/sandbox/*/start"), 1);
}

static void test_daytona_attach_reapplies_a_changed_network_policy(void **state)
{
    fx *f = *state;
    create(f);
    char id[64];
    snprintf(id, sizeof id, "%s", f->sb->id);
    ops->sandbox_close(f->sb);
    f->sb = NULL;
    sbx_error err;
    assert_int_equal(ops->attach(f->state, id, f->principal, f->policy, &f->sb, &err), SBX_OK);
    assert_int_equal(logged(f, "POST", "/sandbox/*/network-settings"), 0); /* unchanged */
    ops->sandbox_close(f->sb);
    f->sb = NULL;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    add_allow(f, "192.168.0.0/24");
    assert_int_equal(ops->attach(f->state, id, f->principal, f->policy, &f->sb, &err), SBX_OK);
    json_t *b = logged_json(f, "POST", "/sandbox/*/network-settings");
    assert_false(json_is_true(json_object_get(b, "networkBlockAll")));
    assert_string_equal(json_string_value(json_object_get(b, "networkAllowList")),
                        "192.168.0.0/24");
    json_decref(b);
}

static void test_daytona_destroy_is_idempotent(void **state)
{
    fx *f = *state;
    create(f);
    sbx_error err;
    assert_int_equal(ops->destroy(f->state, f->sb->id, &err), SBX_OK);
    assert_false(fake_daytona_exists(f->fake, f->sb->id));
    assert_int_equal(ops->destroy(f->state, f->sb->id, &err), SBX_OK);
}

/* ---- toolbox exec ---- */

static sbx_status run_argv(fx *f, char **argv, size_t argc, const char *in, int64_t timeout_ms,
                           sbx_result **out, sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.argv = argv;
    op.n_argv = argc;
    if (in) {
        op.stdin.data = (uint8_t *)in;
        op.stdin.len = strlen(in);
    }
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, timeout_ms);
    *out = sbx_result_new();
    return ops->run_command(f->sb, &op, &o, *out, err);
}

static sbx_status run_line(fx *f, const char *line, int64_t timeout_ms, sbx_result **out,
                           sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, timeout_ms);
    *out = sbx_result_new();
    return ops->run_command(f->sb, &op, &o, *out, err);
}

static void test_daytona_exec_merges_output_and_reports_exit(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_line(f, "echo out; echo err >&2; exit 4", 20000, &r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 4);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "out\nerr\n");
    free(out);
    assert_int_equal(r->stderr.len, 0);
    sbx_message_free(&r->base);
    json_t *b = logged_json(f, "POST", "/toolbox/*/process/execute");
    assert_true(json_integer_value(json_object_get(b, "timeout")) >= 19);
    assert_true(json_integer_value(json_object_get(b, "timeout")) <= 20);
    json_decref(b);
}

static void test_daytona_argv_is_quoted_for_the_shell(void **state)
{
    fx *f = *state;
    create(f);
    char *argv[] = {"echo", "it's", "a b;c"};
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_argv(f, argv, 3, NULL, 20000, &r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "it's a b;c\n");
    free(out);
    sbx_message_free(&r->base);
}

static void test_daytona_stdin_is_piped(void **state)
{
    fx *f = *state;
    create(f);
    char *argv[] = {"cat"};
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_argv(f, argv, 1, "fed through stdin", 20000, &r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "fed through stdin");
    free(out);
    sbx_message_free(&r->base);
}

static void test_daytona_timeout_408_is_timed_out(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_line(f, "sleep 30", 900, &r, &err), SBX_E_TIMEOUT);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_non_null(strstr(err.message, "deadline"));
    sbx_message_free(&r->base);
    const fake_request *q =
        fake_http_log_last(fake_daytona_http(f->fake), "POST", "/toolbox/*/process/execute");
    assert_int_equal(q->status, 408);
}

static void test_daytona_vanished_sandbox_is_gone_on_exec(void **state)
{
    fx *f = *state;
    create(f);
    fake_daytona_vanish(f->fake, f->sb->id);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_line(f, "echo hi", 20000, &r, &err), SBX_E_GONE);
    sbx_message_free(&r->base);
}

static void test_daytona_python_runs_statelessly(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = "print('it' + \"'s\", 6 * 7)";
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_code(f->sb, &op, &o, r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "it's 42\n");
    free(out);
    sbx_message_free(&r->base);
}

static void test_daytona_install_packages_quotes_each_package(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__InstallPackages op = SBX__V1__INSTALL_PACKAGES__INIT;
    char *pkgs[] = {"numpy<2", "x;rm -rf /"};
    op.manager = "pip";
    op.packages = pkgs;
    op.n_packages = 2;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->install_packages(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 0);
    sbx_message_free(&r->base);
    json_t *b = logged_json(f, "POST", "/toolbox/*/process/execute");
    assert_string_equal(json_string_value(json_object_get(b, "command")),
                        "'python3' '-m' 'pip' 'install' '--quiet' 'numpy<2' 'x;rm -rf /'");
    json_decref(b);
}

/* ---- files ---- */

static void test_daytona_files_round_trip_and_list(void **state)
{
    fx *f = *state;
    create(f);
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    static const uint8_t content[] = "line1\r\n--boundary-like\x00\xff";
    w.path = "/home/daytona/out/data.bin";
    w.content.data = (uint8_t *)content;
    w.content.len = sizeof content - 1;
    w.mkdirs = true;
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->write_file(f->sb, &w, &o, r, &err), SBX_OK);
    sbx_message_free(&r->base);
    const fake_request *q =
        fake_http_log_last(fake_daytona_http(f->fake), "POST", "/toolbox/*/files/folder");
    assert_non_null(q);
    assert_string_equal(fake_request_query(q, "path"), "/home/daytona/out");

    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = w.path;
    r = sbx_result_new();
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->files[0]->content.len, sizeof content - 1);
    assert_memory_equal(r->files[0]->content.data, content, sizeof content - 1);
    sbx_message_free(&r->base);

    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = "/home/daytona/out";
    r = sbx_result_new();
    assert_int_equal(ops->list_files(f->sb, &ls, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_string_equal(r->files[0]->path, "/home/daytona/out/data.bin");
    assert_int_equal(r->files[0]->size, sizeof content - 1);
    assert_int_equal(r->files[0]->mode, 0644);
    sbx_message_free(&r->base);
}

static void test_daytona_read_missing_file_is_invalid_argument(void **state)
{
    fx *f = *state;
    create(f);
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/nope";
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->read_file(f->sb, &rd, &o, r, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "/nope"));
    sbx_message_free(&r->base);
}

/* ---- HTTP failures ---- */

static void test_daytona_get_429_is_retried(void **state)
{
    fx *f = *state;
    fake_fault ft = {.status = 429, .retry_after = "1"};
    fake_http_fault(fake_daytona_http(f->fake), "GET", "/sandbox/*", &ft);
    create(f);
    assert_non_null(f->sb);
}

static void test_daytona_create_500_is_not_retried(void **state)
{
    fx *f = *state;
    fake_fault ft = {.status = 500,
                     .body = "{\"statusCode\":500,\"message\":\"Internal server error\"}"};
    fake_http_fault(fake_daytona_http(f->fake), "POST", "/sandbox", &ft);
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_PROVISION);
    assert_int_equal(logged(f, "POST", "/sandbox"), 1);
    assert_non_null(strstr(err.message, "returned 500: Internal server error"));
}

static void test_daytona_invalid_json_is_provision(void **state)
{
    fx *f = *state;
    fake_fault ft = {.invalid_json = true};
    fake_http_fault(fake_daytona_http(f->fake), "POST", "/sandbox", &ft);
    sbx_error err;
    assert_int_equal(ops->create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
                     SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "invalid JSON"));
}

/* ---- list_held: what a restarted engine counts ---- */

/* A provider of profile/node/scope against the fixture's fake (closed by the caller). */
static void *open_as(fx *f, const char *profile, const char *node, sbx_scope scope)
{
    void *st = cloud_open_as(ops, f->opts, profile, node, scope);
    assert_non_null(st);
    return st;
}

static void create_with(fx *f, void *st, const char *subject, char *id, size_t cap)
{
    sbx_error err;
    if (cloud_create_for(ops, st, f->session, f->policy, subject, id, cap, &err) != SBX_OK)
        fail_msg("create: %s", err.message);
}

/* list_held lists the live sandboxes this profile made on this node, each with the principal it
 * was made for (a subject longer than one label, 63 bytes, whole, cut only between UTF-8
 * characters), across pages (nextCursor), and reads back the filter it asked for: not another
 * node's, another profile's, or a deleted one. Before, Daytona listed nothing, so a restarted
 * worker counted every principal from zero. */
static void test_daytona_list_held_lists_this_profile_and_node_across_pages(void **state)
{
    fx *f = *state;
    void *a = open_as(f, "sess", "n1", SBX_SCOPE_PER_SESSION);
    void *other_node = open_as(f, "sess", "n2", SBX_SCOPE_PER_SESSION);
    void *other_prof = open_as(f, "other", "n1", SBX_SCOPE_PER_SESSION);
    /* 198 bytes of UTF-8 whose 64th byte is inside a character: no label may end there */
    char longer[200] = "t:";
    for (int i = 0; i < 98; i++)
        strcat(longer, "\xc3\xa9");
    char alice[128], big[128], gone[128], x[128];
    create_with(f, a, "alice", alice, sizeof alice);
    create_with(f, other_node, "alice", x, sizeof x);
    create_with(f, a, longer, big, sizeof big);
    create_with(f, other_prof, "bob", x, sizeof x);
    create_with(f, a, "carol", gone, sizeof gone);
    sbx_error err;
    assert_int_equal(ops->destroy(a, gone, &err), SBX_OK);
    fake_daytona_list_page(f->fake, 1);
    fake_http_log_clear(fake_daytona_http(f->fake));
    cloud_held_log l = {0};
    if (ops->list_held(a, cloud_held_cb, &l, &err) != SBX_OK)
        fail_msg("list_held: %s", err.message);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.ids[0], alice);
    assert_string_equal(l.subjects[0], "alice");
    assert_string_equal(l.ids[1], big);
    assert_string_equal(l.subjects[1], longer);
    assert_true(fake_http_log_matching(fake_daytona_http(f->fake), "GET", "/sandbox") >= 2);
    const fake_request *r = fake_http_log_last(fake_daytona_http(f->fake), "GET", "/sandbox");
    assert_string_equal(fake_request_query(r, "labels"),
                        "{\"sbx.profile\":\"sess\",\"sbx.node\":\"n1\"}");
    ops->close(a);
    ops->close(other_node);
    ops->close(other_prof);
}

/* per_call sandboxes end with their request and are not counted: no call at all. */
static void test_daytona_list_held_per_call_lists_nothing(void **state)
{
    fx *f = *state;
    void *st = open_as(f, "calls", "n1", SBX_SCOPE_PER_CALL);
    char id[128];
    create_with(f, st, "alice", id, sizeof id);
    fake_http_log_clear(fake_daytona_http(f->fake));
    cloud_held_log l = {0};
    sbx_error err;
    assert_int_equal(ops->list_held(st, cloud_held_cb, &l, &err), SBX_OK);
    assert_int_equal(l.n, 0);
    assert_int_equal(fake_http_log_count(fake_daytona_http(f->fake)), 0);
    ops->close(st);
}

/* A listing that fails, or whose cursor repeats, reports nothing (not even what its first page
 * named) and fails: the engine then refuses to count from zero. */
static void test_daytona_list_held_failure_reports_nothing(void **state)
{
    fx *f = *state;
    void *st = open_as(f, "sess", "n1", SBX_SCOPE_PER_SESSION);
    fake_fault loop = {.status = 200,
                       .body = "{\"items\":[{\"id\":\"s1\",\"state\":\"started\",\"labels\":{"
                               "\"sbx.profile\":\"sess\",\"sbx.node\":\"n1\",\"sbx.subject\":"
                               "\"alice\"}}],\"nextCursor\":\"again\"}",
                       .times = -1};
    fake_http_fault(fake_daytona_http(f->fake), "GET", "/sandbox", &loop);
    cloud_held_log l = {0};
    sbx_error err;
    assert_int_equal(ops->list_held(st, cloud_held_cb, &l, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "the page just read"));
    assert_int_equal(l.n, 0);
    fake_http_clear_faults(fake_daytona_http(f->fake));
    fake_fault forbidden = {.status = 403};
    fake_http_fault(fake_daytona_http(f->fake), "GET", "/sandbox", &forbidden);
    assert_int_equal(ops->list_held(st, cloud_held_cb, &l, &err), SBX_E_PERMISSION_DENIED);
    assert_int_equal(l.n, 0);
    ops->close(st);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_daytona_create_waits_for_started_and_labels_the_session),
        T(test_daytona_deny_is_network_block_all),
        T(test_daytona_allowlist_is_cidr_list),
        T(test_daytona_allow_sends_no_restriction),
        T(test_daytona_image_mode_sends_resources_in_daytona_units),
        T(test_daytona_check_policy_lists_rounding_in_image_mode),
        T(test_daytona_check_policy_in_snapshot_mode),
        T(test_daytona_more_than_ten_cidrs_is_unenforceable),
        T(test_daytona_request_larger_than_snapshot_is_policy_without_calls),
        T(test_daytona_failed_start_is_provision_and_cleaned_up),
        T(test_daytona_missing_key_is_config_naming_the_variable),
        T(test_daytona_wrong_key_is_config_with_hint),
        T(test_daytona_attach_unknown_is_gone),
        T(test_daytona_attach_starts_an_auto_stopped_sandbox),
        T(test_daytona_attach_reapplies_a_changed_network_policy),
        T(test_daytona_destroy_is_idempotent),
        T(test_daytona_exec_merges_output_and_reports_exit),
        T(test_daytona_argv_is_quoted_for_the_shell),
        T(test_daytona_stdin_is_piped),
        T(test_daytona_timeout_408_is_timed_out),
        T(test_daytona_vanished_sandbox_is_gone_on_exec),
        T(test_daytona_python_runs_statelessly),
        T(test_daytona_install_packages_quotes_each_package),
        T(test_daytona_files_round_trip_and_list),
        T(test_daytona_read_missing_file_is_invalid_argument),
        T(test_daytona_get_429_is_retried),
        T(test_daytona_create_500_is_not_retried),
        T(test_daytona_invalid_json_is_provision),
        T(test_daytona_expose_is_the_preview_url),
        T(test_daytona_list_held_lists_this_profile_and_node_across_pages),
        T(test_daytona_list_held_per_call_lists_nothing),
        T(test_daytona_list_held_failure_reports_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
