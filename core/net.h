/* net.h - the one rule for plaintext (DESIGN §7): unencrypted traffic only to a literal loopback
 * host, everything else over TLS. core/config.c, broker/remote.c, worker/server.c and the cloud
 * providers ask these functions instead of testing prefixes, so a name such as
 * "127.attacker.example" (a DNS name that resolves anywhere) is never mistaken for loopback.
 * Internal to libsbx (not installed); this file must not resolve names or open sockets.
 */
#ifndef SBX_CORE_NET_H
#define SBX_CORE_NET_H

#include <stdbool.h>
#include <stddef.h>

struct sockaddr;

/* True only for a literal loopback host: 127.0.0.0/8 written as a dotted-quad IPv4 address, ::1
 * (with or without brackets), or "localhost" (any case; libcurl and the resolver keep it on
 * this host). host is len bytes, not necessarily NUL-terminated, with no port. */
bool sbx_net_host_is_loopback(const char *host, size_t len);

/* True for an AF_INET address in 127.0.0.0/8 or the AF_INET6 address ::1. */
bool sbx_net_addr_is_loopback(const struct sockaddr *sa);

/* What a URL's transport is, as libcurl (which will send the request) parses it. */
typedef enum sbx_net_url {
    SBX_NET_URL_INVALID = 0,    /* not a URL libcurl accepts, no host, or not SCHEME:// */
    SBX_NET_URL_TLS,            /* https:// */
    SBX_NET_URL_PLAIN_LOOPBACK, /* http:// to a loopback host (sbx_net_host_is_loopback) */
    SBX_NET_URL_PLAIN_REMOTE,   /* http:// to any other host: refuse it */
    SBX_NET_URL_OTHER_SCHEME,   /* neither http nor https */
} sbx_net_url;

sbx_net_url sbx_net_url_transport(const char *url);

#endif
