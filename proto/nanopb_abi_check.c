/* nanopb_abi_check.c - compile-time guard that the generated nanopb code is built with the same
 * pb_size_t as Debian's libprotobuf-nanopb.a (built without PB_FIELD_32BIT: 16 bits).
 *
 * If someone defines PB_FIELD_32BIT for the generated code only, every `*_count`, `which_*` and
 * bytes `size` member would be 32 bits wide in our structs but written as 16 bits by the
 * library: repeated fields would be silently mangled. This file makes that a build error.
 * It holds no code; tests/golden checks the same agreement at run time. */
#include <pb.h>
#include <stdint.h>

#include "sbx/v1/agent.pb.h"

_Static_assert(sizeof(pb_size_t) == sizeof(uint16_t),
               "Debian's libprotobuf-nanopb.a is built without PB_FIELD_32BIT (16-bit pb_size_t); "
               "do not define PB_FIELD_32BIT for the generated nanopb code");
#ifdef PB_FIELD_32BIT
#error "PB_FIELD_32BIT is defined but Debian's libprotobuf-nanopb.a is built without it"
#endif

/* A translation unit must not be empty (ISO C); this symbol is never used. */
extern const int sbx_nanopb_abi_checked;
const int sbx_nanopb_abi_checked = 1;
