/* fuzz_docker_demux.c - libFuzzer harness for the demultiplexer of the exec API's stream (8-byte
 * frame headers then payload; untrusted bytes from the daemon). Properties: never crashes; the
 * payload handed on never exceeds the input; any slicing of the input gives the same split into
 * stdout and stderr. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/docker/docker_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct tally {
    uint64_t bytes[3];
    uint64_t hash[3];
} tally;

static void on_output(void *arg, int stream, const uint8_t *d, size_t len)
{
    tally *t = arg;
    FUZZ_REQUIRE(stream == 1 || stream == 2, "stream %d", stream);
    t->bytes[stream] += len;
    for (size_t i = 0; i < len; i++)
        t->hash[stream] = t->hash[stream] * 31 + d[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tally whole, sliced;
    memset(&whole, 0, sizeof(whole));
    memset(&sliced, 0, sizeof(sliced));
    docker_demux a = {0}, b = {0};
    bool ok1 = docker_demux_feed(&a, data, size, on_output, &whole);
    size_t split = size > 0 ? data[size - 1] % size : 0;
    bool ok2 = docker_demux_feed(&b, data, split, on_output, &sliced) &&
               docker_demux_feed(&b, data + split, size - split, on_output, &sliced);
    FUZZ_REQUIRE(ok1 == ok2, "whole and sliced feeds disagree on acceptance");
    FUZZ_REQUIRE(whole.bytes[1] + whole.bytes[2] <= size, "more payload than input");
    if (ok1)
        FUZZ_REQUIRE(whole.bytes[1] == sliced.bytes[1] && whole.bytes[2] == sliced.bytes[2] &&
                         whole.hash[1] == sliced.hash[1] && whole.hash[2] == sliced.hash[2],
                     "whole and sliced feeds split the output differently");
    return 0;
}
