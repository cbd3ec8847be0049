/* expose.h - exposed ports (ExposePort) for providers that run sandboxes on this host (local,
 * docker): a relay process per exposed port.
 *
 * The relay's listener is made on the host first (address expose_address, port 0: the kernel
 * picks one), then the relay joins the sandbox's network namespace (sbx_netns_enter) and, for
 * each accepted connection, connects to 127.0.0.1:PORT there and copies bytes both ways: a
 * sandbox's server is reachable even under network DENY, and nothing else of the sandbox is.
 * Relays are double-forked (setsid) so they outlive the process that asked (the CLI), exit by
 * themselves when the sandbox's init process is gone (a pidfd) and are killed by
 * sbx_expose_close_all (destroy, the stale sweep). A listener on an address that is not
 * loopback (or with require_token) lets a connection through only when its first HTTP request
 * head carries the port's token: header `X-Sbx-Expose-Token: TOKEN` or cookie
 * `sbx_expose_token=TOKEN`; anything else gets 401 and is closed.
 *
 * Each exposed port is recorded in a directory of its own that the caller owns and the sandbox
 * cannot write (the recorded pid is what close_all kills): one file per port, so exposing a
 * port again returns the same URL and token while its relay runs.
 */
#ifndef SBX_PROVIDERS_EXPOSE_H
#define SBX_PROVIDERS_EXPOSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/status.h"

/* Ports one sandbox may have exposed at once. */
#define SBX_EXPOSE_MAX_PORTS 16
/* Longest first request head read for the token check. */
#define SBX_EXPOSE_HEAD_MAX 8192
/* Hex characters of a token (128 random bits). */
#define SBX_EXPOSE_TOKEN_LEN 32

/* Provider options of exposed ports (add them to the provider's option specs). */
#define SBX_EXPOSE_OPTION_SPECS                                                                    \
    {"expose_address",                                                                             \
     SBX_OPT_STRING,                                                                               \
     "127.0.0.1",                                                                                  \
     NULL,                                                                                         \
     0,                                                                                            \
     0,                                                                                            \
     "numeric IPv4/IPv6 address exposed ports listen on (not loopback: a token is required)"},     \
        {"expose_host",                                                                            \
         SBX_OPT_STRING,                                                                           \
         "",                                                                                       \
         NULL,                                                                                     \
         0,                                                                                        \
         0,                                                                                        \
         "host name or address put in exposed ports' URLs (default: expose_address)"},             \
        {"expose_require_token",                                                                   \
         SBX_OPT_BOOL,                                                                             \
         "false",                                                                                  \
         NULL,                                                                                     \
         0,                                                                                        \
         0,                                                                                        \
         "require the access token even on a loopback expose_address"},

typedef struct sbx_expose_cfg {
    char address[64]; /* numeric listen address */
    char host[256];   /* what URLs name */
    bool token;       /* listeners require a token */
} sbx_expose_cfg;

/* Validates the options (address numeric, host without '/', '@', spaces or controls). */
sbx_status sbx_expose_config(const char *address, const char *host, bool require_token,
                             sbx_expose_cfg *cfg, sbx_error *err);

/* Exposes port of the sandbox whose init process is target (a pid of the caller's pid
 * namespace: its network namespace is joined), recording it under dir (made 0700 if missing).
 * *url and *token (NULL when none) are malloc'd. The same port again returns the recorded URL
 * and token while its relay runs. More than SBX_EXPOSE_MAX_PORTS is SBX_E_RESOURCE_EXHAUSTED;
 * a target that is gone is SBX_E_GONE. */
sbx_status sbx_expose_port(const sbx_expose_cfg *cfg, const char *dir, pid_t target, uint32_t port,
                           char **url, char **token, sbx_error *err);

/* Kills every relay recorded under dir and removes dir. */
void sbx_expose_close_all(const char *dir);

/* Ports recorded under dir whose relay runs (for tests). */
size_t sbx_expose_count(const char *dir);

/* The token check of a connection's first bytes (buf, len <= SBX_EXPOSE_HEAD_MAX read so far):
 * MORE while the head ("\r\n\r\n") is not complete and fits, OK when a header
 * `X-Sbx-Expose-Token` (any case) or a cookie `sbx_expose_token` equals token (compared in
 * constant time), DENIED otherwise, TOO_LARGE when no head end is within SBX_EXPOSE_HEAD_MAX
 * bytes. Pure and bounded: reads only buf[0, len). */
typedef enum sbx_expose_head {
    SBX_EXPOSE_HEAD_MORE = 0,
    SBX_EXPOSE_HEAD_OK,
    SBX_EXPOSE_HEAD_DENIED,
    SBX_EXPOSE_HEAD_TOO_LARGE
} sbx_expose_head;
sbx_expose_head sbx_expose_check_head(const char *buf, size_t len, const char *token);

#endif
