/* test_providers.c - see test_providers.h. The stand-in schemas mirror the option names the
 * examples use; when a real provider is built in, its own schema is used instead and an example
 * that does not match it fails test_config_examples, which is the point: examples/ must stay
 * true to the real providers. */
#include "tests/config/test_providers.h"

#include <stdio.h>
#include <stdlib.h>

#include "sbx/provider.h"

/* One option of every type, for the sbx_options getters and the block validation. */
static const sbx_option_spec test_schema[] = {
    {.key = "image", .type = SBX_OPT_STRING, .default_value = "busybox", .help = "image"},
    {.key = "count",
     .type = SBX_OPT_INT,
     .default_value = "3",
     .min = 1,
     .max = 10,
     .help = "how many"},
    {.key = "flag", .type = SBX_OPT_BOOL, .default_value = "false", .help = "a switch"},
    {.key = "mode",
     .type = SBX_OPT_ENUM,
     .default_value = "fast",
     .choices = "fast|slow",
     .help = "speed"},
    {.key = "tags", .type = SBX_OPT_LIST, .default_value = "a,b", .help = "labels"},
    {.key = "key_env", .type = SBX_OPT_ENV_NAME, .help = "env var holding the key"},
    {.key = NULL},
};

static const sbx_provider_ops test_managed = {.name = "test_managed",
                                              .summary = "config test: provisions only",
                                              .traits = SBX_PROVIDER_PROVISIONS,
                                              .options = test_schema};
static const sbx_provider_ops test_attach = {.name = "test_attach",
                                             .summary = "config test: attaches only",
                                             .traits = SBX_PROVIDER_ATTACHES,
                                             .options = test_schema};
static const sbx_provider_ops test_both = {.name = "test_both",
                                           .summary = "config test: provisions and attaches",
                                           .traits =
                                               SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES,
                                           .options = test_schema};

/* ---- stand-ins for the real providers (used only while one is not built in) ---------- */

static const sbx_option_spec local_schema[] = {
    {.key = "rootfs", .type = SBX_OPT_STRING, .default_value = "host"},
    {.key = "binds",
     .type = SBX_OPT_LIST,
     .default_value = "/usr,/bin,/lib,/lib64,/etc/alternatives"},
    {.key = "extra_binds", .type = SBX_OPT_LIST},
    {.key = "workdir", .type = SBX_OPT_STRING, .default_value = "/workspace"},
    {.key = NULL},
};
static const sbx_option_spec docker_schema[] = {
    {.key = "socket", .type = SBX_OPT_STRING, .default_value = "/var/run/docker.sock"},
    {.key = "image", .type = SBX_OPT_STRING, .default_value = "busybox:latest"},
    {.key = "agent", .type = SBX_OPT_STRING},
    {.key = "workdir", .type = SBX_OPT_STRING, .default_value = "/workspace"},
    {.key = "python", .type = SBX_OPT_STRING, .default_value = "python3"},
    {.key = "network", .type = SBX_OPT_STRING, .default_value = "bridge"},
    {.key = "user", .type = SBX_OPT_STRING},
    {.key = "tmpfs_mb", .type = SBX_OPT_INT, .default_value = "256", .min = 1, .max = 1048576},
    {.key = NULL},
};
static const sbx_option_spec e2b_schema[] = {
    {.key = "api_key_env", .type = SBX_OPT_ENV_NAME, .default_value = "E2B_API_KEY"},
    {.key = "api_url", .type = SBX_OPT_STRING, .default_value = "https://api.e2b.app"},
    {.key = "domain", .type = SBX_OPT_STRING, .default_value = "e2b.app"},
    {.key = "template", .type = SBX_OPT_STRING, .default_value = "code-interpreter-v1"},
    {.key = "code_interpreter", .type = SBX_OPT_BOOL, .default_value = "true"},
    {.key = "sandbox_timeout_s",
     .type = SBX_OPT_INT,
     .default_value = "300",
     .min = 1,
     .max = 86400},
    {.key = "user", .type = SBX_OPT_STRING, .default_value = "user"},
    {.key = "env", .type = SBX_OPT_LIST},
    {.key = NULL},
};
static const sbx_option_spec daytona_schema[] = {
    {.key = "api_key_env", .type = SBX_OPT_ENV_NAME, .default_value = "DAYTONA_API_KEY"},
    {.key = "api_url", .type = SBX_OPT_STRING, .default_value = "https://app.daytona.io/api"},
    {.key = "snapshot", .type = SBX_OPT_STRING},
    {.key = "target", .type = SBX_OPT_STRING},
    {.key = NULL},
};
static const sbx_option_spec ec2_ssm_schema[] = {
    {.key = "region", .type = SBX_OPT_STRING, .default_value = "us-east-1"},
    {.key = "access_key_id_env", .type = SBX_OPT_ENV_NAME, .default_value = "AWS_ACCESS_KEY_ID"},
    {.key = "secret_access_key_env",
     .type = SBX_OPT_ENV_NAME,
     .default_value = "AWS_SECRET_ACCESS_KEY"},
    {.key = "session_token_env", .type = SBX_OPT_ENV_NAME, .default_value = "AWS_SESSION_TOKEN"},
    {.key = NULL},
};
static const sbx_option_spec fake_schema[] = {{.key = NULL}};

#define BOTH (SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES)
static const sbx_provider_ops standins[] = {
    {.name = "local",
     .summary = "stand-in",
     .traits = SBX_PROVIDER_PROVISIONS,
     .options = local_schema},
    {.name = "docker", .summary = "stand-in", .traits = BOTH, .options = docker_schema},
    {.name = "e2b", .summary = "stand-in", .traits = BOTH, .options = e2b_schema},
    {.name = "daytona", .summary = "stand-in", .traits = BOTH, .options = daytona_schema},
    {.name = "ec2_ssm",
     .summary = "stand-in",
     .traits = SBX_PROVIDER_ATTACHES,
     .options = ec2_ssm_schema},
    {.name = "fake", .summary = "stand-in", .traits = BOTH, .options = fake_schema},
};

static void must_register(const sbx_provider_ops *ops)
{
    if (sbx_provider_lookup(ops->name) != NULL)
        return; /* built in (or registered already): the real one is used */
    sbx_error err;
    if (sbx_provider_register(ops, &err) != SBX_OK) {
        fprintf(stderr, "registering test provider %s: %s\n", ops->name, err.message);
        abort();
    }
}

void config_test_register_providers(void)
{
    must_register(&test_managed);
    must_register(&test_attach);
    must_register(&test_both);
    for (size_t i = 0; i < sizeof(standins) / sizeof(standins[0]); i++)
        must_register(&standins[i]);
}
