/* fuzz_recordings_load.c - libFuzzer harness for sbx_recordings_load(), the reader of recording
 * files (`sbx replay FILE`: a file someone handed over is untrusted bytes). The input is put in
 * a memfd and read through its /proc path. Properties: never crashes or leaks; a refusal
 * returns nothing; every recording read packs, copies and re-reads stably (a recording that
 * cannot be re-saved or forwarded would break replay). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/recorder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* More frames than any seed holds; bounds the work per input. */
#define FUZZ_MAX_RECORDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-recording", MFD_CLOEXEC);
    FUZZ_REQUIRE(fd >= 0, "memfd_create failed");
    for (size_t done = 0; done < size;) {
        ssize_t n = write(fd, data + done, size - done);
        FUZZ_REQUIRE(n > 0, "write to memfd failed");
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

    sbx_recording **recs = NULL;
    size_t n = 0;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_status st = sbx_recordings_load(path, FUZZ_MAX_RECORDS, &recs, &n, &err);
    if (st != SBX_OK) {
        FUZZ_REQUIRE(recs == NULL && n == 0, "a refused file left recordings behind");
        FUZZ_REQUIRE(err.message[0] != '\0', "refusal %d without a message", (int)st);
    } else {
        FUZZ_REQUIRE(n <= FUZZ_MAX_RECORDS, "%zu recordings beyond the limit", n);
        for (size_t i = 0; i < n; i++)
            fuzz_check_protobuf_c_round_trip(&recs[i]->base);
        sbx_recordings_free(recs, n);
    }
    close(fd);
    return 0;
}
