/* fuzz_egress_sni.c - libFuzzer harness for the egress proxy's reading of a TLS ClientHello
 * (providers/common/egress_parse.c): the first bytes a sandbox sends on port 443 decide where the
 * proxy connects.
 *
 * Properties: no crash or read past len; an accepted name is normalised (lower case, letters,
 * digits, '-', '_', '.', no empty label, at most 253 bytes, not all digits and dots); the same
 * bytes give the same answer. */
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
    sbx_egress_parse p = sbx_egress_tls_sni(copy, size, name);
    FUZZ_REQUIRE(p == SBX_EGRESS_OK || p == SBX_EGRESS_NEED_MORE || p == SBX_EGRESS_BAD, "%d", p);
    if (p == SBX_EGRESS_OK)
        fuzz_egress_check_name(name);
    char again[SBX_EGRESS_NAME_MAX + 1];
    FUZZ_REQUIRE(sbx_egress_tls_sni(copy, size, again) == p, "not deterministic");
    free(copy);
    return 0;
}
