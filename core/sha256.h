/* sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the session binding and the
 * request digest. Private to core/.
 *
 * Why not OpenSSL's (DESIGN names OpenSSL 3 for HMAC and SHA-256): its first EVP fetch loads
 * the configuration and the default provider, 1.5-2 ms of CPU, and libcrypto itself is a
 * shared object of ~5,000 relocations; every one-shot `sbx run` signs its session handle, so
 * that was a quarter of its CPU for 64 bytes of hashing. This one is a few hundred lines with
 * no state outside its structs, checked by tests/unit against the FIPS and RFC 4231 vectors
 * and against OpenSSL on random inputs. TLS, SigV4 and everything else stay on OpenSSL.
 *
 * This module must not read keys or files; it only hashes.
 */
#ifndef SBX_CORE_SHA256_H
#define SBX_CORE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBX_SHA256_LEN 32   /* bytes of a digest */
#define SBX_SHA256_BLOCK 64 /* bytes of one compression block (the HMAC block size) */

/* A running digest; plain data (copy it to fork a computation). */
typedef struct sbx_sha256 {
    uint32_t state[8];
    uint64_t bytes; /* total length so far */
    uint8_t block[SBX_SHA256_BLOCK];
    size_t used; /* bytes of block filled */
} sbx_sha256;

void sbx_sha256_init(sbx_sha256 *s);
/* For tests: true makes every digest use the portable compression function even where the CPU
 * has the SHA extensions (so both are checked on such a CPU); false restores the fast one. */
void sbx_sha256_force_portable(bool on);
void sbx_sha256_update(sbx_sha256 *s, const void *data, size_t len);
/* Writes the digest; s must be initialised again before reuse. */
void sbx_sha256_final(sbx_sha256 *s, uint8_t out[SBX_SHA256_LEN]);

/* A keyed HMAC-SHA256: the inner and outer digests after the key's pads. Plain data: key one
 * once, then copy it for each message (the copy is a read of the original, so many threads
 * may sign with one keyed template). */
typedef struct sbx_hmac_sha256 {
    sbx_sha256 inner, outer;
} sbx_hmac_sha256;

/* Keys h (a key longer than a block is hashed first, as RFC 2104 says). */
void sbx_hmac_sha256_init(sbx_hmac_sha256 *h, const uint8_t *key, size_t len);
void sbx_hmac_sha256_update(sbx_hmac_sha256 *h, const void *data, size_t len);
void sbx_hmac_sha256_final(sbx_hmac_sha256 *h, uint8_t out[SBX_SHA256_LEN]);

/* 1 when a and b (len bytes each) are equal, 0 otherwise, in time that depends only on len. */
int sbx_ct_equal(const void *a, const void *b, size_t len);

/* Overwrites len bytes at p with zeros in a way the compiler may not drop. */
void sbx_wipe(void *p, size_t len);

#endif
