/* crash_trace.c - linked into every test binary (cmake/SbxTesting.cmake): a test that dies of a
 * fatal signal first writes which signal, in which thread, and its backtrace to stderr, so a
 * crash seen once in CI (a library's abort() deep in another thread says nothing by itself) can
 * be read from the log: each frame is printed as binary(+offset), for `addr2line -e binary
 * offset`. Then the signal is raised again with its default action, so the test still ends as
 * it would have (ctest's "Subprocess aborted", "SEGFAULT").
 *
 * Under AddressSanitizer only SIGABRT is caught: the sanitizer reports the others itself.
 * cmocka would install its own handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE while a test
 * function runs (through signal()). Those fail the test when the test's own thread faults, but a
 * fault in any other thread (a client library's) longjmps into the test thread's context and
 * the binary exits with -1 and nothing printed: test_queue_unsubscribe, before its fix, left a
 * bare "[ RUN ]" line. So this file's signal() (an executable's definition comes before libc's
 * for every caller) leaves those four signals to the handler here (under ASan, to ASan's) and
 * is libc's for every other signal.
 */

#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CRASH_TRACE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRASH_TRACE_ASAN 1
#endif
#endif

#define CRASH_TRACE_FRAMES 64

static void on_fatal(int sig)
{
    char head[128];
    const char *name = sigabbrev_np(sig); /* a static string: safe here, unlike strsignal */
    int n = snprintf(head, sizeof head, "\n*** fatal signal %d (SIG%s) in thread %ld; backtrace:\n",
                     sig, name != NULL ? name : "?", (long)syscall(SYS_gettid));
    if (n > 0 && write(2, head, (size_t)n) < 0)
        _exit(128 + sig);
    void *frames[CRASH_TRACE_FRAMES];
    int depth = backtrace(frames, CRASH_TRACE_FRAMES);
    backtrace_symbols_fd(frames, depth, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The fatal signals whose handlers nobody else may replace (see the top). */
static int is_fatal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    memset(&old, 0, sizeof old);
    if (is_fatal(sig)) /* report the handler kept, as if it had just been set */
        return sigaction(sig, NULL, &old) == 0 ? old.sa_handler : SIG_ERR;
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* glibc's signal(): BSD semantics */
    return sigaction(sig, &sa, &old) == 0 ? old.sa_handler : SIG_ERR;
}

__attribute__((constructor)) static void crash_trace_install(void)
{
    void *warm[1];
    backtrace(warm, 1); /* loads the unwinder now: it may allocate, which a handler must not */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigaction(SIGABRT, &sa, NULL);
#ifndef CRASH_TRACE_ASAN
    int others[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        sigaction(others[i], &sa, NULL);
#endif
}
