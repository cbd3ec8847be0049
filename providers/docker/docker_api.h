/* docker_api.h - a small client of the Docker Engine API (v1.41, what Debian's docker.io 20.10
 * speaks) over the daemon's unix socket: JSON requests through libcurl, the hijacked exec
 * stream over a raw socket, and the archive (tar) endpoints. Private to providers/docker/.
 *
 * Everything the daemon sends is untrusted: every body is read into a bounded buffer, every
 * JSON document parsed with a depth and size bound, every stream frame length checked.
 * This file knows nothing about sessions, policies or the sbx contract beyond sbx_status.
 */
#ifndef SBX_DOCKER_API_H
#define SBX_DOCKER_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/status.h"

/* The API version this client is written against (Docker Engine 20.10). The client uses the
 * lower of this and the daemon's own ApiVersion (from GET /version). */
#define DOCKER_API_VERSION "1.41"
/* The oldest daemon API we accept: NanoCpus in HostConfig arrived in 1.25 (Docker 1.13), and
 * every other field we send is older. */
#define DOCKER_API_MIN_MINOR 25

/* Largest JSON response body we accept (inspect of a container with many mounts and labels is
 * a few KiB; 4 MiB leaves room for pathological but honest daemons, not for a flood). */
#define DOCKER_MAX_JSON_BYTES (4u * 1024u * 1024u)
/* Largest response head (status line + headers) on the hijacked exec stream. */
#define DOCKER_MAX_HTTP_HEAD 16384
/* Timeout of one control request (create, inspect, delete, ...). Creating a container on a
 * loaded machine takes a second or two; a minute means the daemon is stuck. */
#define DOCKER_REQUEST_TIMEOUT_MS 60000
/* Connect timeout to the socket: a local unix socket connects at once or not at all. */
#define DOCKER_CONNECT_TIMEOUT_MS 5000

typedef struct docker_api {
    char *socket_path; /* the daemon's unix socket */
    char version[16];  /* negotiated "1.41" */
} docker_api;

/* A response of a control request. body is NUL terminated (len excludes the NUL). */
typedef struct docker_response {
    long status; /* HTTP status; 0 when the daemon could not be reached */
    char *body;  /* malloc'd */
    size_t len;
    char *path_stat; /* X-Docker-Container-Path-Stat header (archive endpoints); malloc'd */
} docker_response;

void docker_response_clear(docker_response *r);

/* Connects and negotiates the API version (GET /version). PROVISION when the daemon cannot be
 * reached or is too old, with the daemon's words. */
sbx_status docker_api_open(docker_api *api, const char *socket_path, sbx_error *err);
void docker_api_close(docker_api *api);

/* One request: method, path (without the /vX.Y prefix, which is added), optional body with its
 * content type. *resp is filled (status 0 and SBX_E_PROVISION on transport failure). At most
 * max_body bytes of response are kept (0 = DOCKER_MAX_JSON_BYTES); more is RESOURCE_EXHAUSTED. */
sbx_status docker_api_call(const docker_api *api, const char *method, const char *path,
                           const char *content_type, const void *body, size_t body_len,
                           size_t max_body, long timeout_ms, docker_response *resp, sbx_error *err);

/* A streaming GET: data is handed to on_data as it arrives (return false to abort: the call
 * then returns SBX_E_RESOURCE_EXHAUSTED unless the callback set its own error). */
typedef bool (*docker_data_fn)(void *arg, const uint8_t *data, size_t len);
sbx_status docker_api_get_stream(const docker_api *api, const char *path, docker_data_fn on_data,
                                 void *arg, long timeout_ms, docker_response *resp, sbx_error *err);

/* The JSON call: body is serialized (may be NULL), response parsed when it is JSON. *out (may
 * be NULL) gets the parsed document (caller json_decref's) or NULL. */
sbx_status docker_api_json(const docker_api *api, const char *method, const char *path,
                           json_t *body, long *status, json_t **out, sbx_error *err);

/* The daemon's "message" field of an error body, or the raw body (bounded), or "no message".
 * Writes into buf. */
const char *docker_error_text(const docker_response *r, char *buf, size_t cap);

/* Percent-encodes s for a query string into a malloc'd string (NULL on ENOMEM). */
char *docker_url_escape(const char *s);

/* Writes prefix, ref percent-encoded, and suffix into out (cap bytes): the path of an object's
 * endpoint ("/containers/" ID "/json"). False, with err set (INTERNAL, naming ref), when out of
 * memory or when the path does not fit cap; never a path with the reference left out. */
bool docker_object_path(char *out, size_t cap, const char *prefix, const char *ref,
                        const char *suffix, sbx_error *err);

/* GET of an object's document: docker_object_path, then docker_api_json (status, *out as
 * there). INTERNAL when the path cannot be made. */
sbx_status docker_api_get_object(const docker_api *api, const char *prefix, const char *ref,
                                 const char *suffix, long *status, json_t **out, sbx_error *err);

/* ---- exec ---------------------------------------------------------------------------------- */

/* What an exec produced. Output goes through on_output as it arrives. */
typedef void (*docker_output_fn)(void *arg, int stream /* 1 stdout, 2 stderr */,
                                 const uint8_t *data, size_t len);

typedef struct docker_exec_spec {
    const char *const *argv; /* NULL terminated */
    const char *const *env;  /* "K=V", NULL terminated; may be NULL */
    const char *cwd;         /* NULL: the container's */
    const char *user;        /* NULL: the container's */
    const uint8_t *stdin_data;
    size_t stdin_len;
    bool attach_stdin;        /* feed stdin_data then close it; otherwise no stdin */
    int64_t deadline_mono_ms; /* 0 = none */
    const volatile int *cancel;
    docker_output_fn on_output;
    void *on_output_arg;
    /* Called from on_output's side: returns true when the caller wants the exec stopped
     * (output limit). May be NULL. */
    bool (*should_stop)(void *arg);
} docker_exec_spec;

typedef enum docker_exec_end {
    DOCKER_EXEC_EXITED = 0, /* the process ended by itself */
    DOCKER_EXEC_DEADLINE,   /* deadline or cancel: its processes were killed */
    DOCKER_EXEC_STOPPED,    /* should_stop asked for it: its processes were killed */
} docker_exec_end;

typedef struct docker_exec_result {
    docker_exec_end end;
    int exit_code;   /* from GET /exec/{id}/json */
    bool exit_known; /* the daemon reported an exit code */
    int64_t wall_us;
} docker_exec_result;

/* Runs one process in a running container with the exec API: create, start (hijacked stream,
 * stdout/stderr demultiplexed from its 8-byte frame headers), inspect for the exit code.
 * GONE when the container does not exist or is not running (the daemon's text included). */
sbx_status docker_api_exec(const docker_api *api, const char *container,
                           const docker_exec_spec *spec, docker_exec_result *res, sbx_error *err);

/* The demultiplexer of the exec/attach stream, exposed for its unit test: feed it bytes in any
 * slicing; it calls on_output per payload piece. Returns false on a malformed frame header
 * (unknown stream type, non-zero padding). */
typedef struct docker_demux {
    uint8_t header[8];
    size_t header_got;
    uint32_t remaining; /* payload bytes left in the current frame */
    int stream;
} docker_demux;
bool docker_demux_feed(docker_demux *d, const uint8_t *data, size_t len, docker_output_fn fn,
                       void *arg);

#endif
