/* docker_provider.h - the docker provider's private types, shared by its files: the provider
 * state, the sandbox handle, and the two execution back ends (the exec/archive API for attached
 * containers, the sbx-agent for managed ones). Private to providers/docker/.
 */
#ifndef SBX_DOCKER_PROVIDER_H
#define SBX_DOCKER_PROVIDER_H

#include "providers/common/expose.h"
#include <stdbool.h>

#include "providers/docker/docker_api.h"
#include "sbx/provider.h"

/* Output kept per stream when the caller sets no limit: the worker's default maximum message is
 * 16 MiB, so two streams of 4 MiB plus framing always fit in one completion. */
#define DOCKER_MAX_OUTPUT_BYTES (4u * 1024u * 1024u)
/* Largest file read_file returns, and write_file accepts: the content travels inside one
 * completion or request (16 MiB default message limit). */
#define DOCKER_MAX_FILE_BYTES (16u * 1024u * 1024u)
/* list_files through the archive API streams the whole subtree; past this many bytes (or
 * entries) the listing is refused rather than read forever. */
#define DOCKER_MAX_LIST_ARCHIVE_BYTES (256ull * 1024u * 1024u)
#define DOCKER_MAX_LIST_ENTRIES 100000
/* How many symlinks read_file follows through the archive API before refusing (as ELOOP). */
#define DOCKER_MAX_SYMLINK_HOPS 8
/* Code passed to an interpreter on its command line (`python3 -c CODE`): Linux caps one
 * argument at MAX_ARG_STRLEN (128 KiB); stay below with room for the environment. */
#define DOCKER_MAX_CODE_ARG (120u * 1024u)

/* One per profile. Written by open only, then read-only: shared by every thread without a lock
 * (each API call makes its own libcurl handle). */
typedef struct docker_provider {
    docker_api api;
    char *profile;
    char *node;
    char *runtime_dir; /* <ctx runtime_dir>/docker: per-sandbox agent socket dirs */
    bool managed;
    char *attach_to; /* attached: the container named in the profile */
    char *image;
    char *agent_path; /* host path of the static sbx-agent */
    char *workdir;
    char *python;
    char *network;         /* NetworkMode for network_egress=allow */
    bool shared_network;   /* allow may use a network whose containers reach each other */
    char *egress_resolver; /* network_egress=allowlist: the egress proxy's resolver ("" host's) */
    char *exec_user;       /* attached: exec as this user (NULL: the container's) */
    int64_t tmpfs_mb;      /* size of the workdir and /tmp tmpfs of managed containers */
    bool languages[3];     /* run_code languages offered, indexed by docker_lang */
    bool per_call;         /* the profile's sandboxes live for one call: labelled for the sweep */
    int64_t uid_base, uid_slots; /* managed: container slot k runs programs as uid_base + k */
    char *uid_slot_dir;          /* managed: the slot registry (providers/common/uid_slots.h) */
    char owner[48];        /* "<pid> <start time>" of this process, the sbx.owner_process label */
    sbx_expose_cfg expose; /* managed: exposed ports' listen address and URL host */
} docker_provider;

/* run_code languages the docker provider knows (docker.languages picks the offered ones). */
enum { DOCKER_LANG_PYTHON = 0, DOCKER_LANG_BASH = 1, DOCKER_LANG_SH = 2, DOCKER_LANG_COUNT = 3 };
extern const char *const docker_lang_names[DOCKER_LANG_COUNT];
/* Index of a language name, -1 when unknown. */
int docker_lang_index(const char *name);

/* One live handle; used by one thread at a time (the engine's per-session lock). */
typedef struct docker_sandbox {
    sbx_sandbox base; /* first: the engine sees an sbx_sandbox */
    docker_provider *p;
    bool managed;          /* created by sbx (labels say so): execution through the agent */
    char *workdir;         /* the container's working dir (relative paths resolve here) */
    char *state_dir;       /* managed: host dir bind-mounted at /.sbx (agent socket) */
    void *agent;           /* managed: the agent connection (docker_agent.c); NULL after a failure,
                              reconnected by the next operation */
    char *oom_file;        /* managed: the container cgroup's OOM-kill counter file, or NULL */
    char egress_dir[1100]; /* managed allowlist: the egress proxy's dir (egress.h), else "" */
} docker_sandbox;

/* Output accumulation shared by both back ends: bounded per stream, streamed with offsets. */
typedef struct docker_output {
    sbx_result *result;
    const sbx_exec_opts *opts;
    uint64_t limit;     /* per stream */
    uint64_t offset[3]; /* bytes seen per stream (index 1 stdout, 2 stderr) */
    bool over_limit;
} docker_output;

void docker_output_init(docker_output *o, sbx_result *r, const sbx_exec_opts *opts);
void docker_output_add(void *arg, int stream, const uint8_t *data, size_t len);

/* Attached (and agent-less) back end: exec and archive API (docker_exec_ops.c). */
sbx_status docker_exec_run(docker_sandbox *sb, const char *const *argv, const char *const *env,
                           const char *cwd, const uint8_t *stdin_data, size_t stdin_len,
                           const sbx_exec_opts *o, sbx_result *result, sbx_error *err);
sbx_status docker_archive_write(docker_sandbox *sb, const Sbx__V1__WriteFile *op,
                                sbx_result *result, sbx_error *err);
sbx_status docker_archive_read(docker_sandbox *sb, const Sbx__V1__ReadFile *op, sbx_result *result,
                               sbx_error *err);
sbx_status docker_archive_list(docker_sandbox *sb, const Sbx__V1__ListFiles *op, sbx_result *result,
                               sbx_error *err);

/* True only with proof that the container is gone: the daemon answered that it does not exist
 * or is not running. An unreachable or slow daemon proves nothing (false). */
bool docker_container_gone(docker_provider *p, const char *id);

/* Why a network, as the daemon's GET /networks/NAME describes it, lets one container reach
 * another (a static reason), or NULL when it keeps them apart: Docker's bridge driver with
 * com.docker.network.bridge.enable_icc "false", or the null driver ("none"). */
const char *docker_network_shared(const json_t *net);

/* An absolute path inside the container: `path` as is when absolute, else under the workdir.
 * malloc'd; NULL on ENOMEM. */
char *docker_abs_path(const docker_sandbox *sb, const char *path);

#endif
