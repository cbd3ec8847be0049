/* holdings.h - the sandboxes of per_session profiles each principal holds on this engine
 * (folder-private), which sandbox.principal_sandboxes bounds: without a bound, one tenant of a
 * shared worker could make sandboxes until the host's uid slots (local, docker) or the cloud
 * account's quota ran out, and every other tenant's new session would then fail.
 *
 * What this engine made or found at open and has not seen end: a sandbox counts from its create
 * (or from the open of its profile, for one a provider lists: provider_ops.list_held) until a
 * destroy through the engine, or until the engine finds it gone (an attach, the check at the
 * limit). Thread-safe.
 */
#ifndef SBX_CORE_HOLDINGS_H
#define SBX_CORE_HOLDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct holdings holdings;

/* One sandbox a principal holds: a copy (holdings_list). */
typedef struct holding {
    char *sandbox_id;
    size_t slot; /* the engine's profile index */
} holding;

/* limit: the most sandboxes one principal holds at once (> 0). */
holdings *holdings_new(size_t limit);
void holdings_free(holdings *h);

/* A place holdings_reserve took: settle it exactly once. */
typedef struct holding_place {
    bool counted; /* false: out of memory, nothing was taken (nor is the sandbox counted: the
                     other side would refuse a tenant for the engine's own shortage) */
} holding_place;

/* Takes a place for a sandbox subject is about to make. false: subject holds limit already
 * (made, or being made by its other requests); *held then says how many. */
bool holdings_reserve(holdings *h, const char *subject, size_t *held, holding_place *place);
/* Settles a reserved place: the sandbox was made (sandbox_id, now held) or not (NULL: the
 * place is given back). Out of memory: the sandbox is not counted. */
void holdings_settle(holdings *h, const char *subject, holding_place place, size_t slot,
                     const char *sandbox_id);
/* Counts a sandbox subject already holds that this engine did not make (one a provider listed
 * when the engine opened its profile: made before a restart), whatever the limit. One held
 * already is not counted twice. Out of memory: not counted. */
void holdings_add(holdings *h, const char *subject, size_t slot, const char *sandbox_id);
/* The sandbox ended (destroyed, or found gone): its place is free. One not held is ignored. */
void holdings_drop(holdings *h, const char *subject, size_t slot, const char *sandbox_id);

/* What subject holds (made, not being made), as copies for a check outside the lock; at most
 * once per HOLDINGS_CHECK_EVERY_MS per subject (0 otherwise, and when it holds none). */
size_t holdings_due_check(holdings *h, const char *subject, int64_t now_ms, holding **out);
void holdings_list_free(holding *list, size_t n);

/* How often the sandboxes of a principal at its limit are checked for ones that ended
 * without the engine (an idle TTL, a sweep, a host restart): a principal retrying at its limit
 * costs one attach per sandbox it holds at most this often. */
#define HOLDINGS_CHECK_EVERY_MS 1000
/* How long one such check may take in all: a sandbox that has not answered by then keeps its
 * place this time. */
#define HOLDINGS_CHECK_BUDGET_MS 2000

#endif
