/* serve_impl.h - what the files of the agent's serve loop share (folder-private: only agent's
 * own .c files include it): the state of commands, clients and the python kernel, the
 * request's decode tables, and the entry points each file offers the others.
 *
 *   serve.c     the PID 1 loop: listeners, clients (accept, auth, frames, dispatch), signals,
 *               reaping, the idle TTL; the event framing every handler answers through
 *   commands.c  the command table: output journals and subscribers, environments, starting a
 *               program, its end; the exec, stdin, signal and attach requests
 *   spawn.c     forking a confined program, and the spare forked ahead of the next command
 *   sweep.c     per-command cgroups and the kill sweeps that end a command's whole tree
 *   kernel.c    the driver of the persistent python kernel (kernel_python.c) for run_code;
 *               kernel_reply.c reads its replies (kernel_reply.h, the fuzz harness's too)
 *   file_ops.c  the file API's requests (write, read, list) on what files.c resolves
 *
 * Everything here is static storage with a bound (see agent.h): the state that more than one
 * file touches is named agent_* and defined once, in the file named beside it.
 */
#ifndef SBX_AGENT_SERVE_IMPL_H
#define SBX_AGENT_SERVE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include "agent.h"
#include "sbx/v1/agent.pb.h"

/* sbx.v1.ErrorCode values carried in AgentError.code. */
enum {
    EC_TIMEOUT = 4,
    EC_PROVISION = 5,
    EC_GONE = 6,
    EC_PERMISSION_DENIED = 9,
    EC_INVALID_ARGUMENT = 10,
    EC_RESOURCE_EXHAUSTED = 11,
    EC_INTERNAL = 12,
};

typedef struct journal {
    uint8_t buf[AGENT_JOURNAL_BYTES];
    uint64_t total; /* bytes ever produced on this stream; buf holds the newest */
} journal;

typedef struct command {
    bool used;
    bool running;   /* not yet finished */
    bool is_kernel; /* a call into the python kernel (pid/fds belong to the kernel) */
    uint64_t id;
    /* The clients following it: bit ci set means client ci gets its output and exit, echoing
     * sub_req[ci] (the request that started or attached it). Several clients may follow one
     * command (two attached terminals, a cancel waiting for the end); one that goes away only
     * leaves the set, the command runs on. */
    uint64_t subs;
    uint64_t sub_req[AGENT_MAX_CLIENTS];
    pid_t pid; /* also the process group and session id */
    int cg_fd; /* directory fd of the command's own cgroup, or -1 (none delegated) */
    char cg_name[32];
    int out_fd[2];  /* read ends of stdout, stderr (-1 when closed) */
    int in_fd;      /* write end of stdin, or -1 */
    uint64_t limit; /* per-stream output limit */
    bool truncated[2];
    bool timed_out, output_limited, exited;
    int wait_status;
    struct rusage ru;
    int64_t start_us, deadline_ms; /* deadline 0 = none */
    uint64_t finished_seq;         /* order of completion, for slot reuse */
    sbx_v1_AgentExit exit;         /* kept for reattach after the end */
    bool by_shutdown;              /* ended by the sandbox's own shutdown, not by itself */
    journal j[2];
} command;

typedef struct client {
    int fd; /* -1 when free */
    /* A TCP client is served only once it sent SBX_AGENT_AUTH_MAGIC + the token (authed); until
     * then its bytes go to auth[] and it is dropped AGENT_IO_TIMEOUT_MS after accept. Unix
     * clients are authed at accept (the peer check). */
    bool authed;
    uint8_t auth[AGENT_AUTH_LEN];
    uint32_t auth_len;
    int64_t since_ms;
    uint64_t accept_seq; /* order of acceptance: the oldest silent peer is evicted first */
    /* an in-progress chunked file write */
    int wfd;
    uint64_t wreq, woffset, wfailed_req;
    char wpath[AGENT_MAX_PATH];
    /* an in-progress chunked run_code (AgentCode.more): each client's chunks gather in a buffer
     * of its own (request ids are per connection: two clients' chunks must never meet) */
    uint64_t creq, crefused_req; /* its request; a refused one whose rest is dropped */
    uint8_t *cbuf;               /* malloc'd, at most AGENT_MAX_CODE bytes */
    size_t clen;
} client;

typedef struct kernel {
    pid_t pid; /* 0 when not running */
    int ctl_fd, rep_fd;
    int out_fd[2];
    int busy;         /* command index, or -1 */
    bool died_before; /* a previous kernel died: the next call reports a restart */
    int in_fd;        /* write end of its framed stdin (kernel_python.c), or -1 */
} kernel;

/* Bytes of one request's env as NAME=VALUE strings: bounded by the frame size. */
#define AGENT_ARENA_BYTES (AGENT_MAX_FRAME + AGENT_MAX_ENV * 2 + 4096)

/* serve.c */
/* Gives back the pages wholly inside [p, p + n) (MADV_DONTNEED): the next use faults in zeroes. */
void agent_drop_pages(void *p, size_t n);
/* Gives back the pages of every buffer one request uses and none keeps between requests (the
 * frames in and out, the decoded requests, the event, the env arena, the output chunk): an idle
 * agent (serve.c) and a spare, which never reads them (spawn.c), hold none of them. */
void agent_drop_scratch(void);
extern agent_config agent_cfg;
extern client agent_clients[AGENT_MAX_CLIENTS];
extern uid_t agent_uid;
extern bool agent_seccomp_ready; /* the filter compiled; programs may run */
extern int64_t agent_last_activity_ms, agent_shutdown_at_ms;
extern sbx_v1_AgentEvent agent_ev; /* the event being built, sent by send_event */
/* commands.c */
extern command agent_commands[AGENT_MAX_COMMANDS];
extern uint8_t agent_chunk[AGENT_CHUNK];
/* argv and env of the request being handled (request_reset empties them per frame) */
extern char *agent_argv_tab[AGENT_MAX_ARGV + 4];
extern size_t agent_argv_n;
extern char *agent_env_tab[AGENT_MAX_ENV + 8];
extern size_t agent_env_n;
/* kernel.c */
extern kernel agent_py;
/* sweep.c: getdents64 buffer of the /proc sweep and of file listings */
extern uint8_t agent_dents[16384];

static inline int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int64_t now_ms(void)
{
    return now_us() / 1000;
}

static inline uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* serve.c: events to the host */
void send_event(int ci);
void event_begin(uint64_t id, pb_size_t which);
void send_error(int ci, uint64_t id, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The contract's code for a file operation that failed with errno e: what the request or the
 * sandbox's state explains is INVALID_ARGUMENT or PERMISSION_DENIED, a limit is
 * RESOURCE_EXHAUSTED, and INTERNAL ("a bug in sbx") only what neither explains (EIO, EBADF). */
uint32_t errno_code(int e);
/* strerror(e), or words that say what to do where strerror's do not (ENXIO, ETXTBSY). */
const char *errno_words(int e);

/* commands.c */
void request_reset(void);
/* Gives back the pages of commands.c's per-request buffers (the env arena, the output chunk). */
void commands_drop_scratch(void);
/* Gives back the pages of the last run_code's buffer (agent_drop_scratch). */
void kernel_drop_scratch(void);
bool collect_env(const sbx_v1_AgentEnv *env, pb_size_t n);
void sub_del(command *c, int ci);
bool pump(command *c, int stream);
int running_count(void);
command *alloc_command(void);
void command_init(command *c, int ci, uint64_t req_id, uint64_t timeout_ms, uint64_t limit);
void finish(command *c, int exit_code_override, bool have_override, const char *value);
void build_env(char **tab, size_t *n);
const char *resolve_exec(const char *argv0, char **env, size_t n);
bool pick_uid(uint32_t uid, uint32_t gid, uid_t *u, gid_t *g, bool *keep);
void send_started(command *c, int ci, uint64_t req_id, bool detach);
void start_program(int ci, uint64_t req_id, char **argv, const char *cwd, uint32_t uid,
                   uint32_t gid, uint64_t timeout_ms, uint64_t limit, bool with_stdin, bool detach);
bool write_to_program(command *c, int fd, const uint8_t *p, size_t n);
void handle_exec(int ci, uint64_t id, sbx_v1_AgentExec *x);
void handle_stdin(int ci, uint64_t id, sbx_v1_AgentStdin *x);
void handle_signal(int ci, uint64_t id, sbx_v1_AgentSignal *x);
void handle_attach(int ci, uint64_t id, sbx_v1_AgentAttach *x);

/* spawn.c */
pid_t spawn(char **argv, char **env, size_t env_count, const char *cwd, uid_t u, gid_t g, bool keep,
            bool with_stdin, int *out_r, int *in_w, int extra3, int extra4, int cg_procs,
            int cg_dir);
void spare_init(void);
void spare_make(void);
bool spare_take(command *c, char **argv, char **env, size_t env_count, const char *cwd, uid_t u,
                gid_t g, bool keep, bool with_stdin);
void spare_drop(bool kill_it);
pid_t spare_pid(void);

/* sweep.c */
int cgroup_create(char name[32], int *dir_fd);
int cgroup_make(command *c);
pid_t fork_into_cgroup(int dir_fd);
void cgroup_release(command *c);
void kill_tree(command *c);
/* Sends sig to the process group of a command's first process (pid: a child of ours not yet
 * reaped), or to that process alone while it has not made the group yet: between its fork and
 * its setsid nothing else of it exists, and a kill(-pid) would fail with ESRCH and be lost. */
void signal_group(pid_t pid, int sig);

/* kernel.c */
void kernel_reset(void);
bool kernel_stdin(command *c, const uint8_t *p, size_t n);
void kernel_stdin_end(command *c);
/* Drops client ci's chunked run_code in progress, if any. */
void code_drop(client *cl);
void handle_code(int ci, uint64_t id, sbx_v1_AgentCode *x);
void kernel_reply(void);
void kernel_output(int s);

/* file_ops.c */
void handle_file_write(int ci, uint64_t id, sbx_v1_AgentFileWrite *x);
void handle_file_read(int ci, uint64_t id, sbx_v1_AgentFileRead *x);
void handle_file_list(int ci, uint64_t id, sbx_v1_AgentFileList *x);

#endif
