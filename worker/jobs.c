/* jobs.c - the hand-off between sbx-worker's event loop and the thread broker. The loop posts a
 * call's decoded request straight to the broker's asynchronous submit (its bounded queue and
 * executors run it, and its task_id dedup applies). The broker's callbacks run on executor
 * threads. Output is queued on a locked list, and the loop is woken through its eventfd, as
 * libuv's threadpool does (uv__work_submit / uv__work_done); the loop applies it
 * (worker_drain_posted). A completion is applied by the executor itself when the loop is
 * asleep in epoll_wait: it takes loop_mu, applies what was posted before it and its own
 * final, and writes the answer to the socket, so a call costs no wake-up of the loop thread
 * (the leader/follower idea: whoever holds loop_mu acts for the loop). When the loop is busy,
 * the final is posted like output, and the loop applies it before it sleeps. Describe, rare
 * and possibly slow (providers open to report capabilities), runs on a short-lived thread of
 * its own.
 *
 * Most Executes skip the hand-off altogether: once a turn's I/O is done, the loop thread lets
 * go of loop_mu and submits the turn's Executes one after the other with run_here, so the
 * broker runs each on this very thread when a slot is free at once (its final then written by
 * this thread too). The wake-up of an executor is what a call cost beyond its own work (gRPC's
 * callback servers avoid it the same way: the poller that reads a request runs its handler).
 * Before a turn's runs, the loop thread arms the standby's timer: runs that keep it from the
 * connections past WORKER_INLINE_COVER_US wake the standby, which hands the Executes still
 * waiting to the executors and serves the connections (as the loop does, under loop_mu) until
 * the loop thread is back.
 *
 * post, post_final, on_output, on_job_done and describe_main run off the loop thread (an
 * executor of the broker, a Describe thread, the loop thread during an inline run); the rest
 * hold loop_mu.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "core/grpc_wire.h"
#include "worker/observe.h"
#include "worker/server_impl.h"

/* ---- the broker's callbacks (any thread) -> the loop ------------------------------------- */

static void post(sbx_worker *w, posted *p, bool quiet)
{
    /* Counted from before the lock until the last touch of w: sbx_worker_free waits for it. */
    atomic_fetch_add_explicit(&w->posting, 1, memory_order_relaxed);
    pthread_mutex_lock(&w->lock);
    if (w->posted_tail)
        w->posted_tail->next = p;
    else
        w->posted_head = p;
    w->posted_tail = p;
    /* Whoever holds loop_mu looks at the list before letting go of it. Output while the loop
     * polls for it needs no wake-up either: a program printing line by line would otherwise
     * cost a write, a wake-up and a loop turn per line. */
    bool wake = !quiet && !w->wake_pending && !w->held && !(p->is_output && w->output_polling);
    if (wake)
        w->wake_pending = true;
    pthread_mutex_unlock(&w->lock);
    /* After the unlock: written under the lock, the wake-up let the loop run straight into the
     * lock still held here, and sleep on it once more (a wait and two wakes per call). A drain
     * between the unlock and this write takes p already; the write then wakes the loop once
     * for nothing. */
    if (wake) {
        uint64_t one = 1;
        ssize_t r = write(w->wake_fd, &one, sizeof one);
        (void)r; /* an eventfd write only fails when the counter would overflow */
    }
    atomic_fetch_sub_explicit(&w->posting, 1, memory_order_release);
}

static void drain(sbx_worker *w, posted *p);
static posted *take_posted(sbx_worker *w, bool by_loop);

/* loop_mu was just taken: posts from now on need no wake-up (server_impl.h, held). */
static void mark_held(sbx_worker *w)
{
    pthread_mutex_lock(&w->lock);
    w->held = true;
    pthread_mutex_unlock(&w->lock);
}

/* A final, from the job's thread: applied and sent right here when loop_mu is free (the loop
 * sleeps in epoll_wait), else posted for whoever holds it. The loop thread's own, from an
 * inline run, is posted without a wake-up: it takes loop_mu and applies the list once its
 * turn's runs are over, so the answers of one turn go out together (one write per connection,
 * not one per call), and the standby applies them should a later run of the turn be long. */
static void post_or_apply(sbx_worker *w, posted *p)
{
    atomic_fetch_add_explicit(&w->posting, 1, memory_order_relaxed);
    if (pthread_equal(pthread_self(), w->loop_thread) && w->standby_up) {
        post(w, p, true);
        atomic_fetch_sub_explicit(&w->posting, 1, memory_order_release);
        return;
    }
    if (pthread_mutex_trylock(&w->loop_mu) == 0) {
        if (w->loop_open) {
            mark_held(w);
            posted *q = take_posted(w, false); /* what was posted before p goes first */
            posted **tail = &q;
            while (*tail)
                tail = &(*tail)->next;
            *tail = p;
            drain(w, q);
            while (!worker_release(w))
                drain(w, take_posted(w, false));
            atomic_fetch_sub_explicit(&w->posting, 1, memory_order_release);
            return;
        }
        pthread_mutex_unlock(&w->loop_mu);
    }
    post(w, p, false);
    atomic_fetch_sub_explicit(&w->posting, 1, memory_order_release);
}

static void post_final(sbx_worker *w, call *c, uint8_t *bytes, size_t len, int status,
                       const char *message)
{
    posted *p = calloc(1, sizeof *p);
    if (!p) { /* cannot tell the loop: the reference leaks rather than a use-after-free */
        free(bytes);
        return;
    }
    p->c = c;
    p->bytes = bytes;
    p->len = len;
    p->final = true;
    p->grpc_status = status;
    p->grpc_message = message ? strdup(message) : NULL;
    post_or_apply(w, p);
}

/* Output hook (executor thread): chunks are queued raw and coalesced while the loop has not
 * taken them yet; the loop frames each run as one ExecuteEvent{output}. */
static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    call *c = arg;
    sbx_worker *w = c->w;
    if (c->cancel || len == 0)
        return;
    pthread_mutex_lock(&w->lock);
    posted *p = c->open_output;
    if (p && p->stream == stream && p->offset + p->len == offset &&
        p->len + len <= WORKER_OUTPUT_COALESCE) {
        if (p->len + len > p->cap) {
            size_t cap = p->cap * 2 > p->len + len ? p->cap * 2 : p->len + len;
            uint8_t *b = realloc(p->bytes, cap);
            if (!b) {
                pthread_mutex_unlock(&w->lock);
                return;
            }
            p->bytes = b;
            p->cap = cap;
        }
        memcpy(p->bytes + p->len, data, len);
        p->len += len;
        pthread_mutex_unlock(&w->lock);
        return;
    }
    pthread_mutex_unlock(&w->lock);
    p = calloc(1, sizeof *p);
    if (!p)
        return;
    size_t cap = len < WORKER_OUTPUT_FIRST_CAP ? WORKER_OUTPUT_FIRST_CAP : len;
    p->bytes = malloc(cap);
    if (!p->bytes) {
        free(p);
        return;
    }
    memcpy(p->bytes, data, len);
    p->len = len;
    p->cap = cap;
    p->c = c;
    p->is_output = true;
    p->stream = stream;
    p->offset = offset;
    pthread_mutex_lock(&w->lock);
    c->open_output = p; /* only this executor thread posts for c: no race on the choice */
    pthread_mutex_unlock(&w->lock);
    post(w, p, false);
}

/* Loop thread: turns a coalesced output run into one framed ExecuteEvent{output}. */
static bool frame_output(posted *p)
{
    Sbx__V1__OutputChunk chunk = SBX__V1__OUTPUT_CHUNK__INIT;
    chunk.stream = p->stream;
    chunk.data.data = p->bytes;
    chunk.data.len = p->len;
    chunk.offset = p->offset;
    Sbx__V1__ExecuteEvent ev = SBX__V1__EXECUTE_EVENT__INIT;
    ev.event_case = SBX__V1__EXECUTE_EVENT__EVENT_OUTPUT;
    ev.output = &chunk;
    size_t len;
    uint8_t *framed = sbx_grpc_frame_message(&ev.base, &len);
    if (!framed)
        return false;
    free(p->bytes);
    p->bytes = framed;
    p->len = len;
    return true;
}

/* The broker's completion callback (an executor thread, or the loop itself for an answer the
 * broker knew at once): frames the completion here, off the loop, and posts it. */
static void on_job_done(void *arg, sbx_status st, sbx_completion *comp)
{
    call *c = arg;
    sbx_worker *w = c->w;
    worker_call_obs_completion(&c->obs, comp); /* before post_final: its lock publishes it */
    if (st != SBX_OK || !comp) {
        /* The broker refused the task (queue full, closed): a transport-level answer. */
        int code = st == SBX_E_RESOURCE_EXHAUSTED ? SBX_GRPC_RESOURCE_EXHAUSTED
                   : st == SBX_OK                 ? SBX_GRPC_INTERNAL
                                                  : SBX_GRPC_UNAVAILABLE;
        post_final(w, c, NULL, 0, code,
                   comp && comp->error ? comp->error : "the worker's broker refused the task");
        sbx_completion_free(comp);
        return;
    }
    uint8_t *bytes;
    size_t len;
    if (c->method == RPC_EXECUTE_STREAM) {
        Sbx__V1__ExecuteEvent ev = SBX__V1__EXECUTE_EVENT__INIT;
        ev.event_case = SBX__V1__EXECUTE_EVENT__EVENT_COMPLETION;
        ev.completion = comp;
        bytes = sbx_grpc_frame_message(&ev.base, &len);
    } else {
        bytes = sbx_grpc_frame_message(&comp->base, &len);
    }
    sbx_completion_free(comp);
    post_final(w, c, bytes, len, bytes ? SBX_GRPC_OK : SBX_GRPC_INTERNAL,
               bytes ? NULL : "worker: out of memory");
}

/* A Describe thread: asks the broker (which may open providers) and posts the answer. */
static void *describe_main(void *arg)
{
    call *c = arg;
    sbx_worker *w = c->w;
    Sbx__V1__DescribeResponse *d = NULL;
    sbx_error err = {0};
    sbx_status st = sbx_broker_describe(w->broker, &d, &err);
    if (st != SBX_OK) {
        post_final(w, c, NULL, 0, sbx_grpc_code_for_status(st), err.message);
        return NULL;
    }
    size_t len;
    uint8_t *bytes = sbx_grpc_frame_message(&d->base, &len);
    sbx_message_free(&d->base);
    post_final(w, c, bytes, len, bytes ? SBX_GRPC_OK : SBX_GRPC_INTERNAL,
               bytes ? NULL : "worker: out of memory");
    return NULL;
}

static void submit(sbx_worker *w, call *c, bool here)
{
    sbx_broker_async cb = {
        .on_output = c->method == RPC_EXECUTE_STREAM ? on_output : NULL,
        .cancel = &c->cancel,
        .on_done = on_job_done,
        .arg = c,
        .run_here = here,
    };
    /* A refusal (queue full, closed) has reached on_job_done already: it is posted like any
     * completion. */
    (void)sbx_broker_submit_async(w->broker, c->req, &cb);
}

/* Starts the call's job (loop thread): the job holds a reference until its final is drained. */
void worker_start_job(sbx_worker *w, call *c)
{
    atomic_fetch_add(&c->refs, 1);
    c->job_running = true;
    w->jobs_in_flight++;
    if (c->method == RPC_DESCRIBE) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, WORKER_DESCRIBE_STACK);
        pthread_t th;
        bool started = w->describes_running < WORKER_MAX_DESCRIBES &&
                       pthread_create(&th, &attr, describe_main, c) == 0;
        pthread_attr_destroy(&attr);
        if (started) {
            w->describes_running++;
            return;
        }
        c->job_running = false;
        w->jobs_in_flight--;
        worker_call_unref(c);
        worker_call_decide(c, SBX_GRPC_RESOURCE_EXHAUSTED,
                           "the worker is answering %d Describe calls already; retry later",
                           WORKER_MAX_DESCRIBES);
        return;
    }
    /* The loop thread keeps the turn's Executes to run itself (worker_run_inline) once the
     * turn's I/O is done. */
    if (!w->standby_up || !pthread_equal(pthread_self(), w->loop_thread)) {
        submit(w, c, false);
        return;
    }
    c->inline_next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->inline_tail)
        w->inline_tail->inline_next = c;
    else
        w->inline_head = c;
    w->inline_tail = c;
    pthread_mutex_unlock(&w->lock);
}

static call *take_inline(sbx_worker *w, bool all)
{
    pthread_mutex_lock(&w->lock);
    call *c = w->inline_head;
    if (c) {
        w->inline_head = all ? NULL : c->inline_next;
        if (!w->inline_head)
            w->inline_tail = NULL;
        if (!all)
            c->inline_next = NULL;
    }
    pthread_mutex_unlock(&w->lock);
    return c;
}

void worker_run_inline(sbx_worker *w)
{
    if (!w->inline_head) /* only this thread adds to it */
        return;
    while (!worker_release(w))
        worker_apply_posted(w);
    atomic_store_explicit(&w->inline_running, 1, memory_order_release);
    /* Armed per turn and left armed after it: a standby woken once the turn's runs have ended
     * sees inline_running at 0 and sleeps again; disarming would cost a syscall per turn. */
    struct itimerspec cover = {.it_value = {.tv_sec = WORKER_INLINE_COVER_US / 1000000,
                                            .tv_nsec = WORKER_INLINE_COVER_US % 1000000 * 1000L}};
    bool covered = timerfd_settime(w->cover_timer_fd, 0, &cover, NULL) == 0;
    call *c;
    while ((c = take_inline(w, false)) != NULL) {
        /* A slot free at once: the broker runs it here. Otherwise it is queued for the
         * executors. */
        submit(w, c, covered);
    }
    atomic_store_explicit(&w->inline_running, 0, memory_order_release);
    worker_hold(w);
    /* The standby serves for us: woken by the eventfd, it sees the runs ended and stops. */
    if (w->covering) {
        while (w->covering) {
            uint64_t one = 1;
            ssize_t r = write(w->wake_fd, &one, sizeof one);
            (void)r;
            pthread_cond_wait(&w->cover_done, &w->loop_mu);
        }
        mark_held(w); /* the standby let go of loop_mu, and with it held, meanwhile */
    }
    /* The answers of the runs go out now, not after the next turn's deadlines and an epoll_wait
     * that would only find them posted. */
    worker_apply_posted(w);
}

void worker_hand_off_inline(sbx_worker *w)
{
    call *c = take_inline(w, true);
    while (c) {
        call *next = c->inline_next;
        submit(w, c, false);
        c = next;
    }
}

void worker_hold(sbx_worker *w)
{
    pthread_mutex_lock(&w->loop_mu);
    mark_held(w);
}

bool worker_release(sbx_worker *w)
{
    pthread_mutex_lock(&w->lock);
    if (w->posted_head) {
        pthread_mutex_unlock(&w->lock);
        return false;
    }
    w->held = false;
    /* The loop acts on a drain's end (its last connection closed, its last job over) and on
     * idle connections; asleep, it must hear of it. Idle deadlines need no word: the loop
     * never sleeps longer than one idle period (server.c). */
    bool wake = w->draining && !w->wake_pending;
    if (wake)
        w->wake_pending = true;
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_unlock(&w->loop_mu);
    if (wake) {
        uint64_t one = 1;
        ssize_t r = write(w->wake_fd, &one, sizeof one);
        (void)r;
    }
    return true;
}

/* Applies the list p (loop_mu held), then writes what it queued on the connections it touched
 * (once each: a flush clears dirty). */
static void drain(sbx_worker *w, posted *p)
{
    posted *all = p;
    for (; p; p = p->next) {
        call *c = p->c;
        p->cn = c->conn;
        if (!c->decided && c->conn) {
            if (p->is_output && !frame_output(p))
                worker_call_decide(c, SBX_GRPC_INTERNAL, "worker: out of memory framing output");
            else if (p->bytes && !worker_call_append(c, p->bytes, p->len))
                worker_call_decide(c, SBX_GRPC_INTERNAL, "worker: out of memory queueing output");
            else if (p->bytes && !worker_call_out_admitted(c)) {
                /* reset: its client does not read the answers it has already */
            } else if (p->final && p->grpc_status != SBX_GRPC_OK)
                worker_call_decide(c, p->grpc_status, "%s", p->grpc_message ? p->grpc_message : "");
            else if (p->final) {
                c->decided = true;
                c->final = true;
                c->grpc_status = SBX_GRPC_OK;
                worker_call_start_response(c);
                worker_call_resume(c);
            } else {
                worker_call_start_response(c);
                worker_call_resume(c);
            }
        }
        if (p->final) {
            c->job_running = false;
            w->jobs_in_flight--;
            if (c->method == RPC_DESCRIBE)
                w->describes_running--;
            worker_call_unref(c);
        }
    }
    /* A closed connection stays allocated (kind 0) until the loop frees it after its batch. */
    for (p = all; p; p = p->next)
        if (p->cn && p->cn->kind == EV_CONN && p->cn->dirty)
            worker_conn_flush(p->cn);
    while (all) {
        posted *next = all->next;
        free(all->bytes);
        free(all->grpc_message);
        free(all);
        all = next;
    }
}

/* Takes the posted list. by_loop: the loop thread, which also decides whether to poll for
 * output (in the same lock round). */
static posted *take_posted(sbx_worker *w, bool by_loop)
{
    pthread_mutex_lock(&w->lock);
    posted *p = w->posted_head;
    w->posted_head = w->posted_tail = NULL;
    bool output = false;
    for (posted *q = p; q; q = q->next)
        if (q->is_output) {
            output = true;
            if (q->c->open_output == q)
                q->c->open_output = NULL; /* taken: later chunks start a new run */
        }
    /* Output is flowing: poll for more instead of being woken per chunk; a turn that finds none
     * ends the polling (the next chunk wakes the loop again). */
    if (by_loop)
        w->output_polling = output;
    pthread_mutex_unlock(&w->lock);
    return p;
}

void worker_apply_posted(sbx_worker *w)
{
    drain(w, take_posted(w, true));
}

/* Loop thread: applies everything the jobs posted. */
void worker_drain_posted(sbx_worker *w)
{
    uint64_t v;
    ssize_t r = read(w->wake_fd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&w->lock);
    w->wake_pending = false;
    pthread_mutex_unlock(&w->lock);
    worker_apply_posted(w);
}
