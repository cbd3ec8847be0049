/* policy_opts.h - the policy options of the commands that run programs (`sbx run`, `sbx code`,
 * `sbx exec`): each narrows one dimension of the profile's policy for this call, as a request's
 * Policy does (a value wider than the profile's is refused by the engine, exit 4, naming it).
 * The time limit is one of them: `--timeout 30s` (a duration, as kubectl and timeout(1) take
 * it) or `--timeout-ms 30000`.
 */
#ifndef SBX_CLI_POLICY_OPTS_H
#define SBX_CLI_POLICY_OPTS_H

#include "cli/cli.h"
#include "sbx/contract.h"

/* The options, to put at the end of a command's option table (before its {NULL} entry). */
#define CLI_POLICY_OPTIONS                                                                         \
    {"timeout", 0, true}, {"timeout-ms", 0, true}, {"network", 0, true}, {"allow", 0, true},       \
        {"memory-mb", 0, true}, {"cpu", 0, true}, {"pids", 0, true}, {"disk-mb", 0, true},         \
    {                                                                                              \
        "strict", 0, false                                                                         \
    }

#define CLI_POLICY_HELP                                                                            \
    "Policy of this call (each may only narrow the profile's; wider is refused, exit 4):\n"        \
    "  --timeout D           wall-clock limit, a duration: 30s, 1m30s, 500ms, 1.5h (exit 5\n"      \
    "                        when it passes; --timeout-ms N is the same in milliseconds)\n"        \
    "  --network deny|allow  the network: none but loopback, or any destination\n"                 \
    "  --allow HOST          only these destinations (repeat it; a domain, *.domain, an IP\n"      \
    "                        or a CIDR): the profile's network must allow them\n"                  \
    "  --memory-mb N         memory limit in MiB\n"                                                \
    "  --cpu X               CPU cores (fractions allowed, at least 0.01)\n"                       \
    "  --pids N              most processes and threads at once\n"                                 \
    "  --disk-mb N           writable disk in MiB\n"                                               \
    "  --strict              refuse, rather than leave out with a notice, what the provider\n"     \
    "                        cannot enforce (for a profile with lenient: true)\n\n"

/* When option opt of p is one of CLI_POLICY_OPTIONS: puts its value into *policy (made on
 * first use) and returns 1; 0 when it is another option; -1 after a usage error naming it
 * (p->exit_code is set), or out of memory. */
int cli_policy_opt(cli_parser *p, int opt, sbx_policy **policy);

#endif
