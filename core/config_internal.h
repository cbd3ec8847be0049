/* config_internal.h - helpers shared by the config files of core/ (the loader: config.c,
 * config_read.c, config_schema.c, config_profile.c, whose own machinery is config_impl.h's;
 * and config_options.c, the provider option blocks): strict text-to-value parsers and the limits
 * that bound what a config file can contain. Private to core/; nothing here is part of the public
 * API.
 */
#ifndef SBX_CORE_CONFIG_INTERNAL_H
#define SBX_CORE_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/status.h"

/* Longest single value (path, name, endpoint) accepted: 4 KiB is PATH_MAX and more than any
 * hostname, URL or domain list entry needs; longer is a mistake or an attack. */
#define CONFIG_VALUE_MAX 4096

/* Most items in one list (network_allow, fs_read, a provider's list option): 1024 allowlist
 * entries is far beyond what a policy reviewer can read; more is a generated mistake. */
#define CONFIG_LIST_MAX 1024

/* Longest environment variable name: names, not values, belong in the file. */
#define CONFIG_ENV_NAME_MAX 255

/* Parses a whole decimal integer ("-12", "0", "4096"); no sign '+', no spaces, no hex,
 * no trailing text. False when text is not one or overflows int64. */
bool config_parse_int(const char *text, int64_t *out);

/* True for a valid environment variable name: [A-Za-z_][A-Za-z0-9_]{0,254}. */
bool config_env_name_ok(const char *text);

struct sbx_options;
/* Marks a list option as set with no items (an explicit `key: []`), so its default no longer
 * applies. False when key is not a list option of the schema. */
bool config_options_set_empty(struct sbx_options *o, const char *key);

/* Joins a NULL-terminated array of strings with ", " into buf (truncating with "..."). */
void config_join(char *buf, size_t size, const char *const *items);

/* ---- the bounded YAML tree (config_yaml.c) --------------------------------------------- */

/* Largest config file read: 1 MiB holds thousands of profiles; anything bigger is not a
 * hand-written config and is refused before parsing. */
#define CONFIG_MAX_BYTES (1024 * 1024)
/* Deepest nesting accepted: the schema needs 6 levels (sandbox.worker.auth.callers[].subjects[]);
 * 32 leaves room while keeping every recursive walk shallow. */
#define CONFIG_MAX_DEPTH 32
/* Most nodes (scalars, maps, lists) in one document: bounds memory and the duplicate-key scan
 * (quadratic per map) no matter how the file is shaped. Anchors and aliases are refused, so a
 * file cannot expand beyond what it spells out (no "billion laughs"). */
#define CONFIG_MAX_NODES 20000

typedef enum config_node_kind { CONFIG_SCALAR, CONFIG_MAP, CONFIG_SEQ } config_node_kind;

/* A node of the parsed document with its position (1-based line and column). */
typedef struct config_node {
    config_node_kind kind;
    int line, column;
    bool plain;                /* scalar: unquoted (only plain scalars are numbers/booleans/null) */
    char *text;                /* scalar: NUL-terminated value (no embedded NULs: refused) */
    size_t len;                /* scalar: strlen(text) */
    struct config_node **kids; /* map: key0, value0, key1, value1, ...; seq: the items */
    size_t n_kids;
} config_node;

/* Parses one YAML document from buf into a tree. Refuses anchors, aliases, explicit tags,
 * several documents, duplicate keys, non-scalar keys, and anything over the limits above.
 * *root is NULL for an empty document. On error, err says "name:line:column: ...". */
sbx_status config_yaml_parse(const char *buf, size_t len, const char *name, config_node **root,
                             sbx_error *err);
void config_node_free(config_node *n);
/* True for a plain null scalar: empty, ~, null, Null, NULL. */
bool config_node_is_null(const config_node *n);

#endif
