/* contract.h - helpers over the sbx.v1 protobuf-c messages: short type names, requests with
 * fresh task ids, completion builders, deep copy and free, and field setters.
 *
 * Ownership rule for every message built by hand: every pointer field (strings, bytes,
 * submessages, repeated arrays, map entries) points to its own malloc'd memory, so the whole
 * tree is released by one protobuf_c_message_free_unpacked(msg, NULL) -- which is what the
 * *_free helpers below call. Strings that are unset keep protobuf-c's shared empty default.
 * This file must not know about brokers, providers or the wire.
 */
#ifndef SBX_CONTRACT_H
#define SBX_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/status.h"
#include "sbx/v1/execution.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef Sbx__V1__ExecutionRequest sbx_request;
typedef Sbx__V1__ExecutionCompletion sbx_completion;
typedef Sbx__V1__Principal sbx_principal;
typedef Sbx__V1__Policy sbx_policy;
typedef Sbx__V1__SessionHandle sbx_session_handle;
typedef Sbx__V1__Result sbx_result;
typedef Sbx__V1__File sbx_file;
typedef Sbx__V1__Capabilities sbx_capabilities;
typedef Sbx__V1__Recording sbx_recording;

/* Length of a textual uuid v4 plus its NUL. */
#define SBX_UUID_LEN 37

/* Writes a random uuid v4 like "1b4e28ba-2fa1-4d2e-8c0a-...": its bytes come from getrandom, a
 * block at a time per thread; a fork()ed child draws its own, never its parent's. Thread-safe. */
void sbx_uuid_v4(char out[SBX_UUID_LEN]);

/* Wall clock in unix milliseconds, and a monotonic clock in ms / us (for deadlines). */
int64_t sbx_now_ms(void);
int64_t sbx_monotonic_ms(void);
int64_t sbx_monotonic_us(void);

/* A new, empty request with a fresh task_id and no op. Free with sbx_request_free. */
sbx_request *sbx_request_new(void);
void sbx_request_free(sbx_request *req);
/* Deep copy, lossless (unknown fields included). NULL on allocation failure. */
sbx_request *sbx_request_copy(const sbx_request *req);

/* Builders of the common requests, so no caller allocates protobuf-c submessages by hand.
 * Each is a new request (fresh task_id) for profile (NULL or "": the default profile); free it
 * with sbx_request_free. NULL when memory ran out. Nothing is validated here (the engine does
 * that when the request runs). */
sbx_request *sbx_request_shell(const char *profile, const char *line);
sbx_request *sbx_request_argv(const char *profile, const char *const *argv, size_t argc);
sbx_request *sbx_request_code(const char *profile, const char *language, const char *code);
/* mode 0 means 0644. */
sbx_request *sbx_request_write_file(const char *profile, const char *path, const void *data,
                                    size_t len, uint32_t mode);
sbx_request *sbx_request_read_file(const char *profile, const char *path);
sbx_request *sbx_request_list_files(const char *profile, const char *path);
/* Destroys session's sandbox (its profile is the request's). */
sbx_request *sbx_request_destroy(const sbx_session_handle *session);
/* The session operations: each acts on session's sandbox (its profile is the request's). */
sbx_request *sbx_request_pause(const sbx_session_handle *session);
sbx_request *sbx_request_resume(const sbx_session_handle *session);
/* Makes port (1..65535) of session's sandbox reachable; the completion's result has the URL. */
sbx_request *sbx_request_expose(const sbx_session_handle *session, uint32_t port);
/* Follows a detached command from the given byte offsets of its stdout and stderr. */
sbx_request *sbx_request_attach_command(const sbx_session_handle *session, uint64_t command_id,
                                        uint64_t stdout_offset, uint64_t stderr_offset);
/* Sends signal (0: SIGKILL) to a detached command. */
sbx_request *sbx_request_cancel_command(const sbx_session_handle *session, uint64_t command_id,
                                        int32_t signal);
/* Keeps session's workspace as the caller's snapshot name. */
sbx_request *sbx_request_snapshot(const sbx_session_handle *session, const char *name);
/* The caller's snapshots, and deleting one: no session, no sandbox (profile may be NULL). */
sbx_request *sbx_request_list_snapshots(const char *profile);
sbx_request *sbx_request_delete_snapshot(const char *profile, const char *name);
/* Who asks (a principal is created when the request has none). False on ENOMEM. */
bool sbx_request_set_principal(sbx_request *req, Sbx__V1__PrincipalMode mode, const char *subject);
/* The session to run in: a deep copy of session (NULL: none, a fresh sandbox). */
bool sbx_request_set_session(sbx_request *req, const sbx_session_handle *session);
/* Bytes fed to the program's standard input (run_command and run_code only; false otherwise). */
bool sbx_request_set_stdin(sbx_request *req, const void *data, size_t len);

/* A SUCCEEDED completion for task_id with an empty result. Free with sbx_completion_free. */
sbx_completion *sbx_completion_new(const char *task_id);
/* A completion for a machinery failure: status FAILED (TIMED_OUT for SBX_E_TIMEOUT),
 * error_code = code, error = the formatted text. */
sbx_completion *sbx_completion_fail(const char *task_id, sbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, from an sbx_error. */
sbx_completion *sbx_completion_from_error(const char *task_id, const sbx_error *err);
void sbx_completion_free(sbx_completion *c);
sbx_completion *sbx_completion_copy(const sbx_completion *c);

/* Appends a notice to c->notice, separated by "; " from any notice already there. */
void sbx_completion_add_notice(sbx_completion *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Deep copies of any message (pack + unpack); NULL on failure or when m is NULL. */
ProtobufCMessage *sbx_message_copy(const ProtobufCMessage *m);
void sbx_message_free(ProtobufCMessage *m);

/* Message constructors: malloc + init. NULL on allocation failure. */
sbx_result *sbx_result_new(void);
sbx_policy *sbx_policy_new(void);
sbx_principal *sbx_principal_new(void);
sbx_session_handle *sbx_session_handle_new(void);
sbx_file *sbx_file_new(void);

/* Field setters following the ownership rule above. Each frees the old value; value NULL
 * resets to the empty default. Return false on allocation failure (field then unchanged). */
bool sbx_set_string(char **field, const char *value);
bool sbx_set_bytes(ProtobufCBinaryData *field, const void *data, size_t len);
bool sbx_append_bytes(ProtobufCBinaryData *field, const void *data, size_t len);
bool sbx_add_string(size_t *n, char ***items, const char *value);
/* True when text[0..len) is UTF-8 without NUL bytes: what every string field must hold, or
 * Python/C++ clients refuse the whole message and sbx_message_decode refuses it too. */
bool sbx_text_valid(const void *text, size_t len);
/* Sets a string field from bytes that may not be text (file names, program output, kernel
 * values): every byte outside a well-formed UTF-8 sequence, and every NUL, becomes U+FFFD.
 * Same ownership and failure rule as sbx_set_string. */
bool sbx_set_text(char **field, const void *bytes, size_t len);
/* Adds a file entry to a result (takes ownership of f). */
bool sbx_result_add_file(sbx_result *r, sbx_file *f);
/* Sets key=value in result->provider_data (replacing an existing key). */
bool sbx_result_set_data(sbx_result *r, const char *key, const char *value);

/* Length of a request digest (SHA-256). */
#define SBX_REQUEST_DIGEST_LEN 32

/* The idempotency digest of a request: SHA-256 over its protobuf encoding with the transport
 * fields (deadline_ms) cleared, so a retry of the same request matches and a different request
 * under a reused task_id does not. Unknown fields count. false on allocation failure. */
bool sbx_request_digest(const sbx_request *req, uint8_t out[SBX_REQUEST_DIGEST_LEN]);
/* The subject of req's principal, "" when it has none: with task_id, the idempotency key. */
const char *sbx_request_subject(const sbx_request *req);

/* Name of the op in a request ("run_code", "run_command", ... or "none"). */
const char *sbx_request_op_name(const sbx_request *req);

/* Encodes / decodes a message with a length-bounded buffer. Decoding refuses inputs longer than
 * max_len (INVALID_ARGUMENT / RESOURCE_EXHAUSTED) and malformed bytes (INVALID_ARGUMENT). */
sbx_status sbx_request_decode(const uint8_t *buf, size_t len, size_t max_len, sbx_request **out,
                              sbx_error *err);
sbx_status sbx_completion_decode(const uint8_t *buf, size_t len, size_t max_len,
                                 sbx_completion **out, sbx_error *err);
/* The same for any message type (desc: e.g. &sbx__v1__agent_event__descriptor); the two above
 * call it. Strict as well as bounded: besides malformed bytes it refuses (INVALID_ARGUMENT) what
 * protobuf-c 1.4 accepts but reads unlike the protobuf spec -- field number 0 or above 2^29-1,
 * a oneof message member sent more than once (the spec merges the parts, protobuf-c keeps the
 * last), a string that is not UTF-8 or holds a NUL byte (cut short by protobuf-c) -- so every
 * reader of the same bytes sees the same message. *out: free with sbx_message_free; NULL on
 * failure. */
sbx_status sbx_message_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *buf,
                              size_t len, size_t max_len, ProtobufCMessage **out, sbx_error *err);
/* Packs into a new malloc'd buffer; *out_len gets its length. NULL on allocation failure. */
uint8_t *sbx_message_pack(const ProtobufCMessage *m, size_t *out_len);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
