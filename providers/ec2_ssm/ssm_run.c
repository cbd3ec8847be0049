/* ssm_run.c - the ec2_ssm provider's run side: a script (shell.c builds it) sent with
 * SendCommand(AWS-RunShellScript) and polled with GetCommandInvocation (backoff, the expected
 * InvocationDoesNotExist retried, CancelCommand at the deadline, TIMED_OUT with what SSM had),
 * output cut at SSM's 24,000/8,000 characters and flagged; files as base64 through the same
 * shell in chunks. The control side (open, credentials, attach) is ec2_ssm.c. This file must
 * never destroy or stop an instance, nor put a secret in an error, a result or a log line. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include <jansson.h>

#include "providers/ec2_ssm/shell.h"
#include "providers/common/http.h"
#include "providers/ec2_ssm/ec2_ssm_internal.h"

/* ---- running a script --------------------------------------------------------------------- */

/* Sleeps ms or until the deadline / cancel, in slices. */
static void poll_sleep(int64_t ms, int64_t deadline, const volatile int *cancel)
{
    int64_t until = sbx_monotonic_ms() + ms;
    if (deadline > 0 && until > deadline)
        until = deadline;
    for (;;) {
        if (cancel != NULL && *cancel)
            return;
        int64_t left = until - sbx_monotonic_ms();
        if (left <= 0)
            return;
        int64_t slice = left < 20 ? left : 20;
        struct timespec ts = {0, (long)slice * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Number of UTF-8 characters (code points) in s: SSM's limits count characters. */
static size_t utf8_chars(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            c++;
    return c;
}

/* Copies an invocation's output into the result; flags and explains SSM's truncation. */
static void take_output(json_t *inv, sbx_result *r, const sbx_exec_opts *o)
{
    const char *out = json_string_value(json_object_get(inv, "StandardOutputContent"));
    const char *errs = json_string_value(json_object_get(inv, "StandardErrorContent"));
    size_t on = out != NULL ? json_string_length(json_object_get(inv, "StandardOutputContent")) : 0;
    size_t en = errs != NULL ? json_string_length(json_object_get(inv, "StandardErrorContent")) : 0;
    sbx_set_bytes(&r->stdout, out, on);
    sbx_set_bytes(&r->stderr, errs, en);
    bool cut_out = out != NULL && utf8_chars(out, on) >= SSM_STDOUT_MAX_CHARS;
    bool cut_err = errs != NULL && utf8_chars(errs, en) >= SSM_STDERR_MAX_CHARS;
    if (cut_out)
        r->stdout_truncated = 1;
    if (cut_err)
        r->stderr_truncated = 1;
    if (cut_out || cut_err) {
        char notice[400];
        snprintf(notice, sizeof(notice),
                 "SSM returns only the first %s of a command's %s; the rest was cut by SSM, not "
                 "by the program (write large output to a file on the instance, or to S3)",
                 cut_out && cut_err ? "24,000 / 8,000 characters"
                 : cut_out          ? "24,000 characters"
                                    : "8,000 characters",
                 cut_out && cut_err ? "stdout / stderr"
                 : cut_out          ? "stdout"
                                    : "stderr");
        sbx_result_set_data(r, "notice", notice);
    }
    if (o->on_output != NULL) {
        if (on > 0)
            o->on_output(o->on_output_arg, SBX__V1__STREAM__STREAM_STDOUT, (const uint8_t *)out, on,
                         0);
        if (en > 0)
            o->on_output(o->on_output_arg, SBX__V1__STREAM__STREAM_STDERR, (const uint8_t *)errs,
                         en, 0);
    }
}

typedef struct invocation {
    const char *instance;
    char command_id[64];
    const sbx_exec_opts *o;
} invocation;

static sbx_status get_invocation(ssm_state *st, const invocation *iv, int64_t deadline,
                                 const volatile int *cancel, json_t **resp, char *code,
                                 sbx_error *err)
{
    json_t *req = json_pack("{s:s,s:s}", "CommandId", iv->command_id, "InstanceId", iv->instance);
    if (req == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    sbx_status s = ssm_call_as(st, iv->o->principal, "GetCommandInvocation", req, true, deadline,
                               cancel, resp, code, err);
    json_decref(req);
    return s;
}

/* Deadline passed or the caller cancelled: CancelCommand, then one last look for the output
 * printed so far. Always answers SBX_E_TIMEOUT with outcome TIMED_OUT. */
static sbx_status cancel_command(ssm_state *st, const invocation *iv, const char *why,
                                 sbx_result *r, sbx_error *err)
{
    int64_t grace = sbx_monotonic_ms() + SSM_CANCEL_GRACE_MS;
    json_t *req =
        json_pack("{s:s,s:[s]}", "CommandId", iv->command_id, "InstanceIds", iv->instance);
    json_t *resp = NULL;
    sbx_error cerr = {0};
    char code[AWS_CODE_MAX];
    sbx_status cs = req != NULL ? ssm_call_as(st, iv->o->principal, "CancelCommand", req, true,
                                              grace, NULL, &resp, code, &cerr)
                                : SBX_E_RESOURCE_EXHAUSTED;
    json_decref(req);
    json_decref(resp);
    resp = NULL;
    if (get_invocation(st, iv, grace, NULL, &resp, code, NULL) == SBX_OK)
        take_output(resp, r, iv->o);
    json_decref(resp);
    r->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    sbx_result_set_data(r, "command_id", iv->command_id);
    return sbx_error_set(err, SBX_E_TIMEOUT, "ec2_ssm: command %s on %s %s; CancelCommand %s",
                         iv->command_id, iv->instance, why,
                         cs == SBX_OK ? "was sent" : "failed (the command may still run)");
}

/* Long because it is one SSM Run Command in order (SendCommand with its throttling rule, the
 * bounded poll of GetCommandInvocation, the terminal status mapping), sharing the command id and
 * deadline. */
static sbx_status run_script(ssm_sandbox *sb, const char *script, const char *cwd,
                             const sbx_exec_opts *o, sbx_result *r, sbx_error *err)
{
    ssm_state *st = sb->st;
    int64_t start = sbx_monotonic_ms();
    int64_t deadline = o->deadline_mono_ms;
    int64_t exec_s = st->exec_timeout_s;
    if (deadline > 0) {
        if (deadline <= start)
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "ec2_ssm: the deadline passed before the command was sent");
        exec_s = (deadline - start + 999) / 1000;
    }
    if (exec_s < 1)
        exec_s = 1;
    if (exec_s > SSM_EXEC_TIMEOUT_MAX_S)
        exec_s = SSM_EXEC_TIMEOUT_MAX_S;
    int64_t delivery_s = st->delivery_timeout_s;
    char exec_txt[24];
    snprintf(exec_txt, sizeof(exec_txt), "%lld", (long long)exec_s);

    json_t *params = json_pack("{s:[s],s:[s]}", "commands", script, "executionTimeout", exec_txt);
    if (params != NULL && cwd != NULL && cwd[0] != '\0')
        json_object_set_new(params, "workingDirectory", json_pack("[s]", cwd));
    json_t *req = params != NULL
                      ? json_pack("{s:s,s:[s],s:o,s:I,s:s}", "DocumentName", "AWS-RunShellScript",
                                  "InstanceIds", sb->base.id, "Parameters", params,
                                  "TimeoutSeconds", (json_int_t)delivery_s, "Comment", "sbx run")
                      : NULL;
    if (req == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: the command, its environment or its working directory is "
                             "not valid UTF-8 text, which SSM's JSON API requires");
    json_t *resp = NULL;
    char code[AWS_CODE_MAX];
    /* SendCommand is not idempotent (no client token): only throttling, which refuses the call
     * before it acts, is retried. */
    sbx_status s = ssm_call_as(st, o->principal, "SendCommand", req, false, deadline, o->cancel,
                               &resp, code, err);
    json_decref(req);
    if (s != SBX_OK) {
        if (s == SBX_E_GONE)
            sbx_error_prefix(err, "instance %s went away: ", sb->base.id);
        return s;
    }
    invocation iv = {.instance = sb->base.id, .o = o};
    const char *cid =
        json_string_value(json_object_get(json_object_get(resp, "Command"), "CommandId"));
    /* CommandId is a 36-character UUID (botocore ssm model CommandId: min 36, max 36). */
    if (cid == NULL || strlen(cid) != 36 || strspn(cid, "0123456789abcdefABCDEF-") != 36) {
        json_decref(resp);
        return sbx_error_set(err, SBX_E_PROVISION,
                             "ec2_ssm: SendCommand answered without a valid Command.CommandId");
    }
    snprintf(iv.command_id, sizeof(iv.command_id), "%s", cid);
    json_decref(resp);
    resp = NULL;
    sbx_result_set_data(r, "command_id", iv.command_id);
    sbx_result_set_data(r, "instance_id", sb->base.id);

    int64_t sent = sbx_monotonic_ms();
    /* Without a deadline the wait is still bounded: SSM itself gives up after delivery +
     * execution timeouts. */
    int64_t hard_stop =
        deadline > 0 ? deadline : sent + (exec_s + delivery_s) * 1000 + SSM_POLL_SLACK_MS;
    int64_t interval = st->poll_initial_ms;
    int poll_errors = 0;
    for (;;) {
        poll_sleep(interval, hard_stop, o->cancel);
        if (o->cancel != NULL && *o->cancel)
            return cancel_command(st, &iv, "was cancelled by the caller", r, err);
        if (sbx_monotonic_ms() >= hard_stop)
            return cancel_command(st, &iv, "passed its deadline", r, err);
        interval = interval * 2 > st->poll_max_ms ? st->poll_max_ms : interval * 2;

        s = get_invocation(st, &iv, hard_stop, o->cancel, &resp, code, err);
        if (s != SBX_OK) {
            json_decref(resp);
            resp = NULL;
            if (strcmp(code, "InvocationDoesNotExist") == 0 &&
                sbx_monotonic_ms() - sent < st->invocation_wait_ms) {
                /* Expected right after SendCommand: the invocation is not visible yet. */
                sbx_error_clear(err);
                continue;
            }
            if (s == SBX_E_TIMEOUT || (o->cancel != NULL && *o->cancel))
                return cancel_command(st, &iv, "passed its deadline", r, err);
            if (strcmp(code, "InvocationDoesNotExist") == 0)
                return sbx_error_set(err, SBX_E_PROVISION,
                                     "ec2_ssm: command %s never appeared on %s (SSM still says "
                                     "InvocationDoesNotExist after %lld ms)",
                                     iv.command_id, sb->base.id, (long long)st->invocation_wait_ms);
            /* Throttling that outlasted aws.c's retries, or a 5xx: the command itself is fine,
             * so keep polling (at the backoff interval) through a short burst. */
            bool transient = s == SBX_E_RESOURCE_EXHAUSTED ||
                             (s == SBX_E_PROVISION && strcmp(code, "InternalServerError") == 0);
            if (transient && ++poll_errors < SSM_MAX_POLL_ERRORS) {
                sbx_error_clear(err);
                continue;
            }
            /* Give up on this command, but do not leave it running unobserved. */
            sbx_error keep = *err;
            sbx_error ignored = {0};
            sbx_result *scratch = sbx_result_new();
            if (scratch != NULL)
                cancel_command(st, &iv, "lost its status", scratch, &ignored);
            sbx_message_free((ProtobufCMessage *)scratch);
            *err = keep;
            sbx_error_prefix(err, "command %s: ", iv.command_id);
            return s;
        }
        poll_errors = 0;
        const char *status = json_string_value(json_object_get(resp, "Status"));
        if (status == NULL) {
            json_decref(resp);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "ec2_ssm: GetCommandInvocation for %s answered without a Status",
                                 iv.command_id);
        }
        if (strcmp(status, "Pending") == 0 || strcmp(status, "InProgress") == 0 ||
            strcmp(status, "Delayed") == 0 || strcmp(status, "Cancelling") == 0) {
            json_decref(resp);
            resp = NULL;
            continue;
        }
        break;
    }

    /* A terminal status. */
    const char *status = json_string_value(json_object_get(resp, "Status"));
    const char *details = json_string_value(json_object_get(resp, "StatusDetails"));
    json_t *rc = json_object_get(resp, "ResponseCode");
    json_int_t code_v = json_is_integer(rc) ? json_integer_value(rc) : -1;
    r->wall_us = (uint64_t)(sbx_monotonic_ms() - sent) * 1000u;
    if (details != NULL)
        sbx_result_set_data(r, "status_details", details);
    take_output(resp, r, o);
    if (strcmp(status, "Success") == 0) {
        r->exit_code = (int32_t)code_v < 0 ? 0 : (int32_t)code_v;
        r->outcome =
            r->exit_code == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
        s = SBX_OK;
    } else if (strcmp(status, "Failed") == 0 && code_v > 0 && code_v < 256) {
        /* A program that exited non-zero: a normal result (cloud-apis.md §3.1). */
        r->exit_code = (int32_t)code_v;
        r->outcome = SBX__V1__OUTCOME__OUTCOME_NONZERO;
        s = SBX_OK;
    } else if (strcmp(status, "TimedOut") == 0) {
        r->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        s = sbx_error_set(err, SBX_E_TIMEOUT,
                          "ec2_ssm: command %s on %s timed out in SSM (%s; executionTimeout %s s)",
                          iv.command_id, sb->base.id, details != NULL ? details : "TimedOut",
                          exec_txt);
    } else {
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "ec2_ssm: command %s on %s ended %s (%s) without an exit status: SSM "
                          "could not run it%s",
                          iv.command_id, sb->base.id, status,
                          details != NULL ? details : "no details",
                          strcmp(status, "Cancelled") == 0 ? " (cancelled outside sbx)" : "");
    }
    json_decref(resp);
    return s;
}

static sbx_status run_spec(sbx_sandbox *sbx, ssm_script_spec *spec, const char *cwd,
                           const sbx_exec_opts *o, sbx_result *r, sbx_error *err)
{
    ssm_sandbox *sb = (ssm_sandbox *)sbx;
    spec->run_as = ssm_principal_credential(o->principal, "run_as");
    char *script = NULL;
    sbx_status s = ssm_build_script(spec, &script, err);
    if (s != SBX_OK)
        return s;
    s = run_script(sb, script, cwd, o, r, err);
    free(script);
    return s;
}

/* A command's working directory: its own cwd, else the profile's workdir, else SSM's default. */
static const char *cmd_cwd(sbx_sandbox *sbx, const char *cwd)
{
    if (cwd != NULL && cwd[0] != '\0')
        return cwd;
    return ((ssm_sandbox *)sbx)->st->workdir;
}

#define ENV_ARRAYS(op, keys, vals)                                                                 \
    const char **keys = calloc((op)->n_env + 1, sizeof(char *));                                   \
    const char **vals = calloc((op)->n_env + 1, sizeof(char *));                                   \
    if (keys == NULL || vals == NULL) {                                                            \
        free(keys);                                                                                \
        free(vals);                                                                                \
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");             \
    }                                                                                              \
    for (size_t i_ = 0; i_ < (op)->n_env; i_++) {                                                  \
        keys[i_] = (op)->env[i_]->key;                                                             \
        vals[i_] = (op)->env[i_]->value;                                                           \
    }

sbx_status ssm_run_command(sbx_sandbox *sbx, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                           sbx_result *r, sbx_error *err)
{
    bool has_shell = op->shell != NULL && op->shell[0] != '\0';
    if (op->n_argv > 0 && has_shell)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: RunCommand has both argv and shell; give one");
    ENV_ARRAYS(op, keys, vals)
    ssm_script_spec spec = {.argv = op->argv,
                            .n_argv = op->n_argv,
                            .shell = op->shell,
                            .interpreter = "sh",
                            .env_keys = keys,
                            .env_values = vals,
                            .n_env = op->n_env,
                            .stdin_data = op->stdin.data,
                            .stdin_len = op->stdin.len};
    sbx_status s = run_spec(sbx, &spec, cmd_cwd(sbx, op->cwd), o, r, err);
    free(keys);
    free(vals);
    return s;
}

sbx_status ssm_run_code(sbx_sandbox *sbx, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                        sbx_result *r, sbx_error *err)
{
    const char *lang = op->language != NULL ? op->language : "";
    if (strcmp(lang, "bash") != 0 && strcmp(lang, "sh") != 0)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "ec2_ssm: language '%.32s' is not offered (ec2_ssm runs bash and "
                             "sh); run other interpreters through RunCommand",
                             lang);
    ENV_ARRAYS(op, keys, vals)
    ssm_script_spec spec = {.shell = op->code,
                            .interpreter = lang,
                            .env_keys = keys,
                            .env_values = vals,
                            .n_env = op->n_env,
                            .stdin_data = op->stdin.data,
                            .stdin_len = op->stdin.len};
    sbx_status s = run_spec(sbx, &spec, cmd_cwd(sbx, op->cwd), o, r, err);
    free(keys);
    free(vals);
    return s;
}

/* ---- files -------------------------------------------------------------------------------- */

/* SSM has no file API: files move as base64 through the shell of AWS-RunShellScript (GNU
 * coreutils base64, head, tail, wc, find on the instance), in chunks that fit one SendCommand
 * each way. Every path is single-quoted; relative paths are resolved against the `workdir`
 * option. Bounds:
 *   - a write chunk of 22 KiB is 30,040 base64 characters, inside SSM_MAX_SCRIPT_BYTES with the
 *     quoted paths and commands around it;
 *   - a read chunk of 17,000 bytes is 22,668 base64 characters, inside SSM's 24,000-character
 *     StandardOutputContent with the size line before it;
 *   - one read or write moves at most 256 KiB (12-16 round trips of a few seconds each on real
 *     SSM): larger transfers belong in S3, not in Run Command output. */
#define SSM_WRITE_CHUNK_BYTES (22u * 1024u)
#define SSM_READ_CHUNK_BYTES 17000u
#define SSM_MAX_FILE_BYTES (256u * 1024u)

/* The absolute path (malloc'd) for a caller's path: absolute as is, relative under workdir.
 * NULL when there is none, *s and err saying why: callers test the path they go on to use. */
static char *resolve_path(const ssm_state *st, const char *what, const char *path, sbx_status *s,
                          sbx_error *err)
{
    char *abs = NULL;
    *s = SBX_OK;
    if (path == NULL || path[0] == '\0') {
        *s = sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "ec2_ssm: %s: path is empty", what);
        return NULL;
    }
    if (path[0] == '/') {
        abs = strdup(path);
    } else {
        if (st->workdir == NULL) {
            *s = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                               "ec2_ssm: %s '%.256s': relative path, but the profile sets no "
                               "ec2_ssm.workdir; use an absolute path or set workdir",
                               what, path);
            return NULL;
        }
        size_t n = strlen(st->workdir) + strlen(path) + 2;
        abs = malloc(n);
        if (abs != NULL)
            snprintf(abs, n, "%s/%s", st->workdir, path);
    }
    if (abs == NULL)
        *s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    return abs;
}

/* Runs a file script (no streaming of its base64 to the caller) into scratch; a non-zero exit
 * becomes an error naming the path and the shell's complaint. */
static sbx_status run_file_script(sbx_sandbox *sbx, const char *what, const char *path,
                                  const char *script, const sbx_exec_opts *o, sbx_result *scratch,
                                  sbx_error *err)
{
    sbx_exec_opts quiet = *o;
    quiet.on_output = NULL;
    ssm_script_spec spec = {.shell = script, .interpreter = "sh"};
    sbx_status s = run_spec(sbx, &spec, NULL, &quiet, scratch, err);
    if (s != SBX_OK || scratch->exit_code == 0)
        return s;
    char msg[320];
    size_t n = scratch->stderr.len < sizeof(msg) - 1 ? scratch->stderr.len : sizeof(msg) - 1;
    if (n > 0)
        memcpy(msg, scratch->stderr.data, n);
    msg[n] = '\0';
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    sbx_status code = strstr(msg, "Permission denied") != NULL ? SBX_E_PERMISSION_DENIED
                      : strstr(msg, "No space left") != NULL   ? SBX_E_RESOURCE_EXHAUSTED
                                                               : SBX_E_INVALID_ARGUMENT;
    return sbx_error_set(err, code, "ec2_ssm: %s '%.256s' on %s failed (exit %d): %s", what, path,
                         sbx->id, scratch->exit_code, n > 0 ? msg : "no message");
}

static void put_quoted(sbx_strbuf *b, const char *s)
{
    sbx_strbuf_shell_quote(b, s, strlen(s));
}

sbx_status ssm_write_file(sbx_sandbox *sbx, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                          sbx_result *r, sbx_error *err)
{
    ssm_state *st = ((ssm_sandbox *)sbx)->st;
    (void)r;
    if (op->content.len > SSM_MAX_FILE_BYTES)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "ec2_ssm: write_file '%.256s': %zu bytes is over the %u bytes one "
                             "write moves through SSM Run Command; copy large files through S3",
                             op->path, op->content.len, SSM_MAX_FILE_BYTES);
    sbx_status s;
    char *abs = resolve_path(st, "write_file", op->path, &s, err);
    if (abs == NULL)
        return s;
    char *slash = strrchr(abs, '/');
    const char *base = slash + 1;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        s = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                          "ec2_ssm: write_file '%.256s': not a file path (ends with '/', '.' or "
                          "'..')",
                          op->path);
        free(abs);
        return s;
    }
    char *parent = slash == abs ? strdup("/") : strndup(abs, (size_t)(slash - abs));
    /* The bytes land in a sibling temporary file (created 0600 under umask 077, so a secret
     * is never readable mid-write), which gets the final mode and is renamed over the target:
     * readers never see a half-written file. */
    char rnd[9];
    snprintf(rnd, sizeof(rnd), "%08x", (unsigned)(sbx_monotonic_us() ^ (int64_t)getpid() * 7919));
    size_t tl = (parent != NULL ? strlen(parent) : 0) + strlen(base) + 32;
    char *tmp = malloc(tl);
    if (parent == NULL || tmp == NULL) {
        free(parent);
        free(tmp);
        free(abs);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    snprintf(tmp, tl, "%s/.%s.sbx-%s", strcmp(parent, "/") == 0 ? "" : parent, base, rnd);
    unsigned mode = op->mode != 0 ? op->mode & 07777 : 0644;
    size_t len = op->content.len;
    size_t chunks = len == 0 ? 1 : (len + SSM_WRITE_CHUNK_BYTES - 1) / SSM_WRITE_CHUNK_BYTES;
    sbx_result *scratch = NULL;
    for (size_t i = 0; i < chunks && s == SBX_OK; i++) {
        size_t off = i * SSM_WRITE_CHUNK_BYTES;
        size_t n = len - off < SSM_WRITE_CHUNK_BYTES ? len - off : SSM_WRITE_CHUNK_BYTES;
        char *b64 = sbx_http_base64_encode(op->content.data + off, n);
        sbx_strbuf script = {0};
        sbx_strbuf_puts(&script, "set -e\numask 077\n");
        if (i == 0 && op->mkdirs) {
            sbx_strbuf_puts(&script, "mkdir -p -- ");
            put_quoted(&script, parent);
            sbx_strbuf_puts(&script, "\n");
        }
        sbx_strbuf_puts(&script, "printf '%s' ");
        put_quoted(&script, b64 != NULL ? b64 : "");
        sbx_strbuf_puts(&script, i == 0 ? " | base64 -d > " : " | base64 -d >> ");
        put_quoted(&script, tmp);
        sbx_strbuf_puts(&script, "\n");
        if (i + 1 == chunks) {
            char m[16];
            snprintf(m, sizeof(m), "chmod %04o ", mode);
            sbx_strbuf_puts(&script, m);
            put_quoted(&script, tmp);
            sbx_strbuf_puts(&script, "\nmv -f -- ");
            put_quoted(&script, tmp);
            sbx_strbuf_puts(&script, " ");
            put_quoted(&script, abs);
            sbx_strbuf_puts(&script, "\n");
        }
        free(b64);
        sbx_message_free((ProtobufCMessage *)scratch);
        scratch = sbx_result_new();
        if (script.oom || b64 == NULL || scratch == NULL)
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
        else
            s = run_file_script(sbx, "write_file", op->path, script.p, o, scratch, err);
        sbx_strbuf_free(&script);
    }
    if (s != SBX_OK && chunks > 1) {
        /* Best effort: do not leave a partial temporary file behind. */
        sbx_strbuf rm = {0};
        sbx_strbuf_puts(&rm, "rm -f -- ");
        put_quoted(&rm, tmp);
        sbx_strbuf_puts(&rm, "\n");
        sbx_message_free((ProtobufCMessage *)scratch);
        scratch = sbx_result_new();
        sbx_error ignored = {0};
        sbx_exec_opts grace = *o;
        grace.deadline_mono_ms = sbx_monotonic_ms() + SSM_CANCEL_GRACE_MS;
        if (scratch != NULL && rm.p != NULL)
            run_file_script(sbx, "write_file cleanup", op->path, rm.p, &grace, scratch, &ignored);
        sbx_strbuf_free(&rm);
    }
    sbx_message_free((ProtobufCMessage *)scratch);
    free(tmp);
    free(parent);
    free(abs);
    return s;
}

sbx_status ssm_read_file(sbx_sandbox *sbx, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                         sbx_result *r, sbx_error *err)
{
    ssm_state *st = ((ssm_sandbox *)sbx)->st;
    sbx_status s;
    char *abs = resolve_path(st, "read_file", op->path, &s, err);
    if (abs == NULL)
        return s;
    uint64_t want = op->max_bytes > 0 && op->max_bytes < SSM_MAX_FILE_BYTES ? op->max_bytes
                                                                            : SSM_MAX_FILE_BYTES;
    uint8_t *buf = malloc((size_t)want + 4);
    if (buf == NULL) {
        free(abs);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    size_t got = 0;
    long long size = -1;
    bool eof = false;
    while (s == SBX_OK && got < want && !eof) {
        size_t n = want - got < SSM_READ_CHUNK_BYTES ? (size_t)(want - got) : SSM_READ_CHUNK_BYTES;
        char line[128];
        sbx_strbuf script = {0};
        sbx_strbuf_puts(&script, "set -e\nwc -c < ");
        put_quoted(&script, abs);
        snprintf(line, sizeof(line), "\ntail -c +%llu -- ",
                 (unsigned long long)(op->offset + got + 1));
        sbx_strbuf_puts(&script, line);
        put_quoted(&script, abs);
        snprintf(line, sizeof(line), " | head -c %zu | base64 -w 0\n", n);
        sbx_strbuf_puts(&script, line);
        sbx_result *scratch = sbx_result_new();
        if (script.oom || scratch == NULL)
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
        else
            s = run_file_script(sbx, "read_file", op->path, script.p, o, scratch, err);
        sbx_strbuf_free(&script);
        if (s == SBX_OK && scratch != NULL) {
            /* "<size>\n<base64>" */
            const char *out = (const char *)scratch->stdout.data;
            size_t on = scratch->stdout.len;
            const char *nl = on > 0 ? memchr(out, '\n', on) : NULL;
            char digits[32];
            size_t dn = nl != NULL ? (size_t)(nl - out) : 0;
            if (nl == NULL || dn == 0 || dn >= sizeof(digits) || strspn(out, "0123456789 ") < dn) {
                s = sbx_error_set(err, SBX_E_PROVISION,
                                  "ec2_ssm: read_file '%.256s': the instance's answer is not "
                                  "\"<size>\\n<base64>\" (no GNU coreutils?)",
                                  op->path);
            } else {
                memcpy(digits, out, dn);
                digits[dn] = '\0';
                size = strtoll(digits, NULL, 10);
                const char *b64 = nl + 1;
                size_t bl = on - dn - 1;
                while (bl > 0 && (b64[bl - 1] == '\n' || b64[bl - 1] == '\r'))
                    bl--;
                if (bl > 4 * ((n + 2) / 3)) {
                    s = sbx_error_set(err, SBX_E_PROVISION,
                                      "ec2_ssm: read_file '%.256s': more data than asked for",
                                      op->path);
                } else {
                    size_t dec = 0;
                    uint8_t *bytes = sbx_http_base64_decode(b64, bl, &dec);
                    if (bytes == NULL || dec > n) {
                        s = sbx_error_set(err, SBX_E_PROVISION,
                                          "ec2_ssm: read_file '%.256s': the instance sent "
                                          "malformed base64",
                                          op->path);
                    } else {
                        memcpy(buf + got, bytes, dec);
                        got += dec;
                        eof = dec < n;
                    }
                    free(bytes);
                }
            }
        }
        sbx_message_free((ProtobufCMessage *)scratch);
    }
    if (s == SBX_OK) {
        sbx_file *f = sbx_file_new();
        if (f == NULL || !sbx_set_string(&f->path, op->path) ||
            !sbx_set_bytes(&f->content, buf, got)) {
            sbx_message_free((ProtobufCMessage *)f);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
        } else {
            f->size = size > 0 ? (uint64_t)size : 0;
            sbx_result_add_file(r, f);
            if (want == SSM_MAX_FILE_BYTES && size > 0 && (uint64_t)size > op->offset + got) {
                char notice[256];
                snprintf(notice, sizeof(notice),
                         "read_file returned %zu of %lld bytes: ec2_ssm moves at most %u bytes "
                         "per read through SSM (read the rest with offset, or use S3)",
                         got, size, SSM_MAX_FILE_BYTES);
                sbx_result_set_data(r, "notice", notice);
            }
        }
    }
    free(buf);
    free(abs);
    return s;
}

static int file_path_cmp(const void *a, const void *b)
{
    const sbx_file *x = *(sbx_file *const *)a, *y = *(sbx_file *const *)b;
    return strcmp(x->path, y->path);
}

sbx_status ssm_list_files(sbx_sandbox *sbx, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                          sbx_result *r, sbx_error *err)
{
    ssm_state *st = ((ssm_sandbox *)sbx)->st;
    sbx_status s;
    char *abs =
        resolve_path(st, "list_files", op->path != NULL && op->path[0] ? op->path : ".", &s, err);
    if (abs == NULL)
        return s;
    /* find prints one NUL-terminated record per entry, base64 keeps the names (any bytes but
     * NUL and '/') intact through SSM's text output. */
    sbx_strbuf script = {0};
    sbx_strbuf_puts(&script, "set -e\ncd -- ");
    put_quoted(&script, abs);
    sbx_strbuf_puts(&script, "\nfind . -mindepth 1 -maxdepth 1 -printf '%y %m %s %f\\0' | "
                             "base64 -w 0\n");
    sbx_result *scratch = sbx_result_new();
    if (script.oom || scratch == NULL)
        s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    else
        s = run_file_script(sbx, "list_files", op->path, script.p, o, scratch, err);
    sbx_strbuf_free(&script);
    if (s == SBX_OK && scratch != NULL) {
        /* a cut answer ends inside a quantum: decode the whole quanta only */
        size_t bl = scratch->stdout.len - scratch->stdout.len % 4;
        size_t dn = 0;
        uint8_t *raw = bl > 0 ? sbx_http_base64_decode((const char *)scratch->stdout.data, bl, &dn)
                              : calloc(1, 1);
        long n = raw != NULL ? (long)dn : -1;
        bool cut = scratch->stdout_truncated;
        if (n < 0) {
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "ec2_ssm: list_files '%.256s': the instance sent malformed base64",
                              op->path);
        } else {
            size_t pos = 0, entries = 0;
            while (s == SBX_OK && pos < (size_t)n) {
                uint8_t *end = memchr(raw + pos, '\0', (size_t)n - pos);
                if (end == NULL) { /* a record cut by SSM's output limit */
                    cut = true;
                    break;
                }
                char *rec = (char *)raw + pos;
                pos = (size_t)(end - raw) + 1;
                char type = 0;
                unsigned perm = 0;
                unsigned long long fsize = 0;
                int consumed = 0;
                if (sscanf(rec, "%c %o %llu %n", &type, &perm, &fsize, &consumed) != 3 ||
                    consumed <= 0 || rec[consumed] == '\0')
                    continue;
                const char *name = rec + consumed;
                size_t pl = strlen(abs) + strlen(name) + 2;
                char *path = malloc(pl);
                sbx_file *f = sbx_file_new();
                if (path == NULL || f == NULL) {
                    free(path);
                    sbx_message_free((ProtobufCMessage *)f);
                    s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
                    break;
                }
                snprintf(path, pl, "%s/%s", strcmp(abs, "/") == 0 ? "" : abs, name);
                sbx_set_string(&f->path, path);
                free(path);
                unsigned kind = type == 'd' ? 0040000u : type == 'l' ? 0120000u : 0100000u;
                f->mode = kind | (perm & 07777);
                f->size = fsize;
                sbx_result_add_file(r, f);
                entries++;
            }
            if (s == SBX_OK && r->n_files > 1)
                qsort(r->files, r->n_files, sizeof(r->files[0]), file_path_cmp);
            if (s == SBX_OK && cut) {
                char notice[200];
                snprintf(notice, sizeof(notice),
                         "the listing of %.100s was cut after %zu entries by SSM's "
                         "24,000-character output limit",
                         op->path, entries);
                sbx_result_set_data(r, "notice", notice);
            }
        }
        free(raw);
    }
    sbx_message_free((ProtobufCMessage *)scratch);
    free(abs);
    return s;
}
