/* test_proc.c - providers/common/proc.c: the start time and state of a pid, with a comm that
 * holds ") " and spaces (the fields are counted after its last ')'), a zombie, and no process;
 * the small-file reader's bound, its NUL, and O_NOFOLLOW on a link; whether a process is
 * being killed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/common/proc.h"

static void test_proc_start_time_survives_a_hostile_comm(void **state)
{
    (void)state;
    int go[2], ready[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char b;
        if (read(go[0], &b, 1) != 1)
            _exit(1);
        prctl(PR_SET_NAME, "x) 1 2 3 (y", 0, 0, 0);
        (void)!write(ready[1], "r", 1);
        for (;;)
            pause();
    }
    char st = 0;
    unsigned long long before = sbx_proc_start_time(pid, &st);
    assert_true(before > 0);
    assert_int_not_equal(st, '?');
    assert_int_equal(write(go[1], "g", 1), 1);
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_int_equal(sbx_proc_start_time(pid, &st), before); /* the same process, renamed */
    assert_int_equal(sbx_proc_live_start_time(pid), before);
    kill(pid, SIGKILL);
    /* a zombie until reaped: started, but no longer alive */
    for (int i = 0; i < 1000 && (sbx_proc_start_time(pid, &st), st != 'Z'); i++)
        usleep(1000);
    assert_int_equal(st, 'Z');
    assert_int_equal(sbx_proc_start_time(pid, NULL), before);
    assert_int_equal(sbx_proc_live_start_time(pid), 0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_int_equal(sbx_proc_start_time(pid, &st), 0); /* gone */
    assert_int_equal(st, '?');
    assert_true(sbx_proc_start_time((long)getpid(), NULL) > 0);
}

static void test_read_small_is_bounded(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-proc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[64], link[64];
    snprintf(file, sizeof file, "%s/f", dir);
    snprintf(link, sizeof link, "%s/l", dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("123 456\nmore text", f);
    fclose(f);
    assert_int_equal(symlink(file, link), 0);

    char buf[8];
    memset(buf, 'x', sizeof buf);
    assert_int_equal(sbx_read_small(file, 0, buf, sizeof buf), 7); /* cap - 1, then NUL */
    assert_string_equal(buf, "123 456");
    char big[64];
    assert_int_equal(sbx_read_small(file, O_NOFOLLOW, big, sizeof big), 17);
    assert_string_equal(big, "123 456\nmore text");
    assert_int_equal(sbx_read_small(link, 0, big, sizeof big), 17);
    assert_int_equal(sbx_read_small(link, O_NOFOLLOW, big, sizeof big), -1); /* a planted link */
    assert_string_equal(big, "");
    char one[1];
    assert_int_equal(sbx_read_small(file, 0, one, sizeof one), 0); /* room for the NUL only */
    assert_string_equal(one, "");
    assert_int_equal(sbx_read_small(dir, 0, big, sizeof big), -1); /* EISDIR */
    unlink(link);
    unlink(file);
    rmdir(dir);
    assert_int_equal(sbx_read_small(file, 0, big, sizeof big), -1);
}

/* sbx_proc_killed: a live process (with a comm that holds ") " and numbers, which must not
 * shift field 9) is not being killed; one that has exited and not been waited for (a zombie,
 * PF_EXITING) is; no process is not. */
static void test_proc_killed_tells_an_ending_process_from_a_live_one(void **state)
{
    (void)state;
    assert_false(sbx_proc_killed(getpid()));
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_NAME, "x) 4 4 4 4 4 4", 0, 0, 0);
        (void)!write(ready[1], "r", 1);
        for (;;)
            pause();
    }
    char b;
    assert_int_equal(read(ready[0], &b, 1), 1);
    assert_false(sbx_proc_killed(pid));
    assert_int_equal(kill(pid, SIGKILL), 0);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0); /* a zombie now */
    assert_true(sbx_proc_killed(pid));
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_false(sbx_proc_killed(pid));
    close(ready[0]);
    close(ready[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_start_time_survives_a_hostile_comm),
        cmocka_unit_test(test_read_small_is_bounded),
        cmocka_unit_test(test_proc_killed_tells_an_ending_process_from_a_live_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
