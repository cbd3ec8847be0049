/* ssm_harness.c - see ssm_harness.h. */
#include "ssm_harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void harness_init(harness *h)
{
    memset(h, 0, sizeof(*h));
    h->fake = ssm_fake_start();
    assert_non_null(h->fake);
    ssm_fake_add_instance(h->fake, H_INSTANCE, "Online", "Linux");
    setenv("AWS_ACCESS_KEY_ID", SSM_FAKE_ACCESS_KEY_ID, 1);
    setenv("AWS_SECRET_ACCESS_KEY", SSM_FAKE_SECRET_KEY, 1);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    h->options = sbx_options_new(sbx_provider_ec2_ssm.options);
    assert_non_null(h->options);
    harness_option(h, "region", SSM_FAKE_REGION);
    harness_option(h, "ssm_endpoint", ssm_fake_ssm_url(h->fake));
    harness_option(h, "sts_endpoint", ssm_fake_sts_url(h->fake));
    /* Fast polling and backoff: the fake answers at once; generous HTTP timeouts for a loaded
     * machine. */
    harness_option(h, "poll_initial_ms", "5");
    harness_option(h, "poll_max_ms", "40");
    harness_option(h, "throttle_backoff_ms", "2");
    harness_option(h, "http_backoff_ms", "2");
    harness_option(h, "request_timeout_ms", "30000");
    h->principal = sbx_principal_new();
    h->policy = sbx_policy_new();
    assert_non_null(h->principal);
    assert_non_null(h->policy);
    h->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
    sbx_set_string(&h->principal->subject, "agent");
}

void harness_option(harness *h, const char *key, const char *value)
{
    sbx_error err = {0};
    sbx_status st = sbx_options_set(h->options, key, value, &err);
    if (st != SBX_OK)
        print_error("option %s: %s\n", key, err.message);
    assert_int_equal(st, SBX_OK);
}

sbx_status harness_open(harness *h)
{
    sbx_provider_ctx ctx = {.profile = "ssmtest",
                            .options = h->options,
                            .environment = SBX_ENV_ATTACHED,
                            .attach_to = H_INSTANCE,
                            .node = "test",
                            .runtime_dir = "/tmp"};
    sbx_error_clear(&h->err);
    return sbx_provider_ec2_ssm.open(&ctx, &h->state, &h->err);
}

sbx_status harness_attach(harness *h, const char *id, sbx_sandbox **sb)
{
    sbx_error_clear(&h->err);
    return sbx_provider_ec2_ssm.attach(h->state, id != NULL ? id : H_INSTANCE, h->principal,
                                       h->policy, sb, &h->err);
}

void harness_free(harness *h)
{
    sbx_provider_ec2_ssm.close(h->state);
    sbx_options_free(h->options);
    sbx_message_free((ProtobufCMessage *)h->principal);
    sbx_message_free((ProtobufCMessage *)h->policy);
    ssm_fake_stop(h->fake);
    memset(h, 0, sizeof(*h));
}

void harness_credential(harness *h, const char *key, const char *value)
{
    sbx_principal *p = h->principal;
    Sbx__V1__Principal__CredentialsEntry *e = malloc(sizeof(*e));
    assert_non_null(e);
    sbx__v1__principal__credentials_entry__init(e);
    e->key = strdup(key);
    e->value = strdup(value);
    Sbx__V1__Principal__CredentialsEntry **n =
        realloc(p->credentials, (p->n_credentials + 1) * sizeof(*n));
    assert_non_null(n);
    p->credentials = n;
    p->credentials[p->n_credentials++] = e;
}

void harness_user(harness *h, const char *subject, const char *role_arn)
{
    sbx_message_free((ProtobufCMessage *)h->principal);
    h->principal = sbx_principal_new();
    h->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    sbx_set_string(&h->principal->subject, subject);
    if (role_arn != NULL)
        harness_credential(h, "role_arn", role_arn);
}

sbx_status harness_run(harness *h, sbx_sandbox *sb, const char *const *argv, const char *shell,
                       int64_t deadline_ms, sbx_result *r)
{
    Sbx__V1__RunCommand op;
    sbx__v1__run_command__init(&op);
    size_t n = 0;
    while (argv != NULL && argv[n] != NULL)
        n++;
    op.n_argv = n;
    op.argv = (char **)argv;
    if (shell != NULL)
        op.shell = (char *)shell;
    sbx_exec_opts o = {.deadline_mono_ms = deadline_ms > 0 ? sbx_monotonic_ms() + deadline_ms : 0,
                       .principal = h->principal,
                       .policy = h->policy};
    sbx_error_clear(&h->err);
    return sbx_provider_ec2_ssm.run_command(sb, &op, &o, r, &h->err);
}

const char *result_data(const sbx_result *r, const char *key)
{
    for (size_t i = 0; i < r->n_provider_data; i++)
        if (strcmp(r->provider_data[i]->key, key) == 0)
            return r->provider_data[i]->value;
    return NULL;
}

static char *bytes_str(const ProtobufCBinaryData *b)
{
    char *s = malloc(b->len + 1);
    assert_non_null(s);
    if (b->len > 0)
        memcpy(s, b->data, b->len);
    s[b->len] = '\0';
    return s;
}

char *result_stdout(const sbx_result *r)
{
    return bytes_str(&r->stdout);
}
char *result_stderr(const sbx_result *r)
{
    return bytes_str(&r->stderr);
}
