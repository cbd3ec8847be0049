/* teardown.c - see teardown.h. */
#include "providers/common/teardown.h"
#include "providers/common/proc.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sends SIGKILL to every pid listed in cgroup.procs of dir. */
static void kill_procs(const char *dir)
{
    char procs[PATH_MAX + 32], buf[8192];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    if (sbx_read_small(procs, 0, buf, sizeof buf) <= 0)
        return;
    for (char *save, *t = strtok_r(buf, "\n", &save); t; t = strtok_r(NULL, "\n", &save))
        kill((pid_t)strtol(t, NULL, 10), SIGKILL);
}

static void remove_cgroup_at(const char *dir, int depth)
{
    /* Most have nothing left in them and no child: one rmdir, no listing. */
    if (rmdir(dir) == 0 || errno == ENOENT)
        return;
    if (depth < SBX_TEARDOWN_CGROUP_DEPTH) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char sub[PATH_MAX + 32];
            if (e->d_type != DT_DIR || e->d_name[0] == '.' ||
                (size_t)snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) >= sizeof sub)
                continue;
            remove_cgroup_at(sub, depth + 1);
        }
        if (d)
            closedir(d);
    }
    for (int attempt = 0; attempt < 400; attempt++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return;
        kill_procs(dir);
        usleep(5000);
    }
}

void sbx_teardown_cgroup(const char *dir)
{
    remove_cgroup_at(dir, 0);
}

void sbx_teardown_state_dir(const char *dir)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/box/agent.sock", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/box", dir);
    rmdir(p);
    snprintf(p, sizeof p, "%s/meta", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/meta.tmp", dir);
    unlink(p);
    rmdir(dir);
}

void sbx_uid_slot_release(const char *dir, long slot, const char *owner)
{
    if (slot < 0)
        return;
    char path[PATH_MAX], target[PATH_MAX];
    snprintf(path, sizeof path, "%s/%ld", dir, slot);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n <= 0)
        return;
    target[n] = '\0';
    if (strcmp(target, owner) == 0)
        unlink(path);
}
