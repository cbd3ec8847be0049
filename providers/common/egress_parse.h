/* egress_parse.h - the egress proxy's pure parsers and matchers (network_egress ALLOWLIST).
 *
 * Every byte these read comes from inside a sandbox (a ClientHello, an HTTP request head, a DNS
 * query) or from a resolver the sandbox may influence (a DNS answer): all are hostile. Each
 * function reads only (buf, len), writes only its outputs, allocates nothing and is bounded by
 * the constants below; a fuzz target in tests/fuzz drives each one.
 *
 * Names handed out are normalised: lower case, no trailing dot, letters, digits, '-', '_' and
 * '.' only, no empty label, at most SBX_EGRESS_NAME_MAX bytes. Anything else is refused (a name
 * that cannot be compared safely with the allowlist is not allowed).
 */
#ifndef SBX_PROVIDERS_EGRESS_PARSE_H
#define SBX_PROVIDERS_EGRESS_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"

/* Longest DNS name (RFC 1035) and so the longest name any parser returns. */
#define SBX_EGRESS_NAME_MAX 253
/* Most bytes the proxy reads before deciding on a connection (ClientHello, HTTP head). */
#define SBX_EGRESS_HEAD_MAX 16384
/* Largest DNS message over UDP the proxy reads or writes. */
#define SBX_EGRESS_DNS_MAX 1232
/* Most addresses taken from one DNS answer. */
#define SBX_EGRESS_DNS_MAX_ADDRS 16
/* Most network_allow entries: as many as a policy may hold. */
#define SBX_EGRESS_MAX_RULES MAX_POLICY_LIST_ENTRIES

typedef enum {
    SBX_EGRESS_BAD = -1,      /* malformed, or not what is allowed: refuse */
    SBX_EGRESS_NEED_MORE = 0, /* a valid prefix: read more (up to the bound) */
    SBX_EGRESS_OK = 1,
} sbx_egress_parse;

/* Normalises a host name of n bytes into out (SBX_EGRESS_NAME_MAX + 1 bytes). */
bool sbx_egress_name_norm(const char *s, size_t n, char *out);

/* The server name (SNI host_name) of a TLS ClientHello at the start of a connection: the
 * handshake message must be whole in the first record. No SNI, an IP literal as SNI or more than
 * one host_name is BAD. */
sbx_egress_parse sbx_egress_tls_sni(const uint8_t *buf, size_t len, char *name);

/* The Host of an HTTP/1.x request head (through the empty line): exactly one Host header; an
 * absolute-form target must name the same host. *port is the Host's port, or 0 when none. */
sbx_egress_parse sbx_egress_http_host(const uint8_t *buf, size_t len, char *name, uint16_t *port);

/* A DNS query: one question, no answers; the name is normalised (an unnormalisable name gives
 * rcode 3 from the proxy, so the parse still succeeds with name[0] = '\0' and *bad_name set). */
typedef struct {
    uint16_t id;
    uint16_t flags;
    uint16_t qtype;
    uint16_t qclass;
    size_t question_end; /* offset just past the question */
    bool bad_name;
    char name[SBX_EGRESS_NAME_MAX + 1];
} sbx_egress_dns_query;

sbx_egress_parse sbx_egress_dns_query_parse(const uint8_t *buf, size_t len,
                                            sbx_egress_dns_query *q);

/* Builds a query for name's A record with the given id into out; returns its length or 0. */
size_t sbx_egress_dns_query_build(uint16_t id, const char *name, uint8_t *out, size_t cap);

/* The IPv4 addresses (network order) of an answer to the query (id, name, type A): A records of
 * name or of a name a CNAME chain from name leads to, within the answer. Returns OK with *n
 * addresses (possibly 0; *rcode set), BAD for a malformed answer or one to another question. */
sbx_egress_parse sbx_egress_dns_answer_parse(const uint8_t *buf, size_t len, uint16_t id,
                                             const char *name, uint32_t *addrs, size_t max,
                                             size_t *n, int *rcode);

/* The reply to query q (whose bytes are buf[0 .. q->question_end)) with rcode and n A records
 * (ttl seconds) into out; returns its length or 0. */
size_t sbx_egress_dns_reply_build(const uint8_t *buf, const sbx_egress_dns_query *q, int rcode,
                                  const uint32_t *addrs, size_t n, uint32_t ttl, uint8_t *out,
                                  size_t cap);

/* One network_allow entry: "name", "*.name" (any subdomain, not name itself), "a.b.c.d",
 * "a.b.c.d/len", each with an optional ":port" (0 = any port). IPv6 entries are refused. */
typedef enum {
    SBX_EGRESS_RULE_NAME,
    SBX_EGRESS_RULE_WILDCARD,
    SBX_EGRESS_RULE_CIDR
} sbx_egress_rule_kind;

typedef struct {
    sbx_egress_rule_kind kind;
    char name[SBX_EGRESS_NAME_MAX + 1]; /* NAME: the name; WILDCARD: the suffix after "*." */
    uint32_t net, mask;                 /* CIDR, host order */
    uint16_t port;
} sbx_egress_rule;

/* Parses one entry; false (with why, a static string) for one the proxy cannot enforce. */
bool sbx_egress_rule_parse(const char *entry, sbx_egress_rule *r, const char **why);

/* Whether name (normalised) on port is allowed by a NAME or WILDCARD rule. */
bool sbx_egress_allow_name(const sbx_egress_rule *rules, size_t n, const char *name, uint16_t port);

/* Whether IPv4 address ip (host order) on port is allowed by a CIDR rule. */
bool sbx_egress_allow_ip(const sbx_egress_rule *rules, size_t n, uint32_t ip, uint16_t port);

/* Whether ip (host order) is one the proxy never connects to unless a CIDR rule lists it:
 * 0.0.0.0/8, loopback, RFC 1918, 100.64.0.0/10, link-local, multicast, reserved, broadcast. */
bool sbx_egress_ip_special(uint32_t ip);

#endif
