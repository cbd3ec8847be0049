/* config_fallback.c - TEMPORARY weak stand-ins for the parts of config.h that core/config.c
 * (helper "config") has not landed yet, so the engine and the fake provider link and their
 * tests can build configurations by hand. Every definition is weak: the real ones replace them.
 * Delete this file as soon as core/config.c is on main.
 */
#include <stdlib.h>
#include <string.h>

#include "sbx/config.h"

#define WEAK __attribute__((weak))

/* Most values one fallback block holds: tests set a handful. */
#define FALLBACK_VALUES_MAX 64

struct sbx_options {
    const sbx_option_spec *schema;
    char *keys[FALLBACK_VALUES_MAX];
    char *values[FALLBACK_VALUES_MAX];
    size_t n;
    const char *list[FALLBACK_VALUES_MAX];
};

WEAK sbx_options *sbx_options_new(const sbx_option_spec *schema)
{
    sbx_options *o = calloc(1, sizeof(*o));
    if (o != NULL)
        o->schema = schema;
    return o;
}

WEAK void sbx_options_free(sbx_options *o)
{
    if (o == NULL)
        return;
    for (size_t i = 0; i < o->n; i++) {
        free(o->keys[i]);
        free(o->values[i]);
    }
    free(o);
}

WEAK sbx_options *sbx_options_copy(const sbx_options *o)
{
    sbx_options *c = sbx_options_new(o->schema);
    for (size_t i = 0; c != NULL && i < o->n; i++) {
        c->keys[i] = strdup(o->keys[i]);
        c->values[i] = strdup(o->values[i]);
        c->n++;
    }
    return c;
}

static const sbx_option_spec *spec_of(const sbx_options *o, const char *key)
{
    for (const sbx_option_spec *s = o->schema; s != NULL && s->key != NULL; s++)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

WEAK sbx_status sbx_options_set(sbx_options *o, const char *key, const char *value,
                                sbx_error *err)
{
    const sbx_option_spec *s = spec_of(o, key);
    if (s == NULL)
        return sbx_error_set(err, SBX_E_CONFIG, "unknown option '%s'", key);
    if (o->n >= FALLBACK_VALUES_MAX)
        return sbx_error_set(err, SBX_E_CONFIG, "too many options");
    if (s->type != SBX_OPT_LIST)
        for (size_t i = 0; i < o->n; i++)
            if (strcmp(o->keys[i], key) == 0) {
                free(o->values[i]);
                o->values[i] = strdup(value);
                return SBX_OK;
            }
    o->keys[o->n] = strdup(key);
    o->values[o->n] = strdup(value);
    o->n++;
    return SBX_OK;
}

WEAK const char *sbx_options_get(const sbx_options *o, const char *key)
{
    for (size_t i = 0; o != NULL && i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return o->values[i];
    const sbx_option_spec *s = o != NULL ? spec_of(o, key) : NULL;
    return s != NULL ? s->default_value : NULL;
}

WEAK int64_t sbx_options_get_int(const sbx_options *o, const char *key)
{
    const char *v = sbx_options_get(o, key);
    return v != NULL ? strtoll(v, NULL, 10) : 0;
}

WEAK bool sbx_options_get_bool(const sbx_options *o, const char *key)
{
    const char *v = sbx_options_get(o, key);
    return v != NULL && strcmp(v, "true") == 0;
}

WEAK size_t sbx_options_get_list(const sbx_options *o, const char *key, const char *const **items)
{
    sbx_options *m = (sbx_options *)o;
    size_t n = 0;
    for (size_t i = 0; i < m->n && n < FALLBACK_VALUES_MAX; i++)
        if (strcmp(m->keys[i], key) == 0)
            m->list[n++] = m->values[i];
    if (n == 0) {
        /* default "a,b" -> split into static copies kept in the block */
        const sbx_option_spec *s = spec_of(o, key);
        static __thread char buf[512];
        if (s != NULL && s->default_value != NULL) {
            strncpy(buf, s->default_value, sizeof(buf) - 1);
            char *save = NULL;
            for (char *t = strtok_r(buf, ",", &save); t != NULL && n < FALLBACK_VALUES_MAX;
                 t = strtok_r(NULL, ",", &save))
                m->list[n++] = t;
        }
    }
    *items = m->list;
    return n;
}

WEAK bool sbx_options_is_set(const sbx_options *o, const char *key)
{
    for (size_t i = 0; o != NULL && i < o->n; i++)
        if (strcmp(o->keys[i], key) == 0)
            return true;
    return false;
}

WEAK const char *sbx_scope_name(sbx_scope s)
{
    return s == SBX_SCOPE_PER_CALL ? "per_call" : s == SBX_SCOPE_PER_RUNTIME ? "per_runtime" : "per_session";
}

WEAK const char *sbx_environment_name(sbx_environment e)
{
    return e == SBX_ENV_ATTACHED ? "attached" : "managed";
}

WEAK const sbx_profile_config *sbx_config_profile(const sbx_config *cfg, const char *name)
{
    if (name == NULL || name[0] == '\0')
        name = cfg->default_profile;
    for (size_t i = 0; name != NULL && i < cfg->n_profiles; i++)
        if (strcmp(cfg->profiles[i].name, name) == 0)
            return &cfg->profiles[i];
    return NULL;
}
