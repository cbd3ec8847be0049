/* local.c - the `local` provider: sandboxes made of Linux namespaces on this host, each run by
 * its own sbx-agent as PID 1 (DESIGN §8 local, §9).
 *
 * create: state dir under the runtime dir (0700: meta + the agent socket's directory), cgroups
 * with the policy's limits (v1 or v2; root only), then `sbx-agent boot` builds the namespaces
 * and detaches; we read back its pid. attach: check the pid (and its start time, against pid
 * reuse) and connect to the socket. destroy: SIGKILL to PID 1 ends the whole pid namespace;
 * then cgroups, the state dir and the uid slot are removed, by the destroy, or for a per_call
 * sandbox by its launcher, which stays as its reaper (agent/reap.c), so that the destroy does
 * not wait for the teardown. Everything a sandbox needs survives the process that created it:
 * any new process can attach by id.
 *
 * Honesty: a limit this host cannot apply (no cgroups when rootless, IPv6 allowlist entries)
 * is reported by check_policy and refused under strict; never silently ignored. network_egress
 * allowlist: the egress proxy (providers/common/egress.h) in the sandbox's namespace.
 * This file must not read config files (it gets its options block) or speak the wire.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/agent_client.h"
#include "providers/common/egress.h"
#include "providers/common/expose.h"
#include "providers/common/launch.h"
#include "providers/common/proc.h"
#include "providers/common/teardown.h"
#include "providers/common/uid_slots.h"
#include "providers/local/local.h"
#include "providers/local/local_meta.h"
#include "sbx/provider.h"

extern char **environ;

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* ---- options ------------------------------------------------------------------------------ */

static const sbx_option_spec local_options[] = {
    {"rootfs", SBX_OPT_STRING, "host", NULL, 0, 0,
     "'host': a minimal root of read-only host binds (see binds); else a directory used as the "
     "read-only root (with the mounts below it), which needs the mountpoints /proc, /dev, /tmp, "
     "/.sbx and the workdir"},
    {"binds", SBX_OPT_LIST, LOCAL_DEFAULT_BINDS, NULL, 0, 0,
     "host paths bound read-only at the same place (absent ones are skipped)"},
    {"extra_binds", SBX_OPT_LIST, "", NULL, 0, 0, "more read-only host paths, added to binds"},
    {"workdir", SBX_OPT_STRING, "/workspace", NULL, 0, 0,
     "writable working directory (a size-bounded tmpfs)"},
    {"workspace_mb", SBX_OPT_INT, "1024", NULL, 1, 1048576,
     "size of the workspace when the policy sets no disk_mb"},
    {"tmp_mb", SBX_OPT_INT, "256", NULL, 1, 1048576, "size of the private /tmp"},
    {"idle_ttl_s", SBX_OPT_INT, "86400", NULL, 0, 31536000,
     "the sandbox tears itself down after this long without use (0 = never)"},
    {"uid_base", SBX_OPT_INT, "1500000000", NULL, 65536, 4294901759LL,
     "root only: first host uid/gid of the range sandboxes take their ids from; sandbox slot k "
     "maps its uid 0 to uid_base + k*65536 (65536 ids from there)"},
    {"uid_slots", SBX_OPT_INT, "1024", NULL, 1, 65535,
     "root only: sandboxes alive at once, each with its own 65536 host ids (its own per-user "
     "kernel quotas); uid_base + uid_slots*65536 must stay below 2^32-1"},
    {"program_uid", SBX_OPT_INT, "1000", NULL, 1, 65535, "uid programs run as inside"},
    {"program_gid", SBX_OPT_INT, "1000", NULL, 1, 65535, "gid programs run as inside"},
    {"nofile", SBX_OPT_INT, "1024", NULL, 16, 1048576, "RLIMIT_NOFILE of programs"},
    {"host_network", SBX_OPT_BOOL, "false", NULL, 0, 0,
     "network_egress allow runs programs in the host's network namespace, where every service "
     "on the host's loopback and the cloud metadata address are reachable: refused unless this "
     "is true (allowlist filters instead)"},
    {"egress_resolver", SBX_OPT_STRING, "", NULL, 0, 0,
     "network_egress allowlist: the resolver the egress proxy asks for allowed names, "
     "a.b.c.d[:port] (default: the host's first IPv4 nameserver in /etc/resolv.conf)"},
    {"agent", SBX_OPT_STRING, NULL, NULL, 0, 0,
     "path of sbx-agent (default: $SBX_AGENT, the build tree, libexec)"},
    SBX_EXPOSE_OPTION_SPECS{NULL, 0, NULL, NULL, 0, 0, NULL},
};

static const sbx_option_spec *spec_of(const char *key)
{
    for (const sbx_option_spec *s = local_options; s->key; s++)
        if (strcmp(s->key, key) == 0)
            return s;
    return NULL;
}

static const char *opt_str(const sbx_options *o, const char *key)
{
    if (o)
        return sbx_options_get(o, key);
    const sbx_option_spec *s = spec_of(key);
    return s ? s->default_value : NULL;
}

static int64_t opt_int(const sbx_options *o, const char *key)
{
    if (o)
        return sbx_options_get_int(o, key);
    const sbx_option_spec *s = spec_of(key);
    return s && s->default_value ? strtoll(s->default_value, NULL, 10) : 0;
}

/* Appends the items of a list option to binds (comma-split default when no options). */
static bool opt_list(const sbx_options *o, const char *key, sbx_strlist *out)
{
    if (o) {
        const char *const *items;
        size_t n = sbx_options_get_list(o, key, &items);
        for (size_t i = 0; i < n; i++)
            if (!sbx_strlist_add(out, items[i]))
                return false;
        return true;
    }
    const sbx_option_spec *s = spec_of(key);
    const char *d = s && s->default_value ? s->default_value : "";
    while (*d) {
        const char *comma = strchr(d, ',');
        size_t len = comma ? (size_t)(comma - d) : strlen(d);
        char item[PATH_MAX];
        if (len && len < sizeof item) {
            memcpy(item, d, len);
            item[len] = '\0';
            if (!sbx_strlist_add(out, item))
                return false;
        }
        d += len + (comma ? 1 : 0);
    }
    return true;
}

/* ---- provider state ------------------------------------------------------------------------- */

typedef enum cg_mode { CG_NONE, CG_V1, CG_V2 } cg_mode;

/* v2 controllers the limits need. A v2 hierarchy may lack some (a v1/v2 hybrid host whose
 * memory, pids and cpu serve v1): sandboxes are still made in it, for the per-command cgroups
 * (cgroup.kill) and the freezer, and only the limits whose controller is missing are
 * unenforceable. */
enum { LOCAL_V2_MEMORY = 1u << 0, LOCAL_V2_PIDS = 1u << 1, LOCAL_V2_CPU = 1u << 2 };

/* How long destroy waits for a killed sandbox's PID 1 (and with it the namespace) to go. */
#define LOCAL_DESTROY_WAIT_MS 10000
/* How often a close looks again at a reaper it could only track by pid (no pidfd to poll). */
#define LOCAL_REAPER_POLL_MS 2

/* Longest a sandbox may take to boot, and its agent to accept and answer a ping, when the
 * request's deadline (sbx_provider_step_deadline) allows that much: a loaded 2-core host. */
#define LOCAL_BOOT_MS 60000
#define LOCAL_AGENT_MS 10000

/* Longest runtime directory: the agent socket path under it must fit sun_path (108 bytes). */
#define LOCAL_MAX_RUNTIME_DIR 72
/* Where the host's uid slots are registered (one directory per uid_base). */
#define LOCAL_UID_SLOT_DIR "/run/sbx-uid-slots"
/* Host ids each sandbox maps (its uid 0..65535), and so the stride between uid slots. */
#define LOCAL_IDS_PER_SANDBOX 65536LL
/* A provider open sweeps stale sandboxes only when no open of the same runtime directory did
 * within this many seconds (the mtime of SBX_LOCAL_SWEEP_STAMP there): the sweep reads every
 * sandbox's meta and /proc entry, about 15 ms of CPU per 1,000 live sandboxes, which every
 * `sbx run` paid. local_sweep (sbx-worker start, sbx_engine_sweep) always sweeps. */
#define LOCAL_SWEEP_INTERVAL_S 10
/* LOCAL_MAX_CGROUP_DIR (the longest cgroup directory we create) is in local_meta.h. */

/* The reaper of a per_call sandbox (our child) to wait for: through its pidfd, so a pid reaped
 * by someone else and reused since is never waited for by mistake; by pid (fd -1) only where
 * pidfd_open fails (no pidfd on kernels before 5.3, or no descriptor left), where a zombie per
 * sandbox would be worse. */
typedef struct local_reaper {
    int fd;
    pid_t pid;
} local_reaper;

typedef struct local_provider {
    char runtime_dir[LOCAL_MAX_RUNTIME_DIR + 1];
    char agent_path[PATH_MAX];
    char rootfs[PATH_MAX]; /* "" = host binds */
    sbx_strlist binds;
    char workdir[256];
    char egress_resolver[64]; /* "" = the host's (egress.h) */
    int64_t workspace_mb, tmp_mb, idle_ttl_s, uid_base, uid_slots, program_uid, program_gid, nofile;
    bool rootless;
    bool host_network; /* network ALLOW may share the host's network namespace */
    cg_mode cg;
    unsigned v2_missing;                   /* v2: LOCAL_V2_* controllers the hierarchy lacks */
    char cg_why[512];                      /* why cgroups are unavailable (for messages) */
    char cg_base[3][LOCAL_MAX_CGROUP_DIR]; /* v1: memory, pids, cpu parents; v2: [0] only */
    /* Parent of the sandboxes' freezer cgroups (pause/resume): v1's freezer hierarchy, v2's
     * sandbox cgroups themselves (cgroup.freeze); "" where pausing is not possible. */
    char freezer_base[LOCAL_MAX_CGROUP_DIR];
    bool per_call; /* the profile's sandboxes live for one call (ctx->scope) */
    char profile[LOCAL_META_MAX_NAME + 1]; /* ctx->profile, recorded in each meta ("" = none) */
    long owner_pid;                        /* this process: the owner recorded in each meta */
    unsigned long long owner_start;
    sbx_expose_cfg expose; /* exposed ports: where relays listen, what URLs name */
    pthread_mutex_t swept_mu;
    sbx_strlist swept; /* removed by the sweep at open, reported by the next local_sweep */
    pthread_mutex_t reap_mu;
    local_reaper *reapers; /* the reapers of per_call sandboxes still to wait for */
    size_t n_reapers, cap_reapers;
} local_provider;

typedef struct local_sandbox {
    sbx_sandbox base; /* first: the engine sees this */
    local_provider *lp;
    char state_dir[LOCAL_MAX_RUNTIME_DIR + 32];
    char socket_path[LOCAL_MAX_RUNTIME_DIR + 64];
    char oom_file[LOCAL_MAX_CGROUP_DIR + 64]; /* memory.oom_control / memory.events, or "" */
    sbx_agent_conn *conn;
    bool egress; /* an egress proxy filters its network (ALLOWLIST) */
} local_sandbox;

static const char *cg_v1_names[3] = {"memory", "pids", "cpu"};
/* Where cgroup v1's freezer hierarchy is mounted (the only place it is looked for). */
#define LOCAL_V1_FREEZER "/sys/fs/cgroup/freezer"

static bool write_small(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text);
}

/* This process's cgroup path for a v1 controller (or "" for v2's unified line), from the text
 * of /proc/self/cgroup (read once by the caller for every controller it asks about). */
static bool own_cgroup(const char *self_cgroup, const char *controller, char *out, size_t cap)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", self_cgroup);
    for (char *save1, *line = strtok_r(buf, "\n", &save1); line;
         line = strtok_r(NULL, "\n", &save1)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctls = c1 + 1;
        bool match = false;
        if (controller == NULL) {
            match = ctls[0] == '\0';
        } else {
            char copy[256];
            snprintf(copy, sizeof copy, "%s", ctls);
            for (char *save, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (strcmp(t, controller) == 0)
                    match = true;
        }
        if (match) {
            snprintf(out, cap, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
            return true;
        }
    }
    return false;
}

/* Whether the space-separated list holds word (cgroup.controllers). */
static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
            return true;
    return false;
}

/* Finds where sandbox cgroups go; sets lp->cg (CG_NONE with the reason when unavailable). */
static void detect_cgroups(local_provider *lp)
{
    lp->cg = CG_NONE;
    if (lp->rootless) {
        snprintf(lp->cg_why, sizeof lp->cg_why,
                 "rootless: no delegated cgroup to put sandboxes in (run as root, or use a "
                 "profile without memory_mb/pids/cpu, or lenient: true)");
        return;
    }
    struct statfs sfs;
    if (statfs("/sys/fs/cgroup", &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC) {
        /* v2: a top-level "sbx" cgroup with those of memory, pids and cpu that the hierarchy
         * offers enabled for its children */
        static const struct {
            const char *name;
            unsigned bit;
        } v2[] = {{"memory", LOCAL_V2_MEMORY}, {"pids", LOCAL_V2_PIDS}, {"cpu", LOCAL_V2_CPU}};
        char avail[512] = "", enable[64] = "";
        if (sbx_read_small("/sys/fs/cgroup/cgroup.controllers", 0, avail, sizeof avail) < 0)
            avail[0] = '\0';
        lp->v2_missing = 0;
        for (size_t i = 0; i < sizeof v2 / sizeof v2[0]; i++) {
            if (!word_in(avail, v2[i].name)) {
                lp->v2_missing |= v2[i].bit;
                continue;
            }
            size_t len = strlen(enable);
            snprintf(enable + len, sizeof enable - len, "%s+%s", len ? " " : "", v2[i].name);
        }
        snprintf(lp->cg_base[0], sizeof lp->cg_base[0], "/sys/fs/cgroup/sbx");
        if ((mkdir(lp->cg_base[0], 0755) < 0 && errno != EEXIST) ||
            (enable[0] && (!write_small("/sys/fs/cgroup/cgroup.subtree_control", enable) ||
                           !write_small("/sys/fs/cgroup/sbx/cgroup.subtree_control", enable)))) {
            snprintf(lp->cg_why, sizeof lp->cg_why,
                     "cgroup v2: cannot enable %s for /sys/fs/cgroup/sbx (%s)", enable,
                     strerror(errno));
            return;
        }
        lp->cg = CG_V2;
        snprintf(lp->freezer_base, sizeof lp->freezer_base, "%s", lp->cg_base[0]);
        return;
    }
    char self_cgroup[4096];
    if (sbx_read_small("/proc/self/cgroup", 0, self_cgroup, sizeof self_cgroup) < 0)
        self_cgroup[0] = '\0'; /* then no controller is found, and the reason is given */
    for (int i = 0; i < 3; i++) {
        char own[LOCAL_MAX_CGROUP_DIR - 64], probe[PATH_MAX + 64];
        snprintf(probe, sizeof probe, "/sys/fs/cgroup/%s/cgroup.procs", cg_v1_names[i]);
        if (access(probe, W_OK) != 0 || !own_cgroup(self_cgroup, cg_v1_names[i], own, sizeof own)) {
            snprintf(lp->cg_why, sizeof lp->cg_why,
                     "cgroup v1 controller '%s' is not mounted writable at /sys/fs/cgroup/%s",
                     cg_v1_names[i], cg_v1_names[i]);
            return;
        }
        snprintf(lp->cg_base[i], sizeof lp->cg_base[i], "/sys/fs/cgroup/%s%s/sbx", cg_v1_names[i],
                 own);
        if (mkdir(lp->cg_base[i], 0755) < 0 && errno != EEXIST) {
            snprintf(lp->cg_why, sizeof lp->cg_why, "cannot create %.160s: %s", lp->cg_base[i],
                     strerror(errno));
            return;
        }
    }
    lp->cg = CG_V1;
    /* The freezer is optional: without it sandboxes run, and pause is not declared. */
    char own[LOCAL_MAX_CGROUP_DIR - 64];
    if (access(LOCAL_V1_FREEZER "/cgroup.procs", W_OK) == 0 &&
        own_cgroup(self_cgroup, "freezer", own, sizeof own)) {
        snprintf(lp->freezer_base, sizeof lp->freezer_base, LOCAL_V1_FREEZER "%s/sbx", own);
        if (mkdir(lp->freezer_base, 0755) < 0 && errno != EEXIST)
            lp->freezer_base[0] = '\0';
    }
}

static bool valid_id(const char *id);
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Waits for the reapers this provider started (per_call sandboxes, agent/reap.c; its children)
 * that have ended, so none stays a zombie: at each destroy without waiting (wait_ms 0); at close
 * for those still removing a sandbox, up to wait_ms in all (a close leaves nothing running).
 * Through pidfds: a pid reaped by someone else (an embedder's wait(-1)) and reused since is
 * never waited for by mistake. */
static void reapers_collect(local_provider *lp, int wait_ms)
{
    int64_t deadline = sbx_monotonic_ms() + wait_ms;
    pthread_mutex_lock(&lp->reap_mu);
    for (size_t i = 0; i < lp->n_reapers;) {
        local_reaper *r = &lp->reapers[i];
        int64_t left = deadline - sbx_monotonic_ms();
        bool ended;
        if (r->fd >= 0) {
            if (left > 0) {
                struct pollfd pf = {r->fd, POLLIN, 0};
                (void)poll(&pf, 1, (int)left);
            }
            siginfo_t si;
            memset(&si, 0, sizeof si);
            int w = waitid((idtype_t)P_PIDFD, (id_t)r->fd, &si, WEXITED | WNOHANG);
            if (w < 0 && errno == EINTR)
                continue;
            /* ended and reaped now, or reaped by someone else (ECHILD) */
            ended = w != 0 || si.si_pid != 0;
        } else {
            pid_t w = waitpid(r->pid, NULL, WNOHANG);
            if (w < 0 && errno == EINTR)
                continue;
            ended = w != 0;
            if (!ended && left > 0) { /* no descriptor to poll: look again shortly */
                struct timespec ts = {0, LOCAL_REAPER_POLL_MS * 1000000L};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        if (!ended) { /* still at work */
            i++;
            continue;
        }
        if (r->fd >= 0)
            close(r->fd);
        lp->reapers[i] = lp->reapers[--lp->n_reapers];
    }
    pthread_mutex_unlock(&lp->reap_mu);
}

/* Tracks reaper pid (our child); false when it cannot be (out of memory). */
static bool reapers_add(local_provider *lp, pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    pthread_mutex_lock(&lp->reap_mu);
    if (lp->n_reapers == lp->cap_reapers) {
        size_t cap = lp->cap_reapers ? 2 * lp->cap_reapers : 16;
        local_reaper *grown = realloc(lp->reapers, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&lp->reap_mu);
            if (fd >= 0)
                close(fd);
            return false;
        }
        lp->reapers = grown;
        lp->cap_reapers = cap;
    }
    lp->reapers[lp->n_reapers++] = (local_reaper){.fd = fd, .pid = pid};
    pthread_mutex_unlock(&lp->reap_mu);
    return true;
}

static sbx_status local_destroy(void *state, const char *sandbox_id, sbx_error *err);

static void sweep_stale(local_provider *lp, sbx_strlist *removed);

static sbx_status make_dir(const char *path, mode_t mode, sbx_error *err)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "cannot create %s: %s (set sandbox.runtime_dir to a writable place)",
                             path, strerror(errno));
    return SBX_OK;
}

/* True when no open swept this runtime directory in the last LOCAL_SWEEP_INTERVAL_S seconds;
 * then the stamp is renewed (two opens racing may both sweep, as every open did before). A
 * stamp that cannot be read or written means sweep: never skip on an error. */
static bool sweep_due(const local_provider *lp)
{
    char path[LOCAL_MAX_RUNTIME_DIR + sizeof SBX_LOCAL_SWEEP_STAMP + 1];
    snprintf(path, sizeof path, "%s/%s", lp->runtime_dir, SBX_LOCAL_SWEEP_STAMP);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) { /* the first open here: stamped now by its creation */
        close(fd);
        return true;
    }
    fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return true;
    struct stat st;
    struct timespec now;
    bool due = fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
               clock_gettime(CLOCK_REALTIME, &now) != 0 ||
               now.tv_sec - st.st_mtim.tv_sec >= LOCAL_SWEEP_INTERVAL_S ||
               now.tv_sec < st.st_mtim.tv_sec; /* a stamp from the future: the clock moved */
    if (due)
        (void)futimens(fd, NULL);
    close(fd);
    return due;
}

static sbx_status local_open(const sbx_provider_ctx *ctx, void **state, sbx_error *err)
{
    local_provider *lp = calloc(1, sizeof *lp);
    if (!lp)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    const sbx_options *o = ctx ? ctx->options : NULL;
    lp->rootless = geteuid() != 0;
    if (ctx && ctx->runtime_dir && ctx->runtime_dir[0]) {
        snprintf(lp->runtime_dir, sizeof lp->runtime_dir, "%.*s", LOCAL_MAX_RUNTIME_DIR,
                 ctx->runtime_dir);
    } else if (!lp->rootless) {
        snprintf(lp->runtime_dir, sizeof lp->runtime_dir, "/run/sbx");
    } else {
        const char *x = getenv("XDG_RUNTIME_DIR");
        if (x && x[0] == '/' && strlen(x) + 4 < LOCAL_MAX_RUNTIME_DIR)
            snprintf(lp->runtime_dir, sizeof lp->runtime_dir, "%.*s/sbx", LOCAL_MAX_RUNTIME_DIR - 4,
                     x);
        else
            snprintf(lp->runtime_dir, sizeof lp->runtime_dir, "/tmp/sbx-%u", (unsigned)getuid());
    }
    if (strlen(lp->runtime_dir) >= LOCAL_MAX_RUNTIME_DIR) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "runtime directory %s is longer than %d bytes: the agent socket below it "
                      "would not fit a unix socket path; set sandbox.runtime_dir shorter",
                      lp->runtime_dir, LOCAL_MAX_RUNTIME_DIR - 1);
        free(lp);
        return SBX_E_CONFIG;
    }
    /* root: 0711 so a sandbox's mapped root (not host root) can reach its own 0700 state dir
     * during setup, without being able to list the others */
    sbx_status st = make_dir(lp->runtime_dir, lp->rootless ? 0700 : 0711, err);
    struct stat rst;
    if (st == SBX_OK &&
        (lstat(lp->runtime_dir, &rst) < 0 || !S_ISDIR(rst.st_mode) || rst.st_uid != geteuid()))
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "runtime directory %s is not a directory owned by uid %u; remove it "
                           "or choose another sandbox.runtime_dir",
                           lp->runtime_dir, (unsigned)geteuid());
    if (st == SBX_OK)
        chmod(lp->runtime_dir, lp->rootless ? 0700 : 0711);
    const char *agent = opt_str(o, "agent");
    if (st == SBX_OK) {
        if (agent && agent[0])
            snprintf(lp->agent_path, sizeof lp->agent_path, "%s", agent);
        else
            st = sbx_agent_binary_path(lp->agent_path, sizeof lp->agent_path, err);
    }
    const char *rootfs = opt_str(o, "rootfs");
    if (rootfs && strcmp(rootfs, "host") != 0)
        snprintf(lp->rootfs, sizeof lp->rootfs, "%s", rootfs);
    if (st == SBX_OK &&
        (!opt_list(o, "binds", &lp->binds) || !opt_list(o, "extra_binds", &lp->binds)))
        st = sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    const char *wd = opt_str(o, "workdir");
    snprintf(lp->workdir, sizeof lp->workdir, "%s", wd && wd[0] ? wd : "/workspace");
    if (st == SBX_OK &&
        (lp->workdir[0] != '/' || strstr(lp->workdir, "..") || strcmp(lp->workdir, "/") == 0))
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "local.workdir '%s' must be an absolute path below / without '..'",
                           lp->workdir);
    const char *resolver = opt_str(o, "egress_resolver");
    snprintf(lp->egress_resolver, sizeof lp->egress_resolver, "%s", resolver ? resolver : "");
    lp->workspace_mb = opt_int(o, "workspace_mb");
    lp->tmp_mb = opt_int(o, "tmp_mb");
    lp->idle_ttl_s = opt_int(o, "idle_ttl_s");
    lp->uid_base = opt_int(o, "uid_base");
    lp->uid_slots = opt_int(o, "uid_slots");
    if (st == SBX_OK && lp->uid_base + lp->uid_slots * LOCAL_IDS_PER_SANDBOX > 4294967295LL)
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "local.uid_base %lld + local.uid_slots %lld x 65536 ids passes the "
                           "last host uid (4294967294); lower one of them",
                           (long long)lp->uid_base, (long long)lp->uid_slots);
    lp->program_uid = opt_int(o, "program_uid");
    lp->program_gid = opt_int(o, "program_gid");
    lp->nofile = opt_int(o, "nofile");
    lp->host_network = o != NULL && sbx_options_get_bool(o, "host_network");
    if (st == SBX_OK)
        st = sbx_expose_config(opt_str(o, "expose_address"), opt_str(o, "expose_host"),
                               o != NULL && sbx_options_get_bool(o, "expose_require_token"),
                               &lp->expose, err);
    if (st != SBX_OK) {
        sbx_strlist_clear(&lp->binds);
        free(lp);
        return st;
    }
    detect_cgroups(lp);
    lp->per_call = ctx && ctx->scope == SBX_SCOPE_PER_CALL;
    if (ctx && ctx->profile && strlen(ctx->profile) <= LOCAL_META_MAX_NAME)
        memcpy(lp->profile, ctx->profile, strlen(ctx->profile) + 1);
    lp->owner_pid = (long)getpid();
    lp->owner_start = sbx_proc_start_time(lp->owner_pid, NULL);
    pthread_mutex_init(&lp->swept_mu, NULL);
    pthread_mutex_init(&lp->reap_mu, NULL);
    if (sweep_due(lp))
        sweep_stale(lp, &lp->swept);
    /* Sandboxes destroyed by this process are reaped by it instead of lingering as zombies of
     * an init that may not reap (PID 1 of a container); boot processes hand their child to
     * the nearest subreaper. We only ever wait for pids we created. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    *state = lp;
    return SBX_OK;
}

static void local_close(void *state)
{
    local_provider *lp = state;
    if (!lp)
        return;
    reapers_collect(lp, LOCAL_DESTROY_WAIT_MS);
    free(lp->reapers);
    pthread_mutex_destroy(&lp->reap_mu);
    sbx_strlist_clear(&lp->binds);
    sbx_strlist_clear(&lp->swept);
    pthread_mutex_destroy(&lp->swept_mu);
    free(lp);
}

static sbx_status local_sweep(void *state, sbx_strlist *removed, sbx_error *err)
{
    local_provider *lp = state;
    pthread_mutex_lock(&lp->swept_mu);
    for (size_t i = 0; i < lp->swept.n; i++)
        if (!sbx_strlist_add(removed, lp->swept.items[i])) {
            pthread_mutex_unlock(&lp->swept_mu);
            return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
        }
    sbx_strlist_clear(&lp->swept);
    pthread_mutex_unlock(&lp->swept_mu);
    sweep_stale(lp, removed);
    return SBX_OK;
}

static void local_capabilities(void *state, sbx_capabilities *caps)
{
    local_provider *lp = state;
    caps->isolation = SBX__V1__ISOLATION__ISOLATION_OS_POLICY;
    caps->shell = true;
    sbx_add_string(&caps->n_languages, &caps->languages, "python");
    sbx_add_string(&caps->n_languages, &caps->languages, "bash");
    caps->files = true;
    caps->package_install = false;
    caps->stateful = true;
    caps->attach = true;
    caps->provisions = true;
    caps->attaches_external = false;
    caps->principal_user = false;
    caps->policy_network = true;
    caps->policy_network_domains = lp && !lp->rootless; /* the egress proxy (egress.h) */
    caps->policy_filesystem = false;
    caps->policy_resources = lp && (lp->cg == CG_V1 || (lp->cg == CG_V2 && lp->v2_missing == 0));
    caps->streaming = true;
    caps->detach = true; /* the agent keeps each command's journal */
    caps->pause = lp && lp->freezer_base[0] != '\0' && !lp->per_call;
    caps->expose = true; /* a relay per port, in the sandbox's network namespace */
}

/* allow: the local provider has no network namespace of its own to give a sandbox that may
 * reach anything (no veth, no NAT), only the host's, where programs reach every listener on the
 * host's loopback (an sbx worker that takes any principal from loopback, a database, a daemon's
 * API) and the cloud metadata address with the host's credentials. Not something to grant
 * because a profile says "allow": the profile must say host_network too. Refused when the
 * configuration is loaded (local_check_profile) and, for a provider opened without one, at
 * each request (local_check_policy). */
static sbx_status host_network_refused(sbx_status code, sbx_error *err)
{
    return sbx_error_set(
        err, code,
        "network_egress allow on the local provider runs programs in the host's network "
        "namespace, where they reach every service on the host's loopback (an sbx worker "
        "without callers, databases) and the cloud metadata address; use network_egress "
        "allowlist with the destinations needed (network_allow), or set host_network: true "
        "in the profile's local block to accept that");
}

static sbx_status local_check_profile(const sbx_profile_config *p, sbx_error *err)
{
    if (p->policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW &&
        !sbx_options_get_bool(p->options, "host_network"))
        return host_network_refused(SBX_E_CONFIG, err);
    return SBX_OK;
}

static bool local_shares_host_network(const sbx_profile_config *p)
{
    return p->policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW &&
           sbx_options_get_bool(p->options, "host_network");
}

static sbx_status local_check_policy(void *state, const sbx_policy *p, sbx_strlist *un,
                                     sbx_error *err)
{
    local_provider *lp = state;
    if (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW && !lp->host_network)
        return host_network_refused(SBX_E_POLICY, err);
    bool ok = true;
    /* allowlist: the egress proxy; rootless, the sandbox's agent is not dumpable and its
     * namespaces cannot be opened by an unprivileged caller, so the proxy cannot get in */
    if (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST && lp->rootless)
        ok = ok && sbx_strlist_add(un, "network_egress=allowlist (rootless: run sbx as root for "
                                       "the egress proxy)");
    else if (p->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST)
        ok = ok && sbx_egress_check(p->network_allow, p->n_network_allow, un);
    if (p->n_fs_read)
        ok = ok && sbx_strlist_add(un, "fs_read");
    if (p->n_fs_write)
        ok = ok && sbx_strlist_add(un, "fs_write");
    unsigned missing = lp->cg == CG_NONE ? LOCAL_V2_MEMORY | LOCAL_V2_PIDS | LOCAL_V2_CPU
                       : lp->cg == CG_V2 ? lp->v2_missing
                                         : 0;
    if (p->memory_mb && (missing & LOCAL_V2_MEMORY))
        ok = ok && sbx_strlist_add(un, "memory_mb");
    if (p->pids && (missing & LOCAL_V2_PIDS))
        ok = ok && sbx_strlist_add(un, "pids");
    if (p->cpu > 0 && (missing & LOCAL_V2_CPU))
        ok = ok && sbx_strlist_add(un, "cpu");
    if (!ok)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    return SBX_OK;
}

/* ---- ids and state ----------------------------------------------------------------------- */

/* Sandbox ids are "l-" + 16 hex digits; anything else is refused before it touches a path. */
static bool valid_id(const char *id)
{
    if (!id || strncmp(id, "l-", 2) != 0 || strlen(id) != 18)
        return false;
    for (const char *p = id + 2; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static void new_id(char out[19])
{
    uint8_t b[8];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t n = getrandom(b + got, sizeof b - got, 0);
        if (n > 0)
            got += (size_t)n;
    }
    snprintf(out, 19, "l-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7]);
}

static bool meta_read(const char *state_dir, meta *m)
{
    char path[PATH_MAX + 16], buf[8192];
    memset(m, 0, sizeof *m);
    m->uid_slot = -1;
    snprintf(path, sizeof path, "%s/meta", state_dir);
    if (sbx_read_small(path, 0, buf, sizeof buf) < 0)
        return false;
    /* the state dir is <runtime_dir>/<sandbox id> (state_paths) */
    const char *slash = strrchr(state_dir, '/');
    return local_meta_parse(buf, slash ? slash + 1 : state_dir, m);
}

/* True while the sandbox's PID 1 is the process we started (not a reused pid, not a zombie). */
/* True while process pid, started at start, runs (not a zombie; not a reused pid). */
static bool still_runs(long pid, unsigned long long start)
{
    return pid > 0 && start != 0 && sbx_proc_live_start_time(pid) == start;
}

static bool meta_alive(const meta *m)
{
    return still_runs(m->pid, m->start);
}

static void state_paths(const local_provider *lp, const char *id, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/%.18s", lp->runtime_dir, id); /* ids are 18 chars (valid_id) */
}

/* Exposed ports' records: beside the state dirs, not in them (a state dir is handed to the
 * sandbox's uid, and a record names the relay pid that destroy kills). */
static void expose_paths(const local_provider *lp, const char *id, char *dir, size_t cap)
{
    snprintf(dir, cap, "%s/expose/%.18s", lp->runtime_dir, id);
}

/* ---- uid slots -------------------------------------------------------------------------- */

/* Each live sandbox (root mode) holds one slot k of [0, uid_slots): the symlink
 * LOCAL_UID_SLOT_DIR/<uid_base>/<k> -> <its state dir>, made with symlink(2), which either
 * creates it or fails with EEXIST, so two providers racing for a slot never both get it. The
 * registry is the host's, not the runtime dir's: providers with different runtime dirs but one
 * uid range must not hand out the same ids. The sandbox's uid 0 is host uid
 * uid_base + k*65536: its own, so the kernel's per-user counts of everything in it are its own
 * too. */
static void uid_slot_path(const local_provider *lp, long slot, char *out, size_t cap)
{
    if (slot < 0)
        snprintf(out, cap, "%s/%lld", LOCAL_UID_SLOT_DIR, (long long)lp->uid_base);
    else
        snprintf(out, cap, "%s/%lld/%ld", LOCAL_UID_SLOT_DIR, (long long)lp->uid_base, slot);
}

static sbx_status uid_slot_claim(local_provider *lp, const char *state_dir, long *slot,
                                 sbx_error *err)
{
    char dir[LOCAL_MAX_RUNTIME_DIR + 32];
    uid_slot_path(lp, -1, dir, sizeof dir);
    return sbx_uid_slot_claim(dir, (long)lp->uid_slots, state_dir, slot, err);
}

/* Frees the slot if it is still state_dir's (one freed and taken by another sandbox stays). */
static void uid_slot_release(const local_provider *lp, long slot, const char *state_dir)
{
    char dir[LOCAL_MAX_RUNTIME_DIR + 32];
    uid_slot_path(lp, -1, dir, sizeof dir);
    sbx_uid_slot_release(dir, slot, state_dir);
}

static uid_t uid_of_slot(const local_provider *lp, long slot)
{
    return (uid_t)(lp->uid_base + slot * LOCAL_IDS_PER_SANDBOX);
}

/* True while the process that created the sandbox runs (same pid, same start time). */
static bool owner_alive(const meta *m)
{
    if (m->owner_pid <= 0)
        return true; /* unknown owner: never presumed dead */
    return still_runs(m->owner_pid, m->owner_start);
}

/* True while the reaper the launcher left for a per_call sandbox runs (agent/reap.c): it
 * removes the sandbox (cgroups, state dir, uid slot) once its PID 1 has ended. */
static bool reaper_alive(const meta *m)
{
    return still_runs(m->reaper_pid, m->reaper_start);
}

/* Calls fn for each sandbox state dir in the runtime dir with its meta (have: read, and naming
 * a PID 1). -1 (errno set): the runtime dir cannot be read. */
static int each_sandbox(local_provider *lp,
                        void (*fn)(local_provider *lp, const char *id, const char *dir,
                                   const meta *m, bool have, void *arg),
                        void *arg)
{
    DIR *d = opendir(lp->runtime_dir);
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!valid_id(de->d_name))
            continue;
        char dir[LOCAL_MAX_RUNTIME_DIR + 32];
        state_paths(lp, de->d_name, dir, sizeof dir);
        meta m;
        bool have = meta_read(dir, &m);
        fn(lp, de->d_name, dir, &m, have, arg);
    }
    closedir(d);
    return 0;
}

static void sweep_one(local_provider *lp, const char *id, const char *dir, const meta *m, bool have,
                      void *arg)
{
    sbx_strlist *removed = arg;
    struct stat st;
    /* a sandbox being created has no PID 1 in its meta yet: leave young ones alone, unless the
     * owner that was creating it (per_call) is gone */
    bool creator_gone = m->per_call && m->owner_pid > 0 && !owner_alive(m);
    if (!have && !creator_gone && stat(dir, &st) == 0 && time(NULL) - st.st_mtime < 60)
        return;
    /* destroyed already (another profile's sweep on this runtime dir, say): its PID 1 is killed
     * or gone, and its reaper removes the rest */
    if (have && reaper_alive(m) && (!meta_alive(m) || sbx_proc_killed(m->pid)))
        return;
    if (!have || !meta_alive(m) || (m->per_call && !owner_alive(m))) {
        local_destroy(lp, id, NULL);
        if (removed)
            sbx_strlist_add(removed, id);
    }
}

/* Sandboxes whose agent ended on its own (idle TTL, OOM of PID 1, host reboot) leave their
 * state dir and cgroups behind, and a per_call sandbox whose owner was killed mid-call is
 * reachable by nobody: each provider open and each local_sweep remove those (ids appended to
 * removed when non-NULL). Live sandboxes of live owners and every per_session one stay. */
static void sweep_stale(local_provider *lp, sbx_strlist *removed)
{
    if (each_sandbox(lp, sweep_one, removed) < 0)
        return;
    if (lp->rootless)
        return;
    /* slots whose sandbox has no state dir any more (a crash between claim and cleanup, or a
     * runtime dir removed whole) */
    char path[LOCAL_MAX_RUNTIME_DIR + 32];
    uid_slot_path(lp, -1, path, sizeof path);
    sbx_uid_slot_sweep(path);
}

typedef struct held_arg {
    void (*held)(void *arg, const char *sandbox_id, const char *subject);
    void *arg;
} held_arg;

static void list_one(local_provider *lp, const char *id, const char *dir, const meta *m, bool have,
                     void *arg)
{
    (void)dir;
    const held_arg *h = arg;
    if (have && m->has_principal && !m->per_call && strcmp(m->profile, lp->profile) == 0 &&
        meta_alive(m))
        h->held(h->arg, id, m->subject);
}

/* The live per_session sandboxes of this profile in the runtime dir, with the principal each was
 * made for (its meta). One that is being made (no PID 1 yet) is not listed: the engine that is
 * making it counts it. */
static sbx_status
local_list_held(void *state, void (*held)(void *arg, const char *sandbox_id, const char *subject),
                void *arg, sbx_error *err)
{
    local_provider *lp = state;
    held_arg h = {held, arg};
    if (each_sandbox(lp, list_one, &h) < 0 && errno != ENOENT)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot list %s: %s", lp->runtime_dir,
                             strerror(errno));
    return SBX_OK;
}

/* The cgroup each sandbox's agent makes per-command cgroups in (v1: the pids hierarchy, whose
 * limit the commands then share; v2: the sandbox's cgroup). It is handed to the sandbox's root
 * uid: the directory, to create children in, and on v2 cgroup.procs, which a move between
 * the sandbox's cgroup and a child needs. The limit files stay root's. */
static sbx_status delegate_cgroup(local_provider *lp, const char *dir, uid_t uid, sbx_error *err)
{
    char procs[PATH_MAX + 32];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
    if (chown(dir, uid, (gid_t)uid) < 0 || (lp->cg == CG_V2 && chown(procs, uid, (gid_t)uid) < 0))
        return sbx_error_set(err, SBX_E_PROVISION,
                             "cannot hand cgroup %s to the sandbox's uid %u: %s", dir,
                             (unsigned)uid, strerror(errno));
    return SBX_OK;
}

/* Waits (bounded) until pid is gone; reaps it when it is our child (we are a subreaper). */
static void wait_gone(long pid, unsigned long long start)
{
    for (int attempt = 0; attempt < 1000; attempt++) {
        int st;
        pid_t r = waitpid((pid_t)pid, &st, WNOHANG);
        if (r == (pid_t)pid)
            return;
        char state = '?';
        unsigned long long s = sbx_proc_start_time(pid, &state);
        if (s != start || (r < 0 && (state == 'Z' || state == 'X')))
            return; /* gone, reused, or a zombie that is not ours to reap */
        usleep(attempt < 20 ? 500 : 5000);
    }
}

/* ---- create ----------------------------------------------------------------------------- */

/* The cgroup dirs of sandbox id, in the meta's order (v1: memory, pids, cpu, then the freezer
 * when there is one; v2: one), named before they exist so the launcher can start meanwhile;
 * returns how many. */
static int plan_cgroups(const local_provider *lp, const char *id,
                        char cg[LOCAL_META_MAX_CGROUPS][LOCAL_MAX_CGROUP_DIR + 32])
{
    if (lp->cg == CG_NONE)
        return 0;
    int n = lp->cg == CG_V1 ? 3 : 1;
    for (int i = 0; i < n; i++)
        snprintf(cg[i], sizeof cg[0], "%s/%s", lp->cg_base[i], id);
    /* v1: a freezer cgroup of its own, which the boot puts PID 1 in like the others (v2's
     * sandbox cgroup freezes itself); not for a per_call sandbox, which nothing pauses (pause
     * names a session), so a one-shot makes one cgroup fewer */
    if (lp->cg == CG_V1 && lp->freezer_base[0] && !lp->per_call)
        snprintf(cg[n++], sizeof cg[0], "%s/%s", lp->freezer_base, id);
    return n;
}

/* Creates the n cgroups plan_cgroups named (cg), with the policy's limits, and hands the
 * per-command parent to the sandbox's uid. */
static sbx_status setup_cgroups(local_provider *lp, const sbx_policy *p, uid_t uid,
                                char cg[LOCAL_META_MAX_CGROUPS][LOCAL_MAX_CGROUP_DIR + 32], int n,
                                sbx_error *err)
{
    for (int i = 0; i < n; i++)
        if (mkdir(cg[i], 0755) < 0)
            return sbx_error_set(err, SBX_E_PROVISION, "cannot create cgroup %s: %s", cg[i],
                                 strerror(errno));
    if (lp->cg == CG_NONE)
        return SBX_OK;
    char path[PATH_MAX + 64], val[64];
    bool ok = true;
    const char *what = "";
    if (lp->cg == CG_V1) {
        if (p->memory_mb) {
            snprintf(val, sizeof val, "%llu", (unsigned long long)p->memory_mb << 20);
            snprintf(path, sizeof path, "%s/memory.limit_in_bytes", cg[0]);
            ok = write_small(path, val);
            what = "memory.limit_in_bytes";
            /* no swap beyond the limit, where the kernel accounts swap */
            snprintf(path, sizeof path, "%s/memory.memsw.limit_in_bytes", cg[0]);
            if (ok && access(path, W_OK) == 0)
                write_small(path, val);
        }
        if (ok && p->pids) {
            snprintf(val, sizeof val, "%u", p->pids);
            snprintf(path, sizeof path, "%s/pids.max", cg[1]);
            ok = write_small(path, val);
            what = "pids.max";
        }
        if (ok && p->cpu > 0) {
            snprintf(path, sizeof path, "%s/cpu.cfs_period_us", cg[2]);
            ok = write_small(path, "100000");
            snprintf(val, sizeof val, "%lld", (long long)(p->cpu * 100000.0 + 0.5));
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", cg[2]);
            ok = ok && write_small(path, val);
            what = "cpu.cfs_quota_us";
        }
    } else { /* v2: a limit whose controller is missing was refused or waived (lenient) */
        if (p->memory_mb && !(lp->v2_missing & LOCAL_V2_MEMORY)) {
            snprintf(val, sizeof val, "%llu", (unsigned long long)p->memory_mb << 20);
            snprintf(path, sizeof path, "%s/memory.max", cg[0]);
            ok = write_small(path, val);
            snprintf(path, sizeof path, "%s/memory.swap.max", cg[0]);
            if (ok && access(path, W_OK) == 0)
                write_small(path, "0");
            what = "memory.max";
        }
        if (ok && p->pids && !(lp->v2_missing & LOCAL_V2_PIDS)) {
            snprintf(val, sizeof val, "%u", p->pids);
            snprintf(path, sizeof path, "%s/pids.max", cg[0]);
            ok = write_small(path, val);
            what = "pids.max";
        }
        if (ok && p->cpu > 0 && !(lp->v2_missing & LOCAL_V2_CPU)) {
            snprintf(val, sizeof val, "%lld 100000", (long long)(p->cpu * 100000.0 + 0.5));
            snprintf(path, sizeof path, "%s/cpu.max", cg[0]);
            ok = write_small(path, val);
            what = "cpu.max";
        }
    }
    if (!ok)
        return sbx_error_set(err, SBX_E_POLICY,
                             "cannot apply the policy limit %s in %s: %s (the limit is not "
                             "enforceable on this host)",
                             what, cg[0], strerror(errno));
    return delegate_cgroup(lp, cg[lp->cg == CG_V1 ? 1 : 0], uid, err);
}

/* The launcher's command line (boot_argv) and the storage its values live in. */
typedef struct boot_cmd {
    char *argv[64 + 2 * 64];
    char num[7][32];
    char owner[32];
    char cg[LOCAL_META_MAX_CGROUPS][LOCAL_MAX_CGROUP_DIR + 32];
    char procs[LOCAL_META_MAX_CGROUPS][LOCAL_MAX_CGROUP_DIR + 64];
    char slots[LOCAL_MAX_RUNTIME_DIR + 32];
} boot_cmd;

/* `sbx-agent boot --wait-go ...` for sandbox id: everything but the uid base, which comes with
 * "go" (the uid slot is claimed after the launcher starts). */
static void boot_argv(const local_provider *lp, const char *id, const char *box,
                      const sbx_policy *policy, boot_cmd *c)
{
    char **argv = c->argv;
    int ac = 0;
    argv[ac++] = "sbx-agent";
    argv[ac++] = "boot";
    argv[ac++] = "--wait-go";
    argv[ac++] = "--box";
    argv[ac++] = (char *)box;
    if (lp->rootfs[0]) {
        argv[ac++] = "--rootfs";
        argv[ac++] = (char *)lp->rootfs;
    } else {
        for (size_t i = 0; i < lp->binds.n && i < 60; i++) {
            argv[ac++] = "--bind";
            argv[ac++] = lp->binds.items[i];
        }
    }
    argv[ac++] = "--net";
    argv[ac++] =
        policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW ? "allow" : "deny";
    uint64_t ws = policy->disk_mb ? policy->disk_mb : (uint64_t)lp->workspace_mb;
    const struct {
        const char *opt;
        long long v;
    } nums[] = {
        {"--workspace-mb", (long long)ws},          {"--tmp-mb", (long long)lp->tmp_mb},
        {"--idle-ttl", (long long)lp->idle_ttl_s},  {"--nofile", (long long)lp->nofile},
        {"--prog-uid", (long long)lp->program_uid}, {"--prog-gid", (long long)lp->program_gid}};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (lp->rootless && i >= 4) /* rootless maps one uid: prog-uid/gid do not apply */
            break;
        snprintf(c->num[i], sizeof c->num[i], "%lld", nums[i].v);
        argv[ac++] = (char *)nums[i].opt;
        argv[ac++] = c->num[i];
    }
    argv[ac++] = "--workdir";
    argv[ac++] = (char *)lp->workdir;
    if (lp->per_call) { /* one call, then destroyed: no spare after its command */
        argv[ac++] = "--one-shot";
        /* and a reaper, so that the destroy does not wait for the teardown (agent/reap.c); it
         * ends the sandbox once this process has died, which it must be told, not find out:
         * this process may die before the launcher's main runs */
        argv[ac++] = "--reap";
        snprintf(c->owner, sizeof c->owner, "%ld", (long)getpid());
        argv[ac++] = "--owner";
        argv[ac++] = c->owner;
        if (!lp->rootless) {
            uid_slot_path(lp, -1, c->slots, sizeof c->slots);
            argv[ac++] = "--uid-slots";
            argv[ac++] = c->slots;
        }
    }
    if (lp->rootless)
        argv[ac++] = "--rootless";
    int n_cg = plan_cgroups(lp, id, c->cg);
    for (int i = 0; i < n_cg; i++) {
        snprintf(c->procs[i], sizeof c->procs[i], "%s/cgroup.procs", c->cg[i]);
        argv[ac++] = "--cgroup-procs";
        argv[ac++] = c->procs[i];
    }
    if (n_cg > 0) {
        argv[ac++] = "--cgroup-delegate";
        argv[ac++] = c->cg[lp->cg == CG_V1 ? 1 : 0];
    }
    argv[ac] = NULL;
}

/* A launcher started before what it waits for: its stdout ("pid=N") and stderr (the reason of
 * a failure), read here, and the write end of its stdin, where "go" is sent. */
typedef struct boot_proc {
    pid_t pid;
    int out, err, go;
    sbx_launched launched;
} boot_proc;

/* Starts `sbx-agent boot` (argv from boot_argv), which waits for boot_finish. */
static sbx_status boot_start(local_provider *lp, char **argv, boot_proc *bp, sbx_error *err)
{
    *bp = (boot_proc){.pid = -1, .out = -1, .err = -1, .go = -1};
    int out[2] = {-1, -1}, errp[2] = {-1, -1}, go[2] = {-1, -1};
    /* go: a socket, so a send to a launcher that already exited fails with EPIPE instead of
     * raising SIGPIPE in the host process */
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go) < 0) {
        int e = errno;
        int all[] = {out[0], out[1], errp[0], errp[1], go[0], go[1]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            if (all[i] >= 0)
                close(all[i]);
        return sbx_error_set(err, SBX_E_PROVISION, "pipe: %s", strerror(e));
    }
    /* Not awaited (launch.h): its exec overlaps the setup the create does next. The host
     * process's other descriptors (an embedding program's sockets, a test runner's lock) do not
     * reach the sandbox's PID 1; the agent closes them too (main.c). */
    static char *const empty_env[] = {NULL};
    const int fds[3] = {go[0], out[1], errp[1]};
    int rc = sbx_launch(lp->agent_path, argv, empty_env, fds, &bp->launched);
    bp->pid = bp->launched.pid;
    close(go[0]);
    close(out[1]);
    close(errp[1]);
    if (rc != 0) {
        close(go[1]);
        close(out[0]);
        close(errp[0]);
        bp->pid = -1;
        return sbx_error_set(err, SBX_E_PROVISION, "cannot run %s: %s", lp->agent_path,
                             strerror(rc));
    }
    bp->out = out[0];
    bp->err = errp[0];
    bp->go = go[1];
    return SBX_OK;
}

/* go: sends "go <uid base> <uid slot>" and collects the launcher's report; returns the sandbox's
 * host pid, or -1 with err set (a launcher that exited before it read "go" said why on its
 * stderr). !go: the create failed before the boot; the launcher, seeing its stdin end, exits
 * without doing anything, and err is left alone. reaper (--reap): the process started is the
 * sandbox's reaper, which runs on when the boot succeeded (it is not waited for then). */
static long boot_finish(boot_proc *bp, bool go, uid_t uid_base, long uid_slot, bool reaper,
                        sbx_error *err)
{
    if (go) {
        char line[64];
        int n = snprintf(line, sizeof line, "go %u %ld\n", (unsigned)uid_base, uid_slot);
        (void)!send(bp->go, line, (size_t)n, MSG_NOSIGNAL);
    }
    close(bp->go);
    if (!go) {
        close(bp->out);
        close(bp->err);
        waitpid(bp->pid, NULL, 0);
        sbx_launch_release(&bp->launched);
        return -1;
    }
    char obuf[256] = "", ebuf[1200] = "";
    size_t olen = 0, elen = 0;
    struct pollfd pf[2] = {{bp->out, POLLIN, 0}, {bp->err, POLLIN, 0}};
    int64_t deadline = sbx_provider_step_deadline(LOCAL_BOOT_MS);
    /* a reaper's launcher runs on once it has printed the pid, its last word: no EOF to wait for */
    bool spoke = false;
    while ((pf[0].fd >= 0 || pf[1].fd >= 0) && !spoke && sbx_monotonic_ms() < deadline) {
        if (poll(pf, 2, 1000) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            char *b = i == 0 ? obuf : ebuf;
            size_t *l = i == 0 ? &olen : &elen;
            size_t cap = i == 0 ? sizeof obuf : sizeof ebuf;
            ssize_t r = read(pf[i].fd, b + *l, cap - 1 - *l);
            if (r > 0) {
                *l += (size_t)r;
                b[*l] = '\0';
            }
            spoke = reaper && strncmp(obuf, "pid=", 4) == 0 && memchr(obuf, '\n', olen) != NULL;
            if (r <= 0 || *l >= cap - 1) {
                close(pf[i].fd);
                pf[i].fd = -1;
            }
        }
    }
    /* Late when the deadline ended the wait before boot said all it had to say. Not whether
     * boot still runs: once its pipes are closed here, its next write fails and it exits at
     * once, and the create then failed as a boot error instead of a timeout (CI, ASan). */
    bool late = (pf[0].fd >= 0 || pf[1].fd >= 0) && !spoke && sbx_monotonic_ms() >= deadline;
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    int wst = 0;
    if (late) {
        kill(bp->pid, SIGKILL); /* the deadline passed mid-boot: its cgroups go with the create */
        waitpid(bp->pid, &wst, 0);
        sbx_launch_release(&bp->launched);
        return sbx_error_set(err, sbx_provider_deadline_ms() > 0 ? SBX_E_TIMEOUT : SBX_E_PROVISION,
                             "the sandbox did not boot before the deadline"),
               -1;
    }
    long pid = strncmp(obuf, "pid=", 4) == 0 ? strtol(obuf + 4, NULL, 10) : -1;
    if (spoke && pid > 1) {
        sbx_launch_release(&bp->launched); /* the launcher, a fork of it, has spoken */
        return pid;
    }
    waitpid(bp->pid, &wst, 0);
    sbx_launch_release(&bp->launched);
    char *nl = strchr(ebuf, '\n');
    if (nl)
        *nl = '\0';
    sbx_launch_explain(ebuf, sizeof ebuf);
    if (!WIFEXITED(wst) || WEXITSTATUS(wst) != 0 || pid <= 1)
        return sbx_error_set(err, SBX_E_PROVISION, "%s",
                             ebuf[0] ? ebuf : "sbx-agent boot failed without a message"),
               -1;
    return pid;
}

/* The handle of sandbox id (its paths; nothing opened yet); NULL: out of memory, the one way
 * it fails, so callers test the handle itself. */
static local_sandbox *open_sandbox(local_provider *lp, const char *id)
{
    local_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb || !(sb->base.id = strdup(id))) {
        free(sb);
        return NULL;
    }
    sb->lp = lp;
    state_paths(lp, id, sb->state_dir, sizeof sb->state_dir);
    snprintf(sb->socket_path, sizeof sb->socket_path, "%s/box/agent.sock", sb->state_dir);
    return sb;
}

static void sandbox_free(local_sandbox *sb)
{
    if (!sb)
        return;
    sbx_agent_close(sb->conn);
    free(sb->base.id);
    free(sb);
}

/* Writes <state_dir>/meta atomically: PID 1 (0 before the boot), its start time, the owner
 * process, the scope and the cgroups to remove. */
static sbx_status write_meta(const local_provider *lp, const char *state_dir, const meta *m,
                             sbx_error *err)
{
    char meta_path[PATH_MAX + 16], tmp_path[PATH_MAX + 16];
    snprintf(meta_path, sizeof meta_path, "%s/meta", state_dir);
    snprintf(tmp_path, sizeof tmp_path, "%s/meta.tmp", state_dir);
    char text[4 * PATH_MAX + 128];
    size_t tl = 0;
    tl += (size_t)snprintf(text + tl, sizeof text - tl, "pid %ld\nstart %llu\nowner %ld %llu\n%s",
                           m->pid, m->start, lp->owner_pid, lp->owner_start,
                           lp->per_call ? "scope per_call\n" : "");
    if (m->uid_slot >= 0)
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "uid_slot %ld\n", m->uid_slot);
    if (m->reaper_pid > 0)
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "reaper %ld %llu\n", m->reaper_pid,
                               m->reaper_start);
    char subject_hex[2 * LOCAL_META_MAX_NAME + 1], profile_hex[2 * LOCAL_META_MAX_NAME + 1];
    if (m->has_principal && local_meta_hex(m->subject, subject_hex) &&
        local_meta_hex(m->profile, profile_hex))
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "principal %s\nprofile %s\n",
                               subject_hex, profile_hex);
    for (int i = 0; i < m->n_cg; i++)
        tl += (size_t)snprintf(text + tl, sizeof text - tl, "cgroup %s\n", m->cg[i]);
    int fd = open(tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot write %s: %s", tmp_path,
                             strerror(errno));
    bool ok = write(fd, text, tl) == (ssize_t)tl;
    close(fd);
    /* The second write (after the boot) exchanges the two names instead of renaming over the
     * first: a reader sees the old or the new file whole either way, but ext4 (a /run on the
     * root filesystem) flushes a file renamed over another at once (auto_da_alloc) and then
     * frees its blocks at destroy; a file exchanged and unlinked was never written out. */
    if (ok && renameat2(AT_FDCWD, tmp_path, AT_FDCWD, meta_path, RENAME_EXCHANGE) == 0) {
        unlink(tmp_path); /* the old content */
        return SBX_OK;
    }
    if (!ok || rename(tmp_path, meta_path) < 0) /* the first write, or no RENAME_EXCHANGE */
        return sbx_error_set(err, SBX_E_PROVISION, "cannot write %s", meta_path);
    return SBX_OK;
}

/* Long because it is the sandbox's create sequence in order (state dir, uid slot, cgroups, meta,
 * boot, the agent's connection, the egress proxy), each failure undoing the steps before it
 * through one cleanup path. */
static sbx_status local_create(void *state, const sbx_session_handle *session,
                               const sbx_principal *principal, const sbx_policy *policy,
                               sbx_sandbox **out, sbx_error *err)
{
    (void)session;
    local_provider *lp = state;
    *out = NULL;
    static const sbx_policy empty = SBX__V1__POLICY__INIT;
    if (!policy)
        policy = &empty;
    sbx_strlist un = {0};
    sbx_status st = local_check_policy(lp, policy, &un, err);
    if (st == SBX_OK && un.n && !policy->lenient) {
        char *list = sbx_strlist_join(&un, ", ");
        st = sbx_error_set(err, SBX_E_POLICY,
                           "the local provider cannot enforce: %s%s%s; relax the policy or set "
                           "lenient: true",
                           list ? list : "?", lp->cg == CG_NONE ? " -- " : "",
                           lp->cg == CG_NONE ? lp->cg_why : "");
        free(list);
    }
    sbx_strlist_clear(&un);
    /* The sandbox's init (its agent) is one of its processes, and while it boots so is its
     * launcher, which joins its cgroups before the init's clone: a bound of 1 leaves nothing
     * for a command (before, it failed at the first exec, or at the boot with a wrong reason). */
    if (st == SBX_OK && policy->pids == 1 && lp->cg != CG_NONE)
        st = sbx_error_set(err, SBX_E_POLICY,
                           "pids 1 leaves no process for a command: the sandbox's init (its "
                           "agent) is one of its processes; use 2 or more, or 0 for no limit");
    if (st != SBX_OK)
        return st;
    char id[19];
    new_id(id);
    local_sandbox *sb = open_sandbox(lp, id);
    if (!sb)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    char box[PATH_MAX + 8];
    snprintf(box, sizeof box, "%s/box", sb->state_dir);
    /* The launcher first: its exec overlaps the state dir, uid slot, cgroups and meta below,
     * which it waits for ("go", boot_finish) before it joins the cgroups or touches the box. */
    boot_cmd cmd;
    boot_argv(lp, id, box, policy, &cmd);
    boot_proc bp;
    st = boot_start(lp, cmd.argv, &bp, err);
    if (st != SBX_OK) {
        sandbox_free(sb);
        return st;
    }
    st = make_dir(sb->state_dir, 0700, err);
    if (st == SBX_OK)
        st = make_dir(box, 0700, err);
    meta m;
    memset(&m, 0, sizeof m);
    m.uid_slot = -1;
    /* whose it is, so a restarted engine counts it (local_list_held); a subject too long to
     * record cannot come through the engine (it bounds subjects to 256 bytes) */
    const char *subject = principal != NULL && principal->subject ? principal->subject : "";
    if (!lp->per_call && lp->profile[0] && strlen(subject) <= LOCAL_META_MAX_NAME) {
        m.has_principal = true;
        memcpy(m.subject, subject, strlen(subject) + 1);
        memcpy(m.profile, lp->profile, sizeof m.profile);
    }
    /* the slot after the state dir: a sweep frees a slot whose sandbox has no dir */
    if (st == SBX_OK && !lp->rootless)
        st = uid_slot_claim(lp, sb->state_dir, &m.uid_slot, err);
    /* The owner first, so a sweep can tell whose half-made sandbox this is, with the uid slot
     * and the cgroups before they exist: the destroy of a create whose owner was killed
     * removes what the meta names, and it named neither (the cgroups stayed on the host for
     * good, the slot until a sweep found it a minute old). */
    m.n_cg = plan_cgroups(lp, id, m.cg);
    if (st == SBX_OK)
        st = write_meta(lp, sb->state_dir, &m, err);
    uid_t host_uid = m.uid_slot >= 0 ? uid_of_slot(lp, m.uid_slot) : 0;
    if (st == SBX_OK && !lp->rootless &&
        (chown(sb->state_dir, host_uid, (gid_t)host_uid) < 0 ||
         chown(box, host_uid, (gid_t)host_uid) < 0))
        st = sbx_error_set(err, SBX_E_PROVISION, "cannot hand %s to the sandbox's uid %u: %s",
                           sb->state_dir, (unsigned)host_uid, strerror(errno));
    if (st == SBX_OK)
        st = setup_cgroups(lp, policy, host_uid, m.cg, m.n_cg, err);
    /* the meta file names the uid slot and the cgroups before anything runs in them, so a
     * failed create is still cleaned up by destroy, and an owner killed while the sandbox
     * boots leaves a meta the sweep can act on (its cgroups hold whatever the boot started) */
    if (st == SBX_OK)
        st = write_meta(lp, sb->state_dir, &m, err);
    long pid = boot_finish(&bp, st == SBX_OK, host_uid, m.uid_slot, lp->per_call,
                           st == SBX_OK ? err : NULL);
    if (st == SBX_OK && pid < 0) {
        st = err ? err->code : SBX_E_PROVISION;
        if (st == SBX_OK)
            st = SBX_E_PROVISION;
    } else if (st == SBX_OK) {
        m.pid = pid;
        m.start = sbx_proc_start_time(pid, NULL);
        /* its reaper, named in the meta only when it is tracked here (else the destroy waits and
         * removes, as for a session's sandbox, and the reaper finds nothing left to remove) */
        if (lp->per_call && reapers_add(lp, bp.pid)) {
            m.reaper_pid = bp.pid;
            m.reaper_start = sbx_proc_start_time(bp.pid, NULL);
        }
    }
    /* meta: written even after a failed boot when cgroups exist, for the cleanup below */
    sbx_status wst = write_meta(lp, sb->state_dir, &m, err);
    if (st == SBX_OK)
        st = wst;
    /* ALLOWLIST: the sandbox's namespace has only lo until the proxy is in it; a proxy that
     * cannot start fails the create (never a wider network) */
    if (st == SBX_OK &&
        policy->network_egress == SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST) {
        st = sbx_egress_start((pid_t)m.pid, policy->network_allow, policy->n_network_allow,
                              lp->egress_resolver, sb->state_dir, err);
        sb->egress = st == SBX_OK;
    }
    if (st == SBX_OK)
        st = sbx_agent_connect(sb->socket_path, sbx_provider_step_deadline(LOCAL_AGENT_MS),
                               &sb->conn, err);
    if (st == SBX_OK && lp->cg != CG_NONE) {
        if (lp->cg == CG_V1)
            snprintf(sb->oom_file, sizeof sb->oom_file, "%s/memory.oom_control", m.cg[0]);
        else
            snprintf(sb->oom_file, sizeof sb->oom_file, "%s/memory.events", m.cg[0]);
    }
    if (st != SBX_OK) {
        sbx_error keep;
        if (err)
            keep = *err;
        local_destroy(lp, id, NULL);
        /* cgroup dirs of a failed create that never got a meta file (those never made: ENOENT) */
        for (int i = 0; i < m.n_cg; i++)
            sbx_teardown_cgroup(m.cg[i]);
        sbx_teardown_state_dir(sb->state_dir);
        uid_slot_release(lp, m.uid_slot, sb->state_dir);
        if (err)
            *err = keep;
        sandbox_free(sb);
        return st;
    }
    *out = &sb->base;
    return SBX_OK;
}

/* ---- attach / destroy ------------------------------------------------------------------- */

static sbx_status local_attach(void *state, const char *sandbox_id, const sbx_principal *principal,
                               const sbx_policy *policy, sbx_sandbox **out, sbx_error *err)
{
    (void)principal;
    (void)policy;
    local_provider *lp = state;
    *out = NULL;
    if (!valid_id(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE,
                             "'%s' is not a local sandbox id (they look like l-0123456789abcdef)",
                             sandbox_id ? sandbox_id : "");
    local_sandbox *sb = open_sandbox(lp, sandbox_id);
    if (!sb)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    meta m;
    if (!meta_read(sb->state_dir, &m) || !meta_alive(&m)) {
        sandbox_free(sb);
        /* proved dead: what it left (state dir, cgroups) goes now, not at the next sweep */
        local_destroy(lp, sandbox_id, NULL);
        return sbx_error_set(err, SBX_E_GONE, "local sandbox %s no longer exists", sandbox_id);
    }
    sb->egress = sbx_egress_active(sb->state_dir);
    if (m.n_cg) {
        bool v1 = strstr(m.cg[0], "/memory/") != NULL;
        snprintf(sb->oom_file, sizeof sb->oom_file, "%s/%s", m.cg[0],
                 v1 ? "memory.oom_control" : "memory.events");
    }
    int64_t deadline = sbx_provider_step_deadline(LOCAL_AGENT_MS);
    sbx_status st = sbx_agent_connect(sb->socket_path, deadline, &sb->conn, err);
    if (st == SBX_OK)
        st = sbx_agent_ping(sb->conn, deadline, NULL, err);
    if (st != SBX_OK) {
        /* Gone only with proof: its PID 1 no longer exists. A live sandbox whose agent refuses,
         * is busy or stopped is unavailable (the engine must not recreate it beside itself). */
        bool alive = meta_read(sb->state_dir, &m) && meta_alive(&m);
        sandbox_free(sb);
        if (!alive) {
            local_destroy(lp, sandbox_id, NULL);
            return sbx_error_set(err, SBX_E_GONE, "local sandbox %s ended", sandbox_id);
        }
        char why[256];
        snprintf(why, sizeof why, "%.200s", err ? err->message : "");
        int64_t req = sbx_provider_deadline_ms();
        bool late = req > 0 && sbx_monotonic_ms() >= req;
        return sbx_error_set(err, late ? SBX_E_TIMEOUT : SBX_E_PROVISION,
                             "local sandbox %s is unavailable: its PID 1 (%ld) lives but the "
                             "agent did not answer%s (%s); it was not recreated",
                             sandbox_id, m.pid, late ? " before the deadline" : "", why);
    }
    *out = &sb->base;
    return SBX_OK;
}

/* ---- pause and resume: the cgroup freezer ---------------------------------------------------- */

/* Longest wait for every task of a sandbox to stop (v1 passes FREEZING while tasks in a
 * syscall reach a safe point). */
#define LOCAL_FREEZE_MS 10000
/* Rounds (of about 1 ms) between the brief thaws of a v1 freeze that does not complete, and
 * how long each thaw lasts. */
#define LOCAL_FREEZE_THAW_EVERY 50
#define LOCAL_FREEZE_THAW_US 10000

/* Freezes (or thaws) cgroup dir if it is a freezer: v1's freezer.state, v2's cgroup.freeze.
 * False when dir has neither (the other controllers of a v1 sandbox) or the write failed. */
static bool freezer_write(const char *dir, bool freeze)
{
    char path[LOCAL_MAX_CGROUP_DIR + 64];
    snprintf(path, sizeof path, "%s/freezer.state", dir);
    if (access(path, F_OK) == 0)
        return write_small(path, freeze ? "FROZEN" : "THAWED");
    snprintf(path, sizeof path, "%s/cgroup.freeze", dir);
    if (access(path, F_OK) == 0)
        return write_small(path, freeze ? "1" : "0");
    return false;
}

/* Whether cgroup dir (from a sandbox's meta) may be a freezer: on v1 only the one in the
 * freezer hierarchy, wherever in it the sandbox's creator had its own cgroup (not this
 * process's freezer_base: a CLI in one service may destroy what a worker in another made); on
 * v2 every cgroup; unknown here (no cgroups detected): any, probed by freezer_write. */
static bool under_freezer(const local_provider *lp, const char *dir)
{
    static const char v1_freezer[] = LOCAL_V1_FREEZER "/";
    return lp->cg != CG_V1 || strncmp(dir, v1_freezer, sizeof v1_freezer - 1) == 0;
}

/* 1 frozen, 0 running, -1 freezing (on its way), -2 not a freezer. */
static int freezer_state(const char *dir)
{
    char path[LOCAL_MAX_CGROUP_DIR + 64], buf[256];
    snprintf(path, sizeof path, "%s/freezer.state", dir);
    if (sbx_read_small(path, 0, buf, sizeof buf) >= 0)
        return strncmp(buf, "FROZEN", 6) == 0 ? 1 : strncmp(buf, "FREEZING", 8) == 0 ? -1 : 0;
    snprintf(path, sizeof path, "%s/cgroup.events", dir);
    if (sbx_read_small(path, 0, buf, sizeof buf) < 0)
        return -2;
    const char *f = strstr(buf, "frozen ");
    if (f != NULL && f[7] == '1')
        return 1;
    snprintf(path, sizeof path, "%s/cgroup.freeze", dir);
    return sbx_read_small(path, 0, buf, sizeof buf) >= 0 && buf[0] == '1' ? -1 : 0;
}

/* The sandbox's freezer cgroup from its meta (live sandboxes only): SBX_E_GONE without one
 * alive, SBX_E_CAPABILITY when it was made without a freezer. */
static sbx_status freezer_of(local_provider *lp, const char *sandbox_id, char *dir, size_t cap,
                             meta *m, sbx_error *err)
{
    char state_dir[LOCAL_MAX_RUNTIME_DIR + 32];
    if (!valid_id(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE, "no local sandbox %.80s", sandbox_id);
    state_paths(lp, sandbox_id, state_dir, sizeof state_dir);
    if (!meta_read(state_dir, m) || !meta_alive(m))
        return sbx_error_set(err, SBX_E_GONE, "local sandbox %s no longer exists", sandbox_id);
    for (int i = 0; i < m->n_cg; i++)
        if (freezer_state(m->cg[i]) != -2) {
            snprintf(dir, cap, "%s", m->cg[i]);
            return SBX_OK;
        }
    return sbx_error_set(err, SBX_E_CAPABILITY,
                         "local sandbox %s was created without a freezer cgroup, so it cannot "
                         "be paused; start a new session",
                         sandbox_id);
}

static sbx_status local_pause(void *state, const char *sandbox_id, sbx_error *err)
{
    char dir[LOCAL_MAX_CGROUP_DIR + 32];
    meta m;
    sbx_status st = freezer_of(state, sandbox_id, dir, sizeof dir, &m, err);
    if (st != SBX_OK)
        return st;
    if (!freezer_write(dir, true))
        return sbx_error_set(err, SBX_E_PROVISION, "cannot freeze cgroup %s: %s", dir,
                             strerror(errno));
    /* v1 can stay FREEZING for good while tasks keep appearing (a fork racing the freeze):
     * each write of FROZEN freezes the tasks there are now, so it is written again on every
     * round, and every LOCAL_FREEZE_THAW_EVERY rounds the cgroup is thawed for a moment so that
     * a fork caught half way completes (runc's freezer does the same). v2 freezes reliably. */
    int64_t deadline = sbx_provider_step_deadline(LOCAL_FREEZE_MS);
    for (int round = 1; freezer_state(dir) != 1; round++) {
        if (sbx_monotonic_ms() >= deadline) {
            freezer_write(dir, false); /* half frozen helps nobody */
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "local sandbox %s did not freeze in time (cgroup %s); it runs "
                                 "on",
                                 sandbox_id, dir);
        }
        usleep(1000);
        if (((const local_provider *)state)->cg == CG_V1) {
            if (round % LOCAL_FREEZE_THAW_EVERY == 0) {
                freezer_write(dir, false);
                usleep(LOCAL_FREEZE_THAW_US);
            }
            freezer_write(dir, true);
        }
    }
    return SBX_OK;
}

static sbx_status local_resume(void *state, const char *sandbox_id, bool *was_paused,
                               sbx_error *err)
{
    local_provider *lp = state;
    char dir[LOCAL_MAX_CGROUP_DIR + 32];
    meta m;
    *was_paused = false;
    sbx_status st = freezer_of(lp, sandbox_id, dir, sizeof dir, &m, err);
    if (st == SBX_E_CAPABILITY) { /* never paused, then */
        sbx_error_clear(err);
        return SBX_OK;
    }
    if (st != SBX_OK || freezer_state(dir) == 0)
        return st;
    *was_paused = true;
    /* A client connects before the thaw: the agent's idle TTL counted on while it was frozen,
     * and a waiting client is what keeps it from ending the sandbox the moment it wakes. The
     * connect completes in the kernel's backlog; the ping after the thaw renews the TTL. */
    char state_dir[LOCAL_MAX_RUNTIME_DIR + 32], sock[LOCAL_MAX_RUNTIME_DIR + 64];
    state_paths(lp, sandbox_id, state_dir, sizeof state_dir);
    snprintf(sock, sizeof sock, "%s/box/agent.sock", state_dir);
    sbx_agent_conn *conn = NULL;
    sbx_error ignored;
    int64_t deadline = sbx_provider_step_deadline(LOCAL_AGENT_MS);
    (void)sbx_agent_connect(sock, deadline, &conn, &ignored);
    if (!freezer_write(dir, false)) {
        sbx_agent_close(conn);
        return sbx_error_set(err, SBX_E_PROVISION, "cannot thaw cgroup %s: %s", dir,
                             strerror(errno));
    }
    if (conn != NULL)
        (void)sbx_agent_ping(conn, deadline, NULL, &ignored);
    sbx_agent_close(conn);
    return SBX_OK;
}

/* ExposePort: a relay into the sandbox's network namespace (providers/common/expose.h). */
static sbx_status local_expose(void *state, const char *sandbox_id, uint32_t port, char **url,
                               char **token, sbx_error *err)
{
    local_provider *lp = state;
    char dir[LOCAL_MAX_RUNTIME_DIR + 32], xdir[LOCAL_MAX_RUNTIME_DIR + 48];
    meta m;
    if (!valid_id(sandbox_id))
        return sbx_error_set(err, SBX_E_GONE, "no local sandbox %.80s", sandbox_id);
    state_paths(lp, sandbox_id, dir, sizeof dir);
    if (!meta_read(dir, &m) || !meta_alive(&m))
        return sbx_error_set(err, SBX_E_GONE, "local sandbox %s no longer exists", sandbox_id);
    snprintf(xdir, sizeof xdir, "%s/expose", lp->runtime_dir);
    if (mkdir(xdir, 0700) != 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_PROVISION, "cannot make %s: %s", xdir, strerror(errno));
    expose_paths(lp, sandbox_id, xdir, sizeof xdir);
    return sbx_expose_port(&lp->expose, xdir, (pid_t)m.pid, port, url, token, err);
}

static sbx_status local_destroy(void *state, const char *sandbox_id, sbx_error *err)
{
    local_provider *lp = state;
    if (!valid_id(sandbox_id))
        return SBX_OK; /* never ours: nothing to destroy (idempotent by contract) */
    (void)err;
    char dir[LOCAL_MAX_RUNTIME_DIR + 32];
    state_paths(lp, sandbox_id, dir, sizeof dir);
    meta m;
    bool have = meta_read(dir, &m);
    /* A per_call sandbox's reaper removes it once its PID 1 has ended: the kill is all that is
     * left to do here (agent/reap.c). Checked before the kill, which ends the reaper's wait. */
    bool reaped = have && reaper_alive(&m);
    /* a paused sandbox is thawed first: a frozen task does not die of SIGKILL until thawed
     * (on v1 only its cgroup in the freezer hierarchy: no probing of the other three) */
    for (int i = 0; have && i < m.n_cg; i++)
        if (under_freezer(lp, m.cg[i]))
            freezer_write(m.cg[i], false);
    char xdir[LOCAL_MAX_RUNTIME_DIR + 48];
    expose_paths(lp, sandbox_id, xdir, sizeof xdir);
    sbx_expose_close_all(xdir);
    /* the egress proxy ends with PID 1 anyway; stopped first, its files are out of the state dir
     * before a reaper removes it (this also covers a failed create) */
    sbx_egress_stop(dir);
    if (have && m.pid > 1) {
        /* A pidfd first, then the start-time check: the kill cannot hit a reused pid. */
        int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)m.pid, 0);
        char state_c = '?';
        unsigned long long start = sbx_proc_start_time(m.pid, &state_c);
        if (start && start == m.start) {
            /* SIGKILL to PID 1 of the pid namespace: the kernel kills every process in it,
             * and PID 1 only finishes exiting once all of them are gone */
            if (pidfd >= 0) {
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                struct pollfd pf = {pidfd, POLLIN, 0};
                if (!reaped)
                    poll(&pf, 1, LOCAL_DESTROY_WAIT_MS);
            } else {
                kill((pid_t)m.pid, SIGKILL);
            }
            if (!reaped)
                wait_gone(m.pid, m.start);
        }
        if (pidfd >= 0)
            close(pidfd);
    }
    reapers_collect(lp, 0);
    if (reaped)
        return SBX_OK;
    /* cgroups also when PID 1 never got into the meta (an owner killed during the boot):
     * removing them kills what the boot started in them */
    for (int i = 0; i < m.n_cg; i++)
        sbx_teardown_cgroup(m.cg[i]);
    if (access(dir, F_OK) == 0)
        sbx_teardown_state_dir(dir);
    /* last: the slot's ids are free for another sandbox only once nothing of this one runs
     * (read from the meta even when it names no PID 1: an owner killed during the boot) */
    uid_slot_release(lp, m.uid_slot, dir);
    return SBX_OK;
}

/* ---- operations ------------------------------------------------------------------------ */

static long long oom_kills(const local_sandbox *sb)
{
    char buf[1024];
    if (!sb->oom_file[0] || sbx_read_small(sb->oom_file, 0, buf, sizeof buf) < 0)
        return -1;
    char *p = strstr(buf, "oom_kill ");
    return p ? strtoll(p + 9, NULL, 10) : -1;
}

/* After a program: an OOM kill during it turns SIGNALED(9) into OOM; a dead agent is GONE. */
static sbx_status after_run(local_sandbox *sb, long long oom_before, sbx_status st,
                            sbx_result *result, sbx_error *err)
{
    long long oom_after = oom_kills(sb);
    if (oom_before >= 0 && oom_after > oom_before &&
        (result->outcome == SBX__V1__OUTCOME__OUTCOME_SIGNALED ||
         (result->outcome == SBX__V1__OUTCOME__OUTCOME_NONZERO && result->exit_code == 137)))
        result->outcome = SBX__V1__OUTCOME__OUTCOME_OOM;
    if (st == SBX_E_PROVISION) {
        meta m;
        if (!meta_read(sb->state_dir, &m) || !meta_alive(&m))
            return sbx_error_set(err, SBX_E_GONE, "local sandbox %s ended during the operation",
                                 sb->base.id);
    }
    return st;
}

static sbx_status ensure_conn(local_sandbox *sb, sbx_error *err)
{
    if (sb->conn) {
        /* a connection that failed (timeout mid-frame, agent restart) is replaced */
        return SBX_OK;
    }
    return sbx_agent_connect(sb->socket_path, sbx_provider_step_deadline(LOCAL_AGENT_MS), &sb->conn,
                             err);
}

/* ALLOWLIST: the refusals of one operation are the growth of the proxy's table during it. */
typedef struct {
    sbx_egress_table *t;
} egress_mark;

static void egress_before(local_sandbox *sb, egress_mark *m)
{
    m->t = sb->egress ? malloc(sizeof *m->t) : NULL;
    if (m->t)
        sbx_egress_table_read(sb->state_dir, m->t);
}

static void egress_after(local_sandbox *sb, egress_mark *m, sbx_result *result)
{
    if (!m->t)
        return;
    sbx_egress_table *now = malloc(sizeof *now);
    if (now) {
        sbx_egress_table_read(sb->state_dir, now);
        sbx_egress_report(m->t, now, result); /* out of memory: the refusals go unreported */
        free(now);
    }
    free(m->t);
    m->t = NULL;
}

static sbx_status local_run_command(sbx_sandbox *s, const Sbx__V1__RunCommand *op,
                                    const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    long long before = oom_kills(sb);
    egress_mark mark;
    egress_before(sb, &mark);
    st = sbx_agent_run_command(sb->conn, op, NULL, o, result, NULL, err);
    egress_after(sb, &mark, result);
    if (st != SBX_OK && st != SBX_E_TIMEOUT) {
        sbx_agent_close(sb->conn);
        sb->conn = NULL;
    }
    return after_run(sb, before, st, result, err);
}

static sbx_status local_run_code(sbx_sandbox *s, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                                 sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    const char *lang = op->language ? op->language : "";
    bool python = strcmp(lang, "python") == 0 || strcmp(lang, "python3") == 0;
    if (!python && strcmp(lang, "bash") != 0)
        return sbx_error_set(err, SBX_E_CAPABILITY,
                             "the local provider runs python and bash code, not '%s'", lang);
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    long long before = oom_kills(sb);
    egress_mark mark;
    egress_before(sb, &mark);
    st = sbx_agent_run_code(sb->conn, op, python, NULL, o, result, NULL, err);
    egress_after(sb, &mark, result);
    if (st != SBX_OK && st != SBX_E_TIMEOUT) {
        sbx_agent_close(sb->conn);
        sb->conn = NULL;
    }
    return after_run(sb, before, st, result, err);
}

static int64_t op_deadline(const sbx_exec_opts *o)
{
    return o && o->deadline_mono_ms ? o->deadline_mono_ms : 0;
}

static sbx_status local_attach_command(sbx_sandbox *s, const Sbx__V1__AttachCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    long long before = oom_kills(sb);
    st = sbx_agent_reattach(sb->conn, op->command_id, op->stdout_offset, op->stderr_offset, o,
                            result, err);
    if (st != SBX_OK) {
        sbx_agent_close(sb->conn);
        sb->conn = NULL;
    }
    return after_run(sb, before, st, result, err);
}

static sbx_status local_cancel_command(sbx_sandbox *s, const Sbx__V1__CancelCommand *op,
                                       const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st != SBX_OK)
        return st;
    st = sbx_agent_cancel(sb->conn, op->command_id, op->signal, op_deadline(o), result, err);
    if (st != SBX_OK) {
        sbx_agent_close(sb->conn);
        sb->conn = NULL;
    }
    return after_run(sb, -1, st, result, err);
}

static sbx_status file_op_end(local_sandbox *sb, sbx_status st)
{
    if (st == SBX_E_PROVISION || st == SBX_E_TIMEOUT) {
        sbx_agent_close(sb->conn);
        sb->conn = NULL;
    }
    return st;
}

static sbx_status local_write_file(sbx_sandbox *s, const Sbx__V1__WriteFile *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    (void)result;
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_write_file(sb->conn, op, NULL, op_deadline(o), NULL, err);
    return file_op_end(sb, st);
}

static sbx_status local_read_file(sbx_sandbox *s, const Sbx__V1__ReadFile *op,
                                  const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_read_file(sb->conn, op, op_deadline(o), result, err);
    return file_op_end(sb, st);
}

static sbx_status local_list_files(sbx_sandbox *s, const Sbx__V1__ListFiles *op,
                                   const sbx_exec_opts *o, sbx_result *result, sbx_error *err)
{
    local_sandbox *sb = (local_sandbox *)s;
    sbx_status st = ensure_conn(sb, err);
    if (st == SBX_OK)
        st = sbx_agent_list_files(sb->conn, op, op_deadline(o), result, err);
    return file_op_end(sb, st);
}

static void local_sandbox_close(sbx_sandbox *s)
{
    sandbox_free((local_sandbox *)s);
}

const sbx_provider_ops sbx_provider_local = {
    .name = "local",
    .summary = "Linux namespaces + seccomp + cgroups on this host, run by sbx-agent (OS_POLICY)",
    .traits = SBX_PROVIDER_PROVISIONS | SBX_PROVIDER_WRITE_OFFSET | SBX_PROVIDER_HOST_LOCAL,
    .options = local_options,
    .open = local_open,
    .close = local_close,
    .capabilities = local_capabilities,
    .check_policy = local_check_policy,
    .check_profile = local_check_profile,
    .shares_host_network = local_shares_host_network,
    .create = local_create,
    .attach = local_attach,
    .destroy = local_destroy,
    .run_code = local_run_code,
    .run_command = local_run_command,
    .install_packages = NULL,
    .write_file = local_write_file,
    .read_file = local_read_file,
    .list_files = local_list_files,
    .sandbox_close = local_sandbox_close,
    .sweep = local_sweep,
    .list_held = local_list_held,
    .attach_command = local_attach_command,
    .cancel_command = local_cancel_command,
    .pause = local_pause,
    .resume = local_resume,
    .expose = local_expose,
};

const char *sbx_local_state_dir(const sbx_sandbox *s)
{
    return s ? ((const local_sandbox *)s)->state_dir : NULL;
}

void sbx_local_settle(void *provider_state)
{
    reapers_collect(provider_state, LOCAL_DESTROY_WAIT_MS);
}

const char *sbx_local_runtime_dir(void *provider_state)
{
    return provider_state ? ((local_provider *)provider_state)->runtime_dir : NULL;
}
