/* agent.h - what the parts of sbx-agent share: limits, the serve configuration, and the
 * entry points of each file (serve loop, confinement of programs, in-root file access, the
 * local provider's launcher, the embedded python kernel).
 *
 * sbx-agent is a static, single-threaded program. Nothing on the protocol path allocates from
 * the heap: every buffer is a named static with a bound. This header must not be included by
 * host code (the host speaks to the agent only through the wire protocol).
 */
#ifndef SBX_AGENT_H
#define SBX_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/limits.h"

#define AGENT_VERSION "sbx-agent/1"

/* The protocol's limits are shared with the host client: core/limits.h. */
#define AGENT_MAX_FRAME SBX_AGENT_MAX_FRAME
#define AGENT_CHUNK SBX_AGENT_CHUNK
/* argv items and env entries of one exec (the kernel allows far more, but a model-written
 * request with more is a bug, and these bound the decode tables). */
#define AGENT_MAX_ARGV 1024
#define AGENT_MAX_ENV 256
/* Host connections served at once: every process of a host that uses one session holds one
 * (a worker, CLIs run in parallel, reattaching clients). A connection beyond these is never
 * closed: it waits in the listen backlog until a slot frees (closing it would read as a dead
 * sandbox to the host). 64 slots cost 64 static client records (about 70 KiB). */
#define AGENT_MAX_CLIENTS 64
/* Connections the kernel queues for us while every slot is taken (listen(2) backlog; the kernel
 * caps it at net.core.somaxconn). A host client waits there under its own deadline. */
#define AGENT_LISTEN_BACKLOG 1024
/* Commands tracked (running + finished, kept for reattach). The oldest finished command's
 * slot is reused first. */
#define AGENT_MAX_COMMANDS 16
/* Output journal kept per stream per command for reattach (AttachCommand): the last 256 KiB,
 * enough for the whole output of most commands an agent detaches (builds, servers, tests print
 * less), while 16 commands x 2 streams stay at 8 MiB at worst inside the sandbox's memory. An
 * attach from an offset older than what is kept is refused, naming the range still kept. */
#define AGENT_JOURNAL_BYTES (256u * 1024u)
#define AGENT_DEFAULT_OUTPUT_LIMIT SBX_AGENT_DEFAULT_OUTPUT_LIMIT
/* Code of one run_code call, accumulated over AgentCode chunks. */
#define AGENT_MAX_CODE (1024u * 1024u)
/* A host that starts a frame must finish it within this time, and must read what the agent
 * sends within it; otherwise the connection is dropped (the agent never waits forever). */
#define AGENT_IO_TIMEOUT_MS 10000
/* No request for this long (clients may stay connected, commands may run), an agent gives back
 * the pages of its per-request buffers: an idle sandbox costs the host less, and a burst of
 * requests never refaults them. */
#define AGENT_TRIM_IDLE_MS 1000
/* Paths handled by the file API. */
#define AGENT_MAX_PATH 1024
/* How long a kill repeats "list the command's cgroup, SIGKILL every task" until it is empty. A
 * task with SIGKILL pending cannot fork, so each round only meets tasks forked before the last
 * one and tasks still on their way out: a few rounds empty a fork chain on an idle host, and
 * on a host loaded twenty times over a killed task may wait that long for a CPU to die on. The
 * completion (TIMEOUT, OUTPUT_LIMIT) is reported only after, so nothing of it is left then. */
#define AGENT_CGROUP_KILL_MS 5000
/* Default idle TTL: without a connection or a running command for this long, the agent (PID 1)
 * exits and its whole sandbox is torn down by the kernel. */
#define AGENT_DEFAULT_IDLE_TTL_S (24 * 3600)
/* A one-shot box (--one-shot) whose host has not connected this long after the agent started
 * ends: its owner died between starting it and connecting (a worker killed mid-create), and
 * nothing else would end it before the idle TTL or a sweep. The providers connect within their
 * own start deadline (docker 30 s, kubernetes 15 s after the pod runs) or remove the box; this
 * is well past both. */
#define AGENT_FIRST_HOST_S 120
/* TCP connections that have not yet sent their credential (SBX_AGENT_AUTH_MAGIC + token). They
 * hold a client slot only this long (AGENT_IO_TIMEOUT_MS) and only this many at once (a new one
 * evicts the oldest), so a peer on the pod network that connects and says nothing cannot take
 * the slots of the host. */
#define AGENT_MAX_UNAUTH 8
#define AGENT_AUTH_LEN (SBX_AGENT_AUTH_MAGIC_LEN + SBX_AGENT_TOKEN_LEN)

typedef struct agent_config {
    const char *socket_path; /* default /.sbx/agent.sock */
    const char *workdir;     /* relative file paths and the default cwd; default /workspace */
    uid_t prog_uid;          /* default uid of programs */
    gid_t prog_gid;
    bool shared_uid;        /* programs may run as the agent's own uid (rootless, one uid mapped) */
    int64_t idle_ttl_s;     /* 0 = never */
    int ready_fd;           /* -1, or an fd that gets "OK\n" once the socket listens */
    uint64_t rlimit_nofile; /* RLIMIT_NOFILE of programs */
    int cgroup_fd; /* -1, or a directory fd of a cgroup delegated to the agent (the sandbox's
                    * pids cgroup on v1, its cgroup on v2): each command gets a child cgroup */
    const char *tcp_listen; /* NULL, or "IPV4:PORT": also serve TCP clients that authenticate
                               with `token` (a pod, reached by the host over the pod network) */
    uint8_t token[SBX_AGENT_TOKEN_LEN]; /* the sandbox's credential (tcp_listen only) */
    bool one_shot;      /* the sandbox serves one call (scope per_call): the spare forked at start
                         * is the only one, none is forked after a command */
    bool end_with_host; /* a one-shot whose host holds one connection for the sandbox's whole
                         * life (docker's and kubernetes' per_call sandboxes, `--one-shot`; the
                         * local launcher's one-shot has its reaper): once a host has connected and
                         * none is left, the agent exits, and with it (PID 1) every program:
                         * a host killed mid-command leaves nothing running (bwrap's
                         * --die-with-parent, through the socket) */
    /* end_with_host: 0, or the agent exits when no host connected within this many seconds of
     * its start (AGENT_FIRST_HOST_S) */
    int64_t first_host_s;
} agent_config;

/* serve.c: the PID 1 loop. Returns the process exit status. */
int agent_serve(const agent_config *cfg);

/* confine.c: applied in a forked child right before execve. Never returns on failure: writes
 * a line to fd 2 and _exit(126). */
void confine_program(uid_t uid, gid_t gid, bool keep_uid, uint64_t nofile);
/* The same in two steps: confine_prepare is what does not depend on the program (rlimits, an
 * empty bounding set, no ambient capabilities), so a spare process can do it before it knows
 * what it will run; confine_identity is the rest (session, OOM score, uid and gid, no
 * capabilities, no_new_privs, seccomp). confine_program = prepare + identity. */
void confine_prepare(uint64_t nofile);
/* Empties the agent's own bounding set, once at start: it limits only what an execve grants, so
 * the agent keeps its capabilities, and every fork (spares, programs) starts with none to drop
 * (41 capabilities, 82 prctl calls per command otherwise). Best effort: where a drop is refused,
 * confine_prepare drops what is left in each program as before. */
void confine_empty_bounding(void);
void confine_identity(uid_t uid, gid_t gid, bool keep_uid);
/* confine_identity for a process that loaded the seccomp filter already (confine_seccomp, right
 * after confine_prepare: a spare, while it waits): every step left is one the filter allows.
 * Refuses (exit 126) a process without a filter. */
void confine_identity_filtered(uid_t uid, gid_t gid, bool keep_uid);
/* Loads the seccomp filter (the last step of confine_program): the programs' policy, or, in a
 * fork of an agent that loaded its own (confine_seccomp_agent), only what a program adds to it
 * (seccomp_delta.h). */
int confine_seccomp(void);
/* Puts the agent itself under the agent's filter (the programs' policy with clone3, which
 * fork_into_cgroup uses), inherited by every process it forks from then on: defence in depth
 * for the agent, which reads what programs write, and each program's filter is then 4
 * instructions instead of ~750 (~20 us to load instead of ~250). 0, or -errno (a kernel or a
 * tool such as valgrind that refuses it; without CAP_SYS_ADMIN in its user namespace, as in a
 * container without it): then each program loads the whole policy, as before. After it the
 * agent can no longer mount, unshare, ptrace or use any syscall programs cannot. */
int confine_seccomp_agent(void);
/* The agent, once set up (its mounts, its socket's seal, its listeners): no_new_privs, and of
 * its capabilities only those it still uses (AGENT_KEPT_CAPS in confine.c: no CAP_SYS_ADMIN,
 * CAP_NET_ADMIN or CAP_NET_RAW, which open nf_tables, packet sockets and the rest of the
 * kernel's namespaced-root surface to whoever took the agent over). 0, or -errno. */
int confine_agent_caps(void);
/* Compiles the filter once, in the agent, before any fork (0 or -errno). */
int confine_seccomp_prepare(void);

/* files.c: in-root path resolution. Every call runs with the caller's fsuid already set. */
int files_init(const char *workdir);
/* The same with another root (tests and the fuzz harness run on the host, in a temp root);
 * may be called again, replacing the root. */
int files_init_root(const char *root, const char *workdir);
/* Tests: true makes files_open use the component walk even where openat2 exists. */
void files_force_walk(bool walk);
/* Opens path (absolute = from the sandbox root, relative = from workdir) with openat2
 * RESOLVE_IN_ROOT|RESOLVE_NO_MAGICLINKS, else a component walk that refuses symlinks.
 * Returns an fd or -errno. Refuses /proc, /sys and the agent's own directory. */
int files_open(const char *path, int flags, mode_t mode, bool mkdirs);
/* Fills why with a short text for the last refusal of files_open (static storage). */
const char *files_last_error(void);

/* boot_local.c: `sbx-agent boot ...`, the local provider's launcher. Returns exit status. */
int boot_local_main(int argc, char **argv);
/* What a one-shot sandbox leaves on the host (reap.c): its state dir, its uid slot registry (""
 * rootless: no slot) and slot, and its cgroup directories; the launcher's parent when it started
 * (the provider's process, the sandbox's owner) and the init's host pid (0: unknown). */
typedef struct agent_reap_plan {
    const char *state_dir;
    const char *slot_dir;
    long slot;
    const char *const *cgroup_dirs;
    int n_cgroups;
    pid_t owner;
    pid_t init;
} agent_reap_plan;
/* boot --reap, once the sandbox is reported ready and the caller is out of its cgroups: waits
 * for the sandbox's init (the caller's child, or inherited as a child subreaper), killing it if
 * the owner dies first, then removes what plan names and exits. Never returns. */
void agent_reap(const agent_reap_plan *plan) __attribute__((noreturn));
/* Forks (fork() semantics: the child gets 0) into the cgroup v2 whose directory is dir_fd,
 * born there (clone3's CLONE_INTO_CGROUP): no move, so no wait for the RCU grace period a write
 * to cgroup.procs waits for (measured on this kernel: 0.35-1.9 ms for the clone against 5-19 ms
 * for fork and write). -1 with errno when the kernel or the hierarchy refuses (v1: EBADF, after
 * most of a fork's work, so callers ask only on v2). The caller must be single-threaded. */
pid_t agent_fork_into_cgroup(int dir_fd);

/* kernel_python.c: the persistent python kernel, run with `python3 -c`. */
extern const char agent_python_kernel[];

#endif
