/* sha256.c - SHA-256 and HMAC-SHA256 (see sha256.h): the FIPS 180-4 compression function over
 * 64-byte blocks, the message padded with 0x80, zeros and the bit length (big-endian), and
 * HMAC as H((K ^ opad) || H((K ^ ipad) || m)). Portable C, no tables but the round constants,
 * and on x86 CPUs with the SHA extensions the same compression through them (about ten times
 * faster: the worker digests every request it dedups, 4 MiB file chunks included, and the
 * portable loop was 70% of its CPU during a big `sbx cp`). */
#include "core/sha256.h"

#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define SHA256_X86 1
#endif

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

static void compress_portable(uint32_t state[8], const uint8_t block[SBX_SHA256_BLOCK])
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

#ifdef SHA256_X86
/* nblocks blocks through SHA-NI: the state is kept as ABEF and CDGH (the order sha256rnds2
 * wants), each 16-byte group of the message schedule is made by sha256msg1/msg2, and every
 * group of four rounds is two sha256rnds2 (two rounds each). */
__attribute__((target("sha,sse4.1,ssse3"))) static void
compress_shani(uint32_t state[8], const uint8_t *data, size_t nblocks)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i state1 = _mm_loadu_si128((const __m128i *)&state[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);               /* CDAB */
    state1 = _mm_shuffle_epi32(state1, 0x1B);         /* EFGH */
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); /* ABEF */
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);      /* CDGH */
    for (; nblocks > 0; nblocks--, data += SBX_SHA256_BLOCK) {
        __m128i abef = state0, cdgh = state1, w[4];
        for (int i = 0; i < 4; i++)
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * i)), bswap);
        for (int j = 0; j < 16; j++) {
            /* w[j & 3] holds W(j-4) .. w[(j + 3) & 3] W(j-1), four words each */
            __m128i cur = w[j & 3];
            if (j >= 4) {
                cur = _mm_add_epi32(_mm_sha256msg1_epu32(w[j & 3], w[(j + 1) & 3]),
                                    _mm_alignr_epi8(w[(j + 3) & 3], w[(j + 2) & 3], 4));
                cur = _mm_sha256msg2_epu32(cur, w[(j + 3) & 3]);
                w[j & 3] = cur;
            }
            __m128i msg = _mm_add_epi32(cur, _mm_loadu_si128((const __m128i *)&K[4 * j]));
            state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
            state0 = _mm_sha256rnds2_epu32(state0, state1, _mm_shuffle_epi32(msg, 0x0E));
        }
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);       /* FEBA */
    state1 = _mm_shuffle_epi32(state1, 0xB1);    /* DCHG */
    state0 = _mm_blend_epi16(tmp, state1, 0xF0); /* DCBA */
    state1 = _mm_alignr_epi8(state1, tmp, 8);    /* HGFE */
    _mm_storeu_si128((__m128i *)&state[0], state0);
    _mm_storeu_si128((__m128i *)&state[4], state1);
}

/* SHA-NI with the SSSE3/SSE4.1 shuffles it needs; asked of CPUID once (a VM may trap CPUID). */
static bool cpu_has_shani(void)
{
    static int known; /* 0 unknown, 1 no, 2 yes; racing first callers store the same value */
    int v = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (v == 0) {
        unsigned a, b, c, d;
        bool ok = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSSE3) && (c & bit_SSE4_1) &&
                  __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_SHA);
        v = ok ? 2 : 1;
        __atomic_store_n(&known, v, __ATOMIC_RELAXED);
    }
    return v == 2;
}
#endif

static bool force_portable;

void sbx_sha256_force_portable(bool on)
{
    __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED);
}

/* Compresses nblocks consecutive 64-byte blocks into state. */
static void compress(uint32_t state[8], const uint8_t *data, size_t nblocks)
{
#ifdef SHA256_X86
    if (!__atomic_load_n(&force_portable, __ATOMIC_RELAXED) && cpu_has_shani()) {
        compress_shani(state, data, nblocks);
        return;
    }
#endif
    for (; nblocks > 0; nblocks--, data += SBX_SHA256_BLOCK)
        compress_portable(state, data);
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
        compress(s->state, s->block, 1);
        s->used = 0;
    }
    size_t whole = len / SBX_SHA256_BLOCK;
    compress(s->state, p, whole);
    p += whole * SBX_SHA256_BLOCK;
    len -= whole * SBX_SHA256_BLOCK;
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
        compress(s->state, s->block, 1);
        s->used = 0;
    }
    memset(s->block + s->used, 0, SBX_SHA256_BLOCK - 8 - s->used);
    store_be32(s->block + 56, (uint32_t)(bits >> 32));
    store_be32(s->block + 60, (uint32_t)bits);
    compress(s->state, s->block, 1);
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
