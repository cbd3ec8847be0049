/* e2b.c - the e2b provider (DESIGN §8): E2B micro-VM sandboxes through E2B's REST control plane
 * (create, connect, kill, network) with X-API-Key auth. Operations inside the sandbox live in
 * e2b_envd.c. Facts about the API: reference/cloud-apis.md §1 (E2B spec/openapi.yml).
 *
 * Policy lowering (honest capabilities):
 *   - network DENY      -> network.denyOut ["0.0.0.0/0"]                   (§1.1: equivalent to
 *                          allow_internet_access=false, and a PUT can undo it later)
 *   - network ALLOW     -> no network block (E2B's default: internet access)
 *   - network ALLOWLIST -> network.allowOut [entries] + denyOut ["0.0.0.0/0"] (allowed entries
 *                          take precedence over denied ones; domains and *.domain are accepted)
 *   - cpu, memory_mb, disk_mb, pids, fs_read, fs_write: NOT enforceable -- E2B fixes cpu and
 *     memory at template build time and has no per-sandbox limit fields, so check_policy lists
 *     them and strict mode refuses before anything is created.
 *   - the profile's sandbox_timeout_s is the sandbox's idle TTL: sent on create and renewed on
 *     every attach (POST /sandboxes/{id}/connect with {"timeout"}).
 * Missing API key: every API call fails with CONFIG naming the environment variable.
 * This file must not read the config file or print; secrets never reach an error message.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/common/held.h"
#include "providers/e2b/e2b_internal.h"

/* E2B's SDK default idle timeout is 300 s (reference §1.1); one day is E2B's maximum for
 * Pro teams, anything beyond is refused at config load. */
#define E2B_DEFAULT_TIMEOUT_S "300"
#define E2B_MAX_TIMEOUT_S 86400
/* Entries of a network allowlist: E2B accepts lists this long comfortably; more suggests a
 * misconfiguration and would make an unreadable error. */
#define E2B_MAX_ALLOW_ENTRIES 64
/* Metadata values longer than this are cut (E2B stores them as labels). */
#define E2B_MAX_METADATA_VALUE 256
/* list_held: sandboxes per page (E2B's maximum), and pages read before the listing is refused
 * (10,000 sandboxes of one profile made on one node is more than a node runs; a server whose
 * pages never end must not hold the open forever). */
#define E2B_LIST_PAGE 100
#define E2B_LIST_MAX_PAGES 100

static const sbx_option_spec e2b_options[] = {
    {.key = "api_key_env",
     .type = SBX_OPT_ENV_NAME,
     .default_value = "E2B_API_KEY",
     .help = "name of the environment variable holding the E2B API key"},
    {.key = "api_url",
     .type = SBX_OPT_STRING,
     .default_value = "https://api.e2b.app",
     .help = "E2B control plane base URL"},
    {.key = "domain",
     .type = SBX_OPT_STRING,
     .default_value = "e2b.app",
     .help = "sandbox domain (envd is reached at https://sandbox.<domain>)"},
    {.key = "sandbox_url",
     .type = SBX_OPT_STRING,
     .help = "base URL for in-sandbox traffic, routed with E2b-Sandbox-Id/-Port headers "
             "(default https://sandbox.<domain>)"},
    {.key = "template",
     .type = SBX_OPT_STRING,
     .default_value = "code-interpreter-v1",
     .help = "template ID or alias to create sandboxes from"},
    {.key = "code_interpreter",
     .type = SBX_OPT_BOOL,
     .default_value = "true",
     .help = "the template runs E2B's code interpreter: python run_code is stateful"},
    {.key = "sandbox_timeout_s",
     .type = SBX_OPT_INT,
     .default_value = E2B_DEFAULT_TIMEOUT_S,
     .min = 1,
     .max = E2B_MAX_TIMEOUT_S,
     .help = "idle TTL in seconds; renewed on every use"},
    {.key = "user",
     .type = SBX_OPT_STRING,
     .default_value = "user",
     .help = "user that runs commands and owns files inside the sandbox"},
    {.key = "env", .type = SBX_OPT_LIST, .help = "K=V environment variables for every sandbox"},
    {.key = NULL},
};

static char *e2b_strip_slash(const char *s)
{
    char *c = strdup(s);
    if (!c)
        return NULL;
    size_t n = strlen(c);
    while (n > 0 && c[n - 1] == '/')
        c[--n] = 0;
    return c;
}

static void e2b_provider_free(e2b_provider *p)
{
    if (!p)
        return;
    sbx_http_client_free(p->http);
    free(p->profile);
    free(p->api_url);
    free(p->domain);
    free(p->sandbox_url);
    free(p->template_id);
    free(p->user);
    free(p->key_env);
    free(p->node);
    if (p->api_key) {
        volatile char *k = p->api_key;
        for (size_t i = 0; k[i]; i++)
            k[i] = 0;
        free(p->api_key);
    }
    for (size_t i = 0; i < p->n_env; i++)
        free(p->env[i]);
    free(p->env);
    free(p);
}

static const char *e2b_opt(const sbx_provider_ctx *ctx, const char *key, const char *def)
{
    const char *v = ctx->options ? sbx_options_get(ctx->options, key) : NULL;
    return v ? v : def;
}

static sbx_status e2b_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    *state = NULL;
    e2b_provider *p = calloc(1, sizeof *p);
    if (!p)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    p->profile = strdup(ctx->profile ? ctx->profile : "");
    p->api_url = e2b_strip_slash(e2b_opt(ctx, "api_url", "https://api.e2b.app"));
    p->domain = strdup(e2b_opt(ctx, "domain", "e2b.app"));
    const char *su = e2b_opt(ctx, "sandbox_url", NULL);
    p->sandbox_url = su && *su ? e2b_strip_slash(su) : NULL;
    p->template_id = strdup(e2b_opt(ctx, "template", "code-interpreter-v1"));
    p->user = strdup(e2b_opt(ctx, "user", "user"));
    p->key_env = strdup(e2b_opt(ctx, "api_key_env", "E2B_API_KEY"));
    p->node = strdup(ctx->node ? ctx->node : "");
    p->lists_held = ctx->environment == SBX_ENV_MANAGED && ctx->scope == SBX_SCOPE_PER_SESSION;
    p->code_interpreter =
        ctx->options ? sbx_options_get_bool(ctx->options, "code_interpreter") : true;
    p->sandbox_timeout_s =
        ctx->options ? sbx_options_get_int(ctx->options, "sandbox_timeout_s") : 300;
    if (p->sandbox_timeout_s <= 0)
        p->sandbox_timeout_s = 300;
    if (!p->profile || !p->api_url || !p->domain || !p->template_id || !p->user || !p->key_env ||
        !p->node || (su && *su && !p->sandbox_url)) {
        e2b_provider_free(p);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    sbx_status s = sbx_apikey_env_list(ctx->options, "e2b", p->profile, &p->env, &p->n_env, err);
    if (s == SBX_OK)
        s = sbx_apikey_client_new("e2b", "E2B", p->key_env, &p->api_key, &p->http, err);
    if (s != SBX_OK) {
        e2b_provider_free(p);
        return s;
    }
    *state = p;
    return SBX_OK;
}

static void e2b_close(void *state)
{
    e2b_provider_free(state);
}

static void e2b_capabilities(void *state, sbx_capabilities *caps)
{
    e2b_provider *p = state;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_MICRO_VM;
    caps->shell = true;
    sbx_add_string(&caps->n_languages, &caps->languages, "python");
    sbx_add_string(&caps->n_languages, &caps->languages, "bash");
    caps->files = true;
    caps->package_install = true;
    caps->stateful = p ? p->code_interpreter : true;
    caps->attach = true;
    caps->pause = true; /* the API's pause (a memory snapshot); connect resumes */
    caps->provisions = true;
    caps->attaches_external = true;
    caps->principal_user = false;
    caps->policy_network = true;
    caps->policy_network_domains = true;
    caps->policy_filesystem = false;
    caps->policy_resources = false;
    caps->streaming = true;
    caps->expose = true; /* every port has a public URL: https://<port>-<id>.<domain> */
}

/* An allowlist entry E2B's allowOut accepts: an IPv4 address or CIDR, a domain or *.domain.
 * IPv6 is not documented for allowOut, and deny 0.0.0.0/0 would not cover it anyway. */
static bool e2b_allow_entry_ok(const char *e)
{
    size_t n = strlen(e);
    if (n == 0 || n > 253)
        return false;
    if (strchr(e, ':'))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)e[i];
        if (!(isalnum(c) || c == '.' || c == '-' || c == '*' || c == '/' || c == '_'))
            return false;
    }
    if (strchr(e, '*') && !(e[0] == '*' && e[1] == '.' && !strchr(e + 1, '*')))
        return false;
    return true;
}

static sbx_status e2b_check_policy(void *state, const sbx_policy *policy,
                                   sbx_strlist *unenforceable, sbx_error *err)
{
    (void)state;
    bool ok = true;
    if (policy->cpu > 0)
        ok &= sbx_strlist_add(unenforceable, "cpu");
    if (policy->memory_mb > 0)
        ok &= sbx_strlist_add(unenforceable, "memory_mb");
    if (policy->pids > 0)
        ok &= sbx_strlist_add(unenforceable, "pids");
    if (policy->disk_mb > 0)
        ok &= sbx_strlist_add(unenforceable, "disk_mb");
    if (policy->n_fs_read > 0)
        ok &= sbx_strlist_add(unenforceable, "fs_read");
    if (policy->n_fs_write > 0)
        ok &= sbx_strlist_add(unenforceable, "fs_write");
    if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
        if (policy->n_network_allow > E2B_MAX_ALLOW_ENTRIES)
            ok &= sbx_strlist_add(unenforceable, "network_allow (more than 64 entries)");
        for (size_t i = 0; i < policy->n_network_allow; i++) {
            if (!e2b_allow_entry_ok(policy->network_allow[i])) {
                char item[320];
                snprintf(item, sizeof item, "network_allow=%s", policy->network_allow[i]);
                ok &= sbx_strlist_add(unenforceable, item);
            }
        }
    }
    if (!ok)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    return SBX_OK;
}

static sbx_status e2b_need_key(e2b_provider *p, sbx_error *err)
{
    if (p->api_key)
        return SBX_OK;
    return sbx_error_set(err, SBX_E_CONFIG,
                         "e2b: profile '%s': environment variable %s is not set; export it "
                         "with your E2B API key (or set api_key_env to the variable that "
                         "holds it)",
                         p->profile, p->key_env);
}

/* Performs a control-plane call with the API key; body may be NULL; capture names a response
 * header to keep (resp->captured), or is NULL. */
static sbx_status e2b_api_capture(e2b_provider *p, const char *method, const char *path,
                                  json_t *body, bool idempotent, const char *capture,
                                  sbx_http_request *req_out, char *url_buf, size_t url_cap,
                                  sbx_http_response *resp, sbx_error *err)
{
    sbx_status s = e2b_need_key(p, err);
    if (s != SBX_OK) {
        memset(resp, 0, sizeof *resp);
        return s;
    }
    snprintf(url_buf, url_cap, "%s%s", p->api_url, path);
    char key_header[1024];
    snprintf(key_header, sizeof key_header, "X-API-Key: %s", p->api_key);
    const char *headers[] = {key_header, "Content-Type: application/json",
                             "Accept: application/json"};
    char *text = body ? sbx_http_json_dump(body) : NULL;
    if (body && !text) {
        memset(resp, 0, sizeof *resp);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    *req_out = (sbx_http_request){.method = method,
                                  .url = url_buf,
                                  .headers = headers,
                                  .n_headers = 3,
                                  .body = text,
                                  .body_len = text ? strlen(text) : 0,
                                  .idempotent = idempotent,
                                  .capture_header = capture};
    s = sbx_http_do(p->http, req_out, resp, err);
    /* headers and body go out of scope: the caller only uses method and url afterwards. */
    req_out->headers = NULL;
    req_out->n_headers = 0;
    req_out->body = NULL;
    req_out->body_len = 0;
    free(text);
    memset(key_header, 0, sizeof key_header);
    return s;
}

static sbx_status e2b_api(e2b_provider *p, const char *method, const char *path, json_t *body,
                          bool idempotent, sbx_http_request *req_out, char *url_buf, size_t url_cap,
                          sbx_http_response *resp, sbx_error *err)
{
    return e2b_api_capture(p, method, path, body, idempotent, NULL, req_out, url_buf, url_cap, resp,
                           err);
}

static void e2b_sandbox_close(sbx_sandbox *sb);

/* An id put in a host name: the characters E2B's ids use, bounded. */
static bool e2b_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
            return false;
    return true;
}

/* The sandbox of a create or connect answer; resumed: connect woke it from a pause. */
static sbx_status e2b_sandbox_from_json(e2b_provider *p, const sbx_http_request *req,
                                        const sbx_http_response *resp, const char *want_id,
                                        bool resumed, sbx_sandbox **out, sbx_error *err)
{
    json_t *j = NULL;
    sbx_status s = sbx_http_response_json(p->http, req, resp, &j, err);
    if (s != SBX_OK)
        return s;
    const char *id = json_string_value(json_object_get(j, "sandboxID"));
    if (!id || !*id)
        id = want_id;
    /* The id becomes part of host names (envd's, exposed ports') and of a header: one that
     * is not E2B's charset could point requests that carry the sandbox's token elsewhere. */
    if (!id || !e2b_id_ok(id)) {
        json_decref(j);
        return sbx_error_set(err, SBX_E_PROVISION,
                             "e2b: %s %s: the response has no valid sandboxID (1-64 of "
                             "[A-Za-z0-9-])",
                             req->method, req->url);
    }
    const char *token = json_string_value(json_object_get(j, "envdAccessToken"));
    const char *domain = json_string_value(json_object_get(j, "domain"));
    e2b_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        json_decref(j);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    sb->p = p;
    sb->base.resumed = resumed;
    sb->base.id = strdup(id);
    sb->access_token = token && *token ? strdup(token) : NULL;
    sb->domain = strdup(domain && *domain ? domain : p->domain);
    bool want_token = token && *token;
    json_decref(j); /* id, token and domain point into j: not used past here */
    if (!sb->base.id || !sb->domain || (want_token && !sb->access_token)) {
        free(sb->base.id);
        free(sb->access_token);
        free(sb->domain);
        free(sb);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    /* The envd token is a credential for this sandbox: never let it reach a message. */
    if (sb->access_token)
        sbx_http_client_add_secret(p->http, sb->access_token);
    *out = &sb->base;
    return SBX_OK;
}

/* The `network` block for a policy (NULL for unrestricted egress). */
static json_t *e2b_network_json(const sbx_policy *policy)
{
    Sbx__V1__NetworkEgress e = policy->network_egress;
    if (e == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW)
        return NULL;
    json_t *net = json_object();
    json_t *deny = json_array();
    json_array_append_new(deny, json_string("0.0.0.0/0"));
    if (e == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
        json_t *allow = json_array();
        for (size_t i = 0; i < policy->n_network_allow; i++)
            json_array_append_new(allow, json_string(policy->network_allow[i]));
        json_object_set_new(net, "allowOut", allow);
    }
    /* DENY, ALLOWLIST and UNSPECIFIED (fail closed: no profile said "allow") deny the rest. */
    json_object_set_new(net, "denyOut", deny);
    return net;
}

/* A metadata value as create writes it: cut to E2B_MAX_METADATA_VALUE bytes between UTF-8
 * characters. */
static void e2b_meta_cut(char out[E2B_MAX_METADATA_VALUE + 1], const char *v)
{
    size_t n = sbx_utf8_prefix_len(v, E2B_MAX_METADATA_VALUE);
    memcpy(out, v, n);
    out[n] = '\0';
}

static void e2b_meta_set(json_t *meta, const char *k, const char *v)
{
    if (!v || !*v)
        return;
    char cut[E2B_MAX_METADATA_VALUE + 1];
    e2b_meta_cut(cut, v);
    json_object_set_new(meta, k, json_string(cut));
}

static sbx_status e2b_create(void *state, const sbx_session_handle *session,
                             const sbx_principal *principal, const sbx_policy *policy,
                             sbx_sandbox **out, sbx_error *err)
{
    e2b_provider *p = state;
    *out = NULL;
    json_t *body = json_object();
    json_object_set_new(body, "templateID", json_string(p->template_id));
    json_object_set_new(body, "timeout", json_integer(p->sandbox_timeout_s));
    /* secure: envd then requires the per-sandbox envdAccessToken (X-Access-Token). */
    json_object_set_new(body, "secure", json_true());
    json_t *meta = json_object();
    if (session) {
        e2b_meta_set(meta, "sbx.session", session->session_id);
        e2b_meta_set(meta, "sbx.name", session->name);
    }
    e2b_meta_set(meta, "sbx.profile", p->profile);
    e2b_meta_set(meta, "sbx.node", p->node);
    if (principal)
        e2b_meta_set(meta, "sbx.subject", principal->subject);
    json_object_set_new(body, "metadata", meta);
    if (p->n_env > 0) {
        json_t *env = json_object();
        for (size_t i = 0; i < p->n_env; i++) {
            char *eq = strchr(p->env[i], '=');
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(eq - p->env[i]), p->env[i]);
            json_object_set_new(env, name, json_string(eq + 1));
        }
        json_object_set_new(body, "envVars", env);
    }
    json_t *net = e2b_network_json(policy);
    if (net)
        json_object_set_new(body, "network", net);

    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    /* Create is not idempotent: a retried POST after a lost 5xx could leak a sandbox. */
    sbx_status s = e2b_api(p, "POST", "/sandboxes", body, false, &req, url, sizeof url, &resp, err);
    json_decref(body);
    if (s == SBX_OK) {
        if (resp.status == 400)
            s = sbx_http_status_error(p->http, &req, &resp, SBX_E_CONFIG, err);
        else
            s = sbx_http_check(p->http, &req, &resp, err);
        /* 404 on create is not GONE: nothing existed yet. */
        if (s == SBX_E_GONE)
            s = sbx_http_status_error(p->http, &req, &resp, SBX_E_CONFIG, err);
        if (s == SBX_OK)
            s = e2b_sandbox_from_json(p, &req, &resp, NULL, false, out, err);
    }
    if (s == SBX_E_CONFIG && resp.status == 400 && err)
        sbx_error_prefix(err, "profile '%s' (template '%s'): ", p->profile, p->template_id);
    sbx_http_response_clear(&resp);
    return s;
}

/* Re-applies the egress policy to a running sandbox (PUT replaces every field). */
static sbx_status e2b_apply_network(e2b_provider *p, const char *id, const sbx_policy *policy,
                                    sbx_error *err)
{
    json_t *body = e2b_network_json(policy);
    if (!body) {
        /* Unrestricted: empty lists clear any earlier restriction (replace semantics). */
        body = json_object();
        json_object_set_new(body, "allowOut", json_array());
        json_object_set_new(body, "denyOut", json_array());
    }
    char *esc = sbx_http_url_escape(id);
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s/network", esc ? esc : "");
    free(esc);
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    sbx_status s = e2b_api(p, "PUT", path, body, true, &req, url, sizeof url, &resp, err);
    json_decref(body);
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &req, &resp, err);
    sbx_http_response_clear(&resp);
    return s;
}

static sbx_status e2b_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                             const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    (void)principal;
    e2b_provider *p = state;
    *out = NULL;
    char *esc = sbx_http_url_escape(sandbox_id);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s/connect", esc);
    free(esc);
    json_t *body = json_object();
    json_object_set_new(body, "timeout", json_integer(p->sandbox_timeout_s));
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    /* connect resumes or extends the TTL: repeating it is harmless. */
    sbx_status s = e2b_api(p, "POST", path, body, true, &req, url, sizeof url, &resp, err);
    json_decref(body);
    if (s == SBX_OK) {
        s = sbx_http_check(p->http, &req, &resp, err);
        if (s == SBX_E_GONE && err)
            sbx_error_set(err, SBX_E_GONE,
                          "e2b: sandbox %s no longer exists (POST %s returned %ld)", sandbox_id,
                          url, resp.status);
        if (s == SBX_OK) /* 201: it was paused and is resumed */
            s = e2b_sandbox_from_json(p, &req, &resp, sandbox_id, resp.status == 201, out, err);
    }
    sbx_http_response_clear(&resp);
    if (s == SBX_OK && policy) {
        /* The request may narrow egress since the sandbox was created: apply it now. */
        s = e2b_apply_network(p, sandbox_id, policy, err);
        if (s != SBX_OK) {
            e2b_sandbox_close(*out);
            *out = NULL;
        }
    }
    return s;
}

/* POST /sandboxes/{id}/{pause,connect}: pause answers 204 (404 unknown, 409 conflict: already
 * paused, which GET's state confirms); connect resumes, 201 when it was paused. */
static sbx_status e2b_lifecycle(e2b_provider *p, const char *sandbox_id, bool pause, long *status,
                                sbx_error *err)
{
    char *esc = sbx_http_url_escape(sandbox_id);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s/%s", esc, pause ? "pause" : "connect");
    json_t *body = pause ? NULL : json_pack("{s:I}", "timeout", (json_int_t)p->sandbox_timeout_s);
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    sbx_status s = e2b_api(p, "POST", path, body, true, &req, url, sizeof url, &resp, err);
    json_decref(body);
    *status = resp.status;
    if (s == SBX_OK && !(pause && resp.status == 409))
        s = sbx_http_check(p->http, &req, &resp, err);
    sbx_http_response_clear(&resp);
    if (s == SBX_OK && pause && *status == 409) {
        snprintf(path, sizeof path, "/sandboxes/%s", esc);
        s = e2b_api(p, "GET", path, NULL, true, &req, url, sizeof url, &resp, err);
        json_t *j = NULL;
        if (s == SBX_OK)
            s = sbx_http_response_json(p->http, &req, &resp, &j, err);
        const char *state = json_string_value(json_object_get(j, "state"));
        if (s == SBX_OK && (state == NULL || strcmp(state, "paused") != 0))
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "e2b: sandbox %s could not be paused (409) and is %s", sandbox_id,
                              state != NULL ? state : "in an unknown state");
        json_decref(j);
        sbx_http_response_clear(&resp);
    }
    free(esc);
    return s;
}

static sbx_status e2b_pause(void *state, const char *sandbox_id, sbx_error *err)
{
    long status = 0;
    return e2b_lifecycle(state, sandbox_id, true, &status, err);
}

static sbx_status e2b_resume(void *state, const char *sandbox_id, bool *was_paused, sbx_error *err)
{
    long status = 0;
    sbx_status s = e2b_lifecycle(state, sandbox_id, false, &status, err);
    *was_paused = s == SBX_OK && status == 201;
    return s;
}

static sbx_status e2b_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    e2b_provider *p = state;
    char *esc = sbx_http_url_escape(sandbox_id);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s", esc);
    free(esc);
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    sbx_status s = e2b_api(p, "DELETE", path, NULL, true, &req, url, sizeof url, &resp, err);
    if (s == SBX_OK && resp.status != 404) /* 404: already gone, which is what we wanted */
        s = sbx_http_check(p->http, &req, &resp, err);
    sbx_http_response_clear(&resp);
    return s;
}

sbx_status e2b_set_timeout(e2b_provider *p, const char *sandbox_id, int64_t seconds, sbx_error *err)
{
    char *esc = sbx_http_url_escape(sandbox_id);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s/timeout", esc);
    free(esc);
    json_t *body = json_object();
    json_object_set_new(body, "timeout", json_integer(seconds));
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    /* Absolute from now: repeating it is harmless. */
    sbx_status s = e2b_api(p, "POST", path, body, true, &req, url, sizeof url, &resp, err);
    json_decref(body);
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &req, &resp, err);
    sbx_http_response_clear(&resp);
    return s;
}

sbx_status e2b_probe(e2b_provider *p, const char *sandbox_id, sbx_error *err)
{
    char *esc = sbx_http_url_escape(sandbox_id);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    char path[512];
    snprintf(path, sizeof path, "/sandboxes/%s", esc);
    free(esc);
    sbx_http_request req;
    sbx_http_response resp;
    char url[1024];
    sbx_status s = e2b_api(p, "GET", path, NULL, true, &req, url, sizeof url, &resp, err);
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &req, &resp, err);
    if (s == SBX_E_GONE)
        sbx_error_set(err, SBX_E_GONE, "e2b: sandbox %s no longer exists (GET %s returned 404)",
                      sandbox_id, url);
    sbx_http_response_clear(&resp);
    return s;
}

/* ExposePort: E2B serves every port of a sandbox at https://<port>-<sandboxID>.<domain>; the
 * sandbox is checked to exist first (404: GONE). No relay, no token of ours. */
static sbx_status e2b_expose(void *state, const char *sandbox_id, uint32_t port, char **url,
                             char **token, sbx_error *err)
{
    e2b_provider *p = state;
    *url = *token = NULL;
    if (!e2b_id_ok(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE,
                             "e2b: '%.80s' is not an E2B sandbox id (1-64 of A-Z a-z 0-9 -)",
                             sandbox_id);
    sbx_status s = e2b_probe(p, sandbox_id, err);
    if (s != SBX_OK)
        return s;
    if (asprintf(url, "https://%u-%s.%s/", port, sandbox_id, p->domain) < 0) {
        *url = NULL;
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    return SBX_OK;
}

static void e2b_sandbox_close(sbx_sandbox *sb)
{
    if (!sb)
        return;
    e2b_sandbox *e = (e2b_sandbox *)sb;
    free(e->base.id);
    if (e->access_token) {
        sbx_http_client_remove_secret(e->p->http, e->access_token);
        volatile char *t = e->access_token;
        for (size_t i = 0; t[i]; i++)
            t[i] = 0;
        free(e->access_token);
    }
    free(e->domain);
    free(e);
}

/* The `metadata` query of list_held: "sbx.profile=P&sbx.node=N" with each value URL-encoded
 * (and cut as create cuts it), the whole URL-encoded again (reference §1.1). NULL: no memory. */
static char *e2b_held_query(const e2b_provider *p)
{
    char prof[E2B_MAX_METADATA_VALUE + 1], node[E2B_MAX_METADATA_VALUE + 1];
    e2b_meta_cut(prof, p->profile);
    e2b_meta_cut(node, p->node);
    char *ep = sbx_http_url_escape(prof), *en = sbx_http_url_escape(node), *q = NULL;
    if (ep && en) {
        size_t n = strlen(ep) + strlen(en) + 32;
        char *kv = malloc(n);
        if (kv) {
            snprintf(kv, n, "sbx.profile=%s&sbx.node=%s", ep, en);
            q = sbx_http_url_escape(kv);
            free(kv);
        }
    }
    free(ep);
    free(en);
    return q;
}

/* One listed sandbox, kept when it is this profile's, made on this node, with a subject. The
 * list is the server's bytes: the filter is checked again, and an id that is not E2B's charset
 * is skipped (it would become a host name). false: no memory. */
static bool e2b_held_one(const e2b_provider *p, json_t *item, sbx_held_found *found)
{
    json_t *meta = json_object_get(item, "metadata");
    const char *id = json_string_value(json_object_get(item, "sandboxID"));
    const char *prof = json_string_value(json_object_get(meta, "sbx.profile"));
    const char *node = json_string_value(json_object_get(meta, "sbx.node"));
    const char *subject = json_string_value(json_object_get(meta, "sbx.subject"));
    const char *state = json_string_value(json_object_get(item, "state"));
    char want_prof[E2B_MAX_METADATA_VALUE + 1], want_node[E2B_MAX_METADATA_VALUE + 1];
    e2b_meta_cut(want_prof, p->profile);
    e2b_meta_cut(want_node, p->node);
    if (id == NULL || !e2b_id_ok(id) || prof == NULL || strcmp(prof, want_prof) != 0 ||
        node == NULL || strcmp(node, want_node) != 0 || subject == NULL || *subject == '\0' ||
        (state != NULL && strcmp(state, "running") != 0 && strcmp(state, "paused") != 0))
        return true;
    return sbx_held_add(found, id, subject);
}

typedef struct e2b_held_arg {
    e2b_provider *p;
    char *query; /* e2b_held_query */
} e2b_held_arg;

/* One page of GET /v2/sandboxes (sbx_held_page_fn): the next page's token is the answer's
 * X-Next-Token header. */
static sbx_status e2b_held_page(void *arg, const char *token, sbx_held_found *found, char **next,
                                sbx_error *err)
{
    e2b_held_arg *a = arg;
    e2b_provider *p = a->p;
    char *tok = token[0] ? sbx_http_url_escape(token) : NULL;
    size_t plen = strlen(a->query) + (tok ? strlen(tok) : 0) + 96;
    size_t ulen = plen + strlen(p->api_url) + 1;
    char *path = malloc(plen), *url = malloc(ulen); /* long when profile or node is */
    sbx_status s = SBX_OK;
    if (path == NULL || url == NULL || (token[0] && tok == NULL)) {
        free(tok);
        free(path);
        free(url);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    snprintf(path, plen, "/v2/sandboxes?metadata=%s&state=running,paused&limit=%d%s%s", a->query,
             E2B_LIST_PAGE, tok ? "&nextToken=" : "", tok ? tok : "");
    free(tok);
    sbx_http_request req;
    sbx_http_response resp;
    s = e2b_api_capture(p, "GET", path, NULL, true, "X-Next-Token", &req, url, ulen, &resp, err);
    free(path);
    json_t *list = NULL;
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &req, &resp, err);
    if (s == SBX_OK)
        s = sbx_http_parse_json(p->http, "GET /v2/sandboxes", resp.body, resp.body_len, &list, err);
    if (s == SBX_OK && !json_is_array(list))
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "e2b: GET /v2/sandboxes: the answer is not a list of sandboxes");
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        if (s == SBX_OK && !e2b_held_one(p, item, found))
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    }
    const char *cap = resp.captured;
    if (s == SBX_OK && cap != NULL && *cap == '\0')
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "e2b: GET /v2/sandboxes: X-Next-Token is longer than %d bytes",
                          SBX_HTTP_MAX_CAPTURED);
    if (s == SBX_OK && cap != NULL && (*next = strdup(cap)) == NULL)
        s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    json_decref(list);
    sbx_http_response_clear(&resp);
    free(url);
    return s;
}

/* The live (running or paused) sandboxes this profile made on this node for per_session
 * sessions, with the principal each was made for (metadata sbx.subject): GET /v2/sandboxes
 * filtered by sbx.profile and sbx.node, page by page (X-Next-Token), reported once every page
 * is read (providers/common/held.h). */
static sbx_status
e2b_list_held(void *state, void (*held)(void *arg, const char *sandbox_id, const char *subject),
              void *arg, sbx_error *err)
{
    e2b_provider *p = state;
    if (!p->lists_held)
        return SBX_OK;
    e2b_held_arg a = {.p = p, .query = e2b_held_query(p)};
    if (a.query == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "e2b: out of memory");
    const sbx_held_pager pager = {.provider = "e2b",
                                  .profile = p->profile,
                                  .page_size = E2B_LIST_PAGE,
                                  .max_pages = E2B_LIST_MAX_PAGES,
                                  .max_token = SBX_HTTP_MAX_CAPTURED};
    sbx_status s = sbx_held_list_pages(&pager, e2b_held_page, &a, held, arg, err);
    free(a.query);
    return s;
}

const sbx_provider_ops sbx_provider_e2b = {
    .name = "e2b",
    .summary = "E2B cloud micro-VMs (REST control plane + envd Connect-RPC)",
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES | SBX_PROVIDER_ATTACH_RESUMES,
    .options = e2b_options,
    .open = e2b_open,
    .close = e2b_close,
    .capabilities = e2b_capabilities,
    .check_policy = e2b_check_policy,
    .create = e2b_create,
    .attach = e2b_attach,
    .destroy = e2b_destroy,
    .run_code = e2b_run_code,
    .run_command = e2b_run_command,
    .install_packages = e2b_install_packages,
    .write_file = e2b_write_file,
    .read_file = e2b_read_file,
    .list_files = e2b_list_files,
    .sandbox_close = e2b_sandbox_close,
    .pause = e2b_pause,
    .resume = e2b_resume,
    .expose = e2b_expose,
    .list_held = e2b_list_held,
};
