/* test_local_cgroup_v2.c - the local provider's cgroup v2 paths, on a host that runs v1: the
 * test moves into a mount namespace of its own and mounts the cgroup2 hierarchy at
 * /sys/fs/cgroup there, so the provider (and the sandboxes' boot, which inherits the
 * namespace) see a v2 host. This hybrid host's v2 hierarchy offers none of memory, pids and
 * cpu (they serve v1), so memory/pids/cpu limits are unenforceable here and refused under
 * strict; what runs is the rest of the v2 code: the sandbox's cgroup, each command's own
 * cgroup handed to the sandbox's root, cgroup.kill of a timed-out command whose processes
 * setsid and fork on, and the freezer (cgroup.freeze) for pause and resume.
 * Skipped (exit 0, with the reason) where cgroup2 cannot be mounted.
 */
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/fixture.h"
#include "sbx/engine.h"
#include "support/die_with_parent.h"

/* Generous per-request limit (2 shared cores; ASan slows the host side). */
#define V2_TIMEOUT_MS 120000

typedef struct v2 {
    sbx_config *cfg;
    sbx_engine *e;
} v2;

static int setup(void **state)
{
    v2 *f = calloc(1, sizeof(*f));
    f->cfg = fx_config_new();
    sbx_profile_config *p = fx_add_profile(f->cfg, "l", "local");
    p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->policy->timeout_ms = V2_TIMEOUT_MS;
    p = fx_add_profile(f->cfg, "once", "local");
    p->scope = SBX_SCOPE_PER_CALL;
    p->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->policy->timeout_ms = V2_TIMEOUT_MS;
    f->e = fx_engine(f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    v2 *f = *state;
    sbx_engine_free(f->e);
    fx_config_free(f->cfg);
    free(f);
    return 0;
}

static sbx_completion *submit(v2 *f, sbx_request *r)
{
    sbx_completion *c = sbx_engine_process(f->e, r, NULL);
    sbx_request_free(r);
    assert_non_null(c);
    return c;
}

static sbx_completion *run_in(v2 *f, const sbx_session_handle *h, const char *line,
                              uint64_t timeout_ms)
{
    sbx_request *r = fx_shell("l", line);
    if (h != NULL)
        fx_session(r, h);
    if (timeout_ms) {
        if (r->policy == NULL) {
            r->policy = malloc(sizeof(*r->policy));
            sbx__v1__policy__init(r->policy);
        }
        r->policy->timeout_ms = timeout_ms;
    }
    return submit(f, r);
}

static sbx_session_handle *new_session(v2 *f)
{
    sbx_completion *c = run_in(f, NULL, "true", 0);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("create: %s", c->error);
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);
    return h;
}

/* Tasks in the cgroup tree at dir that are not the sandbox's agent (PID 1 and its spare). */
static int foreign_tasks(const char *dir, int depth)
{
    int n = 0;
    char path[1024];
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    FILE *p = fopen(path, "r");
    if (p != NULL) {
        long pid;
        while (fscanf(p, "%ld", &pid) == 1) {
            char comm[64] = "";
            snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
            FILE *c = fopen(path, "r");
            if (c != NULL) {
                if (fgets(comm, sizeof(comm), c) == NULL)
                    comm[0] = '\0';
                fclose(c);
            }
            if (comm[0] && strncmp(comm, "sbx-agent", 9) != 0) {
                print_message("left in %s: pid %ld %s", dir, pid, comm);
                n++;
            }
        }
        fclose(p);
    }
    DIR *d = depth < 3 ? opendir(dir) : NULL;
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL)
        if (de->d_type == DT_DIR && de->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            n += foreign_tasks(path, depth + 1);
        }
    if (d != NULL)
        closedir(d);
    return n;
}

/* The provider found v2: the sandbox's cgroup is under /sys/fs/cgroup/sbx. */
static void sandbox_cgroup(const sbx_session_handle *h, char *out, size_t cap)
{
    snprintf(out, cap, "/sys/fs/cgroup/sbx/%s", h->sandbox_id);
    if (access(out, F_OK) != 0)
        fail_msg("no v2 cgroup %s for the sandbox (the provider did not use v2)", out);
}

/* A timed-out command whose processes setsid and fork on leaves nothing: its cgroup is killed
 * whole (cgroup.kill), and the sandbox stays usable. */
static void test_v2_timeout_kills_setsid_fork_chains(void **state)
{
    v2 *f = *state;
    sbx_session_handle *h = new_session(f);
    char dir[256];
    sandbox_cgroup(h, dir, sizeof(dir));
    sbx_completion *c =
        run_in(f, h,
               "for i in 1 2 3 4; do setsid sh -c 'while :; do sh -c \"sleep 5 &\"; "
               "sleep 0.05; done' & done; sleep 100",
               1500);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    sbx_completion_free(c);
    assert_int_equal(foreign_tasks(dir, 0), 0);
    c = run_in(f, h, "echo alive", 0);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_string_equal(fx_stdout(c), "alive\n");
    sbx_completion_free(c);
    sbx_completion_free(submit(f, fx_destroy(h)));
    assert_int_not_equal(access(dir, F_OK), 0);
    sbx_message_free((ProtobufCMessage *)h);
}

/* The sandbox cgroups (l-...) under /sys/fs/cgroup/sbx; one's name in id when there is one. */
static int sandbox_cgroups(char *id, size_t cap)
{
    DIR *d = opendir("/sys/fs/cgroup/sbx");
    int n = 0;
    for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;)
        if (strncmp(de->d_name, "l-", 2) == 0 && n++ == 0)
            snprintf(id, cap, "%.40s", de->d_name);
    if (d != NULL)
        closedir(d);
    return n;
}

/* Whether a command's cgroup under the sandbox's (dir) holds a process. */
static bool command_runs(const char *dir)
{
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *de; d != NULL && !found && (de = readdir(d)) != NULL;) {
        char path[600];
        if (strncmp(de->d_name, "cmd-", 4) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s/cgroup.procs", dir, de->d_name);
        FILE *p = fopen(path, "r");
        long pid;
        found = p != NULL && fscanf(p, "%ld", &pid) == 1;
        if (p != NULL)
            fclose(p);
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* The owner of a one-shot sandbox killed mid-exec: on v2 the sandbox's reaper inherited the init
 * from the launcher it forked into the cgroup, and ends it all the same (agent/reap.c). */
static void test_v2_owner_killed_mid_exec_ends_its_one_shot(void **state)
{
    v2 *f = *state;
    pid_t parent = getpid();
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        sbx_engine *e = fx_engine(f->cfg);
        sbx_completion *c = sbx_engine_process(e, fx_shell("once", "sleep 60"), NULL);
        (void)c;
        _exit(0);
    }
    char id[64] = "", dir[300];
    bool running = false;
    for (int i = 0; i < 12000 && !running; i++) {
        usleep(10000);
        if (sandbox_cgroups(id, sizeof(id)) == 0)
            continue;
        snprintf(dir, sizeof(dir), "/sys/fs/cgroup/sbx/%s", id);
        running = command_runs(dir);
    }
    assert_true(running);
    kill(child, SIGKILL);
    int ws;
    waitpid(child, &ws, 0);
    int left = 1;
    for (int i = 0; i < 500 && left > 0; i++) {
        usleep(10000);
        left = sandbox_cgroups(id, sizeof(id));
    }
    assert_int_equal(left, 0);
    char state_dir[600];
    snprintf(state_dir, sizeof(state_dir), "%s/%s", fx_tmpdir(f->cfg), id);
    assert_int_not_equal(access(state_dir, F_OK), 0);
}

static bool v2_frozen(const char *dir)
{
    char path[300], buf[256] = "";
    snprintf(path, sizeof(path), "%s/cgroup.events", dir);
    FILE *e = fopen(path, "r");
    assert_non_null(e);
    size_t n = fread(buf, 1, sizeof(buf) - 1, e);
    fclose(e);
    buf[n] = '\0';
    return strstr(buf, "frozen 1") != NULL;
}

/* Pause freezes the sandbox's cgroup (cgroup.freeze); the next command thaws it. */
static void test_v2_pause_and_resume(void **state)
{
    v2 *f = *state;
    sbx_session_handle *h = new_session(f);
    char dir[256];
    sandbox_cgroup(h, dir, sizeof(dir));
    sbx_request *r = fx_shell("l", "true");
    sbx_message_free((ProtobufCMessage *)r->run_command);
    r->run_command = NULL;
    r->pause = malloc(sizeof(*r->pause));
    sbx__v1__pause_sandbox__init(r->pause);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_PAUSE;
    fx_session(r, h);
    sbx_completion *c = submit(f, r);
    if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fail_msg("pause: %s", c->error);
    sbx_completion_free(c);
    assert_true(v2_frozen(dir));
    c = run_in(f, h, "echo thawed", 0);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_string_equal(fx_stdout(c), "thawed\n");
    assert_non_null(strstr(c->notice, "was paused"));
    sbx_completion_free(c);
    assert_false(v2_frozen(dir));
    sbx_completion_free(submit(f, fx_destroy(h)));
    sbx_message_free((ProtobufCMessage *)h);
}

/* A limit whose controller this v2 hierarchy lacks is refused under strict, naming it. */
static void test_v2_missing_controller_limits_are_refused(void **state)
{
    v2 *f = *state;
    FILE *cf = fopen("/sys/fs/cgroup/cgroup.controllers", "r");
    char avail[256] = "";
    if (cf != NULL) {
        if (fgets(avail, sizeof(avail), cf) == NULL)
            avail[0] = '\0';
        fclose(cf);
    }
    if (strstr(avail, "memory") != NULL)
        skip(); /* a real v2 host: the limit is enforced, nothing to refuse */
    sbx_request *r = fx_shell("l", "true");
    r->policy = malloc(sizeof(*r->policy));
    sbx__v1__policy__init(r->policy);
    r->policy->memory_mb = 64;
    sbx_completion *c = submit(f, r);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_non_null(strstr(c->error, "memory_mb"));
    sbx_completion_free(c);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("skipped: needs root to mount cgroup2\n");
        return 0;
    }
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        printf("skipped: no private mount namespace here: %s\n", strerror(errno));
        return 0;
    }
    if (mount("sbx-test-cgroup2", "/sys/fs/cgroup", "cgroup2", 0, NULL) != 0) {
        printf("skipped: this kernel does not mount cgroup2 here: %s\n", strerror(errno));
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_v2_timeout_kills_setsid_fork_chains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_pause_and_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_v2_owner_killed_mid_exec_ends_its_one_shot, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_v2_missing_controller_limits_are_refused, setup,
                                        teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir("/sys/fs/cgroup/sbx"); /* the hierarchy is the host's too: leave no parent behind */
    return rc;
}
