/* config_read.c - reading values out of the config's node tree (config_yaml.c) for the loader:
 * errors that name file:line:column and the key path, "did you mean" suggestions, the strict
 * readers of each kind of value, and the one loop that reads a section by its key table
 * (config_parse_fields), applies a table's defaults (config_apply_defaults) and reports unknown
 * keys with the accepted ones. The tables themselves are config_schema.c's and config_profile.c's.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_impl.h"
#include "core/net.h"

/* Key names that would hold a secret inline. Matching keys are refused with a pointer to the
 * `<key>_env` form, so a pasted API key never sits in a file that gets committed or shared. */
static const char *const secret_key_names[] = {"api_key",
                                               "apikey",
                                               "token",
                                               "password",
                                               "passwd",
                                               "secret",
                                               "secret_key",
                                               "access_key",
                                               "access_key_id",
                                               "secret_access_key",
                                               "aws_secret_access_key",
                                               "client_secret",
                                               "private_key",
                                               "auth_token",
                                               "bearer_token",
                                               "session_token",
                                               "credentials",
                                               NULL};
static const char *const secret_key_suffixes[] = {
    "_token", "_password", "_secret", "_api_key", "_secret_key", "_access_key", NULL};

sbx_status config_fail(loader *L, const config_node *at, const char *path, const char *fmt, ...)
{
    char what[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return sbx_error_set(L->err, SBX_E_CONFIG, "%s:%d:%d: %s: %s", L->name, at ? at->line : 1,
                         at ? at->column : 1, path, what);
}

sbx_status config_oom(loader *L)
{
    return sbx_error_set(L->err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", L->name);
}

bool config_in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

static bool looks_like_secret(const char *key)
{
    if (config_in_list(secret_key_names, key))
        return true;
    size_t len = strlen(key);
    for (size_t i = 0; secret_key_suffixes[i] != NULL; i++) {
        size_t n = strlen(secret_key_suffixes[i]);
        if (len > n && strcmp(key + len - n, secret_key_suffixes[i]) == 0)
            return true;
    }
    return false;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), capped: only small distances
 * matter for a config_suggestion, and the cap bounds the work for long keys. */
#define SUGGEST_MAX_DISTANCE 2
#define SUGGEST_MAX_LEN 64
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
        return SIZE_MAX;
    /* three rolling rows (the swap looks two rows back): a few hundred bytes of stack */
    size_t rows[3][SUGGEST_MAX_LEN + 1];
    size_t *two_back = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                two_back[j - 2] + 1 < best)
                best = two_back[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = two_back;
        two_back = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

/* " (did you mean 'scope'?)" for the closest accepted word, or "" when none is close. */
void config_suggestion(char *buf, size_t size, const char *word, const char *const *accepted)
{
    const char *best = NULL;
    size_t best_distance = SUGGEST_MAX_DISTANCE + 1;
    for (size_t i = 0; accepted[i] != NULL; i++) {
        size_t d = edit_distance(word, accepted[i]);
        if (d < best_distance && d < strlen(accepted[i])) {
            best = accepted[i];
            best_distance = d;
        }
    }
    if (best != NULL)
        snprintf(buf, size, " (did you mean '%s'?)", best);
    else if (size > 0)
        buf[0] = '\0';
}

sbx_status config_unknown_key(loader *L, const config_node *key, const char *path,
                              const char *const *accepted)
{
    char list[SBX_ERROR_MAX / 2];
    config_join(list, sizeof(list), accepted);
    char hint[128];
    config_suggestion(hint, sizeof(hint), key->text, accepted);
    if (looks_like_secret(key->text))
        return config_fail(
            L, key, path,
            "'%s' looks like an inline secret; secrets never go in the config file: put "
            "it in an environment variable and name the variable with `%s_env: "
            "VARIABLE_NAME` where the provider accepts it (accepted keys here: %s)",
            key->text, key->text, list);
    return config_fail(L, key, path, "unknown key '%s'%s; accepted keys here: %s", key->text, hint,
                       list);
}

const char *config_kind_name(const config_node *n)
{
    if (config_node_is_null(n))
        return "nothing (null)";
    return n->kind == CONFIG_MAP ? "a mapping" : n->kind == CONFIG_SEQ ? "a list" : "a scalar";
}

/* Builds "parent.key" into buf. */
const char *config_subpath(char *buf, size_t size, const char *parent, const char *key)
{
    int n = snprintf(buf, size, "%s.%s", parent, key);
    if (n < 0 || (size_t)n >= size) /* a path that long is cut; the line:column still point */
        memcpy(buf + size - 4, "...", 4);
    return buf;
}

/* A mapping (or null = empty mapping: returns SBX_OK with *pairs 0). */
sbx_status config_need_map(loader *L, const config_node *v, const char *path, size_t *pairs)
{
    *pairs = 0;
    if (v == NULL || config_node_is_null(v))
        return SBX_OK;
    if (v->kind != CONFIG_MAP)
        return config_fail(L, v, path, "expected a mapping of keys, got %s", config_kind_name(v));
    *pairs = v->n_kids / 2;
    return SBX_OK;
}

sbx_status config_need_scalar(loader *L, const config_node *v, const char *path,
                              const char *expected)
{
    if (v->kind != CONFIG_SCALAR)
        return config_fail(L, v, path, "expected %s, got %s", expected, config_kind_name(v));
    if (config_node_is_null(v))
        return config_fail(L, v, path, "needs a value: %s", expected);
    return SBX_OK;
}

sbx_status config_get_string(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = config_need_scalar(L, v, path, "a string");
    if (st != SBX_OK)
        return st;
    char *copy = strdup(v->text);
    if (copy == NULL)
        return config_oom(L);
    free(*out);
    *out = copy;
    return SBX_OK;
}

static sbx_status get_int(loader *L, const config_node *v, const char *path, int64_t min,
                          int64_t max, int64_t *out)
{
    char expected[128];
    snprintf(expected, sizeof(expected), "an integer from %lld to %lld", (long long)min,
             (long long)max);
    sbx_status st = config_need_scalar(L, v, path, expected);
    if (st != SBX_OK)
        return st;
    int64_t n;
    if (!v->plain || !config_parse_int(v->text, &n))
        return config_fail(L, v, path, "expected %s, got '%s'", expected, v->text);
    if (n < min || n > max)
        return config_fail(L, v, path, "%lld is out of range; accepted: %lld to %lld", (long long)n,
                           (long long)min, (long long)max);
    *out = n;
    return SBX_OK;
}

static sbx_status get_bool(loader *L, const config_node *v, const char *path, bool *out)
{
    sbx_status st = config_need_scalar(L, v, path, "true or false");
    if (st != SBX_OK)
        return st;
    if (v->plain && strcmp(v->text, "true") == 0)
        *out = true;
    else if (v->plain && strcmp(v->text, "false") == 0)
        *out = false;
    else /* yes/no/on/off are YAML 1.1 booleans elsewhere; refuse them rather than guess */
        return config_fail(L, v, path, "expected true or false, got '%s'", v->text);
    return SBX_OK;
}

static sbx_status get_enum(loader *L, const config_node *v, const char *path,
                           const char *const *choices, int *out)
{
    char list[512];
    config_join(list, sizeof(list), choices);
    char expected[600];
    snprintf(expected, sizeof(expected), "one of: %s", list);
    sbx_status st = config_need_scalar(L, v, path, expected);
    if (st != SBX_OK)
        return st;
    for (int i = 0; choices[i] != NULL; i++)
        if (strcmp(choices[i], v->text) == 0) {
            *out = i;
            return SBX_OK;
        }
    char hint[128];
    config_suggestion(hint, sizeof(hint), v->text, choices);
    return config_fail(L, v, path, "'%s' is not accepted%s; accepted: %s", v->text, hint, list);
}

static sbx_status get_env_name(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = config_need_scalar(L, v, path, "the name of an environment variable");
    if (st != SBX_OK)
        return st;
    if (v->text[0] == '$' && config_env_name_ok(v->text + 1))
        return config_fail(L, v, path, "write the variable's name without '$': %s", v->text + 1);
    if (!config_env_name_ok(v->text))
        return config_fail(
            L, v, path,
            "'%.32s%s' is not an environment variable name; name the variable that holds "
            "the secret (letters, digits, '_'; e.g. SBX_TOKEN), never the secret itself",
            v->text, v->len > 32 ? "..." : "");
    return config_get_string(L, v, path, out);
}

/* A file path; relative paths resolve against the config file's directory. */
sbx_status config_get_path(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = config_need_scalar(L, v, path, "a file path");
    if (st != SBX_OK)
        return st;
    if (v->text[0] == '/' || L->dir == NULL)
        return config_get_string(L, v, path, out);
    size_t n = strlen(L->dir) + 1 + v->len + 1;
    if (n > PATH_MAX)
        return config_fail(L, v, path, "the path is longer than %d bytes", PATH_MAX);
    char *joined = malloc(n);
    if (joined == NULL)
        return config_oom(L);
    snprintf(joined, n, "%s/%s", L->dir, v->text);
    free(*out);
    *out = joined;
    return SBX_OK;
}

/* A list of strings (null or [] = empty), each passing `check` when given. */
sbx_status config_get_string_list(loader *L, const config_node *v, const char *path,
                                  bool (*check)(const char *), const char *what, size_t *n,
                                  char ***items)
{
    if (config_node_is_null(v))
        return SBX_OK;
    if (v->kind != CONFIG_SEQ)
        return config_fail(L, v, path, "expected a list of %s (e.g. [a, b]), got %s", what,
                           config_kind_name(v));
    if (v->n_kids > CONFIG_LIST_MAX)
        return config_fail(L, v, path, "more than %d items", CONFIG_LIST_MAX);
    for (size_t i = 0; i < v->n_kids; i++) {
        const config_node *item = v->kids[i];
        sbx_status st = config_need_scalar(L, item, path, what);
        if (st != SBX_OK)
            return st;
        if (check != NULL && !check(item->text))
            return config_fail(L, item, path, "'%s' is not %s", item->text, what);
        if (!sbx_add_string(n, items, item->text))
            return config_oom(L);
    }
    return SBX_OK;
}

bool config_name_ok(const char *s, size_t max)
{
    size_t len = strlen(s);
    if (len == 0 || len > max)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* ---- host:port and endpoints ------------------------------------------------------------ */

/* Splits "host:port" / "[v6]:port"; false when malformed. */
bool config_split_host_port(const char *s, size_t *host_len, int64_t *port)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s)
        return false;
    if (s[0] == '[' && colon[-1] != ']')
        return false;
    if (!config_parse_int(colon + 1, port) || *port < 0 || *port > 65535)
        return false;
    *host_len = (size_t)(colon - s);
    return true;
}

bool config_listen_is_loopback(const char *listen)
{
    size_t host_len = 0;
    int64_t port = 0;
    return config_split_host_port(listen, &host_len, &port) &&
           sbx_net_host_is_loopback(listen, host_len);
}

static void *member_at(void *section, size_t offset)
{
    return (char *)section + offset;
}

/* Stores v into an integer member of size bytes (bool, enum, protobuf_c_boolean, uint32_t,
 * int64_t, uint64_t); memcpy keeps it free of aliasing assumptions. */
static void store_int(void *at, size_t size, int64_t v)
{
    if (size == 1) {
        uint8_t b = (uint8_t)v;
        memcpy(at, &b, 1);
    } else if (size == 2) {
        uint16_t h = (uint16_t)v;
        memcpy(at, &h, 2);
    } else if (size == 4) {
        uint32_t w = (uint32_t)v;
        memcpy(at, &w, 4);
    } else {
        memcpy(at, &v, sizeof(v));
    }
}

/* Writes the default of every key of fields (and of nested sections) into section. False
 * when out of memory. */
bool config_apply_defaults(const field *fields, void *section)
{
    for (size_t f = 0; fields[f].key != NULL; f++) {
        const field *fd = &fields[f];
        void *at = member_at(section, fd->offset);
        switch (fd->kind) {
        case F_INT:
        case F_BOOL:
        case F_CHOICE: store_int(at, fd->size, fd->def); break;
        case F_REAL: memcpy(at, &fd->def_real, sizeof(double)); break;
        case F_SECTION:
            if (!config_apply_defaults(fd->sub, at))
                return false;
            break;
        default:
            if (fd->def_str != NULL) {
                char *copy = strdup(fd->def_str);
                if (copy == NULL)
                    return false;
                free(*(char **)at);
                *(char **)at = copy;
            }
            break;
        }
    }
    return true;
}

/* HOST:PORT of a listener (worker.listen, worker.metrics_listen), kept as the string. */
static sbx_status get_listen(loader *L, const config_node *v, const char *p, char **out,
                             const char *example)
{
    sbx_status st = config_get_string(L, v, p, out);
    size_t host_len = 0;
    int64_t port = 0;
    if (st == SBX_OK && !config_split_host_port(v->text, &host_len, &port))
        st =
            config_fail(L, v, p, "'%s' is not HOST:PORT; accepted e.g. %s (port 0 = any free port)",
                        v->text, example);
    return st;
}

/* A number (fractions allowed) from fd->min to fd->max. */
static sbx_status get_real(loader *L, const config_node *v, const char *p, const field *fd,
                           double *out)
{
    sbx_status st = config_need_scalar(L, v, p, fd->what);
    if (st != SBX_OK)
        return st;
    char *end = NULL;
    errno = 0;
    double x = strtod(v->text, &end);
    if (!v->plain || errno != 0 || end == v->text || *end != '\0' || !isfinite(x))
        return config_fail(L, v, p, "expected %s, got '%s'", fd->what, v->text);
    if (x < (double)fd->min || x > (double)fd->max)
        return config_fail(L, v, p, "%s is out of range; accepted: %s", v->text, fd->what);
    *out = x;
    return SBX_OK;
}

/* Reads the value v of the key fd of a section at p into section. */
static sbx_status read_field(loader *L, const field *fd, const config_node *v, const char *p,
                             void *section)
{
    void *at = member_at(section, fd->offset);
    char **str = at;
    int64_t n = 0;
    int idx = 0;
    bool b = false;
    sbx_status st = SBX_OK;
    switch (fd->kind) {
    case F_STRING: return config_get_string(L, v, p, str);
    case F_PATH: return config_get_path(L, v, p, str);
    case F_ENV: return get_env_name(L, v, p, str);
    case F_LISTEN: return get_listen(L, v, p, str, fd->what);
    case F_REAL: return get_real(L, v, p, fd, at);
    case F_ENUM:
        st = get_enum(L, v, p, fd->choices, &idx);
        return st == SBX_OK ? config_get_string(L, v, p, str) : st;
    case F_CHOICE:
        st = get_enum(L, v, p, fd->choices, &idx);
        if (st == SBX_OK)
            store_int(at, fd->size, fd->values != NULL ? fd->values[idx] : idx);
        return st;
    case F_INT:
        st = get_int(L, v, p, fd->min, fd->max, &n);
        if (st == SBX_OK)
            store_int(at, fd->size, n);
        return st;
    case F_BOOL:
        st = get_bool(L, v, p, &b);
        if (st == SBX_OK)
            store_int(at, fd->size, b);
        return st;
    case F_LIST:
        return config_get_string_list(L, v, p, fd->check, fd->what,
                                      (size_t *)member_at(section, fd->count_offset), (char ***)at);
    case F_SECTION: return config_parse_section(L, v, p, fd->sub, at, fd->after);
    case F_CUSTOM: return fd->custom(L, v, p, section);
    case F_SKIP: return SBX_OK;
    }
    return SBX_OK;
}

/* Reads map (the section at path) by the table fields into section. at[i] (when at is not
 * NULL) is the value node of fields[i], NULL when the key is absent, for checks that name
 * it. Keys not in the table go to extra (when given). Stops at the first error; an unknown
 * key lists the table's keys (and extra's). */
sbx_status config_parse_fields(loader *L, const config_node *map, const char *path,
                               const field *fields, void *section, const config_node **at,
                               const extra_key *extra)
{
    const char *accepted[FIELDS_MAX + 2];
    size_t n_fields = 0;
    for (; n_fields < FIELDS_MAX && fields[n_fields].key != NULL; n_fields++) {
        accepted[n_fields] = fields[n_fields].key;
        if (at != NULL)
            at[n_fields] = NULL;
    }
    accepted[n_fields] = extra != NULL ? extra->key : NULL;
    accepted[n_fields + 1] = NULL;
    size_t pairs = 0;
    sbx_status st = config_need_map(L, map, path, &pairs);
    for (size_t i = 0; st == SBX_OK && i < pairs; i++) {
        const config_node *k = map->kids[2 * i], *v = map->kids[2 * i + 1];
        char p[256];
        config_subpath(p, sizeof(p), path, k->text);
        size_t f = 0;
        while (f < n_fields && strcmp(fields[f].key, k->text) != 0)
            f++;
        if (f < n_fields) {
            st = read_field(L, &fields[f], v, p, section);
            if (at != NULL)
                at[f] = v;
            continue;
        }
        bool known = false;
        if (extra != NULL)
            st = extra->parse(L, k, v, path, p, section, &known);
        if (!known)
            st = config_unknown_key(L, k, path, accepted);
    }
    return st;
}

/* A nested section: its keys by the table, then its cross-key rules. */
sbx_status config_parse_section(loader *L, const config_node *map, const char *path,
                                const field *fields, void *section, section_check after)
{
    const config_node *at[FIELDS_MAX];
    sbx_status st = config_parse_fields(L, map, path, fields, section, at, NULL);
    if (st == SBX_OK && after != NULL)
        st = after(L, map, path, section, at);
    return st;
}

/* The value node of key in a config_parse_fields node table (NULL when the file does not set it).
 */
const config_node *config_field_node(const field *fields, const config_node *const *at,
                                     const char *key)
{
    for (size_t f = 0; f < FIELDS_MAX && fields[f].key != NULL; f++)
        if (strcmp(fields[f].key, key) == 0)
            return at[f];
    return NULL;
}

/* The value of key in a mapping (NULL when map is not a mapping or has no such key). */
const config_node *config_map_value(const config_node *map, const char *key)
{
    if (map == NULL || map->kind != CONFIG_MAP)
        return NULL;
    for (size_t i = 0; i + 1 < map->n_kids; i += 2)
        if (strcmp(map->kids[i]->text, key) == 0)
            return map->kids[i + 1];
    return NULL;
}
