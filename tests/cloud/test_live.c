/* test_live.c - live smoke test of one cloud provider (argv[1]: e2b or daytona) against the real
 * service, through the engine: run a command, run python, round-trip a file, destroy twice.
 * Runs only when the provider's API key variable is set; otherwise prints
 * "skipped: <VAR> not set" and exits 77 (ctest SKIP_RETURN_CODE). Never prints the key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"

#define SKIP 77

static int failures;

static void check(int ok, const char *what, const sbx_completion *c)
{
    if (ok) {
        printf("ok: %s\n", what);
        return;
    }
    failures++;
    printf("FAIL: %s: %s\n", what, c && c->error && c->error[0] ? c->error : "unexpected result");
}

static sbx_completion *submit(sbx_broker *b, sbx_request *r, sbx_session_handle **session)
{
    sbx_set_string(&r->profile, "live");
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "live-smoke");
    if (*session)
        r->session = (sbx_session_handle *)sbx_message_copy(&(*session)->base);
    sbx_completion *c = NULL;
    sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    if (c && c->session && c->session->session_id[0] &&
        c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED) {
        if (*session)
            sbx_message_free(&(*session)->base);
        *session = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    }
    return c;
}

static int stdout_is(const sbx_completion *c, const char *want)
{
    return c && c->result && c->result->stdout.len == strlen(want) &&
           memcmp(c->result->stdout.data, want, strlen(want)) == 0;
}

int main(int argc, char **argv)
{
    const char *type = argc > 1 ? argv[1] : "e2b";
    const char *var = strcmp(type, "e2b") == 0 ? "E2B_API_KEY" : "DAYTONA_API_KEY";
    const char *key = getenv(var);
    if (!key || !*key) {
        printf("skipped: %s not set\n", var);
        return SKIP;
    }
    char dir[] = "/tmp/sbx-live-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n  secret_file: %s/secret\n  default_profile: live\n  profiles:\n"
             "    live:\n      type: %s\n      scope: per_session\n"
             "      policy: { network_egress: deny, cpu: 0, memory_mb: 0, pids: 0,"
             " timeout_ms: 120000 }\n",
             dir, type);
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *b = NULL;
    sbx_error err;
    if (sbx_config_load_string(yaml, strlen(yaml), "live.yaml", &cfg, &err) != SBX_OK ||
        sbx_engine_new(cfg, &engine, &err) != SBX_OK ||
        sbx_broker_open_embedded(engine, &b, &err) != SBX_OK) {
        printf("FAIL: setup: %s\n", err.message);
        return 1;
    }
    sbx_session_handle *session = NULL;

    sbx_request *r = sbx_request_new();
    r->run_command = malloc(sizeof *r->run_command);
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, "echo live-ok; exit 3");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    sbx_completion *c = submit(b, r, &session);
    check(stdout_is(c, "live-ok\n") && c->result->exit_code == 3, "run_command", c);
    if (c && c->error && strstr(c->error, key))
        check(0, "error is redacted", NULL);
    sbx_completion_free(c);

    r = sbx_request_new();
    r->run_code = malloc(sizeof *r->run_code);
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, "python");
    sbx_set_string(&r->run_code->code, "print(6 * 7)");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    c = submit(b, r, &session);
    check(stdout_is(c, "42\n"), "run_code python", c);
    sbx_completion_free(c);

    r = sbx_request_new();
    r->write_file = malloc(sizeof *r->write_file);
    sbx__v1__write_file__init(r->write_file);
    sbx_set_string(&r->write_file->path, "sbx_live.txt");
    sbx_set_bytes(&r->write_file->content, "live bytes\n", 11);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    c = submit(b, r, &session);
    check(c && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED, "write_file",
          c);
    sbx_completion_free(c);

    r = sbx_request_new();
    r->read_file = malloc(sizeof *r->read_file);
    sbx__v1__read_file__init(r->read_file);
    sbx_set_string(&r->read_file->path, "sbx_live.txt");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_READ_FILE;
    c = submit(b, r, &session);
    check(c && c->result && c->result->n_files == 1 && c->result->files[0]->content.len == 11 &&
              memcmp(c->result->files[0]->content.data, "live bytes\n", 11) == 0,
          "read_file", c);
    sbx_completion_free(c);

    for (int i = 0; i < 2; i++) {
        r = sbx_request_new();
        r->destroy = malloc(sizeof *r->destroy);
        sbx__v1__destroy__init(r->destroy);
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
        c = submit(b, r, &session);
        check(c && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED,
              i == 0 ? "destroy" : "destroy again", c);
        sbx_completion_free(c);
    }
    if (session)
        sbx_message_free(&session->base);
    sbx_broker_free(b);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    char secret[96];
    snprintf(secret, sizeof secret, "%s/secret", dir);
    unlink(secret);
    rmdir(dir);
    printf("%s: %d failure(s)\n", type, failures);
    return failures ? 1 : 0;
}
