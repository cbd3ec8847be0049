/* sha256.c - SHA-256 and HMAC-SHA256 (see sha256.h): the FIPS 180-4 compression function over
 * 64-byte blocks, the message padded with 0x80, zeros and the bit length (big-endian), and
 * HMAC as H((K ^ opad) || H((K ^ ipad) || m)). Portable C, no tables but the round constants. */
#include "core/sha256.h"

#include <string.h>

/* The first 32 bits of the fractional parts of the cube roots of the first 64 primes. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void compress(uint32_t state[8], const uint8_t block[SBX_SHA256_BLOCK])
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = load_be32(block + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
}

void sbx_sha256_init(sbx_sha256 *s)
{
    /* the first 32 bits of the fractional parts of the square roots of the first 8 primes */
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->state, iv, sizeof(iv));
    s->bytes = 0;
    s->used = 0;
}

void sbx_sha256_update(sbx_sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->bytes += len;
    if (s->used > 0) {
        size_t take = SBX_SHA256_BLOCK - s->used < len ? SBX_SHA256_BLOCK - s->used : len;
        memcpy(s->block + s->used, p, take);
        s->used += take;
        p += take;
        len -= take;
        if (s->used < SBX_SHA256_BLOCK)
            return;
        compress(s->state, s->block);
        s->used = 0;
    }
    for (; len >= SBX_SHA256_BLOCK; p += SBX_SHA256_BLOCK, len -= SBX_SHA256_BLOCK)
        compress(s->state, p);
    if (len > 0) {
        memcpy(s->block, p, len);
        s->used = len;
    }
}

void sbx_sha256_final(sbx_sha256 *s, uint8_t out[SBX_SHA256_LEN])
{
    uint64_t bits = s->bytes * 8;
    s->block[s->used++] = 0x80;
    if (s->used > SBX_SHA256_BLOCK - 8) { /* no room for the length: one more block */
        memset(s->block + s->used, 0, SBX_SHA256_BLOCK - s->used);
        compress(s->state, s->block);
        s->used = 0;
    }
    memset(s->block + s->used, 0, SBX_SHA256_BLOCK - 8 - s->used);
    store_be32(s->block + 56, (uint32_t)(bits >> 32));
    store_be32(s->block + 60, (uint32_t)bits);
    compress(s->state, s->block);
    for (int i = 0; i < 8; i++)
        store_be32(out + 4 * i, s->state[i]);
    sbx_wipe(s, sizeof(*s));
}

void sbx_hmac_sha256_init(sbx_hmac_sha256 *h, const uint8_t *key, size_t len)
{
    uint8_t k[SBX_SHA256_BLOCK] = {0};
    if (len > SBX_SHA256_BLOCK) {
        sbx_sha256 s;
        sbx_sha256_init(&s);
        sbx_sha256_update(&s, key, len);
        sbx_sha256_final(&s, k);
    } else if (len > 0) {
        memcpy(k, key, len);
    }
    uint8_t pad[SBX_SHA256_BLOCK];
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x36;
    sbx_sha256_init(&h->inner);
    sbx_sha256_update(&h->inner, pad, sizeof(pad));
    for (size_t i = 0; i < sizeof(pad); i++)
        pad[i] = k[i] ^ 0x5c;
    sbx_sha256_init(&h->outer);
    sbx_sha256_update(&h->outer, pad, sizeof(pad));
    sbx_wipe(k, sizeof(k));
    sbx_wipe(pad, sizeof(pad));
}

void sbx_hmac_sha256_update(sbx_hmac_sha256 *h, const void *data, size_t len)
{
    sbx_sha256_update(&h->inner, data, len);
}

void sbx_hmac_sha256_final(sbx_hmac_sha256 *h, uint8_t out[SBX_SHA256_LEN])
{
    uint8_t inner[SBX_SHA256_LEN];
    sbx_sha256_final(&h->inner, inner);
    sbx_sha256_update(&h->outer, inner, sizeof(inner));
    sbx_sha256_final(&h->outer, out);
    sbx_wipe(inner, sizeof(inner));
}

int sbx_ct_equal(const void *a, const void *b, size_t len)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= (uint8_t)(x[i] ^ y[i]);
    return diff == 0;
}

void sbx_wipe(void *p, size_t len)
{
    explicit_bzero(p, len);
}
