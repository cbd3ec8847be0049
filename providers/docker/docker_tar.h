/* docker_tar.h - the tar (ustar + pax) writer and the bounded streaming tar reader behind the
 * Docker archive API (GET/PUT /containers/{id}/archive). Private to providers/docker/.
 *
 * The reader treats the archive as hostile: headers are checksummed, sizes parsed strictly
 * (octal or base-256), names bounded, pax records bounded and parsed by their own lengths.
 * It must not touch the file system: entries are handed to callbacks.
 */
#ifndef SBX_DOCKER_TAR_H
#define SBX_DOCKER_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DOCKER_TAR_BLOCK 512
/* Longest entry name we accept (PATH_MAX on Linux). */
#define DOCKER_TAR_MAX_NAME 4096
/* Largest pax extended header we parse: a few records (path, linkpath, size, mtime) fit in far
 * less; xattrs-heavy archives beyond this are refused rather than buffered. */
#define DOCKER_TAR_MAX_PAX 65536

/* ---- writer -------------------------------------------------------------------------------- */

typedef struct docker_tar_buf {
    uint8_t *data;
    size_t len, cap;
} docker_tar_buf;

/* Appends a directory entry (name without trailing slash is fine). false on ENOMEM or a name
 * longer than DOCKER_TAR_MAX_NAME. */
bool docker_tar_add_dir(docker_tar_buf *b, const char *name, unsigned mode);
/* Appends a regular file entry with its content. */
bool docker_tar_add_file(docker_tar_buf *b, const char *name, unsigned mode, const uint8_t *data,
                         size_t len);
/* Appends the two zero blocks that end an archive. */
bool docker_tar_finish(docker_tar_buf *b);
void docker_tar_buf_free(docker_tar_buf *b);

/* ---- reader -------------------------------------------------------------------------------- */

typedef enum docker_tar_kind {
    DOCKER_TAR_REGULAR = 1,
    DOCKER_TAR_DIRECTORY = 2,
    DOCKER_TAR_SYMLINK = 3,
    DOCKER_TAR_OTHER = 4,
} docker_tar_kind;

typedef struct docker_tar_entry {
    const char *name;     /* as in the archive (relative, may end with '/') */
    const char *linkname; /* symlinks and hard links; "" otherwise */
    docker_tar_kind kind;
    unsigned mode; /* permission bits */
    uint64_t size; /* content bytes that follow */
    int64_t mtime; /* unix seconds */
} docker_tar_entry;

/* on_entry is called per entry before its data; on_data with pieces of its content. Either
 * returns false to stop (the reader then reports stopped, not an error). */
typedef struct docker_tar_reader {
    bool (*on_entry)(void *arg, const docker_tar_entry *e);
    bool (*on_data)(void *arg, const uint8_t *data, size_t len);
    void *arg;

    /* private state */
    uint8_t block[DOCKER_TAR_BLOCK];
    size_t block_got;
    uint64_t data_left; /* content bytes of the current entry still to come */
    uint64_t pad_left;  /* padding to the next block boundary */
    int special;        /* 0, 'x' (pax) or 'L'/'K' (GNU long name/link) being collected */
    char *special_buf;
    size_t special_len, special_cap;
    char long_name[DOCKER_TAR_MAX_NAME + 1];
    char long_link[DOCKER_TAR_MAX_NAME + 1];
    bool have_size_override;
    uint64_t size_override;
    int zero_blocks;
    bool done;    /* end-of-archive seen */
    bool stopped; /* a callback returned false */
    char error[256];
} docker_tar_reader;

void docker_tar_reader_init(docker_tar_reader *r);
void docker_tar_reader_free(docker_tar_reader *r);
/* Feeds bytes in any slicing. Returns false on a malformed archive (r->error says why) or when
 * a callback stopped it (r->stopped). */
bool docker_tar_reader_feed(docker_tar_reader *r, const uint8_t *data, size_t len);

#endif
