/* docker_exec_ops.c - operations on a container through the Docker API alone, for containers sbx
 * did not create (attached): commands through the exec API, files through the archive API
 * (tar). No agent, nothing installed in the container, nothing left behind.
 *
 * Limits of this back end, stated rather than hidden: no stateful kernels (every run_code is a
 * fresh interpreter); cpu time and peak RSS are not reported; a deadline kills the exec's
 * process tree from the host (the API has no kill for execs), which needs sbx on the daemon's
 * host with the right to signal those processes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/docker/docker_provider.h"
#include "providers/docker/docker_tar.h"
#include "sbx/contract.h"

/* ---- output ------------------------------------------------------------------------------ */

void docker_output_init(docker_output *o, sbx_result *r, const sbx_exec_opts *opts)
{
    memset(o, 0, sizeof(*o));
    o->result = r;
    o->opts = opts;
    o->limit = opts != NULL && opts->output_limit_bytes > 0 ? opts->output_limit_bytes
                                                            : DOCKER_MAX_OUTPUT_BYTES;
    if (o->limit > DOCKER_MAX_OUTPUT_BYTES)
        o->limit = DOCKER_MAX_OUTPUT_BYTES;
}

void docker_output_add(void *arg, int stream, const uint8_t *data, size_t len)
{
    docker_output *o = arg;
    if (stream != 1 && stream != 2)
        return;
    ProtobufCBinaryData *field = stream == 1 ? &o->result->stdout : &o->result->stderr;
    uint64_t seen = o->offset[stream];
    size_t keep = 0;
    if (seen < o->limit)
        keep = (size_t)(o->limit - seen < len ? o->limit - seen : len);
    if (keep > 0) {
        sbx_append_bytes(field, data, keep);
        if (o->opts != NULL && o->opts->on_output != NULL)
            o->opts->on_output(o->opts->on_output_arg,
                               stream == 1 ? SBX__V1__STREAM__STREAM_STDOUT
                                           : SBX__V1__STREAM__STREAM_STDERR,
                               data, keep, seen);
    }
    if (keep < len) {
        o->over_limit = true;
        if (stream == 1)
            o->result->stdout_truncated = true;
        else
            o->result->stderr_truncated = true;
    }
    o->offset[stream] = seen + len;
}

static bool output_over_limit(void *arg)
{
    return ((docker_output *)arg)->over_limit;
}

/* ---- commands ------------------------------------------------------------------------------ */

sbx_status docker_exec_run(docker_sandbox *sb, const char *const *argv, const char *const *env,
                           const char *cwd, const uint8_t *stdin_data, size_t stdin_len,
                           const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_output out;
    docker_output_init(&out, result, o);
    char *abs_cwd = NULL;
    if (cwd != NULL && cwd[0] != '\0') {
        abs_cwd = docker_abs_path(sb, cwd);
        if (abs_cwd == NULL)
            return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    docker_exec_spec spec = {
        .argv = argv,
        .env = env,
        .cwd = abs_cwd != NULL ? abs_cwd : sb->workdir,
        .user = sb->p->exec_user,
        .stdin_data = stdin_data,
        .stdin_len = stdin_len,
        .attach_stdin = stdin_len > 0,
        .deadline_mono_ms = o != NULL ? o->deadline_mono_ms : 0,
        .cancel = o != NULL ? o->cancel : NULL,
        .on_output = docker_output_add,
        .on_output_arg = &out,
        .should_stop = output_over_limit,
    };
    docker_exec_result res;
    sbx_status st = docker_api_exec(&sb->p->api, sb->base.id, &spec, &res, err);
    free(abs_cwd);
    if (st != SBX_OK)
        return st;
    result->wall_us = (uint64_t)res.wall_us;
    result->exit_code = res.exit_code;
    switch (res.end) {
    case DOCKER_EXEC_DEADLINE:
        result->outcome = SBX__V1__OUTCOME__OUTCOME_TIMED_OUT;
        result->exit_code = 0;
        result->signal = 9;
        return sbx_error_set(err, SBX_E_TIMEOUT,
                             "the command in container %.64s ran past its deadline and was killed",
                             sb->base.id);
    case DOCKER_EXEC_STOPPED:
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OUTPUT_LIMIT;
        result->exit_code = 0;
        result->signal = 9;
        return SBX_OK;
    case DOCKER_EXEC_EXITED: break;
    }
    if (!res.exit_known) {
        return sbx_error_set(err, SBX_E_PROVISION,
                             "Docker daemon did not report the exit code of the command in "
                             "container %.64s",
                             sb->base.id);
    }
    /* The daemon reports a signal death as 128+signo (the shell convention containerd uses);
     * an exit(130) is indistinguishable, so report both as what the daemon said: a non-zero
     * exit code, plus the signal number when it is in the signal range. */
    if (res.exit_code == 0) {
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OK;
    } else if (res.exit_code > 128 && res.exit_code <= 128 + 64) {
        result->outcome = SBX__V1__OUTCOME__OUTCOME_SIGNALED;
        result->signal = res.exit_code - 128;
        result->exit_code = 0;
    } else {
        result->outcome = SBX__V1__OUTCOME__OUTCOME_NONZERO;
    }
    return SBX_OK;
}

/* ---- paths ----------------------------------------------------------------------------------- */

char *docker_abs_path(const docker_sandbox *sb, const char *path)
{
    if (path[0] == '/')
        return strdup(path);
    const char *wd = sb->workdir != NULL && sb->workdir[0] != '\0' ? sb->workdir : "/";
    size_t n = strlen(wd) + strlen(path) + 2;
    char *abs = malloc(n);
    if (abs != NULL)
        snprintf(abs, n, "%s%s%s", wd, wd[strlen(wd) - 1] == '/' ? "" : "/", path);
    return abs;
}

/* Splits "/a/b/c" into its parent "/a/b" and base "c" (malloc'd). false when there is no base
 * ("/" or ending in "/") or on ENOMEM. */
static bool split_path(const char *abs, char **parent, char **base)
{
    const char *slash = strrchr(abs, '/');
    if (slash == NULL || slash[1] == '\0')
        return false;
    *parent = slash == abs ? strdup("/") : strndup(abs, (size_t)(slash - abs));
    *base = strdup(slash + 1);
    if (*parent == NULL || *base == NULL) {
        free(*parent);
        free(*base);
        *parent = *base = NULL;
        return false;
    }
    return true;
}

static char *archive_path(const docker_sandbox *sb, const char *abs)
{
    char *cid = docker_url_escape(sb->base.id);
    char *esc = docker_url_escape(abs);
    char *path = NULL;
    if (cid != NULL && esc != NULL &&
        asprintf(&path, "/containers/%s/archive?path=%s", cid, esc) < 0)
        path = NULL;
    free(cid);
    free(esc);
    return path;
}

/* Maps an archive endpoint's error status to a status and message naming the path. 404 is
 * either "No such container" (GONE) or a missing path (INVALID_ARGUMENT). */
static sbx_status archive_error(const docker_sandbox *sb, const char *what, const char *abs,
                                const docker_response *r, sbx_error *err)
{
    char msg[512];
    docker_error_text(r, msg, sizeof(msg));
    if (r->status == 404 && strstr(msg, "No such container") != NULL)
        return sbx_error_set(err, SBX_E_GONE, "container %.64s no longer exists: %s", sb->base.id,
                             msg);
    if (r->status == 404)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s '%s': no such file or directory "
                             "in container %.64s (%s)",
                             what, abs, sb->base.id, msg);
    if (r->status == 403)
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "%s '%s': the container's file system refuses it: %s", what, abs, msg);
    if (r->status == 400)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "%s '%s': %s", what, abs, msg);
    return sbx_error_set(err, SBX_E_PROVISION, "%s '%s' in container %.64s: HTTP %ld: %s", what,
                         abs, sb->base.id, r->status, msg);
}

/* HEAD on the archive endpoint: 200 when the path exists (API v1.41 ContainerArchiveInfo). */
static sbx_status path_exists(docker_sandbox *sb, const char *abs, bool *exists, sbx_error *err)
{
    char *path = archive_path(sb, abs);
    if (path == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    docker_response r = {0};
    sbx_status st = docker_api_call(&sb->p->api, "HEAD", path, NULL, NULL, 0, 0, 0, &r, err);
    free(path);
    if (st == SBX_OK) {
        *exists = r.status == 200;
        if (r.status != 200 && r.status != 404)
            st = archive_error(sb, "stat", abs, &r, err);
        else if (r.status == 404) {
            /* HEAD has no body: tell a missing container from a missing path by inspecting. */
            long status = 0;
            st = docker_api_get_object(&sb->p->api, "/containers/", sb->base.id, "/json", &status,
                                       NULL, err);
            if (st == SBX_OK && status == 404)
                st =
                    sbx_error_set(err, SBX_E_GONE, "container %.64s no longer exists", sb->base.id);
        }
    }
    docker_response_clear(&r);
    return st;
}

/* ---- write ------------------------------------------------------------------------------------
 */

sbx_status docker_archive_write(docker_sandbox *sb, const Sbx__V1__WriteFile *op,
                                sbx_result *result, sbx_error *err)
{
    (void)result;
    if (op->path == NULL || op->path[0] == '\0')
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "write_file: path is empty");
    if (op->content.len > DOCKER_MAX_FILE_BYTES)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "write_file '%s': %zu bytes is over the %u-byte limit of one write",
                             op->path, op->content.len, DOCKER_MAX_FILE_BYTES);
    char *abs = docker_abs_path(sb, op->path);
    char *parent = NULL, *base = NULL;
    if (abs == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    if (!split_path(abs, &parent, &base) || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        sbx_status st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                      "write_file '%s': not a file path (ends with '/', '.' or "
                                      "'..')",
                                      op->path);
        free(abs);
        free(parent);
        free(base);
        return st;
    }
    /* The upload target must exist: find the deepest existing ancestor; the tar then carries
     * the missing directories (mkdirs) and the file, relative to it. */
    sbx_status st = SBX_OK;
    char *anchor = strdup(parent);
    bool exists = false;
    if (anchor == NULL)
        st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    while (anchor != NULL && st == SBX_OK) {
        st = path_exists(sb, anchor, &exists, err);
        if (st != SBX_OK || exists || strcmp(anchor, "/") == 0)
            break;
        if (!op->mkdirs) {
            st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                               "write_file '%s': directory '%s' does not exist in the container "
                               "(set mkdirs to create it)",
                               op->path, parent);
            break;
        }
        char *slash = strrchr(anchor, '/');
        if (slash == anchor)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    docker_tar_buf tar = {0};
    if (st == SBX_OK && anchor != NULL) {
        /* Entry names are relative to the anchor. */
        size_t skip = strcmp(anchor, "/") == 0 ? 1 : strlen(anchor) + 1;
        bool ok = true;
        /* Directories between anchor and parent, outermost first. */
        if (strlen(parent) >= skip) {
            char *rel = strdup(parent + skip);
            for (char *p = rel; ok && rel != NULL && p != NULL;) {
                char *next = strchr(p, '/');
                if (next != NULL)
                    *next = '\0';
                ok = docker_tar_add_dir(&tar, rel, 0755);
                if (next != NULL)
                    *next = '/';
                p = next != NULL ? next + 1 : NULL;
            }
            ok = ok && rel != NULL;
            free(rel);
        }
        unsigned mode = op->mode != 0 ? op->mode & 07777 : 0644;
        ok = ok && docker_tar_add_file(&tar, abs + skip, mode, op->content.data, op->content.len) &&
             docker_tar_finish(&tar);
        if (!ok)
            st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                               "write_file '%s': cannot build the archive (path over %d bytes or "
                               "out of memory)",
                               op->path, DOCKER_TAR_MAX_NAME);
    }
    if (st == SBX_OK && anchor != NULL) {
        char *path = archive_path(sb, anchor);
        docker_response r = {0};
        /* PUT /containers/{id}/archive?path=DIR extracts the tar into DIR (API v1.41
         * PutContainerArchive): 200 ok, 400 bad parameter, 403 read-only rootfs or volume,
         * 404 container or DIR missing. */
        st = path ? docker_api_call(&sb->p->api, "PUT", path, "application/x-tar", tar.data,
                                    tar.len, 0, 0, &r, err)
                  : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        if (st == SBX_OK && r.status != 200)
            st = archive_error(sb, "write_file", abs, &r, err);
        if (path != NULL)
            docker_response_clear(&r);
        free(path);
    }
    docker_tar_buf_free(&tar);
    free(anchor);
    free(abs);
    free(parent);
    free(base);
    return st;
}

/* ---- read ------------------------------------------------------------------------------------ */

typedef struct read_ctx {
    docker_tar_reader tar;
    const Sbx__V1__ReadFile *op;
    sbx_file *file;
    int entries; /* entries seen: the first is the file */
    docker_tar_kind kind;
    char link[DOCKER_TAR_MAX_NAME + 1];
    uint64_t pos; /* content offset of the next byte */
    uint64_t size;
    bool too_big;
} read_ctx;

static bool read_on_entry(void *arg, const docker_tar_entry *e)
{
    read_ctx *c = arg;
    if (++c->entries > 1)
        return false; /* a directory's children: not a file, stop reading */
    c->kind = e->kind;
    c->size = e->size;
    snprintf(c->link, sizeof(c->link), "%s", e->linkname);
    c->file->mode = e->mode;
    c->file->size = e->size;
    c->file->mtime_ms = e->mtime * 1000;
    c->file->kind = e->kind == DOCKER_TAR_REGULAR     ? SBX__V1__FILE_KIND__FILE_KIND_REGULAR
                    : e->kind == DOCKER_TAR_DIRECTORY ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
                    : e->kind == DOCKER_TAR_SYMLINK   ? SBX__V1__FILE_KIND__FILE_KIND_SYMLINK
                                                      : SBX__V1__FILE_KIND__FILE_KIND_OTHER;
    return e->kind == DOCKER_TAR_REGULAR;
}

static bool read_on_data(void *arg, const uint8_t *data, size_t len)
{
    read_ctx *c = arg;
    uint64_t start = c->op->offset;
    uint64_t want = c->op->max_bytes > 0 ? c->op->max_bytes : UINT64_MAX;
    uint64_t end = start + want < start ? UINT64_MAX : start + want;
    uint64_t lo = c->pos, hi = c->pos + len;
    c->pos = hi;
    if (hi <= start || lo >= end)
        return lo < end; /* stop once past the wanted range */
    uint64_t from = lo < start ? start : lo;
    uint64_t to = hi > end ? end : hi;
    if (c->file->content.len + (to - from) > DOCKER_MAX_FILE_BYTES) {
        c->too_big = true;
        return false;
    }
    sbx_append_bytes(&c->file->content, data + (from - lo), (size_t)(to - from));
    return true;
}

static bool read_stream(void *arg, const uint8_t *data, size_t len)
{
    read_ctx *c = arg;
    return docker_tar_reader_feed(&c->tar, data, len);
}

sbx_status docker_archive_read(docker_sandbox *sb, const Sbx__V1__ReadFile *op, sbx_result *result,
                               sbx_error *err)
{
    if (op->path == NULL || op->path[0] == '\0')
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "read_file: path is empty");
    char *abs = docker_abs_path(sb, op->path);
    if (abs == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    sbx_status st = SBX_OK;
    for (int hop = 0;; hop++) {
        sbx_file *f = sbx_file_new();
        char *path = archive_path(sb, abs);
        if (f == NULL || path == NULL) {
            free(path);
            sbx_message_free((ProtobufCMessage *)f);
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
            break;
        }
        read_ctx c = {.op = op, .file = f};
        c.tar.on_entry = read_on_entry;
        c.tar.on_data = read_on_data;
        c.tar.arg = &c;
        docker_tar_reader_init(&c.tar);
        docker_response r = {0};
        /* GET /containers/{id}/archive?path=P streams a tar of P (API v1.41 ContainerArchive);
         * we stop reading once past the wanted range. */
        sbx_error e2;
        sbx_error_clear(&e2);
        st = docker_api_get_stream(&sb->p->api, path, read_stream, &c, 0, &r, &e2);
        free(path);
        if (st != SBX_OK && c.tar.stopped && !c.too_big)
            st = SBX_OK; /* we stopped reading on purpose (past the range, or not a file) */
        if (c.too_big)
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "read_file '%s': more than %u bytes requested; read it in parts "
                               "with offset and max_bytes",
                               op->path, DOCKER_MAX_FILE_BYTES);
        else if (c.tar.error[0] != '\0')
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "read_file '%s': malformed archive from the daemon: %s", op->path,
                               c.tar.error);
        else if (st != SBX_OK) {
            if (err != NULL)
                *err = e2;
            st = e2.code;
        } else if (r.status != 200)
            st = archive_error(sb, "read_file", abs, &r, err);
        else if (c.entries == 0)
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "read_file '%s': the daemon sent an empty "
                               "archive",
                               op->path);
        docker_response_clear(&r);
        docker_tar_reader_free(&c.tar);
        if (st == SBX_OK && c.kind == DOCKER_TAR_SYMLINK) {
            sbx_message_free((ProtobufCMessage *)f);
            if (hop >= DOCKER_MAX_SYMLINK_HOPS) {
                st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                   "read_file '%s': more than %d levels of symbolic links",
                                   op->path, DOCKER_MAX_SYMLINK_HOPS);
                break;
            }
            /* Resolve the link inside the container's own namespace of paths. */
            char *next;
            if (c.link[0] == '/') {
                next = strdup(c.link);
            } else {
                char *parent = NULL, *base = NULL;
                next = NULL;
                if (split_path(abs, &parent, &base) &&
                    asprintf(&next, "%s/%s", strcmp(parent, "/") == 0 ? "" : parent, c.link) < 0)
                    next = NULL;
                free(parent);
                free(base);
            }
            free(abs);
            abs = next;
            if (abs == NULL) {
                st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
                break;
            }
            continue;
        }
        if (st == SBX_OK && c.kind != DOCKER_TAR_REGULAR) {
            st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                               "read_file '%s': not a regular file (%s)", op->path,
                               c.kind == DOCKER_TAR_DIRECTORY ? "a directory; use list_files"
                                                              : "a device, fifo or socket");
        }
        if (st == SBX_OK) {
            sbx_set_string(&f->path, op->path);
            sbx_result_add_file(result, f);
        } else {
            sbx_message_free((ProtobufCMessage *)f);
        }
        break;
    }
    free(abs);
    return st;
}

/* ---- list --------------------------------------------------------------------------------------
 */

typedef struct list_ctx {
    docker_tar_reader tar;
    sbx_result *result;
    const char *dir;                    /* the directory asked for (as the caller wrote it) */
    char root[DOCKER_TAR_MAX_NAME + 2]; /* name of the first entry (the dir itself) + '/' */
    int entries;
    bool root_is_dir;
    uint64_t bytes_seen;
    bool too_big;
} list_ctx;

static bool list_on_entry(void *arg, const docker_tar_entry *e)
{
    list_ctx *c = arg;
    if (c->entries++ == 0) {
        c->root_is_dir = e->kind == DOCKER_TAR_DIRECTORY;
        size_t n = strlen(e->name);
        while (n > 0 && e->name[n - 1] == '/')
            n--;
        snprintf(c->root, sizeof(c->root), "%.*s/", (int)n, e->name);
        return c->root_is_dir;
    }
    if (c->entries > DOCKER_MAX_LIST_ENTRIES) {
        c->too_big = true;
        return false;
    }
    size_t rl = strlen(c->root);
    if (strncmp(e->name, c->root, rl) != 0)
        return true;
    const char *rest = e->name + rl;
    size_t n = strlen(rest);
    while (n > 0 && rest[n - 1] == '/')
        n--;
    if (n == 0 || memchr(rest, '/', n) != NULL)
        return true; /* deeper than one level */
    sbx_file *f = sbx_file_new();
    if (f == NULL)
        return false;
    char *name = strndup(rest, n);
    sbx_set_string(&f->path, name);
    free(name);
    f->mode = e->mode;
    f->size = e->size;
    f->mtime_ms = e->mtime * 1000;
    f->kind = e->kind == DOCKER_TAR_REGULAR     ? SBX__V1__FILE_KIND__FILE_KIND_REGULAR
              : e->kind == DOCKER_TAR_DIRECTORY ? SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY
              : e->kind == DOCKER_TAR_SYMLINK   ? SBX__V1__FILE_KIND__FILE_KIND_SYMLINK
                                                : SBX__V1__FILE_KIND__FILE_KIND_OTHER;
    sbx_result_add_file(c->result, f);
    return true;
}

static bool list_stream(void *arg, const uint8_t *data, size_t len)
{
    list_ctx *c = arg;
    c->bytes_seen += len;
    if (c->bytes_seen > DOCKER_MAX_LIST_ARCHIVE_BYTES) {
        c->too_big = true;
        return false;
    }
    return docker_tar_reader_feed(&c->tar, data, len);
}

sbx_status docker_archive_list(docker_sandbox *sb, const Sbx__V1__ListFiles *op, sbx_result *result,
                               sbx_error *err)
{
    const char *want = op->path != NULL && op->path[0] != '\0' ? op->path : ".";
    char *abs = docker_abs_path(sb, want);
    if (abs == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    char *path = archive_path(sb, abs);
    list_ctx c = {.result = result, .dir = want};
    c.tar.on_entry = list_on_entry;
    c.tar.arg = &c;
    docker_tar_reader_init(&c.tar);
    docker_response r = {0};
    sbx_error e2;
    sbx_error_clear(&e2);
    sbx_status st = path ? docker_api_get_stream(&sb->p->api, path, list_stream, &c, 0, &r, &e2)
                         : sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    free(path);
    if (st != SBX_OK && c.tar.stopped && !c.too_big)
        st = SBX_OK; /* stopped on purpose: the path is not a directory */
    if (path == NULL)
        ;
    else if (c.too_big)
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                           "list_files '%s': the directory tree is too large to list through the "
                           "archive API (over %llu bytes or %d entries)",
                           want, (unsigned long long)DOCKER_MAX_LIST_ARCHIVE_BYTES,
                           DOCKER_MAX_LIST_ENTRIES);
    else if (c.tar.error[0] != '\0')
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "list_files '%s': malformed archive from the daemon: %s", want,
                           c.tar.error);
    else if (st != SBX_OK) {
        if (err != NULL)
            *err = e2;
        st = e2.code;
    } else if (r.status != 200)
        st = archive_error(sb, "list_files", abs, &r, err);
    else if (!c.root_is_dir)
        st = sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "list_files '%s': not a directory", want);
    if (path != NULL)
        docker_response_clear(&r);
    docker_tar_reader_free(&c.tar);
    free(abs);
    return st;
}
