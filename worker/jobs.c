/* jobs.c - the hand-off between sbx-worker's event loop and the thread broker. The loop posts a
 * call's decoded request straight to the broker's asynchronous submit (its bounded queue and
 * executors run it, and its task_id dedup applies); the broker's callbacks, on executor
 * threads, queue output and the completion on a locked list and wake the loop through its
 * eventfd, as libuv's threadpool does (uv__work_submit / uv__work_done), and the loop applies
 * them (worker_drain_posted). Describe, rare and possibly slow (providers open to report
 * capabilities), runs on a short-lived thread of its own.
 *
 * post, post_final, on_output, on_job_done and describe_main run off the loop thread (an
 * executor of the broker, a Describe thread); worker_start_job and worker_drain_posted on it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/grpc_wire.h"
#include "worker/observe.h"
#include "worker/server_impl.h"

/* ---- the broker's callbacks (any thread) -> the loop ------------------------------------- */

static void post(sbx_worker *w, posted *p)
{
    /* Counted from before the lock until the last touch of w: sbx_worker_free waits for it. */
    atomic_fetch_add_explicit(&w->posting, 1, memory_order_relaxed);
    pthread_mutex_lock(&w->lock);
    if (w->posted_tail)
        w->posted_tail->next = p;
    else
        w->posted_head = p;
    w->posted_tail = p;
    /* Output while the loop polls for it needs no wake-up: a program printing line by line
     * would otherwise cost a write, a wake-up and a loop turn per line. */
    bool wake = !w->wake_pending && !(p->is_output && w->output_polling);
    if (wake)
        w->wake_pending = true;
    pthread_mutex_unlock(&w->lock);
    /* After the unlock: written under the lock, the wake-up let the loop run straight into the
     * lock still held here, and sleep on it once more (a wait and two wakes per call). A drain
     * between the unlock and this write takes p already; the write then wakes the loop once
     * for nothing. A loop spinning for it (worker_wait_post) needs no write. */
    atomic_store(&w->posted_any, true);
    if (wake && !atomic_load(&w->loop_spinning)) {
        uint64_t one = 1;
        ssize_t r = write(w->wake_fd, &one, sizeof one);
        (void)r; /* an eventfd write only fails when the counter would overflow */
    }
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
    post(w, p);
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
    post(w, p);
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
    sbx_broker_async cb = {
        .on_output = c->method == RPC_EXECUTE_STREAM ? on_output : NULL,
        .cancel = &c->cancel,
        .on_done = on_job_done,
        .arg = c,
    };
    /* A refusal (queue full, closed) has reached on_job_done already: it is posted like any
     * completion. */
    (void)sbx_broker_submit_async(w->broker, c->req, &cb);
}

/* Loop thread, one job in flight (server_impl.h): watches for a post instead of sleeping. */
bool worker_wait_post(sbx_worker *w)
{
    atomic_store(&w->loop_spinning, true);
    int64_t until = sbx_monotonic_us() + WORKER_SPIN_US;
    bool got;
    while (!(got = atomic_load(&w->posted_any)) && sbx_monotonic_us() < until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ volatile("yield");
#endif
    }
    atomic_store(&w->loop_spinning, false);
    return got || atomic_load(&w->posted_any);
}

/* Loop thread: applies everything the jobs posted. */
void worker_drain_posted(sbx_worker *w)
{
    uint64_t v;
    ssize_t r = read(w->wake_fd, &v, sizeof v);
    (void)r;
    pthread_mutex_lock(&w->lock);
    posted *p = w->posted_head;
    w->posted_head = w->posted_tail = NULL;
    w->wake_pending = false;
    atomic_store_explicit(&w->posted_any, false, memory_order_relaxed);
    bool output = false;
    for (posted *q = p; q; q = q->next)
        if (q->is_output) {
            output = true;
            if (q->c->open_output == q)
                q->c->open_output = NULL; /* taken: later chunks start a new run */
        }
    /* Output is flowing: poll for more instead of being woken per chunk; a turn that finds
     * none ends the polling (the next chunk wakes the loop again). */
    w->output_polling = output;
    pthread_mutex_unlock(&w->lock);
    while (p) {
        posted *next = p->next;
        call *c = p->c;
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
        free(p->bytes);
        free(p->grpc_message);
        free(p);
        p = next;
    }
}
