/* ec2_ssm_internal.h - shared state of the ec2_ssm provider's two halves: the control side
 * (ec2_ssm.c: open, policy, credentials and the assumed-role cache, attach) and the run side
 * (ssm_run.c: scripts through SendCommand/GetCommandInvocation, and files moved through them).
 * Private to providers/ec2_ssm. */
#ifndef SBX_PROVIDERS_EC2_SSM_INTERNAL_H
#define SBX_PROVIDERS_EC2_SSM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "providers/ec2_ssm/aws.h"
#include "providers/ec2_ssm/creds.h"
#include "sbx/provider.h"

/* SSM's documented output limits for GetCommandInvocation (API reference,
 * StandardOutputContent: "first 24,000 characters"; StandardErrorContent: "first 8,000"). */
#define SSM_STDOUT_MAX_CHARS 24000
#define SSM_STDERR_MAX_CHARS 8000
/* AWS-RunShellScript's executionTimeout parameter accepts 1..172800 seconds (48 h). */
#define SSM_EXEC_TIMEOUT_MAX_S 172800
/* SendCommand TimeoutSeconds (delivery timeout) is 30..2592000 (botocore ssm model). */
#define SSM_DELIVERY_TIMEOUT_MIN_S 30
#define SSM_DELIVERY_TIMEOUT_MAX_S 2592000
/* Assumed-role credentials cached (subject x role pairs). Each entry is ~2 KB; 256 covers a busy
 * multi-tenant worker, and eviction (expired first, then least recently used) keeps it bounded. */
#define SSM_CRED_CACHE_MAX 256
/* After the deadline, CancelCommand and the last GetCommandInvocation get this long. */
#define SSM_CANCEL_GRACE_MS 10000
/* Consecutive failed GetCommandInvocation polls (each already retried by aws.c) tolerated
 * before giving up on a command: rides out a throttling burst or a brief SSM 5xx episode. */
#define SSM_MAX_POLL_ERRORS 5
/* Without a deadline, polling stops this long after SSM's own execution + delivery timeouts
 * should have ended the command: a lost status must not hang a session forever. */
#define SSM_POLL_SLACK_MS 60000

typedef struct cred_entry {
    char *subject;
    char *role_arn;
    aws_creds creds;
    int64_t last_used_ms;
} cred_entry;

/* One opened profile. Immutable after open except what `lock` guards: the base credentials and
 * the assumed-role cache (create/attach/run may run on several threads at once). */
typedef struct ssm_state {
    char *profile;
    aws_client *aws;
    aws_creds_source src;
    char *src_strings[5]; /* owned copies behind src */
    char *default_role;   /* role_arn option: user mode without credentials["role_arn"] */
    char *workdir;        /* workdir option; NULL = none */
    int64_t poll_initial_ms, poll_max_ms, exec_timeout_s, delivery_timeout_s;
    int64_t invocation_wait_ms, role_duration_s, refresh_margin_s;

    pthread_mutex_t lock;
    aws_creds base;
    bool base_loaded;
    cred_entry cache[SSM_CRED_CACHE_MAX];
    size_t n_cache;
} ssm_state;

typedef struct ssm_sandbox {
    sbx_sandbox base; /* id: the instance id */
    ssm_state *st;
} ssm_sandbox;

/* principal->credentials[key], or NULL (ec2_ssm.c). */
const char *ssm_principal_credential(const sbx_principal *p, const char *key);
/* One SSM API call as the principal's identity (the deployment's, or its assumed role). */
sbx_status ssm_call_as(ssm_state *st, const sbx_principal *p, const char *op, json_t *req,
                       bool idempotent, int64_t deadline, const volatile int *cancel, json_t **resp,
                       char *code, sbx_error *err);

/* The run side (ssm_run.c), as the provider ops table names it. */
sbx_status ssm_run_command(sbx_sandbox *sbx, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                           sbx_result *r, sbx_error *err);
sbx_status ssm_run_code(sbx_sandbox *sbx, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                        sbx_result *r, sbx_error *err);
sbx_status ssm_write_file(sbx_sandbox *sbx, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                          sbx_result *r, sbx_error *err);
sbx_status ssm_read_file(sbx_sandbox *sbx, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                         sbx_result *r, sbx_error *err);
sbx_status ssm_list_files(sbx_sandbox *sbx, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                          sbx_result *r, sbx_error *err);

#endif
