/* fuzz_egress.h - the property every name the egress parsers hand out must have. */
#ifndef SBX_FUZZ_EGRESS_H
#define SBX_FUZZ_EGRESS_H

#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/common/egress_parse.h"

static inline void fuzz_egress_check_name(const char *name)
{
    size_t n = strlen(name);
    FUZZ_REQUIRE(n > 0 && n <= SBX_EGRESS_NAME_MAX, "name of %zu bytes", n);
    FUZZ_REQUIRE(name[0] != '.' && name[n - 1] != '.' && strstr(name, "..") == NULL,
                 "empty label in %s", name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        FUZZ_REQUIRE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                         c == '.',
                     "byte %d in a name", c);
    }
}

#endif
