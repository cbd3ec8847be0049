/* table.h - the one hash table of libsbx's in-memory maps (the brokers' task store and its
 * owners, the thread broker's session backlogs and tenants, the engine's session locks, idle
 * records and holdings). A fixed power-of-two array of buckets, each a chain of links that the
 * caller embeds in its entries (as the Linux kernel's hlist_node), each link carrying its
 * entry's hash (core/hash.h's keyed hash, so nobody outside can fill one bucket). The table
 * allocates nothing and takes no lock: each map owns its entries and its bucket array and
 * guards them with its own lock (the engine's is striped by bucket, sbx_table_slot). Internal
 * to libsbx (not installed). */
#ifndef SBX_CORE_TABLE_H
#define SBX_CORE_TABLE_H

#include <stddef.h>
#include <stdint.h>

/* Embedded in each entry; `hash` is set by sbx_table_add. */
typedef struct sbx_link {
    struct sbx_link *next;
    uint64_t hash;
} sbx_link;

typedef struct sbx_table {
    sbx_link **buckets;
    size_t mask;
} sbx_table;

/* The entry of type `type` whose member `member` is the link l. */
#define SBX_ENTRY(l, type, member) ((type *)(void *)((char *)(l)-offsetof(type, member)))

/* buckets: n zeroed pointers (n a power of two), the caller's for the table's life. */
static inline void sbx_table_init(sbx_table *t, sbx_link **buckets, size_t n)
{
    t->buckets = buckets;
    t->mask = n - 1;
}

/* The index of hash's bucket (a striped lock guards bucket b with stripe b % stripes). */
static inline size_t sbx_table_slot(const sbx_table *t, uint64_t hash)
{
    return (size_t)(hash & t->mask);
}

/* The first link of hash's chain: walk it with ->next, comparing ->hash before the key. */
static inline sbx_link *sbx_table_first(const sbx_table *t, uint64_t hash)
{
    return t->buckets[hash & t->mask];
}

/* Adds l (in no table) under hash, at the head of its chain. */
static inline void sbx_table_add(sbx_table *t, sbx_link *l, uint64_t hash)
{
    sbx_link **head = &t->buckets[hash & t->mask];
    l->hash = hash;
    l->next = *head;
    *head = l;
}

/* Takes l, which is in t, out of it. */
static inline void sbx_table_del(sbx_table *t, sbx_link *l)
{
    sbx_link **pp = &t->buckets[l->hash & t->mask];
    while (*pp != l)
        pp = &(*pp)->next;
    *pp = l->next;
    l->next = NULL;
}

/* Visits every link of t as `l`; the next one is read before the body runs, so the body may
 * free l's entry (sbx_table_del is then not needed: the whole table is being dropped). */
#define SBX_TABLE_EACH(t, l)                                                                       \
    for (size_t sbx_b_ = 0; sbx_b_ <= (t)->mask; sbx_b_++)                                         \
        for (sbx_link *l = (t)->buckets[sbx_b_], *sbx_n_ = l != NULL ? l->next : NULL; l != NULL;  \
             l = sbx_n_, sbx_n_ = l != NULL ? l->next : NULL)

#endif
