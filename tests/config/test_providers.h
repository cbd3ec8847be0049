/* test_providers.h - provider ops registered at run time for the config tests: three test
 * providers that exercise the environment matrix and every option type, and stand-ins for the
 * six real provider names that are NOT built into this binary (so examples/ can be checked
 * before every provider exists; a built-in provider always wins, so as each one lands the
 * examples are checked against its real schema). Registration only; no ops are callable.
 */
#ifndef SBX_TESTS_CONFIG_TEST_PROVIDERS_H
#define SBX_TESTS_CONFIG_TEST_PROVIDERS_H

/* Registers test_managed (provisions only), test_attach (attaches only), test_both, and the
 * stand-ins. Idempotent; aborts the test program on failure. */
void config_test_register_providers(void);

#endif
