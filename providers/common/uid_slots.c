/* uid_slots.c - the host-wide slot registry (see uid_slots.h). */
#include "providers/common/uid_slots.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* mkdir -p of dir (its parent too), 0700: the registry is nobody else's business. */
static sbx_status make_dir(const char *dir, sbx_error *err)
{
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof parent, "%s", dir) >= (int)sizeof parent)
        return sbx_error_set(err, SBX_E_PROVISION, "uid slot directory '%.200s' is too long", dir);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
        if (mkdir(parent, 0700) < 0 && errno != EEXIST)
            return sbx_error_set(err, SBX_E_PROVISION, "cannot create %s: %s", parent,
                                 strerror(errno));
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot create %s: %s", dir, strerror(errno));
    return SBX_OK;
}

sbx_status sbx_uid_slot_claim(const char *dir, long n_slots, const char *owner, long *slot,
                              sbx_error *err)
{
    *slot = -1;
    sbx_status st = make_dir(dir, err);
    if (st != SBX_OK)
        return st;
    uint32_t start = 0;
    if (getrandom(&start, sizeof start, 0) != (ssize_t)sizeof start)
        start = (uint32_t)getpid();
    char path[PATH_MAX];
    for (long i = 0; i < n_slots; i++) {
        long k = (long)((start + (uint64_t)i) % (uint64_t)n_slots);
        snprintf(path, sizeof path, "%s/%ld", dir, k);
        if (symlink(owner, path) == 0) {
            *slot = k;
            return SBX_OK;
        }
        if (errno != EEXIST)
            return sbx_error_set(err, SBX_E_PROVISION, "cannot claim uid slot %s: %s", path,
                                 strerror(errno));
    }
    return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                         "all %ld uid slots of %s are in use (one per live sandbox); destroy "
                         "sandboxes or raise the provider's uid_slots",
                         n_slots, dir);
}

void sbx_uid_slot_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char link[PATH_MAX], target[PATH_MAX];
        struct stat st;
        if (de->d_name[0] == '.' ||
            (size_t)snprintf(link, sizeof link, "%s/%s", dir, de->d_name) >= sizeof link)
            continue;
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0 || lstat(link, &st) < 0 ||
            time(NULL) - st.st_mtime < SBX_UID_SLOT_SWEEP_MIN_AGE_S)
            continue;
        target[n] = '\0';
        if (access(target, F_OK) != 0)
            unlink(link);
    }
    if (d != NULL)
        closedir(d);
}
