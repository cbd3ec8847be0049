/* local_helpers.h - shared fixture of the local provider tests: opens the provider on a
 * private runtime directory, creates sandboxes with a given policy, runs shell lines and
 * python, and checks what a sandbox leaves behind. Header-only (static functions).
 */
#ifndef SBX_TESTS_LOCAL_HELPERS_H
#define SBX_TESTS_LOCAL_HELPERS_H

#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "local/leftovers.h"
#include "providers/local/local.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

/* Generous: 8 helpers share 2 cores, and ASan slows the host side. */
#define LT_TIMEOUT_MS 60000

typedef struct lt_env {
    const sbx_provider_ops *ops;
    void *state;
    char runtime_dir[64];
} lt_env;

/* Removes a runtime dir the tests made, with the provider's sweep stamp in it. */
static inline void lt_remove_runtime_dir(const char *dir)
{
    char stamp[PATH_MAX + 16];
    snprintf(stamp, sizeof stamp, "%s/%s", dir, SBX_LOCAL_SWEEP_STAMP);
    unlink(stamp);
    rmdir(dir);
}

/* Runtime dirs a test binary opened the provider on, at most this many tracked. */
#define LT_TRACKED_MAX 64

static inline void lt_sweep_at_exit(void);

/* Tracks dir (made by this process) for lt_sweep_at_exit; dir NULL: sweeps. A test that fails
 * an assertion leaves at once, before its own lt_close: only tests with a group teardown got
 * their sandboxes destroyed, the others' lived on for their idle TTL (a day), with their
 * cgroups and uid slots. At exit (cmocka returns from a failed test and main ends) every
 * tracked dir still there has its sandboxes destroyed and is removed, by the process that made
 * it only: a child forked by a test and ending with exit() leaves its parent's alone. */
static inline void lt_track(const char *dir)
{
    static struct {
        char dir[64];
        pid_t pid;
    } tracked[LT_TRACKED_MAX];
    static int n;
    if (dir != NULL) {
        if (n == 0)
            atexit(lt_sweep_at_exit);
        if (n < LT_TRACKED_MAX) {
            snprintf(tracked[n].dir, sizeof tracked[n].dir, "%s", dir);
            tracked[n++].pid = getpid();
        }
        return;
    }
    for (int i = 0; i < n; i++) {
        if (tracked[i].pid != getpid() || access(tracked[i].dir, F_OK) != 0)
            continue;
        sbx_test_destroy_local_leftovers(tracked[i].dir, NULL, "at exit");
        lt_remove_runtime_dir(tracked[i].dir);
    }
}

static inline void lt_sweep_at_exit(void)
{
    lt_track(NULL);
}

/* Opens the provider on a fresh runtime dir for profile `profile` of the given scope (per
 * session: an agent that keeps forking spares; per call: a one-shot agent). */
static inline void lt_open_scoped(lt_env *e, const char *profile, sbx_scope scope)
{
    e->ops = sbx_provider_lookup("local");
    assert_non_null(e->ops);
    snprintf(e->runtime_dir, sizeof e->runtime_dir, "/tmp/sbxt-XXXXXX");
    assert_non_null(mkdtemp(e->runtime_dir));
    lt_track(e->runtime_dir);
    sbx_provider_ctx ctx = {0};
    ctx.profile = profile;
    ctx.runtime_dir = e->runtime_dir;
    ctx.node = "test";
    ctx.scope = scope;
    sbx_error err = {0};
    sbx_status st = e->ops->open(&ctx, &e->state, &err);
    if (st != SBX_OK)
        fail_msg("open local provider: %s", err.message);
}

/* Opens the provider (per call) on a fresh runtime dir with one option set; *opts is the
 * caller's to free after lt_close. */
static inline void lt_open_with(lt_env *e, const char *key, const char *value, sbx_options **opts)
{
    e->ops = sbx_provider_lookup("local");
    assert_non_null(e->ops);
    snprintf(e->runtime_dir, sizeof e->runtime_dir, "/tmp/sbxt-XXXXXX");
    assert_non_null(mkdtemp(e->runtime_dir));
    lt_track(e->runtime_dir);
    *opts = sbx_options_new(e->ops->options);
    sbx_error err = {0};
    assert_int_equal(sbx_options_set(*opts, key, value, &err), SBX_OK);
    sbx_provider_ctx ctx = {0};
    ctx.runtime_dir = e->runtime_dir;
    ctx.options = *opts;
    ctx.scope = SBX_SCOPE_PER_CALL;
    if (e->ops->open(&ctx, &e->state, &err) != SBX_OK)
        fail_msg("open local provider with %s=%s: %s", key, value, err.message);
}

static inline void lt_open(lt_env *e)
{
    lt_open_scoped(e, "test", SBX_SCOPE_PER_CALL);
}

static inline void lt_close(lt_env *e)
{
    sbx_test_destroy_local_leftovers(e->runtime_dir, e->state, "lt_close");
    e->ops->close(e->state);
    lt_remove_runtime_dir(e->runtime_dir);
}

/* A policy with the given limits (0 = none); network denied. Free with sbx_message_free. */
static inline sbx_policy *lt_policy(uint64_t memory_mb, uint32_t pids)
{
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->memory_mb = memory_mb;
    p->pids = pids;
    return p;
}

static inline sbx_sandbox *lt_create_with(lt_env *e, sbx_policy *p)
{
    sbx_error err = {0};
    sbx_sandbox *sb = NULL;
    sbx_status st = e->ops->create(e->state, NULL, NULL, p, &sb, &err);
    if (st != SBX_OK)
        fail_msg("create: %s: %s", sbx_status_name(st), err.message);
    return sb;
}

static inline sbx_sandbox *lt_create(lt_env *e)
{
    sbx_policy *p = lt_policy(getuid() == 0 ? 512 : 0, getuid() == 0 ? 256 : 0);
    sbx_sandbox *sb = lt_create_with(e, p);
    sbx_message_free((ProtobufCMessage *)p);
    return sb;
}

static inline void lt_destroy(lt_env *e, sbx_sandbox *sb)
{
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    e->ops->sandbox_close(sb);
    sbx_error err = {0};
    assert_int_equal(e->ops->destroy(e->state, id, &err), SBX_OK);
    sbx_local_settle(e->state); /* a per_call sandbox's reaper removes it just after */
}

static inline sbx_exec_opts lt_opts(int64_t timeout_ms, const sbx_policy *p)
{
    static const sbx_principal principal = SBX__V1__PRINCIPAL__INIT;
    static const sbx_policy empty = SBX__V1__POLICY__INIT;
    sbx_exec_opts o;
    memset(&o, 0, sizeof o);
    o.deadline_mono_ms = sbx_monotonic_ms() + (timeout_ms ? timeout_ms : LT_TIMEOUT_MS);
    o.principal = &principal;
    o.policy = p ? p : &empty;
    return o;
}

/* Runs a shell line; returns the status, fills *out (caller frees with sbx_message_free). */
static inline sbx_status lt_sh(lt_env *e, sbx_sandbox *sb, const char *line, int64_t timeout_ms,
                               sbx_result **out, sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    *out = sbx_result_new();
    sbx_exec_opts o = lt_opts(timeout_ms, NULL);
    return e->ops->run_command(sb, &op, &o, *out, err);
}

/* Runs a shell line that must succeed as a machinery operation; returns its result. */
static inline sbx_result *lt_run(lt_env *e, sbx_sandbox *sb, const char *line)
{
    sbx_result *r;
    sbx_error err = {0};
    sbx_status st = lt_sh(e, sb, line, 0, &r, &err);
    if (st != SBX_OK)
        fail_msg("run '%s': %s: %s", line, sbx_status_name(st), err.message);
    return r;
}

static inline sbx_status lt_py(lt_env *e, sbx_sandbox *sb, const char *code, sbx_result **out,
                               sbx_error *err)
{
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = (char *)code;
    *out = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    return e->ops->run_code(sb, &op, &o, *out, err);
}

static inline bool lt_stdout_has(const sbx_result *r, const char *needle)
{
    if (!r->stdout.len)
        return false;
    char *s = strndup((const char *)r->stdout.data, r->stdout.len);
    bool ok = strstr(s, needle) != NULL;
    free(s);
    return ok;
}

static inline bool lt_stderr_has(const sbx_result *r, const char *needle)
{
    if (!r->stderr.len)
        return false;
    char *s = strndup((const char *)r->stderr.data, r->stderr.len);
    bool ok = strstr(s, needle) != NULL;
    free(s);
    return ok;
}

/* Entries of path (a runtime dir: once no sandbox in it is still being removed by its reaper). */
static inline int lt_count_dir(const char *path)
{
    sbx_test_settle_local(path);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') /* not ".", ".." nor the provider's sweep stamp */
            n++;
    closedir(d);
    return n;
}

#endif
