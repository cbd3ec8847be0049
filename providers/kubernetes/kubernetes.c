/* kubernetes.c - the kubernetes provider (isolation CONTAINER): sandboxes are pods, made and
 * removed through the Kubernetes REST API (k8s_api.c), driven through the sbx-agent that is
 * their PID 1, reached over the pod network (pod IP, agent_port) with a per-sandbox credential.
 *
 *  - managed: per sandbox a Secret (the agent's credential), a NetworkPolicy (created BEFORE
 *    the pod, so the pod never runs unrestricted) and the pod `sbx-sandbox-<hex>`: an init
 *    container copies the static sbx-agent from agent_image into an emptyDir, the sandbox
 *    container runs it as PID 1 (`--listen 0.0.0.0:PORT --token-env`), hardened (non-root,
 *    no privilege escalation, ALL capabilities dropped, seccomp RuntimeDefault, read-only root
 *    with emptyDirs for the workdir and /tmp, no service account token), requests = limits
 *    from the policy, activeDeadlineSeconds as a hard ceiling. A failed create deletes every
 *    object it made. Labels (app.kubernetes.io/managed-by=sbx, sbx.dev/...) let the sweep find
 *    them.
 *  - attached (`attach_to: namespace/pod`): a pod sbx did not make. With attach_token_env it
 *    runs sbx-agent the same way and the operator gives its credential; without, commands go
 *    through the exec API (k8s_exec.c, WebSocket v5.channel.k8s.io) with capabilities declared
 *    lower (no files, no kernel).
 *
 * The credential of a managed pod is HMAC-SHA256(credential key, "kubernetes agent|ns/pod"):
 * the key comes from the deployment secret (sbx_provider_ctx.credential_key), so every worker of
 * a fleet can reach every sandbox and no worker stores a credential. GONE only by proof from
 * the API server: 404, a deletionTimestamp, or a terminal phase (Succeeded/Failed).
 * User mode impersonates the principal (Impersonate-User/-Group) on create and attach;
 * disposal (destroy, cleanup, sweep) runs under the provider's own identity.
 * This file never reads the sbx config file and never prints.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "providers/common/http.h"
#include "providers/common/proc.h"
#include "providers/kubernetes/k8s.h"
#include "sbx/contract.h"

/* Object names: "sbx-sandbox-" + 16 hex digits (64 random bits) -- short enough for a label
 * value (63), unique enough that a collision (answered 409) never happens in practice. */
#define K8S_POD_PREFIX "sbx-sandbox-"
/* In-pod paths: the agent binary (emptyDir filled by the init container, mounted read-only
 * into the sandbox container) and the agent's own socket dir. */
#define K8S_AGENT_DIR "/.sbx-bin"
#define K8S_AGENT_PATH "/.sbx-bin/sbx-agent"
#define K8S_RUN_DIR "/.sbx"
#define K8S_TOKEN_ENV "SBX_AGENT_TOKEN"
/* Label keys. */
#define LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define LABEL_SANDBOX "sbx.dev/sandbox"
#define LABEL_PROFILE "sbx.dev/profile"
#define LABEL_SESSION "sbx.dev/session"
#define LABEL_NODE "sbx.dev/node"
#define LABEL_SCOPE "sbx.dev/scope"
#define ANNOTATION_OWNER "sbx.dev/owner-process"
/* per_session pods: the subject of the principal it was made for (list_held; any bytes, so an
 * annotation, not a label) */
#define ANNOTATION_PRINCIPAL "sbx.dev/principal"
/* Polling a pending pod: first after 100 ms, growing x1.5 to 1 s. */
#define K8S_POLL_FIRST_MS 100
#define K8S_POLL_MAX_MS 1000
/* A running pod's agent may take a moment to listen after the container starts. */
#define K8S_AGENT_START_MS 15000
/* Reconnecting to a running pod's agent. */
#define K8S_AGENT_RECONNECT_MS 5000
#define K8S_AGENT_RETRY_MS 50
/* Cleanup after a failed create gets its own bound: the request's deadline may be what made it
 * fail, and the objects must go anyway. */
#define K8S_CLEANUP_MS 15000
/* A Secret or NetworkPolicy without its pod is an orphan only when older than this: a create
 * in progress on another worker makes them shortly before its pod. */
#define K8S_ORPHAN_AGE_S 600
/* Groups impersonated for one principal. */
#define K8S_MAX_GROUPS 32

static const sbx_option_spec k8s_options[] = {
    {.key = "kubeconfig",
     .type = SBX_OPT_STRING,
     .help = "kubeconfig file (default: the in-cluster service account when run in a pod)"},
    {.key = "context", .type = SBX_OPT_STRING, .help = "kubeconfig context (default: current)"},
    {.key = "service_account_dir",
     .type = SBX_OPT_STRING,
     .default_value = "/var/run/secrets/kubernetes.io/serviceaccount",
     .help = "in-cluster: where the service account's token, ca.crt and namespace are"},
    {.key = "namespace",
     .type = SBX_OPT_STRING,
     .help = "namespace of sandbox pods (default: the context's or service account's, else "
             "default)"},
    {.key = "image",
     .type = SBX_OPT_STRING,
     .default_value = "python:3.12-slim",
     .help = "image of the sandbox container"},
    {.key = "agent_image",
     .type = SBX_OPT_STRING,
     .help = "image holding the static sbx-agent, copied by an init container (required for "
             "managed pods)"},
    {.key = "agent_image_path",
     .type = SBX_OPT_STRING,
     .default_value = "/usr/libexec/sbx/sbx-agent",
     .help = "path of sbx-agent inside agent_image"},
    {.key = "agent_port",
     .type = SBX_OPT_INT,
     .default_value = "7070",
     .min = 1,
     .max = 65535,
     .help = "TCP port the agent listens on inside the pod"},
    {.key = "workdir",
     .type = SBX_OPT_STRING,
     .default_value = "/workspace",
     .help = "working directory (an emptyDir) of sandbox pods"},
    {.key = "languages",
     .type = SBX_OPT_LIST,
     .default_value = "python,sh",
     .help = "run_code languages the image has interpreters for (python, bash, sh)"},
    {.key = "run_as_user",
     .type = SBX_OPT_INT,
     .default_value = "65534",
     .min = 1,
     .max = 2147483647,
     .help = "uid (and gid) of the agent and programs: never root"},
    {.key = "service_account",
     .type = SBX_OPT_STRING,
     .help = "service account of sandbox pods (its token is never mounted)"},
    {.key = "runtime_class", .type = SBX_OPT_STRING, .help = "runtimeClassName (gvisor, kata)"},
    {.key = "node_selector", .type = SBX_OPT_LIST, .help = "K=V node labels sandbox pods need"},
    {.key = "labels", .type = SBX_OPT_LIST, .help = "K=V extra labels of sandbox pods"},
    {.key = "image_pull_secrets", .type = SBX_OPT_LIST, .help = "names of image pull secrets"},
    {.key = "network_policy",
     .type = SBX_OPT_BOOL,
     .default_value = "false",
     .help = "true: the cluster's network plugin enforces NetworkPolicy, so egress deny and "
             "CIDR allowlists are enforced with one per sandbox"},
    {.key = "worker_selector",
     .type = SBX_OPT_LIST,
     .help = "K=V labels of the worker pods: with network_policy, only they may reach the "
             "agent port"},
    {.key = "impersonate",
     .type = SBX_OPT_BOOL,
     .default_value = "false",
     .help = "user mode: create and attach as the principal (Impersonate-User/-Group)"},
    {.key = "attach_token_env",
     .type = SBX_OPT_ENV_NAME,
     .help = "attached: name of the env var holding the attached pod's agent credential (64 "
             "hex digits)"},
    {.key = "create_timeout_s",
     .type = SBX_OPT_INT,
     .default_value = "120",
     .min = 1,
     .max = 3600,
     .help = "how long a new pod may take to run"},
    {.key = "active_deadline_s",
     .type = SBX_OPT_INT,
     .default_value = "7200",
     .min = 60,
     .max = 31536000,
     .help = "activeDeadlineSeconds: the hard ceiling of a sandbox pod's life"},
    {.key = NULL},
};

enum { K8S_LANG_PYTHON = 0, K8S_LANG_BASH = 1, K8S_LANG_SH = 2, K8S_LANG_COUNT = 3 };
static const char *const lang_names[K8S_LANG_COUNT] = {"python", "bash", "sh"};

/* One per profile: written by open only, then read-only (shared by threads without a lock). */
typedef struct k8s_provider {
    k8s_cluster cluster;
    char *profile;
    char *profile_label; /* the profile name as a label value */
    char *node;
    char *namespace;
    bool managed;
    char *attach_to;
    char *image, *agent_image, *agent_image_path, *workdir;
    char *service_account, *runtime_class;
    char **node_selector, **labels, **pull_secrets, **worker_selector;
    size_t n_node_selector, n_labels, n_pull_secrets, n_worker_selector;
    int64_t agent_port, run_as_user, create_timeout_s, active_deadline_s;
    bool network_policy, impersonate, per_call;
    bool exec_api; /* attached without attach_token_env: the exec API, no agent */
    bool languages[K8S_LANG_COUNT];
    uint8_t key[SBX_PROVIDER_KEY_LEN]; /* credential key (the engine's, else random) */
    uint8_t attach_token[SBX_AGENT_TOKEN_LEN];
    char owner[48]; /* "<pid> <start time>" of this process */
} k8s_provider;

typedef struct k8s_sandbox {
    sbx_sandbox base; /* first: the engine sees an sbx_sandbox; id is "ns/pod" */
    k8s_provider *p;
    char ns[K8S_MAX_NAME + 1];
    char pod[K8S_MAX_NAME + 1];
    char ip[64];
    uint8_t token[SBX_AGENT_TOKEN_LEN];
    sbx_agent_conn *agent; /* NULL after a failure; the next operation reconnects */
} k8s_sandbox;

/* ---- small helpers -------------------------------------------------------------------------- */

static char *dup_opt(const sbx_options *o, const char *key)
{
    const char *v = o != NULL ? sbx_options_get(o, key) : NULL;
    return v != NULL && v[0] != '\0' ? strdup(v) : NULL;
}

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(l[i]);
    free(l);
}

static void provider_free(k8s_provider *p)
{
    if (p == NULL)
        return;
    k8s_cluster_clear(&p->cluster);
    free(p->profile);
    free(p->profile_label);
    free(p->node);
    free(p->namespace);
    free(p->attach_to);
    free(p->image);
    free(p->agent_image);
    free(p->agent_image_path);
    free(p->workdir);
    free(p->service_account);
    free(p->runtime_class);
    free_list(p->node_selector, p->n_node_selector);
    free_list(p->labels, p->n_labels);
    free_list(p->pull_secrets, p->n_pull_secrets);
    free_list(p->worker_selector, p->n_worker_selector);
    OPENSSL_cleanse(p->key, sizeof(p->key));
    OPENSSL_cleanse(p->attach_token, sizeof(p->attach_token));
    free(p);
}

/* DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 (namespaces, our pod names). */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > K8S_MAX_LABEL || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
            return false;
    return true;
}

/* DNS-1123 subdomain (pod names of attached pods): labels joined by dots, at most 253. */
static bool dns_subdomain(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > K8S_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

/* A label value from any text: [A-Za-z0-9._-], at most 63, alphanumeric at both ends. */
static void label_value(const char *in, char out[K8S_MAX_LABEL + 1])
{
    size_t j = 0;
    for (size_t i = 0; in != NULL && in[i] != '\0' && j < K8S_MAX_LABEL; i++) {
        char c = in[i];
        out[j++] = isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-' ? c : '_';
    }
    while (j > 0 && !isalnum((unsigned char)out[j - 1]))
        j--;
    out[j] = '\0';
    size_t k = 0;
    while (out[k] != '\0' && !isalnum((unsigned char)out[k]))
        k++;
    memmove(out, out + k, j - k + 1);
}

/* Splits "ns/pod" (a bare name: the provider's namespace). */
static bool split_id(const k8s_provider *p, const char *id, char ns[K8S_MAX_NAME + 1],
                     char pod[K8S_MAX_NAME + 1])
{
    if (id == NULL)
        return false;
    const char *slash = strchr(id, '/');
    if (slash == NULL) {
        snprintf(ns, K8S_MAX_NAME + 1, "%s", p->namespace);
        snprintf(pod, K8S_MAX_NAME + 1, "%s", id);
    } else {
        size_t n = (size_t)(slash - id);
        if (n > K8S_MAX_LABEL || strchr(slash + 1, '/') != NULL)
            return false;
        memcpy(ns, id, n);
        ns[n] = '\0';
        snprintf(pod, K8S_MAX_NAME + 1, "%s", slash + 1);
    }
    return dns_label(ns) && dns_subdomain(pod) && strlen(pod) <= K8S_MAX_NAME;
}

/* The credential of the managed pod ns/pod. */
static void pod_token(const k8s_provider *p, const char *ns, const char *pod,
                      uint8_t out[SBX_AGENT_TOKEN_LEN])
{
    char msg[K8S_MAX_NAME * 2 + 32];
    int n = snprintf(msg, sizeof(msg), "kubernetes agent|%s/%s", ns, pod);
    unsigned int len = SBX_AGENT_TOKEN_LEN;
    HMAC(EVP_sha256(), p->key, (int)sizeof(p->key), (const unsigned char *)msg, (size_t)n, out,
         &len);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static bool unhex(const char *s, uint8_t *out, size_t n)
{
    if (s == NULL || strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (!isxdigit((unsigned char)s[2 * i]) || !isxdigit((unsigned char)s[2 * i + 1]) ||
            sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        out[i] = (uint8_t)v;
    }
    return true;
}

/* "K=V" list option -> validated copies. */
static sbx_status kv_list(const sbx_options *o, const char *key, char ***out, size_t *n,
                          sbx_error *err)
{
    const char *const *items = NULL;
    size_t count = o != NULL ? sbx_options_get_list(o, key, &items) : 0;
    *out = calloc(count + 1, sizeof(char *));
    *n = 0;
    if (*out == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    for (size_t i = 0; i < count; i++) {
        const char *eq = strchr(items[i], '=');
        if (strcmp(key, "image_pull_secrets") != 0 && (eq == NULL || eq == items[i]))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "kubernetes.%s has '%s'; each item is KEY=VALUE", key, items[i]);
        if (((*out)[(*n)++] = strdup(items[i])) == NULL)
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    }
    return SBX_OK;
}

/* ---- open / close --------------------------------------------------------------------------- */

/* Long because it reads the provider's option block field by field (kubeconfig or in-cluster,
 * namespace, image, resources), a few lines each, into one state freed at one exit. */
static sbx_status k8s_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    *state = NULL;
    k8s_api_init();
    k8s_provider *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    const sbx_options *o = ctx->options;
    sbx_status st = SBX_OK;
    p->managed = ctx->environment == SBX_ENV_MANAGED;
    p->profile = strdup(ctx->profile != NULL ? ctx->profile : "");
    p->node = strdup(ctx->node != NULL ? ctx->node : "");
    p->attach_to = ctx->attach_to != NULL ? strdup(ctx->attach_to) : NULL;
    p->image = dup_opt(o, "image");
    p->agent_image = dup_opt(o, "agent_image");
    p->agent_image_path = dup_opt(o, "agent_image_path");
    p->workdir = dup_opt(o, "workdir");
    p->service_account = dup_opt(o, "service_account");
    p->runtime_class = dup_opt(o, "runtime_class");
    p->agent_port = o != NULL ? sbx_options_get_int(o, "agent_port") : 7070;
    p->run_as_user = o != NULL ? sbx_options_get_int(o, "run_as_user") : 65534;
    p->create_timeout_s = o != NULL ? sbx_options_get_int(o, "create_timeout_s") : 120;
    p->active_deadline_s = o != NULL ? sbx_options_get_int(o, "active_deadline_s") : 7200;
    p->network_policy = o != NULL && sbx_options_get_bool(o, "network_policy");
    p->impersonate = o != NULL && sbx_options_get_bool(o, "impersonate");
    p->per_call = ctx->scope == SBX_SCOPE_PER_CALL;
    char lv[K8S_MAX_LABEL + 1];
    label_value(p->profile, lv);
    p->profile_label = strdup(lv);
    snprintf(p->owner, sizeof(p->owner), "%ld %llu", (long)getpid(),
             sbx_proc_live_start_time((long)getpid()));
    if (p->profile == NULL || p->node == NULL || p->profile_label == NULL ||
        (ctx->attach_to != NULL && p->attach_to == NULL)) {
        provider_free(p);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    }
    const char *const *langs = NULL;
    size_t n_langs = o != NULL ? sbx_options_get_list(o, "languages", &langs) : 0;
    for (size_t i = 0; i < n_langs && st == SBX_OK; i++) {
        size_t k = 0;
        while (k < K8S_LANG_COUNT && strcmp(langs[i], lang_names[k]) != 0)
            k++;
        if (k == K8S_LANG_COUNT)
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "kubernetes.languages has '%s'; accepted: python, bash, sh",
                               langs[i]);
        else
            p->languages[k] = true;
    }
    if (st == SBX_OK)
        st = kv_list(o, "node_selector", &p->node_selector, &p->n_node_selector, err);
    if (st == SBX_OK)
        st = kv_list(o, "labels", &p->labels, &p->n_labels, err);
    if (st == SBX_OK)
        st = kv_list(o, "image_pull_secrets", &p->pull_secrets, &p->n_pull_secrets, err);
    if (st == SBX_OK)
        st = kv_list(o, "worker_selector", &p->worker_selector, &p->n_worker_selector, err);
    if (st == SBX_OK && (p->workdir == NULL || p->workdir[0] != '/'))
        st = sbx_error_set(err, SBX_E_CONFIG, "kubernetes.workdir '%s' must be an absolute path",
                           p->workdir != NULL ? p->workdir : "");
    if (st == SBX_OK && p->managed && (p->agent_image == NULL || p->image == NULL))
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "kubernetes: profile '%s' needs kubernetes.agent_image (an image "
                           "holding the static sbx-agent at agent_image_path) and "
                           "kubernetes.image",
                           p->profile);
    if (st == SBX_OK && !p->managed) {
        const char *env = o != NULL ? sbx_options_get(o, "attach_token_env") : NULL;
        const char *tok = env != NULL ? getenv(env) : NULL;
        if (env == NULL)
            p->exec_api = true; /* no agent in the pod: commands through the exec API */
        else if (!unhex(tok, p->attach_token, sizeof(p->attach_token)))
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "kubernetes: %s must hold the attached agent's credential (%u "
                               "hex digits)%s",
                               env, 2 * SBX_AGENT_TOKEN_LEN, tok == NULL ? "; it is not set" : "");
    }
    if (st == SBX_OK) {
        const char *kc = o != NULL ? sbx_options_get(o, "kubeconfig") : NULL;
        const char *context = o != NULL ? sbx_options_get(o, "context") : NULL;
        const char *sa = o != NULL ? sbx_options_get(o, "service_account_dir") : NULL;
        st = kc != NULL && kc[0] != '\0'
                 ? k8s_cluster_load_kubeconfig(kc, context, &p->cluster, err)
                 : k8s_cluster_load_in_cluster(
                       sa != NULL ? sa : "/var/run/secrets/kubernetes.io/serviceaccount",
                       &p->cluster, err);
    }
    if (st == SBX_OK) {
        const char *ns = o != NULL ? sbx_options_get(o, "namespace") : NULL;
        if (ns == NULL || ns[0] == '\0')
            ns = p->cluster.namespace != NULL ? p->cluster.namespace : "default";
        p->namespace = strdup(ns);
        if (p->namespace == NULL || !dns_label(p->namespace))
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "kubernetes: namespace '%s' is not a DNS-1123 label", ns);
    }
    if (st == SBX_OK && !p->managed) {
        char ns[K8S_MAX_NAME + 1], pod[K8S_MAX_NAME + 1];
        if (!split_id(p, p->attach_to, ns, pod))
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "kubernetes: attach_to '%s' is not NAMESPACE/POD (or a pod name)",
                               p->attach_to != NULL ? p->attach_to : "");
    }
    if (st == SBX_OK) {
        if (ctx->credential_key != NULL)
            memcpy(p->key, ctx->credential_key, sizeof(p->key));
        else if (getrandom(p->key, sizeof(p->key), 0) != (ssize_t)sizeof(p->key))
            /* Outside an engine: credentials valid for this process only. */
            st = sbx_error_set(err, SBX_E_INTERNAL, "kubernetes: getrandom failed");
    }
    if (st != SBX_OK) {
        provider_free(p);
        return st;
    }
    *state = p;
    return SBX_OK;
}

static void k8s_close(void *state)
{
    provider_free(state);
}

/* ---- capabilities and policy ---------------------------------------------------------------- */

static void k8s_capabilities(void *state, sbx_capabilities *caps)
{
    k8s_provider *p = state;
    bool managed = p == NULL || p->managed;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_CONTAINER;
    caps->shell = true;
    for (int i = 0; i < K8S_LANG_COUNT; i++)
        if (p == NULL || p->languages[i])
            sbx_add_string(&caps->n_languages, &caps->languages, lang_names[i]);
    bool agent = p == NULL || !p->exec_api;
    /* Without the agent (the exec API) there is no kernel and no file API. */
    caps->files = agent;
    caps->package_install = false; /* read-only root: pip has nowhere to install */
    caps->stateful = agent;        /* the agent's persistent python kernel */
    caps->attach = true;
    caps->provisions = managed;
    caps->attaches_external = p == NULL || !p->managed;
    caps->principal_user = p != NULL && p->impersonate;
    caps->policy_network = managed && p != NULL && p->network_policy;
    caps->policy_network_domains = false; /* NetworkPolicy is L3/L4: no domain names */
    caps->policy_filesystem = managed;
    caps->policy_resources = managed;
    caps->streaming = true;
}

/* "A.B.C.D" or "A.B.C.D/N" -> canonical IPv4 CIDR; false for anything else (a domain). */
static bool cidr(const char *e, char *out, size_t cap)
{
    unsigned a, b, c, d, n = 32;
    char tail;
    int got = sscanf(e, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &n, &tail);
    if (got != 4 && got != 5)
        return false;
    if (a > 255 || b > 255 || c > 255 || d > 255 || n > 32)
        return false;
    if (got == 4 && strchr(e, '/') != NULL)
        return false;
    snprintf(out, cap, "%u.%u.%u.%u/%u", a, b, c, d, n);
    return true;
}

static sbx_status k8s_check_policy(void *state, const sbx_policy *policy, sbx_strlist *un,
                                   sbx_error *err)
{
    k8s_provider *p = state;
    (void)err;
    bool ok = true;
    if (!p->managed) {
        /* a pod sbx did not make is as its owner made it */
        if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY)
            ok &= sbx_strlist_add(un, "network_egress=deny");
        if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST)
            ok &= sbx_strlist_add(un, "network_egress=allowlist");
        if (policy->n_fs_read > 0)
            ok &= sbx_strlist_add(un, "fs_read");
        if (policy->n_fs_write > 0)
            ok &= sbx_strlist_add(un, "fs_write");
        if (policy->cpu > 0)
            ok &= sbx_strlist_add(un, "cpu");
        if (policy->memory_mb > 0)
            ok &= sbx_strlist_add(un, "memory_mb");
        if (policy->disk_mb > 0)
            ok &= sbx_strlist_add(un, "disk_mb");
        if (policy->pids > 0)
            ok &= sbx_strlist_add(un, "pids");
        return ok ? SBX_OK : SBX_E_INTERNAL;
    }
    switch (policy->network_egress) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW: break;
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST:
        if (!p->network_policy) {
            ok &= sbx_strlist_add(un, "network_egress=allowlist");
            break;
        }
        /* Domains cannot be written into a NetworkPolicy: listed (strict refuses; lenient
         * drops them, which only narrows egress). */
        for (size_t i = 0; i < policy->n_network_allow; i++) {
            char c[32];
            if (!cidr(policy->network_allow[i], c, sizeof(c))) {
                ok &= sbx_strlist_add(un, "network_allow (domain names)");
                break;
            }
        }
        break;
    default: /* DENY, and UNSPECIFIED (fail closed: deny) */
        if (!p->network_policy)
            ok &= sbx_strlist_add(un, "network_egress=deny");
        break;
    }
    if (policy->pids > 0)
        ok &= sbx_strlist_add(un, "pids"); /* a pod's pid limit is the kubelet's, not ours */
    if (policy->n_fs_read > 0)
        ok &= sbx_strlist_add(un, "fs_read"); /* host paths are never mounted into pods */
    for (size_t i = 0; i < policy->n_fs_write; i++)
        if (policy->fs_write[i][0] != '/') {
            ok &= sbx_strlist_add(un, "fs_write (relative path)");
            break;
        }
    return ok ? SBX_OK : SBX_E_INTERNAL;
}

/* Changes the code of an error already set (the message stays). */
static sbx_status recode(sbx_error *err, sbx_status code)
{
    if (err != NULL)
        err->code = code;
    return code;
}

/* ---- identity ------------------------------------------------------------------------------- */

typedef struct k8s_who {
    k8s_identity id;
    const char *groups[K8S_MAX_GROUPS];
    char *group_copy; /* credentials["groups"], split in place */
} k8s_who;

static const char *credential(const sbx_principal *pr, const char *key)
{
    for (size_t i = 0; pr != NULL && i < pr->n_credentials; i++)
        if (pr->credentials[i]->key != NULL && strcmp(pr->credentials[i]->key, key) == 0)
            return pr->credentials[i]->value;
    return NULL;
}

/* The identity of a call made for principal pr: the provider's own in agent mode; in user mode
 * the impersonated user (credentials.user, else the subject) and groups (credentials.groups,
 * comma separated, else the principal's groups). No user -> POLICY (never the worker's own). */
static sbx_status who_for(const k8s_provider *p, const sbx_principal *pr, k8s_who *w,
                          sbx_error *err)
{
    memset(w, 0, sizeof(*w));
    if (pr == NULL || pr->mode != SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER)
        return SBX_OK;
    if (!p->impersonate)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "kubernetes: user mode needs kubernetes.impersonate: true");
    const char *user = credential(pr, "user");
    if (user == NULL || user[0] == '\0')
        user = pr->subject;
    if (user == NULL || user[0] == '\0')
        return sbx_error_set(err, SBX_E_POLICY,
                             "kubernetes: user mode without a user to impersonate (principal "
                             "subject and credentials.user are empty)");
    w->id.user = user;
    const char *groups = credential(pr, "groups");
    if (groups != NULL && groups[0] != '\0') {
        w->group_copy = strdup(groups);
        if (w->group_copy == NULL)
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
        char *save = NULL;
        for (char *g = strtok_r(w->group_copy, ",", &save); g != NULL;
             g = strtok_r(NULL, ",", &save)) {
            if (w->id.n_groups == K8S_MAX_GROUPS)
                return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                     "kubernetes: more than %d groups to impersonate",
                                     K8S_MAX_GROUPS);
            w->groups[w->id.n_groups++] = g;
        }
    } else {
        for (size_t i = 0; i < pr->n_groups; i++) {
            if (w->id.n_groups == K8S_MAX_GROUPS)
                return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                     "kubernetes: more than %d groups to impersonate",
                                     K8S_MAX_GROUPS);
            w->groups[w->id.n_groups++] = pr->groups[i];
        }
    }
    w->id.groups = w->groups;
    return SBX_OK;
}

static void who_clear(k8s_who *w)
{
    free(w->group_copy);
    w->group_copy = NULL;
}

/* ---- API calls ------------------------------------------------------------------------------ */

static int64_t step(int64_t ms)
{
    return sbx_provider_step_deadline(ms);
}

/* GET pod: SBX_OK with *pod, SBX_E_GONE on 404, another code on failure. */
static sbx_status get_pod(k8s_provider *p, const char *ns, const char *pod, const k8s_identity *as,
                          int64_t deadline, json_t **out, sbx_error *err)
{
    char path[K8S_MAX_NAME * 2 + 64];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, pod);
    long status = 0;
    json_t *j = NULL;
    *out = NULL;
    sbx_status st = k8s_call(&p->cluster, "GET", path, NULL, as, deadline, &status, &j, err);
    if (st != SBX_OK)
        return st;
    if (status == 200 && j != NULL) {
        *out = j;
        return SBX_OK;
    }
    st = k8s_status_error("GET", path, status, j, err);
    if (status == 404)
        sbx_error_set(err, SBX_E_GONE, "kubernetes: pod %s/%s no longer exists", ns, pod);
    json_decref(j);
    return st;
}

static const char *pod_phase(const json_t *pod)
{
    const char *ph = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    return ph != NULL ? ph : "Unknown";
}

/* The proof that a pod is gone: a deletionTimestamp, or a terminal phase. */
static bool pod_finished(const json_t *pod)
{
    const char *ph = pod_phase(pod);
    return json_object_get(json_object_get(pod, "metadata"), "deletionTimestamp") != NULL ||
           strcmp(ph, "Succeeded") == 0 || strcmp(ph, "Failed") == 0;
}

/* Why a pod is not running: the first container's waiting/terminated reason and message, or
 * the status message, or the last condition's. */
static void pod_why(const json_t *pod, char *out, size_t cap)
{
    json_t *status = json_object_get(pod, "status");
    const char *reason = NULL, *msg = NULL;
    const char *lists[] = {"initContainerStatuses", "containerStatuses"};
    for (size_t l = 0; l < 2 && reason == NULL; l++) {
        json_t *cs = json_object_get(status, lists[l]);
        for (size_t i = 0; i < json_array_size(cs) && reason == NULL; i++) {
            json_t *stt = json_object_get(json_array_get(cs, i), "state");
            json_t *w = json_object_get(stt, "waiting");
            if (w == NULL)
                w = json_object_get(stt, "terminated");
            const char *r = json_string_value(json_object_get(w, "reason"));
            if (r != NULL && strcmp(r, "Completed") != 0) {
                reason = r;
                msg = json_string_value(json_object_get(w, "message"));
            }
        }
    }
    if (reason == NULL) {
        reason = json_string_value(json_object_get(status, "reason"));
        msg = json_string_value(json_object_get(status, "message"));
    }
    json_t *conds = json_object_get(status, "conditions");
    for (size_t i = 0; reason == NULL && i < json_array_size(conds); i++) {
        json_t *c = json_array_get(conds, i);
        if (json_is_string(json_object_get(c, "message"))) {
            reason = json_string_value(json_object_get(c, "reason"));
            msg = json_string_value(json_object_get(c, "message"));
        }
    }
    snprintf(out, cap, "phase %s%s%.200s%s%.300s", pod_phase(pod), reason ? ", " : "",
             reason ? reason : "", msg ? ": " : "", msg ? msg : "");
}

/* API group paths of the three kinds of objects a managed sandbox has. */
#define K8S_CORE "/api/v1"
#define K8S_NETWORKING "/apis/networking.k8s.io/v1"

/* DELETE one object; 404 is success (idempotent). */
static sbx_status delete_object(k8s_provider *p, const char *group, const char *resource,
                                const char *ns, const char *name, int64_t deadline, sbx_error *err)
{
    char path[K8S_MAX_NAME * 2 + 96];
    snprintf(path, sizeof(path), "%s/namespaces/%s/%s/%s", group, ns, resource, name);
    json_t *body = json_pack("{s:s, s:s, s:s}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "propagationPolicy", "Background");
    long status = 0;
    json_t *j = NULL;
    sbx_status st = k8s_call(&p->cluster, "DELETE", path, body, NULL, deadline, &status, &j, err);
    json_decref(body);
    if (st == SBX_OK && status != 200 && status != 202 && status != 404)
        st = k8s_status_error("DELETE", path, status, j, err);
    json_decref(j);
    return st;
}

/* Removes every object of a managed sandbox (pod first: it is what runs); each deletion is
 * tried even when an earlier one failed, and the first failure is returned. */
static sbx_status delete_sandbox(k8s_provider *p, const char *ns, const char *pod, int64_t deadline,
                                 sbx_error *err)
{
    sbx_error e2, e3;
    sbx_status st = delete_object(p, K8S_CORE, "pods", ns, pod, deadline, err);
    sbx_status st2 = p->network_policy ? delete_object(p, K8S_NETWORKING, "networkpolicies", ns,
                                                       pod, deadline, &e2)
                                       : SBX_OK;
    sbx_status st3 = delete_object(p, K8S_CORE, "secrets", ns, pod, deadline, &e3);
    if (st == SBX_OK && st2 != SBX_OK) {
        st = st2;
        if (err != NULL)
            *err = e2;
    }
    if (st == SBX_OK && st3 != SBX_OK) {
        st = st3;
        if (err != NULL)
            *err = e3;
    }
    return st;
}

/* ---- manifests ------------------------------------------------------------------------------ */

/* The labels every object of a managed sandbox carries (the sweep selects on the first two and
 * the profile). */
static json_t *labels_for(const k8s_provider *p, const sbx_session_handle *session)
{
    json_t *l = json_object();
    for (size_t i = 0; i < p->n_labels; i++) {
        const char *eq = strchr(p->labels[i], '=');
        char *k = strndup(p->labels[i], (size_t)(eq - p->labels[i]));
        if (k != NULL)
            json_object_set_new(l, k, json_string(eq + 1));
        free(k);
    }
    char v[K8S_MAX_LABEL + 1];
    json_object_set_new(l, LABEL_MANAGED_BY, json_string("sbx"));
    json_object_set_new(l, LABEL_SANDBOX, json_string("true"));
    json_object_set_new(l, LABEL_PROFILE, json_string(p->profile_label));
    label_value(p->node, v);
    json_object_set_new(l, LABEL_NODE, json_string(v));
    if (session != NULL && session->session_id != NULL) {
        label_value(session->session_id, v);
        json_object_set_new(l, LABEL_SESSION, json_string(v));
    }
    if (p->per_call)
        json_object_set_new(l, LABEL_SCOPE, json_string("per_call"));
    return l;
}

static json_t *metadata(const char *name, const char *ns, json_t *labels)
{
    return json_pack("{s:s, s:s, s:o}", "name", name, "namespace", ns, "labels", labels);
}

static json_t *selector_from(char **kv, size_t n)
{
    json_t *m = json_object();
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        char *k = strndup(kv[i], (size_t)(eq - kv[i]));
        if (k != NULL)
            json_object_set_new(m, k, json_string(eq + 1));
        free(k);
    }
    return m;
}

/* The NetworkPolicy of a sandbox, or NULL when none is needed (network_policy off, or egress
 * allowed and no worker_selector). Selects the pod by its sbx.dev/sandbox-name label.
 *   deny (and unspecified) -> policyTypes [Egress], egress [] (nothing leaves the pod)
 *   allowlist -> egress to each CIDR as an ipBlock; domains were refused by check_policy under
 *                strict and are dropped under lenient (narrower, never wider)
 *   worker_selector -> policyTypes also Ingress: only those pods reach the agent port */
static json_t *network_policy_for(const k8s_provider *p, const char *name, const char *ns,
                                  const sbx_policy *policy, json_t *labels)
{
    bool allow = policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    if (!p->network_policy || (allow && p->n_worker_selector == 0)) {
        json_decref(labels);
        return NULL;
    }
    json_t *types = json_array();
    json_t *spec =
        json_pack("{s:{s:{s:s}}}", "podSelector", "matchLabels", "sbx.dev/sandbox-name", name);
    if (!allow) {
        json_array_append_new(types, json_string("Egress"));
        json_t *egress = json_array();
        if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
            json_t *to = json_array();
            for (size_t i = 0; i < policy->n_network_allow; i++) {
                char c[32];
                if (cidr(policy->network_allow[i], c, sizeof(c)))
                    json_array_append_new(to, json_pack("{s:{s:s}}", "ipBlock", "cidr", c));
            }
            if (json_array_size(to) > 0)
                json_array_append_new(egress, json_pack("{s:o}", "to", to));
            else
                json_decref(to);
        }
        json_object_set_new(spec, "egress", egress);
    }
    if (p->n_worker_selector > 0) {
        json_array_append_new(types, json_string("Ingress"));
        json_object_set_new(spec, "ingress",
                            json_pack("[{s:[{s:{}, s:{s:o}}], s:[{s:s, s:I}]}]", "from",
                                      "namespaceSelector", "podSelector", "matchLabels",
                                      selector_from(p->worker_selector, p->n_worker_selector),
                                      "ports", "protocol", "TCP", "port",
                                      (json_int_t)p->agent_port));
    }
    json_object_set_new(spec, "policyTypes", types);
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "networking.k8s.io/v1", "kind",
                     "NetworkPolicy", "metadata", metadata(name, ns, labels), "spec", spec);
}

static json_t *volume_mount(const char *name, const char *path, bool ro)
{
    return json_pack("{s:s, s:s, s:b}", "name", name, "mountPath", path, "readOnly", ro);
}

static json_t *empty_dir(const char *name, uint64_t size_mb)
{
    json_t *ed = json_object();
    if (size_mb > 0) {
        char q[32];
        snprintf(q, sizeof(q), "%lluMi", (unsigned long long)size_mb);
        json_object_set_new(ed, "sizeLimit", json_string(q));
    }
    return json_pack("{s:s, s:o}", "name", name, "emptyDir", ed);
}

/* The hardened security context of both containers: never root, no privilege escalation, no
 * capabilities, the runtime's default seccomp profile, a read-only root. */
static json_t *security_context(const k8s_provider *p)
{
    return json_pack("{s:b, s:I, s:I, s:b, s:b, s:b, s:{s:[s]}, s:{s:s}}", "runAsNonRoot", 1,
                     "runAsUser", (json_int_t)p->run_as_user, "runAsGroup",
                     (json_int_t)p->run_as_user, "allowPrivilegeEscalation", 0, "privileged", 0,
                     "readOnlyRootFilesystem", 1, "capabilities", "drop", "ALL", "seccompProfile",
                     "type", "RuntimeDefault");
}

static json_t *pod_for(const k8s_provider *p, const char *name, const char *ns,
                       const sbx_policy *policy, json_t *labels, const char *subject)
{
    char port[16], uid[24], listen[32];
    snprintf(port, sizeof(port), "%lld", (long long)p->agent_port);
    snprintf(uid, sizeof(uid), "%lld", (long long)p->run_as_user);
    snprintf(listen, sizeof(listen), "0.0.0.0:%lld", (long long)p->agent_port);
    json_t *resources = json_object();
    if (policy->cpu > 0 || policy->memory_mb > 0 || policy->disk_mb > 0) {
        json_t *q = json_object();
        if (policy->cpu > 0) {
            char c[32];
            /* millicores, rounded up: the pod gets at least what was asked, never less */
            double m = policy->cpu * 1000.0;
            long long whole = (long long)m;
            snprintf(c, sizeof(c), "%lldm", (double)whole < m ? whole + 1 : whole);
            json_object_set_new(q, "cpu", json_string(c));
        }
        if (policy->memory_mb > 0) {
            char m[32];
            snprintf(m, sizeof(m), "%lluMi", (unsigned long long)policy->memory_mb);
            json_object_set_new(q, "memory", json_string(m));
        }
        if (policy->disk_mb > 0) {
            char d[32];
            snprintf(d, sizeof(d), "%lluMi", (unsigned long long)policy->disk_mb);
            json_object_set_new(q, "ephemeral-storage", json_string(d));
        }
        /* requests = limits: the Guaranteed QoS class, nothing borrowed that can be taken */
        json_object_set_new(resources, "requests", json_deep_copy(q));
        json_object_set_new(resources, "limits", q);
    }
    json_t *mounts =
        json_pack("[o, o, o, o]", volume_mount("sbx-bin", K8S_AGENT_DIR, true),
                  volume_mount("sbx-run", K8S_RUN_DIR, false),
                  volume_mount("workspace", p->workdir, false), volume_mount("tmp", "/tmp", false));
    json_t *volumes = json_pack("[o, o, o, o]", empty_dir("sbx-bin", 64), empty_dir("sbx-run", 1),
                                empty_dir("workspace", policy->disk_mb), empty_dir("tmp", 0));
    for (size_t i = 0; i < policy->n_fs_write; i++) {
        char vn[32];
        snprintf(vn, sizeof(vn), "fs-write-%zu", i);
        json_array_append_new(mounts, volume_mount(vn, policy->fs_write[i], false));
        json_array_append_new(volumes, empty_dir(vn, policy->disk_mb));
    }
    json_t *agent_cmd = json_pack("[s, s, s, s, s, s, s, s, s, s, s, s]", K8S_AGENT_PATH,
                                  "--socket", K8S_RUN_DIR "/agent.sock", "--workdir", p->workdir,
                                  "--uid", uid, "--gid", uid, "--shared-uid", "--listen", listen);
    json_array_append_new(agent_cmd, json_string("--token-env"));
    json_array_append_new(agent_cmd, json_string(K8S_TOKEN_ENV));
    /* A per_call pod serves the one connection of the process that made it: when that process
     * dies mid-call, the agent sees the connection close and exits, ending the pod's programs
     * (the pod ends, and the sweep removes it) instead of leaving them to run. */
    if (p->per_call)
        json_array_append_new(agent_cmd, json_string("--one-shot"));
    json_t *env = json_pack("[{s:s, s:{s:{s:s, s:s}}}]", "name", K8S_TOKEN_ENV, "valueFrom",
                            "secretKeyRef", "name", name, "key", "token");
    json_t *sandbox = json_pack(
        "{s:s, s:s, s:o, s:o, s:s, s:[{s:s, s:I, s:s}], s:o, s:o, s:o}", "name", "sandbox", "image",
        p->image, "command", agent_cmd, "env", env, "workingDir", p->workdir, "ports", "name",
        "sbx-agent", "containerPort", (json_int_t)p->agent_port, "protocol", "TCP", "resources",
        resources, "volumeMounts", mounts, "securityContext", security_context(p));
    json_t *init =
        json_pack("{s:s, s:s, s:[s, s, s], s:[o], s:o, s:{s:{s:s, s:s}, s:{s:s, s:s}}}", "name",
                  "sbx-agent-copy", "image", p->agent_image, "command", "cp", p->agent_image_path,
                  K8S_AGENT_PATH, "volumeMounts", volume_mount("sbx-bin", K8S_AGENT_DIR, false),
                  "securityContext", security_context(p), "resources", "requests", "cpu", "10m",
                  "memory", "16Mi", "limits", "cpu", "100m", "memory", "64Mi");
    json_t *spec = json_pack(
        "{s:s, s:I, s:I, s:b, s:b, s:b, s:b, s:b, s:{s:b, s:I, s:I, s:I, s:{s:s}}, s:[o], s:[o], "
        "s:o}",
        "restartPolicy", "Never", "activeDeadlineSeconds", (json_int_t)p->active_deadline_s,
        "terminationGracePeriodSeconds", (json_int_t)5, "automountServiceAccountToken", 0,
        "enableServiceLinks", 0, "hostNetwork", 0, "hostPID", 0, "shareProcessNamespace", 0,
        "securityContext", "runAsNonRoot", 1, "runAsUser", (json_int_t)p->run_as_user, "runAsGroup",
        (json_int_t)p->run_as_user, "fsGroup", (json_int_t)p->run_as_user, "seccompProfile", "type",
        "RuntimeDefault", "initContainers", init, "containers", sandbox, "volumes", volumes);
    if (p->service_account != NULL)
        json_object_set_new(spec, "serviceAccountName", json_string(p->service_account));
    if (p->runtime_class != NULL)
        json_object_set_new(spec, "runtimeClassName", json_string(p->runtime_class));
    if (p->n_node_selector > 0)
        json_object_set_new(spec, "nodeSelector",
                            selector_from(p->node_selector, p->n_node_selector));
    if (p->n_pull_secrets > 0) {
        json_t *ps = json_array();
        for (size_t i = 0; i < p->n_pull_secrets; i++)
            json_array_append_new(ps, json_pack("{s:s}", "name", p->pull_secrets[i]));
        json_object_set_new(spec, "imagePullSecrets", ps);
    }
    json_t *meta = metadata(name, ns, labels);
    json_object_set_new(json_object_get(meta, "labels"), "sbx.dev/sandbox-name", json_string(name));
    if (p->per_call)
        json_object_set_new(meta, "annotations", json_pack("{s:s}", ANNOTATION_OWNER, p->owner));
    else
        json_object_set_new(
            meta, "annotations",
            json_pack("{s:s}", ANNOTATION_PRINCIPAL, subject != NULL ? subject : ""));
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind", "Pod", "metadata", meta,
                     "spec", spec);
}

/* POST one object; 201/200 is success, anything else the API's own words. */
static sbx_status post_object(k8s_provider *p, const char *group, const char *resource,
                              const char *ns, json_t *obj, const k8s_identity *as, int64_t deadline,
                              sbx_error *err)
{
    char path[K8S_MAX_NAME + 96];
    snprintf(path, sizeof(path), "%s/namespaces/%s/%s", group, ns, resource);
    long status = 0;
    json_t *j = NULL;
    sbx_status st = k8s_call(&p->cluster, "POST", path, obj, as, deadline, &status, &j, err);
    if (st == SBX_OK && status != 201 && status != 200) {
        st = k8s_status_error("POST", path, status, j, err);
        if (st == SBX_E_GONE) /* 404 on create: the namespace does not exist */
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "kubernetes: namespace '%s' does not exist (POST %s answered 404)",
                               ns, path);
        else if (st == SBX_E_INVALID_ARGUMENT)
            /* 422: the cluster refused what the profile made (image name, labels, ...) */
            st = recode(err, SBX_E_PROVISION);
    }
    json_decref(j);
    return st;
}

/* ---- sandboxes ------------------------------------------------------------------------------ */

static void k8s_sandbox_close(sbx_sandbox *sb)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    if (k == NULL)
        return;
    sbx_agent_close(k->agent);
    OPENSSL_cleanse(k->token, sizeof(k->token));
    free(k->base.id);
    free(k);
}

static k8s_sandbox *sandbox_new(k8s_provider *p, const char *ns, const char *pod)
{
    k8s_sandbox *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    k->p = p;
    snprintf(k->ns, sizeof(k->ns), "%s", ns);
    snprintf(k->pod, sizeof(k->pod), "%s", pod);
    if (asprintf(&k->base.id, "%s/%s", ns, pod) < 0) {
        free(k);
        return NULL;
    }
    if (p->managed)
        pod_token(p, ns, pod, k->token);
    else
        memcpy(k->token, p->attach_token, sizeof(k->token));
    return k;
}

/* Waits (bounded by `deadline`) until the pod runs with an IP; *ip gets it. GONE when the pod
 * disappears or ends meanwhile; PROVISION/TIMEOUT with the pod's own reason otherwise. */
static sbx_status wait_running(k8s_provider *p, const char *ns, const char *pod,
                               const k8s_identity *as, int64_t deadline, char *ip, size_t ip_cap,
                               sbx_error *err)
{
    int64_t pause = K8S_POLL_FIRST_MS;
    char why[600] = "no status yet";
    for (;;) {
        json_t *j = NULL;
        sbx_status st = get_pod(p, ns, pod, as, deadline, &j, err);
        if (st != SBX_OK)
            return st;
        if (pod_finished(j)) {
            pod_why(j, why, sizeof(why));
            json_decref(j);
            return sbx_error_set(err, SBX_E_GONE, "kubernetes: pod %s/%s ended (%s)", ns, pod, why);
        }
        const char *phase = pod_phase(j);
        const char *pip = json_string_value(json_object_get(json_object_get(j, "status"), "podIP"));
        if (strcmp(phase, "Running") == 0 && pip != NULL && pip[0] != '\0') {
            snprintf(ip, ip_cap, "%s", pip);
            json_decref(j);
            return SBX_OK;
        }
        pod_why(j, why, sizeof(why));
        json_decref(j);
        int64_t now = sbx_monotonic_ms();
        if (now + pause >= deadline) {
            int64_t req = sbx_provider_deadline_ms();
            sbx_status code = req > 0 && now + pause >= req ? SBX_E_TIMEOUT : SBX_E_PROVISION;
            return sbx_error_set(err, code, "kubernetes: pod %s/%s did not run in time (%s)", ns,
                                 pod, why);
        }
        struct timespec ts = {(time_t)(pause / 1000), (long)(pause % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pause = pause * 3 / 2 > K8S_POLL_MAX_MS ? K8S_POLL_MAX_MS : pause * 3 / 2;
    }
}

/* Connects k->agent to k->ip:agent_port, retrying refused connections until the deadline (a
 * container that just started may not listen yet). */
static sbx_status agent_connect(k8s_sandbox *k, int64_t deadline, sbx_error *err)
{
    sbx_status st;
    for (;;) {
        st =
            sbx_agent_connect_tcp(k->ip, (int)k->p->agent_port, k->token, deadline, &k->agent, err);
        if (st == SBX_OK) {
            /* a ping proves the credential: a wrong one is closed before any answer */
            sbx_agent_pong pong;
            st = sbx_agent_ping(k->agent, deadline, &pong, err);
            if (st == SBX_OK)
                return SBX_OK;
            sbx_agent_close(k->agent);
            k->agent = NULL;
        }
        if (sbx_monotonic_ms() + K8S_AGENT_RETRY_MS >= deadline)
            return st;
        struct timespec ts = {0, K8S_AGENT_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

static sbx_status k8s_destroy(void *state, const char *sandbox_id, sbx_error *err);

static sbx_status k8s_create(void *state, const sbx_session_handle *session,
                             const sbx_principal *principal, const sbx_policy *policy,
                             sbx_sandbox **out, sbx_error *err)
{
    k8s_provider *p = state;
    *out = NULL;
    if (!p->managed)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "kubernetes: attached profile '%s' does not create pods", p->profile);
    k8s_who who;
    sbx_status st = who_for(p, principal, &who, err);
    if (st != SBX_OK) {
        who_clear(&who);
        return st;
    }
    const k8s_identity *as = who.id.user != NULL ? &who.id : NULL;
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        who_clear(&who);
        return sbx_error_set(err, SBX_E_INTERNAL, "kubernetes: getrandom failed");
    }
    char name[64], rh[17];
    hex(rnd, sizeof(rnd), rh);
    snprintf(name, sizeof(name), K8S_POD_PREFIX "%s", rh);
    const char *ns = p->namespace;
    k8s_sandbox *k = sandbox_new(p, ns, name);
    if (k == NULL) {
        who_clear(&who);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    }
    int64_t deadline = step(p->create_timeout_s * 1000);
    /* Every manifest is built before anything is created. */
    char token_hex[2 * SBX_AGENT_TOKEN_LEN + 1];
    hex(k->token, sizeof(k->token), token_hex);
    char *b64 = sbx_http_base64_encode(token_hex, strlen(token_hex));
    OPENSSL_cleanse(token_hex, sizeof(token_hex));
    json_t *secret = json_pack("{s:s, s:s, s:o, s:s, s:{s:s}}", "apiVersion", "v1", "kind",
                               "Secret", "metadata", metadata(name, ns, labels_for(p, session)),
                               "type", "Opaque", "data", "token", b64 != NULL ? b64 : "");
    if (b64 != NULL) {
        OPENSSL_cleanse(b64, strlen(b64));
        free(b64);
    }
    json_t *netpol = network_policy_for(p, name, ns, policy, labels_for(p, session));
    json_t *pod = pod_for(p, name, ns, policy, labels_for(p, session),
                          principal != NULL ? principal->subject : NULL);
    bool made_any = false;
    if (secret == NULL || pod == NULL ||
        (p->network_policy && netpol == NULL &&
         policy->network_egress != SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW)) {
        st = sbx_error_set(err, SBX_E_INTERNAL, "kubernetes: cannot build the manifests");
        goto done;
    }
    /* Secret, then NetworkPolicy, then the pod: the pod never runs before its policy exists. */
    st = post_object(p, K8S_CORE, "secrets", ns, secret, as, deadline, err);
    made_any = st == SBX_OK || st == SBX_E_TIMEOUT;
    if (st == SBX_OK && netpol != NULL)
        st = post_object(p, K8S_NETWORKING, "networkpolicies", ns, netpol, as, deadline, err);
    if (st == SBX_OK)
        st = post_object(p, K8S_CORE, "pods", ns, pod, as, deadline, err);
    if (st == SBX_OK)
        st = wait_running(p, ns, name, as, deadline, k->ip, sizeof(k->ip), err);
    if (st == SBX_E_GONE) /* it ended before it ever served: a failed create, not a gone box */
        st = recode(err, SBX_E_PROVISION);
    if (st == SBX_OK) {
        st = agent_connect(
            k, step(K8S_AGENT_START_MS) < deadline ? step(K8S_AGENT_START_MS) : deadline, err);
        if (st != SBX_OK) {
            sbx_error_prefix(err,
                             "kubernetes: the sbx-agent of new pod %s/%s did not answer on "
                             "%s:%lld (is the worker on the pod network, and agent_image a "
                             "static sbx-agent?): ",
                             ns, name, k->ip, (long long)p->agent_port);
            if (st != SBX_E_TIMEOUT)
                st = recode(err, SBX_E_PROVISION);
        }
    }
done:
    json_decref(secret);
    json_decref(netpol);
    json_decref(pod);
    who_clear(&who);
    if (st != SBX_OK) {
        /* No orphan: everything this create made goes, under the provider's own identity and
         * with a bound of its own (the request's deadline may be what failed). */
        if (made_any) {
            sbx_error ignored;
            delete_sandbox(p, ns, name, sbx_monotonic_ms() + K8S_CLEANUP_MS, &ignored);
        }
        k8s_sandbox_close(&k->base);
        return st;
    }
    *out = &k->base;
    return SBX_OK;
}

/* The labels of a pod say sbx made it for this profile's namespace. */
static bool pod_is_ours(const json_t *pod)
{
    json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    const char *m = json_string_value(json_object_get(labels, LABEL_MANAGED_BY));
    const char *s = json_string_value(json_object_get(labels, LABEL_SANDBOX));
    return m != NULL && strcmp(m, "sbx") == 0 && s != NULL && strcmp(s, "true") == 0;
}

static sbx_status k8s_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                             const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    k8s_provider *p = state;
    (void)policy;
    *out = NULL;
    char ns[K8S_MAX_NAME + 1], pod[K8S_MAX_NAME + 1];
    if (!split_id(p, sandbox_id, ns, pod))
        return sbx_error_set(err, SBX_E_GONE, "kubernetes: '%s' is not NAMESPACE/POD: no such pod",
                             sandbox_id);
    k8s_who who;
    sbx_status st = who_for(p, principal, &who, err);
    if (st != SBX_OK) {
        who_clear(&who);
        return st;
    }
    const k8s_identity *as = who.id.user != NULL ? &who.id : NULL;
    int64_t deadline = step(p->create_timeout_s * 1000);
    json_t *j = NULL;
    st = get_pod(p, ns, pod, as, deadline, &j, err);
    if (st == SBX_OK && p->managed && !pod_is_ours(j))
        st = sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                           "kubernetes: pod %s/%s was not made by sbx (no %s=sbx label); it is "
                           "never reconnected to",
                           ns, pod, LABEL_MANAGED_BY);
    json_decref(j);
    k8s_sandbox *k = NULL;
    if (st == SBX_OK && (k = sandbox_new(p, ns, pod)) == NULL)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes: out of memory");
    if (st == SBX_OK) /* Pending: the same bounded wait as a create */
        st = wait_running(p, ns, pod, as, deadline, k->ip, sizeof(k->ip), err);
    who_clear(&who);
    if (st == SBX_OK && !p->exec_api) {
        int64_t d = step(K8S_AGENT_RECONNECT_MS);
        st = agent_connect(k, d, err);
        if (st != SBX_OK) {
            /* A running pod whose agent does not answer is unavailable, never gone. */
            int64_t req = sbx_provider_deadline_ms();
            sbx_status code =
                req > 0 && sbx_monotonic_ms() >= req ? SBX_E_TIMEOUT : SBX_E_PROVISION;
            sbx_error_prefix(err,
                             "kubernetes: pod %s/%s runs but its agent is unavailable (not "
                             "recreated): ",
                             ns, pod);
            if (err != NULL)
                err->code = code;
            st = code;
        }
    }
    if (st != SBX_OK) {
        k8s_sandbox_close(k != NULL ? &k->base : NULL);
        return st;
    }
    *out = &k->base;
    return SBX_OK;
}

static sbx_status k8s_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    k8s_provider *p = state;
    if (!p->managed)
        return SBX_OK; /* an attached pod is never removed: only the binding goes */
    char ns[K8S_MAX_NAME + 1], pod[K8S_MAX_NAME + 1];
    /* Only names this provider makes, in its own namespace: nothing else is ever deleted. */
    if (!split_id(p, sandbox_id, ns, pod) || strcmp(ns, p->namespace) != 0 ||
        strncmp(pod, K8S_POD_PREFIX, strlen(K8S_POD_PREFIX)) != 0)
        return SBX_OK;
    int64_t deadline = step(K8S_CLEANUP_MS);
    json_t *j = NULL;
    sbx_status st = get_pod(p, ns, pod, NULL, deadline, &j, err);
    if (st == SBX_OK && !pod_is_ours(j))
        st = sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                           "kubernetes: pod %s/%s carries no %s=sbx label; not deleted", ns, pod,
                           LABEL_MANAGED_BY);
    json_decref(j);
    if (st != SBX_OK && st != SBX_E_GONE)
        return st;
    /* gone already: its Secret and NetworkPolicy may still be there */
    return delete_sandbox(p, ns, pod, deadline, err);
}

/* ---- operations through the agent ----------------------------------------------------------- */

/* True only with proof from the API server that the pod is gone (404, deletion, terminal
 * phase); an unreachable API server proves nothing. */
static bool sandbox_gone(k8s_sandbox *k)
{
    json_t *j = NULL;
    sbx_error ignored;
    sbx_status st = get_pod(k->p, k->ns, k->pod, NULL, step(K8S_AGENT_RECONNECT_MS), &j, &ignored);
    bool gone = st == SBX_E_GONE || (st == SBX_OK && pod_finished(j));
    json_decref(j);
    return gone;
}

static sbx_status ensure_conn(k8s_sandbox *k, sbx_error *err)
{
    if (k->agent != NULL)
        return SBX_OK;
    sbx_status st = agent_connect(k, step(K8S_AGENT_RECONNECT_MS), err);
    if (st != SBX_OK && sandbox_gone(k))
        return sbx_error_set(err, SBX_E_GONE, "kubernetes: pod %s/%s is gone", k->ns, k->pod);
    return st;
}

/* A broken connection is dropped (the next operation reconnects); a pod that ended under the
 * operation makes it GONE. */
static sbx_status after_op(k8s_sandbox *k, sbx_status st, sbx_error *err)
{
    if (st == SBX_E_PROVISION || st == SBX_E_GONE || st == SBX_E_INTERNAL) {
        sbx_agent_close(k->agent);
        k->agent = NULL;
        if (sandbox_gone(k))
            return sbx_error_set(err, SBX_E_GONE,
                                 "kubernetes: pod %s/%s ended or was deleted during the operation",
                                 k->ns, k->pod);
    }
    return st;
}

static const sbx_agent_identity default_identity = {0, 0};

/* Code passed on the command line (python3 -c CODE): Linux caps one argument at
 * MAX_ARG_STRLEN (128 KiB); stay below with room for the rest. */
#define K8S_MAX_CODE_ARG (120u * 1024u)
/* argv items of one exec (the query string carries each). */
#define K8S_MAX_EXEC_ARGV 1024

/* The exec API path: env and cwd are applied by a wrapper in the pod (`env` and `cd`), since
 * the API takes only argv. */
static sbx_status exec_api_run(k8s_sandbox *k, const char *const *argv, size_t argc, size_t n_env,
                               Sbx__V1__RunCommand__EnvEntry **env, const char *cwd,
                               const ProtobufCBinaryData *in, const sbx_exec_opts *o,
                               sbx_result *result, sbx_error *err)
{
    const char *full[K8S_MAX_EXEC_ARGV + 8];
    char *owned[K8S_MAX_EXEC_ARGV];
    size_t n = 0, n_owned = 0;
    if (argc + n_env + 8 > K8S_MAX_EXEC_ARGV)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "kubernetes exec: more than %d arguments and variables",
                             K8S_MAX_EXEC_ARGV);
    if (cwd != NULL && cwd[0] != '\0') {
        full[n++] = "/bin/sh";
        full[n++] = "-c";
        full[n++] = "cd -- \"$0\" && exec \"$@\"";
        full[n++] = cwd;
    }
    if (n_env > 0) {
        full[n++] = "env";
        for (size_t i = 0; i < n_env; i++) {
            char *kv = NULL;
            if (asprintf(&kv, "%s=%s", env[i]->key, env[i]->value) < 0)
                kv = NULL;
            if (kv == NULL || strchr(env[i]->key, '=') != NULL || env[i]->key[0] == '\0') {
                free(kv);
                for (size_t j = 0; j < n_owned; j++)
                    free(owned[j]);
                return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                     "kubernetes exec: environment name '%s' is not valid",
                                     env[i]->key);
            }
            owned[n_owned++] = kv;
            full[n++] = kv;
        }
    }
    for (size_t i = 0; i < argc; i++)
        full[n++] = argv[i];
    k8s_who who;
    sbx_status st = who_for(k->p, o != NULL ? o->principal : NULL, &who, err);
    if (st == SBX_OK) {
        k8s_exec_io io = {.stdin_data = in != NULL && in->len > 0 ? in->data : NULL,
                          .stdin_len = in != NULL ? in->len : 0,
                          .result = result,
                          .opts = o};
        st = k8s_exec(&k->p->cluster, who.id.user != NULL ? &who.id : NULL, k->ns, k->pod, full, n,
                      &io, err);
        if (st == SBX_E_GONE || (st == SBX_E_PROVISION && sandbox_gone(k)))
            st = sbx_error_set(err, SBX_E_GONE, "kubernetes: pod %s/%s is gone", k->ns, k->pod);
    }
    who_clear(&who);
    for (size_t j = 0; j < n_owned; j++)
        free(owned[j]);
    return st;
}

static sbx_status k8s_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    if (k->p->exec_api) {
        const char *sh[] = {"/bin/sh", "-c", op->shell};
        bool use_argv = op->n_argv > 0;
        return exec_api_run(k, use_argv ? (const char *const *)op->argv : sh,
                            use_argv ? op->n_argv : 3, op->n_env, op->env, op->cwd, &op->stdin, o,
                            result, err);
    }
    sbx_status st = ensure_conn(k, err);
    if (st != SBX_OK)
        return st;
    st = sbx_agent_run_command(k->agent, op, &default_identity, o, result, NULL, err);
    return after_op(k, st, err);
}

static sbx_status k8s_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                               sbx_result *result, sbx_error *err)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    const char *lang = op->language != NULL && op->language[0] != '\0' ? op->language : "python";
    size_t i = 0;
    while (i < K8S_LANG_COUNT && strcmp(lang, lang_names[i]) != 0)
        i++;
    if (i == K8S_LANG_COUNT || !k->p->languages[i])
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "kubernetes: language '%s' is not in kubernetes.languages", lang);
    if (k->p->exec_api) {
        if (op->code == NULL || strlen(op->code) > K8S_MAX_CODE_ARG)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "kubernetes exec: code longer than %u bytes (it travels as one "
                                 "argument)",
                                 K8S_MAX_CODE_ARG);
        const char *interp = i == K8S_LANG_PYTHON ? "python3" : lang_names[i];
        const char *argv[] = {interp, "-c", op->code};
        return exec_api_run(k, argv, 3, op->n_env, (Sbx__V1__RunCommand__EnvEntry **)op->env,
                            op->cwd, &op->stdin, o, result, err);
    }
    sbx_status st = ensure_conn(k, err);
    if (st != SBX_OK)
        return st;
    st = sbx_agent_run_code(k->agent, op, i == K8S_LANG_PYTHON, &default_identity, o, result, NULL,
                            err);
    return after_op(k, st, err);
}

static sbx_status k8s_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    (void)result;
    sbx_status st = ensure_conn(k, err);
    if (st == SBX_OK)
        st = sbx_agent_write_file(k->agent, op, &default_identity,
                                  o != NULL ? o->deadline_mono_ms : 0, NULL, err);
    return after_op(k, st, err);
}

static sbx_status k8s_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op,
                                const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    sbx_status st = ensure_conn(k, err);
    if (st == SBX_OK)
        st = sbx_agent_read_file(k->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
    return after_op(k, st, err);
}

static sbx_status k8s_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    k8s_sandbox *k = (k8s_sandbox *)sb;
    sbx_status st = ensure_conn(k, err);
    if (st == SBX_OK)
        st = sbx_agent_list_files(k->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
    return after_op(k, st, err);
}

/* ---- sweep ---------------------------------------------------------------------------------- */

/* Unix seconds of an RFC 3339 timestamp ("2026-12-02T00:11:35Z"); -1 when unreadable. */
static int64_t timestamp(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
        return -1;
    return (int64_t)timegm(&tm);
}

/* GET a labelled list of this profile's objects of one kind. */
static sbx_status list_objects(k8s_provider *p, const char *group, const char *resource,
                               int64_t deadline, json_t **items, json_t **doc, sbx_error *err)
{
    char sel[256], path[K8S_MAX_NAME + 512];
    snprintf(sel, sizeof(sel), "%s%%3Dsbx%%2C%s%%3D%s", LABEL_MANAGED_BY, LABEL_PROFILE,
             p->profile_label);
    snprintf(path, sizeof(path), "%s/namespaces/%s/%s?labelSelector=%s", group, p->namespace,
             resource, sel);
    long status = 0;
    *doc = NULL;
    *items = NULL;
    sbx_status st = k8s_call(&p->cluster, "GET", path, NULL, NULL, deadline, &status, doc, err);
    if (st == SBX_OK && status != 200)
        st = k8s_status_error("GET", path, status, *doc, err);
    if (st == SBX_OK && !json_is_array(json_object_get(*doc, "items")))
        st = sbx_error_set(err, SBX_E_PROVISION, "kubernetes: GET %s answered no item list", path);
    if (st != SBX_OK) {
        json_decref(*doc);
        *doc = NULL;
        return st;
    }
    *items = json_object_get(*doc, "items");
    return SBX_OK;
}

/* An owner "<pid> <start time>" on this node that no longer runs. */
static bool owner_gone(const char *owner)
{
    long pid = 0;
    unsigned long long start = 0;
    if (owner == NULL || sscanf(owner, "%ld %llu", &pid, &start) != 2 || pid <= 0)
        return false;
    return sbx_proc_live_start_time(pid) != start;
}

/* This profile's pods (list_objects), and this node's name as its pods' label has it. */
static sbx_status list_pods(k8s_provider *p, int64_t deadline, json_t **pods, json_t **doc,
                            char node[K8S_MAX_LABEL + 1], sbx_error *err)
{
    label_value(p->node, node);
    return list_objects(p, K8S_CORE, "pods", deadline, pods, doc, err);
}

/* A listed pod's name when it is a Kubernetes name of ours (what goes into a path), else NULL:
 * a list answer's names are the API server's bytes. */
static const char *our_pod_name(json_t *meta)
{
    const char *name = json_string_value(json_object_get(meta, "name"));
    return name != NULL && dns_subdomain(name) &&
                   strncmp(name, K8S_POD_PREFIX, strlen(K8S_POD_PREFIX)) == 0
               ? name
               : NULL;
}

/* The live pods of this profile's per_session sessions made on this node, with the principal
 * each was made for (its sbx.dev/principal annotation). */
static sbx_status
k8s_list_held(void *state, void (*held)(void *arg, const char *sandbox_id, const char *subject),
              void *arg, sbx_error *err)
{
    k8s_provider *p = state;
    if (!p->managed || p->per_call)
        return SBX_OK;
    json_t *pods = NULL, *doc = NULL;
    char node[K8S_MAX_LABEL + 1];
    sbx_status st = list_pods(p, step(K8S_CALL_TIMEOUT_MS), &pods, &doc, node, err);
    if (st != SBX_OK)
        return st;
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod)
    {
        json_t *meta = json_object_get(pod, "metadata");
        const char *name = our_pod_name(meta);
        json_t *labels = json_object_get(meta, "labels");
        const char *pn = json_string_value(json_object_get(labels, LABEL_NODE));
        const char *subject = json_string_value(
            json_object_get(json_object_get(meta, "annotations"), ANNOTATION_PRINCIPAL));
        if (name == NULL || pn == NULL || strcmp(pn, node) != 0 || subject == NULL ||
            json_object_get(labels, LABEL_SCOPE) != NULL || pod_finished(pod) ||
            json_object_get(meta, "deletionTimestamp") != NULL)
            continue;
        char id[K8S_MAX_NAME * 2 + 2];
        snprintf(id, sizeof(id), "%s/%s", p->namespace, name);
        held(arg, id, subject);
    }
    json_decref(doc);
    return SBX_OK;
}

static sbx_status k8s_sweep(void *state, sbx_strlist *removed, sbx_error *err)
{
    k8s_provider *p = state;
    if (!p->managed)
        return SBX_OK;
    int64_t deadline = step(K8S_CALL_TIMEOUT_MS);
    json_t *pods = NULL, *doc = NULL;
    char node[K8S_MAX_LABEL + 1];
    sbx_status st = list_pods(p, deadline, &pods, &doc, node, err);
    if (st != SBX_OK)
        return st;
    size_t i;
    json_t *pod;
    json_array_foreach(pods, i, pod)
    {
        json_t *meta = json_object_get(pod, "metadata");
        const char *name = our_pod_name(meta); /* it goes into a DELETE path */
        if (name == NULL)
            continue;
        json_t *labels = json_object_get(meta, "labels");
        const char *pn = json_string_value(json_object_get(labels, LABEL_NODE));
        const char *scope = json_string_value(json_object_get(labels, LABEL_SCOPE));
        const char *owner = json_string_value(
            json_object_get(json_object_get(meta, "annotations"), ANNOTATION_OWNER));
        /* ended pods of any node; per_call pods of this node whose owner process is gone */
        bool dead = pod_finished(pod);
        bool orphan = scope != NULL && strcmp(scope, "per_call") == 0 && pn != NULL &&
                      strcmp(pn, node) == 0 && owner_gone(owner);
        if (!dead && !orphan)
            continue;
        sbx_error e;
        /* one already being deleted is not reported again (its Secret and policy still go) */
        bool deleting = json_object_get(meta, "deletionTimestamp") != NULL;
        if (delete_sandbox(p, p->namespace, name, deadline, &e) == SBX_OK && !deleting) {
            char id[K8S_MAX_NAME * 2 + 2];
            snprintf(id, sizeof(id), "%s/%s", p->namespace, name);
            sbx_strlist_add(removed, id);
        }
    }
    /* Secrets and NetworkPolicies whose pod never came or went without them (a worker killed
     * mid-create), once they are older than any create in progress could be. */
    const char *kinds[][2] = {{K8S_CORE, "secrets"}, {K8S_NETWORKING, "networkpolicies"}};
    int64_t now = (int64_t)time(NULL);
    for (size_t kk = 0; kk < (p->network_policy ? 2u : 1u); kk++) {
        json_t *objs = NULL, *odoc = NULL;
        sbx_error e;
        if (list_objects(p, kinds[kk][0], kinds[kk][1], deadline, &objs, &odoc, &e) != SBX_OK)
            continue;
        size_t n;
        json_t *obj;
        json_array_foreach(objs, n, obj)
        {
            json_t *meta = json_object_get(obj, "metadata");
            const char *name = json_string_value(json_object_get(meta, "name"));
            int64_t made = timestamp(json_string_value(json_object_get(meta, "creationTimestamp")));
            if (name == NULL || !dns_subdomain(name) ||
                strncmp(name, K8S_POD_PREFIX, strlen(K8S_POD_PREFIX)) != 0 || made < 0 ||
                now - made < K8S_ORPHAN_AGE_S)
                continue;
            bool has_pod = false;
            size_t m;
            json_t *pd;
            json_array_foreach(pods, m, pd)
            {
                const char *pn =
                    json_string_value(json_object_get(json_object_get(pd, "metadata"), "name"));
                has_pod |= pn != NULL && strcmp(pn, name) == 0;
            }
            if (!has_pod)
                delete_object(p, kinds[kk][0], kinds[kk][1], p->namespace, name, deadline, &e);
        }
        json_decref(odoc);
    }
    json_decref(doc);
    return SBX_OK;
}

const sbx_provider_ops sbx_provider_kubernetes = {
    .name = "kubernetes",
    .summary = "pods of a Kubernetes cluster (REST API), driven through sbx-agent over the pod "
               "network",
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES,
    .options = k8s_options,
    .open = k8s_open,
    .close = k8s_close,
    .capabilities = k8s_capabilities,
    .check_policy = k8s_check_policy,
    .create = k8s_create,
    .attach = k8s_attach,
    .destroy = k8s_destroy,
    .run_code = k8s_run_code,
    .run_command = k8s_run_command,
    .write_file = k8s_write_file,
    .read_file = k8s_read_file,
    .list_files = k8s_list_files,
    .sandbox_close = k8s_sandbox_close,
    .sweep = k8s_sweep,
    .list_held = k8s_list_held,
};
