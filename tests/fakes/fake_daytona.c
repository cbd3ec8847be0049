/* fake_daytona.c - the fake Daytona REST API and toolbox (fake_daytona.h). Implements the
 * documented behaviour only; it never runs a program on the host.
 */
#include "fakes/fake_daytona.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fakes/fake_interp.h"

#define FD_MAX_SANDBOXES 256
/* Daytona's documented organisation maxima (reference §2.1). */
#define FD_ORG_MAX_CPU 4
#define FD_ORG_MAX_MEMORY_GB 8
#define FD_ORG_MAX_DISK_GB 10

typedef struct fd_sandbox {
    char id[64];
    char state[32];
    char snapshot[128];
    json_t *labels;
    json_t *env;
    bool block_all;
    char allow[1024];
    long cpu, memory, disk;
    long auto_stop;
    char error_reason[256];
    bool alive;
    int polls; /* GETs seen while creating */
    fake_fs *fs;
} fd_sandbox;

struct fake_daytona {
    fake_http *http;
    char *api_key;
    char toolbox_url[128];
    pthread_mutex_t lock;
    fd_sandbox sb[FD_MAX_SANDBOXES];
    size_t n;
    unsigned next_id;
    char *fail_reason;
    size_t list_page; /* fake_daytona_list_page: most sandboxes per list page (0 = limit) */
};

static void fd_error(const fake_request *req, fake_response *resp, int status, const char *error,
                     const char *msg)
{
    json_t *j =
        json_pack("{s:s,s:s,s:i,s:s,s:s}", "path", req->path, "timestamp",
                  "2026-01-01T00:00:00.000Z", "statusCode", status, "error", error, "message", msg);
    char *t = json_dumps(j, JSON_COMPACT);
    fake_response_json(resp, status, "%s", t);
    free(t);
    json_decref(j);
}

static void fd_json(fake_response *resp, int status, json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT);
    fake_response_json(resp, status, "%s", t);
    free(t);
    json_decref(j);
}

static bool fd_auth(fake_daytona *f, const fake_request *req, fake_response *resp)
{
    const char *a = fake_request_header(req, "Authorization");
    char want[512];
    snprintf(want, sizeof want, "Bearer %s", f->api_key);
    if (!a || strcmp(a, want) != 0) {
        fd_error(req, resp, 401, "Unauthorized", "Invalid API key");
        return false;
    }
    return true;
}

static fd_sandbox *fd_find(fake_daytona *f, const char *id)
{
    for (size_t i = 0; id && i < f->n; i++)
        if (f->sb[i].alive && strcmp(f->sb[i].id, id) == 0)
            return &f->sb[i];
    return NULL;
}

static void fd_not_found(const fake_request *req, fake_response *resp, const char *id)
{
    char msg[256];
    snprintf(msg, sizeof msg, "Sandbox with ID or name %s not found", id);
    fd_error(req, resp, 404, "Not Found", msg);
}

static json_t *fd_sandbox_json(fake_daytona *f, const fd_sandbox *s)
{
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:i,s:i,s:i,s:i,s:s}", "id", s->id,
                          "organizationId", "org-fake", "name", s->id, "snapshot", s->snapshot,
                          "state", s->state, "networkBlockAll", s->block_all, "cpu", (int)s->cpu,
                          "memory", (int)s->memory, "disk", (int)s->disk, "autoStopInterval",
                          (int)s->auto_stop, "toolboxProxyUrl", f->toolbox_url);
    if (s->allow[0])
        json_object_set_new(j, "networkAllowList", json_string(s->allow));
    json_object_set(j, "labels", s->labels ? s->labels : json_object());
    if (s->error_reason[0])
        json_object_set_new(j, "errorReason", json_string(s->error_reason));
    return j;
}

/* Validates a comma-separated IPv4 CIDR list: at most 10 entries of A.B.C.D/N. */
static bool fd_cidr_list_ok(const char *list)
{
    if (!*list)
        return true;
    int n = 0;
    const char *p = list;
    while (*p) {
        unsigned a, b, c, d, m;
        int used = 0;
        if (sscanf(p, "%3u.%3u.%3u.%3u/%2u%n", &a, &b, &c, &d, &m, &used) != 5 || a > 255 ||
            b > 255 || c > 255 || d > 255 || m > 32)
            return false;
        p += used;
        if (++n > 10)
            return false;
        if (*p == ',')
            p++;
        else if (*p)
            return false;
    }
    return true;
}

static void fd_create(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    json_t *b = json_loadb((const char *)req->body, req->body_len, 0, NULL);
    if (!json_is_object(b)) {
        fd_error(req, resp, 400, "Bad Request", "body must be a JSON object");
        json_decref(b);
        return;
    }
    const char *snap = json_string_value(json_object_get(b, "snapshot"));
    json_t *build = json_object_get(b, "buildInfo");
    long cpu = 1, mem = 1, disk = 3;
    if (snap && strcmp(snap, "big") == 0)
        cpu = 4, mem = 8, disk = 10;
    else if (snap && strcmp(snap, "default") != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "Snapshot %s not found", snap);
        fd_error(req, resp, 404, "Not Found", msg);
        json_decref(b);
        return;
    }
    if (build) {
        json_t *c = json_object_get(b, "cpu"), *m = json_object_get(b, "memory"),
               *d = json_object_get(b, "disk");
        if ((c && !json_is_integer(c)) || (m && !json_is_integer(m)) ||
            (d && !json_is_integer(d))) {
            fd_error(req, resp, 400, "Bad Request", "cpu, memory and disk must be integers");
            json_decref(b);
            return;
        }
        if (c)
            cpu = (long)json_integer_value(c);
        if (m)
            mem = (long)json_integer_value(m);
        if (d)
            disk = (long)json_integer_value(d);
        if (cpu > FD_ORG_MAX_CPU || mem > FD_ORG_MAX_MEMORY_GB || disk > FD_ORG_MAX_DISK_GB) {
            fd_error(req, resp, 400, "Bad Request",
                     "Resource request exceeds the organization's quota");
            json_decref(b);
            return;
        }
    }
    const char *allow = json_string_value(json_object_get(b, "networkAllowList"));
    if (allow && !fd_cidr_list_ok(allow)) {
        fd_error(req, resp, 400, "Bad Request",
                 "networkAllowList must be up to 10 comma-separated IPv4 CIDR blocks");
        json_decref(b);
        return;
    }
    pthread_mutex_lock(&f->lock);
    if (f->n >= FD_MAX_SANDBOXES) {
        pthread_mutex_unlock(&f->lock);
        fd_error(req, resp, 429, "Too Many Requests", "sandbox limit reached");
        json_decref(b);
        return;
    }
    fd_sandbox *s = &f->sb[f->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->id, sizeof s->id, "dfake-%04u-sbx", ++f->next_id);
    snprintf(s->state, sizeof s->state, "%s", build ? "pending_build" : "creating");
    snprintf(s->snapshot, sizeof s->snapshot, "%s", snap ? snap : "default");
    s->labels = json_incref(json_object_get(b, "labels"));
    s->env = json_incref(json_object_get(b, "env"));
    s->block_all = json_is_true(json_object_get(b, "networkBlockAll"));
    snprintf(s->allow, sizeof s->allow, "%s", allow ? allow : "");
    s->cpu = cpu, s->memory = mem, s->disk = disk;
    json_t *as = json_object_get(b, "autoStopInterval");
    s->auto_stop = as ? (long)json_integer_value(as) : 15;
    if (f->fail_reason) {
        snprintf(s->error_reason, sizeof s->error_reason, "%s", f->fail_reason);
        free(f->fail_reason);
        f->fail_reason = NULL;
    }
    s->alive = true;
    s->fs = fake_fs_new();
    fake_fs_set_home(s->fs, "/home/daytona");
    json_t *out = fd_sandbox_json(f, s);
    pthread_mutex_unlock(&f->lock);
    fd_json(resp, 200, out);
    json_decref(b);
}

/* GET /sandbox/{id}/ports/{port}/preview-url: 200 {sandboxId, url, token}; 404 unknown
 * sandbox; 400 a port that is not 1..65535. */
static void fd_preview(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    char *end = NULL;
    long port = strtol(req->params[1], &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
        fd_error(req, resp, 400, "Bad Request", "port must be a number between 1 and 65535");
        return;
    }
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    json_t *out = NULL;
    if (s) {
        char url[256], token[128];
        snprintf(url, sizeof url, "https://%ld-%s.proxy.daytona.fake", port, s->id);
        snprintf(token, sizeof token, "preview-token-%s", s->id);
        out = json_pack("{s:s,s:s,s:s}", "sandboxId", s->id, "url", url, "token", token);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fd_json(resp, 200, out);
    else
        fd_not_found(req, resp, req->params[0]);
}

static void fd_get(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    json_t *out = NULL;
    if (s) {
        /* Asynchronous create/start: the next GET sees the end state. */
        if (strcmp(s->state, "creating") == 0 || strcmp(s->state, "pending_build") == 0 ||
            strcmp(s->state, "starting") == 0) {
            if (s->polls++ >= 1)
                snprintf(s->state, sizeof s->state, "%s", s->error_reason[0] ? "error" : "started");
        }
        out = fd_sandbox_json(f, s);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fd_json(resp, 200, out);
    else
        fd_not_found(req, resp, req->params[0]);
}

static void fd_release(fd_sandbox *s)
{
    s->alive = false;
    json_decref(s->labels);
    json_decref(s->env);
    s->labels = s->env = NULL;
    fake_fs_free(s->fs);
    s->fs = NULL;
}

static void fd_delete(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    json_t *out = NULL;
    if (s) {
        snprintf(s->state, sizeof s->state, "destroying");
        out = fd_sandbox_json(f, s);
        fd_release(s);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fd_json(resp, 200, out);
    else
        fd_not_found(req, resp, req->params[0]);
}

static void fd_start(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    json_t *out = NULL;
    if (s) {
        if (strcmp(s->state, "started") != 0) {
            snprintf(s->state, sizeof s->state, "starting");
            s->polls = 0;
        }
        out = fd_sandbox_json(f, s);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fd_json(resp, 200, out);
    else
        fd_not_found(req, resp, req->params[0]);
}

static void fd_network(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    json_t *b = json_loadb((const char *)req->body, req->body_len, 0, NULL);
    const char *allow = json_string_value(json_object_get(b, "networkAllowList"));
    if (allow && !fd_cidr_list_ok(allow)) {
        fd_error(req, resp, 400, "Bad Request", "invalid networkAllowList");
        json_decref(b);
        return;
    }
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    json_t *out = NULL;
    if (s) {
        s->block_all = json_is_true(json_object_get(b, "networkBlockAll"));
        snprintf(s->allow, sizeof s->allow, "%s", allow ? allow : "");
        out = fd_sandbox_json(f, s);
    }
    pthread_mutex_unlock(&f->lock);
    if (out)
        fd_json(resp, 200, out);
    else
        fd_not_found(req, resp, req->params[0]);
    json_decref(b);
}

/* ---- toolbox ------------------------------------------------------------------------------- */

static fd_sandbox *fd_toolbox(fake_daytona *f, const fake_request *req, fake_response *resp)
{
    if (!fd_auth(f, req, resp))
        return NULL;
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, req->params[0]);
    if (!s) {
        pthread_mutex_unlock(&f->lock);
        fd_not_found(req, resp, req->params[0]);
        return NULL;
    }
    if (strcmp(s->state, "started") != 0) {
        pthread_mutex_unlock(&f->lock);
        fd_error(req, resp, 400, "Bad Request", "Sandbox is not started");
        return NULL;
    }
    return s;
}

static void fd_execute(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    json_t *b = json_loadb((const char *)req->body, req->body_len, 0, NULL);
    const char *cmd = json_string_value(json_object_get(b, "command"));
    if (!cmd) {
        fd_error(req, resp, 400, "Bad Request", "command is required");
        json_decref(b);
        return;
    }
    fd_sandbox *s = fd_toolbox(f, req, resp);
    if (!s) {
        json_decref(b);
        return;
    }
    fake_exec x;
    fake_run_shell(cmd, NULL, 0, s->fs, &x);
    pthread_mutex_unlock(&f->lock);
    json_t *to = json_object_get(b, "timeout");
    long timeout_ms = json_is_integer(to) && json_integer_value(to) > 0
                          ? (long)json_integer_value(to) * 1000
                          : -1;
    int sleep_ms = fake_exec_sleep_ms(&x);
    if (timeout_ms >= 0 && sleep_ms > timeout_ms) {
        fake_http_sleep(f->http, (int)timeout_ms);
        fake_exec_free(&x);
        json_decref(b);
        fake_response_json(resp, 408,
                           "{\"statusCode\":408,\"message\":\"command execution timeout\","
                           "\"code\":\"REQUEST_TIMEOUT\",\"timestamp\":\"2026-01-01T00:00:00Z\","
                           "\"path\":\"%s\",\"method\":\"POST\"}",
                           req->path);
        return;
    }
    if (sleep_ms > 0)
        fake_http_sleep(f->http, sleep_ms);
    /* stdout and stderr merged, in the order written. */
    size_t len = 0;
    for (size_t i = 0; i < x.n_events; i++)
        len += x.events[i].len;
    char *out = calloc(1, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < x.n_events; i++) {
        if (x.events[i].len)
            memcpy(out + k, x.events[i].data, x.events[i].len);
        k += x.events[i].len;
    }
    fd_json(resp, 200, json_pack("{s:i,s:s}", "exitCode", x.exit_code, "result", out));
    free(out);
    fake_exec_free(&x);
    json_decref(b);
}

/* Extracts the part named "file" from a multipart/form-data body. */
static bool fd_multipart_file(const fake_request *req, const uint8_t **data, size_t *len)
{
    const char *ct = fake_request_header(req, "Content-Type");
    const char *bp = ct ? strstr(ct, "boundary=") : NULL;
    if (!ct || strncmp(ct, "multipart/form-data", 19) != 0 || !bp)
        return false;
    char delim[256];
    snprintf(delim, sizeof delim, "--%s", bp + 9);
    size_t dl = strlen(delim);
    const uint8_t *body = req->body, *end = req->body + req->body_len;
    const uint8_t *p = memmem(body, req->body_len, delim, dl);
    while (p) {
        const uint8_t *hdr = p + dl + 2; /* after "\r\n" */
        if (hdr >= end)
            return false;
        const uint8_t *hend = memmem(hdr, (size_t)(end - hdr), "\r\n\r\n", 4);
        if (!hend)
            return false;
        const uint8_t *content = hend + 4;
        const uint8_t *next = memmem(content, (size_t)(end - content), delim, dl);
        if (!next || next - content < 2)
            return false;
        char *h = strndup((const char *)hdr, (size_t)(hend - hdr));
        bool is_file = strstr(h, "name=\"file\"") != NULL;
        free(h);
        if (is_file) {
            *data = content;
            *len = (size_t)(next - content - 2); /* minus "\r\n" */
            return true;
        }
        p = next;
    }
    return false;
}

static void fd_upload(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    const char *path = fake_request_query(req, "path");
    fd_sandbox *s = fd_toolbox(f, req, resp);
    if (!s)
        return;
    const uint8_t *data;
    size_t len;
    if (!path || !*path || !fd_multipart_file(req, &data, &len)) {
        pthread_mutex_unlock(&f->lock);
        fd_error(req, resp, 400, "Bad Request",
                 "path and a multipart part named file are required");
        return;
    }
    fake_fs_write(s->fs, path, data, len, false);
    pthread_mutex_unlock(&f->lock);
    fake_response_status(resp, 200);
}

static void fd_download(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    const char *path = fake_request_query(req, "path");
    fd_sandbox *s = fd_toolbox(f, req, resp);
    if (!s)
        return;
    size_t len = 0;
    const uint8_t *d = path ? fake_fs_read(s->fs, path, &len) : NULL;
    if (!d) {
        pthread_mutex_unlock(&f->lock);
        fd_error(req, resp, 404, "Not Found", "file not found");
        return;
    }
    fake_response_status(resp, 200);
    fake_response_header(resp, "Content-Type", "application/octet-stream");
    fake_response_body(resp, d, len);
    pthread_mutex_unlock(&f->lock);
}

static void fd_list_entry(void *arg, const char *name, bool is_dir, size_t size)
{
    json_array_append_new(
        (json_t *)arg, json_pack("{s:s,s:b,s:i,s:s,s:s,s:s,s:s,s:s}", "name", name, "isDir", is_dir,
                                 "size", (int)size, "mode", is_dir ? "drwxr-xr-x" : "-rw-r--r--",
                                 "modTime", "2026-01-01T00:00:00Z", "permissions",
                                 is_dir ? "0755" : "0644", "owner", "daytona", "group", "daytona"));
}

static void fd_list(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    const char *path = fake_request_query(req, "path");
    fd_sandbox *s = fd_toolbox(f, req, resp);
    if (!s)
        return;
    if (!path || !fake_fs_is_dir(s->fs, path)) {
        pthread_mutex_unlock(&f->lock);
        fd_error(req, resp, 404, "Not Found", "directory not found");
        return;
    }
    json_t *arr = json_array();
    fake_fs_list(s->fs, path, fd_list_entry, arr);
    pthread_mutex_unlock(&f->lock);
    fd_json(resp, 200, arr);
}

static void fd_folder(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    fd_sandbox *s = fd_toolbox(f, req, resp);
    if (!s)
        return;
    pthread_mutex_unlock(&f->lock);
    fake_response_status(resp, 201);
}

/* Whether a sandbox's labels hold every key and value of the `labels` filter (a JSON object).
 * -1: the filter is not a JSON object of strings. */
static int fd_labels_match(const json_t *labels, const char *filter)
{
    json_t *want = json_loads(filter, 0, NULL);
    if (!json_is_object(want)) {
        json_decref(want);
        return -1;
    }
    int m = 1;
    const char *k;
    json_t *v;
    json_object_foreach(want, k, v)
    {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!json_is_string(v)) {
            m = -1;
            break;
        }
        if (have == NULL || strcmp(have, json_string_value(v)) != 0)
            m = 0;
    }
    json_decref(want);
    return m;
}

/* GET /sandbox: {"items":[...], "nextCursor"} of the sandboxes matching `labels`, `limit`
 * (1..200, default 100) at a time from `cursor`; destroyed ones are left out (reference §2.1). */
static void fd_list_sandboxes(void *arg, const fake_request *req, fake_response *resp)
{
    fake_daytona *f = arg;
    if (!fd_auth(f, req, resp))
        return;
    const char *labels_q = fake_request_query(req, "labels");
    const char *limit_q = fake_request_query(req, "limit");
    const char *cur = fake_request_query(req, "cursor");
    long limit = limit_q ? strtol(limit_q, NULL, 10) : 100;
    size_t from = 0;
    if (limit < 1 || limit > 200) {
        fd_error(req, resp, 400, "Bad Request", "limit must not be greater than 200");
        return;
    }
    if (cur != NULL && sscanf(cur, "fd-cur-%zu", &from) != 1) {
        fd_error(req, resp, 400, "Bad Request", "invalid cursor");
        return;
    }
    size_t page = f->list_page != 0 && f->list_page < (size_t)limit ? f->list_page : (size_t)limit;
    json_t *items = json_array();
    pthread_mutex_lock(&f->lock);
    size_t i = from;
    for (; i < f->n && json_array_size(items) < page; i++) {
        fd_sandbox *s = &f->sb[i];
        int m = labels_q ? fd_labels_match(s->labels, labels_q) : 1;
        if (m < 0) {
            pthread_mutex_unlock(&f->lock);
            json_decref(items);
            fd_error(req, resp, 400, "Bad Request", "labels must be a JSON object of strings");
            return;
        }
        if (s->alive && m == 1 && strcmp(s->state, "destroyed") != 0)
            json_array_append_new(items, fd_sandbox_json(f, s));
    }
    bool more = false;
    for (size_t k = i; k < f->n && !more; k++)
        more = f->sb[k].alive;
    pthread_mutex_unlock(&f->lock);
    char next[64];
    snprintf(next, sizeof next, "fd-cur-%zu", i);
    json_t *out = json_pack("{s:o,s:o}", "items", items, "nextCursor",
                            more ? json_string(next) : json_null());
    char *t = json_dumps(out, JSON_COMPACT);
    fake_response_json(resp, 200, "%s", t);
    free(t);
    json_decref(out);
}

fake_daytona *fake_daytona_start(const char *api_key)
{
    fake_daytona *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->http = fake_http_start();
    if (!f->http) {
        free(f);
        return NULL;
    }
    f->api_key = strdup(api_key);
    snprintf(f->toolbox_url, sizeof f->toolbox_url, "%s/toolbox", fake_http_url(f->http));
    pthread_mutex_init(&f->lock, NULL);
    fake_http *h = f->http;
    fake_http_route(h, "POST", "/sandbox", fd_create, f);
    fake_http_route(h, "GET", "/sandbox", fd_list_sandboxes, f);
    fake_http_route(h, "GET", "/sandbox/*", fd_get, f);
    fake_http_route(h, "GET", "/sandbox/*/ports/*/preview-url", fd_preview, f);
    fake_http_route(h, "DELETE", "/sandbox/*", fd_delete, f);
    fake_http_route(h, "POST", "/sandbox/*/start", fd_start, f);
    fake_http_route(h, "POST", "/sandbox/*/network-settings", fd_network, f);
    fake_http_route(h, "POST", "/toolbox/*/process/execute", fd_execute, f);
    fake_http_route(h, "POST", "/toolbox/*/files/upload", fd_upload, f);
    fake_http_route(h, "GET", "/toolbox/*/files/download", fd_download, f);
    fake_http_route(h, "POST", "/toolbox/*/files/folder", fd_folder, f);
    fake_http_route(h, "GET", "/toolbox/*/files", fd_list, f);
    return f;
}

void fake_daytona_stop(fake_daytona *f)
{
    if (!f)
        return;
    fake_http_stop(f->http);
    for (size_t i = 0; i < f->n; i++)
        if (f->sb[i].alive)
            fd_release(&f->sb[i]);
    pthread_mutex_destroy(&f->lock);
    free(f->api_key);
    free(f->fail_reason);
    free(f);
}

const char *fake_daytona_url(fake_daytona *f)
{
    return fake_http_url(f->http);
}
fake_http *fake_daytona_http(fake_daytona *f)
{
    return f->http;
}

size_t fake_daytona_live(fake_daytona *f)
{
    size_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n; i++)
        n += f->sb[i].alive;
    pthread_mutex_unlock(&f->lock);
    return n;
}

bool fake_daytona_exists(fake_daytona *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    bool e = fd_find(f, id) != NULL;
    pthread_mutex_unlock(&f->lock);
    return e;
}

void fake_daytona_vanish(fake_daytona *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, id);
    if (s)
        fd_release(s);
    pthread_mutex_unlock(&f->lock);
}

void fake_daytona_autostop(fake_daytona *f, const char *id)
{
    pthread_mutex_lock(&f->lock);
    fd_sandbox *s = fd_find(f, id);
    if (s)
        snprintf(s->state, sizeof s->state, "stopped");
    pthread_mutex_unlock(&f->lock);
}

void fake_daytona_fail_next_create(fake_daytona *f, const char *reason)
{
    pthread_mutex_lock(&f->lock);
    free(f->fail_reason);
    f->fail_reason = reason ? strdup(reason) : NULL;
    pthread_mutex_unlock(&f->lock);
}

void fake_daytona_last_id(fake_daytona *f, char *buf, size_t cap)
{
    pthread_mutex_lock(&f->lock);
    snprintf(buf, cap, "%s", f->n ? f->sb[f->n - 1].id : "");
    pthread_mutex_unlock(&f->lock);
}

void fake_daytona_list_page(fake_daytona *f, size_t n)
{
    pthread_mutex_lock(&f->lock);
    f->list_page = n;
    pthread_mutex_unlock(&f->lock);
}
