/* hash.c - SipHash-1-3 with a per-process random key (see hash.h). The reference algorithm
 * (Aumasson and Bernstein), incremental so a pair of strings is hashed without copying them. */
#include "core/hash.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t key0, key1;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
    uint64_t k[2];
    if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k) {
        /* no entropy source (a very early boot): still unknown to a remote peer */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
        k[1] = (uint64_t)ts.tv_sec * 0xc2b2ae3d27d4eb4full ^ (uint64_t)(uintptr_t)&ts;
    }
    key0 = k[0];
    key1 = k[1];
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

typedef struct sip {
    uint64_t v0, v1, v2, v3;
    uint64_t tail; /* bytes not yet in a whole 8-byte word, little-endian */
    size_t len;    /* bytes taken in so far */
} sip;

static void sip_round(sip *s)
{
    s->v0 += s->v1;
    s->v1 = ROTL(s->v1, 13);
    s->v1 ^= s->v0;
    s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3;
    s->v3 = ROTL(s->v3, 16);
    s->v3 ^= s->v2;
    s->v0 += s->v3;
    s->v3 = ROTL(s->v3, 21);
    s->v3 ^= s->v0;
    s->v2 += s->v1;
    s->v1 = ROTL(s->v1, 17);
    s->v1 ^= s->v2;
    s->v2 = ROTL(s->v2, 32);
}

static void sip_init(sip *s)
{
    pthread_once(&key_once, key_init);
    s->v0 = 0x736f6d6570736575ull ^ key0;
    s->v1 = 0x646f72616e646f6dull ^ key1;
    s->v2 = 0x6c7967656e657261ull ^ key0;
    s->v3 = 0x7465646279746573ull ^ key1;
    s->tail = 0;
    s->len = 0;
}

static void sip_word(sip *s, uint64_t m)
{
    s->v3 ^= m;
    sip_round(s); /* c = 1 */
    s->v0 ^= m;
}

static void sip_update(sip *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) {
        s->tail |= (uint64_t)p[i] << (8 * (s->len % 8));
        if (++s->len % 8 == 0) {
            sip_word(s, s->tail);
            s->tail = 0;
        }
    }
}

static uint64_t sip_final(sip *s)
{
    sip_word(s, s->tail | ((uint64_t)(s->len & 0xff) << 56));
    s->v2 ^= 0xff;
    for (int i = 0; i < 3; i++) /* d = 3 */
        sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t sbx_hash_bytes(const void *p, size_t n)
{
    sip s;
    sip_init(&s);
    sip_update(&s, p, n);
    return sip_final(&s);
}

uint64_t sbx_hash_str(const char *s)
{
    return sbx_hash_bytes(s, strlen(s));
}

uint64_t sbx_hash_pair(const char *a, const char *b)
{
    sip s;
    sip_init(&s);
    sip_update(&s, a, strlen(a) + 1); /* with its NUL: the separator */
    sip_update(&s, b, strlen(b));
    return sip_final(&s);
}

/* Appends len bytes of s at out + *n, as far as SBX_SCOPED_KEY_MAX - 1 bytes in all. */
static void key_append(char *out, size_t *n, const char *s, size_t len)
{
    size_t room = SBX_SCOPED_KEY_MAX - 1 - *n;
    if (len > room)
        len = room;
    memcpy(out + *n, s, len);
    *n += len;
}

/* "%zu:%s/%s" of (strlen(subject), subject, name), cut where snprintf would cut it, by hand:
 * it is on every request's path twice (the engine's session lock, the broker's session queue),
 * where snprintf was 2% of a no-op request. */
const char *sbx_scoped_key(char out[SBX_SCOPED_KEY_MAX], const char *subject, const char *name)
{
    size_t slen = strlen(subject), n = 0;
    char digits[24];
    size_t d = sizeof digits;
    do {
        digits[--d] = (char)('0' + slen % 10);
        slen /= 10;
    } while (slen > 0);
    key_append(out, &n, digits + d, sizeof digits - d);
    key_append(out, &n, ":", 1);
    key_append(out, &n, subject, strlen(subject));
    key_append(out, &n, "/", 1);
    key_append(out, &n, name, strlen(name));
    out[n] = '\0';
    return out;
}
