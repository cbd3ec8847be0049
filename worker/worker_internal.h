/* worker_internal.h - declarations shared by the files of worker/ (never installed, never
 * included outside this folder): caller authentication with the TLS context (auth.c) and the
 * event loop's limits. The gRPC wire rules are core/grpc_wire.h, shared with the remote broker;
 * the event loop itself lives in server.c (its own types and limits: server_impl.h). */
#ifndef SBX_WORKER_INTERNAL_H
#define SBX_WORKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <protobuf-c/protobuf-c.h>

#include "core/grpc_wire.h"
#include "sbx/config.h"
#include "sbx/status.h"
#include "sbx/worker.h"

/* ---- listening sockets (listen.c) ------------------------------------------------------------ */

/* A listening socket on addr ("host:port" or "[v6]:port"; port 0 lets the kernel pick), made
 * with SOCK_CLOEXEC | sock_flags; its port in *port, and in *loopback (when not NULL) whether
 * it is bound to a loopback address. -1 with err set (SBX_E_CONFIG, naming option and addr,
 * example showing the form) when addr is malformed, does not resolve, or cannot be bound. */
int worker_listen(const char *option, const char *addr, const char *example, int backlog,
                  int sock_flags, bool *loopback, int *port, sbx_error *err);

/* ---- the event loop's limits against hostile peers (server_impl.h) ------------------------- */

/* The limits the event loop enforces on connections (their defaults and reasons are the
 * WORKER_* constants of server_impl.h). A worker starts with the defaults; tests shrink them to
 * reach the limits with a few hundred connections instead of thousands. */
typedef struct worker_limits {
    size_t max_connections;       /* WORKER_MAX_CONNECTIONS */
    size_t max_unproven_per_peer; /* WORKER_MAX_UNPROVEN_PER_PEER */
    int64_t first_request_us;     /* WORKER_FIRST_REQUEST_US */
    int64_t idle_us;              /* WORKER_IDLE_US */
    size_t conn_buffer_max;       /* WORKER_CONN_BUFFER_MAX */
    size_t buffer_total_max;      /* WORKER_BUFFER_TOTAL_MAX */
} worker_limits;

/* The limits w enforces now (*out). */
void worker_get_limits(const sbx_worker *w, worker_limits *out);
/* Replaces them; call before sbx_worker_run (the loop thread reads them without a lock). */
void worker_set_limits(sbx_worker *w, const worker_limits *limits);

/* ---- callers and TLS (auth.c) ------------------------------------------------------------ */

/* One configured caller, resolved at startup: the SHA-256 of its token (tokens themselves are
 * dropped right after hashing, so they are never logged or kept), its certificate subject CN. */
typedef struct worker_caller {
    const sbx_worker_caller *config; /* borrowed from the sbx_config */
    bool has_token;
    unsigned char token_digest[SHA256_DIGEST_LENGTH];
} worker_caller;

typedef struct worker_auth {
    worker_caller *callers;
    size_t n_callers;
    bool required; /* callers are configured: every Execute/Describe must authenticate */
} worker_auth;

/* Resolves every caller's token from its environment variable (missing/empty: SBX_E_CONFIG
 * naming the variable). */
sbx_status worker_auth_init(worker_auth *auth, const sbx_worker_config *cfg, sbx_error *err);
void worker_auth_free(worker_auth *auth);

/* The caller whose token matches `authorization: Bearer <token>` (value, len); NULL when none
 * does. Every caller is compared in constant time (CRYPTO_memcmp over SHA-256 digests). */
const worker_caller *worker_auth_by_token(const worker_auth *auth, const char *value, size_t len);
/* The caller whose cert_subject equals the verified client certificate's CN; NULL if none. */
const worker_caller *worker_auth_by_cert(const worker_auth *auth, const char *cn);
/* True when caller may assert the principal subject (its list has it, or "*"). */
bool worker_caller_may_assert(const worker_caller *caller, const char *subject);
/* True when caller may send the principal's credentials and groups: none are set, or its
 * subjects include "*". They choose the identity a provider acts as in user mode (kubernetes
 * impersonates credentials.user and the groups, ec2_ssm assumes credentials.role_arn), so a
 * caller held to a few subjects that could set them would act as anyone. */
bool worker_caller_may_choose_identity(const worker_caller *caller, const sbx_principal *p);
/* The refusal of such a principal (for worker_call_decide and the queue's refusal). */
#define WORKER_IDENTITY_REFUSAL                                                                    \
    "caller '%s' may not set the principal's credentials or groups: they choose whom a "           \
    "provider acts as (credentials.user, credentials.role_arn, groups); only a caller whose "      \
    "subjects include '*' may send them"

/* Builds the server TLS context: TLS 1.2+, ALPN `h2` only, the server certificate and key, and
 * when client_ca is set, client certificates verified against it (required when no token caller
 * exists). NULL with *err set on failure. */
SSL_CTX *worker_tls_ctx_new(const sbx_worker_config *cfg, const worker_auth *auth, sbx_error *err);

/* The subject CN of the connection's verified peer certificate into out (""), false if none. */
bool worker_tls_peer_cn(SSL *ssl, char *out, size_t cap);

#endif
