/* http.h - the one HTTP client every cloud provider (e2b, daytona, ec2_ssm) uses: libcurl with
 * connect and total timeouts on every call, retries with exponential backoff and full jitter
 * (429 always -- the server refused the call before acting on it --, 5xx and transport errors
 * only when the caller declares the call idempotent), bounded response bodies, a bounded JSON
 * parse (jansson), redaction of secrets, and error messages a person can act on:
 *
 *   e2b: POST https://api.e2b.app/sandboxes returned 401: Invalid API key; check that
 *   E2B_API_KEY holds a valid key
 *
 * Private to providers (not a public sbx header). This file must not know any provider's API:
 * it moves bytes, the provider gives them meaning. It never prints; an optional trace callback
 * receives one redacted line per attempt.
 */
#ifndef SBX_PROVIDERS_COMMON_HTTP_H
#define SBX_PROVIDERS_COMMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connecting to a cloud API takes well under a second; 10 s covers a slow DNS answer and a TLS
 * handshake on a loaded host without letting a black-holed address hang a session. */
#define SBX_HTTP_CONNECT_TIMEOUT_MS 10000
/* Control-plane calls (create, get, delete) answer within seconds; E2B and Daytona create a
 * sandbox in well under a minute. 120 s bounds every call whose caller gives no deadline. */
#define SBX_HTTP_TOTAL_TIMEOUT_MS 120000
/* Buffered response bodies above 32 MiB are refused: the largest legitimate bodies are file
 * downloads, which providers bound separately below this (SBX_HTTP_MAX_FILE_BYTES). */
#define SBX_HTTP_MAX_BODY_BYTES (32u * 1024u * 1024u)
/* Files moved through a cloud file API in one call (read_file/write_file). */
#define SBX_HTTP_MAX_FILE_BYTES (16u * 1024u * 1024u)
/* Request bodies: the file limit plus room for JSON/multipart framing. */
#define SBX_HTTP_MAX_REQUEST_BYTES (SBX_HTTP_MAX_FILE_BYTES + 64u * 1024u)
/* Attempts per call including the first. Four attempts with backoff span ~3 s of 5xx before we
 * give up, enough for a rolling restart of an API pod, short enough to surface an outage. */
#define SBX_HTTP_MAX_ATTEMPTS 4
/* First backoff step; doubled per retry up to the cap, then full jitter (random 0..step). */
#define SBX_HTTP_BACKOFF_BASE_MS 250
#define SBX_HTTP_BACKOFF_CAP_MS 4000
/* A server asking us to wait longer than 30 s (Retry-After) is treated as "not now": we return
 * the 429 instead of blocking a session that long. */
#define SBX_HTTP_RETRY_AFTER_CAP_MS 30000
/* JSON nesting beyond 64 levels is refused before jansson sees it: no cloud API we speak nests
 * deeper than ~6, and a hostile body must not drive a deep recursive parse. */
#define SBX_HTTP_JSON_MAX_DEPTH 64
/* The server's message quoted in an error is cut to this many bytes (with "..."). */
#define SBX_HTTP_ERROR_BODY_MAX 300
/* Secrets registered for redaction per client: the API key plus the access token of each open
 * sandbox handle (removed when the handle closes), so this bounds concurrent open handles. */
#define SBX_HTTP_MAX_SECRETS 4096
/* Request headers per call. */
#define SBX_HTTP_MAX_HEADERS 32

/* One redacted line per attempt ("e2b: POST https://... -> 201 in 12 ms"), for debugging.
 * Never contains a registered secret or the value of a credential header. */
typedef void (*sbx_http_trace_fn)(void *arg, const char *line);

typedef struct sbx_http_client_config {
    const char *provider;       /* "e2b", "daytona", "ec2_ssm": prefixes every message */
    const char *auth_hint;      /* appended to 401/403 errors, e.g. "check that E2B_API_KEY holds a
                                   valid key"; NULL = none */
    int64_t connect_timeout_ms; /* 0 = SBX_HTTP_CONNECT_TIMEOUT_MS */
    int64_t total_timeout_ms;   /* 0 = SBX_HTTP_TOTAL_TIMEOUT_MS (per attempt) */
    int max_attempts;           /* 0 = SBX_HTTP_MAX_ATTEMPTS; 1 disables retries */
    int64_t backoff_base_ms;    /* 0 = SBX_HTTP_BACKOFF_BASE_MS (tests shorten it) */
    size_t max_body_bytes;      /* 0 = SBX_HTTP_MAX_BODY_BYTES */
    sbx_http_trace_fn trace;    /* NULL = no trace */
    void *trace_arg;
} sbx_http_client_config;

/* A client: configuration plus the secrets to redact. Thread-safe: calls may run concurrently
 * (each uses its own curl handle); secrets are guarded by an internal lock. */
typedef struct sbx_http_client sbx_http_client;

/* Creates a client (cfg is copied). Free with sbx_http_client_free (NULL is fine). */
sbx_status sbx_http_client_new(const sbx_http_client_config *cfg, sbx_http_client **out,
                               sbx_error *err);
void sbx_http_client_free(sbx_http_client *c);
/* Registers a secret value: it is replaced by "[REDACTED]" in every error and trace line from
 * now on. Values shorter than 4 bytes are ignored (they would redact ordinary words). Returns
 * false when the table is full or memory is exhausted. */
bool sbx_http_client_add_secret(sbx_http_client *c, const char *secret);
/* Forgets a secret registered earlier (e.g. a sandbox token when its handle closes); the
 * count of registrations is kept, so a secret added twice stays until removed twice. */
void sbx_http_client_remove_secret(sbx_http_client *c, const char *secret);
/* Replaces every registered secret in text (in place, NUL-terminated, never grows). */
void sbx_http_redact(sbx_http_client *c, char *text);
/* The provider name given at creation. */
const char *sbx_http_client_provider(const sbx_http_client *c);

/* Streamed response bodies: called with each piece of a 2xx body as it arrives (the body is
 * then not buffered). Return false to abort the transfer (the call then fails with the status
 * the callback stored in *abort_status, or SBX_E_PROVISION). */
typedef bool (*sbx_http_body_fn)(void *arg, const uint8_t *data, size_t len);

typedef struct sbx_http_request {
    const char *method;         /* "GET", "POST", "PUT", "DELETE" */
    const char *url;            /* absolute URL */
    const char *const *headers; /* "Name: value" lines; NULL-free array of n_headers */
    size_t n_headers;
    const void *body; /* request body (borrowed); NULL = none */
    size_t body_len;
    bool idempotent;            /* the caller declares that repeating the call is harmless:
                                   5xx and transport failures are then retried */
    int64_t deadline_mono_ms;   /* sbx_monotonic_ms() deadline over all attempts; 0 = none */
    int64_t timeout_ms;         /* per-attempt total timeout; 0 = the client's */
    const volatile int *cancel; /* non-zero: abort (SBX_E_TIMEOUT, "cancelled") */
    sbx_http_body_fn on_body;   /* stream a 2xx body instead of buffering it; NULL = buffer */
    void *on_body_arg;
    sbx_status *abort_status;   /* where on_body leaves its reason; NULL = PROVISION */
    const char *capture_header; /* name of a response header to keep (sbx_http_response.captured),
                                   such as E2B's "X-Next-Token"; NULL = none */
} sbx_http_request;

typedef struct sbx_http_response {
    long status;   /* HTTP status of the last attempt */
    uint8_t *body; /* buffered body, NUL-terminated (body[body_len] == 0); NULL if none */
    size_t body_len;
    char *content_type; /* NULL when absent */
    int attempts;       /* how many attempts were made */
    char *captured;     /* the value of req->capture_header, NULL when absent; "" when longer
                           than SBX_HTTP_MAX_CAPTURED bytes (never a truncated value) */
} sbx_http_response;

/* Longest value of a captured response header. */
#define SBX_HTTP_MAX_CAPTURED 1024

/* Performs the call with retries. SBX_OK means an HTTP response arrived (any status: the caller
 * interprets it, usually with sbx_http_check). Failures: SBX_E_TIMEOUT (deadline, per-attempt
 * timeout or cancel), SBX_E_PROVISION (connection refused, DNS, TLS, reset, truncated body),
 * SBX_E_RESOURCE_EXHAUSTED (body larger than max_body_bytes). resp is always initialised;
 * release it with sbx_http_response_clear. */
sbx_status sbx_http_do(sbx_http_client *c, const sbx_http_request *req, sbx_http_response *resp,
                       sbx_error *err);
void sbx_http_response_clear(sbx_http_response *resp);

/* SBX_OK when resp->status is 2xx; otherwise sets err to "<provider>: METHOD URL returned N:
 * <server message>" (+ the auth hint on 401/403) and returns the mapped code:
 * 401 -> CONFIG (the configured key is wrong), 403 -> PERMISSION_DENIED, 404/410 -> GONE,
 * 408 -> TIMEOUT, 400/422 -> INVALID_ARGUMENT, 429 -> RESOURCE_EXHAUSTED, 507 ->
 * RESOURCE_EXHAUSTED, anything else -> PROVISION. Callers map specific statuses themselves first
 * when their API gives them another meaning. */
sbx_status sbx_http_check(sbx_http_client *c, const sbx_http_request *req,
                          const sbx_http_response *resp, sbx_error *err);
/* Sets err to "<provider>: METHOD URL returned N: <message>" with code (no mapping). */
sbx_status sbx_http_status_error(sbx_http_client *c, const sbx_http_request *req,
                                 const sbx_http_response *resp, sbx_status code, sbx_error *err);

/* The server's human message from an error body: JSON "message" / "Message" / "error.message" /
 * "error" (string), else the printable prefix of the body. Cut to SBX_HTTP_ERROR_BODY_MAX,
 * redacted. Writes into out (always NUL-terminated). */
void sbx_http_body_message(sbx_http_client *c, const sbx_http_response *resp, char *out,
                           size_t out_size);

/* Parses a JSON document of at most len bytes whose nesting depth is at most
 * SBX_HTTP_JSON_MAX_DEPTH. On failure returns SBX_E_PROVISION with "<provider>: <what>: invalid
 * JSON at line L column C: <reason>" (what names the call, e.g. "POST https://.../sandboxes").
 * *out is a new reference (json_decref) or NULL. */
sbx_status sbx_http_parse_json(sbx_http_client *c, const char *what, const uint8_t *data,
                               size_t len, json_t **out, sbx_error *err);
/* Parses resp->body as a JSON object (a non-object is an error too). */
sbx_status sbx_http_response_json(sbx_http_client *c, const sbx_http_request *req,
                                  const sbx_http_response *resp, json_t **out, sbx_error *err);

/* The length of s's longest prefix of at most max bytes that ends between UTF-8 characters
 * (a JSON string cut inside a character is not valid: jansson refuses it). */
size_t sbx_utf8_prefix_len(const char *s, size_t max);

/* Serialises j compactly into a malloc'd string; NULL on allocation failure. */
char *sbx_http_json_dump(const json_t *j);

/* URL-encodes s (RFC 3986 unreserved kept) into a malloc'd string; NULL on ENOMEM. */
char *sbx_http_url_escape(const char *s);

/* Standard base64 (padded) of data, malloc'd; NULL on ENOMEM. */
char *sbx_http_base64_encode(const void *data, size_t len);
/* Decodes standard base64 (padding optional, no whitespace) into a malloc'd buffer (one spare
 * NUL byte after *out_len). NULL on malformed input or ENOMEM. */
uint8_t *sbx_http_base64_decode(const char *text, size_t len, size_t *out_len);

/* Parses a Retry-After value (delta-seconds or an HTTP-date) into milliseconds from now;
 * -1 when absent or unparseable. Exposed for tests. */
int64_t sbx_http_parse_retry_after(const char *value, int64_t now_unix_s);

#ifdef __cplusplus
}
#endif
#endif
