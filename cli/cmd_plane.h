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
 * The broker follows the config's flavor, except that `thread` becomes `embedded` (a one-shot
 * command gains nothing from a pool). */
int cli_plane_open(cli_plane *p, bool with_sessions);
void cli_plane_close(cli_plane *p);

/* A request for profile (NULL: default) as the CLI's principal. */
sbx_request *cli_plane_request(cli_plane *p, const char *profile);

/* Prints a completion (program output to stdout/stderr, notices and errors to stderr, or the
 * whole completion as JSON with --json) and returns the exit code. program=true (run, exec,
 * code): CLI_EXIT_TIMEOUT when the time limit passed, else the program's own status (128+N
 * for signal N) when it ran, else the table's code with CLI_EXIT_FAILED as CLI_EXIT_NOT_RUN.
 * program=false: the table's code. */
int cli_print_completion(const sbx_completion *c, bool program);

/* Destroys a one-shot session's sandbox (errors reported as a notice on stderr). */
void cli_plane_destroy_handle(cli_plane *p, const sbx_session_handle *h);

#endif
