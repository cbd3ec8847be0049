/* docker_agent_none.c - the managed back end when the build has no host-side agent client
 * (providers/common/agent_client.c absent): docker_agent_connect leaves sb->agent NULL and
 * managed containers are driven through the exec and archive API like attached ones (no
 * stateful kernels; the capabilities say so). docker_agent.c replaces it once the client is in.
 */
#include "providers/docker/docker_agent.h"

#include <stdio.h>
#include <stdlib.h>

bool docker_agent_available(void)
{
    return false;
}

void docker_agent_default_path(char *out, size_t cap)
{
    const char *env = getenv("SBX_AGENT");
    snprintf(out, cap, "%s", env != NULL && env[0] != '\0' ? env : "/usr/libexec/sbx/sbx-agent");
}

sbx_status docker_agent_connect(docker_sandbox *sb, bool fresh, sbx_error *err)
{
    (void)fresh;
    (void)err;
    sb->agent = NULL;
    return SBX_OK;
}

void docker_agent_close(docker_sandbox *sb)
{
    (void)sb;
}

#define NO_CLIENT(name, type)                                                                      \
    sbx_status name(docker_sandbox *sb, const type *op, const sbx_exec_opts *o,                    \
                    sbx_result *result, sbx_error *err)                                            \
    {                                                                                              \
        (void)sb, (void)op, (void)o, (void)result;                                                 \
        return sbx_error_set(err, SBX_E_INTERNAL, "docker: no agent client in this build");        \
    }
NO_CLIENT(docker_agent_run_command, Sbx__V1__RunCommand)
NO_CLIENT(docker_agent_run_code, Sbx__V1__RunCode)
NO_CLIENT(docker_agent_write_file, Sbx__V1__WriteFile)
NO_CLIENT(docker_agent_read_file, Sbx__V1__ReadFile)
NO_CLIENT(docker_agent_list_files, Sbx__V1__ListFiles)
