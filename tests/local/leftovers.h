/* leftovers.h - destroys the local sandboxes a failed test left in its runtime dir, for the
 * local tests' lt_close and the engine fixture's fx_config_free. An assertion leaves a test at
 * once, between its create and its destroy; removing the directory alone would leave the
 * sandbox's agent running for its idle TTL (a day) with its cgroups. A passing test has left
 * nothing. Header-only (a static function).
 */
#ifndef SBX_TESTS_LOCAL_LEFTOVERS_H
#define SBX_TESTS_LOCAL_LEFTOVERS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "sbx/provider.h"

/* Sandboxes one cleanup destroys (a test makes a few). */
#define SBX_TEST_LEFTOVERS_MAX 64

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
}

#endif
