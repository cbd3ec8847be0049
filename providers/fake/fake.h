/* fake.h - the test API of the fake provider (providers/fake): lets engine, broker, session and
 * replay tests see what the provider was asked to do and inject faults at run time.
 * Private to the test tree and providers/fake; an embedding program never includes it.
 *
 * Each opened fake instance (one per profile per engine) registers itself under its profile
 * name; sbx_fake_get returns the most recently opened live instance of that profile.
 */
#ifndef SBX_PROVIDERS_FAKE_H
#define SBX_PROVIDERS_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbx_fake sbx_fake;

/* The most recently opened, still open fake instance of profile; NULL when none. */
sbx_fake *sbx_fake_get(const char *profile);

/* Sandboxes created / destroyed (destroy calls for ids that existed) so far. */
size_t sbx_fake_created_count(sbx_fake *f);
size_t sbx_fake_destroyed_count(sbx_fake *f);
/* Destroy calls received, including idempotent ones for unknown ids. */
size_t sbx_fake_destroy_calls(sbx_fake *f);
bool sbx_fake_was_created(sbx_fake *f, const char *sandbox_id);
bool sbx_fake_was_destroyed(sbx_fake *f, const char *sandbox_id);
/* True while the sandbox exists (created or external, and neither destroyed nor vanished). */
bool sbx_fake_alive(sbx_fake *f, const char *sandbox_id);

/* Fault injection. vanish: the sandbox disappears behind sbx's back (the next attach is GONE).
 * fail_create: every create fails with PROVISION; fail_destroys: the next n destroys do (the
 * sandbox lives on). gone: every attach is GONE. slow_ms: every
 * operation first sleeps this long (deadline-aware). */
void sbx_fake_vanish(sbx_fake *f, const char *sandbox_id);
void sbx_fake_set_fail_create(sbx_fake *f, bool on);
void sbx_fake_fail_destroys(sbx_fake *f, int n);
void sbx_fake_set_gone(sbx_fake *f, bool on);
void sbx_fake_set_slow_ms(sbx_fake *f, int64_t ms);
/* Every attach waits until its deadline (the engine's, or FAKE_ATTACH_STALL_MS) and fails
 * with TIMEOUT: a live sandbox that does not answer, as a paused local agent. */
#define FAKE_ATTACH_STALL_MS 10000
void sbx_fake_set_attach_stalls(sbx_fake *f, bool on);
/* A closed gate holds every operation (after it is counted in sbx_fake_ops) until opened. */
void sbx_fake_set_gate(sbx_fake *f, bool closed);

/* deadline_mono_ms the last operation received (0 = none). */
int64_t sbx_fake_last_deadline(sbx_fake *f);
/* Most operations seen running at once across all sandboxes of this instance, and whether two
 * operations ever overlapped on one sandbox. */
int sbx_fake_max_parallel(sbx_fake *f);
bool sbx_fake_overlap_seen(sbx_fake *f);
/* Operations run (run_code, run_command, ...) so far. */
uint64_t sbx_fake_ops(sbx_fake *f);

#endif
