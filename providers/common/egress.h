/* egress.h - the egress proxy of a sandbox whose policy is network_egress ALLOWLIST.
 *
 * The sandbox has a network namespace of its own with nothing in it but lo. The proxy is a
 * process on the host side that holds listeners inside that namespace (made through
 * sbx_netns_call): UDP port 53 (DNS) and TCP ports 80 and 443 on 0.0.0.0, plus every port a
 * CIDR entry names, with the route `local 0.0.0.0/0 dev lo` so that a connection to any IPv4
 * address reaches a listener of the proxy (its original destination is the accepted socket's
 * own address). For each connection it decides by the CIDR entries (the original address and
 * port), else by the TLS ClientHello's SNI (443) or the HTTP Host (80) against the name
 * entries; it resolves an allowed name itself (the configured resolver, never the sandbox's
 * choice of address), refuses special addresses (loopback, private, link-local, ...) unless a
 * CIDR entry lists them, and splices both ways. DNS queries get A records for allowed names
 * only (NXDOMAIN otherwise, AAAA empty). IPv6 has no route and no listener: refused. Anything
 * else is refused and counted per destination in <state_dir>/egress.refused, which the
 * provider reads around each operation.
 *
 * The proxy outlives the process that started it (a session's sandbox is used by later CLI
 * runs); it ends when the sandbox's PID 1 ends (a pidfd) or when sbx_egress_stop kills it.
 */
#ifndef SBX_PROVIDERS_EGRESS_H
#define SBX_PROVIDERS_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "providers/common/egress_parse.h"
#include "sbx/contract.h"
#include "sbx/provider.h"
#include "sbx/status.h"

/* Most destinations counted in the refusal table (more are counted under "(other)"). */
#define SBX_EGRESS_MAX_REFUSALS 64
/* Longest destination in the table: a name, or "a.b.c.d:port". */
#define SBX_EGRESS_NAME_MAX_DEST (SBX_EGRESS_NAME_MAX + 8)
/* Most connections the proxy carries at once (more are refused). */
#define SBX_EGRESS_MAX_CONNS 128

/* Checks the allowlist entries: appends "network_allow=ENTRY (why)" to un for each the proxy
 * cannot enforce. False only when out of memory. */
bool sbx_egress_check(char *const *allow, size_t n_allow, sbx_strlist *un);

/* Starts the proxy of the sandbox whose PID 1 is pid (host pid namespace): resolver is
 * "a.b.c.d[:port]" or NULL/"" for the host's first IPv4 nameserver in /etc/resolv.conf;
 * state_dir (the sandbox's host-side directory) gets egress.pid and egress.refused. Fails (and
 * nothing runs) when any part cannot be set up: the sandbox must then not be handed out. */
sbx_status sbx_egress_start(pid_t pid, char *const *allow, size_t n_allow, const char *resolver,
                            const char *state_dir, sbx_error *err);

/* Kills the proxy recorded in state_dir (if it is still that process) and removes its files. */
void sbx_egress_stop(const char *state_dir);

/* Whether state_dir has a proxy recorded. */
bool sbx_egress_active(const char *state_dir);

/* The refusal table of state_dir's proxy. */
typedef struct {
    size_t n;
    struct {
        char dest[SBX_EGRESS_NAME_MAX_DEST];
        uint32_t count;
    } e[SBX_EGRESS_MAX_REFUSALS + 1];
} sbx_egress_table;

void sbx_egress_table_read(const char *state_dir, sbx_egress_table *t);

/* Appends to r->egress_refused every destination whose count grew from before to after. False
 * only when out of memory. */
bool sbx_egress_report(const sbx_egress_table *before, const sbx_egress_table *after,
                       sbx_result *r);

/* Parses the text of an egress.refused file (lines "COUNT DESTINATION"); bounded, malformed
 * lines are skipped. */
void sbx_egress_table_parse(const char *text, size_t len, sbx_egress_table *t);

/* Adds the route `local NET/LEN dev lo table local` in the caller's network namespace (lo must
 * be up): every address of NET/LEN is then this host's. Returns 0 or an errno value;
 * async-signal-safe (for an sbx_netns_fn). */
int sbx_egress_local_route(uint32_t net, int len);

/* Most host addresses the ALLOW guard closes (more are left reachable: a host with this many
 * IPv4 addresses is not one sbx is tested on). */
#define SBX_EGRESS_GUARD_HOST_MAX 256

/* The host's nameservers the ALLOW guard leaves reachable (resolv.conf honours three; the
 * host's and systemd-resolved's upstream list together). */
#define SBX_EGRESS_GUARD_DNS_MAX 8

/* network_egress ALLOW's guard, in the network namespace of process target (a sandbox with a
 * namespace of its own behind NAT, such as a Docker bridge): routes that refuse (EACCES) every
 * connection to the link-local range (the cloud metadata address 169.254.169.254), the shared
 * range 100.64/10 (Alibaba's metadata), the private ranges of RFC 1918 (the host's neighbours:
 * the other machines of its VPC or LAN) but the sandbox's own network, and each of the host's
 * own IPv4 addresses (its services, through the network's gateway or any other), and IPv6 off.
 * The host's nameservers in those ranges stay reachable on DNS's port alone (UDP and TCP 53),
 * the way they were (a Docker network's DNS, the daemon's embedded one included, asks them from
 * the sandbox's namespace); their other ports are refused like the rest of the range. Programs,
 * without CAP_NET_ADMIN, cannot undo them. Fails (and the sandbox must not be handed out) when
 * any cannot be set. */
sbx_status sbx_egress_guard_allow(pid_t target, sbx_error *err);

/* The host's IPv4 nameservers (host order), at most max: /etc/resolv.conf's, and when that names
 * systemd-resolved's local stub, the upstream ones in /run/systemd/resolve/resolv.conf. */
size_t sbx_egress_host_resolvers(uint32_t *out, size_t max);

/* Appends the IPv4 nameservers of resolv.conf file path (host order) to out[0..*n), at most max
 * in all, each once; IPv6 ones, comments and other lines are skipped, lines are read up to 511
 * bytes. A file that cannot be read adds nothing. */
void sbx_egress_nameservers_in(const char *path, uint32_t *out, size_t *n, size_t max);

/* The host's IPv4 addresses but loopback (host order), at most max; 0 when none or unknown. */
size_t sbx_egress_host_addrs(uint32_t *out, size_t max);

/* Brings lo up in the caller's network namespace; 0 or an errno value; async-signal-safe. */
int sbx_egress_lo_up(void);

#endif
