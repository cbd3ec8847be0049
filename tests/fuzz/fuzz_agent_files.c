/* fuzz_agent_files.c - libFuzzer harness for sbx-agent's resolution of file-API paths inside the
 * sandbox root (agent/files.c: openat2 RESOLVE_IN_ROOT, and the O_NOFOLLOW component walk of
 * kernels without it). The path comes from the host's request, ultimately from a model.
 *
 * The root is a temp directory (files_init_root) holding traps: symlinks to "/", "/etc",
 * "../..", "/proc/self/root", a relative loop, a directory chain. Input: byte 0 picks the open
 * flags, mkdirs and which resolver (openat2 or the walk), the rest is the path (cut at NUL).
 *
 * Properties: no crash; every fd returned refers to something inside the root (its
 * /proc/self/fd link starts with the root's real path); a refusal is a negative errno; nothing
 * is ever created outside the root (a sentinel directory beside it stays empty). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/agent.h"
#include "fuzz/fuzz_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs between rebuilds of the root (files the inputs created are wiped then). */
#define FUZZ_ROOT_REBUILD 256

static char base[PATH_MAX], root[PATH_MAX + 16], outside[PATH_MAX + 16];
static size_t root_len;
static unsigned inputs;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static void rm_tree(const char *p)
{
    nftw(p, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void build_root(void)
{
    rm_tree(root);
    if (mkdir(root, 0755) != 0)
        abort();
    char p[PATH_MAX + 64];
    const char *dirs[] = {"workspace", "workspace/sub", "workspace/sub/deeper", "etc", "tmp"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/workspace/file.txt", root);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("inside\n", f);
        fclose(f);
    }
    struct {
        const char *target, *name;
    } links[] = {{"/", "workspace/to_root"},
                 {"/etc", "workspace/to_etc"},
                 {"../..", "workspace/up_up"},
                 {"../../..", "workspace/sub/up3"},
                 {"/proc/self/root", "workspace/proc_root"},
                 {"loop_b", "workspace/loop_a"},
                 {"loop_a", "workspace/loop_b"},
                 {outside, "workspace/to_outside"},
                 {"file.txt", "workspace/to_file"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, links[i].name);
        if (symlink(links[i].target, p) != 0)
            abort();
    }
}

static void at_exit(void)
{
    rm_tree(base);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(base, sizeof base, "%s/sbx-fuzz-files-XXXXXX", tmp);
    if (!mkdtemp(base))
        abort();
    char real[PATH_MAX];
    if (!realpath(base, real))
        abort();
    snprintf(root, sizeof root, "%s/root", real);
    snprintf(outside, sizeof outside, "%s/outside", real);
    root_len = strlen(root);
    if (mkdir(outside, 0755) != 0)
        abort();
    build_root();
    atexit(at_exit);
}

static bool outside_empty(void)
{
    DIR *d = opendir(outside);
    if (!d)
        return false;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = false;
    closedir(d);
    return empty;
}

static const int FLAGS[8] = {O_RDONLY,
                             O_WRONLY | O_CREAT | O_TRUNC,
                             O_RDONLY | O_DIRECTORY,
                             O_PATH,
                             O_WRONLY | O_CREAT | O_EXCL,
                             O_RDWR,
                             O_PATH | O_DIRECTORY,
                             O_WRONLY | O_APPEND | O_CREAT};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0])
        setup();
    if (++inputs % FUZZ_ROOT_REBUILD == 0)
        build_root();
    if (size == 0)
        return 0;
    uint8_t sel = data[0];
    char path[AGENT_MAX_PATH + 16];
    size_t n = size - 1 < sizeof path - 1 ? size - 1 : sizeof path - 1;
    memcpy(path, data + 1, n);
    path[n] = '\0';
    files_force_walk(sel & 0x10);
    if (files_init_root(root, "/workspace") != 0)
        abort();
    int fd = files_open(path, FLAGS[sel & 7], 0644, sel & 8);
    if (fd >= 0) {
        char link[64], target[PATH_MAX + 1];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t t = readlink(link, target, sizeof target - 1);
        FUZZ_REQUIRE(t > 0, "no link for a returned fd");
        target[t] = '\0';
        FUZZ_REQUIRE(strncmp(target, root, root_len) == 0 &&
                         (target[root_len] == '\0' || target[root_len] == '/'),
                     "'%s' opened %s, outside the root %s", path, target, root);
        close(fd);
    } else {
        FUZZ_REQUIRE(fd > -4096, "files_open returned %d", fd);
    }
    FUZZ_REQUIRE(outside_empty(), "'%s' created something outside the root", path);
    return 0;
}
