/* fake_e2b.h - a fake E2B for tests: the REST control plane (X-API-Key; create, get, connect,
 * timeout, network, kill), envd (Connect-RPC process.Process/Start with envelope framing,
 * SendSignal, filesystem.Filesystem/ListDir, /files upload and download) and the
 * code-interpreter's Jupyter /execute (NDJSON), all on one fake_http server. In-sandbox calls are
 * routed by the E2b-Sandbox-Id / E2b-Sandbox-Port headers, like https://sandbox.e2b.app.
 * Behaviour follows reference/cloud-apis.md §1, including error bodies
 * {"code":N,"message":...}. Commands run in fake_interp, never on the host.
 */
#ifndef SBX_TESTS_FAKE_E2B_H
#define SBX_TESTS_FAKE_E2B_H

#include <stdbool.h>
#include <stddef.h>

#include "fakes/fake_http.h"

typedef struct fake_e2b fake_e2b;

/* Starts the fake; requests must carry X-API-Key: api_key. NULL on failure. */
fake_e2b *fake_e2b_start(const char *api_key);
void fake_e2b_stop(fake_e2b *f);
/* Base URL for api_url and sandbox_url. */
const char *fake_e2b_url(fake_e2b *f);
/* The underlying server: faults and the request log. */
fake_http *fake_e2b_http(fake_e2b *f);

/* Sandboxes currently alive, and whether one exists. */
size_t fake_e2b_live(fake_e2b *f);
bool fake_e2b_exists(fake_e2b *f, const char *sandbox_id);
/* The sandbox disappears behind the client's back (expired TTL). */
void fake_e2b_vanish(fake_e2b *f, const char *sandbox_id);
/* The next create answers sandboxID id (a hostile or broken control plane), once. */
void fake_e2b_next_id(fake_e2b *f, const char *id);
/* Copies the id of the most recently created sandbox into buf ("" when none). */
void fake_e2b_last_id(fake_e2b *f, char *buf, size_t cap);
/* Copies the envdAccessToken of a sandbox ("" when unknown). */
void fake_e2b_token(fake_e2b *f, const char *sandbox_id, char *buf, size_t cap);
/* GET /v2/sandboxes answers at most n sandboxes per page (0: the request's limit), so a test
 * reaches the next pages (X-Next-Token) without 100 sandboxes. */
void fake_e2b_list_page(fake_e2b *f, size_t n);
/* Each X-Next-Token GET /v2/sandboxes sends is n bytes longer (a server whose tokens outgrow
 * what the client keeps); the fake still reads such a token back. */
void fake_e2b_list_token_pad(fake_e2b *f, size_t n);
/* pids killed through process.Process/SendSignal so far. */
size_t fake_e2b_kills(fake_e2b *f);

#endif
