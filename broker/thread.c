/* thread.c - the thread broker (DESIGN §6): N executor slots and a bounded queue in the
 * caller's process. submit_async() queues a task and an executor thread runs it and calls back
 * (the worker's path); submit() is the same queue and slots, waiting up to wait_ms and
 * otherwise leaving the task pending for result(). A full queue is RESOURCE_EXHAUSTED, never an
 * unbounded pile-up; close() drains.
 *
 * A submit() that waits forever runs its own task on its own thread once the task is granted a
 * slot (at once when one is free): the thread that wants the answer does the work, so a
 * blocking call costs at most one wake-up instead of two (caller -> executor -> caller), while
 * at most N requests still run at once and at most queue_depth wait.
 *
 * One session's requests run one at a time and in order: a request whose session is busy waits
 * in that session's backlog instead of occupying an executor (which would block on the engine's
 * session lock while other sessions starve). Different sessions run in parallel. A task_id seen
 * again by the same principal joins the existing task (queued, running or done) instead of
 * running twice; reused with a different request it is refused (tasks.h).
 * Principals share the queue fairly: one may hold all but a quarter of queue_depth (the rest
 * is kept for others), and free slots go round-robin over the principals with ready tasks, so
 * one principal's backlog never stands between another's request and the next free slot. One
 * principal's tasks hold at most principal_threads slots at once (default all but a quarter of
 * threads), so a principal whose commands run for minutes cannot take every slot either.
 * Executor threads start on demand, up to N: none at open (a process whose callers all wait
 * runs every task on the callers' threads), the first with the first task nobody waits for.
 * Locking: everything below is guarded by store.mu; executors run requests without it.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "broker/tasks.h"
#include "core/hash.h"
#include "core/table.h"
#include "broker/broker_impl.h"

/* Most executor threads: beyond this, threads cost memory and context switches while providers
 * wait on I/O; scale out with more workers instead. */
#define THREAD_BROKER_MAX_THREADS 1024
/* Largest queue: bounds memory held by accepted, not yet running requests. */
#define THREAD_BROKER_MAX_QUEUE (1 << 20)
/* Largest completion LRU accepted from configuration. */
#define THREAD_BROKER_MAX_LRU (1 << 20)
/* Session backlog buckets: a power of two above the concurrent sessions of one worker. */
#define SESSION_BUCKETS 1024
/* Blocking owners granted a slot under the lock and woken after it is released (more in one
 * critical section are woken at once, under it). One task's completion grants one slot, so
 * this is rarely more than one. */
#define WAKE_MAX 8

/* Principal buckets: a power of two above the principals one worker serves at once. */
#define TENANT_BUCKETS 256

/* A principal with accepted tasks not yet granted a slot, or with tasks running: its share of
 * the queue, its ready tasks and its slots. Slots go round-robin over the principals with ready
 * tasks (the ring), oldest first within each, so one principal's backlog delays another's task
 * by at most one task per principal ahead of it, never by the whole backlog; and one principal
 * holds at most principal_slots at once, so its long commands cannot take every slot from the
 * others. Freed when it has nothing queued or running. */
typedef struct tb_tenant {
    sbx_link link;           /* in thread_broker.tenants, by subject */
    struct tb_tenant *rnext; /* the ring of principals with ready tasks */
    int queued;        /* its tasks accepted, not yet granted a slot (ready + session backlogs) */
    int running;       /* its tasks granted a slot, not yet finished */
    int ready_cancels; /* CancelCommands among its ready tasks (may pass its share) */
    bool in_ring;
    bt_task *ready_head, *ready_tail; /* may run, waiting for a slot */
    char subject[];
} tb_tenant;

/* A session with work queued or running. Freed when idle (nothing running, empty backlog). */
typedef struct bt_session {
    sbx_link link; /* in thread_broker.sessions, by key */
    bool busy;     /* one of its tasks is in the ready queue or running */
    bt_task *backlog_head, *backlog_tail;
    char id[];
} bt_session;

/* An executor asleep for want of work, on its own futex word (not a condition variable of
 * store.mu, as the owners below, and for the same reason: glibc's pthread_cond_wait takes the
 * mutex back marked contended, so every wake-up cost an extra FUTEX_WAKE at the next unlock,
 * and the signal a third syscall). Lives on the executor's stack; off the list once woken. */
typedef struct tb_park {
    struct tb_park *next;
    uint32_t woken; /* 0 asleep, 1 taken off the list by a waker */
} tb_park;

typedef struct thread_broker {
    sbx_broker *self;                 /* wrapper, for recording */
    sbx_engine *engine;               /* borrowed */
    bt_store store;                   /* its mu guards every field below */
    pthread_cond_t idle;              /* queued + running reached zero */
    tb_tenant *ring_head, *ring_tail; /* principals with ready tasks, next to be granted first */
    sbx_table tenants;
    sbx_link *tenant_buckets[TENANT_BUCKETS];
    bt_task *exec_head, *exec_tail; /* granted a slot, waiting for an executor thread */
    sbx_table sessions;
    sbx_link *session_buckets[SESSION_BUCKETS];
    int queued;  /* accepted, not yet granted a slot (ready + backlogs) */
    int running; /* granted a slot: running on an executor or on its blocking submitter */
    int slots;   /* the configured threads: at most this many requests run at once */
    int queue_depth;
    int queue_share;     /* the most one principal may hold of queue_depth (tenant_share) */
    int principal_slots; /* the most slots one principal's tasks hold at once */
    bool closing;
    pthread_t *threads; /* slots long; the first n_threads are started */
    int n_threads;
    int busy_threads;         /* executors running a task */
    int exec_waiting;         /* tasks in the exec queue */
    uint32_t *wake[WAKE_MAX]; /* granted owners' futex words, to wake once mu is released */
    int n_wake;
    tb_park *parked; /* executors asleep, none of them woken yet */
} thread_broker;

static void *executor(void *arg);

/* Granting a blocking owner its slot happens under store.mu; waking it there would make it
 * wake only to block on that mutex (two context switches where one will do, the cost that
 * dominated 64 blocking callers). So the owner sleeps on its task's futex word, not on a
 * condition variable of the mutex, and is woken after the unlock. A FUTEX_WAKE that arrives
 * after the owner already saw the word change (and even freed the task) wakes nobody: owners
 * loop on the word, never on the wake. */
static void futex_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void grant_owner(thread_broker *tb, bt_task *t)
{
    __atomic_store_n(&t->granted, 1, __ATOMIC_RELEASE);
    if (tb->n_wake < WAKE_MAX)
        tb->wake[tb->n_wake++] = &t->granted;
    else
        futex_wake(&t->granted);
}

/* Takes word off the wake-ups due at the next unlock (store.mu held): a blocking submitter
 * granted its slot within its own critical section needs no FUTEX_WAKE of its own (one syscall
 * per request, for every caller that finds a slot free). */
static void unwake(thread_broker *tb, const uint32_t *word)
{
    for (int i = 0; i < tb->n_wake; i++)
        if (tb->wake[i] == word) {
            tb->wake[i] = tb->wake[--tb->n_wake];
            return;
        }
}

/* Wakes one sleeping executor, if any, for a task put in the exec queue (store.mu held). None
 * asleep: every executor is running a task or about to look at the queue, and takes it then. */
static void wake_executor(thread_broker *tb)
{
    tb_park *p = tb->parked;
    if (p == NULL)
        return;
    tb->parked = p->next;
    __atomic_store_n(&p->woken, 1, __ATOMIC_RELEASE);
    if (tb->n_wake < WAKE_MAX)
        tb->wake[tb->n_wake++] = &p->woken;
    else
        futex_wake(&p->woken);
}

/* pthread_mutex_unlock(&tb->store.mu), then the owners granted and the executors given work
 * meanwhile are woken. */
static void unlock_wake(thread_broker *tb)
{
    uint32_t *wake[WAKE_MAX];
    int n = tb->n_wake;
    memcpy(wake, tb->wake, (size_t)n * sizeof(wake[0]));
    tb->n_wake = 0;
    pthread_mutex_unlock(&tb->store.mu);
    for (int i = 0; i < n; i++)
        futex_wake(wake[i]);
}

/* Before sleeping (on a condition of store.mu, or parked): nobody granted may wait for our
 * wake-up. */
static void wake_pending(thread_broker *tb)
{
    if (tb->n_wake > 0) {
        unlock_wake(tb);
        pthread_mutex_lock(&tb->store.mu);
    }
}

/* One more executor when the exec queue holds more tasks than the executors not running one can
 * take (store.mu held; a thread just made counts as free before it first waits). Executors start on
 * demand, not all at open: a process that only ever submits and waits (the CLI: its own thread runs
 * its task) would pay for N idle threads it never uses. When the thread cannot be made, the task
 * waits for one of those already running (first_executor made one). */
static void grow(thread_broker *tb)
{
    if (tb->exec_waiting <= tb->n_threads - tb->busy_threads || tb->n_threads >= tb->slots)
        return;
    if (pthread_create(&tb->threads[tb->n_threads], NULL, executor, tb) == 0)
        tb->n_threads++;
}

/* A task no blocking owner will run needs an executor thread; the first is made here, when such
 * a task arrives (store.mu held). false: not even one can be made, and the submit is answered
 * RESOURCE_EXHAUSTED at once (never a task queued with nobody to run it). */
static bool first_executor(thread_broker *tb, const char *id, sbx_completion **answer,
                           sbx_status *st)
{
    if (tb->n_threads > 0 || tb->closing)
        return true;
    int rc = pthread_create(&tb->threads[0], NULL, executor, tb);
    if (rc == 0) {
        tb->n_threads = 1;
        return true;
    }
    *st = SBX_E_RESOURCE_EXHAUSTED;
    *answer = sbx_completion_fail(id, *st,
                                  "the thread broker cannot start an executor thread (%s); "
                                  "retry later, or lower the process's thread count",
                                  strerror(rc));
    return false;
}

/* What a submit allocates before it takes store.mu: its task and, for a request that queues
 * behind its session, an entry for the session (used when the session has none yet). tb_accept
 * takes what it uses; tb_prep_free frees the rest, unlocked. */
typedef struct tb_prep {
    bt_task *task;       /* NULL: out of memory */
    bt_session *session; /* NULL: out of memory, or no session */
    const char *sid;     /* the session id the request queues behind, or NULL */
    uint64_t shash;
    char skey[SBX_SCOPED_KEY_MAX]; /* one queue per session of a principal: ids are the caller's */
} tb_prep;

static void tb_prepare(const sbx_request *req, const char *subject, const char *id,
                       const uint8_t digest[SBX_REQUEST_DIGEST_LEN], tb_prep *p)
{
    p->task = bt_task_new(subject, id, digest);
    /* Attach and cancel follow a command that runs while the session serves other requests
     * (a cancel must reach a command an attach follows): never queued behind the session. */
    bool follows = req->op_case == SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND ||
                   req->op_case == SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND;
    const char *sid = req->session != NULL && !follows ? req->session->session_id : NULL;
    p->sid = sid != NULL && sid[0] != '\0' ? sid : NULL;
    p->session = NULL;
    if (p->sid == NULL)
        return;
    sbx_scoped_key(p->skey, subject, p->sid);
    p->shash = sbx_hash_str(p->skey);
    size_t len = strlen(p->skey);
    p->session = calloc(1, sizeof(*p->session) + len + 1);
    if (p->session != NULL) {
        memcpy(p->session->id, p->skey, len + 1);
    }
}

static void tb_prep_free(tb_prep *p)
{
    bt_task_unused(p->task);
    free(p->session);
}

/* The entry of p's session (store.mu held): the one there, or p's, entered now; NULL on ENOMEM. */
static bt_session *session_get(thread_broker *tb, tb_prep *p)
{
    for (sbx_link *l = sbx_table_first(&tb->sessions, p->shash); l != NULL; l = l->next) {
        bt_session *s = SBX_ENTRY(l, bt_session, link);
        if (l->hash == p->shash && strcmp(s->id, p->skey) == 0)
            return s;
    }
    bt_session *s = p->session;
    if (s == NULL)
        return NULL;
    p->session = NULL;
    sbx_table_add(&tb->sessions, &s->link, p->shash);
    return s;
}

static void session_release(thread_broker *tb, bt_session *s)
{
    sbx_table_del(&tb->sessions, &s->link);
    free(s);
}

/* The most one principal may hold of a queue of depth places, or of depth threads: all but a
 * quarter, so others always find room while one floods it (under 4 reserves nothing). */
static int tenant_share(int depth)
{
    return depth - depth / 4;
}

/* subject's record, made when absent (NULL on ENOMEM). */
static tb_tenant *tenant_get(thread_broker *tb, const char *subject)
{
    uint64_t h = sbx_hash_str(subject);
    for (sbx_link *l = sbx_table_first(&tb->tenants, h); l != NULL; l = l->next) {
        tb_tenant *p = SBX_ENTRY(l, tb_tenant, link);
        if (l->hash == h && strcmp(p->subject, subject) == 0)
            return p;
    }
    size_t len = strlen(subject);
    tb_tenant *p = calloc(1, sizeof(*p) + len + 1);
    if (p == NULL)
        return NULL;
    memcpy(p->subject, subject, len + 1);
    sbx_table_add(&tb->tenants, &p->link, h);
    return p;
}

/* Forgets p once it holds nothing queued (then nothing ready either) and nothing running. */
static void tenant_tidy(thread_broker *tb, tb_tenant *p)
{
    if (p->queued > 0 || p->in_ring || p->running > 0)
        return;
    sbx_table_del(&tb->tenants, &p->link);
    free(p);
}

static void ring_append(thread_broker *tb, tb_tenant *p)
{
    p->rnext = NULL;
    p->in_ring = true;
    if (tb->ring_tail != NULL)
        tb->ring_tail->rnext = p;
    else
        tb->ring_head = p;
    tb->ring_tail = p;
}

/* A CancelCommand: quick, and what ends the long commands (followed by attaches) that may hold
 * its principal's share; so it may take a free slot past that share (ready_pop). */
static bool is_cancel(const bt_task *t)
{
    return t->req->op_case == SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND;
}

/* t may run: behind its principal's other ready tasks, its principal in the ring. */
static void ready_push(thread_broker *tb, bt_task *t)
{
    tb_tenant *p = t->tenant;
    t->qnext = NULL;
    p->ready_cancels += is_cancel(t);
    if (p->ready_tail != NULL)
        p->ready_tail->qnext = t;
    else
        p->ready_head = t;
    p->ready_tail = t;
    if (!p->in_ring)
        ring_append(tb, p);
}

/* Takes p's oldest ready CancelCommand out of its ready tasks (p->ready_cancels > 0). */
static bt_task *take_cancel(tb_tenant *p)
{
    bt_task **pp = &p->ready_head, *prev = NULL;
    while (!is_cancel(*pp)) {
        prev = *pp;
        pp = &(*pp)->qnext;
    }
    bt_task *t = *pp;
    *pp = t->qnext;
    if (p->ready_tail == t)
        p->ready_tail = prev;
    return t;
}

/* The next task to grant a slot: the oldest ready task of the principal at the ring's head,
 * which then goes to the ring's tail if it has more (round-robin). A principal already holding
 * its principal_slots leaves the ring until one of its tasks ends (task_ended), except for its
 * CancelCommands, which pass its other tasks and its share: the commands its share is spent on
 * (attaches following them, for minutes) may be the very ones they end. NULL: none ready, or
 * only those of principals at their share. The task keeps its tenant while it runs. */
static bt_task *ready_pop(thread_broker *tb)
{
    tb_tenant *p;
    bool past_share = false;
    while ((p = tb->ring_head) != NULL) {
        tb->ring_head = p->rnext;
        if (tb->ring_head == NULL)
            tb->ring_tail = NULL;
        p->in_ring = false;
        past_share = p->running >= tb->principal_slots;
        if (!past_share || p->ready_cancels > 0)
            break;
    }
    if (p == NULL)
        return NULL;
    bt_task *t = past_share ? take_cancel(p) : p->ready_head;
    if (!past_share) {
        p->ready_head = t->qnext;
        if (p->ready_head == NULL)
            p->ready_tail = NULL;
    }
    t->qnext = NULL;
    p->ready_cancels -= is_cancel(t);
    if (p->ready_head != NULL && (!past_share || p->ready_cancels > 0))
        ring_append(tb, p);
    p->queued--;
    p->running++;
    return t;
}

/* t, granted a slot by ready_pop, ended (store.mu held): its principal's ready tasks may have a
 * slot again. */
static void task_ended(thread_broker *tb, bt_task *t)
{
    tb_tenant *p = t->tenant;
    if (p == NULL)
        return;
    t->tenant = NULL;
    p->running--;
    if (p->ready_head != NULL && !p->in_ring)
        ring_append(tb, p);
    tenant_tidy(tb, p);
}

/* Grants free slots to ready tasks, round-robin over their principals (ready_pop). A task whose
 * blocking submitter waits for it is run by that submitter: one wake-up, of the thread that wants
 * the answer anyway (none when a slot is free at submit). Any other task goes to an executor
 * thread. */
static void dispatch(thread_broker *tb)
{
    bt_task *t;
    while (tb->running < tb->slots && (t = ready_pop(tb)) != NULL) {
        tb->queued--;
        tb->running++;
        __atomic_store_n(&t->state, BT_RUNNING, __ATOMIC_RELEASE);
        if (t->owner_runs) {
            grant_owner(tb, t);
            continue;
        }
        if (t->run_here)
            continue; /* its submitter, awake, runs it once its enqueue returns */
        if (tb->exec_tail != NULL)
            tb->exec_tail->qnext = t;
        else
            tb->exec_head = t;
        tb->exec_tail = t;
        tb->exec_waiting++;
        grow(tb);
        wake_executor(tb); /* after the unlock, like the owners' wake-ups */
    }
}

/* Queues t (its tenant set by tb_accept): to its principal's ready tasks, or behind its
 * session's running task; then grants slots. */
static void enqueue(thread_broker *tb, bt_task *t)
{
    tb->queued++;
    t->tenant->queued++;
    bt_session *s = t->session;
    if (s != NULL && s->busy) {
        t->qnext = NULL;
        if (s->backlog_tail != NULL)
            s->backlog_tail->qnext = t;
        else
            s->backlog_head = t;
        s->backlog_tail = t;
        return;
    }
    if (s != NULL)
        s->busy = true;
    ready_push(tb, t);
    dispatch(tb);
}

/* The session's running task finished: its next one becomes ready, or the idle session is
 * forgotten. */
static void session_done(thread_broker *tb, bt_session *s)
{
    if (s == NULL)
        return;
    bt_task *next = s->backlog_head;
    if (next != NULL) {
        s->backlog_head = next->qnext;
        if (s->backlog_head == NULL)
            s->backlog_tail = NULL;
        ready_push(tb, next);
        return;
    }
    session_release(tb, s);
}

/* The asynchronous creator of t went away and c, its cancellation, is all it gets; a joiner
 * still waiting (a retry from a client that reconnected after the broken connection that
 * cancelled the creator) would get the same cancellation for a request it still wants. The
 * first such joiner becomes the creator, with its own request (the same, by digest) and hooks,
 * and its caller runs t again on this slot. false: no joiner waits for t. */
static bool hand_over(thread_broker *tb, bt_task *t, const sbx_completion *c)
{
    pthread_mutex_lock(&tb->store.mu);
    bt_waiter *heir = NULL;
    for (bt_waiter *w = t->waiters; w != NULL && heir == NULL; w = w->next)
        if (!w->creator && w->req != NULL && (w->cancel == NULL || !*w->cancel))
            heir = w;
    bt_waiter *gone = NULL;
    if (heir != NULL) {
        for (bt_waiter **pp = &t->waiters; *pp != NULL;) {
            bt_waiter *w = *pp;
            if (!w->creator) {
                pp = &w->next;
                continue;
            }
            *pp = w->next;
            w->next = gone;
            gone = w;
        }
        heir->creator = true;
        t->req = heir->req; /* before the creator's on_done ends the loan of its own */
        t->own_hooks.on_output = heir->on_output;
        t->own_hooks.on_output_arg = heir->arg;
        t->own_hooks.cancel = heir->cancel;
        t->started_at_ms = sbx_broker_record_start(tb->self);
    }
    unlock_wake(tb);
    for (bt_waiter *w = gone; w != NULL; w = w->next)
        w->c = sbx_completion_copy(c);
    bt_fire(gone);
    return heir != NULL;
}

/* Runs a granted task (an executor's or its owner's) and publishes its completion. locked:
 * called with store.mu held, and returns with it held (released while the engine runs and while
 * waiters are called back); t may be freed on return unless the caller holds a reference; the
 * completion goes to one of t's asynchronous waiters, and is returned (for the caller to free)
 * when there is none. Otherwise called without it by an owner whose reference keeps t alive,
 * and returns without it, that reference released (t may be freed): the completion is
 * returned, the owner's (its waiters get their own). */
static sbx_completion *run_task(thread_broker *tb, bt_task *t, bool locked)
{
    if (locked) {
        t->refs++; /* keep t alive while unlocked */
        unlock_wake(tb);
    }
    const sbx_request *req = t->req;
    const sbx_engine_hooks *hooks = t->hooks;

    sbx_completion *c;
    for (;;) {
        if (hooks != NULL && hooks->cancel != NULL && *hooks->cancel)
            c = sbx_completion_fail(t->id, SBX_E_TIMEOUT,
                                    "cancelled before it ran (the caller went away)");
        else
            c = sbx_engine_process(tb->engine, req, hooks);
        if (c == NULL)
            c = sbx_completion_fail(t->id, SBX_E_INTERNAL, "out of memory producing a completion");
        if (!t->async_owner || !bt_abandoned(hooks, c) || !hand_over(tb, t, c))
            break;
        sbx_completion_free(c); /* ran again for the heir */
        req = t->req;
        hooks = t->hooks;
    }
    bool abandoned = bt_abandoned(hooks, c); /* answers those waiting, not kept (tasks.h) */
    sbx_broker_record(tb->self, req, c, t->started_at_ms, 0);
    /* Packed for the store here, not under the lock every submitter contends for; c itself goes
     * to the one who asked (a blocking owner, or an asynchronous waiter): no copy on the way. */
    bt_done_prepare(t, c); /* running: only this thread writes t's entry */
    sbx_completion *give = locked ? c : NULL;

    pthread_mutex_lock(&tb->store.mu);
    bt_session *s = t->session;
    t->session = NULL;
    task_ended(tb, t); /* before bt_release, which may free t */
    bt_task *dead = NULL;
    if (abandoned)
        t->discarded = true;
    bt_waiter *fire = bt_complete(&tb->store, t, &give, &dead);
    bt_release(t); /* the executor's reference (above) or the owner's: may free t (discarded,
                    * no waiter) */
    session_done(tb, s);
    tb->running--;
    dispatch(tb);
    if (tb->queued == 0 && tb->running == 0)
        pthread_cond_broadcast(&tb->idle);
    if (tb->closing && tb->queued == 0)
        while (tb->parked != NULL)
            wake_executor(tb);
    if (!locked || fire != NULL || dead != NULL) {
        unlock_wake(tb);
        bt_fire(fire);
        bt_free_dead(dead);
        if (locked)
            pthread_mutex_lock(&tb->store.mu);
    }
    return locked ? give : c;
}

/* Sleeps until a waker takes this executor off the parked list (store.mu held on entry and on
 * return, released while asleep). A FUTEX_WAKE meant for an earlier park at the same address
 * only makes it look at its word again. */
static void park(thread_broker *tb)
{
    tb_park me = {.next = tb->parked, .woken = 0};
    /* Off the list before this returns: only a waker takes it off, and it returns once woken. */
    // cppcheck-suppress autoVariables
    tb->parked = &me;
    unlock_wake(tb);
    while (__atomic_load_n(&me.woken, __ATOMIC_ACQUIRE) == 0)
        syscall(SYS_futex, &me.woken, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    pthread_mutex_lock(&tb->store.mu);
}

static void *executor(void *arg)
{
    thread_broker *tb = arg;
    pthread_mutex_lock(&tb->store.mu);
    for (;;) {
        wake_pending(tb);
        while (tb->exec_head == NULL && !(tb->closing && tb->queued == 0))
            park(tb);
        bt_task *t = tb->exec_head;
        if (t == NULL)
            break; /* closing and drained */
        tb->exec_waiting--;
        tb->exec_head = t->qnext;
        if (tb->exec_head == NULL)
            tb->exec_tail = NULL;
        t->qnext = NULL;
        tb->busy_threads++;
        sbx_completion *unused = run_task(tb, t, true);
        tb->busy_threads--;
        if (unused != NULL) { /* nobody waits for it any more (the store keeps its own) */
            unlock_wake(tb);
            sbx_completion_free(unused);
            pthread_mutex_lock(&tb->store.mu);
        }
    }
    unlock_wake(tb);
    return NULL;
}

typedef enum tb_accepted { TB_NEW, TB_JOIN, TB_ANSWERED } tb_accepted;

/* The front both submit forms share (store.mu held): the existing task of req's key to join,
 * or a new task (not yet queued; copy: it owns a copy of req), or an immediate answer in
 * *answer with its status in *st (a conflict, a closed broker, a full queue, no memory). */
static tb_accepted tb_accept(thread_broker *tb, const sbx_request *req, const char *subject,
                             const uint8_t digest[SBX_REQUEST_DIGEST_LEN], bool copy, tb_prep *prep,
                             bt_task **tp, sbx_completion **answer, sbx_status *st)
{
    const char *id = req->task_id;
    *st = SBX_OK;
    bt_task *t = bt_find(&tb->store, subject, id);
    if (t != NULL && !t->discarded) {
        if (!bt_same_request(t, digest)) {
            *answer = bt_conflict(subject, id);
            return TB_ANSWERED;
        }
        *tp = t; /* dedup: join, never run twice */
        return TB_JOIN;
    }
    if (tb->closing) {
        *st = SBX_E_BROKER;
        *answer = sbx_completion_fail(id, *st, "the thread broker is closed; open a new one");
        return TB_ANSWERED;
    }
    if (tb->queued >= tb->queue_depth) {
        *st = SBX_E_RESOURCE_EXHAUSTED;
        *answer = sbx_completion_fail(id, *st,
                                      "the thread broker's queue is full (%d requests waiting); "
                                      "retry later or raise broker.queue_depth",
                                      tb->queue_depth);
        return TB_ANSWERED;
    }
    tb_tenant *p = tenant_get(tb, subject);
    if (p == NULL) {
        *st = SBX_E_RESOURCE_EXHAUSTED;
        *answer = sbx_completion_fail(id, *st, "out of memory queueing a request");
        return TB_ANSWERED;
    }
    if (p->queued >= tb->queue_share) {
        *st = SBX_E_RESOURCE_EXHAUSTED;
        *answer = sbx_completion_fail(
            id, *st,
            "principal '%s' already has %d requests waiting in the thread broker's queue, the "
            "most one principal may hold (%d of broker.queue_depth %d: the rest is kept for "
            "others); retry once some have run, or raise broker.queue_depth",
            subject, p->queued, tb->queue_share, tb->queue_depth);
        return TB_ANSWERED;
    }
    sbx_request *owned = copy ? sbx_request_copy(req) : NULL;
    bt_session *s = prep->sid != NULL ? session_get(tb, prep) : NULL;
    /* A discarded entry with this id may still be running: the new entry is inserted at the
     * head of the bucket chain and shadows it; the old one finishes unseen. */
    bt_task *nt = (copy && owned == NULL) || (prep->sid != NULL && s == NULL) ? NULL : prep->task;
    if (nt != NULL) {
        bt_insert_task(&tb->store, nt);
        prep->task = NULL;
    }
    if (nt == NULL) {
        if (s != NULL && !s->busy && s->backlog_head == NULL)
            session_release(tb, s);
        tenant_tidy(tb, p);
        sbx_request_free(owned);
        *st = SBX_E_RESOURCE_EXHAUSTED;
        *answer = sbx_completion_fail(id, *st, "out of memory queueing a request");
        return TB_ANSWERED;
    }
    nt->req_owned = owned;
    nt->req = copy ? owned : req;
    nt->session = s;
    nt->tenant = p;
    nt->started_at_ms = sbx_broker_record_start(tb->self);
    *tp = nt;
    return TB_NEW;
}

/* ---- hooks lent by a submit with a bounded wait -------------------------------------------
 * Such a submit may return before its task ends, and the caller's hooks are valid only until it
 * returns (broker.h): the task runs with a relay (own_hooks) instead. The relay passes output on
 * while the submit waits and drops it after; the submitter copies the caller's cancel flag into
 * the task's own while it waits. As the remote and queue brokers do. */
#define TB_CANCEL_POLL_MS 50

static pthread_mutex_t lent_mu = PTHREAD_MUTEX_INITIALIZER; /* lent, lent_valid */

static void relay_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                         uint64_t offset)
{
    bt_task *t = arg;
    pthread_mutex_lock(&lent_mu);
    if (t->lent_valid && t->lent.on_output != NULL)
        t->lent.on_output(t->lent.on_output_arg, stream, data, len, offset);
    pthread_mutex_unlock(&lent_mu);
}

static void lend_hooks(bt_task *t, const sbx_engine_hooks *hooks)
{
    t->lent = *hooks;
    t->lent_valid = true;
    t->cancelled = hooks->cancel != NULL && *hooks->cancel;
    t->own_hooks.on_output = hooks->on_output != NULL ? relay_output : NULL;
    t->own_hooks.on_output_arg = t;
    t->own_hooks.cancel = &t->cancelled;
    t->hooks = &t->own_hooks;
}

/* Waits (store.mu held) as bt_wait does, looking at the lent cancel flag every
 * TB_CANCEL_POLL_MS; then takes the hooks back: no relay calls them once this returns. The
 * caller holds a reference to t. */
static void wait_lent(thread_broker *tb, bt_task *t, int64_t wait_ms, sbx_completion **out)
{
    if (t->lent.cancel == NULL) {
        bt_wait(&tb->store, t, wait_ms, out);
    } else {
        int64_t end = sbx_monotonic_ms() + wait_ms;
        for (;;) {
            if (*t->lent.cancel)
                t->cancelled = 1;
            int64_t left = end - sbx_monotonic_ms();
            bt_wait(&tb->store, t, left < TB_CANCEL_POLL_MS ? left : TB_CANCEL_POLL_MS, out);
            if (*out != NULL || t->state == BT_DONE || left <= TB_CANCEL_POLL_MS)
                break;
        }
    }
    /* Not under store.mu: a caller's on_output may call into the broker. */
    pthread_mutex_unlock(&tb->store.mu);
    pthread_mutex_lock(&lent_mu);
    t->lent_valid = false;
    pthread_mutex_unlock(&lent_mu);
    pthread_mutex_lock(&tb->store.mu);
}

static sbx_status tb_submit(sbx_broker *b, const sbx_request *req, int64_t wait_ms,
                            const sbx_engine_hooks *hooks, sbx_completion **out)
{
    thread_broker *tb = sbx_broker_impl(b);
    const char *id = req->task_id != NULL ? req->task_id : "";
    if (id[0] == '\0') {
        /* The engine refuses it without touching anything; no task to keep. */
        *out = sbx_engine_process(tb->engine, req, NULL);
        return SBX_OK;
    }
    const char *subject = sbx_request_subject(req);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    if (!sbx_request_digest(req, digest)) {
        *out =
            sbx_completion_fail(id, SBX_E_RESOURCE_EXHAUSTED, "out of memory queueing a request");
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    /* A caller that waits forever keeps req alive until the completion: borrow it, and run it
     * on this thread once granted a slot. Otherwise the request must outlive the caller's
     * wait: copy it, and an executor runs it. */
    bool forever = wait_ms == SBX_WAIT_FOREVER;
    bt_task *t = NULL;
    sbx_status st;
    tb_prep prep;
    tb_prepare(req, subject, id, digest, &prep);
    pthread_mutex_lock(&tb->store.mu);
    tb_accepted how = forever || first_executor(tb, id, out, &st)
                          ? tb_accept(tb, req, subject, digest, !forever, &prep, &t, out, &st)
                          : TB_ANSWERED;
    switch (how) {
    case TB_ANSWERED: break;
    case TB_JOIN:
        t->refs++; /* ours across wake_pending's unlock, as below */
        wake_pending(tb);
        bt_wait(&tb->store, t, wait_ms, out);
        bt_release(t);
        break;
    case TB_NEW:
        if (!forever) {
            /* Ours until we waited: wake_pending releases the lock to wake an executor, which
             * may run t to its end meanwhile, and a discard or the completion LRU then free it. */
            t->refs++;
            if (hooks != NULL && (hooks->on_output != NULL || hooks->cancel != NULL))
                lend_hooks(t, hooks);
            enqueue(tb, t);
            wake_pending(tb);
            if (t->hooks != NULL)
                wait_lent(tb, t, wait_ms, out);
            else
                bt_wait(&tb->store, t, wait_ms, out);
            bt_release(t);
            break;
        }
        t->hooks = hooks; /* broker.h: valid until this (forever) submit returns */
        t->owner_runs = true;
        t->refs++; /* ours until run_task published the completion (it releases it) */
        enqueue(tb, t);
        /* Granted now (a free slot: to ourselves, so no wake-up) or later by a finishing task;
         * either way the engine runs unlocked, and our reference keeps t alive meanwhile. */
        unwake(tb, &t->granted);
        unlock_wake(tb);
        while (__atomic_load_n(&t->granted, __ATOMIC_ACQUIRE) == 0)
            syscall(SYS_futex, &t->granted, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        /* Returns unlocked, the slot passed on and our reference released (one lock round
         * fewer per request: under 64 callers each is a likely sleep on the mutex), with the
         * completion, ours. */
        *out = run_task(tb, t, false);
        tb_prep_free(&prep);
        return st;
    }
    unlock_wake(tb);
    tb_prep_free(&prep);
    return st;
}

/* Takes off t's waiters (store.mu held) the joiners whose cancel flag is set, each with a
 * completion saying so, for the caller to fire once unlocked. A joiner's cancel does not stop a
 * task others wait for, and a worker's client that joins a long task and resets its stream,
 * again and again, would otherwise pile up one waiter (its call and its request, charged to the
 * worker's buffer budget) per join until the task ends; each join prunes the ones gone before. */
static bt_waiter *prune_gone(bt_task *t)
{
    bt_waiter *gone = NULL;
    for (bt_waiter **pp = &t->waiters; *pp != NULL;) {
        bt_waiter *w = *pp;
        if (w->creator || w->cancel == NULL || !*w->cancel) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->c = sbx_completion_fail(t->id, SBX_E_TIMEOUT,
                                   "cancelled while waiting for the task (the caller went away)");
        w->next = gone;
        gone = w;
    }
    return gone;
}

static sbx_status tb_submit_async(sbx_broker *b, const sbx_request *req, const sbx_broker_async *cb)
{
    thread_broker *tb = sbx_broker_impl(b);
    const char *id = req->task_id != NULL ? req->task_id : "";
    if (id[0] == '\0') {
        /* The engine refuses it without touching anything (no provider call): answer now. */
        cb->on_done(cb->arg, SBX_OK, sbx_engine_process(tb->engine, req, NULL));
        return SBX_OK;
    }
    const char *subject = sbx_request_subject(req);
    uint8_t digest[SBX_REQUEST_DIGEST_LEN];
    bt_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL || !sbx_request_digest(req, digest)) {
        free(w);
        cb->on_done(
            cb->arg, SBX_E_RESOURCE_EXHAUSTED,
            sbx_completion_fail(id, SBX_E_RESOURCE_EXHAUSTED, "out of memory queueing a request"));
        return SBX_E_RESOURCE_EXHAUSTED;
    }
    w->on_done = cb->on_done;
    w->arg = cb->arg;
    w->cancel = cb->cancel;
    w->req = req;
    w->on_output = cb->on_output;
    bt_task *t = NULL;
    sbx_completion *answer = NULL;
    sbx_status st;
    tb_prep prep;
    tb_prepare(req, subject, id, digest, &prep);
    pthread_mutex_lock(&tb->store.mu);
    tb_accepted how = first_executor(tb, id, &answer, &st)
                          ? tb_accept(tb, req, subject, digest, false, &prep, &t, &answer, &st)
                          : TB_ANSWERED;
    if (how == TB_JOIN && t->state == BT_DONE) {
        answer = bt_completion(t);
        how = TB_ANSWERED;
    }
    bt_waiter *gone = NULL;
    if (how == TB_JOIN)
        gone = prune_gone(t);
    if (how != TB_ANSWERED) {
        w->creator = how == TB_NEW;
        w->next = t->waiters;
        t->waiters = w;
        w = NULL;
    }
    if (how == TB_NEW) {
        /* req is borrowed until on_done (broker.h), so the task points at it. */
        t->own_hooks.on_output = cb->on_output;
        t->own_hooks.on_output_arg = cb->arg;
        t->own_hooks.cancel = cb->cancel;
        t->hooks = &t->own_hooks;
        t->async_owner = true;
        t->run_here = cb->run_here;
        enqueue(tb, t);
        /* Granted at once: this thread runs it, no executor woken. Otherwise an executor runs
         * it when a later dispatch grants it. */
        bool here = t->run_here && t->state == BT_RUNNING;
        t->run_here = false;
        if (here) {
            sbx_completion *unused = run_task(tb, t, true); /* its waiter got it, so NULL */
            if (unused != NULL) {
                unlock_wake(tb);
                sbx_completion_free(unused);
                pthread_mutex_lock(&tb->store.mu);
            }
        }
    }
    unlock_wake(tb);
    tb_prep_free(&prep);
    bt_fire(gone);
    if (how == TB_ANSWERED) {
        free(w);
        cb->on_done(cb->arg, st, answer);
    }
    return st;
}

static sbx_status tb_describe(sbx_broker *b, Sbx__V1__DescribeResponse **out, sbx_error *err)
{
    thread_broker *tb = sbx_broker_impl(b);
    return sbx_engine_describe(tb->engine, out, err);
}

static sbx_status tb_result(sbx_broker *b, const char *subject, const char *task_id,
                            int64_t wait_ms, sbx_completion **out)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    bt_task *t = bt_find(&tb->store, subject, task_id);
    sbx_status st = SBX_OK;
    if (t == NULL || t->discarded)
        st = SBX_E_INVALID_ARGUMENT;
    else
        bt_wait(&tb->store, t, wait_ms, out);
    unlock_wake(tb);
    return st;
}

static void tb_discard(sbx_broker *b, const char *subject, const char *task_id)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    bt_discard(&tb->store, subject, task_id);
    unlock_wake(tb);
}

static void tb_close(sbx_broker *b)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    tb->closing = true;
    while (tb->parked != NULL)
        wake_executor(tb);
    wake_pending(tb);
    while (tb->queued > 0 || tb->running > 0)
        pthread_cond_wait(&tb->idle, &tb->store.mu);
    unlock_wake(tb);
    for (int i = 0; i < tb->n_threads; i++)
        pthread_join(tb->threads[i], NULL);
    tb->n_threads = 0;
}

static void tb_destroy(sbx_broker *b)
{
    thread_broker *tb = sbx_broker_impl(b);
    if (tb == NULL)
        return;
    bt_store_destroy(&tb->store);
    pthread_cond_destroy(&tb->idle);
    free(tb->threads);
    free(tb);
}

static bool tb_load(sbx_broker *b, sbx_broker_load *out)
{
    thread_broker *tb = sbx_broker_impl(b);
    pthread_mutex_lock(&tb->store.mu);
    out->running = (uint64_t)tb->running;
    out->queued = (uint64_t)tb->queued;
    out->queue_limit = (uint64_t)tb->queue_depth;
    unlock_wake(tb);
    return true;
}

static const sbx_broker_vtable thread_vtable = {
    .flavor = "thread",
    .submit = tb_submit,
    .submit_async = tb_submit_async,
    .describe = tb_describe,
    .result = tb_result,
    .discard = tb_discard,
    .load = tb_load,
    .close = tb_close,
    .destroy = tb_destroy,
};

sbx_status sbx_broker_open_thread(sbx_engine *engine, const sbx_thread_broker_opts *opts,
                                  sbx_broker **out, sbx_error *err)
{
    *out = NULL;
    if (engine == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "thread broker needs an engine");
    int threads = opts != NULL && opts->threads > 0 ? opts->threads : SBX_BROKER_DEFAULT_THREADS;
    int depth =
        opts != NULL && opts->queue_depth > 0 ? opts->queue_depth : SBX_BROKER_DEFAULT_QUEUE_DEPTH;
    int lru = opts != NULL && opts->lru_size > 0 ? opts->lru_size : SBX_BROKER_DEFAULT_LRU_SIZE;
    int share = opts != NULL && opts->principal_threads > 0 ? opts->principal_threads
                                                            : tenant_share(threads);
    if (share > threads)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "thread broker: principal_threads %d is more than threads %d; one "
                             "principal holds at most every thread (lower principal_threads, or "
                             "0 for all but a quarter of threads)",
                             share, threads);
    if (threads > THREAD_BROKER_MAX_THREADS || depth > THREAD_BROKER_MAX_QUEUE ||
        lru > THREAD_BROKER_MAX_LRU)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "thread broker: threads %d (max %d), queue_depth %d (max %d), "
                             "lru_size %d (max %d) out of range",
                             threads, THREAD_BROKER_MAX_THREADS, depth, THREAD_BROKER_MAX_QUEUE,
                             lru, THREAD_BROKER_MAX_LRU);
    thread_broker *tb = calloc(1, sizeof(*tb));
    if (tb == NULL || (tb->threads = calloc((size_t)threads, sizeof(pthread_t))) == NULL) {
        free(tb);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the thread broker");
    }
    tb->engine = engine;
    tb->queue_depth = depth;
    tb->queue_share = tenant_share(depth);
    tb->principal_slots = share;
    tb->slots = threads;
    bt_store_init(&tb->store, (size_t)lru);
    sbx_table_init(&tb->tenants, tb->tenant_buckets, TENANT_BUCKETS);
    sbx_table_init(&tb->sessions, tb->session_buckets, SESSION_BUCKETS);
    pthread_cond_init(&tb->idle, NULL);
    sbx_broker *b = sbx_broker_wrap(&thread_vtable, tb);
    if (b == NULL) {
        bt_store_destroy(&tb->store);
        free(tb->threads);
        free(tb);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening the thread broker");
    }
    tb->self = b;
    /* No executor yet: the first starts with the first task that needs one (first_executor),
     * the rest on demand (grow). A caller that only submits and waits runs its own tasks. */
    *out = b;
    return SBX_OK;
}
