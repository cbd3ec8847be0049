/* policy.c - request-over-profile policy merge, the no-widening rule, and the list of
 * dimensions a provider cannot enforce (see policy.h).
 *
 * Zero means "profile default" for every field of a request's policy (proto3). For limits the
 * profile's zero means "no limit configured", so any request value narrows it. This file must
 * not call providers or decide between strict and lenient: the engine does.
 */
#include "core/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/limits.h"
#include "core/path.h"

const char *sbx_policy_egress_name(Sbx__V1__NetworkEgress e)
{
    switch (e) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY: return "deny";
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW: return "allow";
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST: return "allowlist";
    default: return "unspecified";
    }
}

/* How much egress a value grants: deny < allowlist < allow. A policy (a profile's built by
 * hand, a sandbox's) that leaves egress unspecified grants what providers give it, none: every
 * provider opens the network only for ALLOW (and the proxy's list for ALLOWLIST). */
static int egress_rank(Sbx__V1__NetworkEgress e)
{
    switch (e) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST: return 1;
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW: return 2;
    default: return 0;
    }
}

static bool copy_list(size_t n, char *const *items, size_t *out_n, char ***out_items)
{
    for (size_t i = 0; i < n; i++)
        if (!sbx_add_string(out_n, out_items, items[i]))
            return false;
    return true;
}

static bool list_has(size_t n, char *const *items, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i], s) == 0)
            return true;
    return false;
}

/* True when path equals base or lies under it ("/data/x" under "/data", not "/database").
 * Text alone decides, so a path with a "." or ".." component is never within anything
 * ("/data/../etc" starts with "/data/" and names /etc): paths_within refuses those first. */
static bool path_within(const char *path, const char *base)
{
    size_t bl = strlen(base);
    while (bl > 1 && base[bl - 1] == '/')
        bl--;
    if (strncmp(path, base, bl) != 0)
        return false;
    return path[bl] == '\0' || path[bl] == '/' || (bl == 1 && base[0] == '/');
}

/* Whether each of paths lies within one of bases; else *outside is the first that does not,
 * and *dotted whether that is because it has a "." or ".." component. */
static bool paths_within(size_t n, char *const *paths, size_t nb, char *const *bases,
                         const char **outside, bool *dotted)
{
    for (size_t i = 0; i < n; i++) {
        *dotted = sbx_path_has_dot_component(paths[i]);
        if (*dotted) {
            *outside = paths[i];
            return false;
        }
        bool ok = false;
        for (size_t j = 0; j < nb && !ok; j++)
            ok = path_within(paths[i], bases[j]);
        if (!ok) {
            *outside = paths[i];
            return false;
        }
    }
    return true;
}

static bool add_widened(sbx_strlist *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool add_widened(sbx_strlist *w, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return sbx_strlist_add(w, text);
}

/* Unsigned limit: zero in the request means the profile's value; a profile zero is unlimited. */
#define MERGE_LIMIT(field, fmt_spec, cast)                                                         \
    do {                                                                                           \
        eff->field = prof->field;                                                                  \
        if (req->field != 0) {                                                                     \
            if (prof->field != 0 && req->field > prof->field)                                      \
                ok &= add_widened(widened, #field " " fmt_spec " > profile's " fmt_spec,           \
                                  (cast)req->field, (cast)prof->field);                            \
            else                                                                                   \
                eff->field = req->field;                                                           \
        }                                                                                          \
    } while (0)

/* A request's limits within the bounds a profile's have (core/limits.h): past them a provider
 * would wrap or round a limit (a cpu of 1e-12 becomes Docker's 0, "no limit"). */
#define CHECK_MAX(field, max)                                                                      \
    do {                                                                                           \
        if (req->field > (unsigned long long)(max))                                                \
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,                                      \
                                 "policy." #field " %llu is above its bound %llu; ask for at "     \
                                 "most that, or 0 for the profile's",                              \
                                 (unsigned long long)req->field, (unsigned long long)(max));       \
    } while (0)

static sbx_status check_bounds(const sbx_policy *req, sbx_error *err)
{
    if (!isfinite(req->cpu) || req->cpu < 0 ||
        (req->cpu > 0 && (req->cpu < MIN_POLICY_CPU || req->cpu > MAX_POLICY_CPU)))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "policy.cpu %g is not a number of cores from %g to %d; ask for one, "
                             "or 0 for the profile's",
                             req->cpu, MIN_POLICY_CPU, MAX_POLICY_CPU);
    CHECK_MAX(memory_mb, MAX_POLICY_MEMORY_MB);
    CHECK_MAX(pids, MAX_POLICY_PIDS);
    CHECK_MAX(disk_mb, MAX_POLICY_DISK_MB);
    CHECK_MAX(timeout_ms, MAX_POLICY_TIMEOUT_MS);
    CHECK_MAX(output_limit_bytes, MAX_POLICY_OUTPUT_BYTES);
    const struct {
        const char *name;
        size_t n;
        char *const *items;
    } lists[] = {{"network_allow", req->n_network_allow, req->network_allow},
                 {"fs_read", req->n_fs_read, req->fs_read},
                 {"fs_write", req->n_fs_write, req->fs_write}};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (lists[i].n > MAX_POLICY_LIST_ENTRIES)
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "policy.%s has %zu entries; at most %d are accepted",
                                 lists[i].name, lists[i].n, MAX_POLICY_LIST_ENTRIES);
        for (size_t j = 0; j < lists[i].n; j++)
            if (strlen(lists[i].items[j]) > MAX_POLICY_ENTRY_BYTES)
                return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                     "policy.%s[%zu] is longer than %d bytes", lists[i].name, j,
                                     MAX_POLICY_ENTRY_BYTES);
    }
    return SBX_OK;
}

/* The two ways a request's fs path widens the profile's. */
#define OUTSIDE(field) field " '%s' outside the profile's " field
#define DOTTED(field)                                                                              \
    field " '%s' has a '.' or '..' component, which could name anything: give the path without "   \
          "them"

sbx_status sbx_policy_merge(const sbx_policy *prof, const sbx_policy *req, sbx_policy *eff,
                            sbx_strlist *widened, sbx_error *err)
{
    static const sbx_policy empty = SBX__V1__POLICY__INIT;
    if (req == NULL)
        req = &empty;
    if (prof == NULL)
        prof = &empty;
    bool ok = true;

    sbx_status st = check_bounds(req, err);
    if (st != SBX_OK)
        return st;

    /* Network egress: the request may only move towards deny. */
    eff->network_egress = prof->network_egress;
    if (req->network_egress != SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_UNSPECIFIED) {
        if (egress_rank(req->network_egress) > egress_rank(prof->network_egress))
            ok &= add_widened(widened, "network_egress %s > profile's %s",
                              sbx_policy_egress_name(req->network_egress),
                              sbx_policy_egress_name(prof->network_egress));
        else
            eff->network_egress = req->network_egress;
    }
    /* Allowlist entries: under a profile allowlist, only entries the profile lists. */
    const size_t na = req->n_network_allow;
    if (na > 0) {
        if (egress_rank(prof->network_egress) < 2) { /* only ALLOW takes any entry */
            for (size_t i = 0; i < na; i++)
                if (!list_has(prof->n_network_allow, prof->network_allow, req->network_allow[i]))
                    ok &= add_widened(widened, "network_allow '%s' not in the profile's allowlist",
                                      req->network_allow[i]);
        }
        ok &= copy_list(na, req->network_allow, &eff->n_network_allow, &eff->network_allow);
    } else {
        ok &= copy_list(prof->n_network_allow, prof->network_allow, &eff->n_network_allow,
                        &eff->network_allow);
    }

    /* Filesystem: extra paths must lie inside the profile's own extra paths. */
    const char *outside = NULL;
    bool dotted = false;
    if (req->n_fs_read > 0) {
        if (!paths_within(req->n_fs_read, req->fs_read, prof->n_fs_read, prof->fs_read, &outside,
                          &dotted))
            ok &= add_widened(widened, dotted ? DOTTED("fs_read") : OUTSIDE("fs_read"), outside);
        ok &= copy_list(req->n_fs_read, req->fs_read, &eff->n_fs_read, &eff->fs_read);
    } else {
        ok &= copy_list(prof->n_fs_read, prof->fs_read, &eff->n_fs_read, &eff->fs_read);
    }
    if (req->n_fs_write > 0) {
        if (!paths_within(req->n_fs_write, req->fs_write, prof->n_fs_write, prof->fs_write,
                          &outside, &dotted))
            ok &= add_widened(widened, dotted ? DOTTED("fs_write") : OUTSIDE("fs_write"), outside);
        ok &= copy_list(req->n_fs_write, req->fs_write, &eff->n_fs_write, &eff->fs_write);
    } else {
        ok &= copy_list(prof->n_fs_write, prof->fs_write, &eff->n_fs_write, &eff->fs_write);
    }

    /* cpu is a double; the same rule as the integer limits. */
    eff->cpu = prof->cpu;
    if (req->cpu > 0) {
        if (prof->cpu > 0 && req->cpu > prof->cpu)
            ok &= add_widened(widened, "cpu %g > profile's %g", req->cpu, prof->cpu);
        else
            eff->cpu = req->cpu;
    }
    MERGE_LIMIT(memory_mb, "%llu", unsigned long long);
    MERGE_LIMIT(pids, "%u", unsigned);
    MERGE_LIMIT(disk_mb, "%llu", unsigned long long);
    MERGE_LIMIT(timeout_ms, "%llu", unsigned long long);
    MERGE_LIMIT(output_limit_bytes, "%llu", unsigned long long);

    /* Lenient only loosens: a request cannot turn a strict profile lenient, and may always
     * ask for strict (lenient false is its unset value, so that takes strict: true). */
    eff->lenient = prof->lenient && !req->strict;
    eff->strict = req->strict;
    if (req->lenient && !prof->lenient)
        ok &= add_widened(widened, "lenient true > profile's strict");

    if (!ok && widened->n == 0)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory merging the policy");
    return SBX_OK;
}

/* A sandbox limit grants more than want's: want sets one (0 is no limit) the sandbox exceeds. */
#define WIDER_LIMIT(field, fmt_spec, cast)                                                         \
    do {                                                                                           \
        if (want->field != 0 && (sandbox->field == 0 || sandbox->field > want->field)) {           \
            if (sandbox->field == 0)                                                               \
                ok &= add_widened(wider, #field " unlimited > " fmt_spec, (cast)want->field);      \
            else                                                                                   \
                ok &= add_widened(wider, #field " " fmt_spec " > " fmt_spec, (cast)sandbox->field, \
                                  (cast)want->field);                                              \
        }                                                                                          \
    } while (0)

/* The first of the sandbox's paths that no path of want's holds, or NULL. A path want lists
 * itself is held, dot components or not (a profile built by hand may have one). */
static const char *path_not_held(size_t n, char *const *paths, size_t nw, char *const *wants)
{
    for (size_t i = 0; i < n; i++) {
        const char *outside = NULL;
        bool dotted;
        if (!list_has(nw, wants, paths[i]) &&
            !paths_within(1, &paths[i], nw, wants, &outside, &dotted))
            return outside;
    }
    return NULL;
}

bool sbx_policy_sandbox_wider(const sbx_policy *sandbox, const sbx_policy *want, sbx_strlist *wider)
{
    bool ok = true;
    int have = egress_rank(sandbox->network_egress), asked = egress_rank(want->network_egress);
    if (have > asked)
        ok &= add_widened(wider, "network_egress %s > %s",
                          sbx_policy_egress_name(sandbox->network_egress),
                          sbx_policy_egress_name(want->network_egress));
    else if (asked == 1 && have == 1)
        for (size_t i = 0; i < sandbox->n_network_allow; i++)
            if (!list_has(want->n_network_allow, want->network_allow, sandbox->network_allow[i]))
                ok &= add_widened(wider, "network_allow '%s' not asked for",
                                  sandbox->network_allow[i]);
    const char *p =
        path_not_held(sandbox->n_fs_read, sandbox->fs_read, want->n_fs_read, want->fs_read);
    if (p != NULL)
        ok &= add_widened(wider, "fs_read '%s' not asked for", p);
    p = path_not_held(sandbox->n_fs_write, sandbox->fs_write, want->n_fs_write, want->fs_write);
    if (p != NULL)
        ok &= add_widened(wider, "fs_write '%s' not asked for", p);
    if (want->cpu > 0 && (sandbox->cpu <= 0 || sandbox->cpu > want->cpu)) {
        if (sandbox->cpu <= 0)
            ok &= add_widened(wider, "cpu unlimited > %g", want->cpu);
        else
            ok &= add_widened(wider, "cpu %g > %g", sandbox->cpu, want->cpu);
    }
    WIDER_LIMIT(memory_mb, "%llu", unsigned long long);
    WIDER_LIMIT(pids, "%u", unsigned);
    WIDER_LIMIT(disk_mb, "%llu", unsigned long long);
    return ok;
}

sbx_status sbx_policy_unenforceable(const sbx_capabilities *caps, const sbx_policy *p,
                                    sbx_strlist *out)
{
    bool ok = true;
    switch (p->network_egress) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY:
        if (!caps->policy_network)
            ok &= sbx_strlist_add(out, "network_egress=deny");
        break;
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST:
        if (!caps->policy_network_domains)
            ok &= sbx_strlist_add(out, "network_egress=allowlist");
        break;
    default: /* allow restricts nothing; unspecified asks for nothing */ break;
    }
    if (!caps->policy_filesystem) {
        if (p->n_fs_read > 0)
            ok &= sbx_strlist_add(out, "fs_read");
        if (p->n_fs_write > 0)
            ok &= sbx_strlist_add(out, "fs_write");
    }
    if (!caps->policy_resources) {
        if (p->cpu > 0)
            ok &= sbx_strlist_add(out, "cpu");
        if (p->memory_mb > 0)
            ok &= sbx_strlist_add(out, "memory_mb");
        if (p->pids > 0)
            ok &= sbx_strlist_add(out, "pids");
        if (p->disk_mb > 0)
            ok &= sbx_strlist_add(out, "disk_mb");
    }
    return ok ? SBX_OK : SBX_E_INTERNAL;
}
