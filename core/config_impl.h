/* config_impl.h - the machinery the files of the sbx_config layer share (core/config.c,
 * config_read.c, config_schema.c, config_profile.c): the loader, the key tables (one row per key:
 * its kind, where its value goes, bounds and default) and the loop that reads a section by its
 * table. Folder-private: not part of include/sbx/, hidden in libsbx (config_ prefix).
 */
#ifndef SBX_CORE_CONFIG_IMPL_H
#define SBX_CORE_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config_internal.h"
#include "core/limits.h"
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
/* The bounds of each policy limit: core/limits.h (a request's are checked against them too). */

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
/* Longest sandbox.broker.queue.inbox_prefix: the library appends a unique token of ~22 bytes. */
#define QUEUE_INBOX_PREFIX_MAX 128
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
/* Highest principal_sandboxes accepted: far beyond what one host holds (local's uid slots are
 * at most 65,536), so any host-sized limit fits. */
#define MAX_PRINCIPAL_SANDBOXES (1024 * 1024)

/* ---- the loader ------------------------------------------------------------------------ */

typedef struct loader {
    const char *name; /* file name for messages */
    const char *dir;  /* directory relative paths resolve against; NULL: keep as given */
    sbx_error *err;
    sbx_config *cfg;
    const sbx_config_overrides *ov; /* command-line values that replace the file's; NULL: none */
} loader;

/* ---- table-driven sections ------------------------------------------------------------ */

/* What a key of a section holds. The plain kinds are read by config_parse_fields itself;
 * F_SECTION is a nested block with a table of its own; F_CUSTOM keys (a value with a rule of
 * its own) are read by their function; F_SKIP keys are read before the table (a profile's
 * `type`, the top-level `sandbox`): config_parse_fields only records where they are. */
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
    F_CUSTOM,  /* custom reads the value (with table sub when it names one) */
    F_SKIP,    /* read before config_parse_fields runs */
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
    const field *sub;    /* F_SECTION; F_CUSTOM: the table its function reads with (for walks) */
    section_check after; /* F_SECTION: its cross-key rules; NULL: none */
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
#define CUSTOM_OF(k, fn, table)                                                                    \
    {                                                                                              \
        .key = (k), .kind = F_CUSTOM, .custom = (fn), .sub = (table)                               \
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

/* ---- config_read.c: errors, value readers and the table loop --------------------------------- */

sbx_status config_fail(loader *L, const config_node *at, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "NAME: out of memory" (RESOURCE_EXHAUSTED). */
sbx_status config_oom(loader *L);

/* True when s is one of the NULL-terminated list. */
bool config_in_list(const char *const *list, const char *s);

/* " (did you mean 'scope'?)" for the closest accepted word, or "" when none is close. */
void config_suggestion(char *buf, size_t size, const char *word, const char *const *accepted);

/* "unknown key 'k' (did you mean ...); accepted keys here: ...", or the inline-secret
 * refusal. */
sbx_status config_unknown_key(loader *L, const config_node *key, const char *path,
                              const char *const *accepted);

/* "a mapping", "a list", "a scalar" or "nothing (null)", for messages. */
const char *config_kind_name(const config_node *n);

/* Builds "parent.key" into buf. */
const char *config_subpath(char *buf, size_t size, const char *parent, const char *key);

/* A mapping (or null = empty mapping: returns SBX_OK with *pairs 0). */
sbx_status config_need_map(loader *L, const config_node *v, const char *path, size_t *pairs);

/* A scalar with a value; expected says what (for the message). */
sbx_status config_need_scalar(loader *L, const config_node *v, const char *path,
                              const char *expected);

/* A scalar, copied into *out (replacing what was there). */
sbx_status config_get_string(loader *L, const config_node *v, const char *path, char **out);

/* A file path; relative paths resolve against the config file's directory. */
sbx_status config_get_path(loader *L, const config_node *v, const char *path, char **out);

/* A list of strings (null or [] = empty), each passing `check` when given. */
sbx_status config_get_string_list(loader *L, const config_node *v, const char *path,
                                  bool (*check)(const char *), const char *what, size_t *n,
                                  char ***items);

/* 1 to max characters of letters, digits, '.', '-', '_' (profile and node names). */
bool config_name_ok(const char *s, size_t max);

/* Splits "host:port" / "[v6]:port"; false when malformed. */
bool config_split_host_port(const char *s, size_t *host_len, int64_t *port);

/* True when a HOST:PORT listener is on a loopback address. */
bool config_listen_is_loopback(const char *listen);

/* Writes the default of every key of fields (and of nested sections) into section. False
 * when out of memory. */
bool config_apply_defaults(const field *fields, void *section);

/* Reads map (the section at path) by the table fields into section. at[i] (when at is not
 * NULL) is the value node of fields[i], NULL when the key is absent, for checks that name
 * it. Keys not in the table go to extra (when given). Stops at the first error; an unknown
 * key lists the table's keys (and extra's). */
sbx_status config_parse_fields(loader *L, const config_node *map, const char *path,
                               const field *fields, void *section, const config_node **at,
                               const extra_key *extra);

/* A nested section: its keys by the table, then its cross-key rules. */
sbx_status config_parse_section(loader *L, const config_node *map, const char *path,
                                const field *fields, void *section, section_check after);

/* The value node of key in a config_parse_fields node table (NULL when the file does not set it).
 */
const config_node *config_field_node(const field *fields, const config_node *const *at,
                                     const char *key);

/* The value of key in a mapping (NULL when map is not a mapping or has no such key). */
const config_node *config_map_value(const config_node *map, const char *key);

/* ---- config_schema.c: the tables of sandbox, broker and worker ------------------------------- */

/* The words sandbox.worker.log_level accepts (also checked for --log-level). */
extern const char *const config_log_level_choices[];

/* The keys of `sandbox:` (DESIGN §10). The host-dependent defaults (secret_file, node,
 * runtime_dir, snapshot_dir) are host_defaults'. */
extern const field config_sandbox_fields[];

/* The whole document: `sandbox:` only at the top level, then that section. */
sbx_status config_load_tree(loader *L, const config_node *root);

/* ---- config_profile.c: profiles and their policies ------------------------------------------- */

/* Frees what a profile holds (not the profile itself). */
void config_profile_free(sbx_profile_config *p);

/* The keys of one profile (read per profile by config_parse_profiles). */
extern const field config_profile_fields[];

/* sandbox.profiles: each profile, then the fallbacks between them. */
sbx_status config_parse_profiles(loader *L, const config_node *map);

/* Adds the built-in `local` profile named "default" (ops may be NULL: no registry needed). */
/* Adds the built-in `local` profile named "default" (ops may be NULL: no registry needed). */
bool config_add_builtin_profile(sbx_config *cfg, const sbx_provider_ops *ops);

#endif
