/* idle.c - when each tracked session was last used, in a keyed hash table (core/hash.h: session
 * ids are chosen by callers) guarded by one mutex; see idle.h. Touched once per request of an
 * idle_action: pause profile, scanned by the engine's idle pass a few times per timeout.
 */
#include "core/idle.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/table.h"

/* Buckets: a power of two; chains stay short up to a few thousand sessions, and the pass walks
 * them all anyway. */
#define IDLE_BUCKETS 1024

typedef struct idle_entry {
    sbx_link link; /* in idle_table.table, by session id */
    char *session_id;
    char *sandbox_id;
    size_t slot;
    int64_t last_used_ms;
    int detached; /* detached commands started and not seen ending */
    bool paused;
} idle_entry;

struct idle_table {
    pthread_mutex_t mu; /* guards everything below */
    sbx_table table;
    sbx_link *buckets[IDLE_BUCKETS];
    size_t n;
};

idle_table *idle_new(void)
{
    idle_table *t = calloc(1, sizeof *t);
    if (t != NULL) {
        pthread_mutex_init(&t->mu, NULL);
        sbx_table_init(&t->table, t->buckets, IDLE_BUCKETS);
    }
    return t;
}

static void entry_free(idle_entry *e)
{
    free(e->session_id);
    free(e->sandbox_id);
    free(e);
}

void idle_free(idle_table *t)
{
    if (t == NULL)
        return;
    SBX_TABLE_EACH(&t->table, l)
    {
        entry_free(SBX_ENTRY(l, idle_entry, link));
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static idle_entry *find(idle_table *t, const char *session_id, uint64_t h)
{
    for (sbx_link *l = sbx_table_first(&t->table, h); l != NULL; l = l->next) {
        idle_entry *e = SBX_ENTRY(l, idle_entry, link);
        if (l->hash == h && strcmp(e->session_id, session_id) == 0)
            return e;
    }
    return NULL;
}

void idle_touch(idle_table *t, const char *session_id, const char *sandbox_id, size_t slot,
                int64_t now_ms, int detached_delta)
{
    if (t == NULL || session_id == NULL || sandbox_id == NULL || !session_id[0] || !sandbox_id[0])
        return;
    uint64_t h = sbx_hash_str(session_id);
    pthread_mutex_lock(&t->mu);
    idle_entry *e = find(t, session_id, h);
    if (e == NULL && t->n < IDLE_MAX_SESSIONS && (e = calloc(1, sizeof *e)) != NULL) {
        e->session_id = strdup(session_id);
        if (e->session_id == NULL) {
            free(e);
            e = NULL;
        } else {
            sbx_table_add(&t->table, &e->link, h);
            t->n++;
        }
    }
    if (e != NULL) {
        if (e->sandbox_id == NULL || strcmp(e->sandbox_id, sandbox_id) != 0) {
            char *copy = strdup(sandbox_id);
            if (copy != NULL) {
                free(e->sandbox_id);
                e->sandbox_id = copy;
                e->detached = 0; /* a new sandbox: the old one's commands ended with it */
            }
        }
        e->slot = slot;
        e->last_used_ms = now_ms;
        e->paused = false;
        e->detached += detached_delta;
        if (e->detached < 0)
            e->detached = 0;
    }
    pthread_mutex_unlock(&t->mu);
}

void idle_paused(idle_table *t, const char *session_id)
{
    if (t == NULL || session_id == NULL)
        return;
    uint64_t h = sbx_hash_str(session_id);
    pthread_mutex_lock(&t->mu);
    idle_entry *e = find(t, session_id, h);
    if (e != NULL)
        e->paused = true;
    pthread_mutex_unlock(&t->mu);
}

void idle_forget(idle_table *t, const char *session_id)
{
    if (t == NULL || session_id == NULL)
        return;
    uint64_t h = sbx_hash_str(session_id);
    pthread_mutex_lock(&t->mu);
    idle_entry *e = find(t, session_id, h);
    if (e != NULL) {
        sbx_table_del(&t->table, &e->link);
        entry_free(e);
        t->n--;
    }
    pthread_mutex_unlock(&t->mu);
}

static bool due(const idle_entry *e, int64_t now_ms, int64_t timeout_ms)
{
    return !e->paused && e->detached == 0 && e->sandbox_id != NULL && timeout_ms > 0 &&
           now_ms - e->last_used_ms > timeout_ms;
}

size_t idle_due(idle_table *t, int64_t now_ms, const int64_t *timeout_ms, size_t n_slots,
                idle_due_entry **out)
{
    *out = NULL;
    if (t == NULL)
        return 0;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&t->mu);
    SBX_TABLE_EACH(&t->table, l)
    {
        const idle_entry *e = SBX_ENTRY(l, idle_entry, link);
        if (e->slot >= n_slots || !due(e, now_ms, timeout_ms[e->slot]))
            continue;
        if (n == cap) {
            size_t grown_cap = cap ? cap * 2 : 16;
            idle_due_entry *grown = realloc(*out, grown_cap * sizeof *grown);
            if (grown == NULL)
                goto full;
            *out = grown;
            cap = grown_cap;
        }
        idle_due_entry *d = &(*out)[n];
        d->session_id = strdup(e->session_id);
        d->sandbox_id = strdup(e->sandbox_id);
        d->slot = e->slot;
        if (d->session_id == NULL || d->sandbox_id == NULL) {
            free(d->session_id);
            free(d->sandbox_id);
            goto full;
        }
        n++;
    }
full:
    pthread_mutex_unlock(&t->mu);
    return n;
}

void idle_due_free(idle_due_entry *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(list[i].session_id);
        free(list[i].sandbox_id);
    }
    free(list);
}

bool idle_still_due(idle_table *t, const idle_due_entry *d, int64_t now_ms, int64_t timeout_ms)
{
    if (t == NULL)
        return false;
    uint64_t h = sbx_hash_str(d->session_id);
    pthread_mutex_lock(&t->mu);
    const idle_entry *e = find(t, d->session_id, h);
    bool ok = e != NULL && e->sandbox_id != NULL && strcmp(e->sandbox_id, d->sandbox_id) == 0 &&
              due(e, now_ms, timeout_ms);
    pthread_mutex_unlock(&t->mu);
    return ok;
}
