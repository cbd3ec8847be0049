/* test_launch.c - providers/common/launch.c: a program started without waiting for its exec
 * gets exactly the three descriptors it was given (also the caller's 0 and 1 crossed), starts with
 * every signal blocked (the contract its program relies on), and a failed exec ends the child with
 * 127 and a line that sbx_launch_explain turns into the kernel's words, as does a descriptor it
 * cannot take; other text is left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/common/launch.h"

/* Reads fd to its end into buf (NUL-terminated). */
static void read_all(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = '\0';
}

/* Runs sh -c script with stdin from `in`, returns its stdout and stderr and exit status. */
static int run_sh(const char *script, const char *in, char *out, char *err, size_t cap)
{
    int pi[2], po[2], pe[2];
    assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
    assert_int_equal(pipe2(po, O_CLOEXEC), 0);
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    char *const argv[] = {"sh", "-c", (char *)script, NULL};
    char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
    const int fds[3] = {pi[0], po[1], pe[1]};
    sbx_launched l;
    assert_int_equal(sbx_launch("/bin/sh", argv, envp, fds, &l), 0);
    close(pi[0]);
    close(po[1]);
    close(pe[1]);
    assert_int_equal(write(pi[1], in, strlen(in)), (ssize_t)strlen(in));
    close(pi[1]);
    read_all(po[0], out, cap);
    read_all(pe[0], err, cap);
    close(po[0]);
    close(pe[0]);
    int st = 0;
    assert_int_equal(waitpid(l.pid, &st, 0), l.pid);
    sbx_launch_release(&l);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_launch_hands_exactly_three_descriptors(void **state)
{
    (void)state;
    char out[4096], err[4096];
    /* an inherited descriptor of ours without O_CLOEXEC must not reach the program */
    int stray = open("/dev/null", O_RDONLY);
    assert_true(stray > 2);
    char script[256];
    snprintf(script, sizeof script,
             "read line; echo \"got $line\"; echo oops >&2; "
             "[ -e /proc/self/fd/%d ] && echo leaked; ls /proc/self/fd | wc -l",
             stray);
    assert_int_equal(run_sh(script, "hello\n", out, err, sizeof out), 0);
    close(stray);
    /* 0, 1, 2 and the descriptor ls opens to list them */
    assert_string_equal(out, "got hello\n4\n");
    assert_string_equal(err, "oops\n");
}

static void test_launch_program_starts_with_every_signal_blocked(void **state)
{
    (void)state;
    char out[4096], err[4096];
    assert_int_equal(run_sh("exec grep SigBlk /proc/self/status", "", out, err, sizeof out), 0);
    /* every signal but SIGKILL and SIGSTOP (which nothing blocks) and glibc's own 32 and 33
     * (which its sigfillset leaves out) */
    assert_string_equal(out, "SigBlk:\tfffffffe7ffbfeff\n");
}

/* The descriptors handed over are the caller's 0 and 1, crossed: the program's stdin is our 1
 * and its stdout our 0. Put in place one after the other, the first dup3 (our 1 onto 0) would
 * overwrite the second's source; they are moved up out of the way first. */
static void test_launch_takes_crossed_descriptors_of_0_and_1(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int po[2];
        close(0);
        close(1);
        if (pipe(po) != 0 || po[0] != 0 || po[1] != 1)
            _exit(10);
        /* cross them: the write end at 0, the read end at 1 */
        int tmp = dup(0);
        if (tmp < 0 || dup2(1, 0) != 0 || dup2(tmp, 1) != 1)
            _exit(11);
        close(tmp);
        char *const argv[] = {"sh", "-c", "echo crossed", NULL};
        char *const envp[] = {NULL};
        const int fds[3] = {1, 0, 2}; /* stdin: the read end (our 1); stdout: the write end */
        sbx_launched l;
        if (sbx_launch("/bin/sh", argv, envp, fds, &l) != 0)
            _exit(12);
        close(0); /* our copy of the write end: the program's is the last */
        char buf[64];
        read_all(1, buf, sizeof buf);
        int st = 0;
        waitpid(l.pid, &st, 0);
        sbx_launch_release(&l);
        _exit(strcmp(buf, "crossed\n") == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 13);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The launched child l ended 127 after writing line to the stderr read from fd (closed here),
 * and sbx_launch_explain turns that line into explained. */
static void expect_explained_127(int fd, sbx_launched *l, const char *line, const char *explained)
{
    char err[512];
    read_all(fd, err, sizeof err);
    close(fd);
    int st = 0;
    assert_int_equal(waitpid(l->pid, &st, 0), l->pid);
    sbx_launch_release(l);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 127);
    assert_string_equal(err, line);
    err[strlen(err) - 1] = '\0';
    sbx_launch_explain(err, sizeof err);
    assert_string_equal(err, explained);
}

static void test_launch_failed_exec_is_explained(void **state)
{
    (void)state;
    int pe[2];
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    char *const argv[] = {"nothing", NULL};
    char *const envp[] = {NULL};
    const int fds[3] = {devnull, devnull, pe[1]};
    sbx_launched l;
    assert_int_equal(sbx_launch("/nonexistent/program", argv, envp, fds, &l), 0);
    close(pe[1]);
    close(devnull);
    char line[128], explained[128];
    snprintf(line, sizeof line, "cannot run /nonexistent/program: execve error %d\n", ENOENT);
    snprintf(explained, sizeof explained, "cannot run /nonexistent/program: %s", strerror(ENOENT));
    expect_explained_127(pe[0], &l, line, explained);
}

/* A descriptor the child cannot take (closed since) ends it with 127 and a line saying so on the
 * stderr given (before: it exited 127 without a word). */
static void test_launch_descriptor_it_cannot_take_is_explained(void **state)
{
    (void)state;
    int pe[2];
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int gone = dup(devnull);
    assert_true(gone > 2);
    close(gone);
    char *const argv[] = {"true", NULL};
    char *const envp[] = {NULL};
    const int fds[3] = {gone, devnull, pe[1]};
    sbx_launched l;
    int rc = sbx_launch("/bin/true", argv, envp, fds, &l);
    close(pe[1]);
    close(devnull);
    if (rc != 0) { /* posix_spawn's path (no raw system calls here) says so at once */
        assert_int_equal(rc, EBADF);
        close(pe[0]);
        return;
    }
    char line[160], explained[160];
    snprintf(line, sizeof line, "cannot run /bin/true: descriptor error %d\n", EBADF);
    snprintf(explained, sizeof explained,
             "cannot run /bin/true: cannot hand it its descriptors: %s", strerror(EBADF));
    expect_explained_127(pe[0], &l, line, explained);
}

static void test_launch_explain_leaves_other_text_alone(void **state)
{
    (void)state;
    const char *texts[] = {"sbx-agent boot: cannot write the user namespace id map",
                           "cannot run x: execve error ", "cannot run x: execve error 0",
                           "cannot run x: execve error 99999",
                           "prefix cannot run x: execve error 2"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", texts[i]);
        sbx_launch_explain(buf, sizeof buf);
        assert_string_equal(buf, texts[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launch_hands_exactly_three_descriptors),
        cmocka_unit_test(test_launch_program_starts_with_every_signal_blocked),
        cmocka_unit_test(test_launch_takes_crossed_descriptors_of_0_and_1),
        cmocka_unit_test(test_launch_failed_exec_is_explained),
        cmocka_unit_test(test_launch_descriptor_it_cannot_take_is_explained),
        cmocka_unit_test(test_launch_explain_leaves_other_text_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
