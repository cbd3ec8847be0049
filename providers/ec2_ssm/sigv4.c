/* sigv4.c - AWS Signature Version 4 signing (see sigv4.h). Pure computation: no I/O, no clock
 * (the caller passes the signing time), no global state. Every step follows AWS's documented
 * algorithm ("Elements of an AWS API request signature", IAM user guide) and the behaviour the
 * public test suite pins down (tests/ssm/data/aws-sigv4):
 *   - canonical URI: dot segments and empty segments removed when normalizing (get-slashes-*,
 *     get-relative-*), every byte but RFC 3986 unreserved characters and '/' percent-encoded
 *     with uppercase hex (get-space-*, get-utf8, get-unreserved);
 *   - canonical query: decoded then re-encoded keys and values (so "%E1%88%B4" and the raw UTF-8
 *     agree: get-vanilla-query-order-encoded, get-vanilla-utf8-query), '/' encoded too, sorted
 *     by key then value, a key without '=' signed as "key=";
 *   - canonical headers: lowercase names sorted, duplicate names merged with ',' in the order
 *     they appeared (get-header-key-duplicate, get-header-value-order), values trimmed and every
 *     run of whitespace, including folded line breaks, collapsed to one space
 *     (get-header-value-trim, get-header-value-multiline).
 * The secret access key only ever enters the HMAC key derivation, and the derived keys are wiped.
 */
#include "providers/ec2_ssm/sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/strbuf.h"

#define SIGV4_ALGORITHM "AWS4-HMAC-SHA256"

/* ---- encoding ----------------------------------------------------------------------------- */

static bool is_unreserved(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

/* RFC 3986 percent-encoding with uppercase hex, as SigV4 requires ("URI-encode each byte"). */
static void uri_encode(sbx_strbuf *b, const char *s, size_t n, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            sbx_strbuf_putc(b, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            sbx_strbuf_put(b, e, 3);
        }
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes %XX escapes (a malformed escape is kept literally); '+' stays '+' (SigV4 treats the
 * query as RFC 3986, not as form encoding). */
static void uri_decode(sbx_strbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n) {
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi >= 0 && lo >= 0) {
                sbx_strbuf_putc(b, (char)(hi * 16 + lo));
                i += 2;
                continue;
            }
        }
        sbx_strbuf_putc(b, s[i]);
    }
}

static void to_hex(const unsigned char *d, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

void sigv4_sha256_hex(const void *data, size_t len, char out[SIGV4_HEX_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(data != NULL ? data : "", len, md, &mdlen, EVP_sha256(), NULL) != 1 ||
        mdlen != 32) {
        /* EVP_Digest with SHA-256 cannot fail short of a broken libcrypto; an all-zero digest
         * then simply never verifies. */
        memset(md, 0, sizeof(md));
    }
    to_hex(md, 32, out);
}

static void hmac_sha256(const unsigned char *key, size_t key_len, const void *msg, size_t len,
                        unsigned char out[32])
{
    unsigned int outlen = 0;
    if (HMAC(EVP_sha256(), key, (int)key_len, msg, len, out, &outlen) == NULL || outlen != 32)
        memset(out, 0, 32);
}

bool sigv4_equal_ct(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return false;
    return CRYPTO_memcmp(a, b, la) == 0;
}

void sigv4_amz_date(int64_t time_s, char out[SIGV4_AMZ_DATE_LEN])
{
    time_t t = (time_t)time_s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL ||
        strftime(out, SIGV4_AMZ_DATE_LEN, "%Y%m%dT%H%M%SZ", &tm) != SIGV4_AMZ_DATE_LEN - 1)
        snprintf(out, SIGV4_AMZ_DATE_LEN, "19700101T000000Z");
}

bool sigv4_parse_amz_date(const char *s, int64_t *time_s)
{
    if (s == NULL || strlen(s) != SIGV4_AMZ_DATE_LEN - 1 || s[8] != 'T' || s[15] != 'Z')
        return false;
    for (int i = 0; i < 15; i++)
        if (i != 8 && !isdigit((unsigned char)s[i]))
            return false;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    tm.tm_year = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0') - 1900;
    tm.tm_mon = (s[4] - '0') * 10 + (s[5] - '0') - 1;
    tm.tm_mday = (s[6] - '0') * 10 + (s[7] - '0');
    tm.tm_hour = (s[9] - '0') * 10 + (s[10] - '0');
    tm.tm_min = (s[11] - '0') * 10 + (s[12] - '0');
    tm.tm_sec = (s[13] - '0') * 10 + (s[14] - '0');
    if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60)
        return false;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return false;
    *time_s = (int64_t)t;
    return true;
}

/* ---- canonical URI ------------------------------------------------------------------------ */

/* Removes "." and ".." segments and empty segments (RFC 3986 §5.2.4 plus AWS's "normalize URI
 * paths"); keeps a trailing '/' when the path had one. */
static void canonical_uri(sbx_strbuf *out, const char *path, bool normalize)
{
    if (path == NULL || path[0] == '\0')
        path = "/";
    if (!normalize) {
        uri_encode(out, path, strlen(path), true);
        return;
    }
    /* Segment stack: offsets into path. A path of n bytes has at most n/1 segments. */
    size_t n = strlen(path);
    size_t *start = calloc(n + 1, sizeof(size_t)), *len = calloc(n + 1, sizeof(size_t));
    if (start == NULL || len == NULL) {
        free(start);
        free(len);
        out->oom = true;
        return;
    }
    size_t depth = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && path[i] == '/')
            i++;
        size_t s = i;
        while (i < n && path[i] != '/')
            i++;
        size_t l = i - s;
        if (l == 0 || (l == 1 && path[s] == '.'))
            continue;
        if (l == 2 && path[s] == '.' && path[s + 1] == '.') {
            if (depth > 0)
                depth--;
            continue;
        }
        start[depth] = s;
        len[depth] = l;
        depth++;
    }
    sbx_strbuf_putc(out, '/');
    for (size_t k = 0; k < depth; k++) {
        if (k > 0)
            sbx_strbuf_putc(out, '/');
        uri_encode(out, path + start[k], len[k], false);
    }
    if (depth > 0 && path[n - 1] == '/')
        sbx_strbuf_putc(out, '/');
    free(start);
    free(len);
}

/* ---- canonical query ---------------------------------------------------------------------- */

typedef struct qparam {
    char *key, *value; /* encoded */
} qparam;

static int qparam_cmp(const void *a, const void *b)
{
    const qparam *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c != 0 ? c : strcmp(x->value, y->value);
}

static char *encode_piece(const char *s, size_t n)
{
    sbx_strbuf dec = {0}, enc = {0};
    uri_decode(&dec, s, n);
    if (dec.oom) {
        free(dec.p);
        return NULL;
    }
    uri_encode(&enc, dec.p != NULL ? dec.p : "", dec.len, false);
    free(dec.p);
    return sbx_strbuf_take(&enc);
}

typedef struct qlist {
    qparam items[SIGV4_MAX_QUERY_PARAMS];
    size_t n;
} qlist;

static void qlist_free(qlist *q)
{
    for (size_t i = 0; i < q->n; i++) {
        free(q->items[i].key);
        free(q->items[i].value);
    }
    q->n = 0;
}

/* Adds an already encoded key/value. */
static sbx_status qlist_add_encoded(qlist *q, char *key, char *value, sbx_error *err)
{
    if (key == NULL || value == NULL) {
        free(key);
        free(value);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
    }
    if (q->n >= SIGV4_MAX_QUERY_PARAMS) {
        free(key);
        free(value);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: more than %d query parameters; send fewer",
                             SIGV4_MAX_QUERY_PARAMS);
    }
    q->items[q->n].key = key;
    q->items[q->n].value = value;
    q->n++;
    return SBX_OK;
}

static sbx_status qlist_parse(qlist *q, const char *query, sbx_error *err)
{
    if (query == NULL)
        return SBX_OK;
    const char *p = query;
    while (*p != '\0') {
        const char *amp = strchr(p, '&');
        size_t n = amp != NULL ? (size_t)(amp - p) : strlen(p);
        if (n > 0) {
            const char *eq = memchr(p, '=', n);
            size_t kn = eq != NULL ? (size_t)(eq - p) : n;
            const char *v = eq != NULL ? eq + 1 : "";
            size_t vn = eq != NULL ? n - kn - 1 : 0;
            sbx_status st = qlist_add_encoded(q, encode_piece(p, kn), encode_piece(v, vn), err);
            if (st != SBX_OK)
                return st;
        }
        p += n;
        if (*p == '&')
            p++;
    }
    return SBX_OK;
}

static char *enc_dup(const char *s)
{
    sbx_strbuf b = {0};
    uri_encode(&b, s, strlen(s), false);
    return sbx_strbuf_take(&b);
}

static void qlist_canonical(qlist *q, sbx_strbuf *out)
{
    qsort(q->items, q->n, sizeof(qparam), qparam_cmp);
    for (size_t i = 0; i < q->n; i++) {
        if (i > 0)
            sbx_strbuf_putc(out, '&');
        sbx_strbuf_puts(out, q->items[i].key);
        sbx_strbuf_putc(out, '=');
        sbx_strbuf_puts(out, q->items[i].value);
    }
}

/* ---- canonical headers -------------------------------------------------------------------- */

typedef struct hentry {
    char *name;  /* lowercase */
    char *value; /* trimmed and folded */
    size_t order;
} hentry;

static int hentry_cmp(const void *a, const void *b)
{
    const hentry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c != 0)
        return c;
    return x->order < y->order ? -1 : x->order > y->order ? 1 : 0;
}

/* Trims and collapses every run of whitespace (space, tab, CR, LF: a folded header's line
 * breaks included) into one space. */
static char *fold_value(const char *v)
{
    sbx_strbuf b = {0};
    bool pending_space = false;
    for (const char *p = v; *p != '\0'; p++) {
        if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') {
            pending_space = b.len > 0;
            continue;
        }
        if (pending_space)
            sbx_strbuf_putc(&b, ' ');
        pending_space = false;
        sbx_strbuf_putc(&b, *p);
    }
    return sbx_strbuf_take(&b);
}

typedef struct hlist {
    hentry items[SIGV4_MAX_HEADERS];
    size_t n;
} hlist;

static void hlist_free(hlist *h)
{
    for (size_t i = 0; i < h->n; i++) {
        free(h->items[i].name);
        free(h->items[i].value);
    }
    h->n = 0;
}

static sbx_status hlist_add(hlist *h, const char *name, const char *value, sbx_error *err)
{
    if (h->n >= SIGV4_MAX_HEADERS)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: more than %d headers to sign; sign fewer", SIGV4_MAX_HEADERS);
    if (name == NULL || name[0] == '\0' || value == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sigv4: a header has no name or value");
    if (strlen(name) > SIGV4_MAX_FIELD || strlen(value) > SIGV4_MAX_FIELD)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: header '%.64s' is longer than %d bytes", name,
                             SIGV4_MAX_FIELD);
    for (const char *p = name; *p != '\0'; p++)
        if ((unsigned char)*p <= ' ' || *p == ':' || (unsigned char)*p >= 127)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "sigv4: header name '%.64s' contains a space, ':' or a "
                                 "control character",
                                 name);
    char *lname = strdup(name);
    char *fv = fold_value(value);
    if (lname == NULL || fv == NULL) {
        free(lname);
        free(fv);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
    }
    for (char *p = lname; *p != '\0'; p++)
        *p = (char)tolower((unsigned char)*p);
    h->items[h->n].name = lname;
    h->items[h->n].value = fv;
    h->items[h->n].order = h->n;
    h->n++;
    return SBX_OK;
}

/* Writes the canonical headers block ("name:v1,v2\n" ...) and the signed header list. */
static void hlist_canonical(hlist *h, sbx_strbuf *block, sbx_strbuf *signed_names)
{
    qsort(h->items, h->n, sizeof(hentry), hentry_cmp);
    for (size_t i = 0; i < h->n; i++) {
        bool same = i > 0 && strcmp(h->items[i].name, h->items[i - 1].name) == 0;
        if (same) {
            sbx_strbuf_putc(block, ',');
        } else {
            if (i > 0) {
                sbx_strbuf_putc(block, '\n');
                sbx_strbuf_putc(signed_names, ';');
            }
            sbx_strbuf_puts(block, h->items[i].name);
            sbx_strbuf_putc(block, ':');
            sbx_strbuf_puts(signed_names, h->items[i].name);
        }
        sbx_strbuf_puts(block, h->items[i].value);
    }
    if (h->n > 0)
        sbx_strbuf_putc(block, '\n');
}

/* ---- the signing steps -------------------------------------------------------------------- */

static sbx_status check_inputs(const sigv4_request *req, const sigv4_credentials *creds,
                               const sigv4_params *params, sbx_error *err)
{
    if (req == NULL || creds == NULL || params == NULL || req->method == NULL ||
        req->method[0] == '\0')
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sigv4: request has no method");
    if (creds->access_key_id == NULL || creds->access_key_id[0] == '\0' ||
        creds->secret_access_key == NULL || creds->secret_access_key[0] == '\0')
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: no AWS credentials (access key id and secret access key "
                             "are required)");
    if (params->region == NULL || params->region[0] == '\0' || params->service == NULL ||
        params->service[0] == '\0')
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sigv4: region and service are required");
    for (const char *p = params->region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "sigv4: region '%.64s' is not like 'us-east-1'", params->region);
    if ((req->path != NULL && strlen(req->path) > SIGV4_MAX_FIELD) ||
        (req->query != NULL && strlen(req->query) > SIGV4_MAX_FIELD))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: path or query longer than %d bytes", SIGV4_MAX_FIELD);
    for (size_t i = 0; i < req->n_headers; i++) {
        const char *n = req->headers[i].name;
        if (n != NULL && (strcasecmp(n, "authorization") == 0 || strcasecmp(n, "x-amz-date") == 0))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "sigv4: the request already carries '%s'; the signer adds it", n);
    }
    return SBX_OK;
}

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date), region), service), "aws4_request");
 * signature = hex HMAC(kSigning, string to sign). */
static void compute_signature(const char *secret, const char *date8, const sigv4_params *params,
                              const char *sts, char out[SIGV4_HEX_LEN + 1])
{
    size_t sl = strlen(secret);
    unsigned char *k0 = malloc(sl + 4);
    unsigned char k[32], k2[32];
    if (k0 == NULL) {
        memset(out, '0', SIGV4_HEX_LEN);
        out[SIGV4_HEX_LEN] = '\0';
        return;
    }
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, secret, sl);
    hmac_sha256(k0, sl + 4, date8, 8, k);
    OPENSSL_cleanse(k0, sl + 4);
    free(k0);
    hmac_sha256(k, 32, params->region, strlen(params->region), k2);
    hmac_sha256(k2, 32, params->service, strlen(params->service), k);
    hmac_sha256(k, 32, "aws4_request", 12, k2);
    unsigned char sig[32];
    hmac_sha256(k2, 32, sts, strlen(sts), sig);
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(k2, sizeof(k2));
    to_hex(sig, 32, out);
}

static char *make_string_to_sign(const char *amz_date, const char *scope, const char *creq)
{
    char h[SIGV4_HEX_LEN + 1];
    sigv4_sha256_hex(creq, strlen(creq), h);
    sbx_strbuf b = {0};
    sbx_strbuf_puts(&b, SIGV4_ALGORITHM "\n");
    sbx_strbuf_puts(&b, amz_date);
    sbx_strbuf_putc(&b, '\n');
    sbx_strbuf_puts(&b, scope);
    sbx_strbuf_putc(&b, '\n');
    sbx_strbuf_puts(&b, h);
    return sbx_strbuf_take(&b);
}

static char *dupf(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 1);
    if (p != NULL) {
        memcpy(p, a, la);
        memcpy(p + la, b, lb + 1);
    }
    return p;
}

/* Long because it follows AWS's four signing steps in the documented order (canonical request,
 * string to sign, signing key, signature), for both header and query (presigned) mode, with one
 * buffer set freed at one exit. */
static sbx_status sign(const sigv4_request *req, const sigv4_credentials *creds,
                       const sigv4_params *params, bool query_mode, sigv4_signed *out,
                       sbx_error *err)
{
    memset(out, 0, sizeof(*out));
    sbx_status st = check_inputs(req, creds, params, err);
    if (st != SBX_OK)
        return st;
    if (query_mode && (params->expires_s < 1 || params->expires_s > SIGV4_MAX_EXPIRES_S))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sigv4: presigned expiry %lld s is outside 1..%d",
                             (long long)params->expires_s, SIGV4_MAX_EXPIRES_S);

    char amz_date[SIGV4_AMZ_DATE_LEN];
    sigv4_amz_date(params->time_s, amz_date);
    char date8[9];
    memcpy(date8, amz_date, 8);
    date8[8] = '\0';
    bool has_token = creds->session_token != NULL && creds->session_token[0] != '\0';
    bool sign_token = has_token && !params->omit_session_token;

    char payload_hash[SIGV4_HEX_LEN + 1];
    sigv4_sha256_hex(req->body, req->body != NULL ? req->body_len : 0, payload_hash);

    sbx_strbuf scope = {0};
    sbx_strbuf_puts(&scope, date8);
    sbx_strbuf_putc(&scope, '/');
    sbx_strbuf_puts(&scope, params->region);
    sbx_strbuf_putc(&scope, '/');
    sbx_strbuf_puts(&scope, params->service);
    sbx_strbuf_puts(&scope, "/aws4_request");

    hlist *h = calloc(1, sizeof(hlist));
    qlist *q = calloc(1, sizeof(qlist));
    sbx_strbuf creq = {0}, block = {0}, names = {0}, query = {0}, suffix = {0};
    char *credential = NULL;
    if (h == NULL || q == NULL) {
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
        goto done;
    }
    for (size_t i = 0; i < req->n_headers && st == SBX_OK; i++)
        st = hlist_add(h, req->headers[i].name, req->headers[i].value, err);
    if (st == SBX_OK && !query_mode) {
        st = hlist_add(h, "x-amz-date", amz_date, err);
        if (st == SBX_OK && params->sign_body)
            st = hlist_add(h, "x-amz-content-sha256", payload_hash, err);
        if (st == SBX_OK && sign_token)
            st = hlist_add(h, "x-amz-security-token", creds->session_token, err);
    }
    if (st != SBX_OK)
        goto done;
    hlist_canonical(h, &block, &names);

    st = qlist_parse(q, req->query, err);
    if (st != SBX_OK)
        goto done;
    if (query_mode) {
        char expires[24];
        snprintf(expires, sizeof(expires), "%lld", (long long)params->expires_s);
        credential = dupf(creds->access_key_id, "/");
        char *full = credential != NULL && scope.p != NULL ? dupf(credential, scope.p) : NULL;
        free(credential);
        credential = full;
        if (credential == NULL || names.oom || names.p == NULL) {
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
            goto done;
        }
        /* The presign parameters, in the order AWS SDKs append them to the URL. */
        const char *keys[6] = {"X-Amz-Algorithm",     "X-Amz-Credential", "X-Amz-Date",
                               "X-Amz-SignedHeaders", "X-Amz-Expires",    "X-Amz-Security-Token"};
        const char *vals[6] = {SIGV4_ALGORITHM, credential,
                               amz_date,        names.p,
                               expires,         has_token ? creds->session_token : NULL};
        for (int i = 0; i < 6 && st == SBX_OK; i++) {
            if (vals[i] == NULL)
                continue;
            char *ek = enc_dup(keys[i]), *ev = enc_dup(vals[i]);
            if (ek != NULL && ev != NULL) {
                if (suffix.len > 0)
                    sbx_strbuf_putc(&suffix, '&');
                sbx_strbuf_puts(&suffix, ek);
                sbx_strbuf_putc(&suffix, '=');
                sbx_strbuf_puts(&suffix, ev);
            }
            if (i == 5 && !sign_token) { /* omitted token: appended, not signed */
                free(ek);
                free(ev);
                continue;
            }
            st = qlist_add_encoded(q, ek, ev, err);
        }
        if (st != SBX_OK)
            goto done;
    }
    qlist_canonical(q, &query);

    /* CanonicalRequest = Method \n URI \n Query \n Headers \n \n SignedHeaders \n PayloadHash */
    sbx_strbuf_puts(&creq, req->method);
    sbx_strbuf_putc(&creq, '\n');
    canonical_uri(&creq, req->path, params->normalize_path);
    sbx_strbuf_putc(&creq, '\n');
    sbx_strbuf_puts(&creq, query.p != NULL ? query.p : "");
    sbx_strbuf_putc(&creq, '\n');
    sbx_strbuf_puts(&creq, block.p != NULL ? block.p : "");
    sbx_strbuf_putc(&creq, '\n');
    sbx_strbuf_puts(&creq, names.p != NULL ? names.p : "");
    sbx_strbuf_putc(&creq, '\n');
    sbx_strbuf_puts(&creq, payload_hash);
    if (creq.oom || scope.oom || names.oom || suffix.oom || query.oom) {
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
        goto done;
    }
    out->canonical_request = sbx_strbuf_take(&creq);
    out->string_to_sign = out->canonical_request != NULL
                              ? make_string_to_sign(amz_date, scope.p, out->canonical_request)
                              : NULL;
    if (out->string_to_sign == NULL) {
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
        goto done;
    }
    compute_signature(creds->secret_access_key, date8, params, out->string_to_sign, out->signature);

    if (query_mode) {
        sbx_strbuf_puts(&suffix, "&X-Amz-Signature=");
        sbx_strbuf_puts(&suffix, out->signature);
        out->query_suffix = sbx_strbuf_take(&suffix);
        if (out->query_suffix == NULL)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
    } else {
        sbx_strbuf authz = {0};
        sbx_strbuf_puts(&authz, SIGV4_ALGORITHM " Credential=");
        sbx_strbuf_puts(&authz, creds->access_key_id);
        sbx_strbuf_putc(&authz, '/');
        sbx_strbuf_puts(&authz, scope.p);
        sbx_strbuf_puts(&authz, ", SignedHeaders=");
        sbx_strbuf_puts(&authz, names.p);
        sbx_strbuf_puts(&authz, ", Signature=");
        sbx_strbuf_puts(&authz, out->signature);
        size_t k = 0;
        if (has_token) {
            out->added[k].name = "X-Amz-Security-Token";
            out->added[k++].value = strdup(creds->session_token);
        }
        out->added[k].name = "X-Amz-Date";
        out->added[k++].value = strdup(amz_date);
        if (params->sign_body) {
            out->added[k].name = "x-amz-content-sha256";
            out->added[k++].value = strdup(payload_hash);
        }
        out->added[k].name = "Authorization";
        out->added[k++].value = sbx_strbuf_take(&authz);
        out->n_added = k;
        for (size_t i = 0; i < k; i++)
            if (out->added[i].value == NULL)
                st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "sigv4: out of memory");
    }

done:
    if (h != NULL)
        hlist_free(h);
    if (q != NULL)
        qlist_free(q);
    free(h);
    free(q);
    free(credential);
    free(scope.p);
    free(creq.p);
    free(block.p);
    free(names.p);
    free(query.p);
    free(suffix.p);
    if (st != SBX_OK)
        sigv4_signed_clear(out);
    return st;
}

sbx_status sigv4_sign_headers(const sigv4_request *req, const sigv4_credentials *creds,
                              const sigv4_params *params, sigv4_signed *out, sbx_error *err)
{
    return sign(req, creds, params, false, out, err);
}

sbx_status sigv4_sign_query(const sigv4_request *req, const sigv4_credentials *creds,
                            const sigv4_params *params, sigv4_signed *out, sbx_error *err)
{
    return sign(req, creds, params, true, out, err);
}

void sigv4_signed_clear(sigv4_signed *out)
{
    if (out == NULL)
        return;
    free(out->canonical_request);
    free(out->string_to_sign);
    for (size_t i = 0; i < out->n_added && i < 4; i++) {
        /* The security token is a secret: wipe the copy before freeing it. */
        if (out->added[i].value != NULL)
            OPENSSL_cleanse(out->added[i].value, strlen(out->added[i].value));
        free(out->added[i].value);
    }
    free(out->query_suffix);
    memset(out, 0, sizeof(*out));
}
