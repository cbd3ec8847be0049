/* agent_client.h - the host side of the sbx-agent protocol (proto/sbx/v1/agent.proto): connects
 * to a box's agent socket and runs commands, code and file transfers with deadlines, output
 * streaming and reattach by command id. Provider-neutral: local and docker both use it.
 *
 * Every byte from the agent is hostile: frames are bounded by SBX_AGENT_MAX_FRAME, decoded
 * strictly with protobuf-c, offsets and sizes are checked, and every wait has a deadline.
 * This module must not know how a box is created or where its socket lives.
 *
 * Threading: one sbx_agent_conn is used by one thread at a time (the engine's per-session
 * lock serialises calls on a sandbox).
 */
#ifndef SBX_AGENT_CLIENT_H
#define SBX_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/limits.h"
#include "sbx/contract.h"
#include "sbx/provider.h"
#include "sbx/status.h"
#include "sbx/v1/agent.pb-c.h"

/* Frame size, chunk size and the default output limit are the agent's too: core/limits.h. */
#define SBX_AGENT_MAX_OUTPUT SBX_AGENT_DEFAULT_OUTPUT_LIMIT
/* Largest file read into one result: results travel in one message (16 MiB worker default,
 * with room for a bigger configured limit), so refuse more instead of exhausting memory. */
#define SBX_AGENT_MAX_READ (256ull * 1024u * 1024u)
/* Directory entries in one listing. */
#define SBX_AGENT_MAX_ENTRIES 100000u
/* How long past the execution deadline the client waits for the agent's exit report (the
 * agent kills the tree at the deadline itself; this covers a loaded machine). */
#define SBX_AGENT_DEADLINE_GRACE_MS 5000
/* Operations without a caller deadline (file transfers, ping) still end: 5 minutes. */
#define SBX_AGENT_DEFAULT_OP_MS (5 * 60 * 1000)

typedef struct sbx_agent_conn sbx_agent_conn;

/* What the agent says about itself. */
typedef struct sbx_agent_pong {
    char version[33];
    uint64_t uptime_ms;
    uint32_t running;
    uint32_t uid;
    bool shared_uid;
} sbx_agent_pong;

/* Who programs run as (0/0 = the agent's configured default). */
typedef struct sbx_agent_identity {
    uint32_t uid, gid;
} sbx_agent_identity;

/* Finds the sbx-agent binary: $SBX_AGENT, the build tree's, beside the running program,
 * then /usr/libexec/sbx/sbx-agent. Writes its path into out. */
sbx_status sbx_agent_binary_path(char *out, size_t cap, sbx_error *err);

/* Connects to the agent socket at path, waiting until deadline_mono_ms (0 = 5 s) for it to
 * accept. A missing socket or refused connection is SBX_E_GONE, which says only that nothing
 * listens: the caller proves the sandbox gone from its processes before it says so. A full
 * backlog until the deadline (a busy or stopped agent) is SBX_E_TIMEOUT. Free with
 * sbx_agent_close. */
sbx_status sbx_agent_connect(const char *path, int64_t deadline_mono_ms, sbx_agent_conn **out,
                             sbx_error *err);
void sbx_agent_close(sbx_agent_conn *c);
/* Connects to an agent that listens on TCP (`sbx-agent --listen`, a pod reached over the pod
 * network) at ipv4:port and authenticates with the sandbox's credential (SBX_AGENT_AUTH_MAGIC
 * + token). Refused or unreachable is SBX_E_GONE in the same sense as above (nothing answered:
 * the caller proves the sandbox gone from its own API); no connection by the deadline (0 = 5 s)
 * is SBX_E_TIMEOUT. A wrong credential shows only as the agent closing the connection on the
 * first request. Free with sbx_agent_close. */
sbx_status sbx_agent_connect_tcp(const char *ipv4, int port,
                                 const uint8_t token[SBX_AGENT_TOKEN_LEN], int64_t deadline_mono_ms,
                                 sbx_agent_conn **out, sbx_error *err);

sbx_status sbx_agent_ping(sbx_agent_conn *c, int64_t deadline_mono_ms, sbx_agent_pong *out,
                          sbx_error *err);

/* Runs a command (argv, or shell through /bin/sh -c). The result gets exit status, outcome,
 * output (bounded by o->output_limit_bytes), times and the agent's command id under
 * provider_data["command_id"]. *command_id (may be NULL) gets the id as soon as the agent
 * reports the start, so a caller that loses the connection can sbx_agent_reattach. On the
 * deadline: SBX_E_TIMEOUT with result outcome TIMED_OUT and the output so far. */
sbx_status sbx_agent_run_command(sbx_agent_conn *c, const Sbx__V1__RunCommand *op,
                                 const sbx_agent_identity *who, const sbx_exec_opts *o,
                                 sbx_result *result, uint64_t *command_id, sbx_error *err);

/* Runs code: stateful python goes to the sandbox's persistent kernel (result->value gets the
 * last expression's display); other languages run once through their interpreter. */
sbx_status sbx_agent_run_code(sbx_agent_conn *c, const Sbx__V1__RunCode *op, bool stateful,
                              const sbx_agent_identity *who, const sbx_exec_opts *o,
                              sbx_result *result, uint64_t *command_id, sbx_error *err);

/* Follows a command started earlier (maybe by another process, or detached: RunCommand.detach
 * makes run_command return once the agent reports the start, with result->command_id set),
 * replaying its journal from the given offsets; fills result like run_command (output from those
 * offsets on, result->stdout_offset/stderr_offset saying where it starts). An offset older than
 * the journal keeps is INVALID_ARGUMENT naming the range kept; an unknown id is GONE. A deadline
 * or a cancel stops following (SBX_E_TIMEOUT), never the command. */
sbx_status sbx_agent_reattach(sbx_agent_conn *c, uint64_t command_id, uint64_t stdout_offset,
                              uint64_t stderr_offset, const sbx_exec_opts *o, sbx_result *result,
                              sbx_error *err);

/* How long a cancel waits for the command to end after the signal: the agent empties a
 * command's cgroup within AGENT_CGROUP_KILL_MS (5 s); the rest covers a loaded machine. */
#define SBX_AGENT_CANCEL_WAIT_MS 15000

/* Stops a command started earlier: signo (0: SIGKILL, the whole tree) to it, then waits (until
 * deadline_mono_ms, at most SBX_AGENT_CANCEL_WAIT_MS) for its end, filled into result. A command
 * that ended already answers with its end; one that outlives a catchable signal is SBX_OK with
 * outcome UNSPECIFIED and a provider_data notice. Unknown id: GONE. */
sbx_status sbx_agent_cancel(sbx_agent_conn *c, uint64_t command_id, int signo,
                            int64_t deadline_mono_ms, sbx_result *result, sbx_error *err);

/* Sends a signal to a command's process group (SIGKILL kills the whole tree). */
sbx_status sbx_agent_signal(sbx_agent_conn *c, uint64_t command_id, int signo, sbx_error *err);

/* Writes a whole file in chunks. *size_out (may be NULL) gets the size the agent reports. */
sbx_status sbx_agent_write_file(sbx_agent_conn *c, const Sbx__V1__WriteFile *op,
                                const sbx_agent_identity *who, int64_t deadline_mono_ms,
                                uint64_t *size_out, sbx_error *err);

/* Reads a file into one result->files entry (content, size, mode). */
sbx_status sbx_agent_read_file(sbx_agent_conn *c, const Sbx__V1__ReadFile *op,
                               int64_t deadline_mono_ms, sbx_result *result, sbx_error *err);

/* Lists a directory into result->files (one entry per name, no content). */
sbx_status sbx_agent_list_files(sbx_agent_conn *c, const Sbx__V1__ListFiles *op,
                                int64_t deadline_mono_ms, sbx_result *result, sbx_error *err);

#endif
