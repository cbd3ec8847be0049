/* bench_snapshot.c - workspace snapshots through the engine on the local provider, medians:
 *   snapshot  SnapshotWorkspace of a session whose workspace holds SIZE MiB (random bytes in
 *             a few files): tar inside the sandbox, ReadFile chunks out, fsync'd into the store
 *   fork      a new session from that snapshot, up to its first command (create, WriteFile
 *             chunks in, tar -x inside, then `true`)
 *   peers     on the host, the same bytes: `tar -cf` of the tree plus fsync (what a snapshot
 *             cannot beat), and `cp -a` of the tree (a copy without sandboxes)
 * Each round uses a new snapshot name and a new task id. Usage: bench_snapshot [SIZE_MB] [RUNS]
 * Timing belongs here, never in pass/fail tests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/engine.h"

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

static void die(const char *what, const char *why)
{
    fprintf(stderr, "bench_snapshot: %s: %s\n", what, why ? why : "");
    exit(1);
}

static sbx_completion *must(sbx_engine *e, sbx_request *r, const char *what)
{
    sbx_completion *c = sbx_engine_process(e, r, NULL);
    sbx_request_free(r);
    if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        die(what, c != NULL ? c->error : "no completion");
    if (c->result != NULL && c->result->exit_code != 0)
        die(what, (const char *)c->result->stderr.data);
    return c;
}

static void destroy(sbx_engine *e, const sbx_session_handle *h)
{
    sbx_completion_free(must(e, sbx_request_destroy(h), "destroy"));
}

static int64_t host_us(const char *cmd)
{
    int64_t t0 = sbx_monotonic_us();
    if (system(cmd) != 0)
        die("host command", cmd);
    return sbx_monotonic_us() - t0;
}

int main(int argc, char **argv)
{
    long size_mb = argc > 1 ? atol(argv[1]) : 100;
    size_t runs = argc > 2 ? (size_t)atol(argv[2]) : 5;
    if (size_mb < 1 || runs < 1)
        die("usage", "bench_snapshot [SIZE_MB >= 1] [RUNS >= 1]");
    char dir[] = "/tmp/sbx-bench-snap-XXXXXX";
    if (mkdtemp(dir) == NULL || chmod(dir, 0755) != 0) /* the sandboxes search runtime_dir */
        die("mkdtemp", NULL);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  secret_file: %s/secret\n"
             "  runtime_dir: %s/run\n"
             "  snapshot_dir: %s/store\n"
             "  snapshot_max_mb: %ld\n"
             "  profiles:\n"
             "    b:\n"
             "      type: local\n"
             "      policy: { network_egress: deny, timeout_ms: 600000 }\n"
             "      local: { workspace_mb: %ld, tmp_mb: %ld }\n",
             dir, dir, dir, size_mb * 2 + 16, size_mb * 2 + 64, size_mb * 2 + 64);
    sbx_config *cfg = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (sbx_config_load_string(yaml, strlen(yaml), "bench.yaml", &cfg, &err) != SBX_OK)
        die("config", err.message);
    sbx_engine *e = NULL;
    if (sbx_engine_new(cfg, &e, &err) != SBX_OK)
        die("engine", err.message);

    /* the workspace: four files of random bytes, SIZE MiB in all */
    char line[512];
    snprintf(line, sizeof line,
             "for i in 1 2 3 4; do head -c %ld /dev/urandom > part$i; done; mkdir -p src && "
             "echo x > src/a",
             size_mb * 1024 * 1024 / 4);
    sbx_completion *c = must(e, sbx_request_shell("b", line), "fill the workspace");
    sbx_session_handle *h = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    sbx_completion_free(c);

    int64_t *snap_us = calloc(runs, sizeof *snap_us), *fork_us = calloc(runs, sizeof *fork_us);
    int64_t *tar_us = calloc(runs, sizeof *tar_us), *cp_us = calloc(runs, sizeof *cp_us);
    uint64_t size = 0;
    /* the host peers work on a copy of the same bytes */
    char host[600], cmd[2048];
    snprintf(host, sizeof host, "%s/host", dir);
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tree/src && for i in 1 2 3 4; do head -c %ld /dev/urandom > "
             "%s/tree/part$i; done && echo x > %s/tree/src/a",
             host, size_mb * 1024 * 1024 / 4, host, host);
    host_us(cmd);
    for (size_t i = 0; i < runs; i++) {
        char name[32];
        snprintf(name, sizeof name, "bench-%zu", i);
        sbx_request *r = sbx_request_shell("b", "true");
        sbx_message_free((ProtobufCMessage *)r->run_command);
        r->run_command = NULL;
        r->snapshot = malloc(sizeof *r->snapshot);
        sbx__v1__snapshot_workspace__init(r->snapshot);
        sbx_set_string(&r->snapshot->name, name);
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT;
        sbx_request_set_session(r, h);
        int64_t t0 = sbx_monotonic_us();
        c = must(e, r, "snapshot");
        snap_us[i] = sbx_monotonic_us() - t0;
        size = c->result->snapshots[0]->size;
        sbx_completion_free(c);

        r = sbx_request_shell("b", "true");
        sbx_set_string(&r->from_snapshot, name);
        t0 = sbx_monotonic_us();
        c = must(e, r, "fork");
        fork_us[i] = sbx_monotonic_us() - t0;
        destroy(e, c->session);
        sbx_completion_free(c);

        snprintf(cmd, sizeof cmd, "tar -C %s/tree -cf %s/t.tar . && sync -f %s/t.tar", host, host,
                 host);
        tar_us[i] = host_us(cmd);
        snprintf(cmd, sizeof cmd, "rm -rf %s/copy && cp -a %s/tree %s/copy", host, host, host);
        cp_us[i] = host_us(cmd);
    }
    printf("snapshots (local provider, a %ld MiB workspace, %zu runs, medians)\n", size_mb, runs);
    printf("  %-58s %10.1f ms  (%.1f MiB kept)\n", "snapshot: pack, copy out, keep",
           median_ms(snap_us, runs), (double)size / 1048576.0);
    printf("  %-58s %10.1f ms\n", "fork: new session from it, up to its first command",
           median_ms(fork_us, runs));
    printf("  %-58s %10.1f ms\n", "peer: host tar -cf of the same tree + sync",
           median_ms(tar_us, runs));
    printf("  %-58s %10.1f ms\n", "peer: host cp -a of the same tree", median_ms(cp_us, runs));
    destroy(e, h);
    sbx_message_free(&h->base);
    sbx_engine_free(e);
    sbx_config_free(cfg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_snapshot: could not remove %s\n", dir);
    free(snap_us);
    free(fork_us);
    free(tar_us);
    free(cp_us);
    return 0;
}
