/* provider.h - the provider interface (DESIGN §8): one const ops table per provider type, and
 * the factory that finds built-in providers by name.
 *
 * A provider knows nothing about brokers, config files or the wire: the factory hands it its
 * own validated config block (sbx_provider_ctx.options). Only the engine calls providers.
 * Capabilities are honest: declare only what is enforced. An operation a provider does not
 * declare is answered SBX_E_CAPABILITY by the engine before the provider is called; an ops slot
 * may be NULL for an operation that is never declared.
 *
 * Threading: open/close are called once per profile. create/attach/destroy may be called from
 * several threads at once (different sessions); calls on one sbx_sandbox are serialized by the
 * engine's per-session lock.
 */
#ifndef SBX_PROVIDER_H
#define SBX_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* What the factory hands a provider when a profile opens it. All borrowed; valid until close. */
typedef struct sbx_provider_ctx {
    const char *profile;         /* profile name, for labels and messages */
    const sbx_options *options;  /* its config block, validated against ops->options */
    sbx_environment environment; /* managed or attached */
    const char *attach_to;       /* attached: the external sandbox id; else NULL */
    const char *node;            /* this host's node name */
    const char *runtime_dir;     /* per-host state dir (/run/sbx or $XDG_RUNTIME_DIR/sbx) */
    sbx_scope scope;             /* the profile's session scope: per_call sandboxes are marked
                                    so a sweep can remove them once their owner is gone */
    /* SBX_PROVIDER_KEY_LEN bytes derived from the deployment secret for this provider type
     * (the same on every worker sharing the secret), from which a provider derives the
     * credentials of its sandboxes (the kubernetes agent's); NULL outside an engine. */
    const uint8_t *credential_key;
} sbx_provider_ctx;

/* Length of sbx_provider_ctx.credential_key: one HMAC-SHA256 output. */
#define SBX_PROVIDER_KEY_LEN 32

/* A live handle to one sandbox. Providers embed it as the FIRST member of their own struct. */
typedef struct sbx_sandbox {
    char *id;     /* the provider's reconnect id (malloc'd; freed by the provider's close) */
    bool resumed; /* set by attach when reaching it woke a paused sandbox (the engine says so) */
} sbx_sandbox;

/* Output streaming: called with each chunk as the program produces it (stream is
 * SBX__V1__STREAM__STREAM_STDOUT or _STDERR; offset is the chunk's position in that stream). */
typedef void (*sbx_output_fn)(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                              uint64_t offset);

/* How one operation runs. Borrowed by the provider for the duration of the call. */
typedef struct sbx_exec_opts {
    int64_t deadline_mono_ms;    /* sbx_monotonic_ms() deadline; 0 = none. On expiry the whole
                                    process tree is killed: return SBX_E_TIMEOUT with the result
                                    filled with what was printed so far (outcome TIMED_OUT). */
    uint64_t output_limit_bytes; /* per stream; 0 = provider maximum */
    sbx_output_fn on_output;     /* NULL = no streaming */
    void *on_output_arg;
    const volatile int *cancel;     /* non-NULL and non-zero: abandon as on a deadline */
    const sbx_principal *principal; /* effective principal (never NULL) */
    const sbx_policy *policy;       /* effective policy (never NULL) */
} sbx_exec_opts;

/* A list of names (policy dimensions the provider cannot enforce, ...). */
typedef struct sbx_strlist {
    char **items;
    size_t n;
} sbx_strlist;
bool sbx_strlist_add(sbx_strlist *l, const char *item); /* copies item; false on ENOMEM */
bool sbx_strlist_contains(const sbx_strlist *l, const char *item);
void sbx_strlist_clear(sbx_strlist *l);
/* Joins with sep into a malloc'd string ("" for an empty list). */
char *sbx_strlist_join(const sbx_strlist *l, const char *sep);

/* Static traits, known without opening the provider (used by the config's environment matrix). */
enum {
    SBX_PROVIDER_PROVISIONS = 1u << 0, /* can create sandboxes: usable under `managed` */
    SBX_PROVIDER_ATTACHES = 1u << 1,   /* can attach to ones it did not create: `attached` */
    /* write_file honours WriteFile.offset (appends a chunk to a file of that size); without it
     * the engine refuses an offset (CAPABILITY) rather than let a provider truncate */
    SBX_PROVIDER_WRITE_OFFSET = 1u << 2,
    /* Its sandboxes live on one host (a process tree, a container, the fake's memory): a handle
     * names that node and only that node's worker may use it. Without this trait the provider's
     * sandboxes are reachable from any worker (a cloud API) and its handles are node-free. */
    SBX_PROVIDER_HOST_LOCAL = 1u << 3,
    /* attach itself resumes a paused sandbox (a cloud API's reconnect does), setting
     * sbx_sandbox.resumed: the engine does not ask resume before each operation (which would
     * be one more round trip to the API) */
    SBX_PROVIDER_ATTACH_RESUMES = 1u << 4,
};

typedef struct sbx_provider_ops {
    const char *name;               /* "local", "docker", ... */
    const char *summary;            /* one line for `sbx providers` */
    unsigned traits;                /* SBX_PROVIDER_* */
    const sbx_option_spec *options; /* schema of its config block ({NULL} terminated) */

    /* Opens the provider for one profile. *state is passed back to every other call. */
    sbx_status (*open)(const sbx_provider_ctx *ctx, void **state, sbx_error *err);
    /* Releases the provider (never its sandboxes). state may be NULL. */
    void (*close)(void *state);

    /* Fills caps (initialised by the caller; languages via sbx_add_string). */
    void (*capabilities)(void *state, sbx_capabilities *caps);
    /* Appends to *unenforceable the name of every non-default policy dimension this provider
     * cannot enforce ("network_egress=allowlist", "cpu", "memory_mb", "fs_write", ...).
     * NULL: the engine derives it from the capabilities. */
    sbx_status (*check_policy)(void *state, const sbx_policy *policy, sbx_strlist *unenforceable,
                               sbx_error *err);
    /* Optional: refuses, when the configuration is loaded, a profile this provider will refuse
     * every request of (its default policy against its own options); err says what to change,
     * without the profile's name, which the loader adds. NULL: nothing to check. */
    sbx_status (*check_profile)(const sbx_profile_config *profile, sbx_error *err);
    /* Optional: whether programs of profile may run in the host's network namespace, where
     * they reach every service on the host's loopback (a worker listening there without
     * callers among them). NULL: never. */
    bool (*shares_host_network)(const sbx_profile_config *profile);

    /* Provisions a new sandbox for session (managed only). */
    sbx_status (*create)(void *state, const sbx_session_handle *session,
                         const sbx_principal *principal, const sbx_policy *policy,
                         sbx_sandbox **out, sbx_error *err);
    /* Reconnects to sandbox_id; SBX_E_GONE when it no longer exists. */
    sbx_status (*attach)(void *state, const char *sandbox_id, const sbx_principal *principal,
                         const sbx_policy *policy, sbx_sandbox **out, sbx_error *err);
    /* Destroys sandbox_id. Idempotent: an unknown or already destroyed id is SBX_OK. */
    sbx_status (*destroy)(void *state, const char *sandbox_id, sbx_error *err);

    /* Operations on an acquired sandbox. The result is initialised by the caller; a program that
     * fails is SBX_OK with the result saying so. */
    sbx_status (*run_code)(sbx_sandbox *sb, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                           sbx_result *result, sbx_error *err);
    sbx_status (*run_command)(sbx_sandbox *sb, const Sbx__V1__RunCommand *op,
                              const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
    sbx_status (*install_packages)(sbx_sandbox *sb, const Sbx__V1__InstallPackages *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
    sbx_status (*write_file)(sbx_sandbox *sb, const Sbx__V1__WriteFile *op, const sbx_exec_opts *o,
                             sbx_result *result, sbx_error *err);
    /* Fills result->files with one entry holding the content. */
    sbx_status (*read_file)(sbx_sandbox *sb, const Sbx__V1__ReadFile *op, const sbx_exec_opts *o,
                            sbx_result *result, sbx_error *err);
    /* Fills result->files with one entry per directory entry (no content). */
    sbx_status (*list_files)(sbx_sandbox *sb, const Sbx__V1__ListFiles *op, const sbx_exec_opts *o,
                             sbx_result *result, sbx_error *err);
    /* Releases the handle, never the sandbox. sb may be NULL. */
    void (*sandbox_close)(sbx_sandbox *sb);

    /* Detached commands (declared by Capabilities.detach): run_command with op->detach returns
     * once the command started, result->command_id set. attach_command follows one (output from
     * the offsets on, result->stdout_offset/stderr_offset saying where it starts, then its end);
     * the deadline or o->cancel stops following (SBX_E_TIMEOUT), never the command. An offset
     * older than what is kept is SBX_E_INVALID_ARGUMENT naming the range kept; an unknown
     * command id is SBX_E_GONE. cancel_command signals it and reports its end. NULL: never
     * declared. */
    sbx_status (*attach_command)(sbx_sandbox *sb, const Sbx__V1__AttachCommand *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
    sbx_status (*cancel_command)(sbx_sandbox *sb, const Sbx__V1__CancelCommand *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err);

    /* Removes what nobody can reach again: sandboxes of this node that this provider made for
     * a per_call session whose owner process is gone (killed mid-call), and dead ones. Appends
     * each removed sandbox id to *removed. Live and per_session/per_runtime sandboxes stay
     * (a restarted worker finds them again by their handles). NULL: nothing to sweep. */
    sbx_status (*sweep)(void *state, sbx_strlist *removed, sbx_error *err);

    /* Lists the live sandboxes this provider made on this node for this profile's per_session
     * sessions (never per_call ones), calling held(arg, sandbox_id, subject) for each with the
     * subject of the principal it was made for. An engine that bounds principal_sandboxes
     * counts them when it opens the profile, so a restarted worker finds what each principal
     * already holds. NULL: not listed (a restarted engine counts only what it makes). */
    sbx_status (*list_held)(void *state,
                            void (*held)(void *arg, const char *sandbox_id, const char *subject),
                            void *arg, sbx_error *err);

    /* Pause and resume (declared by Capabilities.pause), by sandbox id: a paused sandbox cannot
     * be attached (its agent is frozen), so neither needs a handle. pause freezes every process
     * of the sandbox and returns once they are frozen; resume thaws them and sets *was_paused
     * (false for a sandbox that ran: the engine calls it before every other operation on a
     * session of such a provider, so it must be cheap then). Both idempotent; an unknown id is
     * SBX_E_GONE. NULL: never declared. */
    sbx_status (*pause)(void *state, const char *sandbox_id, sbx_error *err);
    sbx_status (*resume)(void *state, const char *sandbox_id, bool *was_paused, sbx_error *err);

    /* ExposePort (declared by Capabilities.expose), by sandbox id: makes TCP port (1..65535)
     * of the sandbox reachable from outside it and sets *url (malloc'd, "http://HOST:P/" or the
     * provider's preview URL) and *token (malloc'd access token, NULL when none is needed).
     * Asking again for the same port returns the same URL and token; what it set up ends with
     * the sandbox. An unknown id is SBX_E_GONE. NULL: never declared. */
    sbx_status (*expose)(void *state, const char *sandbox_id, uint32_t port, char **url,
                         char **token, sbx_error *err);
} sbx_provider_ops;

/* Deadlines of create and attach. The engine runs a request on one thread; while it acquires
 * a sandbox (create, attach) this is the request's monotonic deadline (sbx_monotonic_ms), 0
 * when it has none. A provider bounds every step of reaching or creating a sandbox (boot,
 * connect, ping, daemon calls) by it, so a caller's deadline holds even against a stopped
 * agent or a hung daemon. */
int64_t sbx_provider_deadline_ms(void);
/* Set by the engine around opening a provider and acquiring a sandbox (0 clears it). */
void sbx_provider_set_deadline_ms(int64_t deadline_mono_ms);
/* now + step_ms, or the deadline above when it comes sooner: the bound of one step. */
int64_t sbx_provider_step_deadline(int64_t step_ms);

/* The provider with this name (built-in first, then registered); NULL when unknown. */
const sbx_provider_ops *sbx_provider_lookup(const char *name);
/* All providers: the built-ins (sorted by name) followed by the registered ones in
 * registration order; returns the count. The list stays valid for the life of the process
 * (later registrations only append). */
size_t sbx_provider_builtins(const sbx_provider_ops *const **list);
/* "docker, e2b, fake, local" -- for error messages. Thread-local storage, valid until the
 * calling thread calls it again. */
const char *sbx_provider_names(void);

/* Maximum number of providers (built-in plus registered): a fixed table keeps lookups lock-free
 * and the list returned by sbx_provider_builtins stable. 64 is ten times the built-in set. */
#define SBX_MAX_PROVIDERS 64

/* Registers a provider at run time (an embedding program's own provider, a test provider).
 * ops must stay valid for the life of the process and is never copied. Thread-safe.
 * SBX_E_INVALID_ARGUMENT: NULL ops, a name that is not [a-z0-9_]{1,32}, no traits;
 * SBX_E_CONFIG: the name is already taken (built-in or registered);
 * SBX_E_RESOURCE_EXHAUSTED: SBX_MAX_PROVIDERS reached. There is no unregister: config and
 * engine keep pointers to ops. */
sbx_status sbx_provider_register(const sbx_provider_ops *ops, sbx_error *err);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
