/* binding.h - session binding (DESIGN §4): the deployment secret and the HMAC-SHA256 that ties a
 * session handle to the principal that created it, so any worker holding the same secret can
 * verify ownership without a shared store. Private to core/.
 *
 * This module must not talk to providers or decide policy; it only loads the key, signs and
 * verifies.
 */
#ifndef SBX_CORE_BINDING_H
#define SBX_CORE_BINDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/contract.h"
#include "sbx/status.h"

/* Size of a binding: one SHA-256 output. */
#define SBX_BINDING_LEN 32

/* Bytes of random key written to a fresh secret file: 256 bits, the HMAC-SHA256 block-safe size
 * recommended by RFC 2104 (at least the output length). */
#define SBX_SECRET_NEW_LEN 32

/* Shortest secret accepted from an existing file: less than 128 bits is guessable offline. */
#define SBX_SECRET_MIN_LEN 16

/* Longest secret file read: one HMAC block is 64 bytes, longer keys are hashed anyway; 4 KiB
 * bounds the read of a file that is not what it claims to be. */
#define SBX_SECRET_MAX_LEN 4096

typedef struct sbx_binding_key sbx_binding_key;

/* Loads the secret from path, creating it (0600, parent directory 0700, 32 random bytes) when
 * absent. Refuses a file that is not a regular file, not owned by the effective user, or
 * readable/writable by group or others (PERMISSION_DENIED, naming the fix). */
sbx_status sbx_binding_key_load(const char *path, sbx_binding_key **out, sbx_error *err);
/* The same for a secret_file the configuration names: its directory must exist (a typo in the
 * path must not quietly give this one worker of a fleet a secret of its own), so a missing
 * directory is SBX_E_CONFIG naming sandbox.secret_file; only the file itself is created. */
sbx_status sbx_binding_key_load_configured(const char *path, sbx_binding_key **out, sbx_error *err);
/* A key from bytes (tests, embedding). */
sbx_status sbx_binding_key_from_bytes(const uint8_t *key, size_t len, sbx_binding_key **out,
                                      sbx_error *err);
void sbx_binding_key_free(sbx_binding_key *k);

/* HMAC-SHA256 over session_id|profile|provider|sandbox_id|subject (each field written as its
 * decimal length, ':', its bytes, then '|', so no field can bleed into the next), then, when
 * the handle holds the sandbox's policy, the word "policy" and each of its sandbox dimensions
 * the same way (a handle without one signs as before it had the field). Thread-safe. */
bool sbx_binding_sign(const sbx_binding_key *k, const sbx_session_handle *h, const char *subject,
                      uint8_t out[SBX_BINDING_LEN]);
/* Constant-time check of h->binding against the expected value for subject. */
bool sbx_binding_verify(const sbx_binding_key *k, const sbx_session_handle *h, const char *subject);
/* A key for one provider type derived from the deployment secret: HMAC over the fixed label
 * "sbx provider credential key" and the provider name. Every worker of a fleet derives the
 * same key, from which the provider derives per-sandbox credentials (the kubernetes agent's);
 * the deployment secret itself never reaches a provider. Thread-safe. */
bool sbx_binding_derive_provider_key(const sbx_binding_key *k, const char *provider,
                                     uint8_t out[SBX_BINDING_LEN]);
/* Signs h in place (h->binding replaced). False on allocation failure. */
bool sbx_binding_stamp(const sbx_binding_key *k, sbx_session_handle *h, const char *subject);

#endif
