/* k8s_api.c - the Kubernetes REST client: one JSON call per function call over libcurl, with
 * the cluster's CA (file or bytes), client certificate and key (file or bytes) or bearer token,
 * impersonation headers for user mode, connect and total timeouts cut to the caller's deadline,
 * a bounded response body and a bounded JSON parse, and error text from the API's own Status
 * objects (reason and message).
 *
 * This file knows the API's transport and error shape, never what a pod is (kubernetes.c).
 * It never prints, and a token or key never reaches a message.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "providers/common/http.h"
#include "providers/kubernetes/k8s.h"

/* curl_global_init is not thread-safe: once, before the first handle of any thread. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
}

void k8s_api_init(void)
{
    pthread_once(&curl_once, curl_init_once);
}

typedef struct body_buf {
    char *data;
    size_t len;
    bool too_big;
} body_buf;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    body_buf *b = arg;
    size_t add = size * n;
    if (b->len + add > K8S_MAX_RESPONSE_BYTES) {
        b->too_big = true;
        return 0;
    }
    char *grown = realloc(b->data, b->len + add + 1);
    if (grown == NULL)
        return 0;
    b->data = grown;
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

/* Header values come from principals (user names, groups): no line breaks may reach the wire. */
static bool header_safe(const char *v)
{
    for (; *v != '\0'; v++)
        if (*v == '\r' || *v == '\n')
            return false;
    return true;
}

static struct curl_slist *add_header(struct curl_slist *l, const char *name, const char *value,
                                     bool *ok)
{
    if (!*ok)
        return l;
    char *line = NULL;
    if (!header_safe(value) || asprintf(&line, "%s: %s", name, value) < 0) {
        *ok = false;
        return l;
    }
    struct curl_slist *n = curl_slist_append(l, line);
    /* the line may hold the bearer token */
    memset(line, 0, strlen(line));
    free(line);
    if (n == NULL)
        *ok = false;
    return n != NULL ? n : l;
}

void k8s_curl_tls(void *handle, const k8s_cluster *c)
{
    CURL *h = handle;
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->ca_file != NULL)
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    if (c->ca_pem != NULL) {
        struct curl_blob b = {c->ca_pem, strlen(c->ca_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
    }
    if (c->cert_file != NULL)
        curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
    if (c->cert_pem != NULL) {
        struct curl_blob b = {c->cert_pem, strlen(c->cert_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    }
    if (c->key_file != NULL)
        curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
    if (c->key_pem != NULL) {
        struct curl_blob b = {c->key_pem, strlen(c->key_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    }
}

sbx_status k8s_call(const k8s_cluster *c, const char *method, const char *path, const json_t *body,
                    const k8s_identity *as, int64_t deadline, long *status, json_t **out,
                    sbx_error *err)
{
    *status = 0;
    *out = NULL;
    int64_t total = K8S_CALL_TIMEOUT_MS;
    if (deadline > 0) {
        int64_t left = deadline - sbx_monotonic_ms();
        if (left <= 0)
            return sbx_error_set(err, SBX_E_TIMEOUT, "kubernetes: the deadline passed before %s %s",
                                 method, path);
        if (left < total)
            total = left;
    }
    CURL *h = curl_easy_init();
    if (h == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: curl_easy_init failed");
    char *url = NULL, *text = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0)
        url = NULL;
    if (body != NULL)
        text = sbx_http_json_dump(body);
    bool ok = url != NULL && (body == NULL || text != NULL);
    struct curl_slist *hdr = NULL;
    hdr = add_header(hdr, "Accept", "application/json", &ok);
    if (body != NULL)
        hdr = add_header(hdr, "Content-Type", "application/json", &ok);
    if (c->token != NULL) {
        char *bearer = NULL;
        if (asprintf(&bearer, "Bearer %s", c->token) < 0)
            ok = false;
        else {
            hdr = add_header(hdr, "Authorization", bearer, &ok);
            memset(bearer, 0, strlen(bearer));
            free(bearer);
        }
    }
    if (as != NULL && as->user != NULL) {
        hdr = add_header(hdr, "Impersonate-User", as->user, &ok);
        for (size_t i = 0; i < as->n_groups; i++)
            hdr = add_header(hdr, "Impersonate-Group", as->groups[i], &ok);
    }
    if (!ok) {
        curl_slist_free_all(hdr);
        curl_easy_cleanup(h);
        free(url);
        free(text);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "kubernetes: cannot build %s %s (out of memory, or a line break in "
                             "an impersonated user or group name)",
                             method, path);
    }
    body_buf resp = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(total < K8S_CONNECT_TIMEOUT_MS ? total : K8S_CONNECT_TIMEOUT_MS));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)total);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (text != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(text));
    }
    k8s_curl_tls(h, c);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    free(url);
    free(text);
    sbx_status st = SBX_OK;
    if (rc != CURLE_OK) {
        if (resp.too_big)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "kubernetes: %s %s answered more than %u bytes", method, path,
                               K8S_MAX_RESPONSE_BYTES);
        else
            st =
                sbx_error_set(err, rc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT : SBX_E_PROVISION,
                              "kubernetes: %s %s%s failed: %s", method, c->server, path,
                              errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
        free(resp.data);
        return st;
    }
    if (resp.len > 0) {
        json_t *j = NULL;
        sbx_error ignored;
        /* A body that is not JSON (a proxy's HTML page) leaves *out NULL: the status speaks. */
        if (sbx_http_parse_json(NULL, path, (const uint8_t *)resp.data, resp.len, &j, &ignored) ==
                SBX_OK &&
            json_is_object(j))
            *out = j;
        else
            json_decref(j);
    }
    free(resp.data);
    return SBX_OK;
}

sbx_status k8s_status_error(const char *method, const char *path, long status, const json_t *body,
                            sbx_error *err)
{
    if (status >= 200 && status < 300 && body == NULL) /* success, but not the API's answer */
        return sbx_error_set(err, SBX_E_PROVISION,
                             "kubernetes: %s %s answered %ld with a body that is not a JSON object "
                             "(a proxy's page? check the server address of the kubeconfig)",
                             method, path, status);
    const char *reason = json_string_value(json_object_get(body, "reason"));
    const char *message = json_string_value(json_object_get(body, "message"));
    sbx_status code;
    const char *hint = "";
    switch (status) {
    case 401:
        code = SBX_E_CONFIG;
        hint = " (the credentials of the kubeconfig or service account were not accepted)";
        break;
    case 403: code = SBX_E_PERMISSION_DENIED; break;
    case 404:
    case 410: code = SBX_E_GONE; break;
    case 400:
    case 422: code = SBX_E_INVALID_ARGUMENT; break;
    case 429: code = SBX_E_RESOURCE_EXHAUSTED; break;
    default: code = SBX_E_PROVISION; break;
    }
    return sbx_error_set(err, code, "kubernetes: %s %s answered %ld (%s): %.300s%s", method, path,
                         status, reason != NULL ? reason : "no reason",
                         message != NULL ? message : "no message", hint);
}
