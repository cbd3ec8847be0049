/* ec2_ssm.c - the ec2_ssm provider (DESIGN §8): attach-only access to an existing EC2 (or
 * hybrid, mi-...) instance through AWS Systems Manager Run Command.
 *
 *   attach    DescribeInstanceInformation: an instance that is not registered with SSM or whose
 *             PingStatus is not Online is GONE (never recreated: sbx does not provision it).
 *   run       SendCommand(AWS-RunShellScript) with the script from shell.c, then
 *             GetCommandInvocation polled with exponential backoff; InvocationDoesNotExist right
 *             after SendCommand is expected and retried (cloud-apis.md §3.1, botocore's
 *             CommandExecuted waiter). At the deadline (or on cancel) CancelCommand is sent and
 *             the result is TIMED_OUT with whatever output SSM reported so far.
 *   output    SSM returns at most the first 24,000 characters of stdout and 8,000 of stderr
 *             (GetCommandInvocation StandardOutputContent / StandardErrorContent); a cut stream
 *             is flagged truncated and explained in result.provider_data["notice"].
 *   identity  agent mode: the deployment's AWS credentials (environment or shared file).
 *             user mode: STS AssumeRole of principal.credentials["role_arn"], cached per
 *             (subject, role) until shortly before expiry; never the agent's identity instead.
 *             credentials["run_as"]: the script runs through `sudo -n -u <user>`.
 *
 *   files     SSM has no file API: bytes move as base64 through the same shell (chunks that
 *             fit one SendCommand / one 24,000-character output), at most 256 KiB per call,
 *             written to a 0600 temporary file and renamed into place.
 *
 * Capabilities are honest: isolation NONE (the instance is whatever it is), no policy
 * dimension enforced (check_policy lists every non-default one), no package installs, no
 * streaming (SSM returns output only when polled).
 * This file must never read the config file, never destroy or stop an instance, and never put
 * a secret in an error, a result or a log line.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include <jansson.h>

#include "providers/ec2_ssm/aws.h"
#include "providers/ec2_ssm/creds.h"
#include "sbx/provider.h"
#include "providers/ec2_ssm/ec2_ssm_internal.h"

static const sbx_option_spec ssm_options[] = {
    {"region", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "AWS region of the instance (default: $AWS_REGION, then $AWS_DEFAULT_REGION)"},
    {"ssm_endpoint", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "SSM endpoint URL (default https://ssm.<region>.amazonaws.com/; http only to loopback)"},
    {"sts_endpoint", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "STS endpoint URL for user mode (default https://sts.<region>.amazonaws.com/)"},
    {"access_key_id_env", SBX_OPT_ENV_NAME, "AWS_ACCESS_KEY_ID", NULL, 0, 0,
     "environment variable holding the access key id"},
    {"secret_access_key_env", SBX_OPT_ENV_NAME, "AWS_SECRET_ACCESS_KEY", NULL, 0, 0,
     "environment variable holding the secret access key"},
    {"session_token_env", SBX_OPT_ENV_NAME, "AWS_SESSION_TOKEN", NULL, 0, 0,
     "environment variable holding a session token (temporary credentials)"},
    {"credentials_file", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "shared credentials file used when the access key variable is unset (default "
     "$AWS_SHARED_CREDENTIALS_FILE, then ~/.aws/credentials)"},
    {"aws_profile", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "profile in the shared credentials file (default $AWS_PROFILE, then default)"},
    {"workdir", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "absolute directory on the instance for relative file paths and for commands run "
     "without cwd (default: none; SSM's own per-command directory)"},
    {"role_arn", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "user mode: the role assumed for a user principal without credentials[\"role_arn\"] "
     "(the STS session is still named after the user and cached per user)"},
    {"poll_initial_ms", SBX_OPT_INT, "250", NULL, 1, 60000,
     "first GetCommandInvocation poll interval; doubles up to poll_max_ms"},
    {"poll_max_ms", SBX_OPT_INT, "5000", NULL, 1, 60000,
     "longest poll interval (botocore's CommandExecuted waiter polls every 5 s)"},
    {"execution_timeout_s", SBX_OPT_INT, "3600", NULL, 1, SSM_EXEC_TIMEOUT_MAX_S,
     "AWS-RunShellScript executionTimeout when the policy sets no timeout"},
    {"delivery_timeout_s", SBX_OPT_INT, "600", NULL, SSM_DELIVERY_TIMEOUT_MIN_S,
     SSM_DELIVERY_TIMEOUT_MAX_S, "SendCommand TimeoutSeconds: how long SSM tries to deliver"},
    {"invocation_wait_ms", SBX_OPT_INT, "30000", NULL, 1, 600000,
     "how long InvocationDoesNotExist is retried after SendCommand"},
    {"assume_role_duration_s", SBX_OPT_INT, "3600", NULL, 900, 43200,
     "user mode: DurationSeconds of STS AssumeRole"},
    {"credential_refresh_margin_s", SBX_OPT_INT, "300", NULL, 0, 3600,
     "user mode: assumed credentials are renewed this long before they expire"},
    {"request_timeout_ms", SBX_OPT_INT, "30000", NULL, 100, 600000,
     "per-request HTTP timeout for SSM and STS calls"},
    {"throttle_backoff_ms", SBX_OPT_INT, "200", NULL, 1, 10000,
     "first backoff after ThrottlingException (doubles, with jitter)"},
    {"http_backoff_ms", SBX_OPT_INT, "250", NULL, 1, 10000,
     "first backoff after a 5xx or transport error on an idempotent call"},
    {NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const char *opt(const sbx_options *o, const char *key)
{
    const char *v = o != NULL ? sbx_options_get(o, key) : NULL;
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static int64_t opt_int(const sbx_options *o, const char *key, int64_t def)
{
    if (o == NULL)
        return def;
    int64_t v = sbx_options_get_int(o, key);
    return v > 0 ? v : def;
}

static const char *nonempty_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

static void ssm_close(void *state)
{
    ssm_state *st = state;
    if (st == NULL)
        return;
    aws_client_free(st->aws);
    aws_creds_clear(&st->base);
    for (size_t i = 0; i < st->n_cache; i++) {
        free(st->cache[i].subject);
        free(st->cache[i].role_arn);
        aws_creds_clear(&st->cache[i].creds);
    }
    for (size_t i = 0; i < 5; i++)
        free(st->src_strings[i]);
    free(st->profile);
    free(st->default_role);
    free(st->workdir);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

static sbx_status ssm_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    *state = NULL;
    const sbx_options *o = ctx->options;
    ssm_state *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    pthread_mutex_init(&st->lock, NULL);
    st->profile = strdup(ctx->profile != NULL ? ctx->profile : "");
    const char *keys[5] = {"access_key_id_env", "secret_access_key_env", "session_token_env",
                           "credentials_file", "aws_profile"};
    for (int i = 0; i < 5; i++) {
        const char *v = opt(o, keys[i]);
        st->src_strings[i] = v != NULL ? strdup(v) : NULL;
    }
    st->src.access_key_id_env = st->src_strings[0];
    st->src.secret_access_key_env = st->src_strings[1];
    st->src.session_token_env = st->src_strings[2];
    st->src.credentials_file = st->src_strings[3];
    st->src.profile = st->src_strings[4];
    if (opt(o, "workdir") != NULL) {
        if (opt(o, "workdir")[0] != '/') {
            sbx_status ws =
                sbx_error_set(err, SBX_E_CONFIG,
                              "profile '%s': ec2_ssm.workdir '%.256s' must be an "
                              "absolute path on the instance",
                              ctx->profile != NULL ? ctx->profile : "", opt(o, "workdir"));
            ssm_close(st);
            return ws;
        }
        st->workdir = strdup(opt(o, "workdir"));
    }
    if (opt(o, "role_arn") != NULL)
        st->default_role = strdup(opt(o, "role_arn"));
    st->poll_initial_ms = opt_int(o, "poll_initial_ms", 250);
    st->poll_max_ms = opt_int(o, "poll_max_ms", 5000);
    if (st->poll_max_ms < st->poll_initial_ms)
        st->poll_max_ms = st->poll_initial_ms;
    st->exec_timeout_s = opt_int(o, "execution_timeout_s", 3600);
    st->delivery_timeout_s = opt_int(o, "delivery_timeout_s", 600);
    st->invocation_wait_ms = opt_int(o, "invocation_wait_ms", 30000);
    st->role_duration_s = opt_int(o, "assume_role_duration_s", 3600);
    st->refresh_margin_s = o != NULL && sbx_options_is_set(o, "credential_refresh_margin_s")
                               ? sbx_options_get_int(o, "credential_refresh_margin_s")
                               : opt_int(o, "credential_refresh_margin_s", 300);

    const char *region = opt(o, "region");
    if (region == NULL)
        region = nonempty_env("AWS_REGION");
    if (region == NULL)
        region = nonempty_env("AWS_DEFAULT_REGION");
    aws_client_config ac = {
        .region = region,
        .ssm_endpoint = opt(o, "ssm_endpoint"),
        .sts_endpoint = opt(o, "sts_endpoint"),
        .request_timeout_ms = opt_int(o, "request_timeout_ms", 30000),
        .throttle_base_ms = opt_int(o, "throttle_backoff_ms", AWS_THROTTLE_BASE_MS),
        .http_backoff_ms = opt_int(o, "http_backoff_ms", 0),
    };
    sbx_status s = st->profile != NULL
                       ? aws_client_new(&ac, &st->aws, err)
                       : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    if (s != SBX_OK) {
        sbx_error_prefix(err, "profile '%s': ", ctx->profile != NULL ? ctx->profile : "");
        ssm_close(st);
        return s;
    }
    *state = st;
    return SBX_OK;
}

static void ssm_capabilities(void *state, sbx_capabilities *caps)
{
    (void)state;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_NONE;
    caps->shell = 1;
    sbx_add_string(&caps->n_languages, &caps->languages, "bash");
    sbx_add_string(&caps->n_languages, &caps->languages, "sh");
    caps->files = 1;
    caps->package_install = 0;
    caps->stateful = 0;
    caps->attach = 1;
    caps->provisions = 0;
    caps->attaches_external = 1;
    caps->principal_user = 1;
    caps->policy_network = 0;
    caps->policy_network_domains = 0;
    caps->policy_filesystem = 0;
    caps->policy_resources = 0;
    caps->streaming = 0;
}

/* The instance is an ordinary host: SSM can neither fence its network or filesystem nor cap its
 * resources. timeout_ms is enforced (executionTimeout + CancelCommand) and output_limit_bytes by
 * the engine, so neither is listed. */
static sbx_status ssm_check_policy(void *state, const sbx_policy *p, sbx_strlist *out,
                                   sbx_error *err)
{
    (void)state;
    bool ok = true;
    if (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY)
        ok &= sbx_strlist_add(out, "network_egress=deny");
    else if (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST)
        ok &= sbx_strlist_add(out, "network_egress=allowlist");
    if (p->n_network_allow > 0 &&
        p->network_egress != SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST)
        ok &= sbx_strlist_add(out, "network_allow");
    if (p->n_fs_read > 0)
        ok &= sbx_strlist_add(out, "fs_read");
    if (p->n_fs_write > 0)
        ok &= sbx_strlist_add(out, "fs_write");
    if (p->cpu > 0)
        ok &= sbx_strlist_add(out, "cpu");
    if (p->memory_mb > 0)
        ok &= sbx_strlist_add(out, "memory_mb");
    if (p->pids > 0)
        ok &= sbx_strlist_add(out, "pids");
    if (p->disk_mb > 0)
        ok &= sbx_strlist_add(out, "disk_mb");
    return ok ? SBX_OK : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
}

static sbx_status ssm_create(void *state, const sbx_session_handle *session,
                             const sbx_principal *principal, const sbx_policy *policy,
                             sbx_sandbox **out, sbx_error *err)
{
    ssm_state *st = state;
    (void)session;
    (void)principal;
    (void)policy;
    *out = NULL;
    return sbx_error_set(err, SBX_E_CAPABILITY,
                         "profile '%s': ec2_ssm only attaches to existing instances; use "
                         "environment: attached with attach_to: i-...",
                         st != NULL && st->profile != NULL ? st->profile : "");
}

/* Attached instances are never destroyed by sbx: dropping the binding is the engine's job. */
static sbx_status ssm_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    (void)state;
    (void)sandbox_id;
    (void)err;
    return SBX_OK;
}

/* ---- credentials -------------------------------------------------------------------------- */

const char *ssm_principal_credential(const sbx_principal *p, const char *key)
{
    if (p == NULL)
        return NULL;
    for (size_t i = 0; i < p->n_credentials; i++)
        if (p->credentials[i] != NULL && p->credentials[i]->key != NULL &&
            strcmp(p->credentials[i]->key, key) == 0)
            return p->credentials[i]->value != NULL && p->credentials[i]->value[0] != '\0'
                       ? p->credentials[i]->value
                       : NULL;
    return NULL;
}

static bool user_mode(const sbx_principal *p)
{
    return p != NULL && p->mode == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
}

/* The role a user principal acts through: its own credentials["role_arn"], else the profile's
 * role_arn option. */
static const char *principal_role(const ssm_state *st, const sbx_principal *p)
{
    const char *r = ssm_principal_credential(p, "role_arn");
    return r != NULL ? r : st->default_role;
}

/* The deployment's own credentials (copied into *out). Loaded once, reloaded when `reload`. */
static sbx_status base_creds(ssm_state *st, bool reload, aws_creds *out, sbx_error *err)
{
    pthread_mutex_lock(&st->lock);
    sbx_status s = SBX_OK;
    if (!st->base_loaded || reload) {
        aws_creds fresh = {0};
        s = aws_creds_load(&st->src, &fresh, NULL, 0, err);
        if (s == SBX_OK) {
            aws_creds_clear(&st->base);
            st->base = fresh;
            st->base_loaded = true;
        }
    }
    if (s == SBX_OK)
        s = aws_creds_copy(&st->base, out, err);
    pthread_mutex_unlock(&st->lock);
    return s;
}

static void cache_drop_locked(ssm_state *st, size_t i)
{
    free(st->cache[i].subject);
    free(st->cache[i].role_arn);
    aws_creds_clear(&st->cache[i].creds);
    st->cache[i] = st->cache[--st->n_cache];
    memset(&st->cache[st->n_cache], 0, sizeof(cred_entry));
}

static void cache_invalidate(ssm_state *st, const char *subject, const char *role)
{
    pthread_mutex_lock(&st->lock);
    for (size_t i = 0; i < st->n_cache; i++)
        if (strcmp(st->cache[i].subject, subject) == 0 &&
            strcmp(st->cache[i].role_arn, role) == 0) {
            cache_drop_locked(st, i);
            break;
        }
    pthread_mutex_unlock(&st->lock);
}

/* The credentials to act with for principal p: the base ones in agent mode; in user mode the
 * assumed role (from the cache while valid for more than the refresh margin). */
static sbx_status principal_creds(ssm_state *st, const sbx_principal *p, int64_t deadline,
                                  aws_creds *out, sbx_error *err)
{
    aws_creds_clear(out);
    if (!user_mode(p))
        return base_creds(st, false, out, err);
    const char *role = principal_role(st, p);
    const char *subject = p->subject != NULL ? p->subject : "";
    if (role == NULL)
        return sbx_error_set(
            err, SBX_E_PERMISSION_DENIED,
            "ec2_ssm: user principal '%.128s' has no credentials[\"role_arn\"] and "
            "the profile sets no role_arn; user mode acts only through the user's own IAM role "
            "(sbx never "
            "falls back to the agent's identity)",
            subject);
    if (subject[0] == '\0')
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "ec2_ssm: user mode needs a principal subject (it keys the "
                             "credential cache and names the STS session)");
    int64_t now_s = sbx_now_ms() / 1000;
    pthread_mutex_lock(&st->lock);
    for (size_t i = 0; i < st->n_cache; i++) {
        cred_entry *e = &st->cache[i];
        if (strcmp(e->subject, subject) != 0 || strcmp(e->role_arn, role) != 0)
            continue;
        if (e->creds.expires_unix_s - st->refresh_margin_s > now_s) {
            e->last_used_ms = sbx_now_ms();
            sbx_status s = aws_creds_copy(&e->creds, out, err);
            pthread_mutex_unlock(&st->lock);
            return s;
        }
        cache_drop_locked(st, i); /* expires within the margin: renew */
        break;
    }
    pthread_mutex_unlock(&st->lock);

    aws_creds base = {0};
    sbx_status s = base_creds(st, false, &base, err);
    if (s != SBX_OK)
        return s;
    char session[65];
    aws_role_session_name(subject, session);
    aws_creds assumed = {0};
    s = aws_sts_assume_role(st->aws, &base, role, session, st->role_duration_s, deadline, &assumed,
                            err);
    aws_creds_clear(&base);
    if (s != SBX_OK)
        return s;
    s = aws_creds_copy(&assumed, out, err);
    if (s != SBX_OK) {
        aws_creds_clear(&assumed);
        return s;
    }
    pthread_mutex_lock(&st->lock);
    if (st->n_cache == SSM_CRED_CACHE_MAX) {
        size_t victim = 0;
        for (size_t i = 1; i < st->n_cache; i++)
            if (st->cache[i].creds.expires_unix_s <= now_s ||
                st->cache[i].last_used_ms < st->cache[victim].last_used_ms)
                victim = i;
        cache_drop_locked(st, victim);
    }
    cred_entry *e = &st->cache[st->n_cache];
    e->subject = strdup(subject);
    e->role_arn = strdup(role);
    if (e->subject == NULL || e->role_arn == NULL) {
        free(e->subject);
        free(e->role_arn);
        memset(e, 0, sizeof(*e));
        aws_creds_clear(&assumed);
    } else {
        e->creds = assumed;
        e->last_used_ms = sbx_now_ms();
        st->n_cache++;
    }
    pthread_mutex_unlock(&st->lock);
    return SBX_OK;
}

/* An SSM call as principal p; expired credentials are renewed once and the call repeated. */
sbx_status ssm_call_as(ssm_state *st, const sbx_principal *p, const char *op, json_t *req,
                       bool idempotent, int64_t deadline, const volatile int *cancel, json_t **resp,
                       char *code, sbx_error *err)
{
    for (int attempt = 0;; attempt++) {
        aws_creds creds = {0};
        sbx_status s = principal_creds(st, p, deadline, &creds, err);
        if (s != SBX_OK)
            return s;
        s = aws_ssm_call(st->aws, &creds, op, req, idempotent, deadline, cancel, resp, code, err);
        aws_creds_clear(&creds);
        if (s != SBX_E_UNAUTHENTICATED || attempt > 0)
            return s;
        /* ExpiredTokenException: the token died before its advertised expiry (revoked
         * session, rotated environment): renew and try once more. */
        if (user_mode(p))
            cache_invalidate(st, p->subject != NULL ? p->subject : "", principal_role(st, p));
        else {
            aws_creds fresh = {0};
            s = base_creds(st, true, &fresh, err);
            aws_creds_clear(&fresh);
            if (s != SBX_OK)
                return s;
        }
        sbx_error_clear(err);
    }
}

/* ---- attach ------------------------------------------------------------------------------- */

/* SSM InstanceId pattern (botocore ssm model): (^i-(\w{8}|\w{17})$)|(^mi-\w{17}$). */
static bool valid_instance_id(const char *id)
{
    size_t n = strlen(id), pre;
    if (strncmp(id, "i-", 2) == 0)
        pre = 2;
    else if (strncmp(id, "mi-", 3) == 0)
        pre = 3;
    else
        return false;
    size_t body = n - pre;
    if (!((pre == 2 && (body == 8 || body == 17)) || (pre == 3 && body == 17)))
        return false;
    for (size_t i = pre; i < n; i++) {
        char c = id[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '_'))
            return false;
    }
    return true;
}

static sbx_status ssm_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                             const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    ssm_state *st = state;
    (void)policy;
    *out = NULL;
    if (sandbox_id == NULL || !valid_instance_id(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE,
                             "ec2_ssm: '%.128s' is not an SSM instance id (i-xxxxxxxx, "
                             "i-xxxxxxxxxxxxxxxxx or mi-xxxxxxxxxxxxxxxxx), so no such instance "
                             "exists; fix attach_to",
                             sandbox_id != NULL ? sandbox_id : "");
    int64_t deadline = sbx_monotonic_ms() + SSM_CANCEL_GRACE_MS * 6;
    json_t *req =
        json_pack("{s:[{s:s,s:[s]}]}", "Filters", "Key", "InstanceIds", "Values", sandbox_id);
    if (req == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    json_t *resp = NULL;
    char code[AWS_CODE_MAX];
    sbx_status s = ssm_call_as(st, principal, "DescribeInstanceInformation", req, true, deadline,
                               NULL, &resp, code, err);
    json_decref(req);
    if (s != SBX_OK) {
        if (s == SBX_E_GONE)
            sbx_error_set(err, SBX_E_GONE,
                          "ec2_ssm: instance %s is unknown to SSM (InvalidInstanceId): "
                          "terminated, in another region or account, or never registered",
                          sandbox_id);
        return s;
    }
    json_t *list = json_object_get(resp, "InstanceInformationList");
    json_t *info = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *id = json_string_value(json_object_get(v, "InstanceId"));
        if (id != NULL && strcmp(id, sandbox_id) == 0) {
            info = v;
            break;
        }
    }
    if (info == NULL) {
        json_decref(resp);
        return sbx_error_set(err, SBX_E_GONE,
                             "ec2_ssm: instance %s is not registered with SSM (no running SSM "
                             "agent with an instance profile allowing "
                             "AmazonSSMManagedInstanceCore, or the instance is gone); attached "
                             "instances are never recreated",
                             sandbox_id);
    }
    const char *ping = json_string_value(json_object_get(info, "PingStatus"));
    const char *platform = json_string_value(json_object_get(info, "PlatformType"));
    if (ping == NULL || strcmp(ping, "Online") != 0) {
        s = sbx_error_set(err, SBX_E_GONE,
                          "ec2_ssm: instance %s is registered with SSM but its PingStatus is "
                          "%.32s, not Online (stopped, or its SSM agent lost contact)",
                          sandbox_id, ping != NULL ? ping : "missing");
        json_decref(resp);
        return s;
    }
    if (platform != NULL && strcmp(platform, "Windows") == 0) {
        json_decref(resp);
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "ec2_ssm: instance %s runs Windows; this provider runs "
                             "AWS-RunShellScript, which needs Linux or macOS",
                             sandbox_id);
    }
    json_decref(resp);
    ssm_sandbox *sb = calloc(1, sizeof(*sb));
    if (sb == NULL || (sb->base.id = strdup(sandbox_id)) == NULL) {
        free(sb);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    sb->st = st;
    *out = &sb->base;
    return SBX_OK;
}

static void ssm_sandbox_close(sbx_sandbox *sbx)
{
    if (sbx == NULL)
        return;
    free(sbx->id);
    free(sbx);
}

const sbx_provider_ops sbx_provider_ec2_ssm = {
    .name = "ec2_ssm",
    .summary = "attach to an existing EC2 instance through AWS Systems Manager Run Command "
               "(SigV4; user mode via STS AssumeRole)",
    .traits = SBX_PROVIDER_ATTACHES,
    .options = ssm_options,
    .open = ssm_open,
    .close = ssm_close,
    .capabilities = ssm_capabilities,
    .check_policy = ssm_check_policy,
    .create = ssm_create,
    .attach = ssm_attach,
    .destroy = ssm_destroy,
    .run_code = ssm_run_code,
    .run_command = ssm_run_command,
    .install_packages = NULL,
    .write_file = ssm_write_file,
    .read_file = ssm_read_file,
    .list_files = ssm_list_files,
    .sandbox_close = ssm_sandbox_close,
};
