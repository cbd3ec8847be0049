/* policy_opts.c - the policy options of `sbx run`, `sbx code` and `sbx exec` (policy_opts.h). */
#include "cli/policy_opts.h"

#include "core/limits.h"

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

/* A duration as kubectl and Go take it: one or more <number><unit>, the number decimal (a
 * fraction allowed), the unit ms, s, m or h ("30s", "1m30s", "1.5h", "250ms"); false when
 * value is none, or not a whole number of milliseconds from 1 up to a week (the engine's most,
 * core/limits.h). No unit is an error, not seconds: "5" could mean either. Nothing but digits
 * and a point before each unit. */
static bool parse_duration_ms(const char *value, long long *out)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}};
    double total = 0;
    const char *s = value;
    if (*s == '\0')
        return false;
    while (*s != '\0') {
        size_t digits = strspn(s, "0123456789.");
        char *end = NULL;
        double n = strtod(s, &end);
        /* strtod alone would take a sign, blanks, an exponent, hex and "inf" */
        if (digits == 0 || end != s + digits || !isfinite(n))
            return false;
        size_t i = 0;
        while (i < sizeof units / sizeof units[0] && /* "ms" is tried before "m" */
               strncmp(end, units[i].unit, strlen(units[i].unit)) != 0)
            i++;
        if (i == sizeof units / sizeof units[0])
            return false;
        total += n * units[i].ms;
        if (total > (double)MAX_POLICY_TIMEOUT_MS)
            return false;
        s = end + strlen(units[i].unit);
    }
    /* rounded by hand: floor() and fabs() would need libm, which not every program that links
     * the CLI's objects links (the ASan build's config test CLI did not) */
    long long ms = (long long)(total + 0.5);
    double off = total - (double)ms;
    if (ms < 1 || (off < 0 ? -off : off) > 1e-6 * (ms > 1 ? (double)ms : 1.0))
        return false;
    *out = ms;
    return true;
}

int cli_policy_opt(cli_parser *p, int opt, sbx_policy **policy)
{
    const char *name = p->options[opt].name;
    static const char *const ours[] = {"timeout", "timeout-ms", "network", "allow", "memory-mb",
                                       "cpu",     "pids",       "disk-mb", "strict"};
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
    if (strcmp(name, "timeout") == 0) {
        long long ms = 0;
        if (!parse_duration_ms(p->value, &ms))
            return usage(p, name,
                         "a duration with its unit, whole milliseconds from 1ms to 168h (30s, "
                         "1m30s, 500ms, 1.5h)");
        pol->timeout_ms = (uint64_t)ms;
        return 1;
    }
    /* the integer limits: positive (the engine holds them to core/limits.h's bounds) */
    long long v = 0;
    if (!cli_opt_positive(p, name, &v))
        return -1;
    if (strcmp(name, "timeout-ms") == 0) {
        pol->timeout_ms = (uint64_t)v;
    } else if (strcmp(name, "pids") == 0) {
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
