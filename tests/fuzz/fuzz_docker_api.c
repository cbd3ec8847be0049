/* fuzz_docker_api.c - libFuzzer harness for what the Docker provider's API client reads from the
 * daemon (providers/docker/docker_api.c): the JSON of GET /version (API version negotiation),
 * of control calls and their error bodies (docker_error_text), and the exec API's three steps
 * (create's Id, start's hijacked stream -- the HTTP/1.1 101 head read by hand, then the
 * multiplexed frames --, inspect's ExitCode/Running/Pid). A fake daemon on a unix socket
 * answers each request in order with the input's scripted responses.
 *
 * Script: records of [kind byte][2-byte big-endian length][bytes]; kind bit 0 set = raw bytes
 * written as they are (a hand-made head and stream, for the hijacked start), clear = a JSON
 * answer with status DOCKER_FUZZ_STATUSES[kind >> 1 & 7] and a correct Content-Length. The
 * fake daemon closes the connection after each answer.
 *
 * Properties: no crash, leak or hang; failures carry a text; output handed on never exceeds
 * the bytes the daemon sent. The exec runs with no deadline, no cancel and no stop request, so
 * the client never kills the host pid a (fuzzed) inspect names. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/docker/docker_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Answers one input may script. */
#define FUZZ_DOCKER_MAX_ANSWERS 16
/* Largest request head the fake daemon reads. */
#define FUZZ_DOCKER_MAX_HEAD 65536

static const int DOCKER_FUZZ_STATUSES[8] = {200, 201, 204, 404, 409, 500, 400, 101};

typedef struct answer {
    bool raw;
    int status;
    const uint8_t *bytes;
    size_t len;
} answer;

static struct {
    char dir[80];
    char path[100];
    int listen_fd;
    pthread_t thread;
    pthread_mutex_t lock;
    answer script[FUZZ_DOCKER_MAX_ANSWERS];
    size_t n, next;
    uint64_t sent; /* bytes of scripted answers written this input */
    bool stop;
} g = {.listen_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

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

/* Reads the request head and a Content-Length body (discarded). */
static void read_request(int fd)
{
    static char head[FUZZ_DOCKER_MAX_HEAD];
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof head - 1) {
        ssize_t r = recv(fd, head + len, sizeof head - 1 - len, 0);
        if (r <= 0)
            return;
        len += (size_t)r;
        head[len] = '\0';
        if ((end = strstr(head, "\r\n\r\n")) != NULL)
            break;
    }
    if (!end)
        return;
    size_t have = len - (size_t)(end + 4 - head);
    size_t body = 0;
    for (char *p = head; p < end; p++)
        if (strncasecmp(p, "\r\ncontent-length:", 17) == 0) {
            body = strtoul(p + 17, NULL, 10);
            break;
        }
    char sink[4096];
    while (have < body) {
        ssize_t r = recv(fd, sink, sizeof sink, 0);
        if (r <= 0)
            return;
        have += (size_t)r;
    }
}

static void *daemon_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept4(g.listen_fd, NULL, NULL, SOCK_CLOEXEC);
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
        read_request(fd);
        pthread_mutex_lock(&g.lock);
        answer a = {.status = 404, .bytes = (const uint8_t *)"{\"message\":\"script ended\"}"};
        a.len = strlen((const char *)a.bytes);
        if (g.next < g.n)
            a = g.script[g.next++];
        g.sent += a.len;
        /* a copy: a late connection of an input that has returned must not read its bytes */
        uint8_t *copy = malloc(a.len ? a.len : 1);
        if (!copy)
            abort();
        memcpy(copy, a.bytes, a.len);
        a.bytes = copy;
        pthread_mutex_unlock(&g.lock);
        if (!a.raw) {
            char head[160];
            int n = snprintf(head, sizeof head,
                             "HTTP/1.1 %d Fuzz\r\nContent-Type: application/json\r\n"
                             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                             a.status, a.len);
            write_all(fd, head, (size_t)n);
        }
        write_all(fd, a.bytes, a.len);
        free(copy);
        shutdown(fd, SHUT_WR);
        close(fd);
    }
}

static void stop_daemon(void)
{
    pthread_mutex_lock(&g.lock);
    g.stop = true;
    pthread_mutex_unlock(&g.lock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g.path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
        pthread_join(g.thread, NULL);
    if (fd >= 0)
        close(fd);
    close(g.listen_fd);
    unlink(g.path);
    rmdir(g.dir);
}

static void start_daemon(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (strlen(tmp) > 40)
        tmp = "/tmp"; /* a unix socket path must stay short */
    snprintf(g.dir, sizeof g.dir, "%s/sbx-fuzz-docker-XXXXXX", tmp);
    if (!mkdtemp(g.dir))
        abort();
    snprintf(g.path, sizeof g.path, "%s/docker.sock", g.dir);
    g.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g.path);
    if (g.listen_fd < 0 || bind(g.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(g.listen_fd, 16) != 0 || pthread_create(&g.thread, NULL, daemon_main, NULL) != 0)
        abort();
    atexit(stop_daemon);
}

static uint64_t output_bytes;

static void on_output(void *arg, int stream, const uint8_t *d, size_t len)
{
    (void)arg;
    (void)d;
    FUZZ_REQUIRE(stream == 1 || stream == 2, "output on stream %d", stream);
    output_bytes += len;
}

static void check(sbx_status st, const sbx_error *err)
{
    if (st != SBX_OK)
        FUZZ_REQUIRE(err->code == st && err->message[0], "failure %d without a text", (int)st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g.listen_fd < 0)
        start_daemon();
    pthread_mutex_lock(&g.lock);
    g.n = g.next = 0;
    g.sent = 0;
    size_t off = 0;
    while (off + 3 <= size && g.n < FUZZ_DOCKER_MAX_ANSWERS) {
        answer *a = &g.script[g.n++];
        a->raw = data[off] & 1;
        a->status = DOCKER_FUZZ_STATUSES[data[off] >> 1 & 7];
        size_t len = (size_t)data[off + 1] << 8 | data[off + 2];
        off += 3;
        if (len > size - off)
            len = size - off;
        a->bytes = data + off;
        a->len = len;
        off += len;
    }
    pthread_mutex_unlock(&g.lock);

    docker_api api;
    sbx_error err = {0};
    sbx_status st = docker_api_open(&api, g.path, &err);
    check(st, &err);
    if (st == SBX_OK) {
        json_t *j = NULL;
        long status = 0;
        memset(&err, 0, sizeof err);
        st = docker_api_json(&api, "GET", "/containers/sbx-fuzz/json", NULL, &status, &j, &err);
        check(st, &err);
        json_decref(j);

        docker_response r = {0};
        memset(&err, 0, sizeof err);
        st = docker_api_call(&api, "DELETE", "/containers/sbx-fuzz?force=true", NULL, NULL, 0, 0,
                             10000, &r, &err);
        check(st, &err);
        char text[400];
        const char *t = docker_error_text(&r, text, sizeof text);
        FUZZ_REQUIRE(t != NULL && strlen(t) < sizeof text, "docker_error_text overran");
        docker_response_clear(&r);

        const char *argv[] = {"sh", "-c", "echo hi", NULL};
        docker_exec_spec spec = {.argv = argv,
                                 .stdin_data = (const uint8_t *)"in",
                                 .stdin_len = 2,
                                 .attach_stdin = true,
                                 .on_output = on_output};
        docker_exec_result res;
        output_bytes = 0;
        memset(&err, 0, sizeof err);
        st = docker_api_exec(&api, "sbx-fuzz", &spec, &res, &err);
        check(st, &err);
        pthread_mutex_lock(&g.lock);
        uint64_t sent = g.sent;
        pthread_mutex_unlock(&g.lock);
        FUZZ_REQUIRE(output_bytes <= sent, "%llu output bytes from %llu sent",
                     (unsigned long long)output_bytes, (unsigned long long)sent);
        docker_api_close(&api);
    }
    return 0;
}
