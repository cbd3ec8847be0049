/* fixture.h - helpers for engine/broker/session tests: configurations built by hand (fake
 * profiles, a private secret file in a unique temp dir) and request builders.
 */
#ifndef SBX_TESTS_ENGINE_FIXTURE_H
#define SBX_TESTS_ENGINE_FIXTURE_H

#include <stdint.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/engine.h"

/* A config with no profiles, a fresh secret path under a unique temp dir, node "test-node". */
sbx_config *fx_config_new(void);
/* Adds a profile (managed, per_session, fake unless type given, empty policy, default options).
 * The returned pointer is valid until the next fx_add_profile. */
sbx_profile_config *fx_add_profile(sbx_config *cfg, const char *name, const char *type);
void fx_opt(sbx_profile_config *p, const char *key, const char *value);
/* Frees cfg: destroys every local sandbox still in its runtime dir (what a failed test left),
 * then removes the dir. */
void fx_config_free(sbx_config *cfg);
const char *fx_tmpdir(const sbx_config *cfg);

sbx_engine *fx_engine(const sbx_config *cfg);

/* One engine over one config: what an engine test's setup builds into cmocka's *state. */
typedef struct fx_env {
    sbx_config *cfg;
    sbx_engine *e;
} fx_env;
/* cmocka teardown of an fx_env in *state: the engine, then the config, then the env. */
int fx_env_teardown(void **state);
/* Processes r on e, frees r, and returns the completion; an engine always answers, so a NULL
 * one aborts the test. */
sbx_completion *fx_process(sbx_engine *e, sbx_request *r);

sbx_request *fx_shell(const char *profile, const char *line);
sbx_request *fx_code(const char *profile, const char *language, const char *code);
sbx_request *fx_destroy(const sbx_session_handle *h);
/* ExposePort of port on h's sandbox. */
sbx_request *fx_expose(const sbx_session_handle *h, uint32_t port);
/* Replaces the request's session with a copy of h. */
void fx_session(sbx_request *r, const sbx_session_handle *h);
void fx_subject(sbx_request *r, const char *subject);
/* Result stdout as a NUL-terminated static string (for asserts). */
const char *fx_stdout(const sbx_completion *c);

#endif
