/* test_crash_trace.c - a thread other than the test's dies of SIGSEGV while a cmocka test runs:
 * the binary must say so, with a backtrace (crash_trace.c) or ASan's report, instead of the
 * silent exit -1 that cmocka's own handler made of it. ctest judges the output
 * (tests/support/CMakeLists.txt); the exit status is the crash's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

static void *fault(void *arg)
{
    (void)arg;
    raise(SIGSEGV); /* to this thread: what a library's read loop touching freed memory gets */
    return NULL;
}

static void test_a_fault_in_another_thread_is_reported(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fault, NULL), 0);
    pthread_join(t, NULL);
    fail_msg("the faulting thread came back");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_fault_in_another_thread_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
