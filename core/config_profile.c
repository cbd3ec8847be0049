/* config_profile.c - the profiles of sandbox.profiles: the key tables of a profile, its identity
 * and its policy (the defaults of DESIGN §10), the provider block read by the provider's option
 * specs, and the rules between keys (idle_action, the environment matrix of DESIGN §5, the
 * fallbacks between profiles).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_impl.h"
#include "core/path.h"

/* Provider type names that are part of sbx even when this build lacks one: a block named after
 * one of them inside a profile of another type is a misplaced block, not an unknown key. */
static const char *const known_provider_names[] = {"local",   "docker", "e2b", "daytona",
                                                   "ec2_ssm", "fake",   NULL};

/* The words an enumerated value of a profile accepts (also the list printed when a value is
 * unknown). */
static const char *const scope_choices[] = {"per_call", "per_session", "per_runtime", NULL};
static const char *const idle_action_choices[] = {"reset", "pause", NULL};
static const char *const environment_choices[] = {"managed", "attached", NULL};
static const char *const identity_choices[] = {"agent", "user", NULL};
static const char *const egress_choices[] = {"deny", "allow", "allowlist", NULL};

/* A policy path: absolute, and without "." or ".." components, which a request's paths are
 * compared against as text (core/policy.c). */
static bool absolute_path_ok(const char *s)
{
    return s[0] == '/' && !sbx_path_has_dot_component(s);
}

/* A network_allow entry: a domain, *.domain, an IPv4/IPv6 address or a CIDR. Checked loosely
 * here (the provider parses it); only characters that can appear in those forms. */
static bool network_entry_ok(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '*' || c == ':' || c == '/' || c == '_'))
            return false;
    }
    return true;
}

/* ---- profiles -------------------------------------------------------------------------- */

static const int egress_values[] = {SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY,
                                    SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW,
                                    SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST};
static const int identity_values[] = {SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT,
                                      SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER};

/* A profile's policy (a protobuf sbx_policy); the defaults are DESIGN §10's. */
static const field policy_fields[] = {
    CHOICEF(sbx_policy, network_egress, "network_egress", egress_choices, egress_values,
            SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY),
    LISTF(sbx_policy, network_allow, n_network_allow, "network_allow", network_entry_ok,
          "a domain, *.domain, IP address or CIDR"),
    LISTF(sbx_policy, fs_read, n_fs_read, "fs_read", absolute_path_ok,
          "an absolute path without . or .. components"),
    LISTF(sbx_policy, fs_write, n_fs_write, "fs_write", absolute_path_ok,
          "an absolute path without . or .. components"),
    REALF(sbx_policy, cpu, "cpu", 0, MAX_POLICY_CPU, DEFAULT_POLICY_CPU,
          "0 (no limit) or a number of CPU cores from 0.01 to 1024, e.g. 0.5"),
    INTF(sbx_policy, memory_mb, "memory_mb", 0, MAX_POLICY_MEMORY_MB, DEFAULT_POLICY_MEMORY_MB),
    INTF(sbx_policy, pids, "pids", 0, MAX_POLICY_PIDS, DEFAULT_POLICY_PIDS),
    INTF(sbx_policy, disk_mb, "disk_mb", 0, MAX_POLICY_DISK_MB, 0),
    INTF(sbx_policy, timeout_ms, "timeout_ms", 1, MAX_POLICY_TIMEOUT_MS, DEFAULT_POLICY_TIMEOUT_MS),
    INTF(sbx_policy, output_limit_bytes, "output_limit_bytes", 0, MAX_POLICY_OUTPUT_BYTES, 0),
    BOOLF(sbx_policy, lenient, "lenient", false),
    FIELDS_END,
};

static sbx_status check_policy(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_policy *pol = section;
    (void)map;
    /* A profile's lists within a request's bounds: its effective policy is merged again as a
     * request when it falls back, and the egress proxy takes at most that many rules. */
    const struct {
        const char *key;
        size_t n;
        char *const *items;
    } lists[] = {{"network_allow", pol->n_network_allow, pol->network_allow},
                 {"fs_read", pol->n_fs_read, pol->fs_read},
                 {"fs_write", pol->n_fs_write, pol->fs_write}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        bool too_long = false;
        for (size_t j = 0; j < lists[i].n; j++)
            too_long |= strlen(lists[i].items[j]) > MAX_POLICY_ENTRY_BYTES;
        if (lists[i].n > MAX_POLICY_LIST_ENTRIES || too_long)
            return config_fail(L, config_field_node(policy_fields, at, lists[i].key), path,
                               "%s holds %zu entries%s; at most %d of at most %d bytes each are "
                               "accepted",
                               lists[i].key, lists[i].n, too_long ? ", one of them too long" : "",
                               MAX_POLICY_LIST_ENTRIES, MAX_POLICY_ENTRY_BYTES);
    }
    if (pol->cpu > 0 && pol->cpu < MIN_POLICY_CPU) /* rounded to 0, "no limit", by Docker */
        return config_fail(L, config_field_node(policy_fields, at, "cpu"), path,
                           "cpu %g is below %g, the smallest limit providers hold; use at least "
                           "that, or 0 for no limit",
                           pol->cpu, MIN_POLICY_CPU);
    bool allowlist = pol->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    if (!allowlist && pol->n_network_allow > 0)
        return config_fail(
            L, config_field_node(policy_fields, at, "network_allow"), path,
            "network_allow is only used with `network_egress: allowlist`; set that, or "
            "remove network_allow");
    if (allowlist && pol->n_network_allow == 0)
        return config_fail(
            L, config_field_node(policy_fields, at, "network_egress"), path,
            "`network_egress: allowlist` with an empty network_allow allows nothing; list "
            "the domains/CIDRs, or use `network_egress: deny`");
    return SBX_OK;
}

static sbx_policy *default_policy(void)
{
    sbx_policy *pol = sbx_policy_new();
    if (pol != NULL && !config_apply_defaults(policy_fields, pol)) {
        sbx_message_free((ProtobufCMessage *)pol);
        return NULL;
    }
    return pol;
}

static sbx_status get_policy(loader *L, const config_node *v, const char *p, void *section)
{
    return config_parse_section(L, v, p, policy_fields, ((sbx_profile_config *)section)->policy,
                                check_policy);
}

static sbx_status get_fallback(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_profile_config *prof = section;
    sbx_status st =
        config_get_string_list(L, v, p, NULL, "profile names", &prof->n_fallback, &prof->fallback);
    if (st == SBX_OK && prof->n_fallback > CONFIG_MAX_FALLBACK)
        st = config_fail(L, v, p, "more than %d fallback profiles", CONFIG_MAX_FALLBACK);
    return st;
}

/* profile.identity: read into the profile's struct itself. */
static const field identity_fields[] = {
    CHOICEF(sbx_profile_config, identity_mode, "mode", identity_choices, identity_values,
            SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT),
    FIELDS_END,
};

/* The keys of a profile, besides the block of its provider (named by its type). */
const field config_profile_fields[] = {
    SKIP("type"),
    CHOICEF(sbx_profile_config, scope, "scope", scope_choices, NULL, SBX_SCOPE_PER_SESSION),
    CHOICEF(sbx_profile_config, environment, "environment", environment_choices, NULL,
            SBX_ENV_MANAGED),
    STR(sbx_profile_config, attach_to, "attach_to"),
    INTF(sbx_profile_config, idle_timeout_s, "idle_timeout_s", 0, MAX_IDLE_TIMEOUT_S,
         DEFAULT_IDLE_TIMEOUT_S),
    CHOICEF(sbx_profile_config, idle_pause, "idle_action", idle_action_choices, NULL, 0),
    SECTIONF("identity", 0, identity_fields, NULL),
    CUSTOM_OF("policy", get_policy, policy_fields),
    CUSTOM("fallback", get_fallback),
    FIELDS_END,
};

/* Fills a profile with every default; ops may be NULL (options then have no schema). */
static bool profile_defaults(sbx_profile_config *p, const char *name, const char *type,
                             const sbx_provider_ops *ops)
{
    p->name = strdup(name);
    p->type = strdup(type);
    p->policy = default_policy();
    p->options = sbx_options_new(ops ? ops->options : NULL);
    return p->name && p->type && p->policy && p->options &&
           config_apply_defaults(config_profile_fields, p);
}

void config_profile_free(sbx_profile_config *p)
{
    free(p->name);
    free(p->type);
    free(p->attach_to);
    for (size_t i = 0; i < p->n_fallback; i++)
        free(p->fallback[i]);
    free(p->fallback);
    sbx_message_free((ProtobufCMessage *)p->policy);
    sbx_options_free(p->options);
}

/* The provider block: each key through sbx_options_set (the schema decides). */
static sbx_status parse_provider_block(loader *L, const config_node *map, const char *path,
                                       sbx_options *o)
{
    size_t pairs = 0;
    sbx_status st = config_need_map(L, map, path, &pairs);
    const sbx_option_spec *schema = sbx_options_schema(o);
    for (size_t i = 0; st == SBX_OK && i < pairs; i++) {
        const config_node *k = map->kids[2 * i], *v = map->kids[2 * i + 1];
        char p[256];
        config_subpath(p, sizeof(p), path, k->text);
        const sbx_option_spec *spec = NULL;
        for (size_t j = 0; schema != NULL && schema[j].key != NULL; j++)
            if (strcmp(schema[j].key, k->text) == 0)
                spec = &schema[j];
        if (spec == NULL) {
            const char *accepted[128];
            size_t n = 0;
            for (size_t j = 0; schema != NULL && schema[j].key != NULL && n + 1 < 128; j++)
                accepted[n++] = schema[j].key;
            accepted[n] = NULL;
            if (n == 0)
                accepted[0] = "(none: this provider takes no options)", accepted[1] = NULL;
            st = config_unknown_key(L, k, path, accepted);
            break;
        }
        sbx_error e;
        if (spec->type == SBX_OPT_LIST) {
            if (config_node_is_null(v) || (v->kind == CONFIG_SEQ && v->n_kids == 0)) {
                config_options_set_empty(o, k->text);
                continue;
            }
            if (v->kind != CONFIG_SEQ) {
                st = config_fail(L, v, p, "expected a list of strings (e.g. [a, b]), got %s",
                                 config_kind_name(v));
                break;
            }
            for (size_t j = 0; st == SBX_OK && j < v->n_kids; j++) {
                st = config_need_scalar(L, v->kids[j], p, "a string");
                if (st == SBX_OK && sbx_options_set(o, k->text, v->kids[j]->text, &e) != SBX_OK)
                    st = config_fail(L, v->kids[j], path, "%s", e.message);
            }
            continue;
        }
        const char *expected = spec->type == SBX_OPT_ENUM ? spec->choices
                               : spec->type == SBX_OPT_ENV_NAME
                                   ? "the name of an environment variable"
                                   : sbx_option_type_name(spec->type);
        st = config_need_scalar(L, v, p, expected);
        if (st != SBX_OK)
            break;
        if ((spec->type == SBX_OPT_INT || spec->type == SBX_OPT_BOOL) && !v->plain) {
            st = config_fail(L, v, p, "expected %s, got the quoted string \"%s\"",
                             sbx_option_type_name(spec->type), v->text);
            break;
        }
        if (sbx_options_set(o, k->text, v->text, &e) != SBX_OK)
            st = config_fail(L, v, path, "%s", e.message);
    }
    return st;
}

/* A key of a profile that is not in config_profile_fields: the block of its own provider (read by
 * that provider's option specs), or a misplaced block of another provider. */
static sbx_status provider_key(loader *L, const config_node *k, const config_node *v,
                               const char *path, const char *value_path, void *section, bool *known)
{
    sbx_profile_config *p = section;
    *known = true;
    if (strcmp(k->text, p->type) == 0)
        return parse_provider_block(L, v, value_path, p->options);
    if (sbx_provider_lookup(k->text) != NULL || config_in_list(known_provider_names, k->text))
        return config_fail(L, k, path,
                           "a '%s' block in a profile of type '%s'; a profile takes only the block "
                           "of its own provider (`%s:`); move it to a profile with `type: %s`",
                           k->text, p->type, p->type, k->text);
    *known = false;
    return SBX_OK;
}

/* The provider named by a profile's `type` (read before its other keys: it decides which
 * provider block is accepted); NULL after an error. */
static const sbx_provider_ops *profile_type(loader *L, const config_node *type_node,
                                            const char *path, sbx_status *st)
{
    char tpath[300];
    config_subpath(tpath, sizeof(tpath), path, "type");
    *st = config_need_scalar(L, type_node, tpath, "a provider name");
    if (*st != SBX_OK)
        return NULL;
    const sbx_provider_ops *ops = sbx_provider_lookup(type_node->text);
    if (ops != NULL)
        return ops;
    const sbx_provider_ops *const *list = NULL;
    size_t n = sbx_provider_builtins(&list);
    const char *names[SBX_MAX_PROVIDERS + 1];
    for (size_t i = 0; i < n; i++)
        names[i] = list[i]->name;
    names[n] = NULL;
    char hint[128];
    config_suggestion(hint, sizeof(hint), type_node->text, names);
    *st = config_fail(L, type_node, tpath,
                      "unknown provider type '%s'%s; the providers in this build are: %s",
                      type_node->text, hint, sbx_provider_names());
    return NULL;
}

/* The rules between a profile's keys: idle_action against the provider and the scope, and
 * the environment matrix of DESIGN §5 in both directions. */
static sbx_status check_profile(loader *L, const config_node *map, const char *path,
                                const sbx_profile_config *p, const sbx_provider_ops *ops,
                                const config_node *const *at)
{
    const config_node *env_node = config_field_node(config_profile_fields, at, "environment");
    const config_node *idle_node = config_field_node(config_profile_fields, at, "idle_action");
    const config_node *type_node = config_field_node(config_profile_fields, at, "type");
    const config_node *attach_key = NULL;
    for (size_t i = 0; i + 1 < map->n_kids; i += 2)
        if (map->kids[i + 1] == config_field_node(config_profile_fields, at, "attach_to"))
            attach_key = map->kids[i];
    /* idle_action: pause needs a provider that can pause, and something to pause. */
    if (p->idle_pause && ops->pause == NULL)
        return config_fail(
            L, idle_node, path,
            "profile '%s': idle_action is pause, but provider '%s' cannot pause "
            "sandboxes; use idle_action: reset (providers that pause: see sbx providers, "
            "PAUSE)",
            p->name, ops->name);
    if (p->idle_pause && (p->idle_timeout_s == 0 || p->scope == SBX_SCOPE_PER_CALL))
        return config_fail(
            L, idle_node, path,
            "profile '%s': idle_action pause needs idle_timeout_s > 0 and a per_session "
            "or per_runtime scope (a per_call sandbox is never idle)",
            p->name);
    bool provisions = (ops->traits & SBX_PROVIDER_PROVISIONS) != 0;
    bool attaches = (ops->traits & SBX_PROVIDER_ATTACHES) != 0;
    if (p->environment == SBX_ENV_MANAGED) {
        if (!provisions)
            return config_fail(
                L, env_node ? env_node : type_node, path,
                "profile '%s': provider '%s' cannot create sandboxes, it only attaches "
                "to existing ones; set `environment: attached` with `attach_to: <id>`, "
                "or use a provider that provisions",
                p->name, ops->name);
        if (attach_key != NULL)
            return config_fail(L, attach_key, path,
                               "profile '%s': attach_to is only used with `environment: attached`; "
                               "set that, or remove attach_to to let sbx create sandboxes",
                               p->name);
    } else {
        if (!attaches)
            return config_fail(L, env_node, path,
                               "profile '%s': provider '%s' cannot attach to sandboxes it did not "
                               "create; use `environment: managed` (and remove attach_to)",
                               p->name, ops->name);
        if (p->attach_to == NULL || p->attach_to[0] == '\0')
            return config_fail(L, env_node, path,
                               "profile '%s': `environment: attached` needs `attach_to: <the "
                               "provider's id of the existing sandbox>`",
                               p->name);
    }
    /* What the provider would refuse in every request of this profile is refused now. */
    sbx_error perr = {0};
    if (ops->check_profile != NULL && ops->check_profile(p, &perr) != SBX_OK) {
        const config_node *policy_node = config_field_node(config_profile_fields, at, "policy");
        return config_fail(L, policy_node ? policy_node : type_node, path, "profile '%s': %s",
                           p->name, perr.message);
    }
    return SBX_OK;
}

/* One profile: its name, its type, then each key by config_profile_fields, then check_profile. */
static sbx_status parse_profile(loader *L, const config_node *key, const config_node *map,
                                sbx_profile_config *p)
{
    char path[256];
    snprintf(path, sizeof(path), "sandbox.profiles.%s", key->text);
    if (!config_name_ok(key->text, CONFIG_PROFILE_NAME_MAX))
        return config_fail(L, key, "sandbox.profiles",
                           "'%s' is not a valid profile name; use 1 to %d characters of letters, "
                           "digits, '.', '-', '_'",
                           key->text, CONFIG_PROFILE_NAME_MAX);
    if (map->kind != CONFIG_MAP)
        return config_fail(L, config_node_is_null(map) ? key : map, path,
                           "a profile is a mapping with at least `type` (one of: %s)",
                           sbx_provider_names());
    const config_node *type_node = config_map_value(map, "type");
    if (type_node == NULL)
        return config_fail(L, key, path, "profile '%s' has no `type`; accepted: %s", key->text,
                           sbx_provider_names());
    sbx_status st = SBX_OK;
    const sbx_provider_ops *ops = profile_type(L, type_node, path, &st);
    if (ops == NULL)
        return st;
    if (!profile_defaults(p, key->text, ops->name, ops))
        return config_oom(L);
    p->line = key->line;
    p->column = key->column;
    const config_node *at[FIELDS_MAX];
    const extra_key provider_block = {ops->name, provider_key};
    st = config_parse_fields(L, map, path, config_profile_fields, p, at, &provider_block);
    return st == SBX_OK ? check_profile(L, map, path, p, ops, at) : st;
}

/* Each profile's fallbacks name other managed profiles of the file (a fallback provisions a
 * new sandbox, which an attached profile never does), and only a managed profile has any. */
static sbx_status check_fallbacks(loader *L, const config_node *map)
{
    sbx_config *cfg = L->cfg;
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        if (p->n_fallback == 0)
            continue;
        const config_node *at = config_map_value(map->kids[2 * i + 1], "fallback");
        if (at == NULL)
            at = map->kids[2 * i];
        char path[300];
        snprintf(path, sizeof(path), "sandbox.profiles.%s.fallback", p->name);
        if (p->environment != SBX_ENV_MANAGED)
            return config_fail(
                L, at, path,
                "profile '%s' is attached: it never provisions, so it has nothing to "
                "fall back from; remove fallback",
                p->name);
        for (size_t f = 0; f < p->n_fallback; f++) {
            const sbx_profile_config *q = NULL;
            for (size_t k = 0; k < cfg->n_profiles; k++)
                if (strcmp(cfg->profiles[k].name, p->fallback[f]) == 0)
                    q = &cfg->profiles[k];
            const config_node *item = at->kind == CONFIG_SEQ && f < at->n_kids ? at->kids[f] : at;
            if (q == NULL)
                return config_fail(L, item, path,
                                   "no profile named '%s'; fallback names profiles of this file",
                                   p->fallback[f]);
            if (q == p)
                return config_fail(L, item, path, "profile '%s' falls back to itself", p->name);
            if (q->environment != SBX_ENV_MANAGED)
                return config_fail(
                    L, item, path,
                    "fallback '%s' is an attached profile; a fallback must provision "
                    "sandboxes (environment: managed)",
                    q->name);
        }
    }
    return SBX_OK;
}

sbx_status config_parse_profiles(loader *L, const config_node *map)
{
    size_t pairs = 0;
    sbx_status st = config_need_map(L, map, "sandbox.profiles", &pairs);
    if (st != SBX_OK)
        return st;
    if (pairs > CONFIG_MAX_PROFILES)
        return config_fail(L, map, "sandbox.profiles", "more than %d profiles",
                           CONFIG_MAX_PROFILES);
    if (pairs == 0)
        return SBX_OK;
    L->cfg->profiles = calloc(pairs, sizeof(*L->cfg->profiles));
    if (L->cfg->profiles == NULL)
        return config_oom(L);
    for (size_t i = 0; i < pairs; i++) {
        sbx_profile_config *p = &L->cfg->profiles[L->cfg->n_profiles++];
        st = parse_profile(L, map->kids[2 * i], map->kids[2 * i + 1], p);
        if (st != SBX_OK)
            return st;
    }
    return check_fallbacks(L, map);
}

/* Adds the built-in `local` profile named "default" (ops may be NULL: no registry needed). */
bool config_add_builtin_profile(sbx_config *cfg, const sbx_provider_ops *ops)
{
    cfg->profiles = calloc(1, sizeof(*cfg->profiles));
    if (cfg->profiles == NULL)
        return false;
    cfg->n_profiles = 1;
    return profile_defaults(&cfg->profiles[0], DEFAULT_PROFILE_NAME, DEFAULT_PROVIDER, ops);
}

/* ---- names of the enumerations (include/sbx/config.h) ------------------------------- */

const char *sbx_scope_name(sbx_scope s)
{
    return (unsigned)s < 3 ? scope_choices[s] : "unknown";
}

const char *sbx_environment_name(sbx_environment e)
{
    return (unsigned)e < 2 ? environment_choices[e] : "unknown";
}
