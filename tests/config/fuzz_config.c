/* fuzz_config.c - libFuzzer target for the config decoder (built with -DSBX_FUZZ=ON and clang):
 * any bytes must load or be refused with SBX_E_CONFIG carrying "fuzz:LINE:COLUMN: ", and never
 * crash or leak. Seed it with examples/ and tests/config/bad/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/config.h"
#include "tests/config/test_providers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int registered;
    if (!registered) {
        config_test_register_providers();
        registered = 1;
    }
    sbx_config *cfg = NULL;
    sbx_error err = {0};
    sbx_status st = sbx_config_load_string((const char *)data, size, "fuzz", &cfg, &err);
    if (st == SBX_OK) {
        sbx_config_free(cfg);
        return 0;
    }
    if (cfg != NULL || (st != SBX_E_CONFIG && st != SBX_E_RESOURCE_EXHAUSTED) ||
        (st == SBX_E_CONFIG && strncmp(err.message, "fuzz:", 5) != 0))
        abort();
    return 0;
}
