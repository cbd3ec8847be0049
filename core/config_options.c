/* config_options.c - sbx_options: a provider's validated config block (key -> value, defaults
 * from the provider's sbx_option_spec schema), and the strict text parsers shared by the config
 * loader. Values are checked against the schema when set, so a provider only ever reads values
 * of the declared type within the declared bounds.
 * This file must not read files or know about YAML: the loader hands it text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_internal.h"
#include "core/strbuf.h"
#include "sbx/config.h"

/* One schema key: its value when set (scalars) or its items (lists). */
typedef struct option_value {
    bool set;
    char *text;   /* scalar value, malloc'd; NULL when unset */
    char **items; /* list items when set, else the parsed default */
    size_t n_items;
    char **default_items; /* the schema's comma-separated default, split */
    size_t n_default_items;
} option_value;

/* Owned by its caller; not thread-safe for writes, reads may be shared once built. */
struct sbx_options {
    const sbx_option_spec *schema; /* borrowed (static in the provider) */
    size_t n_keys;
    option_value *values; /* n_keys entries, in schema order */
};

bool config_parse_int(const char *text, int64_t *out)
{
    if (text == NULL || text[0] == '\0' || text[0] == '+' || text[0] == ' ')
        return false;
    const char *digits = text[0] == '-' ? text + 1 : text;
    if (digits[0] < '0' || digits[0] > '9')
        return false;
    for (const char *p = digits; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == NULL || *end != '\0')
        return false;
    *out = (int64_t)v;
    return true;
}

bool config_env_name_ok(const char *text)
{
    return sbx_shell_name_ok(text) && strlen(text) <= CONFIG_ENV_NAME_MAX;
}

void config_join(char *buf, size_t size, const char *const *items)
{
    size_t off = 0;
    if (size == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; items[i] != NULL; i++) {
        size_t need = strlen(items[i]) + (i ? 2 : 0);
        if (off + need + 4 >= size) {
            if (off + 4 < size)
                memcpy(buf + off, "...", 4);
            return;
        }
        if (i) {
            memcpy(buf + off, ", ", 2);
            off += 2;
        }
        memcpy(buf + off, items[i], strlen(items[i]));
        off += strlen(items[i]);
        buf[off] = '\0';
    }
}

const char *sbx_option_type_name(sbx_option_type t)
{
    switch (t) {
    case SBX_OPT_STRING: return "string";
    case SBX_OPT_INT: return "integer";
    case SBX_OPT_BOOL: return "boolean";
    case SBX_OPT_ENUM: return "one of";
    case SBX_OPT_LIST: return "list of strings";
    case SBX_OPT_ENV_NAME: return "environment variable name";
    }
    return "unknown";
}

static void free_items(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i]);
    free(items);
}

static bool push_item(char ***items, size_t *n, const char *value, size_t len)
{
    char *copy = strndup(value, len);
    if (copy == NULL)
        return false;
    char **grown = realloc(*items, (*n + 1) * sizeof(*grown));
    if (grown == NULL) {
        free(copy);
        return false;
    }
    grown[*n] = copy;
    *items = grown;
    (*n)++;
    return true;
}

/* Splits the schema's "a,b,c" list default into items (no trimming: schemas are ours). */
static bool split_default(const char *text, char ***items, size_t *n)
{
    if (text == NULL || text[0] == '\0')
        return true;
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!push_item(items, n, p, len))
            return false;
        if (comma == NULL)
            return true;
        p = comma + 1;
    }
}

sbx_options *sbx_options_new(const sbx_option_spec *schema)
{
    sbx_options *o = calloc(1, sizeof(*o));
    if (o == NULL)
        return NULL;
    o->schema = schema;
    if (schema != NULL)
        while (schema[o->n_keys].key != NULL)
            o->n_keys++;
    if (o->n_keys > 0) {
        o->values = calloc(o->n_keys, sizeof(*o->values));
        if (o->values == NULL) {
            free(o);
            return NULL;
        }
    }
    for (size_t i = 0; i < o->n_keys; i++)
        if (schema[i].type == SBX_OPT_LIST &&
            !split_default(schema[i].default_value, &o->values[i].default_items,
                           &o->values[i].n_default_items)) {
            sbx_options_free(o);
            return NULL;
        }
    return o;
}

void sbx_options_free(sbx_options *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n_keys; i++) {
        free(o->values[i].text);
        free_items(o->values[i].items, o->values[i].n_items);
        free_items(o->values[i].default_items, o->values[i].n_default_items);
    }
    free(o->values);
    free(o);
}

sbx_options *sbx_options_copy(const sbx_options *o)
{
    if (o == NULL)
        return NULL;
    sbx_options *c = sbx_options_new(o->schema);
    if (c == NULL)
        return NULL;
    /* Made from o's schema, c has o's keys; bounded by c's own count, the length of c->values. */
    for (size_t i = 0; i < c->n_keys; i++) {
        const option_value *from = &o->values[i];
        option_value *to = &c->values[i];
        to->set = from->set;
        if (from->text != NULL && (to->text = strdup(from->text)) == NULL)
            goto fail;
        for (size_t j = 0; j < from->n_items; j++)
            if (!push_item(&to->items, &to->n_items, from->items[j], strlen(from->items[j])))
                goto fail;
    }
    return c;
fail:
    sbx_options_free(c);
    return NULL;
}

static long find_key(const sbx_options *o, const char *key)
{
    if (o == NULL || key == NULL)
        return -1;
    for (size_t i = 0; i < o->n_keys; i++)
        if (strcmp(o->schema[i].key, key) == 0)
            return (long)i;
    return -1;
}

static bool enum_has(const char *choices, const char *value)
{
    size_t len = strlen(value);
    const char *p = choices;
    while (p != NULL && *p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, value, n) == 0)
            return true;
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

sbx_status sbx_options_set(sbx_options *o, const char *key, const char *value, sbx_error *err)
{
    if (o == NULL || key == NULL || value == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_options_set: NULL argument");
    long idx = find_key(o, key);
    if (idx < 0) {
        char accepted[SBX_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < o->n_keys; i++)
            sbx_list_add(accepted, sizeof accepted, o->schema[i].key);
        return sbx_error_set(err, SBX_E_CONFIG, "unknown key '%s'; accepted keys: %s", key,
                             o->n_keys ? accepted : "(none: this provider takes no options)");
    }
    const sbx_option_spec *spec = &o->schema[idx];
    option_value *v = &o->values[idx];
    size_t len = strnlen(value, CONFIG_VALUE_MAX + 1);
    if (len > CONFIG_VALUE_MAX)
        return sbx_error_set(err, SBX_E_CONFIG, "%s: value longer than %d bytes", key,
                             CONFIG_VALUE_MAX);
    switch (spec->type) {
    case SBX_OPT_STRING: break;
    case SBX_OPT_INT: {
        int64_t n;
        if (!config_parse_int(value, &n))
            return sbx_error_set(err, SBX_E_CONFIG, "%s: expected an integer, got '%s'", key,
                                 value);
        if ((spec->min != 0 || spec->max != 0) && (n < spec->min || n > spec->max))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: %lld is out of range; accepted: %lld to %lld", key,
                                 (long long)n, (long long)spec->min, (long long)spec->max);
        break;
    }
    case SBX_OPT_BOOL:
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return sbx_error_set(err, SBX_E_CONFIG, "%s: expected true or false, got '%s'", key,
                                 value);
        break;
    case SBX_OPT_ENUM:
        if (!enum_has(spec->choices, value))
            return sbx_error_set(err, SBX_E_CONFIG, "%s: '%s' is not accepted; accepted: %s", key,
                                 value, spec->choices ? spec->choices : "(none)");
        break;
    case SBX_OPT_ENV_NAME:
        if (value[0] == '$' && config_env_name_ok(value + 1))
            return sbx_error_set(err, SBX_E_CONFIG, "%s: write the variable's name without '$': %s",
                                 key, value + 1);
        if (!config_env_name_ok(value))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: '%.64s' is not an environment variable name; name the "
                                 "variable that holds the secret (e.g. SBX_TOKEN), never the "
                                 "secret itself",
                                 key, value);
        break;
    case SBX_OPT_LIST:
        if (v->n_items >= CONFIG_LIST_MAX)
            return sbx_error_set(err, SBX_E_CONFIG, "%s: more than %d items", key, CONFIG_LIST_MAX);
        if (!push_item(&v->items, &v->n_items, value, len))
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", key);
        v->set = true;
        return SBX_OK;
    }
    char *copy = strdup(value);
    if (copy == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", key);
    free(v->text);
    v->text = copy;
    v->set = true;
    return SBX_OK;
}

const char *sbx_options_get(const sbx_options *o, const char *key)
{
    long idx = find_key(o, key);
    if (idx < 0)
        return NULL;
    if (o->values[idx].text != NULL)
        return o->values[idx].text;
    return o->schema[idx].default_value;
}

int64_t sbx_options_get_int(const sbx_options *o, const char *key)
{
    int64_t n = 0;
    const char *text = sbx_options_get(o, key);
    if (text == NULL || !config_parse_int(text, &n))
        return 0;
    return n;
}

bool sbx_options_get_bool(const sbx_options *o, const char *key)
{
    const char *text = sbx_options_get(o, key);
    return text != NULL && strcmp(text, "true") == 0;
}

size_t sbx_options_get_list(const sbx_options *o, const char *key, const char *const **items)
{
    long idx = find_key(o, key);
    if (items != NULL)
        *items = NULL;
    if (idx < 0)
        return 0;
    const option_value *v = &o->values[idx];
    if (v->set) {
        if (items != NULL)
            *items = (const char *const *)v->items;
        return v->n_items;
    }
    if (items != NULL)
        *items = (const char *const *)v->default_items;
    return v->n_default_items;
}

bool sbx_options_is_set(const sbx_options *o, const char *key)
{
    long idx = find_key(o, key);
    return idx >= 0 && o->values[idx].set;
}

const sbx_option_spec *sbx_options_schema(const sbx_options *o)
{
    return o == NULL ? NULL : o->schema;
}

bool config_options_set_empty(sbx_options *o, const char *key)
{
    long idx = find_key(o, key);
    if (idx < 0 || o->schema[idx].type != SBX_OPT_LIST)
        return false;
    o->values[idx].set = true;
    return true;
}
