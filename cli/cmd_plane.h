/* cmd_plane.h - the plumbing the executing commands (run, exec, code, cp, session, providers)
 * share: config + engine + broker + session store opened the same way, the CLI's principal,
 * and completions printed the same way (human or --json).
 */
#ifndef SBX_CLI_CMD_PLANE_H
#define SBX_CLI_CMD_PLANE_H

#include <stdbool.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"
#include "sbx/sessions.h"

typedef struct cli_plane {
    sbx_config *cfg;
    sbx_engine *engine; /* NULL for the remote flavor */
    sbx_broker *broker;
    sbx_sessions *sessions; /* NULL unless asked for */
    sbx_principal *principal;
} cli_plane;

/* Opens everything; on failure prints the error and returns its exit code (0 on success).
 * The broker follows the config's flavor (--broker, SBX_BROKER); the principal is --subject
 * (default user:$LOGNAME) with --principal-mode. */
int cli_plane_open(cli_plane *p, bool with_sessions);
/* For one-shot commands (run, code without a session): as cli_plane_open, and every profile
 * of the embedded engine becomes per_call, so the engine destroys the sandbox whatever happens
 * and, should this process be killed, the next sweep removes it (its owner is gone). */
int cli_plane_open_one_shot(cli_plane *p);
void cli_plane_close(cli_plane *p);

/* A request for profile (NULL: default) as the CLI's principal. */
sbx_request *cli_plane_request(cli_plane *p, const char *profile);
/* Makes a request built by contract.h's builders the CLI's: its principal and agent. NULL (r
 * freed) when r is NULL or memory ran out. */
sbx_request *cli_plane_own(cli_plane *p, sbx_request *r);

/* Largest stdin forwarded to a program: it travels whole inside one request, which must stay
 * under the worker's message limit (16 MiB) with room for the rest; bigger inputs go in with
 * `sbx cp`. */
#define CLI_STDIN_MAX (8u * 1024u * 1024u)

/* Live output of one execution: how much of each stream (stdout, stderr) was written. */
typedef struct cli_stream {
    uint64_t written[2];
    bool broken[2]; /* the reader went away (EPIPE) */
} cli_stream;

/* SIGINT/SIGTERM/SIGHUP cancel the running execution (the hooks' cancel flag) and let the
 * command clean up; a second signal ends sbx at once. SIGPIPE is ignored (EPIPE cancels). */
void cli_cancel_on_signals(void);
/* The signal that cancelled the execution (SIGPIPE for a closed stdout), or 0. */
int cli_cancelled_by(void);

/* Hooks that write output chunks to stdout/stderr as they arrive (none with --json) and carry
 * the cancel flag; s is reset and must outlive the execution. */
sbx_engine_hooks cli_stream_hooks(cli_stream *s);

/* Reads stdin into out (malloc'd, caller frees out->data) unless it is a terminal and force
 * is false. Returns 0, or CLI_EXIT_USAGE after printing why (larger than CLI_STDIN_MAX). */
int cli_read_stdin(const char *cmd, bool force, ProtobufCBinaryData *out);

/* Prints a completion (program output to stdout/stderr, notices and errors to stderr, or the
 * whole completion as JSON with --json) and returns the exit code. Output of an attach starts
 * at result.stdout_offset/stderr_offset: streamed counts in those stream offsets too.
 * (The rest as before:)
 * whole completion as JSON with --json) and returns the exit code. program=true (run, exec,
 * code): CLI_EXIT_TIMEOUT when the time limit passed, else the program's own status (128+N
 * for signal N) when it ran, else the table's code with CLI_EXIT_FAILED as CLI_EXIT_NOT_RUN.
 * program=false: the table's code. streamed (may be NULL): what live output already wrote. */
int cli_print_completion(const sbx_completion *c, bool program, const cli_stream *streamed);

/* Runs r (run, exec, code) in session (NULL: a fresh sandbox, destroyed afterwards whatever
 * happened) with live output, stopped by SIGINT/SIGTERM/SIGHUP (exit 128+N after the clean-up),
 * prints the completion and returns the exit code. */
int cli_plane_run_program(cli_plane *p, sbx_request *r, const char *session);

/* exec: starts run_command r detached in session, notes its id as the session's last command
 * and follows it (cli_plane_follow, a signal stopping it), so a client that is killed loses
 * nothing: `sbx attach SESSION` prints it all. A provider that cannot detach runs it attached
 * (cli_plane_run_program). Returns the exit code. */
int cli_plane_exec_followed(cli_plane *p, sbx_request *r, const char *session);

/* Follows command id of session from the offsets with live output and returns its exit code.
 * A signal (SIGINT, SIGTERM, SIGHUP) stops following; stop_on_signal also stops the command. */
int cli_plane_follow(cli_plane *p, const char *session, uint64_t id, uint64_t stdout_offset,
                     uint64_t stderr_offset, bool stop_on_signal);

/* The command `sbx exec` ran last in session (id or name); false when none is noted. */
bool cli_last_command(cli_plane *p, const char *session, uint64_t *id);
/* Drops that note (the session was removed). */
void cli_forget_last_command(const char *session_id);

/* Runs a detached run_command r in session and prints the command id (the completion with
 * --json); returns the exit code (0 once it started). */
int cli_plane_start_detached(cli_plane *p, sbx_request *r, const char *session);

/* Parses a command id operand of attach/kill; false after printing a usage error. */
bool cli_parse_command_id(const char *cmd, const char *text, uint64_t *out);

/* Destroys a one-shot session's sandbox (errors reported as a notice on stderr); true when it
 * was destroyed. */
bool cli_plane_destroy_handle(cli_plane *p, const sbx_session_handle *h);

#endif
