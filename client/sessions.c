/* sessions.c - client-side session scopes, idle reset and the handle store (see sessions.h).
 *
 * Everything that reaches a sandbox goes through the broker: this file only decides which
 * handle a request carries and keeps the handles that come back. It must not call the engine
 * or providers directly, and never invents a session for an unknown id.
 */
#include "sbx/sessions.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strbuf.h"

/* Longest session id or name accepted: the contract's session_id bound (execution.options). */
#define SESSION_ID_MAX 128

struct sbx_sessions {
    const sbx_config *cfg; /* borrowed */
    sbx_broker *broker;    /* borrowed */
    char *dir;             /* store directory or NULL */
    pthread_mutex_t mu;    /* guards handles */
    sbx_session_handle **handles;
    size_t n;
};

/* ---- store -------------------------------------------------------------------------------- */

/* Ids become file names: only [A-Za-z0-9._:-], so no id can name a path outside the store. */
static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > SESSION_ID_MAX || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

static sbx_status mkdir_p(const char *path, sbx_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return sbx_error_set(err, SBX_E_CONFIG, "session store path is too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return sbx_error_set(err, SBX_E_CONFIG, "cannot create '%s': %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_CONFIG, "cannot create '%s': %s", buf, strerror(errno));
    return SBX_OK;
}

static void store_save(sbx_sessions *s, const sbx_session_handle *h)
{
    if (s->dir == NULL || !id_ok(h->session_id))
        return;
    char path[PATH_MAX], tmp[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.session", s->dir, h->session_id);
    snprintf(tmp, sizeof(tmp), "%s/.%s.%ld.tmp", s->dir, h->session_id, (long)getpid());
    size_t len = 0;
    uint8_t *buf = sbx_message_pack(&h->base, &len);
    if (buf == NULL)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    free(buf);
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

static void store_remove(sbx_sessions *s, const char *id)
{
    if (s->dir == NULL || !id_ok(id))
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.session", s->dir, id);
    unlink(path);
}

static sbx_session_handle *store_read(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    uint8_t buf[SBX_SESSION_FILE_MAX];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    close(fd);
    if (len == 0 || len == sizeof(buf)) /* empty, or too big to be a handle */
        return NULL;
    sbx_session_handle *h = NULL;
    if (sbx_message_decode(&sbx__v1__session_handle__descriptor, buf, len, sizeof(buf),
                           (ProtobufCMessage **)&h, NULL) != SBX_OK)
        return NULL;
    /* The file is <session_id>.session, as store_save names it: a handle under another name
     * (a copy, a rename) would be a second claim on its id, and which one a lookup finds would
     * then depend on the directory's order. */
    size_t id_len = strlen(h->session_id);
    if (!id_ok(h->session_id) || strlen(name) != id_len + 8 ||
        strncmp(name, h->session_id, id_len) != 0) {
        sbx_message_free(&h->base);
        return NULL;
    }
    return h;
}

static void store_load(sbx_sessions *s)
{
    if (s->dir == NULL) /* no store: nothing kept to load (as store_save keeps nothing) */
        return;
    DIR *d = opendir(s->dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && s->n < SBX_SESSIONS_MAX) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 9 || strcmp(e->d_name + len - 8, ".session") != 0)
            continue;
        sbx_session_handle *h = store_read(dirfd(d), e->d_name);
        if (h == NULL)
            continue;
        sbx_session_handle **grown = realloc(s->handles, (s->n + 1) * sizeof(*grown));
        if (grown == NULL) {
            sbx_message_free(&h->base);
            break;
        }
        s->handles = grown;
        s->handles[s->n++] = h;
    }
    closedir(d);
}

bool sbx_sessions_default_dir(char *buf, size_t size)
{
    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    int n;
    if (state != NULL && state[0] == '/')
        n = snprintf(buf, size, "%s/sbx/sessions", state);
    else if (home != NULL && home[0] == '/')
        n = snprintf(buf, size, "%s/.local/state/sbx/sessions", home);
    else
        return false;
    return n > 0 && (size_t)n < size;
}

/* ---- lifetime ----------------------------------------------------------------------------- */

sbx_status sbx_sessions_open(const sbx_config *cfg, sbx_broker *broker, const char *store_dir,
                             sbx_sessions **out, sbx_error *err)
{
    *out = NULL;
    sbx_sessions *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    s->cfg = cfg;
    s->broker = broker;
    pthread_mutex_init(&s->mu, NULL);
    if (store_dir != NULL) {
        sbx_status st = mkdir_p(store_dir, err);
        if (st == SBX_OK && (s->dir = strdup(store_dir)) == NULL)
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        if (st != SBX_OK) {
            sbx_sessions_free(s);
            return st;
        }
        store_load(s);
    }
    *out = s;
    return SBX_OK;
}

void sbx_sessions_free(sbx_sessions *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        sbx_message_free(&s->handles[i]->base);
    free(s->handles);
    free(s->dir);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- lookups (s->mu held) ----------------------------------------------------------------- */

static ssize_t find_index(sbx_sessions *s, const char *id_or_name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->handles[i]->session_id, id_or_name) == 0)
            return (ssize_t)i;
    for (size_t i = 0; i < s->n; i++)
        if (s->handles[i]->name[0] != '\0' && strcmp(s->handles[i]->name, id_or_name) == 0)
            return (ssize_t)i;
    return -1;
}

static sbx_status add_handle(sbx_sessions *s, sbx_session_handle *h, sbx_error *err)
{
    if (s->n >= SBX_SESSIONS_MAX) {
        sbx_message_free(&h->base);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "more than %d sessions; remove some with `sbx session rm`",
                             SBX_SESSIONS_MAX);
    }
    sbx_session_handle **grown = realloc(s->handles, (s->n + 1) * sizeof(*grown));
    if (grown == NULL) {
        sbx_message_free(&h->base);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    s->handles = grown;
    s->handles[s->n++] = h;
    store_save(s, h);
    return SBX_OK;
}

static void replace_handle(sbx_sessions *s, const sbx_session_handle *h)
{
    ssize_t i = find_index(s, h->session_id);
    if (i < 0 || strcmp(s->handles[i]->session_id, h->session_id) != 0)
        return;
    sbx_session_handle *copy = (sbx_session_handle *)sbx_message_copy(&h->base);
    if (copy == NULL)
        return;
    /* The name is the client's label; keep it even if a broker dropped it. */
    if (copy->name[0] == '\0' && s->handles[i]->name[0] != '\0')
        sbx_set_string(&copy->name, s->handles[i]->name);
    sbx_message_free(&s->handles[i]->base);
    s->handles[i] = copy;
    store_save(s, copy);
}

static sbx_session_handle *new_handle(const char *id, const char *profile, const char *name)
{
    sbx_session_handle *h = sbx_session_handle_new();
    if (h == NULL)
        return NULL;
    if (!sbx_set_string(&h->session_id, id) || !sbx_set_string(&h->profile, profile) ||
        !sbx_set_string(&h->name, name)) {
        sbx_message_free(&h->base);
        return NULL;
    }
    h->created_at_ms = sbx_now_ms();
    h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE;
    return h;
}

static sbx_status unknown_profile(const sbx_config *cfg, const char *name, sbx_error *err)
{
    char list[1024] = "";
    for (size_t i = 0; i < cfg->n_profiles; i++)
        sbx_list_add(list, sizeof list, cfg->profiles[i].name);
    return sbx_error_set(err, SBX_E_CONFIG, "unknown profile '%s'; configured profiles: %s",
                         name != NULL && name[0] ? name : "(default)", list);
}

/* ---- public ------------------------------------------------------------------------------- */

sbx_status sbx_sessions_create(sbx_sessions *s, const char *profile, const char *name,
                               sbx_session_handle **out, sbx_error *err)
{
    if (out != NULL)
        *out = NULL;
    const sbx_profile_config *p = sbx_config_profile(s->cfg, profile);
    if (p == NULL)
        return unknown_profile(s->cfg, profile, err);
    if (p->scope != SBX_SCOPE_PER_SESSION)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "profile '%s' has scope %s: sessions can only be created under "
                             "per_session (per_call is ephemeral per operation; per_runtime is "
                             "one shared session)",
                             p->name, sbx_scope_name(p->scope));
    if (name != NULL && name[0] != '\0' && !id_ok(name))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "session name '%s' is not valid; use up to %d characters of "
                             "A-Z a-z 0-9 . _ : -",
                             name, SESSION_ID_MAX);
    char id[SBX_UUID_LEN];
    sbx_uuid_v4(id);
    pthread_mutex_lock(&s->mu);
    sbx_status st = SBX_OK;
    if (name != NULL && name[0] != '\0' && find_index(s, name) >= 0) {
        st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                           "a session named '%s' already exists; pick another name", name);
    } else {
        sbx_session_handle *h = new_handle(id, p->name, name);
        st =
            h != NULL ? add_handle(s, h, err) : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        if (st == SBX_OK && out != NULL)
            *out = (sbx_session_handle *)sbx_message_copy(&h->base);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

static sbx_request *destroy_request(const sbx_session_handle *h, const sbx_principal *principal)
{
    sbx_request *r = sbx_request_new();
    if (r == NULL)
        return NULL;
    r->destroy = malloc(sizeof(*r->destroy));
    if (r->destroy == NULL) {
        sbx_request_free(r);
        return NULL;
    }
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    r->session = (sbx_session_handle *)sbx_message_copy(&h->base);
    if (principal != NULL)
        r->principal = (sbx_principal *)sbx_message_copy(&principal->base);
    sbx_set_string(&r->profile, h->profile);
    return r;
}

/* Destroys h's sandbox through the broker; returns the completion (caller frees) or NULL. */
static sbx_completion *destroy_through_broker(sbx_sessions *s, const sbx_session_handle *h,
                                              const sbx_principal *principal)
{
    sbx_request *r = destroy_request(h, principal);
    if (r == NULL)
        return NULL;
    sbx_completion *c = NULL;
    sbx_broker_submit(s->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    return c;
}

static bool succeeded(const sbx_completion *c)
{
    return c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
}

sbx_status sbx_sessions_execute(sbx_sessions *s, sbx_request *req, const char *session_id,
                                int64_t wait_ms, sbx_completion **out, sbx_error *err)
{
    return sbx_sessions_execute_hooks(s, req, session_id, wait_ms, NULL, out, err);
}

/* Long because it is the sessions layer's one path for every request (resolve the handle, idle
 * reset, submit, record the returned handle), and each rule is a commented line or two of it. */
sbx_status sbx_sessions_execute_hooks(sbx_sessions *s, sbx_request *req, const char *session_id,
                                      int64_t wait_ms, const sbx_engine_hooks *hooks,
                                      sbx_completion **out, sbx_error *err)
{
    *out = NULL;
    sbx_error local;
    if (err == NULL)
        err = &local;
    sbx_error_clear(err);
    const sbx_profile_config *p = NULL;
    sbx_session_handle *h = NULL; /* our copy of the handle the request will carry */
    bool ephemeral = false;
    sbx_status st = SBX_OK;

    pthread_mutex_lock(&s->mu);
    if (session_id != NULL && session_id[0] != '\0') {
        ssize_t i = find_index(s, session_id);
        if (i < 0) {
            st = sbx_error_set(err, SBX_E_SESSION_NOT_FOUND,
                               "unknown session '%s'; create one with `sbx session new` (a "
                               "session is never created implicitly)",
                               session_id);
        } else {
            h = (sbx_session_handle *)sbx_message_copy(&s->handles[i]->base);
            if (h == NULL)
                st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
            else if (req->profile[0] != '\0' && strcmp(req->profile, h->profile) != 0)
                st = sbx_error_set(err, SBX_E_CONFIG,
                                   "session '%s' belongs to profile '%s', but profile '%s' was "
                                   "requested; omit the profile to reuse the session",
                                   h->session_id, h->profile, req->profile);
            else if ((p = sbx_config_profile(s->cfg, h->profile)) == NULL)
                st = unknown_profile(s->cfg, h->profile, err);
        }
    } else if ((p = sbx_config_profile(s->cfg, req->profile)) == NULL) {
        st = unknown_profile(s->cfg, req->profile, err);
    } else if (p->scope == SBX_SCOPE_PER_CALL) {
        char id[SBX_UUID_LEN];
        sbx_uuid_v4(id);
        h = new_handle(id, p->name, NULL);
        ephemeral = true;
    } else {
        char id[SESSION_ID_MAX + 1];
        snprintf(id, sizeof(id), "%s:%s", p->scope == SBX_SCOPE_PER_RUNTIME ? "runtime" : "default",
                 p->name);
        ssize_t i = find_index(s, id);
        if (i < 0) {
            sbx_session_handle *fresh = new_handle(id, p->name, NULL);
            st = fresh != NULL ? add_handle(s, fresh, err)
                               : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
            i = (ssize_t)s->n - 1;
        }
        if (st == SBX_OK)
            h = (sbx_session_handle *)sbx_message_copy(&s->handles[i]->base);
    }
    pthread_mutex_unlock(&s->mu);
    /* Past here the request goes on with both the handle and its profile. */
    if (st == SBX_OK && (h == NULL || p == NULL))
        st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    if (st != SBX_OK) {
        sbx_message_free((ProtobufCMessage *)h);
        *out = sbx_completion_from_error(req->task_id, err);
        return st;
    }

    /* Idle reset on touch. */
    char notice[512] = "";
    int64_t idle_ms = p->idle_timeout_s * 1000;
    /* (Not for attach/cancel: they touch a command that runs, never reset its sandbox. Nor
     * for pause/resume: a paused session keeps its sandbox however long it stayed paused. Nor
     * for a snapshot: it is asked to keep the workspace, not to discard it first. Nor for
     * expose: a port of the sandbox that runs is asked for.) */
    bool follows = req->op_case == SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_PAUSE ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RESUME ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_EXPOSE;
    /* (Nor for idle_action: pause: the engine pauses an idle session instead, and the next
     * request resumes it with its workspace.) */
    if (!ephemeral && !follows && !p->idle_pause && h->sandbox_id[0] != '\0' && idle_ms > 0 &&
        sbx_now_ms() - h->last_used_at_ms > idle_ms) {
        sbx_completion *d = destroy_through_broker(s, h, req->principal);
        if (d != NULL && (sbx_status)d->error_code == SBX_E_PERMISSION_DENIED) {
            /* Another principal's session (one store per OS account, sessions by name): refused
             * as the request itself would be, and its handle left as it is. Before, the failed
             * destroy cleared it, this caller got a new sandbox under the name, and its owner
             * was locked out of its own session. */
            st = sbx_error_set(err, SBX_E_PERMISSION_DENIED, "session '%s' is not yours to use: %s",
                               h->session_id, d->error != NULL ? d->error : "");
            *out = sbx_completion_from_error(req->task_id, err);
            sbx_completion_free(d);
            sbx_message_free(&h->base);
            return st;
        }
        if (succeeded(d) && d->session != NULL) {
            sbx_message_free(&h->base);
            h = (sbx_session_handle *)sbx_message_copy(&d->session->base);
        } else {
            sbx_set_string(&h->sandbox_id, NULL); /* best effort: never reuse it */
            sbx_set_bytes(&h->binding, NULL, 0);
            sbx_message_free((ProtobufCMessage *)h->policy); /* that sandbox's */
            h->policy = NULL;
        }
        sbx_completion_free(d);
        h->status = SBX__V1__SESSION_STATUS__SESSION_STATUS_ACTIVE;
        h->created_at_ms = sbx_now_ms();
        if (p->environment == SBX_ENV_ATTACHED)
            snprintf(notice, sizeof(notice),
                     "sandbox session '%s' was idle for more than %llds and its binding was "
                     "reset; the attached environment itself is untouched",
                     h->session_id, (long long)p->idle_timeout_s);
        else
            snprintf(notice, sizeof(notice),
                     "sandbox session '%s' was idle for more than %llds and has been reset; its "
                     "previous workspace state was discarded",
                     h->session_id, (long long)p->idle_timeout_s);
        pthread_mutex_lock(&s->mu);
        replace_handle(s, h);
        pthread_mutex_unlock(&s->mu);
    }

    sbx_message_free((ProtobufCMessage *)req->session);
    req->session = h;
    if (req->profile[0] == '\0')
        sbx_set_string(&req->profile, p->name);
    sbx_completion *c = NULL;
    sbx_broker_submit(s->broker, req, ephemeral ? SBX_WAIT_FOREVER : wait_ms, hooks, &c);
    if (c != NULL && notice[0] != '\0')
        sbx_completion_add_notice(c, "%s", notice);
    if (ephemeral) {
        /* per_call: destroyed in all cases, also when the operation failed. The engine
         * destroys it after the operation; a completion that still names it comes from an
         * engine whose destroy failed (its notice says so), and it is tried once more. */
        const sbx_session_handle *used = c != NULL && c->session != NULL ? c->session : NULL;
        if (used != NULL && used->sandbox_id[0] != '\0') {
            sbx_completion *d = destroy_through_broker(s, used, req->principal);
            if (succeeded(d))
                sbx_completion_add_notice(
                    c, "per_call sandbox %s was destroyed on a second attempt", used->sandbox_id);
            else
                sbx_completion_add_notice(c, "a second attempt to destroy it failed too: %s",
                                          d != NULL ? d->error : "no memory");
            if (succeeded(d) && d->session != NULL) {
                sbx_message_free(&c->session->base);
                c->session = (sbx_session_handle *)sbx_message_copy(&d->session->base);
            }
            sbx_completion_free(d);
        }
    } else if (c != NULL) {
        sbx_sessions_ingest(s, c);
    }
    *out = c;
    return SBX_OK;
}

void sbx_sessions_ingest(sbx_sessions *s, const sbx_completion *c)
{
    if (c == NULL || c->session == NULL || c->session->session_id[0] == '\0')
        return;
    pthread_mutex_lock(&s->mu);
    replace_handle(s, c->session);
    pthread_mutex_unlock(&s->mu);
}

sbx_status sbx_sessions_destroy(sbx_sessions *s, const char *session_id,
                                const sbx_principal *principal, sbx_error *err)
{
    pthread_mutex_lock(&s->mu);
    ssize_t i = find_index(s, session_id);
    sbx_session_handle *h =
        i >= 0 ? (sbx_session_handle *)sbx_message_copy(&s->handles[i]->base) : NULL;
    pthread_mutex_unlock(&s->mu);
    if (h == NULL)
        return SBX_OK; /* idempotent */
    sbx_status st = SBX_OK;
    if (h->sandbox_id[0] != '\0') {
        sbx_completion *d = destroy_through_broker(s, h, principal);
        if (!succeeded(d))
            st = sbx_error_set(err, d != NULL ? (sbx_status)d->error_code : SBX_E_INTERNAL,
                               "destroying session '%s': %s", h->session_id,
                               d != NULL ? d->error : "out of memory");
        sbx_completion_free(d);
    }
    if (st == SBX_OK)
        sbx_sessions_forget(s, h->session_id);
    sbx_message_free(&h->base);
    return st;
}

void sbx_sessions_forget(sbx_sessions *s, const char *session_id)
{
    pthread_mutex_lock(&s->mu);
    ssize_t j = find_index(s, session_id);
    if (j >= 0) {
        sbx_session_handle *h = s->handles[j];
        s->handles[j] = s->handles[--s->n];
        store_remove(s, h->session_id);
        sbx_message_free(&h->base);
    }
    pthread_mutex_unlock(&s->mu);
}

static int cmp_handles(const void *a, const void *b)
{
    const sbx_session_handle *x = *(sbx_session_handle *const *)a;
    const sbx_session_handle *y = *(sbx_session_handle *const *)b;
    if (x->created_at_ms != y->created_at_ms)
        return x->created_at_ms < y->created_at_ms ? -1 : 1;
    return strcmp(x->session_id, y->session_id);
}

size_t sbx_sessions_list(sbx_sessions *s, sbx_session_handle ***out)
{
    pthread_mutex_lock(&s->mu);
    size_t n = 0;
    sbx_session_handle **list = calloc(s->n > 0 ? s->n : 1, sizeof(*list));
    for (size_t i = 0; list != NULL && i < s->n; i++) {
        list[n] = (sbx_session_handle *)sbx_message_copy(&s->handles[i]->base);
        if (list[n] != NULL)
            n++;
    }
    pthread_mutex_unlock(&s->mu);
    if (list != NULL)
        qsort(list, n, sizeof(*list), cmp_handles);
    *out = list;
    return n;
}

void sbx_sessions_list_free(sbx_session_handle **list, size_t n)
{
    for (size_t i = 0; list != NULL && i < n; i++)
        sbx_message_free(&list[i]->base);
    free(list);
}

sbx_session_handle *sbx_sessions_get(sbx_sessions *s, const char *session_id)
{
    pthread_mutex_lock(&s->mu);
    ssize_t i = find_index(s, session_id);
    sbx_session_handle *h =
        i >= 0 ? (sbx_session_handle *)sbx_message_copy(&s->handles[i]->base) : NULL;
    pthread_mutex_unlock(&s->mu);
    return h;
}

sbx_status sbx_sessions_put(sbx_sessions *s, const sbx_session_handle *h, sbx_error *err)
{
    if (!id_ok(h->session_id))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "session id '%s' is not valid",
                             h->session_id);
    pthread_mutex_lock(&s->mu);
    sbx_status st = SBX_OK;
    if (find_index(s, h->session_id) >= 0) {
        replace_handle(s, h);
    } else {
        sbx_session_handle *copy = (sbx_session_handle *)sbx_message_copy(&h->base);
        st = copy != NULL ? add_handle(s, copy, err)
                          : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}
