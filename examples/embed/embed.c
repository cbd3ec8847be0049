/* embed.c - sbx inside your own program: load a configuration, open the engine and an embedded
 * broker, run one command in a sandbox, print what it printed. Builds against an installed sbx
 * with nothing but pkg-config:
 *
 *     cc embed.c $(pkg-config --cflags --libs sbx) -o embed
 *     ./embed [CONFIG.yaml] [SHELL LINE]
 *
 * With no CONFIG (or "-"), $SBX_CONFIG or the built-in default applies (the local provider,
 * network denied). Exit status: the program's, or 1 when sbx could not run it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/broker.h>
#include <sbx/config.h>
#include <sbx/contract.h>
#include <sbx/engine.h>

int main(int argc, char **argv)
{
    const char *config = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
    const char *line = argc > 2 ? argv[2] : "echo hello from a sandbox";
    sbx_error err = {0};
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_completion *done = NULL;
    int rc = 1;

    if (sbx_config_load(config, &cfg, &err) != SBX_OK ||
        sbx_engine_new(cfg, &engine, &err) != SBX_OK ||
        sbx_broker_open_embedded(engine, &broker, &err) != SBX_OK)
        goto out;

    sbx_request *req = sbx_request_shell(NULL, line); /* the default profile, a fresh task_id */
    if (!req) {
        sbx_error_set(&err, SBX_E_INTERNAL, "out of memory");
        goto out;
    }
    sbx_broker_submit(broker, req, SBX_WAIT_FOREVER, NULL, &done);
    sbx_request_free(req);
    if (!done) {
        sbx_error_set(&err, SBX_E_INTERNAL, "no completion");
        goto out;
    }
    if (done->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED) {
        sbx_error_set(&err, (sbx_status)done->error_code, "%s", done->error);
        goto out;
    }
    const sbx_result *r = done->result;
    if (r->stdout.len)
        fwrite(r->stdout.data, 1, r->stdout.len, stdout);
    if (r->stderr.len)
        fwrite(r->stderr.data, 1, r->stderr.len, stderr);
    rc = r->exit_code;
out:
    if (err.message[0])
        fprintf(stderr, "embed: %s: %s\n", sbx_status_name(err.code), err.message);
    sbx_completion_free(done);
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    return rc;
}
