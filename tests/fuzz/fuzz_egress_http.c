/* fuzz_egress_http.c - libFuzzer harness for the egress proxy's reading of an HTTP request head
 * (providers/common/egress_parse.c): the Host a sandbox sends on port 80 decides where the proxy
 * connects.
 *
 * Properties: no crash or read past len; an accepted name is normalised and its port is 0 or a
 * real port; a prefix of an accepted head without its empty line is never accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_egress.h"
#include "fuzz/fuzz_oracle.h"
#include "providers/common/egress_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, data, size);
    char name[SBX_EGRESS_NAME_MAX + 1];
    uint16_t port = 0;
    sbx_egress_parse p = sbx_egress_http_host(copy, size, name, &port);
    if (p == SBX_EGRESS_OK) {
        fuzz_egress_check_name(name);
        /* the head needs its empty line: the bytes before the first one are not enough */
        const uint8_t *end = NULL;
        for (size_t i = 0; i + 3 < size; i++) {
            if (memcmp(copy + i, "\r\n\r\n", 4) == 0) {
                end = copy + i;
                break;
            }
        }
        FUZZ_REQUIRE(end != NULL, "accepted without an empty line");
        FUZZ_REQUIRE(sbx_egress_http_host(copy, (size_t)(end - copy) + 3, name, &port) !=
                         SBX_EGRESS_OK,
                     "accepted a head cut before its empty line");
    }
    free(copy);
    return 0;
}
