/* netns.h - sockets in another process's network namespace, made without moving the caller.
 *
 * The egress proxy (network_egress ALLOWLIST) and exposed ports (ExposePort) both need a socket
 * on one side of a sandbox's network namespace held by a process on the other side: the proxy
 * lives in the host's namespace and listens inside the sandbox's (its DNS and its ports 80/443),
 * an exposed port listens on the host and connects inside the sandbox. A socket belongs for life
 * to the namespace it was made in, whoever holds it later; so a short-lived child joins the
 * target's namespace (and, when the caller has no CAP_SYS_ADMIN over it, first the user
 * namespace that owns it: a rootless sandbox), runs a function that makes the sockets (or sets
 * up routes over netlink), and hands the descriptors back over SCM_RIGHTS. The caller's own
 * threads and namespaces are untouched.
 */
#ifndef SBX_PROVIDERS_NETNS_H
#define SBX_PROVIDERS_NETNS_H

#include <stddef.h>
#include <sys/types.h>

#include "sbx/status.h"

/* At most this many descriptors come back from one call. */
#define SBX_NETNS_MAX_FDS 32

/* Runs in the child, inside the target's network namespace (single-threaded, after fork: only
 * async-signal-safe calls, no malloc). Puts up to max descriptors in fds, sets *n, and returns
 * 0, or an errno value (the call fails with it; *n descriptors are not sent). */
typedef int (*sbx_netns_fn)(void *arg, int *fds, size_t max, size_t *n);

/* Runs fn inside the network namespace of process target (a pid of the caller's pid namespace:
 * /proc/<target>/ns/net) and returns the descriptors it made in fds (*n of them, at most max, at
 * most SBX_NETNS_MAX_FDS), close-on-exec. */
sbx_status sbx_netns_call(pid_t target, sbx_netns_fn fn, void *arg, int *fds, size_t max, size_t *n,
                          sbx_error *err);

/* Moves the calling thread into target's network namespace (joining its user namespace first
 * when needed, which the kernel allows only to a single-threaded process): for a helper process
 * that will live there, after making what it needs on this side. */
sbx_status sbx_netns_enter(pid_t target, sbx_error *err);

#endif
