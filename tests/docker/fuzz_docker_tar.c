/* fuzz_docker_tar.c - libFuzzer harness for the docker provider's streaming tar reader, which
 * reads what the daemon's archive API sends (untrusted bytes). Properties: never crashes, never
 * reads out of bounds or leaks; the same bytes fed whole or in two slices give the same entries;
 * names and content stay within the stated bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/docker/docker_tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct tally {
    size_t entries;
    uint64_t data_bytes;
    uint64_t name_hash;
} tally;

static bool on_entry(void *arg, const docker_tar_entry *e)
{
    tally *t = arg;
    size_t n = strlen(e->name);
    FUZZ_REQUIRE(n <= DOCKER_TAR_MAX_NAME, "entry name of %zu bytes", n);
    FUZZ_REQUIRE(strlen(e->linkname) <= DOCKER_TAR_MAX_NAME, "link name too long");
    FUZZ_REQUIRE(e->mode <= 07777, "mode 0%o out of range", e->mode);
    for (size_t i = 0; i < n; i++)
        t->name_hash = t->name_hash * 31 + (uint8_t)e->name[i];
    t->entries++;
    return true;
}

static bool on_data(void *arg, const uint8_t *d, size_t len)
{
    tally *t = arg;
    (void)d;
    t->data_bytes += len;
    return true;
}

static bool run(const uint8_t *data, size_t size, size_t split, tally *t)
{
    docker_tar_reader r = {.on_entry = on_entry, .on_data = on_data, .arg = t};
    docker_tar_reader_init(&r);
    bool ok = docker_tar_reader_feed(&r, data, split) &&
              docker_tar_reader_feed(&r, data + split, size - split);
    docker_tar_reader_free(&r);
    return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tally whole = {0}, sliced = {0};
    bool ok1 = run(data, size, size, &whole);
    bool ok2 = run(data, size, size > 0 ? data[0] % size : 0, &sliced);
    FUZZ_REQUIRE(ok1 == ok2, "whole and sliced feeds disagree on acceptance");
    if (ok1)
        FUZZ_REQUIRE(whole.entries == sliced.entries && whole.data_bytes == sliced.data_bytes &&
                         whole.name_hash == sliced.name_hash,
                     "whole and sliced feeds saw different archives");
    return 0;
}
