/* fake_e2b.c - the fake E2B control plane, envd and code interpreter (fake_e2b.h). Implements
 * the documented behaviour only (reference/cloud-apis.md §1); anything it does not know it
 * answers the way E2B does for an invalid request. It never runs a program on the host.
 */
#include "fakes/fake_e2b.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fakes/fake_interp.h"

#define FE_MAX_SANDBOXES 256
#define FE_ENVD_PORT "49983"
#define FE_JUPYTER_PORT "49999"

typedef struct fe_sandbox {
    char id[64];
    char token[64];
    char template_id[128];
    json_t *metadata;
    json_t *network;
    json_t *env;
    long timeout_s;
    bool alive;
    bool paused; /* POST /pause: envd is unreachable until a connect resumes it (201) */
    fake_fs *fs;
    fake_pyvars *py;
} fe_sandbox;

struct fake_e2b {
    fake_http *http;
    char *api_key;
    pthread_mutex_t lock; /* guards the sandboxes */
    fe_sandbox sb[FE_MAX_SANDBOXES];
    size_t n;
    unsigned next_id;
    unsigned next_pid;
    size_t kills;
    char next_id_override[64]; /* fake_e2b_next_id: the next create answers this id */
    size_t list_page;          /* fake_e2b_list_page: most sandboxes per list page (0 = limit) */
    size_t token_pad;          /* fake_e2b_list_token_pad: bytes added to each X-Next-Token */
};

static fe_sandbox *fe_find(fake_e2b *f, const char *id)
{
    for (size_t i = 0; id && i < f->n; i++)
        if (f->sb[i].alive && strcmp(f->sb[i].id, id) == 0)
            return &f->sb[i];
    return NULL;
}

static void fe_error(fake_response *resp, int status, const char *msg)
{
    json_t *j = json_pack("{s:i,s:s}", "code", status, "message", msg);
    char *t = json_dumps(j, JSON_COMPACT);
    fake_response_json(resp, status, "%s", t);
    free(t);
    json_decref(j);
}

static void fe_json(fake_response *resp, int status, json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT);
    fake_response_json(resp, status, "%s", t);
    free(t);
    json_decref(j);
}

/* Control plane auth: X-API-Key (case-insensitive header name). */
static bool fe_auth(fake_e2b *f, const fake_request *req, fake_response *resp)
{
    const char *k = fake_request_header(req, "X-API-Key");
    if (!k || strcmp(k, f->api_key) != 0) {
        fe_error(resp, 401, "Invalid API key");
        return false;
    }
    return true;
}

static json_t *fe_body(const fake_request *req, fake_response *resp)
{
    json_error_t e;
    json_t *j = json_loadb((const char *)req->body, req->body_len, 0, &e);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        fe_error(resp, 400, "request body is not a JSON object");
        return NULL;
    }
    return j;
}

static bool fe_ip_or_cidr(const char *s)
{
    if (!*s)
        return false;
    for (const char *p = s; *p; p++)
        if (!(isdigit((unsigned char)*p) || *p == '.' || *p == '/'))
            return false;
    return true;
}

static bool fe_network_ok(json_t *net, fake_response *resp)
{
    if (!net)
        return true;
    if (!json_is_object(net)) {
        fe_error(resp, 400, "network must be an object");
        return false;
    }
    json_t *deny = json_object_get(net, "denyOut");
    size_t i;
    json_t *e;
    json_array_foreach(deny, i, e)
    {
        if (!json_is_string(e) || !fe_ip_or_cidr(json_string_value(e))) {
            fe_error(resp, 400, "denyOut accepts only IP addresses and CIDR blocks");
            return false;
        }
    }
    return true;
}

static json_t *fe_sandbox_json(const fe_sandbox *s)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:n}", "templateID", s->template_id, "sandboxID", s->id,
                     "clientID", "fake-client", "envdVersion", "0.2.0", "envdAccessToken", s->token,
                     "domain");
}

static void fe_create(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    json_t *b = fe_body(req, resp);
    if (!b)
        return;
    const char *tpl = json_string_value(json_object_get(b, "templateID"));
    if (!tpl) {
        fe_error(resp, 400, "templateID is required");
    } else if (strcmp(tpl, "base") != 0 && strcmp(tpl, "code-interpreter-v1") != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "template '%s' not found", tpl);
        fe_error(resp, 400, msg);
    } else if (json_object_get(b, "timeout") && !json_is_integer(json_object_get(b, "timeout"))) {
        fe_error(resp, 400, "timeout must be an integer");
    } else if (!fe_network_ok(json_object_get(b, "network"), resp)) {
        /* answered */
    } else {
        pthread_mutex_lock(&f->lock);
        if (f->n >= FE_MAX_SANDBOXES) {
            pthread_mutex_unlock(&f->lock);
            fe_error(resp, 429, "concurrent sandbox limit reached");
            json_decref(b);
            return;
        }
        fe_sandbox *s = &f->sb[f->n++];
        memset(s, 0, sizeof *s);
        snprintf(s->id, sizeof s->id, "ifake%04u", ++f->next_id);
        if (f->next_id_override[0] != '\0') {
            snprintf(s->id, sizeof s->id, "%s", f->next_id_override);
            f->next_id_override[0] = '\0';
        }
        snprintf(s->token, sizeof s->token, "envd-token-%08u-secret", f->next_id * 7919u);
        snprintf(s->template_id, sizeof s->template_id, "%s", tpl);
        json_t *t = json_object_get(b, "timeout");
        s->timeout_s = t ? (long)json_integer_value(t) : 15;
        s->metadata = json_incref(json_object_get(b, "metadata"));
        s->network = json_incref(json_object_get(b, "network"));
        s->env = json_incref(json_object_get(b, "envVars"));
        s->alive = true;
        s->fs = fake_fs_new();
        s->py = fake_pyvars_new();
        json_t *out = fe_sandbox_json(s);
        pthread_mutex_unlock(&f->lock);
        fe_json(resp, 201, out);
    }
    json_decref(b);
}

static void fe_not_found(fake_response *resp, const char *id)
{
    char msg[256];
    snprintf(msg, sizeof msg, "sandbox \"%s\" doesn't exist or you don't have access to it", id);
    fe_error(resp, 404, msg);
}

static void fe_get(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    if (!s) {
        pthread_mutex_unlock(&f->lock);
        fe_not_found(resp, req->params[0]);
        return;
    }
    json_t *j = fe_sandbox_json(s);
    json_object_del(j, "envdAccessToken");
    json_object_set_new(j, "state", json_string(s->paused ? "paused" : "running"));
    json_object_set_new(j, "cpuCount", json_integer(2));
    json_object_set_new(j, "memoryMB", json_integer(512));
    json_object_set_new(j, "diskSizeMB", json_integer(10240));
    json_object_set_new(j, "startedAt", json_string("2026-01-01T00:00:00Z"));
    json_object_set_new(j, "endAt", json_string("2026-01-01T00:05:00Z"));
    json_object_set(j, "metadata", s->metadata ? s->metadata : json_object());
    if (s->network)
        json_object_set(j, "network", s->network);
    pthread_mutex_unlock(&f->lock);
    fe_json(resp, 200, j);
}

/* Decodes %XX escapes of s (n bytes) into out (cap >= n + 1); false on a bad escape. */
static bool fe_unescape(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) ||
                !isxdigit((unsigned char)s[i + 2]))
                return false;
            char hex[3] = {s[i + 1], s[i + 2], 0};
            out[o++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            out[o++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    out[o] = 0;
    return true;
}

/* Whether a sandbox's metadata holds every k=v of the `metadata` query ("k=v&k=v", each key and
 * value URL-encoded; reference §1.1). -1: the query is malformed. */
static int fe_metadata_match(const json_t *meta, const char *query)
{
    for (const char *p = query; *p;) {
        size_t n = strcspn(p, "&");
        const char *eq = memchr(p, '=', n);
        if (eq == NULL || n > 1024)
            return -1;
        char k[1025], v[1025];
        if (!fe_unescape(p, (size_t)(eq - p), k) ||
            !fe_unescape(eq + 1, n - (size_t)(eq - p) - 1, v))
            return -1;
        const char *have = json_string_value(json_object_get(meta, k));
        if (have == NULL || strcmp(have, v) != 0)
            return 0;
        p += n + (p[n] == '&');
    }
    return 1;
}

/* GET /v2/sandboxes: [ListedSandbox] of the sandboxes matching `metadata` and `state`, `limit`
 * (1..100, default 100) at a time from `nextToken`, with X-Next-Token when more follow. */
static void fe_list_sandboxes(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    const char *meta_q = fake_request_query(req, "metadata");
    const char *state_q = fake_request_query(req, "state");
    const char *limit_q = fake_request_query(req, "limit");
    const char *tok = fake_request_query(req, "nextToken");
    long limit = limit_q ? strtol(limit_q, NULL, 10) : 100;
    size_t from = 0;
    if (limit < 1 || limit > 100) {
        fe_error(resp, 400, "limit must be between 1 and 100");
        return;
    }
    if (tok != NULL && sscanf(tok, "fe-next-%zu", &from) != 1) {
        fe_error(resp, 400, "invalid nextToken");
        return;
    }
    size_t page = f->list_page != 0 && f->list_page < (size_t)limit ? f->list_page : (size_t)limit;
    json_t *out = json_array();
    pthread_mutex_lock(&f->lock);
    size_t i = from;
    for (; i < f->n && json_array_size(out) < page; i++) {
        fe_sandbox *s = &f->sb[i];
        const char *st = s->paused ? "paused" : "running";
        int m = meta_q ? fe_metadata_match(s->metadata, meta_q) : 1;
        if (m < 0) {
            pthread_mutex_unlock(&f->lock);
            json_decref(out);
            fe_error(resp, 400, "invalid metadata query");
            return;
        }
        if (!s->alive || m == 0 || (state_q && strstr(state_q, st) == NULL))
            continue;
        json_t *j = fe_sandbox_json(s);
        json_object_del(j, "envdAccessToken");
        json_object_set_new(j, "state", json_string(st));
        json_object_set_new(j, "startedAt", json_string("2026-01-01T00:00:00Z"));
        json_object_set(j, "metadata", s->metadata ? s->metadata : json_object());
        json_array_append_new(out, j);
    }
    bool more = false;
    for (size_t k = i; k < f->n && !more; k++)
        more = f->sb[k].alive;
    size_t pad = f->token_pad;
    pthread_mutex_unlock(&f->lock);
    if (more) {
        /* the token's number is read back by sscanf, so padding after it is ignored */
        char *next = malloc(32 + pad);
        int n = snprintf(next, 32, "fe-next-%zu", i);
        memset(next + n, 'p', pad);
        next[(size_t)n + pad] = '\0';
        fake_response_header(resp, "X-Next-Token", next);
        free(next);
    }
    fe_json(resp, 200, out);
}

static void fe_connect(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    json_t *b = fe_body(req, resp);
    if (!b)
        return;
    if (!json_is_integer(json_object_get(b, "timeout"))) {
        fe_error(resp, 400, "timeout is required");
        json_decref(b);
        return;
    }
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    json_t *out = NULL;
    bool resumed = false;
    if (s) {
        s->timeout_s = (long)json_integer_value(json_object_get(b, "timeout"));
        resumed = s->paused; /* connect resumes a paused sandbox: 201 instead of 200 */
        s->paused = false;
        out = fe_sandbox_json(s);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fe_json(resp, resumed ? 201 : 200, out);
    else
        fe_not_found(resp, req->params[0]);
    json_decref(b);
}

static void fe_timeout(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    json_t *b = fe_body(req, resp);
    if (!b)
        return;
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    if (s)
        s->timeout_s = (long)json_integer_value(json_object_get(b, "timeout"));
    pthread_mutex_unlock(&f->lock);
    if (s)
        fake_response_status(resp, 204);
    else
        fe_not_found(resp, req->params[0]);
    json_decref(b);
}

static void fe_network(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    json_t *b = fe_body(req, resp);
    if (!b)
        return;
    if (!fe_network_ok(b, resp)) {
        json_decref(b);
        return;
    }
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    if (s) {
        json_decref(s->network);
        s->network = json_incref(b); /* replace semantics: omitted fields are cleared */
    }
    pthread_mutex_unlock(&f->lock);
    if (s)
        fake_response_status(resp, 204);
    else
        fe_not_found(resp, req->params[0]);
    json_decref(b);
}

static void fe_sandbox_release(fe_sandbox *s)
{
    s->alive = false;
    json_decref(s->metadata);
    json_decref(s->network);
    json_decref(s->env);
    s->metadata = s->network = s->env = NULL;
    fake_fs_free(s->fs);
    fake_pyvars_free(s->py);
    s->fs = NULL;
    s->py = NULL;
}

/* POST /sandboxes/{id}/pause: 204; 404 unknown; 409 when it is already paused. */
static void fe_pause(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    bool was = s != NULL && s->paused;
    if (s != NULL)
        s->paused = true;
    pthread_mutex_unlock(&f->lock);
    if (s == NULL)
        fe_not_found(resp, req->params[0]);
    else if (was)
        fe_error(resp, 409, "sandbox is already paused");
    else
        fake_response_status(resp, 204);
}

static void fe_kill(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    if (!fe_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, req->params[0]);
    if (s)
        fe_sandbox_release(s);
    pthread_mutex_unlock(&f->lock);
    if (s)
        fake_response_status(resp, 204);
    else
        fe_not_found(resp, req->params[0]);
}

/* ---- envd ---------------------------------------------------------------------------------- */

/* Routes an in-sandbox call: the sandbox must exist (else the proxy's 502), the port must be
 * the service's, and the envd access token must match. Returns the sandbox locked. */
static fe_sandbox *fe_route(fake_e2b *f, const fake_request *req, fake_response *resp,
                            const char *port)
{
    const char *id = fake_request_header(req, "E2b-Sandbox-Id");
    const char *p = fake_request_header(req, "E2b-Sandbox-Port");
    if (!id || !p) {
        fe_error(resp, 400, "missing E2b-Sandbox-Id or E2b-Sandbox-Port header");
        return NULL;
    }
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, id);
    if (!s) {
        pthread_mutex_unlock(&f->lock);
        char msg[256];
        snprintf(msg, sizeof msg, "The sandbox %s was not found", id);
        fe_error(resp, 502, msg);
        return NULL;
    }
    if (s->paused) { /* its VM is a snapshot: nothing answers until a connect resumes it */
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 502, "The sandbox is paused");
        return NULL;
    }
    if (strcmp(p, port) != 0) {
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 502, "The sandbox is running but port is not open");
        return NULL;
    }
    const char *tok = fake_request_header(req, "X-Access-Token");
    if (!tok || strcmp(tok, s->token) != 0) {
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 401, "unauthorized access, please provide a valid access token");
        return NULL;
    }
    return s;
}

static void fe_envelope(fake_response *resp, uint8_t flags, json_t *j, int delay_ms)
{
    char *t = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t n = strlen(t);
    uint8_t *buf = malloc(n + 5);
    if (!buf)
        abort();
    buf[0] = flags;
    buf[1] = (uint8_t)(n >> 24);
    buf[2] = (uint8_t)(n >> 16);
    buf[3] = (uint8_t)(n >> 8);
    buf[4] = (uint8_t)n;
    memcpy(buf + 5, t, n);
    fake_response_chunk(resp, buf, n + 5, delay_ms);
    free(buf);
    free(t);
}

static void fe_start(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    const char *ct = fake_request_header(req, "Content-Type");
    if (!ct || strcmp(ct, "application/connect+json") != 0) {
        fe_error(resp, 415, "expected application/connect+json");
        return;
    }
    if (req->body_len < 5 || req->body[0] != 0) {
        fe_error(resp, 400, "expected one uncompressed Connect envelope");
        return;
    }
    size_t n = (size_t)req->body[1] << 24 | (size_t)req->body[2] << 16 | (size_t)req->body[3] << 8 |
               req->body[4];
    if (n != req->body_len - 5) {
        fe_error(resp, 400, "envelope length does not match the body");
        return;
    }
    json_error_t e;
    json_t *msg = json_loadb((const char *)req->body + 5, n, 0, &e);
    json_t *proc = json_object_get(msg, "process");
    const char *cmd = json_string_value(json_object_get(proc, "cmd"));
    if (!cmd) {
        json_decref(msg);
        fake_response_status(resp, 200);
        fake_response_header(resp, "Content-Type", "application/connect+json");
        fe_envelope(resp, 0x02,
                    json_pack("{s:{s:s,s:s}}", "error", "code", "invalid_argument", "message",
                              "process.cmd is required"),
                    0);
        return;
    }
    fe_sandbox *s = fe_route(f, req, resp, FE_ENVD_PORT);
    if (!s) {
        json_decref(msg);
        return;
    }
    json_t *args = json_object_get(proc, "args");
    size_t argc = 1 + json_array_size(args);
    const char **argv = calloc(argc + 1, sizeof *argv);
    argv[0] = cmd;
    for (size_t i = 1; i < argc; i++) {
        argv[i] = json_string_value(json_array_get(args, i - 1));
        if (!argv[i])
            argv[i] = "";
    }
    fake_exec x;
    fake_run_argv(argv, argc, NULL, 0, s->fs, &x);
    unsigned pid = 1000 + ++f->next_pid;
    pthread_mutex_unlock(&f->lock);
    free(argv);

    long timeout_ms = -1;
    const char *to = fake_request_header(req, "Connect-Timeout-Ms");
    if (to)
        timeout_ms = strtol(to, NULL, 10);
    fake_response_status(resp, 200);
    fake_response_header(resp, "Content-Type", "application/connect+json");
    fe_envelope(resp, 0x00, json_pack("{s:{s:{s:i}}}", "event", "start", "pid", (int)pid), 0);
    int pending = 0;
    long elapsed = 0;
    bool deadline = false;
    for (size_t i = 0; i < x.n_events && !deadline; i++) {
        fake_event *ev = &x.events[i];
        if (ev->kind == FAKE_SLEEP) {
            if (timeout_ms >= 0 && elapsed + ev->ms > timeout_ms) {
                pending += (int)(timeout_ms - elapsed);
                deadline = true;
                break;
            }
            pending += ev->ms;
            elapsed += ev->ms;
            continue;
        }
        char *b64 = fake_base64_encode((const uint8_t *)ev->data, ev->len);
        fe_envelope(resp, 0x00,
                    json_pack("{s:{s:{s:s}}}", "event", "data",
                              ev->kind == FAKE_OUT ? "stdout" : "stderr", b64),
                    pending);
        pending = 0;
        free(b64);
    }
    if (deadline) {
        /* envd kills the process and ends the stream with deadline_exceeded. */
        fe_envelope(resp, 0x02,
                    json_pack("{s:{s:s,s:s}}", "error", "code", "deadline_exceeded", "message",
                              "context deadline exceeded"),
                    pending);
    } else {
        json_t *end = json_object();
        /* proto3 JSON omits zero values: no exitCode for a clean exit. */
        if (x.exit_code != 0)
            json_object_set_new(end, "exitCode", json_integer(x.exit_code));
        json_object_set_new(end, "exited", json_true());
        char status[64];
        snprintf(status, sizeof status, "exit status %d", x.exit_code);
        json_object_set_new(end, "status", json_string(status));
        fe_envelope(resp, 0x00, json_pack("{s:{s:o}}", "event", "end", end), pending);
        fe_envelope(resp, 0x02, json_object(), 0);
    }
    fake_exec_free(&x);
    json_decref(msg);
}

static void fe_signal(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    fe_sandbox *s = fe_route(f, req, resp, FE_ENVD_PORT);
    if (!s)
        return;
    f->kills++;
    pthread_mutex_unlock(&f->lock);
    fake_response_json(resp, 200, "{}");
}

typedef struct fe_list {
    json_t *entries;
    const char *dir;
} fe_list;

static void fe_list_entry(void *arg, const char *name, bool is_dir, size_t size)
{
    fe_list *l = arg;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", strcmp(l->dir, "/") == 0 ? "" : l->dir, name);
    char sz[32];
    snprintf(sz, sizeof sz, "%zu", size);
    json_array_append_new(l->entries, json_pack("{s:s,s:s,s:s,s:s}", "name", name, "type",
                                                is_dir ? "FILE_TYPE_DIRECTORY" : "FILE_TYPE_FILE",
                                                "path", path, "size", sz));
}

static void fe_listdir(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    fe_sandbox *s = fe_route(f, req, resp, FE_ENVD_PORT);
    if (!s)
        return;
    json_t *b = json_loadb((const char *)req->body, req->body_len, 0, NULL);
    const char *dir = json_string_value(json_object_get(b, "path"));
    if (!dir || !fake_fs_is_dir(s->fs, dir)) {
        pthread_mutex_unlock(&f->lock);
        fake_response_json(resp, 404, "{\"code\":\"not_found\",\"message\":\"path not found\"}");
        json_decref(b);
        return;
    }
    char absdir[1024];
    if (dir[0] != '/')
        snprintf(absdir, sizeof absdir, "/home/user%s%s", strcmp(dir, ".") == 0 ? "" : "/",
                 strcmp(dir, ".") == 0 ? "" : dir);
    else
        snprintf(absdir, sizeof absdir, "%s", dir);
    fe_list l = {.entries = json_array(), .dir = absdir};
    fake_fs_list(s->fs, dir, fe_list_entry, &l);
    pthread_mutex_unlock(&f->lock);
    fe_json(resp, 200, json_pack("{s:o}", "entries", l.entries));
    json_decref(b);
}

static void fe_files(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    const char *path = fake_request_query(req, "path");
    const char *user = fake_request_query(req, "username");
    fe_sandbox *s = fe_route(f, req, resp, FE_ENVD_PORT);
    if (!s)
        return;
    if (!path || !*path) {
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 400, "path is required");
        return;
    }
    if (user && strcmp(user, "user") != 0 && strcmp(user, "root") != 0) {
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 401, "invalid user");
        return;
    }
    if (strcmp(req->method, "POST") == 0) {
        const char *ct = fake_request_header(req, "Content-Type");
        if (!ct || strcmp(ct, "application/octet-stream") != 0) {
            pthread_mutex_unlock(&f->lock);
            fe_error(resp, 400, "unsupported content type");
            return;
        }
        fake_fs_write(s->fs, path, req->body, req->body_len, false);
        pthread_mutex_unlock(&f->lock);
        const char *name = strrchr(path, '/');
        fe_json(resp, 200,
                json_pack("[{s:s,s:s,s:s}]", "path", path, "name", name ? name + 1 : path, "type",
                          "file"));
        return;
    }
    size_t len = 0;
    const uint8_t *d = fake_fs_read(s->fs, path, &len);
    if (!d) {
        bool dir = fake_fs_is_dir(s->fs, path);
        pthread_mutex_unlock(&f->lock);
        if (dir)
            fe_error(resp, 400, "path is a directory");
        else
            fe_error(resp, 404, "file not found");
        return;
    }
    fake_response_status(resp, 200);
    fake_response_header(resp, "Content-Type", "application/octet-stream");
    fake_response_body(resp, d, len);
    pthread_mutex_unlock(&f->lock);
}

/* ---- code interpreter ------------------------------------------------------------------------ */

static void fe_line(fake_response *resp, json_t *j, int delay_ms)
{
    char *t = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    size_t n = strlen(t);
    t[n] = '\n';
    fake_response_chunk(resp, t, n + 1, delay_ms);
    free(t);
}

static void fe_execute(void *arg, const fake_request *req, fake_response *resp)
{
    fake_e2b *f = arg;
    fe_sandbox *s = fe_route(f, req, resp, FE_JUPYTER_PORT);
    if (!s)
        return;
    json_t *b = json_loadb((const char *)req->body, req->body_len, 0, NULL);
    const char *code = json_string_value(json_object_get(b, "code"));
    const char *lang = json_string_value(json_object_get(b, "language"));
    if (!code || (lang && strcmp(lang, "python") != 0)) {
        pthread_mutex_unlock(&f->lock);
        fe_error(resp, 400, "code is required and only python is served by this fake");
        json_decref(b);
        return;
    }
    fake_exec x;
    fake_run_python(code, s->py, s->fs, &x);
    pthread_mutex_unlock(&f->lock);
    fake_response_status(resp, 200);
    fake_response_header(resp, "Content-Type", "application/x-ndjson");
    int pending = 0;
    for (size_t i = 0; i < x.n_events; i++) {
        fake_event *ev = &x.events[i];
        if (ev->kind == FAKE_SLEEP) {
            pending += ev->ms;
            continue;
        }
        fe_line(resp,
                json_pack("{s:s,s:s,s:i}", "type", ev->kind == FAKE_OUT ? "stdout" : "stderr",
                          "text", ev->data, "timestamp", 0),
                pending);
        pending = 0;
    }
    if (x.error_name) {
        fe_line(resp,
                json_pack("{s:s,s:s,s:s,s:s}", "type", "error", "name", x.error_name, "value",
                          x.error_value ? x.error_value : "", "traceback",
                          x.traceback ? x.traceback : ""),
                pending);
        pending = 0;
    } else if (x.value) {
        fe_line(resp,
                json_pack("{s:s,s:s,s:b}", "type", "result", "text", x.value, "is_main_result", 1),
                pending);
        pending = 0;
    }
    fe_line(resp, json_pack("{s:s,s:i}", "type", "number_of_executions", "execution_count", 1),
            pending);
    fake_exec_free(&x);
    json_decref(b);
}

static void fe_health(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg, (void)req;
    fake_response_status(resp, 204);
}

fake_e2b *fake_e2b_start(const char *api_key)
{
    fake_e2b *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->http = fake_http_start();
    if (!f->http) {
        free(f);
        return NULL;
    }
    f->api_key = strdup(api_key);
    pthread_mutex_init(&f->lock, NULL);
    fake_http *h = f->http;
    fake_http_route(h, "POST", "/sandboxes", fe_create, f);
    fake_http_route(h, "GET", "/sandboxes/*", fe_get, f);
    fake_http_route(h, "GET", "/v2/sandboxes", fe_list_sandboxes, f);
    fake_http_route(h, "DELETE", "/sandboxes/*", fe_kill, f);
    fake_http_route(h, "POST", "/sandboxes/*/connect", fe_connect, f);
    fake_http_route(h, "POST", "/sandboxes/*/pause", fe_pause, f);
    fake_http_route(h, "POST", "/sandboxes/*/timeout", fe_timeout, f);
    fake_http_route(h, "PUT", "/sandboxes/*/network", fe_network, f);
    fake_http_route(h, "POST", "/process.Process/Start", fe_start, f);
    fake_http_route(h, "POST", "/process.Process/SendSignal", fe_signal, f);
    fake_http_route(h, "POST", "/filesystem.Filesystem/ListDir", fe_listdir, f);
    fake_http_route(h, "POST", "/files", fe_files, f);
    fake_http_route(h, "GET", "/files", fe_files, f);
    fake_http_route(h, "POST", "/execute", fe_execute, f);
    fake_http_route(h, "GET", "/health", fe_health, f);
    return f;
}

void fake_e2b_stop(fake_e2b *f)
{
    if (!f)
        return;
    fake_http_stop(f->http);
    for (size_t i = 0; i < f->n; i++)
        if (f->sb[i].alive)
            fe_sandbox_release(&f->sb[i]);
    pthread_mutex_destroy(&f->lock);
    free(f->api_key);
    free(f);
}

const char *fake_e2b_url(fake_e2b *f)
{
    return fake_http_url(f->http);
}
fake_http *fake_e2b_http(fake_e2b *f)
{
    return f->http;
}

size_t fake_e2b_live(fake_e2b *f)
{
    size_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n; i++)
        n += f->sb[i].alive;
    pthread_mutex_unlock(&f->lock);
    return n;
}

bool fake_e2b_exists(fake_e2b *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    bool e = fe_find(f, id) != NULL;
    pthread_mutex_unlock(&f->lock);
    return e;
}

void fake_e2b_vanish(fake_e2b *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = fe_find(f, id);
    if (s)
        fe_sandbox_release(s);
    pthread_mutex_unlock(&f->lock);
}

void fake_e2b_last_id(fake_e2b *f, char *buf, size_t cap)
{
    pthread_mutex_lock(&f->lock);
    snprintf(buf, cap, "%s", f->n ? f->sb[f->n - 1].id : "");
    pthread_mutex_unlock(&f->lock);
}

void fake_e2b_token(fake_e2b *f, const char *id, char *buf, size_t cap)
{
    pthread_mutex_lock(&f->lock);
    fe_sandbox *s = NULL;
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->sb[i].id, id) == 0)
            s = &f->sb[i];
    snprintf(buf, cap, "%s", s ? s->token : "");
    pthread_mutex_unlock(&f->lock);
}

size_t fake_e2b_kills(fake_e2b *f)
{
    pthread_mutex_lock(&f->lock);
    size_t k = f->kills;
    pthread_mutex_unlock(&f->lock);
    return k;
}

void fake_e2b_next_id(fake_e2b *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    snprintf(f->next_id_override, sizeof f->next_id_override, "%s", id);
    pthread_mutex_unlock(&f->lock);
}

void fake_e2b_list_page(fake_e2b *f, size_t n)
{
    pthread_mutex_lock(&f->lock);
    f->list_page = n;
    pthread_mutex_unlock(&f->lock);
}

void fake_e2b_list_token_pad(fake_e2b *f, size_t n)
{
    pthread_mutex_lock(&f->lock);
    f->token_pad = n;
    pthread_mutex_unlock(&f->lock);
}
