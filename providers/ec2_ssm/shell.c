/* shell.c - the AWS-RunShellScript script builder (see shell.h). Every caller-supplied word is
 * single-quoted: inside '...' a POSIX shell interprets nothing, so the only character to handle
 * is the quote itself, closed, escaped and reopened ('\''). Names that cannot be quoted (the
 * left side of `export NAME=`, sudo's user argument) are validated against strict character sets
 * instead, so a hostile name is refused rather than escaped.
 */
#include "providers/ec2_ssm/shell.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool is_alpha_(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool ssm_valid_user_name(const char *user)
{
    if (user == NULL || !is_alpha_(user[0]))
        return false;
    size_t n = 0;
    for (const char *p = user; *p != '\0'; p++, n++) {
        if (n >= SSM_MAX_USER_NAME)
            return false;
        if (!is_alpha_(*p) && !is_digit(*p) && *p != '.' && *p != '-')
            return false;
    }
    return true;
}

/* The program part: quoted argv words, or shell text (nested as `interp -c '<text>'` when it
 * cannot stand as the script body itself). */
static void put_program(sbx_strbuf *b, const ssm_script_spec *s, bool nest_text)
{
    if (s->n_argv > 0) {
        for (size_t i = 0; i < s->n_argv; i++) {
            if (i > 0)
                sbx_strbuf_put(b, " ", 1);
            sbx_strbuf_shell_quote(b, s->argv[i], strlen(s->argv[i]));
        }
        return;
    }
    const char *interp = s->interpreter != NULL ? s->interpreter : "sh";
    if (nest_text || strcmp(interp, "sh") != 0) {
        sbx_strbuf_puts(b, interp);
        sbx_strbuf_puts(b, " -c ");
        sbx_strbuf_shell_quote(b, s->shell, strlen(s->shell));
    } else {
        sbx_strbuf_puts(b, s->shell);
    }
}

sbx_status ssm_build_script(const ssm_script_spec *s, char **out, sbx_error *err)
{
    *out = NULL;
    if (s->n_argv == 0 && (s->shell == NULL || s->shell[0] == '\0'))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: nothing to run (empty argv and shell); give argv or a "
                             "shell line");
    for (size_t i = 0; i < s->n_env; i++)
        if (!sbx_shell_name_ok(s->env_keys[i]))
            return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                                 "ec2_ssm: environment variable name '%.64s' is not a shell "
                                 "name ([A-Za-z_][A-Za-z0-9_]*); rename it",
                                 s->env_keys[i]);
    if (s->run_as != NULL && !ssm_valid_user_name(s->run_as))
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: run_as user name is not a plain user name "
                             "([A-Za-z_][A-Za-z0-9_.-]*, at most %d characters); it was refused, "
                             "not quoted",
                             SSM_MAX_USER_NAME);
    if (s->stdin_len > 0 && memchr(s->stdin_data, '\0', s->stdin_len) != NULL)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: stdin holds NUL bytes, which a shell script cannot carry; "
                             "pass binary input through a file instead");

    sbx_strbuf inner = {0};
    for (size_t i = 0; i < s->n_env; i++) {
        sbx_strbuf_puts(&inner, "export ");
        sbx_strbuf_puts(&inner, s->env_keys[i]);
        sbx_strbuf_puts(&inner, "=");
        const char *v = s->env_values[i] != NULL ? s->env_values[i] : "";
        sbx_strbuf_shell_quote(&inner, v, strlen(v));
        sbx_strbuf_puts(&inner, "\n");
    }
    bool has_stdin = s->stdin_len > 0;
    if (has_stdin) {
        sbx_strbuf_puts(&inner, "printf '%s' ");
        sbx_strbuf_shell_quote(&inner, (const char *)s->stdin_data, s->stdin_len);
        sbx_strbuf_puts(&inner, " | ");
    }
    put_program(&inner, s, has_stdin);
    sbx_strbuf_puts(&inner, "\n");

    sbx_strbuf script = {0};
    if (s->run_as != NULL) {
        /* -n: never prompt for a password (fail instead of hanging until the deadline);
         * --: end of sudo's options, so nothing after it is read as one. */
        sbx_strbuf_puts(&script, "sudo -n -u ");
        sbx_strbuf_shell_quote(&script, s->run_as, strlen(s->run_as));
        sbx_strbuf_puts(&script, " -- sh -c ");
        sbx_strbuf_shell_quote(&script, inner.p != NULL ? inner.p : "", inner.len);
        sbx_strbuf_puts(&script, "\n");
        sbx_strbuf_free(&inner);
    } else {
        script = inner;
    }
    if (script.oom) {
        sbx_strbuf_free(&script);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "ec2_ssm: out of memory");
    }
    if (script.len > SSM_MAX_SCRIPT_BYTES) {
        size_t n = script.len;
        sbx_strbuf_free(&script);
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "ec2_ssm: the command script is %zu bytes, above the %u bytes one "
                             "SSM SendCommand carries; send less (large inputs belong in files "
                             "on the instance)",
                             n, SSM_MAX_SCRIPT_BYTES);
    }
    *out = script.p;
    return SBX_OK;
}
