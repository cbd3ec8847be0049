/* call.c - sbx-worker's gRPC calls, one per HTTP/2 stream: the nghttp2 stream callbacks that
 * make a call and fill it (method from :path, content-type, grpc-encoding, grpc-timeout,
 * authorization), the checks once the headers are complete (a plain HTTP error for what is not
 * gRPC, caller authentication before any body is buffered), the request body within the
 * connection's and the worker's budgets, dispatch of the complete request (Health/Check and
 * Watch: health.c; reflection; or a job for Execute, ExecuteStream and Describe: jobs.c), and the
 * response: headers, messages, trailers, or a Trailers-Only status. Loop thread only, except
 * the reference count a job holds.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "core/limits.h"
#include "worker/observe.h"
#include "worker/reflect.h"
#include "worker/server_impl.h"
#include "worker/worker_internal.h"

static const char PATH_EXECUTE[] = "/sbx.v1.Execution/Execute";
static const char PATH_EXECUTE_STREAM[] = "/sbx.v1.Execution/ExecuteStream";
static const char PATH_DESCRIBE[] = "/sbx.v1.Execution/Describe";
static const char PATH_HEALTH_CHECK[] = "/grpc.health.v1.Health/Check";
static const char PATH_HEALTH_WATCH[] = "/grpc.health.v1.Health/Watch";
static const char PATH_REFLECTION_V1[] =
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
static const char PATH_REFLECTION_V1ALPHA[] =
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";

/* ---- calls ------------------------------------------------------------------------------- */

static worker_rpc rpc_of(enum rpc_method m)
{
    return m == RPC_EXECUTE          ? WORKER_RPC_EXECUTE
           : m == RPC_EXECUTE_STREAM ? WORKER_RPC_EXECUTE_STREAM
           : m == RPC_DESCRIBE       ? WORKER_RPC_DESCRIBE
           : m == RPC_HEALTH_CHECK   ? WORKER_RPC_HEALTH_CHECK
           : m == RPC_HEALTH_WATCH   ? WORKER_RPC_HEALTH_WATCH
           : m == RPC_REFLECTION     ? WORKER_RPC_REFLECTION
                                     : WORKER_RPC_OTHER;
}

/* The request bytes c's caller holds, when its share is counted (several callers), or NULL. */
static size_t *caller_held(const call *c)
{
    sbx_worker *w = c->w;
    return c->caller != NULL && w->caller_buffered != NULL
               ? &w->caller_buffered[c->caller - w->auth.callers]
               : NULL;
}

void worker_call_unref(call *c)
{
    if (atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    /* Both the stream and the job are done (the loop thread drops the last reference): the
     * status the client got is the decided one, else the final one, else it went away. */
    int final_status = c->obs.status_set ? c->obs.grpc_status
                       : c->final        ? c->grpc_status
                                         : SBX_GRPC_CANCELLED;
    worker_call_obs_end(c->w->obs, &c->obs, rpc_of(c->method), c->req, final_status, c->w->cfg);
    c->w->buffered -= c->req_charge + c->out_charge; /* the body went at worker_call_detach */
    if (!c->authenticated)
        c->w->unauth_buffered -= c->out_charge;
    size_t *held = caller_held(c);
    if (held != NULL)
        *held -= c->req_charge + c->out_charge;
    free(c->authorization);
    free(c->in);
    free(c->out);
    free(c->grpc_message);
    sbx_request_free(c->req);
    free(c);
}

/* Drops the request bytes a call buffers and gives their room back (loop thread). */
static void call_release_in(call *c)
{
    if (c->conn)
        c->conn->buffered -= c->in_cap;
    c->w->buffered -= c->in_cap;
    if (!c->authenticated)
        c->w->unauth_buffered -= c->in_cap;
    size_t *held = caller_held(c);
    if (held != NULL)
        *held -= c->in_cap;
    free(c->in);
    c->in = NULL;
    c->in_len = c->in_cap = 0;
}

/* Detaches a call from its stream/connection (loop thread): a running job is cancelled. */
void worker_call_detach(call *c)
{
    conn *cn = c->conn;
    if (!cn)
        return;
    call_release_in(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        cn->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->conn = NULL;
    cn->n_calls--;
    if (!cn->calls)
        cn->idle_since_us = sbx_monotonic_us();
    if (c->deadline_us)
        cn->w->calls_with_deadline--;
    c->cancel = 1;
    worker_call_unref(c);
}

/* Charges the growth of c's answer buffer to the worker's budgets (the total, the
 * unauthenticated one, c's caller's share); worker_call_unref gives it back. What a client does
 * not read stays in the worker, so it counts like the requests it sends. */
static void charge_out(call *c)
{
    size_t grow = c->out_cap - c->out_charge;
    sbx_worker *w = c->w;
    c->out_charge = c->out_cap;
    w->buffered += grow;
    if (!c->authenticated)
        w->unauth_buffered += grow;
    size_t *held = caller_held(c);
    if (held != NULL)
        *held += grow;
}

bool worker_call_append(call *c, const uint8_t *data, size_t len)
{
    if (c->out_off > 0 && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + len > c->out_cap) {
        if (c->out_off > 0) { /* compact before growing */
            memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
            c->out_len -= c->out_off;
            c->out_off = 0;
        }
        if (c->out_len + len > c->out_cap) {
            size_t cap = c->out_cap ? c->out_cap : 4096;
            while (cap < c->out_len + len)
                cap *= 2;
            uint8_t *p = realloc(c->out, cap);
            if (!p)
                return false;
            c->out = p;
            c->out_cap = cap;
            charge_out(c);
        }
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
    c->obs.bytes_out += len;
    return true;
}

static void mark_dirty(conn *cn)
{
    if (cn)
        cn->dirty = true;
}

#define NV(name, value)                                                                            \
    {                                                                                              \
        (uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value),                    \
            NGHTTP2_NV_FLAG_NO_COPY_NAME                                                           \
    }

static ssize_t response_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                             size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                             void *user_data)
{
    (void)user_data;
    call *c = source->ptr;
    size_t avail = c->out_len - c->out_off;
    if (avail == 0) {
        if (!c->final) {
            c->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        *data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        char status[16];
        snprintf(status, sizeof status, "%d", c->grpc_status);
        const char *msg = c->grpc_message ? c->grpc_message : "";
        nghttp2_nv trailers[2] = {NV("grpc-status", status), NV("grpc-message", msg)};
        if (nghttp2_submit_trailer(session, stream_id, trailers, msg[0] ? 2 : 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return 0;
    }
    size_t n = avail < length ? avail : length;
    memcpy(buf, c->out + c->out_off, n);
    c->out_off += n;
    return (ssize_t)n;
}

/* Starts a normal response (headers now, messages as they are appended, trailers at the end). */
void worker_call_start_response(call *c)
{
    if (c->response_started || !c->conn)
        return;
    nghttp2_nv hdrs[2] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = c, .read_callback = response_read};
    if (nghttp2_submit_response(c->conn->h2, c->stream_id, hdrs, 2, &prd) == 0)
        c->response_started = true;
    mark_dirty(c->conn);
}

void worker_call_resume(call *c)
{
    if (c->conn && c->deferred) {
        c->deferred = false;
        nghttp2_session_resume_data(c->conn->h2, c->stream_id);
    }
    mark_dirty(c->conn);
}

/* Ends the call with a gRPC status (and the messages already queued). Before any header went
 * out this is a Trailers-Only response. */
void worker_call_decide(call *c, int status, const char *fmt, ...)
{
    if (c->decided)
        return;
    c->decided = true;
    c->cancel = 1; /* a job still running for this call is abandoned (no-op when finished) */
    char text[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
    }
    worker_call_obs_decided(&c->obs, status, text);
    char encoded[3 * sizeof text];
    sbx_grpc_percent_encode(text, encoded, sizeof encoded);
    if (!c->conn)
        return;
    if (!c->response_started) {
        char st[16];
        snprintf(st, sizeof st, "%d", status);
        nghttp2_nv hdrs[4] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                              NV("grpc-status", st), NV("grpc-message", encoded)};
        nghttp2_submit_response(c->conn->h2, c->stream_id, hdrs, encoded[0] ? 4 : 3, NULL);
        c->response_started = true;
        mark_dirty(c->conn);
        return;
    }
    c->final = true;
    c->grpc_status = status;
    free(c->grpc_message);
    c->grpc_message = strdup(encoded);
    worker_call_resume(c);
}

/* A non-gRPC request on an HTTP/2 connection: a plain HTTP error, then the stream ends. */
static void call_http_error(call *c, const char *status)
{
    c->decided = true;
    worker_call_obs_decided(&c->obs, SBX_GRPC_UNIMPLEMENTED, "not a gRPC request");
    nghttp2_nv hdrs[1] = {NV(":status", status)};
    nghttp2_submit_response(c->conn->h2, c->stream_id, hdrs, 1, NULL);
    c->response_started = true;
    mark_dirty(c->conn);
}

/* Sends one complete message then grpc-status OK. */
void worker_call_reply(call *c, const ProtobufCMessage *m)
{
    size_t len;
    uint8_t *framed = sbx_grpc_frame_message(m, &len);
    if (!framed || !worker_call_append(c, framed, len)) {
        free(framed);
        worker_call_decide(c, SBX_GRPC_INTERNAL, "worker: out of memory building the response");
        return;
    }
    free(framed);
    c->decided = true;
    c->final = true;
    c->grpc_status = SBX_GRPC_OK;
    worker_call_start_response(c);
    worker_call_resume(c);
}

/* ---- request handling ------------------------------------------------------------------ */

static const worker_caller *authenticate(call *c, bool *ok)
{
    sbx_worker *w = c->conn->w;
    *ok = true;
    if (!w->auth.required)
        return NULL;
    if (c->auth_too_long) {
        *ok = false;
        worker_call_decide(c, SBX_GRPC_UNAUTHENTICATED, "authorization header longer than %d bytes",
                           WORKER_MAX_AUTH_HEADER);
        return NULL;
    }
    if (c->authorization) {
        const worker_caller *caller =
            worker_auth_by_token(&w->auth, c->authorization, c->authorization_len);
        if (!caller) {
            *ok = false;
            worker_call_decide(c, SBX_GRPC_UNAUTHENTICATED,
                               "the bearer token in the authorization header is not accepted");
        }
        return caller;
    }
    if (c->conn->cert_caller)
        return c->conn->cert_caller;
    *ok = false;
    if (c->conn->cert_cn[0])
        worker_call_decide(c, SBX_GRPC_UNAUTHENTICATED,
                           "client certificate CN=%s is not a configured caller", c->conn->cert_cn);
    else
        worker_call_decide(
            c, SBX_GRPC_UNAUTHENTICATED,
            "no credentials: present a client certificate signed by the configured CA "
            "or an authorization: Bearer token");
    return NULL;
}

/* ---- reflection (a stream that outlives one message) ------------------------------------ */

/* Resets c's stream (loop thread): its trailers would wait behind answers its client does not
 * read, for ever; the reset frees the call and what it holds, and cancels its job. */
static void reset_stream(call *c)
{
    c->cancel = 1;
    if (c->conn != NULL) {
        nghttp2_submit_rst_stream(c->conn->h2, NGHTTP2_FLAG_NONE, c->stream_id,
                                  NGHTTP2_ENHANCE_YOUR_CALM);
        mark_dirty(c->conn);
    }
}

bool worker_call_out_admitted(call *c)
{
    sbx_worker *w = c->w;
    size_t *held = caller_held(c);
    size_t share = WORKER_CALLER_SHARE(w->limits.buffer_total_max);
    if (w->buffered > w->limits.buffer_total_max)
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "the worker holds %zu bytes of requests and of answers their clients "
                           "have not read (limit %zu): read each answer as it arrives, or retry "
                           "later or on another worker",
                           w->buffered, w->limits.buffer_total_max);
    else if (held != NULL && *held > share)
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "caller '%s' holds %zu bytes of requests and of answers it has not "
                           "read (one caller may hold %zu of the worker's %zu; the rest is kept "
                           "for other callers): read each answer as it arrives",
                           c->caller->config->name ? c->caller->config->name : "?", *held, share,
                           w->limits.buffer_total_max);
    else if (!c->authenticated && w->unauth_buffered > WORKER_UNAUTHENTICATED_BUFFER_MAX)
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "unauthenticated calls hold %zu bytes of unread answers (limit %u): "
                           "read each answer as it arrives",
                           w->unauth_buffered, WORKER_UNAUTHENTICATED_BUFFER_MAX);
    else
        return true;
    reset_stream(c);
    return false;
}

/* ServerReflectionInfo is a bidirectional stream: each complete request message is answered at
 * once, before the client half-closes (grpcurl and others wait for each answer). */
static void reflection_feed(call *c)
{
    while (!c->decided && c->in_len >= SBX_GRPC_PREFIX_LEN) {
        size_t mlen = ((size_t)c->in[1] << 24) | ((size_t)c->in[2] << 16) |
                      ((size_t)c->in[3] << 8) | c->in[4];
        if (c->in[0] != 0) {
            worker_call_decide(c, SBX_GRPC_INTERNAL, "compressed or flagged reflection message");
            return;
        }
        if (mlen > c->w->max_message) {
            worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                               "reflection request larger than %zu bytes", c->w->max_message);
            return;
        }
        if (c->in_len - SBX_GRPC_PREFIX_LEN < mlen)
            return; /* the rest of this message is still on its way */
        if (c->out_len - c->out_off >= WORKER_REFLECTION_PENDING_MAX) {
            worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                               "%zu bytes of reflection answers are waiting for the client to "
                               "read them (limit %u): read each answer before sending more",
                               c->out_len - c->out_off, WORKER_REFLECTION_PENDING_MAX);
            reset_stream(c);
            return;
        }
        size_t len = 0;
        uint8_t *answer = worker_reflection_answer(c->in + SBX_GRPC_PREFIX_LEN, mlen, &len);
        if (!answer || !worker_call_append(c, answer, len)) {
            free(answer);
            worker_call_decide(c, SBX_GRPC_INTERNAL, "worker: out of memory answering reflection");
            return;
        }
        free(answer);
        if (!worker_call_out_admitted(c))
            return;
        size_t used = SBX_GRPC_PREFIX_LEN + mlen;
        memmove(c->in, c->in + used, c->in_len - used);
        c->in_len -= used;
        worker_call_start_response(c);
        worker_call_resume(c);
    }
}

static void call_dispatch_body(call *c);

/* The whole request arrived (END_STREAM): check it and answer or queue its job; its bytes are
 * dropped then (a job holds the decoded request). */
static void call_dispatch(call *c)
{
    call_dispatch_body(c);
    call_release_in(c);
}

static void call_dispatch_body(call *c)
{
    sbx_worker *w = c->conn->w;
    if (c->decided)
        return;
    if (!w->auth.required)
        worker_conn_prove(c->conn);    /* every complete request is as authenticated as it gets */
    if (c->method == RPC_REFLECTION) { /* every message was answered as it arrived */
        if (c->in_len > 0) {
            worker_call_decide(c, SBX_GRPC_INTERNAL,
                               "the stream ended inside a reflection request");
            return;
        }
        c->decided = true;
        c->final = true;
        c->grpc_status = SBX_GRPC_OK;
        worker_call_start_response(c);
        worker_call_resume(c);
        return;
    }
    /* A Health/Check that carries no message at all is read as HealthCheckRequest{} (the
     * overall health): the one place the worker is lenient, because HAProxy's h2 checks
     * (deploy/haproxy.cfg) cannot send the five NUL bytes of an empty gRPC message. */
    static const uint8_t no_message[1] = {0};
    const uint8_t *msg = no_message;
    size_t mlen = 0;
    if (c->in_len > 0 || c->method != RPC_HEALTH_CHECK) {
        if (c->in_len < SBX_GRPC_PREFIX_LEN) {
            worker_call_decide(c, SBX_GRPC_INTERNAL,
                               "expected exactly one request message, got none");
            return;
        }
        mlen = ((size_t)c->in[1] << 24) | ((size_t)c->in[2] << 16) | ((size_t)c->in[3] << 8) |
               c->in[4];
        if (mlen != c->in_len - SBX_GRPC_PREFIX_LEN) {
            worker_call_decide(c, SBX_GRPC_INTERNAL,
                               "expected exactly one request message: the length prefix says %zu "
                               "bytes, the stream carried %zu",
                               mlen, c->in_len - SBX_GRPC_PREFIX_LEN);
            return;
        }
        msg = c->in + SBX_GRPC_PREFIX_LEN;
    }

    if (c->method == RPC_HEALTH_WATCH) {
        worker_health_watch(c, msg, mlen);
        return;
    }
    if (c->method == RPC_HEALTH_CHECK) {
        worker_health_check(c, msg, mlen);
        return;
    }

    if (w->draining) {
        worker_call_decide(c, SBX_GRPC_UNAVAILABLE,
                           "the worker is draining; retry on another worker");
        return;
    }
    if (!c->authenticated) { /* checked when the headers arrived */
        worker_call_decide(c, SBX_GRPC_UNAUTHENTICATED, "the call did not authenticate");
        return;
    }
    const worker_caller *caller = c->caller;
    worker_conn_prove(c->conn);

    if (c->method == RPC_EXECUTE || c->method == RPC_EXECUTE_STREAM) {
        sbx_error err = {0};
        sbx_status st = sbx_request_decode(msg, mlen, w->max_message, &c->req, &err);
        if (st != SBX_OK) {
            worker_call_decide(c, sbx_grpc_code_for_status(st), "%s", err.message);
            return;
        }
        c->req_charge = mlen; /* held until the call is freed; its body goes now */
        w->buffered += mlen;
        size_t *held = caller_held(c);
        if (held != NULL)
            *held += mlen;
        const char *subject =
            c->req->principal && c->req->principal->subject ? c->req->principal->subject : "";
        if (caller && !worker_caller_may_assert(caller, subject)) {
            worker_call_decide(c, SBX_GRPC_PERMISSION_DENIED,
                               "caller '%s' may not assert principal subject '%.200s'",
                               caller->config->name ? caller->config->name : "?", subject);
            return;
        }
        if (caller && !worker_caller_may_choose_identity(caller, c->req->principal)) {
            worker_call_decide(c, SBX_GRPC_PERMISSION_DENIED, WORKER_IDENTITY_REFUSAL,
                               caller->config->name ? caller->config->name : "?");
            return;
        }
    }
    if (c->method == RPC_EXECUTE_STREAM)
        worker_call_start_response(c); /* headers now: the client sees the stream open */
    worker_start_job(w, c);
}

/* ---- nghttp2 callbacks ----------------------------------------------------------------- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    conn *cn = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (!cn->proven && cn->n_calls >= WORKER_UNPROVEN_STREAMS) {
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_REFUSED_STREAM);
        return 0; /* no call: its headers and data are ignored */
    }
    call *c = calloc(1, sizeof *c);
    if (!c)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    cn->n_calls++;
    atomic_init(&c->refs, 1);
    worker_call_obs_begin(&c->obs);
    c->w = cn->w;
    c->conn = cn;
    c->stream_id = frame->hd.stream_id;
    c->next = cn->calls;
    if (cn->calls)
        cn->calls->prev = c;
    cn->calls = c;
    nghttp2_session_set_stream_user_data(session, c->stream_id, c);
    return 0;
}

static bool hdr_is(const uint8_t *name, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user_data)
{
    (void)flags;
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    call *c = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!c)
        return 0;
    if (hdr_is(name, namelen, ":method")) {
        c->is_post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
    } else if (hdr_is(name, namelen, ":path")) {
#define PATH_IS(p) (valuelen == sizeof(p) - 1 && memcmp(value, p, valuelen) == 0)
        c->method = PATH_IS(PATH_EXECUTE)          ? RPC_EXECUTE
                    : PATH_IS(PATH_EXECUTE_STREAM) ? RPC_EXECUTE_STREAM
                    : PATH_IS(PATH_DESCRIBE)       ? RPC_DESCRIBE
                    : PATH_IS(PATH_HEALTH_CHECK)   ? RPC_HEALTH_CHECK
                    : PATH_IS(PATH_HEALTH_WATCH)   ? RPC_HEALTH_WATCH
                    : PATH_IS(PATH_REFLECTION_V1) || PATH_IS(PATH_REFLECTION_V1ALPHA)
                        ? RPC_REFLECTION
                        : RPC_UNKNOWN;
#undef PATH_IS
    } else if (hdr_is(name, namelen, "content-type")) {
        static const char ct[] = "application/grpc";
        c->is_grpc = valuelen >= sizeof ct - 1 && memcmp(value, ct, sizeof ct - 1) == 0 &&
                     (valuelen == sizeof ct - 1 || value[sizeof ct - 1] == '+' ||
                      value[sizeof ct - 1] == ';');
    } else if (hdr_is(name, namelen, "grpc-encoding")) {
        c->bad_encoding = !(valuelen == 8 && memcmp(value, "identity", 8) == 0);
    } else if (hdr_is(name, namelen, "grpc-timeout")) {
        int64_t us;
        if (!sbx_grpc_parse_timeout((const char *)value, valuelen, &us))
            c->bad_timeout = true;
        else {
            if (!c->deadline_us && c->conn)
                c->conn->w->calls_with_deadline++;
            c->deadline_us = sbx_monotonic_us() + (us > 0 ? us : 1);
        }
    } else if (hdr_is(name, namelen, "authorization")) {
        if (valuelen > WORKER_MAX_AUTH_HEADER) {
            c->auth_too_long = true;
        } else if (!c->authorization) {
            c->authorization = malloc(valuelen + 1);
            if (!c->authorization)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            memcpy(c->authorization, value, valuelen);
            c->authorization[valuelen] = '\0';
            c->authorization_len = valuelen;
        }
    }
    return 0;
}

/* The request headers are complete: refuse what is not a gRPC call we serve. */
static void call_headers_done(call *c)
{
    if (!c->is_post) {
        call_http_error(c, "405");
        return;
    }
    if (!c->is_grpc) {
        call_http_error(c, "415");
        return;
    }
    if (c->method == RPC_UNKNOWN || c->method == RPC_NONE) {
        worker_call_decide(c, SBX_GRPC_UNIMPLEMENTED, "unknown method");
        return;
    }
    if (c->bad_encoding) {
        worker_call_decide(c, SBX_GRPC_UNIMPLEMENTED,
                           "grpc-encoding is not supported: send uncompressed messages (identity)");
        return;
    }
    if (c->bad_timeout) {
        worker_call_decide(c, SBX_GRPC_INTERNAL, "malformed grpc-timeout header");
        return;
    }
    /* Authenticate now, before any of the body is buffered: a caller without credentials never
     * gets room for its request. Health and reflection answer anyone (probes, tools), with a
     * small budget of their own (WORKER_UNAUTHENTICATED_*) when authentication is required. */
    sbx_worker *w = c->w;
    if (c->method == RPC_EXECUTE || c->method == RPC_EXECUTE_STREAM || c->method == RPC_DESCRIBE) {
        _Static_assert(sizeof c->obs.cert_cn == sizeof c->conn->cert_cn, "the CN is copied whole");
        memcpy(c->obs.cert_cn, c->conn->cert_cn, sizeof c->obs.cert_cn);
        bool ok;
        c->caller = authenticate(c, &ok);
        if (c->caller)
            c->obs.caller = c->caller->config->name;
        c->authenticated = ok;
        if (c->caller)
            worker_conn_prove(
                c->conn);       /* a configured caller's credentials: servable from now on */
        free(c->authorization); /* checked: not kept for the life of the call */
        c->authorization = NULL;
    } else {
        c->authenticated = !w->auth.required;
    }
}

/* Refuses a stream whose next request bytes the budgets have no room for (RESOURCE_EXHAUSTED)
 * and returns false; true when `grow` more bytes fit. */
static bool budget_admits(call *c, size_t grow)
{
    sbx_worker *w = c->w;
    conn *cn = c->conn;
    if (cn->buffered + grow > w->limits.conn_buffer_max) {
        worker_call_decide(
            c, SBX_GRPC_RESOURCE_EXHAUSTED,
            "this connection's unfinished requests hold %zu bytes and this one needs %zu "
            "more (limit %zu per connection): send fewer large requests at once",
            cn->buffered, grow, w->limits.conn_buffer_max);
        return false;
    }
    if (w->buffered + grow > w->limits.buffer_total_max) {
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "the worker holds %zu bytes of requests (limit %zu): retry later or on "
                           "another worker",
                           w->buffered, w->limits.buffer_total_max);
        return false;
    }
    size_t *held = caller_held(c);
    size_t share = WORKER_CALLER_SHARE(w->limits.buffer_total_max);
    if (held != NULL && *held + grow > share) {
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "caller '%s' holds %zu bytes of requests and this one needs %zu more "
                           "(one caller may hold %zu of the worker's %zu; the rest is kept for "
                           "other callers): send fewer large requests at once",
                           c->caller->config->name ? c->caller->config->name : "?", *held, grow,
                           share, w->limits.buffer_total_max);
        return false;
    }
    if (!c->authenticated && w->unauth_buffered + grow > WORKER_UNAUTHENTICATED_BUFFER_MAX) {
        worker_call_decide(
            c, SBX_GRPC_RESOURCE_EXHAUSTED,
            "unauthenticated calls hold %zu bytes of requests (limit %u): retry later",
            w->unauth_buffered, WORKER_UNAUTHENTICATED_BUFFER_MAX);
        return false;
    }
    return true;
}

/* Buffers request bytes of a call (loop thread). True when they were kept, so their
 * flow-control window may be granted again; false when they were dropped (the call is decided,
 * refused now, or over a budget). */
static bool call_body(call *c, const uint8_t *data, size_t len)
{
    sbx_worker *w = c->conn->w;
    if (c->decided) {
        call_release_in(c);
        return false;
    }
    size_t max_message = c->authenticated ? w->max_message : WORKER_UNAUTHENTICATED_MESSAGE_MAX;
    size_t limit = SBX_GRPC_PREFIX_LEN + max_message;
    /* A reflection stream carries message after message: its buffer holds the start of the
     * next one and the frame that brought it, whatever the frames' boundaries. */
    if (c->method == RPC_REFLECTION)
        limit += WORKER_MAX_FRAME;
    if (len > limit - c->in_len) {
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "request message larger than the worker's max_message_bytes (%zu)",
                           max_message);
        call_release_in(c);
        return false;
    }
    if (c->in_len + len > c->in_cap) {
        size_t cap = c->in_cap ? c->in_cap : SBX_BROKER_DEFAULT_QUEUE_DEPTH;
        while (cap < c->in_len + len)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        if (c->in_len >= SBX_GRPC_PREFIX_LEN) { /* never more than the message announced */
            size_t whole =
                SBX_GRPC_PREFIX_LEN + (((size_t)c->in[1] << 24) | ((size_t)c->in[2] << 16) |
                                       ((size_t)c->in[3] << 8) | c->in[4]);
            if (cap > whole && whole >= c->in_len + len && c->method != RPC_REFLECTION)
                cap = whole;
        }
        if (!budget_admits(c, cap - c->in_cap)) {
            call_release_in(c);
            return false;
        }
        uint8_t *p = realloc(c->in, cap);
        if (!p) {
            worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                               "worker: out of memory for the request");
            call_release_in(c);
            return false;
        }
        size_t grow = cap - c->in_cap;
        c->conn->buffered += grow;
        w->buffered += grow;
        if (!c->authenticated)
            w->unauth_buffered += grow;
        size_t *held = caller_held(c);
        if (held != NULL)
            *held += grow;
        c->in = p;
        c->in_cap = cap;
    }
    bool had_prefix = c->in_len >= SBX_GRPC_PREFIX_LEN;
    memcpy(c->in + c->in_len, data, len);
    c->in_len += len;
    if (c->method == RPC_REFLECTION) {
        reflection_feed(c);
    } else if (!had_prefix && c->in_len >= SBX_GRPC_PREFIX_LEN) {
        size_t mlen = ((size_t)c->in[1] << 24) | ((size_t)c->in[2] << 16) |
                      ((size_t)c->in[3] << 8) | c->in[4];
        if (c->in[0] & 1)
            worker_call_decide(
                c, SBX_GRPC_INTERNAL,
                "compressed message without a grpc-encoding: this worker accepts only "
                "uncompressed messages");
        else if (c->in[0] != 0)
            worker_call_decide(c, SBX_GRPC_INTERNAL, "invalid message flags 0x%02x", c->in[0]);
        else if (mlen > max_message)
            worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                               "request message of %zu bytes is larger than the worker's "
                               "max_message_bytes (%zu)",
                               mlen, max_message);
    }
    if (c->decided) {
        call_release_in(c);
        return false;
    }
    return true;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user_data)
{
    (void)flags;
    (void)user_data;
    call *c = nghttp2_session_get_stream_user_data(session, stream_id);
    /* Windows are granted back only for what is kept: a refused stream stalls once its window
     * is spent, while the connection's window still moves so other streams go on. */
    if (c && c->conn && call_body(c, data, len))
        nghttp2_session_consume(session, stream_id, len);
    else
        nghttp2_session_consume_connection(session, len);
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    call *c = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!c || !c->conn)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        call_headers_done(c);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
        call_dispatch(c);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *user_data)
{
    (void)error_code;
    (void)user_data;
    call *c = nghttp2_session_get_stream_user_data(session, stream_id);
    if (c) {
        nghttp2_session_set_stream_user_data(session, stream_id, NULL);
        worker_call_detach(c);
    }
    return 0;
}

nghttp2_session_callbacks *worker_h2_callbacks(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    return cb;
}
