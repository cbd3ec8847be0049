/* cli_test_providers.c - links into a copy of the `sbx` CLI (sbx_config_test_cli) and registers
 * the config test providers before main() runs, the way an embedding program brings its own
 * providers. Used only by the CLI tests of tests/config. */
#include "tests/config/test_providers.h"

__attribute__((constructor)) static void register_before_main(void)
{
    config_test_register_providers();
}
