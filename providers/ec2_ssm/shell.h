/* shell.h - builds the shell script the ec2_ssm provider sends as AWS-RunShellScript's
 * `commands` parameter: POSIX single-quote quoting of every caller-supplied word, validated
 * environment names and run_as user names, `sudo -n -u <user>` wrapping, and stdin fed through
 * printf. Private to providers/ec2_ssm (and its tests).
 *
 * The script runs as root on the instance (the SSM agent's identity), so this file is where
 * shell injection is stopped: a caller's argv element, env value, stdin or user name must never
 * be parsed by the remote shell as anything but one literal word. Raw shell text (RunCommand
 * `shell`, RunCode `code`) is the caller's own program and is passed as one quoted word to
 * `sh -c` / `bash -c` whenever it has to be nested. This file must not do I/O.
 */
#ifndef SBX_EC2_SSM_SHELL_H
#define SBX_EC2_SSM_SHELL_H

#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include "core/strbuf.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest run_as user name: useradd's limit on Linux (32, utmp's ut_user). */
#define SSM_MAX_USER_NAME 32
/* Longest script sent in one SendCommand. SSM refuses oversized documents and parameters with
 * MaxDocumentSizeExceeded; the exact parameter limit is not in the API model (cloud-apis.md
 * §3.1 guesses ~64 KB), so 32 KiB stays well below it with room for the JSON envelope. */
#define SSM_MAX_SCRIPT_BYTES (32u * 1024u)

/* A run_as user name the provider accepts: [A-Za-z_][A-Za-z0-9_.-]*, at most
 * SSM_MAX_USER_NAME bytes (no leading '-', so it can never be read as a sudo option). */
bool ssm_valid_user_name(const char *user);

/* What to run. Exactly one of argv (n_argv > 0) or shell text is used. */
typedef struct ssm_script_spec {
    char *const *argv; /* program and arguments; each becomes one quoted word */
    size_t n_argv;
    const char *shell;           /* shell text run by `interpreter -c` or directly */
    const char *interpreter;     /* "sh" or "bash" for shell text */
    const char *const *env_keys; /* exported before the program runs */
    const char *const *env_values;
    size_t n_env;
    const uint8_t *stdin_data; /* fed through printf; NULL/0 = none */
    size_t stdin_len;
    const char *run_as; /* validated user name for sudo -n -u; NULL = the agent (root) */
} ssm_script_spec;

/* Builds the script into a malloc'd string (*out). SBX_E_INVALID_ARGUMENT names the bad input
 * (an env name, a user name, NUL bytes in stdin, a script over SSM_MAX_SCRIPT_BYTES). */
sbx_status ssm_build_script(const ssm_script_spec *spec, char **out, sbx_error *err);

#ifdef __cplusplus
}
#endif
#endif
