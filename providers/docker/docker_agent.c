/* docker_agent.c - the managed back end of the docker provider (see docker_agent.h): a managed
 * container's PID 1 is sbx-agent, its /.sbx is the host dir sb->state_dir, and every operation
 * goes through the shared host-side client (providers/common/agent_client), exactly as on the
 * local provider. This file only finds and keeps the connection; it must not speak the wire
 * protocol itself.
 */
#include "providers/docker/docker_agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "providers/common/agent_client.h"

/* How long a freshly started container may take until its agent accepts: container start plus
 * the agent's own start, on a loaded 2-core machine. */
#define DOCKER_AGENT_START_MS 30000
/* Pause between connection attempts while waiting for the agent's socket. */
#define DOCKER_AGENT_RETRY_MS 20

void docker_agent_default_path(char *out, size_t cap)
{
    sbx_error ignored;
    if (sbx_agent_binary_path(out, cap, &ignored) != SBX_OK)
        snprintf(out, cap, "/usr/libexec/sbx/sbx-agent"); /* create then names it as missing */
}

sbx_status docker_agent_connect(docker_sandbox *sb, bool fresh, sbx_error *err)
{
    sb->agent = NULL;
    if (sb->state_dir == NULL)
        return sbx_error_set(err, SBX_E_GONE,
                             "container %.12s has no agent state dir label; not an sbx sandbox",
                             sb->base.id);
    char path[1100];
    snprintf(path, sizeof(path), "%s/agent.sock", sb->state_dir);
    sbx_agent_conn *c = NULL;
    int64_t deadline =
        sbx_provider_step_deadline(fresh ? DOCKER_AGENT_START_MS : DOCKER_AGENT_RECONNECT_MS);
    sbx_status st;
    /* A just-started container may not have created its socket yet: retry until the deadline
     * (the client answers at once when the socket file does not exist). */
    for (;;) {
        st = sbx_agent_connect(path, deadline, &c, err);
        if (st == SBX_OK || sbx_monotonic_ms() >= deadline)
            break;
        struct timespec pause = {0, DOCKER_AGENT_RETRY_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    if (st != SBX_OK) {
        if (fresh) {
            /* Just created: the agent never came up -- a provisioning failure, not a gone box. */
            sbx_error_prefix(err,
                             "the sbx-agent of new container %.12s did not come up "
                             "(is docker.agent a static sbx-agent?): ",
                             sb->base.id);
            if (err != NULL)
                err->code = SBX_E_PROVISION;
            return SBX_E_PROVISION;
        }
        /* Gone only with proof (the container stopped or was removed). A running container
         * whose agent refuses, is busy or stopped is unavailable: never recreated beside it. */
        if (docker_container_gone(sb->p, sb->base.id)) {
            sbx_error_prefix(err, "container %.12s stopped: ", sb->base.id);
            if (err != NULL)
                err->code = SBX_E_GONE;
            return SBX_E_GONE;
        }
        int64_t req = sbx_provider_deadline_ms();
        sbx_status code = req > 0 && sbx_monotonic_ms() >= req ? SBX_E_TIMEOUT : SBX_E_PROVISION;
        sbx_error_prefix(err,
                         "container %.12s is running but its agent is unavailable (busy or "
                         "stopped; not recreated): ",
                         sb->base.id);
        if (err != NULL)
            err->code = code;
        return code;
    }
    sb->agent = c;
    return SBX_OK;
}

void docker_agent_close(docker_sandbox *sb)
{
    if (sb == NULL || sb->agent == NULL)
        return;
    sbx_agent_close(sb->agent);
    sb->agent = NULL;
}

/* Largest /proc/<pid>/cgroup or counter file we read: a few hundred bytes in practice. */
#define DOCKER_SMALL_FILE 4096

static bool read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0;
}

void docker_agent_find_oom_counter(docker_sandbox *sb, long pid)
{
    if (pid <= 1)
        return;
    char path[64], text[DOCKER_SMALL_FILE];
    snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
    if (!read_small(path, text, sizeof(text)))
        return;
    /* v1: "N:memory:/docker/<id>" -> /sys/fs/cgroup/memory/docker/<id>/memory.oom_control;
     * v2 (only "0::/path"): /sys/fs/cgroup/path/memory.events. Both count "oom_kill N". */
    char file[1200] = "";
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL || strstr(c2, "..") != NULL)
            continue;
        size_t clen = (size_t)(c2 - c1 - 1);
        if (clen == 6 && strncmp(c1 + 1, "memory", 6) == 0) {
            snprintf(file, sizeof(file), "/sys/fs/cgroup/memory%.1000s/memory.oom_control", c2 + 1);
            break;
        }
        if (clen == 0 && file[0] == '\0')
            snprintf(file, sizeof(file), "/sys/fs/cgroup%.1000s/memory.events", c2 + 1);
    }
    if (file[0] != '\0' && access(file, R_OK) == 0)
        sb->oom_file = strdup(file);
}

static long long oom_kills(const docker_sandbox *sb)
{
    char buf[DOCKER_SMALL_FILE];
    if (sb->oom_file == NULL || !read_small(sb->oom_file, buf, sizeof(buf)))
        return -1;
    const char *p = strstr(buf, "oom_kill ");
    return p != NULL ? strtoll(p + 9, NULL, 10) : -1;
}

/* Connects again when an earlier operation dropped the connection. */
static sbx_status ensure_conn(docker_sandbox *sb, sbx_error *err)
{
    if (sb->agent != NULL)
        return SBX_OK;
    return docker_agent_connect(sb, false, err);
}

/* After an operation: a broken connection is dropped (the next operation reconnects); a
 * program killed while the cgroup's OOM counter rose is OOM, as on the local provider; an
 * agent lost because its container stopped is GONE. */
static sbx_status after_op(docker_sandbox *sb, long long oom_before, sbx_status st,
                           sbx_result *result, sbx_error *err)
{
    if (result != NULL && oom_before >= 0 && oom_kills(sb) > oom_before &&
        (result->outcome == SBX__V1__OUTCOME__OUTCOME_SIGNALED ||
         (result->outcome == SBX__V1__OUTCOME__OUTCOME_NONZERO && result->exit_code == 137)))
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OOM;
    if (st == SBX_E_PROVISION || st == SBX_E_GONE || st == SBX_E_INTERNAL) {
        docker_agent_close(sb);
        if (docker_container_gone(sb->p, sb->base.id))
            return sbx_error_set(err, SBX_E_GONE,
                                 "container %.12s stopped or was removed during the operation",
                                 sb->base.id);
    }
    return st;
}

static const sbx_agent_identity default_identity = {0, 0};

sbx_status docker_agent_run_command(docker_sandbox *sb, const Sbx__V1__RunCommand *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    long long before = oom_kills(sb);
    st = sbx_agent_run_command(sb->agent, op, &default_identity, o, result, NULL, err);
    return after_op(sb, before, st, result, err);
}

sbx_status docker_agent_run_code(docker_sandbox *sb, const Sbx__V1__RunCode *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    /* The caller (docker.c) checked the language against docker.languages. Python keeps its
     * variables between calls (the agent's persistent kernel). */
    bool stateful = op->language != NULL && strcmp(op->language, "python") == 0;
    long long before = oom_kills(sb);
    st = sbx_agent_run_code(sb->agent, op, stateful, &default_identity, o, result, NULL, err);
    return after_op(sb, before, st, result, err);
}

sbx_status docker_agent_write_file(docker_sandbox *sb, const Sbx__V1__WriteFile *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    (void)result;
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_write_file(sb->agent, op, &default_identity,
                                  o != NULL ? o->deadline_mono_ms : 0, NULL, err);
    return after_op(sb, -1, st, NULL, err);
}

sbx_status docker_agent_read_file(docker_sandbox *sb, const Sbx__V1__ReadFile *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_read_file(sb->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
    return after_op(sb, -1, st, NULL, err);
}

sbx_status docker_agent_list_files(docker_sandbox *sb, const Sbx__V1__ListFiles *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_list_files(sb->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
    return after_op(sb, -1, st, NULL, err);
}

sbx_status docker_agent_attach_command(docker_sandbox *sb, const Sbx__V1__AttachCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    long long before = oom_kills(sb);
    st = sbx_agent_reattach(sb->agent, op->command_id, op->stdout_offset, op->stderr_offset, o,
                            result, err);
    if (st == SBX_E_TIMEOUT)
        docker_agent_close(sb); /* still subscribed to the command: a fresh connection next */
    return after_op(sb, before, st, result, err);
}

sbx_status docker_agent_cancel_command(docker_sandbox *sb, const Sbx__V1__CancelCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    st = sbx_agent_cancel(sb->agent, op->command_id, op->signal,
                          o != NULL ? o->deadline_mono_ms : 0, result, err);
    docker_agent_close(sb); /* a command that outlived the signal is still followed here */
    return after_op(sb, -1, st, result, err);
}
