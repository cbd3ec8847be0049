/* aws.c - SSM (JSON 1.1) and STS AssumeRole (query/XML) calls, SigV4-signed, over the shared
 * HTTP helper (see aws.h). Facts cited from shared/reference/cloud-apis.md §3 (drawn from
 * botocore's service models) and AWS's API references:
 *   - SSM: POST /, Content-Type application/x-amz-json-1.1, X-Amz-Target AmazonSSM.<Op>,
 *     SigV4 service "ssm"; errors {"__type": "...", "message"|"Message": "..."}, __type possibly
 *     "namespace#Code" or "Code:extra".
 *   - STS: POST / form-encoded Action=AssumeRole&Version=2011-06-15&RoleArn&RoleSessionName
 *     &DurationSeconds, SigV4 service "sts"; answer <AssumeRoleResponse><AssumeRoleResult>
 *     <Credentials><AccessKeyId/><SecretAccessKey/><SessionToken/><Expiration/>; errors
 *     <ErrorResponse><Error><Code/><Message/>.
 */
#include "providers/ec2_ssm/aws.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "core/net.h"
#include "providers/ec2_ssm/shell.h"
#include "providers/ec2_ssm/sigv4.h"
#include "sbx/contract.h"

/* The longest URL accepted for an endpoint override. */
#define AWS_MAX_URL 2048

typedef struct aws_endpoint {
    char *url;  /* as given (or built from the region) */
    char *host; /* authority: host[:port], the signed Host header */
    char *path; /* path part, "/" when none */
} aws_endpoint;

struct aws_client {
    sbx_http_client *http;
    char *region;
    aws_endpoint ssm, sts;
    int64_t throttle_base_ms;
};

static void endpoint_free(aws_endpoint *e)
{
    free(e->url);
    free(e->host);
    free(e->path);
    e->url = e->host = e->path = NULL;
}

static sbx_status endpoint_parse(const char *what, const char *url, aws_endpoint *e, sbx_error *err)
{
    memset(e, 0, sizeof(*e));
    if (strlen(url) > AWS_MAX_URL)
        return sbx_error_set(err, SBX_E_CONFIG, "ec2_ssm: %s is longer than %d characters", what,
                             AWS_MAX_URL);
    bool https = strncmp(url, "https://", 8) == 0;
    bool http = strncmp(url, "http://", 7) == 0;
    if (!https && !http)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: %s '%s' must start with https:// (or http:// to a "
                             "loopback address, for tests)",
                             what, url);
    const char *auth = url + (https ? 8 : 7);
    size_t an = strcspn(auth, "/?#");
    if (an == 0)
        return sbx_error_set(err, SBX_E_CONFIG, "ec2_ssm: %s '%s' has no host", what, url);
    for (size_t i = 0; i < an; i++)
        if (auth[i] == '@' || (unsigned char)auth[i] <= ' ')
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: %s '%s' must not carry user information or spaces", what,
                                 url);
    /* Plain HTTP would send the signed request (and a session token) in clear text. */
    if (http && sbx_net_url_transport(url) != SBX_NET_URL_PLAIN_LOOPBACK)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: %s '%s' uses plain http to a non-loopback host; use "
                             "https://",
                             what, url);
    const char *path = auth + an;
    if (*path == '?' || *path == '#')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: %s '%s' must not carry a query or fragment", what, url);
    e->url = strdup(url);
    e->host = strndup(auth, an);
    e->path = strdup(*path == '/' ? path : "/");
    if (e->url == NULL || e->host == NULL || e->path == NULL) {
        endpoint_free(e);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    return SBX_OK;
}

sbx_status aws_client_new(const aws_client_config *cfg, aws_client **out, sbx_error *err)
{
    *out = NULL;
    if (cfg->region == NULL || cfg->region[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "ec2_ssm: no AWS region; set `region` in the ec2_ssm block or "
                             "AWS_REGION");
    for (const char *p = cfg->region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "ec2_ssm: region '%.64s' is not like 'us-east-1'", cfg->region);
    aws_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    c->region = strdup(cfg->region);
    c->throttle_base_ms = cfg->throttle_base_ms > 0 ? cfg->throttle_base_ms : AWS_THROTTLE_BASE_MS;
    char def[512];
    sbx_status st = SBX_OK;
    if (c->region == NULL)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    if (st == SBX_OK) {
        snprintf(def, sizeof(def), "https://ssm.%s.amazonaws.com/", cfg->region);
        st = endpoint_parse("ssm_endpoint", cfg->ssm_endpoint ? cfg->ssm_endpoint : def, &c->ssm,
                            err);
    }
    if (st == SBX_OK) {
        snprintf(def, sizeof(def), "https://sts.%s.amazonaws.com/", cfg->region);
        st = endpoint_parse("sts_endpoint", cfg->sts_endpoint ? cfg->sts_endpoint : def, &c->sts,
                            err);
    }
    if (st == SBX_OK) {
        sbx_http_client_config hc = {
            .provider = "ec2_ssm",
            .auth_hint = "check the AWS credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY "
                         "or the shared credentials file) and their IAM permissions",
            .total_timeout_ms = cfg->request_timeout_ms,
            .backoff_base_ms = cfg->http_backoff_ms,
            .max_body_bytes = AWS_MAX_RESPONSE_BYTES,
        };
        st = sbx_http_client_new(&hc, &c->http, err);
    }
    if (st != SBX_OK) {
        aws_client_free(c);
        return st;
    }
    *out = c;
    return SBX_OK;
}

void aws_client_free(aws_client *c)
{
    if (c == NULL)
        return;
    sbx_http_client_free(c->http);
    free(c->region);
    endpoint_free(&c->ssm);
    endpoint_free(&c->sts);
    free(c);
}

sbx_http_client *aws_client_http(aws_client *c)
{
    return c->http;
}

void aws_error_code(const char *type, char *out)
{
    out[0] = '\0';
    if (type == NULL)
        return;
    const char *hash = strrchr(type, '#');
    const char *s = hash != NULL ? hash + 1 : type;
    size_t n = strcspn(s, ":");
    if (n >= AWS_CODE_MAX)
        n = AWS_CODE_MAX - 1;
    for (size_t i = 0; i < n; i++) /* keep it printable: it lands in error messages */
        out[i] = isalnum((unsigned char)s[i]) || s[i] == '.' || s[i] == '_' ? s[i] : '?';
    out[n] = '\0';
}

/* ---- signing and sending ------------------------------------------------------------------ */

typedef struct signed_headers {
    char *lines[8];
    size_t n;
} signed_headers;

static void signed_headers_free(signed_headers *h)
{
    for (size_t i = 0; i < h->n; i++) {
        if (h->lines[i] != NULL)
            memset(h->lines[i], 0, strlen(h->lines[i])); /* may hold the session token */
        free(h->lines[i]);
    }
    h->n = 0;
}

static char *header_line(const char *name, const char *value)
{
    size_t n = strlen(name) + strlen(value) + 3;
    char *l = malloc(n);
    if (l != NULL)
        snprintf(l, n, "%s: %s", name, value);
    return l;
}

/* Signs a POST of body to endpoint e with content_type (and target, for SSM) and fills the
 * header lines to send. */
static sbx_status sign_post(aws_client *c, const aws_endpoint *e, const char *service,
                            const aws_creds *creds, const char *content_type, const char *target,
                            const char *body, size_t body_len, signed_headers *out, sbx_error *err)
{
    memset(out, 0, sizeof(*out));
    sigv4_header h[3];
    size_t nh = 0;
    h[nh++] = (sigv4_header){"Host", e->host};
    h[nh++] = (sigv4_header){"Content-Type", content_type};
    if (target != NULL)
        h[nh++] = (sigv4_header){"X-Amz-Target", target};
    sigv4_request req = {.method = "POST",
                         .path = e->path,
                         .headers = h,
                         .n_headers = nh,
                         .body = body,
                         .body_len = body_len};
    sigv4_credentials sc = {creds->access_key_id, creds->secret_access_key, creds->session_token};
    sigv4_params p = {.region = c->region,
                      .service = service,
                      .time_s = (int64_t)time(NULL),
                      .normalize_path = true};
    sigv4_signed s;
    sbx_status st = sigv4_sign_headers(&req, &sc, &p, &s, err);
    if (st != SBX_OK)
        return st;
    bool oom = false;
    for (size_t i = 0; i < nh; i++)
        if ((out->lines[out->n++] = header_line(h[i].name, h[i].value)) == NULL)
            oom = true;
    for (size_t i = 0; i < s.n_added; i++)
        if ((out->lines[out->n++] = header_line(s.added[i].name, s.added[i].value)) == NULL)
            oom = true;
    sigv4_signed_clear(&s);
    if (oom) {
        signed_headers_free(out);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    return SBX_OK;
}

/* Replaces every occurrence of the secret key and session token in msg with "[REDACTED]"
 * (never growing msg). This does not depend on the HTTP client's secret table, which is bounded:
 * the credentials used for a call are always scrubbed from that call's error. */
static void redact_one(char *msg, const char *secret)
{
    static const char mark[] = "[REDACTED]";
    size_t sl = secret != NULL ? strlen(secret) : 0;
    if (msg == NULL || sl < sizeof(mark) - 1)
        return;
    char *p;
    while ((p = strstr(msg, secret)) != NULL) {
        memcpy(p, mark, sizeof(mark) - 1);
        memmove(p + sizeof(mark) - 1, p + sl, strlen(p + sl) + 1);
    }
}

static void redact_creds(sbx_error *err, const aws_creds *creds)
{
    if (err == NULL || creds == NULL)
        return;
    redact_one(err->message, creds->secret_access_key);
    redact_one(err->message, creds->session_token);
}

static void register_secrets(aws_client *c, const aws_creds *creds)
{
    if (creds->secret_access_key != NULL)
        sbx_http_client_add_secret(c->http, creds->secret_access_key);
    if (creds->session_token != NULL)
        sbx_http_client_add_secret(c->http, creds->session_token);
}

/* Sleeps up to ms, in slices, returning early (false) on cancel or past the deadline. */
static bool backoff_sleep(int64_t ms, int64_t deadline_mono_ms, const volatile int *cancel)
{
    int64_t until = sbx_monotonic_ms() + ms;
    if (deadline_mono_ms > 0 && until >= deadline_mono_ms)
        return false;
    for (;;) {
        if (cancel != NULL && *cancel)
            return false;
        int64_t left = until - sbx_monotonic_ms();
        if (left <= 0)
            return true;
        int64_t slice = left < 20 ? left : 20;
        struct timespec ts = {0, (long)slice * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static int64_t jittered(int64_t base, int attempt)
{
    int64_t step = base;
    for (int i = 1; i < attempt && step < AWS_THROTTLE_CAP_MS; i++)
        step *= 2;
    if (step > AWS_THROTTLE_CAP_MS)
        step = AWS_THROTTLE_CAP_MS;
    uint32_t r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof(r)) != 1)
        r = (uint32_t)time(NULL);
    /* "Equal jitter": half fixed, half random, so retries spread without collapsing to 0. */
    return step / 2 + (int64_t)(r % (uint32_t)(step / 2 + 1));
}

static sbx_status map_ssm_code(const char *code, long status)
{
    if (strcmp(code, "InvalidInstanceId") == 0)
        return SBX_E_GONE;
    if (strncmp(code, "AccessDenied", 12) == 0)
        return SBX_E_PERMISSION_DENIED;
    if (strcmp(code, "UnrecognizedClientException") == 0 ||
        strcmp(code, "InvalidSignatureException") == 0 ||
        strcmp(code, "IncompleteSignature") == 0 ||
        strcmp(code, "MissingAuthenticationToken") == 0 ||
        strcmp(code, "InvalidClientTokenId") == 0 || strcmp(code, "SignatureDoesNotMatch") == 0)
        return SBX_E_CONFIG;
    if (strcmp(code, "ExpiredTokenException") == 0 || strcmp(code, "ExpiredToken") == 0)
        return SBX_E_UNAUTHENTICATED;
    if (strcmp(code, "ThrottlingException") == 0)
        return SBX_E_RESOURCE_EXHAUSTED;
    if (strcmp(code, "ValidationException") == 0 || strcmp(code, "InvalidParameters") == 0 ||
        strcmp(code, "MaxDocumentSizeExceeded") == 0 || strcmp(code, "InvalidDocument") == 0 ||
        strcmp(code, "InvalidCommandId") == 0)
        return SBX_E_INVALID_ARGUMENT;
    (void)status;
    return SBX_E_PROVISION;
}

sbx_status aws_ssm_call(aws_client *c, const aws_creds *creds, const char *operation,
                        json_t *request, bool idempotent, int64_t deadline_mono_ms,
                        const volatile int *cancel, json_t **response, char *code, sbx_error *err)
{
    *response = NULL;
    if (code != NULL)
        code[0] = '\0';
    register_secrets(c, creds);
    char *body = sbx_http_json_dump(request);
    if (body == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: cannot encode the %s request as JSON (text that is not "
                             "UTF-8?)",
                             operation);
    char target[128];
    snprintf(target, sizeof(target), "AmazonSSM.%s", operation);
    char what[160];
    snprintf(what, sizeof(what), "SSM %s", operation);
    sbx_status st = SBX_OK;
    for (int attempt = 1;; attempt++) {
        signed_headers sh;
        st = sign_post(c, &c->ssm, "ssm", creds, "application/x-amz-json-1.1", target, body,
                       strlen(body), &sh, err);
        if (st != SBX_OK)
            break;
        sbx_http_request req = {.method = "POST",
                                .url = c->ssm.url,
                                .headers = (const char *const *)sh.lines,
                                .n_headers = sh.n,
                                .body = body,
                                .body_len = strlen(body),
                                .idempotent = idempotent,
                                .deadline_mono_ms = deadline_mono_ms,
                                .cancel = cancel};
        sbx_http_response resp;
        st = sbx_http_do(c->http, &req, &resp, err);
        signed_headers_free(&sh);
        if (st != SBX_OK) {
            sbx_error_prefix(err, "%s: ", what);
            sbx_http_response_clear(&resp);
            break;
        }
        if (resp.status >= 200 && resp.status < 300) {
            st = sbx_http_response_json(c->http, &req, &resp, response, err);
            sbx_http_response_clear(&resp);
            break;
        }
        /* An AWS error: {"__type": ..., "message": ...}. */
        char ecode[AWS_CODE_MAX] = "";
        json_t *j = NULL;
        if (resp.body != NULL && resp.body_len > 0 &&
            sbx_http_parse_json(c->http, what, resp.body, resp.body_len, &j, NULL) == SBX_OK &&
            json_is_object(j))
            aws_error_code(json_string_value(json_object_get(j, "__type")), ecode);
        json_decref(j);
        if (ecode[0] == '\0' && resp.status >= 500)
            snprintf(ecode, sizeof(ecode), "InternalServerError");
        if (code != NULL)
            snprintf(code, AWS_CODE_MAX, "%s", ecode);
        if (strcmp(ecode, "ThrottlingException") == 0 && attempt < AWS_THROTTLE_MAX_ATTEMPTS &&
            backoff_sleep(jittered(c->throttle_base_ms, attempt), deadline_mono_ms, cancel)) {
            sbx_http_response_clear(&resp);
            continue;
        }
        char msg[SBX_HTTP_ERROR_BODY_MAX + 8];
        sbx_http_body_message(c->http, &resp, msg, sizeof(msg));
        st = map_ssm_code(ecode, resp.status);
        sbx_error_set(err, st, "ec2_ssm: SSM %s failed (HTTP %ld %s): %s%s", operation, resp.status,
                      ecode[0] ? ecode : "unknown error", msg,
                      st == SBX_E_CONFIG               ? "; check the AWS credentials and region"
                      : st == SBX_E_RESOURCE_EXHAUSTED ? " (still throttled after retries)"
                                                       : "");
        if (err != NULL)
            sbx_http_redact(c->http, err->message);
        sbx_http_response_clear(&resp);
        break;
    }
    free(body);
    if (st != SBX_OK)
        redact_creds(err, creds);
    return st;
}

/* ---- STS ---------------------------------------------------------------------------------- */

/* Decodes XML character references (&amp; &lt; &gt; &quot; &apos; &#N; &#xN; for ASCII) of
 * [s, s+n) into a malloc'd string; other '&' sequences are kept literally. */
static char *xml_unescape(const char *s, size_t n)
{
    /* calloc: escapes decode shorter, and the bytes left past the terminator are zeros, not
     * heap leftovers, whatever a reader of the text (aws_error_code, trim_inplace) touches */
    char *o = calloc(1, n + 1);
    if (o == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '&') {
            static const struct {
                const char *e;
                char c;
            } ents[] = {
                {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
            bool done = false;
            for (size_t e = 0; e < 5 && !done; e++) {
                size_t el = strlen(ents[e].e);
                if (n - i >= el && strncmp(s + i, ents[e].e, el) == 0) {
                    o[k++] = ents[e].c;
                    i += el - 1;
                    done = true;
                }
            }
            if (!done && n - i > 3 && s[i + 1] == '#') {
                size_t j = i + 2;
                int base = 10;
                if (s[j] == 'x' || s[j] == 'X') {
                    base = 16;
                    j++;
                }
                long v = 0;
                size_t digits = 0;
                while (j < n && digits < 6 && isxdigit((unsigned char)s[j]) &&
                       (base == 16 || isdigit((unsigned char)s[j]))) {
                    v = v * base +
                        (isdigit((unsigned char)s[j]) ? s[j] - '0' : (tolower(s[j]) - 'a' + 10));
                    j++;
                    digits++;
                }
                if (digits > 0 && j < n && s[j] == ';' && v > 0 && v < 128) {
                    o[k++] = (char)v;
                    i = j;
                    done = true;
                }
            }
            if (done)
                continue;
        }
        o[k++] = s[i];
    }
    o[k] = '\0';
    return o;
}

/* The text of the first <tag>...</tag> in [doc, doc+len) (attributes allowed on the opening
 * tag); NULL when absent, too long or out of memory. *found tells absent from the rest. */
static char *xml_text(const char *doc, size_t len, const char *tag)
{
    size_t tl = strlen(tag);
    const char *end = doc + len;
    for (const char *p = doc; p < end; p++) {
        p = memchr(p, '<', (size_t)(end - p));
        if (p == NULL)
            return NULL;
        if ((size_t)(end - p) < tl + 2 || strncmp(p + 1, tag, tl) != 0 ||
            (p[1 + tl] != '>' && p[1 + tl] != ' ' && p[1 + tl] != '\t'))
            continue;
        const char *gt = memchr(p, '>', (size_t)(end - p));
        if (gt == NULL)
            return NULL;
        const char *v = gt + 1;
        /* The closing tag. */
        for (const char *q = v; q < end; q++) {
            q = memchr(q, '<', (size_t)(end - q));
            if (q == NULL)
                return NULL;
            if ((size_t)(end - q) >= tl + 3 && q[1] == '/' && strncmp(q + 2, tag, tl) == 0 &&
                q[2 + tl] == '>') {
                size_t vn = (size_t)(q - v);
                if (vn > AWS_XML_MAX_VALUE)
                    return NULL;
                return xml_unescape(v, vn);
            }
        }
        return NULL;
    }
    return NULL;
}

static void trim_inplace(char *s)
{
    if (s == NULL)
        return;
    size_t n = strlen(s), i = 0;
    while (i < n && isspace((unsigned char)s[i]))
        i++;
    while (n > i && isspace((unsigned char)s[n - 1]))
        n--;
    memmove(s, s + i, n - i);
    s[n - i] = '\0';
}

bool aws_parse_iso8601(const char *s, int64_t *unix_s)
{
    if (s == NULL)
        return false;
    int y, mo, d, h, mi, sec;
    int consumed = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &consumed) != 6 ||
        consumed != 19)
        return false;
    const char *r = s + 19;
    if (*r == '.') {
        r++;
        if (!isdigit((unsigned char)*r))
            return false;
        while (isdigit((unsigned char)*r))
            r++;
    }
    if (!(strcmp(r, "Z") == 0 || strcmp(r, "+00:00") == 0 || strcmp(r, "+0000") == 0))
        return false;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
        return false;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return false;
    *unix_s = (int64_t)t;
    return true;
}

sbx_status aws_sts_parse(const char *body, size_t len, aws_creds *out, char *code, char *message,
                         size_t message_size)
{
    aws_creds_clear(out);
    if (code != NULL)
        code[0] = '\0';
    if (message != NULL && message_size > 0)
        message[0] = '\0';
    if (body == NULL)
        return SBX_E_PROVISION;
    if (memmem(body, len, "<ErrorResponse", 14) != NULL) {
        char *c = xml_text(body, len, "Code");
        char *m = xml_text(body, len, "Message");
        if (code != NULL)
            aws_error_code(c, code);
        if (message != NULL && m != NULL)
            snprintf(message, message_size, "%s", m);
        free(c);
        free(m);
        return SBX_E_PROVISION;
    }
    const char *cs = memmem(body, len, "<Credentials>", 13);
    if (cs == NULL)
        return SBX_E_PROVISION;
    size_t cl = len - (size_t)(cs - body);
    out->access_key_id = xml_text(cs, cl, "AccessKeyId");
    out->secret_access_key = xml_text(cs, cl, "SecretAccessKey");
    out->session_token = xml_text(cs, cl, "SessionToken");
    char *exp = xml_text(cs, cl, "Expiration");
    trim_inplace(out->access_key_id);
    trim_inplace(out->secret_access_key);
    trim_inplace(out->session_token);
    trim_inplace(exp);
    bool ok = out->access_key_id != NULL && out->access_key_id[0] &&
              out->secret_access_key != NULL && out->secret_access_key[0] &&
              out->session_token != NULL && out->session_token[0] &&
              aws_parse_iso8601(exp, &out->expires_unix_s);
    free(exp);
    if (!ok) {
        aws_creds_clear(out);
        return SBX_E_PROVISION;
    }
    return SBX_OK;
}

void aws_role_session_name(const char *subject, char out[65])
{
    snprintf(out, 65, "sbx-%s", subject != NULL ? subject : "");
    for (char *p = out + 4; *p; p++)
        if (!isalnum((unsigned char)*p) && strchr("_+=,.@-", *p) == NULL)
            *p = '-';
    if (strlen(out) < 5)
        snprintf(out, 65, "sbx-anonymous");
}

static void form_put(sbx_strbuf *b, const char *key, const char *value)
{
    char *ek = sbx_http_url_escape(key), *ev = sbx_http_url_escape(value);
    if (ek == NULL || ev == NULL) {
        b->oom = true;
    } else {
        if (b->len > 0)
            sbx_strbuf_puts(b, "&");
        sbx_strbuf_puts(b, ek);
        sbx_strbuf_puts(b, "=");
        sbx_strbuf_puts(b, ev);
    }
    free(ek);
    free(ev);
}

sbx_status aws_sts_assume_role(aws_client *c, const aws_creds *base, const char *role_arn,
                               const char *session_name, int64_t duration_s,
                               int64_t deadline_mono_ms, aws_creds *out, sbx_error *err)
{
    aws_creds_clear(out);
    /* IAM: RoleArn is 20..2048 characters (botocore sts model arnType). */
    size_t rl = role_arn != NULL ? strlen(role_arn) : 0;
    if (rl < 20 || rl > 2048 || strncmp(role_arn, "arn:", 4) != 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: credentials[\"role_arn\"] is not a role ARN "
                             "(arn:aws:iam::<account>:role/<name>, 20..2048 characters)");
    register_secrets(c, base);
    char dur[24];
    snprintf(dur, sizeof(dur), "%lld", (long long)duration_s);
    sbx_strbuf body = {0};
    form_put(&body, "Action", "AssumeRole");
    form_put(&body, "Version", "2011-06-15");
    form_put(&body, "RoleArn", role_arn);
    form_put(&body, "RoleSessionName", session_name);
    form_put(&body, "DurationSeconds", dur);
    if (body.oom) {
        sbx_strbuf_free(&body);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    signed_headers sh;
    sbx_status st =
        sign_post(c, &c->sts, "sts", base, "application/x-www-form-urlencoded; charset=utf-8", NULL,
                  body.p, body.len, &sh, err);
    if (st != SBX_OK) {
        sbx_strbuf_free(&body);
        return st;
    }
    /* AssumeRole has no side effect beyond issuing credentials: repeating it is harmless. */
    sbx_http_request req = {.method = "POST",
                            .url = c->sts.url,
                            .headers = (const char *const *)sh.lines,
                            .n_headers = sh.n,
                            .body = body.p,
                            .body_len = body.len,
                            .idempotent = true,
                            .deadline_mono_ms = deadline_mono_ms};
    sbx_http_response resp;
    st = sbx_http_do(c->http, &req, &resp, err);
    signed_headers_free(&sh);
    sbx_strbuf_free(&body);
    if (st != SBX_OK) {
        sbx_error_prefix(err, "STS AssumeRole: ");
        redact_creds(err, base);
        sbx_http_response_clear(&resp);
        return st;
    }
    char code[AWS_CODE_MAX], msg[512];
    sbx_status pst =
        aws_sts_parse((const char *)resp.body, resp.body_len, out, code, msg, sizeof(msg));
    long status = resp.status;
    sbx_http_response_clear(&resp);
    if (pst == SBX_OK && status >= 200 && status < 300) {
        register_secrets(c, out);
        return SBX_OK;
    }
    aws_creds_clear(out);
    if (code[0] == '\0') {
        return sbx_error_set(err, SBX_E_PROVISION,
                             "ec2_ssm: STS AssumeRole of %.256s answered HTTP %ld without "
                             "credentials (the answer was not an AssumeRoleResponse)",
                             role_arn, status);
    }
    st = SBX_E_PROVISION;
    if (strcmp(code, "AccessDenied") == 0)
        st = SBX_E_PERMISSION_DENIED;
    else if (strcmp(code, "InvalidClientTokenId") == 0 ||
             strcmp(code, "SignatureDoesNotMatch") == 0 || strcmp(code, "IncompleteSignature") == 0)
        st = SBX_E_CONFIG;
    else if (strcmp(code, "ValidationError") == 0 || strcmp(code, "MalformedPolicyDocument") == 0)
        st = SBX_E_INVALID_ARGUMENT;
    else if (strcmp(code, "ExpiredToken") == 0 || strcmp(code, "ExpiredTokenException") == 0)
        st = SBX_E_UNAUTHENTICATED;
    sbx_error_set(err, st, "ec2_ssm: STS AssumeRole of %.256s failed (HTTP %ld %s): %.300s%s",
                  role_arn, status, code, msg,
                  st == SBX_E_PERMISSION_DENIED
                      ? "; the role's trust policy must allow the base credentials to assume it"
                      : "");
    if (err != NULL)
        sbx_http_redact(c->http, err->message);
    redact_creds(err, base);
    return st;
}
