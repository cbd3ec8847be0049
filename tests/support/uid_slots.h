/* uid_slots.h - the host uid slot registry as tests see it (providers/common/uid_slots.h): each
 * live sandbox holds a symlink /run/sbx-uid-slots/<registry>/<n> naming its state dir. Whether a
 * slot names a path (a sandbox that should be gone still holds one), and the release of every slot
 * naming a path under a test's own dir before the dir goes. Header-only (static functions).
 */
#ifndef SBX_TESTS_SUPPORT_UID_SLOTS_H
#define SBX_TESTS_SUPPORT_UID_SLOTS_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SBX_TEST_UID_SLOTS "/run/sbx-uid-slots"

/* Calls fn(link, target, arg) for each slot of every registry until it returns true; returns
 * whether one did. */
static inline bool sbx_test_each_slot(bool (*fn)(const char *link, const char *target, void *arg),
                                      void *arg)
{
    bool stop = false;
    DIR *regs = opendir(SBX_TEST_UID_SLOTS);
    for (struct dirent *r; regs != NULL && !stop && (r = readdir(regs)) != NULL;) {
        char reg[512];
        if (r->d_name[0] == '.' ||
            (size_t)snprintf(reg, sizeof reg, SBX_TEST_UID_SLOTS "/%s", r->d_name) >= sizeof reg)
            continue;
        DIR *slots = opendir(reg);
        for (struct dirent *s; slots != NULL && !stop && (s = readdir(slots)) != NULL;) {
            char link[1024], target[1024];
            snprintf(link, sizeof link, "%s/%s", reg, s->d_name);
            ssize_t n = readlink(link, target, sizeof target - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            stop = fn(link, target, arg);
        }
        if (slots != NULL)
            closedir(slots);
    }
    if (regs != NULL)
        closedir(regs);
    return stop;
}

static inline bool sbx_test_slot_is(const char *link, const char *target, void *path)
{
    (void)link;
    return strcmp(target, (const char *)path) == 0;
}

/* Whether a slot names path (a state dir). */
static inline bool sbx_test_slot_names(const char *path)
{
    return sbx_test_each_slot(sbx_test_slot_is, (void *)path);
}

static inline bool sbx_test_slot_release_under(const char *link, const char *target, void *dir)
{
    size_t len = strlen((const char *)dir);
    if (strncmp(target, (const char *)dir, len) == 0 && target[len] == '/')
        unlink(link);
    return false;
}

/* Frees every slot naming a path under dir. */
static inline void sbx_test_release_slots_under(const char *dir)
{
    (void)sbx_test_each_slot(sbx_test_slot_release_under, (void *)dir);
}

#endif
