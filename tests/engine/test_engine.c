/* test_engine.c - the engine's rules (DESIGN §5) on the fake provider: shape, profile,
 * destroy, fail-closed identity/policy/capability checks, binding, self-heal, timeouts, output
 * limits, and that every path returns a completion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "core/holdings.h"
#include "providers/fake/fake.h"

typedef fx_env env;

#define OK_STATUS SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED
#define FAILED SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    fx_add_profile(t->cfg, "default", "fake");
    sbx_profile_config *att = fx_add_profile(t->cfg, "ext", "fake");
    att->environment = SBX_ENV_ATTACHED;
    att->attach_to = strdup("external-1");
    sbx_profile_config *strict = fx_add_profile(t->cfg, "weak", "fake");
    fx_opt(strict, "policy_resources", "false");
    fx_opt(strict, "policy_filesystem", "false");
    fx_opt(strict, "policy_network", "false");
    strict->policy->cpu = 1;
    strict->policy->memory_mb = 512;
    sbx_add_string(&strict->policy->n_fs_write, &strict->policy->fs_write, "/data");
    strict->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    sbx_profile_config *lim = fx_add_profile(t->cfg, "limited", "fake");
    lim->policy->memory_mb = 512;
    lim->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    lim->policy->timeout_ms = 60000;
    sbx_profile_config *paths = fx_add_profile(t->cfg, "paths", "fake");
    sbx_add_string(&paths->policy->n_fs_read, &paths->policy->fs_read, "/data");
    sbx_profile_config *user = fx_add_profile(t->cfg, "user", "fake");
    user->identity_mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    fx_opt(user, "principal_user", "true");
    sbx_profile_config *nouser = fx_add_profile(t->cfg, "nouser", "fake");
    nouser->identity_mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_profile_config *py = fx_add_profile(t->cfg, "pyonly", "fake");
    fx_opt(py, "languages", "python");
    fx_opt(py, "shell", "false");
    fx_opt(fx_add_profile(t->cfg, "noattach", "fake"), "attach", "false");
    fx_opt(fx_add_profile(t->cfg, "exposing", "fake"), "expose", "true");
    sbx_profile_config *tok = fx_add_profile(t->cfg, "exposetok", "fake");
    fx_opt(tok, "expose", "true");
    fx_opt(tok, "expose_token", "true");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

/* Runs a shell line on a fresh session of profile and returns the completion. */
static sbx_completion *fresh(env *t, const char *profile, const char *line)
{
    return fx_process(t->e, fx_shell(profile, line));
}

static void test_engine_runs_command_and_returns_signed_handle(void **state)
{
    env *t = *state;
    sbx_completion *c = fresh(t, "default", "echo x");
    assert_int_equal(c->status, OK_STATUS);
    assert_string_equal(fx_stdout(c), "x\n");
    assert_non_null(c->session);
    assert_string_equal(c->session->sandbox_id, "fk-1");
    assert_string_equal(c->session->profile, "default");
    assert_string_equal(c->session->provider, "fake");
    assert_string_equal(c->session->node, "test-node");
    assert_int_equal(c->session->binding.len, 32);
    assert_true(c->session->last_used_at_ms > 0);
    assert_true(c->session->session_id[0] != '\0');
    sbx_completion_free(c);
}

static void test_engine_failing_program_is_succeeded_completion(void **state)
{
    env *t = *state;
    sbx_completion *c = fresh(t, "default", "warn oops; exit 3");
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->error_code, 0);
    assert_int_equal(c->result->exit_code, 3);
    assert_int_equal(c->result->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    sbx_completion_free(c);
}

static void test_engine_request_without_op_is_invalid_and_touches_nothing(void **state)
{
    env *t = *state;
    sbx_request *r = sbx_request_new();
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, FAILED);
    assert_int_equal(c->error_code, SBX_E_INVALID_ARGUMENT);
    assert_null(sbx_fake_get("default"));
    sbx_completion_free(c);
}

/* A session handle with only the given ids (NULL: unset), for the shape cases below. */
static sbx_session_handle *bare_handle(const char *session_id, const char *sandbox_id)
{
    sbx_session_handle *h = sbx_session_handle_new();
    if (session_id)
        sbx_set_string(&h->session_id, session_id);
    if (sandbox_id)
        sbx_set_string(&h->sandbox_id, sandbox_id);
    return h;
}

static void with_handle(sbx_request *r, const char *session_id, const char *sandbox_id)
{
    sbx_session_handle *h = bare_handle(session_id, sandbox_id);
    fx_session(r, h);
    sbx_message_free(&h->base);
}

/* Request i of the shape cases (NULL past the last), and the text its error must hold. Long
 * because it is one case per rule of the engine's shape check, a few lines each. */
static sbx_request *bad_shape(int i, const char **want)
{
    static char long_id[66], long_path[1027];
    memset(long_id, 'a', 65);
    long_path[0] = '/';
    memset(long_path + 1, 'p', 1025);
    const char *empty_argv[] = {""};
    sbx_request *r = NULL;
    switch (i) {
    case 0:
        r = sbx_request_shell("default", "true");
        r->deadline_ms = -1;
        *want = "deadline_ms -1 is negative; use unix milliseconds or 0 for none";
        break;
    case 1:
        r = sbx_request_shell("default", "true");
        sbx_set_string(&r->task_id, long_id);
        *want = "task_id is longer than 64 bytes";
        break;
    case 2:
        r = sbx_request_shell("default", "true");
        with_handle(r, NULL, "sb-1");
        *want = "session has a sandbox_id but no session_id; pass the whole handle";
        break;
    case 3:
        r = sbx_request_shell("default", "true");
        with_handle(r, "s-1", NULL);
        sbx_set_bytes(&r->session->binding, (const uint8_t *)"short", 5);
        *want = "session.binding is 5 bytes; a binding is 32 bytes";
        break;
    case 4:
        r = sbx_request_shell("default", "true");
        r->policy = sbx_policy_new();
        r->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
        sbx_add_string(&r->policy->n_network_allow, &r->policy->network_allow, "example.com");
        *want = "policy.network_allow is set but network_egress is deny; use allowlist";
        break;
    case 5:
        r = sbx_request_shell("default", "true");
        with_handle(r, "s-1", "sb-1");
        sbx_set_string(&r->from_snapshot, "snap");
        *want = "from_snapshot fills a new sandbox, but session 's-1' already has one";
        break;
    case 6: {
        sbx_session_handle *h = bare_handle("s-1", NULL);
        r = sbx_request_destroy(h);
        sbx_message_free(&h->base);
        sbx_set_string(&r->from_snapshot, "snap");
        *want = "from_snapshot goes with an operation that creates the sandbox";
        break;
    }
    case 7:
        r = sbx_request_code("default", "", "1");
        *want = "run_code.language is empty; name one";
        break;
    case 8:
        r = sbx_request_shell("default", "true");
        sbx_add_string(&r->run_command->n_argv, &r->run_command->argv, "true");
        *want = "run_command needs exactly one of argv and shell (got both)";
        break;
    case 9:
        r = sbx_request_shell("default", "");
        *want = "run_command needs exactly one of argv and shell (got neither)";
        break;
    case 10:
        r = sbx_request_argv("default", empty_argv, 1);
        *want = "run_command.argv[0] is empty";
        break;
    case 11:
        r = sbx_request_new();
        r->install_packages = calloc(1, sizeof *r->install_packages);
        sbx__v1__install_packages__init(r->install_packages);
        sbx_set_string(&r->install_packages->manager, "pip");
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES;
        *want = "install_packages needs a manager and at least one package";
        break;
    case 12:
        r = sbx_request_write_file("default", "", "x", 1, 0);
        *want = "write_file.path is empty";
        break;
    case 13:
        r = sbx_request_write_file("default", long_path, "x", 1, 0);
        *want = "write_file.path is longer than 1024 bytes";
        break;
    case 14:
        r = sbx_request_read_file("default", "");
        *want = "read_file.path is empty";
        break;
    case 15:
        r = sbx_request_list_files("default", "");
        *want = "list_files.path is empty";
        break;
    case 16:
        r = sbx_request_destroy(NULL);
        *want = "destroy needs the session handle to destroy";
        break;
    case 17: {
        sbx_session_handle *h = bare_handle("s-1", "sb-1");
        r = sbx_request_attach_command(h, 0, 0, 0);
        sbx_message_free(&h->base);
        *want = "attach_command.command_id is 0; pass the result.command_id";
        break;
    }
    case 18: {
        sbx_session_handle *h = bare_handle("s-1", "sb-1");
        r = sbx_request_cancel_command(h, 7, 65);
        sbx_message_free(&h->base);
        *want = "cancel_command.signal 65 is not a signal number (1-64, or 0 for SIGKILL)";
        break;
    }
    case 19: {
        sbx_session_handle *h = bare_handle("s-1", NULL);
        r = sbx_request_cancel_command(h, 7, 15);
        sbx_message_free(&h->base);
        *want = "cancel_command needs the session handle whose sandbox runs the command";
        break;
    }
    case 20: {
        sbx_session_handle *h = bare_handle("s-1", NULL);
        r = sbx_request_pause(h);
        sbx_message_free(&h->base);
        *want = "pause needs the handle of a session that has a sandbox";
        break;
    }
    default: return NULL;
    }
    assert_non_null(r);
    return r;
}

/* Every shape a request may not have is INVALID_ARGUMENT before any provider is opened, with
 * an error naming the field and, where there is one, the fix; a value at a limit is accepted. */
static void test_engine_each_bad_request_shape_names_its_field(void **state)
{
    env *t = *state;
    const char *want = NULL;
    int n = 0;
    for (sbx_request *r; (r = bad_shape(n, &want)) != NULL; n++) {
        sbx_completion *c = fx_process(t->e, r);
        assert_int_equal(c->status, FAILED);
        if ((sbx_status)c->error_code != SBX_E_INVALID_ARGUMENT || strstr(c->error, want) == NULL)
            fail_msg("case %d: error %d '%s' lacks '%s'", n, c->error_code, c->error, want);
        sbx_completion_free(c);
    }
    assert_int_equal(n, 21);
    assert_null(sbx_fake_get("default")); /* no provider was even opened */
    sbx_request *r = sbx_request_shell("default", "true");
    char id[65];
    memset(id, 'b', 64);
    id[64] = '\0';
    sbx_set_string(&r->task_id, id);
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
}

static void test_engine_unknown_profile_lists_configured_profiles(void **state)
{
    env *t = *state;
    sbx_completion *c = fresh(t, "nope", "echo x");
    assert_int_equal(c->error_code, SBX_E_CONFIG);
    assert_non_null(strstr(c->error, "nope"));
    assert_non_null(strstr(c->error, "default, ext, weak"));
    sbx_completion_free(c);
}

static void test_engine_state_persists_in_session(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fx_process(t->e, fx_code("default", "python", "x = 20 + 1"));
    assert_int_equal(c1->status, OK_STATUS);
    sbx_request *r = fx_code("default", "python", "print(x * 2)\nx");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_string_equal(fx_stdout(c2), "42\n");
    assert_string_equal(c2->result->value, "21");
    assert_string_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_self_heals_gone_managed_sandbox_with_notice(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo one");
    sbx_fake_vanish(sbx_fake_get("default"), c1->session->sandbox_id);
    sbx_request *r = fx_shell("default", "echo two");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(fx_stdout(c2), "two\n");
    assert_string_not_equal(c2->session->sandbox_id, c1->session->sandbox_id);
    assert_string_equal(c2->session->session_id, c1->session->session_id);
    char want[256];
    snprintf(want, sizeof(want),
             "the sandbox behind session %s no longer existed and was recreated empty",
             c1->session->session_id);
    assert_string_equal(c2->notice, want);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_attached_gone_is_not_recreated(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "ext", "echo hi");
    assert_int_equal(c1->status, OK_STATUS);
    assert_string_equal(c1->session->sandbox_id, "external-1");
    sbx_fake *f = sbx_fake_get("ext");
    sbx_fake_vanish(f, "external-1");
    sbx_request *r = fx_shell("ext", "echo again");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->status, FAILED);
    assert_int_equal(c2->error_code, SBX_E_GONE);
    assert_int_equal(sbx_fake_created_count(f), 0);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_destroy_managed_destroys_and_closes_handle(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo hi");
    char id[64];
    snprintf(id, sizeof(id), "%s", c1->session->sandbox_id);
    sbx_completion *c2 = fx_process(t->e, fx_destroy(c1->session));
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(c2->session->sandbox_id, "");
    assert_int_equal(c2->session->status, SBX__V1__SESSION_STATUS__SESSION_STATUS_CLOSED);
    assert_true(sbx_fake_was_destroyed(sbx_fake_get("default"), id));
    /* Idempotent: destroying the closed handle again is fine. */
    sbx_completion *c3 = fx_process(t->e, fx_destroy(c2->session));
    assert_int_equal(c3->status, OK_STATUS);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
}

static void test_engine_destroy_attached_only_drops_binding(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "ext", "echo hi");
    sbx_completion *c2 = fx_process(t->e, fx_destroy(c1->session));
    assert_int_equal(c2->status, OK_STATUS);
    assert_string_equal(c2->session->sandbox_id, "");
    sbx_fake *f = sbx_fake_get("ext");
    assert_int_equal(sbx_fake_destroy_calls(f), 0);
    assert_true(sbx_fake_alive(f, "external-1"));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* Every handle the engine returns carries a binding that verifies for its principal: the next
 * request with it runs. Whether its signed fields stayed those of the request (the binding is
 * then the request's own, not computed again), changed (a recreated sandbox), or were cleared
 * (a destroy). */
static sbx_completion *again(env *t, const sbx_completion *prev, const char *line)
{
    sbx_request *r = fx_shell("default", line);
    fx_session(r, prev->session);
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->session->binding.len, 32);
    return c;
}

static void test_engine_every_returned_handle_verifies(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo one");
    sbx_completion *c2 = again(t, c1, "echo two"); /* same fields: the same binding */
    assert_memory_equal(c2->session->binding.data, c1->session->binding.data, 32);
    sbx_fake_vanish(sbx_fake_get("default"), c2->session->sandbox_id);
    sbx_completion *c3 = again(t, c2, "echo three"); /* recreated: a new sandbox, signed anew */
    assert_string_not_equal(c3->session->sandbox_id, c2->session->sandbox_id);
    assert_memory_not_equal(c3->session->binding.data, c2->session->binding.data, 32);
    sbx_completion *c4 = again(t, c3, "echo four");
    assert_memory_equal(c4->session->binding.data, c3->session->binding.data, 32);
    sbx_completion *c5 = fx_process(t->e, fx_destroy(c4->session)); /* no sandbox: signed anew */
    assert_int_equal(c5->status, OK_STATUS);
    assert_memory_not_equal(c5->session->binding.data, c4->session->binding.data, 32);
    sbx_completion *c6 = again(t, c5, "echo six");
    assert_string_equal(fx_stdout(c6), "six\n");
    sbx_completion *cs[] = {c1, c2, c3, c4, c5, c6};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        sbx_completion_free(cs[i]);
}

static void test_engine_strict_policy_lists_every_unenforceable_dimension(void **state)
{
    env *t = *state;
    sbx_completion *c = fresh(t, "weak", "echo x");
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "network_egress=deny"));
    assert_non_null(strstr(c->error, "fs_write"));
    assert_non_null(strstr(c->error, "cpu"));
    assert_non_null(strstr(c->error, "memory_mb"));
    assert_non_null(strstr(c->error, "strict"));
    sbx_fake *f = sbx_fake_get("weak");
    assert_int_equal(sbx_fake_created_count(f), 0);
    sbx_completion_free(c);
}

static void test_engine_lenient_profile_runs_with_notice(void **state)
{
    env *t = *state;
    t->cfg->profiles[2].policy->lenient = true; /* "weak" */
    sbx_completion *c = fresh(t, "weak", "echo x");
    t->cfg->profiles[2].policy->lenient = false;
    assert_int_equal(c->status, OK_STATUS);
    assert_non_null(strstr(c->notice, "lenient"));
    assert_non_null(strstr(c->notice, "memory_mb"));
    sbx_completion_free(c);
}

/* A request asks for strict on a lenient profile: what the provider cannot enforce is refused
 * before anything is made, as on a strict profile (before: it ran with those dimensions left
 * out, and the request had no way to ask otherwise). Both lenient and strict: refused. */
static void test_engine_strict_request_on_lenient_profile_is_refused(void **state)
{
    env *t = *state;
    t->cfg->profiles[2].policy->lenient = true; /* "weak" */
    sbx_request *r = fx_shell("weak", "echo x");
    r->policy = sbx_policy_new();
    r->policy->strict = true;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "memory_mb"));
    assert_non_null(strstr(c->error, "(strict)"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("weak")), 0);
    sbx_completion_free(c);
    r = fx_shell("weak", "echo x");
    r->policy = sbx_policy_new();
    r->policy->strict = true;
    r->policy->lenient = true;
    c = fx_process(t->e, r);
    t->cfg->profiles[2].policy->lenient = false;
    assert_int_equal(c->error_code, SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(c->error, "policy.lenient and policy.strict are both true"));
    sbx_completion_free(c);
}

static void test_engine_request_cannot_turn_strict_profile_lenient(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("weak", "echo x");
    r->policy = sbx_policy_new();
    r->policy->lenient = true;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "lenient"));
    sbx_completion_free(c);
}

static void test_engine_request_widening_memory_is_refused(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("limited", "echo x");
    r->policy = sbx_policy_new();
    r->policy->memory_mb = 1024;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "memory_mb 1024 > profile's 512"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("limited")), 0);
    sbx_completion_free(c);
}

static void test_engine_request_widening_network_is_refused(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("limited", "echo x");
    r->policy = sbx_policy_new();
    r->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "network_egress allow > profile's deny"));
    sbx_completion_free(c);
}

/* "/data/../etc" begins with the profile's "/data/": refused before any sandbox exists, where a
 * provider binding it as given would have exposed the host's /etc. */
static void test_engine_request_fs_read_climbing_out_of_the_profile_is_refused(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("paths", "echo x");
    r->policy = sbx_policy_new();
    sbx_add_string(&r->policy->n_fs_read, &r->policy->fs_read, "/data/../etc");
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "fs_read '/data/../etc' has a '.' or '..' component"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("paths")), 0);
    sbx_completion_free(c);

    r = fx_shell("paths", "echo x"); /* a path under the profile's is a narrowing */
    r->policy = sbx_policy_new();
    sbx_add_string(&r->policy->n_fs_read, &r->policy->fs_read, "/data/in");
    c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
}

static void test_engine_request_narrowing_is_accepted(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("limited", "echo x");
    r->policy = sbx_policy_new();
    r->policy->memory_mb = 256;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
}

static void test_engine_user_profile_refuses_agent_principal(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("user", "echo x");
    r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_POLICY);
    assert_non_null(strstr(c->error, "requires user identity"));
    sbx_fake *f = sbx_fake_get("user");
    assert_true(f == NULL || sbx_fake_created_count(f) == 0);
    sbx_completion_free(c);
}

static void test_engine_user_principal_needs_principal_user_capability(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("nouser", "echo x");
    r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_CAPABILITY);
    assert_non_null(strstr(c->error, "principal_user"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("nouser")), 0);
    sbx_completion_free(c);
}

static void test_engine_user_principal_runs_where_declared(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("user", "echo x");
    r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    sbx_completion_free(c);
}

static void test_engine_undeclared_operations_are_capability_errors(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "pyonly", "echo x");
    assert_int_equal(c1->error_code, SBX_E_CAPABILITY);
    sbx_completion *c2 = fx_process(t->e, fx_code("pyonly", "ruby", "puts 1"));
    assert_int_equal(c2->error_code, SBX_E_CAPABILITY);
    assert_non_null(strstr(c2->error, "it offers: python"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("pyonly")), 0);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* ExposePort: refused (CAPABILITY, naming it and the provider) where not declared, before the
 * provider is touched; bad ports are INVALID_ARGUMENT naming the field; where declared the
 * provider's URL (and token) come back, the same for the same port, and only the owner may. */
static void test_engine_expose_port(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo x");
    assert_int_equal(c1->status, OK_STATUS);
    sbx_fake *f = sbx_fake_get("default");
    uint64_t ops = sbx_fake_ops(f);
    sbx_completion *c = fx_process(t->e, fx_expose(c1->session, 8000));
    assert_int_equal(c->error_code, SBX_E_CAPABILITY);
    assert_non_null(strstr(c->error, "ExposePort"));
    assert_non_null(strstr(c->error, "provider 'fake'"));
    assert_int_equal(sbx_fake_ops(f), ops);
    sbx_completion_free(c);
    sbx_completion_free(c1);

    c1 = fresh(t, "exposing", "echo x");
    assert_int_equal(c1->status, OK_STATUS);
    f = sbx_fake_get("exposing");
    static const uint32_t bad[] = {0, 65536, 100000};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        c = fx_process(t->e, fx_expose(c1->session, bad[i]));
        assert_int_equal(c->error_code, SBX_E_INVALID_ARGUMENT);
        assert_non_null(strstr(c->error, "expose.port"));
        sbx_completion_free(c);
    }
    ops = sbx_fake_ops(f);
    c = fx_process(t->e, fx_expose(c1->session, 8000));
    assert_int_equal(c->status, OK_STATUS);
    assert_true(sbx_fake_ops(f) > ops);
    char want[128];
    snprintf(want, sizeof(want), "http://expose.fake.invalid/%s/8000/", c1->session->sandbox_id);
    assert_non_null(c->result);
    assert_string_equal(c->result->expose_url, want);
    assert_string_equal(c->result->expose_token, "");
    assert_non_null(c->session);
    assert_string_equal(c->session->sandbox_id, c1->session->sandbox_id);
    sbx_completion *again = fx_process(t->e, fx_expose(c1->session, 8000));
    assert_string_equal(again->result->expose_url, want);
    sbx_completion_free(again);
    sbx_completion_free(c);
    /* Someone else's session: denied, the provider untouched. */
    ops = sbx_fake_ops(f);
    sbx_request *r = fx_expose(c1->session, 8000);
    fx_subject(r, "mallory");
    c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_PERMISSION_DENIED);
    assert_int_equal(sbx_fake_ops(f), ops);
    sbx_completion_free(c);
    /* A session without a sandbox yet: nothing to expose. */
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c1->session->base);
    sbx_set_string(&h->sandbox_id, NULL);
    c = fx_process(t->e, fx_expose(h, 8000));
    assert_int_equal(c->error_code, SBX_E_INVALID_ARGUMENT);
    sbx_message_free(&h->base);
    sbx_completion_free(c);
    sbx_completion_free(c1);

    c1 = fresh(t, "exposetok", "echo x");
    c = fx_process(t->e, fx_expose(c1->session, 1));
    assert_int_equal(c->status, OK_STATUS);
    snprintf(want, sizeof(want), "token-%s", c1->session->sandbox_id);
    assert_string_equal(c->result->expose_token, want);
    sbx_completion_free(c);
    sbx_completion_free(c1);
}

static void test_engine_tampered_binding_is_denied_and_touches_nothing(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo x");
    sbx_fake *f = sbx_fake_get("default");
    uint64_t ops = sbx_fake_ops(f);
    sbx_request *r = fx_shell("default", "echo y");
    fx_session(r, c1->session);
    r->session->binding.data[0] ^= 1;
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->error_code, SBX_E_PERMISSION_DENIED);
    assert_int_equal(sbx_fake_ops(f), ops);
    /* A forged sandbox_id with the old binding is denied as well. */
    r = fx_shell("default", "echo y");
    fx_session(r, c1->session);
    sbx_set_string(&r->session->sandbox_id, "fk-999");
    sbx_completion *c3 = fx_process(t->e, r);
    assert_int_equal(c3->error_code, SBX_E_PERMISSION_DENIED);
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
}

static void test_engine_foreign_principal_is_denied(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo x");
    sbx_fake *f = sbx_fake_get("default");
    uint64_t ops = sbx_fake_ops(f);
    sbx_request *r = fx_shell("default", "echo y");
    fx_session(r, c1->session);
    fx_subject(r, "mallory");
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->error_code, SBX_E_PERMISSION_DENIED);
    assert_int_equal(sbx_fake_ops(f), ops);
    sbx_request *d = fx_destroy(c1->session);
    fx_subject(d, "mallory");
    sbx_completion *c3 = fx_process(t->e, d);
    assert_int_equal(c3->error_code, SBX_E_PERMISSION_DENIED);
    assert_true(sbx_fake_alive(f, c1->session->sandbox_id));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
    sbx_completion_free(c3);
}

static void test_engine_session_never_moves_to_another_profile(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo x");
    sbx_request *r = fx_shell("limited", "echo y");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->error_code, SBX_E_CONFIG);
    assert_non_null(strstr(c2->error, "belongs to profile 'default'"));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_timeout_kills_and_keeps_session(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("default", "echo before; sleep 60000");
    r->policy = sbx_policy_new();
    r->policy->timeout_ms = 50;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_int_equal(c->error_code, SBX_E_TIMEOUT);
    assert_int_equal(c->result->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_string_equal(fx_stdout(c), "before\n");
    assert_string_equal(c->session->sandbox_id, "fk-1");
    sbx_completion_free(c);
}

static void test_engine_passes_deadline_to_provider(void **state)
{
    env *t = *state;
    int64_t before = sbx_monotonic_ms();
    sbx_completion *c = fresh(t, "limited", "echo x"); /* timeout_ms 60000 */
    int64_t d = sbx_fake_last_deadline(sbx_fake_get("limited"));
    assert_true(d >= before + 60000);
    assert_true(d <= sbx_monotonic_ms() + 60000);
    sbx_completion_free(c);
}

static void test_engine_past_request_deadline_runs_nothing(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("default", "echo x");
    r->deadline_ms = sbx_now_ms() - 1000;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->error_code, SBX_E_TIMEOUT);
    sbx_fake *f = sbx_fake_get("default");
    assert_true(f == NULL || sbx_fake_created_count(f) == 0);
    sbx_completion_free(c);
}

static void test_engine_output_limit_truncates_with_notice(void **state)
{
    env *t = *state;
    sbx_request *r = fx_shell("default", "yes 1000");
    r->policy = sbx_policy_new();
    r->policy->output_limit_bytes = 100;
    sbx_completion *c = fx_process(t->e, r);
    assert_int_equal(c->status, OK_STATUS);
    assert_int_equal(c->result->stdout.len, 100);
    assert_true(c->result->stdout_truncated);
    assert_non_null(strstr(c->notice, "stdout truncated at 100 bytes"));
    sbx_completion_free(c);
}

static void test_engine_create_failure_is_provision_error(void **state)
{
    env *t = *state;
    sbx_completion *c0 = fresh(t, "default", "echo warm");
    sbx_fake_set_fail_create(sbx_fake_get("default"), true);
    sbx_completion *c = fresh(t, "default", "echo x");
    assert_int_equal(c->status, FAILED);
    assert_int_equal(c->error_code, SBX_E_PROVISION);
    sbx_completion_free(c0);
    sbx_completion_free(c);
}

static void test_engine_session_locks_are_reclaimed(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "default", "echo x");
    for (int i = 0; i < 3; i++) {
        sbx_request *r = fx_shell("default", "echo y");
        fx_session(r, c1->session);
        sbx_completion_free(fx_process(t->e, r));
    }
    assert_int_equal(sbx_engine_session_locks(t->e), 0);
    sbx_completion_free(c1);
}

static void test_engine_files_round_trip(void **state)
{
    env *t = *state;
    sbx_request *w = fx_shell("default", "true");
    sbx__v1__run_command__free_unpacked(w->run_command, NULL);
    w->run_command = NULL;
    w->write_file = malloc(sizeof(*w->write_file));
    sbx__v1__write_file__init(w->write_file);
    sbx_set_string(&w->write_file->path, "/workspace/a.txt");
    sbx_set_bytes(&w->write_file->content, "hello", 5);
    w->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    sbx_completion *c1 = fx_process(t->e, w);
    assert_int_equal(c1->status, OK_STATUS);
    sbx_request *r = fx_shell("default", "cat a.txt");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_string_equal(fx_stdout(c2), "hello");
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

static void test_engine_describe_lists_profiles_with_capabilities(void **state)
{
    env *t = *state;
    Sbx__V1__DescribeResponse *d = NULL;
    assert_int_equal(sbx_engine_describe(t->e, &d, NULL), SBX_OK);
    assert_int_equal(d->n_profiles, t->cfg->n_profiles);
    assert_string_equal(d->profiles[0]->name, "default");
    assert_string_equal(d->profiles[0]->provider, "fake");
    assert_non_null(d->profiles[0]->capabilities);
    assert_true(d->profiles[0]->capabilities->shell);
    assert_string_equal(d->default_profile, "default");
    sbx_message_free(&d->base);
}

static void test_engine_managed_reconnect_needs_attach_capability(void **state)
{
    env *t = *state;
    sbx_completion *c1 = fresh(t, "noattach", "echo x");
    assert_int_equal(c1->status, OK_STATUS);
    sbx_request *r = fx_shell("noattach", "echo y");
    fx_session(r, c1->session);
    sbx_completion *c2 = fx_process(t->e, r);
    assert_int_equal(c2->error_code, SBX_E_CAPABILITY);
    assert_non_null(strstr(c2->error, "cannot reconnect"));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* File names come from inside the sandbox: bytes that are not UTF-8 must not reach a string
 * field as they are (Python/C++ clients would refuse the whole completion). */
static void test_engine_file_names_that_are_not_utf8_become_replacement_characters(void **state)
{
    env *t = *state;
    sbx_request *w = fx_shell("default", "true");
    sbx__v1__run_command__free_unpacked(w->run_command, NULL);
    w->run_command = NULL;
    w->write_file = malloc(sizeof(*w->write_file));
    sbx__v1__write_file__init(w->write_file);
    sbx_set_string(&w->write_file->path, "/workspace/\xff\xfe.txt");
    sbx_set_bytes(&w->write_file->content, "x", 1);
    w->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    sbx_completion *c1 = fx_process(t->e, w);
    assert_int_equal(c1->status, OK_STATUS);
    sbx_request *l = fx_shell("default", "true");
    sbx__v1__run_command__free_unpacked(l->run_command, NULL);
    l->run_command = NULL;
    l->list_files = malloc(sizeof(*l->list_files));
    sbx__v1__list_files__init(l->list_files);
    sbx_set_string(&l->list_files->path, "/workspace");
    l->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES;
    fx_session(l, c1->session);
    sbx_completion *c2 = fx_process(t->e, l);
    assert_int_equal(c2->status, OK_STATUS);
    assert_int_equal(c2->result->n_files, 1);
    const char *name = c2->result->files[0]->path;
    assert_true(sbx_text_valid(name, strlen(name)));
    assert_non_null(strstr(name, "\xEF\xBF\xBD"));
    assert_non_null(strstr(name, ".txt"));
    sbx_completion_free(c1);
    sbx_completion_free(c2);
}

/* sandbox.principal_sandboxes: one principal's per_session sandboxes are bounded, another's are
 * not touched by it, and a place is freed by a destroy, by a sandbox found gone on reuse, and
 * by the check at the limit (a sandbox that ended without the engine). */
static int setup_quota(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    t->cfg->principal_sandboxes = 2;
    fx_add_profile(t->cfg, "default", "fake");
    fx_add_profile(t->cfg, "percall", "fake")->scope = SBX_SCOPE_PER_CALL;
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

static sbx_completion *as(env *t, const char *subject, const char *profile,
                          const sbx_session_handle *h)
{
    sbx_request *r = fx_shell(profile, "echo hi");
    fx_subject(r, subject);
    if (h != NULL)
        fx_session(r, h);
    return fx_process(t->e, r);
}

static void test_engine_principal_sandboxes_bounds_each_principal(void **state)
{
    env *t = *state;
    sbx_completion *s1 = as(t, "tenant-a", "default", NULL);
    sbx_fake *f = sbx_fake_get("default"); /* opened by the first request */
    sbx_completion *s2 = as(t, "tenant-a", "default", NULL);
    assert_int_equal(s1->status, OK_STATUS);
    assert_int_equal(s2->status, OK_STATUS);
    /* s2's sandbox ends without the engine: the check at the limit frees its place */
    sbx_fake_vanish(f, s2->session->sandbox_id);
    sbx_completion *s3 = as(t, "tenant-a", "default", NULL);
    assert_int_equal(s3->status, OK_STATUS);
    /* holds s1 and s3: a third is refused, and nothing is made */
    size_t made = sbx_fake_created_count(f);
    sbx_completion *no = as(t, "tenant-a", "default", NULL);
    assert_int_equal(no->status, FAILED);
    assert_int_equal(no->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(no->error, "principal 'tenant-a' holds 2 sandboxes"));
    assert_non_null(strstr(no->error, "sandbox.principal_sandboxes"));
    assert_int_equal(sbx_fake_created_count(f), made);
    /* another principal, a per_call profile and the sessions it holds are not refused */
    sbx_completion *b = as(t, "tenant-b", "default", NULL);
    assert_int_equal(b->status, OK_STATUS);
    sbx_completion *pc = as(t, "tenant-a", "percall", NULL);
    assert_int_equal(pc->status, OK_STATUS);
    sbx_completion *again = as(t, "tenant-a", "default", s1->session);
    assert_int_equal(again->status, OK_STATUS);
    /* a destroy frees a place at once */
    sbx_request *d = fx_destroy(s1->session);
    fx_subject(d, "tenant-a");
    sbx_completion *gone = fx_process(t->e, d);
    assert_int_equal(gone->status, OK_STATUS);
    sbx_completion *s4 = as(t, "tenant-a", "default", NULL);
    assert_int_equal(s4->status, OK_STATUS);
    /* s3's sandbox ended: reusing its session makes a new one in the old one's place (the check
     * at the limit ran less than a second ago, so only the drop on GONE frees it) */
    sbx_fake_vanish(f, s3->session->sandbox_id);
    sbx_completion *healed = as(t, "tenant-a", "default", s3->session);
    assert_int_equal(healed->status, OK_STATUS);
    assert_string_not_equal(healed->session->sandbox_id, s3->session->sandbox_id);
    sbx_completion *no2 = as(t, "tenant-a", "default", NULL);
    assert_int_equal(no2->error_code, SBX_E_RESOURCE_EXHAUSTED);
    sbx_completion *cs[] = {s1, s2, s3, no, b, pc, again, gone, s4, healed, no2};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        sbx_completion_free(cs[i]);
}

/* A per_call sandbox the provider cannot destroy is not lost silently: the completion says so
 * (the operation itself succeeded), and its handle still names the sandbox, so the caller can
 * destroy it once the provider can. */
static void test_engine_per_call_sandbox_that_cannot_be_destroyed_is_reported(void **state)
{
    env *t = *state;
    sbx_completion *warm = as(t, "tenant-a", "percall", NULL); /* opens the provider */
    assert_int_equal(warm->status, OK_STATUS);
    sbx_fake *f = sbx_fake_get("percall");
    assert_false(sbx_fake_alive(f, warm->session->sandbox_id));
    sbx_fake_fail_destroys(f, 1);
    sbx_completion *c = as(t, "tenant-a", "percall", NULL);
    assert_int_equal(c->status, OK_STATUS);
    const char *id = c->session->sandbox_id;
    assert_true(id[0] != '\0');
    assert_true(sbx_fake_alive(f, id));
    char want[512];
    snprintf(want, sizeof want,
             "per_call sandbox %s could not be destroyed: fake: destroy of '%s' failed", id, id);
    if (c->notice == NULL || strstr(c->notice, want) == NULL)
        fail_msg("notice '%s' lacks '%s'", c->notice ? c->notice : "", want);
    sbx_request *d = fx_destroy(c->session);
    fx_subject(d, "tenant-a");
    sbx_completion *gone = fx_process(t->e, d);
    assert_int_equal(gone->status, OK_STATUS);
    assert_false(sbx_fake_alive(f, id));
    sbx_completion_free(warm);
    sbx_completion_free(c);
    sbx_completion_free(gone);
}

/* The check at the limit has a budget: sandboxes that do not answer (a paused local agent
 * waits out its attach's own 10 s) keep their places, and the refusal comes within it. */
static void test_engine_principal_sandboxes_check_is_bounded(void **state)
{
    env *t = *state;
    sbx_completion *s1 = as(t, "tenant-a", "default", NULL);
    sbx_completion *s2 = as(t, "tenant-a", "default", NULL);
    assert_int_equal(s2->status, OK_STATUS);
    sbx_fake *f = sbx_fake_get("default");
    sbx_fake_set_attach_stalls(f, true);
    int64_t t0 = sbx_monotonic_ms();
    sbx_completion *no = as(t, "tenant-a", "default", NULL);
    int64_t took = sbx_monotonic_ms() - t0;
    sbx_fake_set_attach_stalls(f, false);
    assert_int_equal(no->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_true(took >= HOLDINGS_CHECK_BUDGET_MS - 100); /* the check did wait for them */
    assert_true(took < 3 * HOLDINGS_CHECK_BUDGET_MS);    /* before: 10 s per sandbox */
    sbx_completion_free(s1);
    sbx_completion_free(s2);
    sbx_completion_free(no);
}

/* Sandboxes made before this engine (a restarted worker) count: each profile lists what it
 * holds when it opens (provider list_held), and every listing profile opens at a principal's
 * first counted create, so tenant-a, holding two under profile "old", is refused a session of
 * "default" although no request named "old". Before, a restarted engine counted from zero. */
static int setup_quota_held(void **state)
{
    env *t = calloc(1, sizeof(*t));
    t->cfg = fx_config_new();
    t->cfg->principal_sandboxes = 2;
    fx_add_profile(t->cfg, "default", "fake");
    sbx_profile_config *old = fx_add_profile(t->cfg, "old", "fake");
    fx_opt(old, "held", "tenant-a=old-1");
    fx_opt(old, "held", "tenant-a=old-2");
    fx_opt(old, "held", "tenant-b=old-3");
    t->e = fx_engine(t->cfg);
    *state = t;
    return 0;
}

static void test_engine_principal_sandboxes_count_what_providers_list(void **state)
{
    env *t = *state;
    sbx_completion *no = as(t, "tenant-a", "default", NULL);
    assert_int_equal(no->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(no->error, "principal 'tenant-a' holds 2 sandboxes"));
    assert_int_equal(sbx_fake_created_count(sbx_fake_get("default")), 0);
    sbx_completion *b = as(t, "tenant-b", "default", NULL); /* holds 1 of 2 */
    assert_int_equal(b->status, OK_STATUS);
    sbx_completion *b2 = as(t, "tenant-b", "default", NULL);
    assert_int_equal(b2->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(b2->error, "principal 'tenant-b' holds 2 sandboxes"));
    /* one of tenant-a's ends: the next check at the limit (at most one a second) finds it gone
     * and frees its place */
    sbx_fake_vanish(sbx_fake_get("old"), "old-1");
    usleep((HOLDINGS_CHECK_EVERY_MS + 100) * 1000);
    sbx_completion *a = as(t, "tenant-a", "default", NULL);
    assert_int_equal(a->status, OK_STATUS);
    sbx_completion *cs[] = {no, b, b2, a};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        sbx_completion_free(cs[i]);
}

/* sbx_sandboxes_live after a restart: the sandboxes a profile's provider lists are live, counted
 * when the profile opens under a bound, and by the sweep a worker runs at its start without one.
 * Before, a restarted engine reported only what it had made itself (here 1 of 4), and each
 * destroy of an older one took one more off the gauge. */
static const sbx_engine_profile_stats *stats_of(sbx_engine *e, const char *profile,
                                                sbx_engine_profile_stats *buf, size_t cap)
{
    size_t n = sbx_engine_stats(e, buf, cap);
    for (size_t i = 0; i < n; i++)
        if (strcmp(buf[i].profile, profile) == 0)
            return &buf[i];
    fail_msg("no stats for profile %s", profile);
    return NULL;
}

static void test_engine_live_gauge_counts_what_providers_list(void **state)
{
    env *t = *state;
    for (int bound = 2; bound >= 0; bound -= 2) {
        sbx_engine_free(t->e);
        t->cfg->principal_sandboxes = bound;
        t->e = fx_engine(t->cfg);
        sbx_strlist swept = {0};
        sbx_error err;
        assert_int_equal(sbx_engine_sweep(t->e, &swept, &err), SBX_OK);
        assert_int_equal(swept.n, 0);
        sbx_strlist_clear(&swept);
        sbx_completion *c = as(t, "tenant-c", "old", NULL);
        assert_int_equal(c->status, OK_STATUS);
        sbx_engine_profile_stats buf[8];
        const sbx_engine_profile_stats *st = stats_of(t->e, "old", buf, 8);
        assert_int_equal(st->sandboxes_created, 1);
        assert_int_equal(st->sandboxes_live, 4); /* old-1..3 and tenant-c's */
        sbx_completion_free(c);
    }
}

/* A provider that cannot list what principals hold fails the profile's open: a bound the engine
 * cannot count is refused, never silently widened. Without a bound nothing is listed. */
static void test_engine_principal_sandboxes_refuses_what_it_cannot_count(void **state)
{
    env *t = *state;
    sbx_profile_config *p = fx_add_profile(t->cfg, "unlisted", "fake");
    fx_opt(p, "fail_list", "true");
    sbx_engine_free(t->e);
    t->cfg->principal_sandboxes = 2;
    t->e = fx_engine(t->cfg);
    sbx_completion *no = as(t, "tenant-a", "unlisted", NULL);
    assert_int_equal(no->status, FAILED);
    assert_non_null(strstr(no->error, "principal_sandboxes"));
    assert_non_null(strstr(no->error, "fail_list"));
    sbx_completion_free(no);
    sbx_engine_free(t->e);
    t->cfg->principal_sandboxes = 0;
    t->e = fx_engine(t->cfg);
    sbx_completion *ok = as(t, "tenant-a", "unlisted", NULL);
    assert_int_equal(ok->status, OK_STATUS);
    sbx_completion_free(ok);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, fx_env_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_engine_runs_command_and_returns_signed_handle),
        T(test_engine_failing_program_is_succeeded_completion),
        T(test_engine_request_without_op_is_invalid_and_touches_nothing),
        T(test_engine_each_bad_request_shape_names_its_field),
        T(test_engine_unknown_profile_lists_configured_profiles),
        T(test_engine_state_persists_in_session),
        T(test_engine_self_heals_gone_managed_sandbox_with_notice),
        T(test_engine_attached_gone_is_not_recreated),
        T(test_engine_destroy_managed_destroys_and_closes_handle),
        T(test_engine_destroy_attached_only_drops_binding),
        T(test_engine_every_returned_handle_verifies),
        T(test_engine_strict_policy_lists_every_unenforceable_dimension),
        T(test_engine_lenient_profile_runs_with_notice),
        T(test_engine_request_cannot_turn_strict_profile_lenient),
        T(test_engine_strict_request_on_lenient_profile_is_refused),
        T(test_engine_request_widening_memory_is_refused),
        T(test_engine_request_widening_network_is_refused),
        T(test_engine_request_fs_read_climbing_out_of_the_profile_is_refused),
        T(test_engine_request_narrowing_is_accepted),
        T(test_engine_user_profile_refuses_agent_principal),
        T(test_engine_user_principal_needs_principal_user_capability),
        T(test_engine_user_principal_runs_where_declared),
        T(test_engine_undeclared_operations_are_capability_errors),
        T(test_engine_tampered_binding_is_denied_and_touches_nothing),
        T(test_engine_foreign_principal_is_denied),
        T(test_engine_session_never_moves_to_another_profile),
        T(test_engine_timeout_kills_and_keeps_session),
        T(test_engine_passes_deadline_to_provider),
        T(test_engine_past_request_deadline_runs_nothing),
        T(test_engine_output_limit_truncates_with_notice),
        T(test_engine_create_failure_is_provision_error),
        T(test_engine_session_locks_are_reclaimed),
        T(test_engine_files_round_trip),
        T(test_engine_file_names_that_are_not_utf8_become_replacement_characters),
        T(test_engine_describe_lists_profiles_with_capabilities),
        T(test_engine_managed_reconnect_needs_attach_capability),
        T(test_engine_expose_port),
        cmocka_unit_test_setup_teardown(test_engine_principal_sandboxes_bounds_each_principal,
                                        setup_quota, fx_env_teardown),
        cmocka_unit_test_setup_teardown(test_engine_principal_sandboxes_check_is_bounded,
                                        setup_quota, fx_env_teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_per_call_sandbox_that_cannot_be_destroyed_is_reported, setup_quota,
            fx_env_teardown),
        cmocka_unit_test_setup_teardown(test_engine_live_gauge_counts_what_providers_list,
                                        setup_quota_held, fx_env_teardown),
        cmocka_unit_test_setup_teardown(test_engine_principal_sandboxes_count_what_providers_list,
                                        setup_quota_held, fx_env_teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_principal_sandboxes_refuses_what_it_cannot_count, setup_quota,
            fx_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
