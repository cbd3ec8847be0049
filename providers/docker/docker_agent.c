/* docker_agent.c - the managed back end of the docker provider (see docker_agent.h): a managed
 * container's PID 1 is sbx-agent, its /.sbx is the host dir sb->state_dir, and every operation
 * goes through the shared host-side client (providers/common/agent_client), exactly as on the
 * local provider. This file only finds and keeps the connection; it must not speak the wire
 * protocol itself.
 */
#include "providers/docker/docker_agent.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "providers/common/agent_client.h"

/* How long a freshly started container may take until its agent accepts: container start plus
 * the agent's own start, on a loaded 2-core machine. */
#define DOCKER_AGENT_START_MS 30000
/* How long a reconnect waits for a running container's agent before calling it gone. */
#define DOCKER_AGENT_RECONNECT_MS 5000
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
        sbx_monotonic_ms() + (fresh ? DOCKER_AGENT_START_MS : DOCKER_AGENT_RECONNECT_MS);
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
        sbx_error_prefix(err,
                         "container %.12s is running but its agent is unreachable: ", sb->base.id);
        if (err != NULL)
            err->code = SBX_E_GONE;
        return SBX_E_GONE;
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

static const sbx_agent_identity default_identity = {0, 0};

sbx_status docker_agent_run_command(docker_sandbox *sb, const Sbx__V1__RunCommand *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    return sbx_agent_run_command(sb->agent, op, &default_identity, o, result, NULL, err);
}

sbx_status docker_agent_run_code(docker_sandbox *sb, const Sbx__V1__RunCode *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    const char *lang = op->language != NULL ? op->language : "";
    /* The caller (docker.c) checked the language against docker.languages. Python keeps its
     * variables between calls (the agent's persistent kernel). */
    bool stateful = strcmp(lang, "python") == 0;
    return sbx_agent_run_code(sb->agent, op, stateful, &default_identity, o, result, NULL, err);
}

sbx_status docker_agent_write_file(docker_sandbox *sb, const Sbx__V1__WriteFile *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    (void)result;
    return sbx_agent_write_file(sb->agent, op, &default_identity,
                                o != NULL ? o->deadline_mono_ms : 0, NULL, err);
}

sbx_status docker_agent_read_file(docker_sandbox *sb, const Sbx__V1__ReadFile *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    return sbx_agent_read_file(sb->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
}

sbx_status docker_agent_list_files(docker_sandbox *sb, const Sbx__V1__ListFiles *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    return sbx_agent_list_files(sb->agent, op, o != NULL ? o->deadline_mono_ms : 0, result, err);
}
