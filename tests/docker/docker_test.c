/* docker_test.c - shared helpers of the docker tests (see docker_test.h). */
#include "docker_test.h"
#include "support/uid_slots.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static void read_var(const char *text, const char *name, char *out, size_t cap)
{
    char key[64];
    snprintf(key, sizeof(key), "\n%s=", name);
    const char *p = strstr(text, key);
    out[0] = '\0';
    if (p == NULL)
        return;
    p += strlen(key);
    size_t n = strcspn(p, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

void dt_env_load(dt_env *env)
{
    memset(env, 0, sizeof(*env));
    const char *state = getenv("SBX_DOCKERD_STATE");
    if (state == NULL) {
        fail_msg("SBX_DOCKERD_STATE is not set: run the docker tests through ctest, whose fixture "
                 "starts the private daemon (scripts/dockerd-test.sh)");
    }
    snprintf(env->state_file, sizeof(env->state_file), "%s", state);
    FILE *f = fopen(state, "re");
    if (f == NULL)
        fail_msg("cannot open %s: the dockerd fixture did not start (see test_docker_daemon_start)",
                 state);
    char text[4096] = "\n";
    size_t n = fread(text + 1, 1, sizeof(text) - 2, f);
    fclose(f);
    text[n + 1] = '\0';
    read_var(text, "SBX_DOCKERD_DIR", env->dir, sizeof(env->dir));
    read_var(text, "SBX_DOCKER_SOCKET", env->socket, sizeof(env->socket));
    read_var(text, "SBX_DOCKER_IMAGE_BUSYBOX", env->image_busybox, sizeof(env->image_busybox));
    read_var(text, "SBX_DOCKER_IMAGE_PYTHON", env->image_python, sizeof(env->image_python));
    assert_true(env->socket[0] != '\0');
    sbx_error err;
    sbx_status st = docker_api_open(&env->api, env->socket, &err);
    if (st != SBX_OK)
        fail_msg("private dockerd not reachable: %s", err.message);
}

void dt_env_free(dt_env *env)
{
    docker_api_close(&env->api);
}

char *dt_container_run(dt_env *env, const char *image, const char *const *argv)
{
    json_t *body = json_object();
    json_object_set_new(body, "Image", json_string(image));
    json_t *cmd = json_array();
    for (size_t i = 0; argv[i] != NULL; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(body, "Cmd", cmd);
    json_object_set_new(body, "WorkingDir", json_string("/tmp"));
    json_t *hc = json_object();
    json_object_set_new(hc, "NetworkMode", json_string("none"));
    json_object_set_new(body, "HostConfig", hc);
    json_object_set_new(body, "StopTimeout", json_integer(1));
    json_t *resp = NULL;
    long status = 0;
    sbx_error err;
    assert_int_equal(
        docker_api_json(&env->api, "POST", "/containers/create", body, &status, &resp, &err),
        SBX_OK);
    json_decref(body);
    assert_int_equal(status, 201);
    char *id = strdup(json_string_value(json_object_get(resp, "Id")));
    json_decref(resp);
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/start", id);
    assert_int_equal(docker_api_json(&env->api, "POST", path, NULL, &status, NULL, &err), SBX_OK);
    assert_int_equal(status, 204);
    return id;
}

void dt_container_stop(dt_env *env, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/stop?t=1", id);
    long status = 0;
    sbx_error err;
    assert_int_equal(docker_api_json(&env->api, "POST", path, NULL, &status, NULL, &err), SBX_OK);
    assert_true(status == 204 || status == 304);
}

void dt_container_remove(dt_env *env, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s?force=true", id);
    long status = 0;
    sbx_error err;
    docker_api_json(&env->api, "DELETE", path, NULL, &status, NULL, &err);
}

json_t *dt_container_inspect(dt_env *env, const char *id)
{
    char path[256];
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    long status = 0;
    json_t *j = NULL;
    sbx_error err;
    assert_int_equal(docker_api_json(&env->api, "GET", path, NULL, &status, &j, &err), SBX_OK);
    if (status == 404) {
        json_decref(j);
        return NULL;
    }
    assert_int_equal(status, 200);
    return j;
}

extern const sbx_provider_ops sbx_provider_docker;

void *dt_provider_open(dt_env *env, sbx_environment environment, const char *attach_to,
                       const char *runtime_dir, const char *const *options)
{
    sbx_error err;
    sbx_options *o = sbx_options_new(sbx_provider_docker.options);
    assert_non_null(o);
    assert_int_equal(sbx_options_set(o, "socket", env->socket, &err), SBX_OK);
    const char *agent = dt_agent_path();
    if (agent != NULL)
        assert_int_equal(sbx_options_set(o, "agent", agent, &err), SBX_OK);
    for (size_t i = 0; options != NULL && options[i] != NULL; i++) {
        char key[64];
        const char *eq = strchr(options[i], '=');
        assert_non_null(eq);
        snprintf(key, sizeof(key), "%.*s", (int)(eq - options[i]), options[i]);
        if (sbx_options_set(o, key, eq + 1, &err) != SBX_OK)
            fail_msg("option %s: %s", options[i], err.message);
    }
    sbx_provider_ctx ctx = {
        .profile = environment == SBX_ENV_MANAGED ? "docker-managed" : "docker-attached",
        .options = o,
        .environment = environment,
        .attach_to = attach_to,
        .node = "test-node",
        .runtime_dir = runtime_dir,
        /* the tests hold a sandbox across connections (close, then reattach by id), as a
         * session does: a per_call container ends when its one connection closes */
        .scope = SBX_SCOPE_PER_SESSION,
    };
    void *state = NULL;
    sbx_status st = sbx_provider_docker.open(&ctx, &state, &err);
    /* The provider copies what it keeps: the options may go now. */
    sbx_options_free(o);
    if (st != SBX_OK)
        fail_msg("docker provider open: %s: %s", sbx_status_name(st), err.message);
    return state;
}

void dt_provider_close(void *state)
{
    sbx_provider_docker.close(state);
}

const char *dt_agent_path(void)
{
    static char path[1024];
    const char *env = getenv("SBX_AGENT");
    if (env != NULL && access(env, X_OK) == 0)
        return env;
    const char *build = getenv("SBX_BUILD_DIR");
    if (build == NULL)
        return NULL;
    snprintf(path, sizeof(path), "%s/agent/sbx-agent", build);
    return access(path, X_OK) == 0 ? path : NULL;
}

char *dt_tempdir(void)
{
    char *t = strdup("/tmp/sbx-docker-test.XXXXXX");
    assert_non_null(t);
    assert_non_null(mkdtemp(t));
    return t;
}

void dt_rmtree(const char *dir)
{
    if (dir == NULL || strncmp(dir, "/tmp/sbx-docker-test.", 21) != 0)
        return;
    /* a test that failed before its destroy leaves a state dir, and with it a uid slot, which
     * the rm below would leave pointing nowhere until a docker sweep on this host a minute
     * later */
    sbx_test_release_slots_under(dir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        /* best effort */
    }
}
