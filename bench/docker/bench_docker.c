/* bench_docker.c - docker provider benchmarks against a private dockerd, with their peers in the
 * same run (medians):
 *
 *   warm exec  : /bin/true in one running container, through sbx-agent (managed)
 *                vs the exec API (attached back end) vs `docker exec` (Debian's CLI)
 *   cold       : create -> first exec of /bin/true -> destroy (managed)
 *                vs `docker run --rm IMAGE /bin/true`
 *
 * Usage: bench_docker STATE_FILE   (scripts/dockerd-test.sh start STATE_FILE first; run.sh
 * does both). Timing lives here, never in the pass/fail tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

extern const sbx_provider_ops sbx_provider_docker;
static const sbx_provider_ops *ops = &sbx_provider_docker;

/* Iterations per row: enough for a stable median on a loaded 2-core machine, few enough that
 * the slow peers (a `docker` CLI process per call, a container per run) finish in a minute. */
#define WARM_AGENT_RUNS 300
#define WARM_API_RUNS 60
#define WARM_CLI_RUNS 40
#define COLD_RUNS 12

static char socket_path[600], image[128], docker_host[700];

static void read_state(const char *file)
{
    FILE *f = fopen(file, "re");
    if (f == NULL) {
        fprintf(stderr,
                "bench_docker: cannot open %s (start the daemon with "
                "scripts/dockerd-test.sh start %s)\n",
                file, file);
        exit(2);
    }
    char line[1024];
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "SBX_DOCKER_SOCKET=", 18) == 0)
            snprintf(socket_path, sizeof(socket_path), "%.500s", line + 18);
        else if (strncmp(line, "SBX_DOCKER_IMAGE_BUSYBOX=", 25) == 0)
            snprintf(image, sizeof(image), "%.100s", line + 25);
    }
    fclose(f);
    snprintf(docker_host, sizeof(docker_host), "unix://%s", socket_path);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *open_provider(sbx_environment env, const char *attach_to, const char *runtime_dir,
                           const char *agent)
{
    sbx_error err;
    sbx_options *o = sbx_options_new(ops->options);
    sbx_options_set(o, "socket", socket_path, &err);
    sbx_options_set(o, "image", image, &err);
    if (agent != NULL)
        sbx_options_set(o, "agent", agent, &err);
    sbx_provider_ctx ctx = {.profile = "bench",
                            .options = o,
                            .environment = env,
                            .attach_to = attach_to,
                            .node = "bench",
                            .runtime_dir = runtime_dir};
    void *state = NULL;
    if (ops->open(&ctx, &state, &err) != SBX_OK) {
        fprintf(stderr, "bench_docker: open: %s\n", err.message);
        exit(1);
    }
    sbx_options_free(o);
    return state;
}

static int64_t run_true(sbx_sandbox *sb, const sbx_policy *pol, const sbx_principal *pr)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    char *argv[] = {"/bin/true"};
    op.argv = argv;
    op.n_argv = 1;
    sbx_exec_opts o = {
        .principal = pr, .policy = pol, .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    int64_t t0 = sbx_monotonic_us();
    sbx_status st = ops->run_command(sb, &op, &o, r, &err);
    int64_t dt = sbx_monotonic_us() - t0;
    if (st != SBX_OK || r->exit_code != 0) {
        fprintf(stderr, "bench_docker: /bin/true failed: %s\n", err.message);
        exit(1);
    }
    sbx_message_free((ProtobufCMessage *)r);
    return dt;
}

/* Runs a command line through /bin/sh with DOCKER_HOST set; returns its wall time in us. */
static int64_t time_cli(const char *cmdline)
{
    int64_t t0 = sbx_monotonic_us();
    int rc = system(cmdline);
    int64_t dt = sbx_monotonic_us() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_docker: '%s' failed (%d)\n", cmdline, rc);
        exit(1);
    }
    return dt;
}

static void row(const char *name, int64_t med_us, size_t n, const char *peer_note)
{
    printf("  %-58s %10.3f ms  (n=%zu)%s\n", name, (double)med_us / 1000.0, n, peer_note);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_docker STATE_FILE\n");
        return 2;
    }
    read_state(argv[1]);
    setenv("DOCKER_HOST", docker_host, 1);
    const char *agent = getenv("SBX_AGENT");
    if (agent != NULL && access(agent, X_OK) != 0)
        agent = NULL;
    char rt[] = "/tmp/sbx-bench-docker.XXXXXX";
    if (mkdtemp(rt) == NULL)
        return 1;
    sbx_policy *pol = sbx_policy_new();
    pol->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    sbx_principal *pr = sbx_principal_new();
    sbx_session_handle *h = sbx_session_handle_new();
    sbx_set_string(&h->session_id, "bench");
    sbx_error err;
    static int64_t t[WARM_AGENT_RUNS];

    printf("docker provider (private dockerd %s, image %s)\n", socket_path, image);
    if (agent == NULL) {
        printf("  (sbx-agent not built in this tree: managed rows skipped)\n");
        return 0;
    }
    void *managed = open_provider(SBX_ENV_MANAGED, NULL, rt, agent);
    sbx_sandbox *sb = NULL;
    if (ops->create(managed, h, pr, pol, &sb, &err) != SBX_OK) {
        fprintf(stderr, "bench_docker: create: %s\n", err.message);
        return 1;
    }
    char *cid = strdup(sb->id);

    /* Warm exec through the agent. */
    for (int i = 0; i < 5; i++)
        run_true(sb, pol, pr);
    for (size_t i = 0; i < WARM_AGENT_RUNS; i++)
        t[i] = run_true(sb, pol, pr);
    int64_t agent_med = median(t, WARM_AGENT_RUNS);

    /* The same container through the exec API (what attached profiles use). */
    void *attached = open_provider(SBX_ENV_ATTACHED, cid, NULL, NULL);
    sbx_sandbox *asb = NULL;
    if (ops->attach(attached, cid, pr, pol, &asb, &err) != SBX_OK) {
        fprintf(stderr, "bench_docker: attach: %s\n", err.message);
        return 1;
    }
    for (size_t i = 0; i < WARM_API_RUNS; i++)
        t[i] = run_true(asb, pol, pr);
    int64_t api_med = median(t, WARM_API_RUNS);
    ops->sandbox_close(asb);
    ops->close(attached);

    /* `docker exec` of the same command in the same container. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "/usr/bin/docker exec %s /bin/true", cid);
    for (size_t i = 0; i < WARM_CLI_RUNS; i++)
        t[i] = time_cli(cmd);
    int64_t cli_med = median(t, WARM_CLI_RUNS);

    ops->sandbox_close(sb);
    ops->destroy(managed, cid, &err);
    free(cid);

    /* Cold: create -> first exec -> destroy. */
    for (size_t i = 0; i < COLD_RUNS; i++) {
        int64_t t0 = sbx_monotonic_us();
        sbx_sandbox *c = NULL;
        if (ops->create(managed, h, pr, pol, &c, &err) != SBX_OK) {
            fprintf(stderr, "bench_docker: create: %s\n", err.message);
            return 1;
        }
        run_true(c, pol, pr);
        char *id = strdup(c->id);
        ops->sandbox_close(c);
        ops->destroy(managed, id, &err);
        free(id);
        t[i] = sbx_monotonic_us() - t0;
    }
    int64_t cold_med = median(t, COLD_RUNS);
    snprintf(cmd, sizeof(cmd), "/usr/bin/docker run --rm --network none %s /bin/true", image);
    for (size_t i = 0; i < COLD_RUNS; i++)
        t[i] = time_cli(cmd);
    int64_t run_med = median(t, COLD_RUNS);
    ops->close(managed);

    char note[128];
    row("warm exec /bin/true via sbx-agent (managed)", agent_med, WARM_AGENT_RUNS, "");
    snprintf(note, sizeof(note), "  agent is %.1fx faster", (double)api_med / (double)agent_med);
    row("warm exec /bin/true via exec API (attached back end)", api_med, WARM_API_RUNS, note);
    snprintf(note, sizeof(note), "  agent is %.1fx faster (target >= 20x)",
             (double)cli_med / (double)agent_med);
    row("warm exec /bin/true via `docker exec` (peer)", cli_med, WARM_CLI_RUNS, note);
    row("cold create -> first exec -> destroy (managed)", cold_med, COLD_RUNS, "");
    snprintf(note, sizeof(note), "  sbx/peer = %.2f", (double)cold_med / (double)run_med);
    row("cold `docker run --rm IMAGE /bin/true` (peer)", run_med, COLD_RUNS, note);

    sbx_message_free((ProtobufCMessage *)pol);
    sbx_message_free((ProtobufCMessage *)pr);
    sbx_message_free((ProtobufCMessage *)h);
    char rm[128];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", rt);
    if (system(rm) != 0)
        fprintf(stderr, "bench_docker: could not remove %s\n", rt);
    return 0;
}
