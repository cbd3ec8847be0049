/* test_hash.c - the keyed string hash of core/hash.c: stable within a process, different for
 * different inputs and pair splits, and keyed per process (two processes disagree), so keys
 * that collide cannot be computed ahead of time by a caller. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/hash.h"

/* Hash of "task-1" computed by a fresh child process (its key is drawn there). */
static uint64_t hash_in_child(void)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        uint64_t h = sbx_hash_str("task-1");
        _exit(write(fds[1], &h, sizeof h) == (ssize_t)sizeof h ? 0 : 1);
    }
    close(fds[1]);
    uint64_t h = 0;
    assert_int_equal(read(fds[0], &h, sizeof h), (ssize_t)sizeof h);
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(status, 0);
    return h;
}

static void test_hash_is_keyed_per_process(void **state)
{
    (void)state;
    /* Both children draw their own key (this process has not hashed yet when they fork). */
    uint64_t a = hash_in_child(), b = hash_in_child();
    assert_int_not_equal(a, b); /* equal with probability 2^-64 */
}

static void test_hash_is_stable_and_separates_inputs(void **state)
{
    (void)state;
    assert_int_equal(sbx_hash_str("task-1"), sbx_hash_str("task-1"));
    assert_int_equal(sbx_hash_str("task-1"), sbx_hash_bytes("task-1", 6));
    assert_int_not_equal(sbx_hash_str("task-1"), sbx_hash_str("task-2"));
    assert_int_not_equal(sbx_hash_str(""), sbx_hash_bytes("", 1)); /* length counts */
    /* The pair's separator: ("ab","c") and ("a","bc") are different keys. */
    assert_int_not_equal(sbx_hash_pair("ab", "c"), sbx_hash_pair("a", "bc"));
    assert_int_equal(sbx_hash_pair("tenant-a", "t1"), sbx_hash_pair("tenant-a", "t1"));
    assert_int_not_equal(sbx_hash_pair("tenant-a", "t1"), sbx_hash_pair("tenant-b", "t1"));
    /* Inputs across the 8-byte word boundary, one byte apart, all differ. */
    char buf[32];
    memset(buf, 'x', sizeof buf);
    uint64_t seen[sizeof buf];
    for (size_t n = 0; n < sizeof buf; n++) {
        seen[n] = sbx_hash_bytes(buf, n);
        for (size_t m = 0; m < n; m++)
            assert_int_not_equal(seen[m], seen[n]);
    }
}

/* sbx_scoped_key writes what snprintf("%zu:%s/%s") would, cut at the same place. */
static void test_scoped_key_is_snprintf_exactly(void **state)
{
    (void)state;
    static char subject[3000], name[3000];
    static const size_t lens[] = {0, 1, 9, 10, 99, 100, 1000, 1017, 1018, 1019, 1020, 1023, 2999};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j += 3) {
            memset(subject, 'a' + (int)(i % 26), lens[i]);
            subject[lens[i]] = '\0';
            memset(name, 'A' + (int)(j % 26), lens[j]);
            name[lens[j]] = '\0';
            char want[8192], got[SBX_SCOPED_KEY_MAX];
            snprintf(want, sizeof want, "%zu:%s/%s", strlen(subject), subject, name);
            want[SBX_SCOPED_KEY_MAX - 1] = '\0'; /* where snprintf into the key's size cuts */
            assert_ptr_equal(sbx_scoped_key(got, subject, name), got);
            assert_string_equal(got, want);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_is_keyed_per_process),
        cmocka_unit_test(test_scoped_key_is_snprintf_exactly),
        cmocka_unit_test(test_hash_is_stable_and_separates_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
