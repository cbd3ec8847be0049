/* recorder.c - the Recording file format (include/sbx/recorder.h): the appender brokers use and
 * the bounded reader. Replay, which runs recordings through a broker, is client/replay.c: this
 * file sits below the brokers and must not call one.
 *
 * The reader treats the file as untrusted bytes: every length is checked against
 * SBX_RECORDING_FRAME_MAX and the bytes left in the file before anything is allocated.
 * This file must not print.
 */
#include "sbx/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sbx_recorder {
    int fd;
    pthread_mutex_t mu; /* one frame per write(); the lock keeps our own threads' order */
    /* rotation (guarded by mu) */
    char *path;
    uint64_t size, max_bytes;
    unsigned keep;
};

static int open_recording(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
}

sbx_status sbx_recorder_open_rotating(const char *path, uint64_t max_bytes, unsigned keep,
                                      sbx_recorder **out, sbx_error *err)
{
    *out = NULL;
    int fd = open_recording(path);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_CONFIG, "cannot open recording file '%s': %s", path,
                             strerror(errno));
    sbx_recorder *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->path = strdup(path)) == NULL) {
        free(r);
        close(fd);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory opening a recorder");
    }
    struct stat sb;
    r->size = fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    r->fd = fd;
    r->max_bytes = max_bytes;
    r->keep = keep ? keep : 1;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return SBX_OK;
}

sbx_status sbx_recorder_open(const char *path, sbx_recorder **out, sbx_error *err)
{
    return sbx_recorder_open_rotating(path, 0, 0, out, err);
}

/* Under r->mu: path.(keep-1) -> path.keep, ..., path -> path.1, then a new, empty path. When a
 * rename or the new file fails, frames keep going to the current file: a recording loses
 * nothing to a rotation problem (the size bound is then exceeded until one succeeds). */
static void rotate(sbx_recorder *r)
{
    size_t n = strlen(r->path) + 16;
    char *from = malloc(n), *to = malloc(n);
    if (from == NULL || to == NULL)
        goto out;
    for (unsigned i = r->keep; i > 1; i--) {
        snprintf(from, n, "%s.%u", r->path, i - 1);
        snprintf(to, n, "%s.%u", r->path, i);
        if (rename(from, to) != 0 && errno != ENOENT)
            goto out;
    }
    snprintf(to, n, "%s.1", r->path);
    if (rename(r->path, to) != 0)
        goto out;
    int fd = open_recording(r->path);
    if (fd < 0)
        goto out;
    close(r->fd);
    r->fd = fd;
    r->size = 0;
out:
    free(from);
    free(to);
}

sbx_status sbx_recorder_append(sbx_recorder *r, const sbx_recording *rec, sbx_error *err)
{
    if (r == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_recorder_append: no recorder");
    size_t len = protobuf_c_message_get_packed_size(&rec->base);
    if (len == 0 || len > SBX_RECORDING_FRAME_MAX)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "recording of %zu bytes is outside 1..%u; not recorded", len,
                             SBX_RECORDING_FRAME_MAX);
    uint8_t *buf = malloc(len + 4);
    if (buf == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory recording");
    buf[0] = (uint8_t)(len >> 24);
    buf[1] = (uint8_t)(len >> 16);
    buf[2] = (uint8_t)(len >> 8);
    buf[3] = (uint8_t)len;
    protobuf_c_message_pack(&rec->base, buf + 4);
    pthread_mutex_lock(&r->mu);
    if (r->max_bytes > 0 && r->size > 0 && r->size + len + 4 > r->max_bytes)
        rotate(r);
    size_t off = 0;
    sbx_status st = SBX_OK;
    while (off < len + 4) {
        ssize_t n = write(r->fd, buf + off, len + 4 - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            st = sbx_error_set(err, SBX_E_INTERNAL, "writing a recording frame failed: %s",
                               strerror(errno));
            break;
        }
        off += (size_t)n;
    }
    r->size += off;
    pthread_mutex_unlock(&r->mu);
    free(buf);
    return st;
}

void sbx_recorder_close(sbx_recorder *r)
{
    if (r == NULL)
        return;
    close(r->fd);
    pthread_mutex_destroy(&r->mu);
    free(r->path);
    free(r);
}

/* ---- reading ------------------------------------------------------------------------------ */

struct sbx_recording_reader {
    FILE *f;
    char *path;
    uint64_t offset;
    uint64_t size;
};

sbx_status sbx_recording_reader_open(const char *path, sbx_recording_reader **out, sbx_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rbe");
    if (f == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "cannot open recording '%s': %s", path,
                             strerror(errno));
    struct stat st;
    sbx_recording_reader *r = calloc(1, sizeof(*r));
    if (r == NULL || fstat(fileno(f), &st) != 0 || (r->path = strdup(path)) == NULL) {
        free(r);
        fclose(f);
        return sbx_error_set(err, SBX_E_INTERNAL, "cannot read recording '%s'", path);
    }
    r->f = f;
    r->size = (uint64_t)st.st_size;
    *out = r;
    return SBX_OK;
}

sbx_status sbx_recording_reader_next(sbx_recording_reader *r, sbx_recording **out, sbx_error *err)
{
    *out = NULL;
    if (r == NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "sbx_recording_reader_next: no reader");
    uint8_t hdr[4];
    size_t got = fread(hdr, 1, sizeof(hdr), r->f);
    if (got == 0 && feof(r->f))
        return SBX_OK;
    if (got != sizeof(hdr))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "recording '%s': truncated frame header at offset %" PRIu64, r->path,
                             r->offset);
    uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (len == 0 || len > SBX_RECORDING_FRAME_MAX || r->offset + 4 + len > r->size)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "recording '%s': frame at offset %" PRIu64 " claims %u bytes (limit "
                             "%u, %" PRIu64 " left in the file)",
                             r->path, r->offset, len, SBX_RECORDING_FRAME_MAX,
                             r->size - r->offset - 4);
    uint8_t *buf = malloc(len);
    if (buf == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory reading a recording");
    if (fread(buf, 1, len, r->f) != len) {
        free(buf);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "recording '%s': truncated frame at offset %" PRIu64, r->path,
                             r->offset);
    }
    /* The strict decoder: a frame protobuf-c would accept but could not re-encode (field 0,
     * a oneof member twice, bad UTF-8) is refused here rather than failing later on copy. */
    sbx_recording *rec = NULL;
    sbx_error derr;
    sbx_status st = sbx_message_decode(&sbx__v1__recording__descriptor, buf, len,
                                       SBX_RECORDING_FRAME_MAX, (ProtobufCMessage **)&rec, &derr);
    free(buf);
    if (st != SBX_OK)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "recording '%s': frame at offset %" PRIu64 " is not a valid "
                             "sbx.v1.Recording (%s)",
                             r->path, r->offset, derr.message);
    r->offset += 4 + len;
    *out = rec;
    return SBX_OK;
}

void sbx_recording_reader_close(sbx_recording_reader *r)
{
    if (r == NULL)
        return;
    fclose(r->f);
    free(r->path);
    free(r);
}

void sbx_recordings_free(sbx_recording **recs, size_t n)
{
    for (size_t i = 0; recs != NULL && i < n; i++)
        sbx_message_free(&recs[i]->base);
    free(recs);
}

sbx_status sbx_recordings_load(const char *path, size_t max_records, sbx_recording ***out,
                               size_t *n, sbx_error *err)
{
    *out = NULL;
    *n = 0;
    sbx_recording_reader *r = NULL;
    sbx_status st = sbx_recording_reader_open(path, &r, err);
    if (st != SBX_OK)
        return st;
    sbx_recording **recs = NULL;
    size_t count = 0;
    for (;;) {
        sbx_recording *rec = NULL;
        st = sbx_recording_reader_next(r, &rec, err);
        if (st != SBX_OK || rec == NULL)
            break;
        if (count >= max_records) {
            sbx_message_free(&rec->base);
            st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                               "recording '%s' holds more than %zu records", path, max_records);
            break;
        }
        sbx_recording **grown = realloc(recs, (count + 1) * sizeof(*grown));
        if (grown == NULL) {
            sbx_message_free(&rec->base);
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory reading a recording");
            break;
        }
        recs = grown;
        recs[count++] = rec;
    }
    sbx_recording_reader_close(r);
    if (st != SBX_OK) {
        sbx_recordings_free(recs, count);
        return st;
    }
    *out = recs;
    *n = count;
    return SBX_OK;
}

sbx_status sbx_recordings_save(const char *path, sbx_recording *const *recs, size_t n,
                               sbx_error *err)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "path '%s' is too long", path);
    unlink(tmp);
    sbx_recorder *w = NULL;
    sbx_status st = sbx_recorder_open(tmp, &w, err);
    for (size_t i = 0; st == SBX_OK && i < n; i++)
        st = sbx_recorder_append(w, recs[i], err);
    sbx_recorder_close(w);
    if (st == SBX_OK && rename(tmp, path) != 0)
        st = sbx_error_set(err, SBX_E_INTERNAL, "cannot rename '%s' to '%s': %s", tmp, path,
                           strerror(errno));
    if (st != SBX_OK)
        unlink(tmp);
    return st;
}
