/* cmd_worker.c - `sbx worker serve [OPTIONS]`: runs sbx-worker in the foreground (the same
 * code as the `sbx-worker` executable, worker/serve.c). SIGTERM drains and exits 0. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sbx/worker.h"

_Static_assert((int)SBX_WORKER_EXIT_FAILED == (int)CLI_EXIT_FAILED &&
                   (int)SBX_WORKER_EXIT_USAGE == (int)CLI_EXIT_USAGE &&
                   (int)SBX_WORKER_EXIT_CONFIG == (int)CLI_EXIT_CONFIG,
               "one exit-status table for sbx-worker and sbx worker serve");

const char cmd_worker_help[] =
    "Usage: sbx worker serve [OPTIONS]\n"
    "\n"
    "Serves sbx.v1.Execution (Execute, ExecuteStream, Describe) and grpc.health.v1.Health over\n"
    "HTTP/2 on sandbox.worker.listen: h2c on loopback, h2 over TLS (ALPN h2) elsewhere, where\n"
    "callers must authenticate (mTLS client certificate or bearer token, see\n"
    "sandbox.worker.auth). Executions run on the thread broker's pool. Prints\n"
    "\"sbx-worker listening on port N\" on stderr once ready, then one JSON line per call.\n"
    "The same program as sbx-worker: the same options, signals and exit statuses.\n"
    "\n" SBX_WORKER_SERVE_OPTIONS_HELP;

int cmd_worker(int argc, char **argv)
{
    static const cli_option options[] = {
        {"listen", 0, true}, {"log-level", 0, true}, {"metrics-listen", 0, true}, {NULL, 0, 0}};
    cli_parser a = {.cmd = "worker", .help = cmd_worker_help, .options = options};
    sbx_worker_serve_opts opts = {0};
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0) {
        if (opt == 0)
            opts.listen = a.value;
        else if (opt == 1)
            opts.log_level = a.value;
        else
            opts.metrics_listen = a.value;
    }
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands < 1 || strcmp(a.operands[0], "serve") != 0)
        return cli_usage_error("worker", "expected a subcommand: serve");
    if (a.n_operands > 1)
        return cli_usage_error("worker", "unexpected argument '%s'", a.operands[1]);
    opts.config_path = cli_global.config_path; /* --config is a global option */
    /* sbx_worker_exit shares its numbers with the sbx command's table (cli.h) */
    return sbx_worker_serve(&opts, stderr);
}
