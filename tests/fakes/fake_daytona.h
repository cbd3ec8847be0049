/* fake_daytona.h - a fake Daytona for tests: the REST API (Bearer auth; create from snapshot or
 * buildInfo with resources in cores/GB, get, delete, start, network-settings) and the toolbox
 * at {base}/toolbox/{id} (process/execute with timeout -> 408, files upload (multipart part
 * "file"), download, list, folder). A new sandbox answers `creating` first and `started` on the
 * next GET, like Daytona's asynchronous create. Errors use Daytona's NestJS body
 * {"path","timestamp","statusCode","error","message"} (reference/cloud-apis.md §2).
 * Commands run in fake_interp, never on the host.
 */
#ifndef SBX_TESTS_FAKE_DAYTONA_H
#define SBX_TESTS_FAKE_DAYTONA_H

#include <stdbool.h>
#include <stddef.h>

#include "fakes/fake_http.h"

typedef struct fake_daytona fake_daytona;

fake_daytona *fake_daytona_start(const char *api_key);
void fake_daytona_stop(fake_daytona *f);
const char *fake_daytona_url(fake_daytona *f);
fake_http *fake_daytona_http(fake_daytona *f);

size_t fake_daytona_live(fake_daytona *f);
bool fake_daytona_exists(fake_daytona *f, const char *sandbox_id);
/* The sandbox disappears (deleted elsewhere). */
void fake_daytona_vanish(fake_daytona *f, const char *sandbox_id);
/* Auto-stop: the sandbox goes to state `stopped`. */
void fake_daytona_autostop(fake_daytona *f, const char *sandbox_id);
/* The next create ends in state `error` with this reason (NULL = normal). */
void fake_daytona_fail_next_create(fake_daytona *f, const char *reason);
void fake_daytona_last_id(fake_daytona *f, char *buf, size_t cap);
/* GET /sandbox answers at most n sandboxes per page (0: the request's limit), so a test reaches
 * the next pages (nextCursor) without 100 sandboxes. */
void fake_daytona_list_page(fake_daytona *f, size_t n);

#endif
