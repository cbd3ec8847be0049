/* conn.c - sbx-worker's connections: accepting them (with room made under the connection caps
 * by shedding the unproven or idle), the TLS handshake and the h2c preface check, reads and
 * writes over the socket or OpenSSL, the HTTP/2 session each one carries (nghttp2 through its
 * mem_recv/mem_send interface, flushed through a write buffer), a plain HTTP/1.1 answer to
 * what is not HTTP/2, and closing. What arrives on a stream is call.c's; everything here runs
 * on the loop thread and never blocks.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <openssl/err.h>

#include "worker/server_impl.h"
#include "worker/worker_internal.h"

/* The HTTP/2 client connection preface (RFC 9113 §3.4). */
static const char H2_PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* The connection sent a complete, authenticated request: it leaves the first-request deadline
 * and is no longer shed before the connections of other callers. */
void worker_conn_prove(conn *cn)
{
    if (cn->proven)
        return;
    cn->proven = true;
    cn->idle_since_us = sbx_monotonic_us();
}

static bool conn_start_h2(conn *cn)
{
    nghttp2_session_callbacks *cb = worker_h2_callbacks();
    nghttp2_option *opt = NULL;
    if (!cb || nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        return false;
    }
    /* Flow control follows what the worker keeps (on_data_chunk), not what arrived. */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    int rv = nghttp2_session_server_new2(&cn->h2, cb, cn, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rv != 0)
        return false;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, WORKER_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WORKER_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, WORKER_MAX_HEADER_LIST},
    };
    if (nghttp2_submit_settings(cn->h2, NGHTTP2_FLAG_NONE, settings,
                                sizeof settings / sizeof settings[0]) != 0)
        return false;
    nghttp2_session_set_local_window_size(cn->h2, NGHTTP2_FLAG_NONE, 0, WORKER_CONN_WINDOW);
    if (cn->w->draining)
        nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
    cn->dirty = true;
    return true;
}

static bool wbuf_append(conn *cn, const uint8_t *data, size_t len)
{
    if (cn->wlen + len > cn->wcap) {
        size_t cap = cn->wcap ? cn->wcap : 16384;
        while (cap < cn->wlen + len)
            cap *= 2;
        uint8_t *p = realloc(cn->wbuf, cap);
        if (!p)
            return false;
        cn->wbuf = p;
        cn->wcap = cap;
    }
    memcpy(cn->wbuf + cn->wlen, data, len);
    cn->wlen += len;
    return true;
}

/* > 0 bytes, 0 EOF, -1 would block, -2 error. */
static ssize_t conn_read(conn *cn, uint8_t *buf, size_t len)
{
    if (!cn->ssl) {
        ssize_t n = recv(cn->fd, buf, len, 0);
        if (n >= 0)
            return n;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
    }
    int n = SSL_read(cn->ssl, buf, (int)len);
    if (n > 0)
        return n;
    int e = SSL_get_error(cn->ssl, n);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return -1;
    return e == SSL_ERROR_ZERO_RETURN ? 0 : -2;
}

static ssize_t conn_write(conn *cn, const uint8_t *buf, size_t len)
{
    if (!cn->ssl) {
        ssize_t n = send(cn->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -1 : -2;
    }
    int n = SSL_write(cn->ssl, buf, (int)(len > INT32_MAX ? INT32_MAX : len));
    if (n > 0)
        return n;
    int e = SSL_get_error(cn->ssl, n);
    ERR_clear_error();
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? -1 : -2;
}

static void conn_set_events(conn *cn, uint32_t events)
{
    if (events == cn->events)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = cn};
    epoll_ctl(cn->w->epoll_fd, EPOLL_CTL_MOD, cn->fd, &ev);
    cn->events = events;
}

/* Writes everything nghttp2 has to send (until the socket would block). */
void worker_conn_flush(conn *cn)
{
    cn->dirty = false;
    if (cn->handshaking)
        return;
    for (;;) {
        if (cn->woff < cn->wlen) {
            ssize_t n = conn_write(cn, cn->wbuf + cn->woff, cn->wlen - cn->woff);
            if (n > 0) {
                cn->woff += (size_t)n;
                continue;
            }
            if (n == -2) {
                worker_conn_close(cn);
                return;
            }
            break; /* would block: wait for EPOLLOUT */
        }
        cn->woff = cn->wlen = 0;
        if (cn->http1_refused) {
            /* Half-close and read what the peer still sends: closing with unread input would
             * reset the connection and could destroy the answer before the peer reads it. */
            shutdown(cn->fd, SHUT_WR);
            cn->lingering = true;
            conn_set_events(cn, EPOLLIN);
            return;
        }
        if (!cn->h2) {
            worker_conn_close(cn);
            return;
        }
        /* h2c: say nothing (not even SETTINGS) until the peer proved it speaks HTTP/2, so a
         * refused HTTP/1.1 client reads a clean HTTP/1.1 answer. */
        bool quiet = !cn->ssl && cn->preface_seen < sizeof H2_PREFACE - 1;
        while (!quiet && cn->wlen < WORKER_WRITE_BATCH) {
            const uint8_t *data;
            ssize_t n = nghttp2_session_mem_send(cn->h2, &data);
            if (n < 0) {
                worker_conn_close(cn);
                return;
            }
            if (n == 0)
                break;
            if (!wbuf_append(cn, data, (size_t)n)) {
                worker_conn_close(cn);
                return;
            }
        }
        if (cn->wlen == 0)
            break;
    }
    bool pending = cn->woff < cn->wlen;
    if (!pending && !nghttp2_session_want_read(cn->h2) && !nghttp2_session_want_write(cn->h2)) {
        worker_conn_close(cn);
        return;
    }
    if (!pending && cn->w->draining && !cn->calls) {
        worker_conn_close(cn); /* drained: GOAWAY sent, nothing in flight, nothing left to write */
        return;
    }
    conn_set_events(cn, EPOLLIN | (pending ? EPOLLOUT : 0));
}

/* A request that is not HTTP/2 (HTTP/1.1, random bytes): one plain answer, then close. */
static void conn_refuse_http1(conn *cn)
{
    static const char resp[] = "HTTP/1.1 505 HTTP Version Not Supported\r\n"
                               "content-type: text/plain\r\n"
                               "connection: close\r\n"
                               "content-length: 40\r\n\r\n"
                               "sbx-worker speaks gRPC over HTTP/2 only\n";
    cn->woff = cn->wlen = 0;
    wbuf_append(cn, (const uint8_t *)resp, sizeof resp - 1);
    cn->http1_refused = true;
    conn_set_events(cn, EPOLLOUT);
}

static void conn_handshake(conn *cn)
{
    int rv = SSL_do_handshake(cn->ssl);
    if (rv != 1) {
        int e = SSL_get_error(cn->ssl, rv);
        ERR_clear_error();
        if (e == SSL_ERROR_WANT_READ) {
            conn_set_events(cn, EPOLLIN);
            return;
        }
        if (e == SSL_ERROR_WANT_WRITE) {
            conn_set_events(cn, EPOLLOUT);
            return;
        }
        worker_conn_close(cn); /* bad certificate, no h2 in ALPN, garbage: nothing else to say */
        return;
    }
    const unsigned char *alpn = NULL;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(cn->ssl, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
        worker_conn_close(cn);
        return;
    }
    cn->handshaking = false;
    if (worker_tls_peer_cn(cn->ssl, cn->cert_cn, sizeof cn->cert_cn))
        cn->cert_caller = worker_auth_by_cert(&cn->w->auth, cn->cert_cn);
    if (cn->cert_caller)
        worker_conn_prove(cn); /* a configured caller's verified certificate */
    if (!conn_start_h2(cn)) {
        worker_conn_close(cn);
        return;
    }
    worker_conn_flush(cn);
}

static void conn_readable(conn *cn)
{
    uint8_t buf[WORKER_READ_CHUNK];
    for (;;) {
        ssize_t n = conn_read(cn, buf, sizeof buf);
        if (n == -1)
            break;
        if (n <= 0) {
            worker_conn_close(cn);
            return;
        }
        if (!cn->ssl && cn->preface_seen < sizeof H2_PREFACE - 1) {
            /* Not HTTP/2 from the first byte (HTTP/1.1, a TLS hello, noise): answer in plain
             * HTTP/1.1 rather than with an HTTP/2 frame the peer cannot read. */
            size_t want = sizeof H2_PREFACE - 1 - cn->preface_seen;
            size_t k = (size_t)n < want ? (size_t)n : want;
            if (memcmp(buf, H2_PREFACE + cn->preface_seen, k) != 0) {
                conn_refuse_http1(cn);
                return;
            }
            cn->preface_seen += k;
        }
        ssize_t rv = nghttp2_session_mem_recv(cn->h2, buf, (size_t)n);
        if (rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
            conn_refuse_http1(cn);
            return;
        }
        if (rv < 0) {
            worker_conn_close(cn);
            return;
        }
        /* A short read drained the socket: the epoll set is level-triggered, so whatever
         * arrives next is reported again, and the read that would only say EAGAIN (one syscall
         * per call, every call) is skipped. TLS keeps reading: OpenSSL may hold whole records
         * that epoll cannot see. */
        if (!cn->ssl && (size_t)n < sizeof buf)
            break;
    }
    worker_conn_flush(cn);
}

void worker_conn_event(conn *cn, uint32_t events)
{
    if (cn->handshaking) {
        conn_handshake(cn);
        return;
    }
    if (cn->lingering) {
        uint8_t sink[WORKER_READ_CHUNK];
        ssize_t n = recv(cn->fd, sink, sizeof sink, 0);
        if (n > 0)
            cn->discarded += (size_t)n;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
            cn->discarded > WORKER_LINGER_MAX)
            worker_conn_close(cn);
        return;
    }
    if (cn->http1_refused) {
        worker_conn_flush(cn);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        conn_readable(cn);
        return; /* conn_readable flushes (and may have closed cn) */
    }
    if (events & EPOLLOUT)
        worker_conn_flush(cn);
}

void worker_conn_close(conn *cn)
{
    sbx_worker *w = cn->w;
    while (cn->calls) {
        call *c = cn->calls;
        if (cn->h2)
            nghttp2_session_set_stream_user_data(cn->h2, c->stream_id, NULL);
        worker_call_detach(c);
    }
    if (cn->h2)
        nghttp2_session_del(cn->h2);
    if (cn->ssl)
        SSL_free(cn->ssl);
    epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, cn->fd, NULL);
    close(cn->fd);
    if (cn->prev)
        cn->prev->next = cn->next;
    else
        w->conns = cn->next;
    if (cn->next)
        cn->next->prev = cn->prev;
    w->n_conns--;
    free(cn->wbuf);
    /* An event for cn may still be pending in the current epoll batch: it is freed after the
     * batch (sbx_worker_run), and its kind marks it dead meanwhile. */
    cn->kind = 0;
    cn->fd = -1;
    cn->h2 = NULL;
    cn->ssl = NULL;
    cn->wbuf = NULL;
    cn->prev = NULL;
    cn->next = w->dead;
    w->dead = cn;
}

/* Sheds cn: a GOAWAY that says why (when HTTP/2 is up), written if the socket takes it at
 * once, then the connection closes and its calls are cancelled. */
void worker_conn_shed(conn *cn, const char *why)
{
    bool h2_up = cn->h2 && !cn->handshaking && !cn->http1_refused && !cn->lingering &&
                 (cn->ssl || cn->preface_seen == sizeof H2_PREFACE - 1);
    if (h2_up && nghttp2_submit_goaway(cn->h2, NGHTTP2_FLAG_NONE,
                                       nghttp2_session_get_last_proc_stream_id(cn->h2),
                                       NGHTTP2_NO_ERROR, (const uint8_t *)why, strlen(why)) == 0) {
        const uint8_t *data;
        ssize_t n;
        while (cn->wlen < WORKER_WRITE_BATCH && (n = nghttp2_session_mem_send(cn->h2, &data)) > 0)
            if (!wbuf_append(cn, data, (size_t)n))
                break;
        if (cn->woff < cn->wlen)
            (void)conn_write(cn, cn->wbuf + cn->woff, cn->wlen - cn->woff);
    }
    worker_conn_close(cn);
}

/* The peer address as 16 bytes (IPv4 v4-mapped), so one comparison serves both families. */
static void peer_key(const struct sockaddr_storage *ss, uint8_t out[16])
{
    memset(out, 0, 16);
    if (ss->ss_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else if (ss->ss_family == AF_INET) {
        out[10] = out[11] = 0xff;
        memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
}

/* Makes room for a connection from peer (loop thread): a peer at its cap of unproven
 * connections loses its oldest one; a worker at its connection cap sheds the oldest unproven
 * connection of anyone, else the longest idle one. False: nothing can give way (every
 * connection proved itself and has calls open), so the new one is refused. */
static bool make_room(sbx_worker *w, const uint8_t peer[16])
{
    size_t same_peer = 0;
    conn *oldest_same = NULL, *oldest_unproven = NULL, *longest_idle = NULL;
    for (conn *cn = w->conns; cn; cn = cn->next) { /* newest first */
        if (!cn->proven) {
            oldest_unproven = cn;
            if (memcmp(cn->peer, peer, 16) == 0) {
                same_peer++;
                oldest_same = cn;
            }
        } else if (!cn->calls &&
                   (!longest_idle || cn->idle_since_us <= longest_idle->idle_since_us)) {
            longest_idle = cn;
        }
    }
    if (oldest_same && same_peer >= w->limits.max_unproven_per_peer) {
        if (oldest_unproven == oldest_same)
            oldest_unproven = NULL;
        worker_conn_shed(oldest_same, "too many connections from this address without a request");
    }
    if (w->n_conns < w->limits.max_connections)
        return true;
    if (oldest_unproven)
        worker_conn_shed(oldest_unproven, "the worker is at its connection limit");
    else if (longest_idle)
        worker_conn_shed(longest_idle,
                         "the worker is at its connection limit; reconnect when needed");
    return w->n_conns < w->limits.max_connections;
}

void worker_accept_all(sbx_worker *w)
{
    for (;;) {
        struct sockaddr_storage ss = {0}; /* a family accept4 left unset keys as all zeros */
        socklen_t sl = sizeof ss;
        int fd = accept4(w->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        uint8_t peer[16];
        peer_key(&ss, peer);
        if (w->draining || !make_room(w, peer)) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *cn = calloc(1, sizeof *cn);
        if (!cn) {
            close(fd);
            continue;
        }
        cn->kind = EV_CONN;
        cn->w = w;
        cn->fd = fd;
        cn->accepted_us = sbx_monotonic_us();
        memcpy(cn->peer, peer, sizeof cn->peer);
        cn->events = EPOLLIN;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cn};
        if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(cn);
            continue;
        }
        cn->next = w->conns;
        if (w->conns)
            w->conns->prev = cn;
        w->conns = cn;
        w->n_conns++;
        if (w->tls) {
            cn->ssl = SSL_new(w->tls);
            if (!cn->ssl || SSL_set_fd(cn->ssl, fd) != 1) {
                worker_conn_close(cn);
                continue;
            }
            SSL_set_accept_state(cn->ssl);
            cn->handshaking = true;
        } else if (!conn_start_h2(cn)) {
            worker_conn_close(cn);
            continue;
        } else {
            worker_conn_flush(cn);
        }
    }
}
