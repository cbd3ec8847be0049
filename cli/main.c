/* main.c - the `sbx` command: parses the global options and dispatches to one subcommand from
 * the table below (one file each, cli/cmd_<name>.c). Adding a command is one line here plus
 * its declaration in cli.h. main.c must not hold any command's logic.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
    const char *summary;               /* one line for `sbx --help` */
    const char *help;                  /* full text for `sbx NAME --help` */
} cli_command;

static const cli_command commands[] = {
    {"config", cmd_config, "check the configuration and print the resolved profiles",
     cmd_config_help},
    {"replay", cmd_replay, "re-run a recording and report completions that differ",
     cmd_replay_help},
    {"providers", cmd_providers, "list profiles and their providers' capabilities",
     cmd_providers_help},
    {"run", cmd_run, "run a command in a fresh sandbox (exit status of the program)", cmd_run_help},
    {"code", cmd_code, "run source code (-l python, bash, ...)", cmd_code_help},
    {"session", cmd_session, "create, list and remove sessions", cmd_session_help},
    {"exec", cmd_exec, "run a command in a session (--detach: in the background)", cmd_exec_help},
    {"attach", cmd_attach, "follow a detached command: its output so far, then live",
     cmd_attach_help},
    {"kill", cmd_kill, "stop a detached command", cmd_kill_help},
    {"pause", cmd_pause, "freeze a session's sandbox (kept, no CPU)", cmd_pause_help},
    {"resume", cmd_resume, "thaw a paused session's sandbox", cmd_resume_help},
    {"expose", cmd_expose, "make a port of a session's sandbox reachable (prints the URL)",
     cmd_expose_help},
    {"snapshot", cmd_snapshot, "keep a session's workspace by name; list, delete",
     cmd_snapshot_help},
    {"cp", cmd_cp, "copy a file between the host and a session", cmd_cp_help},
    {"version", cmd_version, "print the version and the providers built in", cmd_version_help},
    {"worker", cmd_worker, "serve executions over gRPC (sbx-worker)", cmd_worker_help},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* The text of `sbx --help`. */
static const char *usage_text(void)
{
    static char buf[8192];
    size_t off = (size_t)snprintf(buf, sizeof(buf),
                                  "sbx - run code and commands inside sandboxes, for AI agents\n\n"
                                  "Usage: sbx [GLOBAL OPTIONS] COMMAND [ARGS...]\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS && off < sizeof(buf); i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "  %-10s %s\n", commands[i].name,
                                commands[i].summary);
    if (off < sizeof(buf))
        snprintf(buf + off, sizeof(buf) - off, "\n%s\n%s", CLI_GLOBAL_OPTIONS_HELP,
                 CLI_EXIT_CODES_HELP);
    return buf;
}

/* Buffers of a big transfer: `sbx cp` moves 4 MiB chunks, and each one's request, completion
 * and their copies are megabytes that are freed as the next chunk comes. glibc serves blocks
 * that large with fresh mmaps, so every page of every chunk faulted on first touch (on the
 * VMs this was measured on, most of a copy's time: 256 MiB down in 3.6 s, 1.3 s without).
 * Below this size blocks come from the heap and are reused. */
#define CLI_MMAP_THRESHOLD (32 * 1024 * 1024)
/* ...and the heap keeps this much free memory instead of handing it back after each chunk
 * (the command is short-lived: it goes back to the system at exit). */
#define CLI_TRIM_THRESHOLD (256 * 1024 * 1024)
#define CLI_TOP_PAD (64 * 1024 * 1024)

int main(int argc, char **argv)
{
    mallopt(M_MMAP_THRESHOLD, CLI_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, CLI_TRIM_THRESHOLD);
    mallopt(M_TOP_PAD, CLI_TOP_PAD);
    cli_parser p = {.cmd = "", .help = usage_text(), .stop_at_operand = true};
    cli_opt_init(&p, argc, argv);
    if (cli_opt_next(&p) == CLI_OPT_EXIT)
        return p.exit_code;
    if (p.n_operands == 0) {
        fputs(usage_text(), stderr);
        return CLI_EXIT_USAGE;
    }
    char **args = p.operands;
    int n = p.n_operands;
    if (strcmp(args[0], "help") == 0) {
        if (n > 1)
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, args[1]) == 0) {
                    fputs(commands[i].help, stdout);
                    return CLI_EXIT_OK;
                }
        fputs(usage_text(), stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, args[0]) == 0)
            return commands[i].run(n, args);
    fprintf(stderr, "sbx: unknown command '%s'; the commands are:", args[0]);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, " (see sbx --help)\n");
    return CLI_EXIT_USAGE;
}
