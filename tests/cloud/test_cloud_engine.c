/* test_cloud_engine.c - the e2b and daytona providers through the real engine against their
 * fakes: the provider contract suite, managed self-heal of a vanished sandbox, strict policy
 * refusals before any API call, and secrets absent from completions and recordings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "contract/contract_suite.h"
#include "fakes/fake_daytona.h"
#include "fakes/fake_e2b.h"
#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"
#include "sbx/provider.h"

#define E2B_KEY "e2b_engine_key_77aa11bb22cc33dd"
#define DT_KEY "dtn_engine_key_44ee55ff66aa77bb"

typedef struct fx {
    fake_e2b *e2b;
    fake_daytona *dt;
    char e2b_env[64], dt_env[64];
    char dir[64];
    char secret[128];
    sbx_config *cfg;
    sbx_engine *engine;
    sbx_broker *broker;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    f->e2b = fake_e2b_start(E2B_KEY);
    f->dt = fake_daytona_start(DT_KEY);
    assert_non_null(f->e2b);
    assert_non_null(f->dt);
    snprintf(f->e2b_env, sizeof f->e2b_env, "SBX_TEST_E2B_ENGINE_%ld", (long)getpid());
    snprintf(f->dt_env, sizeof f->dt_env, "SBX_TEST_DT_ENGINE_%ld", (long)getpid());
    setenv(f->e2b_env, E2B_KEY, 1);
    setenv(f->dt_env, DT_KEY, 1);
    snprintf(f->dir, sizeof f->dir, "/tmp/sbx-cloud-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->secret, sizeof f->secret, "%s/secret", f->dir);
    *state = f;
    return 0;
}

static void fx_close_engine(fx *f)
{
    sbx_broker_free(f->broker);
    sbx_engine_free(f->engine);
    sbx_config_free(f->cfg);
    f->broker = NULL;
    f->engine = NULL;
    f->cfg = NULL;
}

static int teardown(void **state)
{
    fx *f = *state;
    fx_close_engine(f);
    fake_e2b_stop(f->e2b);
    fake_daytona_stop(f->dt);
    unsetenv(f->e2b_env);
    unsetenv(f->dt_env);
    char rec[128];
    snprintf(rec, sizeof rec, "%s/rec.bin", f->dir);
    unlink(rec);
    unlink(f->secret);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The YAML of one profile `p` of the given type and policy, pointed at the fakes. */
static char *yaml_for(fx *f, const char *type, const char *policy, const char *extra)
{
    char *y = NULL;
    if (strcmp(type, "e2b") == 0) {
        if (asprintf(&y,
                     "sandbox:\n  profiles:\n    p:\n      type: e2b\n      policy: %s\n"
                     "      e2b: { api_key_env: %s, api_url: \"%s\", sandbox_url: \"%s\"%s }\n",
                     policy, f->e2b_env, fake_e2b_url(f->e2b), fake_e2b_url(f->e2b),
                     extra ? extra : "") < 0)
            y = NULL;
    } else {
        if (asprintf(&y,
                     "sandbox:\n  profiles:\n    p:\n      type: daytona\n      policy: %s\n"
                     "      daytona: { api_key_env: %s, api_url: \"%s\"%s }\n",
                     policy, f->dt_env, fake_daytona_url(f->dt), extra ? extra : "") < 0)
            y = NULL;
    }
    return y;
}

static void fx_engine(fx *f, const char *type, const char *policy, const char *extra)
{
    char *y = yaml_for(f, type, policy, extra);
    sbx_error err;
    if (sbx_config_load_string(y, strlen(y), "cloud.yaml", &f->cfg, &err) != SBX_OK)
        fail_msg("config: %s", err.message);
    free(y);
    free(f->cfg->secret_file);
    f->cfg->secret_file = strdup(f->secret);
    assert_int_equal(sbx_engine_new(f->cfg, &f->engine, &err), SBX_OK);
    assert_int_equal(sbx_broker_open_embedded(f->engine, &f->broker, &err), SBX_OK);
}

static sbx_completion *run(fx *f, const sbx_session_handle *session, const char *line)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, "p");
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "tester");
    if (session)
        r->session = (sbx_session_handle *)sbx_message_copy(&session->base);
    r->run_command = malloc(sizeof *r->run_command);
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    sbx_completion *c = NULL;
    sbx_broker_submit(f->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    assert_non_null(c);
    return c;
}

static bool out_is(const sbx_completion *c, const char *want)
{
    return c->result && c->result->stdout.len == strlen(want) &&
           memcmp(c->result->stdout.data, want, strlen(want)) == 0;
}

/* ---- the contract suite ---- */

static void test_cloud_contract_e2b(void **state)
{
    fx *f = *state;
    char *y = yaml_for(f, "e2b", "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    assert_int_equal(sbx_contract_run_yaml(y, "p"), 0);
    free(y);
}

static void test_cloud_contract_e2b_without_code_interpreter(void **state)
{
    fx *f = *state;
    char *y = yaml_for(f, "e2b", "{ network_egress: allow, cpu: 0, memory_mb: 0, pids: 0 }",
                       ", template: base, code_interpreter: false");
    assert_int_equal(sbx_contract_run_yaml(y, "p"), 0);
    free(y);
}

static void test_cloud_contract_daytona(void **state)
{
    fx *f = *state;
    char *y =
        yaml_for(f, "daytona", "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    assert_int_equal(sbx_contract_run_yaml(y, "p"), 0);
    free(y);
}

static void test_cloud_contract_daytona_image_mode(void **state)
{
    fx *f = *state;
    char *y = yaml_for(f, "daytona",
                       "{ network_egress: allowlist, network_allow: [10.0.0.0/8], cpu: 2, "
                       "memory_mb: 2048, disk_mb: 5120, pids: 0 }",
                       ", image: \"python:3.12-slim\"");
    assert_int_equal(sbx_contract_run_yaml(y, "p"), 0);
    free(y);
}

/* An existing sandbox, created outside sbx (here: straight through the provider's ops). */
static void external_sandbox(fx *f, const char *type, char *id, size_t cap)
{
    char *y = yaml_for(f, type, "{ network_egress: allow, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    sbx_config *cfg = NULL;
    sbx_error err;
    assert_int_equal(sbx_config_load_string(y, strlen(y), "ext.yaml", &cfg, &err), SBX_OK);
    free(y);
    const sbx_profile_config *pc = sbx_config_profile(cfg, "p");
    const sbx_provider_ops *ops = sbx_provider_lookup(type);
    sbx_provider_ctx ctx = {.profile = "p", .options = pc->options};
    void *st = NULL;
    assert_int_equal(ops->open(&ctx, &st, &err), SBX_OK);
    sbx_session_handle h = SBX__V1__SESSION_HANDLE__INIT;
    sbx_principal pr = SBX__V1__PRINCIPAL__INIT;
    sbx_sandbox *sb = NULL;
    assert_int_equal(ops->create(st, &h, &pr, pc->policy, &sb, &err), SBX_OK);
    snprintf(id, cap, "%s", sb->id);
    ops->sandbox_close(sb);
    ops->close(st);
    sbx_config_free(cfg);
}

static void attached_contract(fx *f, const char *type)
{
    char id[128];
    external_sandbox(f, type, id, sizeof id);
    char *y = NULL;
    char extra[256];
    snprintf(extra, sizeof extra, "\n      environment: attached\n      attach_to: %s", id);
    /* environment/attach_to belong to the profile: splice them after the type line. */
    char *base =
        yaml_for(f, type, "{ network_egress: allow, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    char *at = strstr(base, "\n      policy:");
    assert_non_null(at);
    assert_true(asprintf(&y, "%.*s%s%s", (int)(at - base), base, extra, at) > 0);
    free(base);
    assert_int_equal(sbx_contract_run_yaml(y, "p"), 0);
    free(y);
    /* sbx never destroys what it attached to. */
    if (strcmp(type, "e2b") == 0)
        assert_true(fake_e2b_exists(f->e2b, id));
    else
        assert_true(fake_daytona_exists(f->dt, id));
}

static void test_cloud_contract_e2b_attached(void **state)
{
    attached_contract(*state, "e2b");
}

static void test_cloud_contract_daytona_attached(void **state)
{
    attached_contract(*state, "daytona");
}

/* ---- self-heal ---- */

static void self_heal(fx *f, bool e2b)
{
    sbx_completion *c = run(f, NULL, "echo one");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_true(out_is(c, "one\n"));
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    char first[128];
    snprintf(first, sizeof first, "%s", h->sandbox_id);
    assert_true(first[0] != 0);
    sbx_completion_free(c);
    if (e2b)
        fake_e2b_vanish(f->e2b, first);
    else
        fake_daytona_vanish(f->dt, first);
    c = run(f, h, "echo two");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_true(out_is(c, "two\n"));
    assert_non_null(strstr(c->notice, "recreated"));
    assert_string_not_equal(c->session->sandbox_id, first);
    assert_string_equal(c->session->session_id, h->session_id);
    sbx_completion_free(c);
    sbx_message_free(&h->base);
}

static void test_cloud_e2b_vanished_sandbox_is_recreated_by_the_engine(void **state)
{
    fx *f = *state;
    fx_engine(f, "e2b", "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    self_heal(f, true);
}

static void test_cloud_daytona_vanished_sandbox_is_recreated_by_the_engine(void **state)
{
    fx *f = *state;
    fx_engine(f, "daytona", "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    self_heal(f, false);
}

/* ---- principal_sandboxes across a restart ---- */

/* A new engine (a restarted worker) on the same config, bounding each principal to `bound`
 * per_session sandboxes. */
static void fx_restart(fx *f, int64_t bound)
{
    sbx_broker_free(f->broker);
    sbx_engine_free(f->engine);
    f->cfg->principal_sandboxes = bound;
    sbx_error err;
    assert_int_equal(sbx_engine_new(f->cfg, &f->engine, &err), SBX_OK);
    assert_int_equal(sbx_broker_open_embedded(f->engine, &f->broker, &err), SBX_OK);
}

/* The sandbox a principal made through one engine still counts in the next, which lists it
 * (E2B: GET /v2/sandboxes by metadata; Daytona: GET /sandbox by labels) when it opens the
 * profile. Before, E2B and Daytona listed nothing and the restart gave the principal its bound
 * again. */
static void restart_keeps_the_count(fx *f, const char *type)
{
    fx_engine(f, type, "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    fx_restart(f, 1);
    sbx_completion *c = run(f, NULL, "echo one");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
    fx_restart(f, 1); /* the worker restarts; the sandbox lives on */
    c = run(f, NULL, "echo two");
    assert_int_equal(c->error_code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(c->error, "principal 'tester' holds 1 sandbox of per_session"));
    sbx_completion_free(c);
}

static void test_cloud_e2b_principal_sandboxes_count_what_a_restarted_engine_finds(void **state)
{
    fx *f = *state;
    restart_keeps_the_count(f, "e2b");
    assert_int_equal(fake_e2b_live(f->e2b), 1);
}

static void test_cloud_daytona_principal_sandboxes_count_what_a_restarted_engine_finds(void **state)
{
    fx *f = *state;
    restart_keeps_the_count(f, "daytona");
}

/* ---- strict policy ---- */

static void test_cloud_e2b_strict_refuses_memory_before_any_call(void **state)
{
    fx *f = *state;
    fx_engine(f, "e2b", "{ network_egress: deny, cpu: 0, memory_mb: 512, pids: 0 }", NULL);
    sbx_completion *c = run(f, NULL, "echo hi");
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_non_null(strstr(c->error, "memory_mb"));
    assert_int_equal(fake_http_log_count(fake_e2b_http(f->e2b)), 0);
    sbx_completion_free(c);
}

static void test_cloud_e2b_lenient_runs_despite_memory(void **state)
{
    fx *f = *state;
    fx_engine(f, "e2b", "{ network_egress: deny, memory_mb: 512, lenient: true }", NULL);
    sbx_completion *c = run(f, NULL, "echo hi");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    sbx_completion_free(c);
}

static void test_cloud_daytona_strict_refuses_domains(void **state)
{
    fx *f = *state;
    fx_engine(
        f, "daytona",
        "{ network_egress: allowlist, network_allow: [pypi.org], cpu: 0, memory_mb: 0, pids: 0 }",
        NULL);
    sbx_completion *c = run(f, NULL, "echo hi");
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_non_null(strstr(c->error, "pypi.org"));
    assert_int_equal(fake_http_log_count(fake_daytona_http(f->dt)), 0);
    sbx_completion_free(c);
}

static void test_cloud_daytona_request_larger_than_snapshot_is_refused(void **state)
{
    fx *f = *state;
    fx_engine(f, "daytona", "{ network_egress: deny, cpu: 0, memory_mb: 4096, pids: 0 }", NULL);
    sbx_completion *c = run(f, NULL, "echo hi");
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_non_null(strstr(c->error, "never shrunk"));
    assert_int_equal(fake_http_log_matching(fake_daytona_http(f->dt), "POST", "/sandbox"), 0);
    sbx_completion_free(c);
}

/* ---- secrets ---- */

static bool file_contains(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return false;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static void test_cloud_secrets_absent_from_completions_and_recordings(void **state)
{
    fx *f = *state;
    fx_engine(f, "e2b", "{ network_egress: deny, cpu: 0, memory_mb: 0, pids: 0 }", NULL);
    char rec[128];
    snprintf(rec, sizeof rec, "%s/rec.bin", f->dir);
    sbx_error err;
    assert_int_equal(sbx_broker_record_to(f->broker, rec, &err), SBX_OK);
    /* The fake echoes the key in its error body; the provider must redact it. */
    char body[256];
    snprintf(body, sizeof body, "{\"code\":400,\"message\":\"bad request for key %s\"}", E2B_KEY);
    fake_fault ft = {.status = 400, .body = body, .times = -1};
    fake_http_fault(fake_e2b_http(f->e2b), "POST", "/sandboxes", &ft);
    sbx_completion *c = run(f, NULL, "echo hi");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_non_null(strstr(c->error, "bad request for key"));
    assert_null(strstr(c->error, E2B_KEY));
    size_t len = 0;
    uint8_t *packed = sbx_message_pack(&c->base, &len);
    assert_null(memmem(packed, len, E2B_KEY, strlen(E2B_KEY)));
    free(packed);
    sbx_completion_free(c);
    assert_int_equal(sbx_broker_record_to(f->broker, NULL, &err), SBX_OK);
    struct stat st;
    assert_int_equal(stat(rec, &st), 0);
    assert_true(st.st_size > 0);
    assert_true(file_contains(rec, "bad request for key"));
    assert_false(file_contains(rec, E2B_KEY));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cloud_contract_e2b),
        T(test_cloud_contract_e2b_without_code_interpreter),
        T(test_cloud_contract_daytona),
        T(test_cloud_contract_daytona_image_mode),
        T(test_cloud_contract_e2b_attached),
        T(test_cloud_contract_daytona_attached),
        T(test_cloud_e2b_vanished_sandbox_is_recreated_by_the_engine),
        T(test_cloud_daytona_vanished_sandbox_is_recreated_by_the_engine),
        T(test_cloud_e2b_strict_refuses_memory_before_any_call),
        T(test_cloud_e2b_lenient_runs_despite_memory),
        T(test_cloud_daytona_strict_refuses_domains),
        T(test_cloud_daytona_request_larger_than_snapshot_is_refused),
        T(test_cloud_secrets_absent_from_completions_and_recordings),
        T(test_cloud_e2b_principal_sandboxes_count_what_a_restarted_engine_finds),
        T(test_cloud_daytona_principal_sandboxes_count_what_a_restarted_engine_finds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
