/* fuzz_ssm.c - libFuzzer harness for everything the ec2_ssm provider reads from AWS
 * (providers/ec2_ssm/: SSM's JSON 1.1 answers -- DescribeInstanceInformation on attach,
 * SendCommand, GetCommandInvocation while polling, its output fields -- and the error bodies
 * with __type), through a scripted server (fuzz_cloud.h) that answers the provider's calls in
 * order with the input's responses; SSM and STS endpoints both point at it. The provider is
 * attached-only, so create is refused and the harness attaches to an instance id instead.
 * Polling and backoff are set to milliseconds, as in tests/ssm.
 *
 * Properties (fuzz_cloud.h): no crash, leak or hang; failures carry a text that never shows
 * the secret access key; output within the limit. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakes/ssm_fake.h"
#include "fuzz/fuzz_cloud.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const sbx_provider_ops sbx_provider_ec2_ssm;

#define FUZZ_SECRET "fuzzSecretAccessKey0123456789abcdefABCD"

static fuzz_cloud server;
static sbx_options *opts;
static void *state;

static void at_exit(void)
{
    sbx_provider_ec2_ssm.close(state);
    sbx_options_free(opts);
    fuzz_cloud_stop(&server);
}

#define FUZZ_INSTANCE "i-0123456789abcdef0"

static void open_provider(const char *ssm_url, const char *sts_url);

/* SBX_FUZZ_RECORD=FILE: drive the project's fake instead, write its answers as a seed. */
static void record(const char *path)
{
    ssm_fake *rf = ssm_fake_start();
    if (!rf)
        abort();
    ssm_fake_add_instance(rf, FUZZ_INSTANCE, "Online", "Linux");
    open_provider(ssm_fake_ssm_url(rf), ssm_fake_sts_url(rf));
    fuzz_cloud_drive(&sbx_provider_ec2_ssm, state, SSM_FAKE_SECRET_KEY, FUZZ_INSTANCE);
    fuzz_cloud_record(ssm_fake_ssm_http(rf), path);
    sbx_provider_ec2_ssm.close(state);
    sbx_options_free(opts);
    ssm_fake_stop(rf);
    exit(0);
}

static void setup(void)
{
    const char *rec = getenv("SBX_FUZZ_RECORD");
    if (rec)
        record(rec);
    fuzz_cloud_start(&server);
    const char *url = fake_http_url(server.http);
    open_provider(url, url);
    atexit(at_exit);
}

static void open_provider(const char *ssm_url, const char *sts_url)
{
    const char *rec = getenv("SBX_FUZZ_RECORD");
    /* the fake checks signatures with its own key pair */
    setenv("AWS_ACCESS_KEY_ID", rec ? SSM_FAKE_ACCESS_KEY_ID : "AKIAFUZZFUZZFUZZFUZZ", 1);
    setenv("AWS_SECRET_ACCESS_KEY", rec ? SSM_FAKE_SECRET_KEY : FUZZ_SECRET, 1);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    const char *kv[] = {"region",
                        rec ? SSM_FAKE_REGION : "us-east-1",
                        "ssm_endpoint",
                        ssm_url,
                        "sts_endpoint",
                        sts_url,
                        "poll_initial_ms",
                        "1",
                        "poll_max_ms",
                        "2",
                        "throttle_backoff_ms",
                        "1",
                        "http_backoff_ms",
                        "1",
                        "request_timeout_ms",
                        "20000",
                        NULL};
    opts = sbx_options_new(sbx_provider_ec2_ssm.options);
    sbx_error err = {0};
    for (size_t i = 0; kv[i]; i += 2)
        if (sbx_options_set(opts, kv[i], kv[i + 1], &err) != SBX_OK) {
            fprintf(stderr, "fuzz_ssm: option %s: %s\n", kv[i], err.message);
            abort();
        }
    sbx_provider_ctx ctx = {
        .profile = "fuzz", .options = opts, .environment = SBX_ENV_ATTACHED, .node = "n1"};
    if (sbx_provider_ec2_ssm.open(&ctx, &state, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_ssm: open: %s\n", err.message);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!state)
        setup();
    fuzz_cloud_script(&server, data, size);
    fuzz_cloud_drive(&sbx_provider_ec2_ssm, state, FUZZ_SECRET, FUZZ_INSTANCE);
    return 0;
}
