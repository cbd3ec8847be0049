/* apikey.c - set-up shared by the API-key cloud providers (see apikey.h). */
#include "providers/common/apikey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sbx_status sbx_apikey_client_new(const char *provider, const char *service, const char *key_env,
                                 char **api_key, sbx_http_client **client, sbx_error *err)
{
    *api_key = NULL;
    *client = NULL;
    const char *key = getenv(key_env);
    if (key != NULL && *key != '\0' && (*api_key = strdup(key)) == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", provider);
    char hint[256];
    snprintf(hint, sizeof hint, "check that %s holds a valid %s API key", key_env, service);
    sbx_http_client_config hc = {.provider = provider, .auth_hint = hint};
    sbx_status s = sbx_http_client_new(&hc, client, err);
    if (s != SBX_OK) {
        free(*api_key);
        *api_key = NULL;
        return s;
    }
    if (*api_key != NULL)
        sbx_http_client_add_secret(*client, *api_key);
    return SBX_OK;
}

static void env_free(char **env, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(env[i]);
    free(env);
}

sbx_status sbx_apikey_env_list(const sbx_options *options, const char *provider,
                               const char *profile, char ***env, size_t *n, sbx_error *err)
{
    *env = NULL;
    *n = 0;
    if (options == NULL)
        return SBX_OK;
    const char *const *items = NULL;
    size_t count = sbx_options_get_list(options, "env", &items);
    if (count == 0)
        return SBX_OK;
    char **out = calloc(count, sizeof *out);
    if (out == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", provider);
    for (size_t i = 0; i < count; i++) {
        if (strchr(items[i], '=') == NULL || items[i][0] == '=') {
            env_free(out, i);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: profile '%s': env entry '%s' is not K=V; write e.g. "
                                 "\"LANG=C.UTF-8\"",
                                 provider, profile, items[i]);
        }
        if ((out[i] = strdup(items[i])) == NULL) {
            env_free(out, i);
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", provider);
        }
    }
    *env = out;
    *n = count;
    return SBX_OK;
}
