/* fuzz_recording.c - libFuzzer harness for the Recording frame reader (core/recorder.c), which
 * `sbx replay` runs on files that may come from anywhere. Properties: never crashes or
 * over-reads; either every frame decodes (and re-encodes to a file that reads back to the same
 * number of records) or the error is INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming an offset. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/recorder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Records a fuzz input may hold: small, so a stream of tiny frames stays fast. */
#define FUZZ_MAX_RECORDS 256

static bool to_memfd(const uint8_t *data, size_t size, char *path, size_t path_size, int *fd)
{
    *fd = memfd_create("sbx-fuzz-recording", MFD_CLOEXEC);
    if (*fd < 0)
        return false;
    size_t off = 0;
    while (off < size) {
        ssize_t n = write(*fd, data + off, size - off);
        if (n <= 0)
            return false;
        off += (size_t)n;
    }
    snprintf(path, path_size, "/proc/self/fd/%d", *fd);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = -1;
    if (!to_memfd(data, size, path, sizeof(path), &fd)) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    sbx_recording **recs = NULL;
    size_t n = 0;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_status st = sbx_recordings_load(path, FUZZ_MAX_RECORDS, &recs, &n, &err);
    close(fd);
    if (st != SBX_OK) {
        FUZZ_REQUIRE(st == SBX_E_INVALID_ARGUMENT || st == SBX_E_RESOURCE_EXHAUSTED,
                     "unexpected status %d", (int)st);
        FUZZ_REQUIRE(recs == NULL && n == 0, "records returned with an error");
        FUZZ_REQUIRE(err.message[0] != '\0', "an error without a message");
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        fuzz_check_protobuf_c_round_trip(&recs[i]->base);
    sbx_recordings_free(recs, n);
    return 0;
}
