/* apikey.h - set-up shared by the cloud providers that authenticate with an API key held in an
 * environment variable (e2b, daytona): the key and its HTTP client, and the `env` option.
 * Must not make any request: opening a provider stays offline.
 */
#ifndef SBX_PROVIDERS_COMMON_APIKEY_H
#define SBX_PROVIDERS_COMMON_APIKEY_H

#include <stddef.h>

#include "providers/common/http.h"
#include "sbx/config.h"
#include "sbx/status.h"

/* Reads the key from the environment variable key_env (*api_key: malloc'd copy, or NULL when
 * the variable is unset or empty -- the provider reports that when it first needs the key),
 * creates the HTTP client whose 401/403 errors say "check that KEY_ENV holds a valid
 * <service> API key", and registers the key for redaction. On error nothing is allocated. */
sbx_status sbx_apikey_client_new(const char *provider, const char *service, const char *key_env,
                                 char **api_key, sbx_http_client **client, sbx_error *err);

/* Copies the `env` list option (K=V items) of a provider block into a malloc'd array of
 * malloc'd strings (*env NULL and *n 0 when options is NULL or the list is empty). An item
 * without '=' or with an empty name is a CONFIG error naming the profile and the item. */
sbx_status sbx_apikey_env_list(const sbx_options *options, const char *provider,
                               const char *profile, char ***env, size_t *n, sbx_error *err);

#endif
