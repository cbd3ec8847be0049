/* server.c - sbx-worker's event loop and public API: one thread (the caller of sbx_worker_run)
 * owns the listener and every connection (epoll, non-blocking sockets), wakes for their events,
 * for the eventfd the jobs post through and for the nearest deadline, expires grpc-timeout
 * deadlines and the connections' first-request and idle deadlines, and drains on shutdown
 * (health NOT_SERVING during the notice, then GOAWAY and the listener closed). The server is
 * split by idea, with the types they share in server_impl.h:
 *   conn.c  connections: accept and the connection caps, TLS, HTTP/2 through nghttp2's
 *           mem_recv/mem_send interface, writes, shedding and closing;
 *   call.c  gRPC calls on their streams: routes Execute, ExecuteStream, Describe, Health and
 *           reflection, enforces the message size limit and the request budgets, caller
 *           authentication and the principals each caller may assert;
 *   health.c  grpc.health.v1.Health: Check and Watch, and the status changes Watch streams;
 *   jobs.c  the hand-off to the thread broker.
 *
 * Executions are posted straight to the thread broker's asynchronous submit (its bounded
 * queue and executors run them, and its task_id dedup applies), whose callbacks post output
 * back through a locked list plus an eventfd wakeup, as libuv's threadpool does
 * (uv__work_submit / uv__work_done). A completion that finds the loop asleep is applied and
 * written by its executor itself, under loop_mu, which the loop lets go of only while it
 * sleeps in epoll_wait (jobs.c). The Executes a turn read are run by the loop thread itself,
 * one after the other, when the broker has a slot free at once, after the turn's I/O and with
 * loop_mu let go: should they keep it away past WORKER_INLINE_COVER_US, the standby thread
 * hands the rest to the executors and serves the connections meanwhile, so no call keeps the
 * others waiting much longer than that. Describe, rare and possibly slow (providers open to report
 * capabilities), runs on a short-lived thread of its own. Apart from those inline runs, the
 * thread that serves the connections never blocks: no provider calls, no engine calls, no
 * blocking I/O.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "core/limits.h"
#include "core/net.h"
#include "sbx/provider.h"
#include "sbx/worker.h"
#include "worker/observe.h"
#include "worker/server_impl.h"
#include "worker/worker_internal.h"

/* ---- deadlines and drain ---------------------------------------------------------------- */

/* Expires calls past their grpc-timeout (DEADLINE_EXCEEDED; the execution is cancelled through
 * the engine's cancel flag) and returns the ms until the next deadline (-1: none). */
static int expire_deadlines(sbx_worker *w)
{
    int64_t next = -1;
    int64_t now = sbx_monotonic_us();
    /* A connection that sent no complete, authenticated request in time is shed (whatever
     * else it sent: a preface, PINGs, a stream that never ends); a refused one that will not go
     * away is closed; a proven one idle too long gets GOAWAY. */
    for (conn *cn = w->conns, *cnext; cn; cn = cnext) {
        cnext = cn->next;
        int64_t left;
        if (cn->lingering) {
            left = cn->accepted_us + WORKER_LINGER_US - now;
            if (left <= 0) {
                worker_conn_close(cn);
                continue;
            }
        } else if (!cn->proven) {
            left = cn->accepted_us + w->limits.first_request_us - now;
            if (left <= 0) {
                worker_conn_shed(cn, "no complete, authenticated request in time");
                continue;
            }
        } else if (!cn->calls && !cn->goaway_sent) {
            left = cn->idle_since_us + w->limits.idle_us - now;
            if (left <= 0) {
                /* Graceful: worker_conn_flush closes it once the GOAWAY is written. */
                cn->goaway_sent = true;
                nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE,
                                      nghttp2_session_get_last_proc_stream_id(cn->h2),
                                      NGHTTP2_NO_ERROR, (const uint8_t *)"idle", 4);
                cn->dirty = true;
                continue;
            }
        } else {
            continue;
        }
        if (next < 0 || left < next)
            next = left;
    }
    if (w->calls_with_deadline > 0) {
        for (conn *cn = w->conns; cn; cn = cn->next) {
            for (call *c = cn->calls; c; c = c->next) {
                if (!c->deadline_us || c->decided)
                    continue;
                if (c->deadline_us <= now) {
                    worker_call_decide(
                        c, SBX_GRPC_DEADLINE_EXCEEDED,
                        "deadline exceeded (grpc-timeout); the execution was cancelled");
                    continue;
                }
                if (next < 0 || c->deadline_us - now < next)
                    next = c->deadline_us - now;
            }
        }
    }
    if (w->draining || w->not_serving) {
        int64_t left = (w->draining ? w->drain_deadline_us : w->notice_deadline_us) - now;
        if (left < 0)
            left = 0;
        if (next < 0 || left < next)
            next = left;
    }
    /* A job's thread that answers a call while the loop sleeps (jobs.c) may leave a
     * connection idle without a word to the loop: sleeping at most one idle period, the loop
     * still sends its GOAWAY on time, give or take that period. */
    if (w->conns && (next < 0 || next > w->limits.idle_us))
        next = w->limits.idle_us;
    if (next < 0)
        return -1;
    return (int)((next + 999) / 1000);
}

static void start_drain(sbx_worker *w)
{
    w->draining = true;
    /* Health watchers saw NOT_SERVING during the notice; their streams end now. */
    for (conn *cn = w->conns; cn; cn = cn->next)
        for (call *c = cn->calls; c; c = c->next)
            if (c->method == RPC_HEALTH_WATCH && !c->decided)
                worker_call_decide(c, SBX_GRPC_UNAVAILABLE, "the worker is draining");
    int64_t timeout_ms = w->cfg->worker.drain_timeout_ms > 0 ? w->cfg->worker.drain_timeout_ms : 0;
    w->drain_deadline_us = sbx_monotonic_us() + timeout_ms * 1000;
    /* New connections are refused from now on: the listener goes away. */
    epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, w->listen_fd, NULL);
    close(w->listen_fd);
    w->listen_fd = -1;
    for (conn *cn = w->conns, *next; cn; cn = next) {
        next = cn->next;
        if (!cn->h2 || cn->handshaking || cn->http1_refused || cn->lingering) {
            worker_conn_close(cn); /* nothing in flight on it */
            continue;
        }
        nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(cn->h2), NGHTTP2_NO_ERROR,
                              (const uint8_t *)"draining", 8);
        cn->dirty = true;
    }
}

/* SIGHUP (loop thread): the log file and the record file are opened anew, so logrotate (or
 * an operator) can move them away. A record file that cannot be reopened keeps the old one. */
static void reopen_files(sbx_worker *w)
{
    worker_obs_reopen(w->obs);
    if (w->cfg->worker.record) {
        sbx_error err = {0};
        const sbx_worker_config *wc = &w->cfg->worker;
        if (sbx_broker_record_rotating(w->broker, wc->record, (uint64_t)wc->record_max_bytes,
                                       (unsigned)wc->record_keep, &err) != SBX_OK)
            worker_obs_event(w->obs, WORKER_LOG_ERROR, "record_reopen_failed", NULL, 0);
    }
    worker_obs_event(w->obs, WORKER_LOG_INFO, "reopened", NULL, 0);
}

/* The metrics thread's view of the broker that runs the executions (any thread). */
static void sample_gauges(void *arg, worker_gauges *g)
{
    sbx_worker *w = arg;
    sbx_broker_load load;
    sbx_broker_get_load(w->broker, &load);
    g->executions_running = load.running;
    g->executions_queued = load.queued;
    g->queue_limit = load.queue_limit;
    g->n_profiles = sbx_engine_stats(w->engine, g->profiles, WORKER_METRICS_PROFILES_MAX);
    g->draining = atomic_load(&w->shutdown_requested) != 0;
}

/* SIGTERM/SIGINT (loop thread): health turns NOT_SERVING at once (Check and every Watch), the
 * worker keeps listening and serving for worker.drain_notice_ms so balancers and probes see it
 * and move traffic away, then the drain proper starts (GOAWAY, listener closed). */
static void begin_shutdown(sbx_worker *w)
{
    if (w->not_serving)
        return;
    w->not_serving = true;
    worker_health_changed(w);
    int64_t notice_ms = w->cfg->worker.drain_notice_ms > 0 ? w->cfg->worker.drain_notice_ms : 0;
    w->notice_deadline_us = sbx_monotonic_us() + notice_ms * 1000;
    if (notice_ms == 0)
        start_drain(w);
}

static bool jobs_idle(sbx_worker *w)
{
    return w->jobs_in_flight == 0; /* every final, posted last, has been drained */
}

/* ---- listener and lifecycle -------------------------------------------------------------- */

static sbx_status open_listener(sbx_worker *w, const char *listen_addr, bool *loopback,
                                sbx_error *err)
{
    int port = 0;
    int fd =
        worker_listen("worker.listen", listen_addr, "127.0.0.1:7443 or [::1]:7443 or 0.0.0.0:7443",
                      WORKER_LISTEN_BACKLOG, SOCK_NONBLOCK, loopback, &port, err);
    if (fd < 0)
        return SBX_E_CONFIG; /* worker_listen set err */
    w->port = port;
    w->listen_fd = fd;
    return SBX_OK;
}

/* The first profile whose programs may share the host's network namespace (as its provider
 * answers: local's network_egress allow with host_network, docker's on network host), or NULL.
 * From there they reach this worker's loopback listener like any local process. */
static const char *host_network_profile(const sbx_config *cfg)
{
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        const sbx_profile_config *p = &cfg->profiles[i];
        const sbx_provider_ops *ops = p->type != NULL ? sbx_provider_lookup(p->type) : NULL;
        if (ops != NULL && ops->shares_host_network != NULL && ops->shares_host_network(p))
            return p->name;
    }
    return NULL;
}

/* Who may reach the listener, against who must authenticate: off loopback, TLS and callers
 * are required; on loopback without callers (any local process acts as any principal), no
 * profile may run programs in the host's network namespace, from where they reach it too. */
static sbx_status listener_allowed(const sbx_worker *w, const sbx_config *cfg, const char *listen,
                                   bool loopback, bool want_tls, sbx_error *err)
{
    if (!loopback && !want_tls)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "worker.listen '%s' is not a loopback address, so it requires TLS: "
                             "set worker.tls.cert_file and worker.tls.key_file (or listen on "
                             "127.0.0.1)",
                             listen);
    if (!loopback && !w->auth.required)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "worker.listen '%s' is not a loopback address, so callers must "
                             "authenticate: configure worker.auth.callers (a token_env or a "
                             "cert_subject with worker.tls.client_ca_file)",
                             listen);
    const char *shared_net = !w->auth.required ? host_network_profile(cfg) : NULL;
    if (shared_net != NULL)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "worker.listen '%s' takes any principal from loopback (no "
                             "worker.auth.callers), and profile '%s' runs programs in the host's "
                             "network namespace (network_egress allow with local host_network: "
                             "true, or on docker network host), where any of them could call "
                             "this worker as any principal: configure worker.auth.callers, or "
                             "give that profile network_egress allowlist",
                             listen, shared_net);
    return SBX_OK;
}

sbx_status sbx_worker_new(const sbx_config *cfg, sbx_engine *engine, sbx_broker *broker,
                          sbx_worker **out, sbx_error *err)
{
    *out = NULL;
    if (!cfg || !broker)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "sbx_worker_new: cfg and broker "
                             "are required");
    sbx_worker *w = calloc(1, sizeof *w);
    if (!w)
        return sbx_error_set(err, SBX_E_INTERNAL, "worker: out of memory");
    w->listener_kind = EV_LISTENER;
    w->wakeup_kind = EV_WAKEUP;
    w->cfg = cfg;
    w->engine = engine;
    w->broker = broker;
    w->listen_fd = w->epoll_fd = w->wake_fd = w->cover_timer_fd = -1;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->loop_mu, NULL);
    pthread_cond_init(&w->cover_done, NULL);
    w->limits = (worker_limits){
        .max_connections = WORKER_MAX_CONNECTIONS,
        .max_unproven_per_peer = WORKER_MAX_UNPROVEN_PER_PEER,
        .first_request_us = WORKER_FIRST_REQUEST_US,
        .idle_us = WORKER_IDLE_US,
        .conn_buffer_max = WORKER_CONN_BUFFER_MAX,
        .buffer_total_max = WORKER_BUFFER_TOTAL_MAX,
    };
    const sbx_worker_config *wc = &cfg->worker;
    w->max_message =
        wc->max_message_bytes > 0 ? (size_t)wc->max_message_bytes : SBX_WORKER_DEFAULT_MAX_MESSAGE;

    sbx_status st = worker_auth_init(&w->auth, wc, err);
    if (st != SBX_OK)
        goto fail;
    if (w->auth.n_callers > 1) {
        w->caller_buffered = calloc(w->auth.n_callers, sizeof *w->caller_buffered);
        if (w->caller_buffered == NULL) {
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
            goto fail;
        }
    }
    st = worker_obs_new(cfg, sample_gauges, w, &w->obs, err);
    if (st != SBX_OK)
        goto fail;
    bool loopback = false;
    const char *listen = wc->listen ? wc->listen : "127.0.0.1:7443";
    st = open_listener(w, listen, &loopback, err);
    if (st != SBX_OK)
        goto fail;
    bool want_tls = wc->tls_cert_file || wc->tls_key_file;
    st = listener_allowed(w, cfg, listen, loopback, want_tls, err);
    if (st != SBX_OK)
        goto fail;
    if (strcmp(sbx_broker_flavor(broker), "thread") != 0) {
        /* The loop hands executions to the broker and must never block: an embedded broker
         * would run them on the loop thread, a remote one would forward them again. */
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "the worker runs executions on a thread broker, not '%s': set "
                           "broker.flavor to 'thread' in the worker's configuration",
                           sbx_broker_flavor(broker));
        goto fail;
    }
    if (want_tls) {
        w->tls = worker_tls_ctx_new(wc, &w->auth, err);
        if (!w->tls) {
            st = err ? err->code : SBX_E_CONFIG;
            goto fail;
        }
    }
    w->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epoll_fd < 0 || w->wake_fd < 0) {
        st = sbx_error_set(err, SBX_E_INTERNAL, "worker: epoll/eventfd: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &w->listener_kind};
    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->listen_fd, &ev);
    ev.data.ptr = &w->wakeup_kind;
    epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->wake_fd, &ev);
    if (wc->record) {
        st = sbx_broker_record_rotating(broker, wc->record, (uint64_t)wc->record_max_bytes,
                                        (unsigned)wc->record_keep, err);
        if (st != SBX_OK)
            goto fail;
    }
    *out = w;
    return SBX_OK;
fail:
    sbx_worker_free(w);
    return st;
}

void worker_get_limits(const sbx_worker *w, worker_limits *out)
{
    *out = w->limits;
}

void worker_set_limits(sbx_worker *w, const worker_limits *limits)
{
    w->limits = *limits;
}

int sbx_worker_port(const sbx_worker *w)
{
    return w ? w->port : 0;
}

int sbx_worker_metrics_port(const sbx_worker *w)
{
    return w ? worker_obs_metrics_port(w->obs) : 0;
}

sbx_status sbx_worker_log_to(sbx_worker *w, const char *path, const char *level, sbx_error *err)
{
    return worker_obs_log_to(w->obs, path, level, err);
}

void sbx_worker_reopen(sbx_worker *w)
{
    if (!w)
        return;
    atomic_store(&w->reopen_requested, 1);
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one);
    (void)r;
}

void sbx_worker_shutdown(sbx_worker *w)
{
    if (!w)
        return;
    atomic_store(&w->shutdown_requested, 1);
    uint64_t one = 1;
    ssize_t r = write(w->wake_fd, &one, sizeof one);
    (void)r;
}

static void free_dead(sbx_worker *w)
{
    while (w->dead) {
        conn *cn = w->dead;
        w->dead = cn->next;
        free(cn);
    }
}

static void flush_dirty(sbx_worker *w)
{
    for (conn *cn = w->conns; cn;) {
        conn *next = cn->next;
        if (cn->dirty)
            worker_conn_flush(cn);
        cn = next;
    }
}

/* One turn of the loop, by whoever serves the connections (loop_mu held on entry and on
 * return, let go while asleep): the deadlines and the drain, a wait of at most max_wait_ms
 * (-1: none but the deadlines'), the events. false: the loop ends (the drain is over, or
 * *st says why), which only the loop thread (main) acts on; the standby only stops serving. */
static bool loop_turn(sbx_worker *w, int max_wait_ms, bool main, sbx_status *st, sbx_error *err)
{
    struct epoll_event events[WORKER_EPOLL_EVENTS];
    int timeout = expire_deadlines(w);
    flush_dirty(w); /* what the deadlines changed */
    if (w->not_serving && !w->draining && sbx_monotonic_us() >= w->notice_deadline_us)
        start_drain(w);
    if (w->draining) {
        if (main && !w->conns && jobs_idle(w))
            return false;
        if (sbx_monotonic_us() >= w->drain_deadline_us) {
            /* Out of time: cancel what is left and close every connection. */
            while (w->conns)
                worker_conn_close(w->conns);
            free_dead(w);
            return false;
        }
    }
    /* Only the holder of loop_mu writes output_polling (worker_drain_posted): no lock to read
     * it, where the lock would make the loop wait for an executor posting its output. */
    bool polling = w->output_polling;
    if (polling && (timeout < 0 || timeout > WORKER_OUTPUT_POLL_MS))
        timeout = WORKER_OUTPUT_POLL_MS;
    if (max_wait_ms >= 0 && (timeout < 0 || timeout > max_wait_ms))
        timeout = max_wait_ms;
    /* Asleep, the loop lets go of loop_mu: a job's thread then answers its call itself
     * (jobs.c). Whatever was posted meanwhile is applied first. */
    int n;
    if (worker_release(w)) {
        n = epoll_wait(w->epoll_fd, events, WORKER_EPOLL_EVENTS, timeout);
        int saved = errno;
        worker_hold(w);
        errno = saved;
    } else {
        worker_apply_posted(w);
        n = epoll_wait(w->epoll_fd, events, WORKER_EPOLL_EVENTS, 0); /* what else is ready */
    }
    if (n == 0 && polling)
        worker_drain_posted(w);
    if (n < 0 && errno != EINTR) {
        *st = sbx_error_set(err, SBX_E_INTERNAL, "worker: epoll_wait: %s", strerror(errno));
        return false;
    }
    for (int i = 0; i < n; i++) {
        enum ev_kind *kind = events[i].data.ptr;
        if (*kind == EV_LISTENER && w->listen_fd >= 0) {
            worker_accept_all(w);
        } else if (*kind == EV_WAKEUP) {
            worker_drain_posted(w);
            if (atomic_exchange(&w->reopen_requested, 0))
                reopen_files(w);
            if (atomic_load(&w->shutdown_requested) && !w->not_serving)
                begin_shutdown(w);
        } else if (*kind == EV_CONN) {
            worker_conn_event((conn *)(void *)kind, events[i].events);
        }
    }
    flush_dirty(w);
    free_dead(w);
    return true;
}

/* The standby thread: asleep on the cover timer until the loop thread's inline runs outlast
 * it, then serves the connections until they end (jobs.c). Never while the loop thread serves
 * them: one thread at a time waits in epoll_wait and handles what it returned (the events
 * point at connections, which the thread that serves frees after its turn). */
static void *standby_main(void *arg)
{
    sbx_worker *w = arg;
    while (!atomic_load(&w->standby_stop)) {
        uint64_t expirations;
        if (read(w->cover_timer_fd, &expirations, sizeof expirations) < 0 && errno != EINTR)
            break;
        if (!atomic_load(&w->inline_running))
            continue; /* the runs it was armed for have ended */
        worker_hold(w);
        /* Still running, with loop_mu held here: the loop thread cannot be serving, and will
         * not until covering is over (worker_run_inline waits for it). */
        if (atomic_load(&w->inline_running) && w->loop_open) {
            w->covering = true;
            worker_hand_off_inline(w);
            sbx_status st = SBX_OK;
            sbx_error err = {0};
            while (atomic_load(&w->inline_running) && !atomic_load(&w->standby_stop) &&
                   loop_turn(w, WORKER_COVER_POLL_MS, false, &st, &err))
                ;
            w->covering = false;
            pthread_cond_broadcast(&w->cover_done);
        }
        while (!worker_release(w))
            worker_apply_posted(w);
    }
    return NULL;
}

/* Starts the standby (loop_mu held). Without a timer or a thread, every Execute goes to the
 * broker's executors, as before inline runs. */
static void standby_start(sbx_worker *w)
{
    w->loop_thread = pthread_self();
    w->cover_timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    atomic_store(&w->standby_stop, 0);
    w->standby_up =
        w->cover_timer_fd >= 0 && pthread_create(&w->standby_thread, NULL, standby_main, w) == 0;
}

/* Ends the standby (loop_mu held on entry and on return, let go while it is joined). */
static void standby_stop(sbx_worker *w)
{
    if (w->standby_up) {
        atomic_store(&w->standby_stop, 1);
        struct itimerspec now = {.it_value = {.tv_nsec = 1}};
        timerfd_settime(w->cover_timer_fd, 0, &now, NULL);
        while (!worker_release(w))
            worker_apply_posted(w);
        pthread_join(w->standby_thread, NULL);
        worker_hold(w);
        w->standby_up = false;
    }
    if (w->cover_timer_fd >= 0)
        close(w->cover_timer_fd);
    w->cover_timer_fd = -1;
}

sbx_status sbx_worker_run(sbx_worker *w, sbx_error *err)
{
    sbx_status st = SBX_OK;

    worker_hold(w);
    w->loop_open = true;
    standby_start(w);
    for (;;) {
        bool go = loop_turn(w, -1, true, &st, err);
        worker_run_inline(w); /* the turn's Executes, if it kept any */
        if (!go)
            break;
    }
    standby_stop(w);
    /* Closing the connections cancels every job still in the broker (queued ones complete at
     * once as cancelled, running ones through the engine's cancel); wait for their finals, which
     * hold references to the calls. */
    while (w->conns)
        worker_conn_close(w->conns);
    free_dead(w);
    w->loop_open = false; /* from now on, jobs' threads post their finals */
    while (w->jobs_in_flight > 0) {
        if (!worker_release(w)) {
            worker_apply_posted(w);
            continue;
        }
        struct pollfd pfd = {.fd = w->wake_fd, .events = POLLIN};
        int r = poll(&pfd, 1, -1);
        int saved = errno;
        worker_hold(w);
        if (r < 0 && saved != EINTR)
            break;
        worker_drain_posted(w);
    }
    while (!worker_release(w))
        worker_apply_posted(w);
    return st;
}

void sbx_worker_free(sbx_worker *w)
{
    if (!w)
        return;
    while (w->conns)
        worker_conn_close(w->conns);
    free_dead(w);
    /* A callback that posted the last final may still be writing the eventfd. */
    while (atomic_load_explicit(&w->posting, memory_order_acquire) > 0)
        sched_yield();
    if (w->listen_fd >= 0)
        close(w->listen_fd);
    if (w->epoll_fd >= 0)
        close(w->epoll_fd);
    if (w->wake_fd >= 0)
        close(w->wake_fd);
    if (w->tls)
        SSL_CTX_free(w->tls);
    worker_obs_free(w->obs); /* after the calls: closing them wrote their lines */
    worker_auth_free(&w->auth);
    free(w->caller_buffered);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->loop_mu);
    pthread_cond_destroy(&w->cover_done);
    free(w);
}
