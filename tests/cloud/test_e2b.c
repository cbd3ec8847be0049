/* test_e2b.c - the e2b provider against the fake E2B (tests/fakes/fake_e2b): each policy
 * mapping asserted from the fake's request log, the Connect-RPC framing, streaming, deadlines,
 * output limits, the code interpreter, files, error mapping (401, 404 -> GONE, 429 retried,
 * 5xx retried only when idempotent, invalid JSON), and secrets never in any message.
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
#include "fakes/fake_e2b.h"
#include "providers/common/http.h"

extern const sbx_provider_ops sbx_provider_e2b;

#define KEY "e2b_test_key_5f0c2a9d8e7b6a55"

typedef struct fx {
    fake_e2b *fake;
    char env_name[64];
    sbx_options *opts;
    void *state;
    sbx_session_handle *session;
    sbx_principal *principal;
    sbx_policy *policy;
    sbx_sandbox *sb;
} fx;

static void fx_open(fx *f, const char *const *extra)
{
    const char *kv[32] = {"api_key_env",         f->env_name,   "api_url",
                          fake_e2b_url(f->fake), "sandbox_url", fake_e2b_url(f->fake)};
    size_t n = 6;
    for (size_t i = 0; extra && extra[i]; i++)
        kv[n++] = extra[i];
    kv[n] = NULL;
    sbx_options_free(f->opts);
    f->opts = cloud_options(&sbx_provider_e2b, kv);
    if (f->state)
        sbx_provider_e2b.close(f->state);
    f->state = NULL;
    sbx_provider_ctx ctx = {
        .profile = "cloudtest", .options = f->opts, .environment = SBX_ENV_MANAGED, .node = "n1"};
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.open(&ctx, &f->state, &err), SBX_OK);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->fake = fake_e2b_start(KEY);
    assert_non_null(f->fake);
    cloud_unique_env(f->env_name, sizeof f->env_name, "SBX_TEST_E2B_KEY");
    setenv(f->env_name, KEY, 1);
    fx_open(f, NULL);
    f->session = sbx_session_handle_new();
    sbx_set_string(&f->session->session_id, "sess-123");
    f->principal = sbx_principal_new();
    sbx_set_string(&f->principal->subject, "alice");
    f->policy = cloud_policy(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    sbx_provider_e2b.sandbox_close(f->sb);
    sbx_provider_e2b.close(f->state);
    sbx_options_free(f->opts);
    sbx_message_free(&f->session->base);
    sbx_message_free(&f->principal->base);
    sbx_message_free(&f->policy->base);
    fake_e2b_stop(f->fake);
    unsetenv(f->env_name);
    free(f);
    return 0;
}

static void create(fx *f)
{
    sbx_error err;
    sbx_status s =
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err);
    if (s != SBX_OK)
        fail_msg("create: %s", err.message);
    assert_non_null(f->sb);
}

static json_t *logged_json(fx *f, const char *method, const char *pattern)
{
    const fake_request *r = fake_http_log_last(fake_e2b_http(f->fake), method, pattern);
    assert_non_null(r);
    json_t *j = json_loadb((const char *)r->body, r->body_len, 0, NULL);
    assert_non_null(j);
    return j;
}

static sbx_status run_shell(fx *f, const char *line, cloud_stream *st, int64_t timeout_ms,
                            uint64_t limit, sbx_result **out, sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, st, timeout_ms);
    o.output_limit_bytes = limit;
    *out = sbx_result_new();
    return sbx_provider_e2b.run_command(f->sb, &op, &o, *out, err);
}

/* ---- control plane mappings ---- */

static void test_e2b_create_sends_template_timeout_metadata_and_secure(void **state)
{
    fx *f = *state;
    create(f);
    assert_true(fake_e2b_exists(f->fake, f->sb->id));
    json_t *b = logged_json(f, "POST", "/sandboxes");
    assert_string_equal(json_string_value(json_object_get(b, "templateID")), "code-interpreter-v1");
    assert_int_equal(json_integer_value(json_object_get(b, "timeout")), 300);
    assert_true(json_is_true(json_object_get(b, "secure")));
    json_t *meta = json_object_get(b, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.session")), "sess-123");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.profile")), "cloudtest");
    json_decref(b);
}

static void test_e2b_deny_lowers_to_deny_out_all(void **state)
{
    fx *f = *state;
    create(f);
    json_t *b = logged_json(f, "POST", "/sandboxes");
    json_t *net = json_object_get(b, "network");
    assert_non_null(net);
    assert_string_equal(json_string_value(json_array_get(json_object_get(net, "denyOut"), 0)),
                        "0.0.0.0/0");
    assert_null(json_object_get(net, "allowOut"));
    json_decref(b);
}

static void test_e2b_allowlist_lowers_to_allow_out_plus_deny_all(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "pypi.org");
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "*.github.com");
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "10.0.0.0/8");
    create(f);
    json_t *b = logged_json(f, "POST", "/sandboxes");
    json_t *net = json_object_get(b, "network");
    json_t *allow = json_object_get(net, "allowOut");
    assert_int_equal(json_array_size(allow), 3);
    assert_string_equal(json_string_value(json_array_get(allow, 0)), "pypi.org");
    assert_string_equal(json_string_value(json_array_get(allow, 1)), "*.github.com");
    assert_string_equal(json_string_value(json_array_get(allow, 2)), "10.0.0.0/8");
    assert_string_equal(json_string_value(json_array_get(json_object_get(net, "denyOut"), 0)),
                        "0.0.0.0/0");
    json_decref(b);
}

static void test_e2b_allow_sends_no_network_restriction(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    create(f);
    json_t *b = logged_json(f, "POST", "/sandboxes");
    assert_null(json_object_get(b, "network"));
    json_decref(b);
}

static void test_e2b_env_option_becomes_env_vars(void **state)
{
    fx *f = *state;
    const char *extra[] = {"env", "LANG=C.UTF-8", "env", "A=b=c", NULL};
    fx_open(f, extra);
    create(f);
    json_t *b = logged_json(f, "POST", "/sandboxes");
    json_t *env = json_object_get(b, "envVars");
    assert_string_equal(json_string_value(json_object_get(env, "LANG")), "C.UTF-8");
    assert_string_equal(json_string_value(json_object_get(env, "A")), "b=c");
    json_decref(b);
}

static void test_e2b_check_policy_lists_resources_and_filesystem(void **state)
{
    fx *f = *state;
    f->policy->cpu = 2;
    f->policy->memory_mb = 1024;
    f->policy->disk_mb = 100;
    f->policy->pids = 10;
    sbx_add_string(&f->policy->n_fs_write, &f->policy->fs_write, "/data");
    sbx_strlist l = {0};
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.check_policy(f->state, f->policy, &l, &err), SBX_OK);
    assert_true(sbx_strlist_contains(&l, "cpu"));
    assert_true(sbx_strlist_contains(&l, "memory_mb"));
    assert_true(sbx_strlist_contains(&l, "disk_mb"));
    assert_true(sbx_strlist_contains(&l, "pids"));
    assert_true(sbx_strlist_contains(&l, "fs_write"));
    assert_int_equal(l.n, 5);
    sbx_strlist_clear(&l);
}

static void test_e2b_check_policy_accepts_network_modes(void **state)
{
    fx *f = *state;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "*.pypi.org");
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "1.2.3.4/32");
    sbx_strlist l = {0};
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.check_policy(f->state, f->policy, &l, &err), SBX_OK);
    assert_int_equal(l.n, 0);
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "2001:db8::/32");
    assert_int_equal(sbx_provider_e2b.check_policy(f->state, f->policy, &l, &err), SBX_OK);
    assert_int_equal(l.n, 1);
    assert_true(sbx_strlist_contains(&l, "network_allow=2001:db8::/32"));
    sbx_strlist_clear(&l);
}

static void test_e2b_capabilities_are_honest(void **state)
{
    fx *f = *state;
    sbx_capabilities *c = malloc(sizeof *c);
    sbx__v1__capabilities__init(c);
    sbx_provider_e2b.capabilities(f->state, c);
    assert_int_equal(c->isolation, SBX__V1__ISOLATION__ISOLATION_MICRO_VM);
    assert_true(c->policy_network);
    assert_true(c->policy_network_domains);
    assert_false(c->policy_resources);
    assert_false(c->policy_filesystem);
    assert_false(c->principal_user);
    assert_true(c->stateful);
    assert_true(c->streaming);
    sbx_message_free(&c->base);
}

static void test_e2b_env_entry_without_equals_is_config_naming_it(void **state)
{
    fx *f = *state;
    const char *kv[] = {"api_key_env", f->env_name, "api_url", fake_e2b_url(f->fake),
                        "env",         "LANG=C",    "env",     "NOEQUALS",
                        NULL};
    sbx_options *o = cloud_options(&sbx_provider_e2b, kv);
    sbx_provider_ctx ctx = {
        .profile = "cloudtest", .options = o, .environment = SBX_ENV_MANAGED, .node = "n1"};
    void *st = NULL;
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.open(&ctx, &st, &err), SBX_E_CONFIG);
    assert_null(st);
    assert_non_null(strstr(err.message, "'NOEQUALS' is not K=V"));
    assert_non_null(strstr(err.message, "cloudtest"));
    sbx_options_free(o);
}

static void test_e2b_missing_api_key_is_config_naming_the_variable(void **state)
{
    fx *f = *state;
    unsetenv(f->env_name);
    fx_open(f, NULL);
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
        SBX_E_CONFIG);
    assert_non_null(strstr(err.message, f->env_name));
    assert_int_equal(fake_http_log_count(fake_e2b_http(f->fake)), 0);
}

static void test_e2b_wrong_key_is_config_with_hint_and_no_key(void **state)
{
    fx *f = *state;
    setenv(f->env_name, "e2b_wrong_key_0000000000", 1);
    fx_open(f, NULL);
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
        SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "returned 401: Invalid API key"));
    assert_non_null(strstr(err.message, f->env_name));
    assert_null(strstr(err.message, "e2b_wrong_key_0000000000"));
}

static void test_e2b_unknown_template_is_config_naming_it(void **state)
{
    fx *f = *state;
    const char *extra[] = {"template", "no-such-template", NULL};
    fx_open(f, extra);
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
        SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "no-such-template"));
}

static void test_e2b_attach_unknown_id_is_gone(void **state)
{
    fx *f = *state;
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.attach(f->state, "inope", f->principal, f->policy, &f->sb, &err),
        SBX_E_GONE);
    assert_null(f->sb);
    assert_non_null(strstr(err.message, "inope"));
}

static void test_e2b_attach_renews_ttl_and_reapplies_network(void **state)
{
    fx *f = *state;
    create(f);
    char id[64];
    snprintf(id, sizeof id, "%s", f->sb->id);
    sbx_provider_e2b.sandbox_close(f->sb);
    f->sb = NULL;
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    sbx_add_string(&f->policy->n_network_allow, &f->policy->network_allow, "example.com");
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.attach(f->state, id, f->principal, f->policy, &f->sb, &err),
                     SBX_OK);
    assert_string_equal(f->sb->id, id);
    json_t *c = logged_json(f, "POST", "/sandboxes/*/connect");
    assert_int_equal(json_integer_value(json_object_get(c, "timeout")), 300);
    json_decref(c);
    json_t *n = logged_json(f, "PUT", "/sandboxes/*/network");
    assert_string_equal(json_string_value(json_array_get(json_object_get(n, "allowOut"), 0)),
                        "example.com");
    assert_string_equal(json_string_value(json_array_get(json_object_get(n, "denyOut"), 0)),
                        "0.0.0.0/0");
    json_decref(n);
}

/* Pause is the API's POST /pause (idempotent: its 409 for a paused sandbox is success); envd
 * does not answer while paused; attach (connect) resumes it and marks the handle resumed, and
 * resume reports whether it was paused. */
static void test_e2b_pause_and_resume_through_the_api(void **state)
{
    fx *f = *state;
    create(f);
    char id[64];
    snprintf(id, sizeof id, "%s", f->sb->id);
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.pause(f->state, id, &err), SBX_OK);
    assert_non_null(fake_http_log_last(fake_e2b_http(f->fake), "POST", "/sandboxes/*/pause"));
    assert_int_equal(sbx_provider_e2b.pause(f->state, id, &err), SBX_OK); /* 409: paused */
    sbx_result *r = NULL;
    assert_int_not_equal(run_shell(f, "echo hi", NULL, 10000, 0, &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    sbx_provider_e2b.sandbox_close(f->sb);
    f->sb = NULL;
    assert_int_equal(sbx_provider_e2b.attach(f->state, id, f->principal, f->policy, &f->sb, &err),
                     SBX_OK);
    assert_true(f->sb->resumed);
    assert_int_equal(run_shell(f, "echo hi", NULL, 10000, 0, &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    bool was = true;
    assert_int_equal(sbx_provider_e2b.resume(f->state, id, &was, &err), SBX_OK);
    assert_false(was); /* running: connect answered 200 */
    assert_int_equal(sbx_provider_e2b.pause(f->state, id, &err), SBX_OK);
    assert_int_equal(sbx_provider_e2b.resume(f->state, id, &was, &err), SBX_OK);
    assert_true(was);
    assert_int_equal(sbx_provider_e2b.pause(f->state, "inope", &err), SBX_E_GONE);
}

/* ExposePort: E2B's own URL for the port (https://<port>-<id>.<domain>), after checking the
 * sandbox exists; an unknown or malformed id is GONE. */
static void test_e2b_expose_is_the_port_url(void **state)
{
    fx *f = *state;
    create(f);
    char want[256];
    snprintf(want, sizeof want, "https://8080-%s.e2b.app/", f->sb->id);
    char *url = NULL, *token = NULL;
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.expose(f->state, f->sb->id, 8080, &url, &token, &err),
                     SBX_OK);
    assert_string_equal(url, want);
    assert_null(token);
    assert_non_null(fake_http_log_last(fake_e2b_http(f->fake), "GET", "/sandboxes/*"));
    free(url);
    assert_int_equal(sbx_provider_e2b.expose(f->state, "inope", 80, &url, &token, &err),
                     SBX_E_GONE);
    assert_int_equal(sbx_provider_e2b.expose(f->state, "a.evil.com/x", 80, &url, &token, &err),
                     SBX_E_GONE);
    assert_null(url);
}

static void test_e2b_destroy_is_idempotent(void **state)
{
    fx *f = *state;
    create(f);
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.destroy(f->state, f->sb->id, &err), SBX_OK);
    assert_false(fake_e2b_exists(f->fake, f->sb->id));
    assert_int_equal(sbx_provider_e2b.destroy(f->state, f->sb->id, &err), SBX_OK);
    assert_int_equal(sbx_provider_e2b.destroy(f->state, "never-existed", &err), SBX_OK);
}

/* ---- envd: processes ---- */

static void test_e2b_command_output_streams_with_exit_code(void **state)
{
    fx *f = *state;
    create(f);
    cloud_stream st = {0};
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, "echo hello; echo oops >&2; exit 3", &st, 20000, 0, &r, &err),
                     SBX_OK);
    assert_int_equal(r->exit_code, 3);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    char *out = cloud_str(&r->stdout), *errs = cloud_str(&r->stderr);
    assert_string_equal(out, "hello\n");
    assert_string_equal(errs, "oops\n");
    assert_string_equal(st.out, "hello\n");
    assert_string_equal(st.err, "oops\n");
    assert_int_equal(st.bad_offsets, 0);
    free(out);
    free(errs);
    sbx_message_free(&r->base);
}

static void test_e2b_clean_exit_without_exit_code_field_is_zero(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, "true", NULL, 20000, 0, &r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 0);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    sbx_message_free(&r->base);
}

static void test_e2b_start_request_is_one_connect_envelope(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"echo", "a b"};
    op.argv = argv;
    op.n_argv = 2;
    op.cwd = "/tmp";
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.run_command(f->sb, &op, &o, r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "a b\n");
    free(out);
    sbx_message_free(&r->base);
    const fake_request *q =
        fake_http_log_last(fake_e2b_http(f->fake), "POST", "/process.Process/Start");
    assert_non_null(q);
    assert_int_equal(q->body[0], 0);
    size_t n =
        (size_t)q->body[1] << 24 | (size_t)q->body[2] << 16 | (size_t)q->body[3] << 8 | q->body[4];
    assert_int_equal(n + 5, q->body_len);
    json_t *j = json_loadb((const char *)q->body + 5, n, 0, NULL);
    json_t *p = json_object_get(j, "process");
    assert_string_equal(json_string_value(json_object_get(p, "cmd")), "echo");
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "args"), 0)), "a b");
    assert_string_equal(json_string_value(json_object_get(p, "cwd")), "/tmp");
    json_decref(j);
    assert_string_equal(fake_request_header(q, "Content-Type"), "application/connect+json");
    assert_string_equal(fake_request_header(q, "Connect-Protocol-Version"), "1");
    assert_non_null(fake_request_header(q, "Connect-Timeout-Ms"));
    assert_string_equal(fake_request_header(q, "Authorization"), "Basic dXNlcjo=");
    assert_string_equal(fake_request_header(q, "E2b-Sandbox-Id"), f->sb->id);
    assert_string_equal(fake_request_header(q, "E2b-Sandbox-Port"), "49983");
    char tok[128];
    fake_e2b_token(f->fake, f->sb->id, tok, sizeof tok);
    assert_string_equal(fake_request_header(q, "X-Access-Token"), tok);
}

static void test_e2b_deadline_kills_and_keeps_output_so_far(void **state)
{
    fx *f = *state;
    create(f);
    cloud_stream st = {0};
    sbx_result *r;
    sbx_error err;
    /* No Connect timeout shorter than ours: the client's deadline must fire first. */
    assert_int_equal(run_shell(f, "echo before; sleep 30; echo after", &st, 1500, 0, &r, &err),
                     SBX_E_TIMEOUT);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "before\n");
    free(out);
    assert_true(fake_e2b_kills(f->fake) >= 1);
    sbx_message_free(&r->base);
}

static void test_e2b_output_limit_stops_the_program(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(
        run_shell(f, "python3 -c \"print('x' * 100000)\"", NULL, 20000, 1000, &r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT);
    assert_true(r->stdout_truncated);
    assert_int_equal(r->stdout.len, 1000);
    sbx_message_free(&r->base);
}

static void test_e2b_long_operation_raises_the_ttl_then_restores_it(void **state)
{
    fx *f = *state;
    const char *extra[] = {"sandbox_timeout_s", "60", NULL};
    fx_open(f, extra);
    create(f);
    sbx_result *r;
    sbx_error err;
    /* A 10-minute deadline outlives the 60 s idle TTL: the TTL must cover it. */
    assert_int_equal(run_shell(f, "echo hi", NULL, 600000, 0, &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    fake_http *h = fake_e2b_http(f->fake);
    assert_int_equal(fake_http_log_matching(h, "POST", "/sandboxes/*/timeout"), 2);
    size_t n = fake_http_log_count(h);
    json_int_t raised = -1, restored = -1;
    for (size_t i = 0; i < n; i++) {
        const fake_request *q = fake_http_log_at(h, i);
        if (strstr(q->path, "/timeout") == NULL)
            continue;
        json_t *j = json_loadb((const char *)q->body, q->body_len, 0, NULL);
        json_int_t t = json_integer_value(json_object_get(j, "timeout"));
        json_decref(j);
        if (raised < 0)
            raised = t;
        else
            restored = t;
    }
    assert_true(raised >= 600 + 60 - 2);
    assert_int_equal(restored, 60);
}

static void test_e2b_short_operation_leaves_the_ttl_alone(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, "echo hi", NULL, 20000, 0, &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    assert_int_equal(fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/sandboxes/*/timeout"),
                     0);
}

static void test_e2b_stdin_is_fed_to_the_program(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"cat"};
    op.argv = argv;
    op.n_argv = 1;
    op.stdin.data = (uint8_t *)"piped input";
    op.stdin.len = 11;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.run_command(f->sb, &op, &o, r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "piped input");
    free(out);
    sbx_message_free(&r->base);
}

static void test_e2b_vanished_sandbox_is_gone_on_exec(void **state)
{
    fx *f = *state;
    create(f);
    fake_e2b_vanish(f->fake, f->sb->id);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, "echo hi", NULL, 20000, 0, &r, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, f->sb->id));
    sbx_message_free(&r->base);
}

/* ---- code interpreter ---- */

static sbx_status run_py(fx *f, const char *code, sbx_result **out, sbx_error *err)
{
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = (char *)code;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    *out = sbx_result_new();
    return sbx_provider_e2b.run_code(f->sb, &op, &o, *out, err);
}

static void test_e2b_python_is_stateful_through_the_code_interpreter(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_py(f, "x = 41\nprint('set')", &r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "set\n");
    free(out);
    sbx_message_free(&r->base);
    assert_int_equal(run_py(f, "x + 1", &r, &err), SBX_OK);
    assert_string_equal(r->value, "42");
    assert_int_equal(r->exit_code, 0);
    sbx_message_free(&r->base);
    const fake_request *q = fake_http_log_last(fake_e2b_http(f->fake), "POST", "/execute");
    assert_string_equal(fake_request_header(q, "E2b-Sandbox-Port"), "49999");
}

static void test_e2b_python_exception_is_a_failed_program(void **state)
{
    fx *f = *state;
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_py(f, "1 / 0", &r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 1);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    char *e = cloud_str(&r->stderr);
    assert_non_null(strstr(e, "ZeroDivisionError"));
    free(e);
    sbx_message_free(&r->base);
}

static void test_e2b_python_deadline_interrupts_the_kernel(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = "import time\nprint('started')\ntime.sleep(30)";
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 1500);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.run_code(f->sb, &op, &o, r, &err), SBX_E_TIMEOUT);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "started\n");
    free(out);
    sbx_message_free(&r->base);
    const fake_request *q =
        fake_http_log_last(fake_e2b_http(f->fake), "POST", "/process.Process/Start");
    assert_non_null(q);
    json_t *j = json_loadb((const char *)q->body + 5, q->body_len - 5, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "process"), "cmd")),
                        "pkill");
    json_decref(j);
}

static void test_e2b_python_without_interpreter_runs_a_process(void **state)
{
    fx *f = *state;
    const char *extra[] = {"code_interpreter", "false", "template", "base", NULL};
    fx_open(f, extra);
    create(f);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_py(f, "print(6 * 7)", &r, &err), SBX_OK);
    char *out = cloud_str(&r->stdout);
    assert_string_equal(out, "42\n");
    free(out);
    sbx_message_free(&r->base);
    assert_int_equal(fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/execute"), 0);
    assert_int_equal(
        fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/process.Process/Start"), 1);
}

static void test_e2b_unknown_language_is_capability(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "cobol";
    op.code = "x";
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.run_code(f->sb, &op, &o, r, &err), SBX_E_CAPABILITY);
    sbx_message_free(&r->base);
}

/* ---- packages ---- */

static void test_e2b_install_packages_runs_pip_with_argv(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__InstallPackages op = SBX__V1__INSTALL_PACKAGES__INIT;
    char *pkgs[] = {"requests==2.31.0"};
    op.manager = "pip";
    op.packages = pkgs;
    op.n_packages = 1;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.install_packages(f->sb, &op, &o, r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 0);
    sbx_message_free(&r->base);
    const fake_request *q =
        fake_http_log_last(fake_e2b_http(f->fake), "POST", "/process.Process/Start");
    json_t *j = json_loadb((const char *)q->body + 5, q->body_len - 5, 0, NULL);
    json_t *p = json_object_get(j, "process");
    assert_string_equal(json_string_value(json_object_get(p, "cmd")), "python3");
    json_t *args = json_object_get(p, "args");
    assert_string_equal(json_string_value(json_array_get(args, 2)), "install");
    assert_string_equal(json_string_value(json_array_get(args, 4)), "requests==2.31.0");
    json_decref(j);
}

static void test_e2b_install_refuses_option_like_packages(void **state)
{
    fx *f = *state;
    create(f);
    Sbx__V1__InstallPackages op = SBX__V1__INSTALL_PACKAGES__INIT;
    char *pkgs[] = {"--index-url=http://evil"};
    op.manager = "pip";
    op.packages = pkgs;
    op.n_packages = 1;
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.install_packages(f->sb, &op, &o, r, &err),
                     SBX_E_INVALID_ARGUMENT);
    sbx_message_free(&r->base);
}

/* ---- files ---- */

static void test_e2b_files_round_trip_and_list(void **state)
{
    fx *f = *state;
    create(f);
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "/home/user/data.txt";
    w.content.data = (uint8_t *)"0123456789";
    w.content.len = 10;
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.write_file(f->sb, &w, &o, r, &err), SBX_OK);
    sbx_message_free(&r->base);
    const fake_request *q = fake_http_log_last(fake_e2b_http(f->fake), "POST", "/files");
    assert_string_equal(fake_request_query(q, "path"), "/home/user/data.txt");
    assert_string_equal(fake_request_query(q, "username"), "user");

    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/home/user/data.txt";
    rd.offset = 2;
    rd.max_bytes = 3;
    r = sbx_result_new();
    assert_int_equal(sbx_provider_e2b.read_file(f->sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_int_equal(r->files[0]->content.len, 3);
    assert_memory_equal(r->files[0]->content.data, "234", 3);
    assert_int_equal(r->files[0]->size, 10);
    sbx_message_free(&r->base);

    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = "/home/user";
    r = sbx_result_new();
    assert_int_equal(sbx_provider_e2b.list_files(f->sb, &ls, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_string_equal(r->files[0]->path, "/home/user/data.txt");
    assert_int_equal(r->files[0]->size, 10);
    assert_int_equal(r->files[0]->kind, SBX__V1__FILE_KIND__FILE_KIND_REGULAR);
    sbx_message_free(&r->base);
}

static void test_e2b_read_missing_file_is_invalid_argument_not_gone(void **state)
{
    fx *f = *state;
    create(f);
    sbx_exec_opts o = cloud_opts(f->policy, f->principal, NULL, 20000);
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/nope";
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.read_file(f->sb, &rd, &o, r, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "/nope"));
    sbx_message_free(&r->base);
}

/* ---- HTTP failures ---- */

static void test_e2b_create_429_is_retried_after_retry_after(void **state)
{
    fx *f = *state;
    fake_fault ft = {
        .status = 429, .retry_after = "1", .body = "{\"code\":429,\"message\":\"rate limited\"}"};
    fake_http_fault(fake_e2b_http(f->fake), "POST", "/sandboxes", &ft);
    create(f);
    assert_int_equal(fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/sandboxes"), 2);
}

static void test_e2b_create_503_is_not_retried(void **state)
{
    fx *f = *state;
    fake_fault ft = {.status = 503, .body = "{\"code\":503,\"message\":\"overloaded\"}"};
    fake_http_fault(fake_e2b_http(f->fake), "POST", "/sandboxes", &ft);
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
        SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "returned 503: overloaded"));
    assert_int_equal(fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/sandboxes"), 1);
}

static void test_e2b_connect_503_is_retried(void **state)
{
    fx *f = *state;
    create(f);
    fake_fault ft = {.status = 503};
    fake_http_fault(fake_e2b_http(f->fake), "POST", "/sandboxes/*/connect", &ft);
    sbx_sandbox *sb2 = NULL;
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.attach(f->state, f->sb->id, f->principal, f->policy, &sb2, &err), SBX_OK);
    assert_int_equal(fake_http_log_matching(fake_e2b_http(f->fake), "POST", "/sandboxes/*/connect"),
                     2);
    sbx_provider_e2b.sandbox_close(sb2);
}

static void test_e2b_invalid_json_is_provision_with_clear_message(void **state)
{
    fx *f = *state;
    fake_fault ft = {.invalid_json = true};
    fake_http_fault(fake_e2b_http(f->fake), "POST", "/sandboxes", &ft);
    sbx_error err;
    assert_int_equal(
        sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
        SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "invalid JSON"));
    assert_non_null(strstr(err.message, "/sandboxes"));
}

/* A sandboxID that is not E2B's charset would become part of envd's host name (and a header):
 * refused before any request goes to it. */
static void test_e2b_hostile_sandbox_id_is_refused(void **state)
{
    fx *f = *state;
    const char *bad[] = {"x.attacker.example/", "x@attacker", "a\r\nX-Evil: 1", "../..", "x#y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fake_e2b_next_id(f->fake, bad[i]);
        sbx_error err;
        assert_int_equal(
            sbx_provider_e2b.create(f->state, f->session, f->principal, f->policy, &f->sb, &err),
            SBX_E_PROVISION);
        assert_null(f->sb);
        assert_non_null(strstr(err.message, "no valid sandboxID"));
    }
    create(f);
    assert_true(fake_e2b_exists(f->fake, f->sb->id));
}

static void test_e2b_slow_control_plane_hits_the_deadline_of_exec(void **state)
{
    fx *f = *state;
    create(f);
    fake_fault ft = {.delay_ms = 5000};
    fake_http_fault(fake_e2b_http(f->fake), "POST", "/process.Process/Start", &ft);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, "echo hi", NULL, 400, 0, &r, &err), SBX_E_TIMEOUT);
    sbx_message_free(&r->base);
}

static void test_e2b_secrets_never_appear_in_errors(void **state)
{
    fx *f = *state;
    create(f);
    char tok[128];
    fake_e2b_token(f->fake, f->sb->id, tok, sizeof tok);
    /* Make the fake echo the secrets back in every error body. */
    char body[512];
    snprintf(body, sizeof body, "{\"code\":500,\"message\":\"boom key=%s token=%s\"}", KEY, tok);
    fake_fault ft = {.status = 500, .body = body, .times = -1};
    fake_http_fault(fake_e2b_http(f->fake), NULL, "/**", &ft);
    sbx_error err;
    sbx_result *r;
    char all[8192] = "";
    assert_int_not_equal(run_shell(f, "echo hi", NULL, 20000, 0, &r, &err), SBX_OK);
    strncat(all, err.message, sizeof all - strlen(all) - 1);
    sbx_message_free(&r->base);
    sbx_sandbox *sb2 = NULL;
    assert_int_not_equal(
        sbx_provider_e2b.attach(f->state, f->sb->id, f->principal, f->policy, &sb2, &err), SBX_OK);
    strncat(all, err.message, sizeof all - strlen(all) - 1);
    assert_int_not_equal(sbx_provider_e2b.destroy(f->state, f->sb->id, &err), SBX_OK);
    strncat(all, err.message, sizeof all - strlen(all) - 1);
    assert_non_null(strstr(all, "boom key="));
    assert_null(strstr(all, KEY));
    assert_null(strstr(all, tok));
}

/* ---- list_held: what a restarted engine counts ---- */

/* A provider of profile/node/scope against the fixture's fake (closed by the caller). */
static void *open_as(fx *f, const char *profile, const char *node, sbx_scope scope)
{
    void *st = cloud_open_as(&sbx_provider_e2b, f->opts, profile, node, scope);
    assert_non_null(st);
    return st;
}

static void create_with(fx *f, void *st, const char *subject, char *id, size_t cap)
{
    sbx_error err;
    if (cloud_create_for(&sbx_provider_e2b, st, f->session, f->policy, subject, id, cap, &err) !=
        SBX_OK)
        fail_msg("create: %s", err.message);
}

/* list_held lists the live sandboxes this profile made on this node, each with the principal it
 * was made for, across pages (X-Next-Token), and reads back the filter it asked for: not
 * another node's, another profile's, or a killed one. Before, E2B listed nothing, so a
 * restarted worker counted every principal from zero. */
static void test_e2b_list_held_lists_this_profile_and_node_across_pages(void **state)
{
    fx *f = *state;
    void *a = open_as(f, "sess", "n1", SBX_SCOPE_PER_SESSION);
    void *other_node = open_as(f, "sess", "n2", SBX_SCOPE_PER_SESSION);
    void *other_prof = open_as(f, "other", "n1", SBX_SCOPE_PER_SESSION);
    char alice[64], bob[64], gone[64], x[64];
    create_with(f, a, "alice", alice, sizeof alice);
    create_with(f, other_node, "alice", x, sizeof x);
    create_with(f, a, "bob", bob, sizeof bob);
    create_with(f, other_prof, "bob", x, sizeof x);
    create_with(f, a, "carol", gone, sizeof gone);
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.destroy(a, gone, &err), SBX_OK);
    fake_e2b_list_page(f->fake, 1);
    fake_http_log_clear(fake_e2b_http(f->fake));
    cloud_held_log l = {0};
    if (sbx_provider_e2b.list_held(a, cloud_held_cb, &l, &err) != SBX_OK)
        fail_msg("list_held: %s", err.message);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.ids[0], alice);
    assert_string_equal(l.subjects[0], "alice");
    assert_string_equal(l.ids[1], bob);
    assert_string_equal(l.subjects[1], "bob");
    /* one page per matching sandbox, each asked with the filter */
    assert_true(fake_http_log_matching(fake_e2b_http(f->fake), "GET", "/v2/sandboxes") >= 2);
    const fake_request *r = fake_http_log_last(fake_e2b_http(f->fake), "GET", "/v2/sandboxes");
    assert_string_equal(fake_request_query(r, "metadata"), "sbx.profile=sess&sbx.node=n1");
    assert_string_equal(fake_request_query(r, "state"), "running,paused");
    sbx_provider_e2b.close(a);
    sbx_provider_e2b.close(other_node);
    sbx_provider_e2b.close(other_prof);
}

/* per_call sandboxes end with their request and are not counted: no call at all. */
static void test_e2b_list_held_per_call_lists_nothing(void **state)
{
    fx *f = *state;
    void *st = open_as(f, "calls", "n1", SBX_SCOPE_PER_CALL);
    char id[64];
    create_with(f, st, "alice", id, sizeof id);
    fake_http_log_clear(fake_e2b_http(f->fake));
    cloud_held_log l = {0};
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.list_held(st, cloud_held_cb, &l, &err), SBX_OK);
    assert_int_equal(l.n, 0);
    assert_int_equal(fake_http_log_count(fake_e2b_http(f->fake)), 0);
    sbx_provider_e2b.close(st);
}

/* A listing that fails, or whose pages do not end, reports nothing and fails (the engine then
 * refuses to count from zero): a 403, and more than 100 pages. */
static void test_e2b_list_held_failure_reports_nothing(void **state)
{
    fx *f = *state;
    void *st = open_as(f, "sess", "n1", SBX_SCOPE_PER_SESSION);
    char id[64];
    for (int i = 0; i < 101; i++)
        create_with(f, st, "alice", id, sizeof id);
    fake_e2b_list_page(f->fake, 1);
    cloud_held_log l = {0};
    sbx_error err;
    assert_int_equal(sbx_provider_e2b.list_held(st, cloud_held_cb, &l, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "did not end after 100 pages"));
    assert_int_equal(l.n, 0);
    fake_fault ft = {.status = 403, .body = "{\"code\":403,\"message\":\"forbidden\"}"};
    fake_http_fault(fake_e2b_http(f->fake), "GET", "/v2/sandboxes", &ft);
    assert_int_equal(sbx_provider_e2b.list_held(st, cloud_held_cb, &l, &err),
                     SBX_E_PERMISSION_DENIED);
    assert_int_equal(l.n, 0);
    sbx_provider_e2b.close(st);
}

/* A next-page token longer than the client keeps (1 KiB) is refused, never cut: a cut token
 * would ask for some other page, and the count would be wrong without a word. The listing
 * reports nothing and names the header. One byte under the bound still pages to the end. */
static void test_e2b_list_held_overlong_next_token_is_refused(void **state)
{
    fx *f = *state;
    void *st = open_as(f, "sess", "n1", SBX_SCOPE_PER_SESSION);
    char id[64];
    create_with(f, st, "alice", id, sizeof id);
    create_with(f, st, "bob", id, sizeof id);
    fake_e2b_list_page(f->fake, 1);
    fake_e2b_list_token_pad(f->fake, SBX_HTTP_MAX_CAPTURED - strlen("fe-next-1"));
    cloud_held_log l = {0};
    sbx_error err;
    if (sbx_provider_e2b.list_held(st, cloud_held_cb, &l, &err) != SBX_OK)
        fail_msg("list_held: %s", err.message);
    assert_int_equal(l.n, 2);
    cloud_held_log none = {0};
    fake_e2b_list_token_pad(f->fake, SBX_HTTP_MAX_CAPTURED + 1 - strlen("fe-next-1"));
    assert_int_equal(sbx_provider_e2b.list_held(st, cloud_held_cb, &none, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "X-Next-Token is longer than 1024 bytes"));
    assert_int_equal(none.n, 0);
    sbx_provider_e2b.close(st);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_e2b_create_sends_template_timeout_metadata_and_secure),
        T(test_e2b_deny_lowers_to_deny_out_all),
        T(test_e2b_allowlist_lowers_to_allow_out_plus_deny_all),
        T(test_e2b_allow_sends_no_network_restriction),
        T(test_e2b_env_option_becomes_env_vars),
        T(test_e2b_check_policy_lists_resources_and_filesystem),
        T(test_e2b_check_policy_accepts_network_modes),
        T(test_e2b_capabilities_are_honest),
        T(test_e2b_env_entry_without_equals_is_config_naming_it),
        T(test_e2b_missing_api_key_is_config_naming_the_variable),
        T(test_e2b_wrong_key_is_config_with_hint_and_no_key),
        T(test_e2b_unknown_template_is_config_naming_it),
        T(test_e2b_attach_unknown_id_is_gone),
        T(test_e2b_attach_renews_ttl_and_reapplies_network),
        T(test_e2b_pause_and_resume_through_the_api),
        T(test_e2b_expose_is_the_port_url),
        T(test_e2b_destroy_is_idempotent),
        T(test_e2b_command_output_streams_with_exit_code),
        T(test_e2b_clean_exit_without_exit_code_field_is_zero),
        T(test_e2b_start_request_is_one_connect_envelope),
        T(test_e2b_deadline_kills_and_keeps_output_so_far),
        T(test_e2b_output_limit_stops_the_program),
        T(test_e2b_long_operation_raises_the_ttl_then_restores_it),
        T(test_e2b_short_operation_leaves_the_ttl_alone),
        T(test_e2b_stdin_is_fed_to_the_program),
        T(test_e2b_vanished_sandbox_is_gone_on_exec),
        T(test_e2b_python_is_stateful_through_the_code_interpreter),
        T(test_e2b_python_exception_is_a_failed_program),
        T(test_e2b_python_deadline_interrupts_the_kernel),
        T(test_e2b_python_without_interpreter_runs_a_process),
        T(test_e2b_unknown_language_is_capability),
        T(test_e2b_install_packages_runs_pip_with_argv),
        T(test_e2b_install_refuses_option_like_packages),
        T(test_e2b_files_round_trip_and_list),
        T(test_e2b_read_missing_file_is_invalid_argument_not_gone),
        T(test_e2b_create_429_is_retried_after_retry_after),
        T(test_e2b_create_503_is_not_retried),
        T(test_e2b_connect_503_is_retried),
        T(test_e2b_invalid_json_is_provision_with_clear_message),
        T(test_e2b_hostile_sandbox_id_is_refused),
        T(test_e2b_slow_control_plane_hits_the_deadline_of_exec),
        T(test_e2b_secrets_never_appear_in_errors),
        T(test_e2b_list_held_lists_this_profile_and_node_across_pages),
        T(test_e2b_list_held_per_call_lists_nothing),
        T(test_e2b_list_held_failure_reports_nothing),
        T(test_e2b_list_held_overlong_next_token_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
