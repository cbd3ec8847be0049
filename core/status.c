/* status.c - sbx_status names and the sbx_error value (see include/sbx/status.h).
 * Must not allocate: errors are reported even when memory is exhausted. */
#include "sbx/status.h"
#undef sbx_error_set /* the analyzer's macros (status.h): the functions are defined here */
#undef sbx_error_vset

#include <stdio.h>
#include <string.h>

static const char *const status_names[] = {
    [SBX_OK] = "NONE",
    [SBX_E_CONFIG] = "CONFIG",
    [SBX_E_CAPABILITY] = "CAPABILITY",
    [SBX_E_POLICY] = "POLICY",
    [SBX_E_TIMEOUT] = "TIMEOUT",
    [SBX_E_PROVISION] = "PROVISION",
    [SBX_E_GONE] = "GONE",
    [SBX_E_SESSION_NOT_FOUND] = "SESSION_NOT_FOUND",
    [SBX_E_BROKER] = "BROKER",
    [SBX_E_PERMISSION_DENIED] = "PERMISSION_DENIED",
    [SBX_E_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
    [SBX_E_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
    [SBX_E_INTERNAL] = "INTERNAL",
    [SBX_E_UNAUTHENTICATED] = "UNAUTHENTICATED",
    [SBX_E_WRONG_NODE] = "WRONG_NODE",
};

#define N_STATUS (sizeof(status_names) / sizeof(status_names[0]))

const char *sbx_status_name(sbx_status code)
{
    if ((unsigned)code < N_STATUS && status_names[code] != NULL)
        return status_names[code];
    return "UNKNOWN";
}

int sbx_status_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t i = 0; i < N_STATUS; i++)
        if (status_names[i] != NULL && strcmp(status_names[i], name) == 0)
            return (int)i;
    return -1;
}

/* Formats into out (SBX_ERROR_MAX bytes); a text that does not fit ends with "...". */
static void format_cut(char out[SBX_ERROR_MAX], const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void format_cut(char out[SBX_ERROR_MAX], const char *fmt, va_list ap)
{
    int n = vsnprintf(out, SBX_ERROR_MAX, fmt, ap);
    if (n < 0)
        snprintf(out, SBX_ERROR_MAX, "(unformattable error message)");
    else if (n >= SBX_ERROR_MAX)
        memcpy(out + SBX_ERROR_MAX - 4, "...", 4);
}

sbx_status sbx_error_vset(sbx_error *err, sbx_status code, const char *fmt, va_list ap)
{
    if (err == NULL)
        return code;
    /* Formatted aside first: callers wrap an error with its own text
     * (sbx_error_set(err, c, "loading x: %s", err->message)), and vsnprintf into a buffer that
     * is also one of its arguments is undefined behaviour. */
    char text[SBX_ERROR_MAX];
    format_cut(text, fmt, ap);
    err->code = code;
    memcpy(err->message, text, sizeof(err->message));
    return code;
}

sbx_status sbx_error_set(sbx_error *err, sbx_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sbx_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void sbx_error_prefix(sbx_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return;
    char prefix[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    format_cut(prefix, fmt, ap);
    va_end(ap);
    char joined[SBX_ERROR_MAX];
    int n = snprintf(joined, sizeof(joined), "%s%s", prefix, err->message);
    if (n >= (int)sizeof(joined))
        memcpy(joined + sizeof(joined) - 4, "...", 4);
    memcpy(err->message, joined, sizeof(err->message));
}

void sbx_error_clear(sbx_error *err)
{
    if (err == NULL)
        return;
    err->code = SBX_OK;
    err->message[0] = '\0';
}
