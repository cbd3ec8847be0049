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
#include <sys/random.h>
#include <time.h>

#include "providers/common/apikey.h"
#include "providers/common/http.h"
#include "sbx/provider.h"

/* Daytona's documented limits on allow lists (reference §2.1). */
#define DAYTONA_MAX_ALLOW_ENTRIES 10
/* Waiting for a new sandbox to reach `started`: the SDK's default create timeout is 60 s; image
 * builds take longer, so the option defaults to 180 s. Polling starts at 100 ms and grows x1.5
 * to 1 s like the SDK's wait loop. */
#define DAYTONA_POLL_FIRST_MS 100
#define DAYTONA_POLL_MAX_MS 1000
/* A toolbox exec answers when the command ends: allow this much beyond the command's own
 * timeout for the daemon to kill it and send its 408. */
#define DAYTONA_EXEC_GRACE_MS 3000
/* A command without a deadline still ends (and the daemon applies no timeout of its own). */
#define DAYTONA_EXEC_MAX_S 3600
/* stdin is piped through the command line (base64); the daemon reads the command from its
 * stdin, so there is no ARG_MAX, but 1 MiB keeps request bodies reasonable. */
#define DAYTONA_MAX_STDIN_BYTES (1024u * 1024u)
/* Labels are short strings in Daytona; longer values are cut. */
#define DAYTONA_MAX_LABEL 63

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

typedef struct daytona_provider {
    char *profile;
    char *api_url;
    char *target;
    char *snapshot;
    char *image;
    int64_t snap_cpu, snap_mem_gb, snap_disk_gb;
    int64_t auto_stop_min;
    int64_t create_timeout_s;
    char **env;
    size_t n_env;
    char *key_env;
    char *api_key;
    char *auth_header; /* "Authorization: Bearer <key>" */
    sbx_http_client *http;
} daytona_provider;

typedef struct daytona_sandbox {
    sbx_sandbox base;
    daytona_provider *p;
    char *toolbox; /* {toolboxProxyUrl}/{id}, no trailing slash */
} daytona_sandbox;

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
    if (!p->profile || !p->api_url || !p->key_env || (t && !p->target) || (snap && !p->snapshot) ||
        (img && !p->image)) {
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

typedef struct dt_call {
    char url[2048];
    sbx_http_request req;
    sbx_http_response resp;
    char *body;
} dt_call;

/* Performs METHOD url with the Bearer key; extra headers optional. */
static sbx_status dt_do(daytona_provider *p, dt_call *c, const char *method, json_t *body,
                        const void *raw, size_t raw_len, const char *content_type, bool idempotent,
                        int64_t deadline, int64_t timeout_ms, const volatile int *cancel,
                        sbx_error *err)
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

static void dt_call_clear(dt_call *c)
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

static void dt_label(json_t *labels, const char *k, const char *v)
{
    if (!v || !*v)
        return;
    char cut[DAYTONA_MAX_LABEL + 1];
    snprintf(cut, sizeof cut, "%s", v);
    json_object_set_new(labels, k, json_string(cut));
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
    if (principal)
        dt_label(labels, "sbx.subject", principal->subject);
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
static sbx_status dt_maybe_gone(daytona_sandbox *d, sbx_status s, sbx_error *err)
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

/* ---- toolbox: exec ------------------------------------------------------------------------- */

/* Appends s single-quoted for a POSIX shell ('it'"'"'s'). */
static bool dt_quote(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t need = *len + strlen(s) * 4 + 4;
    if (need > *cap) {
        size_t nc = need * 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return false;
        *buf = nb;
        *cap = nc;
    }
    char *o = *buf + *len;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = 0;
    *len = (size_t)(o - *buf);
    return true;
}

static bool dt_append(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) {
        size_t nc = (*len + n + 1) * 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return false;
        *buf = nb;
        *cap = nc;
    }
    memcpy(*buf + *len, s, n + 1);
    *len += n;
    return true;
}

/* The shell line for argv or shell, with stdin piped in through base64 when given. */
static sbx_status dt_command_line(const char *const *argv, size_t argc, const char *shell,
                                  const ProtobufCBinaryData *in, char **out, sbx_error *err)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = dt_append(&buf, &len, &cap, "");
    if (in && in->len > 0) {
        if (in->len > DAYTONA_MAX_STDIN_BYTES) {
            free(buf);
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "daytona: stdin of %zu bytes is larger than the %u bytes this "
                                 "provider passes; write the data to a file with write_file",
                                 in->len, (unsigned)DAYTONA_MAX_STDIN_BYTES);
        }
        char *b64 = sbx_http_base64_encode(in->data, in->len);
        ok = ok && b64 && dt_append(&buf, &len, &cap, "printf %s ") &&
             dt_quote(&buf, &len, &cap, b64) && dt_append(&buf, &len, &cap, " | base64 -d | ");
        free(b64);
    }
    if (shell) {
        ok = ok && dt_append(&buf, &len, &cap, "/bin/sh -c ") && dt_quote(&buf, &len, &cap, shell);
    } else {
        for (size_t i = 0; ok && i < argc; i++)
            ok =
                (i == 0 || dt_append(&buf, &len, &cap, " ")) && dt_quote(&buf, &len, &cap, argv[i]);
    }
    if (!ok) {
        free(buf);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    *out = buf;
    return SBX_OK;
}

typedef struct dt_kv {
    const char *key, *value;
} dt_kv;

static sbx_status dt_exec(daytona_sandbox *d, const char *command, const dt_kv *env, size_t n_env,
                          const char *cwd, const sbx_exec_opts *o, sbx_result *result,
                          sbx_error *err)
{
    daytona_provider *p = d->p;
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    int64_t timeout_s = DAYTONA_EXEC_MAX_S;
    if (deadline > 0) {
        int64_t left = deadline - sbx_monotonic_ms();
        if (left <= 0) {
            result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "daytona: the deadline passed before the command started");
        }
        timeout_s = (left + 999) / 1000;
    }
    json_t *b = json_object();
    json_object_set_new(b, "command", json_string(command));
    if (cwd && *cwd)
        json_object_set_new(b, "cwd", json_string(cwd));
    if (n_env > 0) {
        json_t *e = json_object();
        for (size_t i = 0; i < n_env; i++)
            json_object_set_new(e, env[i].key, json_string(env[i].value));
        json_object_set_new(b, "envs", e);
    }
    json_object_set_new(b, "timeout", json_integer(timeout_s));
    dt_call c = {0};
    snprintf(c.url, sizeof c.url, "%s/process/execute", d->toolbox);
    int64_t t0 = sbx_monotonic_us();
    sbx_status s = dt_do(p, &c, "POST", b, NULL, 0, NULL, false,
                         deadline > 0 ? deadline + DAYTONA_EXEC_GRACE_MS : 0,
                         deadline > 0 ? 0 : (DAYTONA_EXEC_MAX_S * 1000 + DAYTONA_EXEC_GRACE_MS),
                         o ? o->cancel : NULL, err);
    json_decref(b);
    result->wall_us = (uint64_t)(sbx_monotonic_us() - t0);
    json_t *j = NULL;
    if (s == SBX_OK && c.resp.status == 408) {
        /* The daemon killed the command at `timeout` (its process group). */
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        s = sbx_error_set(err, SBX_E_TIMEOUT,
                          "daytona: the command in sandbox %s passed its %lld s deadline and was "
                          "killed (the toolbox returns no partial output)",
                          d->base.id, (long long)timeout_s);
    } else if (s == SBX_E_TIMEOUT) {
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
    } else if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300)) {
        s = sbx_http_check(p->http, &c.req, &c.resp, err);
        if (c.resp.status == 404 || c.resp.status >= 500)
            s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_E_PROVISION) {
        s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_OK) {
        s = sbx_http_response_json(p->http, &c.req, &c.resp, &j, err);
    }
    if (s == SBX_OK) {
        json_t *code = json_object_get(j, "exitCode");
        const char *out = json_string_value(json_object_get(j, "result"));
        if (!json_is_integer(code)) {
            s = sbx_error_set(err, SBX_E_PROVISION, "daytona: POST %s answered without an exitCode",
                              c.url);
        } else {
            int ec = (int)json_integer_value(code);
            size_t n = out ? strlen(out) : 0;
            uint64_t limit = o && o->output_limit_bytes ? o->output_limit_bytes : n;
            if (n > limit) {
                n = (size_t)limit;
                result->stdout_truncated = true;
            }
            if (n > 0) {
                sbx_append_bytes(&result->stdout, out, n);
                if (o && o->on_output)
                    o->on_output(o->on_output_arg, SBX__V1__STREAM__STREAM_STDOUT,
                                 (const uint8_t *)out, n, 0);
            }
            if (ec == -1) {
                /* The daemon could not spawn the shell. */
                static const char msg[] = "daytona: the command could not be started\n";
                sbx_append_bytes(&result->stderr, msg, sizeof msg - 1);
                ec = 127;
            }
            result->exit_code = ec;
            result->outcome =
                ec == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
            sbx_result_set_data(result, "daytona.output", "merged");
        }
    }
    json_decref(j);
    dt_call_clear(&c);
    return s;
}

static sbx_status dt_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    bool has_shell = op->shell && op->shell[0];
    if (has_shell == (op->n_argv > 0))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "daytona: run_command needs exactly one of argv or shell");
    char *line = NULL;
    sbx_status s = dt_command_line((const char *const *)op->argv, op->n_argv,
                                   has_shell ? op->shell : NULL, &op->stdin, &line, err);
    if (s != SBX_OK)
        return s;
    dt_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env) {
        free(line);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (dt_kv){op->env[i]->key, op->env[i]->value};
    s = dt_exec(d, line, env, op->n_env, op->cwd, o, result, err);
    free(env);
    free(line);
    return s;
}

static sbx_status dt_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                              sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char *lang = op->language && *op->language ? op->language : "python";
    const char *argv[3] = {NULL, "-c", op->code};
    if (strcmp(lang, "python") == 0 || strcmp(lang, "python3") == 0)
        argv[0] = "python3";
    else if (strcmp(lang, "bash") == 0)
        argv[0] = "bash";
    else
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "daytona: language '%s' is not offered; use python or bash", lang);
    char *line = NULL;
    sbx_status s = dt_command_line(argv, 3, NULL, &op->stdin, &line, err);
    if (s != SBX_OK)
        return s;
    dt_kv *env = calloc(op->n_env ? op->n_env : 1, sizeof *env);
    if (!env) {
        free(line);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    }
    for (size_t i = 0; i < op->n_env; i++)
        env[i] = (dt_kv){op->env[i]->key, op->env[i]->value};
    s = dt_exec(d, line, env, op->n_env, op->cwd, o, result, err);
    free(env);
    free(line);
    return s;
}

static sbx_status dt_install_packages(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                                      const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char *m = op->manager && *op->manager ? op->manager : "pip";
    const char *prefix[5];
    size_t np = 0;
    if (strcmp(m, "pip") == 0) {
        prefix[np++] = "python3", prefix[np++] = "-m", prefix[np++] = "pip";
        prefix[np++] = "install", prefix[np++] = "--quiet";
    } else if (strcmp(m, "npm") == 0) {
        prefix[np++] = "npm", prefix[np++] = "install", prefix[np++] = "--silent";
    } else {
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "daytona: package manager '%s' is not supported; use pip or npm", m);
    }
    if (op->n_packages == 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "daytona: no packages to install");
    const char **argv = calloc(np + op->n_packages, sizeof *argv);
    if (!argv)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    for (size_t i = 0; i < np; i++)
        argv[i] = prefix[i];
    for (size_t i = 0; i < op->n_packages; i++) {
        if (!op->packages[i][0] || op->packages[i][0] == '-') {
            free(argv);
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "daytona: package '%s' is not a package name", op->packages[i]);
        }
        argv[np + i] = op->packages[i];
    }
    char *line = NULL;
    sbx_status s = dt_command_line(argv, np + op->n_packages, NULL, NULL, &line, err);
    free(argv);
    if (s == SBX_OK)
        s = dt_exec(d, line, NULL, 0, NULL, o, result, err);
    free(line);
    return s;
}

/* ---- toolbox: files ------------------------------------------------------------------------ */

static sbx_status dt_files_url(daytona_sandbox *d, dt_call *c, const char *op_path,
                               const char *path, sbx_error *err)
{
    if (!path || !*path)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "daytona: a file path is required");
    char *esc = sbx_http_url_escape(path);
    if (!esc)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    int n = snprintf(c->url, sizeof c->url, "%s%s?path=%s", d->toolbox, op_path, esc);
    free(esc);
    if (n < 0 || (size_t)n >= sizeof c->url)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "daytona: path too long: %.200s", path);
    return SBX_OK;
}

static sbx_status dt_toolbox_error(daytona_sandbox *d, dt_call *c, const char *path, sbx_error *err)
{
    long st = c->resp.status;
    sbx_status s;
    if (st == 404) {
        s = dt_maybe_gone(d, SBX_E_INVALID_ARGUMENT, err);
        if (s == SBX_E_INVALID_ARGUMENT)
            sbx_error_set(err, s, "daytona: %s: no such file or directory in sandbox %s", path,
                          d->base.id);
        return s;
    }
    if (st == 400 || st == 409)
        return sbx_http_status_error(d->p->http, &c->req, &c->resp, SBX_E_INVALID_ARGUMENT, err);
    s = sbx_http_check(d->p->http, &c->req, &c->resp, err);
    if (st >= 500)
        s = dt_maybe_gone(d, s, err);
    return s;
}

static sbx_status dt_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op,
                                const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    (void)result;
    daytona_sandbox *d = (daytona_sandbox *)sb;
    if (op->content.len > SBX_HTTP_MAX_FILE_BYTES)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "daytona: %s: %zu bytes exceed the %u-byte file limit", op->path,
                             op->content.len, (unsigned)SBX_HTTP_MAX_FILE_BYTES);
    int64_t deadline = o ? o->deadline_mono_ms : 0;
    sbx_status s = SBX_OK;
    if (op->mkdirs) {
        /* POST /files/folder?path=<parent>&mode=755 creates the missing directories. */
        const char *slash = strrchr(op->path, '/');
        if (slash && slash != op->path) {
            char *parent = strndup(op->path, (size_t)(slash - op->path));
            dt_call c = {0};
            s = parent ? dt_files_url(d, &c, "/files/folder", parent, err)
                       : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
            if (s == SBX_OK)
                strncat(c.url, "&mode=755", sizeof c.url - strlen(c.url) - 1);
            if (s == SBX_OK)
                s = dt_do(d->p, &c, "POST", NULL, NULL, 0, NULL, true, deadline, 0,
                          o ? o->cancel : NULL, err);
            if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300) &&
                c.resp.status != 409 /* exists */)
                s = dt_toolbox_error(d, &c, parent, err);
            dt_call_clear(&c);
            free(parent);
            if (s != SBX_OK)
                return s;
        }
    }
    /* multipart/form-data with one part named "file" (reference §2.2). */
    uint8_t rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memset(rnd, 0x5a, sizeof rnd);
    char boundary[64];
    int bl = snprintf(boundary, sizeof boundary, "sbx-");
    for (size_t i = 0; i < sizeof rnd; i++)
        bl += snprintf(boundary + bl, sizeof boundary - (size_t)bl, "%02x", rnd[i]);
    const char *base = strrchr(op->path, '/');
    base = base ? base + 1 : op->path;
    char head[512];
    int hl = snprintf(head, sizeof head,
                      "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%.200s\""
                      "\r\nContent-Type: application/octet-stream\r\n\r\n",
                      boundary, strchr(base, '"') ? "file" : base);
    char tail[96];
    int tl = snprintf(tail, sizeof tail, "\r\n--%s--\r\n", boundary);
    size_t total = (size_t)hl + op->content.len + (size_t)tl;
    uint8_t *body = malloc(total);
    if (!body)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
    memcpy(body, head, (size_t)hl);
    if (op->content.len)
        memcpy(body + hl, op->content.data, op->content.len);
    memcpy(body + (size_t)hl + op->content.len, tail, (size_t)tl);
    char ct[128];
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", boundary);
    dt_call c = {0};
    s = dt_files_url(d, &c, "/files/upload", op->path, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "POST", NULL, body, total, ct, true, deadline, 0, o ? o->cancel : NULL,
                  err);
    free(body);
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300))
        s = dt_toolbox_error(d, &c, op->path, err);
    else if (s == SBX_E_PROVISION)
        s = dt_maybe_gone(d, s, err);
    dt_call_clear(&c);
    if (s != SBX_OK)
        return s;
    uint32_t mode = op->mode ? op->mode : 0644;
    if (mode != 0644) {
        char octal[16];
        snprintf(octal, sizeof octal, "%o", (unsigned)(mode & 07777));
        const char *argv[] = {"chmod", octal, op->path};
        char *line = NULL;
        s = dt_command_line(argv, 3, NULL, NULL, &line, err);
        sbx_result *tmp = s == SBX_OK ? sbx_result_new() : NULL;
        if (s == SBX_OK && tmp)
            s = dt_exec(d, line, NULL, 0, NULL, o, tmp, err);
        if (s == SBX_OK && tmp && tmp->exit_code != 0)
            s = sbx_error_set(err, SBX_E_PROVISION, "daytona: chmod %s %s failed: %.*s", octal,
                              op->path, (int)(tmp->stdout.len > 300 ? 300 : tmp->stdout.len),
                              tmp->stdout.data ? (const char *)tmp->stdout.data : "");
        if (tmp)
            sbx_message_free(&tmp->base);
        free(line);
    }
    return s;
}

static sbx_status dt_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                               sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    dt_call c = {0};
    sbx_status s = dt_files_url(d, &c, "/files/download", op->path, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "GET", NULL, NULL, 0, NULL, true, o ? o->deadline_mono_ms : 0, 0,
                  o ? o->cancel : NULL, err);
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300))
        s = dt_toolbox_error(d, &c, op->path, err);
    else if (s == SBX_E_PROVISION)
        s = dt_maybe_gone(d, s, err);
    if (s == SBX_OK) {
        size_t len = c.resp.body_len;
        size_t off = op->offset > len ? len : (size_t)op->offset;
        size_t n = len - off;
        if (op->max_bytes > 0 && op->max_bytes < n)
            n = (size_t)op->max_bytes;
        sbx_file *f = sbx_file_new();
        if (!f || !sbx_set_string(&f->path, op->path) ||
            !sbx_set_bytes(&f->content, c.resp.body ? c.resp.body + off : NULL, n)) {
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
        } else {
            f->size = len;
            f->kind = SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
            sbx_result_add_file(result, f);
        }
    }
    dt_call_clear(&c);
    return s;
}

static sbx_status dt_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op,
                                const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    daytona_sandbox *d = (daytona_sandbox *)sb;
    const char *dir = op->path && *op->path ? op->path : ".";
    dt_call c = {0};
    sbx_status s = dt_files_url(d, &c, "/files", dir, err);
    if (s == SBX_OK)
        s = dt_do(d->p, &c, "GET", NULL, NULL, 0, NULL, true, o ? o->deadline_mono_ms : 0, 0,
                  o ? o->cancel : NULL, err);
    json_t *j = NULL;
    if (s == SBX_OK && (c.resp.status < 200 || c.resp.status >= 300)) {
        s = dt_toolbox_error(d, &c, dir, err);
    } else if (s == SBX_E_PROVISION) {
        s = dt_maybe_gone(d, s, err);
    } else if (s == SBX_OK) {
        s = sbx_http_parse_json(d->p->http, c.url, c.resp.body, c.resp.body_len, &j, err);
        if (s == SBX_OK && !json_is_array(j))
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "daytona: GET %s: expected a JSON array of files", c.url);
    }
    size_t i;
    json_t *e;
    json_array_foreach(s == SBX_OK ? j : NULL, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || !*name || strchr(name, '/'))
            continue;
        char *full = NULL;
        if (asprintf(&full, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", name) < 0)
            full = NULL;
        sbx_file *f = full ? sbx_file_new() : NULL;
        if (!f || !sbx_set_string(&f->path, full)) {
            free(full);
            if (f)
                sbx_message_free(&f->base);
            s = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "daytona: out of memory");
            break;
        }
        free(full);
        f->kind = json_is_true(json_object_get(e, "isDir"))
                      ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
                      : SBX__V1__FILE_KIND__FILE_KIND_REGULAR;
        json_t *size = json_object_get(e, "size");
        if (json_is_integer(size) && json_integer_value(size) > 0)
            f->size = (uint64_t)json_integer_value(size);
        const char *perm = json_string_value(json_object_get(e, "permissions"));
        if (perm)
            f->mode = (uint32_t)strtoul(perm, NULL, 8) & 07777;
        sbx_result_add_file(result, f);
    }
    json_decref(j);
    dt_call_clear(&c);
    return s;
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
};
