/* main.c - the `sbx-worker` executable: `sbx-worker [OPTIONS]`. Everything else is in serve.c,
 * shared with `sbx worker serve` (the same options, signals and exit statuses). */
#include <stdio.h>
#include <string.h>

#include "sbx/worker.h"

int main(int argc, char **argv)
{
    sbx_worker_serve_opts opts = {0};
    for (int i = 1; i < argc; i++) {
        int r = sbx_worker_serve_parse_arg(&opts, argc, argv, &i);
        if (r == 1)
            continue;
        if (r < 0) {
            fprintf(stderr, "sbx-worker: %s needs a value (try --help)\n", argv[i]);
            return SBX_WORKER_EXIT_USAGE;
        }
        if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
            opts.config_path = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: sbx-worker [OPTIONS]\n"
                   "Serves sbx.v1.Execution and grpc.health.v1.Health over HTTP/2 (h2c on "
                   "loopback, h2 over TLS elsewhere).\n" SBX_WORKER_SERVE_OPTIONS_HELP);
            return SBX_WORKER_EXIT_OK;
        } else {
            fprintf(stderr, "sbx-worker: unknown argument '%s' (try --help)\n", argv[i]);
            return SBX_WORKER_EXIT_USAGE;
        }
    }
    return sbx_worker_serve(&opts, stderr);
}
