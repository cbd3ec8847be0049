/* file_ops.c - the file API's requests: chunked writes, reads and directory listings, each run
 * with the program's fsuid/fsgid on an fd that files.c resolved inside the sandbox root. This
 * file reads and writes file contents; it never resolves a path itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "serve_impl.h"

/* File operations run with the program's fsuid/fsgid: the file API can touch exactly what a
 * program could, and what it creates belongs to the program. */
static void as_program(uint32_t uid, uint32_t gid)
{
    uid_t u = uid ? (uid_t)uid : agent_cfg.prog_uid;
    gid_t g = gid ? (gid_t)gid : agent_cfg.prog_gid;
    if (u == agent_uid && !agent_cfg.shared_uid)
        u = agent_cfg.prog_uid;
    setfsgid(g);
    setfsuid(u);
}

static void as_agent(void)
{
    setfsuid(agent_uid);
    setfsgid(getgid());
}

static void write_fail(int ci, uint64_t id, int err, const char *path)
{
    client *cl = &agent_clients[ci];
    if (cl->wfd >= 0)
        close(cl->wfd);
    cl->wfd = -1;
    cl->wfailed_req = id;
    const char *why = files_last_error();
    send_error(ci, id, errno_code(err), "cannot write %s: %s%s%s", path, errno_words(err),
               *why ? "; " : "", why);
}

void handle_file_write(int ci, uint64_t id, sbx_v1_AgentFileWrite *x)
{
    client *cl = &agent_clients[ci];
    if (cl->wfailed_req == id)
        return; /* the rest of a write that already failed (the host sends without waiting) */
    if (x->offset == 0 || x->append) {
        if (cl->wfd >= 0)
            close(cl->wfd);
        mode_t mode = x->mode ? (mode_t)(x->mode & 07777) : 0644;
        /* append: continue an existing file (a chunked upload), never create or truncate it */
        int flags = x->append ? O_WRONLY | O_NONBLOCK : O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK;
        as_program(x->uid, x->gid);
        int fd = files_open(x->path, flags, mode & 0777, x->mkdirs);
        as_agent();
        if (fd < 0) {
            cl->wfd = -1;
            write_fail(ci, id, -fd, x->path);
            return;
        }
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            cl->wfd = -1;
            write_fail(ci, id, ENXIO, x->path); /* ENXIO's words: not a regular file */
            return;
        }
        if (x->append && (uint64_t)st.st_size != x->offset) {
            close(fd);
            cl->wfd = -1;
            cl->wfailed_req = id;
            send_error(ci, id, EC_INVALID_ARGUMENT,
                       "cannot append to %s at offset %llu: the file is %llu bytes long", x->path,
                       (unsigned long long)x->offset, (unsigned long long)st.st_size);
            return;
        }
        cl->wfd = fd;
        cl->wreq = id;
        cl->woffset = x->append ? x->offset : 0;
        snprintf(cl->wpath, sizeof cl->wpath, "%s", x->path);
    } else if (cl->wfd < 0 || cl->wreq != id || x->offset != cl->woffset) {
        send_error(ci, id, EC_INVALID_ARGUMENT,
                   "file agent_chunk at offset %llu does not continue a write in progress",
                   (unsigned long long)x->offset);
        cl->wfailed_req = id;
        return;
    }
    size_t done = 0;
    while (done < x->data.size) {
        ssize_t w =
            pwrite(cl->wfd, x->data.bytes + done, x->data.size - done, (off_t)(cl->woffset + done));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            write_fail(ci, id, errno, cl->wpath);
            return;
        }
        done += (size_t)w;
    }
    cl->woffset += done;
    if (x->last) {
        struct stat st;
        uint64_t size = fstat(cl->wfd, &st) == 0 ? (uint64_t)st.st_size : cl->woffset;
        close(cl->wfd);
        cl->wfd = -1;
        event_begin(id, sbx_v1_AgentEvent_written_tag);
        snprintf(agent_ev.body.written.path, sizeof agent_ev.body.written.path, "%s", cl->wpath);
        agent_ev.body.written.size = size;
        send_event(ci);
    }
}

void handle_file_read(int ci, uint64_t id, sbx_v1_AgentFileRead *x)
{
    as_program(0, 0);
    int fd = files_open(x->path, O_RDONLY | O_NONBLOCK, 0, false);
    as_agent();
    if (fd < 0) {
        const char *why = files_last_error();
        send_error(ci, id, errno_code(-fd), "cannot read %s: %s%s%s", x->path, errno_words(-fd),
                   *why ? "; " : "", why);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        send_error(ci, id, EC_INVALID_ARGUMENT, "cannot read %s: not a regular file", x->path);
        return;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t off = x->offset < size ? x->offset : size;
    uint64_t end = size;
    if (x->max_bytes && off + x->max_bytes < end)
        end = off + x->max_bytes;
    for (;;) {
        size_t want = end - off > AGENT_CHUNK ? AGENT_CHUNK : (size_t)(end - off);
        ssize_t r = want ? pread(fd, agent_ev.body.file_data.data.bytes, want, (off_t)off) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            send_error(ci, id, errno_code(e), "cannot read %s: %s", x->path, strerror(e));
            return;
        }
        /* event_begin must not clobber the data just read into ev */
        agent_ev.id = id;
        agent_ev.which_body = sbx_v1_AgentEvent_file_data_tag;
        snprintf(agent_ev.body.file_data.path, sizeof agent_ev.body.file_data.path, "%s", x->path);
        agent_ev.body.file_data.offset = off;
        agent_ev.body.file_data.data.size = (pb_size_t)r;
        agent_ev.body.file_data.size = size;
        agent_ev.body.file_data.mode = (uint32_t)(st.st_mode & 07777);
        off += (uint64_t)r;
        agent_ev.body.file_data.eof = (r == 0 || off >= end);
        send_event(ci);
        if (agent_ev.body.file_data.eof || agent_clients[ci].fd < 0)
            break;
    }
    close(fd);
}

void handle_file_list(int ci, uint64_t id, sbx_v1_AgentFileList *x)
{
    as_program(0, 0);
    int fd = files_open(x->path, O_RDONLY | O_DIRECTORY, 0, false);
    as_agent();
    if (fd < 0) {
        const char *why = files_last_error();
        send_error(ci, id, errno_code(-fd), "cannot list %s: %s%s%s", x->path, strerror(-fd),
                   *why ? "; " : "", why);
        return;
    }
    for (;;) {
        long n = syscall(SYS_getdents64, fd, agent_dents, sizeof agent_dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n && agent_clients[ci].fd >= 0;) {
            struct dirent64 *d = (struct dirent64 *)(void *)(agent_dents + off);
            off += d->d_reclen;
            if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
                continue;
            struct stat st;
            if (fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            event_begin(id, sbx_v1_AgentEvent_entry_tag);
            sbx_v1_AgentFileEntry *e = &agent_ev.body.entry;
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", d->d_name);
            e->kind = S_ISREG(st.st_mode)   ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_REGULAR
                      : S_ISDIR(st.st_mode) ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_DIRECTORY
                      : S_ISLNK(st.st_mode) ? sbx_v1_AgentFileKind_AGENT_FILE_KIND_SYMLINK
                                            : sbx_v1_AgentFileKind_AGENT_FILE_KIND_OTHER;
            e->mode = (uint32_t)(st.st_mode & 07777);
            e->size = (uint64_t)st.st_size;
            e->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
            send_event(ci);
        }
    }
    close(fd);
    event_begin(id, sbx_v1_AgentEvent_entry_tag);
    memset(&agent_ev.body.entry, 0, sizeof agent_ev.body.entry);
    agent_ev.body.entry.last = true;
    send_event(ci);
}
