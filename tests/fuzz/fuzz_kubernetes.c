/* fuzz_kubernetes.c - libFuzzer harness for everything the kubernetes provider reads from the
 * API server (providers/kubernetes/): the JSON of its REST calls as kubernetes.c reads it (pods
 * and their phase, podIP, deletionTimestamp, container states and conditions, Status errors,
 * the sweep's lists with labels, annotations and timestamps), and the exec API of an attached
 * pod without the agent (k8s_exec.c): read_upgrade's answer head (101 and its
 * Sec-WebSocket-Accept and subprotocol, or a refusal's Content-Length body), then recv_message's
 * frames (continuations joined, ping answered, pong skipped, close) and the channel-3 Status.
 *
 * A scripted API server on loopback (plain http, which the kubeconfig allows there) answers the
 * k-th connection with the k-th answer of the input, whatever the request was, while the
 * harness drives one of three providers opened once: managed (create, the operations through
 * the agent, destroy, sweep), attached through the exec API (attach, commands and code), and
 * attached with the agent. Input: byte 0, then answers [kind][2-byte big-endian length][bytes]:
 *   byte 0: bits 0-1 the provider (0 managed, 1 exec API, 2 attached agent, 3 managed for
 *           per_session sessions), bit 2 a user-mode principal (impersonation headers), bit 3
 *           the fake agent closes at the first operation (after_op, sandbox_gone), bit 4 a
 *           sweep at the end (per_session: then list_held), bit 5 policy network allowlist
 *           instead of deny.
 *   kind & 3 == 0: JSON with status FUZZ_K8S_STATUSES[kind >> 2 & 15] and a true length;
 *   kind & 3 == 1: to an exec request, the bytes as they are (a hand-made head and stream);
 *   kind & 3 == 2: to an exec request, a 101 head with the accept computed from the request's
 *                  key (kind bit 2: v4.channel.k8s.io instead of v5, bit 3: a wrong accept,
 *                  bit 4: no subprotocol), then frames from records [ctl][2-byte length]
 *                  [payload]: ctl bits 0-3 the opcode, bit 4 masked, bit 5 the 64-bit length
 *                  form, bit 6 a length 1000 bytes longer than the payload, bit 7 not FIN;
 *   kind & 3 == 3: to an exec request, a correct 101 head (bit 2: v4), then the bytes as they
 *                  are.
 * Answers of kinds 1-3 to other requests are JSON 200 with the bytes as body. A podIP in a
 * JSON answer is made 127.0.0.1, where the harness's fake agent listens on the agent_port (an
 * input never makes the provider connect anywhere else). After the script every request gets
 * 404 with a NotFound Status.
 *
 * Properties: no crash, leak or hang; every failure carries its code and a text that never
 * shows the bearer token; a sandbox has an id NAMESPACE/POD; output within the limit and
 * within what the exec answers sent; an exec's exit code in 0..255; the sweep reports only
 * pods of the provider's namespace with its prefix, and list_held only such pods, each with a
 * subject; every DELETE the server sees names a pod,
 * secret or NetworkPolicy sbx-sandbox-* of the provider's namespace, a Kubernetes name (the
 * provider deletes nothing it did not make, whatever a list answer names). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/sha.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/http.h"
#include "sbx/config.h"
#include "sbx/provider.h"
#include "sbx/v1/agent.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const sbx_provider_ops sbx_provider_kubernetes;

/* Answers one input may script. */
#define FUZZ_K8S_MAX_ANSWERS 24
/* Largest request head the scripted server reads. */
#define FUZZ_K8S_MAX_HEAD 65536
/* The bearer token of the kubeconfig: no error text may show it. */
#define FUZZ_K8S_TOKEN "fuzz-k8s-bearer-7e3a91c4d2"
/* The attached agent's credential (64 hex digits) and the env var holding it. */
#define FUZZ_K8S_TOKEN_ENV "SBX_FUZZ_K8S_AGENT_TOKEN"
/* Each provider call's deadline (sbx_provider_set_deadline_ms): a pending pod polls until it. */
#define FUZZ_K8S_CALL_MS 700
/* Deadline of an operation (never reached: each answer ends with the connection). */
#define FUZZ_K8S_OP_MS 10000
/* Output limit of the operations: small, so the limit paths are reached. */
#define FUZZ_K8S_OUTPUT_LIMIT 4096
/* How long a server waits for a peer's next bytes before it gives a connection up. */
#define FUZZ_K8S_IO_MS 2000
/* The WebSocket GUID (RFC 6455 1.3). */
#define FUZZ_WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static const int FUZZ_K8S_STATUSES[16] = {200, 200, 201, 200, 202, 404, 400, 401,
                                          403, 409, 410, 422, 429, 500, 503, 200};

/* P_SESSION: managed, for per_session sessions (its pods carry the principal; list_held) */
enum { P_MANAGED = 0, P_EXEC = 1, P_AGENT = 2, P_SESSION = 3, P_COUNT = 4 };

static struct {
    char dir[80];
    char kubeconfig[128];
    int api_fd, agent_fd;
    int api_port, agent_port;
    pthread_t api_thread, agent_thread;
    pthread_mutex_t lock;
    uint8_t *data; /* the input's copy: answers point into it */
    size_t n, next;
    struct {
        uint8_t kind;
        size_t off, len;
    } script[FUZZ_K8S_MAX_ANSWERS];
    uint64_t exec_sent; /* bytes written in answers to exec requests this input */
    bool agent_breaks;
    bool stop;
    sbx_options *opts[P_COUNT];
    void *state[P_COUNT];
} g = {.api_fd = -1, .agent_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* SBX_FUZZ_TRACE=1: every request, answer and outcome on stderr (for writing seeds). */
static bool trace;

/* ---- socket helpers ---------------------------------------------------------------------------
 */

static bool wait_readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do
        r = poll(&p, 1, FUZZ_K8S_IO_MS);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

static void write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        b += w;
        n -= (size_t)w;
    }
}

static bool read_full(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        if (!wait_readable(fd))
            return false;
        ssize_t r = recv(fd, b, n, 0);
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

/* Reads what the peer still sends until it closes (or stalls), so that closing never resets a
 * connection whose answer the peer is still reading. */
static void drain(int fd)
{
    char sink[4096];
    while (wait_readable(fd) && recv(fd, sink, sizeof sink, 0) > 0) {
    }
}

static int listen_loopback(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
        abort();
    *port = ntohs(sa.sin_port);
    return fd;
}

/* ---- the scripted API server ------------------------------------------------------------------
 */

typedef struct request {
    char head[FUZZ_K8S_MAX_HEAD];
    bool exec;
    char key[64]; /* Sec-WebSocket-Key */
} request;

/* The value of header name (with its colon) in head, copied into out; false when absent. */
static bool header_value(const char *head, const char *name, char *out, size_t cap)
{
    const char *h = strcasestr(head, name);
    if (!h)
        return false;
    h += strlen(name);
    while (*h == ' ')
        h++;
    size_t n = strcspn(h, "\r\n");
    snprintf(out, cap, "%.*s", (int)n, h);
    return true;
}

/* Reads a request head and its Content-Length body (answering Expect: 100-continue). */
static bool read_request(int fd, request *rq)
{
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof rq->head - 1) {
        if (!wait_readable(fd))
            return false;
        ssize_t r = recv(fd, rq->head + len, sizeof rq->head - 1 - len, 0);
        if (r <= 0)
            return false;
        len += (size_t)r;
        rq->head[len] = '\0';
        if ((end = strstr(rq->head, "\r\n\r\n")) != NULL)
            break;
    }
    if (!end)
        return false;
    size_t have = len - (size_t)(end + 4 - rq->head);
    char v[64];
    size_t body =
        header_value(rq->head, "\r\nContent-Length:", v, sizeof v) ? strtoul(v, NULL, 10) : 0;
    if (body > have && header_value(rq->head, "\r\nExpect:", v, sizeof v) &&
        strcasecmp(v, "100-continue") == 0)
        write_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    char sink[4096];
    while (have < body) {
        if (!wait_readable(fd))
            return false;
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r <= 0)
            return false;
        have += (size_t)r;
    }
    rq->exec = strncmp(rq->head, "GET ", 4) == 0 && strstr(rq->head, "/exec?") != NULL &&
               header_value(rq->head, "\r\nUpgrade:", v, sizeof v) &&
               strcasecmp(v, "websocket") == 0;
    rq->key[0] = '\0';
    if (rq->exec)
        header_value(rq->head, "\r\nSec-WebSocket-Key:", rq->key, sizeof rq->key);
    return true;
}

/* A JSON answer's podIP made 127.0.0.1 (parsed as the provider parses it); NULL when it has
 * none or has that one already. */
static char *loopback_pod_ip(const uint8_t *b, size_t n)
{
    json_t *j = NULL;
    sbx_error ignored;
    if (sbx_http_parse_json(NULL, "fuzz", b, n, &j, &ignored) != SBX_OK) {
        json_decref(j);
        return NULL;
    }
    char *out = NULL;
    json_t *status = json_object_get(j, "status");
    const char *ip = json_string_value(json_object_get(status, "podIP"));
    if (ip && strcmp(ip, "127.0.0.1") != 0) {
        json_object_set_new(status, "podIP", json_string("127.0.0.1"));
        out = json_dumps(j, JSON_COMPACT);
        if (!out)
            abort();
    }
    json_decref(j);
    return out;
}

static void answer_json(int fd, int status, const uint8_t *b, size_t n)
{
    char *fixed = loopback_pod_ip(b, n);
    if (fixed) {
        b = (const uint8_t *)fixed;
        n = strlen(fixed);
    }
    char head[200];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d Fuzz\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                      status, n);
    write_all(fd, head, (size_t)hl);
    write_all(fd, b, n);
    free(fixed);
}

/* The 101 head of an accepted upgrade. */
static size_t upgrade_head(const request *rq, uint8_t kind, bool framed, char *out, size_t cap)
{
    char src[160];
    unsigned char sha[SHA_DIGEST_LENGTH];
    snprintf(src, sizeof src, "%s%s", rq->key, FUZZ_WS_GUID);
    SHA1((const unsigned char *)src, strlen(src), sha);
    if (framed && (kind & 8))
        sha[0] ^= 1; /* a wrong accept */
    char *accept = sbx_http_base64_encode(sha, sizeof sha);
    if (!accept)
        abort();
    const char *proto = kind & 4 ? "v4.channel.k8s.io" : "v5.channel.k8s.io";
    bool no_proto = framed && (kind & 16);
    int n = snprintf(out, cap,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s%s%s\r\n",
                     accept, no_proto ? "" : "Sec-WebSocket-Protocol: ", no_proto ? "" : proto,
                     no_proto ? "" : "\r\n");
    free(accept);
    return (size_t)n;
}

/* Frames from records [ctl][2-byte length][payload] (see the top comment) into out, which holds
 * 5 * n + 16 bytes. */
static size_t build_frames(const uint8_t *p, size_t n, uint8_t *out)
{
    static const uint8_t mask[4] = {0xa5, 0x5a, 0x3c, 0xc3};
    size_t o = 0, off = 0;
    while (off + 3 <= n) {
        uint8_t ctl = p[off];
        size_t len = (size_t)p[off + 1] << 8 | p[off + 2];
        off += 3;
        if (len > n - off)
            len = n - off;
        uint64_t claimed = len + (ctl & 0x40 ? 1000u : 0u);
        out[o++] = (uint8_t)((ctl & 0x80 ? 0 : 0x80) | (ctl & 0x0f));
        uint8_t m = ctl & 0x10 ? 0x80 : 0;
        if (ctl & 0x20) {
            out[o++] = m | 127;
            for (int i = 7; i >= 0; i--)
                out[o++] = (uint8_t)(claimed >> (8 * i));
        } else if (claimed < 126) {
            out[o++] = m | (uint8_t)claimed;
        } else {
            out[o++] = m | 126;
            out[o++] = (uint8_t)(claimed >> 8);
            out[o++] = (uint8_t)claimed;
        }
        if (m)
            for (int i = 0; i < 4; i++)
                out[o++] = mask[i];
        for (size_t i = 0; i < len; i++)
            out[o++] = m ? p[off + i] ^ mask[i % 4] : p[off + i];
        off += len;
    }
    return o;
}

/* Counts n more bytes as sent to exec requests (before they are written: the provider may
 * have read them and returned before the write returns). */
static void count_exec(size_t n)
{
    pthread_mutex_lock(&g.lock);
    g.exec_sent += n;
    pthread_mutex_unlock(&g.lock);
}

/* Answers an exec request with answer (kind, b, n). */
static void answer_exec(int fd, const request *rq, uint8_t kind, const uint8_t *b, size_t n)
{
    if ((kind & 3) == 0) {
        count_exec(n);
        answer_json(fd, FUZZ_K8S_STATUSES[kind >> 2 & 15], b, n);
        return;
    }
    if ((kind & 3) == 1) {
        count_exec(n);
        write_all(fd, b, n);
        return;
    }
    uint8_t *out = malloc(512 + 5 * n + 16);
    if (!out)
        abort();
    size_t o = upgrade_head(rq, kind, (kind & 3) == 2, (char *)out, 512);
    if ((kind & 3) == 3) {
        memcpy(out + o, b, n);
        o += n;
    } else {
        o += build_frames(b, n, out + o);
    }
    count_exec(o);
    write_all(fd, out, o);
    free(out);
}

/* Whether a DELETE's target names an object this provider makes: a pod, secret or
 * NetworkPolicy sbx-sandbox-<name> of namespace sbx, the name a Kubernetes name. */
static bool deletes_ours(const char *target, size_t n)
{
    static const char *const kinds[] = {
        "/api/v1/namespaces/sbx/pods/", "/api/v1/namespaces/sbx/secrets/",
        "/apis/networking.k8s.io/v1/namespaces/sbx/networkpolicies/"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t kl = strlen(kinds[k]);
        if (n <= kl + 12 || memcmp(target, kinds[k], kl) != 0 ||
            memcmp(target + kl, "sbx-sandbox-", 12) != 0)
            continue;
        for (size_t i = kl + 12; i < n; i++)
            if (!((target[i] >= 'a' && target[i] <= 'z') ||
                  (target[i] >= '0' && target[i] <= '9') || target[i] == '-' || target[i] == '.'))
                return false;
        return true;
    }
    return false;
}

static void serve_api(int fd)
{
    static request rq;
    if (!read_request(fd, &rq))
        return;
    if (strncmp(rq.head, "DELETE ", 7) == 0) {
        size_t n = strcspn(rq.head + 7, " \r\n");
        FUZZ_REQUIRE(deletes_ours(rq.head + 7, n), "a DELETE of what sbx did not make: %.*s",
                     (int)n, rq.head + 7);
    }
    pthread_mutex_lock(&g.lock);
    uint8_t kind = 0;
    uint8_t *b = NULL;
    size_t n = 0;
    bool scripted = g.next < g.n;
    if (scripted) {
        kind = g.script[g.next].kind;
        n = g.script[g.next].len;
        /* a copy: a late connection of an input that has returned must not read its bytes */
        b = malloc(n ? n : 1);
        if (!b)
            abort();
        memcpy(b, g.data + g.script[g.next].off, n);
        g.next++;
    }
    pthread_mutex_unlock(&g.lock);
    if (trace)
        fprintf(stderr, "k8s: %.*s -> %s kind %u, %zu bytes\n", (int)strcspn(rq.head, "?\r\n"),
                rq.head, scripted ? "answer" : "script ended", kind, n);
    if (!scripted) {
        static const char gone[] = "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":"
                                   "\"NotFound\",\"message\":\"script ended\",\"code\":404}";
        answer_json(fd, 404, (const uint8_t *)gone, sizeof gone - 1);
    } else if (rq.exec) {
        answer_exec(fd, &rq, kind, b, n);
    } else {
        answer_json(fd, (kind & 3) == 0 ? FUZZ_K8S_STATUSES[kind >> 2 & 15] : 200, b, n);
    }
    free(b);
    shutdown(fd, SHUT_WR);
    drain(fd);
}

/* ---- the fake agent (managed and agent-attached pods) -----------------------------------------
 */

static void send_event(int fd, Sbx__V1__AgentEvent *e)
{
    size_t n = sbx__v1__agent_event__get_packed_size(e);
    uint8_t *b = malloc(n + 4);
    if (!b)
        abort();
    b[0] = (uint8_t)n;
    b[1] = (uint8_t)(n >> 8);
    b[2] = (uint8_t)(n >> 16);
    b[3] = (uint8_t)(n >> 24);
    sbx__v1__agent_event__pack(e, b + 4);
    write_all(fd, b, n + 4);
    free(b);
}

/* A well-behaved agent's answer: started, output and exit of every command (exit 0), written
 * for the last chunk of a write, one chunk of a read, one entry of a listing. */
static void agent_answer(int fd, const Sbx__V1__AgentRequest *r)
{
    Sbx__V1__AgentEvent e = SBX__V1__AGENT_EVENT__INIT;
    e.id = r->id;
    switch (r->body_case) {
    case SBX__V1__AGENT_REQUEST__BODY_PING: {
        Sbx__V1__AgentPong p = SBX__V1__AGENT_PONG__INIT;
        p.nonce = r->ping->nonce;
        p.version = "fuzz";
        e.body_case = SBX__V1__AGENT_EVENT__BODY_PONG;
        e.pong = &p;
        send_event(fd, &e);
        break;
    }
    case SBX__V1__AGENT_REQUEST__BODY_EXEC:
    case SBX__V1__AGENT_REQUEST__BODY_CODE: {
        Sbx__V1__AgentStarted s = SBX__V1__AGENT_STARTED__INIT;
        s.command_id = 7;
        s.pid = 42;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_STARTED;
        e.started = &s;
        send_event(fd, &e);
        Sbx__V1__AgentOutput o = SBX__V1__AGENT_OUTPUT__INIT;
        o.command_id = 7;
        o.stream = SBX__V1__AGENT_STREAM__AGENT_STREAM_STDOUT;
        o.data.data = (uint8_t *)"hi\n";
        o.data.len = 3;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_OUTPUT;
        e.output = &o;
        send_event(fd, &e);
        Sbx__V1__AgentExit x = SBX__V1__AGENT_EXIT__INIT;
        x.command_id = 7;
        x.outcome = SBX__V1__AGENT_OUTCOME__AGENT_OUTCOME_OK;
        x.stdout_bytes = 3;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_EXIT;
        e.exit = &x;
        send_event(fd, &e);
        break;
    }
    case SBX__V1__AGENT_REQUEST__BODY_FILE_WRITE: {
        if (!r->file_write->last)
            break;
        Sbx__V1__AgentWritten w = SBX__V1__AGENT_WRITTEN__INIT;
        w.path = r->file_write->path;
        w.size = r->file_write->offset + r->file_write->data.len;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_WRITTEN;
        e.written = &w;
        send_event(fd, &e);
        break;
    }
    case SBX__V1__AGENT_REQUEST__BODY_FILE_READ: {
        Sbx__V1__AgentFileData d = SBX__V1__AGENT_FILE_DATA__INIT;
        d.path = r->file_read->path;
        d.data.data = (uint8_t *)"content\n";
        d.data.len = 8;
        d.size = 8;
        d.mode = 0644;
        d.eof = true;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_FILE_DATA;
        e.file_data = &d;
        send_event(fd, &e);
        break;
    }
    case SBX__V1__AGENT_REQUEST__BODY_FILE_LIST: {
        Sbx__V1__AgentFileEntry f = SBX__V1__AGENT_FILE_ENTRY__INIT;
        f.name = "a.txt";
        f.kind = SBX__V1__AGENT_FILE_KIND__AGENT_FILE_KIND_REGULAR;
        f.mode = 0644;
        f.size = 8;
        e.body_case = SBX__V1__AGENT_EVENT__BODY_ENTRY;
        e.entry = &f;
        send_event(fd, &e);
        Sbx__V1__AgentFileEntry last = SBX__V1__AGENT_FILE_ENTRY__INIT;
        last.last = true;
        e.entry = &last;
        send_event(fd, &e);
        break;
    }
    default: break; /* stdin: taken silently */
    }
}

/* One connection: the credential, then requests until the host closes (or, when the input asks
 * for it, until the first request that is not a ping). */
static void serve_agent(int fd)
{
    uint8_t hello[40];
    if (!read_full(fd, hello, 36))
        return;
    pthread_mutex_lock(&g.lock);
    bool breaks = g.agent_breaks;
    pthread_mutex_unlock(&g.lock);
    for (;;) {
        uint8_t l4[4];
        if (!read_full(fd, l4, 4))
            return;
        uint32_t n =
            (uint32_t)l4[0] | (uint32_t)l4[1] << 8 | (uint32_t)l4[2] << 16 | (uint32_t)l4[3] << 24;
        if (n > (1u << 20))
            return;
        uint8_t *b = malloc(n ? n : 1);
        if (!b)
            abort();
        bool ok = read_full(fd, b, n);
        Sbx__V1__AgentRequest *r = ok ? sbx__v1__agent_request__unpack(NULL, n, b) : NULL;
        free(b);
        if (!r)
            return;
        bool stop = breaks && r->body_case != SBX__V1__AGENT_REQUEST__BODY_PING;
        if (!stop)
            agent_answer(fd, r);
        sbx__v1__agent_request__free_unpacked(r, NULL);
        if (stop)
            return;
    }
}

static void *accept_loop(void *arg)
{
    bool api = arg != NULL;
    int lfd = api ? g.api_fd : g.agent_fd;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        pthread_mutex_lock(&g.lock);
        bool stop = g.stop;
        pthread_mutex_unlock(&g.lock);
        if (stop) {
            close(fd);
            return NULL;
        }
        if (api)
            serve_api(fd);
        else
            serve_agent(fd);
        close(fd);
    }
}

/* ---- set-up -----------------------------------------------------------------------------------
 */

static void wake(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0)
        close(fd);
}

static void at_exit(void)
{
    for (int i = 0; i < P_COUNT; i++) {
        sbx_provider_kubernetes.close(g.state[i]);
        sbx_options_free(g.opts[i]);
    }
    pthread_mutex_lock(&g.lock);
    g.stop = true;
    pthread_mutex_unlock(&g.lock);
    wake(g.api_port);
    pthread_join(g.api_thread, NULL);
    wake(g.agent_port);
    pthread_join(g.agent_thread, NULL);
    close(g.api_fd);
    close(g.agent_fd);
    free(g.data);
}

static void open_provider(int which)
{
    char port[16];
    snprintf(port, sizeof port, "%d", g.agent_port);
    const char *kv[] = {"kubeconfig",
                        g.kubeconfig,
                        "agent_image",
                        "registry.example/sbx-agent:1",
                        "agent_port",
                        port,
                        "impersonate",
                        "true",
                        "create_timeout_s",
                        "1",
                        which == P_MANAGED || which == P_SESSION ? "network_policy" : NULL,
                        "true",
                        "worker_selector",
                        "app=sbx-worker",
                        NULL};
    g.opts[which] = sbx_options_new(sbx_provider_kubernetes.options);
    sbx_error err = {0};
    for (size_t i = 0; kv[i]; i += 2)
        if (sbx_options_set(g.opts[which], kv[i], kv[i + 1], &err) != SBX_OK) {
            fprintf(stderr, "fuzz_kubernetes: option %s: %s\n", kv[i], err.message);
            abort();
        }
    if (which == P_AGENT &&
        sbx_options_set(g.opts[which], "attach_token_env", FUZZ_K8S_TOKEN_ENV, &err) != SBX_OK)
        abort();
    static const uint8_t key[SBX_PROVIDER_KEY_LEN] = {1, 2, 3, 4};
    bool managed = which == P_MANAGED || which == P_SESSION;
    sbx_provider_ctx ctx = {.profile = "fuzz",
                            .options = g.opts[which],
                            .environment = managed ? SBX_ENV_MANAGED : SBX_ENV_ATTACHED,
                            .attach_to = managed ? NULL : "sbx/target",
                            .node = "n1",
                            .scope =
                                which == P_SESSION ? SBX_SCOPE_PER_SESSION : SBX_SCOPE_PER_CALL,
                            .credential_key = key};
    if (sbx_provider_kubernetes.open(&ctx, &g.state[which], &err) != SBX_OK) {
        fprintf(stderr, "fuzz_kubernetes: open: %s\n", err.message);
        abort();
    }
}

static void setup(void)
{
    trace = getenv("SBX_FUZZ_TRACE") != NULL;
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (strlen(tmp) > 40)
        tmp = "/tmp";
    snprintf(g.dir, sizeof g.dir, "%s/sbx-fuzz-k8s-XXXXXX", tmp);
    if (!mkdtemp(g.dir))
        abort();
    g.api_fd = listen_loopback(&g.api_port);
    g.agent_fd = listen_loopback(&g.agent_port);
    if (pthread_create(&g.api_thread, NULL, accept_loop, &g) != 0 ||
        pthread_create(&g.agent_thread, NULL, accept_loop, NULL) != 0)
        abort();
    snprintf(g.kubeconfig, sizeof g.kubeconfig, "%s/kubeconfig", g.dir);
    FILE *k = fopen(g.kubeconfig, "w");
    if (!k)
        abort();
    fprintf(k,
            "apiVersion: v1\nkind: Config\ncurrent-context: fuzz\n"
            "contexts:\n- name: fuzz\n  context: {cluster: fuzz, user: worker, namespace: sbx}\n"
            "clusters:\n- name: fuzz\n  cluster:\n    server: \"http://127.0.0.1:%d\"\n"
            "users:\n- name: worker\n  user:\n    token: %s\n",
            g.api_port, FUZZ_K8S_TOKEN);
    fclose(k);
    setenv(FUZZ_K8S_TOKEN_ENV, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
           1);
    for (int i = 0; i < P_COUNT; i++)
        open_provider(i);
    /* The providers read the kubeconfig when they open (its token is inline): removed now, so a
     * run that crashes, which is what a finding does, leaves nothing in the temporary dir. */
    unlink(g.kubeconfig);
    rmdir(g.dir);
    atexit(at_exit);
}

/* Parses the script (the input's copy is kept until the next input). */
static void script(const uint8_t *data, size_t size, bool agent_breaks)
{
    pthread_mutex_lock(&g.lock);
    free(g.data);
    g.data = malloc(size ? size : 1);
    if (!g.data)
        abort();
    memcpy(g.data, data, size);
    g.n = g.next = 0;
    g.exec_sent = 0;
    g.agent_breaks = agent_breaks;
    size_t off = 0;
    while (off + 3 <= size && g.n < FUZZ_K8S_MAX_ANSWERS) {
        size_t len = (size_t)data[off + 1] << 8 | data[off + 2];
        g.script[g.n].kind = data[off];
        off += 3;
        if (len > size - off)
            len = size - off;
        g.script[g.n].off = off;
        g.script[g.n].len = len;
        g.n++;
        off += len;
    }
    pthread_mutex_unlock(&g.lock);
}

/* ---- the drive --------------------------------------------------------------------------------
 */

/* A failure carries its code and a text; no text shows the token. */
static void check(sbx_status st, const sbx_error *err)
{
    if (trace)
        fprintf(stderr, "k8s:   -> %d %s\n", (int)st, st == SBX_OK ? "" : err->message);
    if (st == SBX_OK)
        return;
    FUZZ_REQUIRE(err->code == st && err->message[0] != '\0', "failure %d without a text", (int)st);
    FUZZ_REQUIRE(strstr(err->message, FUZZ_K8S_TOKEN) == NULL, "an error shows the token: %s",
                 err->message);
}

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    (void)data;
    (void)offset;
    uint64_t *seen = arg;
    FUZZ_REQUIRE(stream == SBX__V1__STREAM__STREAM_STDOUT ||
                     stream == SBX__V1__STREAM__STREAM_STDERR,
                 "output on stream %d", (int)stream);
    seen[stream] += len;
}

static void call_deadline(void)
{
    sbx_provider_set_deadline_ms(sbx_monotonic_ms() + FUZZ_K8S_CALL_MS);
}

/* Operation op (0 argv, 1 shell with stdin, 2 python, 3 sh code, 4 write, 5 read, 6 list) on
 * sb; files only where the provider offers them (not through the exec API). */
static void run_op(int which, sbx_sandbox *sb, int op, const sbx_principal *pr,
                   const sbx_policy *policy)
{
    const sbx_provider_ops *ops = &sbx_provider_kubernetes;
    if (which == P_EXEC && op >= 4)
        return;
    uint64_t seen[3] = {0, 0, 0};
    sbx_exec_opts o = {.deadline_mono_ms = sbx_monotonic_ms() + FUZZ_K8S_OP_MS,
                       .output_limit_bytes = FUZZ_K8S_OUTPUT_LIMIT,
                       .on_output = on_output,
                       .on_output_arg = seen,
                       .principal = pr,
                       .policy = policy};
    sbx_result *res = sbx_result_new();
    if (!res)
        abort();
    sbx_error err = {0};
    sbx_status st = SBX_OK;
    pthread_mutex_lock(&g.lock);
    uint64_t sent_before = g.exec_sent;
    pthread_mutex_unlock(&g.lock);
    call_deadline();
    switch (op) {
    case 0: {
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        char *argv[] = {"echo", "hello world"};
        rc.argv = argv;
        rc.n_argv = 2;
        st = ops->run_command(sb, &rc, &o, res, &err);
        break;
    }
    case 1: {
        Sbx__V1__RunCommand rc = SBX__V1__RUN_COMMAND__INIT;
        Sbx__V1__RunCommand__EnvEntry e = SBX__V1__RUN_COMMAND__ENV_ENTRY__INIT;
        Sbx__V1__RunCommand__EnvEntry *env[] = {&e};
        e.key = "A";
        e.value = "b";
        rc.shell = "cat; echo done";
        rc.cwd = "/tmp";
        rc.env = env;
        rc.n_env = 1;
        rc.stdin.data = (uint8_t *)"input\n";
        rc.stdin.len = 6;
        st = ops->run_command(sb, &rc, &o, res, &err);
        break;
    }
    case 2:
    case 3: {
        Sbx__V1__RunCode code = SBX__V1__RUN_CODE__INIT;
        code.language = op == 2 ? "python" : "sh";
        code.code = op == 2 ? "print(1)\n1+1" : "echo 1";
        st = ops->run_code(sb, &code, &o, res, &err);
        break;
    }
    case 4: {
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        wf.path = "/workspace/a.txt";
        wf.content.data = (uint8_t *)"content\n";
        wf.content.len = 8;
        st = ops->write_file(sb, &wf, &o, res, &err);
        break;
    }
    case 5: {
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        rf.path = "/workspace/a.txt";
        st = ops->read_file(sb, &rf, &o, res, &err);
        if (st == SBX_OK)
            FUZZ_REQUIRE(res->n_files == 1, "a read gave %zu files", res->n_files);
        break;
    }
    default: {
        Sbx__V1__ListFiles lf = SBX__V1__LIST_FILES__INIT;
        lf.path = "/workspace";
        st = ops->list_files(sb, &lf, &o, res, &err);
        break;
    }
    }
    if (trace)
        fprintf(stderr, "k8s: op %d: exit %d, %zu/%zu output bytes\n", op, (int)res->exit_code,
                res->stdout.len, res->stderr.len);
    check(st, &err);
    pthread_mutex_lock(&g.lock);
    uint64_t sent = g.exec_sent - sent_before;
    pthread_mutex_unlock(&g.lock);
    FUZZ_REQUIRE(res->stdout.len <= FUZZ_K8S_OUTPUT_LIMIT &&
                     res->stderr.len <= FUZZ_K8S_OUTPUT_LIMIT,
                 "output over the limit: %zu/%zu", res->stdout.len, res->stderr.len);
    FUZZ_REQUIRE(seen[1] <= FUZZ_K8S_OUTPUT_LIMIT && seen[2] <= FUZZ_K8S_OUTPUT_LIMIT,
                 "streamed output over the limit");
    if (which == P_EXEC) {
        FUZZ_REQUIRE(seen[1] + seen[2] <= sent && res->stdout.len + res->stderr.len <= sent,
                     "%llu output bytes from %llu sent", (unsigned long long)(seen[1] + seen[2]),
                     (unsigned long long)sent);
        if (st == SBX_OK)
            FUZZ_REQUIRE(res->exit_code >= 0 && res->exit_code <= 255, "exit code %d",
                         (int)res->exit_code);
    }
    sbx_message_free(&res->base);
}

static void sweep(int which)
{
    sbx_strlist removed = {0};
    sbx_error err = {0};
    call_deadline();
    sbx_status st = sbx_provider_kubernetes.sweep(g.state[which], &removed, &err);
    check(st, &err);
    for (size_t i = 0; i < removed.n; i++)
        FUZZ_REQUIRE(strncmp(removed.items[i], "sbx/sbx-sandbox-", 16) == 0, "the sweep removed %s",
                     removed.items[i]);
    sbx_strlist_clear(&removed);
}

static void one_held(void *arg, const char *sandbox_id, const char *subject)
{
    (*(size_t *)arg)++;
    FUZZ_REQUIRE(sandbox_id != NULL && strncmp(sandbox_id, "sbx/sbx-sandbox-", 16) == 0,
                 "list_held listed %s", sandbox_id ? sandbox_id : "(null)");
    FUZZ_REQUIRE(subject != NULL, "list_held listed %s without a subject", sandbox_id);
}

/* What a restarted engine counts for principal_sandboxes: only pods of ours, each with the
 * principal read from its annotation (any bytes). */
static void list_held(int which)
{
    sbx_error err = {0};
    size_t n = 0;
    call_deadline();
    sbx_status st = sbx_provider_kubernetes.list_held(g.state[which], one_held, &n, &err);
    check(st, &err);
    FUZZ_REQUIRE(which == P_SESSION || n == 0, "a per_call provider listed %zu held pods", n);
}

static void drive(int which, uint8_t flags)
{
    const sbx_provider_ops *ops = &sbx_provider_kubernetes;
    void *state = g.state[which];
    Sbx__V1__Principal pr = SBX__V1__PRINCIPAL__INIT;
    Sbx__V1__Principal__CredentialsEntry groups = SBX__V1__PRINCIPAL__CREDENTIALS_ENTRY__INIT;
    Sbx__V1__Principal__CredentialsEntry *creds[] = {&groups};
    pr.subject = "alice";
    if (flags & 4) {
        pr.mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
        groups.key = "groups";
        groups.value = "dev,ops";
        pr.credentials = creds;
        pr.n_credentials = 1;
    }
    Sbx__V1__Policy policy = SBX__V1__POLICY__INIT;
    char *allow[] = {"10.1.0.0/16", "192.168.1.1"};
    if (flags & 32) {
        policy.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
        policy.network_allow = allow;
        policy.n_network_allow = 2;
    } else {
        policy.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    }
    sbx_error err = {0};
    sbx_sandbox *sb = NULL;
    sbx_status st = SBX_E_CAPABILITY;
    call_deadline();
    if (which == P_MANAGED || which == P_SESSION) {
        Sbx__V1__SessionHandle session = SBX__V1__SESSION_HANDLE__INIT;
        session.session_id = "fuzz-session";
        st = ops->create(state, &session, &pr, &policy, &sb, &err);
        check(st, &err);
        FUZZ_REQUIRE(st == SBX_OK || sb == NULL, "a failed create left a sandbox");
    }
    if (st != SBX_OK) {
        memset(&err, 0, sizeof err);
        call_deadline();
        st = ops->attach(state,
                         which == P_MANAGED || which == P_SESSION
                             ? "sbx/sbx-sandbox-0123456789abcdef"
                             : "sbx/target",
                         &pr, &policy, &sb, &err);
        check(st, &err);
        FUZZ_REQUIRE(st == SBX_OK || sb == NULL, "a failed attach left a sandbox");
    }
    if (st == SBX_OK) {
        FUZZ_REQUIRE(sb && sb->id && strncmp(sb->id, "sbx/", 4) == 0 && sb->id[4] != '\0',
                     "a sandbox without an id NAMESPACE/POD: %s", sb && sb->id ? sb->id : "(null)");
        for (int op = 0; op < 7; op++)
            run_op(which, sb, op, &pr, &policy);
        char id[300];
        snprintf(id, sizeof id, "%s", sb->id);
        ops->sandbox_close(sb);
        memset(&err, 0, sizeof err);
        call_deadline();
        st = ops->destroy(state, id, &err);
        check(st, &err);
    }
    if ((which == P_MANAGED || which == P_SESSION) && (flags & 16)) {
        sweep(which);
        list_held(which);
    }
    sbx_provider_set_deadline_ms(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g.api_fd < 0)
        setup();
    if (size == 0)
        return 0;
    uint8_t flags = data[0];
    int which = flags & 3;
    script(data + 1, size - 1, (flags & 8) != 0);
    drive(which, flags);
    return 0;
}
