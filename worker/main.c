/* main.c - the `sbx-worker` executable: `sbx-worker [--config FILE]`. Everything else is in
 * serve.c, shared with `sbx worker serve`. */
#include <stdio.h>
#include <string.h>

#include "sbx/worker.h"

int main(int argc, char **argv)
{
    const char *config = NULL, *listen_addr = NULL;
    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "-c") == 0) && i + 1 < argc) {
            config = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            config = argv[i] + 9;
        } else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
            listen_addr = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf(
                "usage: sbx-worker [--config FILE] [--listen HOST:PORT]\n"
                "Serves sbx.v1.Execution and grpc.health.v1.Health over HTTP/2 (h2c on "
                "loopback, h2 over TLS elsewhere).\nFILE defaults to $SBX_CONFIG, else the "
                "built-in default. --listen overrides worker.listen (port 0: ephemeral). SIGTERM\n"
                "drains and exits 0.\n");
            return 0;
        } else {
            fprintf(stderr, "sbx-worker: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    return sbx_worker_serve_main(config, listen_addr, stderr);
}
