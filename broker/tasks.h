/* tasks.h - the task table the in-process brokers share: one entry per idempotency key
 * (queued, running or done), a bounded LRU of done completions for result(), waiting with a
 * timeout, discard, and dedup (a key seen again joins the entry instead of running twice).
 * Private to broker/.
 *
 * The key is (principal subject, task_id), never task_id alone: another principal's task with
 * the same id is another task, so one caller can never be answered with another's completion.
 * Each entry also keeps its request's digest (sbx_request_digest): the same key with a
 * different request is refused (bt_conflict), never joined.
 *
 * Every function here expects the store's mutex to be held by the caller (bt_wait releases it
 * while sleeping). This module must not run requests: the brokers do.
 */
#ifndef SBX_BROKER_TASKS_H
#define SBX_BROKER_TASKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/limits.h"
#include "core/table.h"
#include "broker/broker_impl.h"
#include "sbx/contract.h"
#include "sbx/engine.h"

/* Hash buckets of the task table: a power of two above the default LRU size (1024) plus a full
 * default queue (1024), so chains stay short. */
#define BT_BUCKETS 4096

_Static_assert(BT_BUCKETS >= SBX_BROKER_DEFAULT_LRU_SIZE + SBX_BROKER_DEFAULT_QUEUE_DEPTH,
               "BT_BUCKETS must stay above the default LRU plus a full default queue");

/* How long a waiter spins before it sleeps: longer than a fast operation's whole round trip
 * through an executor, short enough that a slow one wastes no noticeable CPU. */
#define BT_SPIN_US 50
/* At most one waiter spins at a time: with many concurrent callers on few cores, spinners would
 * steal the CPU the executors need; one spinner keeps the single-caller latency low. */
#define BT_MAX_SPINNERS 1
/* Bytes the done entries of the LRU may hold (their completions and request copies, by packed
 * size): broker.lru_size bounds their number, this their size -- 1,024 done file reads of
 * 16 MiB would otherwise stay 16 GiB. Past either bound the oldest go first. */
#define BT_LRU_BYTES_MAX (64u << 20)

typedef enum bt_state { BT_QUEUED, BT_RUNNING, BT_DONE } bt_state;

/* A principal's share of the LRU: its done entries, oldest first, and what they hold. The LRU
 * is one store for every principal, so a principal over its fair share (the bounds divided by
 * the principals holding entries) is evicted first, oldest first: one tenant's flood of
 * requests evicts its own completions, never the one another keeps for its retry. */
typedef struct bt_owner {
    sbx_link link; /* in bt_store.owners, by subject */
    struct bt_task *head, *tail;
    size_t n_done, bytes;
    char subject[];
} bt_owner;

/* An asynchronous submitter (sbx_broker_submit_async) waiting for a task: called back once
 * with its own copy of the completion. */
typedef struct bt_waiter {
    struct bt_waiter *next;
    sbx_broker_done_fn on_done;
    void *arg;
    sbx_completion *c;          /* filled by bt_complete, handed over by bt_fire */
    const volatile int *cancel; /* a joiner's: set, it stops waiting (thread.c prune_gone) */
    bool creator;               /* the task's creator: its hooks run the task, never pruned */
    const sbx_request *req;     /* its request, borrowed until on_done: an heir runs it */
    sbx_output_fn on_output;    /* its output callback, once it is the creator (thread.c) */
} bt_waiter;

typedef struct bt_task {
    sbx_link link; /* in bt_store.tasks, by (subject, task_id); once dropped, the dead list */
    struct bt_task *lru_prev, *lru_next; /* done tasks, oldest first */
    struct bt_task *own_prev, *own_next; /* its owner's done tasks, oldest first */
    bt_owner *owner;                     /* while in the LRU */
    struct bt_task *qnext;               /* ready queue or session backlog (thread broker) */
    struct bt_session *session;          /* thread broker: the session it serializes on, or NULL */
    struct tb_tenant *tenant;            /* thread broker: its principal, while queued or running */
    bt_state state;
    bool in_table;                 /* reachable by task_id */
    bool discarded;                /* drop the completion when it arrives */
    int refs;                      /* waiters holding the entry */
    pthread_cond_t done;           /* broadcast when state becomes BT_DONE */
    const sbx_request *req;        /* the request to run (req_owned or the caller's) */
    sbx_request *req_owned;        /* our copy when the caller may stop waiting */
    const sbx_engine_hooks *hooks; /* the submitter's; valid until the completion (broker.h) */
    sbx_engine_hooks own_hooks;    /* an asynchronous submitter's, by value (hooks points here),
                                    * or the relay to a lent one's (thread.c) */
    sbx_engine_hooks lent;         /* a bounded-wait submitter's hooks, valid while lent_valid */
    bool lent_valid;               /* cleared (under the relay's lock) when that submit returns */
    volatile int cancelled;        /* the relay's cancel flag: the lent flag as last seen */
    bt_waiter *waiters;            /* asynchronous submitters to call back on completion */
    bool owner_runs;               /* thread broker: its blocking submitter runs it when granted */
    bool run_here;                 /* thread broker: its asynchronous submitter runs it if granted
                                    * within its submit (sbx_broker_async.run_here) */
    uint32_t granted;              /* thread broker: futex word, 1 once the owner may run it */
    bool async_owner;              /* created by submit_async: its creator waits in waiters */
    int64_t started_at_ms;
    /* BT_DONE: the completion, packed (bt_done_prepare). One buffer instead of a tree of a dozen
     * allocations: keeping it costs no deep copy and evicting it one free, and each reader gets
     * its own tree (bt_completion). NULL: no memory to keep it (readers get an error). */
    uint8_t *packed;
    size_t packed_len;
    size_t lru_bytes; /* charged to the store while in the LRU (bt_done_prepare, set before
                       * bt_complete) */
    uint8_t digest[SBX_REQUEST_DIGEST_LEN]; /* of the request that created the entry */
    const char *id;                         /* the task_id (points into key) */
    char key[];                             /* subject NUL task_id NUL */
} bt_task;

typedef struct bt_store {
    pthread_mutex_t mu;
    sbx_table tasks;
    sbx_link *task_buckets[BT_BUCKETS];
    bt_task *lru_head, *lru_tail;
    size_t n_done, lru_max;
    sbx_table owners; /* principals with done entries, by subject */
    sbx_link *owner_buckets[BT_BUCKETS];
    size_t n_owners;
    size_t lru_bytes; /* of the done entries in the LRU, at most BT_LRU_BYTES_MAX */
    int spinners;     /* waiters spinning now (atomic; never more than BT_MAX_SPINNERS) */
} bt_store;

void bt_store_init(bt_store *s, size_t lru_max);
/* Frees every task (no waiter may remain). */
void bt_store_destroy(bt_store *s);

/* The entry of (subject, task_id), or NULL. */
bt_task *bt_find(bt_store *s, const char *subject, const char *task_id);
/* A new BT_QUEUED entry for (subject, task_id) (not yet present) made by the request with this
 * digest. NULL on ENOMEM. */
/* A task for (subject, task_id) with its request's digest, in no table yet: made before the
 * store's lock is taken (it allocates), entered with bt_insert_task (s->mu held), or freed with
 * bt_task_unused when it was not needed. NULL on ENOMEM. */
bt_task *bt_task_new(const char *subject, const char *task_id,
                     const uint8_t digest[SBX_REQUEST_DIGEST_LEN]);
void bt_insert_task(bt_store *s, bt_task *t);
void bt_task_unused(bt_task *t);
bt_task *bt_insert(bt_store *s, const char *subject, const char *task_id,
                   const uint8_t digest[SBX_REQUEST_DIGEST_LEN]);
/* Whether t was made by a request with this digest (a retry) rather than another request
 * under a reused task_id. */
bool bt_same_request(const bt_task *t, const uint8_t digest[SBX_REQUEST_DIGEST_LEN]);
/* The refusal for a task_id that subject reused with a different request (caller frees). */
sbx_completion *bt_conflict(const char *subject, const char *task_id);
/* Packs c into t (t->packed) and sets what t's entry will cost the LRU (the packed completion
 * and the packed size of its request copy): done before the lock is taken, without s->mu, by
 * the one thread that ran t. c stays the caller's. */
void bt_done_prepare(bt_task *t, const sbx_completion *c);
/* Publishes t's completion (bt_done_prepare): BT_DONE, wakes waiters, enters the LRU (evicting
 * the oldest) or is freed when discarded. Returns the task's asynchronous waiters, each holding
 * its own completion: the caller hands them over with bt_fire once it has released s->mu. give
 * (may be NULL) is a completion the caller gives away: the first waiter takes it (*give is then
 * NULL), so the common single waiter costs no copy under the lock; the others get their own
 * (bt_completion). Tasks this frees are put on *dead (may be NULL: freed at once) for
 * bt_free_dead after the lock is released. */
bt_waiter *bt_complete(bt_store *s, bt_task *t, sbx_completion **give, bt_task **dead);
/* A completion of its own for a reader of done task t (unpacked from t->packed); when memory
 * ran out, a failure saying so (NULL only when even that could not be made). */
sbx_completion *bt_completion(const bt_task *t);
/* True when c ended its task because the caller went away (the hooks' cancel flag is set and c
 * did not succeed): an answer nobody asked for, which the brokers give to those waiting now but
 * do not keep for the task id (they mark the task discarded before bt_complete), so a retry --
 * the remote broker resends after the broken connection that cancelled it -- runs anew. */
bool bt_abandoned(const sbx_engine_hooks *hooks, const sbx_completion *c);
/* Frees the tasks bt_complete put on a dead list (without s->mu). */
void bt_free_dead(bt_task *dead);
/* Adds an asynchronous waiter to a task that is not done; false on ENOMEM. */
bool bt_add_waiter(bt_task *t, sbx_broker_done_fn on_done, void *arg);
/* Calls back every waiter of the list (never with s->mu held) and frees the list. */
void bt_fire(bt_waiter *list);
/* Drops a reference taken with t->refs++; frees t when it was the last and t left the table. */
void bt_release(bt_task *t);
/* Waits up to wait_ms (SBX_WAIT_FOREVER: no limit) for t; *out = a copy of its completion, or
 * NULL when still pending. Releases and re-takes s->mu while sleeping. */
void bt_wait(bt_store *s, bt_task *t, int64_t wait_ms, sbx_completion **out);
/* Forgets (subject, task_id): a done entry is freed; a pending one drops its completion on
 * arrival. */
void bt_discard(bt_store *s, const char *subject, const char *task_id);

#endif
