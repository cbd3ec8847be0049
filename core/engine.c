/* engine.c - the one place that turns an ExecutionRequest into an ExecutionCompletion
 * (DESIGN §5), in this order: shape, profile, destroy, fail-closed checks, session lock,
 * acquire (binding, attach, self-heal or create), execute, stamp and sign.
 *
 * Every early return produces a completion; nothing here prints or exits. Providers are opened
 * lazily once per profile and cached; the hot path does no config parsing and no syscalls of
 * its own beyond the clock reads it needs. This file must not know about brokers or the wire.
 */
#include "core/clock.h"
#include "sbx/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/binding.h"
#include "core/hash.h"
#include "core/holdings.h"
#include "core/table.h"
#include "core/idle.h"
#include "core/listing.h"
#include "core/policy.h"
#include "core/snapshot.h"

/* Output kept per stream when the policy sets no output_limit_bytes: a completion must fit in
 * one gRPC message (16 MiB default max_message_bytes) with both streams and the rest. */
#define ENGINE_OUTPUT_CAP (6u * 1024u * 1024u)

/* Session-lock hash buckets: a power of two well above the number of sessions running at once
 * on one worker (threads default 16), so chains stay one or two entries long. */
#define ENGINE_LOCK_BUCKETS 1024

/* Stripes of the session-lock table: each guards the buckets with its index modulo this, so
 * executors touching different sessions rarely meet on one mutex. */
#define ENGINE_LOCK_STRIPES 16

/* Bounds of request fields, matching proto/sbx/v1/execution.options (the nanopb limits), so a
 * request the engine accepts can cross every codec. */
#define REQ_TASK_ID_MAX 64
#define REQ_PROFILE_MAX 128
#define REQ_SESSION_ID_MAX 128
#define REQ_SANDBOX_ID_MAX 256
#define REQ_SUBJECT_MAX 256
#define REQ_PATH_MAX 1024
#define REQ_LANGUAGE_MAX 32

/* One profile's provider, opened on first use. `mu` guards opening; once `opened` is set
 * (release) state/caps are immutable and read without the lock. */
typedef struct profile_slot {
    struct sbx_engine *engine; /* its engine (seeding its holdings at open) */
    const sbx_profile_config *profile;
    const sbx_provider_ops *ops;
    sbx_provider_ctx ctx;
    uint8_t credential_key[SBX_PROVIDER_KEY_LEN]; /* ctx.credential_key points here */
    pthread_mutex_t mu;
    atomic_int opened;
    void *state;
    sbx_capabilities *caps;
    /* sandboxes this engine created and removed (destroyed, or found gone) under the profile:
     * with those listed below, what it holds alive (sbx_engine_stats) */
    atomic_uint_fast64_t made, removed;
    /* per_session sandboxes the provider listed when the slot opened (made before this engine:
     * a restarted worker), counted in sandboxes_live */
    atomic_uint_fast64_t listed;
} profile_slot;

/* A session's lock. Lives in the engine's table while refs > 0; the last holder frees it, so
 * idle sessions cost nothing (lock objects are reclaimed when unused). Guarded by locks_mu
 * except `mu` itself. */
typedef struct session_lock {
    sbx_link link; /* in sbx_engine.locks, by id */
    int refs;
    pthread_mutex_t mu;
    char id[];
} session_lock;

struct sbx_engine {
    const sbx_config *cfg; /* borrowed, immutable */
    sbx_binding_key *key;  /* immutable after new */
    profile_slot *slots;   /* one per configured profile, same order */
    size_t n_slots;
    /* stripe b % ENGINE_LOCK_STRIPES guards bucket b and the refs of the locks in it */
    pthread_mutex_t locks_mu[ENGINE_LOCK_STRIPES];
    sbx_table locks;
    sbx_link *lock_buckets[ENGINE_LOCK_BUCKETS];
    char *profile_names; /* "a, b, c" for CONFIG errors */
    /* idle_action: pause. NULL/unused when no profile asks for it. The thread runs
     * sbx_engine_idle_pass every idle_every_ms until idle_stop (idle_mu guards it, idle_cv
     * wakes the thread to stop). */
    idle_table *idle;
    int64_t *idle_timeout_ms; /* per slot; 0 = not paused for idleness */
    int64_t idle_every_ms;
    pthread_t idle_thread;
    bool idle_running, idle_stop;
    pthread_mutex_t idle_mu;
    pthread_cond_t idle_cv;
    holdings *holdings;          /* sandbox.principal_sandboxes; NULL: no limit */
    atomic_bool holdings_listed; /* every listing profile was asked to open (hold_place) */
};

/* ---- small helpers ------------------------------------------------------------------------ */

static bool str_set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

static sbx_session_handle *handle_copy(const sbx_session_handle *src)
{
    sbx_session_handle *h = sbx_session_handle_new();
    if (h == NULL || src == NULL)
        return h;
    bool ok =
        sbx_set_string(&h->session_id, src->session_id) && sbx_set_string(&h->name, src->name) &&
        sbx_set_string(&h->profile, src->profile) && sbx_set_string(&h->provider, src->provider) &&
        sbx_set_string(&h->sandbox_id, src->sandbox_id) && sbx_set_string(&h->node, src->node) &&
        sbx_set_bytes(&h->binding, src->binding.data, src->binding.len);
    h->created_at_ms = src->created_at_ms;
    h->last_used_at_ms = src->last_used_at_ms;
    h->status = src->status;
    if (ok && src->policy != NULL)
        ok = (h->policy = (sbx_policy *)sbx_message_copy(&src->policy->base)) != NULL;
    if (!ok) {
        sbx_message_free(&h->base);
        return NULL;
    }
    return h;
}

static void idle_start(sbx_engine *e);

static sbx_completion *fail(const sbx_request *req, const sbx_error *err,
                            const sbx_session_handle *session)
{
    const char *task_id = req != NULL && req->task_id != NULL ? req->task_id : "";
    sbx_completion *c = sbx_completion_from_error(task_id, err);
    if (c != NULL && session != NULL)
        c->session = handle_copy(session);
    return c;
}

/* Takes ownership of session. */
static sbx_completion *fail_owned(const sbx_request *req, const sbx_error *err,
                                  sbx_session_handle *session, sbx_result *partial)
{
    const char *task_id = req->task_id != NULL ? req->task_id : "";
    sbx_completion *c = sbx_completion_from_error(task_id, err);
    if (c == NULL) {
        sbx_message_free((ProtobufCMessage *)session);
        sbx_message_free((ProtobufCMessage *)partial);
        return NULL;
    }
    c->session = session;
    c->result = partial;
    return c;
}

/* ---- engine lifetime ---------------------------------------------------------------------- */

sbx_status sbx_engine_new(const sbx_config *cfg, sbx_engine **out, sbx_error *err)
{
    *out = NULL;
    if (cfg == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_engine_new: no configuration");
    sbx_engine *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory creating the engine");
    e->cfg = cfg;
    sbx_table_init(&e->locks, e->lock_buckets, ENGINE_LOCK_BUCKETS);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    for (size_t i = 0; i < ENGINE_LOCK_STRIPES; i++)
        pthread_mutex_init(&e->locks_mu[i], &attr);
    pthread_mutexattr_destroy(&attr);
    e->n_slots = cfg->n_profiles;
    e->slots = calloc(e->n_slots > 0 ? e->n_slots : 1, sizeof(*e->slots));
    size_t names_len = 1;
    for (size_t i = 0; i < cfg->n_profiles; i++)
        names_len += strlen(cfg->profiles[i].name) + 2;
    e->profile_names = calloc(1, names_len);
    if (e->slots == NULL || e->profile_names == NULL) {
        sbx_engine_free(e);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory creating the engine");
    }
    size_t names_at = 0; /* the names are "a, b, c": names_len counted each with its ", " */
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        profile_slot *s = &e->slots[i];
        pthread_mutex_init(&s->mu, NULL);
        s->engine = e;
        s->profile = p;
        if (i > 0) {
            memcpy(e->profile_names + names_at, ", ", 2);
            names_at += 2;
        }
        size_t name_len = strlen(p->name);
        memcpy(e->profile_names + names_at, p->name, name_len + 1);
        names_at += name_len;
        s->ops = sbx_provider_lookup(p->type);
        if (s->ops == NULL) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "profile '%s': unknown provider type '%s'; built-in providers: %s",
                          p->name, p->type != NULL ? p->type : "(none)", sbx_provider_names());
            sbx_engine_free(e);
            return SBX_E_CONFIG;
        }
        s->ctx.profile = p->name;
        s->ctx.options = p->options;
        s->ctx.environment = p->environment;
        s->ctx.attach_to = p->attach_to;
        s->ctx.node = cfg->node;
        s->ctx.runtime_dir = cfg->runtime_dir;
        s->ctx.scope = p->scope;
    }
    /* A secret_file the file names gets no new directories; the default one may. */
    sbx_status st = cfg->secret_file_configured
                        ? sbx_binding_key_load_configured(cfg->secret_file, &e->key, err)
                        : sbx_binding_key_load(cfg->secret_file, &e->key, err);
    if (st != SBX_OK) {
        sbx_engine_free(e);
        return st;
    }
    for (size_t i = 0; i < e->n_slots; i++) {
        profile_slot *s = &e->slots[i];
        if (sbx_binding_derive_provider_key(e->key, s->ops->name, s->credential_key))
            s->ctx.credential_key = s->credential_key;
    }
    if (cfg->principal_sandboxes > 0 &&
        (e->holdings = holdings_new((size_t)cfg->principal_sandboxes)) == NULL) {
        sbx_engine_free(e);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory creating the engine");
    }
    idle_start(e);
    *out = e;
    return SBX_OK;
}

void sbx_engine_free(sbx_engine *e)
{
    if (e == NULL)
        return;
    if (e->idle_running) {
        pthread_mutex_lock(&e->idle_mu);
        e->idle_stop = true;
        pthread_cond_signal(&e->idle_cv);
        pthread_mutex_unlock(&e->idle_mu);
        pthread_join(e->idle_thread, NULL);
        pthread_mutex_destroy(&e->idle_mu);
        pthread_cond_destroy(&e->idle_cv);
    }
    idle_free(e->idle);
    free(e->idle_timeout_ms);
    holdings_free(e->holdings);
    for (size_t i = 0; e->slots != NULL && i < e->n_slots; i++) {
        profile_slot *s = &e->slots[i];
        if (atomic_load(&s->opened) && s->ops->close != NULL)
            s->ops->close(s->state);
        sbx_message_free((ProtobufCMessage *)s->caps);
        pthread_mutex_destroy(&s->mu);
    }
    SBX_TABLE_EACH(&e->locks, link)
    {
        session_lock *l = SBX_ENTRY(link, session_lock, link);
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
    for (size_t i = 0; i < ENGINE_LOCK_STRIPES; i++)
        pthread_mutex_destroy(&e->locks_mu[i]);
    sbx_binding_key_free(e->key);
    free(e->slots);
    free(e->profile_names);
    free(e);
}

const sbx_config *sbx_engine_config(const sbx_engine *engine)
{
    return engine != NULL ? engine->cfg : NULL;
}

/* ---- profiles and providers --------------------------------------------------------------- */

static profile_slot *find_slot(sbx_engine *e, const char *name)
{
    if (!str_set(name))
        name = e->cfg->default_profile;
    if (!str_set(name))
        return e->n_slots == 1 ? &e->slots[0] : NULL;
    for (size_t i = 0; i < e->n_slots; i++)
        if (strcmp(e->slots[i].profile->name, name) == 0)
            return &e->slots[i];
    return NULL;
}

typedef struct listed_arg {
    holdings *holdings; /* NULL: no bound, only counted */
    size_t slot;
    uint64_t n;
} listed_arg;

static void count_listed(void *arg, const char *sandbox_id, const char *subject)
{
    listed_arg *a = arg;
    if (sandbox_id == NULL || sandbox_id[0] == '\0')
        return;
    a->n++;
    if (a->holdings != NULL && subject != NULL)
        holdings_add(a->holdings, subject, a->slot, sandbox_id);
}

/* Counts the per_session sandboxes the provider (state) lists for the profile: made before
 * this engine (a restarted worker), they are live (sandboxes_live), and under a bound (h) each
 * counts for its principal. */
static sbx_status list_live(profile_slot *s, void *state, holdings *h, sbx_error *err)
{
    if (s->profile->scope != SBX_SCOPE_PER_SESSION || s->ops->list_held == NULL)
        return SBX_OK;
    listed_arg a = {.holdings = h, .slot = (size_t)(s - s->engine->slots), .n = 0};
    sbx_status st = s->ops->list_held(state, count_listed, &a, err);
    if (st == SBX_OK)
        atomic_store_explicit(&s->listed, a.n, memory_order_relaxed);
    return st;
}

/* When principal_sandboxes bounds the engine: counts what each principal already holds under
 * the profile being opened, before the slot is marked open, so no request of this profile
 * creates until it is done. A failed listing fails the open (retried on the next request): a
 * bound it cannot count is not enforced silently. Without a bound nothing is listed here (a
 * one-shot CLI would read every sandbox's record on each run): a worker lists at its start
 * (sbx_engine_sweep), for the live gauge only. */
static sbx_status count_held(profile_slot *s, void *state, sbx_error *err)
{
    holdings *h = s->engine->holdings;
    if (h == NULL)
        return SBX_OK;
    sbx_status st = list_live(s, state, h, err);
    if (st != SBX_OK)
        sbx_error_prefix(err, "listing the sandboxes principals hold (principal_sandboxes): ");
    return st;
}

/* Opens the slot's provider once. A failed open is retried on the next request (the daemon or
 * API behind it may come back). */
static sbx_status slot_open(profile_slot *s, sbx_error *err)
{
    if (atomic_load_explicit(&s->opened, memory_order_acquire))
        return SBX_OK;
    sbx_status st = SBX_OK;
    pthread_mutex_lock(&s->mu);
    if (!atomic_load_explicit(&s->opened, memory_order_relaxed)) {
        void *state = NULL;
        st = s->ops->open != NULL ? s->ops->open(&s->ctx, &state, err) : SBX_OK;
        if (st == SBX_OK && (st = count_held(s, state, err)) != SBX_OK && s->ops->close != NULL)
            s->ops->close(state);
        if (st == SBX_OK) {
            s->caps = malloc(sizeof(*s->caps));
            if (s->caps == NULL) {
                if (s->ops->close != NULL)
                    s->ops->close(state);
                st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening a provider");
            } else {
                sbx__v1__capabilities__init(s->caps);
                if (s->ops->capabilities != NULL)
                    s->ops->capabilities(state, s->caps);
                /* Snapshots are the engine's, built on the provider's own operations: a
                 * command (tar), files, and appending writes to carry more than one chunk. */
                s->caps->snapshot = s->caps->shell && s->caps->files && s->caps->provisions &&
                                    s->ops->run_command != NULL && s->ops->read_file != NULL &&
                                    s->ops->write_file != NULL &&
                                    (s->ops->traits & SBX_PROVIDER_WRITE_OFFSET) != 0;
                s->state = state;
                atomic_store_explicit(&s->opened, 1, memory_order_release);
            }
        } else {
            sbx_error_prefix(err, "profile '%s' (provider %s): ", s->profile->name, s->ops->name);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- session locks ------------------------------------------------------------------------ */

static session_lock *lock_session(sbx_engine *e, const char *id)
{
    uint64_t h = sbx_hash_str(id);
    pthread_mutex_t *mu = &e->locks_mu[sbx_table_slot(&e->locks, h) % ENGINE_LOCK_STRIPES];
    pthread_mutex_lock(mu);
    session_lock *l = NULL;
    for (sbx_link *k = sbx_table_first(&e->locks, h); k != NULL && l == NULL; k = k->next)
        if (k->hash == h && strcmp(SBX_ENTRY(k, session_lock, link)->id, id) == 0)
            l = SBX_ENTRY(k, session_lock, link);
    if (l == NULL) {
        size_t len = strlen(id);
        l = malloc(sizeof(*l) + len + 1);
        if (l == NULL) {
            pthread_mutex_unlock(mu);
            return NULL;
        }
        memcpy(l->id, id, len + 1);
        l->refs = 0;
        pthread_mutex_init(&l->mu, NULL);
        sbx_table_add(&e->locks, &l->link, h);
    }
    l->refs++;
    pthread_mutex_unlock(mu);
    pthread_mutex_lock(&l->mu);
    return l;
}

static void unlock_session(sbx_engine *e, session_lock *l)
{
    if (l == NULL)
        return;
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_t *mu =
        &e->locks_mu[sbx_table_slot(&e->locks, l->link.hash) % ENGINE_LOCK_STRIPES];
    pthread_mutex_lock(mu);
    if (--l->refs == 0) {
        sbx_table_del(&e->locks, &l->link);
        pthread_mutex_destroy(&l->mu);
        free(l);
    }
    pthread_mutex_unlock(mu);
}

size_t sbx_engine_session_locks(sbx_engine *e)
{
    size_t n = 0;
    for (size_t b = 0; b < ENGINE_LOCK_BUCKETS; b++) {
        pthread_mutex_t *mu = &e->locks_mu[b % ENGINE_LOCK_STRIPES];
        pthread_mutex_lock(mu);
        for (const sbx_link *l = e->lock_buckets[b]; l != NULL; l = l->next)
            n++;
        pthread_mutex_unlock(mu);
    }
    return n;
}

/* ---- step 1: shape ------------------------------------------------------------------------ */

static sbx_status check_len(const char *what, const char *s, size_t max, sbx_error *err)
{
    if (s != NULL && strlen(s) > max)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "%s is longer than %zu bytes", what, max);
    return SBX_OK;
}

/* Long because it is one switch over the contract's operations, a few lines of field checks per
 * case, after the checks every request shares. */
static sbx_status validate_shape(const sbx_request *req, sbx_error *err)
{
    if (req == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "no request");
    if (!str_set(req->task_id))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "request has no task_id; set a uuid (sbx_request_new does)");
    if (check_len("task_id", req->task_id, REQ_TASK_ID_MAX, err) ||
        check_len("profile", req->profile, REQ_PROFILE_MAX, err))
        return SBX_E_INVALID_ARGUMENT;
    if (req->deadline_ms < 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "deadline_ms %lld is negative; use unix milliseconds or 0 for none",
                             (long long)req->deadline_ms);
    const sbx_session_handle *s = req->session;
    if (s != NULL) {
        if (check_len("session.session_id", s->session_id, REQ_SESSION_ID_MAX, err) ||
            check_len("session.sandbox_id", s->sandbox_id, REQ_SANDBOX_ID_MAX, err))
            return SBX_E_INVALID_ARGUMENT;
        if (str_set(s->sandbox_id) && !str_set(s->session_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "session has a sandbox_id but no session_id; pass the whole "
                                 "handle a completion returned");
        if (s->binding.len != 0 && s->binding.len != SBX_BINDING_LEN)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "session.binding is %zu bytes; a binding is %d bytes",
                                 s->binding.len, SBX_BINDING_LEN);
    }
    if (req->principal != NULL &&
        check_len("principal.subject", req->principal->subject, REQ_SUBJECT_MAX, err))
        return SBX_E_INVALID_ARGUMENT;
    const sbx_policy *p = req->policy;
    if (p != NULL && p->lenient && p->strict)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "policy.lenient and policy.strict are both true; set the one you "
                             "mean (strict refuses what cannot be enforced, lenient leaves it "
                             "out with a notice)");
    if (p != NULL && p->n_network_allow > 0 &&
        (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY ||
         p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "policy.network_allow is set but network_egress is %s; use "
                             "allowlist or drop the entries",
                             sbx_policy_egress_name(p->network_egress));
    if (str_set(req->from_snapshot)) {
        if (snapshot_check_name("from_snapshot", req->from_snapshot, err) != SBX_OK)
            return SBX_E_INVALID_ARGUMENT;
        if (s != NULL && str_set(s->sandbox_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "from_snapshot fills a new sandbox, but session '%s' already "
                                 "has one; start a new session from the snapshot",
                                 s->session_id);
        switch (req->op_case) {
        case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE:
        case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND:
        case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES:
        case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE:
        case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE:
        case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES: break;
        default:
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "from_snapshot goes with an operation that creates the "
                                 "sandbox (run_code, run_command, install_packages or a file "
                                 "operation), not with %s",
                                 sbx_request_op_name(req));
        }
    }
    switch (req->op_case) {
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE:
        if (!str_set(req->run_code->language))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "run_code.language is empty; name one (python, bash, ...)");
        return check_len("run_code.language", req->run_code->language, REQ_LANGUAGE_MAX, err);
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND: {
        bool has_argv = req->run_command->n_argv > 0, has_shell = str_set(req->run_command->shell);
        if (has_argv == has_shell)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "run_command needs exactly one of argv and shell (got %s)",
                                 has_argv ? "both" : "neither");
        if (has_argv && !str_set(req->run_command->argv[0]))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "run_command.argv[0] is empty");
        return SBX_OK;
    }
    case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES:
        if (!str_set(req->install_packages->manager) || req->install_packages->n_packages == 0)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "install_packages needs a manager and at least one package");
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE:
        if (!str_set(req->write_file->path))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "write_file.path is empty");
        return check_len("write_file.path", req->write_file->path, REQ_PATH_MAX, err);
    case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE:
        if (!str_set(req->read_file->path))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "read_file.path is empty");
        return check_len("read_file.path", req->read_file->path, REQ_PATH_MAX, err);
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES:
        if (!str_set(req->list_files->path))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "list_files.path is empty");
        return check_len("list_files.path", req->list_files->path, REQ_PATH_MAX, err);
    case SBX__V1__EXECUTION_REQUEST__OP_DESTROY:
        if (s == NULL || !str_set(s->session_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "destroy needs the session handle to destroy");
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND:
    case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND: {
        bool attach = req->op_case == SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND;
        uint64_t id = attach ? req->attach_command->command_id : req->cancel_command->command_id;
        const char *op = sbx_request_op_name(req);
        if (id == 0)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "%s.command_id is 0; pass the result.command_id of the detached "
                                 "run_command",
                                 op);
        if (s == NULL || !str_set(s->sandbox_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "%s needs the session handle whose sandbox runs the command (the "
                                 "session returned with the detached run_command)",
                                 op);
        if (!attach && (req->cancel_command->signal < 0 || req->cancel_command->signal > 64))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "cancel_command.signal %d is not a signal number (1-64, or 0 "
                                 "for SIGKILL)",
                                 req->cancel_command->signal);
        return SBX_OK;
    }
    case SBX__V1__EXECUTION_REQUEST__OP_PAUSE:
    case SBX__V1__EXECUTION_REQUEST__OP_RESUME:
    case SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT:
        if (s == NULL || !str_set(s->sandbox_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "%s needs the handle of a session that has a sandbox (one "
                                 "returned by an earlier operation on it)",
                                 sbx_request_op_name(req));
        if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT)
            return snapshot_check_name("snapshot.name", req->snapshot->name, err);
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_EXPOSE:
        if (req->expose == NULL || req->expose->port < 1 || req->expose->port > 65535)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "expose.port %u is not a TCP port; give the port (1-65535) a "
                                 "program in the sandbox listens on",
                                 req->expose != NULL ? req->expose->port : 0u);
        if (s == NULL || !str_set(s->sandbox_id))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "expose needs the handle of a session that has a sandbox (one "
                                 "returned by an earlier operation on it)");
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS: return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT:
        return snapshot_check_name("delete_snapshot.name", req->delete_snapshot->name, err);
    default:
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "request has no operation; set one of run_code, run_command, "
                             "install_packages, write_file, read_file, list_files, destroy, "
                             "attach_command, cancel_command, pause, resume, snapshot, "
                             "list_snapshots, delete_snapshot, expose");
    }
}

/* ---- step 2: profile ---------------------------------------------------------------------- */

static sbx_status resolve_profile(sbx_engine *e, const sbx_request *req, profile_slot **out,
                                  sbx_error *err)
{
    const sbx_session_handle *s = req->session;
    const char *name = req->profile;
    if (s != NULL && str_set(s->profile)) {
        if (str_set(name) && strcmp(name, s->profile) != 0)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "session '%s' belongs to profile '%s', but profile '%s' was "
                                 "requested; a session never moves to another profile (omit "
                                 "profile to reuse the session)",
                                 s->session_id, s->profile, name);
        name = s->profile;
    }
    profile_slot *slot = find_slot(e, name);
    if (slot == NULL)
        return sbx_error_set(err, SBX_E_CONFIG, "unknown profile '%s'; configured profiles: %s",
                             str_set(name) ? name : "(default)", e->profile_names);
    if (s != NULL && str_set(s->provider) && strcmp(s->provider, slot->ops->name) != 0)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "session '%s' was created by provider '%s', but profile '%s' now "
                             "uses '%s'; start a new session",
                             s->session_id, s->provider, slot->profile->name, slot->ops->name);
    *out = slot;
    return SBX_OK;
}

/* ---- step 4: fail-closed checks ----------------------------------------------------------- */

static sbx_status check_identity(const profile_slot *slot, const sbx_principal *eff, sbx_error *err)
{
    const char *p = slot->profile->name;
    bool profile_user =
        slot->profile->identity_mode == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    bool user = eff->mode == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    if (profile_user && !user)
        return sbx_error_set(err, SBX_E_POLICY,
                             "profile '%s' requires user identity, but the request carries an "
                             "agent principal; sbx never falls back to the agent's identity",
                             p);
    if (user && !str_set(eff->subject))
        return sbx_error_set(err, SBX_E_POLICY,
                             "profile '%s': a user principal needs principal.subject (the user's "
                             "id)",
                             p);
    if (user && !slot->caps->principal_user)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "profile '%s': provider '%s' cannot act as a user principal "
                             "(principal_user); use an agent principal or a provider that can",
                             p, slot->ops->name);
    return SBX_OK;
}

/* Detach, attach and cancel: declared by the provider, and in a sandbox that outlives the
 * request (a per_call sandbox is destroyed with the request, and its commands with it). */
static sbx_status check_detach(const profile_slot *slot, const sbx_request *req, sbx_error *err)
{
    const char *what = req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND
                           ? "run_command.detach"
                           : sbx_request_op_name(req);
    if (!slot->caps->detach || slot->ops->attach_command == NULL ||
        slot->ops->cancel_command == NULL)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "profile '%s': provider '%s' does not offer detached commands (%s); "
                             "run the command attached",
                             slot->profile->name, slot->ops->name, what);
    if (slot->profile->scope == SBX_SCOPE_PER_CALL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "profile '%s' is per_call: its sandbox is destroyed after each "
                             "request, with every command in it, so %s has nothing to follow; "
                             "use a session (per_session or per_runtime)",
                             slot->profile->name, what);
    return SBX_OK;
}

/* Attach and cancel only follow what runs: no session lock (an attach may follow a command for
 * hours while the session runs other requests, and a cancel must reach it meanwhile), never a
 * new sandbox, and no policy time limit of their own (the command has its own). */
static bool follows_command(const sbx_request *req)
{
    return req->op_case == SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND ||
           req->op_case == SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND;
}

static sbx_status check_capability(const profile_slot *slot, const sbx_request *req, sbx_error *err)
{
    const sbx_capabilities *c = slot->caps;
    const sbx_provider_ops *ops = slot->ops;
    const char *p = slot->profile->name, *prov = ops->name;
    if ((str_set(req->from_snapshot) || req->op_case == SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT) &&
        !c->snapshot)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "profile '%s': provider '%s' cannot take or restore snapshots (it "
                             "needs commands, files and appending writes)",
                             p, prov);
    switch (req->op_case) {
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE: {
        const char *lang = req->run_code->language;
        bool found = false;
        for (size_t i = 0; i < c->n_languages && !found; i++)
            found = strcmp(c->languages[i], lang) == 0;
        if (!found || ops->run_code == NULL) {
            sbx_strlist l = {(char **)c->languages, c->n_languages};
            char *offered = sbx_strlist_join(&l, ", ");
            sbx_error_set(err, SBX_E_CAPABILITY,
                          "profile '%s': provider '%s' does not offer language '%s'; it offers: "
                          "%s",
                          p, prov, lang, offered != NULL && offered[0] ? offered : "(none)");
            free(offered);
            return SBX_E_CAPABILITY;
        }
        return SBX_OK;
    }
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND:
        if (!c->shell || ops->run_command == NULL)
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' does not offer run_command (shell)",
                                 p, prov);
        return req->run_command->detach ? check_detach(slot, req, err) : SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND:
    case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND: return check_detach(slot, req, err);
    case SBX__V1__EXECUTION_REQUEST__OP_PAUSE:
    case SBX__V1__EXECUTION_REQUEST__OP_RESUME:
        if (!c->pause || ops->pause == NULL || ops->resume == NULL)
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' cannot pause and resume sandboxes "
                                 "(%s)",
                                 p, prov, sbx_request_op_name(req));
        if (slot->profile->scope == SBX_SCOPE_PER_CALL)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "profile '%s' is per_call: its sandbox ends with each request, "
                                 "so there is nothing to %s; use a session",
                                 p, sbx_request_op_name(req));
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_EXPOSE:
        if (!c->expose || ops->expose == NULL)
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' cannot expose sandbox ports "
                                 "(ExposePort); providers that can: see sbx providers, EXPOSE",
                                 p, prov);
        if (slot->profile->scope == SBX_SCOPE_PER_CALL)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "profile '%s' is per_call: its sandbox ends with each request, "
                                 "so there is no port to expose; use a session",
                                 p);
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES:
        if (!c->package_install || ops->install_packages == NULL)
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' does not offer install_packages", p,
                                 prov);
        return SBX_OK;
    case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE:
    case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE:
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES: {
        bool slot_ok =
            req->op_case == SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE  ? ops->write_file != NULL
            : req->op_case == SBX__V1__EXECUTION_REQUEST__OP_READ_FILE ? ops->read_file != NULL
                                                                       : ops->list_files != NULL;
        if (!c->files || !slot_ok)
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' does not offer file operations "
                                 "(%s)",
                                 p, prov, sbx_request_op_name(req));
        if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE &&
            req->write_file->offset > 0 && !(ops->traits & SBX_PROVIDER_WRITE_OFFSET))
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' cannot append to a file "
                                 "(write_file.offset); send the whole file in one write",
                                 p, prov);
        return SBX_OK;
    }
    default: return SBX_OK;
    }
}

/* ---- steps 6-8 ---------------------------------------------------------------------------- */

/* One pass of a request through one profile: sbx_engine_process makes one, then one per
 * profile of the fallback chain while the provider could not provision. */
typedef struct attempt {
    bool strict;           /* in: an unenforceable dimension refuses even a lenient request */
    bool provision_fault;  /* out: nothing ran; the provider could not open or create */
    sbx_policy *effective; /* out: the effective policy (the caller frees it), or NULL */
    profile_slot *slot;    /* out: the request's profile once resolved, or NULL */
} attempt;

typedef struct run {
    sbx_engine *e;
    attempt *a;
    const sbx_request *req;
    profile_slot *slot;
    sbx_principal principal;    /* shallow copy of the request's, mode resolved; never freed */
    sbx_policy *policy;         /* effective, owned */
    sbx_session_handle *handle; /* working copy, owned until handed to the completion */
    sbx_completion *c;
    sbx_error err;
    bool req_bound;  /* the request's handle verified, its signed fields those of handle then */
    bool policy_set; /* the handle's policy was replaced or dropped (binding.c signs it) */
} run;

static void idle_note(run *r, const sbx_session_handle *h, sbx_status st, const sbx_result *res);

static const char *subject_of(const run *r)
{
    return r->principal.subject != NULL ? r->principal.subject : "";
}

/* The session's key in the engine's tables (its lock, its idle record): its id within its
 * principal's namespace. Session ids are the caller's choice, so two principals may use the
 * same one; keyed by the id alone, one's requests waited for the other's and one's idle record
 * replaced the other's (that sandbox then never paused). */
static const char *session_key(const run *r, char buf[SBX_SCOPED_KEY_MAX])
{
    return sbx_scoped_key(buf, subject_of(r), r->handle->session_id);
}

static bool managed(const profile_slot *s)
{
    return s->profile->environment == SBX_ENV_MANAGED;
}

static bool host_local(const profile_slot *s)
{
    return (s->ops->traits & SBX_PROVIDER_HOST_LOCAL) != 0;
}

/* Whether the handle names a sandbox of a host-local provider held by another node. Only the
 * owning node may declare such a sandbox gone: anywhere else it would look gone and be
 * recreated empty while the original lives on, orphaned. A handle without a node (made before
 * nodes were stamped) counts as this node's. */
static bool elsewhere(const run *r)
{
    const sbx_session_handle *h = r->req->session;
    return h != NULL && host_local(r->slot) && str_set(h->sandbox_id) && str_set(h->node) &&
           strcmp(h->node, r->e->cfg->node) != 0;
}

/* The WRONG_NODE completion: names the owning node (completion.node) so a router can act. */
static sbx_completion *wrong_node(run *r)
{
    const sbx_session_handle *h = r->req->session;
    sbx_error_set(&r->err, SBX_E_WRONG_NODE,
                  "session '%s' (provider %s) lives on node '%s', not on this node '%s'; send the "
                  "request to node '%s' (the x-sbx-node header, or the queue broker, routes it "
                  "there), or set recreate_elsewhere to start the session over here, empty",
                  h->session_id, r->slot->ops->name, h->node, r->e->cfg->node, h->node);
    sbx_completion *c = fail(r->req, &r->err, h);
    if (c != NULL)
        sbx_set_string(&c->node, h->node);
    return c;
}

/* A provider's own failure to provide a sandbox (unreachable, out of capacity, too slow), as
 * opposed to a refusal (policy, capability, identity, configuration): only these move a new
 * session to the profile's next fallback. */
static bool provider_fault(sbx_status st)
{
    return st == SBX_E_PROVISION || st == SBX_E_TIMEOUT || st == SBX_E_RESOURCE_EXHAUSTED ||
           st == SBX_E_BROKER;
}

/* Whether a sandbox made for r counts against its principal's sandbox.principal_sandboxes:
 * per_session profiles' only (a per_call sandbox ends with its request; a per_runtime one is the
 * profile's, shared by every caller). */
static bool counted(const run *r)
{
    return r->e->holdings != NULL && r->slot->profile->scope == SBX_SCOPE_PER_SESSION;
}

static size_t slot_index(const run *r)
{
    return (size_t)(r->slot - r->e->slots);
}

/* Frees the places of the principal's sandboxes that ended without the engine (an idle TTL, a
 * sweep, a host restart): each one it holds is reached, and dropped when proved gone. A live
 * sandbox that does not answer (paused, busy) keeps its place. The whole check has
 * HOLDINGS_CHECK_BUDGET_MS: a paused local agent does not answer until its attach's own bound
 * (10 s), and 64 of them would hold this executor for minutes. A sandbox whose PID 1 is gone
 * is still found gone past the budget (local looks before it connects); the others are reached
 * from a different place in the list each time, so none is always left beyond it. */
static void check_holdings(run *r)
{
    holding *list;
    int64_t now = sbx_monotonic_ms();
    size_t n = holdings_due_check(r->e->holdings, subject_of(r), now, &list);
    int64_t outer = sbx_provider_deadline_ms();
    int64_t budget = now + HOLDINGS_CHECK_BUDGET_MS;
    sbx_provider_set_deadline_ms(outer > 0 && outer < budget ? outer : budget);
    size_t first = n > 0 ? (size_t)now % n : 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (first + k) % n;
        profile_slot *s = &r->e->slots[list[i].slot];
        if (!atomic_load_explicit(&s->opened, memory_order_acquire) || s->ops->attach == NULL)
            continue;
        sbx_sandbox *sb = NULL;
        sbx_error aerr;
        sbx_error_clear(&aerr);
        sbx_status st =
            s->ops->attach(s->state, list[i].sandbox_id, &r->principal, r->policy, &sb, &aerr);
        if (st == SBX_OK && sb != NULL && s->ops->sandbox_close != NULL)
            s->ops->sandbox_close(sb);
        else if (st == SBX_E_GONE)
            holdings_drop(r->e->holdings, subject_of(r), list[i].slot, list[i].sandbox_id);
    }
    sbx_provider_set_deadline_ms(outer);
    holdings_list_free(list, n);
}

/* A place among the principal's sandboxes for the one acquire is about to make, or the
 * refusal: one tenant of a shared worker never makes the sandboxes another needs. */
static sbx_status hold_place(run *r, holding_place *place)
{
    sbx_engine *e = r->e;
    /* Each profile counts what it lists when it opens; a principal's sandboxes of a profile not
     * used since the engine started count too, so every listing one opens first (once; one
     * that fails to open counts when it opens). */
    if (!atomic_load_explicit(&e->holdings_listed, memory_order_acquire)) {
        for (size_t i = 0; i < e->n_slots; i++) {
            profile_slot *s = &e->slots[i];
            sbx_error ignored;
            sbx_error_clear(&ignored);
            if (s->profile->scope == SBX_SCOPE_PER_SESSION && s->ops->list_held != NULL)
                (void)slot_open(s, &ignored);
        }
        atomic_store_explicit(&e->holdings_listed, true, memory_order_release);
    }
    size_t held;
    if (holdings_reserve(r->e->holdings, subject_of(r), &held, place))
        return SBX_OK;
    check_holdings(r);
    if (holdings_reserve(r->e->holdings, subject_of(r), &held, place))
        return SBX_OK;
    return sbx_error_set(&r->err, SBX_E_RESOURCE_EXHAUSTED,
                         "principal '%s' holds %zu sandbox%s of per_session profiles on node "
                         "'%s', the most sandbox.principal_sandboxes allows; destroy the sessions "
                         "it no longer uses (DestroySandbox, `sbx session rm`), or raise the limit",
                         subject_of(r), held, held == 1 ? "" : "es", r->e->cfg->node);
}

/* Records the policy a new sandbox was made under in its handle (signed with it): its sandbox
 * dimensions, the per-request ones (timeout, output limit, lenient, strict) left out. Out of memory
 * leaves none, and the sandbox is then taken to have the profile's policy, the widest it can
 * have (check_sandbox_policy): never a failure that would lose the sandbox just made. */
static void set_sandbox_policy(run *r)
{
    sbx_session_handle *h = r->handle;
    sbx_message_free((ProtobufCMessage *)h->policy);
    h->policy = (sbx_policy *)sbx_message_copy(&r->policy->base);
    r->policy_set = true;
    if (h->policy == NULL)
        return;
    h->policy->timeout_ms = 0;
    h->policy->output_limit_bytes = 0;
    h->policy->lenient = false;
    h->policy->strict = false;
}

/* The handle no longer names a sandbox: nor the policy of one. */
static void drop_sandbox(run *r)
{
    sbx_session_handle *h = r->handle;
    sbx_set_string(&h->sandbox_id, NULL);
    if (h->policy != NULL) {
        sbx_message_free((ProtobufCMessage *)h->policy);
        h->policy = NULL;
        r->policy_set = true;
    }
}

/* A request on a sandbox sbx made runs only when that sandbox grants nothing the request's
 * effective policy does not: its network, filesystem and resource limits were fixed when it
 * was made, so a narrower request there would run under limits wider than it asked for. The
 * handle says what they are (signed); one from before handles recorded them is taken to be
 * the profile's, the widest the sandbox can have. */
static sbx_status check_sandbox_policy(run *r)
{
    static const sbx_policy none = SBX__V1__POLICY__INIT;
    const sbx_session_handle *h = r->handle;
    const sbx_policy *made = h->policy != NULL                  ? h->policy
                             : r->slot->profile->policy != NULL ? r->slot->profile->policy
                                                                : &none;
    sbx_strlist wider = {0};
    if (!sbx_policy_sandbox_wider(made, r->policy, &wider))
        return sbx_error_set(&r->err, SBX_E_INTERNAL, "out of memory comparing policies");
    if (wider.n == 0)
        return SBX_OK;
    char *list = sbx_strlist_join(&wider, ", ");
    sbx_strlist_clear(&wider);
    if (list == NULL)
        return sbx_error_set(&r->err, SBX_E_INTERNAL, "out of memory comparing policies");
    sbx_status st =
        sbx_error_set(&r->err, SBX_E_POLICY,
                      "session %s's sandbox was made under a wider policy than this "
                      "request's (%s)%s; a sandbox's network, filesystem and resource limits "
                      "are fixed when it is made: ask for them in the session's first "
                      "request, or use a new session for this one",
                      h->session_id, list,
                      h->policy != NULL ? ""
                                        : " (its handle records no policy, so it is taken "
                                          "to be the profile's)");
    free(list);
    return st;
}

/* Acquires the session's sandbox: attach (self-heal on GONE for managed), or create. */
static sbx_status acquire(run *r, sbx_sandbox **sb, bool *recreated)
{
    profile_slot *s = r->slot;
    const sbx_provider_ops *ops = s->ops;
    sbx_session_handle *h = r->handle;
    *recreated = false;
    const char *target = str_set(h->sandbox_id) ? h->sandbox_id
                         : managed(s)           ? NULL
                                                : s->profile->attach_to;
    if (target != NULL) {
        bool can = managed(s) ? s->caps->attach : (s->caps->attach || s->caps->attaches_external);
        if (ops->attach == NULL || !can)
            return sbx_error_set(&r->err, SBX_E_CAPABILITY,
                                 "profile '%s': provider '%s' cannot reconnect to sandbox '%s' "
                                 "(attach); use a per_call scope",
                                 s->profile->name, ops->name, target);
        if (managed(s) && !follows_command(r->req)) {
            sbx_status refused = check_sandbox_policy(r);
            if (refused != SBX_OK)
                return refused;
        }
        sbx_status st = ops->attach(s->state, target, &r->principal, r->policy, sb, &r->err);
        if (st != SBX_E_GONE)
            return st;
        if (counted(r))
            holdings_drop(r->e->holdings, subject_of(r), slot_index(r), target);
        if (follows_command(r->req))
            return sbx_error_set(&r->err, SBX_E_GONE,
                                 "the sandbox behind session %s no longer exists, and every "
                                 "command in it ended with it (%s)",
                                 h->session_id, r->err.message);
        if (!managed(s))
            return sbx_error_set(&r->err, SBX_E_GONE,
                                 "attached environment '%s' (profile '%s') is unreachable; not "
                                 "recreating: attached environments are never provisioned by sbx",
                                 target, s->profile->name);
        *recreated = true;
        atomic_fetch_add_explicit(&s->removed, 1, memory_order_relaxed); /* it is gone */
        sbx_error_clear(&r->err);
    }
    if (!managed(s))
        return sbx_error_set(&r->err, SBX_E_CONFIG,
                             "profile '%s' is attached but has no attach_to; set attach_to to "
                             "the environment's id",
                             s->profile->name);
    if (ops->create == NULL || !s->caps->provisions)
        return sbx_error_set(&r->err, SBX_E_CAPABILITY,
                             "profile '%s': provider '%s' cannot create sandboxes; use "
                             "environment: attached",
                             s->profile->name, ops->name);
    holding_place place = {.counted = false};
    sbx_status held = counted(r) ? hold_place(r, &place) : SBX_OK;
    if (held != SBX_OK)
        return held;
    sbx_status st = ops->create(s->state, h, &r->principal, r->policy, sb, &r->err);
    if (place.counted)
        holdings_settle(r->e->holdings, subject_of(r), place, slot_index(r),
                        st == SBX_OK && *sb != NULL ? (*sb)->id : NULL);
    if (target == NULL && provider_fault(st)) /* a new sandbox, none to lose: may fall back */
        r->a->provision_fault = true;
    if (st == SBX_OK) {
        atomic_fetch_add_explicit(&s->made, 1, memory_order_relaxed);
        h->created_at_ms = sbx_now_ms();
        set_sandbox_policy(r);
        if (*recreated)
            sbx_completion_add_notice(r->c,
                                      "the sandbox behind session %s no longer existed and was "
                                      "recreated empty",
                                      h->session_id);
    }
    return st;
}

/* A listing's paths, the same whichever provider answered (core/listing.h). */
static void listing_answer(run *r, sbx_result *res)
{
    const char *dir = r->req->list_files->path;
    long dropped = sbx_listing_normalize(dir, res);
    if (dropped < 0)
        sbx_completion_add_notice(r->c,
                                  "out of memory rewriting the listing of %.256s: some paths "
                                  "may be as the provider gave them, or the entries unsorted",
                                  dir);
    else if (dropped > 0)
        sbx_completion_add_notice(r->c,
                                  "%ld entries of the listing of %.256s were left out: their "
                                  "names were empty, '.', '..' or repeated, which names no "
                                  "other file of it",
                                  dropped, dir);
}

static void limit_stream(ProtobufCBinaryData *data, protobuf_c_boolean *truncated, uint64_t limit,
                         const char *name, sbx_completion *c)
{
    if (data->len > limit) {
        data->len = (size_t)limit;
        *truncated = 1;
    }
    if (*truncated)
        sbx_completion_add_notice(c, "%s truncated at %llu bytes (output_limit_bytes)", name,
                                  (unsigned long long)limit);
}

/* The snapshot store as this request sees it: the principal's own directory. */
static snapshot_ctx snapshot_of(const run *r, sbx_sandbox *sb, const sbx_exec_opts *o)
{
    const sbx_config *cfg = r->e->cfg;
    snapshot_ctx x = {
        .ops = r->slot->ops,
        .sb = sb,
        .o = o,
        .root = cfg->snapshot_dir,
        .subject = subject_of(r),
        .task_id = r->req->task_id,
        /* 0 in a configuration built by hand: the file's default, 1024 MiB */
        .max_bytes =
            (uint64_t)(cfg->snapshot_max_mb > 0 ? cfg->snapshot_max_mb : 1024) * 1024u * 1024u,
    };
    return x;
}

static sbx_status execute(run *r, sbx_sandbox *sb, const sbx_exec_opts *o, sbx_result *res)
{
    const sbx_provider_ops *ops = r->slot->ops;
    const sbx_request *req = r->req;
    switch (req->op_case) {
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE:
        return ops->run_code(sb, req->run_code, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND:
        return ops->run_command(sb, req->run_command, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES:
        return ops->install_packages(sb, req->install_packages, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE:
        return ops->write_file(sb, req->write_file, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_READ_FILE:
        return ops->read_file(sb, req->read_file, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES:
        return ops->list_files(sb, req->list_files, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND:
        return ops->attach_command(sb, req->attach_command, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND:
        return ops->cancel_command(sb, req->cancel_command, o, res, &r->err);
    case SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT: {
        snapshot_ctx x = snapshot_of(r, sb, o);
        return snapshot_take(&x, req->snapshot->name, res, &r->err);
    }
    default: return sbx_error_set(&r->err, SBX_E_INTERNAL, "no operation to execute");
    }
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0; /* as the binding signs them */
}

/* Whether h's signed fields (binding.c: session, profile, provider, sandbox, and the policy,
 * which only the engine replaces: policy_set) are the request handle's. */
static bool signs_as_request(const run *r, const sbx_session_handle *h)
{
    const sbx_session_handle *q = r->req->session;
    return q != NULL && !r->policy_set && same_str(h->session_id, q->session_id) &&
           same_str(h->profile, q->profile) && same_str(h->provider, q->provider) &&
           same_str(h->sandbox_id, q->sandbox_id);
}

/* sbx_binding_verify of the working handle, noting when what it verified is the request's own
 * handle (finish_handle then needs no second signature). */
static bool verify_binding(run *r)
{
    if (!sbx_binding_verify(r->e->key, r->handle, subject_of(r)))
        return false;
    /* signs_as_request: the request has a handle. What verified is its binding, byte for byte. */
    r->req_bound =
        signs_as_request(r, r->handle) && r->req->session->binding.len == SBX_BINDING_LEN &&
        memcmp(r->req->session->binding.data, r->handle->binding.data, SBX_BINDING_LEN) == 0;
    return true;
}

/* Stamps and signs the handle (step 8) and hands it to the completion. A handle whose signed
 * fields are still those of the request's verified handle signs to the same bytes (the HMAC is
 * a function of them and the subject): those bytes are copied, not computed again. */
static void finish_handle(run *r)
{
    sbx_session_handle *h = r->handle;
    h->last_used_at_ms = sbx_now_ms();
    const uint8_t *same =
        r->req_bound && signs_as_request(r, h) ? r->req->session->binding.data : NULL;
    if (same != NULL && h->binding.len == SBX_BINDING_LEN) {
        memcpy(h->binding.data, same, SBX_BINDING_LEN);
    } else if (same != NULL) {
        if (!sbx_set_bytes(&h->binding, same, SBX_BINDING_LEN))
            sbx_set_bytes(&h->binding, NULL, 0);
    } else if (!sbx_binding_stamp(r->e->key, h, subject_of(r))) {
        sbx_set_bytes(&h->binding, NULL, 0);
    }
    sbx_message_free((ProtobufCMessage *)r->c->session);
    r->c->session = h;
    r->handle = NULL;
}

static int64_t deadline_mono(const run *r, int64_t now_mono)
{
    int64_t d = 0;
    if (r->policy->timeout_ms > 0 && !follows_command(r->req))
        d = now_mono + (int64_t)r->policy->timeout_ms;
    if (r->req->deadline_ms > 0) {
        int64_t rd = now_mono + (r->req->deadline_ms - sbx_now_ms());
        if (d == 0 || rd < d)
            d = rd;
    }
    return d;
}

/* A paused sandbox cannot be reached (its agent is frozen): any operation on its session
 * resumes it first, as a reconnect does on E2B, and the notice says so. */
static sbx_status resume_if_paused(run *r)
{
    profile_slot *s = r->slot;
    const char *id = r->handle->sandbox_id;
    if (!s->caps->pause || s->ops->resume == NULL || !str_set(id) ||
        (s->ops->traits & SBX_PROVIDER_ATTACH_RESUMES))
        return SBX_OK;
    bool was_paused = false;
    sbx_status st = s->ops->resume(s->state, id, &was_paused, &r->err);
    if (st == SBX_E_GONE) { /* acquire proves and handles it */
        sbx_error_clear(&r->err);
        return SBX_OK;
    }
    if (st == SBX_OK && was_paused)
        sbx_completion_add_notice(r->c, "session %s was paused; it was resumed for this request",
                                  r->handle->session_id);
    return st;
}

/* What destroy, pause and resume of an existing session check before touching it: the binding
 * (a handle with a sandbox or a binding must verify for this principal), the node (only the
 * node that holds a host-local sandbox may act on it: elsewhere it would be a no-op reporting
 * success while the sandbox runs on), then the session lock. NULL with *lock taken, or the
 * completion that refuses. */
static sbx_completion *owner_checks(run *r, const char *action, session_lock **lock)
{
    sbx_session_handle *h = r->handle;
    if ((str_set(h->sandbox_id) || h->binding.len > 0) && !verify_binding(r)) {
        sbx_error_set(&r->err, SBX_E_PERMISSION_DENIED,
                      "session '%s' is not bound to principal '%s' (binding does not verify); "
                      "only its owner can %s it",
                      h->session_id, subject_of(r), action);
        return fail(r->req, &r->err, r->req->session);
    }
    if (elsewhere(r))
        return wrong_node(r);
    char key[SBX_SCOPED_KEY_MAX];
    *lock = lock_session(r->e, session_key(r, key));
    if (*lock == NULL) {
        sbx_error_set(&r->err, SBX_E_RESOURCE_EXHAUSTED, "out of memory taking a session lock");
        return fail(r->req, &r->err, r->req->session);
    }
    return NULL;
}

/* PauseSandbox and ResumeSandbox: on the session's sandbox by id, under the session lock, the
 * binding verified first; the handle comes back re-stamped, the result empty. */
static sbx_completion *do_pause(run *r)
{
    profile_slot *s = r->slot;
    sbx_session_handle *h = r->handle;
    session_lock *lock = NULL;
    sbx_completion *refused = owner_checks(r, "pause or resume", &lock);
    if (refused != NULL)
        return refused;
    sbx_provider_set_deadline_ms(deadline_mono(r, sbx_monotonic_ms()));
    bool was_paused = false;
    sbx_status st = r->req->op_case == SBX__V1__EXECUTION_REQUEST__OP_PAUSE
                        ? s->ops->pause(s->state, h->sandbox_id, &r->err)
                        : s->ops->resume(s->state, h->sandbox_id, &was_paused, &r->err);
    sbx_provider_set_deadline_ms(0);
    unlock_session(r->e, lock);
    if (st != SBX_OK) {
        if (!r->err.message[0])
            sbx_error_set(&r->err, st, "provider '%s' failed %s", s->ops->name,
                          sbx_request_op_name(r->req));
        return fail(r->req, &r->err, r->req->session);
    }
    h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE;
    char key[SBX_SCOPED_KEY_MAX];
    if (r->e->idle != NULL && r->req->op_case == SBX__V1__EXECUTION_REQUEST__OP_PAUSE)
        idle_paused(r->e->idle, session_key(r, key));
    else
        idle_note(r, h, SBX_OK, NULL);
    finish_handle(r);
    sbx_completion *c = r->c;
    r->c = NULL;
    return c;
}

/* ExposePort: on the session's sandbox by id, under the session lock, the binding verified
 * first; result.expose_url (and expose_token when the listener needs one) set. */
static sbx_completion *do_expose(run *r)
{
    profile_slot *s = r->slot;
    sbx_session_handle *h = r->handle;
    session_lock *lock = NULL;
    sbx_completion *refused = owner_checks(r, "expose a port of", &lock);
    if (refused != NULL)
        return refused;
    sbx_status st = resume_if_paused(r);
    char *url = NULL;
    char *token = NULL;
    sbx_provider_set_deadline_ms(deadline_mono(r, sbx_monotonic_ms()));
    if (st == SBX_OK)
        st = s->ops->expose(s->state, h->sandbox_id, r->req->expose->port, &url, &token, &r->err);
    sbx_provider_set_deadline_ms(0);
    unlock_session(r->e, lock);
    if (st == SBX_OK && (url == NULL || !url[0]))
        st = sbx_error_set(&r->err, SBX_E_INTERNAL, "provider '%s' exposed port %u but gave no URL",
                           s->ops->name, r->req->expose->port);
    if (st != SBX_OK) {
        free(url);
        free(token);
        if (!r->err.message[0])
            sbx_error_set(&r->err, st, "provider '%s' failed expose", s->ops->name);
        return fail(r->req, &r->err, r->req->session);
    }
    sbx_set_string(&r->c->result->expose_url, url);
    if (token != NULL && token[0])
        sbx_set_string(&r->c->result->expose_token, token);
    free(url);
    free(token);
    h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE;
    idle_note(r, h, SBX_OK, NULL);
    finish_handle(r);
    sbx_completion *c = r->c;
    r->c = NULL;
    return c;
}

/* from_snapshot: fills the sandbox just created with the snapshot. On failure the sandbox is
 * closed and destroyed (nobody has its handle yet) and r->err says why. */
static sbx_status restore_snapshot(run *r, sbx_sandbox *sb, const sbx_exec_opts *o)
{
    profile_slot *s = r->slot;
    snapshot_ctx x = snapshot_of(r, sb, o);
    sbx_status st = snapshot_restore(&x, r->req->from_snapshot, &r->err);
    if (st == SBX_OK)
        return SBX_OK;
    sbx_error_prefix(&r->err, "from_snapshot '%s': ", r->req->from_snapshot);
    char *id = strdup(sb->id);
    if (s->ops->sandbox_close != NULL)
        s->ops->sandbox_close(sb);
    sbx_error derr;
    sbx_error_clear(&derr);
    if (id != NULL && s->ops->destroy(s->state, id, &derr) == SBX_OK)
        atomic_fetch_add_explicit(&s->removed, 1, memory_order_relaxed);
    free(id);
    return st;
}

/* Nothing ran and no sandbox is held for the caller (it could not be reached or made, or a
 * fresh one was discarded): the lock goes, the completion carries the request's own handle
 * (never a half-filled working copy) and the notices gathered so far. */
static sbx_completion *fail_unacquired(run *r, session_lock *lock)
{
    unlock_session(r->e, lock);
    sbx_session_handle *orig = r->req->session != NULL ? handle_copy(r->req->session) : NULL;
    sbx_message_free((ProtobufCMessage *)r->handle);
    r->handle = NULL;
    sbx_completion *c = fail(r->req, &r->err, orig);
    sbx_message_free((ProtobufCMessage *)orig);
    if (c != NULL && r->c->notice != NULL && r->c->notice[0])
        sbx_set_string(&c->notice, r->c->notice);
    return c;
}

/* Long because it is DESIGN's steps 5-8 in order (session lock, acquire with the binding check,
 * execute under the deadline, per_call destroy, limit/stamp/sign) and the lock taken at step 5 is
 * released at one exit. */
static sbx_completion *do_operation(run *r, const sbx_engine_hooks *hooks)
{
    profile_slot *s = r->slot;
    sbx_session_handle *h = r->handle;

    /* Fill the handle's identity fields (a fresh session gets its id here). */
    bool fresh = !str_set(h->session_id);
    if (fresh) {
        char id[SBX_UUID_LEN];
        sbx_uuid_v4(id);
        sbx_set_string(&h->session_id, id);
    }
    /* A host-local sandbox held by another node: verify the binding (a forged handle learns
     * nothing), then refuse, or start over here when the caller asked for exactly that. */
    bool moved = elsewhere(r);
    if (moved && !verify_binding(r)) {
        sbx_error_set(&r->err, SBX_E_PERMISSION_DENIED,
                      "session '%s' is not bound to principal '%s' (binding does not verify); use "
                      "a handle this principal created",
                      h->session_id, subject_of(r));
        sbx_message_free((ProtobufCMessage *)h);
        r->handle = NULL;
        return fail(r->req, &r->err, r->req->session);
    }
    if (moved && !r->req->recreate_elsewhere) {
        sbx_message_free((ProtobufCMessage *)h);
        r->handle = NULL;
        return wrong_node(r);
    }
    if (moved) {
        sbx_completion_add_notice(r->c,
                                  "session %s lived on node '%s'; started over here on node '%s' "
                                  "with an empty sandbox (recreate_elsewhere); the old sandbox "
                                  "is left to its node",
                                  h->session_id, h->node, r->e->cfg->node);
        drop_sandbox(r);
        sbx_set_bytes(&h->binding, NULL, 0);
    }
    /* Node-free providers (cloud APIs) leave node empty: any worker may reach the sandbox. */
    if (!sbx_set_string(&h->profile, s->profile->name) ||
        !sbx_set_string(&h->provider, s->ops->name) ||
        !sbx_set_string(&h->node, host_local(s) ? r->e->cfg->node : NULL))
        return fail_owned(r->req, &r->err, h, NULL);
    h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE;

    /* Step 5: the session lock (a freshly minted id is known to nobody else). */
    session_lock *lock = NULL;
    char key[SBX_SCOPED_KEY_MAX];
    if (!fresh && !follows_command(r->req) &&
        (lock = lock_session(r->e, session_key(r, key))) == NULL) {
        sbx_error_set(&r->err, SBX_E_RESOURCE_EXHAUSTED, "out of memory taking a session lock");
        return fail_owned(r->req, &r->err, h, NULL);
    }

    /* Step 6: acquire. The binding is verified before any provider call. */
    int64_t now_mono = sbx_monotonic_ms();
    int64_t deadline = deadline_mono(r, now_mono);
    sbx_sandbox *sb = NULL;
    sbx_status st = SBX_OK;
    bool recreated = false;
    if (r->req->deadline_ms > 0 && deadline <= now_mono) {
        st = sbx_error_set(&r->err, SBX_E_TIMEOUT,
                           "the request's deadline passed before it ran; nothing was executed");
    } else if ((str_set(h->sandbox_id) || h->binding.len > 0) && !verify_binding(r)) {
        st = sbx_error_set(&r->err, SBX_E_PERMISSION_DENIED,
                           "session '%s' is not bound to principal '%s' (binding does not "
                           "verify); use a handle this principal created",
                           h->session_id, subject_of(r));
    } else {
        sbx_provider_set_deadline_ms(deadline);
        st = resume_if_paused(r);
        if (st == SBX_OK && str_set(r->req->from_snapshot)) { /* before a sandbox is made */
            snapshot_ctx x = snapshot_of(r, NULL, NULL);
            st = snapshot_check_exists(&x, r->req->from_snapshot, &r->err);
        }
        if (st == SBX_OK)
            st = acquire(r, &sb, &recreated);
        sbx_provider_set_deadline_ms(0);
    }
    if (st != SBX_OK)
        return fail_unacquired(r, lock);
    if (sb == NULL || sb->id == NULL) {
        unlock_session(r->e, lock);
        sbx_error_set(&r->err, SBX_E_INTERNAL, "provider '%s' returned no sandbox", s->ops->name);
        return fail_owned(r->req, &r->err, h, NULL);
    }
    if (strcmp(h->sandbox_id, sb->id) != 0)
        sbx_set_string(&h->sandbox_id, sb->id);
    if (sb->resumed)
        sbx_completion_add_notice(r->c, "session %s was paused; it was resumed for this request",
                                  h->session_id);

    /* Step 7: execute under the deadline. */
    uint64_t limit =
        r->policy->output_limit_bytes > 0 ? r->policy->output_limit_bytes : ENGINE_OUTPUT_CAP;
    sbx_exec_opts o = {
        .deadline_mono_ms = deadline,
        .output_limit_bytes = limit,
        .on_output = hooks != NULL ? hooks->on_output : NULL,
        .on_output_arg = hooks != NULL ? hooks->on_output_arg : NULL,
        .cancel = hooks != NULL ? hooks->cancel : NULL,
        .principal = &r->principal,
        .policy = r->policy,
    };
    if (str_set(r->req->from_snapshot) && restore_snapshot(r, sb, &o) != SBX_OK)
        return fail_unacquired(r, lock);
    sbx_result *res = r->c->result;
    if (o.cancel != NULL && *o.cancel)
        st = sbx_error_set(&r->err, SBX_E_TIMEOUT,
                           "cancelled before the program started; nothing was executed");
    else if (deadline > 0 && sbx_monotonic_ms() >= deadline)
        /* Reaching or creating the sandbox took the whole deadline: a timeout, never a
         * result (the program did not run, so it has no exit status). */
        st = sbx_error_set(&r->err, SBX_E_TIMEOUT,
                           "the deadline passed while the sandbox was reached or created; the "
                           "program never started");
    else
        st = execute(r, sb, &o, res);
    if (s->ops->sandbox_close != NULL)
        s->ops->sandbox_close(sb);
    /* per_call: the sandbox is destroyed here, in all cases, whichever broker carried the
     * request (a raw gRPC caller leaves nothing behind either). So is a sandbox made for a
     * fresh session whose caller went away (cancelled: a client interrupted or dropped before
     * the completion): nobody holds its handle, so nobody could ever reach or destroy it. */
    bool orphaned = fresh && o.cancel != NULL && *o.cancel;
    if ((s->profile->scope == SBX_SCOPE_PER_CALL || orphaned) && managed(s) &&
        s->ops->destroy != NULL) {
        sbx_error derr;
        sbx_error_clear(&derr);
        if (s->ops->destroy(s->state, h->sandbox_id, &derr) == SBX_OK) {
            atomic_fetch_add_explicit(&s->removed, 1, memory_order_relaxed);
            if (counted(r))
                holdings_drop(r->e->holdings, subject_of(r), slot_index(r), h->sandbox_id);
            drop_sandbox(r);
            h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_CLOSED;
        } else {
            sbx_completion_add_notice(r->c, "per_call sandbox %s could not be destroyed: %s",
                                      h->sandbox_id, derr.message);
        }
    }
    unlock_session(r->e, lock);
    idle_note(r, h, st, res);

    /* Step 8: output limit, stamp, sign. A provider's own advisory (result.provider_data
     * "notice", e.g. ec2_ssm's "SSM cut stdout at 24,000 characters") joins the notice. */
    for (size_t i = 0; i < res->n_provider_data; i++)
        if (res->provider_data[i] != NULL && res->provider_data[i]->key != NULL &&
            strcmp(res->provider_data[i]->key, "notice") == 0 && res->provider_data[i]->value &&
            res->provider_data[i]->value[0])
            sbx_completion_add_notice(r->c, "%s", res->provider_data[i]->value);
    if (st == SBX_OK && r->req->op_case == SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES)
        listing_answer(r, res);
    limit_stream(&res->stdout, &res->stdout_truncated, limit, "stdout", r->c);
    limit_stream(&res->stderr, &res->stderr_truncated, limit, "stderr", r->c);
    finish_handle(r);
    if (st != SBX_OK) {
        /* The outcome stays as the provider set it: TIMED_OUT only for a program that ran
         * into its deadline. A program that never started has none (and no exit status). */
        if (!r->err.message[0])
            sbx_error_set(&r->err, st, "provider '%s' failed %s", s->ops->name,
                          sbx_request_op_name(r->req));
        r->c->status = st == SBX_E_TIMEOUT ? SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT
                                           : SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED;
        r->c->error_code = (Sbx__V1__ErrorCode)st;
        sbx_set_string(&r->c->error, r->err.message);
    }
    sbx_completion *c = r->c;
    r->c = NULL;
    return c;
}

/* ListSnapshots and DeleteSnapshot: the principal's own store, no sandbox touched. */
static sbx_completion *do_snapshot_store(run *r)
{
    snapshot_ctx x = snapshot_of(r, NULL, NULL);
    sbx_status st = r->req->op_case == SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS
                        ? snapshot_list(&x, r->c->result, &r->err)
                        : snapshot_delete(&x, r->req->delete_snapshot->name, &r->err);
    if (st != SBX_OK)
        return fail(r->req, &r->err, r->req->session);
    if (r->req->session != NULL)
        r->c->session = handle_copy(r->req->session);
    sbx_completion *c = r->c;
    r->c = NULL;
    return c;
}

static sbx_completion *do_destroy(run *r)
{
    profile_slot *s = r->slot;
    sbx_session_handle *h = r->handle;
    session_lock *lock = NULL;
    sbx_completion *refused = owner_checks(r, "destroy", &lock);
    if (refused != NULL)
        return refused;
    sbx_status st = SBX_OK;
    if (str_set(h->sandbox_id) && managed(s)) {
        st = slot_open(s, &r->err);
        if (st == SBX_OK && s->ops->destroy != NULL)
            st = s->ops->destroy(s->state, h->sandbox_id, &r->err);
        if (st == SBX_OK)
            atomic_fetch_add_explicit(&s->removed, 1, memory_order_relaxed);
        if (st == SBX_OK && counted(r))
            holdings_drop(r->e->holdings, subject_of(r), slot_index(r), h->sandbox_id);
    }
    unlock_session(r->e, lock);
    if (st != SBX_OK)
        return fail(r->req, &r->err, r->req->session);
    char key[SBX_SCOPED_KEY_MAX];
    if (r->e->idle != NULL)
        idle_forget(r->e->idle, session_key(r, key));
    /* Attached: only the binding is dropped; the environment itself is never touched. */
    drop_sandbox(r);
    sbx_set_string(&h->profile, s->profile->name);
    sbx_set_string(&h->provider, s->ops->name);
    h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_CLOSED;
    finish_handle(r);
    sbx_completion *c = r->c;
    r->c = NULL;
    return c;
}

/* Every string a provider fills comes, in the end, from inside a sandbox or a remote API (file
 * names, a kernel's value, error texts): hostile bytes. A string field must be UTF-8 without
 * NUL or Python/C++ clients refuse the whole completion, so invalid bytes become U+FFFD here,
 * once for every provider. */
static void text_field(char **field)
{
    if (*field != NULL && !sbx_text_valid(*field, strlen(*field))) {
        char *raw = *field;
        *field = (char *)protobuf_c_empty_string;
        if (!sbx_set_text(field, raw, strlen(raw)))
            *field = (char *)protobuf_c_empty_string;
        free(raw);
    }
}

static void completion_text(sbx_completion *c)
{
    text_field(&c->error);
    text_field(&c->notice);
    sbx_result *res = c->result;
    if (res == NULL)
        return;
    text_field(&res->value);
    for (size_t i = 0; i < res->n_files; i++)
        if (res->files[i] != NULL)
            text_field(&res->files[i]->path);
    for (size_t i = 0; i < res->n_provider_data; i++)
        if (res->provider_data[i] != NULL) {
            text_field(&res->provider_data[i]->key);
            text_field(&res->provider_data[i]->value);
        }
}

/* The deadline of opening a provider: the request's, or the tighter of the profile's and the
 * request's timeout_ms (the effective policy is not merged yet). 0 = none. */
static int64_t open_deadline(const profile_slot *s, const sbx_request *req)
{
    int64_t now = sbx_monotonic_ms(), d = 0;
    uint64_t t = s->profile->policy != NULL ? s->profile->policy->timeout_ms : 0;
    if (req->policy != NULL && req->policy->timeout_ms > 0 &&
        (t == 0 || req->policy->timeout_ms < t))
        t = req->policy->timeout_ms;
    if (t > 0)
        d = now + (int64_t)t;
    if (req->deadline_ms > 0) {
        int64_t rd = now + (req->deadline_ms - sbx_now_ms());
        if (d == 0 || rd < d)
            d = rd;
    }
    return d;
}

/* Long because it is the numbered pipeline of DESIGN (shape, profile, destroy, fail-closed checks,
 * then do_operation), each step commented and each refusal building its completion in place. */
static sbx_completion *process_once(sbx_engine *e, const sbx_request *req,
                                    const sbx_engine_hooks *hooks, attempt *a)
{
    run r = {.e = e, .req = req, .a = a};
    sbx_error_clear(&r.err);

    /* 1. Shape. */
    if (e == NULL) {
        sbx_error_set(&r.err, SBX_E_INTERNAL, "no engine");
        return fail(req, &r.err, NULL);
    }
    if (validate_shape(req, &r.err) != SBX_OK)
        return fail(req, &r.err, NULL);

    /* 2. Profile. */
    if (resolve_profile(e, req, &r.slot, &r.err) != SBX_OK)
        return fail(req, &r.err, req->session);
    a->slot = r.slot;

    r.c = sbx_completion_new(req->task_id);
    r.handle = handle_copy(req->session);
    if (r.c == NULL || r.handle == NULL) {
        sbx_completion_free(r.c);
        sbx_message_free((ProtobufCMessage *)r.handle);
        return sbx_completion_fail(req->task_id, SBX_E_INTERNAL, "out of memory");
    }
    static const sbx_principal no_principal = SBX__V1__PRINCIPAL__INIT;
    r.principal = req->principal != NULL ? *req->principal : no_principal;
    if (r.principal.mode == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_UNSPECIFIED)
        r.principal.mode =
            r.slot->profile->identity_mode != SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_UNSPECIFIED
                ? r.slot->profile->identity_mode
                : SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;

    sbx_completion *out = NULL;
    /* The principal's snapshot store: no sandbox, no provider. */
    if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS ||
        req->op_case == SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT) {
        out = do_snapshot_store(&r);
        goto done;
    }
    /* 3. Destroy. */
    if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_DESTROY) {
        out = do_destroy(&r);
        goto done;
    }

    /* 4. Fail-closed checks, before any provider call (opening reads capabilities only). The
     * first open of a provider may reach its daemon: the request's deadline bounds it too. */
    sbx_provider_set_deadline_ms(open_deadline(r.slot, req));
    sbx_status open_st = slot_open(r.slot, &r.err);
    sbx_provider_set_deadline_ms(0);
    if (open_st != SBX_OK && provider_fault(open_st))
        a->provision_fault = true;
    if (open_st != SBX_OK || check_identity(r.slot, &r.principal, &r.err) != SBX_OK) {
        out = fail(req, &r.err, req->session);
        goto done;
    }
    r.policy = sbx_policy_new();
    sbx_strlist widened = {0}, unenforceable = {0};
    sbx_status st = r.policy != NULL ? sbx_policy_merge(r.slot->profile->policy, req->policy,
                                                        r.policy, &widened, &r.err)
                                     : sbx_error_set(&r.err, SBX_E_INTERNAL, "out of memory");
    if (st == SBX_OK && a->effective == NULL)
        a->effective = (sbx_policy *)sbx_message_copy(&r.policy->base);
    if (st == SBX_OK && widened.n > 0) {
        char *list = sbx_strlist_join(&widened, "; ");
        st = sbx_error_set(&r.err, SBX_E_POLICY,
                           "the request widens profile '%s''s policy (%s); a request may only "
                           "narrow it",
                           r.slot->profile->name, list != NULL ? list : "?");
        free(list);
    }
    if (st == SBX_OK) {
        const sbx_provider_ops *ops = r.slot->ops;
        st = ops->check_policy != NULL
                 ? ops->check_policy(r.slot->state, r.policy, &unenforceable, &r.err)
                 : sbx_policy_unenforceable(r.slot->caps, r.policy, &unenforceable);
        if (st == SBX_OK && unenforceable.n > 0) {
            char *list = sbx_strlist_join(&unenforceable, ", ");
            if (!r.policy->lenient || a->strict)
                st = sbx_error_set(&r.err, SBX_E_POLICY,
                                   "provider '%s' (profile '%s') cannot enforce policy dimensions "
                                   "[%s] (strict); relax the policy or set lenient: true",
                                   ops->name, r.slot->profile->name, list != NULL ? list : "?");
            else
                sbx_completion_add_notice(r.c,
                                          "policy dimensions not enforced by provider '%s' "
                                          "(lenient): %s",
                                          ops->name, list != NULL ? list : "?");
            free(list);
        } else if (st != SBX_OK && !r.err.message[0]) {
            sbx_error_set(&r.err, st, "provider '%s' could not check the policy", ops->name);
        }
    }
    sbx_strlist_clear(&widened);
    sbx_strlist_clear(&unenforceable);
    if (st == SBX_OK)
        st = check_capability(r.slot, req, &r.err);
    if (st != SBX_OK) {
        out = fail(req, &r.err, req->session);
        goto done;
    }

    if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_PAUSE ||
        req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RESUME) {
        out = do_pause(&r);
        goto done;
    }
    if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_EXPOSE) {
        out = do_expose(&r);
        goto done;
    }
    /* 5-8. */
    out = do_operation(&r, hooks);
    r.handle = NULL; /* do_operation consumed it */
done:
    if (out != NULL)
        completion_text(out);
    sbx_completion_free(r.c);
    sbx_message_free((ProtobufCMessage *)r.handle);
    sbx_message_free((ProtobufCMessage *)r.policy);
    return out;
}

/* The request again, for fallback profile name: the same everything, with the first
 * profile's effective policy as its policy (a fallback may only narrow it, never widen it)
 * and, for a session without a sandbox yet, the handle moved to that profile. Shallow: only
 * *alt_handle is a new object (the caller frees it). */
static void fallback_request(const sbx_request *req, const char *name, sbx_policy *policy,
                             sbx_request *alt, sbx_session_handle *alt_handle)
{
    *alt = *req;
    alt->profile = (char *)name;
    alt->policy = policy;
    if (req->session != NULL) {
        *alt_handle = *req->session;
        alt_handle->profile = (char *)name;
        alt_handle->provider = (char *)protobuf_c_empty_string;
        alt->session = alt_handle;
    }
}

sbx_completion *sbx_engine_process(sbx_engine *e, const sbx_request *req,
                                   const sbx_engine_hooks *hooks)
{
    attempt first = {0};
    sbx_completion *out = process_once(e, req, hooks, &first);
    /* The profile the first attempt resolved (slots live as long as the engine), not resolved
     * again: NULL when it never got that far. */
    const profile_slot *slot = first.slot;
    bool fresh = req == NULL || req->session == NULL || !str_set(req->session->sandbox_id);
    if (!first.provision_fault || !fresh || first.effective == NULL || slot == NULL ||
        slot->profile->n_fallback == 0) {
        sbx_message_free((ProtobufCMessage *)first.effective);
        return out;
    }
    /* The first profile could not provide a new sandbox: its fallbacks, in order, each held to
     * the first one's effective policy and to strict enforcement. */
    first.effective->lenient = false; /* a fallback holds every dimension, or is passed over */
    char tried[SBX_ERROR_MAX];
    snprintf(tried, sizeof tried, "profile '%s': %s", slot->profile->name,
             out != NULL && out->error != NULL ? out->error : "failed");
    for (size_t i = 0; i < slot->profile->n_fallback; i++) {
        const char *name = slot->profile->fallback[i];
        sbx_request alt;
        sbx_session_handle alt_handle;
        fallback_request(req, name, first.effective, &alt, &alt_handle);
        attempt next = {.strict = true};
        sbx_completion *c = process_once(e, &alt, hooks, &next);
        sbx_message_free((ProtobufCMessage *)next.effective);
        /* A fallback that refuses (its provider cannot hold the policy strictly, lacks the
         * operation, or will not act for this principal) is passed over, never weakened. */
        bool refused = c != NULL &&
                       c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED &&
                       (c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_POLICY ||
                        c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY ||
                        c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_PERMISSION_DENIED ||
                        c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CONFIG);
        if (c != NULL && !next.provision_fault && !refused) {
            sbx_completion_add_notice(c, "ran on fallback profile '%s' after: %s", name, tried);
            completion_text(c);
            sbx_completion_free(out);
            sbx_message_free((ProtobufCMessage *)first.effective);
            return c;
        }
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "; fallback '%s' %s: %s", name,
                 refused ? "refused" : "failed too",
                 c != NULL && c->error != NULL ? c->error : "?");
        sbx_completion_free(c);
    }
    if (out != NULL) {
        sbx_completion_add_notice(out, "no fallback could take the request: %s", tried);
        completion_text(out);
    }
    sbx_message_free((ProtobufCMessage *)first.effective);
    return out;
}

size_t sbx_engine_stats(sbx_engine *e, sbx_engine_profile_stats *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; e != NULL && i < e->n_slots && n < cap; i++, n++) {
        const profile_slot *s = &e->slots[i];
        uint64_t made = atomic_load_explicit(&s->made, memory_order_relaxed);
        uint64_t removed = atomic_load_explicit(&s->removed, memory_order_relaxed);
        uint64_t had = atomic_load_explicit(&s->listed, memory_order_relaxed) + made;
        out[n] = (sbx_engine_profile_stats){.profile = s->profile->name,
                                            .provider = s->ops->name,
                                            .sandboxes_created = made,
                                            .sandboxes_removed = removed,
                                            .sandboxes_live = had > removed ? had - removed : 0};
    }
    return n;
}

/* ---- sweep -------------------------------------------------------------------------------- */

sbx_status sbx_engine_sweep(sbx_engine *e, sbx_strlist *removed, sbx_error *err)
{
    sbx_status first = SBX_OK;
    for (size_t i = 0; e != NULL && i < e->n_slots; i++) {
        profile_slot *s = &e->slots[i];
        if (!managed(s) || (s->ops->sweep == NULL && s->ops->list_held == NULL))
            continue;
        sbx_error open_err;
        if (slot_open(s, &open_err) != SBX_OK)
            continue; /* no daemon, no sandboxes of it to reach either */
        sbx_strlist ids = {0};
        sbx_error serr;
        sbx_error_clear(&serr);
        sbx_status st = s->ops->sweep != NULL ? s->ops->sweep(s->state, &ids, &serr) : SBX_OK;
        /* what lives on after the sweep, for the live gauge (under a bound the open counted) */
        sbx_error lerr;
        sbx_error_clear(&lerr);
        if (e->holdings == NULL)
            (void)list_live(s, s->state, NULL, &lerr);
        for (size_t k = 0; k < ids.n; k++) {
            char line[REQ_PROFILE_MAX + REQ_SANDBOX_ID_MAX + 8];
            snprintf(line, sizeof(line), "%s: %s", s->profile->name, ids.items[k]);
            if (!sbx_strlist_add(removed, line) && st == SBX_OK)
                st = sbx_error_set(&serr, SBX_E_INTERNAL, "out of memory listing a sweep");
        }
        sbx_strlist_clear(&ids);
        if (st != SBX_OK && first == SBX_OK) {
            first = st;
            if (err != NULL) {
                *err = serr;
                sbx_error_prefix(err, "sweeping profile '%s': ", s->profile->name);
            }
        }
    }
    return first;
}

/* ---- Describe ----------------------------------------------------------------------------- */

sbx_status sbx_engine_describe(sbx_engine *e, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    *out = NULL;
    Sbx__V1__DescribeResponse *d = malloc(sizeof(*d));
    if (d == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    sbx__v1__describe_response__init(d);
    d->profiles = calloc(e->n_slots > 0 ? e->n_slots : 1, sizeof(*d->profiles));
    bool ok = d->profiles != NULL && sbx_set_string(&d->default_profile, e->cfg->default_profile) &&
              sbx_set_string(&d->node, e->cfg->node) && sbx_set_string(&d->version, SBX_VERSION);
    for (size_t i = 0; ok && i < e->n_slots; i++) {
        profile_slot *s = &e->slots[i];
        Sbx__V1__ProfileDescription *pd = malloc(sizeof(*pd));
        if (pd == NULL) {
            ok = false;
            break;
        }
        sbx__v1__profile_description__init(pd);
        d->profiles[d->n_profiles++] = pd;
        ok = sbx_set_string(&pd->name, s->profile->name) &&
             sbx_set_string(&pd->provider, s->ops->name) &&
             sbx_set_string(&pd->scope, sbx_scope_name(s->profile->scope)) &&
             sbx_set_string(&pd->environment, sbx_environment_name(s->profile->environment));
        pd->idle_timeout_s = s->profile->idle_timeout_s;
        pd->idle_pause = s->profile->idle_pause;
        sbx_error open_err;
        /* A provider that cannot open here (no dockerd, no API key) is listed without
         * capabilities rather than hiding the profile. */
        if (ok && slot_open(s, &open_err) == SBX_OK)
            pd->capabilities = (sbx_capabilities *)sbx_message_copy(&s->caps->base);
    }
    if (!ok) {
        sbx_message_free(&d->base);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory describing profiles");
    }
    *out = d;
    return SBX_OK;
}

/* ---- idle_action: pause ------------------------------------------------------------------ */

/* Bounds of the idle pass's period: a quarter of the shortest idle timeout, but not busier than
 * 4 times a second nor lazier than every 30 s (a session is paused at most that late). */
#define ENGINE_IDLE_EVERY_MIN_MS 250
#define ENGINE_IDLE_EVERY_MAX_MS 30000
/* Bound of one provider pause call in the idle pass (the freezer, a daemon round trip). */
#define ENGINE_IDLE_PAUSE_MS 30000

/* What a finished request tells the idle record (profiles with idle_action: pause only). */
static void idle_note(run *r, const sbx_session_handle *h, sbx_status st, const sbx_result *res)
{
    if (r->e->idle == NULL || !r->slot->profile->idle_pause)
        return;
    char key[SBX_SCOPED_KEY_MAX];
    sbx_scoped_key(key, subject_of(r), h->session_id);
    if (h->status == SBX__V1__SESSION_STATUS__SESSION_STATUS_CLOSED || !str_set(h->sandbox_id)) {
        idle_forget(r->e->idle, key);
        return;
    }
    int delta = 0;
    const sbx_request *req = r->req;
    if (req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND && req->run_command->detach &&
        st == SBX_OK && res != NULL && res->command_id != 0)
        delta = 1; /* a detached command runs on: the session is not idle */
    else if (follows_command(req) && res != NULL &&
             res->outcome != SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED)
        delta = -1; /* one was seen ending */
    idle_touch(r->e->idle, key, h->sandbox_id, (size_t)(r->slot - r->e->slots), sbx_monotonic_ms(),
               delta);
}

sbx_status sbx_engine_idle_pass(sbx_engine *e, sbx_strlist *paused, sbx_error *err)
{
    if (e == NULL || e->idle == NULL)
        return SBX_OK;
    idle_due_entry *due = NULL;
    size_t n = idle_due(e->idle, sbx_monotonic_ms(), e->idle_timeout_ms, e->n_slots, &due);
    sbx_status first = SBX_OK;
    for (size_t i = 0; i < n; i++) {
        profile_slot *s = &e->slots[due[i].slot];
        if (!atomic_load_explicit(&s->opened, memory_order_acquire) || !s->caps->pause ||
            s->ops->pause == NULL)
            continue;
        /* Under the session lock, and only if nothing used the session meanwhile: a request
         * that arrived first runs on an awake sandbox. */
        session_lock *lock = lock_session(e, due[i].session_id);
        if (lock == NULL)
            break;
        sbx_error perr;
        sbx_error_clear(&perr);
        sbx_status st = SBX_OK;
        int64_t now = sbx_monotonic_ms();
        if (idle_still_due(e->idle, &due[i], now, e->idle_timeout_ms[due[i].slot])) {
            sbx_provider_set_deadline_ms(now + ENGINE_IDLE_PAUSE_MS);
            st = s->ops->pause(s->state, due[i].sandbox_id, &perr);
            sbx_provider_set_deadline_ms(0);
            if (st == SBX_OK) {
                idle_paused(e->idle, due[i].session_id);
                if (paused != NULL) {
                    char line[512];
                    snprintf(line, sizeof line, "%s: %s", s->profile->name, due[i].sandbox_id);
                    sbx_strlist_add(paused, line);
                }
            } else if (st == SBX_E_GONE) {
                idle_forget(e->idle, due[i].session_id);
            } else if (first == SBX_OK) {
                first = sbx_error_set(err, st, "pausing idle session %s (profile %s): %s",
                                      due[i].session_id, s->profile->name, perr.message);
            }
        }
        unlock_session(e, lock);
    }
    idle_due_free(due, n);
    return first;
}

static void *idle_main(void *arg)
{
    sbx_engine *e = arg;
    pthread_mutex_lock(&e->idle_mu);
    while (!e->idle_stop) {
        struct timespec until = sbx_mono_after_ms(e->idle_every_ms);
        while (!e->idle_stop &&
               pthread_cond_timedwait(&e->idle_cv, &e->idle_mu, &until) != ETIMEDOUT) {
        }
        if (e->idle_stop)
            break;
        pthread_mutex_unlock(&e->idle_mu);
        sbx_strlist paused = {0};
        sbx_error err;
        sbx_error_clear(&err);
        sbx_engine_idle_pass(e, &paused, &err); /* the next pass tries again */
        sbx_strlist_clear(&paused);
        pthread_mutex_lock(&e->idle_mu);
    }
    pthread_mutex_unlock(&e->idle_mu);
    return NULL;
}

/* Starts the idle pass when a profile asks for idle_action: pause (nothing otherwise: no
 * thread, no record). Without memory or a thread the sessions are simply never paused. */
static void idle_start(sbx_engine *e)
{
    int64_t shortest = 0;
    for (size_t i = 0; i < e->n_slots; i++) {
        const sbx_profile_config *p = e->slots[i].profile;
        if (p->idle_pause && p->idle_timeout_s > 0 &&
            (shortest == 0 || p->idle_timeout_s * 1000 < shortest))
            shortest = p->idle_timeout_s * 1000;
    }
    if (shortest == 0)
        return;
    e->idle = idle_new();
    e->idle_timeout_ms = calloc(e->n_slots, sizeof *e->idle_timeout_ms);
    if (e->idle == NULL || e->idle_timeout_ms == NULL) {
        idle_free(e->idle);
        e->idle = NULL;
        return;
    }
    for (size_t i = 0; i < e->n_slots; i++) {
        const sbx_profile_config *p = e->slots[i].profile;
        e->idle_timeout_ms[i] = p->idle_pause ? p->idle_timeout_s * 1000 : 0;
    }
    e->idle_every_ms = shortest / 4;
    if (e->idle_every_ms < ENGINE_IDLE_EVERY_MIN_MS)
        e->idle_every_ms = ENGINE_IDLE_EVERY_MIN_MS;
    if (e->idle_every_ms > ENGINE_IDLE_EVERY_MAX_MS)
        e->idle_every_ms = ENGINE_IDLE_EVERY_MAX_MS;
    sbx_cond_init_mono(&e->idle_cv);
    pthread_mutex_init(&e->idle_mu, NULL);
    e->idle_running = pthread_create(&e->idle_thread, NULL, idle_main, e) == 0;
    if (!e->idle_running) {
        pthread_mutex_destroy(&e->idle_mu);
        pthread_cond_destroy(&e->idle_cv);
    }
}
