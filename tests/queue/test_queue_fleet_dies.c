/* test_queue_fleet_dies.c - a test killed before its teardown (ctest's timeout sends SIGKILL; a
 * crash is the same) leaves none of its fleet's processes behind: a child process plays the
 * test, starts nats-server and one sbx-worker through the fleet fixture, and is killed with
 * SIGKILL; both must be gone within a few seconds (die_with_parent.h). Before, they ran on
 * until someone killed them, holding their ports, temp dir and CPU.
 *
 * This process is a child subreaper, so the orphans come to it: it can reap them, tell a dead
 * daemon from a zombie, and kill and reap any that survived.
 *
 * usage: test_queue_fleet_dies PATH/sbx-worker
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "queue/fleet.h"

/* How long the daemons may take to die once the test did. */
#define GONE_WITHIN_MS 5000

static const char *worker_bin;

typedef struct started {
    char dir[256];
    pid_t pid[2]; /* nats-server, sbx-worker */
} started;

/* The killed test: starts the fleet, reports what it started, and waits to be killed. */
static void play_the_test(int report)
{
    static fleet F;
    fleet_init(&F, worker_bin);
    fleet_start_nats(&F, 1);
    fleet_start_worker(&F, 0);
    started s;
    memset(&s, 0, sizeof s);
    snprintf(s.dir, sizeof s.dir, "%s", F.dir);
    s.pid[0] = F.nats_pid[0];
    s.pid[1] = F.worker_pid[0];
    if (write(report, &s, sizeof s) != (ssize_t)sizeof s)
        _exit(1);
    for (;;)
        pause();
}

/* pid is among the reaped. */
static bool reaped(pid_t pid, pid_t *gone, int n_gone)
{
    for (int i = 0; i < n_gone; i++)
        if (gone[i] == pid)
            return true;
    return false;
}

static void test_queue_fleet_dies_with_its_test(void **state)
{
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t test = fork();
    assert_true(test >= 0);
    if (test == 0) {
        close(p[0]);
        play_the_test(p[1]);
    }
    close(p[1]);
    started s;
    ssize_t n = read(p[0], &s, sizeof s);
    close(p[0]);
    if (n != (ssize_t)sizeof s) {
        kill(test, SIGKILL);
        waitpid(test, NULL, 0);
        fail_msg("the fleet did not start (%zd)", n);
    }
    assert_true(s.pid[0] > 0 && s.pid[1] > 0);
    assert_int_equal(kill(test, SIGKILL), 0);
    assert_int_equal(waitpid(test, NULL, 0), test);

    /* Reap the orphans as they die: a zombie still answers kill(pid, 0). */
    pid_t gone[8];
    int n_gone = 0;
    for (int waited = 0; waited < GONE_WITHIN_MS; waited += 50) {
        for (pid_t w; n_gone < 8 && (w = waitpid(-1, NULL, WNOHANG)) > 0;)
            gone[n_gone++] = w;
        if (reaped(s.pid[0], gone, n_gone) && reaped(s.pid[1], gone, n_gone))
            break;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 50 * 1000000};
        nanosleep(&ts, NULL);
    }
    bool alive[2];
    for (int i = 0; i < 2; i++) {
        alive[i] = !reaped(s.pid[i], gone, n_gone);
        if (alive[i]) { /* ours now (the subreaper's): stop and reap it */
            kill(s.pid[i], SIGKILL);
            waitpid(s.pid[i], NULL, 0);
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s.dir);
    if (strncmp(s.dir, "/tmp/sbx-queue-", 15) == 0 && system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", s.dir);
    if (alive[0] || alive[1])
        fail_msg("%d ms after the test was killed: nats-server %s, sbx-worker %s", GONE_WITHIN_MS,
                 alive[0] ? "still running" : "gone", alive[1] ? "still running" : "gone");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/sbx-worker\n", argv[0]);
        return 2;
    }
    worker_bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_fleet_dies_with_its_test),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
