/* leftovers.h - destroys the local sandboxes a failed test left in its runtime dir, for the
 * local tests' lt_close and the engine fixture's fx_config_free. An assertion leaves a test at
 * once, between its create and its destroy; removing the directory alone would leave the
 * sandbox's agent running for its idle TTL (a day) with its cgroups. A passing test has left
 * nothing. Header-only (a static function).
 */
#ifndef SBX_TESTS_LOCAL_LEFTOVERS_H
#define SBX_TESTS_LOCAL_LEFTOVERS_H

#include <dirent.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/common/proc.h"
#include "sbx/provider.h"

/* Sandboxes one cleanup destroys (a test makes a few). */
#define SBX_TEST_LEFTOVERS_MAX 64

/* True when sandbox dir (runtime_dir/l-...) is on its way: its meta names a reaper that runs and
 * a PID 1 that does not or is being killed (a per_call sandbox just destroyed, agent/reap.c), or
 * it has no meta
 * (its reaper is removing the dir, or a create has only just made it). */
static inline bool sbx_test_being_reaped(const char *dir)
{
    char path[PATH_MAX + 16], line[256];
    long pid = 0, reaper = 0;
    unsigned long long start = 0, reaper_start = 0;
    snprintf(path, sizeof path, "%s/meta", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return access(dir, F_OK) == 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (sscanf(line, "pid %ld", &pid) == 1 || sscanf(line, "start %llu", &start) == 1)
            continue;
        (void)sscanf(line, "reaper %ld %llu", &reaper, &reaper_start);
    }
    fclose(f);
    if (reaper <= 1 || sbx_proc_live_start_time(reaper) != reaper_start)
        return false;
    return pid <= 1 || sbx_proc_live_start_time(pid) != start || sbx_proc_killed(pid);
}

/* Waits (up to 10 s) until no sandbox in runtime_dir is being removed by its reaper: a per_call
 * sandbox's destroy (the engine's, after each per_call request) returns before its teardown, so
 * a count of what is left is a count of what the destroys left only after this. */
static inline void sbx_test_settle_local(const char *runtime_dir)
{
    /* settled when two looks 10 ms apart find nothing on its way (a loaded host can hold a
     * killed init between two of the marks sbx_proc_killed reads: seen in CI) */
    for (int round = 0, quiet = 0; round < 1000 && quiet < 2; round++) {
        bool busy = false;
        DIR *d = opendir(runtime_dir);
        for (struct dirent *de; d != NULL && !busy && (de = readdir(d)) != NULL;) {
            char dir[PATH_MAX];
            if (strncmp(de->d_name, "l-", 2) != 0)
                continue;
            snprintf(dir, sizeof dir, "%s/%s", runtime_dir, de->d_name);
            busy = sbx_test_being_reaped(dir);
        }
        if (d != NULL)
            closedir(d);
        quiet = busy ? 0 : quiet + 1;
        if (quiet < 2)
            usleep(10000);
    }
}

/* Destroys every sandbox (an l-* entry) in runtime_dir through state, a local provider open on
 * it; state NULL: one is opened here when there is anything to destroy. who names the caller in
 * what it prints when a destroy fails. */
static inline void sbx_test_destroy_local_leftovers(const char *runtime_dir, void *state,
                                                    const char *who)
{
    char ids[SBX_TEST_LEFTOVERS_MAX][64];
    int n = 0;
    DIR *d = opendir(runtime_dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < SBX_TEST_LEFTOVERS_MAX) {
        size_t len = strlen(de->d_name);
        if (strncmp(de->d_name, "l-", 2) == 0 && len < sizeof ids[0])
            memcpy(ids[n++], de->d_name, len + 1);
    }
    closedir(d);
    const sbx_provider_ops *ops = n > 0 ? sbx_provider_lookup("local") : NULL;
    if (ops == NULL)
        return;
    sbx_error err = {0};
    void *own = NULL;
    if (state == NULL) {
        sbx_provider_ctx ctx = {0};
        ctx.profile = "test-cleanup";
        ctx.runtime_dir = runtime_dir;
        ctx.node = "test-node";
        if (ops->open(&ctx, &own, &err) != SBX_OK) {
            fprintf(stderr, "%s: cannot open the local provider: %s\n", who, err.message);
            return;
        }
        state = own;
    }
    for (int i = 0; i < n; i++)
        if (ops->destroy(state, ids[i], &err) != SBX_OK)
            fprintf(stderr, "%s: cannot destroy the leftover sandbox %s: %s\n", who, ids[i],
                    err.message);
    if (own != NULL)
        ops->close(own);
    sbx_test_settle_local(runtime_dir);
}

#endif
