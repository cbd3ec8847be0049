/* docker.c - the docker provider (DESIGN §8, isolation CONTAINER): sandboxes are containers of
 * a Docker Engine reached over its unix socket.
 *
 *  - managed: sbx creates the container (labels sbx.*), its entrypoint is sbx-agent
 *    bind-mounted read-only from the host, its /.sbx is a host directory holding the agent's
 *    socket; the policy maps onto HostConfig (NetworkMode none, Memory, NanoCpus, PidsLimit,
 *    ReadonlyRootfs + tmpfs, CapDrop, no-new-privileges). Execution goes through the agent.
 *    network_egress allowlist: NetworkMode none plus the egress proxy (providers/common/egress.h)
 *    in the container's network namespace, its files in <runtime_dir>/egress-<uuid>.
 *  - attached: a container sbx did not create (`attach_to`): execution through the exec API,
 *    files through the archive API; destroy only drops the binding.
 *
 * Reconnect is by container id from any process on the host. A removed or stopped container is
 * GONE. The daemon's own words come back in the error text. This file never pulls an image and
 * never touches a container it did not create, except to exec in an attached one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/limits.h"
#include "providers/common/agent_client.h"
#include "providers/common/egress.h"
#include "providers/common/proc.h"
#include "providers/common/uid_slots.h"
#include "providers/docker/docker_agent.h"
#include "providers/docker/docker_provider.h"
#include "sbx/contract.h"

/* Longest container reference we accept from a handle or attach_to (a 64-hex id, or a name:
 * Docker names are [a-zA-Z0-9][a-zA-Z0-9_.-]+, and we allow a leading '/'). */
#define DOCKER_MAX_REF 128
/* The in-container mount points of the agent binary and its state directory. */
#define DOCKER_AGENT_MOUNT "/.sbx-bin/sbx-agent"
#define DOCKER_STATE_MOUNT "/.sbx"
/* Where managed containers' program uids are registered (providers/common/uid_slots.h): one
 * directory per uid_base, host-wide as root, else under the runtime dir. */
#define DOCKER_UID_SLOT_DIR "/run/sbx-uid-slots"
/* The file in a container's state dir naming its uid slot (released when the dir goes). */
#define DOCKER_UID_SLOT_FILE "uid_slot"
/* ... and the node and profile that made it ("node N\nprofile P\n"): a sweep removes only the
 * state dirs of its own node and profile whose container is gone (docker_sweep). */
#define DOCKER_OWNER_FILE "owner"
/* A state dir without its container is an orphan (removed behind sbx's back: `docker rm -f`, a
 * daemon that lost its containers) only once it is this old: a create makes the dir before it
 * asks the daemon for the container. Far above any create's deadline. */
#define DOCKER_ORPHAN_MIN_AGE_S 600
/* Limits of a managed container's processes (HostConfig.Ulimits), per process; the per-user
 * counts they bound are the container's own, its programs' uid being its own:
 *   nofile      as the local provider's default (programs rarely need more; the agent's few)
 *   nproc       processes of the program uid (the pids cgroup is the policy's limit; this
 *               bounds a container without one)
 *   sigpending  queued signals of the program uid: the host default (~1/12 of RAM pages'
 *               worth) lets one uid pin ~100k, this is ample for any program
 *   memlock     locked memory per process: never the daemon's own (a dockerd under
 *               LimitMEMLOCK=infinity would let a container without a memory limit pin host
 *               memory); 64 KiB, the lowest default a daemon runs with (systemd before 253),
 *               so setting it never needs CAP_SYS_RESOURCE, which a daemon may lack
 *   msgqueue    POSIX message-queue bytes of the program uid: the kernel's default, as local's
 *               programs have it */
#define DOCKER_ULIMIT_NOFILE 1024
#define DOCKER_ULIMIT_NPROC 4096
#define DOCKER_ULIMIT_SIGPENDING 1024
#define DOCKER_ULIMIT_MEMLOCK (64 * 1024)
#define DOCKER_ULIMIT_MSGQUEUE 819200
/* Label keys (DESIGN §8: labels sbx.*). sbx.state_dir tells a reconnecting process where the
 * agent socket lives on the host. */
#define LABEL_MANAGED "sbx.managed"
#define LABEL_SESSION "sbx.session"
#define LABEL_PROFILE "sbx.profile"
#define LABEL_OWNER "sbx.owner"
#define LABEL_NODE "sbx.node"
#define LABEL_STATE "sbx.state_dir"
/* per_call containers carry these two so a sweep can tell an orphan (its owner process, "<pid>
 * <start time>" on this node, is gone) from a container still in use. */
#define LABEL_SCOPE "sbx.scope"
#define LABEL_OWNER_PROCESS "sbx.owner_process"
/* tmpfs size when the policy sets no disk_mb: enough for a scratch workspace, bounded so a
 * program cannot fill the host's memory through it. */
#define DOCKER_DEFAULT_TMPFS_MB 256

static const sbx_option_spec docker_options[] = {
    SBX_EXPOSE_OPTION_SPECS{.key = "socket",
                            .type = SBX_OPT_STRING,
                            .default_value = "/var/run/docker.sock",
                            .help = "unix socket of the Docker daemon"},
    {.key = "image",
     .type = SBX_OPT_STRING,
     .default_value = "busybox:latest",
     .help = "image of managed containers (must exist on the daemon; sbx never pulls)"},
    {.key = "agent",
     .type = SBX_OPT_STRING,
     .default_value = NULL,
     .help = "host path of the static sbx-agent binary (default: $SBX_AGENT, the build "
             "tree's, beside the program, /usr/libexec/sbx/sbx-agent)"},
    {.key = "workdir",
     .type = SBX_OPT_STRING,
     .default_value = "/workspace",
     .help = "working directory of managed containers"},
    {.key = "languages",
     .type = SBX_OPT_LIST,
     .default_value = "python,sh",
     .help = "run_code languages the image has interpreters for (python, bash, sh)"},
    {.key = "python",
     .type = SBX_OPT_STRING,
     .default_value = "python3",
     .help = "python interpreter inside the container, for run_code"},
    {.key = "network",
     .type = SBX_OPT_STRING,
     .default_value = "bridge",
     .help = "Docker network of managed containers when network_egress is allow"},
    {.key = "shared_network",
     .type = SBX_OPT_BOOL,
     .default_value = "false",
     .help = "network_egress allow: accept a docker.network whose containers reach each other "
             "(a bridge with inter-container communication on, such as Docker's default "
             "'bridge'; the host's network; a driver sbx cannot check): refused unless this is "
             "true"},
    {.key = "egress_resolver",
     .type = SBX_OPT_STRING,
     .default_value = "",
     .help = "network_egress allowlist: the resolver the egress proxy asks for allowed names, "
             "a.b.c.d[:port] (default: the host's first IPv4 nameserver in /etc/resolv.conf)"},
    {.key = "user",
     .type = SBX_OPT_STRING,
     .default_value = NULL,
     .help = "attached: run commands as this user (default: the container's)"},
    {.key = "tmpfs_mb",
     .type = SBX_OPT_INT,
     .default_value = "256",
     .min = 1,
     .max = 1048576,
     .help = "size in MiB of each writable tmpfs of managed containers (the workdir, /tmp, "
             "/var/tmp; their root is read-only) when the policy sets no disk_mb"},
    {.key = "uid_base",
     .type = SBX_OPT_INT,
     .default_value = "1400000000",
     .min = 65536,
     .max = 4294901759LL,
     .help = "first host uid/gid programs of managed containers run as: container slot k runs "
             "them as uid_base + k, its own, so the kernel's per-user counts (inotify, queued "
             "signals, processes) are its own (keep the range apart from local.uid_base's)"},
    {.key = "uid_slots",
     .type = SBX_OPT_INT,
     .default_value = "65536",
     .min = 1,
     .max = 16777216,
     .help = "managed containers alive at once, each with its own program uid; uid_base + "
             "uid_slots must stay below 2^32-1"},
    {.key = NULL},
};

/* ---- open / close -------------------------------------------------------------------------- */

const char *const docker_lang_names[DOCKER_LANG_COUNT] = {"python", "bash", "sh"};

int docker_lang_index(const char *name)
{
    for (int i = 0; i < DOCKER_LANG_COUNT; i++)
        if (name != NULL && strcmp(name, docker_lang_names[i]) == 0)
            return i;
    return -1;
}

static char *dup_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

static void provider_free(docker_provider *p)
{
    if (p == NULL)
        return;
    docker_api_close(&p->api);
    free(p->profile);
    free(p->node);
    free(p->runtime_dir);
    free(p->attach_to);
    free(p->image);
    free(p->agent_path);
    free(p->workdir);
    free(p->python);
    free(p->network);
    free(p->egress_resolver);
    free(p->exec_user);
    free(p->uid_slot_dir);
    free(p);
}

static bool ref_ok(const char *ref)
{
    size_t n = ref != NULL ? strlen(ref) : 0;
    if (n == 0 || n > DOCKER_MAX_REF)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = ref[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-' || (c == '/' && i == 0);
        if (!ok)
            return false;
    }
    return true;
}

/* Long because it reads the provider's option block field by field (socket, image, binds, uid
 * range, limits) and contacts the daemon once, into one state freed at one exit. */
static sbx_status docker_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    docker_provider *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    const sbx_options *o = ctx->options;
    p->managed = ctx->environment == SBX_ENV_MANAGED;
    p->profile = strdup(ctx->profile != NULL ? ctx->profile : "");
    p->node = strdup(ctx->node != NULL ? ctx->node : "");
    p->attach_to = dup_or_null(ctx->attach_to);
    p->image = dup_or_null(sbx_options_get(o, "image"));
    p->workdir = dup_or_null(sbx_options_get(o, "workdir"));
    p->python = dup_or_null(sbx_options_get(o, "python"));
    p->network = dup_or_null(sbx_options_get(o, "network"));
    p->shared_network = o != NULL && sbx_options_get_bool(o, "shared_network");
    p->egress_resolver = dup_or_null(sbx_options_get(o, "egress_resolver"));
    p->exec_user = dup_or_null(sbx_options_get(o, "user"));
    const char *const *langs = NULL;
    size_t n_langs = sbx_options_get_list(o, "languages", &langs);
    for (size_t i = 0; i < n_langs; i++) {
        int k = docker_lang_index(langs[i]);
        if (k < 0) {
            sbx_status st = sbx_error_set(err, SBX_E_CONFIG,
                                          "docker.languages has '%s'; accepted: python, bash, "
                                          "sh",
                                          langs[i]);
            provider_free(p);
            return st;
        }
        p->languages[k] = true;
    }
    p->tmpfs_mb = sbx_options_get_int(o, "tmpfs_mb");
    if (p->tmpfs_mb <= 0)
        p->tmpfs_mb = DOCKER_DEFAULT_TMPFS_MB;
    const char *agent = sbx_options_get(o, "agent");
    char found[1024];
    if (agent == NULL || agent[0] == '\0') {
        docker_agent_default_path(found, sizeof(found));
        agent = found;
    }
    /* A bind mount source must be absolute (the daemon resolves nothing against our cwd). */
    char *resolved = realpath(agent, NULL);
    p->agent_path = resolved != NULL ? resolved : strdup(agent);
    if (ctx->runtime_dir != NULL && ctx->runtime_dir[0] != '\0' &&
        asprintf(&p->runtime_dir, "%s/docker", ctx->runtime_dir) < 0)
        p->runtime_dir = NULL;
    if (p->profile == NULL || p->node == NULL || p->agent_path == NULL || p->python == NULL ||
        p->workdir == NULL || p->image == NULL || p->network == NULL) {
        provider_free(p);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "docker.image, docker.workdir, docker.python and docker.network "
                             "must not be empty");
    }
    if (p->workdir[0] != '/') {
        sbx_status st = sbx_error_set(err, SBX_E_CONFIG,
                                      "docker.workdir '%s' must be an absolute path", p->workdir);
        provider_free(p);
        return st;
    }
    if (!p->managed && !ref_ok(p->attach_to)) {
        sbx_status st =
            sbx_error_set(err, SBX_E_CONFIG, "attach_to '%s' is not a container id or name",
                          p->attach_to ? p->attach_to : "");
        provider_free(p);
        return st;
    }
    if (p->managed && p->runtime_dir == NULL) {
        provider_free(p);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "managed docker sandboxes need a runtime dir for the agent sockets "
                             "(sandbox.runtime_dir)");
    }
    p->uid_base = sbx_options_get_int(o, "uid_base");
    p->uid_slots = sbx_options_get_int(o, "uid_slots");
    if (p->managed && p->uid_base + p->uid_slots > 4294967294LL) {
        sbx_status st = sbx_error_set(err, SBX_E_CONFIG,
                                      "docker.uid_base %lld + docker.uid_slots %lld passes the "
                                      "largest uid (2^32-2); lower one of them",
                                      (long long)p->uid_base, (long long)p->uid_slots);
        provider_free(p);
        return st;
    }
    /* host-wide as root (every provider with this range sees the others' slots); otherwise
     * under the runtime dir, which only this user's providers share */
    if (p->managed && (geteuid() == 0 ? asprintf(&p->uid_slot_dir, "%s/docker-%lld",
                                                 DOCKER_UID_SLOT_DIR, (long long)p->uid_base)
                                      : asprintf(&p->uid_slot_dir, "%s/uid-slots-%lld",
                                                 p->runtime_dir, (long long)p->uid_base)) < 0)
        p->uid_slot_dir = NULL;
    if (p->managed && p->uid_slot_dir == NULL) {
        provider_free(p);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    p->per_call = ctx->scope == SBX_SCOPE_PER_CALL;
    sbx_status xst =
        sbx_expose_config(sbx_options_get(o, "expose_address"), sbx_options_get(o, "expose_host"),
                          sbx_options_get_bool(o, "expose_require_token"), &p->expose, err);
    if (xst != SBX_OK) {
        provider_free(p);
        return xst;
    }
    unsigned long long start = sbx_proc_live_start_time((long)getpid());
    snprintf(p->owner, sizeof(p->owner), "%ld %llu", (long)getpid(), start);
    /* The daemon is contacted here once, so a wrong socket is reported when the profile opens;
     * every later call connects anew (a restarted daemon is simply reached again). */
    const char *socket_path = sbx_options_get(o, "socket");
    sbx_status st = docker_api_open(&p->api, socket_path, err);
    if (st != SBX_OK) {
        provider_free(p);
        return st;
    }
    *state = p;
    return SBX_OK;
}

static void docker_close(void *state)
{
    provider_free(state);
}

/* ---- capabilities and policy --------------------------------------------------------------- */

static void docker_capabilities(void *state, sbx_capabilities *caps)
{
    docker_provider *p = state;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_CONTAINER;
    caps->shell = true;
    /* Only the interpreters the image has (docker.languages): declaring bash for a busybox
     * image would be a lie the first run_code exposes. */
    for (int i = 0; i < DOCKER_LANG_COUNT; i++)
        if (p == NULL || p->languages[i])
            sbx_add_string(&caps->n_languages, &caps->languages, docker_lang_names[i]);
    caps->files = true;
    caps->package_install = false;
    caps->attach = true;
    caps->provisions = p == NULL || p->managed;
    caps->attaches_external = p == NULL || !p->managed;
    caps->principal_user = false;
    caps->streaming = true;
    bool managed = p == NULL || p->managed;
    /* Managed containers are made to the policy; an attached one is as its owner made it. */
    caps->stateful = managed; /* the agent's persistent python kernel */
    caps->detach = managed;   /* the agent's command journals; the exec API keeps none */
    caps->pause = managed;    /* the daemon's freezer: POST /containers/{id}/pause */
    caps->expose = managed;   /* a relay per port into the container's network namespace */
    caps->policy_network = managed;
    caps->policy_network_domains = managed; /* the egress proxy (providers/common/egress.h) */
    caps->policy_filesystem = managed;
    caps->policy_resources = managed;
}

static sbx_status docker_check_policy(void *state, const sbx_policy *policy,
                                      sbx_strlist *unenforceable, sbx_error *err)
{
    docker_provider *p = state;
    bool ok = true;
    (void)err;
    switch (policy->network_egress) {
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY:
        if (!p->managed)
            ok &= sbx_strlist_add(unenforceable, "network_egress=deny");
        break;
    case SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST:
        /* managed: NetworkMode none and the egress proxy in the container's namespace; an
         * attached container's network is its owner's */
        if (p->managed)
            ok &= sbx_egress_check(policy->network_allow, policy->n_network_allow, unenforceable);
        else
            ok &= sbx_strlist_add(unenforceable, "network_egress=allowlist");
        break;
    default: break;
    }
    if (p->managed) {
        /* fs_write paths become tmpfs mounts inside the container, fs_read paths host binds:
         * both must be absolute (a relative one has no meaning there). */
        for (size_t i = 0; i < policy->n_fs_write; i++)
            if (policy->fs_write[i][0] != '/')
                ok &= sbx_strlist_add(unenforceable, "fs_write (relative path)");
        for (size_t i = 0; i < policy->n_fs_read; i++)
            if (policy->fs_read[i][0] != '/' || strchr(policy->fs_read[i], ':') != NULL)
                ok &= sbx_strlist_add(unenforceable, "fs_read (relative path or ':')");
    } else {
        if (policy->n_fs_read > 0)
            ok &= sbx_strlist_add(unenforceable, "fs_read");
        if (policy->n_fs_write > 0)
            ok &= sbx_strlist_add(unenforceable, "fs_write");
        if (policy->cpu > 0)
            ok &= sbx_strlist_add(unenforceable, "cpu");
        if (policy->memory_mb > 0)
            ok &= sbx_strlist_add(unenforceable, "memory_mb");
        if (policy->pids > 0)
            ok &= sbx_strlist_add(unenforceable, "pids");
        if (policy->disk_mb > 0)
            ok &= sbx_strlist_add(unenforceable, "disk_mb");
    }
    return ok ? SBX_OK : SBX_E_INTERNAL;
}

/* ---- inspect -------------------------------------------------------------------------------- */

typedef struct container_info {
    char id[72];
    bool running; /* running and not paused */
    bool paused;  /* running, frozen by the daemon (pause): alive, but its agent cannot answer */
    long pid;     /* host pid of the container's init (0 when not running) */
    char status[32];
    char workdir[512];
    char state_dir[1024];
    bool managed_label;
} container_info;

/* GET /containers/{id}/json (API v1.41 ContainerInspect): 200 with State and Config, 404 when
 * there is no such container. */
static sbx_status inspect(docker_provider *p, const char *ref, container_info *ci, sbx_error *err)
{
    memset(ci, 0, sizeof(*ci));
    json_t *j = NULL;
    long status = 0;
    sbx_status st = docker_api_get_object(&p->api, "/containers/", ref, "/json", &status, &j, err);
    if (st != SBX_OK)
        return st;
    if (status == 404) {
        const char *m = json_string_value(json_object_get(j, "message"));
        st = sbx_error_set(err, SBX_E_GONE, "container '%s' no longer exists (Docker daemon: %s)",
                           ref, m ? m : "no such container");
        json_decref(j);
        return st;
    }
    const char *id = json_string_value(json_object_get(j, "Id"));
    if (status != 200 || id == NULL || strlen(id) >= sizeof(ci->id)) {
        const char *m = json_string_value(json_object_get(j, "message"));
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "Docker daemon: inspect of container '%s' "
                           "answered HTTP %ld: %s",
                           ref, status, m ? m : "no message");
        json_decref(j);
        return st;
    }
    snprintf(ci->id, sizeof(ci->id), "%s", id);
    json_t *state = json_object_get(j, "State");
    ci->paused = json_is_true(json_object_get(state, "Running")) &&
                 json_is_true(json_object_get(state, "Paused"));
    ci->running = json_is_true(json_object_get(state, "Running")) && !ci->paused;
    json_t *jpid = json_object_get(state, "Pid");
    if (json_is_integer(jpid) && json_integer_value(jpid) > 1 &&
        json_integer_value(jpid) < (1 << 22))
        ci->pid = (long)json_integer_value(jpid);
    const char *s = json_string_value(json_object_get(state, "Status"));
    snprintf(ci->status, sizeof(ci->status), "%s", s ? s : "unknown");
    json_t *config = json_object_get(j, "Config");
    const char *wd = json_string_value(json_object_get(config, "WorkingDir"));
    snprintf(ci->workdir, sizeof(ci->workdir), "%s", wd != NULL && wd[0] == '/' ? wd : "/");
    json_t *labels = json_object_get(config, "Labels");
    ci->managed_label = json_is_string(json_object_get(labels, LABEL_MANAGED)) &&
                        strcmp(json_string_value(json_object_get(labels, LABEL_MANAGED)), "1") == 0;
    const char *sd = json_string_value(json_object_get(labels, LABEL_STATE));
    if (sd != NULL && strlen(sd) < sizeof(ci->state_dir))
        snprintf(ci->state_dir, sizeof(ci->state_dir), "%s", sd);
    json_decref(j);
    return SBX_OK;
}

bool docker_container_gone(docker_provider *p, const char *id)
{
    container_info ci;
    sbx_error ignored;
    sbx_status st = inspect(p, id, &ci, &ignored);
    return st == SBX_E_GONE || (st == SBX_OK && !ci.running && !ci.paused);
}

/* ---- sandboxes --------------------------------------------------------------------------------
 */

static docker_sandbox *sandbox_new(docker_provider *p, const char *id, bool managed,
                                   const char *workdir, const char *state_dir)
{
    docker_sandbox *sb = calloc(1, sizeof(*sb));
    if (sb == NULL)
        return NULL;
    sb->p = p;
    sb->managed = managed;
    sb->base.id = strdup(id);
    sb->workdir = strdup(workdir);
    sb->state_dir = state_dir != NULL ? strdup(state_dir) : NULL;
    if (sb->base.id == NULL || sb->workdir == NULL ||
        (state_dir != NULL && sb->state_dir == NULL)) {
        free(sb->base.id);
        free(sb->workdir);
        free(sb->state_dir);
        free(sb);
        return NULL;
    }
    return sb;
}

static void docker_sandbox_close(sbx_sandbox *base)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb == NULL)
        return;
    docker_agent_close(sb);
    free(sb->base.id);
    free(sb->workdir);
    free(sb->state_dir);
    free(sb->oom_file);
    free(sb);
}

/* DELETE /containers/{id}?force=true&v=true (API v1.41 ContainerDelete): 204 removed, 404 no
 * such container (already gone: success for us), 409 removal already in progress (also
 * success: it is going away). */
static sbx_status remove_container(docker_provider *p, const char *ref, sbx_error *err)
{
    char path[512];
    if (!docker_object_path(path, sizeof path, "/containers/", ref, "?force=true&v=true", err))
        return SBX_E_INTERNAL;
    /* an explicit timeout: removal runs to its end even when the request's deadline passed
     * (a create that timed out must not leave its container behind) */
    docker_response r = {0};
    sbx_status st = docker_api_call(&p->api, "DELETE", path, NULL, NULL, 0, 0,
                                    DOCKER_REQUEST_TIMEOUT_MS, &r, err);
    long status = r.status;
    json_t *j = r.body != NULL ? json_loadb(r.body, r.len, 0, NULL) : NULL;
    docker_response_clear(&r);
    if (st == SBX_OK && status != 204 && status != 404 && status != 409 && status != 200) {
        const char *m = json_string_value(json_object_get(j, "message"));
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "Docker daemon could not remove container '%s': "
                           "HTTP %ld: %s",
                           ref, status, m ? m : "no message");
    }
    json_decref(j);
    return st;
}

/* Removes a managed container's host state dir (agent socket and metadata). Only a dir under
 * our runtime dir is ever removed: the path comes from a label, which whoever can talk to the
 * daemon could have forged. */
static bool own_state_dir(const docker_provider *p, const char *dir)
{
    if (dir == NULL || dir[0] == '\0' || p->runtime_dir == NULL)
        return false;
    size_t rl = strlen(p->runtime_dir);
    return strncmp(dir, p->runtime_dir, rl) == 0 && dir[rl] == '/' &&
           strchr(dir + rl + 1, '/') == NULL && strstr(dir, "..") == NULL;
}

/* The egress proxy's dir of the container whose state dir is dir: beside it, not in it (the
 * state dir is bound into the container, and what the proxy's pid file names gets killed). */
static void egress_dir_of(const char *dir, char *out, size_t cap)
{
    const char *base = strrchr(dir, '/');
    snprintf(out, cap, "%.*s/egress-%s", (int)(base - dir), dir, base + 1);
}

/* What DOCKER_OWNER_FILE holds for p; false when it does not fit (then no dir is ever ours). */
static bool owner_text(const docker_provider *p, char *out, size_t cap)
{
    int n = snprintf(out, cap, "node %s\nprofile %s\n", p->node, p->profile);
    return n > 0 && (size_t)n < cap;
}

/* Writes text to file name of state dir dir (created, close-on-exec). */
static sbx_status write_state_file(const char *dir, const char *name, const char *text,
                                   sbx_error *err)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    bool ok = f != NULL && fputs(text, f) >= 0;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    return ok ? SBX_OK
              : sbx_error_set(err, SBX_E_PROVISION, "cannot write '%s': %s", path, strerror(errno));
}

static void remove_state_dir(docker_provider *p, const char *dir)
{
    if (!own_state_dir(p, dir))
        return;
    char edir[1100];
    egress_dir_of(dir, edir, sizeof edir);
    sbx_egress_stop(edir);
    rmdir(edir);
    /* the container's program uid is free for another once its state goes (the dir is the
     * container's too: never a link followed, never a FIFO waited on) */
    char slot_file[PATH_MAX], text[32] = "";
    snprintf(slot_file, sizeof(slot_file), "%s/" DOCKER_UID_SLOT_FILE, dir);
    if (sbx_read_small(slot_file, O_NOFOLLOW | O_NONBLOCK, text, sizeof text) > 0 &&
        p->uid_slot_dir != NULL) {
        char *end = NULL;
        long slot = strtol(text, &end, 10);
        if (end != text && slot >= 0)
            sbx_uid_slot_release(p->uid_slot_dir, slot, dir);
    }
    /* The dir holds only what the agent made (its socket, small files): one level. */
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

static sbx_status mkdir_p(const char *path, mode_t mode)
{
    char buf[1024];
    if (strlen(path) >= sizeof(buf))
        return SBX_E_CONFIG;
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return SBX_E_PROVISION;
        *s = '/';
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return SBX_E_PROVISION;
    return SBX_OK;
}

/* The HostConfig of a managed container, from the policy. Every dimension here is one that
 * check_policy declared enforceable; anything else was refused before we got here (strict) or
 * is knowingly ignored (lenient). */
static json_t *host_config(docker_provider *p, const sbx_policy *policy, const char *state_dir,
                           unsigned program_id)
{
    json_t *hc = json_object();
    json_t *binds = json_array();
    char bind[2048];
    snprintf(bind, sizeof(bind), "%s:%s:ro", p->agent_path, DOCKER_AGENT_MOUNT);
    json_array_append_new(binds, json_string(bind));
    snprintf(bind, sizeof(bind), "%s:%s:rw", state_dir, DOCKER_STATE_MOUNT);
    json_array_append_new(binds, json_string(bind));
    /* fs_read: host paths the program may read, bound read-only at the same path. */
    for (size_t i = 0; i < policy->n_fs_read; i++) {
        snprintf(bind, sizeof(bind), "%s:%s:ro", policy->fs_read[i], policy->fs_read[i]);
        json_array_append_new(binds, json_string(bind));
    }
    json_object_set_new(hc, "Binds", binds);

    /* Network: DENY is NetworkMode "none" (only loopback); ALLOW the configured network;
     * unspecified means the profile default, which the engine resolved -- still "none" when
     * nothing asked for egress (fail closed). */
    bool allow = policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    json_object_set_new(hc, "NetworkMode", json_string(allow ? p->network : "none"));

    if (policy->memory_mb > 0) {
        json_int_t bytes = (json_int_t)policy->memory_mb * 1024 * 1024;
        json_object_set_new(hc, "Memory", json_integer(bytes));
        /* MemorySwap equal to Memory: no swap on top of the limit (API: -1 = unlimited swap). */
        json_object_set_new(hc, "MemorySwap", json_integer(bytes));
    }
    if (policy->cpu > 0)
        json_object_set_new(hc, "NanoCpus", json_integer((json_int_t)(policy->cpu * 1e9 + 0.5)));
    if (policy->pids > 0)
        json_object_set_new(hc, "PidsLimit", json_integer((json_int_t)policy->pids));

    /* The image's root is read-only, and the places programs may write are tmpfs of disk_mb
     * (or tmpfs_mb) each, writable by the program's uid: the workdir, /tmp and /var/tmp (the
     * world-writable directories of an image's filesystem layout), and each fs_write path.
     * Nothing a program or the file API writes reaches the container's writable layer, which
     * only the daemon's storage bounds: before, without fs_write or disk_mb the root stayed
     * writable, and a program wrote through /var/tmp (1777 in Debian and Ubuntu images) to that
     * layer as much as the daemon's disk held. */
    json_t *tmpfs = json_object();
    uint64_t mb = policy->disk_mb > 0 ? policy->disk_mb : (uint64_t)p->tmpfs_mb;
    char opts[128];
    /* Owned by the program's uid: Docker copies the image directory's own mode onto a tmpfs
     * mounted over it (its "tmpcopyup"), so mode= alone does not make /workspace writable. exec
     * overrides Docker's default noexec: programs build and run things in their workspace. */
    unsigned long long inodes = mb * SBX_TMPFS_INODES_PER_MB; /* core/limits.h */
    if (inodes < SBX_TMPFS_INODES_MIN)
        inodes = SBX_TMPFS_INODES_MIN;
    snprintf(opts, sizeof(opts),
             "rw,exec,nosuid,nodev,size=%llum,nr_inodes=%llu,mode=1777,uid=%u,gid=%u",
             (unsigned long long)mb, inodes, program_id, program_id);
    json_object_set_new(tmpfs, "/tmp", json_string(opts));
    json_object_set_new(tmpfs, "/var/tmp", json_string(opts));
    json_object_set_new(tmpfs, p->workdir, json_string(opts));
    json_object_set_new(hc, "ReadonlyRootfs", json_true());
    for (size_t i = 0; i < policy->n_fs_write; i++)
        if (policy->fs_write[i][0] == '/')
            json_object_set_new(tmpfs, policy->fs_write[i], json_string(opts));
    json_object_set_new(hc, "Tmpfs", tmpfs);
    /* Capabilities: all dropped but what the agent (PID 1, root in the container) needs to run
     * programs as an unprivileged uid and to manage them: SETUID/SETGID to switch to it, KILL
     * to signal its processes, CHOWN/FOWNER/DAC_OVERRIDE for files it writes on the program's
     * behalf. Programs lose all of them at setuid (no ambient set) and no-new-privileges keeps
     * setuid binaries from handing any back. */
    json_t *drop = json_array();
    json_array_append_new(drop, json_string("ALL"));
    json_object_set_new(hc, "CapDrop", drop);
    json_t *add = json_array();
    /* SETPCAP: the agent empties each program's bounding set (confine.c); without it the
     * programs keep these six there. */
    static const char *const agent_caps[] = {"SETUID", "SETGID",       "KILL",    "CHOWN",
                                             "FOWNER", "DAC_OVERRIDE", "SETPCAP", NULL};
    for (size_t i = 0; agent_caps[i] != NULL; i++)
        json_array_append_new(add, json_string(agent_caps[i]));
    json_object_set_new(hc, "CapAdd", add);
    json_t *secopt = json_array();
    json_array_append_new(secopt, json_string("no-new-privileges"));
    json_object_set_new(hc, "SecurityOpt", secopt);
    json_t *restart = json_object();
    json_object_set_new(restart, "Name", json_string("no"));
    json_object_set_new(hc, "RestartPolicy", restart);
    static const struct {
        const char *name;
        int value;
    } ulimits[] = {{"nofile", DOCKER_ULIMIT_NOFILE},
                   {"nproc", DOCKER_ULIMIT_NPROC},
                   {"sigpending", DOCKER_ULIMIT_SIGPENDING},
                   {"memlock", DOCKER_ULIMIT_MEMLOCK},
                   {"msgqueue", DOCKER_ULIMIT_MSGQUEUE}};
    json_t *ul = json_array();
    for (size_t i = 0; i < sizeof ulimits / sizeof ulimits[0]; i++)
        json_array_append_new(ul, json_pack("{s:s,s:i,s:i}", "Name", ulimits[i].name, "Soft",
                                            ulimits[i].value, "Hard", ulimits[i].value));
    json_object_set_new(hc, "Ulimits", ul);
    return hc;
}

const char *docker_network_shared(const json_t *net)
{
    const char *driver = json_string_value(json_object_get(net, "Driver"));
    if (driver == NULL)
        return "its driver is not stated";
    if (strcmp(driver, "null") == 0)
        return NULL; /* "none": nothing to reach, and nothing reaches in */
    if (strcmp(driver, "host") == 0)
        return "every container shares the host's network namespace (every service on the "
               "host's loopback is reachable)";
    if (strcmp(driver, "bridge") != 0)
        return "its driver is one sbx cannot check for isolation between containers";
    /* Docker's bridge driver: inter-container communication is on unless the option is
     * "false" (absent: on, as on Docker's default bridge). */
    const char *icc = json_string_value(
        json_object_get(json_object_get(net, "Options"), "com.docker.network.bridge.enable_icc"));
    if (icc == NULL || strcmp(icc, "false") != 0)
        return "its containers reach each other (inter-container communication is on)";
    return NULL;
}

/* Whether process pid is in this process's network namespace (a container on network host). */
static bool in_host_netns(long pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
    struct stat a, b;
    return stat(path, &a) == 0 && stat("/proc/self/ns/net", &b) == 0 && a.st_ino == b.st_ino &&
           a.st_dev == b.st_dev;
}

/* A managed profile whose allow puts containers on Docker's host network: known from the
 * name alone (Docker reserves "host" for its host driver), unlike a bridge's setting, which
 * only the daemon knows (check_network, at each create). */
static bool on_host_network(const sbx_profile_config *p)
{
    const char *net = sbx_options_get(p->options, "network");
    return p->environment == SBX_ENV_MANAGED &&
           p->policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW &&
           net != NULL && strcmp(net, "host") == 0;
}

static bool docker_shares_host_network(const sbx_profile_config *p)
{
    return on_host_network(p) && sbx_options_get_bool(p->options, "shared_network");
}

static sbx_status docker_check_profile(const sbx_profile_config *p, sbx_error *err)
{
    if (on_host_network(p) && !sbx_options_get_bool(p->options, "shared_network"))
        return sbx_error_set(
            err, SBX_E_CONFIG,
            "network_egress allow on docker network 'host' runs programs in the host's network "
            "namespace, where they reach every service on the host's loopback and the cloud "
            "metadata address; name a network that keeps containers apart (docker network "
            "create -o com.docker.network.bridge.enable_icc=false sbx-allow), use "
            "network_egress allowlist, or set shared_network: true in the profile's docker "
            "block to accept that");
    return SBX_OK;
}

/* network_egress allow puts the container on docker.network: one another tenant's sandbox
 * shares. Refused (POLICY, before anything is made) unless the network keeps its containers
 * apart or the profile accepts it (docker.shared_network); a network the daemon does not have
 * is PROVISION, in the daemon's words. */
static sbx_status check_network(docker_provider *p, sbx_error *err)
{
    json_t *j = NULL;
    long status = 0;
    sbx_status st = docker_api_get_object(&p->api, "/networks/", p->network, "", &status, &j, err);
    if (st != SBX_OK)
        return st;
    const char *m = json_string_value(json_object_get(j, "message"));
    const char *why = status == 200 ? docker_network_shared(j) : NULL;
    if (status == 404)
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "profile '%s': docker.network '%s' does not exist (Docker daemon: %s); "
                           "create it or name another",
                           p->profile, p->network, m ? m : "not found");
    else if (status != 200)
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "Docker daemon: inspect of network '%s' answered HTTP %ld: %s",
                           p->network, status, m ? m : "no message");
    else if (why != NULL)
        st = sbx_error_set(
            err, SBX_E_POLICY,
            "profile '%s': network_egress allow puts the container on docker.network '%s', where "
            "%s: another tenant's sandbox there could connect to what this one's programs "
            "listen on. Create a network that keeps containers apart (docker network create -o "
            "com.docker.network.bridge.enable_icc=false sbx-allow) and set docker: { network: "
            "sbx-allow }, use network_egress allowlist, or set docker: { shared_network: true } "
            "to accept it",
            p->profile, p->network, why);
    json_decref(j);
    return st;
}

/* Makes container uuid's state dir under the runtime dir (its path in state_dir) and claims
 * the container's own program uid: a slot of the registry, named in the dir so that whoever
 * removes the dir frees it. On failure nothing is left. */
static sbx_status make_state_dir(docker_provider *p, const char *uuid, char *state_dir, size_t cap,
                                 long *slot, sbx_error *err)
{
    snprintf(state_dir, cap, "%s/%s", p->runtime_dir, uuid);
    if (mkdir_p(p->runtime_dir, 0700) != SBX_OK || mkdir_p(state_dir, 0700) != SBX_OK)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot create the agent state dir '%s': %s",
                             state_dir, strerror(errno));
    /* the dir's owner first: a dir a sweep cannot tell as this profile's is never removed, and
     * a uid slot claimed for such a dir (an owner killed between the two) stayed taken for good.
     * An owner killed before this leaves an empty dir, which the sweep removes too. */
    char text[1100];
    sbx_status st = owner_text(p, text, sizeof text)
                        ? write_state_file(state_dir, DOCKER_OWNER_FILE, text, err)
                        : SBX_OK;
    if (st == SBX_OK)
        st = sbx_uid_slot_claim(p->uid_slot_dir, (long)p->uid_slots, state_dir, slot, err);
    snprintf(text, sizeof text, "%ld\n", *slot);
    if (st == SBX_OK &&
        (st = write_state_file(state_dir, DOCKER_UID_SLOT_FILE, text, err)) != SBX_OK)
        sbx_uid_slot_release(p->uid_slot_dir, *slot, state_dir); /* the file may not name it */
    if (st != SBX_OK)
        remove_state_dir(p, state_dir);
    return st;
}

/* Long because it is the daemon's create sequence in order (uid slot, agent argv, HostConfig,
 * create, start, connect to the agent), each step undoing the ones before it on failure through
 * one cleanup path. */
static sbx_status docker_create(void *state, const sbx_session_handle *session,
                                const sbx_principal *principal, const sbx_policy *policy,
                                sbx_sandbox **out, sbx_error *err)
{
    docker_provider *p = state;
    *out = NULL;
    if (!p->managed)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "profile '%s' is attached: docker creates containers only under "
                             "environment: managed",
                             p->profile);
    /* The container's init (its agent) is one of its processes: a bound of 1 leaves nothing
     * for a command (before, every exec failed with RESOURCE_EXHAUSTED). */
    if (policy != NULL && policy->pids == 1)
        return sbx_error_set(err, SBX_E_POLICY,
                             "pids 1 leaves no process for a command: the container's init (its "
                             "agent) is one of its processes; use 2 or more, or 0 for no limit");
    if (policy != NULL && policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW &&
        !p->shared_network) {
        sbx_status st = check_network(p, err);
        if (st != SBX_OK)
            return st;
    }
    if (access(p->agent_path, X_OK) != 0)
        return sbx_error_set(
            err, SBX_E_PROVISION,
            "profile '%s': sbx-agent not found or not executable at '%s' (%s); set "
            "docker.agent or $SBX_AGENT to the static sbx-agent binary",
            p->profile, p->agent_path, strerror(errno));
    char uuid[SBX_UUID_LEN];
    sbx_uuid_v4(uuid);
    char state_dir[1024];
    long slot = -1;
    sbx_status made = make_state_dir(p, uuid, state_dir, sizeof state_dir, &slot, err);
    if (made != SBX_OK)
        return made;
    unsigned program_id = (unsigned)(p->uid_base + slot);
    char id_text[16];
    snprintf(id_text, sizeof(id_text), "%u", program_id);

    json_t *body = json_object();
    json_object_set_new(body, "Image", json_string(p->image));
    json_t *entry = json_array();
    json_array_append_new(entry, json_string(DOCKER_AGENT_MOUNT));
    /* sbx-agent [--socket PATH] [--workdir DIR] [--uid N] [--gid N] [--one-shot] (agent/main.c):
     * programs run as the container's own uid, distinct from the agent's root (so they cannot
     * ptrace or signal it) and from every other container's (so the kernel's per-user counts are
     * its own). */
    static const char agent_socket[] = DOCKER_STATE_MOUNT "/agent.sock";
    const char *const agent_args[] = {"--socket", agent_socket, "--uid", id_text,
                                      "--gid",    id_text,      NULL};
    for (size_t i = 0; agent_args[i] != NULL; i++)
        json_array_append_new(entry, json_string(agent_args[i]));
    /* A per_call container lives for one call of the process that holds its agent connection:
     * when that process dies (killed mid-command), its connection closes and the agent ends
     * the container's programs at once, instead of leaving them to run until a later sweep
     * removes the container. */
    if (p->per_call)
        json_array_append_new(entry, json_string("--one-shot"));
    json_array_append_new(entry, json_string("--workdir"));
    json_array_append_new(entry, json_string(p->workdir));
    json_object_set_new(body, "Entrypoint", entry);
    json_object_set_new(body, "Cmd", json_array());
    json_object_set_new(body, "WorkingDir", json_string(p->workdir));
    json_object_set_new(body, "User", json_string("0:0"));
    json_object_set_new(body, "Tty", json_false());
    json_object_set_new(body, "OpenStdin", json_false());
    /* The agent stops its programs on SIGTERM; a short stop timeout keeps `docker stop` and
     * daemon shutdown from waiting the default 10 s. */
    json_object_set_new(body, "StopTimeout", json_integer(2));
    json_t *labels = json_object();
    json_object_set_new(labels, LABEL_MANAGED, json_string("1"));
    json_object_set_new(
        labels, LABEL_SESSION,
        json_string(session != NULL && session->session_id ? session->session_id : ""));
    json_object_set_new(labels, LABEL_PROFILE, json_string(p->profile));
    json_object_set_new(
        labels, LABEL_OWNER,
        json_string(principal != NULL && principal->subject ? principal->subject : ""));
    json_object_set_new(labels, LABEL_NODE, json_string(p->node));
    json_object_set_new(labels, LABEL_STATE, json_string(state_dir));
    if (p->per_call) {
        json_object_set_new(labels, LABEL_SCOPE, json_string("per_call"));
        json_object_set_new(labels, LABEL_OWNER_PROCESS, json_string(p->owner));
    }
    json_object_set_new(body, "Labels", labels);
    json_object_set_new(body, "HostConfig", host_config(p, policy, state_dir, program_id));
    if (json_object_size(body) == 0) {
        json_decref(body);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }

    /* POST /containers/create?name=sbx-<uuid> (API v1.41 ContainerCreate): 201 {"Id"}, 400 bad
     * parameter, 404 no such image (we never pull: the message says so), 409 name conflict. */
    char path[128];
    snprintf(path, sizeof(path), "/containers/create?name=sbx-%s", uuid);
    json_t *resp = NULL;
    long status = 0;
    sbx_status st = docker_api_json(&p->api, "POST", path, body, &status, &resp, err);
    json_decref(body);
    if (st != SBX_OK) {
        remove_state_dir(p, state_dir);
        return st;
    }
    const char *id = json_string_value(json_object_get(resp, "Id"));
    if (status != 201 || id == NULL || !ref_ok(id)) {
        const char *m = json_string_value(json_object_get(resp, "message"));
        if (status == 404)
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "profile '%s': image '%s' is not on the Docker daemon (sbx never "
                               "pulls; `docker pull` or `docker import` it first): %s",
                               p->profile, p->image, m ? m : "no such image");
        else
            st = sbx_error_set(err, SBX_E_PROVISION,
                               "profile '%s': Docker daemon refused to create the container: "
                               "HTTP %ld: %s",
                               p->profile, status, m ? m : "no message");
        json_decref(resp);
        remove_state_dir(p, state_dir);
        return st;
    }
    char cid[72];
    snprintf(cid, sizeof(cid), "%s", id);
    json_decref(resp);

    /* POST /containers/{id}/start: 204 started, 304 already started, 404 gone. */
    snprintf(path, sizeof(path), "/containers/%s/start", cid);
    st = docker_api_json(&p->api, "POST", path, NULL, &status, &resp, err);
    if (st == SBX_OK && status != 204 && status != 304) {
        const char *m = json_string_value(json_object_get(resp, "message"));
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "profile '%s': Docker daemon could not start container %.12s: HTTP "
                           "%ld: %s",
                           p->profile, cid, status, m ? m : "no message");
    }
    json_decref(resp);
    docker_sandbox *sb = NULL;
    if (st == SBX_OK) {
        sb = sandbox_new(p, cid, true, p->workdir, state_dir);
        if (sb == NULL)
            st = sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    }
    if (st == SBX_OK) {
        container_info ci;
        sbx_error ignored;
        bool have = inspect(p, cid, &ci, &ignored) == SBX_OK;
        if (have)
            docker_agent_find_oom_counter(sb, ci.pid);
        /* allowlist: the container has only lo (NetworkMode none) until the proxy is in its
         * namespace; a proxy that cannot start fails the create (never a wider network) */
        if (policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
            egress_dir_of(state_dir, sb->egress_dir, sizeof sb->egress_dir);
            if (!have || ci.pid <= 1)
                st = sbx_error_set(err, SBX_E_PROVISION,
                                   "container %.12s: no PID 1 to start the egress proxy beside",
                                   cid);
            else if (mkdir(sb->egress_dir, 0700) != 0)
                st = sbx_error_set(err, SBX_E_PROVISION, "cannot create '%s': %s", sb->egress_dir,
                                   strerror(errno));
            else
                st = sbx_egress_start((pid_t)ci.pid, policy->network_allow, policy->n_network_allow,
                                      p->egress_resolver, sb->egress_dir, err);
        }
        /* allow: the container's own namespace (not the host's, accepted by shared_network)
         * loses its way to the host, its private neighbours and the metadata address before any
         * program runs */
        if (st == SBX_OK &&
            policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW) {
            if (!have || ci.pid <= 1)
                st = sbx_error_set(err, SBX_E_PROVISION,
                                   "container %.12s: no PID 1 to close the network beside", cid);
            else if (!in_host_netns(ci.pid))
                st = sbx_egress_guard_allow((pid_t)ci.pid, err);
        }
        if (st == SBX_OK)
            st = docker_agent_connect(sb, true, err);
    }
    if (st != SBX_OK) {
        docker_sandbox_close((sbx_sandbox *)sb);
        remove_container(p, cid, NULL);
        remove_state_dir(p, state_dir);
        return st;
    }
    *out = &sb->base;
    return SBX_OK;
}

static sbx_status docker_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                                const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    docker_provider *p = state;
    (void)principal;
    (void)policy;
    *out = NULL;
    if (!ref_ok(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE,
                             "'%.80s' is not a container id or name, so no such sandbox exists",
                             sandbox_id ? sandbox_id : "");
    container_info ci;
    sbx_status st = inspect(p, sandbox_id, &ci, err);
    if (st != SBX_OK)
        return st;
    if (p->managed && !ci.managed_label)
        return sbx_error_set(err, SBX_E_GONE,
                             "container '%s' was not created by sbx (no %s label); a managed "
                             "profile only reconnects to its own containers",
                             sandbox_id, LABEL_MANAGED);
    if (ci.paused) /* alive: never removed, never GONE (the engine resumes before attaching) */
        return sbx_error_set(err, SBX_E_PROVISION,
                             "container '%s' is paused; resume it (sbx resume) to use it",
                             sandbox_id);
    if (!ci.running) {
        if (p->managed) {
            /* A stopped managed container is dead to us (its agent, kernels and processes are
             * gone): remove it so the engine's self-heal does not leave it behind. */
            remove_container(p, ci.id, NULL);
            remove_state_dir(p, ci.state_dir);
        }
        return sbx_error_set(err, SBX_E_GONE, "container '%s' is not running (status %s)",
                             sandbox_id, ci.status);
    }
    docker_sandbox *sb = sandbox_new(p, ci.id, p->managed, p->managed ? p->workdir : ci.workdir,
                                     p->managed ? ci.state_dir : NULL);
    if (sb == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    if (p->managed) {
        docker_agent_find_oom_counter(sb, ci.pid);
        if (own_state_dir(p, ci.state_dir)) {
            egress_dir_of(ci.state_dir, sb->egress_dir, sizeof sb->egress_dir);
            if (!sbx_egress_active(sb->egress_dir))
                sb->egress_dir[0] = '\0';
        }
        st = docker_agent_connect(sb, false, err);
        if (st != SBX_OK) {
            docker_sandbox_close(&sb->base);
            return st;
        }
    }
    *out = &sb->base;
    return SBX_OK;
}

/* ---- pause and resume ---------------------------------------------------------------------- */

/* A paused container's marker, <runtime_dir>/paused-<id>: resume is asked before every
 * operation on a session, and a marker is an access() where asking the daemon is a round trip.
 * The daemon stays the authority: a stale marker (unpaused behind sbx's back) costs one
 * unpause that answers 409, which is success. */
static void paused_marker(const docker_provider *p, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/paused-%s", p->runtime_dir, id);
}

/* POST /containers/{id}/{pause,unpause} (API v1.41 ContainerPause/ContainerUnpause): 204 done,
 * 404 no such container (GONE), 409 not running / already in that state. */
static sbx_status pause_call(docker_provider *p, const char *id, bool pause, sbx_error *err)
{
    char path[512];
    if (!docker_object_path(path, sizeof path, "/containers/", id, pause ? "/pause" : "/unpause",
                            err))
        return SBX_E_INTERNAL;
    docker_response r = {0};
    sbx_status st = docker_api_call(&p->api, "POST", path, NULL, NULL, 0, 0,
                                    DOCKER_REQUEST_TIMEOUT_MS, &r, err);
    if (st == SBX_OK && r.status == 404)
        st = sbx_error_set(err, SBX_E_GONE, "container '%s' no longer exists", id);
    else if (st == SBX_OK && r.status == 409 && pause) {
        /* already paused is fine; not running is not */
        container_info ci;
        sbx_error ignored;
        if (inspect(p, id, &ci, &ignored) != SBX_OK || !ci.paused) {
            char buf[256];
            st = sbx_error_set(err, SBX_E_GONE, "container '%s' cannot be paused: %s", id,
                               docker_error_text(&r, buf, sizeof buf));
        }
    } else if (st == SBX_OK && r.status != 204 && r.status != 409) {
        char buf[256];
        st = sbx_error_set(err, SBX_E_PROVISION, "Docker daemon could not %s container '%s': %s",
                           pause ? "pause" : "unpause", id, docker_error_text(&r, buf, sizeof buf));
    }
    docker_response_clear(&r);
    return st;
}

static sbx_status docker_pause(void *state, const char *sandbox_id, sbx_error *err)
{
    docker_provider *p = state;
    if (!p->managed || !ref_ok(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE, "no managed container '%.80s'",
                             sandbox_id ? sandbox_id : "");
    char marker[1200];
    paused_marker(p, sandbox_id, marker, sizeof marker);
    /* the marker first: a pause whose answer is lost still leaves resume something to do */
    int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot write %s: %s", marker, strerror(errno));
    close(fd);
    sbx_status st = pause_call(p, sandbox_id, true, err);
    if (st != SBX_OK)
        unlink(marker);
    return st;
}

static sbx_status docker_resume(void *state, const char *sandbox_id, bool *was_paused,
                                sbx_error *err)
{
    docker_provider *p = state;
    *was_paused = false;
    if (!p->managed || !ref_ok(sandbox_id))
        return SBX_OK;
    char marker[1200];
    paused_marker(p, sandbox_id, marker, sizeof marker);
    if (access(marker, F_OK) != 0)
        return SBX_OK; /* never paused by sbx */
    /* As for local: a client connected before the thaw keeps the agent's idle TTL, which ran on
     * while the container was frozen, from ending it the moment it wakes. */
    container_info ci;
    sbx_error ignored;
    sbx_agent_conn *conn = NULL;
    if (inspect(p, sandbox_id, &ci, &ignored) == SBX_OK && ci.state_dir[0]) {
        char sock[1100];
        snprintf(sock, sizeof sock, "%s/agent.sock", ci.state_dir);
        (void)sbx_agent_connect(sock, sbx_provider_step_deadline(DOCKER_AGENT_RECONNECT_MS), &conn,
                                &ignored);
    }
    sbx_status st = pause_call(p, sandbox_id, false, err);
    if (st == SBX_OK || st == SBX_E_GONE)
        unlink(marker);
    if (st == SBX_OK) {
        *was_paused = true;
        if (conn != NULL)
            (void)sbx_agent_ping(conn, sbx_provider_step_deadline(DOCKER_AGENT_RECONNECT_MS), NULL,
                                 &ignored);
    }
    sbx_agent_close(conn);
    return st;
}

/* Exposed ports' records of a container: <runtime_dir>/expose/<full id>, beside the state
 * dirs (never in them: a state dir is the container's, a record names a pid destroy kills). */
static void expose_dir(const docker_provider *p, const char *full_id, char *out, size_t cap)
{
    snprintf(out, cap, "%s/expose/%s", p->runtime_dir, full_id);
}

/* True when pid is the init of container full_id as this process sees it: the daemon's pid is
 * of the daemon's pid namespace, which need not be ours (sbx in a container of its own). */
static bool init_of(long pid, const char *full_id)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
    if (sbx_read_small(path, 0, buf, sizeof buf) <= 0)
        return false;
    return strlen(full_id) >= 32 && strstr(buf, full_id) != NULL;
}

/* ExposePort: a relay into the container's network namespace (providers/common/expose.h),
 * found through the init pid the daemon reports. */
static sbx_status docker_expose(void *state, const char *sandbox_id, uint32_t port, char **url,
                                char **token, sbx_error *err)
{
    docker_provider *p = state;
    *url = *token = NULL;
    if (!p->managed || !ref_ok(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE, "no managed container '%.80s'", sandbox_id);
    container_info ci;
    sbx_status st = inspect(p, sandbox_id, &ci, err);
    if (st != SBX_OK)
        return st;
    if (!ci.managed_label)
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "container '%s' was not created by sbx (no %s label); refusing to "
                             "expose its ports",
                             sandbox_id, LABEL_MANAGED);
    if (!ci.running || ci.pid <= 1)
        return sbx_error_set(err, SBX_E_GONE, "container '%s' is not running (%s)", sandbox_id,
                             ci.status);
    if (!init_of(ci.pid, ci.id))
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "container '%s': its init (pid %ld for the Docker daemon) is not "
                             "visible to this process, which runs in another pid namespace than "
                             "dockerd; expose needs sbx on the daemon's host",
                             sandbox_id, ci.pid);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/expose", p->runtime_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot make %s: %s", dir, strerror(errno));
    expose_dir(p, ci.id, dir, sizeof dir);
    return sbx_expose_port(&p->expose, dir, (pid_t)ci.pid, port, url, token, err);
}

static sbx_status docker_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    docker_provider *p = state;
    if (!p->managed)
        return SBX_OK; /* attached: only the binding goes; the container is not ours */
    if (!ref_ok(sandbox_id))
        return SBX_OK; /* nothing by that name can exist */
    container_info ci;
    sbx_error ignored;
    char marker[1200];
    paused_marker(p, sandbox_id, marker, sizeof marker);
    sbx_status st = inspect(p, sandbox_id, &ci, &ignored);
    if (st == SBX_E_GONE) {
        unlink(marker);
        return SBX_OK;
    }
    if (st != SBX_OK) {
        if (err != NULL)
            *err = ignored;
        return st;
    }
    if (!ci.managed_label)
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "container '%s' was not created by sbx (no %s label); refusing to "
                             "remove it",
                             sandbox_id, LABEL_MANAGED);
    char xdir[1200];
    expose_dir(p, ci.id, xdir, sizeof xdir);
    sbx_expose_close_all(xdir);
    st = remove_container(p, ci.id, err); /* the daemon kills a paused container too */
    if (st == SBX_OK) {
        remove_state_dir(p, ci.state_dir);
        unlink(marker);
    }
    return st;
}

/* ---- sweep ----------------------------------------------------------------------------------- */

/* True while the process named by an sbx.owner_process label ("<pid> <start>") runs. */
static bool owner_alive(const char *owner)
{
    char *end;
    long pid = strtol(owner, &end, 10);
    unsigned long long start = strtoull(end, NULL, 10);
    if (pid <= 0 || start == 0)
        return true; /* unknown: never presumed dead */
    return sbx_proc_live_start_time(pid) == start;
}

/* The containers sbx made on this node for this profile: GET /containers/json?all=1 with label
 * filters (API v1.41 ContainerList). *list gets the daemon's array. */
static sbx_status list_managed(docker_provider *p, json_t **list, sbx_error *err)
{
    *list = NULL;
    char node_f[300], profile_f[300];
    snprintf(node_f, sizeof(node_f), "%s=%.250s", LABEL_NODE, p->node);
    snprintf(profile_f, sizeof(profile_f), "%s=%.250s", LABEL_PROFILE, p->profile);
    json_t *filter = json_pack("{s:[s,s,s]}", "label", LABEL_MANAGED "=1", node_f, profile_f);
    char *text = filter != NULL ? json_dumps(filter, JSON_COMPACT) : NULL;
    json_decref(filter);
    char *esc = text != NULL ? docker_url_escape(text) : NULL;
    free(text);
    if (esc == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    char *path = NULL;
    if (asprintf(&path, "/containers/json?all=1&filters=%s", esc) < 0)
        path = NULL;
    free(esc);
    if (path == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
    long status = 0;
    sbx_status st = docker_api_json(&p->api, "GET", path, NULL, &status, list, err);
    free(path);
    if (st == SBX_OK && (status != 200 || !json_is_array(*list)))
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "Docker daemon answered the container list with HTTP %ld", status);
    if (st != SBX_OK) {
        json_decref(*list);
        *list = NULL;
    }
    return st;
}

/* One entry of the container list, as the labels sbx set at create tell it (strings borrowed
 * from the list). */
typedef struct listed {
    const char *id;
    bool live;                 /* State is one that may run again (not exited or dead) */
    const char *scope;         /* "per_call", or NULL for a per_session container */
    const char *owner_process; /* per_call: "<pid> <start time>" of the process that made it */
    const char *subject;       /* the principal it was made for */
    const char *state_dir;
} listed;

/* Reads one entry of the list; false when it has no usable Id or State. */
static bool listed_of(json_t *c, listed *l)
{
    json_t *labels = json_object_get(c, "Labels");
    const char *cstate = json_string_value(json_object_get(c, "State"));
    l->id = json_string_value(json_object_get(c, "Id"));
    l->scope = json_string_value(json_object_get(labels, LABEL_SCOPE));
    l->owner_process = json_string_value(json_object_get(labels, LABEL_OWNER_PROCESS));
    l->subject = json_string_value(json_object_get(labels, LABEL_OWNER));
    l->state_dir = json_string_value(json_object_get(labels, LABEL_STATE));
    if (l->id == NULL || !ref_ok(l->id) || cstate == NULL)
        return false;
    l->live = strcmp(cstate, "running") == 0 || strcmp(cstate, "created") == 0 ||
              strcmp(cstate, "restarting") == 0 || strcmp(cstate, "paused") == 0;
    return true;
}

/* The live containers of this profile's per_session sessions, with the principal each was made
 * for (its sbx.owner label, set at create). */
static sbx_status
docker_list_held(void *state, void (*held)(void *arg, const char *sandbox_id, const char *subject),
                 void *arg, sbx_error *err)
{
    docker_provider *p = state;
    if (!p->managed || p->per_call)
        return SBX_OK;
    json_t *list;
    sbx_status st = list_managed(p, &list, err);
    size_t i;
    json_t *c;
    listed l;
    json_array_foreach(list, i, c)
    {
        if (listed_of(c, &l) && l.live && l.subject != NULL && l.scope == NULL)
            held(arg, l.id, l.subject);
    }
    json_decref(list);
    return st;
}

/* Whether state dir dir was made by this node and profile (its DOCKER_OWNER_FILE). */
static bool state_dir_is_ours(const docker_provider *p, const char *dir)
{
    char path[1200], text[1100], want[1100];
    snprintf(path, sizeof path, "%s/" DOCKER_OWNER_FILE, dir);
    /* the dir is the container's too (bound in): never a link followed, never a FIFO waited on */
    ssize_t got = sbx_read_small(path, O_NOFOLLOW | O_NONBLOCK, text, sizeof text);
    return owner_text(p, want, sizeof want) && got == (ssize_t)strlen(want) &&
           memcmp(text, want, (size_t)got) == 0;
}

/* Removes this node and profile's state dirs (uuid-named, under the runtime dir) that no
 * container of list names and that are DOCKER_ORPHAN_MIN_AGE_S old: their container was removed
 * behind sbx's back, and with its dir went its uid slot. Before, both stayed for good (the slot
 * pointed at a dir that still existed, so no slot sweep freed it). An empty one (whoever made
 * it) goes too: a create whose owner was killed before it wrote anything there. */
static void sweep_orphan_state_dirs(docker_provider *p, json_t *list)
{
    DIR *d = opendir(p->runtime_dir);
    time_t now = time(NULL);
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char dir[1100];
        struct stat st;
        if (strlen(e->d_name) != SBX_UUID_LEN - 1 ||
            strspn(e->d_name, "0123456789abcdef-") != SBX_UUID_LEN - 1 ||
            (size_t)snprintf(dir, sizeof dir, "%s/%s", p->runtime_dir, e->d_name) >= sizeof dir ||
            lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            now - st.st_mtime < DOCKER_ORPHAN_MIN_AGE_S)
            continue;
        bool named = false;
        size_t i;
        json_t *c;
        listed l;
        json_array_foreach(list, i, c)
        {
            named =
                named || (listed_of(c, &l) && l.state_dir != NULL && strcmp(l.state_dir, dir) == 0);
        }
        if (!named && state_dir_is_ours(p, dir))
            remove_state_dir(p, dir);
        else if (!named)
            (void)rmdir(dir); /* empty: a create's owner killed before it named the dir */
    }
    if (d != NULL)
        closedir(d);
}

/* This node's managed containers of this profile: a stopped one is dead (its agent and programs
 * are gone); a per_call one whose owner process is gone is reachable by nobody. Both are
 * removed, and so are the state dirs whose container is gone (sweep_orphan_state_dirs). */
static sbx_status docker_sweep(void *state, sbx_strlist *removed, sbx_error *err)
{
    docker_provider *p = state;
    if (!p->managed)
        return SBX_OK;
    json_t *list;
    sbx_status st = list_managed(p, &list, err);
    size_t i;
    json_t *c;
    listed l;
    json_array_foreach(list, i, c)
    {
        if (!listed_of(c, &l))
            continue;
        bool orphan = l.scope != NULL && strcmp(l.scope, "per_call") == 0 &&
                      l.owner_process != NULL && !owner_alive(l.owner_process);
        if (l.live && !orphan)
            continue;
        sbx_error ignored;
        if (remove_container(p, l.id, &ignored) != SBX_OK)
            continue;
        char xdir[1200];
        expose_dir(p, l.id, xdir, sizeof xdir);
        sbx_expose_close_all(xdir);
        remove_state_dir(p, l.state_dir);
        sbx_strlist_add(removed, l.id);
    }
    if (st == SBX_OK) /* only with the daemon's whole list: else every dir looks orphaned */
        sweep_orphan_state_dirs(p, list);
    json_decref(list);
    /* slots whose state dir is gone without a release (a crash between claim and cleanup) */
    sbx_uid_slot_sweep(p->uid_slot_dir);
    return st;
}

/* ---- operations ------------------------------------------------------------------------------ */

/* "K=V" strings of a protobuf map (malloc'd array and strings, NULL terminated). */
static char **env_list(size_t n, Sbx__V1__RunCommand__EnvEntry **entries)
{
    char **env = calloc(n + 1, sizeof(*env));
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (asprintf(&env[i], "%s=%s", entries[i]->key, entries[i]->value) < 0) {
            for (size_t k = 0; k < i; k++)
                free(env[k]);
            free(env);
            return NULL;
        }
    }
    return env;
}

static char **code_env_list(size_t n, Sbx__V1__RunCode__EnvEntry **entries)
{
    char **env = calloc(n + 1, sizeof(*env));
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (asprintf(&env[i], "%s=%s", entries[i]->key, entries[i]->value) < 0) {
            for (size_t k = 0; k < i; k++)
                free(env[k]);
            free(env);
            return NULL;
        }
    }
    return env;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++)
        free(v[i]);
    free(v);
}

static sbx_status docker_attach_command(sbx_sandbox *base, const Sbx__V1__AttachCommand *op,
                                        const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (!sb->managed)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "attached containers run commands through the exec API, which "
                             "keeps no journal to attach to");
    return docker_agent_attach_command(sb, op, o, result, err);
}

static sbx_status docker_cancel_command(sbx_sandbox *base, const Sbx__V1__CancelCommand *op,
                                        const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (!sb->managed)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "attached containers run commands through the exec API, which "
                             "keeps no command to cancel");
    return docker_agent_cancel_command(sb, op, o, result, err);
}

/* allowlist: the refusals of one operation are the growth of the proxy's table during it. */
typedef struct {
    sbx_egress_table *t;
} egress_mark;

static void egress_before(docker_sandbox *sb, egress_mark *m)
{
    m->t = sb->egress_dir[0] ? malloc(sizeof *m->t) : NULL;
    if (m->t != NULL)
        sbx_egress_table_read(sb->egress_dir, m->t);
}

static void egress_after(docker_sandbox *sb, egress_mark *m, sbx_result *result)
{
    if (m->t == NULL)
        return;
    sbx_egress_table *now = malloc(sizeof *now);
    if (now != NULL) {
        sbx_egress_table_read(sb->egress_dir, now);
        sbx_egress_report(m->t, now, result); /* out of memory: the refusals go unreported */
        free(now);
    }
    free(m->t);
    m->t = NULL;
}

static sbx_status docker_run_command(sbx_sandbox *base, const Sbx__V1__RunCommand *op,
                                     const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb->managed) {
        egress_mark mark;
        egress_before(sb, &mark);
        sbx_status st = docker_agent_run_command(sb, op, o, result, err);
        egress_after(sb, &mark, result);
        return st;
    }
    if (op->detach)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "attached containers run commands through the exec API, which "
                             "cannot detach them");
    if (op->n_argv == 0 && (op->shell == NULL || op->shell[0] == '\0'))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "run_command: give argv or shell (both are empty)");
    const char *shell_argv[] = {"/bin/sh", "-c", op->shell, NULL};
    const char **argv = shell_argv;
    const char **copy = NULL;
    if (op->n_argv > 0) {
        copy = calloc(op->n_argv + 1, sizeof(*copy));
        if (copy == NULL)
            return sbx_error_set(err, SBX_E_INTERNAL, "out of memory");
        for (size_t i = 0; i < op->n_argv; i++)
            copy[i] = op->argv[i];
        argv = copy;
    }
    char **env = env_list(op->n_env, op->env);
    sbx_status st = env == NULL ? sbx_error_set(err, SBX_E_INTERNAL, "out of memory")
                                : docker_exec_run(sb, argv, (const char *const *)env, op->cwd,
                                                  op->stdin.data, op->stdin.len, o, result, err);
    strv_free(env);
    free(copy);
    return st;
}

static sbx_status docker_run_code(sbx_sandbox *base, const Sbx__V1__RunCode *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb->managed) {
        int lk = docker_lang_index(op->language);
        if (lk < 0 || !sb->p->languages[lk])
            return sbx_error_set(err, SBX_E_CAPABILITY,
                                 "run_code: language '%s' is not offered by this docker profile "
                                 "(docker.languages)",
                                 op->language ? op->language : "");
        egress_mark mark;
        egress_before(sb, &mark);
        sbx_status st = docker_agent_run_code(sb, op, o, result, err);
        egress_after(sb, &mark, result);
        return st;
    }
    const char *lang = op->language != NULL ? op->language : "";
    int k = docker_lang_index(lang);
    if (k < 0 || !sb->p->languages[k])
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "run_code: language '%s' is not offered by this docker profile "
                             "(docker.languages)",
                             lang);
    const char *interp = k == DOCKER_LANG_PYTHON ? sb->p->python
                         : k == DOCKER_LANG_BASH ? "bash"
                                                 : "/bin/sh";
    size_t code_len = op->code != NULL ? strlen(op->code) : 0;
    if (code_len > DOCKER_MAX_CODE_ARG)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "run_code: %zu bytes of code is over the %u bytes an attached "
                             "container's exec can pass; write it to a file and run that",
                             code_len, DOCKER_MAX_CODE_ARG);
    const char *argv[] = {interp, "-c", op->code != NULL ? op->code : "", NULL};
    char **env = code_env_list(op->n_env, op->env);
    sbx_status st = env == NULL ? sbx_error_set(err, SBX_E_INTERNAL, "out of memory")
                                : docker_exec_run(sb, argv, (const char *const *)env, op->cwd,
                                                  op->stdin.data, op->stdin.len, o, result, err);
    strv_free(env);
    return st;
}

static sbx_status docker_write_file(sbx_sandbox *base, const Sbx__V1__WriteFile *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb->managed)
        return docker_agent_write_file(sb, op, o, result, err);
    if (op->offset > 0) /* the archive API writes whole files only */
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "write_file.offset: an attached docker container takes whole files "
                             "only (the archive API); send the file in one write");
    return docker_archive_write(sb, op, result, err);
}

static sbx_status docker_read_file(sbx_sandbox *base, const Sbx__V1__ReadFile *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb->managed)
        return docker_agent_read_file(sb, op, o, result, err);
    return docker_archive_read(sb, op, result, err);
}

static sbx_status docker_list_files(sbx_sandbox *base, const Sbx__V1__ListFiles *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    docker_sandbox *sb = (docker_sandbox *)base;
    if (sb->managed)
        return docker_agent_list_files(sb, op, o, result, err);
    return docker_archive_list(sb, op, result, err);
}

const sbx_provider_ops sbx_provider_docker = {
    .name = "docker",
    .summary = "containers of a Docker Engine over its unix socket (managed via sbx-agent, or "
               "attached with the exec API)",
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_ATTACHES | SBX_PROVIDER_WRITE_OFFSET |
              SBX_PROVIDER_HOST_LOCAL,
    .options = docker_options,
    .open = docker_open,
    .close = docker_close,
    .capabilities = docker_capabilities,
    .check_policy = docker_check_policy,
    .check_profile = docker_check_profile,
    .shares_host_network = docker_shares_host_network,
    .create = docker_create,
    .attach = docker_attach,
    .destroy = docker_destroy,
    .run_code = docker_run_code,
    .run_command = docker_run_command,
    .install_packages = NULL,
    .write_file = docker_write_file,
    .read_file = docker_read_file,
    .list_files = docker_list_files,
    .sandbox_close = docker_sandbox_close,
    .sweep = docker_sweep,
    .list_held = docker_list_held,
    .attach_command = docker_attach_command,
    .cancel_command = docker_cancel_command,
    .pause = docker_pause,
    .expose = docker_expose,
    .resume = docker_resume,
};
