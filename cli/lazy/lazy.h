/* lazy.h - the `sbx` executable's on-demand loading of its heavy shared libraries (libcurl,
 * libnats, libssl/libcrypto, libnghttp2).
 *
 * Why: linked the ordinary way they bring 30-odd shared objects (libcurl alone pulls in
 * gnutls, krb5, ldap, ssh2, rtmp...) that the dynamic loader maps and relocates before main,
 * ~90% of what `sbx version` or `sbx run` on the local provider cost, though neither calls
 * them. So the `sbx` executable links, instead of those libraries, one stub per function the
 * code calls (cli/lazy/<library>.c, one SBX_LAZY line each): the stub's name and parameters
 * are the library's own, checked against its header by the compiler; its first call loads
 * the library (dlopen, once, thread-safe) and the function (dlsym), later calls jump through
 * the cached pointer. tests/cli checks that the executable names none of these libraries as
 * NEEDED: a new call into one of them without its SBX_LAZY line fails that test (add the
 * line to the library's file).
 *
 * Only the `sbx` executable links these stubs; libsbx, sbx-worker and the tests link the
 * libraries themselves. This file must not hold any command's logic.
 */
#ifndef SBX_CLI_LAZY_H
#define SBX_CLI_LAZY_H

/* One library loaded on demand: its SONAME (the build reads it from the library it found),
 * the Debian package that ships it (named when it cannot be loaded), the handle. */
typedef struct cli_lazy_lib {
    const char *soname;
    const char *package;
    void *handle; /* guarded by lazy.c's lock until set, then read-only */
} cli_lazy_lib;

#define CLI_LAZY_LIB(soname, package)                                                              \
    {                                                                                              \
        soname, package, NULL                                                                      \
    }

/* The address of symbol name of lib, loading lib on first use. When the library or the
 * symbol cannot be loaded it prints why (naming the library and its package) and exits with
 * status 127, as the dynamic loader does for a missing library: the command cannot run. */
void *cli_lazy_sym(cli_lazy_lib *lib, const char *name);

/* The resolved pointer of one stub: loaded once (acquire/release, so a thread that sees it
 * sees the library initialised by the thread that loaded it). */
#define CLI_LAZY_RESOLVE(lib, name, slot)                                                          \
    do {                                                                                           \
        if (__atomic_load_n(&(slot), __ATOMIC_ACQUIRE) == NULL) {                                  \
            void *sym_ = cli_lazy_sym(&(lib), #name);                                              \
            __typeof__(slot) fn_;                                                                  \
            _Static_assert(sizeof fn_ == sizeof sym_, "function and data pointers differ");        \
            __builtin_memcpy(&fn_, &sym_, sizeof fn_);                                             \
            __atomic_store_n(&(slot), fn_, __ATOMIC_RELEASE);                                      \
        }                                                                                          \
    } while (0)

/* A stub for `ret name params` of lib, forwarding args (the parameters' names). */
#define SBX_LAZY(lib, ret, name, params, args)                                                     \
    ret name params                                                                                \
    {                                                                                              \
        static ret(*real_) params;                                                                 \
        CLI_LAZY_RESOLVE(lib, name, real_);                                                        \
        return __atomic_load_n(&real_, __ATOMIC_ACQUIRE) args;                                     \
    }

/* The same for a function returning void. */
#define SBX_LAZY_VOID(lib, name, params, args)                                                     \
    void name params                                                                               \
    {                                                                                              \
        static void(*real_) params;                                                                \
        CLI_LAZY_RESOLVE(lib, name, real_);                                                        \
        __atomic_load_n(&real_, __ATOMIC_ACQUIRE) args;                                            \
    }

#endif
