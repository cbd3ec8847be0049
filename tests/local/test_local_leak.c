/* test_local_leak.c - 200 create -> exec -> destroy cycles leave nothing behind: no live
 * process of ours, no mount naming our runtime directory, no cgroup, no state directory; and
 * the fixture's close, and the test binary's exit, remove a sandbox a failed test left.
 */
#include "tests/local/local_helpers.h"

#include <dirent.h>
#include <sys/wait.h>

/* Enough cycles to expose a per-sandbox leak of any kind (fds, pids, cgroups) while keeping
 * the test to seconds. */
#define LEAK_CYCLES 200

/* Live (non-zombie) processes whose command line names dir. */
static int live_processes_naming(const char *dir)
{
    DIR *d = opendir("/proc");
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *p = strrchr(buf, ')');
        if (!p || p[2] == 'Z')
            continue;
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        f = fopen(path, "r");
        if (!f)
            continue;
        got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < got; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[got] = '\0';
        if (strstr(buf, dir))
            n++;
    }
    closedir(d);
    return n;
}

static int mounts_naming(const char *dir)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, dir) != NULL;
    if (f)
        fclose(f);
    return n;
}

/* Whether any cgroup directory named `id` exists under the v1/v2 "sbx" parents. Concurrent
 * tests create sandboxes there too, so we look for our own ids only. */
static bool cgroup_exists(const char *id)
{
    static const char *ctl[] = {"memory", "pids", "cpu"};
    char line[1024];
    FILE *f = fopen("/proc/self/cgroup", "r");
    bool found = false;
    while (f && fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *own = c2 + 1;
        own[strcspn(own, "\n")] = '\0';
        if (strcmp(own, "/") == 0)
            own = "";
        for (size_t i = 0; i < 3; i++) {
            if (!strstr(c1 + 1, ctl[i]))
                continue;
            char path[2048];
            snprintf(path, sizeof path, "/sys/fs/cgroup/%s%s/sbx/%s", ctl[i], own, id);
            found = found || access(path, F_OK) == 0;
        }
    }
    if (f)
        fclose(f);
    char path[256];
    snprintf(path, sizeof path, "/sys/fs/cgroup/sbx/%s", id);
    return found || access(path, F_OK) == 0;
}

static void test_local_200_cycles_leave_nothing(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    static char ids[LEAK_CYCLES][32];
    for (int i = 0; i < LEAK_CYCLES; i++) {
        sbx_sandbox *sb = lt_create(&e);
        snprintf(ids[i], sizeof ids[i], "%s", sb->id);
        sbx_result *r = lt_run(&e, sb, "true");
        assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
        sbx_message_free((ProtobufCMessage *)r);
        lt_destroy(&e, sb);
    }
    assert_int_equal(lt_count_dir(e.runtime_dir), 0);
    assert_int_equal(live_processes_naming(e.runtime_dir), 0);
    assert_int_equal(mounts_naming(e.runtime_dir), 0);
    for (int i = 0; i < LEAK_CYCLES; i++)
        if (cgroup_exists(ids[i]))
            fail_msg("cgroup of %s is still there", ids[i]);
    lt_close(&e);
}

/* A test that fails between its create and its destroy (an assertion leaves it at once) must
 * not leave the sandbox on the host: lt_close, run by the group's teardown, destroys it. Seen:
 * a failed escape test left a live agent with a one-day idle TTL, its cgroups and its dir. */
static void test_lt_close_destroys_what_a_failed_test_left(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e); /* never destroyed, as after a failed assertion */
    char id[32], dir[sizeof e.runtime_dir];
    snprintf(id, sizeof id, "%s", sb->id);
    snprintf(dir, sizeof dir, "%s", e.runtime_dir);
    assert_true(live_processes_naming(dir) > 0); /* the agent (and its spare) */
    e.ops->sandbox_close(sb);
    lt_close(&e);
    assert_int_equal(live_processes_naming(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_false(cgroup_exists(id));
}

/* A test that fails without a group teardown (its own lt_close never runs) must not leave its
 * sandbox either: the binary's exit destroys it (lt_track). A child here makes a sandbox and
 * ends with exit(), as main does once cmocka has run a failed test. Seen: a failed test of
 * test_local_provider left its agent, cgroups and uid slot for a day. */
static void test_exit_destroys_what_a_failed_test_left(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a failure here must end this child, not go on with the parent's tests */
        setenv("CMOCKA_TEST_ABORT", "1", 1);
        close(p[0]);
        lt_env e;
        lt_open(&e);
        sbx_sandbox *sb = lt_create(&e);
        char line[128];
        int n = snprintf(line, sizeof line, "%s %s\n", e.runtime_dir, sb->id);
        (void)!write(p[1], line, (size_t)n);
        close(p[1]);
        exit(1); /* no lt_destroy, no lt_close */
    }
    close(p[1]);
    char line[128] = "";
    ssize_t got = read(p[0], line, sizeof line - 1);
    close(p[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(got > 0);
    char dir[64], id[32];
    assert_int_equal(sscanf(line, "%63s %31s", dir, id), 2);
    assert_true(WIFEXITED(st));
    assert_int_equal(live_processes_naming(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_false(cgroup_exists(id));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_200_cycles_leave_nothing),
        cmocka_unit_test(test_lt_close_destroys_what_a_failed_test_left),
        cmocka_unit_test(test_exit_destroys_what_a_failed_test_left),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
