/* docker_agent.c - the managed back end of the docker provider (see docker_agent.h).
 *
 * Until providers/common/agent_client lands, this build has no host-side agent client:
 * docker_agent_connect leaves sb->agent NULL and managed containers are driven through the
 * exec and archive API like attached ones (no stateful kernels; capabilities say so).
 */
#include "providers/docker/docker_agent.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

bool docker_agent_available(void) { return false; }

void docker_agent_add_args(json_t *entrypoint, const docker_provider *p)
{
    (void)entrypoint;
    (void)p;
}

sbx_status docker_agent_connect(docker_sandbox *sb, bool fresh, sbx_error *err)
{
    (void)fresh;
    (void)err;
    sb->agent = NULL;
    return SBX_OK;
}

void docker_agent_close(docker_sandbox *sb) { (void)sb; }

void docker_agent_cleanup_dir(const char *dir)
{
    /* The dir holds only what the agent made (its socket, small metadata files): one level. */
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            unlinkat(dirfd(d), e->d_name, 0);
        }
        closedir(d);
    }
    rmdir(dir);
}

#define NO_CLIENT(name, type)                                                                  \
    sbx_status name(docker_sandbox *sb, const type *op, const sbx_exec_opts *o,                \
                    sbx_result *result, sbx_error *err)                                        \
    {                                                                                          \
        (void)sb, (void)op, (void)o, (void)result;                                             \
        return sbx_error_set(err, SBX_E_INTERNAL, "docker: no agent client in this build");    \
    }
NO_CLIENT(docker_agent_run_command, Sbx__V1__RunCommand)
NO_CLIENT(docker_agent_run_code, Sbx__V1__RunCode)
NO_CLIENT(docker_agent_write_file, Sbx__V1__WriteFile)
NO_CLIENT(docker_agent_read_file, Sbx__V1__ReadFile)
NO_CLIENT(docker_agent_list_files, Sbx__V1__ListFiles)
