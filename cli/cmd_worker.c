/* cmd_worker.c - `sbx worker serve [--config FILE]`: runs sbx-worker in the foreground (the same
 * code as the `sbx-worker` executable, worker/serve.c). SIGTERM drains and exits 0. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sbx/worker.h"

const char cmd_worker_help[] =
    "Usage: sbx worker serve [--config FILE] [--listen HOST:PORT]\n"
    "\n"
    "Serves sbx.v1.Execution (Execute, ExecuteStream, Describe) and grpc.health.v1.Health over\n"
    "HTTP/2 on sandbox.worker.listen: h2c on loopback, h2 over TLS (ALPN h2) elsewhere, where\n"
    "callers must authenticate (mTLS client certificate or bearer token, see\n"
    "sandbox.worker.auth). Executions run on the thread broker's pool. Prints\n"
    "\"sbx-worker listening on port N\" on stderr once ready. SIGTERM/SIGINT drain: GOAWAY,\n"
    "in-flight executions finish (up to drain_timeout_ms), new calls are refused, exit 0.\n"
    "--listen HOST:PORT replaces worker.listen (port 0: an ephemeral port).\n"
    "sandbox.worker.serve picks what is served: grpc (the default), queue (pulls requests from\n"
    "the NATS JetStream queue of sandbox.broker.queue and prints \"sbx-worker consuming queue\n"
    "...\" once ready), or both.\n"
    "\n" CLI_EXIT_CODES_HELP;

int cmd_worker(int argc, char **argv)
{
    static const cli_option options[] = {{"listen", 0, true}, {NULL, 0, 0}};
    cli_parser a = {.cmd = "worker", .help = cmd_worker_help, .options = options};
    const char *listen_addr = NULL;
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0)
        listen_addr = a.value;
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands < 1 || strcmp(a.operands[0], "serve") != 0)
        return cli_usage_error("worker", "expected a subcommand: serve");
    if (a.n_operands > 1)
        return cli_usage_error("worker", "unexpected argument '%s'", a.operands[1]);
    const char *config = cli_global.config_path;
    int rc = sbx_worker_serve_main(config, listen_addr, stderr);
    return rc == 2 ? CLI_EXIT_CONFIG : rc;
}
