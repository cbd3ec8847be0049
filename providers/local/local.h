/* local.h - private to the local provider and its tests: defaults and introspection helpers
 * (where a sandbox keeps its state), so tests can check that destroy leaves nothing behind.
 * Embedding programs use the provider only through sbx_provider_lookup("local").
 */
#ifndef SBX_PROVIDERS_LOCAL_H
#define SBX_PROVIDERS_LOCAL_H

#include "sbx/provider.h"

/* Read-only host paths of the default root: the toolchain and python3 live under /usr on
 * Debian (merged /usr); the rest are small files programs expect (dynamic loader cache,
 * alternatives symlinks, time zone, CA certificates for ALLOW networks, resolver config). */
#define LOCAL_DEFAULT_BINDS                                                                        \
    "/usr,/bin,/sbin,/lib,/lib64,/lib32,/libx32,/etc/alternatives,/etc/ld.so.cache,"               \
    "/etc/localtime,/etc/ssl,/etc/ca-certificates,/etc/resolv.conf,/etc/nsswitch.conf"

/* The host directory holding a sandbox's state (meta file, agent socket directory). */
const char *sbx_local_state_dir(const sbx_sandbox *s);
/* The file a provider open leaves in its runtime directory (the time of its last sweep): whoever
 * removes a runtime directory it made removes this too. */
#define SBX_LOCAL_SWEEP_STAMP ".swept"
/* The runtime directory an opened local provider uses. */
const char *sbx_local_runtime_dir(void *provider_state);
/* Waits (up to 10 s) until the per_call sandboxes this provider destroyed are gone from the host:
 * their reapers remove them just after the destroy has returned (agent/reap.c). For tests that
 * check what a destroy leaves. */
void sbx_local_settle(void *provider_state);

#endif
