/* e2b_internal.h - shared state of the e2b provider's two halves: the control plane
 * (e2b.c: REST on api.e2b.app with X-API-Key) and the in-sandbox daemons (e2b_envd.c: envd's
 * Connect-RPC process API and file API, and the code-interpreter's Jupyter /execute).
 * Private to providers/e2b.
 */
#ifndef SBX_PROVIDERS_E2B_INTERNAL_H
#define SBX_PROVIDERS_E2B_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "providers/common/apikey.h"
#include "providers/common/http.h"
#include "sbx/provider.h"

/* envd listens on this port inside every E2B sandbox (reference/cloud-apis.md §1.2). */
#define E2B_ENVD_PORT 49983
/* The code-interpreter template's Jupyter server (e2b-dev/code-interpreter constants.py). */
#define E2B_JUPYTER_PORT 49999

/* One opened e2b profile. Immutable after open except the HTTP client (thread-safe). */
typedef struct e2b_provider {
    char *profile;
    char *api_url;             /* control plane base, no trailing slash */
    char *domain;              /* sandbox domain (envd URLs) */
    char *sandbox_url;         /* in-sandbox traffic base with routing headers; NULL = derive */
    char *template_id;         /* templateID for create */
    char *user;                /* envd user (Authorization: Basic base64("user:")) */
    char *key_env;             /* name of the env var holding the API key */
    char *api_key;             /* NULL when the env var is unset (calls then fail with CONFIG) */
    int64_t sandbox_timeout_s; /* idle TTL sent as `timeout` on create and connect */
    bool code_interpreter;     /* python run_code through Jupyter (stateful) */
    char **env;                /* "K=V" sent as envVars on create */
    size_t n_env;
    char *node;      /* this host's node name (metadata sbx.node) */
    bool lists_held; /* managed per_session: list_held counts its sandboxes */
    sbx_http_client *http;
} e2b_provider;

/* A live sandbox handle. */
typedef struct e2b_sandbox {
    sbx_sandbox base; /* first: base.id is the sandboxID */
    e2b_provider *p;
    char *access_token; /* envdAccessToken (X-Access-Token); NULL when not secure */
    char *domain;       /* from the create/connect response, else the provider's */
} e2b_sandbox;

/* envd and Jupyter operations (e2b_envd.c). */
sbx_status e2b_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                           sbx_result *result, sbx_error *err);
sbx_status e2b_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                        sbx_result *result, sbx_error *err);
sbx_status e2b_install_packages(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                                const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status e2b_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                          sbx_result *result, sbx_error *err);
sbx_status e2b_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                         sbx_result *result, sbx_error *err);
sbx_status e2b_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                          sbx_result *result, sbx_error *err);

/* POST /sandboxes/{id}/timeout {"timeout": seconds}: the sandbox ends `seconds` from now
 * (absolute, overwrites; reference §1.1). */
sbx_status e2b_set_timeout(e2b_provider *p, const char *sandbox_id, int64_t seconds,
                           sbx_error *err);

/* GET /sandboxes/{id}: SBX_OK when it exists, SBX_E_GONE on 404 (used to tell a dead sandbox
 * from a proxy hiccup after an envd failure). */
sbx_status e2b_probe(e2b_provider *p, const char *sandbox_id, sbx_error *err);

#endif
