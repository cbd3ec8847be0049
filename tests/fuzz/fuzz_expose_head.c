/* fuzz_expose_head.c - libFuzzer harness for the token check of an exposed port's first
 * request head (providers/common/expose.c, sbx_expose_check_head): the bytes are a stranger's
 * on the network.
 *
 * Properties: no crash, no read past the bytes given; the answer is one of the four; OK only
 * when the token (or the header/cookie naming it) is in the bytes; every prefix of an accepted
 * head that lacks its end is MORE; past SBX_EXPOSE_HEAD_MAX without an end is TOO_LARGE. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/expose.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_TOKEN "0123456789abcdef0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy: ASan sees any read past it */
    char *buf = malloc(size ? size : 1);
    if (buf == NULL)
        abort();
    memcpy(buf, data, size);
    sbx_expose_head h = sbx_expose_check_head(buf, size, FUZZ_TOKEN);
    FUZZ_REQUIRE(h >= SBX_EXPOSE_HEAD_MORE && h <= SBX_EXPOSE_HEAD_TOO_LARGE, "answer %d", (int)h);
    bool has_end = false;
    size_t lim = size < SBX_EXPOSE_HEAD_MAX ? size : SBX_EXPOSE_HEAD_MAX;
    for (size_t i = 0; i + 4 <= lim && !has_end; i++)
        has_end = memcmp(buf + i, "\r\n\r\n", 4) == 0;
    if (!has_end)
        FUZZ_REQUIRE(
            h == (lim >= SBX_EXPOSE_HEAD_MAX ? SBX_EXPOSE_HEAD_TOO_LARGE : SBX_EXPOSE_HEAD_MORE),
            "no head end: answer %d for %zu bytes", (int)h, size);
    else
        FUZZ_REQUIRE(h == SBX_EXPOSE_HEAD_OK || h == SBX_EXPOSE_HEAD_DENIED, "complete head: %d",
                     (int)h);
    if (h == SBX_EXPOSE_HEAD_OK)
        FUZZ_REQUIRE(memmem(buf, lim, FUZZ_TOKEN, strlen(FUZZ_TOKEN)) != NULL,
                     "accepted without the token");
    /* the wrong token never passes what the right one does not */
    if (h != SBX_EXPOSE_HEAD_OK)
        FUZZ_REQUIRE(sbx_expose_check_head(buf, size, "") != SBX_EXPOSE_HEAD_OK,
                     "the empty token passed");
    free(buf);
    return 0;
}
