/* status.h - the one return type of every fallible sbx call, and the error value that
 * carries a message for a person.
 *
 * sbx_status values are identical to the contract's ErrorCode (execution.proto), so a code
 * crosses every boundary (engine, brokers, gRPC) unchanged. Library code never prints and
 * never exits: it returns a status and fills an optional sbx_error.
 */
#ifndef SBX_STATUS_H
#define SBX_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef enum sbx_status {
    SBX_OK = 0,                    /* no error */
    SBX_E_CONFIG = 1,              /* configuration is wrong */
    SBX_E_CAPABILITY = 2,          /* operation or language not offered by the provider */
    SBX_E_POLICY = 3,              /* policy cannot be enforced (strict) or is refused */
    SBX_E_TIMEOUT = 4,             /* a deadline passed */
    SBX_E_PROVISION = 5,           /* sandbox could not be created or reached */
    SBX_E_GONE = 6,                /* sandbox no longer exists */
    SBX_E_SESSION_NOT_FOUND = 7,   /* no such session */
    SBX_E_BROKER = 8,              /* broker or transport failure */
    SBX_E_PERMISSION_DENIED = 9,   /* caller may not do this */
    SBX_E_INVALID_ARGUMENT = 10,   /* malformed input */
    SBX_E_RESOURCE_EXHAUSTED = 11, /* queue, quota or size limit full */
    SBX_E_INTERNAL = 12,           /* a bug in sbx */
    SBX_E_UNAUTHENTICATED = 13,    /* caller could not be authenticated */
    SBX_E_WRONG_NODE = 14,         /* the session lives on another node (completion.node) */
} sbx_status;

/* Longest error message kept; longer messages are cut with "...". 2 KiB fits a list of
 * every accepted config key or every unenforceable policy dimension with room to spare. */
#define SBX_ERROR_MAX 2048

/* An error for a person: the code plus what failed, on what input, and what would fix it. */
typedef struct sbx_error {
    sbx_status code;
    char message[SBX_ERROR_MAX];
} sbx_error;

/* Sets *err (when err is not NULL) and returns code, so callers can
 * `return sbx_error_set(err, SBX_E_CONFIG, "...", ...);`. */
sbx_status sbx_error_set(sbx_error *err, sbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
sbx_status sbx_error_vset(sbx_error *err, sbx_status code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#ifdef __clang_analyzer__
/* For clang's static analyzer only (scripts/tidy.sh): these return their code, which it cannot
 * see from another file, so without this it takes `st = sbx_error_set(...)` as possibly SBX_OK
 * and follows the success path of every failure. core/status.c, which defines them, undoes it. */
#define sbx_error_set(err, code, ...) (sbx_error_set((err), (code), __VA_ARGS__), (code))
#define sbx_error_vset(err, code, fmt, ap) (sbx_error_vset((err), (code), (fmt), (ap)), (code))
#endif

/* Prepends context ("profile 'x': ") to an error already set. err may be NULL. */
void sbx_error_prefix(sbx_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears err to SBX_OK with an empty message. err may be NULL. */
void sbx_error_clear(sbx_error *err);

/* "CONFIG", "POLICY", ... (the ErrorCode name without its prefix); "UNKNOWN" otherwise. */
const char *sbx_status_name(sbx_status code);

/* Parses a name from sbx_status_name back; returns -1 when unknown. */
int sbx_status_from_name(const char *name);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
