/* cli.h - what every `sbx` subcommand shares: the exit codes (the one documented table), the
 * global options (--config, --json, ...) parsed once by main.c, and small helpers to load the
 * config and report errors the same way everywhere.
 *
 * Adding a subcommand: write cli/cmd_<name>.c with `int cmd_<name>(int argc, char **argv)`
 * (argv[0] is "<name>") and its help text `const char cmd_<name>_help[]`, declare both below,
 * and add one line to the table in main.c. The command parses its arguments with cli_opt_next
 * (below), which also takes the global options, -h/--help and --version.
 * The CLI is the top of the data flow: it may print and exit; libsbx never does.
 */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <jansson.h>
#include <stdbool.h>

#include "sbx/config.h"
#include "sbx/status.h"

/* Exit codes of every sbx command. Commands that run a program (run, exec, code) exit with the
 * PROGRAM's status when it ran (128+N when killed by signal N) and use CLI_EXIT_NOT_RUN when
 * sbx itself could not run it; every other command uses the table. Keep CLI_EXIT_CODES_HELP in
 * step with the enum: `sbx --help` prints it. */
enum cli_exit {
    CLI_EXIT_OK = 0,         /* success */
    CLI_EXIT_FAILED = 1,     /* the operation failed (provider, broker, transport, internal) */
    CLI_EXIT_USAGE = 2,      /* bad command line */
    CLI_EXIT_CONFIG = 3,     /* configuration error (file, profile, unknown provider) */
    CLI_EXIT_REFUSED = 4,    /* refused: policy, capability, permission, authentication */
    CLI_EXIT_TIMEOUT = 5,    /* a deadline passed */
    CLI_EXIT_NOT_FOUND = 6,  /* no such session, or its sandbox is gone */
    CLI_EXIT_WRONG_NODE = 7, /* the session lives on another node (the message names it) */
    CLI_EXIT_NOT_RUN = 125,  /* run/exec/code: sbx could not run the program (details on stderr) */
};

#define CLI_EXIT_CODES_HELP                                                                        \
    "Exit codes:\n"                                                                                \
    "  0    success\n"                                                                             \
    "  1    the operation failed (provider, broker, transport, internal error)\n"                  \
    "  2    usage error (bad command line)\n"                                                      \
    "  3    configuration error (the message names file:line:column)\n"                            \
    "  4    refused by policy, capability, permission or authentication\n"                         \
    "  5    a deadline passed\n"                                                                   \
    "  6    no such session, or its sandbox is gone (attach/kill: or no such command)\n"           \
    "  7    the session lives on another node; the message names it (send it there, or pass\n"     \
    "       --recreate-elsewhere to start it over here, empty)\n"                                  \
    "  125  run/exec/code: sbx could not run the program (otherwise they exit with the\n"          \
    "       program's own status, 128+N when it was killed by signal N)\n"

/* The exit status of run/exec/code, for their help. */
#define CLI_PROGRAM_EXIT_HELP                                                                      \
    "Exit status: the program's own (128+N when it was killed by signal N), except:\n"             \
    "  2 usage error, 3 configuration error, 4 refused (policy, capability, permission),\n"        \
    "  5 the time limit passed (the program was stopped), 6 no such session or its sandbox\n"      \
    "  is gone, 125 sbx could not run it for another reason (the reason is on stderr).\n"

/* Global options, valid before the command and among its options (up to the program of
 * run/exec, or a `--`). */
typedef struct cli_globals {
    const char *config_path; /* --config FILE; NULL: $SBX_CONFIG, else the built-in default */
    bool json;               /* --json: machine-readable output on stdout */
    /* --broker embedded|thread|remote and the remote broker's options (cli_load_config applies
     * them over the file's broker block) */
    const char *broker;
    const char *endpoint;       /* --endpoint URL */
    const char *ca_file;        /* --ca-file FILE */
    const char *cert_file;      /* --cert-file FILE */
    const char *key_file;       /* --key-file FILE */
    const char *token_env;      /* --token-env NAME */
    const char *subject;        /* --subject S: the principal's subject (default user:$LOGNAME) */
    const char *principal_mode; /* --principal-mode agent|user (default: the profile's) */
} cli_globals;

extern cli_globals cli_global;

#define CLI_GLOBAL_OPTIONS_HELP                                                                    \
    "Global options (before the command or among its options; --opt=VALUE works too):\n"           \
    "  --config FILE   use this config file (default: $SBX_CONFIG, else the built-in\n"            \
    "                  default: one `local` profile named `default`, network denied)\n"            \
    "  --json          machine-readable output (JSON on stdout)\n"                                 \
    "  --broker B      embedded | thread | remote (default: the config's broker.flavor)\n"         \
    "  --endpoint URL  remote worker: https://host:port, or http://127.0.0.1:port (h2c)\n"         \
    "  --ca-file F     remote: CA bundle that signs the worker's certificate\n"                    \
    "  --cert-file F   remote: client certificate (mTLS); --key-file F its key\n"                  \
    "  --token-env N   remote: send the bearer token held in environment variable N\n"             \
    "                  (default: SBX_TOKEN when it is set)\n"                                      \
    "  --subject S     act as principal subject S (default: user:$LOGNAME)\n"                      \
    "  --principal-mode M  agent | user (default: the profile's identity mode)\n"                  \
    "Environment: SBX_CONFIG (config file), SBX_BROKER (as --broker), SBX_ENDPOINT (as\n"          \
    "  --endpoint), SBX_TOKEN (the bearer token for the remote broker).\n"                         \
    "  -h, --help      help (`sbx COMMAND --help` for a command)\n"                                \
    "  --version       print the version and exit\n"                                               \
    "Options end at `--`, and for run/exec at the first word of the program.\n"

/* ---- the one option parser of every command ------------------------------------------- */

/* One option of a command: --name VALUE, --name=VALUE, -s VALUE, -sVALUE, or a flag. */
typedef struct cli_option {
    const char *name; /* long name without the dashes ("profile") */
    char short_name;  /* 'l' for -l, or 0 */
    bool has_value;
} cli_option;

/* The parser's state. Set cmd, help, options (terminated by {NULL}) and stop_at_operand, then
 * call cli_opt_next until it returns CLI_OPT_END (operands are then operands[0..n_operands))
 * or CLI_OPT_EXIT (return exit_code: --help or --version was printed, or a usage error). The
 * global options are recognized and applied inside, so a command never sees them. */
typedef struct cli_parser {
    const char *cmd;           /* "run" (for messages); "" for sbx itself */
    const char *help;          /* printed on stdout for -h/--help */
    const cli_option *options; /* the command's own options; may be NULL */
    bool stop_at_operand;      /* the first operand ends the options (run/exec: the program) */
    /* out */
    const char *value; /* the value of the option just returned */
    char **operands;   /* after CLI_OPT_END */
    int n_operands;
    int exit_code; /* after CLI_OPT_EXIT */
    /* private */
    int argc, i, out;
    char **argv;
    const char *shorts; /* pending short flags of one "-ab" word */
} cli_parser;

#define CLI_OPT_END (-1)
#define CLI_OPT_EXIT (-2)

/* argv[0] is the command's name (skipped). Operands are compacted into argv in order. */
void cli_opt_init(cli_parser *p, int argc, char **argv);
/* The index in p->options of the next option, or CLI_OPT_END / CLI_OPT_EXIT. */
int cli_opt_next(cli_parser *p);
/* Parses a positive integer option value; false after a usage error naming the option. */
bool cli_opt_positive(cli_parser *p, const char *name, long long *out);

/* The exit code for a status (see the table). */
int cli_exit_code(sbx_status st);

/* A table exit code as run/exec/code return it: CLI_EXIT_FAILED becomes CLI_EXIT_NOT_RUN. */
int cli_program_exit_code(int table_code);

/* Loads the config named by `file` (if not NULL), else --config, else $SBX_CONFIG, else the
 * built-in default. */
sbx_status cli_load_config(const char *file, sbx_config **out, sbx_error *err);

/* Prints "sbx: <what>: <message>" to stderr (with --json also {"error":...} on stdout, or a
 * FAILED ExecutionCompletion after cli_errors_as_completions) and returns the exit code for
 * err->code. */
int cli_report_error(const char *what, const sbx_error *err);

/* run/exec/code: with --json, errors print as a FAILED ExecutionCompletion (canonical JSON),
 * so stdout always holds one document of the same shape. */
void cli_errors_as_completions(void);

/* Dumps j (indented) and a newline on stdout and frees it; NULL (ENOMEM) prints an error on
 * stderr. */
void cli_print_json(json_t *j);

/* Prints "sbx <cmd>: <message>" and a pointer to `sbx <cmd> --help`; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The action word's name among names (NULL-terminated: the command's own spelling of each of
 * its actions), or NULL when it is none of them. The usual synonyms are accepted whichever a
 * command calls its action (create/new, ls/list, rm/remove/delete), as docker's CLI does: a
 * user who learned `snapshot create` types `session create`. */
const char *cli_action(const char *word, const char *const *names);

/* Prints "sbx VERSION" (or {"version":...} with --json). */
void cli_print_version(void);

/* ---- subcommands (one file each: cli/cmd_<name>.c) ------------------------------------ */

int cmd_version(int argc, char **argv);
extern const char cmd_version_help[];
int cmd_config(int argc, char **argv);
extern const char cmd_config_help[];
int cmd_replay(int argc, char **argv);
extern const char cmd_replay_help[];
int cmd_providers(int argc, char **argv);
extern const char cmd_providers_help[];
int cmd_run(int argc, char **argv);
extern const char cmd_run_help[];
int cmd_code(int argc, char **argv);
extern const char cmd_code_help[];
int cmd_session(int argc, char **argv);
extern const char cmd_session_help[];
int cmd_exec(int argc, char **argv);
extern const char cmd_exec_help[];
int cmd_attach(int argc, char **argv);
extern const char cmd_attach_help[];
int cmd_kill(int argc, char **argv);
extern const char cmd_kill_help[];
int cmd_pause(int argc, char **argv);
extern const char cmd_pause_help[];
int cmd_expose(int argc, char **argv);
extern const char cmd_expose_help[];
int cmd_resume(int argc, char **argv);
extern const char cmd_resume_help[];
int cmd_snapshot(int argc, char **argv);
extern const char cmd_snapshot_help[];
int cmd_cp(int argc, char **argv);
extern const char cmd_cp_help[];
int cmd_worker(int argc, char **argv);
extern const char cmd_worker_help[];

#endif
