/* daytona.c - the daytona provider (DESIGN §8): Daytona sandboxes (containers) through Daytona's
 * REST API (Authorization: Bearer) and each sandbox's toolbox API at {toolboxProxyUrl}/{id}.
 * Facts about the API: reference/cloud-apis.md §2 (daytonaio/daytona libs/api-client-go and
 * libs/toolbox-api-client-go openapi.yaml).
 *
 * Policy lowering (honest capabilities):
 *   - network DENY (and UNSPECIFIED: fail closed) -> networkBlockAll: true
 *   - network ALLOW -> networkBlockAll: false, no allow list
 *   - network ALLOWLIST -> networkAllowList "a/n,b/n" (IPv4 CIDRs only, at most 10; a bare IPv4
 *     becomes /32). Domains cannot be enforced (domainAllowList is not live everywhere): strict
 *     refuses them, lenient drops them (which only narrows egress).
 *   - resources, in Daytona's units (cpu: whole cores, memory and disk: whole GB):
 *       image mode (option `image`): sent as cpu/memory/disk, rounded UP to whole units; a value
 *       that rounding changes is listed as unenforceable (strict refuses it).
 *       snapshot mode: the snapshot fixes them (options snapshot_cpu/_memory_gb/_disk_gb say
 *       what it gives). A request LARGER than the snapshot is refused with POLICY (never shrunk
 *       to fit); a smaller one is listed as unenforceable (the sandbox would get more).
 *   - pids, fs_read, fs_write: not enforceable, listed.
 * Exec: POST /process/execute blocks until the command ends and merges stdout and stderr
 * (reported on stdout, provider_data daytona.output=merged); `timeout` (seconds) makes the
 * daemon kill the command and answer 408, which is TIMED_OUT.
 * This file must not read the config file or print; the API key never reaches a message.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "providers/common/apikey.h"
#include "providers/common/held.h"
#include "providers/daytona/daytona_internal.h"

/* Daytona's documented limits on allow lists (reference §2.1). */
#define DAYTONA_MAX_ALLOW_ENTRIES 10
/* Waiting for a new sandbox to reach `started`: the SDK's default create timeout is 60 s; image
 * builds take longer, so the option defaults to 180 s. Polling starts at 100 ms and grows x1.5
 * to 1 s like the SDK's wait loop. */
#define DAYTONA_POLL_FIRST_MS 100
#define DAYTONA_POLL_MAX_MS 1000
/* Labels are short strings in Daytona; longer values are cut. */
#define DAYTONA_MAX_LABEL 63
/* A subject longer than one label goes into sbx.subject and sbx.subject.1 .. .4 (the engine
 * bounds subjects to 256 bytes: five labels hold 315), so list_held reads it back whole. */
#define DAYTONA_SUBJECT_LABELS 5
/* list_held: sandboxes per page (Daytona's maximum is 200), and pages read before the listing
 * is refused (a server whose pages never end must not hold the open forever). */
#define DAYTONA_LIST_PAGE 100
#define DAYTONA_LIST_MAX_PAGES 100
/* Longest cursor of a list answer that is followed. */
#define DAYTONA_MAX_CURSOR 512

static const sbx_option_spec daytona_options[] = {
    {.key = "api_key_env",
     .type = SBX_OPT_ENV_NAME,
     .default_value = "DAYTONA_API_KEY",
     .help = "name of the environment variable holding the Daytona API key"},
    {.key = "api_url",
     .type = SBX_OPT_STRING,
     .default_value = "https://app.daytona.io/api",
     .help = "Daytona API base URL"},
    {.key = "target", .type = SBX_OPT_STRING, .help = "region (e.g. us, eu); default: the org's"},
    {.key = "snapshot",
     .type = SBX_OPT_STRING,
     .help = "snapshot to create sandboxes from (default: Daytona's default snapshot)"},
    {.key = "image",
     .type = SBX_OPT_STRING,
     .help = "create from this image instead of a snapshot (resources then follow the policy)"},
    {.key = "snapshot_cpu",
     .type = SBX_OPT_INT,
     .default_value = "1",
     .min = 1,
     .max = 256,
     .help = "cores the snapshot gives"},
    {.key = "snapshot_memory_gb",
     .type = SBX_OPT_INT,
     .default_value = "1",
     .min = 1,
     .max = 4096,
     .help = "memory (GB) the snapshot gives"},
    {.key = "snapshot_disk_gb",
     .type = SBX_OPT_INT,
     .default_value = "3",
     .min = 1,
     .max = 65536,
     .help = "disk (GB) the snapshot gives"},
    {.key = "auto_stop_minutes",
     .type = SBX_OPT_INT,
     .default_value = "15",
     .min = 0,
     .max = 10080,
     .help = "idle minutes before Daytona stops the sandbox (0 = never)"},
    {.key = "create_timeout_s",
     .type = SBX_OPT_INT,
     .default_value = "180",
     .min = 1,
     .max = 3600,
     .help = "how long to wait for a new sandbox to start"},
    {.key = "env", .type = SBX_OPT_LIST, .help = "K=V environment variables for every sandbox"},
    {.key = NULL},
};

/* ---- open / close ------------------------------------------------------------------------ */

static const char *dt_opt(const sbx_provider_ctx *ctx, const char *key)
{
    const char *v = ctx->options ? sbx_options_get(ctx->options, key) : NULL;
    return v && *v ? v : NULL;
}

static char *dt_strip_slash(const char *s)
{
    char *c = strdup(s);
    if (!c)
        return NULL;
    size_t n = strlen(c);
    while (n > 0 && c[n - 1] == '/')
        c[--n] = 0;
    return c;
}

static void dt_wipe_free(char *s)
{
    if (!s)
        return;
    volatile char *p = s;
    for (size_t i = 0; p[i]; i++)
        p[i] = 0;
    free(s);
}

static void dt_provider_free(daytona_provider *p)
{
    if (!p)
        return;
    sbx_http_client_free(p->http);
    free(p->profile);
    free(p->api_url);
    free(p->target);
    free(p->snapshot);
    free(p->image);
    for (size_t i = 0; i < p->n_env; i++)
        free(p->env[i]);
    free(p->env);
    free(p->key_env);
    free(p->node);
    dt_wipe_free(p->api_key);
    dt_wipe_free(p->auth_header);
    free(p);
}

static int64_t dt_int(const sbx_provider_ctx *ctx, const char *key, int64_t def)
{
    return ctx->options ? sbx_options_get_int(ctx->options, key) : def;
}

static sbx_status dt_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    *state = NULL;
    daytona_provider *p = calloc(1, sizeof *p);
    if (!p)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    const char *url = dt_opt(ctx, "api_url");
    const char *key_env = dt_opt(ctx, "api_key_env");
    p->profile = strdup(ctx->profile ? ctx->profile : "");
    p->api_url = dt_strip_slash(url ? url : "https://app.daytona.io/api");
    p->key_env = strdup(key_env ? key_env : "DAYTONA_API_KEY");
    p->node = strdup(ctx->node ? ctx->node : "");
    p->lists_held = ctx->environment == SBX_ENV_MANAGED && ctx->scope == SBX_SCOPE_PER_SESSION;
    const char *t = dt_opt(ctx, "target"), *snap = dt_opt(ctx, "snapshot"),
               *img = dt_opt(ctx, "image");
    p->target = t ? strdup(t) : NULL;
    p->snapshot = snap ? strdup(snap) : NULL;
    p->image = img ? strdup(img) : NULL;
    p->snap_cpu = dt_int(ctx, "snapshot_cpu", 1);
    p->snap_mem_gb = dt_int(ctx, "snapshot_memory_gb", 1);
    p->snap_disk_gb = dt_int(ctx, "snapshot_disk_gb", 3);
    p->auto_stop_min = dt_int(ctx, "auto_stop_minutes", 15);
    p->create_timeout_s = dt_int(ctx, "create_timeout_s", 180);
    if (!p->profile || !p->api_url || !p->key_env || !p->node || (t && !p->target) ||
        (snap && !p->snapshot) || (img && !p->image)) {
        dt_provider_free(p);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    if (p->snapshot && p->image) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "daytona: profile '%s' sets both snapshot and image; choose one (a "
                      "snapshot carries its own resources, an image takes them from the policy)",
                      p->profile);
        dt_provider_free(p);
        return SBX_E_CONFIG;
    }
    sbx_status s =
        sbx_apikey_env_list(ctx->options, "daytona", p->profile, &p->env, &p->n_env, err);
    if (s == SBX_OK)
        s = sbx_apikey_client_new("daytona", "Daytona", p->key_env, &p->api_key, &p->http, err);
    if (s != SBX_OK) {
        dt_provider_free(p);
        return s;
    }
    if (p->api_key && asprintf(&p->auth_header, "Authorization: Bearer %s", p->api_key) < 0)
        p->auth_header = NULL;
    *state = p;
    return SBX_OK;
}

static void dt_close(void *state)
{
    dt_provider_free(state);
}

static void dt_capabilities(void *state, sbx_capabilities *caps)
{
    (void)state;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_CONTAINER;
    caps->shell = true;
    sbx_add_string(&caps->n_languages, &caps->languages, "python");
    sbx_add_string(&caps->n_languages, &caps->languages, "bash");
    caps->files = true;
    caps->package_install = true;
    caps->stateful = false;
    caps->attach = true;
    caps->provisions = true;
    caps->attaches_external = true;
    caps->principal_user = false;
    caps->policy_network = true;
    caps->policy_network_domains = false;
    caps->policy_filesystem = false;
    caps->policy_resources = true; /* cpu, memory_mb, disk_mb (not pids: listed) */
    caps->streaming = false;       /* /process/execute answers once, at the end */
    caps->expose = true;           /* preview URLs (GET /sandbox/{id}/ports/{port}/preview-url) */
}

/* ---- policy ------------------------------------------------------------------------------ */

/* "A.B.C.D" or "A.B.C.D/N" (IPv4) -> canonical CIDR in out; false otherwise. */
static bool dt_cidr(const char *e, char *out, size_t cap)
{
    unsigned a, b, c, d, n = 32;
    char tail;
    int got = sscanf(e, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &n, &tail);
    if (got == 4) {
        if (sscanf(e, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &tail) != 4)
            return false;
    } else if (got != 5) {
        return false;
    }
    if (a > 255 || b > 255 || c > 255 || d > 255 || n > 32)
        return false;
    for (const char *p = e; *p; p++)
        if (!(isdigit((unsigned char)*p) || *p == '.' || *p == '/'))
            return false;
    snprintf(out, cap, "%u.%u.%u.%u/%u", a, b, c, d, n);
    return true;
}

/* Smallest whole number of cores >= cpu (no libm needed). */
static int64_t dt_ceil_cores(double cpu)
{
    int64_t i = (int64_t)cpu;
    return (double)i < cpu ? i + 1 : i;
}

static int64_t dt_ceil_gb(uint64_t mb)
{
    return (int64_t)((mb + 1023) / 1024);
}

static sbx_status dt_check_policy(void *state, const sbx_policy *policy, sbx_strlist *un,
                                  sbx_error *err)
{
    daytona_provider *p = state;
    bool ok = true;
    char item[320];
    if (policy->pids > 0)
        ok &= sbx_strlist_add(un, "pids");
    if (policy->n_fs_read > 0)
        ok &= sbx_strlist_add(un, "fs_read");
    if (policy->n_fs_write > 0)
        ok &= sbx_strlist_add(un, "fs_write");
    if (p->image) {
        if (policy->cpu > 0 && policy->cpu != (double)dt_ceil_cores(policy->cpu)) {
            snprintf(item, sizeof item, "cpu (Daytona allocates whole cores: %g would be %lld)",
                     policy->cpu, (long long)dt_ceil_cores(policy->cpu));
            ok &= sbx_strlist_add(un, item);
        }
        if (policy->memory_mb % 1024 != 0) {
            snprintf(item, sizeof item,
                     "memory_mb (Daytona allocates whole GB: %llu MiB would be %lld GB)",
                     (unsigned long long)policy->memory_mb,
                     (long long)dt_ceil_gb(policy->memory_mb));
            ok &= sbx_strlist_add(un, item);
        }
        if (policy->disk_mb % 1024 != 0) {
            snprintf(item, sizeof item,
                     "disk_mb (Daytona allocates whole GB: %llu MiB would be %lld GB)",
                     (unsigned long long)policy->disk_mb, (long long)dt_ceil_gb(policy->disk_mb));
            ok &= sbx_strlist_add(un, item);
        }
    } else {
        /* Snapshot mode: a SMALLER limit than the snapshot gives is not enforced (larger ones
         * are refused at create with POLICY, see dt_snapshot_fits). */
        if (policy->cpu > 0 && policy->cpu < (double)p->snap_cpu) {
            snprintf(item, sizeof item, "cpu (the snapshot gives %lld cores)",
                     (long long)p->snap_cpu);
            ok &= sbx_strlist_add(un, item);
        }
        if (policy->memory_mb > 0 && policy->memory_mb < (uint64_t)p->snap_mem_gb * 1024) {
            snprintf(item, sizeof item, "memory_mb (the snapshot gives %lld GB)",
                     (long long)p->snap_mem_gb);
            ok &= sbx_strlist_add(un, item);
        }
        if (policy->disk_mb > 0 && policy->disk_mb < (uint64_t)p->snap_disk_gb * 1024) {
            snprintf(item, sizeof item, "disk_mb (the snapshot gives %lld GB)",
                     (long long)p->snap_disk_gb);
            ok &= sbx_strlist_add(un, item);
        }
    }
    if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
        size_t cidrs = 0;
        for (size_t i = 0; i < policy->n_network_allow; i++) {
            char c[64];
            if (dt_cidr(policy->network_allow[i], c, sizeof c)) {
                cidrs++;
                continue;
            }
            snprintf(item, sizeof item, "network_allow=%s (Daytona allowlists IPv4 CIDRs only)",
                     policy->network_allow[i]);
            ok &= sbx_strlist_add(un, item);
        }
        if (cidrs > DAYTONA_MAX_ALLOW_ENTRIES)
            ok &= sbx_strlist_add(un, "network_allow (Daytona takes at most 10 CIDRs)");
    }
    if (!ok)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    return SBX_OK;
}

/* Snapshot mode: refuse (POLICY) a request larger than the snapshot allows; never shrink. */
static sbx_status dt_snapshot_fits(daytona_provider *p, const sbx_policy *policy, sbx_error *err)
{
    if (p->image)
        return SBX_OK;
    const char *snap = p->snapshot ? p->snapshot : "(Daytona's default snapshot)";
    if (policy->cpu > (double)p->snap_cpu)
        return sbx_error_set(err, SBX_E_POLICY,
                             "daytona: profile '%s': the policy asks for %g cores but snapshot "
                             "%s gives %lld; use a bigger snapshot (and set snapshot_cpu) or "
                             "lower policy.cpu -- the request is refused, never shrunk",
                             p->profile, policy->cpu, snap, (long long)p->snap_cpu);
    if (policy->memory_mb > (uint64_t)p->snap_mem_gb * 1024)
        return sbx_error_set(err, SBX_E_POLICY,
                             "daytona: profile '%s': the policy asks for %llu MiB of memory but "
                             "snapshot %s gives %lld GB; use a bigger snapshot (and set "
                             "snapshot_memory_gb) or lower policy.memory_mb -- the request is "
                             "refused, never shrunk",
                             p->profile, (unsigned long long)policy->memory_mb, snap,
                             (long long)p->snap_mem_gb);
    if (policy->disk_mb > (uint64_t)p->snap_disk_gb * 1024)
        return sbx_error_set(err, SBX_E_POLICY,
                             "daytona: profile '%s': the policy asks for %llu MiB of disk but "
                             "snapshot %s gives %lld GB; use a bigger snapshot (and set "
                             "snapshot_disk_gb) or lower policy.disk_mb -- the request is "
                             "refused, never shrunk",
                             p->profile, (unsigned long long)policy->disk_mb, snap,
                             (long long)p->snap_disk_gb);
    return SBX_OK;
}

/* networkBlockAll and networkAllowList ("" when none) for a policy. */
static void dt_network(const sbx_policy *policy, bool *block_all, char *allow, size_t cap)
{
    allow[0] = 0;
    Sbx__V1__NetworkEgress e = policy->network_egress;
    if (e == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW) {
        *block_all = false;
        return;
    }
    if (e != SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
        *block_all = true; /* DENY, or UNSPECIFIED: fail closed */
        return;
    }
    size_t n = 0, used = 0;
    for (size_t i = 0; i < policy->n_network_allow && n < DAYTONA_MAX_ALLOW_ENTRIES; i++) {
        char c[64];
        if (!dt_cidr(policy->network_allow[i], c, sizeof c))
            continue; /* domains: dropped */
        int w = snprintf(allow + used, cap - used, "%s%s", n ? "," : "", c);
        if (w < 0 || (size_t)w >= cap - used)
            break;
        used += (size_t)w;
        n++;
    }
    /* An allowlist with no usable entry means no egress at all. */
    *block_all = n == 0;
}

/* ---- API calls ----------------------------------------------------------------------------- */

static sbx_status dt_need_key(daytona_provider *p, sbx_error *err)
{
    if (p->api_key && p->auth_header)
        return SBX_OK;
    return sbx_error_set(err, SBX_E_CONFIG,
                         "daytona: profile '%s': environment variable %s is not set; export it "
                         "with your Daytona API key (or set api_key_env to the variable that "
                         "holds it)",
                         p->profile, p->key_env);
}

/* Performs METHOD url with the Bearer key; extra headers optional. */
sbx_status dt_do(daytona_provider *p, dt_call *c, const char *method, json_t *body, const void *raw,
                 size_t raw_len, const char *content_type, bool idempotent, int64_t deadline,
                 int64_t timeout_ms, const volatile int *cancel, sbx_error *err)
{
    memset(&c->resp, 0, sizeof c->resp);
    sbx_status s = dt_need_key(p, err);
    if (s != SBX_OK)
        return s;
    char ct[256];
    snprintf(ct, sizeof ct, "Content-Type: %s", content_type ? content_type : "application/json");
    /* The toolbox selects JSON command logs with this header (reference §2.2). */
    const char *headers[] = {p->auth_header, ct, "Accept: application/json",
                             "X-Daytona-Source: sbx", "X-Daytona-SDK-Version: 0.190.0"};
    if (body) {
        c->body = sbx_http_json_dump(body);
        if (!c->body)
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
        raw = c->body;
        raw_len = strlen(c->body);
    }
    c->req = (sbx_http_request){.method = method,
                                .url = c->url,
                                .headers = headers,
                                .n_headers = 5,
                                .body = raw,
                                .body_len = raw_len,
                                .idempotent = idempotent,
                                .deadline_mono_ms = deadline,
                                .timeout_ms = timeout_ms,
                                .cancel = cancel};
    s = sbx_http_do(p->http, &c->req, &c->resp, err);
    c->req.headers = NULL;
    c->req.n_headers = 0;
    c->req.body = NULL;
    return s;
}

void dt_call_clear(dt_call *c)
{
    sbx_http_response_clear(&c->resp);
    free(c->body);
    c->body = NULL;
}

/* c->url = api_url + prefix + escaped id (when given) + suffix. */
static sbx_status dt_url(daytona_provider *p, dt_call *c, const char *prefix, const char *id,
                         const char *suffix, sbx_error *err)
{
    char *esc = id ? sbx_http_url_escape(id) : NULL;
    if (id && !esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    snprintf(c->url, sizeof c->url, "%s%s%s%s", p->api_url, prefix, esc ? esc : "", suffix);
    free(esc);
    return SBX_OK;
}

static void dt_sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void dt_sandbox_close(sbx_sandbox *sb)
{
    if (!sb)
        return;
    daytona_sandbox *d = (daytona_sandbox *)sb;
    free(d->base.id);
    free(d->toolbox);
    free(d);
}

static sbx_status dt_sandbox_new(daytona_provider *p, const char *id, json_t *j, sbx_sandbox **out,
                                 sbx_error *err)
{
    const char *tb = json_string_value(json_object_get(j, "toolboxProxyUrl"));
    if (!tb || strncmp(tb, "http", 4) != 0)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "daytona: sandbox %s: the API response has no toolboxProxyUrl; is "
                             "api_url a current Daytona API?",
                             id);
    /* The toolbox receives our API key: never let a response downgrade it to plain HTTP. */
    if (strncmp(p->api_url, "https://", 8) == 0 && strncmp(tb, "https://", 8) != 0)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "daytona: sandbox %s: toolboxProxyUrl is not https while api_url "
                             "is; refusing to send the API key over plain HTTP",
                             id);
    daytona_sandbox *d = calloc(1, sizeof *d);
    char *base = d ? dt_strip_slash(tb) : NULL;
    char *esc = sbx_http_url_escape(id);
    if (!d || !base || !esc || asprintf(&d->toolbox, "%s/%s", base, esc) < 0) {
        free(base);
        free(esc);
        free(d);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    free(base);
    free(esc);
    d->p = p;
    d->base.id = strdup(id);
    if (!d->base.id) {
        dt_sandbox_close(&d->base);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    *out = &d->base;
    return SBX_OK;
}

/* GET /sandbox/{id}: the JSON (new reference) or GONE on 404. */
static sbx_status dt_get(daytona_provider *p, const char *id, json_t **out, sbx_error *err)
{
    *out = NULL;
    dt_call c = {0};
    sbx_status s = dt_url(p, &c, "/sandbox/", id, "", err);
    if (s == SBX_OK)
        s = dt_do(p, &c, "GET", NULL, NULL, 0, NULL, true, 0, 0, NULL, err);
    if (s == SBX_OK) {
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
        if (s == SBX_E_GONE)
            sbx_error_set(err, SBX_E_GONE,
                          "daytona: sandbox %s no longer exists (GET %s "
                          "returned 404)",
                          id, c.url);
    }
    if (s == SBX_OK)
        s = sbx_http_response_json(p->http, &c.req, &c.resp, out, err);
    dt_call_clear(&c);
    return s;
}

/* An id put in a URL path: the characters Daytona's ids use, bounded. */
static bool dt_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
              (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
            return false;
    return true;
}

/* ExposePort: GET /sandbox/{id}/ports/{port}/preview-url answers the preview URL and the
 * token a non-public sandbox's preview needs (header x-daytona-preview-token); 404: GONE. */
static sbx_status dt_expose(void *state, const char *sandbox_id, uint32_t port, char **url,
                            char **token, sbx_error *err)
{
    daytona_provider *p = state;
    *url = *token = NULL;
    if (!dt_id_ok(sandbox_id))
        return sbx_error_set(
            err, SBX_E_GONE,
            "daytona: '%.80s' is not a Daytona sandbox id (1-128 of A-Z a-z 0-9 -)", sandbox_id);
    char suffix[64];
    snprintf(suffix, sizeof suffix, "/ports/%u/preview-url", port);
    dt_call c = {0};
    json_t *j = NULL;
    sbx_status s = dt_url(p, &c, "/sandbox/", sandbox_id, suffix, err);
    if (s == SBX_OK)
        s = dt_do(p, &c, "GET", NULL, NULL, 0, NULL, true, 0, 0, NULL, err);
    if (s == SBX_OK) {
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
        if (s == SBX_E_GONE)
            sbx_error_set(err, SBX_E_GONE,
                          "daytona: sandbox %s no longer exists (GET %s returned 404)", sandbox_id,
                          c.url);
    }
    if (s == SBX_OK)
        s = sbx_http_response_json(p->http, &c.req, &c.resp, &j, err);
    const char *u = json_string_value(json_object_get(j, "url"));
    const char *t = json_string_value(json_object_get(j, "token"));
    if (s == SBX_OK && (u == NULL || strncmp(u, "https://", 8) != 0 || strlen(u) > 1024)) {
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "daytona: the preview-url answer for port %u of %s has no https url",
                          port, sandbox_id);
    } else if (s == SBX_OK) {
        *url = strdup(u);
        *token = t != NULL && t[0] && strlen(t) <= 1024 ? strdup(t) : NULL;
        if (*url == NULL)
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    json_decref(j);
    dt_call_clear(&c);
    return s;
}

static const char *dt_state(json_t *j)
{
    const char *s = json_string_value(json_object_get(j, "state"));
    return s ? s : "unknown";
}

/* Polls until `started`; GONE when destroyed, PROVISION on error/build_failed or timeout. */
static sbx_status dt_wait_started(daytona_provider *p, const char *id, json_t **last,
                                  sbx_error *err)
{
    int64_t until = sbx_monotonic_ms() + p->create_timeout_s * 1000;
    int64_t wait = DAYTONA_POLL_FIRST_MS;
    for (;;) {
        json_t *j = NULL;
        sbx_status s = dt_get(p, id, &j, err);
        if (s != SBX_OK)
            return s;
        char st[64]; /* copied: j is released below */
        snprintf(st, sizeof st, "%s", dt_state(j));
        if (strcmp(st, "started") == 0) {
            *last = j;
            return SBX_OK;
        }
        if (strcmp(st, "error") == 0 || strcmp(st, "build_failed") == 0) {
            const char *why = json_string_value(json_object_get(j, "errorReason"));
            char reason[SBX_HTTP_ERROR_BODY_MAX + 1];
            snprintf(reason, sizeof reason, "%s", why ? why : "no reason given");
            sbx_http_redact(p->http, reason);
            json_decref(j);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "daytona: sandbox %s failed to start "
                                 "(state %s): %s",
                                 id, st, reason);
        }
        if (strcmp(st, "destroyed") == 0 || strcmp(st, "destroying") == 0) {
            json_decref(j);
            return sbx_error_set(err, SBX_E_GONE, "daytona: sandbox %s is %s", id, st);
        }
        json_decref(j);
        if (sbx_monotonic_ms() + wait > until)
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "daytona: sandbox %s did not reach state started within %lld s "
                                 "(last state %s); raise create_timeout_s",
                                 id, (long long)p->create_timeout_s, st);
        dt_sleep_ms(wait);
        wait = wait * 3 / 2;
        if (wait > DAYTONA_POLL_MAX_MS)
            wait = DAYTONA_POLL_MAX_MS;
    }
}

static sbx_status dt_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    daytona_provider *p = state;
    dt_call c = {0};
    sbx_status s = dt_url(p, &c, "/sandbox/", sandbox_id, "", err);
    if (s == SBX_OK)
        s = dt_do(p, &c, "DELETE", NULL, NULL, 0, NULL, true, 0, 0, NULL, err);
    if (s == SBX_OK && c.resp.status != 404) /* 404: already gone */
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
    dt_call_clear(&c);
    return s;
}

/* How much of v one label holds: at most DAYTONA_MAX_LABEL bytes, ending where a UTF-8
 * character does (a label cut inside one would not be a JSON string). */
static size_t dt_label_len(const char *v)
{
    return sbx_utf8_prefix_len(v, DAYTONA_MAX_LABEL);
}

/* A label as create writes it (cut by dt_label_len). */
static void dt_label_cut(char out[DAYTONA_MAX_LABEL + 1], const char *v)
{
    size_t n = dt_label_len(v);
    memcpy(out, v, n);
    out[n] = '\0';
}

static void dt_label(json_t *labels, const char *k, const char *v)
{
    if (!v || !*v)
        return;
    char cut[DAYTONA_MAX_LABEL + 1];
    dt_label_cut(cut, v);
    json_object_set_new(labels, k, json_string(cut));
}

/* sbx.subject, and the rest of a longer subject in sbx.subject.1, .2, ... (list_held joins
 * them, in order, up to the first one missing). */
static void dt_subject_labels(json_t *labels, const char *subject)
{
    for (size_t k = 0; subject != NULL && *subject && k < DAYTONA_SUBJECT_LABELS; k++) {
        char key[32];
        snprintf(key, sizeof key, k == 0 ? "sbx.subject" : "sbx.subject.%zu", k);
        dt_label(labels, key, subject);
        subject += dt_label_len(subject);
    }
}

static sbx_status dt_create(void *state, const sbx_session_handle *session,
                            const sbx_principal *principal, const sbx_policy *policy,
                            sbx_sandbox **out, sbx_error *err)
{
    daytona_provider *p = state;
    *out = NULL;
    sbx_status s = dt_snapshot_fits(p, policy, err);
    if (s != SBX_OK)
        return s;
    s = dt_need_key(p, err);
    if (s != SBX_OK)
        return s;
    json_t *b = json_object();
    json_t *labels = json_object();
    if (session)
        dt_label(labels, "sbx.session", session->session_id);
    dt_label(labels, "sbx.profile", p->profile);
    dt_label(labels, "sbx.node", p->node);
    if (principal)
        dt_subject_labels(labels, principal->subject);
    json_object_set_new(b, "labels", labels);
    if (p->snapshot)
        json_object_set_new(b, "snapshot", json_string(p->snapshot));
    if (p->image) {
        char *df = NULL;
        if (asprintf(&df, "FROM %s\n", p->image) < 0)
            df = NULL;
        json_object_set_new(b, "buildInfo", json_pack("{s:s}", "dockerfileContent", df ? df : ""));
        free(df);
        /* Daytona's units: whole cores, whole GB (rounded up; check_policy listed any change). */
        if (policy->cpu > 0)
            json_object_set_new(b, "cpu", json_integer(dt_ceil_cores(policy->cpu)));
        if (policy->memory_mb > 0)
            json_object_set_new(b, "memory", json_integer(dt_ceil_gb(policy->memory_mb)));
        if (policy->disk_mb > 0)
            json_object_set_new(b, "disk", json_integer(dt_ceil_gb(policy->disk_mb)));
    }
    if (p->target)
        json_object_set_new(b, "target", json_string(p->target));
    bool block_all;
    char allow[1024];
    dt_network(policy, &block_all, allow, sizeof allow);
    json_object_set_new(b, "networkBlockAll", json_boolean(block_all));
    if (!block_all && allow[0])
        json_object_set_new(b, "networkAllowList", json_string(allow));
    json_object_set_new(b, "autoStopInterval", json_integer(p->auto_stop_min));
    if (p->n_env > 0) {
        json_t *env = json_object();
        for (size_t i = 0; i < p->n_env; i++) {
            char *eq = strchr(p->env[i], '=');
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(eq - p->env[i]), p->env[i]);
            json_object_set_new(env, name, json_string(eq + 1));
        }
        json_object_set_new(b, "env", env);
    }
    dt_call c = {0};
    s = dt_url(p, &c, "/sandbox", NULL, "", err);
    /* Create is not idempotent: a retried POST after a lost 5xx could leak a sandbox. */
    if (s == SBX_OK)
        s = dt_do(p, &c, "POST", b, NULL, 0, NULL, false, 0, 0, NULL, err);
    json_decref(b);
    json_t *j = NULL;
    if (s == SBX_OK) {
        if (c.resp.status == 400 || c.resp.status == 404)
            s = sbx_http_status_error(p->http, &c.req, &c.resp, SBX_E_CONFIG, err);
        else if (c.resp.status == 403)
            /* Tier 1/2 orgs may not override network policy (reference §2.1). */
            s = sbx_http_status_error(p->http, &c.req, &c.resp, SBX_E_POLICY, err);
        else
            s = sbx_http_check(p->http, &c.req, &c.resp, err);
    }
    if (s == SBX_OK)
        s = sbx_http_response_json(p->http, &c.req, &c.resp, &j, err);
    dt_call_clear(&c);
    if (s != SBX_OK)
        return s;
    const char *idv = json_string_value(json_object_get(j, "id"));
    char id[256];
    if (!idv || !*idv || strlen(idv) >= sizeof id) {
        json_decref(j);
        return sbx_error_set(err, SBX_E_PROVISION,
                             "daytona: POST %s/sandbox: the response has no valid id", p->api_url);
    }
    snprintf(id, sizeof id, "%s", idv);
    if (strcmp(dt_state(j), "started") != 0) {
        json_decref(j);
        j = NULL;
        s = dt_wait_started(p, id, &j, err);
    }
    if (s == SBX_OK)
        s = dt_sandbox_new(p, id, j, out, err);
    json_decref(j);
    if (s != SBX_OK) {
        /* Never leave a half-created sandbox running until its TTL. */
        sbx_error ignored;
        dt_destroy(p, id, &ignored);
    }
    return s;
}

static sbx_status dt_apply_network(daytona_provider *p, const char *id, json_t *current,
                                   const sbx_policy *policy, sbx_error *err)
{
    bool block_all;
    char allow[1024];
    dt_network(policy, &block_all, allow, sizeof allow);
    const char *cur_allow = json_string_value(json_object_get(current, "networkAllowList"));
    bool cur_block = json_is_true(json_object_get(current, "networkBlockAll"));
    if (cur_block == block_all && strcmp(cur_allow ? cur_allow : "", allow) == 0)
        return SBX_OK; /* already as the policy wants */
    json_t *b = json_pack("{s:b,s:s}", "networkBlockAll", block_all, "networkAllowList", allow);
    dt_call c = {0};
    sbx_status s = dt_url(p, &c, "/sandbox/", id, "/network-settings", err);
    if (s == SBX_OK)
        s = dt_do(p, &c, "POST", b, NULL, 0, NULL, true, 0, 0, NULL, err);
    json_decref(b);
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
    dt_call_clear(&c);
    return s;
}

static sbx_status dt_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                            const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    (void)principal;
    daytona_provider *p = state;
    *out = NULL;
    json_t *j = NULL;
    sbx_status s = dt_get(p, sandbox_id, &j, err);
    if (s != SBX_OK)
        return s;
    char st[64]; /* copied: j may be released below */
    snprintf(st, sizeof st, "%s", dt_state(j));
    if (strcmp(st, "destroyed") == 0 || strcmp(st, "destroying") == 0) {
        json_decref(j);
        return sbx_error_set(err, SBX_E_GONE, "daytona: sandbox %s is %s", sandbox_id, st);
    }
    if (strcmp(st, "stopped") == 0 || strcmp(st, "archived") == 0) {
        /* Auto-stop stopped it while idle: start it again (the workspace is kept). */
        dt_call c = {0};
        s = dt_url(p, &c, "/sandbox/", sandbox_id, "/start", err);
        if (s == SBX_OK)
            s = dt_do(p, &c, "POST", NULL, NULL, 0, NULL, true, 0, 0, NULL, err);
        if (s == SBX_OK)
            s = sbx_http_check(p->http, &c.req, &c.resp, err);
        dt_call_clear(&c);
    }
    if (s == SBX_OK && strcmp(dt_state(j), "started") != 0) {
        json_decref(j);
        j = NULL;
        s = dt_wait_started(p, sandbox_id, &j, err);
    }
    if (s == SBX_OK && policy)
        s = dt_apply_network(p, sandbox_id, j, policy, err);
    if (s == SBX_OK)
        s = dt_sandbox_new(p, sandbox_id, j, out, err);
    json_decref(j);
    return s;
}

/* After a toolbox failure: GONE when the sandbox no longer exists, else the error stands. */
sbx_status dt_maybe_gone(daytona_sandbox *d, sbx_status s, sbx_error *err)
{
    json_t *j = NULL;
    sbx_error probe;
    sbx_status g = dt_get(d->p, d->base.id, &j, &probe);
    if (g == SBX_E_GONE) {
        if (err)
            *err = probe;
        return SBX_E_GONE;
    }
    if (g == SBX_OK) {
        const char *st = dt_state(j);
        if (strcmp(st, "destroyed") == 0 || strcmp(st, "destroying") == 0) {
            sbx_error_set(err, SBX_E_GONE, "daytona: sandbox %s is %s", d->base.id, st);
            s = SBX_E_GONE;
        }
    }
    json_decref(j);
    return s;
}

/* One listed sandbox, kept when it is this profile's, made on this node, not being destroyed,
 * with a subject (joined from its labels). The list is the server's bytes:
 * the filter is checked again, and an id that is not Daytona's charset is skipped (it goes into
 * URL paths). false: no memory. */
static bool dt_held_one(const daytona_provider *p, json_t *item, sbx_held_found *found)
{
    json_t *labels = json_object_get(item, "labels");
    const char *id = json_string_value(json_object_get(item, "id"));
    const char *prof = json_string_value(json_object_get(labels, "sbx.profile"));
    const char *node = json_string_value(json_object_get(labels, "sbx.node"));
    const char *state = json_string_value(json_object_get(item, "state"));
    char want_prof[DAYTONA_MAX_LABEL + 1], want_node[DAYTONA_MAX_LABEL + 1];
    dt_label_cut(want_prof, p->profile);
    dt_label_cut(want_node, p->node);
    if (id == NULL || !dt_id_ok(id) || prof == NULL || strcmp(prof, want_prof) != 0 ||
        node == NULL || strcmp(node, want_node) != 0 ||
        (state != NULL && (strcmp(state, "destroyed") == 0 || strcmp(state, "destroying") == 0)))
        return true;
    char subject[DAYTONA_SUBJECT_LABELS * DAYTONA_MAX_LABEL + 1];
    size_t len = 0;
    for (size_t k = 0; k < DAYTONA_SUBJECT_LABELS; k++) {
        char key[32];
        snprintf(key, sizeof key, k == 0 ? "sbx.subject" : "sbx.subject.%zu", k);
        const char *part = json_string_value(json_object_get(labels, key));
        size_t n = part != NULL ? strlen(part) : 0;
        if (n == 0 || n > DAYTONA_MAX_LABEL)
            break;
        memcpy(subject + len, part, n);
        len += n;
    }
    subject[len] = '\0';
    if (len == 0)
        return true;
    return sbx_held_add(found, id, subject);
}

/* GET /sandbox?labels=...&limit=...[&cursor=...] into c (the labels filter: this profile's and
 * this node's sandboxes, reference §2.1). */
static sbx_status dt_list_url(daytona_provider *p, dt_call *c, const char *cursor, sbx_error *err)
{
    char prof[DAYTONA_MAX_LABEL + 1], node[DAYTONA_MAX_LABEL + 1];
    dt_label_cut(prof, p->profile);
    dt_label_cut(node, p->node);
    json_t *filter = json_pack("{s:s,s:s}", "sbx.profile", prof, "sbx.node", node);
    char *text = filter ? sbx_http_json_dump(filter) : NULL;
    char *lq = text ? sbx_http_url_escape(text) : NULL;
    char *cq = cursor[0] ? sbx_http_url_escape(cursor) : NULL;
    json_decref(filter);
    free(text);
    sbx_status s = SBX_OK;
    if (lq == NULL || (cursor[0] && cq == NULL))
        s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    else if ((size_t)snprintf(c->url, sizeof c->url, "%s/sandbox?labels=%s&limit=%d%s%s",
                              p->api_url, lq, DAYTONA_LIST_PAGE, cq ? "&cursor=" : "",
                              cq ? cq : "") >= sizeof c->url)
        s = sbx_error_set(err, SBX_E_CONFIG,
                          "daytona: profile '%s': the URL listing its sandboxes is longer than "
                          "%zu bytes (api_url, profile and node names are too long)",
                          p->profile, sizeof c->url - 1);
    free(lq);
    free(cq);
    return s;
}

/* One page of GET /sandbox (sbx_held_page_fn): the next page's token is the answer's
 * nextCursor. */
static sbx_status dt_held_page(void *arg, const char *token, sbx_held_found *found, char **next,
                               sbx_error *err)
{
    daytona_provider *p = arg;
    dt_call c = {0};
    json_t *j = NULL;
    sbx_status s = dt_list_url(p, &c, token, err);
    if (s == SBX_OK)
        s = dt_do(p, &c, "GET", NULL, NULL, 0, NULL, true, 0, 0, NULL, err);
    if (s == SBX_OK)
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
    if (s == SBX_OK)
        s = sbx_http_response_json(p->http, &c.req, &c.resp, &j, err);
    json_t *items = json_object_get(j, "items");
    json_t *nc = json_object_get(j, "nextCursor");
    const char *cursor = json_string_value(nc);
    if (s == SBX_OK && (!json_is_array(items) ||
                        (nc != NULL && !json_is_null(nc) && (cursor == NULL || cursor[0] == '\0'))))
        s = sbx_error_set(err, SBX_E_PROVISION,
                          "daytona: GET /sandbox: the answer has no items list or a nextCursor "
                          "that is not a string");
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        if (s == SBX_OK && !dt_held_one(p, item, found))
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    if (s == SBX_OK && cursor != NULL && (*next = strdup(cursor)) == NULL)
        s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    json_decref(j);
    dt_call_clear(&c);
    return s;
}

/* The live sandboxes this profile made on this node for per_session sessions, with the
 * principal each was made for (labels sbx.subject...): GET /sandbox filtered by the labels
 * sbx.profile and sbx.node, page by page (nextCursor), reported once every page is read
 * (providers/common/held.h). */
static sbx_status dt_list_held(void *state,
                               void (*held)(void *arg, const char *sandbox_id, const char *subject),
                               void *arg, sbx_error *err)
{
    daytona_provider *p = state;
    if (!p->lists_held)
        return SBX_OK;
    const sbx_held_pager pager = {.provider = "daytona",
                                  .profile = p->profile,
                                  .page_size = DAYTONA_LIST_PAGE,
                                  .max_pages = DAYTONA_LIST_MAX_PAGES,
                                  .max_token = DAYTONA_MAX_CURSOR};
    return sbx_held_list_pages(&pager, dt_held_page, p, held, arg, err);
}

const sbx_provider_ops sbx_provider_daytona = {
    .name = "daytona",
    .summary = "Daytona cloud sandboxes (REST API + toolbox)",
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES,
    .options = daytona_options,
    .open = dt_open,
    .close = dt_close,
    .capabilities = dt_capabilities,
    .check_policy = dt_check_policy,
    .create = dt_create,
    .attach = dt_attach,
    .destroy = dt_destroy,
    .run_code = dt_run_code,
    .run_command = dt_run_command,
    .install_packages = dt_install_packages,
    .write_file = dt_write_file,
    .read_file = dt_read_file,
    .list_files = dt_list_files,
    .sandbox_close = dt_sandbox_close,
    .expose = dt_expose,
    .list_held = dt_list_held,
};
