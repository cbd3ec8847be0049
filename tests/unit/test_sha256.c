/* test_sha256.c - core/sha256.c: SHA-256 against the FIPS 180-4 examples, HMAC-SHA256 against
 * RFC 4231's test cases, both against OpenSSL on random inputs fed in random pieces (every
 * block boundary and padding case), and the constant-time comparison. Must not touch files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/sha256.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha_hex(const void *data, size_t len, char out[2 * SBX_SHA256_LEN + 1])
{
    sbx_sha256 s;
    uint8_t d[SBX_SHA256_LEN];
    sbx_sha256_init(&s);
    sbx_sha256_update(&s, data, len);
    sbx_sha256_final(&s, d);
    hex(d, sizeof(d), out);
}

static void test_sha256_fips_examples(void **state)
{
    (void)state;
    char h[65];
    sha_hex("", 0, h);
    assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 448 bits */
    sha_hex(two, strlen(two), h);
    assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    sbx_sha256 s;
    uint8_t d[SBX_SHA256_LEN];
    sbx_sha256_init(&s);
    for (int i = 0; i < 1000; i++) /* a million 'a', in 1000-byte pieces */
        sbx_sha256_update(&s, memset((char[1000]){0}, 'a', 1000), 1000);
    sbx_sha256_final(&s, d);
    hex(d, sizeof(d), h);
    assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void hmac_hex(const uint8_t *key, size_t klen, const void *msg, size_t mlen, char *out)
{
    sbx_hmac_sha256 h;
    uint8_t d[SBX_SHA256_LEN];
    sbx_hmac_sha256_init(&h, key, klen);
    sbx_hmac_sha256_update(&h, msg, mlen);
    sbx_hmac_sha256_final(&h, d);
    hex(d, sizeof(d), out);
}

static void test_hmac_sha256_rfc4231(void **state)
{
    (void)state;
    char h[65];
    uint8_t k20[20], k131[131], d50[50];
    memset(k20, 0x0b, sizeof(k20));
    hmac_hex(k20, 20, "Hi There", 8, h); /* test case 1 */
    assert_string_equal(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac_hex((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28, h); /* case 2 */
    assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(k20, 0xaa, sizeof(k20));
    memset(d50, 0xdd, sizeof(d50));
    hmac_hex(k20, 20, d50, 50, h); /* case 3 */
    assert_string_equal(h, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    memset(k131, 0xaa, sizeof(k131)); /* case 6: a key longer than a block is hashed first */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_hex(k131, sizeof(k131), m6, strlen(m6), h);
    assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm."; /* case 7 */
    hmac_hex(k131, sizeof(k131), m7, strlen(m7), h);
    assert_string_equal(h, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

/* Random lengths around every block boundary, fed in random pieces, against OpenSSL. */
static void test_sha256_and_hmac_match_openssl(void **state)
{
    (void)state;
    srand(1234);
    uint8_t data[700], key[150];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)rand();
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (uint8_t)rand();
    for (size_t len = 0; len < sizeof(data); len += 1 + (len > 200 ? (size_t)(rand() % 7) : 0)) {
        size_t klen = (size_t)rand() % sizeof(key);
        sbx_sha256 s;
        sbx_hmac_sha256 h;
        sbx_sha256_init(&s);
        sbx_hmac_sha256_init(&h, key, klen);
        for (size_t off = 0; off < len;) {
            size_t piece = 1 + (size_t)rand() % 130;
            if (piece > len - off)
                piece = len - off;
            sbx_sha256_update(&s, data + off, piece);
            sbx_hmac_sha256_update(&h, data + off, piece);
            off += piece;
        }
        uint8_t mine[SBX_SHA256_LEN], theirs[SBX_SHA256_LEN];
        unsigned int n = 0;
        sbx_sha256_final(&s, mine);
        assert_int_equal(EVP_Digest(data, len, theirs, &n, EVP_sha256(), NULL), 1);
        if (memcmp(mine, theirs, sizeof(mine)) != 0)
            fail_msg("SHA-256 of %zu bytes differs from OpenSSL's", len);
        sbx_hmac_sha256_final(&h, mine);
        assert_non_null(HMAC(EVP_sha256(), key, (int)klen, data, len, theirs, &n));
        if (memcmp(mine, theirs, sizeof(mine)) != 0)
            fail_msg("HMAC-SHA256 of %zu bytes with a %zu-byte key differs from OpenSSL's", len,
                     klen);
    }
}

/* A keyed template copied per message gives the same MAC as keying afresh (the binding key's
 * thread-safe use). */
static void test_hmac_template_copies_are_independent(void **state)
{
    (void)state;
    sbx_hmac_sha256 tmpl;
    sbx_hmac_sha256_init(&tmpl, (const uint8_t *)"0123456789abcdef", 16);
    uint8_t a[SBX_SHA256_LEN], b[SBX_SHA256_LEN], c[SBX_SHA256_LEN];
    sbx_hmac_sha256 one = tmpl, two = tmpl;
    sbx_hmac_sha256_update(&one, "first", 5);
    sbx_hmac_sha256_update(&two, "second", 6);
    sbx_hmac_sha256_final(&one, a);
    sbx_hmac_sha256_final(&two, b);
    sbx_hmac_sha256 again = tmpl;
    sbx_hmac_sha256_update(&again, "first", 5);
    sbx_hmac_sha256_final(&again, c);
    assert_memory_equal(a, c, sizeof(a));
    assert_memory_not_equal(a, b, sizeof(a));
}

/* Long inputs in one update (many blocks per call of the compression function), against
 * OpenSSL. */
static void test_sha256_long_inputs_match_openssl(void **state)
{
    (void)state;
    enum { BIG = (1 << 20) + 13 };
    uint8_t *data = malloc(BIG);
    assert_non_null(data);
    srand(99);
    for (size_t i = 0; i < BIG; i++)
        data[i] = (uint8_t)rand();
    static const size_t lens[] = {64, 128, 4096 + 5, 65536, BIG};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        uint8_t mine[SBX_SHA256_LEN], theirs[SBX_SHA256_LEN];
        unsigned int n = 0;
        sbx_sha256 s;
        sbx_sha256_init(&s);
        sbx_sha256_update(&s, data + 1, lens[k] - 1); /* unaligned, then one more byte */
        sbx_sha256_update(&s, data + lens[k], 0);
        sbx_sha256 t;
        sbx_sha256_init(&t);
        sbx_sha256_update(&t, data, lens[k]);
        sbx_sha256_final(&t, mine);
        assert_int_equal(EVP_Digest(data, lens[k], theirs, &n, EVP_sha256(), NULL), 1);
        if (memcmp(mine, theirs, sizeof(mine)) != 0)
            fail_msg("SHA-256 of %zu bytes in one update differs from OpenSSL's", lens[k]);
        sbx_sha256_final(&s, mine);
        assert_int_equal(EVP_Digest(data + 1, lens[k] - 1, theirs, &n, EVP_sha256(), NULL), 1);
        if (memcmp(mine, theirs, sizeof(mine)) != 0)
            fail_msg("SHA-256 of %zu unaligned bytes differs from OpenSSL's", lens[k] - 1);
    }
    free(data);
}

/* The same checks with the portable compression function forced, so a CPU with the SHA
 * extensions checks both implementations. */
static int portable_on(void **state)
{
    (void)state;
    sbx_sha256_force_portable(true);
    return 0;
}

static int portable_off(void **state)
{
    (void)state;
    sbx_sha256_force_portable(false);
    return 0;
}

static void test_ct_equal(void **state)
{
    (void)state;
    uint8_t x[32] = {0}, y[32] = {0};
    assert_int_equal(sbx_ct_equal(x, y, sizeof(x)), 1);
    for (size_t i = 0; i < sizeof(x); i++) {
        y[i] = 0x80;
        assert_int_equal(sbx_ct_equal(x, y, sizeof(x)), 0);
        y[i] = 0;
    }
    assert_int_equal(sbx_ct_equal(x, y, 0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_fips_examples),
        cmocka_unit_test(test_hmac_sha256_rfc4231),
        cmocka_unit_test(test_sha256_and_hmac_match_openssl),
        cmocka_unit_test(test_sha256_long_inputs_match_openssl),
        cmocka_unit_test_setup_teardown(test_sha256_fips_examples, portable_on, portable_off),
        cmocka_unit_test_setup_teardown(test_hmac_sha256_rfc4231, portable_on, portable_off),
        cmocka_unit_test_setup_teardown(test_sha256_and_hmac_match_openssl, portable_on,
                                        portable_off),
        cmocka_unit_test_setup_teardown(test_sha256_long_inputs_match_openssl, portable_on,
                                        portable_off),
        cmocka_unit_test(test_hmac_template_copies_are_independent),
        cmocka_unit_test(test_ct_equal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
