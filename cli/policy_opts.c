/* policy_opts.c - the policy options of `sbx run`, `sbx code` and `sbx exec` (policy_opts.h). */
#include "cli/policy_opts.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(cli_parser *p, const char *name, const char *want)
{
    fprintf(stderr, "sbx %s: --%s needs %s, not '%s' (see `sbx %s --help`)\n", p->cmd, name, want,
            p->value, p->cmd);
    p->exit_code = CLI_EXIT_USAGE;
    return -1;
}

static int out_of_memory(cli_parser *p)
{
    fprintf(stderr, "sbx %s: out of memory\n", p->cmd);
    p->exit_code = CLI_EXIT_NOT_RUN;
    return -1;
}

int cli_policy_opt(cli_parser *p, int opt, sbx_policy **policy)
{
    const char *name = p->options[opt].name;
    static const char *const ours[] = {"network", "allow",   "memory-mb", "cpu",
                                       "pids",    "disk-mb", "strict"};
    size_t i = 0;
    while (i < sizeof ours / sizeof ours[0] && strcmp(name, ours[i]) != 0)
        i++;
    if (i == sizeof ours / sizeof ours[0])
        return 0;
    if (*policy == NULL && (*policy = sbx_policy_new()) == NULL)
        return out_of_memory(p);
    sbx_policy *pol = *policy;
    if (strcmp(name, "network") == 0) {
        if (strcmp(p->value, "deny") == 0)
            pol->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
        else if (strcmp(p->value, "allow") == 0)
            pol->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
        else
            return usage(p, name, "deny or allow (--allow HOST for some destinations only)");
        return 1;
    }
    if (strcmp(name, "allow") == 0) {
        if (p->value[0] == '\0')
            return usage(p, name, "a domain, *.domain, an IP or a CIDR");
        pol->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
        return sbx_add_string(&pol->n_network_allow, &pol->network_allow, p->value)
                   ? 1
                   : out_of_memory(p);
    }
    if (strcmp(name, "cpu") == 0) {
        char *end = NULL;
        errno = 0;
        double v = strtod(p->value, &end);
        if (end == p->value || *end != '\0' || errno != 0 || !isfinite(v) || v < 0.01)
            return usage(p, name, "a number of cores of at least 0.01");
        pol->cpu = v;
        return 1;
    }
    if (strcmp(name, "strict") == 0) {
        pol->strict = 1;
        return 1;
    }
    /* the integer limits: positive (the engine holds them to core/limits.h's bounds) */
    long long v = 0;
    if (!cli_opt_positive(p, name, &v))
        return -1;
    if (strcmp(name, "pids") == 0) {
        if (v > (long long)UINT32_MAX)
            return usage(p, name, "a number of at most 4294967295");
        pol->pids = (uint32_t)v;
    } else if (strcmp(name, "memory-mb") == 0) {
        pol->memory_mb = (uint64_t)v;
    } else {
        pol->disk_mb = (uint64_t)v;
    }
    return 1;
}
