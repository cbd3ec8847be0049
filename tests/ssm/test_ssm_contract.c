/* test_ssm_contract.c - the provider contract suite (tests/contract) on ec2_ssm against the
 * SigV4-verifying fake SSM endpoint, plus what the engine owes an attach-only provider:
 * `managed` is refused at config load, an instance that went away is GONE and never recreated,
 * a user principal without a role is refused before any AWS call, unenforceable policy is
 * refused under strict, and SSM's truncation notice reaches the completion.
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

#include "contract/contract_suite.h"
#include "fakes/ssm_fake.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/engine.h"

#define INSTANCE "i-0123456789abcdef0"

typedef struct fixture {
    ssm_fake *fake;
    char dir[64];
    char yaml[4096];
    sbx_config *cfg;
    sbx_engine *engine;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    f->fake = ssm_fake_start();
    assert_non_null(f->fake);
    ssm_fake_add_instance(f->fake, INSTANCE, "Online", "Linux");
    setenv("AWS_ACCESS_KEY_ID", SSM_FAKE_ACCESS_KEY_ID, 1);
    setenv("AWS_SECRET_ACCESS_KEY", SSM_FAKE_SECRET_KEY, 1);
    unsetenv("AWS_SESSION_TOKEN");
    snprintf(f->dir, sizeof(f->dir), "/tmp/sbx-ssm-contract-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    sbx_engine_free(f->engine);
    sbx_config_free(f->cfg);
    ssm_fake_stop(f->fake);
    char path[128];
    snprintf(path, sizeof(path), "%s/secret", f->dir);
    unlink(path);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The attached profile `ssm` on the fake; extra is spliced into the profile (YAML lines). */
static void make_yaml(fixture *f, const char *extra)
{
    snprintf(f->yaml, sizeof(f->yaml),
             "sandbox:\n"
             "  secret_file: %s/secret\n"
             "  profiles:\n"
             "    ssm:\n"
             "      type: ec2_ssm\n"
             "      environment: attached\n"
             "      attach_to: " INSTANCE "\n"
             "      policy: { network_egress: allow, cpu: 0, memory_mb: 0, pids: 0 }\n"
             "%s"
             "      ec2_ssm:\n"
             "        region: " SSM_FAKE_REGION "\n"
             "        ssm_endpoint: %s\n"
             "        sts_endpoint: %s\n"
             "        poll_initial_ms: 5\n"
             "        poll_max_ms: 40\n"
             "        throttle_backoff_ms: 2\n"
             "        workdir: /tmp\n",
             f->dir, extra != NULL ? extra : "", ssm_fake_ssm_url(f->fake),
             ssm_fake_sts_url(f->fake));
}

static void open_engine(fixture *f, const char *extra)
{
    make_yaml(f, extra);
    sbx_error err = {0};
    sbx_status st = sbx_config_load_string(f->yaml, strlen(f->yaml), "ssm.yaml", &f->cfg, &err);
    if (st != SBX_OK)
        print_error("config: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
    st = sbx_engine_new(f->cfg, &f->engine, &err);
    if (st != SBX_OK)
        print_error("engine: %s\n", err.message);
    assert_int_equal(st, SBX_OK);
}

static sbx_request *shell_request(const char *line)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, "ssm");
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "agent-1");
    return r;
}

static void test_ssm_contract_suite_passes(void **state)
{
    fixture *f = *state;
    make_yaml(f, NULL);
    assert_int_equal(sbx_contract_run_yaml(f->yaml, "ssm"), 0);
    assert_int_equal(ssm_fake_signature_failures(f->fake), 0);
}

static void test_ssm_managed_environment_is_refused_at_load(void **state)
{
    fixture *f = *state;
    const char *yaml = "sandbox:\n"
                       "  profiles:\n"
                       "    ssm:\n"
                       "      type: ec2_ssm\n"
                       "      environment: managed\n"
                       "      ec2_ssm: { region: us-east-1 }\n";
    sbx_error err = {0};
    assert_int_equal(sbx_config_load_string(yaml, strlen(yaml), "m.yaml", &f->cfg, &err),
                     SBX_E_CONFIG);
    assert_null(f->cfg);
}

static void test_ssm_engine_runs_a_command(void **state)
{
    fixture *f = *state;
    open_engine(f, NULL);
    sbx_request *req = shell_request("echo through the engine");
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    assert_non_null(c);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        print_error("%s\n", c->error);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_int_equal(c->result->stdout.len, strlen("through the engine\n"));
    assert_memory_equal(c->result->stdout.data, "through the engine\n", c->result->stdout.len);
    assert_string_equal(c->session->sandbox_id, INSTANCE);
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void test_ssm_engine_surfaces_the_truncation_notice(void **state)
{
    fixture *f = *state;
    open_engine(f, NULL);
    sbx_request *req = shell_request("repeat 25000 z");
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_true(c->result->stdout_truncated);
    assert_non_null(c->notice);
    assert_non_null(strstr(c->notice, "24,000"));
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void test_ssm_engine_gone_instance_is_not_recreated(void **state)
{
    fixture *f = *state;
    open_engine(f, NULL);
    ssm_fake_add_instance(f->fake, INSTANCE, "ConnectionLost", NULL);
    sbx_request *req = shell_request("echo x");
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_GONE);
    assert_int_equal(ssm_fake_calls(f->fake, "SendCommand"), 0);
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void test_ssm_engine_strict_policy_refuses_resource_limits(void **state)
{
    fixture *f = *state;
    open_engine(f, NULL);
    sbx_request *req = shell_request("echo x");
    req->policy = sbx_policy_new();
    req->policy->memory_mb = 256;
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_non_null(strstr(c->error, "memory_mb"));
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->fake)), 0);
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void test_ssm_engine_user_without_role_is_refused(void **state)
{
    fixture *f = *state;
    open_engine(f, "      identity: { mode: user }\n");
    sbx_request *req = shell_request("echo x");
    req->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_PERMISSION_DENIED);
    assert_int_equal(fake_http_log_count(ssm_fake_sts_http(f->fake)), 0);
    assert_int_equal(fake_http_log_count(ssm_fake_ssm_http(f->fake)), 0);
    sbx_completion_free(c);
    sbx_request_free(req);
}

static void test_ssm_engine_user_mode_acts_as_the_role(void **state)
{
    fixture *f = *state;
    open_engine(f, "      identity: { mode: user }\n");
    sbx_request *req = shell_request("whoami");
    req->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_set_string(&req->principal->subject, "alice");
    Sbx__V1__Principal__CredentialsEntry *e[2];
    const char *kv[2][2] = {{"role_arn", "arn:aws:iam::123456789012:role/sbx-user-runner"},
                            {"run_as", "alice"}};
    for (int i = 0; i < 2; i++) {
        e[i] = malloc(sizeof(*e[i]));
        sbx__v1__principal__credentials_entry__init(e[i]);
        e[i]->key = strdup(kv[i][0]);
        e[i]->value = strdup(kv[i][1]);
    }
    req->principal->credentials = malloc(2 * sizeof(*e));
    memcpy(req->principal->credentials, e, sizeof(e));
    req->principal->n_credentials = 2;
    sbx_completion *c = sbx_engine_process(f->engine, req, NULL);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        print_error("%s\n", c->error);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_memory_equal(c->result->stdout.data, "alice\n", 6);
    char akid[64];
    assert_true(ssm_fake_last_access_key(f->fake, "SendCommand", akid, sizeof(akid)));
    assert_int_equal(strncmp(akid, "ASIAFAKE", 8), 0);
    sbx_completion_free(c);
    sbx_request_free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ssm_contract_suite_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssm_managed_environment_is_refused_at_load, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_runs_a_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_surfaces_the_truncation_notice, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_gone_instance_is_not_recreated, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_strict_policy_refuses_resource_limits,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_user_without_role_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_ssm_engine_user_mode_acts_as_the_role, setup,
                                        teardown),
    };
    return cmocka_run_group_tests_name("ssm_contract", tests, NULL, NULL);
}
