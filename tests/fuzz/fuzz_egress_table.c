/* fuzz_egress_table.c - libFuzzer harness for the reader of the egress proxy's refusal table
 * (egress.refused, providers/common/egress.c): the provider turns it into Result.egress_refused.
 *
 * Properties: no crash or read past len; at most SBX_EGRESS_MAX_REFUSALS + 1 entries, each with
 * a count of at least 1 and a non-empty destination of letters, digits and ".-_:()" that fits
 * its field; reporting the table against an empty one lists every entry once with its count. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = malloc(size ? size : 1);
    sbx_egress_table *t = malloc(sizeof *t);
    sbx_egress_table *empty = calloc(1, sizeof *empty);
    if (!copy || !t || !empty)
        abort();
    memcpy(copy, data, size);
    sbx_egress_table_parse(copy, size, t);
    FUZZ_REQUIRE(t->n <= SBX_EGRESS_MAX_REFUSALS + 1, "%zu entries", t->n);
    for (size_t i = 0; i < t->n; i++) {
        size_t n = strnlen(t->e[i].dest, sizeof t->e[i].dest);
        FUZZ_REQUIRE(n > 0 && n < sizeof t->e[i].dest, "destination of %zu bytes", n);
        FUZZ_REQUIRE(t->e[i].count >= 1, "count 0 for %s", t->e[i].dest);
        for (size_t k = 0; k < n; k++) {
            char c = t->e[i].dest[k];
            FUZZ_REQUIRE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr(".-_:()", c),
                         "byte %d in a destination", c);
        }
    }
    sbx_result *r = sbx_result_new();
    if (!r)
        abort();
    if (sbx_egress_report(empty, t, r)) {
        FUZZ_REQUIRE(r->n_egress_refused == t->n, "%zu reported of %zu", r->n_egress_refused, t->n);
        for (size_t i = 0; i < t->n; i++)
            FUZZ_REQUIRE(r->egress_refused[i]->count == t->e[i].count &&
                             strcmp(r->egress_refused[i]->destination, t->e[i].dest) == 0,
                         "entry %zu reported differently", i);
    }
    sbx_message_free((ProtobufCMessage *)r);
    free(empty);
    free(t);
    free(copy);
    return 0;
}
