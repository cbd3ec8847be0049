/* main.c - sbx-agent's command line.
 *
 *   sbx-agent [--socket PATH] [--workdir DIR] [--uid N] [--gid N] [--idle-ttl S]
 *             [--shared-uid] [--nofile N] [--one-shot [--first-host-s S]]
 *             [--listen IPV4:PORT --token-env NAME]
 *       serve as PID 1 of a box whose /.sbx is bind-mounted from the host (any provider:
 *       docker runs exactly this as the container's entrypoint); with --listen also on TCP
 *       for clients that open with the credential held (64 hex digits) in env var NAME
 *       (kubernetes pods, reached over the pod network); with --one-shot the box serves one
 *       call and ends when its host hangs up (agent_config.end_with_host), or when no host
 *       connected within S seconds of its start (default AGENT_FIRST_HOST_S);
 *   sbx-agent boot --box DIR [...]
 *       the local provider's launcher (boot_local.c): build the namespaces, then serve.
 *
 * This file only parses arguments; it must not touch the protocol or the namespaces.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* Reads the credential from env var `name` (64 hex digits) and wipes the value in place, so it
 * is gone from /proc/1/environ and from every program's environment. */
static void take_token(const char *name, uint8_t out[SBX_AGENT_TOKEN_LEN])
{
    char *v = getenv(name);
    if (v == NULL || strlen(v) != 2 * SBX_AGENT_TOKEN_LEN) {
        fprintf(stderr, "sbx-agent: --token-env %s must name a variable holding %u hex digits\n",
                name, 2 * SBX_AGENT_TOKEN_LEN);
        exit(2);
    }
    for (unsigned i = 0; i < SBX_AGENT_TOKEN_LEN; i++) {
        unsigned hi, lo;
        char a = v[2 * i], b = v[2 * i + 1];
        hi = a >= '0' && a <= '9'   ? (unsigned)(a - '0')
             : a >= 'a' && a <= 'f' ? (unsigned)(a - 'a' + 10)
                                    : 16;
        lo = b >= '0' && b <= '9'   ? (unsigned)(b - '0')
             : b >= 'a' && b <= 'f' ? (unsigned)(b - 'a' + 10)
                                    : 16;
        if (hi > 15 || lo > 15) {
            fprintf(stderr, "sbx-agent: %s is not lower-case hex\n", name);
            exit(2);
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    memset(v, 'x', strlen(v));
    unsetenv(name);
}

/* Closes every descriptor above stdio. The agent is PID 1 inside the sandbox: whatever its
 * parent left open without O_CLOEXEC (a test runner's lock file, an embedding program's
 * sockets, a worker's listener) would otherwise sit in a process that runs beside hostile
 * programs, reachable through /proc if anything else ever gave way. The local provider already
 * spawns it with a clean table (closefrom in run_boot); docker and kubernetes hand it only
 * stdio. Nothing the agent needs is inherited: boot and serve open their own. */
static void close_inherited_fds(void)
{
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX); /* kernels before 5.9: close one by one */
    for (long fd = 3; fd < max && fd < 65536; fd++)
        close((int)fd);
}

/* The local provider starts the launcher with every signal blocked and its host process's
 * dispositions (providers/common/launch.h): the sandbox starts from the defaults, nothing
 * ignored (an exec resets only caught signals) and nothing blocked. */
static void default_signals(void)
{
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            signal(s, SIG_DFL); /* glibc's own two fail with EINVAL: they are not the host's */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

int main(int argc, char **argv)
{
    close_inherited_fds();
    if (argc > 1 && strcmp(argv[1], "boot") == 0) {
        default_signals();
        return boot_local_main(argc - 1, argv + 1);
    }
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
    const char *token_env = NULL;
    long long first_host_s = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--shared-uid") == 0) {
            cfg.shared_uid = true;
            continue;
        }
        if (strcmp(a, "--one-shot") == 0) {
            cfg.one_shot = cfg.end_with_host = true;
            if (cfg.first_host_s == 0)
                cfg.first_host_s = AGENT_FIRST_HOST_S;
            continue;
        }
        if (strcmp(a, "--help") == 0) {
            printf("usage: sbx-agent [--socket PATH] [--workdir DIR] [--uid N] [--gid N] "
                   "[--idle-ttl SECONDS] [--shared-uid] [--nofile N]\n"
                   "                 [--one-shot [--first-host-s SECONDS]]\n"
                   "                 [--listen IPV4:PORT --token-env NAME]\n"
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
        else if (strcmp(a, "--first-host-s") == 0)
            first_host_s = number(a, v);
        else if (strcmp(a, "--nofile") == 0)
            cfg.rlimit_nofile = (uint64_t)number(a, v);
        else if (strcmp(a, "--listen") == 0)
            cfg.tcp_listen = v;
        else if (strcmp(a, "--token-env") == 0)
            token_env = v;
        else {
            fprintf(stderr, "sbx-agent: unknown option %s (see --help)\n", a);
            return 2;
        }
    }
    if ((cfg.tcp_listen == NULL) != (token_env == NULL)) {
        fprintf(stderr, "sbx-agent: --listen and --token-env go together (a TCP listener "
                        "without a credential would serve anyone on the network)\n");
        return 2;
    }
    if (first_host_s >= 0) {
        if (!cfg.one_shot || first_host_s == 0 || first_host_s > AGENT_DEFAULT_IDLE_TTL_S) {
            fprintf(stderr,
                    "sbx-agent: --first-host-s bounds a one-shot box's wait for its host: "
                    "it needs --one-shot and 1 to %d seconds\n",
                    AGENT_DEFAULT_IDLE_TTL_S);
            return 2;
        }
        cfg.first_host_s = first_host_s;
    }
    if (token_env != NULL)
        take_token(token_env, cfg.token);
    return agent_serve(&cfg);
}
