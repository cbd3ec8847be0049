/* config.h - the sbx configuration (DESIGN §10): loaded from YAML with libyaml, or the built-in
 * default when no file exists, validated completely at load time.
 *
 * Every key has a default; an unknown key, a wrong type or a bad value is an SBX_E_CONFIG error
 * that names the file, line and column, the key, and what would be accepted. The environment
 * matrix (managed/attached x provider x attach_to) is checked here too. Secrets never appear in
 * the file: only the *names* of environment variables that hold them.
 * Provider blocks (`local: {...}`, `docker: {...}`) are validated against the provider's own
 * option schema (sbx_option_spec, declared in its ops table) and handed to it as sbx_options.
 * This module must not open sandboxes, sockets or the secret file.
 */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/contract.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* ---- provider option blocks ------------------------------------------------------------ */

typedef enum sbx_option_type {
    SBX_OPT_STRING,   /* any string */
    SBX_OPT_INT,      /* integer within [min, max] */
    SBX_OPT_BOOL,     /* true / false */
    SBX_OPT_ENUM,     /* one of `choices` ("a|b|c") */
    SBX_OPT_LIST,     /* sequence of strings */
    SBX_OPT_ENV_NAME, /* the NAME of an environment variable holding a secret */
} sbx_option_type;

/* One key of a provider's config block. Arrays of specs end with { .key = NULL }. */
typedef struct sbx_option_spec {
    const char *key;
    sbx_option_type type;
    const char *default_value; /* textual default (NULL: none); lists: comma separated */
    const char *choices;       /* SBX_OPT_ENUM: "a|b|c" */
    int64_t min, max;          /* SBX_OPT_INT bounds (both 0: unbounded) */
    const char *help;          /* one line for `sbx config check` and docs */
} sbx_option_spec;

/* A validated provider block: key -> value, defaults applied. Opaque. */
typedef struct sbx_options sbx_options;

sbx_options *sbx_options_new(const sbx_option_spec *schema); /* empty, defaults apply */
void sbx_options_free(sbx_options *o);
sbx_options *sbx_options_copy(const sbx_options *o);
/* Sets a value from text (lists: one item per call, appended). Validates against the schema. */
sbx_status sbx_options_set(sbx_options *o, const char *key, const char *value, sbx_error *err);
/* Getters; the default applies when unset. String/enum/env-name: NULL when neither is set. */
const char *sbx_options_get(const sbx_options *o, const char *key);
int64_t sbx_options_get_int(const sbx_options *o, const char *key);
bool sbx_options_get_bool(const sbx_options *o, const char *key);
/* Items of a list (borrowed, valid while o lives); returns the count. */
size_t sbx_options_get_list(const sbx_options *o, const char *key, const char *const **items);
/* True when the key was set in the file (not just defaulted). */
bool sbx_options_is_set(const sbx_options *o, const char *key);
/* The schema the block was validated against ({NULL}-terminated; NULL when it has none, e.g.
 * the built-in default before its provider is known). For listing a block's keys. */
const sbx_option_spec *sbx_options_schema(const sbx_options *o);
/* "string", "integer", "boolean", "one of", "list of strings", "environment variable name". */
const char *sbx_option_type_name(sbx_option_type t);

/* ---- profiles ----------------------------------------------------------------------------- */

typedef enum sbx_scope {
    SBX_SCOPE_PER_CALL = 0,    /* fresh sandbox per operation, always destroyed after */
    SBX_SCOPE_PER_SESSION = 1, /* explicit session ids */
    SBX_SCOPE_PER_RUNTIME = 2, /* one shared sandbox per profile */
} sbx_scope;

typedef enum sbx_environment {
    SBX_ENV_MANAGED = 0,  /* sbx creates and destroys sandboxes */
    SBX_ENV_ATTACHED = 1, /* sbx attaches to an existing one (attach_to) and never destroys it */
} sbx_environment;

const char *sbx_scope_name(sbx_scope s);             /* "per_call", ... */
const char *sbx_environment_name(sbx_environment e); /* "managed", "attached" */

typedef struct sbx_profile_config {
    char *name;                  /* profile name (the YAML key) */
    char *type;                  /* provider name: local, docker, e2b, daytona, ec2_ssm, fake */
    sbx_scope scope;             /* default per_session */
    sbx_environment environment; /* default managed */
    char *attach_to;        /* attached: the provider's id of the existing sandbox; else NULL */
    int64_t idle_timeout_s; /* 0 = never; default 1800 */
    bool idle_pause; /* idle_action: pause. A session idle for idle_timeout_s is paused (kept,
                        no CPU; the next request resumes it) instead of reset on next touch */
    Sbx__V1__PrincipalMode identity_mode; /* default AGENT */
    sbx_policy *policy;                   /* the profile's default policy (never NULL) */
    sbx_options *options; /* the provider block (never NULL; defaults when absent) */
    char **fallback;      /* profiles tried in order when this one's provider cannot provide a
                             new sandbox (unreachable, out of capacity, too slow); never after a
                             refusal, never with a wider policy. Empty: none */
    size_t n_fallback;
    int line, column; /* where the profile starts in the file (0 for built-in) */
} sbx_profile_config;

/* ---- broker and worker ---------------------------------------------------------------- */

typedef struct sbx_remote_config {
    char *endpoint;  /* https://host:port or http://127.0.0.1:port (h2c, loopback only) */
    char *ca_file;   /* CA bundle to verify the worker; NULL = system store */
    char *cert_file; /* client certificate for mTLS; NULL = none */
    char *key_file;  /* its key */
    char *token_env; /* name of the env var holding a bearer token; NULL = none */
    int64_t connect_timeout_ms; /* default 5000 */
    int64_t lru_size; /* completions kept for result(): not a key of its own, sbx_broker_open
                         passes broker.lru_size; 0 = its default (1024) */
} sbx_remote_config;

/* The NATS JetStream queue (broker/queue.c on the caller's side, worker/queue.c in sbx-worker):
 * the same block on both sides. Secrets are named by environment variable, never written here. */
typedef struct sbx_queue_config {
    char *url;            /* nats://HOST:PORT (loopback only) or tls://HOST:PORT, comma separated */
    char *ca_file;        /* CA that signs the NATS servers' certificates; NULL = system store */
    char *cert_file;      /* client certificate for servers that verify clients; NULL = none */
    char *key_file;       /* its key */
    char *user;           /* NATS user (password in password_env); NULL = none */
    char *password_env;   /* name of the env var holding the NATS password */
    char *nkey;           /* NATS nkey public key (U...), seed in nkey_seed_env; NULL = none */
    char *nkey_seed_env;  /* name of the env var holding the nkey seed (SU...) */
    char *token_env;      /* name of the env var holding the bearer token the workers check */
    char *name;           /* stream, bucket and subject prefix; default "sbx" */
    char *inbox_prefix;   /* the connection's reply subjects (NATS permissions can give each
                             tenant its own); NULL = the library's _INBOX */
    int64_t replicas;     /* JetStream replicas of the stream and bucket; default 1 */
    int64_t ack_wait_ms;  /* redelivery after a worker stops acknowledging; default 30000 */
    int64_t node_wait_ms; /* how long a node-bound request waits for its node; 30000 */
    int64_t completion_ttl_s;   /* how long completions are kept; default 86400 */
    int64_t dedup_window_s;     /* JetStream duplicate window (Nats-Msg-Id); default 600 */
    int64_t connect_timeout_ms; /* default 5000 */
} sbx_queue_config;

typedef struct sbx_broker_config {
    char *flavor;              /* embedded | thread | remote | queue; default thread */
    int64_t threads;           /* default 16 */
    int64_t queue_depth;       /* default 1024 */
    int64_t wait_timeout_ms;   /* default 60000 */
    int64_t lru_size;          /* completions kept for result(); default 1024 */
    int64_t principal_threads; /* most threads one principal holds; 0 (default): all but 1/4 */
    sbx_remote_config remote;
    sbx_queue_config queue;
} sbx_broker_config;

/* A caller the worker accepts, and the principal subjects it may assert ("*" = any). */
typedef struct sbx_worker_caller {
    char *name;         /* for logs */
    char *token_env;    /* bearer token held in this env var; NULL for a certificate caller */
    char *cert_subject; /* mTLS: the client certificate's subject CN; NULL for a token caller */
    char **subjects;
    size_t n_subjects;
} sbx_worker_caller;

typedef struct sbx_worker_config {
    char *listen;             /* host:port; default 127.0.0.1:7443 */
    char *tls_cert_file;      /* server certificate (required off loopback) */
    char *tls_key_file;       /* its key */
    char *tls_client_ca_file; /* CA that signs client certificates (mTLS); NULL = no mTLS */
    sbx_worker_caller *callers;
    size_t n_callers;
    int64_t max_message_bytes; /* default 16 MiB */
    int64_t drain_timeout_ms;  /* SIGTERM: how long in-flight work may finish; default 30000 */
    int64_t drain_notice_ms;   /* SIGTERM: health says NOT_SERVING and the worker keeps serving
                                  this long before the drain starts (probes and balancers see it);
                                  default 0 */
    char *record;              /* append Recording frames to this file; NULL = off */
    char *serve;               /* grpc | queue | both; default grpc */
    int64_t record_max_bytes;  /* rotate `record` once it would pass this size (record.1 ..
                                  record.N); default 256 MiB, 0 = never rotate */
    int64_t record_keep;       /* rotated record files kept; default 4 */
    char *log_level;           /* JSON log lines at this level and above: error | warn | info |
                                  debug; default info */
    char *log_file;            /* JSON log lines appended here (reopened on SIGHUP); NULL =
                                  stderr */
    char *metrics_listen;      /* host:port of the Prometheus /metrics listener; NULL = off */
} sbx_worker_config;

/* ---- the whole file ------------------------------------------------------------------- */

typedef struct sbx_config {
    char *path;                  /* the file loaded; NULL for the built-in default */
    char *default_profile;       /* default "default" */
    char *secret_file;           /* binding key file; default /etc/sbx/secret (root) or
                                    $XDG_CONFIG_HOME/sbx/secret */
    bool secret_file_configured; /* the file named it: its directory must exist (never made) */
    char *node;                  /* default: hostname */
    char *runtime_dir;           /* default /run/sbx (root) or $XDG_RUNTIME_DIR/sbx */
    char *snapshot_dir;          /* where snapshots are kept, one directory per principal;
                                    default /var/lib/sbx/snapshots (root) or
                                    $XDG_STATE_HOME/sbx/snapshots */
    int64_t snapshot_max_mb;     /* largest snapshot (packed workspace); default 1024 */
    int64_t principal_sandboxes; /* the most sandboxes of per_session profiles one principal
                                    holds on this engine at once; 0 (default): no limit */
    sbx_broker_config broker;
    sbx_worker_config worker;
    sbx_profile_config *profiles;
    size_t n_profiles;
} sbx_config;

/* Loads the configuration. path NULL: $SBX_CONFIG if set, else the built-in default (no file).
 * A path that does not exist is an error (a typo must not silently mean "defaults").
 * On error *out is NULL, err names file:line:column, the key and what is accepted. */
sbx_status sbx_config_load(const char *path, sbx_config **out, sbx_error *err);
/* Command-line values that replace the file's (NULL: keep the file's). They are applied before
 * the file's values are checked against each other (a non-loopback --listen still needs the
 * file's TLS and callers), and errors name the flag. */
typedef struct sbx_config_overrides {
    const char *worker_listen;         /* --listen HOST:PORT */
    const char *worker_log_level;      /* --log-level error|warn|info|debug */
    const char *worker_metrics_listen; /* --metrics-listen HOST:PORT */
} sbx_config_overrides;
/* sbx_config_load with overrides (ov may be NULL). */
sbx_status sbx_config_load_with(const char *path, const sbx_config_overrides *ov, sbx_config **out,
                                sbx_error *err);
/* Loads from a string (tests, embedding); `name` is used in messages as the file name. */
sbx_status sbx_config_load_string(const char *yaml, size_t len, const char *name, sbx_config **out,
                                  sbx_error *err);
/* The built-in default: one `local` profile named "default", network denied. */
sbx_status sbx_config_default(sbx_config **out, sbx_error *err);
void sbx_config_free(sbx_config *cfg);

/* The profile by name (NULL name or "" = the default profile); NULL when absent. */
const sbx_profile_config *sbx_config_profile(const sbx_config *cfg, const char *name);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
