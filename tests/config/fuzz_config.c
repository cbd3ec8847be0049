/* fuzz_config.c - libFuzzer harness for the config decoder (tests/fuzz/README.md explains the
 * setup): any bytes must load, or be refused with SBX_E_CONFIG (SBX_E_RESOURCE_EXHAUSTED only for
 * memory) whose message starts with "fuzz:LINE:COLUMN: ", leaving no config behind; never a crash
 * or a leak. ctest replays it over corpus/fuzz_config/, examples/ and bad/. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/config.h"
#include "tests/config/test_providers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* "fuzz:12:3: ..." */
static bool located(const char *message)
{
    const char *p = message;
    if (strncmp(p, "fuzz:", 5) != 0)
        return false;
    p += 5;
    for (int part = 0; part < 2; part++) {
        if (*p < '1' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p++ != ':')
            return false;
    }
    return *p == ' ';
}

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
        FUZZ_REQUIRE(cfg != NULL && cfg->n_profiles > 0, "a loaded config without profiles");
        FUZZ_REQUIRE(sbx_config_profile(cfg, NULL) != NULL, "no default profile");
        sbx_config_free(cfg);
        return 0;
    }
    FUZZ_REQUIRE(cfg == NULL, "a refused config was returned");
    FUZZ_REQUIRE(st == SBX_E_CONFIG || st == SBX_E_RESOURCE_EXHAUSTED, "refused with %s",
                 sbx_status_name(st));
    FUZZ_REQUIRE(st != SBX_E_CONFIG || located(err.message), "no fuzz:LINE:COLUMN in \"%s\"",
                 err.message);
    return 0;
}
