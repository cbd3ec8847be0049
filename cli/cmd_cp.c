/* cmd_cp.c - `sbx cp SRC DST`: copies one file between the host and a session
 * (SESSION:/path on one side). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"
#include "core/listing.h"

/* Bytes per WriteFile or ReadFile: every request and completion must stay under the
 * transport's message limit (the worker's max_message_bytes, 16 MiB by default); 4 MiB leaves
 * room for the rest of the message and keeps memory flat whatever the file's size. */
#define CP_CHUNK (4u * 1024u * 1024u)

/* Progress is shown on a terminal for files at least this big (smaller ones are instant). */
#define CP_PROGRESS_MIN (64u * 1024u * 1024u)

/* Deepest directory tree copied with -r: bounds the recursion (and its stack) whatever a
 * sandbox's tree looks like; real trees are far shallower. */
#define CP_DEPTH_MAX 64

/* Longest path built while walking a tree. */
#define CP_PATH_MAX 4096

const char cmd_cp_help[] =
    "Usage: sbx cp [-r] HOST_PATH SESSION:PATH\n"
    "       sbx cp [-r] SESSION:PATH HOST_PATH\n\n"
    "Copies one file of any size into or out of a session's sandbox (SESSION is an id or a\n"
    "name from `sbx session ls`), in chunks of 4 MiB (WriteFile with an offset, ReadFile by\n"
    "ranges), so every message stays under the transport's limit. The size is checked at the\n"
    "end: a short or changed transfer is an error (exit 1), never a silent truncation. A\n"
    "download goes to a temporary file renamed into place when complete. Progress is shown\n"
    "on a terminal for big files. A destination that is a directory (on the host, an existing\n"
    "one; in the sandbox, a path ending in '/') receives the file under its own name.\n"
    "-r, --recursive copies a directory: every regular file under it, file by file (symlinks\n"
    "and special files are skipped with a notice).\n";

/* Splits "SESSION:/path" (the session part has no '/'); false for a host path. */
static bool split_remote(const char *arg, char *session, size_t size, const char **path)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (colon == NULL || colon == arg || (slash != NULL && slash < colon))
        return false;
    /* Session ids may contain ':' ("default:p"): an absolute path starts at the first ":/",
     * a relative one after the last ':'. */
    const char *split = strstr(arg, ":/");
    if (split == NULL)
        split = strrchr(arg, ':');
    if ((size_t)(split - arg) >= size)
        return false;
    memcpy(session, arg, (size_t)(split - arg));
    session[split - arg] = '\0';
    *path = split + 1;
    return **path != '\0';
}

static void progress(uint64_t done, uint64_t total, bool final)
{
    if (total < CP_PROGRESS_MIN || !isatty(STDERR_FILENO))
        return;
    fprintf(stderr, "\rsbx cp: %llu / %llu MiB%s", (unsigned long long)(done >> 20),
            (unsigned long long)(total >> 20), final ? "\n" : "");
}

/* Runs one file request in session; returns the completion when it succeeded, else prints it
 * and returns NULL (*rc = its exit code). */
static sbx_completion *file_op(cli_plane *p, sbx_request *r, const char *session, int *rc)
{
    sbx_completion *c = NULL;
    sbx_sessions_execute(p->sessions, r, session, SBX_WAIT_FOREVER, &c, NULL);
    if (c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        return c;
    *rc = cli_print_completion(c, false, NULL);
    /* The command line was fine: a file the sandbox does not have (or cannot take) is a failed
     * operation (1), not a usage error (2), whatever code the provider gives it. */
    if (*rc == CLI_EXIT_OK || *rc == CLI_EXIT_USAGE)
        *rc = CLI_EXIT_FAILED;
    sbx_completion_free(c);
    return NULL;
}

/* The size of path in the session (ReadFile of nothing at the end), or -1 after printing why. */
static long long remote_size(cli_plane *p, const char *session, const char *path, uint64_t offset,
                             int *rc)
{
    sbx_request *r = cli_plane_own(p, sbx_request_read_file(NULL, path));
    if (r == NULL) {
        fprintf(stderr, "sbx cp: out of memory\n");
        *rc = CLI_EXIT_FAILED;
        return -1;
    }
    r->read_file->offset = offset;
    r->read_file->max_bytes = 1;
    sbx_completion *c = file_op(p, r, session, rc);
    sbx_request_free(r);
    long long size = -1;
    if (c != NULL && c->result != NULL && c->result->n_files == 1)
        size = (long long)c->result->files[0]->size;
    else if (c != NULL)
        fprintf(stderr, "sbx cp: %s: the provider reported no file size\n", path);
    if (c != NULL && size < 0)
        *rc = CLI_EXIT_FAILED;
    sbx_completion_free(c);
    return size;
}

static int upload(cli_plane *p, const char *host, const char *session, const char *path)
{
    int fd = open(host, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sbx cp: cannot open '%s': %s\n", host, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sbx cp: '%s' is not a regular file\n", host);
        close(fd);
        return CLI_EXIT_FAILED;
    }
    uint8_t *buf = malloc(CP_CHUNK);
    if (buf == NULL) {
        close(fd);
        fprintf(stderr, "sbx cp: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    int rc = CLI_EXIT_OK;
    uint64_t sent = 0, total = (uint64_t)st.st_size;
    for (bool first = true; rc == CLI_EXIT_OK; first = false) {
        size_t len = 0;
        ssize_t n = 0;
        while (len < CP_CHUNK && (n = read(fd, buf + len, CP_CHUNK - len)) != 0) {
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                break;
            len += (size_t)n;
        }
        if (n < 0) {
            fprintf(stderr, "sbx cp: reading '%s': %s\n", host, strerror(errno));
            rc = CLI_EXIT_FAILED;
            break;
        }
        if (len == 0 && !first)
            break; /* end of file (an empty file still gets its one write) */
        sbx_request *r = cli_plane_own(
            p, sbx_request_write_file(NULL, path, NULL, 0, (uint32_t)(st.st_mode & 0777)));
        if (r == NULL) {
            fprintf(stderr, "sbx cp: out of memory\n");
            rc = CLI_EXIT_FAILED;
            break;
        }
        r->write_file->content.data = buf; /* borrowed: detached before the request is freed */
        r->write_file->content.len = len;
        r->write_file->mkdirs = 1;
        r->write_file->offset = sent;
        sbx_completion *c = file_op(p, r, session, &rc);
        r->write_file->content.data = NULL;
        r->write_file->content.len = 0;
        sbx_request_free(r);
        if (c != NULL)
            sent += len;
        sbx_completion_free(c);
        progress(sent, total, false);
        if (len < CP_CHUNK)
            break;
    }
    close(fd);
    free(buf);
    if (rc != CLI_EXIT_OK)
        return rc;
    long long size = remote_size(p, session, path, sent, &rc);
    if (size < 0)
        return rc;
    progress(sent, total, true);
    if ((uint64_t)size != sent) {
        fprintf(stderr,
                "sbx cp: %s:%s is %lld bytes after the copy, but %llu were sent (it changed "
                "meanwhile, or the transfer was cut short)\n",
                session, path, size, (unsigned long long)sent);
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

/* The mode a downloaded file gets on the host: 0755 when the sandbox's file is executable by
 * anyone, else 0644, less the caller's umask, as `cp` (without -p) would make it. Never the
 * sandbox's own bits: a program there could otherwise hand the host a world-writable (0777) or
 * group-writable file. */
static mode_t host_mode(uint32_t sandbox_mode)
{
    mode_t mask = umask(0);
    umask(mask);
    return ((sandbox_mode & 0111) != 0 ? 0755 : 0644) & ~mask;
}

static int download(cli_plane *p, const char *session, const char *path, const char *host)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.sbx-cp.%ld", host, (long)getpid()) >= sizeof(tmp)) {
        fprintf(stderr, "sbx cp: '%s': path too long\n", host);
        return CLI_EXIT_FAILED;
    }
    int fd = -1, rc = CLI_EXIT_OK;
    uint64_t got = 0, size = 0;
    mode_t mode = 0644;
    for (bool first = true; rc == CLI_EXIT_OK && (first || got < size); first = false) {
        sbx_request *r = cli_plane_own(p, sbx_request_read_file(NULL, path));
        if (r == NULL) {
            fprintf(stderr, "sbx cp: out of memory\n");
            rc = CLI_EXIT_FAILED;
            break;
        }
        r->read_file->offset = got;
        r->read_file->max_bytes = CP_CHUNK;
        sbx_completion *c = file_op(p, r, session, &rc);
        sbx_request_free(r);
        if (c == NULL)
            break;
        const sbx_file *f =
            c->result != NULL && c->result->n_files == 1 ? c->result->files[0] : NULL;
        if (f == NULL) {
            fprintf(stderr, "sbx cp: %s:%s: the provider returned no file\n", session, path);
            rc = CLI_EXIT_FAILED;
        } else if (first) {
            size = f->size;
            mode = host_mode(f->mode);
            /* Written beside host under a temporary name and renamed into place, so an error
             * names host itself: the temporary name is nothing the caller chose. */
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0) {
                fprintf(stderr, "sbx cp: cannot create '%s': %s\n", host, strerror(errno));
                rc = CLI_EXIT_FAILED;
            }
        } else if (f->size != size) {
            fprintf(stderr, "sbx cp: %s:%s changed size during the copy (%llu, then %llu bytes)\n",
                    session, path, (unsigned long long)size, (unsigned long long)f->size);
            rc = CLI_EXIT_FAILED;
        }
        if (rc == CLI_EXIT_OK && f->content.len == 0 && got < size) {
            fprintf(stderr, "sbx cp: %s:%s: short read at %llu of %llu bytes\n", session, path,
                    (unsigned long long)got, (unsigned long long)size);
            rc = CLI_EXIT_FAILED;
        }
        if (rc == CLI_EXIT_OK) {
            const uint8_t *d = f->content.data;
            size_t left = f->content.len;
            while (left > 0) {
                ssize_t n = write(fd, d, left);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0) {
                    fprintf(stderr, "sbx cp: cannot write '%s': %s\n", host, strerror(errno));
                    rc = CLI_EXIT_FAILED;
                    break;
                }
                d += n;
                left -= (size_t)n;
            }
            got += f->content.len;
            progress(got, size, false);
        }
        sbx_completion_free(c);
    }
    if (rc == CLI_EXIT_OK && got != size) {
        fprintf(stderr, "sbx cp: %s:%s: got %llu of %llu bytes\n", session, path,
                (unsigned long long)got, (unsigned long long)size);
        rc = CLI_EXIT_FAILED;
    }
    if (fd >= 0) {
        if (rc == CLI_EXIT_OK && (fchmod(fd, mode) != 0 || fsync(fd) != 0)) {
            fprintf(stderr, "sbx cp: cannot finish '%s': %s\n", host, strerror(errno));
            rc = CLI_EXIT_FAILED;
        }
        if (close(fd) != 0 && rc == CLI_EXIT_OK) {
            fprintf(stderr, "sbx cp: cannot write '%s': %s\n", host, strerror(errno));
            rc = CLI_EXIT_FAILED;
        }
        if (rc == CLI_EXIT_OK && rename(tmp, host) != 0) {
            fprintf(stderr, "sbx cp: cannot rename into '%s': %s\n", host, strerror(errno));
            rc = CLI_EXIT_FAILED;
        }
        if (rc != CLI_EXIT_OK)
            unlink(tmp);
    }
    progress(got, size, true);
    return rc;
}

/* child = dir + "/" + name; false (after a message) when too long. */
static bool join(char *out, const char *dir, const char *name)
{
    size_t n = strlen(dir);
    bool slash = n > 0 && dir[n - 1] == '/';
    if ((size_t)snprintf(out, CP_PATH_MAX, "%s%s%s", dir, slash ? "" : "/", name) < CP_PATH_MAX)
        return true;
    fprintf(stderr, "sbx cp: path longer than %d bytes under '%s'\n", CP_PATH_MAX, dir);
    return false;
}

/* -r into the sandbox: every regular file under host (directories are created by the files'
 * mkdirs; symlinks and special files are skipped with a notice). */
static int upload_tree(cli_plane *p, const char *host, const char *session, const char *path,
                       int depth)
{
    if (depth > CP_DEPTH_MAX) {
        fprintf(stderr, "sbx cp: '%s' is more than %d directories deep\n", host, CP_DEPTH_MAX);
        return CLI_EXIT_FAILED;
    }
    DIR *d = opendir(host);
    if (d == NULL) {
        fprintf(stderr, "sbx cp: cannot open '%s': %s\n", host, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    int rc = CLI_EXIT_OK;
    struct dirent *e;
    char h[CP_PATH_MAX], r[CP_PATH_MAX];
    while (rc == CLI_EXIT_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (!join(h, host, e->d_name) || !join(r, path, e->d_name))
            rc = CLI_EXIT_FAILED;
        else if (lstat(h, &st) != 0)
            fprintf(stderr, "sbx cp: notice: skipping '%s': %s\n", h, strerror(errno));
        else if (S_ISDIR(st.st_mode))
            rc = upload_tree(p, h, session, r, depth + 1);
        else if (S_ISREG(st.st_mode))
            rc = upload(p, h, session, r);
        else
            fprintf(stderr, "sbx cp: notice: skipping '%s' (not a file or directory)\n", h);
    }
    closedir(d);
    return rc;
}

/* The host name of a listed entry into buf: the last component of its path (the engine lists
 * "dir/name"; an older worker may pass a provider's own form), or false for one that names no
 * file of the directory (core/listing.h). What a listing says comes from inside the sandbox: a
 * name such as ".." would otherwise be written outside the destination. */
static bool entry_name(const char *path, char *buf, size_t size)
{
    const char *name = NULL;
    size_t len = 0;
    if (!sbx_listing_entry_name(path, &name, &len) || len >= size)
        return false;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return true;
}

/* -r out of the sandbox: path is listed (ListFiles); false in *is_dir when it cannot be
 * (then it is copied as one file). */
static int download_tree(cli_plane *p, const char *session, const char *path, const char *host,
                         int depth, bool *is_dir)
{
    if (depth > CP_DEPTH_MAX) {
        fprintf(stderr, "sbx cp: %s:%s is more than %d directories deep\n", session, path,
                CP_DEPTH_MAX);
        return CLI_EXIT_FAILED;
    }
    sbx_request *req = cli_plane_request(p, NULL);
    req->list_files = malloc(sizeof(*req->list_files));
    sbx__v1__list_files__init(req->list_files);
    sbx_set_string(&req->list_files->path, path);
    req->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES;
    sbx_completion *c = NULL;
    sbx_sessions_execute(p->sessions, req, session, SBX_WAIT_FOREVER, &c, NULL);
    sbx_request_free(req);
    if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED ||
        c->result == NULL) {
        sbx_completion_free(c);
        *is_dir = false;
        return CLI_EXIT_OK;
    }
    *is_dir = true;
    if (c->notice != NULL && c->notice[0] != '\0') /* entries the engine left out, say */
        fprintf(stderr, "sbx cp: notice: %s\n", c->notice);
    int rc = CLI_EXIT_OK;
    if (mkdir(host, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "sbx cp: cannot create '%s': %s\n", host, strerror(errno));
        rc = CLI_EXIT_FAILED;
    }
    char h[CP_PATH_MAX], r[CP_PATH_MAX];
    for (size_t i = 0; rc == CLI_EXIT_OK && i < c->result->n_files; i++) {
        const sbx_file *f = c->result->files[i];
        char name[NAME_MAX + 1]; /* longer names cannot be made on the host */
        if (!entry_name(f->path != NULL ? f->path : "", name, sizeof name)) {
            fprintf(stderr,
                    "sbx cp: notice: skipping an entry of %s:%s named '%.200s' (not a "
                    "name of a file in it)\n",
                    session, path, f->path != NULL ? f->path : "");
        } else if (!join(h, host, name) || !join(r, path, name)) {
            rc = CLI_EXIT_FAILED;
        } else if (f->kind == SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY) {
            bool sub = false;
            rc = download_tree(p, session, r, h, depth + 1, &sub);
        } else if (f->kind == SBX__V1__FILE_KIND__FILE_KIND_REGULAR) {
            rc = download(p, session, r, h);
        } else {
            fprintf(stderr, "sbx cp: notice: skipping %s:%s (not a file or directory)\n", session,
                    r);
        }
    }
    sbx_completion_free(c);
    return rc;
}

int cmd_cp(int argc, char **argv)
{
    static const cli_option options[] = {{"recursive", 'r', false}, {NULL, 0, 0}};
    cli_parser a = {.cmd = "cp", .help = cmd_cp_help, .options = options};
    bool recursive = false;
    int opt;
    cli_opt_init(&a, argc, argv);
    while ((opt = cli_opt_next(&a)) >= 0)
        recursive = true;
    if (opt == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands != 2)
        return cli_usage_error("cp", "need SRC and DST");
    argv = a.operands - 1;
    char s_src[256], s_dst[256];
    const char *p_src = NULL, *p_dst = NULL;
    bool r_src = split_remote(argv[1], s_src, sizeof(s_src), &p_src);
    bool r_dst = split_remote(argv[2], s_dst, sizeof(s_dst), &p_dst);
    if (r_src == r_dst)
        return cli_usage_error("cp", "exactly one of SRC and DST must be SESSION:PATH");
    /* like cp(1): a destination that is a directory (host: an existing one; sandbox: a path
     * ending in '/') receives the source's base name */
    char dst[4096], trimmed[CP_PATH_MAX];
    const char *src = r_src ? p_src : argv[1];
    snprintf(trimmed, sizeof(trimmed), "%s", src);
    for (size_t n = strlen(trimmed); n > 1 && trimmed[n - 1] == '/'; n--)
        trimmed[n - 1] = '\0'; /* "dir/" names "dir" */
    const char *base = strrchr(trimmed, '/') != NULL ? strrchr(trimmed, '/') + 1 : trimmed;
    const char *to = r_dst ? p_dst : argv[2];
    struct stat st;
    bool into_dir = r_dst ? to[strlen(to) - 1] == '/' : stat(to, &st) == 0 && S_ISDIR(st.st_mode);
    if (into_dir) {
        if (base[0] == '\0')
            return cli_usage_error("cp", "'%s' names no file", src);
        if ((size_t)snprintf(dst, sizeof(dst), "%s%s%s", to, to[strlen(to) - 1] == '/' ? "" : "/",
                             base) >= sizeof(dst))
            return cli_usage_error("cp", "destination path too long");
        to = dst;
    }
    struct stat hs;
    bool host_dir = !r_src && stat(argv[1], &hs) == 0 && S_ISDIR(hs.st_mode);
    if (host_dir && !recursive)
        return cli_usage_error("cp", "'%s' is a directory (copy it with -r)", argv[1]);
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    bool is_dir = false;
    if (host_dir)
        rc = upload_tree(&p, argv[1], s_dst, to, 0);
    else if (r_dst)
        rc = upload(&p, argv[1], s_dst, to);
    else if (recursive && (rc = download_tree(&p, s_src, p_src, to, 0, &is_dir)) == 0 && !is_dir)
        rc = download(&p, s_src, p_src, to);
    else if (!recursive)
        rc = download(&p, s_src, p_src, to);
    cli_plane_close(&p);
    return rc;
}
