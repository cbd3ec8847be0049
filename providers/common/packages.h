/* packages.h - the command line of an InstallPackages operation, for providers that run it as a
 * program inside the sandbox (e2b, daytona).
 *
 * Managers: "pip" (python3 -m pip install --quiet) and "npm" (npm install --silent); "" means
 * pip. A package that is empty or starts with '-' is refused: pip and npm would read it as an
 * option (--index-url=..., --prefix=...), which a caller must not be able to pass.
 */
#ifndef SBX_PROVIDERS_PACKAGES_H
#define SBX_PROVIDERS_PACKAGES_H

#include <stddef.h>

#include "sbx/provider.h"

/* The argv (into a calloc'd array the caller frees; its strings are borrowed from op and static
 * text) and its length. provider names the provider in errors ("e2b: package manager 'apt' is
 * not supported; use pip or npm"). INVALID_ARGUMENT for an unknown manager, no packages or an
 * option-like package, RESOURCE_EXHAUSTED when out of memory. */
sbx_status sbx_package_argv(const char *provider, const Sbx__V1__InstallPackages *op,
                            const char ***argv, size_t *argc, sbx_error *err);

#endif
