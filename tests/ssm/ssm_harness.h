/* ssm_harness.h - shared setup for the ec2_ssm tests: a fresh fake SSM/STS endpoint, the
 * provider opened on it with fast polling, principals and requests. One harness per test.
 */
#ifndef SBX_TESTS_SSM_HARNESS_H
#define SBX_TESTS_SSM_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "fakes/ssm_fake.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

#define H_INSTANCE "i-0123456789abcdef0"
#define H_ROLE "arn:aws:iam::123456789012:role/sbx-user-runner"

extern const sbx_provider_ops sbx_provider_ec2_ssm;

typedef struct harness {
    ssm_fake *fake;
    sbx_options *options;
    void *state;
    sbx_principal *principal;
    sbx_policy *policy;
    sbx_error err;
} harness;

/* Starts the fake (instance H_INSTANCE Online), exports the fake's key pair in the standard
 * environment variables and fills options (region, endpoints, fast polling). Does not open. */
void harness_init(harness *h);
/* Sets one more option before opening. */
void harness_option(harness *h, const char *key, const char *value);
/* Opens the provider; returns its status (err in h->err). */
sbx_status harness_open(harness *h);
/* Attaches to id (NULL = H_INSTANCE). */
sbx_status harness_attach(harness *h, const char *id, sbx_sandbox **sb);
void harness_free(harness *h);

/* principal helpers */
void harness_user(harness *h, const char *subject, const char *role_arn);
void harness_credential(harness *h, const char *key, const char *value);

/* Runs argv (NULL-terminated) or shell (when argv is NULL) with optional deadline (ms from now,
 * 0 = none). result must be initialised (sbx_result_new). */
sbx_status harness_run(harness *h, sbx_sandbox *sb, const char *const *argv, const char *shell,
                       int64_t deadline_ms, sbx_result *r);

/* provider_data lookup; NULL when absent. */
const char *result_data(const sbx_result *r, const char *key);
/* stdout as a NUL-terminated malloc'd string. */
char *result_stdout(const sbx_result *r);
char *result_stderr(const sbx_result *r);

#endif
