/* ssm_fake.h - a fake AWS Systems Manager (JSON 1.1) and STS (query/XML) endpoint for the
 * ec2_ssm provider's tests, on the shared fake_http framework (two servers on 127.0.0.1).
 *
 * It VERIFIES the SigV4 signature of every request (credential scope, signed headers, a signed
 * X-Amz-Security-Token for temporary keys, a 5-minute clock skew) against the keys it knows:
 * the test key pair below and the temporary keys its own AssumeRole issued. It implements the
 * documented behaviour (cloud-apis.md §3.1, §3.3): X-Amz-Target dispatch, {"__type","message"}
 * error bodies (InvalidInstanceId, InvocationDoesNotExist right after SendCommand,
 * ThrottlingException with HTTP 400, UnrecognizedClientException, InvalidSignatureException),
 * statuses Pending / InProgress / Success / Failed / Cancelled / TimedOut, stdout cut at 24,000
 * and stderr at 8,000 characters, and STS AssumeRole XML with AccessDenied errors.
 *
 * Commands are never run: a tiny deterministic interpreter understands echo (and `>&2`),
 * printf '%s', cat (stdin), exit N, sleep S (advances the command's own clock; the invocation
 * stays InProgress that long in real time), pwd, whoami, printenv, export, true/false,
 * `repeat N TEXT [>&2]` (TEXT N times, for big outputs), `sh -c` / `bash -c`, and
 * `sudo -n -u USER -- sh -c SCRIPT`, `set -e`, pipelines, redirections (> >> <) and, over an
 * in-memory file system (/tmp /home /root /srv /var exist), GNU coreutils' base64 (-d, -w 0),
 * head -c, tail -c +N, wc -c, mkdir [-p], chmod, mv, rm, cd, and
 * `find DIR -mindepth 1 -maxdepth 1 -printf FMT` (%y %m %s %f). Anything else prints
 * "not found" and exits 127.
 */
#ifndef SBX_TESTS_SSM_FAKE_H
#define SBX_TESTS_SSM_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fakes/fake_http.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The long-term key pair the fake accepts (AWS's documentation example key). */
#define SSM_FAKE_ACCESS_KEY_ID "AKIDEXAMPLE"
#define SSM_FAKE_SECRET_KEY "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SSM_FAKE_REGION "us-east-1"

typedef struct ssm_fake ssm_fake;

/* Starts the SSM and STS servers. NULL on failure. */
ssm_fake *ssm_fake_start(void);
void ssm_fake_stop(ssm_fake *f);
/* "http://127.0.0.1:<port>/" of each endpoint. */
const char *ssm_fake_ssm_url(const ssm_fake *f);
const char *ssm_fake_sts_url(const ssm_fake *f);
/* The underlying servers (request logs, faults). */
fake_http *ssm_fake_ssm_http(ssm_fake *f);
fake_http *ssm_fake_sts_http(ssm_fake *f);

/* Registers a managed instance with its PingStatus ("Online", "ConnectionLost", "Inactive")
 * and PlatformType ("Linux" when NULL). */
void ssm_fake_add_instance(ssm_fake *f, const char *instance_id, const char *ping_status,
                           const char *platform);
/* GetCommandInvocation answers InvocationDoesNotExist this many times per new command before
 * the invocation is visible (default 1: "right after SendCommand"). */
void ssm_fake_set_invisible_polls(ssm_fake *f, int polls);
/* The next n calls of operation (e.g. "GetCommandInvocation") answer 400 ThrottlingException. */
void ssm_fake_throttle(ssm_fake *f, const char *operation, int n);
/* AssumeRole of this role ARN answers 403 AccessDenied. */
void ssm_fake_deny_role(ssm_fake *f, const char *role_arn);
/* Hostile-server mode (AWS never does this): signature errors quote the request's session
 * token, so a test can check the client scrubs it from its own error. */
void ssm_fake_echo_token_in_errors(ssm_fake *f, bool on);
/* Issued credentials expire this many seconds after issue (default: DurationSeconds). */
void ssm_fake_set_credential_lifetime(ssm_fake *f, int64_t seconds);

/* Counters and last-seen values, for assertions. */
int ssm_fake_calls(ssm_fake *f, const char *operation); /* SSM ops, or "AssumeRole" */
int ssm_fake_signature_failures(ssm_fake *f);           /* requests refused for their signature */
/* The access key id that signed the last successful call of operation (copied into out). */
bool ssm_fake_last_access_key(ssm_fake *f, const char *operation, char *out, size_t out_size);
/* The last SendCommand's script (commands joined by "\n"), working directory and
 * executionTimeout; and the last AssumeRole's RoleSessionName. Copied into out. */
bool ssm_fake_last_script(ssm_fake *f, char *out, size_t out_size);
bool ssm_fake_last_working_directory(ssm_fake *f, char *out, size_t out_size);
int64_t ssm_fake_last_execution_timeout(ssm_fake *f);
bool ssm_fake_last_role_session_name(ssm_fake *f, char *out, size_t out_size);
/* Status of the last command ("Cancelled" after CancelCommand...). */
bool ssm_fake_last_status(ssm_fake *f, char *out, size_t out_size);

/* Runs the fake's interpreter directly (tests of the fake itself). Returns the exit code;
 * *out / *err are malloc'd. */
int ssm_fake_interpret(const char *script, char **out, char **err);

#ifdef __cplusplus
}
#endif
#endif
