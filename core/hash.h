/* hash.h - the one string hash of libsbx's in-memory tables (core/table.h: the brokers' task stores
 * and session queues, the engine's session locks). Their keys are what callers choose (task ids,
 * session ids, principal subjects), so the hash is keyed: SipHash-1-3 (as redis uses for its
 * dicts) with a random 128-bit key drawn once per process, so nobody outside can precompute
 * keys that fall into one bucket and turn a lookup into a walk of every entry. Internal to
 * libsbx (not installed). */
#ifndef SBX_CORE_HASH_H
#define SBX_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The keyed hash of bytes p[0..n). */
uint64_t sbx_hash_bytes(const void *p, size_t n);
/* The keyed hash of a NUL-terminated string. */
uint64_t sbx_hash_str(const char *s);
/* The keyed hash of the pair (a, b): a, one NUL byte (which neither string holds), then b. */
uint64_t sbx_hash_pair(const char *a, const char *b);

/* Longest key sbx_scoped_key writes (with its NUL). */
#define SBX_SCOPED_KEY_MAX 1024
/* The key of name within subject's namespace, "<length of subject>:<subject>/<name>", into out
 * (SBX_SCOPED_KEY_MAX bytes; a longer one is cut, which can only merge names of one subject).
 * Tables keyed by a name the caller chooses (session ids: the CLI names its sessions
 * "default:<profile>") use it, so two principals' equal names never share an entry. */
const char *sbx_scoped_key(char out[SBX_SCOPED_KEY_MAX], const char *subject, const char *name);

#endif
