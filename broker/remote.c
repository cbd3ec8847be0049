/* remote.c - the remote broker: a gRPC client of sbx-worker over HTTP/2 with libcurl
 * (DESIGN §6). One curl multi handle, owned by one transfer thread, keeps ONE connection to the
 * worker and multiplexes every concurrent submit on it (h2c with prior knowledge to loopback
 * only, h2 over TLS with ALPN and certificate verification elsewhere). Deadlines travel as
 * grpc-timeout; output streams through the hooks' callback (ExecuteStream); transport failures
 * become BROKER completions and gRPC statuses map back to the contract's codes. A retry resends
 * the same task_id, which the worker deduplicates, so it can never run a request twice.
 * Responses are decoded with a bound (max message size). This file never talks to providers.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "core/clock.h"
#include "broker/remote_wire.h"
#include "broker/tasks.h"
#include "core/grpc_wire.h"
#include "core/limits.h"
#include "core/net.h"
#include "broker/broker_impl.h"

/* Largest response message accepted: the worker's default max_message_bytes, so a completion
 * the worker may send is always readable, and a hostile peer cannot make us buffer more. */
#define REMOTE_MAX_MESSAGE SBX_WORKER_DEFAULT_MAX_MESSAGE
/* Attempts per request (1 + retries) for failures that dedup makes safe to retry. */
#define REMOTE_MAX_ATTEMPTS 3
/* Bytes kept of an answer that is not gRPC (a balancer's HTML error page), for the message. */
#define REMOTE_NON_GRPC_SNIPPET 160
/* First retry backoff; doubles each attempt. */
#define REMOTE_RETRY_BACKOFF_MS 50
/* Streams curl may open on the one connection; the worker advertises 1,024. */
#define REMOTE_MAX_STREAMS 1000
/* Transfer-level safety net over the gRPC deadline: the worker answers DEADLINE_EXCEEDED
 * itself; this only catches a worker that stopped answering altogether. */
#define REMOTE_DEADLINE_GRACE_MS 5000
/* Time a Describe call may take once connected: it opens the worker's providers to report
 * their capabilities, which can mean a round trip to a cloud API. */
#define REMOTE_DESCRIBE_TIMEOUT_MS 30000
/* Bodies larger than libcurl's default upload buffer (64 KiB) get one of their own size... */
#define REMOTE_UPLOAD_BUFFER_MIN (64 * 1024)
/* ...up to libcurl's largest (CURLOPT_UPLOAD_BUFFERSIZE accepts at most 2 MiB). */
#define REMOTE_UPLOAD_BUFFER_MAX (2 * 1024 * 1024)
/* The h2c probe's gRPC deadline: a Health Check answers at once from any worker that runs. */
#define REMOTE_PROBE_TIMEOUT_MS 5000

typedef struct rtask rtask;

/* One request in flight or done. Guarded by remote->lock, except the response buffers and the
 * easy handle, which only the transfer thread touches while the task is in the multi handle. */
struct rtask {
    struct remote_broker *r;
    rtask *next;       /* in remote->tasks */
    rtask *queue_next; /* in remote->incoming */
    char *task_id;
    char *subject; /* the request's principal subject: with task_id, the task's key */
    uint8_t digest[SBX_REQUEST_DIGEST_LEN]; /* sbx_request_digest of the request */
    uint8_t *body;                          /* the framed request */
    size_t body_len;
    bool stream; /* ExecuteStream (hooks with on_output) */
    bool probe;  /* the h2c probe: a Health Check of the transfer thread's own, no caller's */
    sbx_engine_hooks hooks;
    bool hooks_valid;    /* false once submit() returned: never call them again */
    bt_waiter *waiters;  /* submit_async callers to call back with a copy of the completion */
    int64_t deadline_ms; /* absolute unix ms; 0 = none */
    char *node;          /* x-sbx-node routing header value, or NULL */
    sbx_request *req;    /* a copy, for the recorder */
    int64_t started_at_ms;
    CURL *easy;
    struct curl_slist *headers;
    uint8_t *resp;
    size_t resp_len, resp_cap;
    bool oversize, bad_frame;
    long head_status;     /* :status of the response being received (0: none yet) */
    bool grpc_type;       /* its content-type is application/grpc */
    bool non_grpc;        /* its body is not gRPC (kept as a snippet, never decoded) */
    long balancer_status; /* an earlier attempt's non-gRPC status (kept across retries) */
    int grpc_status;      /* -1: not seen */
    char *grpc_message;
    long http_status;
    char curl_detail[CURL_ERROR_SIZE]; /* libcurl's own text of the last attempt's failure */
    int attempts;
    int64_t retry_at_ms; /* monotonic; re-added then */
    sbx_completion *completion;
    bool done, discarded, collected;
    int64_t done_seq;
    /* Callers blocked in wait_done on it (each holds a pointer across the wait). A task that is
     * collected, evicted or discarded meanwhile leaves the table at once but stays allocated,
     * `forgotten`, until the last of them has read it (task_forget, task_settle). */
    int blocked;
    bool forgotten;
};

typedef struct remote_broker {
    sbx_broker *self; /* the wrapper (sbx_broker_wrap) around this impl */
    char *url_base;   /* scheme://host:port */
    bool tls;
    char *ca_file, *cert_file, *key_file;
    char *auth_header; /* "authorization: Bearer ..." (never logged) */
    long connect_timeout_ms;
    size_t max_message;
    CURLM *multi;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    rtask *tasks;
    rtask *incoming;
    size_t n_done;
    size_t lru_size; /* completions kept for result() after submit() stopped waiting */
    int64_t seq;
    bool stopping;
    bool closed;
    /* h2c only (transfer thread): libcurl 7.88 breaks when a request with HTTP/2 prior
     * knowledge reuses a connection (curl/curl#10634, fixed in 8.0). So one "probe" transfer
     * opens the connection with prior knowledge while the others wait, and once it answered,
     * later transfers ask for plain HTTP/2, which reuses (multiplexes on) that connection. The
     * probe is a Health Check of its own (probe_start), answered at once: when it was the first
     * request itself, a command that ran for minutes held every request after it back until it
     * ended. probe_failed: the last such check got no HTTP/2 answer, so the requests open the
     * connection themselves, and their own errors and retries say why it fails. */
    enum { H2C_NONE, H2C_PROBING, H2C_READY } h2c;
    rtask *h2c_probe;
    bool probe_failed;
} remote_broker;

static void task_free(rtask *t)
{
    if (!t)
        return;
    for (bt_waiter *w = t->waiters, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    free(t->task_id);
    free(t->subject);
    free(t->body);
    free(t->node);
    sbx_request_free(t->req);
    free(t->resp);
    free(t->grpc_message);
    curl_slist_free_all(t->headers);
    sbx_completion_free(t->completion);
    free(t);
}

/* Unlinks t from the task table (lock held). It is freed now, or, when callers are still
 * blocked on it, by the last of them (task_settle): freeing it under them was a use after free
 * (a joiner woke on a task its submitter had collected or discarded). */
static void task_forget(remote_broker *r, rtask *t)
{
    for (rtask **pp = &r->tasks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->next = NULL;
    if (t->blocked > 0)
        t->forgotten = true;
    else
        task_free(t);
}

/* After a caller blocked on t is done with it (lock held): frees a forgotten task once nobody
 * else is blocked on it. */
static void task_settle(rtask *t)
{
    if (t->forgotten && t->blocked == 0)
        task_free(t);
}

/* ---- response decoding (transfer thread) ------------------------------------------------ */

/* Consumes complete messages of an ExecuteStream response: output to the hook, the completion
 * kept. */
static void decode_stream(remote_broker *r, rtask *t)
{
    size_t off = 0;
    while (t->resp_len - off >= SBX_GRPC_PREFIX_LEN) {
        size_t n = sbx_grpc_frame_len(t->resp + off);
        if (t->resp[off] != 0) {
            t->bad_frame = true;
            break;
        }
        if (t->resp_len - off - SBX_GRPC_PREFIX_LEN < n)
            break;
        ProtobufCMessage *m = NULL;
        sbx_error e;
        Sbx__V1__ExecuteEvent *ev =
            sbx_message_decode(&sbx__v1__execute_event__descriptor,
                               t->resp + off + SBX_GRPC_PREFIX_LEN, n, n, &m, &e) == SBX_OK
                ? (Sbx__V1__ExecuteEvent *)m
                : NULL; /* bounded like every decoding of what a worker sends */
        off += SBX_GRPC_PREFIX_LEN + n;
        if (!ev) {
            t->bad_frame = true;
            break;
        }
        if (ev->event_case == SBX__V1__EXECUTE_EVENT__EVENT_OUTPUT && ev->output) {
            pthread_mutex_lock(&r->lock);
            if (t->hooks_valid && t->hooks.on_output)
                t->hooks.on_output(t->hooks.on_output_arg, ev->output->stream,
                                   ev->output->data.data, ev->output->data.len, ev->output->offset);
            pthread_mutex_unlock(&r->lock);
        } else if (ev->event_case == SBX__V1__EXECUTE_EVENT__EVENT_COMPLETION && ev->completion) {
            sbx_completion_free(t->completion);
            t->completion = sbx_completion_copy(ev->completion);
        }
        sbx__v1__execute_event__free_unpacked(ev, NULL);
    }
    if (off > 0) {
        memmove(t->resp, t->resp + off, t->resp_len - off);
        t->resp_len -= off;
    }
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    rtask *t = arg;
    size_t n = size * nmemb;
    /* A balancer with no worker answers with its own page (HAProxy: HTML 503): never read it as
     * gRPC frames (its first bytes would make a huge "message length"); keep a snippet. */
    if (t->non_grpc || (t->head_status != 0 && (t->head_status != 200 || !t->grpc_type))) {
        t->non_grpc = true;
        size_t keep =
            t->resp_len < REMOTE_NON_GRPC_SNIPPET ? REMOTE_NON_GRPC_SNIPPET - t->resp_len : 0;
        if (keep > n)
            keep = n;
        if (keep > 0 && t->resp_len + keep > t->resp_cap) {
            uint8_t *p = realloc(t->resp, REMOTE_NON_GRPC_SNIPPET);
            if (p == NULL)
                return 0;
            t->resp = p;
            t->resp_cap = REMOTE_NON_GRPC_SNIPPET;
        }
        memcpy(t->resp + t->resp_len, data, keep);
        t->resp_len += keep;
        return n;
    }
    size_t limit = SBX_GRPC_PREFIX_LEN + t->r->max_message;
    if (t->stream) /* stream: undecoded bytes never exceed one message (plus the next prefix) */
        limit = 2 * SBX_GRPC_PREFIX_LEN + t->r->max_message;
    if (n > limit - t->resp_len) {
        t->oversize = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    if (t->resp_len + n > t->resp_cap) {
        size_t cap = t->resp_cap ? t->resp_cap : 4096;
        while (cap < t->resp_len + n)
            cap *= 2;
        if (cap > limit)
            cap = limit;
        uint8_t *p = realloc(t->resp, cap);
        if (!p)
            return 0;
        t->resp = p;
        t->resp_cap = cap;
    }
    memcpy(t->resp + t->resp_len, data, n);
    t->resp_len += n;
    if (!t->stream && t->resp_len >= SBX_GRPC_PREFIX_LEN &&
        sbx_grpc_frame_len(t->resp) > t->r->max_message) {
        t->oversize = true;
        return 0;
    }
    if (t->stream)
        decode_stream(t->r, t);
    return n;
}

/* Headers and trailers (curl hands HTTP/2 trailers to the header callback too). */
static size_t on_header(char *data, size_t size, size_t nitems, void *arg)
{
    rtask *t = arg;
    size_t n = size * nitems;
    size_t len = n;
    while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n'))
        len--;
    static const char st[] = "grpc-status:";
    static const char msg[] = "grpc-message:";
    static const char ctype[] = "content-type:";
    if (len > 5 && strncmp(data, "HTTP/", 5) == 0) { /* a (new) response's status line */
        const char *sp = memchr(data, ' ', len);
        t->head_status = 0;
        for (const char *c = sp != NULL ? sp + 1 : data + len;
             c < data + len && *c >= '0' && *c <= '9' && t->head_status < 1000; c++)
            t->head_status = t->head_status * 10 + (*c - '0');
        t->grpc_type = false;
    } else if (len > sizeof ctype - 1 && strncasecmp(data, ctype, sizeof ctype - 1) == 0) {
        size_t i = sizeof ctype - 1;
        while (i < len && data[i] == ' ')
            i++;
        t->grpc_type = len - i >= 16 && strncasecmp(data + i, "application/grpc", 16) == 0;
    } else if (len > sizeof st - 1 && strncasecmp(data, st, sizeof st - 1) == 0) {
        t->grpc_status = sbx_grpc_parse_status(data + sizeof st - 1, len - (sizeof st - 1));
    } else if (len > sizeof msg - 1 && strncasecmp(data, msg, sizeof msg - 1) == 0) {
        size_t i = sizeof msg - 1;
        while (i < len && data[i] == ' ')
            i++;
        free(t->grpc_message);
        t->grpc_message = malloc(len - i + 1);
        if (t->grpc_message)
            sbx_grpc_percent_decode(data + i, len - i, t->grpc_message);
    }
    return n;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    rtask *t = arg;
    int abort_now = 0;
    pthread_mutex_lock(&t->r->lock);
    /* Discarded by its submitter: cancelled, unless another caller joined it and waits. */
    if ((t->discarded && t->blocked == 0 && !t->waiters) ||
        (t->hooks_valid && t->hooks.cancel && *t->hooks.cancel))
        abort_now = 1;
    pthread_mutex_unlock(&t->r->lock);
    return abort_now; /* non-zero: RST_STREAM, the worker cancels the execution */
}

/* ---- gRPC status -> contract ------------------------------------------------------------- */

/* Whether the answer was not gRPC: a status other than 200 (a balancer's 503 page), or a 200
 * that is not application/grpc and carries no grpc-status. The balancer may reset the stream
 * right after its page (the request body was not read), so this is decided from the headers,
 * with or without a body. 505 is the h2c upgrade's own retry, not an answer. */
static bool answered_non_grpc(const rtask *t)
{
    if (t->non_grpc)
        return true;
    if (t->head_status == 0 || t->head_status == 101 || t->head_status == 505)
        return false;
    return t->head_status != 200 || (!t->grpc_type && t->grpc_status < 0);
}

/* Whether the failure is one where resending the same task_id is safe and may help: the
 * worker or a balancer says "unavailable", or the connection failed. Idempotency (the task_id)
 * makes a resend join the first attempt if it did reach a worker. */
static bool retryable(CURLcode cc, int grpc_status, const rtask *t)
{
    if (grpc_status == SBX_GRPC_UNAVAILABLE) /* draining worker, refused stream */
        return true;
    if (answered_non_grpc(t) &&
        (t->head_status == 502 || t->head_status == 503 || t->head_status == 504))
        return true; /* a balancer with no worker up for it right now */
    switch (cc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return true;
    default: return false;
    }
}

/* A worker's completion as the caller gets it: one that breaks the contract's own rules (a
 * status outside the enum, a FAILED one without an error code and text, which every caller
 * maps to an exit code and a message) is replaced by a BROKER failure naming the violation,
 * so a hostile or broken worker cannot hand on an answer no one can act on. Takes c. */
static sbx_completion *worker_completion(remote_broker *r, rtask *t, sbx_completion *c)
{
    const char *bad = NULL;
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED &&
        c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED &&
        c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT)
        bad = "a completion status outside the contract";
    else if (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED &&
             ((int)c->error_code < (int)SBX_E_CONFIG ||
              (int)c->error_code > (int)SBX_E_WRONG_NODE || !c->error || !c->error[0]))
        bad = "a FAILED completion without an error code and text";
    if (!bad)
        return c;
    sbx_completion_free(c);
    return sbx_completion_fail(t->task_id, SBX_E_BROKER, "remote broker: worker %s sent %s",
                               r->url_base, bad);
}

/* libcurl's name for cc, with the transfer's own detail when it says more: "Stream error in
 * the HTTP/2 framing layer" alone does not tell a reset by a balancer ("HTTP/2 stream 1 was not
 * closed cleanly: CANCEL (err 8)") from a broken connection. Into buf; returns the text. */
static const char *curl_reason(CURLcode cc, const rtask *t, char *buf, size_t cap)
{
    const char *name = curl_easy_strerror(cc);
    if (t->curl_detail[0] == '\0')
        return name;
    if (strstr(t->curl_detail, name) != NULL) /* "Failed to connect to H port P ...: <name>" */
        snprintf(buf, cap, "%s", t->curl_detail);
    else
        snprintf(buf, cap, "%s: %s", name, t->curl_detail);
    return buf;
}

/* What to check after a transfer failed with cc before any gRPC status: a TLS file or a
 * certificate names its setting (sandbox.broker.remote.*, the CLI's --ca-file, --cert-file and
 * --key-file), not the worker, which was never asked. */
static const char *curl_hint(CURLcode cc)
{
    switch (cc) {
    case CURLE_SSL_CACERT_BADFILE:
        return "check ca_file (--ca-file): a readable PEM file of the CA that signs the "
               "worker's certificate";
    case CURLE_SSL_CERTPROBLEM:
        return "check cert_file and key_file (--cert-file, --key-file): readable PEM files, the "
               "key unencrypted and the one the client certificate was issued for";
    case CURLE_PEER_FAILED_VERIFICATION:
        return "the worker's certificate is not signed by the CA of ca_file (--ca-file; "
               "default: the system's CAs) or does not name the endpoint's host";
    default: return "is sbx-worker running and reachable?";
    }
}

/* Builds the completion of a finished transfer (transfer thread, no lock needed for t's
 * response fields). */
static sbx_completion *finish(remote_broker *r, rtask *t, CURLcode cc)
{
    char reason[CURL_ERROR_SIZE + 64];
    if (answered_non_grpc(t)) {
        /* Printable ASCII of the first line(s), for a person: "<html><body><h1>503 Service
         * Unavailable</h1>..." */
        char snippet[REMOTE_NON_GRPC_SNIPPET + 1];
        size_t o = 0;
        for (size_t i = 0; i < t->resp_len && o < REMOTE_NON_GRPC_SNIPPET; i++) {
            uint8_t ch = t->resp[i];
            snippet[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : ' ';
        }
        snippet[o] = '\0';
        sbx_completion *c = sbx_completion_fail(
            t->task_id, SBX_E_BROKER,
            "remote broker: %s answered HTTP %ld with a response that is not gRPC (\"%s\"): "
            "UNAVAILABLE from a load balancer with no worker up for this request, or an "
            "endpoint that is not sbx-worker",
            r->url_base, t->head_status, snippet);
        return c;
    }
    if (t->balancer_status != 0 && (cc != CURLE_OK || t->grpc_status < 0))
        return sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                   "remote broker: %s answered HTTP %ld with a response that is "
                                   "not gRPC (UNAVAILABLE from a load balancer with no worker up "
                                   "for this request); retrying failed too: %s",
                                   r->url_base, t->balancer_status,
                                   cc != CURLE_OK ? curl_reason(cc, t, reason, sizeof reason)
                                                  : "no gRPC status");
    if (t->oversize)
        return sbx_completion_fail(t->task_id, SBX_E_RESOURCE_EXHAUSTED,
                                   "remote broker: the worker's response is larger than the "
                                   "client's max message size (%zu bytes)",
                                   r->max_message);
    if (cc != CURLE_OK && t->grpc_status < 0)
        return sbx_completion_fail(t->task_id, SBX_E_BROKER, "remote broker: worker %s: %s (%s)",
                                   r->url_base, curl_reason(cc, t, reason, sizeof reason),
                                   curl_hint(cc));
    if (t->grpc_status < 0)
        return sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                   "remote broker: worker %s answered HTTP %ld without a gRPC "
                                   "status (not a gRPC endpoint?)",
                                   r->url_base, t->http_status);
    if (t->grpc_status != 0)
        return sbx_completion_fail(t->task_id, sbx_grpc_status_for_code(t->grpc_status),
                                   "remote broker: worker %s: gRPC status %d: %s", r->url_base,
                                   t->grpc_status, t->grpc_message ? t->grpc_message : "");
    if (t->stream) {
        if (t->bad_frame || !t->completion)
            return sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                       "remote broker: worker %s ended ExecuteStream without a "
                                       "completion",
                                       r->url_base);
        sbx_completion *c = t->completion;
        t->completion = NULL;
        return worker_completion(r, t, c);
    }
    if (t->resp_len < SBX_GRPC_PREFIX_LEN || t->resp[0] != 0 ||
        sbx_grpc_frame_len(t->resp) != t->resp_len - SBX_GRPC_PREFIX_LEN)
        return sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                   "remote broker: worker %s sent a malformed gRPC message",
                                   r->url_base);
    sbx_completion *c = NULL;
    sbx_error err = {0};
    if (sbx_completion_decode(t->resp + SBX_GRPC_PREFIX_LEN, t->resp_len - SBX_GRPC_PREFIX_LEN,
                              r->max_message, &c, &err) != SBX_OK)
        return sbx_completion_fail(t->task_id, SBX_E_BROKER, "remote broker: %s", err.message);
    return worker_completion(r, t, c);
}

/* ---- transfers (transfer thread) --------------------------------------------------------- */

/* The options every transfer to the worker shares: protocols, TLS verification, client
 * certificate. */
static void set_transport(remote_broker *r, CURL *e)
{
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "sbx-remote-broker/" SBX_VERSION);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, r->tls ? "https" : "http");
    if (r->tls) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
        curl_easy_setopt(e, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (r->ca_file)
            curl_easy_setopt(e, CURLOPT_CAINFO, r->ca_file);
        if (r->cert_file)
            curl_easy_setopt(e, CURLOPT_SSLCERT, r->cert_file);
        if (r->key_file)
            curl_easy_setopt(e, CURLOPT_SSLKEY, r->key_file);
    }
}

/* Whether value may go into a header line as it is: a task id or node name is whatever the
 * caller or a handle says, and CR/LF in it would forge headers. */
static bool header_safe(const char *value)
{
    size_t n = 0;
    for (const char *c = value; *c; c++, n++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == '.' || *c == ':'))
            return false;
    return n > 0 && n <= 100;
}

/* HTTP/2 over TLS (ALPN), or on h2c: plain HTTP/2 over the proven connection, or prior
 * knowledge on a fresh one, t then being the probe the others wait for (h2c in remote_broker). */
static void set_http_version(remote_broker *r, rtask *t, CURL *e)
{
    long version = (long)CURL_HTTP_VERSION_2TLS;
    if (!r->tls && r->h2c == H2C_READY) {
        version = (long)CURL_HTTP_VERSION_2_0;
    } else if (!r->tls) {
        version = (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
        r->h2c = H2C_PROBING;
        r->h2c_probe = t;
        /* never over a pooled connection (the libcurl bug above): after a cancelled transfer
         * (an interrupted sbx run/exec/attach) the next request would otherwise fail in the
         * framing layer on the connection the cancelled one left, every retry too */
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    }
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
}

static bool task_start(remote_broker *r, rtask *t)
{
    t->resp_len = 0;
    t->oversize = t->bad_frame = false;
    t->head_status = 0;
    t->grpc_type = t->non_grpc = false;
    t->grpc_status = -1;
    t->http_status = 0;
    free(t->grpc_message);
    t->grpc_message = NULL;
    sbx_completion_free(t->completion);
    t->completion = NULL;
    curl_slist_free_all(t->headers);
    t->headers = NULL;
    if (t->easy) {
        curl_easy_cleanup(t->easy);
        t->easy = NULL;
    }
    CURL *e = curl_easy_init();
    if (!e)
        return false;
    t->easy = e;
    char url[1024];
    snprintf(url, sizeof url, "%s%s", r->url_base,
             t->probe    ? "/grpc.health.v1.Health/Check"
             : t->stream ? "/sbx.v1.Execution/ExecuteStream"
                         : "/sbx.v1.Execution/Execute");
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "content-type: application/grpc");
    h = curl_slist_append(h, "te: trailers");
    h = curl_slist_append(h, "expect:");
    h = curl_slist_append(h, "accept:");
    if (r->auth_header)
        h = curl_slist_append(h, r->auth_header);
    if (t->node && header_safe(t->node)) {
        char line[300];
        snprintf(line, sizeof line, "x-sbx-node: %s", t->node);
        h = curl_slist_append(h, line);
    }
    /* A balancer hashes one-shot requests on it, so a retry reaches the worker that has the
     * first attempt (deploy/haproxy.cfg). */
    if (t->task_id && header_safe(t->task_id)) {
        char line[128];
        snprintf(line, sizeof line, "x-sbx-task-id: %s", t->task_id);
        h = curl_slist_append(h, line);
    }
    long total_timeout_ms = 0;
    if (t->deadline_ms > 0) {
        int64_t left = t->deadline_ms - sbx_now_ms();
        if (left < 1)
            left = 1;
        char line[64];
        if (left <= 99999999)
            snprintf(line, sizeof line, "grpc-timeout: %lldm", (long long)left);
        else
            snprintf(line, sizeof line, "grpc-timeout: %lldS", (long long)(left / 1000));
        h = curl_slist_append(h, line);
        /* the probe's deadline is its own: a request held behind it waits for nothing more */
        total_timeout_ms = (long)(left + (t->probe ? 0 : REMOTE_DEADLINE_GRACE_MS));
    }
    t->headers = h;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body_len);
    /* libcurl moves a body into the HTTP/2 stream one upload buffer per pass of its loop, and
     * each pass waits in poll: with the default 64 KiB a 4 MiB WriteFile took ~130 passes, and
     * `sbx cp` up a worker ran at a third of its speed down. A big body gets a big buffer
     * (libcurl allows up to 2 MiB); small requests keep the default and its memory. */
    if (t->body_len > REMOTE_UPLOAD_BUFFER_MIN)
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE,
                         (long)(t->body_len < REMOTE_UPLOAD_BUFFER_MAX ? t->body_len
                                                                       : REMOTE_UPLOAD_BUFFER_MAX));
    set_http_version(r, t, e);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L); /* wait to multiplex, never a 2nd connection */
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, total_timeout_ms);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    t->curl_detail[0] = '\0';
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_detail);
    set_transport(r, e);
    t->attempts++;
    if (curl_multi_add_handle(r->multi, e) == CURLM_OK)
        return true;
    if (r->h2c_probe == t) { /* made the probe above: held requests must not wait for it */
        r->h2c = H2C_NONE;
        r->h2c_probe = NULL;
    }
    return false;
}

/* Opens the h2c connection with a Health Check (see h2c in remote_broker): r->h2c is
 * H2C_PROBING once it returns true. */
static bool probe_start(remote_broker *r)
{
    rtask *p = calloc(1, sizeof *p);
    if (!p)
        return false;
    p->r = r;
    p->probe = true;
    p->body = malloc(SBX_GRPC_PREFIX_LEN); /* an empty HealthCheckRequest: the whole server */
    p->body_len = SBX_GRPC_PREFIX_LEN;
    p->deadline_ms = sbx_now_ms() + REMOTE_PROBE_TIMEOUT_MS;
    if (p->body)
        sbx_grpc_frame_prefix(p->body, 0);
    if (p->body && task_start(r, p))
        return true;
    if (p->easy)
        curl_easy_cleanup(p->easy);
    task_free(p);
    return false;
}

/* Marks t done with c (lock held). Returns its asynchronous waiters, each with a copy of c, for
 * bt_fire once the lock is released. */
static bt_waiter *task_done(remote_broker *r, rtask *t, sbx_completion *c)
{
    bt_waiter *fire = t->waiters;
    t->waiters = NULL;
    for (bt_waiter *w = fire; w; w = w->next)
        w->c = c ? sbx_completion_copy(c) : NULL;
    t->completion = c;
    if (c && t->req)
        sbx_broker_record(r->self, t->req, c, t->started_at_ms, 0);
    t->done = true;
    t->done_seq = ++r->seq;
    t->hooks_valid = false;
    r->n_done++;
    /* (copied: the eviction below may free t) */
    char *subject = t->discarded ? NULL : strdup(t->subject);
    if (t->discarded) { /* its submitter does not want it: unlink now (joiners may) */
        r->n_done--;
        task_forget(r, t);
    }
    /* Bounded memory: forget the oldest collected-or-not completions beyond the LRU size. One
     * store for every principal this client carries: a principal holding half of it or more
     * (a flood) loses its own oldest, so it cannot push the others' below the other half. */
    while (r->n_done > r->lru_size) {
        rtask **oldest = NULL, **own = NULL;
        size_t mine = 0;
        for (rtask **pp = &r->tasks; *pp; pp = &(*pp)->next) {
            if (!(*pp)->done)
                continue;
            if (!oldest || (*pp)->done_seq < (*oldest)->done_seq)
                oldest = pp;
            if (subject != NULL && strcmp((*pp)->subject, subject) == 0) {
                mine++;
                if (!own || (*pp)->done_seq < (*own)->done_seq)
                    own = pp;
            }
        }
        if (own != NULL && 2 * mine >= r->n_done)
            oldest = own;
        if (!oldest)
            break;
        rtask *o = *oldest;
        r->n_done--;
        task_forget(r, o);
    }
    free(subject);
    pthread_cond_broadcast(&r->cond);
    return fire;
}

/* Long because it is the transfer thread's one loop (take new tasks in order, retry after backoff,
 * hold for the h2c probe, drive libcurl's multi handle, finish done transfers), whose task lists
 * only this thread touches. */
static void *transfer_main(void *arg)
{
    remote_broker *r = arg;
    /* named for operators (top -H, /proc/PID/task/TID/comm) */
    pthread_setname_np(pthread_self(), "sbx-remote");
    rtask *retry = NULL; /* waiting for their backoff (transfer thread only) */
    rtask *held = NULL;  /* waiting for the h2c probe (transfer thread only) */
    for (;;) {
        pthread_mutex_lock(&r->lock);
        rtask *in = r->incoming;
        r->incoming = NULL;
        bool stopping = r->stopping;
        pthread_mutex_unlock(&r->lock);
        /* incoming is LIFO-built: reverse to keep submission order */
        rtask *ordered = NULL;
        while (in) {
            rtask *n = in->queue_next;
            in->queue_next = ordered;
            ordered = in;
            in = n;
        }
        if (held) { /* tasks held back while an h2c probe was in flight go first */
            rtask *tail = held;
            while (tail->queue_next)
                tail = tail->queue_next;
            tail->queue_next = ordered;
            ordered = held;
            held = NULL;
        }
        for (rtask *t = ordered; t;) {
            rtask *n = t->queue_next;
            if (!r->tls && r->h2c == H2C_NONE && !r->probe_failed && !probe_start(r))
                r->probe_failed = true;
            if (!r->tls && r->h2c == H2C_PROBING) {
                t->queue_next = held;
                held = t;
                t = n;
                continue;
            }
            if (!task_start(r, t)) {
                pthread_mutex_lock(&r->lock);
                bt_waiter *fire =
                    task_done(r, t,
                              sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                                  "remote broker: cannot start a transfer"));
                pthread_mutex_unlock(&r->lock);
                bt_fire(fire);
            }
            t = n;
        }
        int64_t now = sbx_monotonic_ms();
        int wait_ms = 1000;
        for (rtask **pp = &retry; *pp;) {
            rtask *t = *pp;
            if (t->retry_at_ms <= now) {
                *pp = t->queue_next;
                if (!task_start(r, t)) {
                    pthread_mutex_lock(&r->lock);
                    bt_waiter *fire =
                        task_done(r, t,
                                  sbx_completion_fail(t->task_id, SBX_E_BROKER,
                                                      "remote broker: cannot restart"));
                    pthread_mutex_unlock(&r->lock);
                    bt_fire(fire);
                }
                continue;
            }
            if (t->retry_at_ms - now < wait_ms)
                wait_ms = (int)(t->retry_at_ms - now);
            pp = &t->queue_next;
        }
        int running = 0;
        curl_multi_perform(r->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(r->multi, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            rtask *t = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
            if (!t)
                continue; /* every easy handle here is a task's (task_start) */
            CURLcode cc = msg->data.result;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &t->http_status);
            curl_multi_remove_handle(r->multi, msg->easy_handle);
            if (!r->tls) {
                /* h2c: an answer over HTTP/2 means the connection is up for reuse; a failed
                 * connection, or an HTTP/1.1 answer to a new Upgrade-style connection, means the
                 * next transfer must open one again with prior knowledge. */
                bool h2_answer = cc == CURLE_OK && t->http_status != 505;
                if (r->h2c_probe == t) {
                    r->h2c = h2_answer ? H2C_READY : H2C_NONE;
                    r->h2c_probe = NULL;
                    r->probe_failed = !h2_answer && t->probe;
                } else if (!h2_answer && t->grpc_status < 0) {
                    r->h2c = H2C_NONE;
                }
                if (held)
                    wait_ms = 0;
                if (t->probe) { /* whatever its grpc-status: an HTTP/2 answer proves the link */
                    curl_easy_cleanup(t->easy);
                    t->easy = NULL;
                    task_free(t);
                    continue;
                }
            }
            pthread_mutex_lock(&r->lock);
            bool discarded = t->discarded && t->blocked == 0 && !t->waiters; /* nobody waits */
            bool cancelled = t->hooks_valid && t->hooks.cancel && *t->hooks.cancel;
            pthread_mutex_unlock(&r->lock);
            bool deadline_left =
                t->deadline_ms == 0 || t->deadline_ms - sbx_now_ms() > REMOTE_RETRY_BACKOFF_MS;
            if (answered_non_grpc(t))
                t->balancer_status = t->head_status;
            if (!discarded && !cancelled && !t->oversize && t->attempts < REMOTE_MAX_ATTEMPTS &&
                deadline_left &&
                (retryable(cc, t->grpc_status, t) || (!r->tls && t->http_status == 505)) &&
                !(t->stream && t->resp_len)) {
                t->retry_at_ms =
                    sbx_monotonic_ms() + ((int64_t)REMOTE_RETRY_BACKOFF_MS << (t->attempts - 1));
                t->queue_next = retry;
                retry = t;
                wait_ms = 0;
                continue;
            }
            sbx_completion *c = cancelled ? sbx_completion_fail(t->task_id, SBX_E_TIMEOUT,
                                                                "remote broker: cancelled")
                                          : finish(r, t, cc);
            curl_easy_cleanup(t->easy);
            t->easy = NULL;
            pthread_mutex_lock(&r->lock);
            bt_waiter *fire = task_done(r, t, c);
            pthread_mutex_unlock(&r->lock);
            bt_fire(fire);
        }
        if (held && r->h2c != H2C_PROBING)
            continue; /* start them now */
        if (stopping && running == 0 && !retry && !held) {
            pthread_mutex_lock(&r->lock);
            bool empty = r->incoming == NULL;
            pthread_mutex_unlock(&r->lock);
            if (empty)
                break;
        }
        /* Nothing running, retrying or held: sleep until a submit or close wakes the multi
         * handle (it woke every second, all the life of an idle client). */
        if (running == 0 && retry == NULL && held == NULL && wait_ms > 0)
            wait_ms = INT_MAX;
        if (wait_ms > 0)
            curl_multi_poll(r->multi, NULL, 0, wait_ms, NULL);
    }
    return NULL;
}

/* ---- the broker interface -------------------------------------------------------------- */

/* The task of (subject, task_id): never task_id alone (broker/tasks.h). */
static rtask *find_task(remote_broker *r, const char *subject, const char *task_id)
{
    for (rtask *t = r->tasks; t; t = t->next)
        if (strcmp(t->task_id, task_id) == 0 && strcmp(t->subject, subject) == 0)
            return t;
    return NULL;
}

/* Takes t's completion for the caller (lock held); the task is forgotten. Callers still blocked
 * on it get theirs later, so this caller gets a copy while they wait. */
static sbx_completion *collect(remote_broker *r, rtask *t)
{
    bool others = t->blocked > 0;
    sbx_completion *c = others ? sbx_completion_copy(t->completion) : t->completion;
    if (!others)
        t->completion = NULL;
    if (!t->forgotten) {
        r->n_done--;
        task_forget(r, t);
    } else {
        task_settle(t);
    }
    return c;
}

/* Waits (lock held) until t is done or wait_ms passes. */
static void wait_done(remote_broker *r, rtask *t, int64_t wait_ms)
{
    struct timespec until = sbx_mono_after_ms(wait_ms);
    t->blocked++; /* t is not freed while this caller waits on it (task_forget) */
    while (!t->done) {
        if (wait_ms < 0)
            pthread_cond_wait(&r->cond, &r->lock);
        else if (pthread_cond_timedwait(&r->cond, &r->lock, &until) == ETIMEDOUT)
            break;
    }
    t->blocked--;
}

/* A new task for req (not yet queued), or NULL with *out (and *st) the immediate answer. */
static rtask *task_new(remote_broker *r, const sbx_request *req, const sbx_engine_hooks *hooks,
                       sbx_completion **out, sbx_status *st)
{
    const char *task_id = req->task_id ? req->task_id : "";
    *st = SBX_OK;
    if (task_id[0] == '\0') {
        *st = SBX_E_INVALID_ARGUMENT;
        *out = sbx_completion_fail(task_id, SBX_E_INVALID_ARGUMENT,
                                   "remote broker: the request has no task_id (use "
                                   "sbx_request_new, which assigns one)");
        return NULL;
    }
    if (req->deadline_ms > 0 && req->deadline_ms <= sbx_now_ms()) {
        *out = sbx_completion_fail(task_id, SBX_E_TIMEOUT,
                                   "remote broker: the request's deadline had already passed");
        return NULL;
    }
    rtask *t = calloc(1, sizeof *t);
    if (!t) {
        *st = SBX_E_INTERNAL;
        *out = sbx_completion_fail(task_id, SBX_E_INTERNAL, "remote broker: out of memory");
        return NULL;
    }
    t->r = r;
    t->task_id = strdup(task_id);
    t->subject = strdup(sbx_request_subject(req));
    size_t n = protobuf_c_message_get_packed_size(&req->base);
    t->body = malloc(SBX_GRPC_PREFIX_LEN + n + 1);
    if (!t->task_id || !t->subject || !t->body || !sbx_request_digest(req, t->digest)) {
        task_free(t);
        *st = SBX_E_INTERNAL;
        *out = sbx_completion_fail(task_id, SBX_E_INTERNAL, "remote broker: out of memory");
        return NULL;
    }
    sbx_grpc_frame_prefix(t->body, n);
    protobuf_c_message_pack(&req->base, t->body + SBX_GRPC_PREFIX_LEN);
    t->body_len = SBX_GRPC_PREFIX_LEN + n;
    if (hooks) {
        t->hooks = *hooks;
        t->hooks_valid = true;
        t->stream = hooks->on_output != NULL;
    }
    t->deadline_ms = req->deadline_ms;
    if (req->session && req->session->node && req->session->node[0])
        t->node = strndup(req->session->node, 255);
    t->grpc_status = -1;
    t->started_at_ms = sbx_now_ms();
    t->req = sbx_request_copy(req);
    return t;
}

/* Queues t, or finds the task it duplicates (lock held). Returns t or the task to join; NULL
 * with *out the answer (closed, conflict) and t freed. */
static rtask *task_queue(remote_broker *r, rtask *t, sbx_completion **out, sbx_status *st)
{
    if (r->stopping) {
        *st = SBX_E_BROKER;
        *out = sbx_completion_fail(t->task_id, SBX_E_BROKER, "remote broker: closed");
        task_free(t);
        return NULL;
    }
    rtask *dup = find_task(r, t->subject, t->task_id);
    if (dup && !dup->discarded && memcmp(dup->digest, t->digest, sizeof(t->digest)) != 0) {
        /* The same key with another request: refused, never joined (broker/tasks.h). */
        *out = bt_conflict(t->subject, t->task_id);
        task_free(t);
        return NULL;
    }
    if (dup && !dup->discarded) {
        /* Same task_id again on this client: join it rather than send it twice. */
        task_free(t);
        return dup;
    }
    t->next = r->tasks;
    r->tasks = t;
    t->queue_next = r->incoming;
    r->incoming = t;
    curl_multi_wakeup(r->multi);
    return t;
}

static sbx_status remote_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                                const sbx_engine_hooks *hooks, sbx_completion **out)
{
    remote_broker *r = sbx_broker_impl(b);
    *out = NULL;
    sbx_status st;
    rtask *nt = task_new(r, req, hooks, out, &st);
    if (!nt)
        return st;
    pthread_mutex_lock(&r->lock);
    rtask *t = task_queue(r, nt, out, &st);
    if (t) {
        wait_done(r, t, wait_ms);
        if (t->done && t == nt) {
            *out = collect(r, t);
        } else if (t->done) { /* joined another caller's task */
            *out = sbx_completion_copy(t->completion);
            task_settle(t);
        } else if (t == nt) {
            t->hooks_valid = false; /* the caller's hooks die with this call */
        }
    }
    pthread_mutex_unlock(&r->lock);
    return st;
}

/* The transfer thread calls back (bt_fire) when the response has arrived; the task stays in
 * the table, done, for a retry of the same task_id (bounded like result()'s completions). */
static sbx_status remote_submit_async(sbx_broker *b, const sbx_request *req,
                                      const sbx_broker_async *cb)
{
    remote_broker *r = sbx_broker_impl(b);
    sbx_engine_hooks hooks = {
        .on_output = cb->on_output, .on_output_arg = cb->arg, .cancel = cb->cancel};
    sbx_completion *answer = NULL;
    sbx_status st;
    bt_waiter *w = calloc(1, sizeof *w);
    rtask *nt = w ? task_new(r, req, &hooks, &answer, &st) : NULL;
    if (!w) {
        st = SBX_E_INTERNAL;
        answer = sbx_completion_fail(req->task_id ? req->task_id : "", st,
                                     "remote broker: out of memory");
    }
    if (nt) {
        w->on_done = cb->on_done;
        w->arg = cb->arg;
        pthread_mutex_lock(&r->lock);
        rtask *t = task_queue(r, nt, &answer, &st);
        if (t && t->done) {
            answer = sbx_completion_copy(t->completion);
            if (!answer)
                answer = sbx_completion_fail(req->task_id, SBX_E_INTERNAL,
                                             "remote broker: out of memory");
        } else if (t) {
            w->next = t->waiters;
            t->waiters = w;
            w = NULL;
        }
        pthread_mutex_unlock(&r->lock);
        if (!w)
            return SBX_OK;
    }
    free(w);
    cb->on_done(cb->arg, st, answer);
    return st;
}

/* Describe: one unary call on its own short transfer (rare: a client asks once), answered
 * within the connect timeout plus REMOTE_DESCRIBE_TIMEOUT_MS. */
static sbx_status remote_describe(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    remote_broker *r = sbx_broker_impl(b);
    *out = NULL;
    static const uint8_t empty_request[SBX_GRPC_PREFIX_LEN] = {0, 0, 0, 0, 0};
    rtask *t = calloc(1, sizeof *t);
    CURL *e = curl_easy_init();
    char url[1024];
    snprintf(url, sizeof url, "%s/sbx.v1.Execution/Describe", r->url_base);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "content-type: application/grpc");
    h = curl_slist_append(h, "te: trailers");
    h = curl_slist_append(h, "expect:");
    h = curl_slist_append(h, "accept:");
    if (r->auth_header)
        h = curl_slist_append(h, r->auth_header);
    if (!t || !e || !h) {
        free(t);
        if (e)
            curl_easy_cleanup(e);
        curl_slist_free_all(h);
        return sbx_error_set(err, SBX_E_INTERNAL, "remote broker: out of memory");
    }
    t->r = r;
    t->grpc_status = -1;
    t->headers = h;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, empty_request);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sizeof empty_request);
    /* Its own connection, so prior knowledge is safe on h2c (see h2c in remote_broker). */
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     r->tls ? (long)CURL_HTTP_VERSION_2TLS
                            : (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, r->connect_timeout_ms + REMOTE_DESCRIBE_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->curl_detail);
    set_transport(r, e);
    CURLcode cc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    char reason[CURL_ERROR_SIZE + 64];
    sbx_status st = SBX_OK;
    if (t->oversize)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                           "remote broker: the worker's Describe answer is larger than %zu bytes",
                           r->max_message);
    else if (cc != CURLE_OK && t->grpc_status < 0)
        st = sbx_error_set(err, SBX_E_BROKER, "remote broker: worker %s: %s (%s)", r->url_base,
                           curl_reason(cc, t, reason, sizeof reason), curl_hint(cc));
    else if (t->grpc_status != 0)
        st = sbx_error_set(
            err, t->grpc_status < 0 ? SBX_E_BROKER : sbx_grpc_status_for_code(t->grpc_status),
            "remote broker: worker %s: Describe: gRPC status %d: %s", r->url_base, t->grpc_status,
            t->grpc_message ? t->grpc_message : "");
    else if (t->resp_len < SBX_GRPC_PREFIX_LEN || t->resp[0] != 0 ||
             sbx_grpc_frame_len(t->resp) != t->resp_len - SBX_GRPC_PREFIX_LEN ||
             sbx_message_decode(&sbx__v1__describe_response__descriptor,
                                t->resp + SBX_GRPC_PREFIX_LEN, t->resp_len - SBX_GRPC_PREFIX_LEN,
                                t->resp_len, (ProtobufCMessage **)out, &(sbx_error){0}) != SBX_OK)
        st = sbx_error_set(err, SBX_E_BROKER,
                           "remote broker: worker %s sent a malformed DescribeResponse",
                           r->url_base);
    task_free(t);
    return st;
}

static sbx_status remote_result(sbx_broker *b, const char *subject, const char *task_id,
                                int64_t wait_ms, sbx_completion **out)
{
    remote_broker *r = sbx_broker_impl(b);
    *out = NULL;
    pthread_mutex_lock(&r->lock);
    rtask *t = task_id ? find_task(r, subject, task_id) : NULL;
    if (!t || t->discarded) {
        pthread_mutex_unlock(&r->lock);
        return SBX_E_INVALID_ARGUMENT;
    }
    wait_done(r, t, wait_ms);
    if (t->done)
        *out = collect(r, t);
    pthread_mutex_unlock(&r->lock);
    return SBX_OK;
}

static void remote_discard(sbx_broker *b, const char *subject, const char *task_id)
{
    remote_broker *r = sbx_broker_impl(b);
    pthread_mutex_lock(&r->lock);
    rtask *t = task_id ? find_task(r, subject, task_id) : NULL;
    if (t) {
        if (t->done)
            sbx_completion_free(collect(r, t));
        else
            t->discarded = true; /* the transfer thread drops it when it ends */
    }
    pthread_mutex_unlock(&r->lock);
}

static void stop_thread(remote_broker *r)
{
    pthread_mutex_lock(&r->lock);
    if (r->closed) {
        pthread_mutex_unlock(&r->lock);
        return;
    }
    r->closed = true;
    r->stopping = true;
    pthread_mutex_unlock(&r->lock);
    if (r->thread_started) {
        curl_multi_wakeup(r->multi);
        pthread_join(r->thread, NULL); /* in-flight transfers finish first */
        r->thread_started = false;
    }
}

static void remote_close(sbx_broker *b)
{
    stop_thread(sbx_broker_impl(b));
}

static void remote_free(remote_broker *r)
{
    stop_thread(r);
    while (r->tasks) {
        rtask *t = r->tasks;
        r->tasks = t->next;
        if (t->easy)
            curl_easy_cleanup(t->easy);
        task_free(t);
    }
    if (r->multi)
        curl_multi_cleanup(r->multi);
    free(r->url_base);
    free(r->ca_file);
    free(r->cert_file);
    free(r->key_file);
    if (r->auth_header) {
        memset(r->auth_header, 0, strlen(r->auth_header));
        free(r->auth_header);
    }
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r);
}

static void remote_destroy(sbx_broker *b)
{
    remote_close(b);
    remote_free(sbx_broker_impl(b));
}

static const sbx_broker_vtable remote_vtable = {
    .flavor = "remote",
    .submit = remote_submit,
    .submit_async = remote_submit_async,
    .describe = remote_describe,
    .result = remote_result,
    .discard = remote_discard,
    .close = remote_close,
    .destroy = remote_destroy,
};

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
}

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

/* Long because it checks the endpoint and every TLS and auth option in turn (each refusal its own
 * message naming the option) and builds the broker in one allocation freed at one exit. */
sbx_status sbx_broker_open_remote(const sbx_remote_config *remote, sbx_broker **out, sbx_error *err)
{
    *out = NULL;
    if (!remote || !remote->endpoint || !remote->endpoint[0])
        return sbx_error_set(err, SBX_E_CONFIG,
                             "remote broker: no endpoint; set broker.remote.endpoint (or "
                             "--endpoint) to https://host:port or http://127.0.0.1:port");
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, remote->endpoint, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "remote broker: endpoint '%s' is not a URL; use https://host:port "
                             "or http://127.0.0.1:port",
                             remote->endpoint);
    }
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    bool tls = strcmp(scheme, "https") == 0;
    sbx_status st = SBX_OK;
    if (!tls && strcmp(scheme, "http") != 0)
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "remote broker: endpoint '%s' has scheme '%s'; use https:// (or "
                           "http:// to a loopback worker)",
                           remote->endpoint, scheme);
    else if (!tls && !sbx_net_host_is_loopback(host, strlen(host)))
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "remote broker: endpoint '%s' is plaintext (h2c) to a non-loopback "
                           "host; use https:// so the worker is authenticated and the traffic "
                           "encrypted",
                           remote->endpoint);
    /* Made only when everything before went well: r is NULL exactly when st is an error. */
    remote_broker *r = NULL;
    if (st == SBX_OK && (r = calloc(1, sizeof *r)) == NULL)
        st = sbx_error_set(err, SBX_E_INTERNAL, "remote broker: out of memory");
    if (r) {
        r->lru_size = remote->lru_size > 0 ? (size_t)remote->lru_size : SBX_BROKER_DEFAULT_LRU_SIZE;
        size_t need = strlen(scheme) + strlen(host) + 16 + 8;
        r->url_base = malloc(need);
        bool v6 = strchr(host, ':') != NULL && host[0] != '[';
        if (r->url_base)
            snprintf(r->url_base, need, "%s://%s%s%s:%s", scheme, v6 ? "[" : "", host,
                     v6 ? "]" : "", port ? port : (tls ? "443" : "80"));
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    if (!r)
        return st;
    r->tls = tls;
    r->ca_file = dup_or_null(remote->ca_file);
    r->cert_file = dup_or_null(remote->cert_file);
    r->key_file = dup_or_null(remote->key_file);
    r->connect_timeout_ms =
        remote->connect_timeout_ms > 0 ? (long)remote->connect_timeout_ms : 5000L;
    r->max_message = REMOTE_MAX_MESSAGE;
    pthread_mutex_init(&r->lock, NULL);
    sbx_cond_init_mono(&r->cond);
    if (remote->token_env && remote->token_env[0]) {
        const char *token = getenv(remote->token_env);
        if (!token || !token[0]) {
            remote_free(r);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "remote broker: environment variable %s (token_env) is unset "
                                 "or empty; export the bearer token there",
                                 remote->token_env);
        }
        size_t need = strlen(token) + 32;
        r->auth_header = malloc(need);
        if (r->auth_header)
            snprintf(r->auth_header, need, "authorization: Bearer %s", token);
    }
    if ((r->cert_file != NULL) != (r->key_file != NULL)) {
        remote_free(r);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "remote broker: a client certificate needs both cert_file and "
                             "key_file");
    }
    r->multi = curl_multi_init();
    if (!r->url_base || !r->multi) {
        remote_free(r);
        return sbx_error_set(err, SBX_E_INTERNAL, "remote broker: out of memory");
    }
    curl_multi_setopt(r->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    curl_multi_setopt(r->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 1L);
    curl_multi_setopt(r->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)REMOTE_MAX_STREAMS);
    r->self = sbx_broker_wrap(&remote_vtable, r);
    if (!r->self) {
        remote_free(r);
        return sbx_error_set(err, SBX_E_INTERNAL, "remote broker: out of memory");
    }
    if (pthread_create(&r->thread, NULL, transfer_main, r) != 0) {
        sbx_broker_free(r->self);
        return sbx_error_set(err, SBX_E_INTERNAL, "remote broker: cannot start its thread");
    }
    r->thread_started = true;
    *out = r->self;
    return SBX_OK;
}

/* ---- decoding a given response (remote_wire.h) ------------------------------------------ */

sbx_completion *remote_decode_response(const remote_response *resp, sbx_output_fn on_output,
                                       void *arg)
{
    remote_broker r;
    memset(&r, 0, sizeof r);
    r.url_base = (char *)"http://worker.invalid";
    r.max_message = resp->max_message ? resp->max_message : REMOTE_MAX_MESSAGE;
    pthread_mutex_init(&r.lock, NULL);
    rtask t;
    memset(&t, 0, sizeof t);
    t.r = &r;
    t.task_id = (char *)"decoded-response";
    t.stream = resp->stream;
    t.grpc_status = -1;
    t.hooks.on_output = on_output;
    t.hooks.on_output_arg = arg;
    t.hooks_valid = true;
    CURLcode cc = (CURLcode)resp->curl_code;
    for (size_t i = 0; i < resp->n_pieces; i++) {
        const remote_piece *p = &resp->pieces[i];
        if (p->len == 0)
            continue; /* curl never calls back with nothing */
        if (p->header) {
            on_header((char *)p->data, 1, p->len, &t);
        } else if (on_body((char *)p->data, 1, p->len, &t) != p->len) {
            cc = CURLE_WRITE_ERROR; /* the transfer is aborted here */
            break;
        }
    }
    t.http_status = resp->http_status;
    sbx_completion *c = finish(&r, &t, cc);
    free(t.resp);
    free(t.grpc_message);
    sbx_completion_free(t.completion);
    pthread_mutex_destroy(&r.lock);
    return c;
}
