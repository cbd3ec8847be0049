/* lazy.c - loads one of the `sbx` executable's heavy libraries on first use (see lazy.h). It
 * must not know any library's functions: those are the stubs' files. */
#include "cli/lazy/lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* The dynamic loader's own status for a program whose library is missing. */
#define CLI_LAZY_EXIT_MISSING 127

/* Serialises loading: dlopen is thread-safe, but two threads must not both report a failure
 * or race on lib->handle. Taken once per stub (its first call), never again. */
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

void *cli_lazy_sym(cli_lazy_lib *lib, const char *name)
{
    pthread_mutex_lock(&load_mu);
    dlerror();
    if (lib->handle == NULL) /* RTLD_LOCAL: its symbols serve only the stubs' dlsym */
        lib->handle = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == NULL) {
        fprintf(stderr,
                "sbx: this command needs %s, which cannot be loaded: %s; install the package "
                "%s (scripts/install-deps.sh)\n",
                lib->soname, dlerror(), lib->package);
        exit(CLI_LAZY_EXIT_MISSING);
    }
    void *sym = dlsym(lib->handle, name);
    if (sym == NULL) {
        const char *why = dlerror();
        fprintf(stderr,
                "sbx: %s has no %s (%s): the installed library is older than the one sbx was "
                "built against; upgrade the package %s\n",
                lib->soname, name, why != NULL ? why : "symbol not found", lib->package);
        exit(CLI_LAZY_EXIT_MISSING);
    }
    pthread_mutex_unlock(&load_mu);
    return sym;
}
