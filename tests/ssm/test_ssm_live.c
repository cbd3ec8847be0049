/* test_ssm_live.c - live smoke test of the ec2_ssm provider against real AWS: attach to the
 * instance named by SBX_SSM_LIVE_INSTANCE_ID and run one command through SSM Run Command.
 * Runs only when that variable, AWS credentials (AWS_ACCESS_KEY_ID or AWS_PROFILE) and a
 * region (AWS_REGION / AWS_DEFAULT_REGION) are set; otherwise prints "skipped: ..." and passes.
 * Optional: SBX_SSM_LIVE_ROLE_ARN also exercises user mode (STS AssumeRole).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

extern const sbx_provider_ops sbx_provider_ec2_ssm;

static const char *env(const char *n)
{
    const char *v = getenv(n);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

int main(void)
{
    const char *instance = env("SBX_SSM_LIVE_INSTANCE_ID");
    const char *region = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
    if (instance == NULL || region == NULL ||
        (env("AWS_ACCESS_KEY_ID") == NULL && env("AWS_PROFILE") == NULL)) {
        printf("skipped: set SBX_SSM_LIVE_INSTANCE_ID, AWS credentials (AWS_ACCESS_KEY_ID/"
               "AWS_SECRET_ACCESS_KEY or AWS_PROFILE) and AWS_REGION to run the live SSM smoke "
               "test\n");
        return 0;
    }
    sbx_options *o = sbx_options_new(sbx_provider_ec2_ssm.options);
    sbx_error err = {0};
    if (sbx_options_set(o, "region", region, &err) != SBX_OK) {
        fprintf(stderr, "FAIL: %s\n", err.message);
        return 1;
    }
    sbx_provider_ctx ctx = {.profile = "live",
                            .options = o,
                            .environment = SBX_ENV_ATTACHED,
                            .attach_to = instance,
                            .node = "live",
                            .runtime_dir = "/tmp"};
    void *state = NULL;
    int rc = 1;
    sbx_principal *p = sbx_principal_new();
    sbx_policy *pol = sbx_policy_new();
    sbx_result *r = sbx_result_new();
    sbx_sandbox *sb = NULL;
    sbx_set_string(&p->subject, "sbx-live-test");
    const char *role = env("SBX_SSM_LIVE_ROLE_ARN");
    if (role != NULL) {
        p->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
        Sbx__V1__Principal__CredentialsEntry *e = malloc(sizeof(*e));
        sbx__v1__principal__credentials_entry__init(e);
        e->key = strdup("role_arn");
        e->value = strdup(role);
        p->credentials = malloc(sizeof(*p->credentials));
        p->credentials[0] = e;
        p->n_credentials = 1;
    }
    if (sbx_provider_ec2_ssm.open(&ctx, &state, &err) != SBX_OK ||
        sbx_provider_ec2_ssm.attach(state, instance, p, pol, &sb, &err) != SBX_OK) {
        fprintf(stderr, "FAIL: %s\n", err.message);
        goto out;
    }
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    op.shell = "echo sbx-live-ok";
    sbx_exec_opts eo = {
        .deadline_mono_ms = sbx_monotonic_ms() + 120000, .principal = p, .policy = pol};
    sbx_status st = sbx_provider_ec2_ssm.run_command(sb, &op, &eo, r, &err);
    if (st != SBX_OK) {
        fprintf(stderr, "FAIL: %s\n", err.message);
        goto out;
    }
    if (r->stdout.len < 11 || memcmp(r->stdout.data, "sbx-live-ok", 11) != 0 || r->exit_code) {
        fprintf(stderr, "FAIL: unexpected output (exit %d)\n", r->exit_code);
        goto out;
    }
    printf("ok: ran a command on %s through SSM%s\n", instance,
           role != NULL ? " as an assumed role" : "");
    rc = 0;
out:
    sbx_provider_ec2_ssm.sandbox_close(sb);
    sbx_provider_ec2_ssm.close(state);
    sbx_options_free(o);
    sbx_message_free((ProtobufCMessage *)p);
    sbx_message_free((ProtobufCMessage *)pol);
    sbx_message_free((ProtobufCMessage *)r);
    return rc;
}
