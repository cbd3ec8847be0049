/* config.c - the sbx configuration (include/sbx/config.h, DESIGN §10): interprets the tree that
 * config_yaml.c parsed, key by key, against the documented schema, applies every default, and
 * checks what only makes sense together (the environment matrix of DESIGN §5, TLS and auth of
 * a non-loopback worker, the default profile).
 *
 * Every error names file:line:column, the dotted key path, what was wrong and what is accepted;
 * on error nothing is returned (no half-loaded config). Secrets only ever appear as the NAME of
 * an environment variable (`*_env` keys); a key that looks like an inline secret is refused.
 * This file must not open sandboxes, sockets or the secret file, nor create files or
 * directories: it only reads the config file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config_internal.h"
#include "core/limits.h"
#include "core/net.h"
#include "sbx/config.h"
#include "sbx/provider.h"

/* ---- limits and defaults (each a named constant with its reason) ----------------------- */

/* Most profiles in one file: each opens a provider instance; 256 is far past any real fleet. */
#define CONFIG_MAX_PROFILES 256
/* Most worker callers: each is compared on every request; 256 is plenty for service accounts. */
#define CONFIG_MAX_CALLERS 256
/* Longest profile name: it appears in session handles, labels and bindings. */
#define CONFIG_PROFILE_NAME_MAX 64
/* Profiles one profile may fall back to: each is a provisioning attempt on the request's path. */
#define CONFIG_MAX_FALLBACK 8
/* Longest node name: a DNS name. */
#define CONFIG_NODE_NAME_MAX 253

#define DEFAULT_PROFILE_NAME "default"
#define DEFAULT_PROVIDER "local"
#define DEFAULT_IDLE_TIMEOUT_S 1800           /* 30 minutes: a conversation's pause, not a day */
#define MAX_IDLE_TIMEOUT_S (30LL * 24 * 3600) /* 30 days: longer is "never" -- use 0 for that */
/* The policy defaults of DESIGN §10: no network, one core, 512 MiB, 256 processes, 2 minutes. */
#define DEFAULT_POLICY_CPU 1.0
#define DEFAULT_POLICY_MEMORY_MB 512
#define DEFAULT_POLICY_PIDS 256
#define DEFAULT_POLICY_TIMEOUT_MS 120000
#define MAX_POLICY_CPU 1024                       /* cores; beyond any single host */
#define MAX_POLICY_MEMORY_MB (16LL * 1024 * 1024) /* 16 TiB */
#define MAX_POLICY_PIDS 4194304                   /* the kernel's PID_MAX_LIMIT */
#define MAX_POLICY_DISK_MB (1LL << 30)            /* 1 PiB */
#define MAX_POLICY_TIMEOUT_MS                                                                      \
    (7LL * 24 * 3600 * 1000)                /* a week: longer is a service, not a call             \
                                             */
#define MAX_POLICY_OUTPUT_BYTES (1LL << 34) /* 16 GiB per stream */

#define DEFAULT_BROKER_FLAVOR "thread"
#define MAX_BROKER_THREADS 1024 /* executor threads; more only thrash */
#define MAX_BROKER_QUEUE_DEPTH (1 << 20)
#define DEFAULT_BROKER_WAIT_MS 60000
#define MAX_BROKER_WAIT_MS (24LL * 3600 * 1000)
#define MAX_BROKER_LRU (1 << 20)
#define DEFAULT_CONNECT_TIMEOUT_MS 5000
#define MAX_CONNECT_TIMEOUT_MS 600000
/* The queue (NATS JetStream). A name is a subject token and part of stream/bucket names: short
 * and plain. Replicas: JetStream's own limit. The waits: seconds to a day (a worker's longest
 * pause worth waiting for). TTL: up to a month, like the longest idle session. */
#define DEFAULT_QUEUE_NAME "sbx"
#define QUEUE_NAME_MAX 32
#define MAX_QUEUE_REPLICAS 5
#define DEFAULT_QUEUE_ACK_WAIT_MS 30000
#define MIN_QUEUE_ACK_WAIT_MS 100
#define DEFAULT_QUEUE_NODE_WAIT_MS 30000
#define MAX_QUEUE_WAIT_MS (24LL * 3600 * 1000)
#define DEFAULT_QUEUE_TTL_S 86400
#define MAX_QUEUE_TTL_S (30LL * 24 * 3600)
#define DEFAULT_QUEUE_DEDUP_S 600

#define DEFAULT_WORKER_LISTEN "127.0.0.1:7443"
#define DEFAULT_WORKER_MAX_MESSAGE ((long long)SBX_WORKER_DEFAULT_MAX_MESSAGE)
#define MIN_WORKER_MAX_MESSAGE 1024                   /* below this no request fits */
#define MAX_WORKER_MAX_MESSAGE (1024LL * 1024 * 1024) /* 1 GiB: gRPC's own practical ceiling */
#define DEFAULT_WORKER_DRAIN_MS 30000
#define MAX_WORKER_DRAIN_MS 3600000
/* A recording holds whole requests and completions (up to 32 MiB a frame), so a busy worker
 * writes hundreds of MB in minutes: 256 MiB per file times 4 kept files bounds the disk at
 * about 1.25 GiB while keeping the last few hours of a moderate load. */
#define DEFAULT_WORKER_RECORD_MAX (256LL * 1024 * 1024)
#define MAX_WORKER_RECORD_MAX (1LL << 40)
#define DEFAULT_WORKER_RECORD_KEEP 4
#define MAX_WORKER_RECORD_KEEP 100 /* more is an archive, which is logrotate's job */
#define DEFAULT_WORKER_LOG_LEVEL "info"
/* Largest snapshot by default: a workspace of sources, a virtualenv and build output fits;
 * the store is disk on the worker's host, one file per snapshot. */
#define DEFAULT_SNAPSHOT_MAX_MB 1024
/* Highest snapshot_max_mb accepted: 1 TiB, beyond what one host should copy per request. */
#define SNAPSHOT_MAX_MB_LIMIT (1024 * 1024)

/* Provider type names that are part of sbx even when this build lacks one: a block named after
 * one of them inside a profile of another type is a misplaced block, not an unknown key. */
static const char *const known_provider_names[] = {"local",   "docker", "e2b", "daytona",
                                                   "ec2_ssm", "fake",   NULL};

/* The words an enumerated value accepts (also the list printed when a value is unknown). */
static const char *const log_level_choices[] = {"error", "warn", "info", "debug", NULL};
static const char *const serve_choices[] = {"grpc", "queue", "both", NULL};

static const char *const flavor_choices[] = {"embedded", "thread", "remote", "queue", NULL};
static const char *const scope_choices[] = {"per_call", "per_session", "per_runtime", NULL};
static const char *const idle_action_choices[] = {"reset", "pause", NULL};
static const char *const environment_choices[] = {"managed", "attached", NULL};
static const char *const identity_choices[] = {"agent", "user", NULL};
static const char *const egress_choices[] = {"deny", "allow", "allowlist", NULL};

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

/* ---- the loader ------------------------------------------------------------------------ */

typedef struct loader {
    const char *name; /* file name for messages */
    const char *dir;  /* directory relative paths resolve against; NULL: keep as given */
    sbx_error *err;
    sbx_config *cfg;
    const sbx_config_overrides *ov; /* command-line values that replace the file's; NULL: none */
} loader;

static sbx_status fail(loader *L, const config_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static sbx_status fail(loader *L, const config_node *at, const char *path, const char *fmt, ...)
{
    char what[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return sbx_error_set(L->err, SBX_E_CONFIG, "%s:%d:%d: %s: %s", L->name, at ? at->line : 1,
                         at ? at->column : 1, path, what);
}

static sbx_status oom(loader *L)
{
    return sbx_error_set(L->err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", L->name);
}

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

static bool looks_like_secret(const char *key)
{
    if (in_list(secret_key_names, key))
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
 * matter for a suggestion, and the cap bounds the work for long keys. */
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
static void suggestion(char *buf, size_t size, const char *word, const char *const *accepted)
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

static sbx_status unknown_key(loader *L, const config_node *key, const char *path,
                              const char *const *accepted)
{
    char list[SBX_ERROR_MAX / 2];
    config_join(list, sizeof(list), accepted);
    char hint[128];
    suggestion(hint, sizeof(hint), key->text, accepted);
    if (looks_like_secret(key->text))
        return fail(L, key, path,
                    "'%s' looks like an inline secret; secrets never go in the config file: put "
                    "it in an environment variable and name the variable with `%s_env: "
                    "VARIABLE_NAME` where the provider accepts it (accepted keys here: %s)",
                    key->text, key->text, list);
    return fail(L, key, path, "unknown key '%s'%s; accepted keys here: %s", key->text, hint, list);
}

static const char *kind_name(const config_node *n)
{
    if (config_node_is_null(n))
        return "nothing (null)";
    return n->kind == CONFIG_MAP ? "a mapping" : n->kind == CONFIG_SEQ ? "a list" : "a scalar";
}

/* Builds "parent.key" into buf. */
static const char *subpath(char *buf, size_t size, const char *parent, const char *key)
{
    int n = snprintf(buf, size, "%s.%s", parent, key);
    if (n < 0 || (size_t)n >= size) /* a path that long is cut; the line:column still point */
        memcpy(buf + size - 4, "...", 4);
    return buf;
}

/* A mapping (or null = empty mapping: returns SBX_OK with *pairs 0). */
static sbx_status need_map(loader *L, const config_node *v, const char *path, size_t *pairs)
{
    *pairs = 0;
    if (v == NULL || config_node_is_null(v))
        return SBX_OK;
    if (v->kind != CONFIG_MAP)
        return fail(L, v, path, "expected a mapping of keys, got %s", kind_name(v));
    *pairs = v->n_kids / 2;
    return SBX_OK;
}

static sbx_status need_scalar(loader *L, const config_node *v, const char *path,
                              const char *expected)
{
    if (v->kind != CONFIG_SCALAR)
        return fail(L, v, path, "expected %s, got %s", expected, kind_name(v));
    if (config_node_is_null(v))
        return fail(L, v, path, "needs a value: %s", expected);
    return SBX_OK;
}

static sbx_status get_string(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = need_scalar(L, v, path, "a string");
    if (st != SBX_OK)
        return st;
    char *copy = strdup(v->text);
    if (copy == NULL)
        return oom(L);
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
    sbx_status st = need_scalar(L, v, path, expected);
    if (st != SBX_OK)
        return st;
    int64_t n;
    if (!v->plain || !config_parse_int(v->text, &n))
        return fail(L, v, path, "expected %s, got '%s'", expected, v->text);
    if (n < min || n > max)
        return fail(L, v, path, "%lld is out of range; accepted: %lld to %lld", (long long)n,
                    (long long)min, (long long)max);
    *out = n;
    return SBX_OK;
}

static sbx_status get_bool(loader *L, const config_node *v, const char *path, bool *out)
{
    sbx_status st = need_scalar(L, v, path, "true or false");
    if (st != SBX_OK)
        return st;
    if (v->plain && strcmp(v->text, "true") == 0)
        *out = true;
    else if (v->plain && strcmp(v->text, "false") == 0)
        *out = false;
    else /* yes/no/on/off are YAML 1.1 booleans elsewhere; refuse them rather than guess */
        return fail(L, v, path, "expected true or false, got '%s'", v->text);
    return SBX_OK;
}

static sbx_status get_enum(loader *L, const config_node *v, const char *path,
                           const char *const *choices, int *out)
{
    char list[512];
    config_join(list, sizeof(list), choices);
    char expected[600];
    snprintf(expected, sizeof(expected), "one of: %s", list);
    sbx_status st = need_scalar(L, v, path, expected);
    if (st != SBX_OK)
        return st;
    for (int i = 0; choices[i] != NULL; i++)
        if (strcmp(choices[i], v->text) == 0) {
            *out = i;
            return SBX_OK;
        }
    char hint[128];
    suggestion(hint, sizeof(hint), v->text, choices);
    return fail(L, v, path, "'%s' is not accepted%s; accepted: %s", v->text, hint, list);
}

static sbx_status get_env_name(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = need_scalar(L, v, path, "the name of an environment variable");
    if (st != SBX_OK)
        return st;
    if (v->text[0] == '$' && config_env_name_ok(v->text + 1))
        return fail(L, v, path, "write the variable's name without '$': %s", v->text + 1);
    if (!config_env_name_ok(v->text))
        return fail(L, v, path,
                    "'%.32s%s' is not an environment variable name; name the variable that holds "
                    "the secret (letters, digits, '_'; e.g. SBX_TOKEN), never the secret itself",
                    v->text, v->len > 32 ? "..." : "");
    return get_string(L, v, path, out);
}

/* A file path; relative paths resolve against the config file's directory. */
static sbx_status get_path(loader *L, const config_node *v, const char *path, char **out)
{
    sbx_status st = need_scalar(L, v, path, "a file path");
    if (st != SBX_OK)
        return st;
    if (v->text[0] == '/' || L->dir == NULL)
        return get_string(L, v, path, out);
    size_t n = strlen(L->dir) + 1 + v->len + 1;
    if (n > PATH_MAX)
        return fail(L, v, path, "the path is longer than %d bytes", PATH_MAX);
    char *joined = malloc(n);
    if (joined == NULL)
        return oom(L);
    snprintf(joined, n, "%s/%s", L->dir, v->text);
    free(*out);
    *out = joined;
    return SBX_OK;
}

/* A list of strings (null or [] = empty), each passing `check` when given. */
static sbx_status get_string_list(loader *L, const config_node *v, const char *path,
                                  bool (*check)(const char *), const char *what, size_t *n,
                                  char ***items)
{
    if (config_node_is_null(v))
        return SBX_OK;
    if (v->kind != CONFIG_SEQ)
        return fail(L, v, path, "expected a list of %s (e.g. [a, b]), got %s", what, kind_name(v));
    if (v->n_kids > CONFIG_LIST_MAX)
        return fail(L, v, path, "more than %d items", CONFIG_LIST_MAX);
    for (size_t i = 0; i < v->n_kids; i++) {
        const config_node *item = v->kids[i];
        sbx_status st = need_scalar(L, item, path, what);
        if (st != SBX_OK)
            return st;
        if (check != NULL && !check(item->text))
            return fail(L, item, path, "'%s' is not %s", item->text, what);
        if (!sbx_add_string(n, items, item->text))
            return oom(L);
    }
    return SBX_OK;
}

static bool absolute_path_ok(const char *s)
{
    return s[0] == '/';
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

static bool name_ok(const char *s, size_t max)
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
static bool split_host_port(const char *s, size_t *host_len, int64_t *port)
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

static bool listen_is_loopback(const char *listen)
{
    size_t host_len = 0;
    int64_t port = 0;
    return split_host_port(listen, &host_len, &port) && sbx_net_host_is_loopback(listen, host_len);
}

/* ---- table-driven sections ------------------------------------------------------------ */

/* What a key of a section holds. The plain kinds are read by parse_fields itself; F_SECTION
 * is a nested block with a table of its own; F_CUSTOM keys (a value with a rule of its own)
 * are read by their function; F_SKIP keys are read before the table (a profile's `type`, the
 * top-level `sandbox`): parse_fields only records where they are. */
typedef enum field_kind {
    F_STRING,  /* char *: the string as written */
    F_PATH,    /* char *: a path, relative ones resolved against the file's directory */
    F_ENV,     /* char *: the NAME of an environment variable */
    F_ENUM,    /* char *: one of choices, kept as the chosen string */
    F_CHOICE,  /* an integer member (enum or bool): values[index of the choice], or the index */
    F_INT,     /* an integer member of any width: min..max */
    F_BOOL,    /* bool or protobuf_c_boolean: true or false */
    F_REAL,    /* double: min..max, `what` says what is expected */
    F_LIST,    /* char ** with its size_t count: strings, each passing check (what an item is) */
    F_LISTEN,  /* char *: HOST:PORT of a listener, `what` gives examples */
    F_SECTION, /* a nested mapping read by table sub into the struct at offset, then after */
    F_CUSTOM,  /* custom reads the value */
    F_SKIP,    /* read before parse_fields runs */
} field_kind;

typedef struct field field;

/* The cross-key rules of a section, run once its keys are read: at[i] is the value node of
 * fields[i] (NULL when the file does not set it), for messages that point at it. */
typedef sbx_status (*section_check)(loader *L, const config_node *map, const char *path,
                                    void *section, const config_node *const *at);

/* One key of a section: its kind, where its value goes (offset and size of the member in the
 * section's struct), its bounds and its default. apply_defaults writes every default, so the
 * defaults of a section are its table's. The order of a table is the order of the "accepted
 * keys" list in messages. */
struct field {
    const char *key;
    field_kind kind;
    size_t offset, size;         /* the member (F_SECTION: the nested struct) */
    size_t count_offset;         /* F_LIST: the size_t item count */
    int64_t min, max;            /* F_INT, F_REAL */
    int64_t def;                 /* F_INT, F_BOOL, F_CHOICE: the default value stored */
    double def_real;             /* F_REAL */
    const char *def_str;         /* string kinds: the default (NULL: none) */
    const char *const *choices;  /* F_ENUM, F_CHOICE */
    const int *values;           /* F_CHOICE: what each choice stores; NULL: its index */
    const char *what;            /* F_LIST, F_REAL, F_LISTEN: the words of messages */
    bool (*check)(const char *); /* F_LIST: each item's rule; NULL: any string */
    const field *sub;            /* F_SECTION */
    section_check after;         /* F_SECTION: its cross-key rules; NULL: none */
    sbx_status (*custom)(loader *L, const config_node *v, const char *path,
                         void *section); /* F_CUSTOM */
};

/* Most keys one section has (the accepted-keys list and the node table are this big). */
#define FIELDS_MAX 24

#define MEMBER(type, m) .offset = offsetof(type, m), .size = sizeof(((type *)0)->m)
#define STR(type, m, k)                                                                            \
    {                                                                                              \
        .key = (k), .kind = F_STRING, MEMBER(type, m)                                              \
    }
#define STRD(type, m, k, d)                                                                        \
    {                                                                                              \
        .key = (k), .kind = F_STRING, MEMBER(type, m), .def_str = (d)                              \
    }
#define PATHF(type, m, k)                                                                          \
    {                                                                                              \
        .key = (k), .kind = F_PATH, MEMBER(type, m)                                                \
    }
#define ENVF(type, m, k)                                                                           \
    {                                                                                              \
        .key = (k), .kind = F_ENV, MEMBER(type, m)                                                 \
    }
#define INTF(type, m, k, lo, hi, d)                                                                \
    {                                                                                              \
        .key = (k), .kind = F_INT, MEMBER(type, m), .min = (lo), .max = (hi), .def = (d)           \
    }
#define BOOLF(type, m, k, d)                                                                       \
    {                                                                                              \
        .key = (k), .kind = F_BOOL, MEMBER(type, m), .def = (d)                                    \
    }
#define REALF(type, m, k, lo, hi, d, w)                                                            \
    {                                                                                              \
        .key = (k), .kind = F_REAL, MEMBER(type, m), .min = (lo), .max = (hi), .def_real = (d),    \
        .what = (w)                                                                                \
    }
#define ENUMF(type, m, k, c, d)                                                                    \
    {                                                                                              \
        .key = (k), .kind = F_ENUM, MEMBER(type, m), .choices = (c), .def_str = (d)                \
    }
#define CHOICEF(type, m, k, c, v, d)                                                               \
    {                                                                                              \
        .key = (k), .kind = F_CHOICE, MEMBER(type, m), .choices = (c), .values = (v), .def = (d)   \
    }
#define LISTF(type, m, n, k, chk, w)                                                               \
    {                                                                                              \
        .key = (k), .kind = F_LIST, MEMBER(type, m), .count_offset = offsetof(type, n),            \
        .check = (chk), .what = (w)                                                                \
    }
#define LISTENF(type, m, k, examples, d)                                                           \
    {                                                                                              \
        .key = (k), .kind = F_LISTEN, MEMBER(type, m), .what = (examples), .def_str = (d)          \
    }
#define SECTIONF(k, off, table, chk)                                                               \
    {                                                                                              \
        .key = (k), .kind = F_SECTION, .offset = (off), .sub = (table), .after = (chk)             \
    }
#define CUSTOM(k, fn)                                                                              \
    {                                                                                              \
        .key = (k), .kind = F_CUSTOM, .custom = (fn)                                               \
    }
#define SKIP(k)                                                                                    \
    {                                                                                              \
        .key = (k), .kind = F_SKIP                                                                 \
    }
#define FIELDS_END                                                                                 \
    {                                                                                              \
        .key = NULL                                                                                \
    }

/* Keys of a section that are not in its table: a profile's provider block, named by the
 * profile's type. parse sets *known false for a key it does not take either. */
typedef struct extra_key {
    const char *key; /* listed among the accepted keys after the table's */
    sbx_status (*parse)(loader *L, const config_node *k, const config_node *v, const char *path,
                        const char *value_path, void *section, bool *known);
} extra_key;

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
static bool apply_defaults(const field *fields, void *section)
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
            if (!apply_defaults(fd->sub, at))
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
    sbx_status st = get_string(L, v, p, out);
    size_t host_len = 0;
    int64_t port = 0;
    if (st == SBX_OK && !split_host_port(v->text, &host_len, &port))
        st = fail(L, v, p, "'%s' is not HOST:PORT; accepted e.g. %s (port 0 = any free port)",
                  v->text, example);
    return st;
}

/* A number (fractions allowed) from fd->min to fd->max. */
static sbx_status get_real(loader *L, const config_node *v, const char *p, const field *fd,
                           double *out)
{
    sbx_status st = need_scalar(L, v, p, fd->what);
    if (st != SBX_OK)
        return st;
    char *end = NULL;
    errno = 0;
    double x = strtod(v->text, &end);
    if (!v->plain || errno != 0 || end == v->text || *end != '\0' || !isfinite(x))
        return fail(L, v, p, "expected %s, got '%s'", fd->what, v->text);
    if (x < (double)fd->min || x > (double)fd->max)
        return fail(L, v, p, "%s is out of range; accepted: %s", v->text, fd->what);
    *out = x;
    return SBX_OK;
}

static sbx_status parse_section(loader *L, const config_node *map, const char *path,
                                const field *fields, void *section, section_check after);

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
    case F_STRING: return get_string(L, v, p, str);
    case F_PATH: return get_path(L, v, p, str);
    case F_ENV: return get_env_name(L, v, p, str);
    case F_LISTEN: return get_listen(L, v, p, str, fd->what);
    case F_REAL: return get_real(L, v, p, fd, at);
    case F_ENUM:
        st = get_enum(L, v, p, fd->choices, &idx);
        return st == SBX_OK ? get_string(L, v, p, str) : st;
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
        return get_string_list(L, v, p, fd->check, fd->what,
                               (size_t *)member_at(section, fd->count_offset), (char ***)at);
    case F_SECTION: return parse_section(L, v, p, fd->sub, at, fd->after);
    case F_CUSTOM: return fd->custom(L, v, p, section);
    case F_SKIP: return SBX_OK;
    }
    return SBX_OK;
}

/* Reads map (the section at path) by the table fields into section. at[i] (when at is not
 * NULL) is the value node of fields[i], NULL when the key is absent, for checks that name
 * it. Keys not in the table go to extra (when given). Stops at the first error; an unknown
 * key lists the table's keys (and extra's). */
static sbx_status parse_fields(loader *L, const config_node *map, const char *path,
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
    sbx_status st = need_map(L, map, path, &pairs);
    for (size_t i = 0; st == SBX_OK && i < pairs; i++) {
        const config_node *k = map->kids[2 * i], *v = map->kids[2 * i + 1];
        char p[256];
        subpath(p, sizeof(p), path, k->text);
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
            st = unknown_key(L, k, path, accepted);
    }
    return st;
}

/* A nested section: its keys by the table, then its cross-key rules. */
static sbx_status parse_section(loader *L, const config_node *map, const char *path,
                                const field *fields, void *section, section_check after)
{
    const config_node *at[FIELDS_MAX];
    sbx_status st = parse_fields(L, map, path, fields, section, at, NULL);
    if (st == SBX_OK && after != NULL)
        st = after(L, map, path, section, at);
    return st;
}

/* The value node of key in a parse_fields node table (NULL when the file does not set it). */
static const config_node *field_node(const field *fields, const config_node *const *at,
                                     const char *key)
{
    for (size_t f = 0; f < FIELDS_MAX && fields[f].key != NULL; f++)
        if (strcmp(fields[f].key, key) == 0)
            return at[f];
    return NULL;
}

/* The value of key in a mapping (NULL when map is not a mapping or has no such key). */
static const config_node *map_value(const config_node *map, const char *key)
{
    if (map == NULL || map->kind != CONFIG_MAP)
        return NULL;
    for (size_t i = 0; i + 1 < map->n_kids; i += 2)
        if (strcmp(map->kids[i]->text, key) == 0)
            return map->kids[i + 1];
    return NULL;
}

/* ---- broker ---------------------------------------------------------------------------- */

/* sandbox.broker.remote.endpoint: https://HOST[:PORT], or http:// to loopback only. */
static sbx_status get_endpoint(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_remote_config *r = section;
    sbx_status st = get_string(L, v, p, &r->endpoint);
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
        st = fail(L, v, p,
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
        (has_port && (!split_host_port(hostport, &host_len, &port) || port == 0)))
        st = fail(L, v, p,
                  "'%s' is not an endpoint; accepted: https://HOST[:PORT], or "
                  "http://127.0.0.1:PORT (plain h2c only to loopback)",
                  v->text);
    else if (!tls && !sbx_net_host_is_loopback(hostport, host_len))
        st = fail(L, v, p,
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
        return fail(L, map, path,
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
        *st = fail(L, v, "sandbox.broker.queue.url",
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
        *st = fail(L, v, "sandbox.broker.queue.url",
                   "'%s' carries credentials; name them with user + password_env or nkey + "
                   "nkey_seed_env instead",
                   one);
        return false;
    }
    if (hp == NULL || !split_host_port(hp, &host_len, &port) || port == 0) {
        *st = fail(L, v, "sandbox.broker.queue.url",
                   "'%s' is not a NATS server URL; accepted: tls://HOST:PORT, or "
                   "nats://127.0.0.1:PORT (plain only to loopback), comma separated",
                   one);
        return false;
    }
    if (!tls && !tls_configured && !sbx_net_host_is_loopback(hp, host_len)) {
        *st = fail(L, v, "sandbox.broker.queue.url",
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
    sbx_status st = get_string(L, v, p, &q->nkey);
    if (st == SBX_OK && (v->text[0] != 'U' || v->len != 56))
        st = fail(L, v, p,
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
    const config_node *url_node = field_node(queue_fields, at, "url");
    const config_node *name_node = field_node(queue_fields, at, "name");
    sbx_status st = SBX_OK;
    if (name_node != NULL) {
        bool ok = q->name[0] != '\0' && strlen(q->name) <= QUEUE_NAME_MAX;
        for (const char *c = q->name; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-';
        if (!ok)
            return fail(L, name_node, "sandbox.broker.queue.name",
                        "'%s' is not a queue name; use lowercase letters, digits and '-', at most "
                        "%d (it prefixes subjects, the stream and the bucket)",
                        q->name, QUEUE_NAME_MAX);
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
        return fail(L, map, path,
                    "cert_file and key_file go together (client certificate); set both or "
                    "neither");
    if (q->password_env != NULL && q->user == NULL)
        return fail(L, map, path, "password_env needs user (the NATS user it belongs to)");
    if ((q->nkey == NULL) != (q->nkey_seed_env == NULL))
        return fail(L, map, path,
                    "nkey and nkey_seed_env go together (the public key here, the seed in the "
                    "environment); set both or neither");
    if (q->nkey != NULL && q->user != NULL)
        return fail(L, map, path,
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
    SECTIONF("remote", offsetof(sbx_broker_config, remote), remote_fields, check_remote),
    SECTIONF("queue", offsetof(sbx_broker_config, queue), queue_fields, check_queue),
    FIELDS_END,
};

static sbx_status check_broker(loader *L, const config_node *map, const char *path, void *section,
                               const config_node *const *at)
{
    const sbx_broker_config *b = section;
    const config_node *flavor_node = field_node(broker_fields, at, "flavor");
    (void)map;
    (void)path;
    if (flavor_node != NULL && strcmp(b->flavor, "remote") == 0 && b->remote.endpoint == NULL)
        return fail(L, flavor_node, "sandbox.broker.flavor",
                    "flavor remote needs sandbox.broker.remote.endpoint (https://HOST:PORT of a "
                    "worker or its load balancer)");
    if (flavor_node != NULL && strcmp(b->flavor, "queue") == 0 && b->queue.url == NULL)
        return fail(L, flavor_node, "sandbox.broker.flavor",
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
    const config_node *subjects_node = field_node(caller_fields, at, "subjects");
    if (c->name == NULL)
        return fail(L, map, path, "a caller needs `name` (used in logs)");
    if ((c->token_env == NULL) == (c->cert_subject == NULL))
        return fail(L, map, path,
                    "caller '%s' needs exactly one of token_env (a bearer token held in that "
                    "environment variable) or cert_subject (the CN of its mTLS client "
                    "certificate)",
                    c->name);
    if (c->n_subjects == 0)
        return fail(L, subjects_node ? subjects_node : map, path,
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
        return fail(L, v, p,
                    "expected a list of callers ({name, token_env | cert_subject, subjects}), got "
                    "%s",
                    kind_name(v));
    if (v->n_kids > CONFIG_MAX_CALLERS)
        return fail(L, v, p, "more than %d callers", CONFIG_MAX_CALLERS);
    w->callers = calloc(v->n_kids ? v->n_kids : 1, sizeof(*w->callers));
    if (w->callers == NULL)
        return oom(L);
    sbx_status st = SBX_OK;
    for (size_t c = 0; st == SBX_OK && c < v->n_kids; c++) {
        char cp[128];
        snprintf(cp, sizeof(cp), "sandbox.worker.auth.callers[%zu]", c);
        sbx_worker_caller *caller = &w->callers[w->n_callers++];
        st = parse_section(L, v->kids[c], cp, caller_fields, caller, check_caller);
        for (size_t d = 0; st == SBX_OK && d + 1 < w->n_callers; d++)
            if (strcmp(w->callers[d].name, caller->name) == 0)
                st = fail(L, v->kids[c], cp, "a second caller named '%s'; caller names are unique",
                          caller->name);
    }
    return st;
}

/* sandbox.worker.auth: read into the worker's struct itself. */
static const field auth_fields[] = {
    CUSTOM("callers", get_callers),
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
    const config_node *client_ca_node = field_node(tls_fields, at, "client_ca_file");
    if ((w->tls_cert_file == NULL) != (w->tls_key_file == NULL))
        return fail(L, map, path, "cert_file and key_file go together; set both or neither");
    if (client_ca_node != NULL && w->tls_cert_file == NULL)
        return fail(L, client_ca_node, "sandbox.worker.tls.client_ca_file",
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
    ENUMF(sbx_worker_config, log_level, "log_level", log_level_choices, DEFAULT_WORKER_LOG_LEVEL),
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
    const config_node *callers = map_value(auth, "callers");
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
    const config_node *listen_node = field_node(worker_fields, at, "listen");
    const config_node *first_cert_caller =
        first_cert_caller_node(w, field_node(worker_fields, at, "auth"));
    (void)map;
    (void)path;
    if (first_cert_caller != NULL && w->tls_client_ca_file == NULL)
        return fail(L, first_cert_caller, "sandbox.worker.auth.callers",
                    "a cert_subject caller needs sandbox.worker.tls.client_ca_file (the CA that "
                    "signs client certificates)");
    /* DESIGN §7: every non-loopback listener requires TLS and an authenticated caller. A
     * --listen override is checked after the whole file (apply_overrides), not here. */
    if (listen_node != NULL && !(L->ov && L->ov->worker_listen) && !listen_is_loopback(w->listen)) {
        if (w->tls_cert_file == NULL)
            return fail(L, listen_node, "sandbox.worker.listen",
                        "listening on '%s' (not loopback) requires TLS: set "
                        "sandbox.worker.tls.cert_file and key_file",
                        w->listen);
        if (w->n_callers == 0)
            return fail(L, listen_node, "sandbox.worker.listen",
                        "listening on '%s' (not loopback) requires authenticated callers: set "
                        "sandbox.worker.auth.callers",
                        w->listen);
    }
    return SBX_OK;
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
    LISTF(sbx_policy, fs_read, n_fs_read, "fs_read", absolute_path_ok, "an absolute path"),
    LISTF(sbx_policy, fs_write, n_fs_write, "fs_write", absolute_path_ok, "an absolute path"),
    REALF(sbx_policy, cpu, "cpu", 0, MAX_POLICY_CPU, DEFAULT_POLICY_CPU,
          "a number of CPU cores from 0 (no limit) to 1024, e.g. 0.5"),
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
    bool allowlist = pol->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    if (!allowlist && pol->n_network_allow > 0)
        return fail(L, field_node(policy_fields, at, "network_allow"), path,
                    "network_allow is only used with `network_egress: allowlist`; set that, or "
                    "remove network_allow");
    if (allowlist && pol->n_network_allow == 0)
        return fail(L, field_node(policy_fields, at, "network_egress"), path,
                    "`network_egress: allowlist` with an empty network_allow allows nothing; list "
                    "the domains/CIDRs, or use `network_egress: deny`");
    return SBX_OK;
}

static sbx_policy *default_policy(void)
{
    sbx_policy *pol = sbx_policy_new();
    if (pol != NULL && !apply_defaults(policy_fields, pol)) {
        sbx_message_free((ProtobufCMessage *)pol);
        return NULL;
    }
    return pol;
}

static sbx_status get_policy(loader *L, const config_node *v, const char *p, void *section)
{
    return parse_section(L, v, p, policy_fields, ((sbx_profile_config *)section)->policy,
                         check_policy);
}

static sbx_status get_fallback(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_profile_config *prof = section;
    sbx_status st =
        get_string_list(L, v, p, NULL, "profile names", &prof->n_fallback, &prof->fallback);
    if (st == SBX_OK && prof->n_fallback > CONFIG_MAX_FALLBACK)
        st = fail(L, v, p, "more than %d fallback profiles", CONFIG_MAX_FALLBACK);
    return st;
}

/* profile.identity: read into the profile's struct itself. */
static const field identity_fields[] = {
    CHOICEF(sbx_profile_config, identity_mode, "mode", identity_choices, identity_values,
            SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT),
    FIELDS_END,
};

/* The keys of a profile, besides the block of its provider (named by its type). */
static const field profile_fields[] = {
    SKIP("type"),
    CHOICEF(sbx_profile_config, scope, "scope", scope_choices, NULL, SBX_SCOPE_PER_SESSION),
    CHOICEF(sbx_profile_config, environment, "environment", environment_choices, NULL,
            SBX_ENV_MANAGED),
    STR(sbx_profile_config, attach_to, "attach_to"),
    INTF(sbx_profile_config, idle_timeout_s, "idle_timeout_s", 0, MAX_IDLE_TIMEOUT_S,
         DEFAULT_IDLE_TIMEOUT_S),
    CHOICEF(sbx_profile_config, idle_pause, "idle_action", idle_action_choices, NULL, 0),
    SECTIONF("identity", 0, identity_fields, NULL),
    CUSTOM("policy", get_policy),
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
    return p->name && p->type && p->policy && p->options && apply_defaults(profile_fields, p);
}

static void profile_free(sbx_profile_config *p)
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
    sbx_status st = need_map(L, map, path, &pairs);
    const sbx_option_spec *schema = sbx_options_schema(o);
    for (size_t i = 0; st == SBX_OK && i < pairs; i++) {
        const config_node *k = map->kids[2 * i], *v = map->kids[2 * i + 1];
        char p[256];
        subpath(p, sizeof(p), path, k->text);
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
            st = unknown_key(L, k, path, accepted);
            break;
        }
        sbx_error e;
        if (spec->type == SBX_OPT_LIST) {
            if (config_node_is_null(v) || (v->kind == CONFIG_SEQ && v->n_kids == 0)) {
                config_options_set_empty(o, k->text);
                continue;
            }
            if (v->kind != CONFIG_SEQ) {
                st =
                    fail(L, v, p, "expected a list of strings (e.g. [a, b]), got %s", kind_name(v));
                break;
            }
            for (size_t j = 0; st == SBX_OK && j < v->n_kids; j++) {
                st = need_scalar(L, v->kids[j], p, "a string");
                if (st == SBX_OK && sbx_options_set(o, k->text, v->kids[j]->text, &e) != SBX_OK)
                    st = fail(L, v->kids[j], path, "%s", e.message);
            }
            continue;
        }
        const char *expected = spec->type == SBX_OPT_ENUM ? spec->choices
                               : spec->type == SBX_OPT_ENV_NAME
                                   ? "the name of an environment variable"
                                   : sbx_option_type_name(spec->type);
        st = need_scalar(L, v, p, expected);
        if (st != SBX_OK)
            break;
        if ((spec->type == SBX_OPT_INT || spec->type == SBX_OPT_BOOL) && !v->plain) {
            st = fail(L, v, p, "expected %s, got the quoted string \"%s\"",
                      sbx_option_type_name(spec->type), v->text);
            break;
        }
        if (sbx_options_set(o, k->text, v->text, &e) != SBX_OK)
            st = fail(L, v, path, "%s", e.message);
    }
    return st;
}

/* A key of a profile that is not in profile_fields: the block of its own provider (read by
 * that provider's option specs), or a misplaced block of another provider. */
static sbx_status provider_key(loader *L, const config_node *k, const config_node *v,
                               const char *path, const char *value_path, void *section, bool *known)
{
    sbx_profile_config *p = section;
    *known = true;
    if (strcmp(k->text, p->type) == 0)
        return parse_provider_block(L, v, value_path, p->options);
    if (sbx_provider_lookup(k->text) != NULL || in_list(known_provider_names, k->text))
        return fail(L, k, path,
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
    subpath(tpath, sizeof(tpath), path, "type");
    *st = need_scalar(L, type_node, tpath, "a provider name");
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
    suggestion(hint, sizeof(hint), type_node->text, names);
    *st = fail(L, type_node, tpath,
               "unknown provider type '%s'%s; the providers in this build are: %s", type_node->text,
               hint, sbx_provider_names());
    return NULL;
}

/* The rules between a profile's keys: idle_action against the provider and the scope, and
 * the environment matrix of DESIGN §5 in both directions. */
static sbx_status check_profile(loader *L, const config_node *map, const char *path,
                                const sbx_profile_config *p, const sbx_provider_ops *ops,
                                const config_node *const *at)
{
    const config_node *env_node = field_node(profile_fields, at, "environment");
    const config_node *idle_node = field_node(profile_fields, at, "idle_action");
    const config_node *type_node = field_node(profile_fields, at, "type");
    const config_node *attach_key = NULL;
    for (size_t i = 0; i + 1 < map->n_kids; i += 2)
        if (map->kids[i + 1] == field_node(profile_fields, at, "attach_to"))
            attach_key = map->kids[i];
    /* idle_action: pause needs a provider that can pause, and something to pause. */
    if (p->idle_pause && ops->pause == NULL)
        return fail(L, idle_node, path,
                    "profile '%s': idle_action is pause, but provider '%s' cannot pause "
                    "sandboxes; use idle_action: reset (providers that pause: see sbx providers, "
                    "PAUSE)",
                    p->name, ops->name);
    if (p->idle_pause && (p->idle_timeout_s == 0 || p->scope == SBX_SCOPE_PER_CALL))
        return fail(L, idle_node, path,
                    "profile '%s': idle_action pause needs idle_timeout_s > 0 and a per_session "
                    "or per_runtime scope (a per_call sandbox is never idle)",
                    p->name);
    bool provisions = (ops->traits & SBX_PROVIDER_PROVISIONS) != 0;
    bool attaches = (ops->traits & SBX_PROVIDER_ATTACHES) != 0;
    if (p->environment == SBX_ENV_MANAGED) {
        if (!provisions)
            return fail(L, env_node ? env_node : type_node, path,
                        "profile '%s': provider '%s' cannot create sandboxes, it only attaches "
                        "to existing ones; set `environment: attached` with `attach_to: <id>`, "
                        "or use a provider that provisions",
                        p->name, ops->name);
        if (attach_key != NULL)
            return fail(L, attach_key, path,
                        "profile '%s': attach_to is only used with `environment: attached`; "
                        "set that, or remove attach_to to let sbx create sandboxes",
                        p->name);
    } else {
        if (!attaches)
            return fail(L, env_node, path,
                        "profile '%s': provider '%s' cannot attach to sandboxes it did not "
                        "create; use `environment: managed` (and remove attach_to)",
                        p->name, ops->name);
        if (p->attach_to == NULL || p->attach_to[0] == '\0')
            return fail(L, env_node, path,
                        "profile '%s': `environment: attached` needs `attach_to: <the "
                        "provider's id of the existing sandbox>`",
                        p->name);
    }
    return SBX_OK;
}

/* One profile: its name, its type, then each key by profile_fields, then check_profile. */
static sbx_status parse_profile(loader *L, const config_node *key, const config_node *map,
                                sbx_profile_config *p)
{
    char path[256];
    snprintf(path, sizeof(path), "sandbox.profiles.%s", key->text);
    if (!name_ok(key->text, CONFIG_PROFILE_NAME_MAX))
        return fail(L, key, "sandbox.profiles",
                    "'%s' is not a valid profile name; use 1 to %d characters of letters, "
                    "digits, '.', '-', '_'",
                    key->text, CONFIG_PROFILE_NAME_MAX);
    if (map->kind != CONFIG_MAP)
        return fail(L, config_node_is_null(map) ? key : map, path,
                    "a profile is a mapping with at least `type` (one of: %s)",
                    sbx_provider_names());
    const config_node *type_node = map_value(map, "type");
    if (type_node == NULL)
        return fail(L, key, path, "profile '%s' has no `type`; accepted: %s", key->text,
                    sbx_provider_names());
    sbx_status st = SBX_OK;
    const sbx_provider_ops *ops = profile_type(L, type_node, path, &st);
    if (ops == NULL)
        return st;
    if (!profile_defaults(p, key->text, ops->name, ops))
        return oom(L);
    p->line = key->line;
    p->column = key->column;
    const config_node *at[FIELDS_MAX];
    const extra_key provider_block = {ops->name, provider_key};
    st = parse_fields(L, map, path, profile_fields, p, at, &provider_block);
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
        const config_node *at = map_value(map->kids[2 * i + 1], "fallback");
        if (at == NULL)
            at = map->kids[2 * i];
        char path[300];
        snprintf(path, sizeof(path), "sandbox.profiles.%s.fallback", p->name);
        if (p->environment != SBX_ENV_MANAGED)
            return fail(L, at, path,
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
                return fail(L, item, path,
                            "no profile named '%s'; fallback names profiles of this file",
                            p->fallback[f]);
            if (q == p)
                return fail(L, item, path, "profile '%s' falls back to itself", p->name);
            if (q->environment != SBX_ENV_MANAGED)
                return fail(L, item, path,
                            "fallback '%s' is an attached profile; a fallback must provision "
                            "sandboxes (environment: managed)",
                            q->name);
        }
    }
    return SBX_OK;
}

static sbx_status parse_profiles(loader *L, const config_node *map)
{
    size_t pairs = 0;
    sbx_status st = need_map(L, map, "sandbox.profiles", &pairs);
    if (st != SBX_OK)
        return st;
    if (pairs > CONFIG_MAX_PROFILES)
        return fail(L, map, "sandbox.profiles", "more than %d profiles", CONFIG_MAX_PROFILES);
    if (pairs == 0)
        return SBX_OK;
    L->cfg->profiles = calloc(pairs, sizeof(*L->cfg->profiles));
    if (L->cfg->profiles == NULL)
        return oom(L);
    for (size_t i = 0; i < pairs; i++) {
        sbx_profile_config *p = &L->cfg->profiles[L->cfg->n_profiles++];
        st = parse_profile(L, map->kids[2 * i], map->kids[2 * i + 1], p);
        if (st != SBX_OK)
            return st;
    }
    return check_fallbacks(L, map);
}

/* Adds the built-in `local` profile named "default" (ops may be NULL: no registry needed). */
static bool add_builtin_profile(sbx_config *cfg, const sbx_provider_ops *ops)
{
    cfg->profiles = calloc(1, sizeof(*cfg->profiles));
    if (cfg->profiles == NULL)
        return false;
    cfg->n_profiles = 1;
    return profile_defaults(&cfg->profiles[0], DEFAULT_PROFILE_NAME, DEFAULT_PROVIDER, ops);
}

/* ---- the sandbox section and the top level ------------------------------------------- */

static sbx_status get_secret_file(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_config *cfg = section;
    cfg->secret_file_configured = true;
    return get_path(L, v, p, &cfg->secret_file);
}

static sbx_status get_node(loader *L, const config_node *v, const char *p, void *section)
{
    sbx_status st = get_string(L, v, p, &((sbx_config *)section)->node);
    if (st == SBX_OK && !name_ok(v->text, CONFIG_NODE_NAME_MAX))
        st = fail(L, v, p,
                  "'%s' is not a node name; use a host name (letters, digits, '.', '-', "
                  "'_', at most %d)",
                  v->text, CONFIG_NODE_NAME_MAX);
    return st;
}

static sbx_status get_profiles(loader *L, const config_node *v, const char *p, void *section)
{
    (void)p;
    (void)section;
    return parse_profiles(L, v);
}

static sbx_status check_sandbox(loader *L, const config_node *map, const char *path, void *section,
                                const config_node *const *at);

/* The keys of `sandbox:` (DESIGN §10). The host-dependent defaults (secret_file, node,
 * runtime_dir, snapshot_dir) are host_defaults'. */
static const field sandbox_fields[] = {
    STRD(sbx_config, default_profile, "default_profile", DEFAULT_PROFILE_NAME),
    CUSTOM("secret_file", get_secret_file),
    CUSTOM("node", get_node),
    PATHF(sbx_config, runtime_dir, "runtime_dir"),
    PATHF(sbx_config, snapshot_dir, "snapshot_dir"),
    INTF(sbx_config, snapshot_max_mb, "snapshot_max_mb", 1, SNAPSHOT_MAX_MB_LIMIT,
         DEFAULT_SNAPSHOT_MAX_MB),
    SECTIONF("broker", offsetof(sbx_config, broker), broker_fields, check_broker),
    SECTIONF("worker", offsetof(sbx_config, worker), worker_fields, check_worker),
    CUSTOM("profiles", get_profiles),
    FIELDS_END,
};

/* The default profile: named by default_profile, or the file's only profile, or the built-in
 * one when the file has none. */
static sbx_status check_sandbox(loader *L, const config_node *map, const char *path, void *section,
                                const config_node *const *at)
{
    sbx_config *cfg = section;
    const config_node *default_node = field_node(sandbox_fields, at, "default_profile");
    (void)path;
    if (cfg->n_profiles == 0) {
        /* No profiles in the file: the built-in default profile applies. */
        free(cfg->profiles);
        cfg->profiles = NULL;
        if (!add_builtin_profile(cfg, sbx_provider_lookup(DEFAULT_PROVIDER)))
            return oom(L);
    }
    if (sbx_config_profile(cfg, NULL) == NULL) {
        char names[SBX_ERROR_MAX / 2] = "";
        size_t off = 0;
        for (size_t i = 0; i < cfg->n_profiles && off + 1 < sizeof(names); i++) {
            int w = snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
                             cfg->profiles[i].name);
            if (w < 0)
                break;
            off += (size_t)w;
        }
        if (default_node != NULL)
            return fail(L, default_node, "sandbox.default_profile",
                        "no profile named '%s'; the profiles are: %s", cfg->default_profile, names);
        if (cfg->n_profiles == 1) { /* one profile and no default_profile: it is the default */
            char *only = strdup(cfg->profiles[0].name);
            if (only == NULL)
                return oom(L);
            free(cfg->default_profile);
            cfg->default_profile = only;
            return SBX_OK;
        }
        return fail(L, map, "sandbox.default_profile",
                    "no profile is named 'default'; set default_profile to one of: %s", names);
    }
    return SBX_OK;
}

/* The top level holds `sandbox:` only (read after the whole level is checked). */
static const field root_fields[] = {
    SKIP("sandbox"),
    FIELDS_END,
};

static sbx_status load_tree(loader *L, const config_node *root)
{
    const config_node *at[FIELDS_MAX];
    if (root != NULL && config_node_is_null(root))
        root = NULL;
    sbx_status st = parse_fields(L, root, "(top level)", root_fields, L->cfg, at, NULL);
    if (st != SBX_OK)
        return st;
    return parse_section(L, field_node(root_fields, at, "sandbox"), "sandbox", sandbox_fields,
                         L->cfg, check_sandbox);
}

/* ---- defaults that depend on the host ------------------------------------------------ */

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* The defaults that depend on the host (who runs sbx, its XDG directories, its name), then
 * every table's default (sandbox_fields and its nested sections). */
static bool host_defaults(sbx_config *cfg)
{
    if (geteuid() == 0) {
        cfg->secret_file = strdup("/etc/sbx/secret");
        cfg->runtime_dir = strdup("/run/sbx");
        cfg->snapshot_dir = strdup("/var/lib/sbx/snapshots");
    } else {
        const char *xdg = getenv("XDG_CONFIG_HOME");
        const char *home = getenv("HOME");
        if (xdg != NULL && xdg[0] == '/')
            cfg->secret_file = path_join(xdg, "sbx/secret");
        else if (home != NULL && home[0] == '/')
            cfg->secret_file = path_join(home, ".config/sbx/secret");
        else {
            char buf[64];
            snprintf(buf, sizeof(buf), "/tmp/sbx-%u/secret", (unsigned)geteuid());
            cfg->secret_file = strdup(buf);
        }
        const char *run = getenv("XDG_RUNTIME_DIR");
        if (run != NULL && run[0] == '/')
            cfg->runtime_dir = path_join(run, "sbx");
        else {
            char buf[64];
            snprintf(buf, sizeof(buf), "/tmp/sbx-%u", (unsigned)geteuid());
            cfg->runtime_dir = strdup(buf);
        }
        const char *state = getenv("XDG_STATE_HOME");
        if (state != NULL && state[0] == '/')
            cfg->snapshot_dir = path_join(state, "sbx/snapshots");
        else if (home != NULL && home[0] == '/')
            cfg->snapshot_dir = path_join(home, ".local/state/sbx/snapshots");
        else
            cfg->snapshot_dir = path_join(cfg->runtime_dir, "snapshots");
    }
    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    cfg->node = strdup(host);
    return cfg->secret_file && cfg->runtime_dir && cfg->snapshot_dir && cfg->node &&
           apply_defaults(sandbox_fields, cfg);
}

/* ---- public API ----------------------------------------------------------------------- */

const char *sbx_scope_name(sbx_scope s)
{
    return (unsigned)s < 3 ? scope_choices[s] : "unknown";
}

const char *sbx_environment_name(sbx_environment e)
{
    return (unsigned)e < 2 ? environment_choices[e] : "unknown";
}

void sbx_config_free(sbx_config *cfg)
{
    if (cfg == NULL)
        return;
    free(cfg->path);
    free(cfg->default_profile);
    free(cfg->secret_file);
    free(cfg->node);
    free(cfg->runtime_dir);
    free(cfg->snapshot_dir);
    free(cfg->broker.flavor);
    free(cfg->broker.remote.endpoint);
    free(cfg->broker.remote.ca_file);
    free(cfg->broker.remote.cert_file);
    free(cfg->broker.remote.key_file);
    free(cfg->broker.remote.token_env);
    sbx_queue_config *q = &cfg->broker.queue;
    free(q->url);
    free(q->ca_file);
    free(q->cert_file);
    free(q->key_file);
    free(q->user);
    free(q->password_env);
    free(q->nkey);
    free(q->nkey_seed_env);
    free(q->token_env);
    free(q->name);
    free(cfg->worker.serve);
    free(cfg->worker.listen);
    free(cfg->worker.tls_cert_file);
    free(cfg->worker.tls_key_file);
    free(cfg->worker.tls_client_ca_file);
    for (size_t i = 0; i < cfg->worker.n_callers; i++) {
        sbx_worker_caller *c = &cfg->worker.callers[i];
        free(c->name);
        free(c->token_env);
        free(c->cert_subject);
        for (size_t j = 0; j < c->n_subjects; j++)
            free(c->subjects[j]);
        free(c->subjects);
    }
    free(cfg->worker.callers);
    free(cfg->worker.record);
    free(cfg->worker.log_level);
    free(cfg->worker.log_file);
    free(cfg->worker.metrics_listen);
    for (size_t i = 0; i < cfg->n_profiles; i++)
        profile_free(&cfg->profiles[i]);
    free(cfg->profiles);
    free(cfg);
}

const sbx_profile_config *sbx_config_profile(const sbx_config *cfg, const char *name)
{
    if (cfg == NULL)
        return NULL;
    if (name == NULL || name[0] == '\0')
        name = cfg->default_profile;
    for (size_t i = 0; name != NULL && i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            return &cfg->profiles[i];
    return NULL;
}

sbx_status sbx_config_default(sbx_config **out, sbx_error *err)
{
    if (out == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_default: out is NULL");
    *out = NULL;
    sbx_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL || !host_defaults(cfg) || !add_builtin_profile(cfg, NULL)) {
        sbx_config_free(cfg);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "built-in config: out of memory");
    }
    *out = cfg;
    return SBX_OK;
}

/* Command-line values replace the file's before anything is checked against them, and are
 * then checked as the file's would be, with errors naming the flag. */
static sbx_status apply_overrides(loader *L)
{
    const sbx_config_overrides *ov = L->ov;
    sbx_worker_config *w = &L->cfg->worker;
    if (ov == NULL)
        return SBX_OK;
    struct {
        const char *value;
        char **field;
    } strings[] = {{ov->worker_listen, &w->listen},
                   {ov->worker_log_level, &w->log_level},
                   {ov->worker_metrics_listen, &w->metrics_listen}};
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        if (strings[i].value == NULL)
            continue;
        char *copy = strdup(strings[i].value);
        if (copy == NULL)
            return oom(L);
        free(*strings[i].field);
        *strings[i].field = copy;
    }
    size_t host_len = 0;
    int64_t port = 0;
    if (ov->worker_listen != NULL) {
        if (!split_host_port(w->listen, &host_len, &port))
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not HOST:PORT; accepted e.g. 127.0.0.1:7443, "
                                 "0.0.0.0:7443, [::]:7443 (port 0 = any free port)",
                                 w->listen);
        if (!listen_is_loopback(w->listen) && w->tls_cert_file == NULL)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not loopback, so it requires TLS: set "
                                 "sandbox.worker.tls.cert_file and key_file in %s",
                                 w->listen, L->name);
        if (!listen_is_loopback(w->listen) && w->n_callers == 0)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--listen '%s' is not loopback, so it requires authenticated "
                                 "callers: set sandbox.worker.auth.callers in %s",
                                 w->listen, L->name);
    }
    if (ov->worker_log_level != NULL) {
        bool known = false;
        for (size_t i = 0; log_level_choices[i] != NULL; i++)
            known = known || strcmp(log_level_choices[i], w->log_level) == 0;
        if (!known)
            return sbx_error_set(L->err, SBX_E_CONFIG,
                                 "--log-level '%s' is not accepted; accepted: error, warn, info, "
                                 "debug",
                                 w->log_level);
    }
    if (ov->worker_metrics_listen != NULL && !split_host_port(w->metrics_listen, &host_len, &port))
        return sbx_error_set(L->err, SBX_E_CONFIG,
                             "--metrics-listen '%s' is not HOST:PORT; accepted e.g. "
                             "127.0.0.1:9464 (port 0 = any free port)",
                             w->metrics_listen);
    return SBX_OK;
}

static sbx_status load_buffer(const char *yaml, size_t len, const char *name, const char *dir,
                              const sbx_config_overrides *ov, sbx_config **out, sbx_error *err)
{
    config_node *root = NULL;
    sbx_status st = config_yaml_parse(yaml, len, name, &root, err);
    if (st != SBX_OK)
        return st;
    sbx_config *cfg = calloc(1, sizeof(*cfg));
    if (cfg == NULL || !host_defaults(cfg)) {
        sbx_config_free(cfg);
        config_node_free(root);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", name);
    }
    loader L = {.name = name, .dir = dir, .err = err, .cfg = cfg, .ov = ov};
    /* Parse "null" sandbox (an empty document) through the same path as a real one. */
    st = load_tree(&L, root);
    config_node_free(root);
    if (st == SBX_OK)
        st = apply_overrides(&L);
    if (st != SBX_OK) {
        sbx_config_free(cfg);
        return st;
    }
    *out = cfg;
    return SBX_OK;
}

sbx_status sbx_config_load_string(const char *yaml, size_t len, const char *name, sbx_config **out,
                                  sbx_error *err)
{
    if (out == NULL || (yaml == NULL && len > 0))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_load_string: NULL argument");
    *out = NULL;
    return load_buffer(yaml ? yaml : "", len, name ? name : "(string)", NULL, NULL, out, err);
}

/* Reads at most CONFIG_MAX_BYTES + 1 bytes, so an endless or huge file is refused, not read. */
static sbx_status read_bounded(const char *path, const char *source, char **buf, size_t *len,
                               sbx_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: the config file does not exist (named by %s); create it "
                                 "(see examples/) or name an existing file",
                                 path, source);
        return sbx_error_set(err, SBX_E_CONFIG, "%s: cannot open the config file (named by %s): %s",
                             path, source, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: is a directory, not a config file (named by %s)", path, source);
    }
    char *data = malloc(CONFIG_MAX_BYTES + 1);
    if (data == NULL) {
        close(fd);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", path);
    }
    size_t got = 0;
    while (got < CONFIG_MAX_BYTES + 1) {
        ssize_t n = read(fd, data + got, CONFIG_MAX_BYTES + 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            free(data);
            return sbx_error_set(err, SBX_E_CONFIG, "%s: cannot read the config file: %s", path,
                                 strerror(e));
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    if (got > CONFIG_MAX_BYTES) {
        free(data);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:1:1: the file is larger than %d bytes; config files are "
                             "limited to that",
                             path, CONFIG_MAX_BYTES);
    }
    *buf = data;
    *len = got;
    return SBX_OK;
}

sbx_status sbx_config_load(const char *path, sbx_config **out, sbx_error *err)
{
    return sbx_config_load_with(path, NULL, out, err);
}

sbx_status sbx_config_load_with(const char *path, const sbx_config_overrides *ov, sbx_config **out,
                                sbx_error *err)
{
    if (out == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_config_load: out is NULL");
    *out = NULL;
    const char *source = "the caller";
    if (path == NULL) {
        const char *env = getenv("SBX_CONFIG");
        if (env == NULL || env[0] == '\0') {
            /* No file: the built-in default, with the local provider's option defaults when
             * that provider is built in. */
            sbx_status st = sbx_config_default(out, err);
            if (st != SBX_OK)
                return st;
            const sbx_provider_ops *local = sbx_provider_lookup(DEFAULT_PROVIDER);
            if (local != NULL && local->options != NULL) {
                sbx_options *o = sbx_options_new(local->options);
                if (o == NULL) {
                    sbx_config_free(*out);
                    *out = NULL;
                    return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
                }
                sbx_options_free((*out)->profiles[0].options);
                (*out)->profiles[0].options = o;
            }
            loader L = {.name = "the built-in default", .err = err, .cfg = *out, .ov = ov};
            st = apply_overrides(&L);
            if (st != SBX_OK) {
                sbx_config_free(*out);
                *out = NULL;
            }
            return st;
        }
        path = env;
        source = "$SBX_CONFIG";
    }
    if (path[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG, "an empty config file name (from %s)", source);
    char *buf = NULL;
    size_t len = 0;
    sbx_status st = read_bounded(path, source, &buf, &len, err);
    if (st != SBX_OK)
        return st;
    char *dir = strdup(path);
    char *path_copy = strdup(path);
    if (dir == NULL || path_copy == NULL) {
        free(buf);
        free(dir);
        free(path_copy);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", path);
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, strlen(dir) + 1, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    st = load_buffer(buf, len, path, dir, ov, out, err);
    free(buf);
    free(dir);
    if (st != SBX_OK) {
        free(path_copy);
        return st;
    }
    (*out)->path = path_copy;
    return SBX_OK;
}
