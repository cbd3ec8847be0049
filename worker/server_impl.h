/* server_impl.h - the event loop's own types, shared by the files of the gRPC server in worker/
 * (never installed, never included outside this folder, and not by the tests: they see
 * worker_internal.h): the limits the loop enforces against hostile peers, a call (one RPC on
 * one HTTP/2 stream), a connection, what the broker's callbacks post back to the loop, and
 * struct sbx_worker itself. Who does what:
 *   server.c  the loop and the public API (sbx_worker_new/run/shutdown/free, listener,
 *             deadlines, drain, gauges);
 *   conn.c    connection I/O: accept, TLS handshake, reads and writes, the HTTP/2 session,
 *             shedding and closing;
 *   call.c    gRPC calls: the HTTP/2 stream callbacks, header checks, authentication, the
 *             request body and its budgets, dispatch, Health, reflection, the response;
 *   jobs.c    the hand-off to the broker and the results it posts back through the eventfd.
 * Everything here belongs to the loop thread unless a field says otherwise; "the loop thread"
 * means whoever holds loop_mu: the thread in sbx_worker_run, or an executor answering its own
 * call while the loop sleeps (jobs.c). */
#ifndef SBX_WORKER_SERVER_IMPL_H
#define SBX_WORKER_SERVER_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "worker/observe.h"
#include "worker/worker_internal.h"

/* ---- limits (each with why) ---------------------------------------------------------------- */

/* Open connections. A fleet sits behind a load balancer holding a few long-lived connections,
 * so thousands is generous; the bound stops a connection flood from exhausting file
 * descriptors. At the cap a new connection sheds the oldest one that has not yet proven itself
 * (no authenticated request), else the longest idle one, else it is closed at once: callers
 * that authenticated stay servable whatever unauthenticated peers do. */
#define WORKER_MAX_CONNECTIONS 4096
/* Connections one peer address may hold before they proved themselves (sent a complete,
 * authenticated request): a client opens a handful at once, a balancer proves each connection
 * with its first request; one address cannot fill the connection cap with silent ones. */
#define WORKER_MAX_UNPROVEN_PER_PEER 64
/* Time from accept to the first complete, authenticated request on a connection (any complete
 * request when the worker requires no authentication; a verified client certificate of a
 * configured caller proves the connection at the handshake). It covers the TLS handshake and
 * the preface, and is not extended by PINGs, SETTINGS, trickled bytes or streams that never
 * end, so a connection that says nothing useful cannot hold a slot for longer. */
#define WORKER_FIRST_REQUEST_US (10 * 1000000LL)
/* A proven connection with no stream open for this long gets GOAWAY and closes: gRPC clients
 * and libcurl reconnect on demand, and idle connections do not pile up to the cap. Minutes, so
 * a pooled client between calls rarely meets it. */
#define WORKER_IDLE_US (300 * 1000000LL)
/* Streams a connection may have open before it proved itself; more are refused
 * (RST_STREAM REFUSED_STREAM, which clients retry). Each costs a call and nghttp2's stream
 * state (about a kilobyte), so unproven connections together hold a few tens of MiB at most
 * instead of 1,024 streams each. A caller with credentials proves its connection with its
 * first request's headers, before it could open more. */
#define WORKER_UNPROVEN_STREAMS 16
/* SETTINGS_MAX_CONCURRENT_STREAMS per connection: a multiplexing client (the remote broker)
 * may keep 1,000 calls in flight on one connection; the executor queue bounds real work. */
#define WORKER_MAX_STREAMS 1024
/* Per-stream receive window: big enough that a 1 MiB request needs no WINDOW_UPDATE round trip.
 * Windows are granted back only for bytes the worker keeps (nghttp2's automatic refill is off):
 * a refused stream can push at most this much more, which is read and dropped. */
#define WORKER_STREAM_WINDOW (1 << 20)
/* Connection receive window: lets several large requests upload concurrently. */
#define WORKER_CONN_WINDOW (16 << 20)
/* Request bytes buffered for one connection's unfinished requests (their buffers' capacity):
 * two requests of the default max_message_bytes. A stream whose next bytes would pass it is
 * answered RESOURCE_EXHAUSTED, so a connection cannot pin more however many streams it opens
 * (before, 64 streams that never end held 64 x 16 MiB). */
#define WORKER_CONN_BUFFER_MAX (32u << 20)
/* Request bytes the whole worker holds: unfinished requests on every connection plus the wire
 * size of the decoded requests waiting for or running on an executor, plus the answers (output,
 * completions) their clients have not read yet. Past it new request bytes are refused the same
 * way, and a call whose answer passes it is reset RESOURCE_EXHAUSTED: memory is bounded by this
 * total, not by connections x streams x message size, nor by calls x output limit. */
#define WORKER_BUFFER_TOTAL_MAX (256u << 20)
/* Of that total, what the streams that did not authenticate (Health and reflection on a worker
 * that requires authentication) may buffer together, and the largest message one of them may
 * send: they need a few bytes, and must not take the room of callers that authenticated. */
#define WORKER_UNAUTHENTICATED_BUFFER_MAX (4u << 20)
/* Of that total, what one configured caller may hold when there are several: all but a quarter,
 * so one tenant's held or large requests cannot refuse every other tenant's. */
#define WORKER_CALLER_SHARE(total) ((total) - (total) / 4)
/* Reflection answers one stream may hold unsent: a client that sends requests but does not read
 * the answers (a zero window) is stopped here, RESOURCE_EXHAUSTED, instead of growing the
 * worker's memory ~275 bytes per byte it sends (an answer is ~8 KiB, a request 29 bytes).
 * Real clients (grpcurl, grpcio) wait for each answer. The buffer the answers take is charged
 * to the worker's budgets (and an unauthenticated stream's to theirs). */
#define WORKER_REFLECTION_PENDING_MAX (64u << 10)
/* The largest DATA frame a peer may send (HTTP/2's SETTINGS_MAX_FRAME_SIZE, not raised): a
 * reflection stream's buffer holds a partial message and at most one frame more. */
#define WORKER_MAX_FRAME 16384
#define WORKER_UNAUTHENTICATED_MESSAGE_MAX (16u << 10)
/* SETTINGS_MAX_HEADER_LIST_SIZE: gRPC suggests headers stay under 8 KiB; twice that leaves
 * room for a long bearer token and proxy metadata. */
#define WORKER_MAX_HEADER_LIST (16 << 10)
/* Longest authorization header value we look at (a bearer token plus "Bearer "). */
#define WORKER_MAX_AUTH_HEADER 4096
/* Bytes read from a socket per read call. */
#define WORKER_READ_CHUNK (16 << 10)
/* Bytes gathered from nghttp2 before writing: a few TLS records, so a large output is sent in
 * big writes while one connection cannot starve the loop. */
#define WORKER_WRITE_BATCH (64 << 10)
/* Time a refused (non-HTTP/2) connection gets to read its answer and go away. */
#define WORKER_LINGER_US (10 * 1000000LL)
/* Most output bytes coalesced into one ExecuteEvent while the loop is busy: big enough to
 * amortise framing, small enough to keep streaming interactive and memory bounded per call. */
#define WORKER_OUTPUT_COALESCE (256 << 10)
/* While output flows, the loop collects it at least this often instead of being woken per
 * chunk: coalesces a line-by-line printer into a few messages per millisecond and adds at most
 * this much to an interactive stream's latency. */
#define WORKER_OUTPUT_POLL_MS 1
/* First buffer of an output run: most programs print lines; it doubles as a run grows. */
#define WORKER_OUTPUT_FIRST_CAP 256
/* Describe calls answered at once, each on its own thread: a client asks once per connection,
 * so a handful is plenty, and the bound stops a Describe flood from spawning threads. */
#define WORKER_MAX_DESCRIBES 8
/* Stack of a Describe thread: it opens providers (libcurl, OpenSSL), so generous. */
#define WORKER_DESCRIBE_STACK (1 << 20)
/* Bytes read and dropped from a refused (non-HTTP/2) connection before it is closed anyway. */
#define WORKER_LINGER_MAX (64 << 10)
/* The loop thread runs the Executes of each turn itself when the broker can grant each a slot
 * at once (no executor woken, no thread hand-off: most calls end in microseconds). Should its
 * runs keep it from the connections longer than this, the standby thread wakes, hands those
 * still waiting to the executors and serves the connections meanwhile, so a slow call delays
 * the others by at most about this much. */
#define WORKER_INLINE_COVER_US 500
/* While the standby serves for a loop thread running a call, it looks this often whether that
 * call has ended (the loop thread then serves again and the standby goes back to sleep). */
#define WORKER_COVER_POLL_MS 5
/* epoll events handled per wakeup. */
#define WORKER_EPOLL_EVENTS 64
/* listen(2) backlog. */
#define WORKER_LISTEN_BACKLOG 512

enum ev_kind { EV_LISTENER = 1, EV_WAKEUP, EV_CONN };

enum rpc_method {
    RPC_NONE = 0,
    RPC_EXECUTE,
    RPC_EXECUTE_STREAM,
    RPC_DESCRIBE,
    RPC_HEALTH_CHECK,
    RPC_HEALTH_WATCH,
    RPC_REFLECTION, /* grpc.reflection.v1 or v1alpha ServerReflectionInfo (bidi) */
    RPC_UNKNOWN,
};

typedef struct conn conn;
typedef struct call call;

/* One RPC = one HTTP/2 stream. Owned by the loop thread; the broker holds a reference while
 * the call's job runs (until its completion is posted back) and only reads `req` and `cancel`
 * (written before the job is submitted, except `cancel`, which the loop sets to abandon the
 * execution). */
struct call {
    atomic_int refs; /* the stream's + the job's */
    sbx_worker *w;
    conn *conn;        /* NULL once the stream is closed (loop thread only) */
    call *prev, *next; /* in conn->calls */
    int32_t stream_id;
    enum rpc_method method;
    /* request headers */
    bool is_post, is_grpc, bad_encoding, bad_timeout, auth_too_long;
    char *authorization;
    size_t authorization_len;
    int64_t deadline_us; /* sbx_monotonic_us() deadline; 0 = none */
    /* request body; in_cap is charged to the connection's and the worker's buffer budgets */
    uint8_t *in;
    size_t in_len, in_cap;
    bool authenticated;          /* the caller authenticated (or none is required) */
    const worker_caller *caller; /* who, when it is a configured caller */
    size_t req_charge;           /* the decoded request's wire size, charged to the total */
    /* response: `decided` = status chosen, later events for this call are dropped */
    bool decided, response_started, final, deferred, job_running;
    uint8_t *out;
    size_t out_len, out_off, out_cap;
    size_t out_charge; /* of out_cap, charged to the worker's budgets (worker_call_append) */
    int grpc_status;
    char *grpc_message;
    /* the job */
    sbx_request *req;
    volatile int cancel;
    struct posted *open_output; /* output still accepting appends (guarded by w->lock) */
    call *inline_next;          /* in w's inline list (guarded by w->lock) */
    worker_call_obs obs;        /* for the log line and metrics (observe.h) */
    bool watch_known;           /* Health/Watch of a service we serve (loop thread) */
};

struct conn {
    enum ev_kind kind; /* EV_CONN; first, for the epoll pointer */
    sbx_worker *w;
    int fd;
    SSL *ssl;
    bool handshaking, closing, dirty, http1_refused;
    size_t preface_seen; /* h2c: bytes of the client connection preface checked so far */
    bool lingering;      /* refused: answer written, discarding input until the peer closes */
    int64_t accepted_us; /* sbx_monotonic_us() at accept, for the first-request deadline */
    /* Proven: a complete, authenticated request arrived (or a caller's certificate verified).
     * Until then the connection is on WORKER_FIRST_REQUEST_US and is shed first at the cap. */
    bool proven;
    int64_t idle_since_us; /* proven and no stream open since then (for WORKER_IDLE_US) */
    bool goaway_sent;      /* idle: GOAWAY submitted, closing once written */
    size_t buffered;       /* request bytes its calls buffer (in_cap), WORKER_CONN_BUFFER_MAX */
    size_t n_calls;        /* streams open (calls), WORKER_UNPROVEN_STREAMS until proven */
    uint8_t peer[16];      /* the peer's address (IPv4 as v4-mapped IPv6), for the per-peer cap */
    size_t discarded;
    nghttp2_session *h2;
    uint8_t *wbuf;
    size_t wlen, woff, wcap;
    uint32_t events;
    call *calls;
    conn *prev, *next;
    const worker_caller *cert_caller;
    char cert_cn[256];
};

/* Something an executor thread hands back to the loop. */
typedef struct posted {
    struct posted *next;
    call *c;
    uint8_t *bytes; /* framed message(s) to send, malloc'd; may be NULL */
    size_t len;
    /* output not yet framed: contiguous chunks of one stream coalesce here until the loop
     * takes them (so a program printing byte by byte does not cost a message per byte) */
    bool is_output;
    Sbx__V1__Stream stream;
    uint64_t offset;
    size_t cap;
    bool final; /* the job is over: bytes is the last message, drop the job reference */
    int grpc_status;
    char *grpc_message;
    conn *cn; /* the call's connection as the post was applied, to write to after the batch */
} posted;

struct sbx_worker {
    enum ev_kind listener_kind; /* EV_LISTENER */
    enum ev_kind wakeup_kind;   /* EV_WAKEUP */
    const sbx_config *cfg;
    sbx_engine *engine;
    sbx_broker *broker;
    worker_auth auth;
    SSL_CTX *tls;
    int listen_fd, epoll_fd, wake_fd;
    int port;
    size_t max_message;
    conn *conns;
    conn *dead; /* closed during this epoll batch, freed after it */
    size_t n_conns;
    worker_limits limits;    /* read by the loop thread only */
    size_t buffered;         /* request bytes held, WORKER_BUFFER_TOTAL_MAX (loop thread) */
    size_t unauth_buffered;  /* of them, by unauthenticated streams (loop thread) */
    size_t *caller_buffered; /* of them, by each configured caller (auth.callers' order), when
                              * there are two or more: one may hold WORKER_CALLER_SHARE */
    atomic_int shutdown_requested;
    bool draining;
    int64_t drain_deadline_us;
    size_t calls_with_deadline;

    /* jobs: submitted by the loop, their callbacks post back here (lock guards the list) */
    size_t jobs_in_flight;    /* submitted, final not yet drained (loop thread only) */
    size_t describes_running; /* of them, Describe threads (loop thread only) */
    pthread_mutex_t lock;
    posted *posted_head, *posted_tail;
    bool wake_pending;
    atomic_int posting; /* callbacks inside post(): w outlives them (sbx_worker_free) */
    /* the loop looks at the list within WORKER_OUTPUT_POLL_MS anyway (written by the loop
     * under lock, read by posters under lock and by the loop without) */
    bool output_polling;
    /* Who acts for the loop. loop_mu is held by whoever touches the connections, the calls
     * and everything else marked "loop thread" here: the loop thread, except while it sleeps
     * in epoll_wait, or a job's thread that found it free when its final came (jobs.c), which
     * then applies that final and sends it itself instead of waking the loop. held (under
     * lock): someone holds loop_mu and looks at the posted list before letting go of it, so a
     * post needs no eventfd write. loop_open (under loop_mu): sbx_worker_run is serving; a
     * job's thread only acts for the loop while it is. */
    pthread_mutex_t loop_mu;
    bool held;
    bool loop_open;
    /* Inline runs (jobs.c): inline_head/tail (under lock), the Executes this turn's loop thread
     * runs itself, one after the other, once the turn's I/O is done; loop_thread, the caller of
     * sbx_worker_run, the only thread that keeps any; standby_up, whether the standby thread
     * (server.c) exists, without which none is kept. The standby sleeps on cover_timer_fd,
     * which the loop thread arms for WORKER_INLINE_COVER_US before a turn's runs; woken while
     * they go on (inline_running), it hands the list's rest to the executors and serves the
     * connections (holding loop_mu, as the loop does) until they end; covering (under
     * loop_mu) says it does, and the loop thread waits on cover_done for it to stop before it
     * serves again. standby_stop ends it. */
    call *inline_head, *inline_tail;
    pthread_t loop_thread;
    pthread_t standby_thread;
    bool standby_up;
    int cover_timer_fd;
    atomic_int inline_running;
    atomic_int standby_stop;
    bool covering;
    pthread_cond_t cover_done;
    worker_obs *obs;             /* log lines and metrics (observe.c) */
    bool not_serving;            /* shutdown requested: health says NOT_SERVING (loop thread) */
    int64_t notice_deadline_us;  /* end of the drain notice (worker.drain_notice_ms) */
    atomic_int reopen_requested; /* sbx_worker_reopen (a signal handler) -> the loop */
};

/* ---- call.c: a call's life and its response --------------------------------------------- */

/* Drops a reference to c; the last one (the stream's or the job's) logs the call and frees it. */
void worker_call_unref(call *c);
/* Ends c with a gRPC status and a printf-style message (once; later decisions are dropped). */
void worker_call_decide(call *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Queues len response bytes (framed messages) on c; false when out of memory. */
bool worker_call_append(call *c, const uint8_t *data, size_t len);
/* After appending: true when the answers c holds keep the worker within its budgets (its total,
 * the caller's share, the unauthenticated budget); otherwise c is decided RESOURCE_EXHAUSTED, its
 * job cancelled and its stream reset, and false. */
bool worker_call_out_admitted(call *c);
/* Sends c's response headers if not yet sent (messages follow as they are appended). */
void worker_call_start_response(call *c);
/* Lets nghttp2 send what was appended to c since it last ran dry. */
void worker_call_resume(call *c);
/* Detaches c from its stream and connection (the stream closed): a running job is cancelled. */
void worker_call_detach(call *c);
/* The nghttp2 callbacks that turn a connection's streams into calls (NULL: out of memory). */
nghttp2_session_callbacks *worker_h2_callbacks(void);
/* Sends one complete message on c, then grpc-status OK. */
void worker_call_reply(call *c, const ProtobufCMessage *m);

/* ---- health.c: grpc.health.v1.Health ------------------------------------------------------ */

/* Check, with the request message msg[0..mlen). */
void worker_health_check(call *c, const uint8_t *msg, size_t mlen);
/* Watch: the current status on c's stream now, later changes by worker_health_changed. */
void worker_health_watch(call *c, const uint8_t *msg, size_t mlen);
/* Every open Health/Watch of a served service learns the new serving status. */
void worker_health_changed(sbx_worker *w);

/* ---- jobs.c: the hand-off to the broker ---------------------------------------------------- */

/* Starts c's job (Execute, ExecuteStream on the broker; Describe on a thread of its own); the
 * job holds a reference to c until its final is drained. */
void worker_start_job(sbx_worker *w, call *c);
/* Runs the turn's inline Executes, if any, on this (the loop) thread, loop_mu let go meanwhile
 * and the standby armed to take over should one run long; loop_mu held on entry and on
 * return. */
void worker_run_inline(sbx_worker *w);
/* The standby, about to serve for a long inline run: the Executes still waiting behind it go
 * to the executors. */
void worker_hand_off_inline(sbx_worker *w);
/* Applies everything the jobs posted since the last call (loop thread, on the eventfd). */
void worker_drain_posted(sbx_worker *w);
/* Takes loop_mu for the loop thread (after epoll_wait). */
void worker_hold(sbx_worker *w);
/* Lets go of loop_mu before the loop sleeps, unless something was posted meanwhile: then
 * false, loop_mu still held (apply it with worker_apply_posted and look again). */
bool worker_release(sbx_worker *w);
/* Applies the posted list without reading the eventfd (loop_mu held). */
void worker_apply_posted(sbx_worker *w);

/* ---- conn.c: connections ----------------------------------------------------------------- */

/* Accepts every pending connection on the listener (the caps make room or refuse). */
void worker_accept_all(sbx_worker *w);
/* Handles an epoll event on cn (handshake, reads, writes; may close it). */
void worker_conn_event(conn *cn, uint32_t events);
/* Writes everything nghttp2 has to send on cn (until the socket would block; may close it). */
void worker_conn_flush(conn *cn);
/* Closes cn now: its calls are detached (their jobs cancelled), cn is freed after the batch. */
void worker_conn_close(conn *cn);
/* Sends a GOAWAY saying why when it can, then closes cn. */
void worker_conn_shed(conn *cn, const char *why);
/* cn sent a complete, authenticated request: off the first-request deadline, shed last. */
void worker_conn_prove(conn *cn);

#endif
