/* fake_http.h - a small in-process HTTP server for tests (libmicrohttpd): listens on 127.0.0.1
 * port 0 (ephemeral), dispatches to a route table, keeps a log of every request for assertions,
 * and injects faults (status overrides, Retry-After, delays, truncated and invalid bodies).
 *
 * Fake cloud servers (fake_e2b, fake_daytona, fake_ssm) are built on it. It serves plain HTTP
 * on loopback only and must never run a program on the host: fakes interpret requests.
 *
 * Threading: the server runs on its own threads (one per connection, so a delayed response
 * never blocks another request). Handlers run on those threads; the route table and fault
 * list are guarded by an internal lock; the log may be read while the server runs.
 */
#ifndef SBX_TESTS_FAKE_HTTP_H
#define SBX_TESTS_FAKE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest request body the fake accepts (413 above): bigger than any file sbx moves. */
#define FAKE_HTTP_MAX_BODY (64u * 1024u * 1024u)
/* Path parameters captured per route ('*' segments). */
#define FAKE_HTTP_MAX_PARAMS 8

typedef struct fake_http fake_http;

typedef struct fake_header {
    char *name;
    char *value;
} fake_header;

/* One request as received (all fields owned by the log). */
typedef struct fake_request {
    char *method;
    char *path;         /* without the query string */
    fake_header *query; /* decoded query arguments */
    size_t n_query;
    fake_header *headers;
    size_t n_headers;
    uint8_t *body; /* NUL-terminated (body[body_len] == 0) */
    size_t body_len;
    char *params[FAKE_HTTP_MAX_PARAMS]; /* values of the route's '*' segments, in order */
    size_t n_params;
    int status;        /* the status that was answered (after faults) */
    uint8_t *response; /* the body that was answered (chunks joined; NUL-terminated) */
    size_t response_len;
} fake_request;

/* Case-insensitive header lookup; NULL when absent. */
const char *fake_request_header(const fake_request *r, const char *name);
/* Query argument lookup; NULL when absent. */
const char *fake_request_query(const fake_request *r, const char *key);

/* A response under construction (handed to handlers). */
typedef struct fake_response fake_response;

void fake_response_status(fake_response *resp, int status);
void fake_response_header(fake_response *resp, const char *name, const char *value);
/* Appends to the body. */
void fake_response_body(fake_response *resp, const void *data, size_t len);
/* Sets the status, Content-Type application/json and the formatted body. */
void fake_response_json(fake_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Streams the body in pieces: each chunk is sent after sleeping delay_ms (chunked encoding).
 * Mixing with fake_response_body appends the plain body as a first chunk. */
void fake_response_chunk(fake_response *resp, const void *data, size_t len, int delay_ms);

typedef void (*fake_handler)(void *arg, const fake_request *req, fake_response *resp);

/* Starts a server on 127.0.0.1, ephemeral port. NULL on failure. */
fake_http *fake_http_start(void);
/* Stops the server (interrupting delayed responses) and frees everything. NULL is fine. */
void fake_http_stop(fake_http *f);
/* "http://127.0.0.1:<port>" (no trailing slash). */
const char *fake_http_url(const fake_http *f);
int fake_http_port(const fake_http *f);

/* Adds a route. pattern: '/'-separated segments; a segment "*" matches exactly one segment
 * and a final segment "**" matches the rest (one param holding it). method NULL matches any. The
 * first match wins; unmatched requests get 404 {"message":"no route"}. */
void fake_http_route(fake_http *f, const char *method, const char *pattern, fake_handler h,
                     void *arg);

/* A fault applied to the next `times` requests matching (method, pattern), before or instead
 * of the handler. */
typedef struct fake_fault {
    int status;              /* non-zero: answer this status instead of calling the handler */
    const char *body;        /* body for the status override; default {"message":"injected"} */
    const char *retry_after; /* Retry-After header value; NULL = none */
    int delay_ms;            /* sleep before answering */
    bool truncate;           /* announce the full Content-Length, send half, close */
    bool invalid_json;       /* replace the body with text that is not JSON */
    bool drop;               /* close the connection without any response */
    int times;               /* how many requests (0 = 1, -1 = every one) */
} fake_fault;

void fake_http_fault(fake_http *f, const char *method, const char *pattern,
                     const fake_fault *fault);
void fake_http_clear_faults(fake_http *f);

/* The request log. Entries stay valid until fake_http_stop or fake_http_log_clear. */
size_t fake_http_log_count(fake_http *f);
const fake_request *fake_http_log_at(fake_http *f, size_t i);
/* Requests matching (method, pattern): the count, and the last one (NULL when none). */
size_t fake_http_log_matching(fake_http *f, const char *method, const char *pattern);
const fake_request *fake_http_log_last(fake_http *f, const char *method, const char *pattern);
void fake_http_log_clear(fake_http *f);

/* True when text contains needle anywhere in any logged request (method, path, query,
 * headers, body) -- for asserting that a secret never left as something else. */
bool fake_http_log_contains(fake_http *f, const char *needle);

/* Sleeps ms unless the server is stopping (then returns false early). For handlers. */
bool fake_http_sleep(fake_http *f, int ms);

/* Base64 (standard alphabet, padded) helpers for fakes; malloc'd, NULL on bad input. */
char *fake_base64_encode(const uint8_t *data, size_t len);
uint8_t *fake_base64_decode(const char *text, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif
