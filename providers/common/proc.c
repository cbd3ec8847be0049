/* proc.c - small-file reads and /proc/<pid>/stat's state and start time, and whether a process
 * is being killed (proc.h). */
#include "proc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t sbx_read_small(const char *path, int open_flags, char *buf, size_t cap)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | open_flags);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

unsigned long long sbx_proc_start_time(long pid, char *state)
{
    if (state != NULL)
        *state = '?';
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (sbx_read_small(path, 0, buf, sizeof buf) <= 0)
        return 0;
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    /* fields after the comm: 3 state ... 22 starttime */
    int field = 2;
    for (char *t = p + 1; *t != '\0';) {
        while (*t == ' ')
            t++;
        if (*t == '\0')
            break;
        field++;
        if (field == 3 && state != NULL)
            *state = *t;
        if (field == 22)
            return strtoull(t, NULL, 10);
        while (*t != '\0' && *t != ' ')
            t++;
    }
    return 0;
}

unsigned long long sbx_proc_live_start_time(long pid)
{
    char state;
    unsigned long long start = sbx_proc_start_time(pid, &state);
    return state == 'Z' || state == 'X' ? 0 : start;
}

bool sbx_proc_killed(long pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (sbx_read_small(path, 0, buf, sizeof buf) <= 0)
        return false;
    const char *p = strrchr(buf, ')');
    for (int field = 2; p != NULL && field < 9; field++)
        p = strchr(p + 1, ' ');
    /* PF_EXITING, or PF_SIGNALED: set once the fatal signal is taken off the pending set and
     * before the exit begins (between the two, neither field below nor PF_EXITING shows it) */
    if (p != NULL && (strtoul(p + 1, NULL, 10) & (0x4 | 0x400)) != 0)
        return true;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    if (sbx_read_small(path, 0, buf, sizeof buf) <= 0)
        return false;
    static const char *const keys[] = {"\nShdPnd:", "\nSigPnd:"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *k = strstr(buf, keys[i]);
        if (k != NULL && (strtoull(k + strlen(keys[i]), NULL, 16) & (1ull << (SIGKILL - 1))) != 0)
            return true;
    }
    return false;
}
