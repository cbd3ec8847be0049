/* docker_tar.c - tar writer and bounded streaming tar reader for the Docker archive API (see
 * docker_tar.h). Formats: POSIX ustar headers (IEEE 1003.1-1988) plus pax extended headers
 * ('x', for long paths and big sizes) and GNU long names ('L', 'K'), which is what Docker's
 * archive package writes. Nothing here touches the file system.
 */
#include "providers/docker/docker_tar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- writer -------------------------------------------------------------------------------- */

static bool buf_reserve(docker_tar_buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        if (cap > SIZE_MAX / 2)
            return false;
        cap *= 2;
    }
    uint8_t *grown = realloc(b->data, cap);
    if (grown == NULL)
        return false;
    b->data = grown;
    b->cap = cap;
    return true;
}

static void octal(char *field, size_t width, uint64_t v)
{
    /* width includes the terminating NUL */
    snprintf(field, width, "%0*llo", (int)(width - 1), (unsigned long long)v);
}

static void checksum(uint8_t *h)
{
    unsigned sum = 0;
    memset(h + 148, ' ', 8);
    for (size_t i = 0; i < DOCKER_TAR_BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static bool add_header(docker_tar_buf *b, const char *name, char type, unsigned mode, uint64_t size)
{
    if (!buf_reserve(b, DOCKER_TAR_BLOCK))
        return false;
    uint8_t *h = b->data + b->len;
    memset(h, 0, DOCKER_TAR_BLOCK);
    memcpy(h, name, strnlen(name, 100));
    octal((char *)h + 100, 8, mode & 07777);
    octal((char *)h + 108, 8, 0);
    octal((char *)h + 116, 8, 0);
    octal((char *)h + 124, 12, size);
    octal((char *)h + 136, 12, (uint64_t)time(NULL));
    h[156] = (uint8_t)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    checksum(h);
    b->len += DOCKER_TAR_BLOCK;
    return true;
}

static bool add_data(docker_tar_buf *b, const uint8_t *data, size_t len)
{
    size_t padded = (len + DOCKER_TAR_BLOCK - 1) / DOCKER_TAR_BLOCK * DOCKER_TAR_BLOCK;
    if (!buf_reserve(b, padded))
        return false;
    if (len > 0)
        memcpy(b->data + b->len, data, len);
    memset(b->data + b->len + len, 0, padded - len);
    b->len += padded;
    return true;
}

/* A name that does not fit the 100-byte field goes into a pax 'x' header as "path=". */
static bool add_entry(docker_tar_buf *b, const char *name, char type, unsigned mode,
                      const uint8_t *data, size_t len)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > DOCKER_TAR_MAX_NAME)
        return false;
    if (nl >= 100) {
        /* A pax record is "<len> path=<name>\n" where <len> counts itself. */
        char rec[DOCKER_TAR_MAX_NAME + 32];
        size_t body = strlen(" path=\n") + nl;
        size_t digits = 1, total = body + 1;
        while ((size_t)snprintf(NULL, 0, "%zu", total) != digits) {
            digits = (size_t)snprintf(NULL, 0, "%zu", total);
            total = body + digits;
        }
        int rl = snprintf(rec, sizeof(rec), "%zu path=%s\n", body + digits, name);
        if (rl < 0 || (size_t)rl != body + digits)
            return false;
        if (!add_header(b, "././@PaxHeader", 'x', 0644, (uint64_t)rl) ||
            !add_data(b, (const uint8_t *)rec, (size_t)rl))
            return false;
    }
    return add_header(b, name, type, mode, len) && add_data(b, data, len);
}

bool docker_tar_add_dir(docker_tar_buf *b, const char *name, unsigned mode)
{
    return add_entry(b, name, '5', mode, NULL, 0);
}

bool docker_tar_add_file(docker_tar_buf *b, const char *name, unsigned mode, const uint8_t *data,
                         size_t len)
{
    return add_entry(b, name, '0', mode, data, len);
}

bool docker_tar_finish(docker_tar_buf *b)
{
    if (!buf_reserve(b, 2 * DOCKER_TAR_BLOCK))
        return false;
    memset(b->data + b->len, 0, 2 * DOCKER_TAR_BLOCK);
    b->len += 2 * DOCKER_TAR_BLOCK;
    return true;
}

void docker_tar_buf_free(docker_tar_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    memset(b, 0, sizeof(*b));
}

/* ---- reader -------------------------------------------------------------------------------- */

void docker_tar_reader_init(docker_tar_reader *r)
{
    docker_tar_reader keep = *r; /* callbacks set by the caller */
    memset(r, 0, sizeof(*r));
    r->on_entry = keep.on_entry;
    r->on_data = keep.on_data;
    r->arg = keep.arg;
}

void docker_tar_reader_free(docker_tar_reader *r)
{
    if (r == NULL)
        return;
    free(r->special_buf);
    r->special_buf = NULL;
}

static bool fail(docker_tar_reader *r, const char *why)
{
    snprintf(r->error, sizeof(r->error), "%s", why);
    return false;
}

/* Parses a numeric header field: NUL/space terminated octal, or base-256 (high bit of the first
 * byte set, GNU extension for values over 8 GiB). */
static bool parse_number(const uint8_t *f, size_t width, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return false; /* negative or too large */
        for (size_t i = 1; i < width; i++) {
            if (v >> 56)
                return false;
            v = v << 8 | f[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < width && f[i] == ' ')
        i++;
    bool digits = false;
    for (; i < width && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = v * 8 + (uint64_t)(f[i] - '0');
        digits = true;
    }
    for (; i < width; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return false;
    *out = digits ? v : 0;
    return true;
}

static bool header_checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (!parse_number(h + 148, 8, &want))
        return false;
    unsigned sum = 0;
    for (size_t i = 0; i < DOCKER_TAR_BLOCK; i++)
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    return sum == want;
}

/* Parses pax records "<len> key=value\n"; keeps path, linkpath and size. */
static bool parse_pax(docker_tar_reader *r, const char *p, size_t len)
{
    size_t off = 0;
    while (off < len) {
        size_t rl = 0, i = off;
        while (i < len && p[i] >= '0' && p[i] <= '9' && i - off < 8)
            rl = rl * 10 + (size_t)(p[i++] - '0');
        if (i == off || i >= len || p[i] != ' ' || rl == 0 || rl > len - off ||
            p[off + rl - 1] != '\n')
            return fail(r, "malformed pax record");
        const char *kv = p + i + 1;
        size_t kvl = off + rl - 1 - (i + 1);
        const char *eq = memchr(kv, '=', kvl);
        if (eq == NULL)
            return fail(r, "pax record without '='");
        size_t kl = (size_t)(eq - kv), vl = kvl - kl - 1;
        const char *v = eq + 1;
        if ((kl == 4 && memcmp(kv, "path", 4) == 0) ||
            (kl == 8 && memcmp(kv, "linkpath", 8) == 0)) {
            if (vl > DOCKER_TAR_MAX_NAME || memchr(v, '\0', vl) != NULL)
                return fail(r, "pax path too long or with NUL");
            char *dst = kl == 4 ? r->long_name : r->long_link;
            memcpy(dst, v, vl);
            dst[vl] = '\0';
        } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t s = 0;
            if (vl == 0 || vl > 19)
                return fail(r, "bad pax size");
            for (size_t k = 0; k < vl; k++) {
                if (v[k] < '0' || v[k] > '9')
                    return fail(r, "bad pax size");
                s = s * 10 + (uint64_t)(v[k] - '0');
            }
            r->have_size_override = true;
            r->size_override = s;
        }
        off += rl;
    }
    return true;
}

static bool finish_special(docker_tar_reader *r)
{
    bool ok = true;
    if (r->special == 'x') {
        ok = parse_pax(r, r->special_buf, r->special_len);
    } else {
        /* GNU 'L'/'K': the name, NUL terminated within the data. */
        size_t n = strnlen(r->special_buf, r->special_len);
        if (n > DOCKER_TAR_MAX_NAME)
            return fail(r, "GNU long name too long");
        char *dst = r->special == 'L' ? r->long_name : r->long_link;
        memcpy(dst, r->special_buf, n);
        dst[n] = '\0';
    }
    r->special = 0;
    r->special_len = 0;
    return ok;
}

static bool handle_header(docker_tar_reader *r)
{
    const uint8_t *h = r->block;
    bool zero = true;
    for (size_t i = 0; i < DOCKER_TAR_BLOCK && zero; i++)
        zero = h[i] == 0;
    if (zero) {
        if (++r->zero_blocks >= 2)
            r->done = true;
        return true;
    }
    r->zero_blocks = 0;
    if (!header_checksum_ok(h))
        return fail(r, "tar header checksum mismatch");
    uint64_t size, mode, mtime;
    if (!parse_number(h + 124, 12, &size) || !parse_number(h + 100, 8, &mode) ||
        !parse_number(h + 136, 12, &mtime))
        return fail(r, "malformed tar header number");
    char type = (char)h[156];
    if (type == 'x' || type == 'L' || type == 'K') {
        size_t limit = type == 'x' ? DOCKER_TAR_MAX_PAX : DOCKER_TAR_MAX_NAME + 1;
        if (size > limit)
            return fail(r, "tar extended header too large");
        r->special = type; /* NOLINT(bugprone-signed-char-misuse,cert-str34-c): 'x' 'L' 'K' */
        r->special_len = 0;
        if (r->special_cap < size + 1) {
            char *grown = realloc(r->special_buf, size + 1);
            if (grown == NULL)
                return fail(r, "out of memory");
            r->special_buf = grown;
            r->special_cap = size + 1;
        }
        r->data_left = size;
        r->pad_left = (DOCKER_TAR_BLOCK - size % DOCKER_TAR_BLOCK) % DOCKER_TAR_BLOCK;
        if (size == 0)
            return finish_special(r);
        return true;
    }
    if (type == 'g')
        return fail(r, "pax global headers are not supported");
    if (r->have_size_override) {
        size = r->size_override;
        r->have_size_override = false;
    }
    char name[DOCKER_TAR_MAX_NAME + 1];
    if (r->long_name[0] != '\0') {
        snprintf(name, sizeof(name), "%s", r->long_name);
        r->long_name[0] = '\0';
    } else {
        char base[101], prefix[156];
        memcpy(base, h, 100);
        base[100] = '\0';
        memcpy(prefix, h + 345, 155);
        prefix[155] = '\0';
        if (memcmp(h + 257, "ustar", 5) == 0 && prefix[0] != '\0')
            snprintf(name, sizeof(name), "%s/%s", prefix, base);
        else
            snprintf(name, sizeof(name), "%s", base);
    }
    char link[DOCKER_TAR_MAX_NAME + 1];
    if (r->long_link[0] != '\0') {
        snprintf(link, sizeof(link), "%s", r->long_link);
        r->long_link[0] = '\0';
    } else {
        memcpy(link, h + 157, 100);
        link[100] = '\0';
    }
    docker_tar_entry e = {.name = name,
                          .linkname = link,
                          .mode = (unsigned)(mode & 07777),
                          .size = size,
                          .mtime = (int64_t)mtime};
    switch (type) {
    case '0':
    case '\0':
    case '7': e.kind = DOCKER_TAR_REGULAR; break;
    case '5': e.kind = DOCKER_TAR_DIRECTORY; break;
    case '2': e.kind = DOCKER_TAR_SYMLINK; break;
    default: e.kind = DOCKER_TAR_OTHER; break;
    }
    /* Links and directories carry no data whatever their size field says (POSIX). */
    if (type == '1' || type == '2' || type == '5' || type == '3' || type == '4' || type == '6')
        e.size = size = 0;
    r->data_left = size;
    r->pad_left = (DOCKER_TAR_BLOCK - size % DOCKER_TAR_BLOCK) % DOCKER_TAR_BLOCK;
    if (r->on_entry != NULL && !r->on_entry(r->arg, &e)) {
        r->stopped = true;
        return false;
    }
    return true;
}

bool docker_tar_reader_feed(docker_tar_reader *r, const uint8_t *data, size_t len)
{
    if (r->stopped || r->error[0] != '\0')
        return false;
    while (len > 0) {
        if (r->done)
            return true; /* trailing bytes after the end marker (block padding) are ignored */
        if (r->data_left > 0) {
            size_t take = r->data_left < len ? (size_t)r->data_left : len;
            if (r->special) {
                memcpy(r->special_buf + r->special_len, data, take);
                r->special_len += take;
            } else if (r->on_data != NULL && !r->on_data(r->arg, data, take)) {
                r->stopped = true;
                return false;
            }
            r->data_left -= take;
            data += take;
            len -= take;
            if (r->data_left == 0 && r->special && !finish_special(r))
                return false;
            continue;
        }
        if (r->pad_left > 0) {
            size_t take = r->pad_left < len ? (size_t)r->pad_left : len;
            r->pad_left -= take;
            data += take;
            len -= take;
            continue;
        }
        size_t take = DOCKER_TAR_BLOCK - r->block_got;
        if (take > len)
            take = len;
        memcpy(r->block + r->block_got, data, take);
        r->block_got += take;
        data += take;
        len -= take;
        if (r->block_got == DOCKER_TAR_BLOCK) {
            r->block_got = 0;
            if (!handle_header(r))
                return false;
        }
    }
    return true;
}
