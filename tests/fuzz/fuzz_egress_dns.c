/* fuzz_egress_dns.c - libFuzzer harness for the egress proxy's DNS
 * (providers/common/egress_parse.c): queries come from inside a sandbox, answers from a resolver
 * the sandbox may influence. The first byte picks which reader the rest goes to: even, a query
 * (and, when accepted, the reply built to it is read back); odd, an answer to a query for
 * "allowed.test" with id 0x1234.
 *
 * Properties: no crash or read past len; an accepted query's question ends within the input; a
 * reply built with two addresses reads back as those two; at most max addresses come out of an
 * answer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_egress.h"
#include "fuzz/fuzz_oracle.h"
#include "providers/common/egress_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = size - 1;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        abort();
    memcpy(copy, data + 1, n);
    if ((data[0] & 1) == 0) {
        sbx_egress_dns_query q;
        if (sbx_egress_dns_query_parse(copy, n, &q) == SBX_EGRESS_OK) {
            FUZZ_REQUIRE(q.question_end >= 17 && q.question_end <= n, "question end %zu of %zu",
                         q.question_end, n);
            if (!q.bad_name) {
                fuzz_egress_check_name(q.name);
                uint32_t a[2] = {0x01020304u, 0x05060708u};
                uint8_t r[SBX_EGRESS_DNS_MAX + 64];
                size_t rn = sbx_egress_dns_reply_build(copy, &q, 0, a, 2, 30, r, sizeof r);
                if (rn && q.qtype == 1 && q.qclass == 1) {
                    uint32_t got[4];
                    size_t k = 0;
                    int rcode = -1;
                    FUZZ_REQUIRE(sbx_egress_dns_answer_parse(r, rn, q.id, q.name, got, 4, &k,
                                                             &rcode) == SBX_EGRESS_OK &&
                                     k == 2 && got[0] == a[0] && got[1] == a[1] && rcode == 0,
                                 "reply to %s did not read back", q.name);
                }
            }
        }
    } else {
        uint32_t got[3];
        size_t k = 0;
        int rcode = 0;
        if (sbx_egress_dns_answer_parse(copy, n, 0x1234, "allowed.test", got, 3, &k, &rcode) ==
            SBX_EGRESS_OK)
            FUZZ_REQUIRE(k <= 3 && rcode >= 0 && rcode <= 15, "%zu addresses, rcode %d", k, rcode);
    }
    free(copy);
    return 0;
}
