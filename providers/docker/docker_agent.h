/* docker_agent.h - the managed back end of the docker provider: the container's PID 1 is
 * sbx-agent, reached through the host directory bind-mounted at /.sbx, so execution, files,
 * stateful code and reattach behave as on the local provider. Private to providers/docker/.
 */
#ifndef SBX_DOCKER_AGENT_H
#define SBX_DOCKER_AGENT_H

/* How long a reconnect waits for a running container's agent before calling it gone. */
#define DOCKER_AGENT_RECONNECT_MS 5000

#include <stdbool.h>

#include "providers/docker/docker_provider.h"

/* Where sbx-agent is when the profile does not say (docker.agent): the shared client's search
 * ($SBX_AGENT, the build tree, beside the program, /usr/libexec/sbx/sbx-agent). */
void docker_agent_default_path(char *out, size_t cap);
/* Connects sb->agent to the agent socket under sb->state_dir. fresh: the container was just
 * started, so wait (bounded) for the socket to appear (PROVISION when it never does). GONE when
 * a running container's agent cannot be reached. */
sbx_status docker_agent_connect(docker_sandbox *sb, bool fresh, sbx_error *err);
/* Finds the OOM-kill counter of the cgroup of the container whose init is host pid `pid`
 * (cgroup v1 memory.oom_control, or v2 memory.events) and keeps its path in sb->oom_file; none
 * found leaves it NULL (an OOM kill then reads as SIGKILL). */
void docker_agent_find_oom_counter(docker_sandbox *sb, long pid);
/* Drops the connection (never the container). */
void docker_agent_close(docker_sandbox *sb);

sbx_status docker_agent_run_command(docker_sandbox *sb, const Sbx__V1__RunCommand *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_agent_run_code(docker_sandbox *sb, const Sbx__V1__RunCode *op,
                                 const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_agent_write_file(docker_sandbox *sb, const Sbx__V1__WriteFile *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_agent_read_file(docker_sandbox *sb, const Sbx__V1__ReadFile *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_agent_list_files(docker_sandbox *sb, const Sbx__V1__ListFiles *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
/* Detached commands (managed containers: the agent keeps their journals). */
sbx_status docker_agent_attach_command(docker_sandbox *sb, const Sbx__V1__AttachCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_agent_cancel_command(docker_sandbox *sb, const Sbx__V1__CancelCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err);

#endif
