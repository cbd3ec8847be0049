/* switches.h - how many times a task has slept so far (voluntary_ctxt_switches of its status
 * file), for tests that check an idle process or thread sleeps until something happens instead
 * of waking on a timer: read, wait, read again. Header-only (static functions). */
#ifndef SBX_TESTS_SUPPORT_SWITCHES_H
#define SBX_TESTS_SUPPORT_SWITCHES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Of the task whose status file is path (/proc/PID/status, /proc/self/task/TID/status); -1
 * when it cannot be read (the task is gone). */
static inline long sbx_test_switches_at(const char *path)
{
    FILE *f = fopen(path, "re");
    long n = -1;
    char line[128];
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "voluntary_ctxt_switches:", 24) == 0)
            n = atol(line + 24);
    if (f != NULL)
        fclose(f);
    return n;
}

/* Of process pid's main thread (a single-threaded helper: the egress proxy, a port relay). */
static inline long sbx_test_switches(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    return sbx_test_switches_at(path);
}

#endif
