/* e2b_envd.c - operations inside an E2B sandbox (reference/cloud-apis.md §1.2):
 *   - commands: envd's Connect-RPC `process.Process/Start` (server streaming, JSON codec). The
 *     request is ONE Connect envelope (flags byte, big-endian uint32 length, JSON); the response
 *     is a sequence of envelopes: data events {"event":{"start"|"data"|"end"|"keepalive"}} and a
 *     final end-stream envelope (flags 0x02) holding {} or {"error":{code,message}}. Output
 *     bytes arrive base64-encoded (proto3 JSON `bytes`); a missing exitCode means 0 (proto3 JSON
 *     omits zero values). On a deadline, cancel or output limit the process is killed with
 *     `process.Process/SendSignal` SIGNAL_SIGKILL, as E2B's SDK does.
 *   - stateful python: the code-interpreter template's Jupyter server (port 49999),
 *     `POST /execute {"code","language","env_vars"}` answering newline-delimited JSON objects
 *     {"type":"stdout"|"stderr"|"result"|"error"|...} (e2b-dev/code-interpreter,
 *     python/e2b_code_interpreter/code_interpreter_sync.py and models.py parse_output).
 *   - files: envd's `POST /files?path=&username=` (octet-stream upload, creates parents,
 *     overwrites), `GET /files?path=&username=` (download) and the unary Connect call
 *     `filesystem.Filesystem/ListDir {"path"}`.
 * Every byte from the sandbox is untrusted: envelopes and lines are bounded, JSON is parsed by
 * the bounded helper, base64 is checked. This file must not talk to the control plane except
 * through e2b_probe (to tell a dead sandbox from a proxy hiccup).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/common/packages.h"
#include "providers/e2b/e2b_internal.h"

/* One Connect envelope from envd: data events carry output in pieces of at most a few tens of
 * KiB; 4 MiB leaves ample room while bounding what a hostile stream can make us buffer. */
#define E2B_MAX_ENVELOPE (4u * 1024u * 1024u)
/* One NDJSON line from the Jupyter server (a result may carry a PNG as base64). */
#define E2B_MAX_LINE (8u * 1024u * 1024u)
/* Output kept per stream when the caller sets no limit. */
#define E2B_MAX_OUTPUT_BYTES (16u * 1024u * 1024u)
/* A command with no deadline still ends: one hour matches E2B's longest documented request. */
#define E2B_EXEC_MAX_MS (60 * 60 * 1000)
/* Killing a process after a deadline is best effort and must not hold the caller long. */
#define E2B_KILL_TIMEOUT_MS 5000
/* Seconds of TTL kept beyond an operation's deadline when raising it (see e2b_ttl_cover). */
#define E2B_TTL_MARGIN_S 30
/* stdin is fed through the command line (base64 in an argument); Linux caps one argument at
 * 128 KiB (MAX_ARG_STRLEN), so 96 KiB of input (128 KiB of base64) is the most that fits. */
#define E2B_MAX_STDIN_BYTES (96u * 1024u)

/* Domains where E2B's SDK reaches sandboxes through https://sandbox.<domain> with routing
 * headers (reference §1.2). Other domains use https://<port>-<id>.<domain>. */
static const char *const e2b_routed_domains[] = {"e2b.app", "e2b.dev", "e2b.pro", "e2b-staging.dev",
                                                 NULL};

/* One environment variable (RunCode and RunCommand have distinct entry types). */
typedef struct e2b_kv {
    const char *key;
    const char *value;
} e2b_kv;

/* Headers for one in-sandbox call. */
typedef struct e2b_call {
    char url[2048];
    char token[512];
    char auth[512];
    char route_id[256];
    char route_port[64];
    char timeout[64];
    const char *headers[12];
    size_t n;
} e2b_call;

static void e2b_call_add(e2b_call *c, const char *h)
{
    if (c->n < sizeof c->headers / sizeof c->headers[0])
        c->headers[c->n++] = h;
}

/* Builds the URL (base + path) and the auth and routing headers for port. */
static sbx_status e2b_call_init(e2b_sandbox *sb, int port, const char *path, e2b_call *c,
                                sbx_error *err)
{
    memset(c, 0, sizeof *c);
    e2b_provider *p = sb->p;
    bool routed = p->sandbox_url != NULL;
    for (size_t i = 0; !routed && e2b_routed_domains[i]; i++)
        routed = strcmp(sb->domain, e2b_routed_domains[i]) == 0;
    int n;
    if (p->sandbox_url)
        n = snprintf(c->url, sizeof c->url, "%s%s", p->sandbox_url, path);
    else if (routed)
        n = snprintf(c->url, sizeof c->url, "https://sandbox.%s%s", sb->domain, path);
    else
        n = snprintf(c->url, sizeof c->url, "https://%d-%s.%s%s", port, sb->base.id, sb->domain,
                     path);
    if (n < 0 || (size_t)n >= sizeof c->url)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "e2b: the URL for %s is longer than %zu bytes; use a shorter path",
                             path, sizeof c->url - 1);
    if (routed) {
        snprintf(c->route_id, sizeof c->route_id, "E2b-Sandbox-Id: %s", sb->base.id);
        snprintf(c->route_port, sizeof c->route_port, "E2b-Sandbox-Port: %d", port);
        e2b_call_add(c, c->route_id);
        e2b_call_add(c, c->route_port);
    }
    if (sb->access_token) {
        snprintf(c->token, sizeof c->token, "X-Access-Token: %s", sb->access_token);
        e2b_call_add(c, c->token);
    }
    /* envd selects the user from Basic auth with an empty password. */
    char userpass[256];
    snprintf(userpass, sizeof userpass, "%s:", p->user);
    char *b64 = sbx_http_base64_encode(userpass, strlen(userpass));
    if (!b64)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    snprintf(c->auth, sizeof c->auth, "Authorization: Basic %s", b64);
    free(b64);
    e2b_call_add(c, c->auth);
    return SBX_OK;
}

static void e2b_call_wipe(e2b_call *c)
{
    memset(c->token, 0, sizeof c->token);
    memset(c->auth, 0, sizeof c->auth);
}

/* After an in-sandbox call failed (proxy error or transport reset): GONE when the control
 * plane says the sandbox no longer exists, else the original error stands. */
static sbx_status e2b_maybe_gone(e2b_sandbox *sb, sbx_status s, sbx_error *err)
{
    sbx_error probe;
    if (e2b_probe(sb->p, sb->base.id, &probe) == SBX_E_GONE) {
        if (err)
            *err = probe;
        return SBX_E_GONE;
    }
    return s;
}

static sbx_status e2b_envd_http_error(e2b_sandbox *sb, const sbx_http_request *req,
                                      const sbx_http_response *resp, sbx_error *err)
{
    sbx_status s = sbx_http_check(sb->p->http, req, resp, err);
    if (resp->status == 502 || resp->status == 503 || resp->status == 404)
        s = e2b_maybe_gone(sb, s, err);
    return s;
}

/* ---- output -------------------------------------------------------------------------------- */

typedef struct e2b_output {
    sbx_result *result;
    const sbx_exec_opts *o;
    uint64_t limit;
    uint64_t offset[3]; /* by Sbx__V1__Stream */
    bool over_limit;
} e2b_output;

static void e2b_output_init(e2b_output *out, sbx_result *r, const sbx_exec_opts *o)
{
    memset(out, 0, sizeof *out);
    out->result = r;
    out->o = o;
    out->limit = o && o->output_limit_bytes ? o->output_limit_bytes : E2B_MAX_OUTPUT_BYTES;
    if (out->limit > E2B_MAX_OUTPUT_BYTES)
        out->limit = E2B_MAX_OUTPUT_BYTES;
}

/* Keeps and streams a chunk; false once a stream passed the limit (the rest is dropped). */
static bool e2b_emit(e2b_output *out, Sbx__V1__Stream stream, const uint8_t *data, size_t len)
{
    if (len == 0)
        return true;
    ProtobufCBinaryData *field =
        stream == SBX__V1__STREAM__STREAM_STDERR ? &out->result->stderr : &out->result->stdout;
    protobuf_c_boolean *trunc = stream == SBX__V1__STREAM__STREAM_STDERR
                                    ? &out->result->stderr_truncated
                                    : &out->result->stdout_truncated;
    uint64_t have = field->len;
    size_t keep = len;
    if (have + keep > out->limit) {
        keep = have >= out->limit ? 0 : (size_t)(out->limit - have);
        *trunc = true;
        out->over_limit = true;
    }
    if (keep > 0) {
        sbx_append_bytes(field, data, keep);
        if (out->o && out->o->on_output)
            out->o->on_output(out->o->on_output_arg, stream, data, keep, out->offset[stream]);
        out->offset[stream] += keep;
    }
    return !out->over_limit;
}

static void e2b_set_exit(sbx_result *r, int code)
{
    r->exit_code = code;
    r->signal = 0;
    r->outcome = code == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
}

/* ---- Connect envelope stream (process.Process/Start) --------------------------------------- */

typedef struct e2b_stream {
    e2b_sandbox *sb;
    e2b_output out;
    uint8_t head[5];
    size_t head_have;
    uint8_t *payload;
    size_t payload_len, payload_have;
    int64_t pid;
    bool started, ended, stream_closed;
    int exit_code;
    int signal;
    char status_text[128];
    char proc_error[256];
    sbx_status fail; /* set when the stream itself reported an error */
    sbx_error fail_err;
    sbx_status abort_status; /* handed to the HTTP helper */
} e2b_stream;

static int e2b_signal_from_status(const char *status)
{
    /* envd reports Go's ProcessState.String(): "exit status N" or "signal: <name>". */
    static const struct {
        const char *name;
        int sig;
    } names[] = {{"killed", SIGKILL},
                 {"terminated", SIGTERM},
                 {"interrupt", SIGINT},
                 {"segmentation fault", SIGSEGV},
                 {"aborted", SIGABRT},
                 {"hangup", SIGHUP},
                 {"broken pipe", SIGPIPE},
                 {"bus error", SIGBUS},
                 {"floating point exception", SIGFPE},
                 {"quit", SIGQUIT}};
    const char *p = strstr(status, "signal: ");
    if (!p)
        return 0;
    p += 8;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(p, names[i].name, strlen(names[i].name)) == 0)
            return names[i].sig;
    return SIGKILL;
}

static sbx_status e2b_connect_code(const char *code)
{
    if (!code)
        return SBX_E_PROVISION;
    if (strcmp(code, "deadline_exceeded") == 0 || strcmp(code, "canceled") == 0)
        return SBX_E_TIMEOUT;
    if (strcmp(code, "invalid_argument") == 0)
        return SBX_E_INVALID_ARGUMENT;
    if (strcmp(code, "unauthenticated") == 0)
        return SBX_E_CONFIG;
    if (strcmp(code, "permission_denied") == 0)
        return SBX_E_PERMISSION_DENIED;
    if (strcmp(code, "resource_exhausted") == 0)
        return SBX_E_RESOURCE_EXHAUSTED;
    if (strcmp(code, "unavailable") == 0)
        return SBX_E_GONE; /* SDK: sandbox probably dead */
    return SBX_E_PROVISION;
}

static bool e2b_stream_fail(e2b_stream *st, sbx_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool e2b_stream_fail(e2b_stream *st, sbx_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbx_error_vset(&st->fail_err, s, fmt, ap);
    va_end(ap);
    st->fail = s;
    st->abort_status = s;
    return false;
}

static bool e2b_stream_envelope(e2b_stream *st, uint8_t flags, const uint8_t *data, size_t len)
{
    if (flags & 0x01)
        return e2b_stream_fail(st, SBX_E_PROVISION,
                               "e2b: envd sent a compressed envelope that was never negotiated");
    json_t *j = NULL;
    sbx_error perr;
    if (sbx_http_parse_json(st->sb->p->http, "envd process stream", data, len, &j, &perr) != SBX_OK)
        return e2b_stream_fail(st, SBX_E_PROVISION, "%s", perr.message);
    bool ok = true;
    if (flags & 0x02) {
        st->stream_closed = true;
        json_t *e = json_object_get(j, "error");
        if (json_is_object(e)) {
            const char *code = json_string_value(json_object_get(e, "code"));
            const char *msg = json_string_value(json_object_get(e, "message"));
            char m[SBX_HTTP_ERROR_BODY_MAX + 1];
            snprintf(m, sizeof m, "%s", msg ? msg : "");
            sbx_http_redact(st->sb->p->http, m);
            ok = e2b_stream_fail(st, e2b_connect_code(code),
                                 "e2b: envd process.Process/Start in sandbox %s failed: %s: %s",
                                 st->sb->base.id, code ? code : "unknown", m);
        }
        json_decref(j);
        return ok;
    }
    json_t *ev = json_object_get(j, "event");
    json_t *x;
    if ((x = json_object_get(ev, "start")) != NULL) {
        st->started = true;
        json_t *pid = json_object_get(x, "pid");
        if (json_is_integer(pid))
            st->pid = json_integer_value(pid);
    } else if ((x = json_object_get(ev, "data")) != NULL) {
        const char *names[] = {"stdout", "stderr", "pty"};
        for (size_t i = 0; i < 3 && ok; i++) {
            const char *b64 = json_string_value(json_object_get(x, names[i]));
            if (!b64)
                continue;
            size_t n = 0;
            uint8_t *bytes = sbx_http_base64_decode(b64, strlen(b64), &n);
            if (!bytes) {
                ok = e2b_stream_fail(st, SBX_E_PROVISION,
                                     "e2b: envd sent %s data that is not valid base64", names[i]);
                break;
            }
            Sbx__V1__Stream s =
                i == 1 ? SBX__V1__STREAM__STREAM_STDERR : SBX__V1__STREAM__STREAM_STDOUT;
            if (!e2b_emit(&st->out, s, bytes, n)) {
                st->abort_status = SBX_OK; /* the output limit, not an error */
                ok = false;
            }
            free(bytes);
        }
    } else if ((x = json_object_get(ev, "end")) != NULL) {
        st->ended = true;
        json_t *code = json_object_get(x, "exitCode");
        st->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
        const char *status = json_string_value(json_object_get(x, "status"));
        const char *perror = json_string_value(json_object_get(x, "error"));
        snprintf(st->status_text, sizeof st->status_text, "%s", status ? status : "");
        snprintf(st->proc_error, sizeof st->proc_error, "%s", perror ? perror : "");
        st->signal = status ? e2b_signal_from_status(status) : 0;
    }
    /* keepalive and unknown events are ignored (forward compatible). */
    json_decref(j);
    return ok;
}

static bool e2b_stream_body(void *arg, const uint8_t *data, size_t len)
{
    e2b_stream *st = arg;
    while (len > 0) {
        if (st->head_have < 5) {
            size_t n = 5 - st->head_have;
            if (n > len)
                n = len;
            memcpy(st->head + st->head_have, data, n);
            st->head_have += n;
            data += n;
            len -= n;
            if (st->head_have < 5)
                break;
            uint32_t plen = (uint32_t)st->head[1] << 24 | (uint32_t)st->head[2] << 16 |
                            (uint32_t)st->head[3] << 8 | (uint32_t)st->head[4];
            if (plen > E2B_MAX_ENVELOPE)
                return e2b_stream_fail(st, SBX_E_PROVISION,
                                       "e2b: envd sent an envelope of %u bytes (limit %u); "
                                       "refused",
                                       plen, (unsigned)E2B_MAX_ENVELOPE);
            st->payload_len = plen;
            st->payload_have = 0;
            free(st->payload);
            st->payload = malloc(plen + 1);
            if (!st->payload)
                return e2b_stream_fail(st, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
        }
        size_t n = st->payload_len - st->payload_have;
        if (n > len)
            n = len;
        memcpy(st->payload + st->payload_have, data, n);
        st->payload_have += n;
        data += n;
        len -= n;
        if (st->payload_have == st->payload_len) {
            bool ok = e2b_stream_envelope(st, st->head[0], st->payload, st->payload_len);
            st->head_have = 0;
            free(st->payload);
            st->payload = NULL;
            if (!ok)
                return false;
        }
    }
    return true;
}

/* Best-effort SIGKILL of a process started through envd. */
static void e2b_kill_pid(e2b_sandbox *sb, int64_t pid)
{
    if (pid <= 0)
        return;
    e2b_call c;
    if (e2b_call_init(sb, E2B_ENVD_PORT, "/process.Process/SendSignal", &c, NULL) != SBX_OK)
        return;
    e2b_call_add(&c, "Content-Type: application/json");
    e2b_call_add(&c, "Connect-Protocol-Version: 1");
    char body[128];
    snprintf(body, sizeof body, "{\"process\":{\"pid\":%lld},\"signal\":\"SIGNAL_SIGKILL\"}",
             (long long)pid);
    sbx_http_request req = {.method = "POST",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .body = body,
                            .body_len = strlen(body),
                            .idempotent = true,
                            .timeout_ms = E2B_KILL_TIMEOUT_MS};
    sbx_http_response resp;
    sbx_http_do(sb->p->http, &req, &resp, NULL);
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
}

/* The sandbox's TTL (sandbox_timeout_s, renewed by connect on attach) must outlive an
 * operation that may run longer: before such an operation the TTL is raised to cover its
 * deadline, and afterwards set back to the idle TTL from now. Returns true when raised. */
static bool e2b_ttl_cover(e2b_sandbox *sb, const sbx_exec_opts *o, sbx_error *err, sbx_status *st)
{
    int64_t ttl = sb->p->sandbox_timeout_s;
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    int64_t need_s =
        deadline > 0 ? (deadline - sbx_monotonic_ms() + 999) / 1000 : E2B_EXEC_MAX_MS / 1000;
    *st = SBX_OK;
    /* A margin of E2B_TTL_MARGIN_S so the sandbox never ends while the result is in flight. */
    if (need_s + E2B_TTL_MARGIN_S <= ttl)
        return false;
    *st = e2b_set_timeout(sb->p, sb->base.id, need_s + ttl, err);
    return *st == SBX_OK;
}

static void e2b_ttl_restore(e2b_sandbox *sb)
{
    e2b_set_timeout(sb->p, sb->base.id, sb->p->sandbox_timeout_s, NULL);
}

/* Runs argv (argv[0] is the program) with env and cwd through process.Process/Start. */
/* Long because it is one envd process.Process/Start exchange: the request body, the Connect
 * stream's envelopes (start, data, end) and the exit mapping share one parser state. */
static sbx_status e2b_process(e2b_sandbox *sb, const char *const *argv, size_t argc,
                              const e2b_kv *env_entries, size_t n_env, const char *cwd,
                              const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    e2b_provider *p = sb->p;
    if (argc == 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "e2b: empty command (no argv[0])");
    json_t *proc = json_object();
    json_object_set_new(proc, "cmd", json_string(argv[0]));
    json_t *args = json_array();
    for (size_t i = 1; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_object_set_new(proc, "args", args);
    if (n_env > 0) {
        json_t *envs = json_object();
        for (size_t i = 0; i < n_env; i++)
            json_object_set_new(envs, env_entries[i].key, json_string(env_entries[i].value));
        json_object_set_new(proc, "envs", envs);
    }
    if (cwd && *cwd)
        json_object_set_new(proc, "cwd", json_string(cwd));
    json_t *msg = json_object();
    json_object_set_new(msg, "process", proc);
    json_object_set_new(msg, "stdin", json_false());
    char *text = sbx_http_json_dump(msg);
    json_decref(msg);
    if (!text)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    size_t tlen = strlen(text);
    uint8_t *env_body = malloc(tlen + 5);
    if (!env_body) {
        free(text);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    env_body[0] = 0x00; /* one uncompressed Connect envelope */
    env_body[1] = (uint8_t)(tlen >> 24);
    env_body[2] = (uint8_t)(tlen >> 16);
    env_body[3] = (uint8_t)(tlen >> 8);
    env_body[4] = (uint8_t)tlen;
    memcpy(env_body + 5, text, tlen);
    free(text);

    e2b_call c;
    sbx_status s = e2b_call_init(sb, E2B_ENVD_PORT, "/process.Process/Start", &c, err);
    if (s != SBX_OK) {
        free(env_body);
        return s;
    }
    e2b_call_add(&c, "Content-Type: application/connect+json");
    e2b_call_add(&c, "Connect-Protocol-Version: 1");
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    if (deadline > 0) {
        int64_t left = deadline - sbx_monotonic_ms();
        if (left < 1)
            left = 1;
        /* envd kills the process itself when this passes, even if we vanish. */
        snprintf(c.timeout, sizeof c.timeout, "Connect-Timeout-Ms: %lld", (long long)left);
        e2b_call_add(&c, c.timeout);
    }
    e2b_stream st = {.sb = sb};
    e2b_output_init(&st.out, result, o);
    sbx_http_request req = {.method = "POST",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .body = env_body,
                            .body_len = tlen + 5,
                            .idempotent = false,
                            .deadline_mono_ms = deadline,
                            .timeout_ms = deadline > 0 ? 0 : E2B_EXEC_MAX_MS,
                            .cancel = o ? o->cancel : NULL,
                            .on_body = e2b_stream_body,
                            .on_body_arg = &st,
                            .abort_status = &st.abort_status};
    sbx_http_response resp;
    int64_t t0 = sbx_monotonic_us();
    s = sbx_http_do(p->http, &req, &resp, err);
    result->wall_us = (uint64_t)(sbx_monotonic_us() - t0);
    free(env_body);

    if (st.out.over_limit && st.fail == SBX_OK) {
        /* Output limit: stop the program, report what was kept. */
        e2b_kill_pid(sb, st.pid);
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT;
        result->exit_code = 0;
        result->signal = SIGKILL;
        s = SBX_OK;
    } else if (st.fail != SBX_OK) {
        s = st.fail;
        if (err)
            *err = st.fail_err;
        if (s == SBX_E_TIMEOUT) {
            e2b_kill_pid(sb, st.pid);
            result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        } else if (s == SBX_E_GONE) {
            s = e2b_maybe_gone(sb, SBX_E_PROVISION, err);
        }
    } else if (s == SBX_E_TIMEOUT) {
        e2b_kill_pid(sb, st.pid);
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        sbx_error_set(err, SBX_E_TIMEOUT,
                      "e2b: the command in sandbox %s passed its deadline and was killed",
                      sb->base.id);
    } else if (s == SBX_E_PROVISION) {
        s = e2b_maybe_gone(sb, s, err);
    } else if (s == SBX_OK && (resp.status < 200 || resp.status >= 300)) {
        s = e2b_envd_http_error(sb, &req, &resp, err);
    } else if (s == SBX_OK && !st.ended) {
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "e2b: envd's process stream in sandbox %s ended without an exit "
                          "event%s",
                          sb->base.id, st.stream_closed ? "" : " (connection closed early)");
        s = e2b_maybe_gone(sb, s, err);
    } else if (s == SBX_OK) {
        if (st.signal) {
            result->exit_code = 0;
            result->signal = st.signal;
            result->outcome = st.signal == SIGKILL && o && o->deadline_mono_ms > 0 &&
                                      sbx_monotonic_ms() >= o->deadline_mono_ms
                                  ? SBX__V1__OUTCOME__OUTCOME_TIMED_OUT
                                  : SBX__V1__OUTCOME__OUTCOME_SIGNALED;
        } else {
            e2b_set_exit(result, st.exit_code);
        }
        if (st.proc_error[0])
            sbx_result_set_data(result, "e2b.process_error", st.proc_error);
        if (st.pid > 0) {
            char pid[32];
            snprintf(pid, sizeof pid, "%lld", (long long)st.pid);
            sbx_result_set_data(result, "e2b.pid", pid);
        }
    }
    free(st.payload);
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
    return s;
}

/* Wraps argv so stdin bytes are fed through a pipe: envd's Start has no request body for
 * input (SendInput would need a second concurrent call). The bytes travel base64-encoded in
 * one argument; "$@" keeps argv exact. */
static sbx_status e2b_with_stdin(const ProtobufCBinaryData *in, const char *const *argv,
                                 size_t argc, const char *shell, char ***out_argv, size_t *out_argc,
                                 sbx_error *err)
{
    if (in->len > E2B_MAX_STDIN_BYTES)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "e2b: stdin of %zu bytes is larger than the %u bytes this provider "
                             "can pass; write the data to a file with write_file instead",
                             in->len, (unsigned)E2B_MAX_STDIN_BYTES);
    char *b64 = sbx_http_base64_encode(in->data, in->len);
    if (!b64)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    size_t n = 5 + (shell ? 1 : argc);
    char **v = calloc(n + 1, sizeof *v);
    if (!v) {
        free(b64);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    size_t k = 0;
    v[k++] = strdup("/bin/sh");
    v[k++] = strdup("-c");
    v[k++] = strdup(shell ? "d=$1; shift; printf %s \"$d\" | base64 -d | /bin/sh -c \"$1\""
                          : "d=$1; shift; printf %s \"$d\" | base64 -d | \"$@\"");
    v[k++] = strdup("sh");
    v[k++] = b64;
    if (shell)
        v[k++] = strdup(shell);
    else
        for (size_t i = 0; i < argc; i++)
            v[k++] = strdup(argv[i]);
    for (size_t i = 0; i < k; i++)
        if (!v[i]) {
            for (size_t j = 0; j < k; j++)
                free(v[j]);
            free(v);
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
        }
    *out_argv = v;
    *out_argc = k;
    return SBX_OK;
}

static void e2b_free_argv(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static sbx_status e2b_run_argv_or_shell(e2b_sandbox *sb, const char *const *argv, size_t argc,
                                        const char *shell, const e2b_kv *env, size_t n_env,
                                        const char *cwd, const ProtobufCBinaryData *in,
                                        const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    if (in && in->len > 0) {
        char **v = NULL;
        size_t n = 0;
        sbx_status s = e2b_with_stdin(in, argv, argc, shell, &v, &n, err);
        if (s != SBX_OK)
            return s;
        s = e2b_process(sb, (const char *const *)v, n, env, n_env, cwd, o, result, err);
        e2b_free_argv(v, n);
        return s;
    }
    if (shell) {
        const char *v[] = {"/bin/sh", "-c", shell};
        return e2b_process(sb, v, 3, env, n_env, cwd, o, result, err);
    }
    return e2b_process(sb, argv, argc, env, n_env, cwd, o, result, err);
}

static sbx_status e2b_run_command_inner(sbx_sandbox *sbb, const Sbx__V1__RunCommand *op,
                                        const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    bool has_shell = op->shell && op->shell[0];
    if (has_shell == (op->n_argv > 0))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "e2b: run_command needs exactly one of argv or shell");
    e2b_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (e2b_kv){op->env[i]->key, op->env[i]->value};
    sbx_status s = e2b_run_argv_or_shell(sb, (const char *const *)op->argv, op->n_argv,
                                         has_shell ? op->shell : NULL, env, op->n_env, op->cwd,
                                         &op->stdin, o, result, err);
    free(env);
    return s;
}

/* ---- stateful python through the code interpreter ------------------------------------------ */

typedef struct e2b_lines {
    e2b_sandbox *sb;
    e2b_output out;
    char *line;
    size_t len, cap;
    bool had_error;
    int exit_code; /* 1 after an exception; SystemExit's code for sys.exit() */
    char *value;
    sbx_status fail;
    sbx_error fail_err;
    sbx_status abort_status;
} e2b_lines;

static bool e2b_line_fail(e2b_lines *ls, sbx_status s, const char *msg)
{
    sbx_error_set(&ls->fail_err, s, "%s", msg);
    ls->fail = s;
    ls->abort_status = s;
    return false;
}

static bool e2b_jupyter_line(e2b_lines *ls, const char *line, size_t len)
{
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
        len--;
    if (len == 0)
        return true;
    json_t *j = NULL;
    sbx_error perr;
    if (sbx_http_parse_json(ls->sb->p->http, "code interpreter output", (const uint8_t *)line, len,
                            &j, &perr) != SBX_OK)
        return e2b_line_fail(ls, SBX_E_PROVISION, perr.message);
    const char *type = json_string_value(json_object_get(j, "type"));
    bool ok = true;
    if (!type) {
        /* ignore: not one of the documented output objects */
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        const char *text = json_string_value(json_object_get(j, "text"));
        if (text)
            ok = e2b_emit(&ls->out,
                          type[3] == 'o' ? SBX__V1__STREAM__STREAM_STDOUT
                                         : SBX__V1__STREAM__STREAM_STDERR,
                          (const uint8_t *)text, strlen(text));
        if (!ok)
            ls->abort_status = SBX_OK;
    } else if (strcmp(type, "result") == 0) {
        const char *text = json_string_value(json_object_get(j, "text"));
        if (json_is_true(json_object_get(j, "is_main_result")) && text) {
            free(ls->value);
            ls->value = strdup(text);
        }
    } else if (strcmp(type, "error") == 0) {
        ls->had_error = true;
        const char *name = json_string_value(json_object_get(j, "name"));
        const char *value = json_string_value(json_object_get(j, "value"));
        const char *tb = json_string_value(json_object_get(j, "traceback"));
        ls->exit_code = 1;
        if (name && strcmp(name, "SystemExit") == 0) {
            /* sys.exit(N) in a kernel surfaces as a SystemExit error: it is an exit status,
             * like `python -c` would give (None or empty: 0; a non-number: 1). */
            char *end = NULL;
            long code = value ? strtol(value, &end, 10) : 0;
            if (!value || !*value || strcmp(value, "None") == 0)
                ls->exit_code = 0;
            else if (end && *end == 0)
                ls->exit_code = (int)(code & 255);
            json_decref(j);
            return true;
        }
        char head[1024];
        snprintf(head, sizeof head, "%s: %s\n", name ? name : "Error", value ? value : "");
        if (tb && *tb) {
            ok =
                e2b_emit(&ls->out, SBX__V1__STREAM__STREAM_STDERR, (const uint8_t *)tb, strlen(tb));
            if (ok && tb[strlen(tb) - 1] != '\n')
                ok = e2b_emit(&ls->out, SBX__V1__STREAM__STREAM_STDERR, (const uint8_t *)"\n", 1);
        } else {
            ok = e2b_emit(&ls->out, SBX__V1__STREAM__STREAM_STDERR, (const uint8_t *)head,
                          strlen(head));
        }
        if (!ok)
            ls->abort_status = SBX_OK;
    }
    json_decref(j);
    return ok;
}

static bool e2b_lines_body(void *arg, const uint8_t *data, size_t len)
{
    e2b_lines *ls = arg;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n') {
            if (!e2b_jupyter_line(ls, ls->line ? ls->line : "", ls->len))
                return false;
            ls->len = 0;
            continue;
        }
        if (ls->len + 1 >= ls->cap) {
            if (ls->cap >= E2B_MAX_LINE)
                return e2b_line_fail(ls, SBX_E_PROVISION,
                                     "e2b: the code interpreter sent a line longer than 8 MiB; "
                                     "refused");
            size_t cap = ls->cap ? ls->cap * 2 : 4096;
            char *nl = realloc(ls->line, cap);
            if (!nl)
                return e2b_line_fail(ls, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
            ls->line = nl;
            ls->cap = cap;
        }
        ls->line[ls->len++] = (char)data[i];
    }
    return true;
}

/* Interrupts the code interpreter's kernel after a deadline or output limit: SIGINT raises
 * KeyboardInterrupt in the running cell and keeps the kernel's state, like Jupyter's interrupt
 * button. The template runs the kernel as an `ipykernel` process (guess: verified against the
 * fake only); best effort, bounded by E2B_KILL_TIMEOUT_MS. */
static void e2b_interrupt_kernel(e2b_sandbox *sb)
{
    const char *argv[] = {"pkill", "-INT", "-f", "ipykernel"};
    sbx_exec_opts ko = {.deadline_mono_ms = sbx_monotonic_ms() + E2B_KILL_TIMEOUT_MS};
    sbx_result *tmp = sbx_result_new();
    if (!tmp)
        return;
    e2b_process(sb, argv, 4, NULL, 0, NULL, &ko, tmp, NULL);
    sbx_message_free(&tmp->base);
}

static sbx_status e2b_jupyter(e2b_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                              sbx_result *result, sbx_error *err)
{
    if (op->stdin.len > 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "e2b: stdin is not supported for stateful python (the code "
                             "interpreter has no input stream); read the data from a file");
    json_t *body = json_object();
    if (op->cwd && *op->cwd) {
        /* /execute has no cwd: change directory first (a JSON string is a valid Python
         * string literal). This persists in the kernel like any os.chdir would. */
        json_t *q = json_string(op->cwd);
        char *lit = json_dumps(q, JSON_ENCODE_ANY);
        json_decref(q);
        char *code = NULL;
        if (lit && asprintf(&code, "__import__('os').chdir(%s)\n%s", lit, op->code) >= 0) {
            json_object_set_new(body, "code", json_string(code));
            free(code);
        }
        free(lit);
    } else {
        json_object_set_new(body, "code", json_string(op->code));
    }
    json_object_set_new(body, "language", json_string("python"));
    if (op->n_env > 0) {
        json_t *env = json_object();
        for (size_t i = 0; i < op->n_env; i++)
            json_object_set_new(env, op->env[i]->key, json_string(op->env[i]->value));
        json_object_set_new(body, "env_vars", env);
    }
    char *text = sbx_http_json_dump(body);
    json_decref(body);
    if (!text)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    e2b_call c;
    sbx_status s = e2b_call_init(sb, E2B_JUPYTER_PORT, "/execute", &c, err);
    if (s != SBX_OK) {
        free(text);
        return s;
    }
    e2b_call_add(&c, "Content-Type: application/json");
    e2b_lines ls = {.sb = sb};
    e2b_output_init(&ls.out, result, o);
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    sbx_http_request req = {.method = "POST",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .body = text,
                            .body_len = strlen(text),
                            .idempotent = false,
                            .deadline_mono_ms = deadline,
                            .timeout_ms = deadline > 0 ? 0 : E2B_EXEC_MAX_MS,
                            .cancel = o ? o->cancel : NULL,
                            .on_body = e2b_lines_body,
                            .on_body_arg = &ls,
                            .abort_status = &ls.abort_status};
    sbx_http_response resp;
    int64_t t0 = sbx_monotonic_us();
    s = sbx_http_do(sb->p->http, &req, &resp, err);
    result->wall_us = (uint64_t)(sbx_monotonic_us() - t0);
    free(text);
    if (s == SBX_OK && ls.len > 0 && ls.fail == SBX_OK && resp.status >= 200 && resp.status < 300)
        e2b_jupyter_line(&ls, ls.line, ls.len); /* a last line without newline */
    if (ls.out.over_limit && ls.fail == SBX_OK) {
        e2b_interrupt_kernel(sb);
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT;
        s = SBX_OK;
    } else if (ls.fail != SBX_OK) {
        s = ls.fail;
        if (err)
            *err = ls.fail_err;
    } else if (s == SBX_E_TIMEOUT) {
        e2b_interrupt_kernel(sb);
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        sbx_error_set(err, SBX_E_TIMEOUT,
                      "e2b: the code in sandbox %s passed its deadline; the kernel was "
                      "interrupted (its variables are kept)",
                      sb->base.id);
    } else if (s == SBX_E_PROVISION) {
        s = e2b_maybe_gone(sb, s, err);
    } else if (s == SBX_OK && (resp.status < 200 || resp.status >= 300)) {
        s = e2b_envd_http_error(sb, &req, &resp, err);
    } else if (s == SBX_OK) {
        e2b_set_exit(result, ls.had_error ? ls.exit_code : 0);
        if (ls.value)
            sbx_set_string(&result->value, ls.value);
    }
    free(ls.line);
    free(ls.value);
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
    return s;
}

static sbx_status e2b_run_code_inner(sbx_sandbox *sbb, const Sbx__V1__RunCode *op,
                                     const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    const char *lang = op->language && *op->language ? op->language : "python";
    bool python = strcmp(lang, "python") == 0 || strcmp(lang, "python3") == 0;
    if (python && sb->p->code_interpreter)
        return e2b_jupyter(sb, op, o, result, err);
    const char *argv[3];
    if (python) {
        argv[0] = "python3";
    } else if (strcmp(lang, "bash") == 0) {
        argv[0] = "/bin/bash";
    } else {
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "e2b: language '%s' is not offered; use python or bash", lang);
    }
    argv[1] = "-c";
    argv[2] = op->code;
    e2b_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (e2b_kv){op->env[i]->key, op->env[i]->value};
    sbx_status s = e2b_run_argv_or_shell(sb, argv, 3, NULL, env, op->n_env, op->cwd, &op->stdin, o,
                                         result, err);
    free(env);
    return s;
}

static sbx_status e2b_install_packages_inner(sbx_sandbox *sbb, const Sbx__V1__InstallPackages *op,
                                             const sbx_exec_opts *o, sbx_result *result,
                                             sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    const char **argv = NULL;
    size_t argc = 0;
    sbx_status s = sbx_package_argv("e2b", op, &argv, &argc, err);
    if (s != SBX_OK)
        return s;
    s = e2b_process(sb, argv, argc, NULL, 0, NULL, o, result, err);
    free(argv);
    return s;
}

/* ---- files --------------------------------------------------------------------------------- */

static sbx_status e2b_files_url(e2b_sandbox *sb, const char *path, e2b_call *c, sbx_error *err)
{
    memset(c, 0, sizeof *c); /* empty, not garbage, on the failures before e2b_call_init */
    if (!path || path[0] == 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "e2b: a file path is required");
    char *ep = sbx_http_url_escape(path);
    char *eu = sbx_http_url_escape(sb->p->user);
    if (!ep || !eu) {
        free(ep);
        free(eu);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    char *rel = NULL;
    int n = asprintf(&rel, "/files?path=%s&username=%s", ep, eu);
    free(ep);
    free(eu);
    if (n < 0)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    sbx_status s = e2b_call_init(sb, E2B_ENVD_PORT, rel, c, err);
    free(rel);
    return s;
}

static int64_t e2b_file_deadline(const sbx_exec_opts *o)
{
    return o ? o->deadline_mono_ms : 0;
}

sbx_status e2b_write_file(sbx_sandbox *sbb, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                          sbx_result *result, sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    if (op->content.len > SBX_HTTP_MAX_FILE_BYTES)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "e2b: %s: %zu bytes exceed the %u-byte file limit", op->path,
                             op->content.len, (unsigned)SBX_HTTP_MAX_FILE_BYTES);
    e2b_call c;
    sbx_status s = e2b_files_url(sb, op->path, &c, err);
    if (s != SBX_OK)
        return s;
    e2b_call_add(&c, "Content-Type: application/octet-stream");
    sbx_http_request req = {.method = "POST",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .body = op->content.data ? op->content.data : (void *)"",
                            .body_len = op->content.len,
                            .idempotent = true, /* overwrite */
                            .deadline_mono_ms = e2b_file_deadline(o),
                            .cancel = o ? o->cancel : NULL};
    sbx_http_response resp;
    s = sbx_http_do(sb->p->http, &req, &resp, err);
    if (s == SBX_OK && (resp.status < 200 || resp.status >= 300)) {
        if (resp.status == 400)
            s = sbx_http_status_error(sb->p->http, &req, &resp, SBX_E_INVALID_ARGUMENT, err);
        else
            s = e2b_envd_http_error(sb, &req, &resp, err);
    }
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
    if (s == SBX_E_PROVISION)
        s = e2b_maybe_gone(sb, s, err);
    if (s != SBX_OK)
        return s;
    uint32_t mode = op->mode ? op->mode : 0644;
    if (mode != 0644) {
        /* envd's upload has no mode: set it with chmod (argv, no shell quoting involved). */
        char octal[16];
        snprintf(octal, sizeof octal, "%o", (unsigned)(mode & 07777));
        const char *argv[] = {"chmod", octal, op->path};
        sbx_result *tmp = sbx_result_new();
        if (!tmp)
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
        s = e2b_process(sb, argv, 3, NULL, 0, NULL, o, tmp, err);
        if (s == SBX_OK && tmp->exit_code != 0)
            s = sbx_error_set(err, SBX_E_PROVISION, "e2b: chmod %s %s failed: %.*s", octal,
                              op->path, (int)(tmp->stderr.len > 300 ? 300 : tmp->stderr.len),
                              tmp->stderr.data ? (const char *)tmp->stderr.data : "");
        sbx_message_free(&tmp->base);
    }
    (void)result;
    return s;
}

sbx_status e2b_read_file(sbx_sandbox *sbb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                         sbx_result *result, sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    e2b_call c;
    sbx_status s = e2b_files_url(sb, op->path, &c, err);
    if (s != SBX_OK)
        return s;
    e2b_call_add(&c, "Accept-Encoding: identity");
    sbx_http_request req = {.method = "GET",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .idempotent = true,
                            .deadline_mono_ms = e2b_file_deadline(o),
                            .cancel = o ? o->cancel : NULL};
    sbx_http_response resp;
    s = sbx_http_do(sb->p->http, &req, &resp, err);
    if (s == SBX_OK && resp.status == 404) {
        s = e2b_maybe_gone(sb, SBX_E_INVALID_ARGUMENT, err);
        if (s == SBX_E_INVALID_ARGUMENT)
            sbx_error_set(err, s, "e2b: %s: no such file in sandbox %s", op->path, sb->base.id);
    } else if (s == SBX_OK && resp.status == 400) {
        s = sbx_http_status_error(sb->p->http, &req, &resp, SBX_E_INVALID_ARGUMENT, err);
    } else if (s == SBX_OK && (resp.status < 200 || resp.status >= 300)) {
        s = e2b_envd_http_error(sb, &req, &resp, err);
    } else if (s == SBX_E_PROVISION) {
        s = e2b_maybe_gone(sb, s, err);
    }
    if (s == SBX_OK) {
        size_t off = op->offset > resp.body_len ? resp.body_len : (size_t)op->offset;
        size_t n = resp.body_len - off;
        if (op->max_bytes > 0 && op->max_bytes < n)
            n = (size_t)op->max_bytes;
        sbx_file *f = sbx_file_new();
        if (!f || !sbx_set_string(&f->path, op->path) ||
            !sbx_set_bytes(&f->content, resp.body ? resp.body + off : NULL, n)) {
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
        } else {
            f->size = resp.body_len;
            f->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
            sbx_result_add_file(result, f);
        }
    }
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
    return s;
}

sbx_status e2b_list_files(sbx_sandbox *sbb, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                          sbx_result *result, sbx_error *err)
{
    e2b_sandbox *sb = (e2b_sandbox *)sbb;
    const char *dir = op->path && *op->path ? op->path : ".";
    e2b_call c;
    sbx_status s = e2b_call_init(sb, E2B_ENVD_PORT, "/filesystem.Filesystem/ListDir", &c, err);
    if (s != SBX_OK)
        return s;
    e2b_call_add(&c, "Content-Type: application/json");
    e2b_call_add(&c, "Connect-Protocol-Version: 1");
    json_t *body = json_object();
    json_object_set_new(body, "path", json_string(dir));
    char *text = sbx_http_json_dump(body);
    json_decref(body);
    if (!text)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    sbx_http_request req = {.method = "POST",
                            .url = c.url,
                            .headers = c.headers,
                            .n_headers = c.n,
                            .body = text,
                            .body_len = strlen(text),
                            .idempotent = true,
                            .deadline_mono_ms = e2b_file_deadline(o),
                            .cancel = o ? o->cancel : NULL};
    sbx_http_response resp;
    s = sbx_http_do(sb->p->http, &req, &resp, err);
    free(text);
    json_t *j = NULL;
    if (s == SBX_OK && resp.status >= 400 && resp.status < 500 && resp.status != 401 &&
        resp.status != 429) {
        /* Connect unary errors: {"code":"not_found","message":...}. */
        s = sbx_http_status_error(sb->p->http, &req, &resp, SBX_E_INVALID_ARGUMENT, err);
        if (resp.status == 404)
            s = e2b_maybe_gone(sb, s, err);
    } else if (s == SBX_OK && (resp.status < 200 || resp.status >= 300)) {
        s = e2b_envd_http_error(sb, &req, &resp, err);
    } else if (s == SBX_E_PROVISION) {
        s = e2b_maybe_gone(sb, s, err);
    } else if (s == SBX_OK) {
        s = sbx_http_response_json(sb->p->http, &req, &resp, &j, err);
    }
    json_t *entries = j ? json_object_get(j, "entries") : NULL;
    size_t i;
    json_t *e;
    json_array_foreach(entries, i, e)
    {
        if (s != SBX_OK)
            break;
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *path = json_string_value(json_object_get(e, "path"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!name)
            continue;
        sbx_file *f = sbx_file_new();
        char *full = NULL;
        if (!path && asprintf(&full, "%s/%s", dir, name) < 0)
            full = NULL;
        if (!f || !sbx_set_string(&f->path, path ? path : full)) {
            free(full);
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
            break;
        }
        free(full);
        f->kind = !type ? SBX__V1__FILE_KIND__FILE_KIND_UNSPECIFIED
                  : strcmp(type, "FILE_TYPE_DIRECTORY") == 0
                      ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
                  : strcmp(type, "FILE_TYPE_FILE") == 0 ? SBX__V1__FILE_KIND__FILE_KIND_REGULAR
                                                        : SBX__V1__FILE_KIND__FILE_KIND_OTHER;
        /* proto3 JSON writes int64 as a string; accept a number too. */
        json_t *size = json_object_get(e, "size");
        if (json_is_integer(size) && json_integer_value(size) > 0)
            f->size = (uint64_t)json_integer_value(size);
        else if (json_is_string(size))
            f->size = strtoull(json_string_value(size), NULL, 10);
        json_t *mode = json_object_get(e, "mode");
        if (json_is_integer(mode))
            f->mode = (uint32_t)json_integer_value(mode) & 07777;
        sbx_result_add_file(result, f);
    }
    json_decref(j);
    sbx_http_response_clear(&resp);
    e2b_call_wipe(&c);
    return s;
}

/* ---- public operations: keep the sandbox alive for the whole operation --------------------- */

#define E2B_WITH_TTL(call)                                                                         \
    do {                                                                                           \
        e2b_sandbox *sb_ = (e2b_sandbox *)sbb;                                                     \
        sbx_status ts_;                                                                            \
        bool raised_ = e2b_ttl_cover(sb_, o, err, &ts_);                                           \
        if (ts_ != SBX_OK)                                                                         \
            return ts_;                                                                            \
        sbx_status s_ = (call);                                                                    \
        if (raised_ && s_ != SBX_E_GONE)                                                           \
            e2b_ttl_restore(sb_);                                                                  \
        return s_;                                                                                 \
    } while (0)

sbx_status e2b_run_command(sbx_sandbox *sbb, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                           sbx_result *result, sbx_error *err)
{
    E2B_WITH_TTL(e2b_run_command_inner(sbb, op, o, result, err));
}

sbx_status e2b_run_code(sbx_sandbox *sbb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                        sbx_result *result, sbx_error *err)
{
    E2B_WITH_TTL(e2b_run_code_inner(sbb, op, o, result, err));
}

sbx_status e2b_install_packages(sbx_sandbox *sbb, const Sbx__V1__InstallPackages *op,
                                const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    E2B_WITH_TTL(e2b_install_packages_inner(sbb, op, o, result, err));
}
