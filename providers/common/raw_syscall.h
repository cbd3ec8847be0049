/* raw_syscall.h - a system call without libc, for code that runs in a child sharing its
 * parent's memory (clone with CLONE_VM and a stack of its own): libc's wrappers would write
 * the parent's errno (the TLS is the parent's), and a sanitizer's checks would use the parent's
 * shadow memory and runtime. Used by launch.c and by the static agent's network namespace
 * helper (agent/boot_local.c). x86-64 and arm64 only (SBX_RAW_SYSCALL 1); elsewhere callers
 * take another path. Header-only, libc-free.
 */
#ifndef SBX_PROVIDERS_RAW_SYSCALL_H
#define SBX_PROVIDERS_RAW_SYSCALL_H

#if defined(__x86_64__) || defined(__aarch64__)
#define SBX_RAW_SYSCALL 1
#else
#define SBX_RAW_SYSCALL 0
#endif

/* Nothing the compiler adds may run in such a child: sanitizer checks use the parent's shadow
 * memory and runtime, the stack protector the parent's TLS. */
#if defined(__clang__)
#define SBX_RAW_BARE __attribute__((no_sanitize("address", "undefined"), no_stack_protector))
#else
#define SBX_RAW_BARE                                                                               \
    __attribute__((no_sanitize("address", "undefined"), no_sanitize_undefined, no_stack_protector))
#endif

#if SBX_RAW_SYSCALL
/* System call n with three arguments; returns the result, or -errno. */
SBX_RAW_BARE static inline __attribute__((always_inline)) long sbx_raw3(long n, long a, long b,
                                                                        long c)
{
#if defined(__x86_64__)
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
#else
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
#endif
}
#endif

#endif
