/* packages.c - an InstallPackages operation's command line (packages.h). */
#include "packages.h"

#include <stdlib.h>
#include <string.h>

sbx_status sbx_package_argv(const char *provider, const Sbx__V1__InstallPackages *op,
                            const char ***argv, size_t *argc, sbx_error *err)
{
    static const char *const pip[] = {"python3", "-m", "pip", "install", "--quiet"};
    static const char *const npm[] = {"npm", "install", "--silent"};
    *argv = NULL;
    *argc = 0;
    const char *m = op->manager && *op->manager ? op->manager : "pip";
    const char *const *prefix;
    size_t np;
    if (strcmp(m, "pip") == 0) {
        prefix = pip, np = sizeof pip / sizeof pip[0];
    } else if (strcmp(m, "npm") == 0) {
        prefix = npm, np = sizeof npm / sizeof npm[0];
    } else {
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "%s: package manager '%s' is not supported; use pip or npm", provider,
                             m);
    }
    if (op->n_packages == 0)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT, "%s: no packages to install", provider);
    for (size_t i = 0; i < op->n_packages; i++) {
        /* A "package" starting with '-' would be read as an option by pip or npm. */
        if (!op->packages[i][0] || op->packages[i][0] == '-')
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "%s: package '%s' is not a package name", provider,
                                 op->packages[i]);
    }
    const char **v = calloc(np + op->n_packages, sizeof *v);
    if (!v)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory", provider);
    for (size_t i = 0; i < np; i++)
        v[i] = prefix[i];
    for (size_t i = 0; i < op->n_packages; i++)
        v[np + i] = op->packages[i];
    *argv = v;
    *argc = np + op->n_packages;
    return SBX_OK;
}
