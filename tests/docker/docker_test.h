/* docker_test.h - what the docker tests share: the private daemon started by the ctest fixture
 * (scripts/dockerd-test.sh, state file in $SBX_DOCKERD_STATE), helper containers made directly
 * through the Engine API, and opening the docker provider on a profile. */
#ifndef SBX_TESTS_DOCKER_TEST_H
#define SBX_TESTS_DOCKER_TEST_H

#include <stdbool.h>

#include "providers/docker/docker_api.h"
#include "sbx/provider.h"

typedef struct dt_env {
    char state_file[1024];
    char dir[512];
    char socket[600];
    char image_busybox[128];
    char image_python[128];
    docker_api api;
} dt_env;

/* Loads the fixture's state (fails the test run when the daemon is not up). */
void dt_env_load(dt_env *env);
void dt_env_free(dt_env *env);

/* Creates and starts a container running argv (NULL terminated) from image, with the given
 * labels ("k=v", NULL terminated, may be NULL). Returns the id (malloc'd). Asserts success. */
char *dt_container_run(dt_env *env, const char *image, const char *const *argv);
/* docker stop (kill after timeout_s) and docker rm -f. */
void dt_container_stop(dt_env *env, const char *id);
void dt_container_remove(dt_env *env, const char *id);
/* GET /containers/{id}/json; caller json_decref's. NULL when 404. */
json_t *dt_container_inspect(dt_env *env, const char *id);

/* Opens the docker provider. environment: managed or attached (attach_to then set). Extra
 * options as "key=value" pairs, NULL terminated. */
void *dt_provider_open(dt_env *env, sbx_environment environment, const char *attach_to,
                       const char *runtime_dir, const char *const *options);
void dt_provider_close(void *state);

/* Path of the sbx-agent binary in the build tree (or $SBX_AGENT); NULL when not built. */
const char *dt_agent_path(void);

/* A fresh temp dir (mkdtemp under /tmp), for runtime dirs. malloc'd. */
char *dt_tempdir(void);
void dt_rmtree(const char *dir);

#endif
