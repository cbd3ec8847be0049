/* fake_http.c - the in-process fake HTTP server for tests (see fake_http.h), on libmicrohttpd
 * with one thread per connection. Routes, faults, a request log, chunked and delayed bodies.
 * It must never execute anything on the host; handlers only interpret requests.
 */
#include "core/clock.h"
#include "fakes/fake_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <microhttpd.h>
#include <openssl/evp.h>

/* Routes and faults per server: tests register a handful; fakes a few dozen. */
#define FAKE_HTTP_MAX_ROUTES 128
#define FAKE_HTTP_MAX_FAULTS 32
/* Idle keep-alive connections are closed after this many seconds, so a stop never waits on a
 * client that holds a connection open. */
#define FAKE_HTTP_CONNECTION_TIMEOUT_S 30

typedef struct fake_route {
    char *method;
    char *pattern;
    fake_handler handler;
    void *arg;
} fake_route;

typedef struct fake_fault_entry {
    char *method;
    char *pattern;
    fake_fault fault;
    char *body;
    char *retry_after;
    int left; /* -1 = forever */
} fake_fault_entry;

typedef struct fake_chunk {
    uint8_t *data;
    size_t len;
    int delay_ms;
} fake_chunk;

struct fake_response {
    fake_http *server;
    int status;
    fake_header *headers;
    size_t n_headers;
    uint8_t *body;
    size_t body_len;
    fake_chunk *chunks;
    size_t n_chunks;
};

struct fake_http {
    struct MHD_Daemon *daemon;
    int port;
    char url[64];
    pthread_mutex_t lock; /* guards routes, faults, log, stopping */
    pthread_cond_t wake;  /* signalled on stop, to interrupt sleeps */
    bool stopping;
    fake_route routes[FAKE_HTTP_MAX_ROUTES];
    size_t n_routes;
    fake_fault_entry faults[FAKE_HTTP_MAX_FAULTS];
    size_t n_faults;
    fake_request **log;
    size_t n_log, cap_log;
};

/* Per-connection request state while the body arrives. */
typedef struct fake_conn {
    uint8_t *body;
    size_t len, cap;
    bool too_large;
} fake_conn;

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p)
        abort(); /* test code: running out of memory is fatal */
    return p;
}
static char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    if (!p)
        abort();
    return p;
}
static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

/* ---- requests ------------------------------------------------------------------------------ */

const char *fake_request_header(const fake_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

const char *fake_request_query(const fake_request *r, const char *key)
{
    for (size_t i = 0; i < r->n_query; i++)
        if (strcmp(r->query[i].name, key) == 0)
            return r->query[i].value;
    return NULL;
}

static void fake_request_free(fake_request *r)
{
    if (!r)
        return;
    free(r->method);
    free(r->path);
    for (size_t i = 0; i < r->n_query; i++)
        free(r->query[i].name), free(r->query[i].value);
    free(r->query);
    for (size_t i = 0; i < r->n_headers; i++)
        free(r->headers[i].name), free(r->headers[i].value);
    free(r->headers);
    free(r->body);
    free(r->response);
    for (size_t i = 0; i < r->n_params; i++)
        free(r->params[i]);
    free(r);
}

typedef struct kv_collect {
    fake_header **items;
    size_t *n;
} kv_collect;

static enum MHD_Result fake_collect_kv(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    (void)kind;
    kv_collect *c = cls;
    *c->items = xrealloc(*c->items, (*c->n + 1) * sizeof **c->items);
    (*c->items)[*c->n].name = xstrdup(key);
    (*c->items)[*c->n].value = xstrdup(value);
    (*c->n)++;
    return MHD_YES;
}

/* ---- routing ------------------------------------------------------------------------------- */

/* Matches path against pattern; captures '*' segments into params (when r is not NULL). */
static bool fake_match(const char *pattern, const char *path, fake_request *r)
{
    const char *p = pattern, *s = path;
    size_t n_params = 0;
    char *params[FAKE_HTTP_MAX_PARAMS];
    bool ok = true;
    while (ok) {
        if (*p == '/' && *s == '/') {
            p++, s++;
            continue;
        }
        if (!*p && !*s)
            break;
        if (p[0] == '*' && p[1] == '*' && p[2] == 0) {
            if (n_params < FAKE_HTTP_MAX_PARAMS)
                params[n_params++] = xstrdup(s);
            s += strlen(s);
            p += 2;
            break;
        }
        if (p[0] == '*' && (p[1] == '/' || p[1] == 0)) {
            const char *e = strchr(s, '/');
            size_t n = e ? (size_t)(e - s) : strlen(s);
            if (n == 0) {
                ok = false;
                break;
            }
            if (n_params < FAKE_HTTP_MAX_PARAMS) {
                params[n_params] = xcalloc(n + 1, 1);
                memcpy(params[n_params], s, n);
                n_params++;
            }
            s += n;
            p += 1;
            continue;
        }
        if (!*p || !*s || *p == '/' || *s == '/') {
            /* one side ended or has an empty segment where the other has a name */
            ok = false;
            break;
        }
        const char *pe = strchr(p, '/');
        const char *se = strchr(s, '/');
        size_t pn = pe ? (size_t)(pe - p) : strlen(p);
        size_t sn = se ? (size_t)(se - s) : strlen(s);
        if (pn != sn || strncmp(p, s, pn) != 0) {
            ok = false;
            break;
        }
        p += pn, s += sn;
    }
    if (ok && (*p || *s))
        ok = false;
    if (ok && r) {
        for (size_t i = 0; i < n_params; i++)
            r->params[i] = params[i];
        r->n_params = n_params;
    } else {
        for (size_t i = 0; i < n_params; i++)
            free(params[i]);
    }
    return ok;
}

static bool fake_method_matches(const char *want, const char *method)
{
    return !want || strcmp(want, method) == 0;
}

void fake_http_route(fake_http *f, const char *method, const char *pattern, fake_handler h,
                     void *arg)
{
    pthread_mutex_lock(&f->lock);
    if (f->n_routes < FAKE_HTTP_MAX_ROUTES) {
        fake_route *r = &f->routes[f->n_routes++];
        r->method = method ? xstrdup(method) : NULL;
        r->pattern = xstrdup(pattern);
        r->handler = h;
        r->arg = arg;
    }
    pthread_mutex_unlock(&f->lock);
}

void fake_http_fault(fake_http *f, const char *method, const char *pattern, const fake_fault *fault)
{
    pthread_mutex_lock(&f->lock);
    if (f->n_faults < FAKE_HTTP_MAX_FAULTS) {
        fake_fault_entry *e = &f->faults[f->n_faults++];
        memset(e, 0, sizeof *e);
        e->method = method ? xstrdup(method) : NULL;
        e->pattern = xstrdup(pattern);
        e->fault = *fault;
        e->body = fault->body ? xstrdup(fault->body) : NULL;
        e->retry_after = fault->retry_after ? xstrdup(fault->retry_after) : NULL;
        e->fault.body = e->body;
        e->fault.retry_after = e->retry_after;
        e->left = fault->times == 0 ? 1 : fault->times;
    }
    pthread_mutex_unlock(&f->lock);
}

static void fake_fault_entry_free(fake_fault_entry *e)
{
    free(e->method);
    free(e->pattern);
    free(e->body);
    free(e->retry_after);
}

void fake_http_clear_faults(fake_http *f)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_faults; i++)
        fake_fault_entry_free(&f->faults[i]);
    f->n_faults = 0;
    pthread_mutex_unlock(&f->lock);
}

/* Takes the first live fault matching the request (copying it out); false when none. */
static bool fake_take_fault(fake_http *f, const fake_request *r, fake_fault *out, char **body,
                            char **retry_after)
{
    bool found = false;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_faults && !found; i++) {
        fake_fault_entry *e = &f->faults[i];
        if (e->left == 0 || !fake_method_matches(e->method, r->method) ||
            !fake_match(e->pattern, r->path, NULL))
            continue;
        found = true;
        *out = e->fault;
        *body = e->body ? xstrdup(e->body) : NULL;
        *retry_after = e->retry_after ? xstrdup(e->retry_after) : NULL;
        out->body = *body;
        out->retry_after = *retry_after;
        if (e->left > 0)
            e->left--;
    }
    pthread_mutex_unlock(&f->lock);
    return found;
}

/* ---- responses ----------------------------------------------------------------------------- */

void fake_response_status(fake_response *resp, int status)
{
    resp->status = status;
}

void fake_response_header(fake_response *resp, const char *name, const char *value)
{
    resp->headers = xrealloc(resp->headers, (resp->n_headers + 1) * sizeof *resp->headers);
    resp->headers[resp->n_headers].name = xstrdup(name);
    resp->headers[resp->n_headers].value = xstrdup(value);
    resp->n_headers++;
}

void fake_response_body(fake_response *resp, const void *data, size_t len)
{
    resp->body = xrealloc(resp->body, resp->body_len + len + 1);
    if (len)
        memcpy(resp->body + resp->body_len, data, len);
    resp->body_len += len;
    resp->body[resp->body_len] = 0;
}

void fake_response_json(fake_response *resp, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = NULL;
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    resp->status = status;
    fake_response_header(resp, "Content-Type", "application/json");
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    fake_response_body(resp, text, (size_t)n);
    free(text);
}

void fake_response_chunk(fake_response *resp, const void *data, size_t len, int delay_ms)
{
    resp->chunks = xrealloc(resp->chunks, (resp->n_chunks + 1) * sizeof *resp->chunks);
    fake_chunk *c = &resp->chunks[resp->n_chunks++];
    c->data = xcalloc(len + 1, 1);
    if (len)
        memcpy(c->data, data, len);
    c->len = len;
    c->delay_ms = delay_ms;
}

static void fake_response_clear(fake_response *resp)
{
    for (size_t i = 0; i < resp->n_headers; i++)
        free(resp->headers[i].name), free(resp->headers[i].value);
    free(resp->headers);
    free(resp->body);
    for (size_t i = 0; i < resp->n_chunks; i++)
        free(resp->chunks[i].data);
    free(resp->chunks);
    memset(resp, 0, sizeof *resp);
}

/* Streaming state for callback responses (chunked bodies, truncation). */
typedef struct fake_stream {
    fake_http *server;
    fake_chunk *chunks; /* owned */
    size_t n_chunks;
    size_t idx, off;
    bool slept;         /* the current chunk's delay has been served */
    size_t truncate_at; /* SIZE_MAX = no truncation */
    size_t sent;
} fake_stream;

static ssize_t fake_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    fake_stream *st = cls;
    for (;;) {
        if (st->sent >= st->truncate_at)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->idx >= st->n_chunks)
            return MHD_CONTENT_READER_END_OF_STREAM;
        fake_chunk *c = &st->chunks[st->idx];
        if (!st->slept) {
            st->slept = true;
            if (c->delay_ms > 0 && !fake_http_sleep(st->server, c->delay_ms))
                return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (st->off >= c->len) {
            st->idx++;
            st->off = 0;
            st->slept = false;
            continue;
        }
        size_t n = c->len - st->off;
        if (n > max)
            n = max;
        if (st->truncate_at != SIZE_MAX && st->sent + n > st->truncate_at)
            n = st->truncate_at - st->sent;
        memcpy(buf, c->data + st->off, n);
        st->off += n;
        st->sent += n;
        return (ssize_t)n;
    }
}

static void fake_stream_free(void *cls)
{
    fake_stream *st = cls;
    for (size_t i = 0; i < st->n_chunks; i++)
        free(st->chunks[i].data);
    free(st->chunks);
    free(st);
}

/* ---- the access handler -------------------------------------------------------------------- */

static void fake_log_append(fake_http *f, fake_request *r)
{
    pthread_mutex_lock(&f->lock);
    if (f->n_log == f->cap_log) {
        f->cap_log = f->cap_log ? f->cap_log * 2 : 64;
        f->log = xrealloc(f->log, f->cap_log * sizeof *f->log);
    }
    f->log[f->n_log++] = r;
    pthread_mutex_unlock(&f->lock);
}

static enum MHD_Result fake_answer(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version, const char *upload_data,
                                   size_t *upload_data_size, void **con_cls)
{
    (void)version;
    fake_http *f = cls;
    fake_conn *fc = *con_cls;
    if (!fc) {
        fc = xcalloc(1, sizeof *fc);
        *con_cls = fc;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        if (fc->len + n > FAKE_HTTP_MAX_BODY) {
            fc->too_large = true;
        } else {
            if (fc->len + n + 1 > fc->cap) {
                fc->cap = (fc->len + n + 1) * 2;
                fc->body = xrealloc(fc->body, fc->cap);
            }
            memcpy(fc->body + fc->len, upload_data, n);
            fc->len += n;
        }
        *upload_data_size = 0;
        return MHD_YES;
    }

    fake_request *r = xcalloc(1, sizeof *r);
    r->method = xstrdup(method);
    r->path = xstrdup(url);
    kv_collect qc = {&r->query, &r->n_query};
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, fake_collect_kv, &qc);
    kv_collect hc = {&r->headers, &r->n_headers};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, fake_collect_kv, &hc);
    r->body = xcalloc(fc->len + 1, 1);
    if (fc->len)
        memcpy(r->body, fc->body, fc->len);
    r->body_len = fc->len;

    fake_response resp = {.server = f, .status = 200};
    fake_fault fault;
    char *fault_body = NULL, *fault_retry = NULL;
    bool faulted = fake_take_fault(f, r, &fault, &fault_body, &fault_retry);

    if (faulted && fault.delay_ms > 0)
        fake_http_sleep(f, fault.delay_ms);
    if (fc->too_large) {
        fake_response_json(&resp, 413, "{\"message\":\"request body too large\"}");
    } else if (faulted && fault.drop) {
        r->status = 0;
        fake_log_append(f, r);
        free(fault_body);
        free(fault_retry);
        return MHD_NO; /* closes the connection without a response */
    } else if (faulted && fault.status) {
        fake_response_json(&resp, fault.status, "%s",
                           fault.body ? fault.body : "{\"message\":\"injected\"}");
    } else {
        fake_handler handler = NULL;
        void *harg = NULL;
        pthread_mutex_lock(&f->lock);
        for (size_t i = 0; i < f->n_routes; i++) {
            if (fake_method_matches(f->routes[i].method, method) &&
                fake_match(f->routes[i].pattern, url, r)) {
                handler = f->routes[i].handler;
                harg = f->routes[i].arg;
                break;
            }
        }
        pthread_mutex_unlock(&f->lock);
        if (handler)
            handler(harg, r, &resp);
        else
            fake_response_json(&resp, 404, "{\"message\":\"no route for %s %s\"}", method, url);
    }
    if (faulted && fault.retry_after)
        fake_response_header(&resp, "Retry-After", fault.retry_after);
    if (faulted && fault.invalid_json) {
        free(resp.body);
        resp.body = NULL;
        resp.body_len = 0;
        for (size_t i = 0; i < resp.n_chunks; i++)
            free(resp.chunks[i].data);
        free(resp.chunks);
        resp.chunks = NULL;
        resp.n_chunks = 0;
        const char *junk = "<html>502 Bad Gateway</html> {not json";
        fake_response_body(&resp, junk, strlen(junk));
    }
    r->status = resp.status;
    size_t answered = resp.body_len;
    for (size_t i = 0; i < resp.n_chunks; i++)
        answered += resp.chunks[i].len;
    r->response = xcalloc(answered + 1, 1);
    if (resp.body_len)
        memcpy(r->response, resp.body, resp.body_len);
    r->response_len = resp.body_len;
    for (size_t i = 0; i < resp.n_chunks; i++) {
        memcpy(r->response + r->response_len, resp.chunks[i].data, resp.chunks[i].len);
        r->response_len += resp.chunks[i].len;
    }

    struct MHD_Response *mr;
    bool truncate = faulted && fault.truncate;
    if (resp.n_chunks > 0 || truncate) {
        fake_stream *st = xcalloc(1, sizeof *st);
        st->server = f;
        st->truncate_at = SIZE_MAX;
        size_t total = resp.body_len;
        st->chunks = xcalloc(resp.n_chunks + 1, sizeof *st->chunks);
        if (resp.body_len) {
            st->chunks[st->n_chunks++] = (fake_chunk){resp.body, resp.body_len, 0};
            resp.body = NULL;
            resp.body_len = 0;
        }
        for (size_t i = 0; i < resp.n_chunks; i++) {
            st->chunks[st->n_chunks++] = resp.chunks[i];
            total += resp.chunks[i].len;
        }
        free(resp.chunks);
        resp.chunks = NULL;
        resp.n_chunks = 0;
        if (truncate)
            st->truncate_at = total / 2;
        /* Truncated: announce the full length so the client can tell the body was cut. */
        mr = MHD_create_response_from_callback(truncate ? (uint64_t)total : MHD_SIZE_UNKNOWN,
                                               16 * 1024, fake_stream_read, st, fake_stream_free);
    } else {
        mr = MHD_create_response_from_buffer(resp.body_len, resp.body ? resp.body : (void *)"",
                                             MHD_RESPMEM_MUST_COPY);
    }
    for (size_t i = 0; i < resp.n_headers; i++)
        MHD_add_response_header(mr, resp.headers[i].name, resp.headers[i].value);
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp.status, mr);
    MHD_destroy_response(mr);
    fake_response_clear(&resp);
    free(fault_body);
    free(fault_retry);
    fake_log_append(f, r);
    return ret;
}

static void fake_request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                                   enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    fake_conn *fc = *con_cls;
    if (fc) {
        free(fc->body);
        free(fc);
        *con_cls = NULL;
    }
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

fake_http *fake_http_start(void)
{
    fake_http *f = xcalloc(1, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    sbx_cond_init_mono(&f->wake);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                                 NULL, NULL, fake_answer, f, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                                 fake_request_completed, f, MHD_OPTION_CONNECTION_TIMEOUT,
                                 (unsigned)FAKE_HTTP_CONNECTION_TIMEOUT_S, MHD_OPTION_END);
    if (!f->daemon) {
        pthread_mutex_destroy(&f->lock);
        pthread_cond_destroy(&f->wake);
        free(f);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_BIND_PORT);
    f->port = info ? info->port : 0;
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->port);
    return f;
}

void fake_http_stop(fake_http *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stopping = true;
    pthread_cond_broadcast(&f->wake);
    pthread_mutex_unlock(&f->lock);
    MHD_stop_daemon(f->daemon);
    for (size_t i = 0; i < f->n_routes; i++)
        free(f->routes[i].method), free(f->routes[i].pattern);
    for (size_t i = 0; i < f->n_faults; i++)
        fake_fault_entry_free(&f->faults[i]);
    for (size_t i = 0; i < f->n_log; i++)
        fake_request_free(f->log[i]);
    free(f->log);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

const char *fake_http_url(const fake_http *f)
{
    return f->url;
}
int fake_http_port(const fake_http *f)
{
    return f->port;
}

bool fake_http_sleep(fake_http *f, int ms)
{
    struct timespec until = sbx_mono_after_ms(ms);
    pthread_mutex_lock(&f->lock);
    while (!f->stopping) {
        if (pthread_cond_timedwait(&f->wake, &f->lock, &until) == ETIMEDOUT)
            break;
    }
    bool ok = !f->stopping;
    pthread_mutex_unlock(&f->lock);
    return ok;
}

/* ---- the log ------------------------------------------------------------------------------- */

size_t fake_http_log_count(fake_http *f)
{
    pthread_mutex_lock(&f->lock);
    size_t n = f->n_log;
    pthread_mutex_unlock(&f->lock);
    return n;
}

const fake_request *fake_http_log_at(fake_http *f, size_t i)
{
    pthread_mutex_lock(&f->lock);
    const fake_request *r = i < f->n_log ? f->log[i] : NULL;
    pthread_mutex_unlock(&f->lock);
    return r;
}

size_t fake_http_log_matching(fake_http *f, const char *method, const char *pattern)
{
    size_t n = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_log; i++)
        if (fake_method_matches(method, f->log[i]->method) &&
            fake_match(pattern, f->log[i]->path, NULL))
            n++;
    pthread_mutex_unlock(&f->lock);
    return n;
}

const fake_request *fake_http_log_last(fake_http *f, const char *method, const char *pattern)
{
    const fake_request *r = NULL;
    pthread_mutex_lock(&f->lock);
    for (size_t i = f->n_log; i-- > 0;) {
        if (fake_method_matches(method, f->log[i]->method) &&
            fake_match(pattern, f->log[i]->path, NULL)) {
            r = f->log[i];
            break;
        }
    }
    pthread_mutex_unlock(&f->lock);
    return r;
}

void fake_http_log_clear(fake_http *f)
{
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_log; i++)
        fake_request_free(f->log[i]);
    f->n_log = 0;
    pthread_mutex_unlock(&f->lock);
}

static bool fake_contains(const char *hay, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0 || len < n)
        return false;
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return true;
    return false;
}

bool fake_http_log_contains(fake_http *f, const char *needle)
{
    bool found = false;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_log && !found; i++) {
        fake_request *r = f->log[i];
        found = fake_contains(r->method, strlen(r->method), needle) ||
                fake_contains(r->path, strlen(r->path), needle) ||
                fake_contains((const char *)r->body, r->body_len, needle);
        for (size_t k = 0; k < r->n_query && !found; k++)
            found = fake_contains(r->query[k].value, strlen(r->query[k].value), needle);
        for (size_t k = 0; k < r->n_headers && !found; k++)
            found = fake_contains(r->headers[k].value, strlen(r->headers[k].value), needle);
    }
    pthread_mutex_unlock(&f->lock);
    return found;
}

/* ---- base64 -------------------------------------------------------------------------------- */

char *fake_base64_encode(const uint8_t *data, size_t len)
{
    char *out = xcalloc(4 * ((len + 2) / 3) + 1, 1);
    EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    return out;
}

uint8_t *fake_base64_decode(const char *text, size_t *out_len)
{
    size_t n = strlen(text);
    if (n % 4 != 0)
        return NULL;
    uint8_t *out = xcalloc(n / 4 * 3 + 1, 1);
    int got = EVP_DecodeBlock(out, (const unsigned char *)text, (int)n);
    if (got < 0) {
        free(out);
        return NULL;
    }
    size_t len = (size_t)got;
    if (n >= 1 && text[n - 1] == '=')
        len--;
    if (n >= 2 && text[n - 2] == '=')
        len--;
    *out_len = len;
    return out;
}
