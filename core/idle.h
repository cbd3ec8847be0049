/* idle.h - the engine's record of when each session of an idle_action: pause profile was last
 * used (folder-private), from which the engine pauses sessions idle longer than their profile's
 * idle_timeout_s. Only what this engine saw: a restarted engine starts with an empty record.
 */
#ifndef SBX_CORE_IDLE_H
#define SBX_CORE_IDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sessions tracked at most: each entry is two ids and a few words (~0.5 KiB), so 65,536 bound
 * the record to ~32 MiB on a worker with more live sessions than it should hold. A session
 * seen when the record is full is not tracked, so it is never paused for idleness: the
 * conservative side. */
#define IDLE_MAX_SESSIONS 65536

typedef struct idle_table idle_table;

/* One session due for a pause: copies, owned by the array idle_due returns. */
typedef struct idle_due_entry {
    char *session_id;
    char *sandbox_id;
    size_t slot; /* the engine's profile index */
} idle_due_entry;

idle_table *idle_new(void);
void idle_free(idle_table *t);

/* The session was used now (monotonic ms) and holds sandbox_id in profile slot; it runs (not
 * paused). detached_delta: +1 when the request started a detached command, -1 when it saw one
 * end (a session with detached commands running is never idle), 0 otherwise. */
void idle_touch(idle_table *t, const char *session_id, const char *sandbox_id, size_t slot,
                int64_t now_ms, int detached_delta);
/* The session's sandbox was paused (an explicit PauseSandbox or the idle pass). */
void idle_paused(idle_table *t, const char *session_id);
/* The session is gone (destroyed, or its sandbox was). */
void idle_forget(idle_table *t, const char *session_id);

/* Sessions not paused, without running detached commands, whose last use is older than
 * timeout_ms[slot] (0: never); *out is a malloc'd array (free with idle_due_free). */
size_t idle_due(idle_table *t, int64_t now_ms, const int64_t *timeout_ms, size_t n_slots,
                idle_due_entry **out);
void idle_due_free(idle_due_entry *list, size_t n);

/* Still due: the same sandbox, not paused, not used since (checked under the session lock). */
bool idle_still_due(idle_table *t, const idle_due_entry *d, int64_t now_ms, int64_t timeout_ms);

#endif
