/* uid_slots.h - a host-wide registry of numbered slots, so that each live sandbox holds a host
 * uid (or uid range) no other sandbox holds at the same time: the kernel charges per-user counts
 * (inotify instances and watches, queued signals, processes, mqueue bytes, locked memory) to a
 * uid, so sandboxes that share one share those quotas too.
 *
 * A slot k of a registry directory is the symlink <dir>/<k> -> <owner path> (the sandbox's state
 * directory), made with symlink(2), which either creates it or fails with EEXIST: two providers,
 * in one process or several, racing for a slot never both get it. Providers with one uid range
 * must use one directory (under /run, not their runtime dir). This module must not know what a
 * slot's ids are used for.
 */
#ifndef SBX_PROVIDERS_UID_SLOTS_H
#define SBX_PROVIDERS_UID_SLOTS_H

#include "providers/common/teardown.h"
#include "sbx/status.h"

/* A slot younger than this may belong to a create still setting up: a sweep leaves it. */
#define SBX_UID_SLOT_SWEEP_MIN_AGE_S 60

/* Claims a free slot of [0, n_slots) in dir (created 0700 with its parent when absent), starting
 * at a random one, for owner (a path; its absence later marks the slot stale). */
sbx_status sbx_uid_slot_claim(const char *dir, long n_slots, const char *owner, long *slot,
                              sbx_error *err);
/* sbx_uid_slot_release is in teardown.h: the reaper of a one-shot sandbox, in the static agent,
 * frees slots too. */
/* Frees every slot of dir older than SBX_UID_SLOT_SWEEP_MIN_AGE_S whose owner path is gone (a
 * crash between claim and release). */
void sbx_uid_slot_sweep(const char *dir);

#endif
