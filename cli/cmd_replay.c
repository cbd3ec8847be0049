/* cmd_replay.c - `sbx replay FILE --broker embedded|thread|remote`: re-runs a recording and
 * reports every completion that differs (volatile fields normalised); exit 1 on any. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sbx/broker.h"
#include "sbx/engine.h"
#include "sbx/replay.h"

const char cmd_replay_help[] =
    "Usage: sbx replay FILE [--broker embedded|thread|remote]\n\n"
    "Re-runs every request recorded in FILE (Recording frames, see include/sbx/recorder.h)\n"
    "through the chosen broker (default: thread) with the configuration given by --config, and\n"
    "compares each completion with the recorded one. Timings, timestamps, bindings, the node\n"
    "and session/sandbox ids (matched by order of appearance) are normalised first. In-process\n"
    "replays bind sessions to a throwaway secret, so the deployment secret is never touched.\n\n"
    "Prints one block per differing record (field: recorded X, replayed Y).\n"
    "Exit status: 0 when every completion matches, 1 when any differs, 3 for configuration\n"
    "errors, 2 for usage errors.\n";

int cmd_replay(int argc, char **argv)
{
    /* --broker is a global option (cli.c), parsed before this command sees its arguments */
    const char *file = NULL, *flavor = cli_global.broker != NULL ? cli_global.broker : "thread";
    cli_parser a = {.cmd = "replay", .help = cmd_replay_help};
    cli_opt_init(&a, argc, argv);
    if (cli_opt_next(&a) == CLI_OPT_EXIT)
        return a.exit_code;
    if (cli_global.broker != NULL)
        flavor = cli_global.broker;
    if (a.n_operands > 1)
        return cli_usage_error("replay", "one FILE only");
    if (a.n_operands == 1)
        file = a.operands[0];
    if (file == NULL)
        return cli_usage_error("replay", "no recording FILE given");
    if (strcmp(flavor, "embedded") != 0 && strcmp(flavor, "thread") != 0 &&
        strcmp(flavor, "remote") != 0)
        return cli_usage_error("replay", "--broker must be embedded, thread or remote");
    sbx_config *cfg = NULL;
    sbx_error err;
    if (cli_load_config(NULL, &cfg, &err) != SBX_OK)
        return cli_report_error("config", &err);
    char dir[] = "/tmp/sbx-replay-XXXXXX", secret[64] = "";
    sbx_engine *engine = NULL;
    sbx_broker *b = NULL;
    sbx_status st;
    if (strcmp(flavor, "remote") == 0) {
        st = sbx_broker_open_remote(&cfg->broker.remote, &b, &err);
    } else if (mkdtemp(dir) == NULL) {
        st = sbx_error_set(&err, SBX_E_INTERNAL, "cannot create a temporary directory");
    } else {
        snprintf(secret, sizeof(secret), "%s/secret", dir);
        free(cfg->secret_file);
        cfg->secret_file = strdup(secret);
        st = sbx_engine_new(cfg, &engine, &err);
        if (st == SBX_OK && strcmp(flavor, "embedded") == 0) {
            st = sbx_broker_open_embedded(engine, &b, &err);
        } else if (st == SBX_OK) {
            sbx_thread_broker_opts o = {(int)cfg->broker.threads, (int)cfg->broker.queue_depth,
                                        (int)cfg->broker.lru_size,
                                        (int)cfg->broker.principal_threads};
            st = sbx_broker_open_thread(engine, &o, &b, &err);
        }
    }
    int rc;
    if (st != SBX_OK) {
        rc = cli_report_error("replay", &err);
    } else {
        sbx_replay_report rep;
        st = sbx_replay_file(file, b, &rep, &err);
        if (st != SBX_OK) {
            rc = cli_report_error(file, &err);
        } else {
            if (cli_global.json) {
                json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:s}", "file", file, "broker", flavor,
                                      "records", (json_int_t)rep.total, "differing",
                                      (json_int_t)rep.differing, "report", rep.text);
                json_dumpf(j, stdout, JSON_INDENT(2));
                fputc('\n', stdout);
                json_decref(j);
            } else {
                fputs(rep.text, stdout);
                if (rep.differing == 0)
                    printf("replayed %zu records through %s: all completions identical\n",
                           rep.total, flavor);
                else
                    printf("replayed %zu records through %s: %zu differ\n", rep.total, flavor,
                           rep.differing);
            }
            rc = rep.differing == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
        }
        sbx_replay_report_clear(&rep);
    }
    sbx_broker_free(b);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    if (secret[0] != '\0') {
        unlink(secret);
        rmdir(dir);
    }
    return rc;
}
