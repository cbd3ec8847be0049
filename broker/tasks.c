/* tasks.c - the in-process brokers' task table and completion LRU (see tasks.h). */
#include "core/clock.h"
#include "broker/tasks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "sbx/broker.h"

void bt_store_init(bt_store *s, size_t lru_max)
{
    memset(s, 0, sizeof(*s));
    /* Adaptive: the critical sections are a few hundred nanoseconds, so a short spin beats
     * sleeping in the kernel when executors and callers collide. */
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&s->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    sbx_table_init(&s->tasks, s->task_buckets, BT_BUCKETS);
    sbx_table_init(&s->owners, s->owner_buckets, BT_BUCKETS);
    s->lru_max = lru_max > 0 ? lru_max : 1;
}

static void task_free(bt_task *t)
{
    for (bt_waiter *w = t->waiters, *next; w != NULL; w = next) {
        next = w->next;
        free(w);
    }
    pthread_cond_destroy(&t->done);
    sbx_request_free(t->req_owned);
    free(t->packed);
    free(t);
}

void bt_store_destroy(bt_store *s)
{
    SBX_TABLE_EACH(&s->owners, l)
    {
        free(SBX_ENTRY(l, bt_owner, link));
    }
    SBX_TABLE_EACH(&s->tasks, l)
    {
        task_free(SBX_ENTRY(l, bt_task, link));
    }
    pthread_mutex_destroy(&s->mu);
}

bt_task *bt_find(bt_store *s, const char *subject, const char *task_id)
{
    uint64_t h = sbx_hash_pair(subject, task_id);
    for (sbx_link *l = sbx_table_first(&s->tasks, h); l != NULL; l = l->next) {
        bt_task *t = SBX_ENTRY(l, bt_task, link);
        if (l->hash == h && strcmp(t->key, subject) == 0 && strcmp(t->id, task_id) == 0)
            return t;
    }
    return NULL;
}

bt_task *bt_task_new(const char *subject, const char *task_id,
                     const uint8_t digest[SBX_REQUEST_DIGEST_LEN])
{
    size_t slen = strlen(subject), len = strlen(task_id);
    bt_task *t = calloc(1, sizeof(*t) + slen + 1 + len + 1);
    if (t == NULL)
        return NULL;
    memcpy(t->key, subject, slen + 1);
    memcpy(t->key + slen + 1, task_id, len + 1);
    t->id = t->key + slen + 1;
    memcpy(t->digest, digest, SBX_REQUEST_DIGEST_LEN);
    sbx_cond_init_mono(&t->done);
    t->link.hash = sbx_hash_pair(subject, task_id);
    __atomic_store_n(&t->state, BT_QUEUED, __ATOMIC_RELEASE);
    return t;
}

void bt_insert_task(bt_store *s, bt_task *t)
{
    t->in_table = true;
    sbx_table_add(&s->tasks, &t->link, t->link.hash);
}

void bt_task_unused(bt_task *t)
{
    if (t != NULL)
        task_free(t);
}

bt_task *bt_insert(bt_store *s, const char *subject, const char *task_id,
                   const uint8_t digest[SBX_REQUEST_DIGEST_LEN])
{
    bt_task *t = bt_task_new(subject, task_id, digest);
    if (t != NULL)
        bt_insert_task(s, t);
    return t;
}

static void unlink_table(bt_store *s, bt_task *t)
{
    if (!t->in_table)
        return;
    sbx_table_del(&s->tasks, &t->link);
    t->in_table = false;
}

/* The owner record of subject, made if missing (NULL on ENOMEM). */
static bt_owner *owner_get(bt_store *s, const char *subject)
{
    uint64_t h = sbx_hash_str(subject);
    for (sbx_link *l = sbx_table_first(&s->owners, h); l != NULL; l = l->next) {
        bt_owner *o = SBX_ENTRY(l, bt_owner, link);
        if (l->hash == h && strcmp(o->subject, subject) == 0)
            return o;
    }
    size_t len = strlen(subject);
    bt_owner *o = calloc(1, sizeof(*o) + len + 1);
    if (o == NULL)
        return NULL;
    memcpy(o->subject, subject, len + 1);
    sbx_table_add(&s->owners, &o->link, h);
    s->n_owners++;
    return o;
}

/* Takes t off its owner's list; forgets an owner left with none. */
static void owner_unlink(bt_store *s, bt_task *t)
{
    bt_owner *o = t->owner;
    if (o == NULL)
        return;
    if (t->own_prev != NULL)
        t->own_prev->own_next = t->own_next;
    else
        o->head = t->own_next;
    if (t->own_next != NULL)
        t->own_next->own_prev = t->own_prev;
    else
        o->tail = t->own_prev;
    t->own_prev = t->own_next = NULL;
    t->owner = NULL;
    o->n_done--;
    o->bytes -= t->lru_bytes;
    if (o->n_done > 0)
        return;
    sbx_table_del(&s->owners, &o->link);
    free(o);
    s->n_owners--;
}

/* Whether o holds more than its fair share: the bounds over the principals holding entries
 * (at least one entry each, so more principals than lru_max entries share by age). */
static bool over_share(const bt_store *s, const bt_owner *o)
{
    size_t n = s->n_owners > 0 ? s->n_owners : 1;
    size_t count_share = s->lru_max / n > 0 ? s->lru_max / n : 1;
    return o->n_done > count_share || o->bytes > BT_LRU_BYTES_MAX / n;
}

/* The entry to evict from a store over its bounds after `last` entered it: the oldest of
 * last's owner when that owner is over its fair share, else the oldest entry whose owner is,
 * else the oldest; never `last` itself while another entry is there (a retry of the task
 * that just ended must find it). */
static bt_task *eviction_victim(bt_store *s, const bt_task *last)
{
    if (last->owner != NULL && over_share(s, last->owner) && last->owner->head != last)
        return last->owner->head;
    for (bt_task *t = s->lru_head; t != NULL; t = t->lru_next)
        if (t != last && t->owner != NULL && over_share(s, t->owner))
            return t;
    return s->lru_head; /* last is the newest: the head only when it is alone */
}

static void unlink_lru(bt_store *s, bt_task *t)
{
    if (t->lru_prev != NULL)
        t->lru_prev->lru_next = t->lru_next;
    else if (s->lru_head == t)
        s->lru_head = t->lru_next;
    else
        return; /* not in the LRU */
    if (t->lru_next != NULL)
        t->lru_next->lru_prev = t->lru_prev;
    else
        s->lru_tail = t->lru_prev;
    t->lru_prev = t->lru_next = NULL;
    owner_unlink(s, t);
    s->n_done--;
    s->lru_bytes -= t->lru_bytes;
    t->lru_bytes = 0;
}

/* Removes t from everything; frees it unless a waiter still holds it (the last one frees).
 * With dead, an unreferenced t is put there for the caller to free once it released s->mu. */
static void drop(bt_store *s, bt_task *t, bt_task **dead)
{
    unlink_table(s, t);
    unlink_lru(s, t);
    if (t->refs != 0)
        return;
    if (dead == NULL) {
        task_free(t);
        return;
    }
    t->link.next = *dead != NULL ? &(*dead)->link : NULL;
    *dead = t;
}

bool bt_abandoned(const sbx_engine_hooks *hooks, const sbx_completion *c)
{
    return hooks != NULL && hooks->cancel != NULL && *hooks->cancel && c != NULL &&
           c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
}

void bt_free_dead(bt_task *dead)
{
    while (dead != NULL) {
        bt_task *next = dead->link.next != NULL ? SBX_ENTRY(dead->link.next, bt_task, link) : NULL;
        task_free(dead);
        dead = next;
    }
}

bool bt_add_waiter(bt_task *t, sbx_broker_done_fn on_done, void *arg)
{
    bt_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return false;
    w->on_done = on_done;
    w->arg = arg;
    w->next = t->waiters;
    t->waiters = w;
    return true;
}

void bt_fire(bt_waiter *list)
{
    while (list != NULL) {
        bt_waiter *next = list->next;
        sbx_completion *c = list->c;
        if (c == NULL)
            c = sbx_completion_fail("", SBX_E_INTERNAL, "out of memory copying a completion");
        list->on_done(list->arg, SBX_OK, c);
        free(list);
        list = next;
    }
}

void bt_release(bt_task *t)
{
    t->refs--;
    if (t->refs == 0 && !t->in_table)
        task_free(t);
}

void bt_done_prepare(bt_task *t, const sbx_completion *c)
{
    size_t len = c != NULL ? protobuf_c_message_get_packed_size(&c->base) : 0;
    t->packed = c != NULL ? malloc(len > 0 ? len : 1) : NULL;
    t->packed_len = t->packed != NULL ? protobuf_c_message_pack(&c->base, t->packed) : 0;
    t->lru_bytes =
        t->packed_len +
        (t->req_owned != NULL ? protobuf_c_message_get_packed_size(&t->req_owned->base) : 0);
}

sbx_completion *bt_completion(const bt_task *t)
{
    sbx_completion *c = t->packed != NULL
                            ? sbx__v1__execution_completion__unpack(NULL, t->packed_len, t->packed)
                            : NULL;
    return c != NULL ? c
                     : sbx_completion_fail(t->id, SBX_E_INTERNAL,
                                           "out of memory copying the task's completion");
}

bt_waiter *bt_complete(bt_store *s, bt_task *t, sbx_completion **give, bt_task **dead)
{
    bt_waiter *fire = t->waiters;
    t->waiters = NULL;
    for (bt_waiter *w = fire; w != NULL; w = w->next) {
        if (give != NULL && *give != NULL) {
            w->c = *give;
            *give = NULL;
            continue;
        }
        w->c = bt_completion(t);
    }
    __atomic_store_n(&t->state, BT_DONE, __ATOMIC_RELEASE);
    t->hooks = NULL;
    /* The borrowed request belonged to a submitter that is returning now. */
    t->req = t->req_owned;
    pthread_cond_broadcast(&t->done);
    bt_owner *o = t->discarded || t->packed == NULL ? NULL : owner_get(s, t->key);
    if (o == NULL) { /* discarded, or no memory to keep or account for it: not kept */
        drop(s, t, dead);
        return fire;
    }
    t->lru_prev = s->lru_tail;
    t->lru_next = NULL;
    if (s->lru_tail != NULL)
        s->lru_tail->lru_next = t;
    else
        s->lru_head = t;
    s->lru_tail = t;
    s->n_done++;
    s->lru_bytes += t->lru_bytes;
    t->owner = o;
    t->own_prev = o->tail;
    if (o->tail != NULL)
        o->tail->own_next = t;
    else
        o->head = t;
    o->tail = t;
    o->n_done++;
    o->bytes += t->lru_bytes;
    while (s->n_done > s->lru_max || s->lru_bytes > BT_LRU_BYTES_MAX)
        drop(s, eviction_victim(s, t), dead);
    return fire;
}

void bt_wait(bt_store *s, bt_task *t, int64_t wait_ms, sbx_completion **out)
{
    *out = NULL;
    t->refs++;
    /* Spin a little before sleeping: a fast operation finishes within microseconds, while a
     * sleeping waiter costs a cross-core wake-up (tens of microseconds on an idle VM). Bounded
     * by BT_SPIN_US and by the caller's own wait; t cannot be freed meanwhile (refs). */
    if (wait_ms != 0 && t->state != BT_DONE &&
        __atomic_add_fetch(&s->spinners, 1, __ATOMIC_ACQ_REL) > BT_MAX_SPINNERS) {
        __atomic_sub_fetch(&s->spinners, 1, __ATOMIC_ACQ_REL);
    } else if (wait_ms != 0 && t->state != BT_DONE) {
        int64_t spin_us = wait_ms == SBX_WAIT_FOREVER || wait_ms * 1000 > BT_SPIN_US
                              ? BT_SPIN_US
                              : wait_ms * 1000;
        int64_t until = sbx_monotonic_us() + spin_us;
        pthread_mutex_unlock(&s->mu);
        while (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != BT_DONE &&
               sbx_monotonic_us() < until)
            __asm__ __volatile__("" ::: "memory");
        __atomic_sub_fetch(&s->spinners, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_lock(&s->mu);
    }
    if (wait_ms == SBX_WAIT_FOREVER) {
        while (t->state != BT_DONE)
            pthread_cond_wait(&t->done, &s->mu);
    } else if (wait_ms > 0 && t->state != BT_DONE) {
        struct timespec until = sbx_mono_after_ms(wait_ms);
        while (t->state != BT_DONE)
            if (pthread_cond_timedwait(&t->done, &s->mu, &until) == ETIMEDOUT)
                break;
    }
    if (t->state == BT_DONE)
        *out = bt_completion(t);
    t->refs--;
    if (t->refs == 0 && !t->in_table)
        task_free(t);
}

bool bt_same_request(const bt_task *t, const uint8_t digest[SBX_REQUEST_DIGEST_LEN])
{
    return memcmp(t->digest, digest, SBX_REQUEST_DIGEST_LEN) == 0;
}

sbx_completion *bt_conflict(const char *subject, const char *task_id)
{
    return sbx_completion_fail(task_id, SBX_E_INVALID_ARGUMENT,
                               "task_id '%s' was already used by principal '%s' for a different "
                               "request; a retry must resend the identical request, and new work "
                               "needs a new task_id",
                               task_id, subject[0] != '\0' ? subject : "(none)");
}

void bt_discard(bt_store *s, const char *subject, const char *task_id)
{
    bt_task *t = bt_find(s, subject, task_id);
    if (t == NULL)
        return;
    if (t->state == BT_DONE)
        drop(s, t, NULL);
    else
        t->discarded = true;
}
