/* bench_local.c - the local provider against bubblewrap, medians, one run:
 *   cli       `sbx run -- /bin/true` (the CLI on its built-in default profile) against
 *             `bwrap --unshare-all --die-with-parent --new-session ... /bin/true`, run in pairs:
 *             wall time (until the command returns) and CPU time (of every process each one
 *             started: the CLI reaps its sandbox's agent, and bwrap's sandbox init, which outlives
 *             bwrap, is reaped here), targets 1.0x and 2x bwrap
 *   version   `sbx version` (target <= 1.5 ms), beside a spawn of /bin/true and the number of
 *             shared libraries the dynamic loader maps for it
 *   cold      create -> first exec of /bin/true -> destroy in process (with the default
 *             profile's memory/pids limits when root), vs bwrap (target <= 0.8x)
 *   warm      exec of /bin/true in an existing sandbox (target <= 0.5 ms), beside the host's
 *             own floor: /bin/true exec'd by a process forked ahead, no sandbox
 *   pause     pause and resume of a live sandbox (the cgroup freezer), medians
 *   idle RSS  resident memory of each sandbox's agent (PID 1) with N sandboxes alive at once
 *             (target <= 1 MiB each with 500 alive); RSS counts the static binary's shared
 *             text in full, so it is the pessimistic figure (PSS is printed beside it)
 *   idle kernel  what the kernel holds for each of those sandboxes (namespaces, mounts,
 *             cgroups, the agents' stacks and page tables): /proc/meminfo's slab, kernel stack,
 *             page table and percpu counts before the first is made and with all alive, and
 *             MemAvailable's drop (everything a sandbox costs the host), per sandbox
 * Usage: bench_local [COLD_RUNS] [WARM_RUNS] [IDLE_SANDBOXES] [CLI_PAIRS]
 * Timing belongs here, never in pass/fail tests.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/local/local.h"
#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

extern char **environ;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(int64_t *us, size_t n)
{
    qsort(us, n, sizeof *us, cmp_i64);
    return (double)us[n / 2] / 1000.0;
}

static const sbx_provider_ops *ops;
static void *pstate;         /* the row being measured: one_shot or session */
static void *one_shot_state; /* scope per_call: create -> one call -> destroy (cold) */
static void *session_state;  /* scope per_session: a sandbox kept across calls (warm, idle) */
static sbx_policy *policy;

static char runtime_dir[] = "/tmp/sbxb-XXXXXX"; /* the bench's own: every sandbox it makes */

/* Destroys every sandbox left in the bench's runtime dir and removes the dir. */
static void clean_up(void)
{
    DIR *d = opendir(runtime_dir);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        sbx_error ignored = {0};
        if (strncmp(de->d_name, "l-", 2) == 0)
            ops->destroy(one_shot_state != NULL ? one_shot_state : session_state, de->d_name,
                         &ignored);
    }
    if (d != NULL)
        closedir(d);
    if (one_shot_state != NULL)
        ops->close(one_shot_state);
    if (session_state != NULL)
        ops->close(session_state);
    one_shot_state = session_state = NULL;
    char stamp[64];
    snprintf(stamp, sizeof stamp, "%s/%s", runtime_dir, SBX_LOCAL_SWEEP_STAMP);
    unlink(stamp);
    rmdir(runtime_dir);
}

/* A failed step ends the bench, leaving no sandbox (a one-shot agent idles for a day) and no
 * runtime dir behind. */
static void die(const char *what, const sbx_error *err)
{
    fprintf(stderr, "bench_local: %s: %s\n", what, err ? err->message : "");
    if (ops != NULL && (one_shot_state != NULL || session_state != NULL))
        clean_up();
    exit(1);
}

/* Set by SIGINT, SIGTERM or SIGHUP (Ctrl-C in the middle of the `bench` target): every loop
 * looks at it between steps and the bench then destroys what it made, as on a failure. Without
 * it an interrupted run left its sandboxes (up to IDLE_SANDBOXES of them, each holding a host
 * uid slot and cgroups) alive until their agents' idle TTL, a day later. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

/* Between steps: an interrupted bench stops here, leaving nothing behind. */
static void stop_if_interrupted(void)
{
    if (!interrupted)
        return;
    fprintf(stderr, "bench_local: interrupted (signal %d): destroying its sandboxes\n",
            (int)interrupted);
    if (ops != NULL && (one_shot_state != NULL || session_state != NULL))
        clean_up();
    exit(128 + (int)interrupted);
}

/* What the sandbox's agent (the PID 1 its meta file names) has used so far, from /proc/PID/stat
 * and /proc/PID/schedstat. */
typedef struct agent_usage {
    int64_t cpu_us;            /* its own CPU and that of every process it reaped (its spares,
                                  which become the commands), in clock ticks */
    int64_t own_ns;            /* its own CPU alone, in ns (schedstat) */
    unsigned long long faults; /* its own minor page faults */
} agent_usage;

/* False when unknown. */
static bool agent_usage_of(const sbx_sandbox *sb, agent_usage *u)
{
    char path[sizeof runtime_dir + 64], buf[1024];
    snprintf(path, sizeof path, "%s/%s/meta", runtime_dir, sb->id);
    FILE *f = fopen(path, "r");
    long pid = -1;
    while (f != NULL && fgets(buf, sizeof buf, f) != NULL && sscanf(buf, "pid %ld", &pid) != 1) {
    }
    if (f != NULL)
        fclose(f);
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    f = pid > 0 ? fopen(path, "r") : NULL;
    size_t n = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    unsigned long long ut = 0, st = 0, cut = 0, cst = 0, run_ns = 0;
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %llu %llu %llu %llu",
               &u->faults, &ut, &st, &cut, &cst) != 5)
        return false;
    u->cpu_us =
        (int64_t)((ut + st + cut + cst) * 1000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
    snprintf(path, sizeof path, "/proc/%ld/schedstat", pid);
    f = fopen(path, "r");
    bool ok = f != NULL && fscanf(f, "%llu", &run_ns) == 1;
    if (f != NULL)
        fclose(f);
    u->own_ns = ok ? (int64_t)run_ns : -1;
    return true;
}

static sbx_sandbox *create(void)
{
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    if (ops->create(pstate, NULL, NULL, policy, &sb, &err) != SBX_OK)
        die("create", &err);
    return sb;
}

static void run_true(sbx_sandbox *sb)
{
    static char *argv[] = {"/bin/true"};
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.argv = argv;
    op.n_argv = 1;
    static const sbx_principal principal = SBX__V1__PRINCIPAL__INIT;
    sbx_exec_opts o;
    memset(&o, 0, sizeof o);
    o.deadline_mono_ms = sbx_monotonic_ms() + 60000;
    o.principal = &principal;
    o.policy = policy;
    sbx_result *r = sbx_result_new();
    sbx_error err = {0};
    if (ops->run_command(sb, &op, &o, r, &err) != SBX_OK || r->exit_code != 0)
        die("/bin/true", &err);
    sbx_message_free((ProtobufCMessage *)r);
}

/* Pause/resume rounds measured (each round also proves the sandbox answers after it). */
#define BENCH_PAUSE_RUNS 100
/* Wait before reading idle sandboxes' memory: longer than the agent's AGENT_TRIM_IDLE_MS (1 s). */
#define BENCH_IDLE_WAIT_MS 1500

/* pause and resume of a live sandbox (the cgroup freezer), medians; skipped where the provider
 * does not declare pause. */
static void pause_resume(sbx_sandbox *sb, size_t n)
{
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    ops->capabilities(pstate, &caps);
    if (!caps.pause || ops->pause == NULL || n == 0) {
        printf("  %-58s %10s     (not offered here: root and the freezer cgroup)\n",
               "pause / resume", "n/a");
        return;
    }
    int64_t *p_us = calloc(n, sizeof *p_us), *r_us = calloc(n, sizeof *r_us);
    sbx_error err = {0};
    for (size_t i = 0; i < n; i++) {
        stop_if_interrupted();
        bool was = false;
        int64_t t0 = sbx_monotonic_us();
        if (ops->pause(pstate, sb->id, &err) != SBX_OK)
            die("pause", &err);
        int64_t t1 = sbx_monotonic_us();
        if (ops->resume(pstate, sb->id, &was, &err) != SBX_OK || !was)
            die("resume", &err);
        r_us[i] = sbx_monotonic_us() - t1;
        p_us[i] = t1 - t0;
        run_true(sb);
    }
    printf("  %-58s %10.3f ms  (n=%zu)\n", "pause: every process of a sandbox frozen",
           median_ms(p_us, n), n);
    printf("  %-58s %10.3f ms  (n=%zu; includes the agent's ping)\n",
           "resume: thawed and answering", median_ms(r_us, n), n);
    free(p_us);
    free(r_us);
}

static void destroy(sbx_sandbox *sb)
{
    char id[64];
    snprintf(id, sizeof id, "%s", sb->id);
    ops->sandbox_close(sb);
    sbx_error err = {0};
    if (ops->destroy(pstate, id, &err) != SBX_OK)
        die("destroy", &err);
}

static char *bwrap_argv[] = {"bwrap",         "--unshare-all", "--die-with-parent",
                             "--new-session", "--ro-bind",     "/usr",
                             "/usr",          "--symlink",     "usr/bin",
                             "/bin",          "--symlink",     "usr/lib",
                             "/lib",          "--symlink",     "usr/lib64",
                             "/lib64",        "--symlink",     "usr/sbin",
                             "/sbin",         "--proc",        "/proc",
                             "--dev",         "/dev",          "--tmpfs",
                             "/tmp",          "/bin/true",     NULL};

static int64_t rusage_us(const struct rusage *ru)
{
    return (int64_t)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000 + ru->ru_utime.tv_usec +
           ru->ru_stime.tv_usec;
}

/* Reaps the descendants a run left behind, adding their CPU to *cpu_us. bwrap does not wait for
 * its sandbox's PID 1: it returns once the command's status arrives, and the init (with the
 * namespaces' teardown, 1.2-1.3 ms of CPU here) is reparented to us, the nearest subreaper (the
 * local provider makes this process one). Its CPU is bwrap's as much as the agent's is sbx's
 * (the CLI reaps its sandbox), and reaping it before the next run keeps that teardown off the
 * next measurement. Bounded: a live child that is not an orphan of this run is waited for at
 * most a second. */
static void reap_orphans(int64_t *cpu_us)
{
    for (int64_t until = sbx_monotonic_us() + 1000000; sbx_monotonic_us() < until;) {
        int st;
        struct rusage ru;
        pid_t p = wait4(-1, &st, WNOHANG, &ru);
        if (p < 0)
            return; /* ECHILD: none left */
        if (p > 0)
            *cpu_us += rusage_us(&ru);
        else
            usleep(20);
    }
}

/* Runs argv to its end with stdout/stderr on /dev/null; fills wall (until argv's process ends)
 * and CPU (user + system of the process, of everything it waited for, and of the orphans it
 * left: reap_orphans) in microseconds. False when it failed. */
static bool timed_run(char **argv, char **envp, int64_t *wall_us, int64_t *cpu_us)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int64_t t0 = sbx_monotonic_us();
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return false;
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid)
        return false;
    *wall_us = sbx_monotonic_us() - t0;
    *cpu_us = rusage_us(&ru);
    reap_orphans(cpu_us);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The host's own floor for a warm exec: a process forked ahead (as the agent's spare is) and
 * blocked on a pipe is told to go, execs /bin/true (stdout and stderr on /dev/null) and is waited
 * for; no sandbox, no socket, no confinement. Returns the go -> reaped time in microseconds, or
 * -1. */
static int64_t forked_ahead_true_us(void)
{
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        int null = open("/dev/null", O_WRONLY);
        if (read(go[0], &b, 1) != 1 || null < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
            _exit(127);
        char *argv[] = {"/bin/true", NULL};
        execve(argv[0], argv, environ);
        _exit(127);
    }
    close(go[0]);
    int64_t us = -1;
    if (pid > 0) {
        usleep(200); /* as the spare: waiting in read before the go */
        int st;
        int64_t t0 = sbx_monotonic_us();
        if (write(go[1], "g", 1) == 1 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
            WEXITSTATUS(st) == 0)
            us = sbx_monotonic_us() - t0;
    }
    close(go[1]);
    return us;
}

static int64_t bwrap_once(void)
{
    int64_t wall, cpu;
    return timed_run(bwrap_argv, environ, &wall, &cpu) ? wall : -1;
}

/* Shared objects the dynamic loader maps for a program (what ldd counts). */
static int shared_libraries(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "LD_TRACE_LOADED_OBJECTS=1 '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    int n = 0;
    char line[1024];
    while (fgets(line, sizeof line, f))
        n += strstr(line, "=>") != NULL || strstr(line, "ld-linux") != NULL;
    pclose(f);
    return n;
}

/* The CLI, pairwise against bwrap, then `sbx version`. */
static void bench_cli(size_t pairs)
{
    const char *cli = getenv("SBX_CLI") ? getenv("SBX_CLI") : SBX_CLI_BUILD_PATH;
    if (access(cli, X_OK) != 0) {
        printf("  %-58s %10s     (no sbx binary at %s; set SBX_CLI)\n", "cli: sbx run -- /bin/true",
               "n/a", cli);
        return;
    }
    /* the built-in default: no $SBX_CONFIG of the caller's may change what is measured */
    char *envp[] = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    char *run_argv[] = {(char *)cli, "run", "--", "/bin/true", NULL};
    char *version_argv[] = {(char *)cli, "version", NULL};
    char *true_argv[] = {"/bin/true", NULL};
    int64_t *sw = calloc(pairs, sizeof *sw), *sc = calloc(pairs, sizeof *sc);
    int64_t *bw = calloc(pairs, sizeof *bw), *bc = calloc(pairs, sizeof *bc);
    size_t n = 0;
    for (size_t i = 0; i < pairs; i++) {
        stop_if_interrupted();
        if (!timed_run(run_argv, envp, &sw[n], &sc[n])) {
            printf("  %-58s %10s     (`%s run -- /bin/true` failed: run it by hand)\n",
                   "cli: sbx run -- /bin/true", "n/a", cli);
            break;
        }
        if (!timed_run(bwrap_argv, environ, &bw[n], &bc[n]))
            break;
        n++;
    }
    if (n) {
        double swm = median_ms(sw, n), scm = median_ms(sc, n);
        double bwm = median_ms(bw, n), bcm = median_ms(bc, n);
        printf("  %-58s %10.3f ms  (n=%zu pairs; CPU %.3f ms)\n", "cli: sbx run -- /bin/true", swm,
               n, scm);
        printf("  %-58s %10.3f ms  (CPU %.3f ms)\n", "peer: bwrap --unshare-all ... /bin/true", bwm,
               bcm);
        printf("  %-58s %10.2f x   (target <= 1.0)\n", "cli/bwrap wall", swm / bwm);
        printf("  %-58s %10.2f x   (target <= 2.0)\n", "cli/bwrap CPU", bcm > 0 ? scm / bcm : 0);
    }
    size_t vn = pairs * 2;
    int64_t *vw = calloc(vn, sizeof *vw), *tw = calloc(vn, sizeof *tw),
            *vc = calloc(vn, sizeof *vc), cpu;
    size_t vok = 0;
    for (size_t i = 0; i < vn; i++) {
        stop_if_interrupted();
        if (!timed_run(version_argv, envp, &vw[vok], &vc[vok]) ||
            !timed_run(true_argv, envp, &tw[vok], &cpu))
            break;
        vok++;
    }
    if (vok)
        printf("  %-58s %10.3f ms  (n=%zu; CPU %.3f ms; spawn of /bin/true %.3f ms; %d shared "
               "libraries; target <= 1.5 ms)\n",
               "cli: sbx version", median_ms(vw, vok), vok, median_ms(vc, vok), median_ms(tw, vok),
               shared_libraries(cli));
    free(sw);
    free(sc);
    free(bw);
    free(bc);
    free(vw);
    free(tw);
    free(vc);
}

/* Pss (kB) of process pid, 0 when it is gone. */
static long pss_of(long pid)
{
    char path[64], line[256];
    long pss = 0;
    snprintf(path, sizeof path, "/proc/%ld/smaps_rollup", pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "Pss: %ld", &pss);
    if (f)
        fclose(f);
    return pss;
}

/* What /proc/meminfo says the kernel holds, and what is still available, in KiB. */
typedef struct kernel_memory {
    long slab_reclaimable, slab_unreclaimable, stacks, page_tables, percpu, available;
} kernel_memory;

static kernel_memory kernel_memory_now(void)
{
    kernel_memory k = {0};
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        sscanf(line, "SReclaimable: %ld", &k.slab_reclaimable);
        sscanf(line, "SUnreclaim: %ld", &k.slab_unreclaimable);
        sscanf(line, "KernelStack: %ld", &k.stacks);
        sscanf(line, "PageTables: %ld", &k.page_tables);
        sscanf(line, "Percpu: %ld", &k.percpu);
        sscanf(line, "MemAvailable: %ld", &k.available);
    }
    if (f)
        fclose(f);
    return k;
}

/* The kernel's memory per sandbox: what grew between before (none of the n alive) and after. */
static void print_kernel_memory(const kernel_memory *before, const kernel_memory *after, size_t n)
{
    double d = (double)n;
    double su = (double)(after->slab_unreclaimable - before->slab_unreclaimable) / d;
    double sr = (double)(after->slab_reclaimable - before->slab_reclaimable) / d;
    double st = (double)(after->stacks - before->stacks) / d;
    double pt = (double)(after->page_tables - before->page_tables) / d;
    double pc = (double)(after->percpu - before->percpu) / d;
    printf("  %-58s %10.1f KiB (unreclaimable slab %.1f, reclaimable slab %.1f, kernel stacks "
           "%.1f, page tables %.1f, percpu %.1f; /proc/meminfo before the first and with %zu "
           "alive)\n",
           "idle: kernel memory per sandbox", su + sr + st + pt + pc, su, sr, st, pt, pc, n);
    printf("  %-58s %10.1f KiB (MemAvailable's drop: agents, spares, kernel, tmpfs)\n",
           "idle: host memory per sandbox, all of it",
           (double)(before->available - after->available) / d);
}

/* VmRSS and Pss (kB) of a sandbox's agent, read through its meta file, and the Pss of its
 * children (the spare waiting for the next command). */
static void agent_memory(sbx_sandbox *sb, long *rss_kb, long *pss_kb, long *children_pss_kb)
{
    char path[512], line[512];
    long pid = 0;
    snprintf(path, sizeof path, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "pid %ld", &pid) == 1)
            break;
    if (f)
        fclose(f);
    *rss_kb = *children_pss_kb = 0;
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "VmRSS: %ld", rss_kb);
    if (f)
        fclose(f);
    *pss_kb = pss_of(pid);
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", pid, pid);
    f = fopen(path, "r");
    for (long child; f && fscanf(f, "%ld", &child) == 1;)
        *children_pss_kb += pss_of(child);
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    size_t cold_n = argc > 1 ? (size_t)atol(argv[1]) : 30;
    size_t warm_n = argc > 2 ? (size_t)atol(argv[2]) : 500;
    size_t idle_n = argc > 3 ? (size_t)atol(argv[3]) : 1000;
    size_t cli_n = argc > 4 ? (size_t)atol(argv[4]) : 40;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the provider's calls finish; the loops look at the flag */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    ops = sbx_provider_lookup("local");
    char *rt = runtime_dir;
    if (!ops || !mkdtemp(rt))
        die("setup", NULL);
    sbx_provider_ctx ctx = {0};
    ctx.profile = "bench";
    ctx.runtime_dir = rt;
    ctx.scope = SBX_SCOPE_PER_CALL;
    sbx_error err = {0};
    if (ops->open(&ctx, &one_shot_state, &err) != SBX_OK)
        die("open", &err);
    ctx.profile = "bench-session";
    ctx.scope = SBX_SCOPE_PER_SESSION;
    if (ops->open(&ctx, &session_state, &err) != SBX_OK)
        die("open", &err);
    pstate = one_shot_state;
    policy = sbx_policy_new();
    policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    if (geteuid() == 0) {
        policy->memory_mb = 512; /* the built-in default profile's limits */
        policy->pids = 256;
    }
    printf("local provider (%s, %s)\n", geteuid() == 0 ? "root" : "rootless",
           geteuid() == 0 ? "memory_mb=512 pids=256 via cgroups" : "no cgroups");
    bench_cli(cli_n);

    int64_t *sbx_us = calloc(cold_n, sizeof *sbx_us), *bw_us = calloc(cold_n, sizeof *bw_us);
    int64_t *c_us = calloc(cold_n, sizeof *c_us), *x_us = calloc(cold_n, sizeof *x_us),
            *d_us = calloc(cold_n, sizeof *d_us);
    size_t bw_ok = 0;
    for (size_t i = 0; i < cold_n; i++) { /* interleaved: both see the same machine load */
        stop_if_interrupted();
        int64_t t0 = sbx_monotonic_us();
        sbx_sandbox *sb = create();
        int64_t t1 = sbx_monotonic_us();
        run_true(sb);
        int64_t t2 = sbx_monotonic_us();
        destroy(sb);
        sbx_us[i] = sbx_monotonic_us() - t0;
        c_us[i] = t1 - t0;
        x_us[i] = t2 - t1;
        d_us[i] = t0 + sbx_us[i] - t2;
        /* its reaper removes it once its PID 1 has ended (agent/reap.c), as bwrap's init ends
         * after bwrap returns: both are waited for, untimed, before the next run */
        int64_t teardown_cpu = 0;
        reap_orphans(&teardown_cpu);
        int64_t b = bwrap_once();
        if (b >= 0)
            bw_us[bw_ok++] = b;
    }
    double cold = median_ms(sbx_us, cold_n);
    printf("  %-58s %10.3f ms  (n=%zu; create %.2f, first exec %.2f, destroy %.2f)\n",
           "cold: create -> exec /bin/true -> destroy", cold, cold_n, median_ms(c_us, cold_n),
           median_ms(x_us, cold_n), median_ms(d_us, cold_n));
    if (bw_ok) {
        double bw = median_ms(bw_us, bw_ok);
        printf("  %-58s %10.3f ms  (n=%zu)  sbx/bwrap = %.2f (target <= 0.8)\n",
               "peer: bwrap --unshare-all ... /bin/true", bw, bw_ok, cold / bw);
    } else {
        printf("  %-58s %10s     (bwrap missing or failing: scripts/install-deps.sh)\n",
               "peer: bwrap --unshare-all ... /bin/true", "n/a");
    }

    pstate = session_state;
    sbx_sandbox *sb = create();
    run_true(sb);
    int64_t *warm_us = calloc(warm_n, sizeof *warm_us);
    agent_usage u0, u1;
    bool usage = agent_usage_of(sb, &u0);
    for (size_t i = 0; i < warm_n; i++) {
        stop_if_interrupted();
        int64_t t0 = sbx_monotonic_us();
        run_true(sb);
        warm_us[i] = sbx_monotonic_us() - t0;
    }
    usage = usage && agent_usage_of(sb, &u1);
    double warm = median_ms(warm_us, warm_n);
    printf("  %-58s %10.3f ms  (n=%zu, target <= 0.5 ms)\n", "warm: exec /bin/true in a session",
           warm, warm_n);
    if (usage) {
        printf("  %-58s %10.3f ms  (mean of the n above, in clock ticks of %ld per s)\n",
               "  its CPU in the sandbox (agent, spares, commands)",
               (double)(u1.cpu_us - u0.cpu_us) / 1000.0 / (double)warm_n, sysconf(_SC_CLK_TCK));
        if (u0.own_ns >= 0 && u1.own_ns >= 0)
            printf("  %-58s %10.3f ms  (mean of the n above, schedstat)\n",
                   "  the agent's own CPU per exec",
                   (double)(u1.own_ns - u0.own_ns) / 1e6 / (double)warm_n);
        printf("  %-58s %10.1f     (mean of the n above; most of them copy-on-write faults "
               "after each fork of a spare)\n",
               "  the agent's own page faults per exec",
               (double)(u1.faults - u0.faults) / (double)warm_n);
    }
    /* The floor under the warm row on this host, each of its runs after a warm exec, so a noisy
     * neighbour meets both alike; the CPU time the first exec of /bin/true costs here bounds
     * what any sandbox can reach. */
    size_t floor_n = 0;
    for (size_t i = 0; i < warm_n; i++) {
        stop_if_interrupted();
        run_true(sb);
        int64_t us = forked_ahead_true_us();
        if (us >= 0)
            warm_us[floor_n++] = us;
    }
    if (floor_n > 0) {
        double fl = median_ms(warm_us, floor_n);
        printf("  %-58s %10.3f ms  (n=%zu)  warm/host = %.2f\n",
               "host: /bin/true exec'd by a process forked ahead", fl, floor_n, warm / fl);
    }
    pause_resume(sb, warm_n < BENCH_PAUSE_RUNS ? warm_n : BENCH_PAUSE_RUNS);
    destroy(sb);

    sbx_sandbox **all = calloc(idle_n, sizeof *all);
    size_t alive = 0;
    kernel_memory before = kernel_memory_now();
    for (; alive < idle_n; alive++) {
        stop_if_interrupted();
        sbx_error e2 = {0};
        if (ops->create(pstate, NULL, NULL, policy, &all[alive], &e2) != SBX_OK) {
            fprintf(stderr, "bench_local: stopped at %zu idle sandboxes: %s\n", alive, e2.message);
            break;
        }
        run_true(all[alive]); /* idle after one use, like a session between calls */
    }
    /* Idle means idle: an agent gives back its per-request buffers after a second without a
     * request (the agent's AGENT_TRIM_IDLE_MS); the last sandboxes made have had no second yet. */
    usleep(BENCH_IDLE_WAIT_MS * 1000);
    stop_if_interrupted();
    kernel_memory after = kernel_memory_now();
    long rss_sum = 0, pss_sum = 0, rss_max = 0, spare_sum = 0;
    for (size_t i = 0; i < alive; i++) {
        long rss, pss, spare;
        agent_memory(all[i], &rss, &pss, &spare);
        rss_sum += rss;
        pss_sum += pss;
        spare_sum += spare;
        if (rss > rss_max)
            rss_max = rss;
    }
    if (alive) {
        char label[96];
        snprintf(label, sizeof label, "idle: agent RSS per sandbox, %zu alive", alive);
        printf("  %-58s %10.1f KiB (max %ld KiB, PSS %.1f KiB, its spare's PSS %.1f KiB; "
               "target <= 1024 KiB)\n",
               label, (double)rss_sum / (double)alive, rss_max, (double)pss_sum / (double)alive,
               (double)spare_sum / (double)alive);
        print_kernel_memory(&before, &after, alive);
    }
    for (size_t i = 0; i < alive; i++)
        destroy(all[i]);
    clean_up();
    free(all);
    free(sbx_us);
    free(c_us);
    free(x_us);
    free(d_us);
    free(bw_us);
    free(warm_us);
    sbx_message_free((ProtobufCMessage *)policy);
    return 0;
}
