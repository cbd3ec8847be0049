/* files.c - resolving file-API paths INSIDE the sandbox root, so that `..`, absolute paths
 * and symlinks (to /etc, to /proc/self/root, ...) can never reach outside it.
 *
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from a directory fd of "/" does the work
 * where the kernel has it (5.6+): `..` stops at the root, absolute symlinks are resolved
 * against it, and /proc magic links are refused. Older kernels get a component-by-component
 * walk with O_NOFOLLOW that refuses every symlink. The agent's own directory (/.sbx, its
 * socket) and pseudo filesystems (/proc, /sys) are refused either way. This file must not
 * read or write file contents: file_ops.c does that on the returned fd.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* Directory depth of one path (components); deeper paths are refused. */
#define FILES_MAX_DEPTH 128

static int root_fd = -1;
static char workdir_buf[AGENT_MAX_PATH];
static uint64_t agent_mnt_id; /* mount id of /.sbx: the agent's socket directory */
static bool have_agent_dir;
static bool no_openat2; /* the kernel lacks openat2: walk by hand */
/* openat2's EAGAIN retried (a ".." raced by a rename or mount on the host); then the error. */
#define FILES_OPENAT2_RETRIES 64
static const char *last_error = "";

int files_init(const char *workdir)
{
    return files_init_root("/", workdir);
}

int files_init_root(const char *root, const char *workdir)
{
    if (root_fd >= 0)
        close(root_fd);
    have_agent_dir = false;
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root_fd < 0)
        return -errno;
    snprintf(workdir_buf, sizeof workdir_buf, "%s", workdir ? workdir : "/");
    struct statx stx;
    if (statx(AT_FDCWD, "/.sbx", 0, STATX_MNT_ID, &stx) == 0 && (stx.stx_mask & STATX_MNT_ID)) {
        struct statx rstx;
        agent_mnt_id = stx.stx_mnt_id;
        /* only when /.sbx really is its own mount; otherwise its 0700 mode protects it */
        have_agent_dir = statx(root_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &rstx) == 0 &&
                         rstx.stx_mnt_id != agent_mnt_id;
    }
    return 0;
}

void files_force_walk(bool walk)
{
    no_openat2 = walk;
}

const char *files_last_error(void)
{
    return last_error;
}

/* Refuses fds on pseudo filesystems and inside the agent's directory. */
static int check_allowed(int fd)
{
    struct statfs sfs;
    if (fstatfs(fd, &sfs) == 0) {
        if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC ||
            sfs.f_type == CGROUP_SUPER_MAGIC || sfs.f_type == CGROUP2_SUPER_MAGIC) {
            last_error = "paths on /proc, /sys and cgroup filesystems are not served";
            return -EACCES;
        }
    }
    /* /.sbx is its own bind mount: compare mount ids (a bind shares st_dev with its source
     * filesystem, so st_dev alone would also match /usr on many hosts). */
    struct statx stx;
    if (have_agent_dir && statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) == 0 &&
        (stx.stx_mask & STATX_MNT_ID) && stx.stx_mnt_id == agent_mnt_id) {
        last_error = "the agent's directory /.sbx is not served";
        return -EACCES;
    }
    return 0;
}

static int open_openat2(const char *path, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    /* openat2 refuses O_PATH combined with anything but O_DIRECTORY/O_NOFOLLOW/O_CLOEXEC */
    how.flags = (uint64_t)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY));
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    /* EAGAIN: a rename or a mount anywhere on the host raced a ".." of the path, so the kernel
     * could not prove it stayed inside; it asks for a retry (openat2(2)). With renames in a
     * loop on the host one such read in ten met it; a CI run's own churn failed one. */
    for (int tries = 0;; tries++) {
        long fd = syscall(SYS_openat2, root_fd, path, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN || tries == FILES_OPENAT2_RETRIES)
            return -errno;
    }
}

/* Fallback: walk from the root one component at a time, O_NOFOLLOW everywhere, keeping a
 * stack of directory fds so `..` pops (and stops at the root). Symlinks are refused. */
static int open_walk(const char *path, int flags, mode_t mode)
{
    int stack[FILES_MAX_DEPTH];
    int depth = 0;
    stack[0] = dup(root_fd);
    if (stack[0] < 0)
        return -errno;
    const char *p = path;
    int result = -EINVAL;
    for (;;) {
        while (*p == '/')
            p++;
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *rest = p + len;
        while (*rest == '/')
            rest++;
        bool last = (*rest == '\0');
        char comp[256] = {0};
        if (len >= sizeof comp) {
            result = -ENAMETOOLONG;
            break;
        }
        memcpy(comp, p, len);
        comp[len] = '\0';
        if (len == 0) { /* path was "/": the root itself, never created (O_CREAT without a
                           mode is also an invalid openat call that _FORTIFY_SOURCE aborts) */
            result = openat(stack[depth], ".",
                            (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC | O_NOCTTY);
            result = result < 0 ? -errno : result;
            break;
        }
        if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
            if (comp[1] == '.' && depth > 0)
                close(stack[depth--]);
            if (last) {
                result = openat(stack[depth], ".",
                                (flags & ~(O_CREAT | O_EXCL | O_TRUNC)) | O_CLOEXEC | O_NOCTTY);
                result = result < 0 ? -errno : result;
                break;
            }
            p = rest;
            continue;
        }
        if (last) {
            result = openat(stack[depth], comp, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
            result = result < 0 ? -errno : result;
            break;
        }
        if (depth + 1 >= FILES_MAX_DEPTH) {
            result = -ELOOP;
            break;
        }
        int next = openat(stack[depth], comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            result = -errno;
            break;
        }
        stack[++depth] = next;
        p = rest;
    }
    while (depth >= 0)
        close(stack[depth--]);
    return result;
}

static int open_resolved(const char *path, int flags, mode_t mode)
{
    if (!no_openat2) {
        int fd = open_openat2(path, flags, mode);
        if (fd != -ENOSYS)
            return fd;
        no_openat2 = true;
    }
    return open_walk(path, flags, mode);
}

/* Creates every missing directory above `abs` (inside the root), as the caller's fsuid. */
static int make_parents(const char *abs)
{
    char buf[AGENT_MAX_PATH * 2 + 4] = {0};
    snprintf(buf, sizeof buf, "%s", abs);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int fd = open_resolved(buf, O_PATH | O_DIRECTORY, 0);
        if (fd == -ENOENT) {
            char *slash = strrchr(buf, '/');
            char parent[AGENT_MAX_PATH * 2 + 4] = {0};
            size_t plen = (size_t)(slash - buf);
            memcpy(parent, buf, plen);
            parent[plen] = '\0';
            int pfd = open_resolved(plen ? parent : "/", O_PATH | O_DIRECTORY, 0);
            if (pfd < 0)
                return pfd;
            int rc = check_allowed(pfd);
            if (rc == 0 && mkdirat(pfd, slash + 1, 0755) < 0 && errno != EEXIST)
                rc = -errno;
            close(pfd);
            if (rc < 0)
                return rc;
        } else if (fd < 0) {
            return fd;
        } else {
            close(fd);
        }
        *s = '/';
    }
    return 0;
}

int files_open(const char *path, int flags, mode_t mode, bool mkdirs)
{
    last_error = "";
    if (root_fd < 0)
        return -EBADF;
    size_t len = strnlen(path, AGENT_MAX_PATH);
    if (len == 0 || len >= AGENT_MAX_PATH) {
        last_error = "the path is empty or longer than 1023 bytes";
        return -EINVAL;
    }
    char abs[AGENT_MAX_PATH * 2 + 2] = {0}; /* zeroed: vectorised str* may read past the NUL */
    if (path[0] == '/')
        snprintf(abs, sizeof abs, "%s", path);
    else
        snprintf(abs, sizeof abs, "%s/%s", workdir_buf, path);
    if (mkdirs) {
        int rc = make_parents(abs);
        if (rc < 0)
            return rc;
    }
    int fd = open_resolved(abs, flags, mode);
    if (fd < 0)
        return fd;
    int rc = check_allowed(fd);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}
