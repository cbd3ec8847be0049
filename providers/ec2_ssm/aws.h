/* aws.h - the two AWS APIs the ec2_ssm provider speaks, over the shared HTTP helper
 * (providers/common/http.h) and signed with SigV4 (sigv4.h):
 *   - SSM, JSON 1.1 protocol: POST / with X-Amz-Target: AmazonSSM.<Operation>, body and answer
 *     JSON, errors {"__type": "...", "message": "..."} (cloud-apis.md §3.1);
 *   - STS AssumeRole, query protocol: form-encoded POST, XML answer parsed by a bounded
 *     extractor (cloud-apis.md §3.3).
 * ThrottlingException (SSM answers it with HTTP 400, so the HTTP helper's 429 retry never sees
 * it) is retried here with exponential backoff and jitter, re-signing every attempt; the call
 * was refused before acting, so this is safe even for SendCommand.
 *
 * Private to providers/ec2_ssm and its tests. Never puts a secret key or session token in an
 * error: they are registered with the HTTP client for redaction as soon as they are used.
 */
#ifndef SBX_EC2_SSM_AWS_H
#define SBX_EC2_SSM_AWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "providers/common/http.h"
#include "providers/ec2_ssm/creds.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SSM and STS answers are small: GetCommandInvocation carries at most 24,000 + 8,000 characters
 * of output, which JSON escaping (\u00XX) can grow at most 6x. 1 MiB bounds every answer. */
#define AWS_MAX_RESPONSE_BYTES (1u << 20)
/* Attempts on ThrottlingException, including the first: 5 attempts with doubling backoff from
 * 200 ms span ~6 s, the same order as the AWS SDKs' standard retry mode (3 attempts, 20 s cap). */
#define AWS_THROTTLE_MAX_ATTEMPTS 5
#define AWS_THROTTLE_BASE_MS 200
#define AWS_THROTTLE_CAP_MS 5000
/* Longest AWS error code kept ("InvocationDoesNotExist", "ThrottlingException"). */
#define AWS_CODE_MAX 64
/* Longest XML element value taken from an STS answer (a session token is ~1-2 KB). */
#define AWS_XML_MAX_VALUE 8192

typedef struct aws_client_config {
    const char *region;         /* required: signs every call and names the default endpoints */
    const char *ssm_endpoint;   /* NULL = https://ssm.<region>.amazonaws.com/ */
    const char *sts_endpoint;   /* NULL = https://sts.<region>.amazonaws.com/ */
    int64_t request_timeout_ms; /* per HTTP attempt; 0 = the HTTP helper's default */
    int64_t throttle_base_ms;   /* 0 = AWS_THROTTLE_BASE_MS (tests shorten it) */
    int64_t http_backoff_ms;    /* 0 = the HTTP helper's default (tests shorten it) */
} aws_client_config;

typedef struct aws_client aws_client;

/* Validates the endpoints (https, or http only to a loopback address) and creates the client.
 * SBX_E_CONFIG names the bad option. */
sbx_status aws_client_new(const aws_client_config *cfg, aws_client **out, sbx_error *err);
void aws_client_free(aws_client *c);
/* The HTTP client (for redaction in callers' own messages). */
sbx_http_client *aws_client_http(aws_client *c);

/* One SSM JSON 1.1 call. request is borrowed; *response is a new reference on success.
 * On an AWS error, code (AWS_CODE_MAX bytes, may be NULL) receives the error code and the
 * status is mapped: InvalidInstanceId -> GONE, AccessDenied* -> PERMISSION_DENIED, signature and
 * unknown-key errors -> CONFIG, ExpiredTokenException -> UNAUTHENTICATED, ThrottlingException
 * after the retries -> RESOURCE_EXHAUSTED, validation errors -> INVALID_ARGUMENT, the rest ->
 * PROVISION. Transport failures keep the HTTP helper's code (TIMEOUT, PROVISION). */
sbx_status aws_ssm_call(aws_client *c, const aws_creds *creds, const char *operation,
                        json_t *request, bool idempotent, int64_t deadline_mono_ms,
                        const volatile int *cancel, json_t **response, char *code, sbx_error *err);

/* STS AssumeRole with base credentials. *out receives the temporary credentials and their
 * expiry. AccessDenied -> PERMISSION_DENIED; malformed role -> INVALID_ARGUMENT. */
sbx_status aws_sts_assume_role(aws_client *c, const aws_creds *base, const char *role_arn,
                               const char *session_name, int64_t duration_s,
                               int64_t deadline_mono_ms, aws_creds *out, sbx_error *err);

/* Parses an STS AssumeRole answer body (exposed for tests). On an <ErrorResponse>, fills code
 * and message (message_size bytes) and returns SBX_E_PROVISION; a body that is neither is
 * SBX_E_PROVISION with code "". */
sbx_status aws_sts_parse(const char *body, size_t len, aws_creds *out, char *code, char *message,
                         size_t message_size);

/* Normalises a JSON 1.1 "__type" ("ns#Code:extra" -> "Code") into out (AWS_CODE_MAX). */
void aws_error_code(const char *type, char *out);

/* Parses an ISO-8601 UTC timestamp ("2026-11-29T20:00:00Z", fractional seconds and "+00:00"
 * accepted) into unix seconds; false when malformed. */
bool aws_parse_iso8601(const char *s, int64_t *unix_s);

/* A RoleSessionName for subject: [\w+=,.@-], 2..64 characters ("sbx-" + the subject, other
 * characters replaced by '-'). out must hold 65 bytes. */
void aws_role_session_name(const char *subject, char out[65]);

#ifdef __cplusplus
}
#endif
#endif
