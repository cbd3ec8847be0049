/* http.c - the cloud providers' HTTP client (see http.h): libcurl easy calls with timeouts,
 * retries with backoff and jitter, bounded bodies, bounded JSON, redaction and clear errors.
 *
 * Each call uses its own curl easy handle, so calls from different sessions never share state.
 * This file must not know any provider's API and must never print.
 */
#include "providers/common/http.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "sbx/contract.h"

/* Shortest secret worth redacting: shorter values would redact ordinary words. */
#define HTTP_MIN_SECRET_LEN 4
/* Sleep granularity while backing off, so a cancel is noticed promptly. */
#define HTTP_SLEEP_SLICE_MS 50
/* Headers whose values are credentials: shown as "[REDACTED]" in traces. */
static const char *const http_credential_headers[] = {"authorization",
                                                      "x-api-key",
                                                      "x-access-token",
                                                      "x-amz-security-token",
                                                      "e2b-traffic-access-token",
                                                      "x-daytona-preview-token",
                                                      "cookie",
                                                      NULL};

struct sbx_http_client {
    char *provider;
    char *auth_hint;
    int64_t connect_timeout_ms;
    int64_t total_timeout_ms;
    int max_attempts;
    int64_t backoff_base_ms;
    size_t max_body_bytes;
    sbx_http_trace_fn trace;
    void *trace_arg;
    pthread_mutex_t lock; /* guards secrets */
    /* Connections, DNS answers and TLS sessions shared by every call of this client, so a
     * provider does one TLS handshake per host instead of one per call. */
    CURLSH *share;
    pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
    char *secrets[SBX_HTTP_MAX_SECRETS];
    unsigned refs[SBX_HTTP_MAX_SECRETS];
    size_t n_secrets;
};

static void http_wipe_free(char *s);

static pthread_once_t http_global_once = PTHREAD_ONCE_INIT;
static CURLcode http_global_rc = CURLE_OK;

static void http_global_init(void)
{
    http_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *http_strdup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void http_share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *arg)
{
    (void)h, (void)access;
    sbx_http_client *c = arg;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&c->share_locks[data]);
}

static void http_share_unlock(CURL *h, curl_lock_data data, void *arg)
{
    (void)h;
    sbx_http_client *c = arg;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&c->share_locks[data]);
}

sbx_status sbx_http_client_new(const sbx_http_client_config *cfg, sbx_http_client **out,
                               sbx_error *err)
{
    *out = NULL;
    pthread_once(&http_global_once, http_global_init);
    if (http_global_rc != CURLE_OK)
        return sbx_error_set(err, SBX_E_INTERNAL, "libcurl initialisation failed: %s",
                             curl_easy_strerror(http_global_rc));
    sbx_http_client *c = calloc(1, sizeof *c);
    if (!c)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    c->provider = strdup(cfg && cfg->provider ? cfg->provider : "http");
    c->auth_hint = http_strdup_or_null(cfg ? cfg->auth_hint : NULL);
    c->connect_timeout_ms =
        cfg && cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : SBX_HTTP_CONNECT_TIMEOUT_MS;
    c->total_timeout_ms =
        cfg && cfg->total_timeout_ms > 0 ? cfg->total_timeout_ms : SBX_HTTP_TOTAL_TIMEOUT_MS;
    c->max_attempts = cfg && cfg->max_attempts > 0 ? cfg->max_attempts : SBX_HTTP_MAX_ATTEMPTS;
    c->backoff_base_ms =
        cfg && cfg->backoff_base_ms > 0 ? cfg->backoff_base_ms : SBX_HTTP_BACKOFF_BASE_MS;
    c->max_body_bytes =
        cfg && cfg->max_body_bytes > 0 ? cfg->max_body_bytes : SBX_HTTP_MAX_BODY_BYTES;
    c->trace = cfg ? cfg->trace : NULL;
    c->trace_arg = cfg ? cfg->trace_arg : NULL;
    pthread_mutex_init(&c->lock, NULL);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&c->share_locks[i], NULL);
    c->share = curl_share_init();
    if (c->share) {
        curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, http_share_lock);
        curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, http_share_unlock);
        curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    }
    if (!c->provider || !c->share || (cfg && cfg->auth_hint && !c->auth_hint)) {
        sbx_http_client_free(c);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    *out = c;
    return SBX_OK;
}

void sbx_http_client_free(sbx_http_client *c)
{
    if (!c)
        return;
    /* Wipe before freeing: a later heap dump must not hold the key. */
    for (size_t i = 0; i < c->n_secrets; i++)
        http_wipe_free(c->secrets[i]);
    if (c->share)
        curl_share_cleanup(c->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&c->share_locks[i]);
    pthread_mutex_destroy(&c->lock);
    free(c->provider);
    free(c->auth_hint);
    free(c);
}

const char *sbx_http_client_provider(const sbx_http_client *c)
{
    return c->provider;
}

bool sbx_http_client_add_secret(sbx_http_client *c, const char *secret)
{
    if (!c || !secret || strlen(secret) < HTTP_MIN_SECRET_LEN)
        return true;
    pthread_mutex_lock(&c->lock);
    bool ok = true;
    bool present = false;
    for (size_t i = 0; i < c->n_secrets; i++)
        if (strcmp(c->secrets[i], secret) == 0) {
            present = true;
            c->refs[i]++;
        }
    if (!present) {
        if (c->n_secrets >= SBX_HTTP_MAX_SECRETS) {
            ok = false;
        } else {
            char *copy = strdup(secret);
            if (copy) {
                c->refs[c->n_secrets] = 1;
                c->secrets[c->n_secrets++] = copy;
            } else {
                ok = false;
            }
        }
    }
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static void http_wipe_free(char *s)
{
    volatile char *p = s;
    for (size_t k = 0; p[k]; k++)
        p[k] = 0;
    free(s);
}

void sbx_http_client_remove_secret(sbx_http_client *c, const char *secret)
{
    if (!c || !secret)
        return;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_secrets; i++) {
        if (strcmp(c->secrets[i], secret) != 0)
            continue;
        if (--c->refs[i] == 0) {
            http_wipe_free(c->secrets[i]);
            c->secrets[i] = c->secrets[c->n_secrets - 1];
            c->refs[i] = c->refs[c->n_secrets - 1];
            c->n_secrets--;
        }
        break;
    }
    pthread_mutex_unlock(&c->lock);
}

/* Replaces every occurrence of secret in text with a marker no longer than the secret. */
static void http_redact_one(char *text, const char *secret)
{
    size_t slen = strlen(secret);
    const char *mark = slen >= 10 ? "[REDACTED]" : "***";
    size_t mlen = strlen(mark);
    char *p;
    while ((p = strstr(text, secret)) != NULL) {
        memcpy(p, mark, mlen);
        memmove(p + mlen, p + slen, strlen(p + slen) + 1);
    }
}

void sbx_http_redact(sbx_http_client *c, char *text)
{
    if (!c || !text)
        return;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_secrets; i++)
        http_redact_one(text, c->secrets[i]);
    pthread_mutex_unlock(&c->lock);
}

/* ---- one attempt -------------------------------------------------------------------------- */

typedef struct http_attempt {
    CURL *curl;
    const sbx_http_request *req;
    size_t max_body;
    uint8_t *body;
    size_t body_len, body_cap;
    bool too_large;
    bool stream_aborted;
    size_t streamed;
    char content_type[256];
    char retry_after[128];
    char captured[SBX_HTTP_MAX_CAPTURED + 2]; /* req->capture_header's value; one byte more than
                                                 allowed, to tell a value that was too long */
    int64_t deadline_mono_ms;                 /* of this attempt, for the progress callback */
} http_attempt;

static bool http_append(http_attempt *a, const char *data, size_t len)
{
    if (a->body_len + len > a->max_body) {
        a->too_large = true;
        return false;
    }
    if (a->body_len + len + 1 > a->body_cap) {
        size_t cap = a->body_cap ? a->body_cap : 4096;
        while (cap < a->body_len + len + 1)
            cap *= 2;
        uint8_t *nb = realloc(a->body, cap);
        if (!nb)
            return false;
        a->body = nb;
        a->body_cap = cap;
    }
    memcpy(a->body + a->body_len, data, len);
    a->body_len += len;
    a->body[a->body_len] = 0;
    return true;
}

static size_t http_write_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    http_attempt *a = arg;
    size_t len = size * nmemb;
    if (a->req->on_body) {
        long status = 0;
        curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            a->streamed += len;
            if (!a->req->on_body(a->req->on_body_arg, (const uint8_t *)data, len)) {
                a->stream_aborted = true;
                return 0;
            }
            return len;
        }
    }
    return http_append(a, data, len) ? len : 0;
}

static void http_copy_header_value(char *dst, size_t cap, const char *v, size_t n)
{
    while (n > 0 && (*v == ' ' || *v == '\t'))
        v++, n--;
    while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static size_t http_header_cb(char *data, size_t size, size_t nmemb, void *arg)
{
    http_attempt *a = arg;
    size_t len = size * nmemb;
    if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* A new response (after 1xx or a redirect): forget the previous one's headers. */
        a->content_type[0] = 0;
        a->retry_after[0] = 0;
        a->captured[0] = 0;
        return len;
    }
    const char *colon = memchr(data, ':', len);
    if (!colon)
        return len;
    size_t nlen = (size_t)(colon - data);
    const char *v = colon + 1;
    size_t vlen = len - nlen - 1;
    if (nlen == 12 && strncasecmp(data, "content-type", 12) == 0)
        http_copy_header_value(a->content_type, sizeof a->content_type, v, vlen);
    else if (nlen == 11 && strncasecmp(data, "retry-after", 11) == 0)
        http_copy_header_value(a->retry_after, sizeof a->retry_after, v, vlen);
    else if (a->req->capture_header != NULL && nlen == strlen(a->req->capture_header) &&
             strncasecmp(data, a->req->capture_header, nlen) == 0)
        http_copy_header_value(a->captured, sizeof a->captured, v, vlen);
    return len;
}

static int http_progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                            curl_off_t ulnow)
{
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    http_attempt *a = arg;
    if (a->req->cancel && *a->req->cancel)
        return 1;
    return 0;
}

static void http_trace(sbx_http_client *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void http_trace(sbx_http_client *c, const char *fmt, ...)
{
    if (!c->trace)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sbx_http_redact(c, line);
    c->trace(c->trace_arg, line);
}

/* "Authorization: Bearer x" -> "Authorization: [REDACTED]" for credential headers. */
static void http_trace_header(sbx_http_client *c, const char *h)
{
    if (!c->trace)
        return;
    const char *colon = strchr(h, ':');
    size_t nlen = colon ? (size_t)(colon - h) : strlen(h);
    for (size_t i = 0; http_credential_headers[i]; i++) {
        if (strlen(http_credential_headers[i]) == nlen &&
            strncasecmp(h, http_credential_headers[i], nlen) == 0) {
            http_trace(c, "%s:   %.*s: [REDACTED]", c->provider, (int)nlen, h);
            return;
        }
    }
    http_trace(c, "%s:   %s", c->provider, h);
}

static int64_t http_min_pos(int64_t a, int64_t b)
{
    if (a <= 0)
        return b;
    if (b <= 0)
        return a;
    return a < b ? a : b;
}

/* Runs one attempt. Returns the curl code; fills a. */
static CURLcode http_attempt_run(sbx_http_client *c, const sbx_http_request *req,
                                 int64_t timeout_ms, http_attempt *a)
{
    CURL *curl = curl_easy_init();
    if (!curl)
        return CURLE_OUT_OF_MEMORY;
    a->curl = curl;
    struct curl_slist *hdrs = NULL;
    CURLcode rc = CURLE_OK;
    /* No "Expect: 100-continue": it adds a round trip and some proxies mishandle it. */
    hdrs = curl_slist_append(hdrs, "Expect:");
    for (size_t i = 0; hdrs && i < req->n_headers; i++) {
        struct curl_slist *n = curl_slist_append(hdrs, req->headers[i]);
        if (!n) {
            curl_slist_free_all(hdrs);
            hdrs = NULL;
            break;
        }
        hdrs = n;
    }
    if (!hdrs) {
        curl_easy_cleanup(curl);
        return CURLE_OUT_OF_MEMORY;
    }
    curl_easy_setopt(curl, CURLOPT_URL, req->url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req->method);
    if (strcmp(req->method, "GET") == 0) {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else if (req->body || strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req->body ? req->body : "");
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (c->share)
        curl_easy_setopt(curl, CURLOPT_SHARE, c->share);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, (long)c->connect_timeout_ms);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    /* Cloud APIs never need redirects; following one could send our key to another host. */
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, http_write_cb);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, http_header_cb);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, http_progress_cb);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, a);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)a->max_body);
    curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    rc = curl_easy_perform(curl);
    curl_slist_free_all(hdrs);
    return rc;
}

static uint64_t http_random(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
        r = (uint64_t)sbx_monotonic_us() * 6364136223846793005ull + 1442695040888963407ull;
    return r;
}

/* Full jitter: a random delay in [step/2, step], step = base * 2^(retry-1) capped. The lower
 * half bound keeps a retry from hammering the server immediately. */
static int64_t http_backoff_ms(const sbx_http_client *c, int retry)
{
    int64_t step = c->backoff_base_ms;
    for (int i = 1; i < retry && step < SBX_HTTP_BACKOFF_CAP_MS; i++)
        step *= 2;
    if (step > SBX_HTTP_BACKOFF_CAP_MS)
        step = SBX_HTTP_BACKOFF_CAP_MS;
    int64_t half = step / 2;
    return half + (int64_t)(http_random() % (uint64_t)(half + 1));
}

/* Sleeps ms in slices; false when cancelled. */
static bool http_sleep_ms(int64_t ms, const volatile int *cancel)
{
    while (ms > 0) {
        if (cancel && *cancel)
            return false;
        int64_t slice = ms < HTTP_SLEEP_SLICE_MS ? ms : HTTP_SLEEP_SLICE_MS;
        struct timespec ts = {.tv_sec = (time_t)(slice / 1000),
                              .tv_nsec = (long)((slice % 1000) * 1000000)};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
        }
        ms -= slice;
    }
    return !(cancel && *cancel);
}

int64_t sbx_http_parse_retry_after(const char *value, int64_t now_unix_s)
{
    if (!value)
        return -1;
    while (*value == ' ')
        value++;
    if (!*value)
        return -1;
    if (isdigit((unsigned char)*value)) {
        char *end = NULL;
        errno = 0;
        unsigned long long s = strtoull(value, &end, 10);
        while (end && *end == ' ')
            end++;
        if (errno || !end || *end)
            return -1;
        if (s > 86400ull)
            s = 86400ull; /* a day is "effectively never" already */
        return (int64_t)s * 1000;
    }
    time_t t = curl_getdate(value, NULL);
    if (t == (time_t)-1)
        return -1;
    int64_t d = ((int64_t)t - now_unix_s) * 1000;
    return d < 0 ? 0 : d;
}

static bool http_status_retryable(long status)
{
    return status == 500 || status == 502 || status == 503 || status == 504;
}

static bool http_transport_unsent(CURLcode rc)
{
    /* The request never reached the server: safe to retry any call. */
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
           rc == CURLE_COULDNT_RESOLVE_PROXY;
}

static bool http_transport_retryable(CURLcode rc)
{
    return rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_PARTIAL_FILE || rc == CURLE_SSL_CONNECT_ERROR || http_transport_unsent(rc);
}

static sbx_status http_fail(sbx_http_client *c, const sbx_http_request *req, sbx_error *err,
                            sbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static sbx_status http_fail(sbx_http_client *c, const sbx_http_request *req, sbx_error *err,
                            sbx_status code, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    sbx_error_set(err, code, "%s: %s %s %s", c->provider, req->method, req->url, detail);
    if (err)
        sbx_http_redact(c, err->message);
    return code;
}

/* Long because it is one libcurl transfer set up option by option (method, headers, body, TLS,
 * bounded response, timeouts, redaction of errors), each a line or two. */
sbx_status sbx_http_do(sbx_http_client *c, const sbx_http_request *req, sbx_http_response *resp,
                       sbx_error *err)
{
    memset(resp, 0, sizeof *resp);
    if (!req->method || !req->url)
        return sbx_error_set(err, SBX_E_INTERNAL, "%s: HTTP request without method or URL",
                             c->provider);
    if (req->n_headers > SBX_HTTP_MAX_HEADERS)
        return http_fail(c, req, err, SBX_E_INTERNAL, "has %zu headers (at most %d)",
                         req->n_headers, SBX_HTTP_MAX_HEADERS);
    if (req->body_len > SBX_HTTP_MAX_REQUEST_BYTES)
        return http_fail(c, req, err, SBX_E_RESOURCE_EXHAUSTED,
                         "refused: request body of %zu bytes exceeds the limit of %u bytes",
                         req->body_len, (unsigned)SBX_HTTP_MAX_REQUEST_BYTES);
    if (c->trace) {
        http_trace(c, "%s: %s %s (%zu body bytes%s)", c->provider, req->method, req->url,
                   req->body_len, req->idempotent ? ", idempotent" : "");
        for (size_t i = 0; i < req->n_headers; i++)
            http_trace_header(c, req->headers[i]);
    }
    int64_t per_attempt = req->timeout_ms > 0 ? req->timeout_ms : c->total_timeout_ms;
    for (int attempt = 1;; attempt++) {
        int64_t now = sbx_monotonic_ms();
        int64_t timeout_ms = per_attempt;
        if (req->deadline_mono_ms > 0) {
            int64_t left = req->deadline_mono_ms - now;
            if (left <= 0)
                return http_fail(c, req, err, SBX_E_TIMEOUT,
                                 "was not attempted: the deadline had passed");
            timeout_ms = http_min_pos(timeout_ms, left);
        }
        if (req->cancel && *req->cancel)
            return http_fail(c, req, err, SBX_E_TIMEOUT, "was cancelled");
        http_attempt a = {.req = req, .max_body = c->max_body_bytes};
        int64_t t0 = sbx_monotonic_ms();
        CURLcode rc = http_attempt_run(c, req, timeout_ms, &a);
        long status = 0;
        if (a.curl)
            curl_easy_getinfo(a.curl, CURLINFO_RESPONSE_CODE, &status);
        char curl_msg[CURL_ERROR_SIZE];
        snprintf(curl_msg, sizeof curl_msg, "%s", curl_easy_strerror(rc));
        if (a.curl)
            curl_easy_cleanup(a.curl);
        int64_t took = sbx_monotonic_ms() - t0;
        bool last = attempt >= c->max_attempts;
        int64_t wait_ms = -1;

        if (rc != CURLE_OK) {
            http_trace(c, "%s: %s %s -> transport error after %" PRId64 " ms: %s (attempt %d)",
                       c->provider, req->method, req->url, took, curl_msg, attempt);
            free(a.body);
            if (req->cancel && *req->cancel)
                return http_fail(c, req, err, SBX_E_TIMEOUT, "was cancelled");
            if (a.too_large || rc == CURLE_FILESIZE_EXCEEDED)
                return http_fail(c, req, err, SBX_E_RESOURCE_EXHAUSTED,
                                 "returned a response body larger than the limit of %zu bytes; "
                                 "refused",
                                 a.max_body);
            if (a.stream_aborted) {
                sbx_status s = req->abort_status && *req->abort_status != SBX_OK
                                   ? *req->abort_status
                                   : SBX_E_PROVISION;
                return http_fail(c, req, err, s, "stream was abandoned by its reader");
            }
            if (rc == CURLE_OPERATION_TIMEDOUT) {
                bool deadline =
                    req->deadline_mono_ms > 0 && sbx_monotonic_ms() >= req->deadline_mono_ms - 5;
                return http_fail(c, req, err, SBX_E_TIMEOUT, "timed out after %" PRId64 " ms (%s)",
                                 took,
                                 deadline ? "the operation's deadline passed"
                                          : "per-call timeout; is the endpoint reachable?");
            }
            bool may_retry = a.streamed == 0 && (http_transport_unsent(rc) ||
                                                 (req->idempotent && http_transport_retryable(rc)));
            if (last || !may_retry) {
                const char *what =
                    rc == CURLE_PARTIAL_FILE ? "failed: the response body was truncated" : "failed";
                return http_fail(c, req, err, SBX_E_PROVISION, "%s: %s (after %d attempt%s)", what,
                                 curl_msg, attempt, attempt == 1 ? "" : "s");
            }
        } else {
            http_trace(c, "%s: %s %s -> %ld in %" PRId64 " ms (attempt %d)", c->provider,
                       req->method, req->url, status, took, attempt);
            bool retry = false;
            if (status == 429) {
                /* Too Many Requests: the server refused before acting, so any call may repeat. */
                retry = true;
            } else if (http_status_retryable(status) && req->idempotent && a.streamed == 0) {
                retry = true;
            }
            if (retry && !last) {
                int64_t ra = sbx_http_parse_retry_after(a.retry_after, (int64_t)time(NULL));
                if (ra > SBX_HTTP_RETRY_AFTER_CAP_MS)
                    retry = false; /* "not now": report it */
                wait_ms = ra;
                if (retry && req->deadline_mono_ms > 0 && wait_ms > 0 &&
                    sbx_monotonic_ms() + wait_ms >= req->deadline_mono_ms)
                    retry = false;
            }
            if (!retry || last) {
                resp->status = status;
                resp->body = a.body;
                resp->body_len = a.body_len;
                resp->content_type = a.content_type[0] ? strdup(a.content_type) : NULL;
                resp->captured = a.captured[0] == 0                           ? NULL
                                 : strlen(a.captured) > SBX_HTTP_MAX_CAPTURED ? strdup("")
                                                                              : strdup(a.captured);
                resp->attempts = attempt;
                return SBX_OK;
            }
            free(a.body);
        }
        if (wait_ms < 0)
            wait_ms = http_backoff_ms(c, attempt);
        if (req->deadline_mono_ms > 0 && sbx_monotonic_ms() + wait_ms >= req->deadline_mono_ms)
            return http_fail(c, req, err, SBX_E_TIMEOUT,
                             "failed and the deadline leaves no time to retry (after %d "
                             "attempt%s)",
                             attempt, attempt == 1 ? "" : "s");
        http_trace(c, "%s: retrying in %" PRId64 " ms", c->provider, wait_ms);
        if (!http_sleep_ms(wait_ms, req->cancel))
            return http_fail(c, req, err, SBX_E_TIMEOUT, "was cancelled");
    }
}

void sbx_http_response_clear(sbx_http_response *resp)
{
    if (!resp)
        return;
    free(resp->body);
    free(resp->content_type);
    free(resp->captured);
    memset(resp, 0, sizeof *resp);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void http_copy_printable(char *out, size_t out_size, const char *s, size_t n)
{
    size_t o = 0;
    bool cut = false;
    for (size_t i = 0; i < n && s[i]; i++) {
        if (o + 1 >= out_size || o >= SBX_HTTP_ERROR_BODY_MAX) {
            cut = true;
            break;
        }
        unsigned char ch = (unsigned char)s[i];
        out[o++] = (ch == '\n' || ch == '\r' || ch == '\t') ? ' '
                   : (ch < 0x20 || ch == 0x7f)              ? '?'
                                                            : (char)ch;
    }
    while (o > 0 && out[o - 1] == ' ')
        o--;
    out[o] = 0;
    if (cut && out_size > 4) {
        size_t at = o + 3 < out_size ? o : out_size - 4;
        memcpy(out + at, "...", 4);
    }
}

static const char *http_json_message(json_t *root)
{
    if (!json_is_object(root))
        return NULL;
    const char *keys[] = {"message", "Message", "errorMessage", NULL};
    for (size_t i = 0; keys[i]; i++) {
        json_t *m = json_object_get(root, keys[i]);
        if (json_is_string(m) && json_string_length(m) > 0)
            return json_string_value(m);
    }
    json_t *e = json_object_get(root, "error");
    if (json_is_object(e)) {
        json_t *m = json_object_get(e, "message");
        if (json_is_string(m))
            return json_string_value(m);
    }
    if (json_is_string(e))
        return json_string_value(e);
    return NULL;
}

void sbx_http_body_message(sbx_http_client *c, const sbx_http_response *resp, char *out,
                           size_t out_size)
{
    if (!out || out_size == 0)
        return;
    out[0] = 0;
    if (!resp->body || resp->body_len == 0) {
        snprintf(out, out_size, "(empty body)");
        return;
    }
    json_t *root = NULL;
    size_t i = 0;
    while (i < resp->body_len && isspace(resp->body[i]))
        i++;
    if (i < resp->body_len && resp->body[i] == '{') {
        json_t *j = NULL;
        if (sbx_http_parse_json(c, "error body", resp->body, resp->body_len, &j, NULL) == SBX_OK)
            root = j;
    }
    const char *msg = http_json_message(root);
    if (msg)
        http_copy_printable(out, out_size, msg, strlen(msg));
    else
        http_copy_printable(out, out_size, (const char *)resp->body, resp->body_len);
    json_decref(root);
    sbx_http_redact(c, out);
}

sbx_status sbx_http_status_error(sbx_http_client *c, const sbx_http_request *req,
                                 const sbx_http_response *resp, sbx_status code, sbx_error *err)
{
    char msg[SBX_HTTP_ERROR_BODY_MAX + 8];
    sbx_http_body_message(c, resp, msg, sizeof msg);
    bool auth = resp->status == 401 || resp->status == 403;
    sbx_error_set(err, code, "%s: %s %s returned %ld: %s%s%s", c->provider, req->method, req->url,
                  resp->status, msg, auth && c->auth_hint ? "; " : "",
                  auth && c->auth_hint ? c->auth_hint : "");
    if (err)
        sbx_http_redact(c, err->message);
    return code;
}

sbx_status sbx_http_check(sbx_http_client *c, const sbx_http_request *req,
                          const sbx_http_response *resp, sbx_error *err)
{
    long s = resp->status;
    if (s >= 200 && s < 300)
        return SBX_OK;
    sbx_status code;
    switch (s) {
    case 401: code = SBX_E_CONFIG; break;
    case 403: code = SBX_E_PERMISSION_DENIED; break;
    case 404:
    case 410: code = SBX_E_GONE; break;
    case 408: code = SBX_E_TIMEOUT; break;
    case 400:
    case 422: code = SBX_E_INVALID_ARGUMENT; break;
    case 429:
    case 507: code = SBX_E_RESOURCE_EXHAUSTED; break;
    default: code = SBX_E_PROVISION; break;
    }
    return sbx_http_status_error(c, req, resp, code, err);
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* Depth of the deepest [ or { outside strings; stops counting past limit. */
static int http_json_depth(const uint8_t *s, size_t len, int limit)
{
    int depth = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        uint8_t ch = s[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
            continue;
        }
        if (ch == '"') {
            in_str = true;
        } else if (ch == '[' || ch == '{') {
            if (++depth > max)
                max = depth;
            if (max > limit)
                return max;
        } else if (ch == ']' || ch == '}') {
            depth--;
        }
    }
    return max;
}

sbx_status sbx_http_parse_json(sbx_http_client *c, const char *what, const uint8_t *data,
                               size_t len, json_t **out, sbx_error *err)
{
    *out = NULL;
    const char *prov = c ? c->provider : "http";
    if (!data || len == 0) {
        sbx_error_set(err, SBX_E_PROVISION, "%s: %s: invalid JSON: the body is empty", prov, what);
        if (err && c)
            sbx_http_redact(c, err->message);
        return SBX_E_PROVISION;
    }
    if (http_json_depth(data, len, SBX_HTTP_JSON_MAX_DEPTH) > SBX_HTTP_JSON_MAX_DEPTH) {
        sbx_error_set(err, SBX_E_PROVISION,
                      "%s: %s: invalid JSON: nesting deeper than %d levels refused", prov, what,
                      SBX_HTTP_JSON_MAX_DEPTH);
        if (err && c)
            sbx_http_redact(c, err->message);
        return SBX_E_PROVISION;
    }
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        sbx_error_set(err, SBX_E_PROVISION,
                      "%s: %s: invalid JSON at line %d column %d: %s (the service answered "
                      "something that is not its documented JSON; is the base URL right?)",
                      prov, what, jerr.line, jerr.column, jerr.text);
        if (err && c)
            sbx_http_redact(c, err->message);
        return SBX_E_PROVISION;
    }
    *out = j;
    return SBX_OK;
}

sbx_status sbx_http_response_json(sbx_http_client *c, const sbx_http_request *req,
                                  const sbx_http_response *resp, json_t **out, sbx_error *err)
{
    char what[512];
    snprintf(what, sizeof what, "%s %s", req->method, req->url);
    sbx_status s = sbx_http_parse_json(c, what, resp->body, resp->body_len, out, err);
    if (s != SBX_OK)
        return s;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        sbx_error_set(err, SBX_E_PROVISION,
                      "%s: %s: invalid JSON: expected an object at the top level", c->provider,
                      what);
        if (err)
            sbx_http_redact(c, err->message);
        return SBX_E_PROVISION;
    }
    return SBX_OK;
}

size_t sbx_utf8_prefix_len(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max)
        return n;
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

char *sbx_http_json_dump(const json_t *j)
{
    return json_dumps(j, JSON_COMPACT);
}

char *sbx_http_url_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(n * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = 0;
    return out;
}

char *sbx_http_base64_encode(const void *data, size_t len)
{
    if (len > (SIZE_MAX / 4) * 3 - 3)
        return NULL;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    const uint8_t *p = data;
    /* EVP_EncodeBlock takes an int length: feed it in slices that are a multiple of 3. */
    const size_t slice = 3u * 1024u * 1024u;
    for (size_t off = 0; off < len; off += slice) {
        size_t n = len - off < slice ? len - off : slice;
        o += (size_t)EVP_EncodeBlock((unsigned char *)out + o, p + off, (int)n);
    }
    out[o] = 0;
    return out;
}

uint8_t *sbx_http_base64_decode(const char *text, size_t len, size_t *out_len)
{
    *out_len = 0;
    size_t pad = 0;
    while (len > 0 && text[len - 1] == '=' && pad < 2)
        len--, pad++;
    if (len % 4 == 1)
        return NULL;
    size_t full = len + ((4 - len % 4) % 4); /* re-padded length */
    char *padded = malloc(full + 1);
    uint8_t *out = malloc(full / 4 * 3 + 1);
    if (!padded || !out) {
        free(padded);
        free(out);
        return NULL;
    }
    memcpy(padded, text, len);
    for (size_t i = len; i < full; i++)
        padded[i] = '=';
    padded[full] = 0;
    size_t o = 0;
    const size_t slice = 4u * 1024u * 1024u; /* a multiple of 4 */
    for (size_t off = 0; off < full; off += slice) {
        size_t n = full - off < slice ? full - off : slice;
        int got = EVP_DecodeBlock(out + o, (const unsigned char *)padded + off, (int)n);
        if (got < 0) {
            free(padded);
            free(out);
            return NULL;
        }
        o += (size_t)got;
    }
    /* EVP_DecodeBlock counts padding bytes as zeros: drop them. */
    size_t drop = full - len;
    o -= drop;
    free(padded);
    out[o] = 0;
    *out_len = o;
    return out;
}
