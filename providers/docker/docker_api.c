/* docker_api.c - the Docker Engine API client of providers/docker (see docker_api.h): control
 * requests through libcurl over the unix socket, the hijacked exec stream over a raw socket,
 * bounded reads of everything the daemon sends.
 *
 * Why a raw socket for exec start: POST /exec/{id}/start hijacks the HTTP connection (API
 * v1.41, "Hijacking": after the response head the connection carries the raw stream in both
 * directions). Feeding stdin after the response head, then half-closing, is not something
 * libcurl's request/response model can do, so that one request is written by hand.
 * This file must not know about sessions, policies or the sbx contract.
 */
#include "providers/docker/docker_api.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sbx/contract.h"
#include "sbx/provider.h" /* sbx_provider_deadline_ms: the caller's deadline bounds each call */

/* Largest error body read from the hijacked connection when the daemon refuses to start an
 * exec (a JSON {"message": ...} of a few hundred bytes). */
#define DOCKER_MAX_ERROR_BODY 65536
/* After killing an exec's processes, how long we still read its stream for the last bytes and
 * the EOF (the shim closes it as soon as the process is reaped). */
#define DOCKER_KILL_GRACE_MS 3000
/* How long we wait for GET /exec/{id}/json to report Running=false after the stream ended:
 * the stream closes when the process's pipes close, which can precede the reap by a moment. */
#define DOCKER_EXIT_WAIT_MS 5000
/* Poll slice while an exec runs: how quickly a cancel flag is noticed. */
#define DOCKER_POLL_SLICE_MS 50

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
}

void docker_response_clear(docker_response *r)
{
    if (r == NULL)
        return;
    free(r->body);
    free(r->path_stat);
    memset(r, 0, sizeof(*r));
}

/* ---- libcurl plumbing ---------------------------------------------------------------------- */

typedef struct body_sink {
    docker_response *resp;
    size_t max;
    bool overflow;
    docker_data_fn on_data; /* streaming instead of buffering (2xx bodies only) */
    void *arg;
    bool aborted;
    CURL *curl;
} body_sink;

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    body_sink *s = userdata;
    size_t n = size * nmemb;
    long code = 0;
    if (s->on_data != NULL)
        curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &code);
    if (s->on_data != NULL && code >= 200 && code < 300) {
        if (!s->on_data(s->arg, (const uint8_t *)ptr, n)) {
            s->aborted = true;
            return 0;
        }
        return n;
    }
    if (s->resp->len + n > s->max) {
        s->overflow = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    char *grown = realloc(s->resp->body, s->resp->len + n + 1);
    if (grown == NULL) {
        s->overflow = true;
        return 0;
    }
    memcpy(grown + s->resp->len, ptr, n);
    s->resp->len += n;
    grown[s->resp->len] = '\0';
    s->resp->body = grown;
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nitems, void *userdata)
{
    body_sink *s = userdata;
    size_t n = size * nitems;
    static const char stat_name[] = "X-Docker-Container-Path-Stat:";
    const size_t name_len = sizeof(stat_name) - 1;
    if (strncmp(ptr, "HTTP/", 5) == 0) {
        /* A new response head (after a 100 Continue, say): the status comes from curl. */
        return n;
    }
    if (n > name_len && strncasecmp(ptr, stat_name, name_len) == 0 && n < 8192) {
        const char *v = ptr + name_len;
        size_t vl = n - name_len;
        while (vl > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vl--;
        }
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        free(s->resp->path_stat);
        s->resp->path_stat = strndup(v, vl);
    }
    return n;
}

static CURL *api_easy(const docker_api *api, const char *method, const char *path, long timeout_ms,
                      char *url, size_t url_cap)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (c == NULL)
        return NULL;
    /* The host part is ignored on a unix socket; "docker" keeps the Host header meaningful. */
    if (api->version[0] != '\0')
        snprintf(url, url_cap, "http://docker/v%s%s", api->version, path);
    else
        snprintf(url, url_cap, "http://docker%s", path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, api->socket_path);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    /* While the engine reaches or creates a sandbox, its request's deadline bounds each call
     * too (a hung daemon must not hold a caller past it). A caller's explicit timeout_ms is
     * kept as is: cleanup (removing what a failed create made) must finish past it. */
    long total = timeout_ms > 0 ? timeout_ms : DOCKER_REQUEST_TIMEOUT_MS;
    long conn = DOCKER_CONNECT_TIMEOUT_MS;
    int64_t until = timeout_ms > 0 ? 0 : sbx_provider_deadline_ms();
    if (until > 0) {
        int64_t left = until - sbx_monotonic_ms();
        long bound = left < 1 ? 1 : left > LONG_MAX ? LONG_MAX : (long)left;
        total = bound < total ? bound : total;
        conn = bound < conn ? bound : conn;
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, total);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, conn);
    /* Only http over the socket: a redirect or another scheme from a hostile daemon is ignored. */
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
#endif
    return c;
}

static sbx_status transport_error(const docker_api *api, CURLcode rc, const char *errbuf,
                                  const char *method, const char *path, sbx_error *err)
{
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return sbx_error_set(
            err, SBX_E_TIMEOUT, "Docker daemon at unix socket %s did not answer %s %s in time: %s",
            api->socket_path, method, path, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    return sbx_error_set(err, SBX_E_PROVISION,
                         "cannot reach the Docker daemon at unix socket %s (%s %s): %s; is dockerd "
                         "running, and is docker.socket in the profile right?",
                         api->socket_path, method, path,
                         errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

static sbx_status api_perform(const docker_api *api, const char *method, const char *path,
                              const char *content_type, const void *body, size_t body_len,
                              size_t max_body, long timeout_ms, docker_data_fn on_data, void *arg,
                              docker_response *resp, sbx_error *err)
{
    memset(resp, 0, sizeof(*resp));
    char url[4096];
    if (strlen(path) > sizeof(url) - 64)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "Docker API path too long (%zu bytes)",
                             strlen(path));
    CURL *c = api_easy(api, method, path, timeout_ms, url, sizeof(url));
    if (c == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "curl_easy_init failed (out of memory?)");
    body_sink sink = {.resp = resp,
                      .max = max_body ? max_body : DOCKER_MAX_JSON_BYTES,
                      .on_data = on_data,
                      .arg = arg,
                      .curl = c};
    char errbuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL;
    if (content_type != NULL) {
        char h[256];
        snprintf(h, sizeof(h), "Content-Type: %s", content_type);
        hdrs = curl_slist_append(hdrs, h);
    }
    /* No "Expect: 100-continue" round trip for uploads: the daemon is local. */
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    if (body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body != NULL ? (const char *)body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body != NULL ? body_len : 0));
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    sbx_status st = SBX_OK;
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    resp->status = code;
    if (rc != CURLE_OK) {
        if (sink.overflow)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "Docker daemon answered %s %s with more than %zu bytes; refused",
                               method, path, sink.max);
        else if (sink.aborted)
            st = (err != NULL && err->code != SBX_OK)
                     ? err->code
                     : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                                     "%s %s: the response stream was refused by its reader", method,
                                     path);
        else
            st = transport_error(api, rc, errbuf, method, path, err);
        if (code == 0)
            resp->status = 0;
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return st;
}

sbx_status docker_api_call(const docker_api *api, const char *method, const char *path,
                           const char *content_type, const void *body, size_t body_len,
                           size_t max_body, long timeout_ms, docker_response *resp, sbx_error *err)
{
    return api_perform(api, method, path, content_type, body, body_len, max_body, timeout_ms, NULL,
                       NULL, resp, err);
}

/* Streams only a 2xx body; an error body is buffered (bounded) for docker_error_text. */
sbx_status docker_api_get_stream(const docker_api *api, const char *path, docker_data_fn on_data,
                                 void *arg, long timeout_ms, docker_response *resp, sbx_error *err)
{
    return api_perform(api, "GET", path, NULL, NULL, 0, DOCKER_MAX_ERROR_BODY, timeout_ms, on_data,
                       arg, resp, err);
}

sbx_status docker_api_json(const docker_api *api, const char *method, const char *path,
                           json_t *body, long *status, json_t **out, sbx_error *err)
{
    if (out != NULL)
        *out = NULL;
    char *text = NULL;
    if (body != NULL) {
        text = json_dumps(body, JSON_COMPACT);
        if (text == NULL)
            return sbx_error_set(err, SBX_E_INTERNAL, "cannot serialize JSON for %s %s", method,
                                 path);
    }
    docker_response r = {0};
    sbx_status st = docker_api_call(api, method, path, text ? "application/json" : NULL, text,
                                    text ? strlen(text) : 0, 0, 0, &r, err);
    free(text);
    if (status != NULL)
        *status = r.status;
    if (st != SBX_OK) {
        docker_response_clear(&r);
        return st;
    }
    if (out != NULL && r.len > 0 && r.status >= 200 && r.status < 300) {
        json_error_t je;
        *out = json_loadb(r.body, r.len, JSON_REJECT_DUPLICATES, &je);
        if (*out == NULL) {
            docker_response_clear(&r);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "Docker daemon answered %s %s with malformed JSON: %s (line %d)",
                                 method, path, je.text, je.line);
        }
    } else if (out != NULL && r.len > 0) {
        /* Error bodies are returned too, so callers can quote the daemon's message. */
        *out = json_loadb(r.body, r.len, 0, NULL);
        if (*out == NULL) {
            /* Not JSON: keep the raw text as {"message": "..."} (bounded by the body cap). */
            *out = json_pack("{s:s%}", "message", r.body, r.len);
        }
    }
    docker_response_clear(&r);
    return SBX_OK;
}

const char *docker_error_text(const docker_response *r, char *buf, size_t cap)
{
    if (cap == 0)
        return "";
    buf[0] = '\0';
    if (r == NULL || r->body == NULL || r->len == 0) {
        snprintf(buf, cap, "HTTP %ld with no message", r ? r->status : 0L);
        return buf;
    }
    json_t *j = json_loadb(r->body, r->len, 0, NULL);
    const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
    if (m != NULL)
        snprintf(buf, cap, "%s", m);
    else
        snprintf(buf, cap, "%.*s", (int)(r->len > 512 ? 512 : r->len), r->body);
    json_decref(j);
    /* Strip the trailing newline the daemon puts after plain-text errors. */
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    return buf;
}

char *docker_url_escape(const char *s)
{
    pthread_once(&curl_once, curl_init_once);
    char *e = curl_easy_escape(NULL, s, 0);
    if (e == NULL)
        return NULL;
    char *copy = strdup(e);
    curl_free(e);
    return copy;
}

bool docker_object_path(char *out, size_t cap, const char *prefix, const char *ref,
                        const char *suffix, sbx_error *err)
{
    char *esc = docker_url_escape(ref);
    int n = esc != NULL ? snprintf(out, cap, "%s%s%s", prefix, esc, suffix) : -1;
    free(esc);
    if (n >= 0 && (size_t)n < cap)
        return true;
    if (cap > 0)
        out[0] = '\0';
    sbx_error_set(err, SBX_E_INTERNAL, "cannot make the Docker API path for '%.80s': %s", ref,
                  n < 0 ? "out of memory" : "the reference is too long");
    return false;
}

sbx_status docker_api_get_object(const docker_api *api, const char *prefix, const char *ref,
                                 const char *suffix, long *status, json_t **out, sbx_error *err)
{
    char path[512];
    if (out != NULL)
        *out = NULL;
    if (!docker_object_path(path, sizeof path, prefix, ref, suffix, err))
        return SBX_E_INTERNAL;
    return docker_api_json(api, "GET", path, NULL, status, out, err);
}

/* ---- open / version negotiation ------------------------------------------------------------ */

/* Parses "1.41" into its minor number; -1 when malformed. */
static int api_minor(const char *v)
{
    if (v == NULL || strncmp(v, "1.", 2) != 0)
        return -1;
    char *end = NULL;
    errno = 0;
    long m = strtol(v + 2, &end, 10);
    if (errno != 0 || end == v + 2 || *end != '\0' || m < 0 || m > 1000)
        return -1;
    return (int)m;
}

sbx_status docker_api_open(docker_api *api, const char *socket_path, sbx_error *err)
{
    memset(api, 0, sizeof(*api));
    struct sockaddr_un sa;
    if (socket_path == NULL || socket_path[0] == '\0' || strlen(socket_path) >= sizeof(sa.sun_path))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "docker.socket '%s' is not a usable unix socket path (empty or longer "
                             "than %zu bytes)",
                             socket_path ? socket_path : "", sizeof(sa.sun_path) - 1);
    api->socket_path = strdup(socket_path);
    if (api->socket_path == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    /* GET /version without a version prefix answers with the daemon's ApiVersion and
     * MinAPIVersion (Engine API v1.41, "Get version"). */
    json_t *v = NULL;
    long status = 0;
    sbx_status st = docker_api_json(api, "GET", "/version", NULL, &status, &v, err);
    if (st != SBX_OK) {
        docker_api_close(api);
        return st;
    }
    const char *daemon_version = json_string_value(json_object_get(v, "ApiVersion"));
    if (status != 200 || daemon_version == NULL) {
        docker_api_close(api);
        json_decref(v);
        return sbx_error_set(err, SBX_E_PROVISION,
                             "the server at unix socket %s answered GET /version with HTTP %ld "
                             "and no ApiVersion: is it a Docker daemon?",
                             socket_path, status);
    }
    int minor = api_minor(daemon_version);
    int ours = api_minor(DOCKER_API_VERSION);
    if (minor < DOCKER_API_MIN_MINOR) {
        sbx_error_set(err, SBX_E_PROVISION,
                      "Docker daemon at %s speaks API %s; sbx needs at least 1.%d (Docker 1.13)",
                      socket_path, daemon_version, DOCKER_API_MIN_MINOR);
        json_decref(v);
        docker_api_close(api);
        return SBX_E_PROVISION;
    }
    snprintf(api->version, sizeof(api->version), "1.%d", minor < ours ? minor : ours);
    json_decref(v);
    return SBX_OK;
}

void docker_api_close(docker_api *api)
{
    if (api == NULL)
        return;
    free(api->socket_path);
    api->socket_path = NULL;
}

/* ---- the multiplexed stream ------------------------------------------------------------------ */

bool docker_demux_feed(docker_demux *d, const uint8_t *data, size_t len, docker_output_fn fn,
                       void *arg)
{
    /* Engine API v1.41, "Stream format": each frame is an 8-byte header
     * {STREAM_TYPE, 0, 0, 0, SIZE1..SIZE4} (size big endian) then SIZE payload bytes; type 0 is
     * stdin (written on stdout), 1 stdout, 2 stderr; 3 is the daemon's own error message
     * (stdcopy's systemErr), which we hand on as stderr so the reason is not lost. */
    while (len > 0) {
        if (d->remaining == 0) {
            size_t take = sizeof(d->header) - d->header_got;
            if (take > len)
                take = len;
            memcpy(d->header + d->header_got, data, take);
            d->header_got += take;
            data += take;
            len -= take;
            if (d->header_got < sizeof(d->header))
                return true;
            d->header_got = 0;
            if (d->header[0] > 3 || d->header[1] != 0 || d->header[2] != 0 || d->header[3] != 0)
                return false;
            d->stream = d->header[0] == 2 || d->header[0] == 3 ? 2 : 1;
            d->remaining = (uint32_t)d->header[4] << 24 | (uint32_t)d->header[5] << 16 |
                           (uint32_t)d->header[6] << 8 | (uint32_t)d->header[7];
            continue;
        }
        size_t take = d->remaining < len ? d->remaining : len;
        if (fn != NULL && take > 0)
            fn(arg, d->stream, data, take);
        d->remaining -= (uint32_t)take;
        data += take;
        len -= take;
    }
    return true;
}

/* ---- exec ------------------------------------------------------------------------------------ */

static int64_t remaining_ms(int64_t deadline)
{
    if (deadline <= 0)
        return -1;
    int64_t r = deadline - sbx_monotonic_ms();
    return r < 0 ? 0 : r;
}

static int unix_connect(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

/* Reads the parent pid from /proc/<pid>/stat: the field after the ")" that closes comm (comm
 * may itself contain ")" and spaces, so the LAST one counts). -1 on any failure. */
static long proc_ppid(const char *pid)
{
    char path[320], buf[512];
    snprintf(path, sizeof(path), "/proc/%.32s/stat", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close_paren = strrchr(buf, ')');
    if (close_paren == NULL)
        return -1;
    char state;
    long ppid;
    if (sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2)
        return -1;
    return ppid;
}

/* Kills a host pid and all its descendants with SIGKILL. The exec API has no kill endpoint
 * (moby/moby#9098), so on a deadline we do what `docker exec` users do by hand: the pid that
 * GET /exec/{id}/json reports is a host pid, and we walk /proc for its descendants. Works when
 * sbx runs on the daemon's host with the right to signal them (root); otherwise the kill fails
 * and the caller still gets TIMED_OUT, the stream is closed, and the process may linger.
 * The pid is the daemon's word: whoever controls the daemon is root on this host anyway. We
 * kill right after the daemon said the exec is still running; the remaining race (the process
 * exits and its pid is reused within those milliseconds) is made negligible by the kernel's
 * cyclic pid allocation. init (pid <= 1) is never touched. */
#define DOCKER_KILL_MAX_PIDS                                                                       \
    4096 /* descendants considered: a fork bomb beyond this is capped by                           \
            the container's own pids limit, not by us */
static void kill_tree(long root)
{
    if (root <= 1)
        return;
    long victims[DOCKER_KILL_MAX_PIDS];
    size_t n = 0;
    victims[n++] = root;
    /* Stop the root first so it cannot spawn more while we walk. */
    kill((pid_t)root, SIGSTOP);
    for (int pass = 0; pass < 3; pass++) {
        DIR *d = opendir("/proc");
        if (d == NULL)
            break;
        struct dirent *e;
        bool grew = false;
        while ((e = readdir(d)) != NULL && n < DOCKER_KILL_MAX_PIDS) {
            if (e->d_name[0] < '1' || e->d_name[0] > '9')
                continue;
            long pid = strtol(e->d_name, NULL, 10);
            long ppid = proc_ppid(e->d_name);
            bool known = false, parent_known = false;
            for (size_t i = 0; i < n; i++) {
                if (victims[i] == pid)
                    known = true;
                if (victims[i] == ppid)
                    parent_known = true;
            }
            if (!known && parent_known) {
                kill((pid_t)pid, SIGSTOP);
                victims[n++] = pid;
                grew = true;
            }
        }
        closedir(d);
        if (!grew)
            break;
    }
    for (size_t i = 0; i < n; i++)
        kill((pid_t)victims[i], SIGKILL);
}

typedef struct exec_info {
    bool running;
    int exit_code;
    bool exit_known;
    long pid;
} exec_info;

static sbx_status exec_inspect(const docker_api *api, const char *exec_id, exec_info *info,
                               sbx_error *err)
{
    char path[256];
    snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
    json_t *j = NULL;
    long status = 0;
    sbx_status st = docker_api_json(api, "GET", path, NULL, &status, &j, err);
    if (st != SBX_OK)
        return st;
    memset(info, 0, sizeof(*info));
    if (status != 200) {
        const char *m = json_string_value(json_object_get(j, "message"));
        sbx_error_set(err, status == 404 ? SBX_E_GONE : SBX_E_PROVISION,
                      "Docker daemon: GET %s: HTTP %ld: %s", path, status, m ? m : "no message");
        json_decref(j);
        return status == 404 ? SBX_E_GONE : SBX_E_PROVISION;
    }
    info->running = json_is_true(json_object_get(j, "Running"));
    json_t *ec = json_object_get(j, "ExitCode");
    if (json_is_integer(ec)) {
        json_int_t v = json_integer_value(ec);
        if (v >= INT32_MIN && v <= INT32_MAX) {
            info->exit_code = (int)v;
            info->exit_known = !info->running;
        }
    }
    json_t *pid = json_object_get(j, "Pid");
    if (json_is_integer(pid) && json_integer_value(pid) > 1 && json_integer_value(pid) < (1 << 22))
        info->pid = (long)json_integer_value(pid);
    json_decref(j);
    return SBX_OK;
}

static json_t *string_array(const char *const *items)
{
    json_t *a = json_array();
    for (size_t i = 0; items != NULL && items[i] != NULL; i++)
        json_array_append_new(a, json_string(items[i]));
    return a;
}

/* Creates the exec instance (POST /containers/{id}/exec, 201 {"Id": ...}). */
static sbx_status exec_create(const docker_api *api, const char *container,
                              const docker_exec_spec *spec, char *exec_id, size_t cap,
                              sbx_error *err)
{
    json_t *body = json_object();
    json_object_set_new(body, "AttachStdin", json_boolean(spec->attach_stdin));
    json_object_set_new(body, "AttachStdout", json_true());
    json_object_set_new(body, "AttachStderr", json_true());
    json_object_set_new(body, "Tty", json_false());
    json_object_set_new(body, "Cmd", string_array(spec->argv));
    if (spec->env != NULL && spec->env[0] != NULL)
        json_object_set_new(body, "Env", string_array(spec->env));
    if (spec->cwd != NULL && spec->cwd[0] != '\0')
        json_object_set_new(body, "WorkingDir", json_string(spec->cwd)); /* API >= 1.35 */
    if (spec->user != NULL && spec->user[0] != '\0')
        json_object_set_new(body, "User", json_string(spec->user));
    char path[512];
    if (!docker_object_path(path, sizeof path, "/containers/", container, "/exec", err)) {
        json_decref(body);
        return SBX_E_INTERNAL;
    }
    json_t *j = NULL;
    long status = 0;
    sbx_status st = docker_api_json(api, "POST", path, body, &status, &j, err);
    json_decref(body);
    if (st != SBX_OK)
        return st;
    const char *id = json_string_value(json_object_get(j, "Id"));
    if (status == 201 && id != NULL && strlen(id) < cap &&
        strspn(id, "0123456789abcdef") == strlen(id)) {
        snprintf(exec_id, cap, "%s", id);
        json_decref(j);
        return SBX_OK;
    }
    const char *m = json_string_value(json_object_get(j, "message"));
    /* 404: no such container; 409: container paused or not running (API v1.41 ContainerExec). */
    sbx_status code = (status == 404 || status == 409) ? SBX_E_GONE : SBX_E_PROVISION;
    sbx_error_set(err, code, "Docker daemon refused to exec in container %s: HTTP %ld: %s",
                  container, status, m ? m : "no message");
    json_decref(j);
    return code;
}

/* Parses "HTTP/1.1 101 UPGRADED" and the Content-Length of a response head. */
static long head_status(const char *head)
{
    if (strncmp(head, "HTTP/1.", 7) != 0 || strlen(head) < 12)
        return -1;
    char *end = NULL;
    long s = strtol(head + 9, &end, 10);
    if (end != head + 12 || s < 100 || s > 599)
        return -1;
    return s;
}

static long head_content_length(const char *head)
{
    const char *p = head;
    while ((p = strchr(p, '\n')) != NULL) {
        p++;
        if (strncasecmp(p, "Content-Length:", 15) == 0) {
            char *end = NULL;
            long v = strtol(p + 15, &end, 10);
            if (v >= 0 && v <= DOCKER_MAX_ERROR_BODY)
                return v;
            return -1;
        }
    }
    return -1;
}

typedef struct exec_stream {
    const docker_exec_spec *spec;
    bool stop_requested;
} exec_stream;

static void exec_on_output(void *arg, int stream, const uint8_t *data, size_t len)
{
    exec_stream *s = arg;
    if (s->spec->on_output != NULL)
        s->spec->on_output(s->spec->on_output_arg, stream, data, len);
    if (s->spec->should_stop != NULL && s->spec->should_stop(s->spec->on_output_arg))
        s->stop_requested = true;
}

/* Long because it is one hijacked HTTP exchange read in order (request, bounded response head,
 * demultiplexed stream with stdin and the kill deadline, exit code); its state (fd, demux,
 * deadline) is shared by every step. */
sbx_status docker_api_exec(const docker_api *api, const char *container,
                           const docker_exec_spec *spec, docker_exec_result *res, sbx_error *err)
{
    memset(res, 0, sizeof(*res));
    int64_t t0 = sbx_monotonic_us();
    char exec_id[128];
    sbx_status st = exec_create(api, container, spec, exec_id, sizeof(exec_id), err);
    if (st != SBX_OK)
        return st;

    int fd = unix_connect(api->socket_path);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "cannot connect to the Docker daemon at unix socket %s: %s",
                             api->socket_path, strerror(errno));
    /* POST /exec/{id}/start with the upgrade headers (API v1.41 "Hijacking": the daemon answers
     * 101 UPGRADED, then the connection is the raw multiplexed stream). */
    static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    char req[1024];
    int rl = snprintf(req, sizeof(req),
                      "POST /v%s/exec/%s/start HTTP/1.1\r\nHost: docker\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n%s",
                      api->version, exec_id, sizeof(start_body) - 1, start_body);
    if (rl < 0 || (size_t)rl >= sizeof(req) || !write_all(fd, req, (size_t)rl)) {
        close(fd);
        return sbx_error_set(err, SBX_E_PROVISION, "cannot send exec start to the Docker daemon");
    }

    /* Read the response head, bounded. Bytes after it belong to the stream. */
    char head[DOCKER_MAX_HTTP_HEAD + 1];
    size_t head_len = 0;
    char *head_end = NULL;
    while (head_end == NULL) {
        int64_t rem = remaining_ms(spec->deadline_mono_ms);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(
            &p, 1,
            rem < 0 ? DOCKER_REQUEST_TIMEOUT_MS
                    : (int)(rem > DOCKER_REQUEST_TIMEOUT_MS ? DOCKER_REQUEST_TIMEOUT_MS : rem));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            close(fd);
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "Docker daemon did not start exec %s in container %s in time",
                                 exec_id, container);
        }
        if (head_len >= DOCKER_MAX_HTTP_HEAD) {
            close(fd);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "Docker daemon sent a response head over %d bytes; refused",
                                 DOCKER_MAX_HTTP_HEAD);
        }
        ssize_t n = recv(fd, head + head_len, DOCKER_MAX_HTTP_HEAD - head_len, 0);
        if (n <= 0) {
            close(fd);
            return sbx_error_set(err, SBX_E_PROVISION,
                                 "Docker daemon closed the exec stream before answering");
        }
        head_len += (size_t)n;
        head[head_len] = '\0';
        head_end = memmem(head, head_len, "\r\n\r\n", 4);
    }
    size_t body_off = (size_t)(head_end - head) + 4;
    *head_end = '\0';
    long status = head_status(head);
    if (status != 101 && status != 200) {
        /* An error: the body is {"message": ...}, Content-Length bounded. */
        long cl = head_content_length(head);
        char body[DOCKER_MAX_ERROR_BODY + 1];
        size_t got = head_len - body_off;
        if (got > DOCKER_MAX_ERROR_BODY)
            got = DOCKER_MAX_ERROR_BODY;
        memcpy(body, head + body_off, got);
        while (cl > 0 && got < (size_t)cl) {
            ssize_t n = recv(fd, body + got, (size_t)cl - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        close(fd);
        docker_response r = {.status = status, .body = body, .len = got};
        body[got] = '\0';
        char msg[512];
        docker_error_text(&r, msg, sizeof(msg));
        sbx_status code = (status == 404 || status == 409) ? SBX_E_GONE : SBX_E_PROVISION;
        return sbx_error_set(err, code,
                             "Docker daemon refused to start exec in container %s: "
                             "HTTP %ld: %s",
                             container, status, msg);
    }

    exec_stream es = {.spec = spec};
    docker_demux demux = {0};
    bool malformed = false;
    if (head_len > body_off && !docker_demux_feed(&demux, (const uint8_t *)head + body_off,
                                                  head_len - body_off, exec_on_output, &es))
        malformed = true;

    size_t stdin_off = 0;
    bool stdin_open = spec->attach_stdin;
    if (stdin_open && spec->stdin_len == 0) {
        shutdown(fd, SHUT_WR);
        stdin_open = false;
    }
    docker_exec_end end = DOCKER_EXEC_EXITED;
    int64_t kill_deadline = 0; /* after a kill: stop reading at this monotonic ms */
    uint8_t buf[65536];
    while (!malformed) {
        if (end == DOCKER_EXEC_EXITED) {
            bool expired =
                spec->deadline_mono_ms > 0 && sbx_monotonic_ms() >= spec->deadline_mono_ms;
            bool cancelled = spec->cancel != NULL && *spec->cancel != 0;
            if (expired || cancelled || es.stop_requested) {
                end = es.stop_requested && !expired && !cancelled ? DOCKER_EXEC_STOPPED
                                                                  : DOCKER_EXEC_DEADLINE;
                exec_info info;
                sbx_error ignored;
                if (exec_inspect(api, exec_id, &info, &ignored) == SBX_OK && info.running)
                    kill_tree(info.pid);
                kill_deadline = sbx_monotonic_ms() + DOCKER_KILL_GRACE_MS;
            }
        } else if (sbx_monotonic_ms() >= kill_deadline) {
            break; /* could not kill (not root?); stop waiting */
        }
        int slice = DOCKER_POLL_SLICE_MS;
        int64_t rem = remaining_ms(spec->deadline_mono_ms);
        if (end == DOCKER_EXEC_EXITED && rem >= 0 && rem < slice)
            slice = (int)rem;
        struct pollfd p = {.fd = fd, .events = (short)(POLLIN | (stdin_open ? POLLOUT : 0))};
        int pr = poll(&p, 1, slice);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr <= 0)
            continue;
        if (stdin_open && (p.revents & POLLOUT)) {
            size_t chunk = spec->stdin_len - stdin_off;
            if (chunk > 65536)
                chunk = 65536;
            ssize_t n = send(fd, spec->stdin_data + stdin_off, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n > 0)
                stdin_off += (size_t)n;
            if (n < 0 && errno != EAGAIN && errno != EINTR)
                stdin_open = false; /* the process closed its stdin: not an error */
            if (stdin_off >= spec->stdin_len || !stdin_open) {
                /* Half-close: the daemon closes the process's stdin (EOF) on our FIN. */
                shutdown(fd, SHUT_WR);
                stdin_open = false;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0)
                break; /* EOF: the process's output is complete */
            if (!docker_demux_feed(&demux, buf, (size_t)n, exec_on_output, &es))
                malformed = true;
        }
    }
    close(fd);
    if (malformed)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "Docker daemon sent a malformed exec stream frame header for exec %s "
                             "in container %s",
                             exec_id, container);

    /* The exit code: the stream can end a moment before the daemon records the exit. */
    exec_info info = {0};
    int64_t wait_until = sbx_monotonic_ms() + DOCKER_EXIT_WAIT_MS;
    for (;;) {
        st = exec_inspect(api, exec_id, &info, err);
        if (st != SBX_OK)
            return st;
        if (!info.running || sbx_monotonic_ms() >= wait_until)
            break;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    res->end = end;
    res->exit_code = info.exit_code;
    res->exit_known = info.exit_known;
    res->wall_us = sbx_monotonic_us() - t0;
    return SBX_OK;
}
