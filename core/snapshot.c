/* snapshot.c - named workspace snapshots: taken from a sandbox and restored into a new one with
 * the provider's own operations (tar runs inside the sandbox; the bytes cross through ReadFile
 * and WriteFile), kept on this host under sbx_config.snapshot_dir.
 *
 * Scope: one directory per principal, named by a hash of its subject, so one caller can never
 * list, read, restore or delete another's snapshot whatever name it sends. The packed bytes come
 * from inside a sandbox and are hostile: sbx never parses them, it only stores them (bounded by
 * max_bytes) and hands them back to a sandbox of the same principal, where tar unpacks them with
 * that sandbox's confinement. Writes are temp file + fsync + rename without replace, so a
 * crash or a failure leaves either the whole snapshot or none. This file must not know about
 * brokers or the wire.
 */

#include "core/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sha256.h"

/* Output kept from the tar commands run inside the sandbox: their error text, for the message. */
#define SNAPSHOT_CMD_OUTPUT 4096

/* Directory of the principal's snapshots: root/<first 16 bytes of SHA-256(subject), hex>. */
static void principal_dir(const snapshot_ctx *x, char *buf, size_t size)
{
    static const char label[] = "sbx snapshot principal v1";
    uint8_t d[SBX_SHA256_LEN];
    sbx_sha256 h;
    sbx_sha256_init(&h);
    sbx_sha256_update(&h, label, sizeof label); /* with its NUL: a separator */
    sbx_sha256_update(&h, x->subject, strlen(x->subject));
    sbx_sha256_final(&h, d);
    int n = snprintf(buf, size, "%s/", x->root);
    for (int i = 0; i < 16 && n > 0 && (size_t)n + 2 < size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%02x", d[i]);
}

/* A configuration built by hand (an embedder's) may name no store. */
static sbx_status check_store(const snapshot_ctx *x, sbx_error *err)
{
    if (x->root == NULL || x->root[0] != '/')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "no snapshot store: set snapshot_dir to an absolute directory");
    return SBX_OK;
}

sbx_status snapshot_check_name(const char *what, const char *name, sbx_error *err)
{
    size_t n = name != NULL ? strlen(name) : 0;
    bool ok = n > 0 && n <= SNAPSHOT_NAME_MAX && name[0] != '.';
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    }
    if (!ok)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s '%.80s' is not a snapshot name; use 1-%d of A-Z a-z 0-9 . _ - "
                             "(not starting with '.')",
                             what, name != NULL ? name : "", SNAPSHOT_NAME_MAX);
    return SBX_OK;
}

/* mkdir -p with mode 0700 for what it makes. */
static sbx_status make_dirs(const char *path, sbx_error *err)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return sbx_error_set(err, SBX_E_CONFIG, "snapshot_dir '%.200s...' is too long", path);
    for (char *p = buf + 1;; p++) {
        bool end = *p == '\0';
        if (*p == '/' || end) {
            *p = '\0';
            if (mkdir(buf, 0700) != 0 && errno != EEXIST)
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "cannot create snapshot directory %s: %s; set snapshot_dir "
                                     "to a directory sbx may write",
                                     buf, strerror(errno));
            if (end)
                return SBX_OK;
            *p = '/';
        }
    }
}

static void snapshot_path(const snapshot_ctx *x, const char *name, char *buf, size_t size)
{
    char dir[4096];
    principal_dir(x, dir, sizeof dir);
    snprintf(buf, size, "%s/%s.tar", dir, name);
}

static Sbx__V1__Snapshot *add_entry(sbx_result *res, const char *name, uint64_t size,
                                    int64_t created_ms)
{
    Sbx__V1__Snapshot *s = malloc(sizeof *s);
    if (s == NULL)
        return NULL;
    sbx__v1__snapshot__init(s);
    Sbx__V1__Snapshot **grown = realloc(res->snapshots, (res->n_snapshots + 1) * sizeof *grown);
    if (grown == NULL || !sbx_set_string(&s->name, name)) {
        if (grown != NULL)
            res->snapshots = grown;
        sbx_message_free(&s->base);
        return NULL;
    }
    s->size = size;
    s->created_at_ms = created_ms;
    grown[res->n_snapshots++] = s;
    res->snapshots = grown;
    return s;
}

/* Counts the principal's snapshots (names ending in .tar, not temp files). */
static size_t count_snapshots(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (d == NULL)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] != '.' && len > 4 && strcmp(e->d_name + len - 4, ".tar") == 0)
            n++;
    }
    closedir(d);
    return n;
}

/* Runs argv inside the sandbox with the request's deadline and principal, no streaming. On a
 * non-zero exit: PROVISION with `doing` and what the command printed. */
static sbx_status run_in(const snapshot_ctx *x, const char *const *argv, size_t argc,
                         const char *doing, sbx_error *err)
{
    Sbx__V1__RunCommand cmd = SBX__V1__RUN_COMMAND__INIT;
    cmd.argv = (char **)argv;
    cmd.n_argv = argc;
    sbx_exec_opts o = *x->o;
    o.on_output = NULL;
    o.on_output_arg = NULL;
    o.output_limit_bytes = SNAPSHOT_CMD_OUTPUT;
    sbx_result *res = sbx_result_new();
    if (res == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    sbx_status st = x->ops->run_command(x->sb, &cmd, &o, res, err);
    if (st == SBX_OK && (res->exit_code != 0 || res->signal != 0)) {
        const ProtobufCBinaryData *text = res->stderr.len > 0 ? &res->stderr : &res->stdout;
        int len = text->len > 400 ? 400 : (int)text->len;
        st = sbx_error_set(err, SBX_E_PROVISION, "%s failed in the sandbox (exit %d%s): %.*s",
                           doing, res->exit_code, res->signal ? ", signaled" : "", len,
                           text->data != NULL ? (const char *)text->data : "");
    }
    sbx_message_free(&res->base);
    return st;
}

static void sandbox_tmp(const snapshot_ctx *x, char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/.sbx-snapshot-%s.tar", x->task_id);
}

static void remove_in_sandbox(const snapshot_ctx *x, const char *path)
{
    const char *argv[] = {"rm", "-f", path};
    sbx_error ignore;
    sbx_error_clear(&ignore);
    run_in(x, argv, 3, "removing the packed workspace", &ignore);
}

/* Reads the packed file out of the sandbox into fd, refusing past max_bytes. */
static sbx_status copy_out(const snapshot_ctx *x, const char *path, int fd, uint64_t *total,
                           sbx_error *err)
{
    sbx_exec_opts o = *x->o;
    o.on_output = NULL;
    *total = 0;
    for (uint64_t off = 0, size = 1; off < size;) {
        Sbx__V1__ReadFile rf = SBX__V1__READ_FILE__INIT;
        rf.path = (char *)path;
        rf.offset = off;
        rf.max_bytes = SNAPSHOT_CHUNK;
        sbx_result *res = sbx_result_new();
        if (res == NULL)
            return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        sbx_status st = x->ops->read_file(x->sb, &rf, &o, res, err);
        /* The one file a successful read gives; without it this chunk ends the copy. */
        const sbx_file *f = st == SBX_OK && res->n_files == 1 ? res->files[0] : NULL;
        if (f == NULL) {
            if (st == SBX_OK)
                st = sbx_error_set(err, SBX_E_INTERNAL, "read_file of %s returned no file", path);
            sbx_message_free(&res->base);
            return st;
        }
        size = f->size;
        if (size > x->max_bytes)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "the workspace packs into %llu bytes, more than the %llu a "
                               "snapshot may hold (snapshot_max_mb); remove what is not "
                               "needed from the workspace, or raise snapshot_max_mb",
                               (unsigned long long)size, (unsigned long long)x->max_bytes);
        else if (f->content.len == 0 && off < size)
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "the packed workspace shrank while it was read (%llu of %llu "
                               "bytes)",
                               (unsigned long long)off, (unsigned long long)size);
        else if (off + f->content.len > size)
            st = sbx_error_set(err, SBX_E_PROVISION, "the packed workspace grew while it was read");
        for (size_t done = 0; st == SBX_OK && done < f->content.len;) {
            ssize_t w = write(fd, f->content.data + done, f->content.len - done);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                                   "cannot write the snapshot into %s: %s", x->root,
                                   strerror(w < 0 ? errno : ENOSPC));
            else
                done += (size_t)w;
        }
        if (st == SBX_OK)
            off += f->content.len;
        sbx_message_free(&res->base);
        if (st != SBX_OK)
            return st;
        *total = off;
    }
    return SBX_OK;
}

sbx_status snapshot_take(const snapshot_ctx *x, const char *name, sbx_result *res, sbx_error *err)
{
    char dir[4096], final[4200], tmp[4200], inside[128];
    sbx_status st = snapshot_check_name("snapshot.name", name, err);
    if (st != SBX_OK || (st = check_store(x, err)) != SBX_OK)
        return st;
    principal_dir(x, dir, sizeof dir);
    if ((st = make_dirs(dir, err)) != SBX_OK)
        return st;
    snapshot_path(x, name, final, sizeof final);
    if (access(final, F_OK) == 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "a snapshot named '%s' exists; choose another name or delete it "
                             "first (sbx snapshot rm %s)",
                             name, name);
    if (count_snapshots(dir) >= SNAPSHOT_PER_PRINCIPAL_MAX)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "this principal keeps %d snapshots, the most allowed; delete one "
                             "(sbx snapshot ls, sbx snapshot rm NAME)",
                             SNAPSHOT_PER_PRINCIPAL_MAX);
    /* Pack inside the sandbox: its own tar, its own confinement. --one-file-system, where the
     * tar has it (GNU; busybox has not), keeps to the workspace's file system: a bind mount
     * under it is not the workspace. */
    sandbox_tmp(x, inside, sizeof inside);
    static const char script[] =
        "if tar --one-file-system -cf /dev/null /dev/null 2>/dev/null; then "
        "exec tar --one-file-system -cf \"$1\" .; fi; exec tar -cf \"$1\" .";
    const char *pack[] = {"sh", "-c", script, "sh", inside};
    st = run_in(x, pack, 5, "packing the workspace (tar)", err);
    if (st != SBX_OK) {
        remove_in_sandbox(x, inside);
        return st;
    }
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s", dir, x->task_id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        remove_in_sandbox(x, inside);
        return sbx_error_set(err, SBX_E_CONFIG, "cannot create %s: %s", tmp, strerror(errno));
    }
    uint64_t size = 0;
    st = copy_out(x, inside, fd, &size, err);
    remove_in_sandbox(x, inside);
    if (st == SBX_OK && fsync(fd) != 0)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "cannot write %s: %s", tmp,
                           strerror(errno));
    close(fd);
    /* No replace: two requests taking the same name at once keep the first. */
    if (st == SBX_OK && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) != 0)
        st = errno == EEXIST
                 ? sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "a snapshot named '%s' was taken meanwhile; choose "
                                 "another name",
                                 name)
                 : sbx_error_set(err, SBX_E_CONFIG, "cannot keep %s: %s", final, strerror(errno));
    if (st != SBX_OK) {
        unlink(tmp);
        return st;
    }
    if (add_entry(res, name, size, sbx_now_ms()) == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    return SBX_OK;
}

sbx_status snapshot_check_exists(const snapshot_ctx *x, const char *name, sbx_error *err)
{
    char path[4200];
    sbx_status st = snapshot_check_name("from_snapshot", name, err);
    if (st != SBX_OK || (st = check_store(x, err)) != SBX_OK)
        return st;
    snapshot_path(x, name, path, sizeof path);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "from_snapshot: no snapshot named '%s' for principal '%s' on this "
                             "node; list them with sbx snapshot ls",
                             name, x->subject);
    return SBX_OK;
}

sbx_status snapshot_restore(const snapshot_ctx *x, const char *name, sbx_error *err)
{
    char path[4200], inside[128];
    sbx_status st = snapshot_check_exists(x, name, err);
    if (st != SBX_OK)
        return st;
    snapshot_path(x, name, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "cannot read snapshot '%s': %s", name,
                             strerror(errno));
    uint8_t *buf = malloc(SNAPSHOT_CHUNK);
    if (buf == NULL) {
        close(fd);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    sandbox_tmp(x, inside, sizeof inside);
    sbx_exec_opts o = *x->o;
    o.on_output = NULL;
    uint64_t off = 0;
    for (;;) {
        ssize_t n = read(fd, buf, SNAPSHOT_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = sbx_error_set(err, SBX_E_INTERNAL, "cannot read snapshot '%s': %s", name,
                               strerror(errno));
            break;
        }
        if (n == 0 && off > 0)
            break;
        Sbx__V1__WriteFile wf = SBX__V1__WRITE_FILE__INIT;
        wf.path = inside;
        wf.content.data = buf;
        wf.content.len = (size_t)n;
        wf.mode = 0600;
        wf.offset = off;
        sbx_result *res = sbx_result_new();
        st = res != NULL ? x->ops->write_file(x->sb, &wf, &o, res, err)
                         : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        sbx_message_free((ProtobufCMessage *)res);
        if (st != SBX_OK || n == 0)
            break;
        off += (uint64_t)n;
    }
    free(buf);
    close(fd);
    if (st == SBX_OK) {
        const char *unpack[] = {"sh", "-c", "tar -xf \"$1\"; s=$?; rm -f \"$1\"; exit $s", "sh",
                                inside};
        st = run_in(x, unpack, 5, "unpacking the snapshot (tar)", err);
    } else {
        remove_in_sandbox(x, inside);
    }
    return st;
}

/* Snapshot entries of the directory, sorted by name (qsort on the result's array). */
static int by_name(const void *a, const void *b)
{
    const Sbx__V1__Snapshot *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

sbx_status snapshot_list(const snapshot_ctx *x, sbx_result *res, sbx_error *err)
{
    char dir[4096];
    sbx_status st = check_store(x, err);
    if (st != SBX_OK)
        return st;
    principal_dir(x, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (d == NULL)
        return SBX_OK; /* none taken yet */
    int dfd = dirfd(d);
    for (struct dirent *e; st == SBX_OK && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 4 || strcmp(e->d_name + len - 4, ".tar") != 0)
            continue;
        struct stat sb;
        if (fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        char name[SNAPSHOT_NAME_MAX + 1];
        if (len - 4 > SNAPSHOT_NAME_MAX)
            continue;
        memcpy(name, e->d_name, len - 4);
        name[len - 4] = '\0';
        int64_t ms = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
        if (add_entry(res, name, (uint64_t)sb.st_size, ms) == NULL)
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    closedir(d);
    if (res->n_snapshots > 1)
        qsort(res->snapshots, res->n_snapshots, sizeof *res->snapshots, by_name);
    return st;
}

sbx_status snapshot_delete(const snapshot_ctx *x, const char *name, sbx_error *err)
{
    char path[4200];
    sbx_status st = snapshot_check_name("delete_snapshot.name", name, err);
    if (st != SBX_OK || (st = check_store(x, err)) != SBX_OK)
        return st;
    snapshot_path(x, name, path, sizeof path);
    if (unlink(path) != 0)
        return errno == ENOENT
                   ? sbx_error_set(err, SBX_E_GONE,
                                   "no snapshot named '%s' for principal '%s'; list them with "
                                   "sbx snapshot ls",
                                   name, x->subject)
                   : sbx_error_set(err, SBX_E_CONFIG, "cannot delete %s: %s", path,
                                   strerror(errno));
    return SBX_OK;
}
