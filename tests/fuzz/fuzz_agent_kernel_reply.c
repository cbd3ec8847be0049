/* fuzz_agent_kernel_reply.c - libFuzzer harness for sbx-agent's reading of the python kernel's
 * reply to a stateful run_code (agent/kernel_reply.c, compiled into the harness: the agent is
 * a static binary without sanitizers). The kernel runs the sandbox's program in its own
 * process, so the program can write anything to the reply pipe; the agent reads at most
 * KERNEL_REPLY_BUF - 1 bytes of it at once into a static buffer and parses them in place.
 *
 * Input: the bytes of one read (cut at KERNEL_REPLY_BUF - 1, as the read is), placed at the
 * start of a buffer of exactly KERNEL_REPLY_BUF bytes (ASan sees every byte past it).
 *
 * Properties: no crash; shorter than the header is refused; the exit code is 0..255, 0 for
 * status 0 and never 0 for status 1, else the code's low byte; the value lies right after the
 * header, ends with a NUL inside the buffer, holds no other NUL and at most KERNEL_MAX_VALUE
 * bytes, and is the reply's own bytes (NUL made '?') for the length the header claims when the
 * reply holds them, else for what the reply holds; the header is left as it was. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/kernel_reply.h"
#include "fuzz/fuzz_oracle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len = size < KERNEL_REPLY_BUF - 1 ? size : KERNEL_REPLY_BUF - 1;
    uint8_t *rep = malloc(KERNEL_REPLY_BUF);
    if (!rep)
        abort();
    memset(rep, 0x5a, KERNEL_REPLY_BUF); /* what an earlier reply left in the static buffer */
    memcpy(rep, data, len);
    int exit_code = -1;
    const char *value = NULL;
    bool ok = kernel_reply_parse(rep, len, &exit_code, &value);
    FUZZ_REQUIRE(ok == (len >= KERNEL_REPLY_HEADER), "a reply of %zu bytes %s", len,
                 ok ? "accepted" : "refused");
    if (!ok) {
        free(rep);
        return 0;
    }
    FUZZ_REQUIRE(memcmp(rep, data, KERNEL_REPLY_HEADER) == 0, "the header was changed");
    uint32_t status = le32(data), code = le32(data + 4), claimed = le32(data + 8);
    FUZZ_REQUIRE(exit_code >= 0 && exit_code <= 255, "exit code %d", exit_code);
    if (status == 0)
        FUZZ_REQUIRE(exit_code == 0, "status 0 gave exit code %d", exit_code);
    else if (status == 1)
        FUZZ_REQUIRE(exit_code != 0, "an exception (status 1) gave exit code 0");
    else
        FUZZ_REQUIRE(exit_code == (int)(code & 0xff), "status %u code %u gave exit code %d", status,
                     code, exit_code);

    FUZZ_REQUIRE(value == (const char *)rep + KERNEL_REPLY_HEADER, "the value is not after the "
                                                                   "header");
    size_t held = len - KERNEL_REPLY_HEADER;
    size_t want = claimed <= KERNEL_MAX_VALUE && claimed <= held ? claimed : held;
    if (want > KERNEL_MAX_VALUE)
        want = KERNEL_MAX_VALUE;
    size_t vlen = strnlen(value, KERNEL_REPLY_BUF - KERNEL_REPLY_HEADER);
    FUZZ_REQUIRE(vlen < KERNEL_REPLY_BUF - KERNEL_REPLY_HEADER, "the value has no NUL");
    FUZZ_REQUIRE(vlen == want, "a value of %zu bytes (header claims %u, reply holds %zu)", vlen,
                 claimed, held);
    for (size_t i = 0; i < vlen; i++) {
        uint8_t sent = data[KERNEL_REPLY_HEADER + i];
        FUZZ_REQUIRE((uint8_t)value[i] == (sent == 0 ? '?' : sent),
                     "value byte %zu is %02x, the kernel sent %02x", i, (uint8_t)value[i], sent);
    }
    free(rep);
    return 0;
}
