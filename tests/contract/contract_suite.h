/* contract_suite.h - the provider contract suite (DESIGN §12): the behaviour every provider
 * owes the engine, checked through the real engine and directly on the provider's ops.
 *
 *   - every declared language runs a small program (python mandatory where declared);
 *   - every undeclared operation (shell, files, package_install, an unknown language) is
 *     refused with CAPABILITY before anything runs;
 *   - a failing program is a SUCCEEDED completion with its exit code;
 *   - sandbox_close releases the handle, never the sandbox; destroy is idempotent, for unknown
 *     ids too; attach of an unknown id is GONE (CAPABILITY/GONE where attach is not declared);
 *   - where files are declared, bytes written come back identical and appear in a listing.
 *
 * Use from a provider's test:  assert_int_equal(sbx_contract_run_yaml(yaml, "default"), 0);
 * Each check prints one "contract[...] PASS|FAIL|SKIP name: detail" line to stderr.
 */
#ifndef SBX_TESTS_CONTRACT_SUITE_H
#define SBX_TESTS_CONTRACT_SUITE_H

#include "sbx/config.h"

/* Runs the suite on `profile` of cfg (borrowed; its secret_file is used as is). Returns the
 * number of failed checks (0: the provider honours the contract). */
int sbx_contract_run(const sbx_config *cfg, const char *profile);

/* The same from YAML text (loaded with sbx_config_load_string); the binding secret goes to a
 * private temporary directory, removed afterwards. Returns failures, or 1 when the YAML does
 * not load (the error is printed). */
int sbx_contract_run_yaml(const char *yaml, const char *profile);

#endif
