/* k8s_config.c - where the Kubernetes API server is and how to authenticate to it: a kubeconfig
 * file (one context: its cluster's server and CA, its user's client certificate and key or
 * bearer token, its namespace), or the in-cluster service account (token, CA and namespace
 * under /var/run/secrets/kubernetes.io/serviceaccount, server from KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT).
 *
 * A kubeconfig is read with libyaml (bounded size) and every error names the file, line and
 * column and what would be accepted. What sbx cannot honour is refused, never approximated:
 * exec and auth-provider plugins, basic auth, insecure-skip-tls-verify, plain http off loopback.
 * This file must not make API calls.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "core/net.h"
#include "providers/common/http.h"
#include "providers/kubernetes/k8s.h"

static void wipe_free(char *s)
{
    if (s == NULL)
        return;
    volatile char *v = s;
    for (size_t i = 0; v[i] != '\0'; i++)
        v[i] = '\0';
    free(s);
}

void k8s_cluster_clear(k8s_cluster *c)
{
    if (c == NULL)
        return;
    free(c->server);
    free(c->ca_file);
    free(c->ca_pem);
    free(c->cert_file);
    free(c->cert_pem);
    free(c->key_file);
    wipe_free(c->key_pem);
    wipe_free(c->token);
    free(c->namespace);
    free(c->origin);
    memset(c, 0, sizeof(*c));
}

/* Reads a whole small file (bounded by K8S_MAX_FILE_BYTES) into a NUL-terminated buffer. */
static sbx_status read_file(const char *what, const char *path, char **out, size_t *len,
                            sbx_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_CONFIG, "kubernetes: cannot read %s %s: %s", what, path,
                             strerror(errno));
    char *buf = malloc(K8S_MAX_FILE_BYTES + 1);
    size_t n = 0;
    while (buf != NULL && n <= K8S_MAX_FILE_BYTES) {
        ssize_t r = read(fd, buf + n, K8S_MAX_FILE_BYTES + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (buf == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    if (n > K8S_MAX_FILE_BYTES) {
        free(buf);
        return sbx_error_set(err, SBX_E_CONFIG, "kubernetes: %s %s is larger than %u bytes", what,
                             path, K8S_MAX_FILE_BYTES);
    }
    buf[n] = '\0';
    *out = buf;
    if (len != NULL)
        *len = n;
    return SBX_OK;
}

/* ---- a parsed kubeconfig document --------------------------------------------------------- */

typedef struct kdoc {
    const char *path;
    yaml_document_t doc;
} kdoc;

static sbx_status at(const kdoc *d, const yaml_node_t *n, sbx_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A CONFIG error located at node n ("kubeconfig F:L:C: ..."). */
static sbx_status at(const kdoc *d, const yaml_node_t *n, sbx_error *err, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n == NULL)
        return sbx_error_set(err, SBX_E_CONFIG, "kubeconfig %s: %s", d->path, msg);
    return sbx_error_set(err, SBX_E_CONFIG, "kubeconfig %s:%zu:%zu: %s", d->path,
                         n->start_mark.line + 1, n->start_mark.column + 1, msg);
}

static const char *scalar(const yaml_node_t *n)
{
    return n != NULL && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of key in mapping m (NULL when absent or m is not a mapping). */
static yaml_node_t *get(const kdoc *d, const yaml_node_t *m, const char *key)
{
    if (m == NULL || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node((yaml_document_t *)&d->doc, p->key);
        const char *ks = scalar(k);
        if (ks != NULL && strcmp(ks, key) == 0)
            return yaml_document_get_node((yaml_document_t *)&d->doc, p->value);
    }
    return NULL;
}

/* A string value: absent is fine (*out NULL), anything but a scalar is a located error. */
static sbx_status get_str(const kdoc *d, const yaml_node_t *m, const char *key, const char **out,
                          sbx_error *err)
{
    yaml_node_t *v = get(d, m, key);
    *out = NULL;
    if (v == NULL)
        return SBX_OK;
    if (v->type != YAML_SCALAR_NODE)
        return at(d, v, err, "'%s' must be a string", key);
    *out = scalar(v);
    if (*out != NULL && (*out)[0] == '\0')
        *out = NULL;
    return SBX_OK;
}

/* The entry named `name` of the list under `list_key` (contexts, clusters, users); returns its
 * inner mapping under `inner` (context, cluster, user). */
static sbx_status find_named(const kdoc *d, const yaml_node_t *root, const char *list_key,
                             const char *inner, const char *name, const yaml_node_t *ref,
                             yaml_node_t **out, sbx_error *err)
{
    *out = NULL;
    yaml_node_t *list = get(d, root, list_key);
    if (list != NULL && list->type != YAML_SEQUENCE_NODE)
        return at(d, list, err, "'%s' must be a list", list_key);
    for (yaml_node_item_t *i = list ? list->data.sequence.items.start : NULL;
         i != NULL && i < list->data.sequence.items.top; i++) {
        yaml_node_t *e = yaml_document_get_node((yaml_document_t *)&d->doc, *i);
        const char *n = scalar(get(d, e, "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            yaml_node_t *m = get(d, e, inner);
            if (m == NULL || m->type != YAML_MAPPING_NODE)
                return at(d, e, err, "%s '%s' has no '%s' mapping", list_key, name, inner);
            *out = m;
            return SBX_OK;
        }
    }
    return at(d, ref, err, "no %s named '%s' (the %s list names what a context may refer to)",
              list_key, name, list_key);
}

/* A path in a kubeconfig is relative to the file's own directory (as kubectl reads it). */
static char *resolve(const char *kubeconfig, const char *p)
{
    if (p == NULL)
        return NULL;
    if (p[0] == '/')
        return strdup(p);
    const char *slash = strrchr(kubeconfig, '/');
    char *out = NULL;
    if (slash == NULL)
        return strdup(p);
    if (asprintf(&out, "%.*s/%s", (int)(slash - kubeconfig), kubeconfig, p) < 0)
        return NULL;
    return out;
}

/* base64 decode of *-data fields into a NUL-terminated PEM string. */
static sbx_status data_field(const kdoc *d, const yaml_node_t *m, const char *key, char **out,
                             sbx_error *err)
{
    const char *v = NULL;
    *out = NULL;
    sbx_status st = get_str(d, m, key, &v, err);
    if (st != SBX_OK || v == NULL)
        return st;
    size_t n = 0;
    uint8_t *bytes = NULL;
    /* base64 without whitespace; tolerate line breaks some generators leave in */
    char *clean = malloc(strlen(v) + 1);
    if (clean == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    size_t j = 0;
    for (const char *c = v; *c != '\0'; c++)
        if (*c != '\n' && *c != '\r' && *c != ' ' && *c != '\t')
            clean[j++] = *c;
    clean[j] = '\0';
    bytes = sbx_http_base64_decode(clean, j, &n);
    free(clean);
    if (bytes == NULL)
        return at(d, get(d, m, key), err, "'%s' is not valid base64", key);
    *out = (char *)bytes; /* decoder leaves a NUL after the data */
    return SBX_OK;
}

/* Checks and keeps the server URL: https, or http to loopback only (a token in clear text over
 * a network is refused, as the remote broker refuses h2c off loopback). */
static sbx_status set_server(const kdoc *d, const yaml_node_t *where, const char *server,
                             k8s_cluster *out, sbx_error *err)
{
    if (server == NULL)
        return at(d, where, err, "the cluster has no 'server' (https://HOST:PORT)");
    sbx_net_url kind = sbx_net_url_transport(server);
    if (kind == SBX_NET_URL_INVALID)
        return at(d, where, err, "server '%s' is not a URL of the form https://HOST[:PORT]",
                  server);
    if (kind != SBX_NET_URL_TLS && kind != SBX_NET_URL_PLAIN_LOOPBACK)
        return at(d, where, err,
                  "server '%s' must be https:// (plain http is accepted only to loopback)", server);
    out->server = strdup(server);
    if (out->server == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    size_t n = strlen(out->server);
    while (n > 0 && out->server[n - 1] == '/')
        out->server[--n] = '\0';
    return SBX_OK;
}

static sbx_status load_doc(kdoc *d, const char *context, k8s_cluster *out, sbx_error *err)
{
    yaml_node_t *root = yaml_document_get_root_node(&d->doc);
    if (root == NULL || root->type != YAML_MAPPING_NODE)
        return at(d, root, err, "the file must be a mapping (apiVersion: v1, kind: Config)");
    const char *kind = NULL;
    sbx_status st = get_str(d, root, "kind", &kind, err);
    if (st != SBX_OK)
        return st;
    if (kind != NULL && strcmp(kind, "Config") != 0)
        return at(d, get(d, root, "kind"), err, "kind is '%s'; a kubeconfig has kind: Config",
                  kind);
    const char *ctx_name = context;
    yaml_node_t *ctx_ref = NULL;
    if (ctx_name == NULL) {
        ctx_ref = get(d, root, "current-context");
        if ((st = get_str(d, root, "current-context", &ctx_name, err)) != SBX_OK)
            return st;
        if (ctx_name == NULL)
            return at(d, root, err,
                      "no current-context; set one, or name a context in kubernetes.context");
    }
    yaml_node_t *ctx = NULL, *cluster = NULL, *user = NULL;
    if ((st = find_named(d, root, "contexts", "context", ctx_name, ctx_ref ? ctx_ref : root, &ctx,
                         err)) != SBX_OK)
        return st;
    const char *cluster_name = NULL, *user_name = NULL, *ns = NULL;
    if ((st = get_str(d, ctx, "cluster", &cluster_name, err)) != SBX_OK ||
        (st = get_str(d, ctx, "user", &user_name, err)) != SBX_OK ||
        (st = get_str(d, ctx, "namespace", &ns, err)) != SBX_OK)
        return st;
    if (cluster_name == NULL)
        return at(d, ctx, err, "context '%s' names no cluster", ctx_name);
    if ((st = find_named(d, root, "clusters", "cluster", cluster_name, get(d, ctx, "cluster"),
                         &cluster, err)) != SBX_OK)
        return st;
    if (user_name != NULL && (st = find_named(d, root, "users", "user", user_name,
                                              get(d, ctx, "user"), &user, err)) != SBX_OK)
        return st;
    const char *server = NULL, *ca = NULL, *insecure = NULL;
    if ((st = get_str(d, cluster, "server", &server, err)) != SBX_OK ||
        (st = get_str(d, cluster, "certificate-authority", &ca, err)) != SBX_OK ||
        (st = get_str(d, cluster, "insecure-skip-tls-verify", &insecure, err)) != SBX_OK)
        return st;
    if (insecure != NULL && strcmp(insecure, "true") == 0)
        return at(d, get(d, cluster, "insecure-skip-tls-verify"), err,
                  "insecure-skip-tls-verify is refused: give the cluster's CA "
                  "(certificate-authority or certificate-authority-data)");
    if ((st = set_server(d, cluster, server, out, err)) != SBX_OK)
        return st;
    out->ca_file = resolve(d->path, ca);
    if ((st = data_field(d, cluster, "certificate-authority-data", &out->ca_pem, err)) != SBX_OK)
        return st;
    static const char *const refused[] = {"exec", "auth-provider", "username", "password"};
    for (size_t i = 0; user != NULL && i < sizeof(refused) / sizeof(refused[0]); i++)
        if (get(d, user, refused[i]) != NULL)
            return at(d, get(d, user, refused[i]), err,
                      "user '%s' uses '%s', which sbx does not run; give a client certificate "
                      "(client-certificate/-key[-data]) or a bearer token (token, tokenFile)",
                      user_name, refused[i]);
    const char *cert = NULL, *key = NULL, *token = NULL, *token_file = NULL;
    if (user != NULL &&
        ((st = get_str(d, user, "client-certificate", &cert, err)) != SBX_OK ||
         (st = get_str(d, user, "client-key", &key, err)) != SBX_OK ||
         (st = get_str(d, user, "token", &token, err)) != SBX_OK ||
         (st = get_str(d, user, "tokenFile", &token_file, err)) != SBX_OK ||
         (st = data_field(d, user, "client-certificate-data", &out->cert_pem, err)) != SBX_OK ||
         (st = data_field(d, user, "client-key-data", &out->key_pem, err)) != SBX_OK))
        return st;
    out->cert_file = resolve(d->path, cert);
    out->key_file = resolve(d->path, key);
    bool has_cert = out->cert_file != NULL || out->cert_pem != NULL;
    bool has_key = out->key_file != NULL || out->key_pem != NULL;
    if (has_cert != has_key)
        return at(d, user, err, "user '%s' has a client %s without its %s", user_name,
                  has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
    if (token != NULL)
        out->token = strdup(token);
    else if (token_file != NULL) {
        char *tf = resolve(d->path, token_file);
        size_t n = 0;
        st = tf != NULL ? read_file("tokenFile", tf, &out->token, &n, err)
                        : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
        free(tf);
        if (st != SBX_OK)
            return st;
        while (n > 0 && (out->token[n - 1] == '\n' || out->token[n - 1] == '\r'))
            out->token[--n] = '\0';
    }
    if (!has_cert && out->token == NULL)
        return at(d, user != NULL ? user : ctx, err,
                  "context '%s' has no credentials: its user needs a client certificate and key "
                  "or a bearer token",
                  ctx_name);
    out->namespace = ns != NULL ? strdup(ns) : NULL;
    if (asprintf(&out->origin, "kubeconfig %s context %s", d->path, ctx_name) < 0)
        out->origin = NULL;
    return SBX_OK;
}

sbx_status k8s_cluster_load_kubeconfig(const char *path, const char *context, k8s_cluster *out,
                                       sbx_error *err)
{
    memset(out, 0, sizeof(*out));
    char *text = NULL;
    size_t len = 0;
    sbx_status st = read_file("kubeconfig", path, &text, &len, err);
    if (st != SBX_OK)
        return st;
    yaml_parser_t parser;
    kdoc d = {.path = path};
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &d.doc)) {
        st = sbx_error_set(err, SBX_E_CONFIG, "kubeconfig %s:%zu:%zu: %s", path,
                           parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                           parser.problem != NULL ? parser.problem : "invalid YAML");
        yaml_parser_delete(&parser);
        wipe_free(text);
        return st;
    }
    st = load_doc(&d, context, out, err);
    yaml_document_delete(&d.doc);
    yaml_parser_delete(&parser);
    wipe_free(text); /* it may hold tokens and keys */
    if (st == SBX_OK && out->origin == NULL)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    if (st != SBX_OK)
        k8s_cluster_clear(out);
    return st;
}

sbx_status k8s_cluster_load_in_cluster(const char *sa_dir, k8s_cluster *out, sbx_error *err)
{
    memset(out, 0, sizeof(*out));
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (host == NULL || host[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "kubernetes: no kubeconfig is configured and this is not a pod "
                             "(KUBERNETES_SERVICE_HOST is unset); set kubernetes.kubeconfig");
    char path[1024];
    size_t n = 0;
    snprintf(path, sizeof(path), "%s/token", sa_dir);
    sbx_status st = read_file("service account token", path, &out->token, &n, err);
    if (st != SBX_OK)
        return st;
    while (n > 0 && (out->token[n - 1] == '\n' || out->token[n - 1] == '\r'))
        out->token[--n] = '\0';
    snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
    if (access(path, R_OK) != 0) {
        k8s_cluster_clear(out);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "kubernetes: the service account has no CA at %s (the API server "
                             "cannot be verified)",
                             path);
    }
    out->ca_file = strdup(path);
    snprintf(path, sizeof(path), "%s/namespace", sa_dir);
    /* optional: read_file sets ns only when it read the file */
    char *ns = NULL;
    (void)read_file("service account namespace", path, &ns, &n, NULL);
    if (ns != NULL) {
        while (n > 0 && (ns[n - 1] == '\n' || ns[n - 1] == '\r'))
            ns[--n] = '\0';
        out->namespace = ns;
    }
    /* An IPv6 service address needs brackets in the URL. */
    bool v6 = strchr(host, ':') != NULL;
    if (asprintf(&out->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                 port != NULL && port[0] != '\0' ? port : "443") < 0)
        out->server = NULL;
    out->origin = strdup("in-cluster service account");
    if (out->server == NULL || out->ca_file == NULL || out->origin == NULL) {
        k8s_cluster_clear(out);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    }
    return SBX_OK;
}
