/* test_local_provider.c - behaviour of the local provider through its ops table: create, run,
 * files, stateful python, timeouts, attach, destroy. One behaviour per test.
 */
#include "tests/local/local_helpers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "providers/common/agent_client.h"

static int setup(void **state)
{
    lt_env *e = calloc(1, sizeof *e);
    lt_open(e);
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    lt_env *e = *state;
    lt_close(e);
    free(e);
    return 0;
}

static void test_local_runs_a_command_and_reports_its_exit(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb, "echo hello; echo oops >&2; exit 3");
    assert_int_equal(r->exit_code, 3);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    assert_true(lt_stdout_has(r, "hello"));
    assert_true(lt_stderr_has(r, "oops"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_runs_python3(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb, "python3 -c 'print(6*7)'");
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_OK);
    assert_true(lt_stdout_has(r, "42"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_program_runs_as_unprivileged_uid(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb,
                           "id -u; grep -E '^Cap(Prm|Eff|Bnd|Amb|Inh)' /proc/self/status;"
                           " grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status");
    if (getuid() == 0)
        assert_true(lt_stdout_has(r, "1000\n"));
    assert_true(lt_stdout_has(r, "CapPrm:\t0000000000000000"));
    assert_true(lt_stdout_has(r, "CapEff:\t0000000000000000"));
    assert_true(lt_stdout_has(r, "CapBnd:\t0000000000000000"));
    assert_true(lt_stdout_has(r, "CapAmb:\t0000000000000000"));
    assert_true(lt_stdout_has(r, "CapInh:\t0000000000000000"));
    assert_true(lt_stdout_has(r, "NoNewPrivs:\t1"));
    assert_true(lt_stdout_has(r, "Seccomp:\t2"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

/* The host pid of the agent (PID 1) of the one sandbox in e's runtime dir, from its meta file;
 * 0 when there is none. */
static long agent_pid(const lt_env *e)
{
    DIR *d = opendir(e->runtime_dir);
    assert_non_null(d);
    char meta[512] = "";
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (strncmp(de->d_name, "l-", 2) == 0)
            snprintf(meta, sizeof meta, "%s/%s/meta", e->runtime_dir, de->d_name);
    closedir(d);
    char line[200];
    long pid = 0;
    FILE *f = meta[0] != '\0' ? fopen(meta, "r") : NULL;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "pid ", 4) == 0)
            pid = strtol(line + 4, NULL, 10);
    if (f != NULL)
        fclose(f);
    return pid;
}

/* The line of /proc/PID/status starting with key, read from the host (a program of the sandbox
 * cannot see PID 1 in its /proc); "" when there is none. */
static void agent_status(long pid, const char *key, char *out, size_t cap)
{
    char line[200], status[64];
    out[0] = '\0';
    snprintf(status, sizeof status, "/proc/%ld/status", pid);
    FILE *f = pid > 1 ? fopen(status, "r") : NULL;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, strlen(key)) == 0)
            snprintf(out, cap, "%s", line);
    if (f != NULL)
        fclose(f);
}

/* The agent empties its own bounding set at start: nothing it could ever execve regains a
 * capability, and every fork (a spare, a program) has none left to drop (82 prctl calls per
 * command before). It keeps its own effective capabilities: mounts and cgroups still work. */
static void test_local_agent_keeps_an_empty_bounding_set(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    char bnd[256];
    agent_status(agent_pid(e), "CapBnd:", bnd, sizeof bnd);
    sbx_result *r = lt_run(e, sb, "grep CapBnd /proc/self/status; echo ran");
    bool ran = lt_stdout_has(r, "CapBnd:\t0000000000000000") && lt_stdout_has(r, "ran");
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    assert_string_equal(bnd, "CapBnd:\t0000000000000000\n");
    assert_true(ran);
}

/* Once it serves, the agent keeps only the capabilities it uses (kill, fsuid and program ids,
 * /proc of programs, its own directories): no CAP_SYS_ADMIN, CAP_NET_ADMIN or CAP_NET_RAW,
 * which would open nf_tables, packet sockets and the like to whoever took the agent over by
 * what a program writes. And no_new_privs. */
static void test_local_agent_drops_the_capabilities_it_does_not_use(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb, "echo ran");
    bool ran = lt_stdout_has(r, "ran");
    sbx_message_free((ProtobufCMessage *)r);
    long pid = agent_pid(e);
    char eff[256], prm[256], nnp[256];
    agent_status(pid, "CapEff:", eff, sizeof eff);
    agent_status(pid, "CapPrm:", prm, sizeof prm);
    agent_status(pid, "NoNewPrivs:", nnp, sizeof nnp);
    lt_destroy(e, sb);
    assert_true(ran);
    /* CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, FSETID, KILL, SETGID, SETUID (bits 0-7)
     * and SYS_PTRACE (19) */
    assert_string_equal(eff, "CapEff:\t00000000000800ff\n");
    assert_string_equal(prm, "CapPrm:\t00000000000800ff\n");
    assert_string_equal(nnp, "NoNewPrivs:\t1\n");
}

/* No namespace of any kind can be made inside the sandbox: every kind's count in its user
 * namespace is 0. The programs' filter refuses unshare and namespace clones already; this also
 * covers the agent, whose filter lets clone3 (and its unreadable flags) through. */
static void test_local_no_namespace_can_be_made_inside(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb,
                           "cd /proc/sys/user && for k in user mnt pid ipc uts net cgroup time; "
                           "do echo \"$k=$(cat max_${k}_namespaces)\"; done");
    static const char *const want[] = {"user=0\n", "mnt=0\n", "pid=0\n",    "ipc=0\n",
                                       "uts=0\n",  "net=0\n", "cgroup=0\n", "time=0\n"};
    bool all = true;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        all = all && lt_stdout_has(r, want[i]);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    assert_true(all);
}

/* Nothing of one exec carries into the next: the agent resets the exec request it decodes
 * field by field instead of zeroing it whole (fewer pages written after each spare's fork), so
 * an exec with argv, env, cwd and stdin is followed by one with none of them. */
static void test_local_an_exec_inherits_nothing_of_the_previous_one(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"/bin/sh", "-c", "echo \"$FOO\"; pwd; cat", "extra"};
    op.n_argv = 4;
    op.argv = argv;
    Sbx__V1__RunCommand__EnvEntry env = SBX__V1__RUN_COMMAND__ENV_ENTRY__INIT;
    env.key = "FOO";
    env.value = "first";
    Sbx__V1__RunCommand__EnvEntry *envp[] = {&env};
    op.n_env = 1;
    op.env = envp;
    op.cwd = "/tmp";
    op.stdin.data = (uint8_t *)"in";
    op.stdin.len = 2;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_status st = e->ops->run_command(sb, &op, &o, r, &err);
    bool first = st == SBX_OK && lt_stdout_has(r, "first\n/tmp\nin");
    sbx_message_free((ProtobufCMessage *)r);
    sbx_result *r2 = lt_run(e, sb, "echo \"[${FOO-unset}] [$0] [$#]\"; pwd; cat");
    bool second = lt_stdout_has(r2, "[unset] [/bin/sh] [0]\n/workspace\n") && r2->stdout.len == 33;
    if (!second)
        fprintf(stderr, "second exec printed: %.*s\n", (int)r2->stdout.len,
                (const char *)r2->stdout.data);
    sbx_message_free((ProtobufCMessage *)r2);
    lt_destroy(e, sb);
    assert_true(first);
    assert_true(second);
}

/* An agent with no request for a second gives back the pages of its per-request buffers (an
 * exec's decoded request alone is 59 KiB), and serves the next request as before. */
static void test_local_idle_agent_gives_back_its_request_buffers(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb, "echo one");
    sbx_message_free((ProtobufCMessage *)r);
    char line[256];
    long pid = agent_pid(e), busy_kb = 0, idle_kb = 0;
    agent_status(pid, "RssAnon:", line, sizeof line);
    sscanf(line, "RssAnon: %ld", &busy_kb);
    usleep(1600 * 1000); /* the agent's AGENT_TRIM_IDLE_MS is 1 s */
    agent_status(pid, "RssAnon:", line, sizeof line);
    sscanf(line, "RssAnon: %ld", &idle_kb);
    r = lt_run(e, sb, "echo two");
    bool again = lt_stdout_has(r, "two\n");
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    if (idle_kb > busy_kb - 40)
        fprintf(stderr, "agent RssAnon after an exec %ld KiB, idle %ld KiB\n", busy_kb, idle_kb);
    assert_true(busy_kb > 0 && idle_kb > 0);
    assert_true(idle_kb <= busy_kb - 40);
    assert_true(again);
}

/* Each sandbox maps its ids to a host range of its own (its uid slot), so the kernel's per-user
 * counts of two sandboxes are never the same user's. */
static void test_local_sandboxes_map_distinct_host_uids(void **state)
{
    lt_env *e = *state;
    if (getuid() != 0)
        skip(); /* rootless: the invoking user's one uid, by construction */
    sbx_sandbox *a = lt_create(e), *b = lt_create(e);
    unsigned long base[2] = {0, 0}, count[2] = {0, 0};
    sbx_sandbox *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        sbx_result *r = lt_run(e, both[i], "cat /proc/self/uid_map");
        char *text = strndup((const char *)r->stdout.data, r->stdout.len);
        unsigned long inside = 1;
        assert_int_equal(sscanf(text, "%lu %lu %lu", &inside, &base[i], &count[i]), 3);
        assert_int_equal(inside, 0);
        free(text);
        sbx_message_free((ProtobufCMessage *)r);
    }
    lt_destroy(e, b);
    lt_destroy(e, a);
    assert_int_equal(count[0], 65536);
    assert_int_equal(count[1], 65536);
    assert_true(base[0] != 0 && base[1] != 0);
    /* disjoint ranges */
    assert_true(base[0] + count[0] <= base[1] || base[1] + count[1] <= base[0]);
}

static void test_local_cgroup_namespace_is_rooted_at_the_sandbox(void **state)
{
    lt_env *e = *state;
    if (getuid() != 0)
        skip();
    sbx_sandbox *sb = lt_create(e);
    /* inside: every hierarchy shows "/" (the sandbox's own cgroup), or the command's own
     * cgroup below it ("/cmd-N", where the agent has one); the host path is hidden */
    sbx_result *r = lt_run(e, sb,
                           "grep -v ':/$' /proc/self/cgroup | grep -v ':/cmd-[0-9]*$' | wc -l; "
                           "grep -c sbx /proc/self/cgroup");
    assert_true(lt_stdout_has(r, "0\n0\n"));
    sbx_message_free((ProtobufCMessage *)r);
    /* outside: the agent is a member of the sandbox's memory cgroup */
    char meta[512], line[600], procs[700] = "";
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    long pid = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "pid %ld", &pid);
        if (strncmp(line, "cgroup ", 7) == 0 && strstr(line, "/memory/")) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(procs, sizeof procs, "%s/cgroup.procs", line + 7);
        }
    }
    fclose(f);
    if (procs[0]) {
        f = fopen(procs, "r");
        assert_non_null(f);
        bool member = false;
        long p;
        while (fscanf(f, "%ld", &p) == 1)
            member = member || p == pid;
        fclose(f);
        assert_true(member);
    }
    lt_destroy(e, sb);
}

/* Processes in the sandbox's memory cgroup (host view), -1 when it has none (v2, rootless). */
static int sandbox_procs(sbx_sandbox *sb)
{
    char meta[512], line[600], procs[700] = "";
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cgroup ", 7) == 0 && strstr(line, "/memory/")) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(procs, sizeof procs, "%s/cgroup.procs", line + 7);
        }
    fclose(f);
    if (!procs[0])
        return -1;
    f = fopen(procs, "r");
    assert_non_null(f);
    int n = 0;
    long p;
    while (fscanf(f, "%ld", &p) == 1)
        n++;
    fclose(f);
    return n;
}

/* The per-command cgroups below the sandbox's pids cgroup (v1), names each followed by ' '. */
static void command_cgroups(sbx_sandbox *sb, char *out, size_t cap)
{
    char meta[512], line[600], dir[700] = "";
    out[0] = '\0';
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cgroup ", 7) == 0 && strstr(line, "/pids/")) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(dir, sizeof dir, "%s", line + 7);
        }
    fclose(f);
    DIR *d = dir[0] ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (e->d_type == DT_DIR && strncmp(e->d_name, "cmd-", 4) == 0 &&
            strlen(out) + strlen(e->d_name) + 2 <= cap) {
            strcat(out, e->d_name);
            strcat(out, " ");
        }
    if (d)
        closedir(d);
}

/* Waits (a loaded host: generously) until the sandbox holds want processes; returns the last
 * count seen. */
static int wait_procs(sbx_sandbox *sb, int want)
{
    int n = sandbox_procs(sb);
    for (int i = 0; i < 2000 && n != want; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        n = sandbox_procs(sb);
    }
    return n;
}

/* The first command's process is forked (the spare, which joins its cgroup ahead) as soon as
 * the agent listens, before any command; a session's agent forks the next after each command,
 * a one-shot (scope per_call) sandbox's agent none. */
static void test_local_spare_is_forked_at_start_and_not_after_a_one_shot(void **state)
{
    (void)state;
    if (getuid() != 0)
        skip(); /* rootless: no delegated cgroup, no spare */
    for (int one_shot = 0; one_shot < 2; one_shot++) {
        lt_env env = {0};
        lt_open_scoped(&env, one_shot ? "test-one-shot" : "test-session",
                       one_shot ? SBX_SCOPE_PER_CALL : SBX_SCOPE_PER_SESSION);
        sbx_sandbox *sb = lt_create(&env);
        int at_start = wait_procs(sb, 2); /* the agent and its spare, no command yet */
        /* the spare's cgroup is the one the agent's start-up probe made (none made and
         * removed before it): the only per-command cgroup is the first */
        char kids[256];
        command_cgroups(sb, kids, sizeof kids);
        sbx_result *r = lt_run(&env, sb, "true");
        int code = r->exit_code;
        sbx_message_free((ProtobufCMessage *)r);
        int after = wait_procs(sb, one_shot ? 1 : 2); /* one-shot: the agent alone */
        lt_destroy(&env, sb);
        lt_close(&env);
        if (at_start < 0)
            skip(); /* no v1 memory cgroup to count in */
        assert_int_equal(at_start, 2);
        assert_string_equal(kids, "cmd-1 ");
        assert_int_equal(code, 0);
        assert_int_equal(after, one_shot ? 1 : 2);
    }
}

/* A per_call sandbox is never paused (pause names a session), so on v1 it gets no freezer
 * cgroup (one cgroup fewer to make, join and remove per one-shot) and its profile does not
 * declare pause; a per_session one has both. */
static void test_local_per_call_sandbox_has_no_freezer(void **state)
{
    (void)state;
    if (getuid() != 0)
        skip(); /* rootless: no cgroups */
    int freezers[2] = {0, 0};
    bool pause[2] = {false, false};
    for (int per_call = 0; per_call < 2; per_call++) {
        lt_env env = {0};
        lt_open_scoped(&env, per_call ? "test-calls" : "test-sessions",
                       per_call ? SBX_SCOPE_PER_CALL : SBX_SCOPE_PER_SESSION);
        sbx_capabilities *caps = malloc(sizeof *caps);
        assert_non_null(caps);
        sbx__v1__capabilities__init(caps);
        env.ops->capabilities(env.state, caps);
        pause[per_call] = caps->pause;
        sbx_message_free(&caps->base);
        sbx_sandbox *sb = lt_create(&env);
        char path[PATH_MAX], line[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/%s/meta", env.runtime_dir, sb->id);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof line, f) != NULL)
            freezers[per_call] += strncmp(line, "cgroup ", 7) == 0 && strstr(line, "/freezer/");
        fclose(f);
        sbx_result *r = lt_run(&env, sb, "true");
        assert_int_equal(r->exit_code, 0);
        sbx_message_free((ProtobufCMessage *)r);
        lt_destroy(&env, sb);
        lt_close(&env);
    }
    if (!pause[0])
        skip(); /* no v1 freezer hierarchy here */
    assert_int_equal(freezers[0], 1);
    assert_int_equal(freezers[1], 0);
    assert_false(pause[1]);
}

static void test_local_cpu_memory_pids_limits_reach_the_cgroups(void **state)
{
    lt_env *e = *state;
    if (getuid() != 0)
        skip(); /* rootless: refused under strict (test_local_rootless) */
    sbx_policy *p = lt_policy(300, 77);
    p->cpu = 0.5;
    sbx_sandbox *sb = lt_create_with(e, p);
    char meta[512], line[600];
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cgroup ", 7) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        const char *dir = line + 7;
        struct {
            const char *ctl, *file, *want;
        } checks[] = {
            {"/memory/", "memory.limit_in_bytes", "314572800"},
            {"/pids/", "pids.max", "77"},
            {"/cpu/", "cpu.cfs_quota_us", "50000"},
        };
        for (size_t i = 0; i < 3; i++) {
            if (!strstr(dir, checks[i].ctl))
                continue;
            char path[800], val[64] = "";
            snprintf(path, sizeof path, "%s/%s", dir, checks[i].file);
            FILE *v = fopen(path, "r");
            assert_non_null(v);
            assert_non_null(fgets(val, sizeof val, v));
            fclose(v);
            val[strcspn(val, "\n")] = '\0';
            assert_string_equal(val, checks[i].want);
            seen++;
        }
    }
    fclose(f);
    lt_destroy(e, sb);
    sbx_message_free((ProtobufCMessage *)p);
    if (seen == 0)
        skip(); /* a cgroup v2 host: the v1 file names checked here do not exist */
    assert_int_equal(seen, 3);
}

static void test_local_stateful_python_keeps_variables(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r;
    sbx_error err = {0};
    assert_int_equal(lt_py(e, sb, "x = 40\nx + 1", &r, &err), SBX_OK);
    assert_string_equal(r->value, "41");
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_equal(lt_py(e, sb, "print('x is', x)\nx * 2", &r, &err), SBX_OK);
    assert_true(lt_stdout_has(r, "x is 40"));
    assert_string_equal(r->value, "80");
    assert_int_equal(r->exit_code, 0);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_python_exception_is_a_result_with_traceback(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r;
    sbx_error err = {0};
    assert_int_equal(lt_py(e, sb, "1/0", &r, &err), SBX_OK);
    assert_int_not_equal(r->exit_code, 0);
    assert_true(lt_stderr_has(r, "ZeroDivisionError"));
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_equal(lt_py(e, sb, "def f(:\n  pass", &r, &err), SBX_OK);
    assert_int_not_equal(r->exit_code, 0);
    assert_true(lt_stderr_has(r, "SyntaxError"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_bash_code_runs_through_a_shell(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "bash";
    op.code = "for i in 1 2 3; do echo -n $i; done";
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    assert_int_equal(e->ops->run_code(sb, &op, &o, r, &err), SBX_OK);
    assert_true(lt_stdout_has(r, "123"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_timeout_kills_the_whole_tree(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r;
    sbx_error err = {0};
    /* a child that escapes the process group, and one that escapes the session */
    sbx_status st =
        lt_sh(e, sb, "(setsid sleep 300 &) ; (sh -c 'sleep 301' &); echo started; sleep 302", 1500,
              &r, &err);
    assert_int_equal(st, SBX_E_TIMEOUT);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    assert_true(lt_stdout_has(r, "started"));
    sbx_message_free((ProtobufCMessage *)r);
    r = lt_run(e, sb, "ps -eo args 2>/dev/null | grep -c '^sleep 30' || true");
    assert_true(lt_stdout_has(r, "0"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

static void test_local_long_argv_and_many_env_still_run(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    /* a 40 KB python -c script and 20 variables: beyond AgentExec's static fields */
    size_t n = 40000;
    char *script = malloc(n + 64);
    memset(script, ' ', n);
    const char *head = "import os\nprint(len(os.environ['V19']), \"it's\")";
    memcpy(script, head, strlen(head));
    script[n] = '\0';
    for (size_t i = strlen(head); i < n; i += 64)
        script[i] = '\n';
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"python3", "-c", script};
    op.argv = argv;
    op.n_argv = 3;
    Sbx__V1__RunCommand__EnvEntry entries[20], *ptrs[20];
    char names[20][8];
    char *value = malloc(2000);
    memset(value, 'v', 1999);
    value[1999] = '\0';
    for (int i = 0; i < 20; i++) {
        sbx__v1__run_command__env_entry__init(&entries[i]);
        snprintf(names[i], sizeof names[i], "V%d", i);
        entries[i].key = names[i];
        entries[i].value = value;
        ptrs[i] = &entries[i];
    }
    op.env = ptrs;
    op.n_env = 20;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    assert_int_equal(e->ops->run_command(sb, &op, &o, r, &err), SBX_OK);
    assert_true(lt_stdout_has(r, "1999 it's"));
    sbx_message_free((ProtobufCMessage *)r);
    free(value);
    free(script);
    lt_destroy(e, sb);
}

static void test_local_stdin_reaches_the_program(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"wc", "-c"};
    op.n_argv = 2;
    op.argv = argv;
    size_t n = 200000;
    uint8_t *data = malloc(n);
    memset(data, 'a', n);
    op.stdin.data = data;
    op.stdin.len = n;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    assert_int_equal(e->ops->run_command(sb, &op, &o, r, &err), SBX_OK);
    assert_true(lt_stdout_has(r, "200000"));
    free(data);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

/* A program that echoes its stdin (cat) gets all of it and prints all of it back: the client
 * sent the whole stdin before reading any output, the agent (writing the output to the
 * client) stopped reading the client's stdin frames, and past what the pipes and the socket
 * buffers hold both waited until the agent's send timeout dropped the client. */
static void test_local_stdin_echoed_back_in_full(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"cat"};
    op.n_argv = 1;
    op.argv = argv;
    size_t n = 3 * 1024 * 1024;
    uint8_t *data = malloc(n);
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)('a' + i % 26);
    op.stdin.data = data;
    op.stdin.len = n;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_status st = e->ops->run_command(sb, &op, &o, r, &err);
    if (st != SBX_OK)
        fprintf(stderr, "cat of %zu bytes: %s\n", n, err.message);
    bool same = r->stdout.len == n && memcmp(r->stdout.data, data, n) == 0;
    int code = r->exit_code;
    free(data);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    assert_int_equal(st, SBX_OK);
    assert_int_equal(code, 0);
    assert_true(same);
}

static void test_local_file_round_trip_of_multi_mib_file(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    size_t n = 5 * 1024 * 1024 + 123;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "dir/sub/blob.bin";
    w.mkdirs = true;
    w.content.data = data;
    w.content.len = n;
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_result *r = sbx_result_new();
    if (e->ops->write_file(sb, &w, &o, r, &err) != SBX_OK)
        fail_msg("write: %s", err.message);
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/workspace/dir/sub/blob.bin";
    if (e->ops->read_file(sb, &rd, &o, r, &err) != SBX_OK)
        fail_msg("read: %s", err.message);
    assert_int_equal(r->n_files, 1);
    assert_int_equal(r->files[0]->content.len, n);
    assert_int_equal(r->files[0]->size, n);
    assert_memory_equal(r->files[0]->content.data, data, n);
    sbx_message_free((ProtobufCMessage *)r);
    r = lt_run(e, sb,
               "sha1sum /workspace/dir/sub/blob.bin >/dev/null && stat -c %s dir/sub/blob.bin");
    char expect[32];
    snprintf(expect, sizeof expect, "%zu", n);
    assert_true(lt_stdout_has(r, expect));
    sbx_message_free((ProtobufCMessage *)r);
    free(data);
    lt_destroy(e, sb);
}

static void test_local_list_files_names_entries(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_message_free((ProtobufCMessage *)lt_run(e, sb, "mkdir d && touch a b && ln -s a l"));
    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = "/workspace";
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    assert_int_equal(e->ops->list_files(sb, &ls, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 4);
    int dirs = 0, links = 0;
    for (size_t i = 0; i < r->n_files; i++) {
        dirs += r->files[i]->kind == SBX__V1__FILE_KIND__FILE_KIND_DIRECTORY;
        links += r->files[i]->kind == SBX__V1__FILE_KIND__FILE_KIND_SYMLINK;
    }
    assert_int_equal(dirs, 1);
    assert_int_equal(links, 1);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

/* A file operation that failed for a reason of the request or the sandbox's state: the error
 * code is the caller's to act on and the words say what the path is. */
static void expect_file_error(sbx_status st, const sbx_error *err, const char *words)
{
    if (st != SBX_E_INVALID_ARGUMENT || strstr(err->message, words) == NULL)
        fail_msg("expected INVALID_ARGUMENT saying '%s', got %s: %s", words, sbx_status_name(st),
                 err->message);
}

/* The file API on a FIFO without a reader, on a socket, on a device, or on the binary of a
 * running program: INVALID_ARGUMENT with words saying what the path is (before: INTERNAL, "a bug
 * in sbx", with "No such device or address" and "Text file busy"; a device "Invalid argument"). */
static void test_local_file_api_on_a_fifo_socket_or_running_binary_is_invalid_argument(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_message_free((ProtobufCMessage *)lt_run(
        e, sb,
        "mkfifo fifo && cp /bin/sleep busy && python3 -c \"import socket; "
        "socket.socket(socket.AF_UNIX).bind('sock')\""));
    Sbx__V1__RunCommand run = SBX__V1__RUN_COMMAND__INIT;
    run.shell = "exec ./busy 60";
    run.detach = true;
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_result *r = sbx_result_new();
    assert_int_equal(e->ops->run_command(sb, &run, &o, r, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    /* the detached shell has exec'd busy once a process of that name runs */
    r = lt_run(e, sb,
               "for i in $(seq 200); do cat /proc/[0-9]*/comm 2>/dev/null | grep -qx busy && "
               "exit 0; sleep 0.02; done; exit 1");
    assert_int_equal(r->exit_code, 0);
    sbx_message_free((ProtobufCMessage *)r);

    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.content.data = (uint8_t *)"x";
    w.content.len = 1;
    w.path = "fifo";
    r = sbx_result_new();
    expect_file_error(e->ops->write_file(sb, &w, &o, r, &err), &err, "not a regular file");
    w.path = "/dev/null"; /* opens, but is no file to write (before: "Invalid argument") */
    expect_file_error(e->ops->write_file(sb, &w, &o, r, &err), &err, "not a regular file");
    w.path = "busy";
    expect_file_error(e->ops->write_file(sb, &w, &o, r, &err), &err, "a program is running");
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "sock";
    expect_file_error(e->ops->read_file(sb, &rd, &o, r, &err), &err, "not a regular file");
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
}

/* Renames on the host, in a loop, until *stop. */
static void *renamer(void *arg)
{
    const volatile int *stop = arg;
    char dir[] = "/tmp/sbx-renamer-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[64], b[64], sub[64];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(sub, sizeof sub, "%s/d", dir);
    snprintf(b, sizeof b, "%s/d/b", dir);
    close(open(a, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    mkdir(sub, 0700);
    while (!*stop) {
        (void)rename(a, b);
        (void)rename(b, a);
    }
    unlink(a);
    unlink(b);
    rmdir(sub);
    rmdir(dir);
    return NULL;
}

/* A read through the file API of a path with "..", while something on the host renames files
 * (the kernel's openat2 RESOLVE_IN_ROOT answers EAGAIN when any rename or mount on the host
 * raced its ".."): each read succeeds (before: some failed INTERNAL, seen in CI). */
static void test_local_file_read_with_dotdot_survives_renames_on_the_host(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_message_free((ProtobufCMessage *)lt_run(
        e, sb, "mkdir -p a/b/c && echo hi > f && ln -s ../../../f a/b/c/up"));
    volatile int stop = 0;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, renamer, (void *)&stop), 0);
    sbx_exec_opts o = lt_opts(0, NULL);
    int failed = 0;
    char why[256] = "";
    for (int i = 0; i < 300; i++) {
        Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
        rd.path = i % 2 ? "a/b/c/../../../f" : "a/b/c/up";
        sbx_result *r = sbx_result_new();
        sbx_error err = {0};
        if (e->ops->read_file(sb, &rd, &o, r, &err) != SBX_OK) {
            if (failed++ == 0)
                snprintf(why, sizeof why, "%.200s", err.message);
        } else {
            assert_memory_equal(r->files[0]->content.data, "hi\n", 3);
        }
        sbx_message_free((ProtobufCMessage *)r);
    }
    stop = 1;
    pthread_join(t, NULL);
    lt_destroy(e, sb);
    if (failed)
        fail_msg("%d of 300 reads failed, the first: %s", failed, why);
}

static void test_local_destroy_leaves_no_state_and_is_idempotent(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    assert_int_equal(lt_count_dir(e->runtime_dir), 1);
    lt_destroy(e, sb);
    assert_int_equal(lt_count_dir(e->runtime_dir), 0);
    sbx_error err = {0};
    assert_int_equal(e->ops->destroy(e->state, id, &err), SBX_OK);
    assert_int_equal(e->ops->destroy(e->state, "l-0000000000000000", &err), SBX_OK);
    assert_int_equal(e->ops->destroy(e->state, "../../etc", &err), SBX_OK);
}

static void test_local_attach_of_unknown_id_is_gone(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    assert_int_equal(e->ops->attach(e->state, "l-0123456789abcdef", NULL, NULL, &sb, &err),
                     SBX_E_GONE);
    assert_int_equal(e->ops->attach(e->state, "../x", NULL, NULL, &sb, &err), SBX_E_GONE);
    assert_null(sb);
}

static void test_local_attach_after_destroy_is_gone(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    lt_destroy(e, sb);
    sbx_error err = {0};
    sbx_sandbox *again = NULL;
    assert_int_equal(e->ops->attach(e->state, id, NULL, NULL, &again, &err), SBX_E_GONE);
}

static void test_local_attach_sees_the_same_workspace(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_message_free((ProtobufCMessage *)lt_run(e, sb, "echo kept > note"));
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    e->ops->sandbox_close(sb);
    sbx_sandbox *again = NULL;
    sbx_error err = {0};
    assert_int_equal(e->ops->attach(e->state, id, NULL, NULL, &again, &err), SBX_OK);
    sbx_result *r = lt_run(e, again, "cat note");
    assert_true(lt_stdout_has(r, "kept"));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, again);
}

/* ALLOW would share the host's network namespace, where programs reach every service on the
 * host's loopback (a worker without callers accepts any principal there) and the cloud
 * metadata address: refused unless the profile's local block says host_network: true, naming
 * that option and allowlist. */
static void test_local_network_allow_is_refused_without_host_network(void **state)
{
    lt_env *e = *state;
    sbx_policy *p = lt_policy(0, 0);
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    sbx_status st = e->ops->create(e->state, NULL, NULL, p, &sb, &err);
    sbx_strlist un = {0};
    sbx_status checked = e->ops->check_policy(e->state, p, &un, &err);
    sbx_strlist_clear(&un);
    sbx_message_free((ProtobufCMessage *)p);
    assert_int_equal(st, SBX_E_POLICY);
    assert_null(sb);
    assert_int_equal(checked, SBX_E_POLICY);
    assert_non_null(strstr(err.message, "host_network: true"));
    assert_non_null(strstr(err.message, "allowlist"));
}

static void test_local_network_allow_with_host_network_shares_it(void **state)
{
    (void)state;
    lt_env env, *e = &env;
    sbx_options *opts = NULL;
    lt_open_with(e, "host_network", "true", &opts);
    sbx_policy *p = lt_policy(0, 0);
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_sandbox *sb = lt_create_with(e, p);
    /* the host's interfaces are visible (DENY shows only lo; see tests/escape) */
    sbx_result *r = lt_run(e, sb, "grep -c : /proc/net/dev");
    char host[64] = "";
    FILE *f = popen("grep -c : /proc/net/dev", "r");
    assert_non_null(f);
    assert_non_null(fgets(host, sizeof host, f));
    pclose(f);
    assert_true(lt_stdout_has(r, host));
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    sbx_message_free((ProtobufCMessage *)p);
    lt_close(e);
    sbx_options_free(opts);
}

/* ALLOWLIST is enforced by the egress proxy (test_local_egress); an entry it cannot enforce
 * (IPv6) is refused under strict, named. */
/* pids 1: the sandbox's init is one of its processes, so nothing could ever run. Refused at
 * create, naming the limit and the fix; before, the boot failed with "kernel feature missing:
 * cannot create namespaces" (its launcher counts while it boots), and earlier the first exec
 * with RESOURCE_EXHAUSTED. 2 runs a command. */
/* Whether the sandbox's launcher (its reaper, the meta's "reaper" line) is in one of the
 * sandbox's cgroups (the meta's "cgroup" lines). */
static bool launcher_in_sandbox_cgroups(sbx_sandbox *sb)
{
    char meta[512], line[600];
    long reaper = 0;
    bool in = false;
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        (void)sscanf(line, "reaper %ld", &reaper);
    rewind(f);
    while (reaper > 1 && !in && fgets(line, sizeof line, f)) {
        if (strncmp(line, "cgroup ", 7) != 0)
            continue;
        char procs[700];
        line[strcspn(line, "\n")] = '\0';
        snprintf(procs, sizeof procs, "%s/cgroup.procs", line + 7);
        FILE *pf = fopen(procs, "r");
        for (long pid; pf != NULL && !in && fscanf(pf, "%ld", &pid) == 1;)
            in = pid == reaper;
        if (pf != NULL)
            fclose(pf);
    }
    fclose(f);
    return in;
}

/* pids 2 is the init and one command: the launcher, which joins the sandbox's cgroups before
 * the init's clone and stays as a one-shot's reaper, has left them by the time the create
 * returns. It left after its report, and the first command then failed with EAGAIN whenever it
 * was still leaving (ci151, a loaded host). */
static void test_local_pids_1_is_refused_2_runs(void **state)
{
    lt_env *e = *state;
    if (getuid() != 0)
        skip(); /* rootless: no cgroups, pids is refused as unenforceable (test_local_rootless) */
    sbx_policy *p = lt_policy(0, 1);
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    assert_int_equal(e->ops->create(e->state, NULL, NULL, p, &sb, &err), SBX_E_POLICY);
    assert_non_null(strstr(err.message, "pids 1"));
    assert_non_null(strstr(err.message, "use 2 or more"));
    assert_int_equal(lt_count_dir(e->runtime_dir), 0);
    p->pids = 2;
    sb = lt_create_with(e, p);
    assert_false(launcher_in_sandbox_cgroups(sb));
    sbx_result *r = lt_run(e, sb, "echo ok");
    assert_int_equal(r->exit_code, 0);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    sbx_message_free((ProtobufCMessage *)p);
}

/* The number of this process's children whose command is sbx-agent (a launcher left behind). */
static int agent_children(void)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        char *rp = strrchr(buf, ')');
        long ppid = 0;
        char st = 0;
        if (strstr(buf, "(sbx-agent)") != NULL && rp != NULL &&
            sscanf(rp + 1, " %c %ld", &st, &ppid) == 2 && ppid == (long)getpid())
            n++;
    }
    if (d != NULL)
        closedir(d);
    return n;
}

/* The launcher starts before the sandbox's cgroups are made (its exec overlaps them) and waits
 * for them: a create that fails after it started (here a cpu quota below the kernel's 1 ms
 * minimum, refused by cpu.cfs_quota_us) leaves no launcher, no zombie and no state. */
static void test_local_a_create_that_fails_leaves_no_launcher(void **state)
{
    lt_env *e = *state;
    if (getuid() != 0)
        skip(); /* rootless: no cgroups */
    sbx_policy *p = lt_policy(512, 256);
    p->cpu = 0.001;
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    sbx_status st = e->ops->create(e->state, NULL, NULL, p, &sb, &err);
    assert_int_not_equal(st, SBX_OK);
    assert_null(sb);
    assert_non_null(strstr(err.message, "cpu.cfs_quota_us"));
    assert_int_equal(agent_children(), 0);
    assert_int_equal(waitpid(-1, NULL, WNOHANG) > 0, 0);
    assert_int_equal(lt_count_dir(e->runtime_dir), 0);
    p->cpu = 1;
    sb = lt_create_with(e, p);
    sbx_result *r = lt_run(e, sb, "echo ok");
    assert_int_equal(r->exit_code, 0);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(e, sb);
    sbx_message_free((ProtobufCMessage *)p);
}

static void test_local_allowlist_entry_it_cannot_enforce_is_refused(void **state)
{
    lt_env *e = *state;
    sbx_policy *p = lt_policy(0, 0);
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    p->n_network_allow = 2;
    p->network_allow = malloc(2 * sizeof *p->network_allow);
    assert_non_null(p->network_allow);
    p->network_allow[0] = strdup("pypi.org");
    p->network_allow[1] = strdup("2001:db8::/32");
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    assert_int_equal(e->ops->create(e->state, NULL, NULL, p, &sb, &err), SBX_E_POLICY);
    assert_non_null(strstr(err.message, "network_allow=2001:db8::/32"));
    assert_null(strstr(err.message, "pypi.org"));
    assert_int_equal(lt_count_dir(e->runtime_dir), 0);
    sbx_message_free((ProtobufCMessage *)p);
}

static void test_local_reattach_replays_a_commands_journal(void **state)
{
    lt_env *e = *state;
    sbx_sandbox *sb = lt_create(e);
    sbx_result *r = lt_run(e, sb, "echo first; echo second >&2; exit 4");
    char *end;
    const char *idtext = NULL;
    for (size_t i = 0; i < r->n_provider_data; i++)
        if (strcmp(r->provider_data[i]->key, "command_id") == 0)
            idtext = r->provider_data[i]->value;
    assert_non_null(idtext);
    uint64_t id = strtoull(idtext, &end, 10);
    sbx_message_free((ProtobufCMessage *)r);
    /* a new connection (as a new process would open) follows the finished command */
    char sock[256];
    snprintf(sock, sizeof sock, "%s/box/agent.sock", sbx_local_state_dir(sb));
    sbx_agent_conn *c = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_agent_connect(sock, 0, &c, &err), SBX_OK);
    r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    assert_int_equal(sbx_agent_reattach(c, id, 2, 0, &o, r, &err), SBX_OK);
    assert_int_equal(r->exit_code, 4);
    assert_int_equal(r->stdout.len, 4); /* "first\n" from offset 2 */
    assert_memory_equal(r->stdout.data, "rst\n", 4);
    assert_true(lt_stderr_has(r, "second"));
    sbx_message_free((ProtobufCMessage *)r);
    r = sbx_result_new();
    assert_int_equal(sbx_agent_reattach(c, 999999, 0, 0, &o, r, &err), SBX_E_GONE);
    sbx_message_free((ProtobufCMessage *)r);
    sbx_agent_close(c);
    lt_destroy(e, sb);
}

/* The rootfs option: a host mount below the root directory (here a tmpfs) is read-only in the
 * sandbox, as the root itself is. Before: only the top mount was remounted read-only, and a
 * program wrote through the tmpfs below it to the host. Runs in a private mount namespace of
 * this test process, so nothing it mounts reaches the host's mount table. */
static void test_local_rootfs_mounts_below_the_root_are_read_only(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(unshare(CLONE_NEWNS), 0);
    assert_int_equal(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    char root[] = "/tmp/sbxroot-XXXXXX", path[128];
    assert_non_null(mkdtemp(root));
    assert_int_equal(chmod(root, 0755), 0); /* the sandbox's root maps to another host uid */
    snprintf(path, sizeof path, "%s/usr", root);
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(mount("/usr", path, NULL, MS_BIND | MS_REC, NULL), 0);
    static const char *links[][2] = {
        {"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}, {"usr/sbin", "sbin"}};
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, links[i][1]);
        assert_int_equal(symlink(links[i][0], path), 0);
    }
    lt_env e;
    sbx_options *opts = NULL;
    lt_open_with(&e, "rootfs", root, &opts);
    /* Without its mountpoints the root is refused, naming them (the sandbox may not make them
     * in a host directory). */
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    assert_int_not_equal(e.ops->create(e.state, NULL, NULL, NULL, &sb, &err), SBX_OK);
    if (strstr(err.message, "needs its mountpoints") == NULL)
        fail_msg("a rootfs without mountpoints: %s", err.message);
    static const char *mountpoints[] = {"proc", "dev", "tmp", "workspace", ".sbx", "scratch"};
    for (size_t i = 0; i < sizeof mountpoints / sizeof mountpoints[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", root, mountpoints[i]);
        assert_int_equal(mkdir(path, 0755), 0);
    }
    assert_int_equal(mount("tmpfs", path, "tmpfs", 0, "size=1m,mode=1777"), 0); /* scratch */
    sb = lt_create(&e);
    sbx_result *r =
        lt_run(&e, sb, "echo escaped > /scratch/x; echo rc=$?; touch /probe; echo rc=$?");
    bool refused = lt_stdout_has(r, "rc=1\nrc=1\n") || lt_stdout_has(r, "rc=2\nrc=1\n");
    if (!refused)
        print_message("stdout: %.*s stderr: %.*s\n", (int)r->stdout.len, r->stdout.data,
                      (int)r->stderr.len, r->stderr.data);
    sbx_message_free((ProtobufCMessage *)r);
    lt_destroy(&e, sb);
    lt_close(&e);
    sbx_options_free(opts);
    snprintf(path, sizeof path, "%s/scratch/x", root);
    bool written = access(path, F_OK) == 0;
    snprintf(path, sizeof path, "%s/scratch", root);
    umount2(path, MNT_DETACH);
    snprintf(path, sizeof path, "%s/usr", root);
    umount2(path, MNT_DETACH);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    assert_false(written);
    assert_true(refused);
}

static void test_local_idle_sandbox_tears_itself_down(void **state)
{
    (void)state;
    lt_env e;
    sbx_options *opts = NULL;
    lt_open_with(&e, "idle_ttl_s", "1", &opts);
    sbx_error err = {0};
    sbx_sandbox *sb = lt_create(&e);
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    e.ops->sandbox_close(sb);
    /* no connection, nothing running: PID 1 exits after the TTL and the kernel tears the
     * namespace down; attach then finds it gone */
    char meta[256], line[256];
    snprintf(meta, sizeof meta, "%s/%s/meta", e.runtime_dir, id);
    long pid = 0;
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f))
        sscanf(line, "pid %ld", &pid);
    fclose(f);
    assert_true(pid > 1);
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) { /* up to 20 s on a loaded machine */
        usleep(100000);
        char path[64], st_line[512] = "";
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        f = fopen(path, "r");
        if (!f) {
            gone = true;
            break;
        }
        if (fgets(st_line, sizeof st_line, f)) {
            char *paren = strrchr(st_line, ')');
            gone = paren && (paren[2] == 'Z' || paren[2] == 'X');
        }
        fclose(f);
    }
    assert_true(gone);
    /* a one-shot sandbox's reaper removes what it leaves (state dir, cgroups, uid slot) once
     * its PID 1 has ended, with no destroy (before, a destroy or a later sweep did) */
    assert_int_equal(lt_count_dir(e.runtime_dir), 0);
    sbx_sandbox *again = NULL;
    assert_int_equal(e.ops->attach(e.state, id, NULL, NULL, &again, &err), SBX_E_GONE);
    assert_int_equal(e.ops->destroy(e.state, id, &err), SBX_OK); /* idempotent */
    e.ops->close(e.state);
    sbx_options_free(opts);
    lt_remove_runtime_dir(e.runtime_dir);
}

/* The create does not wait for its launcher's exec (providers/common/launch.h), so an agent
 * path that names no program fails later, at the boot's report: the create still fails with
 * the reason in the kernel's words, and leaves no state dir and no uid slot behind. */
static void test_local_agent_that_cannot_run_fails_the_create_and_leaves_nothing(void **state)
{
    (void)state;
    char path[] = "/tmp/sbxt-agent-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a program\n", 14), 14);
    close(fd);
    assert_int_equal(chmod(path, 0755), 0);
    lt_env e;
    sbx_options *opts = NULL;
    lt_open_with(&e, "agent", path, &opts);
    sbx_policy *p = lt_policy(getuid() == 0 ? 512 : 0, getuid() == 0 ? 256 : 0);
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    assert_int_equal(e.ops->create(e.state, NULL, NULL, p, &sb, &err), SBX_E_PROVISION);
    assert_null(sb);
    char want[128];
    snprintf(want, sizeof want, "cannot run %s: %s", path, strerror(ENOEXEC));
    assert_string_equal(err.message, want);
    assert_int_equal(lt_count_dir(e.runtime_dir), 0);
    /* no uid slot still names a state dir of this runtime dir */
    DIR *d = opendir("/run/sbx-uid-slots");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[300];
        snprintf(sub, sizeof sub, "/run/sbx-uid-slots/%s", de->d_name);
        DIR *s = opendir(sub);
        struct dirent *le;
        while (s != NULL && (le = readdir(s)) != NULL) {
            char link[600], target[600] = "";
            snprintf(link, sizeof link, "%s/%s", sub, le->d_name);
            if (readlink(link, target, sizeof target - 1) > 0)
                assert_null(strstr(target, e.runtime_dir));
        }
        if (s != NULL)
            closedir(s);
    }
    if (d != NULL)
        closedir(d);
    sbx_message_free((ProtobufCMessage *)p);
    e.ops->close(e.state);
    sbx_options_free(opts);
    lt_remove_runtime_dir(e.runtime_dir);
    unlink(path);
}

/* A sandbox state dir whose PID 1 is gone (a dead pid in its meta): stale. */
static void plant_stale(const lt_env *e, const char *id)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", e->runtime_dir, id);
    assert_int_equal(mkdir(path, 0700), 0);
    pid_t dead = fork();
    assert_true(dead >= 0);
    if (dead == 0)
        _exit(0);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    snprintf(path, sizeof path, "%s/%s/meta", e->runtime_dir, id);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "pid %ld\nstart 1\n", (long)dead);
    fclose(f);
}

/* Each provider open swept every sandbox's meta and /proc entry (about 15 ms of CPU per 1,000
 * live sandboxes, paid by every `sbx run`): now an open sweeps when no open of the same
 * runtime dir did in the last 10 s, and an explicit sweep always does. */
static void test_local_open_sweeps_at_most_every_ten_seconds(void **state)
{
    lt_env *e = *state; /* its open made the stamp and swept */
    plant_stale(e, "l-00000000000000a1");
    lt_env again = *e;
    sbx_provider_ctx ctx = {.profile = "test", .runtime_dir = e->runtime_dir, .node = "test"};
    sbx_error err = {0};
    assert_int_equal(e->ops->open(&ctx, &again.state, &err), SBX_OK);
    e->ops->close(again.state);
    assert_int_equal(lt_count_dir(e->runtime_dir), 1); /* swept 0 s ago: not again */

    char stamp[128];
    snprintf(stamp, sizeof stamp, "%s/%s", e->runtime_dir, SBX_LOCAL_SWEEP_STAMP);
    struct timespec old[2] = {{.tv_sec = time(NULL) - 11}, {.tv_sec = time(NULL) - 11}};
    assert_int_equal(utimensat(AT_FDCWD, stamp, old, 0), 0);
    assert_int_equal(e->ops->open(&ctx, &again.state, &err), SBX_OK);
    e->ops->close(again.state);
    assert_int_equal(lt_count_dir(e->runtime_dir), 0); /* 11 s ago: this open swept */

    plant_stale(e, "l-00000000000000a2");
    sbx_strlist removed = {0};
    assert_int_equal(e->ops->sweep(e->state, &removed, &err), SBX_OK);
    assert_int_equal(removed.n, 1);
    assert_string_equal(removed.items[0], "l-00000000000000a2");
    sbx_strlist_clear(&removed);
    assert_int_equal(lt_count_dir(e->runtime_dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_runs_a_command_and_reports_its_exit),
        cmocka_unit_test(test_local_runs_python3),
        cmocka_unit_test(test_local_program_runs_as_unprivileged_uid),
        cmocka_unit_test(test_local_agent_keeps_an_empty_bounding_set),
        cmocka_unit_test(test_local_agent_drops_the_capabilities_it_does_not_use),
        cmocka_unit_test(test_local_no_namespace_can_be_made_inside),
        cmocka_unit_test(test_local_an_exec_inherits_nothing_of_the_previous_one),
        cmocka_unit_test(test_local_idle_agent_gives_back_its_request_buffers),
        cmocka_unit_test(test_local_sandboxes_map_distinct_host_uids),
        cmocka_unit_test(test_local_cgroup_namespace_is_rooted_at_the_sandbox),
        cmocka_unit_test(test_local_spare_is_forked_at_start_and_not_after_a_one_shot),
        cmocka_unit_test(test_local_per_call_sandbox_has_no_freezer),
        cmocka_unit_test(test_local_cpu_memory_pids_limits_reach_the_cgroups),
        cmocka_unit_test(test_local_pids_1_is_refused_2_runs),
        cmocka_unit_test(test_local_a_create_that_fails_leaves_no_launcher),
        cmocka_unit_test(test_local_stateful_python_keeps_variables),
        cmocka_unit_test(test_local_python_exception_is_a_result_with_traceback),
        cmocka_unit_test(test_local_bash_code_runs_through_a_shell),
        cmocka_unit_test(test_local_timeout_kills_the_whole_tree),
        cmocka_unit_test(test_local_stdin_reaches_the_program),
        cmocka_unit_test(test_local_stdin_echoed_back_in_full),
        cmocka_unit_test(test_local_long_argv_and_many_env_still_run),
        cmocka_unit_test(test_local_file_round_trip_of_multi_mib_file),
        cmocka_unit_test(test_local_list_files_names_entries),
        cmocka_unit_test(
            test_local_file_api_on_a_fifo_socket_or_running_binary_is_invalid_argument),
        cmocka_unit_test(test_local_file_read_with_dotdot_survives_renames_on_the_host),
        cmocka_unit_test(test_local_destroy_leaves_no_state_and_is_idempotent),
        cmocka_unit_test(test_local_attach_of_unknown_id_is_gone),
        cmocka_unit_test(test_local_attach_after_destroy_is_gone),
        cmocka_unit_test(test_local_attach_sees_the_same_workspace),
        cmocka_unit_test(test_local_network_allow_is_refused_without_host_network),
        cmocka_unit_test(test_local_network_allow_with_host_network_shares_it),
        cmocka_unit_test(test_local_allowlist_entry_it_cannot_enforce_is_refused),
        cmocka_unit_test(test_local_reattach_replays_a_commands_journal),
        cmocka_unit_test(test_local_idle_sandbox_tears_itself_down),
        cmocka_unit_test(test_local_agent_that_cannot_run_fails_the_create_and_leaves_nothing),
        cmocka_unit_test(test_local_rootfs_mounts_below_the_root_are_read_only),
        cmocka_unit_test_setup_teardown(test_local_open_sweeps_at_most_every_ten_seconds, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
