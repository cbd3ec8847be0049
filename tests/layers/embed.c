/* embed.c - a program embedding sbx as an outside project would: it includes only the public
 * headers (include/sbx/) and links only libsbx.a (target sbx_dist), whose internals are local.
 * It runs a command on the fake provider through the thread broker and through the sessions
 * layer, so the public API is shown to be enough for that. Exits 0 when every check holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"
#include "sbx/sessions.h"

int main(int argc, char **argv);

/* Names libsbx uses inside (broker/tasks.c, core/grpc_wire.c): an embedder's own functions of
 * the same name must link, since libsbx.a keeps its internals local. */
int bt_find(void);
int sbx_grpc_frame_message(void);
int bt_find(void)
{
    return 0;
}
int sbx_grpc_frame_message(void)
{
    return bt_find();
}

static int failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "embed.c:%d: %s\n", __LINE__, #cond);                                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static sbx_request *echo_request(const char *text)
{
    sbx_request *req = sbx_request_new();
    Sbx__V1__RunCommand *rc = malloc(sizeof(*rc));
    if (req == NULL || rc == NULL) {
        free(rc);
        sbx_request_free(req);
        return NULL;
    }
    sbx__v1__run_command__init(rc);
    char shell[64];
    snprintf(shell, sizeof(shell), "echo %s", text);
    sbx_set_string(&rc->shell, shell);
    req->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    req->run_command = rc;
    return req;
}

static void check_output(const sbx_completion *c, const char *want)
{
    CHECK(c != NULL);
    if (c == NULL)
        return;
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "completion: %s: %s\n", sbx_status_name((sbx_status)c->error_code),
                c->error);
    CHECK(c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    CHECK(c->result != NULL && c->result->stdout.len == strlen(want) &&
          memcmp(c->result->stdout.data, want, strlen(want)) == 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "sandbox:\n"
             "  default_profile: fake\n"
             "  secret_file: %s/secret\n"
             "  runtime_dir: %s/run\n"
             "  broker: { flavor: thread, threads: 2 }\n"
             "  profiles:\n"
             "    fake: { type: fake, scope: per_call }\n",
             argv[1], argv[1]);
    sbx_error err = {0};
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_sessions *sessions = NULL;
    if (sbx_config_load_string(yaml, strlen(yaml), "embed.yaml", &cfg, &err) != SBX_OK ||
        sbx_engine_new(cfg, &engine, &err) != SBX_OK ||
        sbx_broker_open(cfg, engine, &broker, &err) != SBX_OK ||
        sbx_sessions_open(cfg, broker, NULL, &sessions, &err) != SBX_OK) {
        fprintf(stderr, "embed: %s\n", err.message);
        return 1;
    }
    CHECK(strcmp(sbx_broker_flavor(broker), "thread") == 0);
    CHECK(sbx_grpc_frame_message() == 0);

    sbx_request *req = echo_request("through-the-broker");
    sbx_completion *c = NULL;
    CHECK(req != NULL && sbx_broker_submit(broker, req, SBX_WAIT_FOREVER, NULL, &c) == SBX_OK);
    check_output(c, "through-the-broker\n");
    sbx_completion_free(c);
    sbx_request_free(req);

    req = echo_request("through-the-sessions-layer");
    c = NULL;
    CHECK(req != NULL &&
          sbx_sessions_execute(sessions, req, NULL, SBX_WAIT_FOREVER, &c, &err) == SBX_OK);
    check_output(c, "through-the-sessions-layer\n");
    sbx_completion_free(c);
    sbx_request_free(req);

    sbx_sessions_free(sessions);
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    if (failures == 0)
        printf("embed: the public API ran both requests\n");
    return failures == 0 ? 0 : 1;
}
