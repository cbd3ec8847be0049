/* config_schema.c - the key tables of `sandbox:` and of its broker and worker sections (one row
 * per key: kind, member, bounds, default), with each section's cross-key rules (TLS and auth of
 * a non-loopback worker, the credentials of a remote or queue broker, the default profile) and
 * the top level. Profiles are config_profile.c's.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_impl.h"
#include "core/strbuf.h"
#include "core/net.h"

/* The words an enumerated value accepts (also the list printed when a value is unknown). */
const char *const config_log_level_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const serve_choices[] = {"grpc", "queue", "both", NULL};
static const char *const flavor_choices[] = {"embedded", "thread", "remote", "queue", NULL};

/* ---- broker ---------------------------------------------------------------------------- */

/* sandbox.broker.remote.endpoint: https://HOST[:PORT], or http:// to loopback only. */
static sbx_status get_endpoint(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_remote_config *r = section;
    sbx_status st = config_get_string(L, v, p, &r->endpoint);
    if (st != SBX_OK)
        return st;
    const char *hp = NULL;
    bool tls = strncmp(v->text, "https://", 8) == 0;
    if (tls)
        hp = v->text + 8;
    else if (strncmp(v->text, "http://", 7) == 0)
        hp = v->text + 7;
    size_t host_len = 0;
    int64_t port = 0;
    char hostport[512];
    if (hp != NULL && strlen(hp) >= sizeof(hostport))
        hp = NULL; /* refused below: no real host:port is that long */
    if (hp != NULL && strchr(hp, '@') != NULL) {
        st = config_fail(L, v, p,
                         "'%s' carries credentials or a user; name them with token_env or "
                         "cert_file/key_file instead",
                         v->text);
        return st;
    }
    snprintf(hostport, sizeof(hostport), "%s", hp ? hp : "");
    char *slash = strchr(hostport, '/');
    if (slash != NULL)
        *slash = '\0';
    /* no port: the scheme's (443 / 80) */
    bool has_port = strchr(hostport, ':') != NULL && hostport[0] != '[';
    if (hostport[0] == '[')
        has_port = strstr(hostport, "]:") != NULL;
    if (!has_port) {
        host_len = strlen(hostport);
        port = tls ? 443 : 80;
    }
    if (hp == NULL || hostport[0] == '\0' ||
        (has_port && (!config_split_host_port(hostport, &host_len, &port) || port == 0)))
        st = config_fail(L, v, p,
                         "'%s' is not an endpoint; accepted: https://HOST[:PORT], or "
                         "http://127.0.0.1:PORT (plain h2c only to loopback)",
                         v->text);
    else if (!tls && !sbx_net_host_is_loopback(hostport, host_len))
        st = config_fail(L, v, p,
                         "'%s' would send requests unencrypted off this host; use https:// "
                         "(plain http:// is accepted only for 127.0.0.1, ::1 or localhost)",
                         v->text);
    return st;
}

static sbx_status check_remote(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_remote_config *r = section;
    (void)at;
    if ((r->cert_file == NULL) != (r->key_file == NULL))
        return config_fail(
            L, map, path,
            "cert_file and key_file go together (client certificate for mTLS); set both "
            "or neither");
    return SBX_OK;
}

static const field remote_fields[] = {
    CUSTOM("endpoint", get_endpoint),
    PATHF(sbx_remote_config, ca_file, "ca_file"),
    PATHF(sbx_remote_config, cert_file, "cert_file"),
    PATHF(sbx_remote_config, key_file, "key_file"),
    ENVF(sbx_remote_config, token_env, "token_env"),
    INTF(sbx_remote_config, connect_timeout_ms, "connect_timeout_ms", 1, MAX_CONNECT_TIMEOUT_MS,
         DEFAULT_CONNECT_TIMEOUT_MS),
    FIELDS_END,
};

/* One NATS URL of a comma separated list: nats:// only to loopback (requests carry bearer
 * tokens), tls:// anywhere; no credentials inside it. */
static bool queue_url_ok(loader *L, const config_node *v, const char *url, size_t len,
                         bool tls_configured, sbx_status *st)
{
    char one[512];
    if (len >= sizeof one) {
        *st = config_fail(L, v, "sandbox.broker.queue.url",
                          "a URL of %zu bytes; no server URL is that long", len);
        return false;
    }
    memcpy(one, url, len);
    one[len] = '\0';
    bool tls = strncmp(one, "tls://", 6) == 0;
    const char *hp = tls ? one + 6 : strncmp(one, "nats://", 7) == 0 ? one + 7 : NULL;
    size_t host_len = 0;
    int64_t port = 0;
    if (hp != NULL && strchr(hp, '@') != NULL) {
        *st = config_fail(L, v, "sandbox.broker.queue.url",
                          "'%s' carries credentials; name them with user + password_env or nkey + "
                          "nkey_seed_env instead",
                          one);
        return false;
    }
    if (hp == NULL || !config_split_host_port(hp, &host_len, &port) || port == 0) {
        *st = config_fail(L, v, "sandbox.broker.queue.url",
                          "'%s' is not a NATS server URL; accepted: tls://HOST:PORT, or "
                          "nats://127.0.0.1:PORT (plain only to loopback), comma separated",
                          one);
        return false;
    }
    if (!tls && !tls_configured && !sbx_net_host_is_loopback(hp, host_len)) {
        *st = config_fail(L, v, "sandbox.broker.queue.url",
                          "'%s' would carry requests and tokens unencrypted off this host; use "
                          "tls:// (plain nats:// is accepted only for 127.0.0.1, ::1 or localhost)",
                          one);
        return false;
    }
    return true;
}

/* sandbox.broker.queue.nkey: a NATS user public key (the seed lives in nkey_seed_env). */
static sbx_status get_nkey(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_queue_config *q = section;
    sbx_status st = config_get_string(L, v, p, &q->nkey);
    if (st == SBX_OK && (v->text[0] != 'U' || v->len != 56))
        st = config_fail(L, v, p,
                         "'%.8s...' is not an nkey user public key (56 characters starting with "
                         "U); the seed (S...) goes in the variable named by nkey_seed_env",
                         v->text);
    return st;
}

static const field queue_fields[] = {
    STR(sbx_queue_config, url, "url"),
    PATHF(sbx_queue_config, ca_file, "ca_file"),
    PATHF(sbx_queue_config, cert_file, "cert_file"),
    PATHF(sbx_queue_config, key_file, "key_file"),
    STR(sbx_queue_config, user, "user"),
    ENVF(sbx_queue_config, password_env, "password_env"),
    CUSTOM("nkey", get_nkey),
    ENVF(sbx_queue_config, nkey_seed_env, "nkey_seed_env"),
    ENVF(sbx_queue_config, token_env, "token_env"),
    STRD(sbx_queue_config, name, "name", DEFAULT_QUEUE_NAME),
    STR(sbx_queue_config, inbox_prefix, "inbox_prefix"),
    INTF(sbx_queue_config, replicas, "replicas", 1, MAX_QUEUE_REPLICAS, 1),
    INTF(sbx_queue_config, ack_wait_ms, "ack_wait_ms", MIN_QUEUE_ACK_WAIT_MS, MAX_QUEUE_WAIT_MS,
         DEFAULT_QUEUE_ACK_WAIT_MS),
    INTF(sbx_queue_config, node_wait_ms, "node_wait_ms", 0, MAX_QUEUE_WAIT_MS,
         DEFAULT_QUEUE_NODE_WAIT_MS),
    INTF(sbx_queue_config, completion_ttl_s, "completion_ttl_s", 1, MAX_QUEUE_TTL_S,
         DEFAULT_QUEUE_TTL_S),
    INTF(sbx_queue_config, dedup_window_s, "dedup_window_s", 1, MAX_QUEUE_TTL_S,
         DEFAULT_QUEUE_DEDUP_S),
    INTF(sbx_queue_config, connect_timeout_ms, "connect_timeout_ms", 1, MAX_CONNECT_TIMEOUT_MS,
         DEFAULT_CONNECT_TIMEOUT_MS),
    FIELDS_END,
};

static sbx_status check_queue(loader *L, const config_node *map, const char *path, void *section,
                              const config_node *const *at)
{
    sbx_queue_config *q = section;
    const config_node *url_node = config_field_node(queue_fields, at, "url");
    const config_node *name_node = config_field_node(queue_fields, at, "name");
    sbx_status st = SBX_OK;
    if (name_node != NULL) {
        bool ok = q->name[0] != '\0' && strlen(q->name) <= QUEUE_NAME_MAX;
        for (const char *c = q->name; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-';
        if (!ok)
            return config_fail(
                L, name_node, "sandbox.broker.queue.name",
                "'%s' is not a queue name; use lowercase letters, digits and '-', at most "
                "%d (it prefixes subjects, the stream and the bucket)",
                q->name, QUEUE_NAME_MAX);
    }
    const config_node *inbox_node = config_field_node(queue_fields, at, "inbox_prefix");
    if (inbox_node != NULL) {
        /* NATS subject tokens separated by dots: no wildcard, no empty token. */
        const char *s = q->inbox_prefix;
        bool ok = s[0] != '\0' && strlen(s) <= QUEUE_INBOX_PREFIX_MAX;
        for (const char *c = s; ok && *c; c++)
            ok = isalnum((unsigned char)*c) || *c == '_' || *c == '-' ||
                 (*c == '.' && c != s && c[1] != '\0' && c[1] != '.');
        if (!ok)
            return config_fail(L, inbox_node, "sandbox.broker.queue.inbox_prefix",
                               "'%s' is not an inbox prefix; use NATS subject tokens of letters, "
                               "digits, '_' and '-' separated by dots, at most %d bytes (e.g. "
                               "_INBOX_tenant-a)",
                               s, QUEUE_INBOX_PREFIX_MAX);
    }
    if (url_node != NULL) {
        bool tls_configured = q->ca_file != NULL || q->cert_file != NULL;
        for (const char *s = q->url;;) {
            const char *comma = strchr(s, ',');
            size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
            if (!queue_url_ok(L, url_node, s, len, tls_configured, &st))
                return st;
            if (comma == NULL)
                break;
            s = comma + 1;
        }
    }
    if ((q->cert_file == NULL) != (q->key_file == NULL))
        return config_fail(L, map, path,
                           "cert_file and key_file go together (client certificate); set both or "
                           "neither");
    if (q->password_env != NULL && q->user == NULL)
        return config_fail(L, map, path, "password_env needs user (the NATS user it belongs to)");
    if ((q->nkey == NULL) != (q->nkey_seed_env == NULL))
        return config_fail(
            L, map, path,
            "nkey and nkey_seed_env go together (the public key here, the seed in the "
            "environment); set both or neither");
    if (q->nkey != NULL && q->user != NULL)
        return config_fail(L, map, path,
                           "use either user + password_env or nkey + nkey_seed_env, not both");
    return SBX_OK;
}

static sbx_status check_broker(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at);

static const field broker_fields[] = {
    ENUMF(sbx_broker_config, flavor, "flavor", flavor_choices, DEFAULT_BROKER_FLAVOR),
    INTF(sbx_broker_config, threads, "threads", 1, MAX_BROKER_THREADS, SBX_BROKER_DEFAULT_THREADS),
    INTF(sbx_broker_config, queue_depth, "queue_depth", 1, MAX_BROKER_QUEUE_DEPTH,
         SBX_BROKER_DEFAULT_QUEUE_DEPTH),
    INTF(sbx_broker_config, wait_timeout_ms, "wait_timeout_ms", 0, MAX_BROKER_WAIT_MS,
         DEFAULT_BROKER_WAIT_MS),
    INTF(sbx_broker_config, lru_size, "lru_size", 0, MAX_BROKER_LRU, SBX_BROKER_DEFAULT_LRU_SIZE),
    INTF(sbx_broker_config, principal_threads, "principal_threads", 0, MAX_BROKER_THREADS, 0),
    SECTIONF("remote", offsetof(sbx_broker_config, remote), remote_fields, check_remote),
    SECTIONF("queue", offsetof(sbx_broker_config, queue), queue_fields, check_queue),
    FIELDS_END,
};

static sbx_status check_broker(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_broker_config *b = section;
    const config_node *flavor_node = config_field_node(broker_fields, at, "flavor");
    const config_node *share_node = config_field_node(broker_fields, at, "principal_threads");
    (void)map;
    (void)path;
    if (share_node != NULL && b->principal_threads > b->threads)
        return config_fail(L, share_node, "sandbox.broker.principal_threads",
                           "%lld is more than sandbox.broker.threads (%lld): one principal "
                           "holds at most every thread; lower it, or use 0 for all but a "
                           "quarter of the threads",
                           (long long)b->principal_threads, (long long)b->threads);
    if (flavor_node != NULL && strcmp(b->flavor, "remote") == 0 && b->remote.endpoint == NULL)
        return config_fail(
            L, flavor_node, "sandbox.broker.flavor",
            "flavor remote needs sandbox.broker.remote.endpoint (https://HOST:PORT of a "
            "worker or its load balancer)");
    if (flavor_node != NULL && strcmp(b->flavor, "queue") == 0 && b->queue.url == NULL)
        return config_fail(
            L, flavor_node, "sandbox.broker.flavor",
            "flavor queue needs sandbox.broker.queue.url (tls://HOST:PORT of the NATS "
            "servers, or nats://127.0.0.1:PORT)");
    return SBX_OK;
}

/* ---- worker ---------------------------------------------------------------------------- */

static sbx_status check_caller(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at);

static const field caller_fields[] = {
    STR(sbx_worker_caller, name, "name"),
    ENVF(sbx_worker_caller, token_env, "token_env"),
    STR(sbx_worker_caller, cert_subject, "cert_subject"),
    LISTF(sbx_worker_caller, subjects, n_subjects, "subjects", NULL,
          "principal subjects (\"*\" = any)"),
    FIELDS_END,
};

static sbx_status check_caller(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_worker_caller *c = section;
    const config_node *subjects_node = config_field_node(caller_fields, at, "subjects");
    if (c->name == NULL)
        return config_fail(L, map, path, "a caller needs `name` (used in logs)");
    if ((c->token_env == NULL) == (c->cert_subject == NULL))
        return config_fail(
            L, map, path,
            "caller '%s' needs exactly one of token_env (a bearer token held in that "
            "environment variable) or cert_subject (the CN of its mTLS client "
            "certificate)",
            c->name);
    if (c->n_subjects == 0)
        return config_fail(
            L, subjects_node ? subjects_node : map, path,
            "caller '%s' needs `subjects`: the principal subjects it may act for, or "
            "[\"*\"] for any",
            c->name);
    return SBX_OK;
}

/* sandbox.worker.auth.callers: a list of caller sections, names unique. */
static sbx_status get_callers(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_worker_config *w = section;
    if (config_node_is_null(v))
        return SBX_OK;
    if (v->kind != CONFIG_SEQ)
        return config_fail(
            L, v, p,
            "expected a list of callers ({name, token_env | cert_subject, subjects}), got "
            "%s",
            config_kind_name(v));
    if (v->n_kids > CONFIG_MAX_CALLERS)
        return config_fail(L, v, p, "more than %d callers", CONFIG_MAX_CALLERS);
    w->callers = calloc(v->n_kids ? v->n_kids : 1, sizeof(*w->callers));
    if (w->callers == NULL)
        return config_oom(L);
    sbx_status st = SBX_OK;
    for (size_t c = 0; st == SBX_OK && c < v->n_kids; c++) {
        char cp[128];
        snprintf(cp, sizeof(cp), "sandbox.worker.auth.callers[%zu]", c);
        sbx_worker_caller *caller = &w->callers[w->n_callers++];
        st = config_parse_section(L, v->kids[c], cp, caller_fields, caller, check_caller);
        for (size_t d = 0; st == SBX_OK && d + 1 < w->n_callers; d++)
            if (strcmp(w->callers[d].name, caller->name) == 0)
                st = config_fail(L, v->kids[c], cp,
                                 "a second caller named '%s'; caller names are unique",
                                 caller->name);
    }
    return st;
}

/* sandbox.worker.auth: read into the worker's struct itself. */
static const field auth_fields[] = {
    CUSTOM_OF("callers", get_callers, caller_fields),
    FIELDS_END,
};

static sbx_status check_tls(loader *L, const config_node *map, const char *path, void *section,
                            const config_node *const *at);

/* sandbox.worker.tls: read into the worker's struct itself. */
static const field tls_fields[] = {
    PATHF(sbx_worker_config, tls_cert_file, "cert_file"),
    PATHF(sbx_worker_config, tls_key_file, "key_file"),
    PATHF(sbx_worker_config, tls_client_ca_file, "client_ca_file"),
    FIELDS_END,
};

static sbx_status check_tls(loader *L, const config_node *map, const char *path, void *section,
                            const config_node *const *at)
{
    const sbx_worker_config *w = section;
    const config_node *client_ca_node = config_field_node(tls_fields, at, "client_ca_file");
    if ((w->tls_cert_file == NULL) != (w->tls_key_file == NULL))
        return config_fail(L, map, path, "cert_file and key_file go together; set both or neither");
    if (client_ca_node != NULL && w->tls_cert_file == NULL)
        return config_fail(L, client_ca_node, "sandbox.worker.tls.client_ca_file",
                           "client certificates (mTLS) need TLS: set cert_file and key_file too");
    return SBX_OK;
}

static sbx_status check_worker(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at);

static const field worker_fields[] = {
    LISTENF(sbx_worker_config, listen, "listen", "127.0.0.1:7443, 0.0.0.0:7443, [::]:7443",
            DEFAULT_WORKER_LISTEN),
    SECTIONF("tls", 0, tls_fields, check_tls),
    SECTIONF("auth", 0, auth_fields, NULL),
    INTF(sbx_worker_config, max_message_bytes, "max_message_bytes", MIN_WORKER_MAX_MESSAGE,
         MAX_WORKER_MAX_MESSAGE, DEFAULT_WORKER_MAX_MESSAGE),
    INTF(sbx_worker_config, drain_timeout_ms, "drain_timeout_ms", 0, MAX_WORKER_DRAIN_MS,
         DEFAULT_WORKER_DRAIN_MS),
    PATHF(sbx_worker_config, record, "record"),
    INTF(sbx_worker_config, record_max_bytes, "record_max_bytes", 0, MAX_WORKER_RECORD_MAX,
         DEFAULT_WORKER_RECORD_MAX),
    INTF(sbx_worker_config, record_keep, "record_keep", 1, MAX_WORKER_RECORD_KEEP,
         DEFAULT_WORKER_RECORD_KEEP),
    ENUMF(sbx_worker_config, log_level, "log_level", config_log_level_choices,
          DEFAULT_WORKER_LOG_LEVEL),
    PATHF(sbx_worker_config, log_file, "log_file"),
    LISTENF(sbx_worker_config, metrics_listen, "metrics_listen", "127.0.0.1:9464, 0.0.0.0:9464",
            NULL),
    ENUMF(sbx_worker_config, serve, "serve", serve_choices, "grpc"),
    INTF(sbx_worker_config, drain_notice_ms, "drain_notice_ms", 0, MAX_WORKER_DRAIN_MS, 0),
    FIELDS_END,
};

/* The node of the first certificate caller in sandbox.worker.auth.callers, or NULL. */
static const config_node *first_cert_caller_node(const sbx_worker_config *w,
                                                 const config_node *auth)
{
    const config_node *callers = config_map_value(auth, "callers");
    if (callers == NULL || callers->kind != CONFIG_SEQ)
        return NULL;
    for (size_t c = 0; c < w->n_callers && c < callers->n_kids; c++)
        if (w->callers[c].cert_subject != NULL)
            return callers->kids[c];
    return NULL;
}

static sbx_status check_worker(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_worker_config *w = section;
    const config_node *listen_node = config_field_node(worker_fields, at, "listen");
    const config_node *first_cert_caller =
        first_cert_caller_node(w, config_field_node(worker_fields, at, "auth"));
    (void)map;
    (void)path;
    if (first_cert_caller != NULL && w->tls_client_ca_file == NULL)
        return config_fail(
            L, first_cert_caller, "sandbox.worker.auth.callers",
            "a cert_subject caller needs sandbox.worker.tls.client_ca_file (the CA that "
            "signs client certificates)");
    /* DESIGN §7: every non-loopback listener requires TLS and an authenticated caller. A
     * --listen override is checked after the whole file (apply_overrides), not here. */
    if (listen_node != NULL && !(L->ov && L->ov->worker_listen) &&
        !config_listen_is_loopback(w->listen)) {
        if (w->tls_cert_file == NULL)
            return config_fail(L, listen_node, "sandbox.worker.listen",
                               "listening on '%s' (not loopback) requires TLS: set "
                               "sandbox.worker.tls.cert_file and key_file",
                               w->listen);
        if (w->n_callers == 0)
            return config_fail(
                L, listen_node, "sandbox.worker.listen",
                "listening on '%s' (not loopback) requires authenticated callers: set "
                "sandbox.worker.auth.callers",
                w->listen);
    }
    return SBX_OK;
}

/* ---- the sandbox section and the top level ------------------------------------------- */

static sbx_status get_secret_file(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_config *cfg = section;
    cfg->secret_file_configured = true;
    return config_get_path(L, v, p, &cfg->secret_file);
}

static sbx_status get_node(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_status st = config_get_string(L, v, p, &((sbx_config *)section)->node);
    if (st == SBX_OK && !config_name_ok(v->text, CONFIG_NODE_NAME_MAX))
        st = config_fail(L, v, p,
                         "'%s' is not a node name; use a host name (letters, digits, '.', '-', "
                         "'_', at most %d)",
                         v->text, CONFIG_NODE_NAME_MAX);
    return st;
}

static sbx_status get_profiles(loader *L, const config_node *v, const char *p, void *section)
{
    (void)p;
    (void)section;
    return config_parse_profiles(L, v);
}

static sbx_status check_sandbox(loader *L, const config_node *map, const char *path, void *section,
                                const config_node *const *at);

/* The keys of `sandbox:` (DESIGN §10). The host-dependent defaults (secret_file, node,
 * runtime_dir, snapshot_dir) are host_defaults'. */
const field config_sandbox_fields[] = {
    STRD(sbx_config, default_profile, "default_profile", DEFAULT_PROFILE_NAME),
    CUSTOM("secret_file", get_secret_file),
    CUSTOM("node", get_node),
    PATHF(sbx_config, runtime_dir, "runtime_dir"),
    PATHF(sbx_config, snapshot_dir, "snapshot_dir"),
    INTF(sbx_config, snapshot_max_mb, "snapshot_max_mb", 1, SNAPSHOT_MAX_MB_LIMIT,
         DEFAULT_SNAPSHOT_MAX_MB),
    INTF(sbx_config, principal_sandboxes, "principal_sandboxes", 0, MAX_PRINCIPAL_SANDBOXES, 0),
    SECTIONF("broker", offsetof(sbx_config, broker), broker_fields, check_broker),
    SECTIONF("worker", offsetof(sbx_config, worker), worker_fields, check_worker),
    CUSTOM_OF("profiles", get_profiles, config_profile_fields),
    FIELDS_END,
};

/* The default profile: named by default_profile, or the file's only profile, or the built-in
 * one when the file has none. */
static sbx_status check_sandbox(loader *L, const config_node *map, const char *path, void *section,
                                const config_node *const *at)
{
    sbx_config *cfg = section;
    const config_node *default_node =
        config_field_node(config_sandbox_fields, at, "default_profile");
    (void)path;
    if (cfg->n_profiles == 0) {
        /* No profiles in the file: the built-in default profile applies. */
        free(cfg->profiles);
        cfg->profiles = NULL;
        if (!config_add_builtin_profile(cfg, sbx_provider_lookup(DEFAULT_PROVIDER)))
            return config_oom(L);
    }
    if (sbx_config_profile(cfg, NULL) == NULL) {
        char names[SBX_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < cfg->n_profiles; i++)
            sbx_list_add(names, sizeof names, cfg->profiles[i].name);
        if (default_node != NULL)
            return config_fail(L, default_node, "sandbox.default_profile",
                               "no profile named '%s'; the profiles are: %s", cfg->default_profile,
                               names);
        if (cfg->n_profiles == 1) { /* one profile and no default_profile: it is the default */
            char *only = strdup(cfg->profiles[0].name);
            if (only == NULL)
                return config_oom(L);
            free(cfg->default_profile);
            cfg->default_profile = only;
            return SBX_OK;
        }
        return config_fail(L, map, "sandbox.default_profile",
                           "no profile is named 'default'; set default_profile to one of: %s",
                           names);
    }
    return SBX_OK;
}

/* The top level holds `sandbox:` only (read after the whole level is checked). */
static const field root_fields[] = {
    SKIP("sandbox"),
    FIELDS_END,
};

sbx_status config_load_tree(loader *L, const config_node *root)
{
    const config_node *at[FIELDS_MAX];
    if (root != NULL && config_node_is_null(root))
        root = NULL;
    sbx_status st = config_parse_fields(L, root, "(top level)", root_fields, L->cfg, at, NULL);
    if (st != SBX_OK)
        return st;
    return config_parse_section(L, config_field_node(root_fields, at, "sandbox"), "sandbox",
                                config_sandbox_fields, L->cfg, check_sandbox);
}
