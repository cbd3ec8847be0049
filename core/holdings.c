/* holdings.c - each principal's count of live sandboxes (holdings.h): a keyed hash table of
 * principals, each with the sandboxes it holds and the places its requests are taking now. */
#include "core/holdings.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/table.h"

#define HOLDINGS_BUCKETS 256

typedef struct principal_rec {
    sbx_link link; /* in holdings.table, by subject */
    char *subject;
    size_t reserved; /* places taken by requests making a sandbox now */
    holding *held;
    size_t n, cap;
    int64_t checked_ms; /* last holdings_due_check that listed its sandboxes */
} principal_rec;

struct holdings {
    pthread_mutex_t mu;
    size_t limit;
    sbx_table table;
    sbx_link *buckets[HOLDINGS_BUCKETS];
};

holdings *holdings_new(size_t limit)
{
    holdings *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return NULL;
    pthread_mutex_init(&h->mu, NULL);
    sbx_table_init(&h->table, h->buckets, HOLDINGS_BUCKETS);
    h->limit = limit;
    return h;
}

static void rec_free(principal_rec *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->held[i].sandbox_id);
    free(p->held);
    free(p->subject);
    free(p);
}

void holdings_free(holdings *h)
{
    if (h == NULL)
        return;
    SBX_TABLE_EACH(&h->table, l)
    {
        rec_free(SBX_ENTRY(l, principal_rec, link));
    }
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* subject's record (h->mu held); create: make it when absent (NULL only when out of memory). */
static principal_rec *rec_get(holdings *h, const char *subject, bool create)
{
    uint64_t hash = sbx_hash_str(subject);
    for (sbx_link *l = sbx_table_first(&h->table, hash); l != NULL; l = l->next) {
        principal_rec *p = SBX_ENTRY(l, principal_rec, link);
        if (l->hash == hash && strcmp(p->subject, subject) == 0)
            return p;
    }
    if (!create)
        return NULL;
    principal_rec *p = calloc(1, sizeof(*p));
    if (p == NULL || (p->subject = strdup(subject)) == NULL) {
        free(p);
        return NULL;
    }
    sbx_table_add(&h->table, &p->link, hash);
    return p;
}

/* Forgets an empty record (h->mu held), so a principal that holds nothing costs nothing. */
static void rec_tidy(holdings *h, principal_rec *p)
{
    if (p->n > 0 || p->reserved > 0)
        return;
    sbx_table_del(&h->table, &p->link);
    rec_free(p);
}

/* Records that p holds sandbox_id (h->mu held). Out of memory: not recorded. */
static void rec_append(principal_rec *p, size_t slot, const char *sandbox_id)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4;
        holding *grown = realloc(p->held, cap * sizeof(*grown));
        if (grown != NULL) {
            p->held = grown;
            p->cap = cap;
        }
    }
    char *id = p->n < p->cap ? strdup(sandbox_id) : NULL;
    if (id != NULL)
        p->held[p->n++] = (holding){.sandbox_id = id, .slot = slot};
}

bool holdings_reserve(holdings *h, const char *subject, size_t *held, holding_place *place)
{
    pthread_mutex_lock(&h->mu);
    principal_rec *p = rec_get(h, subject, true);
    bool ok = p == NULL || p->n + p->reserved < h->limit; /* no memory: not counted (above) */
    place->counted = p != NULL && ok;
    if (place->counted)
        p->reserved++;
    *held = p != NULL ? p->n + p->reserved - (place->counted ? 1 : 0) : 0;
    pthread_mutex_unlock(&h->mu);
    return ok;
}

void holdings_settle(holdings *h, const char *subject, holding_place place, size_t slot,
                     const char *sandbox_id)
{
    if (!place.counted)
        return;
    pthread_mutex_lock(&h->mu);
    principal_rec *p = rec_get(h, subject, false); /* kept by the reservation */
    p->reserved--;
    if (sandbox_id != NULL)
        rec_append(p, slot, sandbox_id);
    rec_tidy(h, p);
    pthread_mutex_unlock(&h->mu);
}

void holdings_add(holdings *h, const char *subject, size_t slot, const char *sandbox_id)
{
    pthread_mutex_lock(&h->mu);
    principal_rec *p = rec_get(h, subject, true);
    bool known = false;
    for (size_t i = 0; p != NULL && i < p->n && !known; i++)
        known = p->held[i].slot == slot && strcmp(p->held[i].sandbox_id, sandbox_id) == 0;
    if (p != NULL && !known)
        rec_append(p, slot, sandbox_id);
    if (p != NULL)
        rec_tidy(h, p);
    pthread_mutex_unlock(&h->mu);
}

void holdings_drop(holdings *h, const char *subject, size_t slot, const char *sandbox_id)
{
    pthread_mutex_lock(&h->mu);
    principal_rec *p = rec_get(h, subject, false);
    for (size_t i = 0; p != NULL && i < p->n; i++)
        if (p->held[i].slot == slot && strcmp(p->held[i].sandbox_id, sandbox_id) == 0) {
            free(p->held[i].sandbox_id);
            p->held[i] = p->held[--p->n];
            rec_tidy(h, p);
            break;
        }
    pthread_mutex_unlock(&h->mu);
}

size_t holdings_due_check(holdings *h, const char *subject, int64_t now_ms, holding **out)
{
    *out = NULL;
    size_t n = 0;
    pthread_mutex_lock(&h->mu);
    principal_rec *p = rec_get(h, subject, false);
    if (p != NULL && p->n > 0 &&
        (p->checked_ms == 0 || now_ms - p->checked_ms >= HOLDINGS_CHECK_EVERY_MS)) {
        holding *list = calloc(p->n, sizeof(*list));
        for (size_t i = 0; list != NULL && i < p->n; i++) {
            list[i].slot = p->held[i].slot;
            if ((list[i].sandbox_id = strdup(p->held[i].sandbox_id)) != NULL)
                n++;
        }
        if (n < p->n) { /* out of memory: no check this time */
            holdings_list_free(list, n);
            n = 0;
        } else {
            *out = list;
            p->checked_ms = now_ms;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return n;
}

void holdings_list_free(holding *list, size_t n)
{
    for (size_t i = 0; list != NULL && i < n; i++)
        free(list[i].sandbox_id);
    free(list);
}
