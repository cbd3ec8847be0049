/* fixture.c - see fixture.h. */
#include "engine/fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "local/leftovers.h"
#include "sbx/provider.h"

sbx_config *fx_config_new(void)
{
    sbx_config *cfg = calloc(1, sizeof(*cfg));
    char tmpl[] = "/tmp/sbx-test-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (cfg == NULL || dir == NULL)
        abort();
    cfg->runtime_dir = strdup(dir);
    char path[512];
    snprintf(path, sizeof(path), "%s/snapshots", dir);
    cfg->snapshot_dir = strdup(path);
    cfg->snapshot_max_mb = 64;
    snprintf(path, sizeof(path), "%s/secret/key", dir);
    cfg->secret_file = strdup(path);
    cfg->node = strdup("test-node");
    cfg->default_profile = strdup("default");
    cfg->broker.flavor = strdup("thread");
    cfg->broker.threads = 4;
    cfg->broker.queue_depth = 64;
    cfg->broker.lru_size = 64;
    return cfg;
}

const char *fx_tmpdir(const sbx_config *cfg)
{
    return cfg->runtime_dir;
}

sbx_profile_config *fx_add_profile(sbx_config *cfg, const char *name, const char *type)
{
    cfg->profiles = realloc(cfg->profiles, (cfg->n_profiles + 1) * sizeof(*cfg->profiles));
    sbx_profile_config *p = &cfg->profiles[cfg->n_profiles++];
    memset(p, 0, sizeof(*p));
    p->name = strdup(name);
    p->type = strdup(type != NULL ? type : "fake");
    p->scope = SBX_SCOPE_PER_SESSION;
    p->environment = SBX_ENV_MANAGED;
    p->idle_timeout_s = 0;
    p->identity_mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
    p->policy = sbx_policy_new();
    const sbx_provider_ops *ops = sbx_provider_lookup(p->type);
    p->options = sbx_options_new(ops != NULL ? ops->options : NULL);
    return p;
}

void fx_opt(sbx_profile_config *p, const char *key, const char *value)
{
    sbx_error err;
    if (sbx_options_set(p->options, key, value, &err) != SBX_OK) {
        fprintf(stderr, "fx_opt %s=%s: %s\n", key, value, err.message);
        abort();
    }
}

void fx_config_free(sbx_config *cfg)
{
    if (cfg == NULL)
        return;
    for (size_t i = 0; i < cfg->n_profiles; i++) {
        sbx_profile_config *p = &cfg->profiles[i];
        free(p->name);
        free(p->type);
        free(p->attach_to);
        for (size_t f = 0; f < p->n_fallback; f++)
            free(p->fallback[f]);
        free(p->fallback);
        sbx_message_free((ProtobufCMessage *)p->policy);
        sbx_options_free(p->options);
    }
    sbx_test_destroy_local_leftovers(cfg->runtime_dir, NULL, "fx_config_free");
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cfg->runtime_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cfg->runtime_dir);
    free(cfg->profiles);
    free(cfg->runtime_dir);
    free(cfg->snapshot_dir);
    free(cfg->secret_file);
    free(cfg->node);
    free(cfg->default_profile);
    free(cfg->broker.flavor);
    free(cfg);
}

sbx_engine *fx_engine(const sbx_config *cfg)
{
    sbx_engine *e = NULL;
    sbx_error err;
    if (sbx_engine_new(cfg, &e, &err) != SBX_OK) {
        fprintf(stderr, "sbx_engine_new: %s\n", err.message);
        abort();
    }
    return e;
}

static sbx_request *base(const char *profile)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "alice");
    return r;
}

sbx_request *fx_shell(const char *profile, const char *line)
{
    sbx_request *r = base(profile);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

sbx_request *fx_code(const char *profile, const char *language, const char *code)
{
    sbx_request *r = base(profile);
    r->run_code = malloc(sizeof(*r->run_code));
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, language);
    sbx_set_string(&r->run_code->code, code);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    return r;
}

sbx_request *fx_destroy(const sbx_session_handle *h)
{
    sbx_request *r = base(NULL);
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    fx_session(r, h);
    return r;
}

sbx_request *fx_expose(const sbx_session_handle *h, uint32_t port)
{
    sbx_request *r = base(NULL);
    r->expose = malloc(sizeof(*r->expose));
    sbx__v1__expose_port__init(r->expose);
    r->expose->port = port;
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_EXPOSE;
    fx_session(r, h);
    return r;
}

void fx_session(sbx_request *r, const sbx_session_handle *h)
{
    sbx_message_free((ProtobufCMessage *)r->session);
    r->session = h != NULL ? (sbx_session_handle *)sbx_message_copy(&h->base) : NULL;
}

void fx_subject(sbx_request *r, const char *subject)
{
    sbx_set_string(&r->principal->subject, subject);
}

const char *fx_stdout(const sbx_completion *c)
{
    static char buf[65536];
    size_t n = 0;
    if (c != NULL && c->result != NULL) {
        n = c->result->stdout.len < sizeof(buf) - 1 ? c->result->stdout.len : sizeof(buf) - 1;
        if (n > 0)
            memcpy(buf, c->result->stdout.data, n);
    }
    buf[n] = '\0';
    return buf;
}

int fx_env_teardown(void **state)
{
    fx_env *t = *state;
    sbx_engine_free(t->e);
    fx_config_free(t->cfg);
    free(t);
    return 0;
}

sbx_completion *fx_process(sbx_engine *e, sbx_request *r)
{
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    sbx_request_free(r);
    if (c == NULL) {
        fprintf(stderr, "fx_process: the engine returned no completion\n");
        abort();
    }
    return c;
}
