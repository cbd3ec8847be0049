/* k8s_exec.c - commands in a pod through the exec API, for attached pods that do not run
 * sbx-agent: GET /api/v1/namespaces/NS/pods/POD/exec?command=...&stdout=true&stderr=true
 * upgraded to a WebSocket (RFC 6455) with subprotocol v5.channel.k8s.io (v4.channel.k8s.io
 * accepted): every binary message starts with its channel (0 stdin, 1 stdout, 2 stderr, 3 the
 * final Status, 255 "close channel N", v5 only).
 *
 * libcurl makes the connection (CONNECT_ONLY: the same TLS material as every API call) and this
 * file speaks HTTP/1.1 upgrade and WebSocket framing over it. Every byte from the server is
 * bounded: headers (16 KiB), frames (1 MiB), output (the caller's limit). Every wait is bounded
 * by the deadline. It must not know what a sandbox is.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "providers/common/http.h"
#include "providers/kubernetes/k8s.h"

/* The upgrade answer's headers; a real one is a few hundred bytes. */
#define WS_MAX_HEADERS (16u * 1024u)
/* One message from the server: the kubelet sends output in chunks far below this. */
#define WS_MAX_FRAME (1024u * 1024u)
/* The Status on channel 3 is one small JSON object. */
#define WS_MAX_STATUS (64u * 1024u)
/* stdin is sent in messages of this size. */
#define WS_STDIN_CHUNK (32u * 1024u)
/* Without a caller deadline an exec still ends. */
#define WS_DEFAULT_MS (10 * 60 * 1000)
/* RFC 6455 section 1.3. */
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

typedef struct ws {
    CURL *h;
    curl_socket_t fd;
    int64_t deadline;
    const volatile int *cancel;
    uint8_t *rbuf; /* bytes received but not consumed */
    size_t rlen, rcap;
} ws;

static int remaining(const ws *w)
{
    int64_t left = w->deadline - sbx_monotonic_ms();
    if (left <= 0)
        return 0;
    return left > 100 ? 100 : (int)left; /* wake every 100 ms for cancel */
}

static sbx_status wait_io(ws *w, short events, sbx_error *err)
{
    for (;;) {
        if (w->cancel != NULL && *w->cancel)
            return sbx_error_set(err, SBX_E_TIMEOUT, "kubernetes exec: cancelled");
        if (sbx_monotonic_ms() >= w->deadline)
            return sbx_error_set(err, SBX_E_TIMEOUT, "kubernetes exec: the deadline passed");
        struct pollfd p = {w->fd, events, 0};
        int r = poll(&p, 1, remaining(w));
        if (r > 0)
            return SBX_OK;
        if (r < 0 && errno != EINTR)
            return sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec: poll: %s",
                                 strerror(errno));
    }
}

static sbx_status send_all(ws *w, const uint8_t *p, size_t n, sbx_error *err)
{
    while (n > 0) {
        size_t sent = 0;
        CURLcode rc = curl_easy_send(w->h, p, n, &sent);
        if (rc == CURLE_AGAIN) {
            sbx_status st = wait_io(w, POLLOUT, err);
            if (st != SBX_OK)
                return st;
            continue;
        }
        if (rc != CURLE_OK)
            return sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec: send: %s",
                                 curl_easy_strerror(rc));
        p += sent;
        n -= sent;
    }
    return SBX_OK;
}

/* Reads more bytes into rbuf (at least one), bounded by cap. */
static sbx_status fill(ws *w, size_t cap, sbx_error *err)
{
    if (w->rlen >= cap)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "kubernetes exec: the server sent more than %zu bytes at once", cap);
    if (w->rcap < cap) {
        uint8_t *g = realloc(w->rbuf, cap);
        if (g == NULL)
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes exec: out of memory");
        w->rbuf = g;
        w->rcap = cap;
    }
    for (;;) {
        size_t got = 0;
        CURLcode rc = curl_easy_recv(w->h, w->rbuf + w->rlen, cap - w->rlen, &got);
        if (rc == CURLE_AGAIN) {
            sbx_status st = wait_io(w, POLLIN, err);
            if (st != SBX_OK)
                return st;
            continue;
        }
        if (rc != CURLE_OK || got == 0)
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "kubernetes exec: the connection ended before the command's "
                                 "status (%s)",
                                 rc != CURLE_OK ? curl_easy_strerror(rc) : "end of stream");
        w->rlen += got;
        return SBX_OK;
    }
}

static void consume(ws *w, size_t n)
{
    memmove(w->rbuf, w->rbuf + n, w->rlen - n);
    w->rlen -= n;
}

/* Sends one masked client frame (RFC 6455 5.3: every client frame is masked). */
static sbx_status send_frame(ws *w, uint8_t opcode, const uint8_t *a, size_t alen, const uint8_t *b,
                             size_t blen, sbx_error *err)
{
    size_t n = alen + blen;
    uint8_t head[14];
    size_t hl = 0;
    head[hl++] = (uint8_t)(0x80 | opcode);
    if (n < 126) {
        head[hl++] = (uint8_t)(0x80 | n);
    } else if (n < 65536) {
        head[hl++] = 0x80 | 126;
        head[hl++] = (uint8_t)(n >> 8);
        head[hl++] = (uint8_t)n;
    } else {
        head[hl++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            head[hl++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    uint8_t mask[4];
    if (getrandom(mask, sizeof(mask), 0) != (ssize_t)sizeof(mask))
        return sbx_error_set(err, SBX_E_INTERNAL, "kubernetes exec: getrandom failed");
    memcpy(head + hl, mask, 4);
    hl += 4;
    uint8_t *frame = malloc(hl + n);
    if (frame == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "kubernetes exec: out of memory");
    memcpy(frame, head, hl);
    for (size_t i = 0; i < n; i++)
        frame[hl + i] = (uint8_t)((i < alen ? a[i] : b[i - alen]) ^ mask[i % 4]);
    sbx_status st = send_all(w, frame, hl + n, err);
    free(frame);
    return st;
}

int k8s_ws_frame_header(const uint8_t *buf, size_t len, k8s_ws_frame *f)
{
    if (len < 2)
        return 0;
    size_t hl = 2;
    uint64_t plen = buf[1] & 0x7F;
    f->masked = (buf[1] & 0x80) != 0;
    size_t need = 2 + (plen == 126 ? 2 : plen == 127 ? 8 : 0) + (f->masked ? 4 : 0);
    if (len < need)
        return 0;
    if (plen == 126) {
        plen = (uint64_t)buf[2] << 8 | buf[3];
        hl = 4;
    } else if (plen == 127) {
        plen = 0;
        for (int i = 0; i < 8; i++)
            plen = plen << 8 | buf[2 + i];
        hl = 10;
    }
    memset(f->mask, 0, sizeof(f->mask));
    if (f->masked) {
        memcpy(f->mask, buf + hl, 4);
        hl += 4;
    }
    f->fin = (buf[0] & 0x80) != 0;
    f->opcode = buf[0] & 0x0F;
    /* RSV bits (no extension was negotiated), unknown opcodes, fragmented or oversized control
     * frames and messages beyond the bound are refused (RFC 6455 5.2, 5.5) */
    if ((buf[0] & 0x70) != 0 || (f->opcode > 2 && f->opcode < 8) || f->opcode > 10 ||
        (f->opcode >= 8 && (!f->fin || plen > 125)) || plen > WS_MAX_FRAME)
        return -1;
    f->payload_len = (size_t)plen;
    return (int)hl;
}

/* Reads one complete message (continuations joined, bounded). *opcode 8 = close. The payload
 * is malloc'd (caller frees). */
static sbx_status recv_message(ws *w, uint8_t *opcode, uint8_t **out, size_t *out_len,
                               sbx_error *err)
{
    *out = NULL;
    *out_len = 0;
    uint8_t *msg = NULL;
    size_t mlen = 0;
    uint8_t first = 0;
    for (;;) {
        k8s_ws_frame fr;
        int hl;
        while ((hl = k8s_ws_frame_header(w->rbuf, w->rlen, &fr)) == 0) {
            sbx_status st = fill(w, WS_MAX_FRAME + 14, err);
            if (st != SBX_OK) {
                free(msg);
                return st;
            }
        }
        if (hl < 0 || mlen + fr.payload_len > WS_MAX_FRAME) {
            free(msg);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "kubernetes exec: an invalid frame, or a message larger than %u "
                                 "bytes",
                                 WS_MAX_FRAME);
        }
        size_t len = fr.payload_len;
        while (w->rlen < (size_t)hl + len) {
            sbx_status st = fill(w, WS_MAX_FRAME + 14, err);
            if (st != SBX_OK) {
                free(msg);
                return st;
            }
        }
        uint8_t op = fr.opcode;
        if (op >= 8) { /* control frames: whole, never fragmented */
            uint8_t *ctl = malloc(len + 1);
            if (ctl == NULL) {
                free(msg);
                return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
            }
            for (size_t i = 0; i < len; i++)
                ctl[i] = w->rbuf[(size_t)hl + i] ^ fr.mask[i % 4];
            consume(w, (size_t)hl + len);
            if (op == 9) { /* ping: answer pong, keep reading */
                sbx_status st = send_frame(w, 10, ctl, len, NULL, 0, err);
                free(ctl);
                if (st != SBX_OK) {
                    free(msg);
                    return st;
                }
                continue;
            }
            if (op == 10) {
                free(ctl);
                continue;
            }
            free(msg);
            *opcode = op;
            *out = ctl;
            *out_len = len;
            return SBX_OK;
        }
        if ((op == 0) != (first != 0)) { /* a continuation needs a start, a start no open one */
            free(msg);
            return sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec: a misordered fragment");
        }
        uint8_t *g = realloc(msg, mlen + len + 1);
        if (g == NULL) {
            free(msg);
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
        }
        msg = g;
        for (size_t i = 0; i < len; i++)
            msg[mlen + i] = w->rbuf[(size_t)hl + i] ^ fr.mask[i % 4];
        mlen += len;
        consume(w, (size_t)hl + len);
        if (op != 0)
            first = op;
        if (fr.fin) {
            *opcode = first;
            *out = msg;
            *out_len = mlen;
            return SBX_OK;
        }
    }
}

/* Appends output of one stream, bounded by the limit, and streams it. */
static void add_output(k8s_exec_io *io, int stream, const uint8_t *p, size_t n, uint64_t *offset)
{
    sbx_result *r = io->result;
    uint64_t limit = io->opts != NULL && io->opts->output_limit_bytes > 0
                         ? io->opts->output_limit_bytes
                         : (uint64_t)SBX_AGENT_DEFAULT_OUTPUT_LIMIT;
    ProtobufCBinaryData *field = stream == 1 ? &r->stdout : &r->stderr;
    size_t keep = n;
    if (field->len + keep > limit) {
        keep = field->len < limit ? (size_t)(limit - field->len) : 0;
        if (stream == 1)
            r->stdout_truncated = true;
        else
            r->stderr_truncated = true;
    }
    if (keep > 0)
        sbx_append_bytes(field, p, keep);
    if (io->opts != NULL && io->opts->on_output != NULL && keep > 0)
        io->opts->on_output(io->opts->on_output_arg,
                            stream == 1 ? SBX__V1__STREAM__STREAM_STDOUT
                                        : SBX__V1__STREAM__STREAM_STDERR,
                            p, keep, *offset);
    *offset += n;
}

sbx_status k8s_exec_exit_status(const uint8_t *text, size_t len, int *code, sbx_error *err)
{
    json_t *j = NULL;
    sbx_error ignored;
    if (sbx_http_parse_json(NULL, "exec status", text, len, &j, &ignored) != SBX_OK ||
        !json_is_object(j)) {
        json_decref(j);
        return sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec: an unreadable status");
    }
    const char *status = json_string_value(json_object_get(j, "status"));
    const char *reason = json_string_value(json_object_get(j, "reason"));
    sbx_status st = SBX_OK;
    if (status != NULL && strcmp(status, "Success") == 0) {
        *code = 0;
    } else if (reason != NULL && strcmp(reason, "NonZeroExitCode") == 0) {
        json_t *causes = json_object_get(json_object_get(j, "details"), "causes");
        *code = -1;
        for (size_t i = 0; i < json_array_size(causes); i++) {
            json_t *c = json_array_get(causes, i);
            const char *r = json_string_value(json_object_get(c, "reason"));
            const char *m = json_string_value(json_object_get(c, "message"));
            char *end = NULL;
            long v = m != NULL ? strtol(m, &end, 10) : -1;
            if (r != NULL && strcmp(r, "ExitCode") == 0 && end != NULL && *end == '\0' && v >= 0 &&
                v < 256)
                *code = (int)v;
        }
        if (*code < 0)
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "kubernetes exec: a non-zero exit without its code");
    } else {
        const char *m = json_string_value(json_object_get(j, "message"));
        st = sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec failed: %.300s",
                           m != NULL ? m : "no message");
    }
    json_decref(j);
    return st;
}

/* The answer to the upgrade: 101 with the right Sec-WebSocket-Accept, else the Status error
 * in its body. *v5 says which subprotocol the server chose. */
static sbx_status read_upgrade(ws *w, const char *key, const char *path, bool *v5, sbx_error *err)
{
    char *end = NULL;
    while ((end = w->rlen >= 4 ? memmem(w->rbuf, w->rlen, "\r\n\r\n", 4) : NULL) == NULL) {
        sbx_status st = fill(w, WS_MAX_HEADERS, err);
        if (st != SBX_OK)
            return st;
    }
    size_t hlen = (size_t)(end - (char *)w->rbuf) + 4;
    char *head = strndup((const char *)w->rbuf, hlen);
    if (head == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    consume(w, hlen);
    int status = 0;
    sscanf(head, "HTTP/1.%*d %d", &status);
    /* the accept value: base64(SHA-1(key + GUID)) */
    char src[128];
    unsigned char sha[SHA_DIGEST_LENGTH];
    snprintf(src, sizeof(src), "%s%s", key, WS_GUID);
    SHA1((const unsigned char *)src, strlen(src), sha);
    char *accept = sbx_http_base64_encode(sha, sizeof(sha));
    sbx_status st = SBX_OK;
    if (status == 101) {
        bool ok = false;
        *v5 = false;
        for (char *line = strtok(head, "\r\n"); line != NULL; line = strtok(NULL, "\r\n")) {
            if (strncasecmp(line, "Sec-WebSocket-Accept:", 21) == 0) {
                char *v = line + 21;
                while (*v == ' ')
                    v++;
                ok = accept != NULL && strcmp(v, accept) == 0;
            }
            if (strncasecmp(line, "Sec-WebSocket-Protocol:", 23) == 0)
                *v5 = strstr(line + 23, "v5.channel.k8s.io") != NULL;
        }
        if (!ok)
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "kubernetes exec: GET %s: the upgrade was not accepted (wrong or "
                               "missing Sec-WebSocket-Accept)",
                               path);
    } else {
        /* a refusal: its body is a Status (403, 404, 400 ...) */
        long clen = 0;
        const char *cl = strcasestr(head, "\r\nContent-Length:");
        if (cl != NULL)
            clen = strtol(cl + 17, NULL, 10);
        if (clen < 0 || clen > (long)WS_MAX_STATUS)
            clen = 0;
        while (w->rlen < (size_t)clen && fill(w, WS_MAX_STATUS, NULL) == SBX_OK) {
        }
        json_t *j = NULL;
        sbx_error ignored;
        if (clen > 0 && w->rlen >= (size_t)clen)
            sbx_http_parse_json(NULL, path, w->rbuf, (size_t)clen, &j, &ignored);
        st = k8s_status_error("GET", path, status, j, err);
        json_decref(j);
    }
    free(accept);
    free(head);
    return st;
}

/* Long because it is one WebSocket exec in order (query from argv, upgrade request with its random
 * key, stdin, the channel loop until the status frame, timeout kill), sharing the socket and the
 * frame state. */
sbx_status k8s_exec(const k8s_cluster *c, const k8s_identity *as, const char *ns, const char *pod,
                    const char *const *argv, size_t argc, k8s_exec_io *io, sbx_error *err)
{
    const sbx_exec_opts *o = io->opts;
    int64_t start_us = sbx_monotonic_us();
    ws w = {.deadline = o != NULL && o->deadline_mono_ms > 0 ? o->deadline_mono_ms
                                                             : sbx_monotonic_ms() + WS_DEFAULT_MS,
            .cancel = o != NULL ? o->cancel : NULL};
    /* the query: every argv item as command=..., the streams we use */
    size_t qcap = 256;
    for (size_t i = 0; i < argc; i++)
        qcap += 3 * strlen(argv[i]) + 16;
    char *query = malloc(qcap);
    if (query == NULL)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    size_t ql = (size_t)snprintf(query, qcap, "stdout=true&stderr=true&stdin=%s",
                                 io->stdin_data != NULL ? "true" : "false");
    for (size_t i = 0; i < argc; i++) {
        char *e = sbx_http_url_escape(argv[i]);
        if (e == NULL) {
            free(query);
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
        }
        ql += (size_t)snprintf(query + ql, qcap - ql, "&command=%s", e);
        free(e);
    }
    char path[K8S_MAX_NAME * 2 + 64];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/exec", ns, pod);
    char *url = NULL;
    if (asprintf(&url, "%s%s", c->server, path) < 0) {
        free(query);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    /* host[:port] of the server for the Host header, and the path prefix a proxied API server
     * has (https://proxy/k8s/clusters/x) for the request line */
    const char *hp0 = strstr(c->server, "://");
    hp0 = hp0 != NULL ? hp0 + 3 : c->server;
    const char *prefix = strchr(hp0, '/');
    char hp[256];
    snprintf(hp, sizeof(hp), "%.*s", (int)(prefix != NULL ? (size_t)(prefix - hp0) : strlen(hp0)),
             hp0);
    if (prefix == NULL)
        prefix = "";
    w.h = curl_easy_init();
    sbx_status st =
        w.h != NULL ? SBX_OK : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "curl_easy_init");
    if (st == SBX_OK) {
        int64_t left = w.deadline - sbx_monotonic_ms();
        curl_easy_setopt(w.h, CURLOPT_URL, url);
        curl_easy_setopt(w.h, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(w.h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w.h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(
            w.h, CURLOPT_CONNECTTIMEOUT_MS,
            (long)(left < K8S_CONNECT_TIMEOUT_MS ? (left > 1 ? left : 1) : K8S_CONNECT_TIMEOUT_MS));
        k8s_curl_tls(w.h, c);
        CURLcode rc = curl_easy_perform(w.h);
        if (rc != CURLE_OK)
            st = sbx_error_set(
                err, rc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT : SBX_E_PROVISION,
                "kubernetes exec: cannot connect to %s: %s", c->server, curl_easy_strerror(rc));
        else if (curl_easy_getinfo(w.h, CURLINFO_ACTIVESOCKET, &w.fd) != CURLE_OK)
            st = sbx_error_set(err, SBX_E_PROVISION, "kubernetes exec: no socket");
    }
    uint8_t rnd[16];
    char *key = NULL;
    if (st == SBX_OK && getrandom(rnd, sizeof(rnd), 0) == (ssize_t)sizeof(rnd))
        key = sbx_http_base64_encode(rnd, sizeof(rnd));
    if (st == SBX_OK && key == NULL)
        st = sbx_error_set(err, SBX_E_INTERNAL, "kubernetes exec: no WebSocket key");
    char *req = NULL;
    if (st == SBX_OK) {
        /* user and group names went through the same check as every call: no line breaks */
        size_t cap = strlen(prefix) + strlen(path) + strlen(query) + strlen(hp) + 1024 +
                     (c->token != NULL ? strlen(c->token) : 0);
        for (size_t i = 0; as != NULL && as->user != NULL && i < as->n_groups; i++)
            cap += strlen(as->groups[i]) + 32;
        if (as != NULL && as->user != NULL)
            cap += strlen(as->user) + 32;
        req = malloc(cap);
        size_t n = req == NULL ? 0
                               : (size_t)snprintf(req, cap,
                                                  "GET %s%s?%s HTTP/1.1\r\nHost: %s\r\n"
                                                  "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                                  "Sec-WebSocket-Version: 13\r\n"
                                                  "Sec-WebSocket-Key: %s\r\n"
                                                  "Sec-WebSocket-Protocol: v5.channel.k8s.io, "
                                                  "v4.channel.k8s.io\r\n",
                                                  prefix, path, query, hp, key);
        if (req != NULL && c->token != NULL)
            n += (size_t)snprintf(req + n, cap - n, "Authorization: Bearer %s\r\n", c->token);
        if (req != NULL && as != NULL && as->user != NULL) {
            n += (size_t)snprintf(req + n, cap - n, "Impersonate-User: %s\r\n", as->user);
            for (size_t i = 0; i < as->n_groups; i++)
                n += (size_t)snprintf(req + n, cap - n, "Impersonate-Group: %s\r\n", as->groups[i]);
        }
        if (req != NULL)
            n += (size_t)snprintf(req + n, cap - n, "\r\n");
        bool bad = req == NULL || strpbrk(as != NULL && as->user != NULL ? as->user : "", "\r\n");
        for (size_t i = 0; !bad && as != NULL && as->user != NULL && i < as->n_groups; i++)
            bad = strpbrk(as->groups[i], "\r\n") != NULL;
        st = bad ? sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "kubernetes exec: cannot build the request")
                 : send_all(&w, (const uint8_t *)req, n, err);
        if (req != NULL) {
            memset(req, 0, cap); /* it held the token */
            free(req);
        }
    }
    bool v5 = false;
    if (st == SBX_OK)
        st = read_upgrade(&w, key, path, &v5, err);
    if (st == SBX_OK && io->stdin_data != NULL) {
        if (!v5) /* v4 cannot close stdin: the command would wait for input forever */
            st = sbx_error_set(err, SBX_E_CAPABILITY,
                               "kubernetes exec: the server speaks only v4.channel.k8s.io, which "
                               "cannot end a command's stdin; stdin is refused");
        for (size_t off = 0; st == SBX_OK && off < io->stdin_len; off += WS_STDIN_CHUNK) {
            size_t n = io->stdin_len - off < WS_STDIN_CHUNK ? io->stdin_len - off : WS_STDIN_CHUNK;
            const uint8_t ch = 0;
            st = send_frame(&w, 2, &ch, 1, io->stdin_data + off, n, err);
        }
        const uint8_t close_stdin[2] = {255, 0};
        if (st == SBX_OK)
            st = send_frame(&w, 2, close_stdin, 2, NULL, 0, err);
    }
    uint64_t offsets[3] = {0, 0, 0};
    int code = -1;
    bool have_status = false;
    while (st == SBX_OK && !have_status) {
        uint8_t op = 0, *m = NULL;
        size_t n = 0;
        st = recv_message(&w, &op, &m, &n, err);
        if (st != SBX_OK)
            break;
        if (op == 8) { /* closed without a status */
            free(m);
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "kubernetes exec: the server closed the stream without the "
                               "command's status");
            break;
        }
        if ((op == 2 || op == 1) && n >= 1) {
            if (m[0] == 1 || m[0] == 2)
                add_output(io, m[0], m + 1, n - 1, &offsets[m[0]]);
            else if (m[0] == 3) {
                st = k8s_exec_exit_status(m + 1, n - 1, &code, err);
                have_status = st == SBX_OK;
            }
        }
        free(m);
    }
    sbx_result *r = io->result;
    r->wall_us = (uint64_t)(sbx_monotonic_us() - start_us);
    if (st == SBX_E_TIMEOUT) {
        r->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        sbx_error_prefix(err,
                         "the exec API cannot kill the command, it may still run in pod "
                         "%s/%s: ",
                         ns, pod);
    } else if (st == SBX_OK) {
        r->exit_code = code;
        r->outcome = code == 0 ? SBX__V1__OUTCOME__OUTCOME_OK : SBX__V1__OUTCOME__OUTCOME_NONZERO;
        if (r->stdout_truncated || r->stderr_truncated)
            r->outcome = SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT;
        const uint8_t bye[2] = {0x03, 0xE8}; /* 1000: normal closure */
        sbx_error ignored;
        send_frame(&w, 8, bye, 2, NULL, 0, &ignored);
    }
    if (w.h != NULL)
        curl_easy_cleanup(w.h);
    free(w.rbuf);
    free(key);
    free(url);
    free(query);
    return st;
}
