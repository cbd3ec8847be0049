/* main.c - sbx-agent's command line.
 *
 *   sbx-agent [--socket PATH] [--workdir DIR] [--uid N] [--gid N] [--idle-ttl S]
 *             [--shared-uid] [--nofile N]
 *       serve as PID 1 of a box whose /.sbx is bind-mounted from the host (any provider:
 *       docker runs exactly this as the container's entrypoint);
 *   sbx-agent boot --box DIR [...]
 *       the local provider's launcher (boot_local.c): build the namespaces, then serve.
 *
 * This file only parses arguments; it must not touch the protocol or the namespaces.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

static long long number(const char *opt, const char *v)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || end == v || n < 0) {
        fprintf(stderr, "sbx-agent: %s needs a non-negative number, got '%s'\n", opt, v);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "boot") == 0)
        return boot_local_main(argc - 1, argv + 1);
    agent_config cfg = {
        .socket_path = "/.sbx/agent.sock",
        .workdir = "/workspace",
        .prog_uid = 65534,
        .prog_gid = 65534,
        .shared_uid = false,
        .idle_ttl_s = AGENT_DEFAULT_IDLE_TTL_S,
        .ready_fd = -1,
        .rlimit_nofile = 1024,
        .cgroup_fd = -1,
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--shared-uid") == 0) {
            cfg.shared_uid = true;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            printf("usage: sbx-agent [--socket PATH] [--workdir DIR] [--uid N] [--gid N] "
                   "[--idle-ttl SECONDS] [--shared-uid] [--nofile N]\n"
                   "       sbx-agent boot --box DIR [options]   (local provider launcher)\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sbx-agent: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--socket") == 0)
            cfg.socket_path = v;
        else if (strcmp(a, "--workdir") == 0)
            cfg.workdir = v;
        else if (strcmp(a, "--uid") == 0)
            cfg.prog_uid = (uid_t)number(a, v);
        else if (strcmp(a, "--gid") == 0)
            cfg.prog_gid = (gid_t)number(a, v);
        else if (strcmp(a, "--idle-ttl") == 0)
            cfg.idle_ttl_s = number(a, v);
        else if (strcmp(a, "--nofile") == 0)
            cfg.rlimit_nofile = (uint64_t)number(a, v);
        else {
            fprintf(stderr, "sbx-agent: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    return agent_serve(&cfg);
}
