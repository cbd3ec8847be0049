/* daytona_internal.h - shared state of the daytona provider's two halves: the control plane
 * (daytona.c: the REST API's sandbox lifecycle, policy lowering, network rules) and the data
 * plane (daytona_toolbox.c: each sandbox's toolbox API, commands, code and files).
 * Private to providers/daytona. */
#ifndef SBX_PROVIDERS_DAYTONA_INTERNAL_H
#define SBX_PROVIDERS_DAYTONA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "providers/common/http.h"
#include "sbx/provider.h"

/* A toolbox exec answers when the command ends: allow this much beyond the command's own
 * timeout for the daemon to kill it and send its 408. */
#define DAYTONA_EXEC_GRACE_MS 3000
/* A command without a deadline still ends (and the daemon applies no timeout of its own). */
#define DAYTONA_EXEC_MAX_S 3600
/* stdin is piped through the command line (base64); the daemon reads the command from its
 * stdin, so there is no ARG_MAX, but 1 MiB keeps request bodies reasonable. */
#define DAYTONA_MAX_STDIN_BYTES (1024u * 1024u)

typedef struct daytona_provider {
    char *profile;
    char *api_url;
    char *target;
    char *snapshot;
    char *image;
    int64_t snap_cpu, snap_mem_gb, snap_disk_gb;
    int64_t auto_stop_min;
    int64_t create_timeout_s;
    char **env;
    size_t n_env;
    char *key_env;
    char *api_key;
    char *auth_header; /* "Authorization: Bearer <key>" */
    char *node;        /* this host's node name (label sbx.node) */
    bool lists_held;   /* managed per_session: list_held counts its sandboxes */
    sbx_http_client *http;
} daytona_provider;

typedef struct daytona_sandbox {
    sbx_sandbox base;
    daytona_provider *p;
    char *toolbox; /* {toolboxProxyUrl}/{id}, no trailing slash */
} daytona_sandbox;

/* One API or toolbox call: its URL, request, response and owned JSON body. */
typedef struct dt_call {
    char url[2048];
    sbx_http_request req;
    sbx_http_response resp;
    char *body;
} dt_call;

/* Performs METHOD c->url with the Bearer key (daytona.c). body (JSON) or raw bytes. */
sbx_status dt_do(daytona_provider *p, dt_call *c, const char *method, json_t *body, const void *raw,
                 size_t raw_len, const char *content_type, bool idempotent, int64_t deadline,
                 int64_t timeout_ms, const volatile int *cancel, sbx_error *err);
void dt_call_clear(dt_call *c);
/* After a toolbox failure: GONE when the sandbox no longer exists, else s stands. */
sbx_status dt_maybe_gone(daytona_sandbox *d, sbx_status s, sbx_error *err);

/* The data plane (daytona_toolbox.c), as the provider ops table names it. */
sbx_status dt_run_command(sbx_sandbox *sb, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                          sbx_result *r, sbx_error *err);
sbx_status dt_run_code(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                       sbx_result *r, sbx_error *err);
sbx_status dt_install_packages(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                               const sbx_exec_opts *o, sbx_result *r, sbx_error *err);
sbx_status dt_write_file(sbx_sandbox *sb, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                         sbx_result *r, sbx_error *err);
sbx_status dt_read_file(sbx_sandbox *sb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                        sbx_result *r, sbx_error *err);
sbx_status dt_list_files(sbx_sandbox *sb, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                         sbx_result *r, sbx_error *err);

#endif
