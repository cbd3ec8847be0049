/* sessions.h - the client side of sessions (DESIGN §5 "Session scopes"): which session a
 * request runs in, by the profile's scope, and the handles kept between calls.
 *
 *   per_call     a fresh sandbox for every operation, destroyed afterwards in all cases
 *                (success, program failure, machinery failure);
 *   per_session  explicit sessions minted with sbx_sessions_create; an unknown id is
 *                SESSION_NOT_FOUND (never a silent fresh sandbox); a session never moves to
 *                another profile. A request naming no session uses "default:<profile>";
 *   per_runtime  one shared session per profile ("runtime:<profile>").
 * idle_timeout_s: a session untouched for longer is reset on its next use, with a notice
 * (managed: the sandbox is destroyed and the workspace discarded; attached: only the binding
 * is dropped, the environment is untouched). With idle_action: pause nothing is reset: the
 * engine pauses a session idle that long, and the next request resumes it.
 *
 * Handles can persist in a directory (the CLI uses $XDG_STATE_HOME/sbx/sessions): one file per
 * session holding its packed SessionHandle, directory 0700, files 0600, written atomically
 * (temp file + rename). Thread-safe; the broker and config are borrowed.
 */
#ifndef SBX_SESSIONS_H
#define SBX_SESSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* Largest stored handle file read back: a handle is well under 2 KiB (ids, names, node, 32-byte
 * binding); 64 KiB bounds a corrupted or hostile file. */
#define SBX_SESSION_FILE_MAX (64u * 1024u)

/* Most sessions kept by one manager (and read from a store directory). */
#define SBX_SESSIONS_MAX 4096

typedef struct sbx_sessions sbx_sessions;

/* store_dir NULL: in memory only. Otherwise handles are loaded from and saved to store_dir
 * (created 0700). */
sbx_status sbx_sessions_open(const sbx_config *cfg, sbx_broker *broker, const char *store_dir,
                             sbx_sessions **out, sbx_error *err);
void sbx_sessions_free(sbx_sessions *s);

/* The CLI's store directory: $XDG_STATE_HOME/sbx/sessions, else ~/.local/state/sbx/sessions.
 * Writes into buf; false when neither variable is usable. */
bool sbx_sessions_default_dir(char *buf, size_t size);

/* Mints a per_session session of profile (NULL: default profile) with an optional name; no
 * sandbox yet (created on first use). *out (may be NULL) gets a copy, freed with
 * sbx_message_free. CONFIG for an unknown profile or a profile whose scope is not
 * per_session. */
sbx_status sbx_sessions_create(sbx_sessions *s, const char *profile, const char *name,
                               sbx_session_handle **out, sbx_error *err);

/* Runs req in its session: session_id (an id or a name; NULL: by the profile's scope, see
 * above). req->session and an empty req->profile are filled in here; req is otherwise
 * borrowed. per_call waits for the completion whatever wait_ms says (its sandbox must be
 * destroyed afterwards). Returns SBX_OK with *out = the completion, or *out = NULL when the
 * task is still pending (deliver it later with sbx_sessions_ingest). Errors before submission
 * (SESSION_NOT_FOUND, CONFIG) return that status with *out = a FAILED completion too. */
sbx_status sbx_sessions_execute(sbx_sessions *s, sbx_request *req, const char *session_id,
                                int64_t wait_ms, sbx_completion **out, sbx_error *err);
/* The same with the broker's hooks (live output, cancellation; may be NULL); they must stay
 * valid until the completion is produced, so pass SBX_WAIT_FOREVER with them. */
sbx_status sbx_sessions_execute_hooks(sbx_sessions *s, sbx_request *req, const char *session_id,
                                      int64_t wait_ms, const sbx_engine_hooks *hooks,
                                      sbx_completion **out, sbx_error *err);

/* Stores the session handle a (late) completion carries, when the session is known. */
void sbx_sessions_ingest(sbx_sessions *s, const sbx_completion *c);

/* Destroys a session's sandbox (through the broker, as principal) and forgets the session.
 * Unknown ids are fine (idempotent). */
sbx_status sbx_sessions_destroy(sbx_sessions *s, const char *session_id,
                                const sbx_principal *principal, sbx_error *err);

/* Forgets a session (an id or a name) without destroying its sandbox: for one whose sandbox
 * cannot be reached any more (its profile was removed, or now uses another provider), which
 * sbx_sessions_destroy would keep refusing to forget. Unknown ids are fine. */
void sbx_sessions_forget(sbx_sessions *s, const char *session_id);

/* Copies of every known handle (sorted by created_at_ms then id); free with
 * sbx_sessions_list_free. */
size_t sbx_sessions_list(sbx_sessions *s, sbx_session_handle ***out);
void sbx_sessions_list_free(sbx_session_handle **list, size_t n);

/* A copy of one session (by id or name), or NULL. Free with sbx_message_free. */
sbx_session_handle *sbx_sessions_get(sbx_sessions *s, const char *session_id);
/* Replaces the stored handle of h->session_id (tests, migrations). */
sbx_status sbx_sessions_put(sbx_sessions *s, const sbx_session_handle *h, sbx_error *err);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
