/* test_egress_parse.c - the egress proxy's parsers and allowlist (providers/common/egress_parse.c):
 * SNI from a ClientHello, Host from an HTTP head, DNS queries and answers, network_allow entries
 * and their matching. Look-alike names and truncated or doubled fields must never pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>

#include <cmocka.h>

#include "providers/common/egress_parse.h"

/* A minimal ClientHello with the given server name extension body (NULL: none). */
static size_t hello(uint8_t *out, const char *sni, bool two_names)
{
    uint8_t ext[600];
    size_t e = 0;
    if (sni) {
        size_t nl = strlen(sni);
        size_t list = (3 + nl) * (two_names ? 2 : 1);
        ext[e++] = 0;
        ext[e++] = 0; /* server_name */
        ext[e++] = (uint8_t)((list + 2) >> 8);
        ext[e++] = (uint8_t)(list + 2);
        ext[e++] = (uint8_t)(list >> 8);
        ext[e++] = (uint8_t)list;
        for (int k = 0; k < (two_names ? 2 : 1); k++) {
            ext[e++] = 0;
            ext[e++] = (uint8_t)(nl >> 8);
            ext[e++] = (uint8_t)nl;
            memcpy(ext + e, sni, nl);
            e += nl;
        }
    }
    /* supported_versions, to have a second extension */
    static const uint8_t sv[] = {0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04};
    memcpy(ext + e, sv, sizeof sv);
    e += sizeof sv;

    uint8_t body[800];
    size_t b = 0;
    body[b++] = 3;
    body[b++] = 3;
    memset(body + b, 0x11, 32);
    b += 32;
    body[b++] = 0; /* session id */
    body[b++] = 0;
    body[b++] = 2;
    body[b++] = 0x13;
    body[b++] = 0x01;
    body[b++] = 1;
    body[b++] = 0;
    body[b++] = (uint8_t)(e >> 8);
    body[b++] = (uint8_t)e;
    memcpy(body + b, ext, e);
    b += e;

    size_t o = 0;
    out[o++] = 22;
    out[o++] = 3;
    out[o++] = 1;
    out[o++] = (uint8_t)((b + 4) >> 8);
    out[o++] = (uint8_t)(b + 4);
    out[o++] = 1;
    out[o++] = 0;
    out[o++] = (uint8_t)(b >> 8);
    out[o++] = (uint8_t)b;
    memcpy(out + o, body, b);
    return o + b;
}

static void test_sni(void **state)
{
    (void)state;
    uint8_t m[1024];
    char name[SBX_EGRESS_NAME_MAX + 1];
    size_t n = hello(m, "Allowed.Test.", false);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_OK);
    assert_string_equal(name, "allowed.test");
    /* every prefix is NEED_MORE, never OK or a crash */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(sbx_egress_tls_sni(m, k, name), SBX_EGRESS_NEED_MORE);
    /* no SNI, two host names, an IP literal, a name with a NUL or a slash */
    n = hello(m, NULL, false);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_BAD);
    n = hello(m, "allowed.test", true);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_BAD);
    n = hello(m, "198.51.100.1", false);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_BAD);
    n = hello(m, "allowed.test\x01x", false);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_BAD);
    n = hello(m, "a/b.test", false);
    assert_int_equal(sbx_egress_tls_sni(m, n, name), SBX_EGRESS_BAD);
    /* not TLS at all */
    assert_int_equal(sbx_egress_tls_sni((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name),
                     SBX_EGRESS_BAD);
}

static sbx_egress_parse host(const char *head, char *name, uint16_t *port)
{
    return sbx_egress_http_host((const uint8_t *)head, strlen(head), name, port);
}

static void test_http_host(void **state)
{
    (void)state;
    char name[SBX_EGRESS_NAME_MAX + 1];
    uint16_t port = 1;
    assert_int_equal(
        host("GET / HTTP/1.1\r\nHost: Allowed.test\r\nAccept: */*\r\n\r\n", name, &port),
        SBX_EGRESS_OK);
    assert_string_equal(name, "allowed.test");
    assert_int_equal(port, 0);
    assert_int_equal(host("GET /x HTTP/1.0\r\nhost:a.wild.test:8080 \r\n\r\nbody", name, &port),
                     SBX_EGRESS_OK);
    assert_string_equal(name, "a.wild.test");
    assert_int_equal(port, 8080);
    assert_int_equal(
        host("GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", name, &port),
        SBX_EGRESS_OK);
    assert_int_equal(host("GET / HTTP/1.1\r\nHost: allowed.test\r\n", name, &port),
                     SBX_EGRESS_NEED_MORE);
    const char *bad[] = {
        "GET / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\n\r\n",
        "GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : allowed.test\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test:0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test:99999\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 198.51.100.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: allowed.test@evil.test\r\n\r\n",
        "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: allowed.test\r\n\r\n",
        "get / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
        "GET / HTTP/1.1\r\n folded\r\nHost: allowed.test\r\n\r\n",
        "\x16\x03\x01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (host(bad[i], name, &port) != SBX_EGRESS_BAD)
            fail_msg("accepted: %s", bad[i]);
    }
}

static void test_dns_roundtrip(void **state)
{
    (void)state;
    uint8_t q[SBX_EGRESS_DNS_MAX];
    size_t qn = sbx_egress_dns_query_build(0x1234, "allowed.test", q, sizeof q);
    assert_true(qn > 12);
    sbx_egress_dns_query dq;
    assert_int_equal(sbx_egress_dns_query_parse(q, qn, &dq), SBX_EGRESS_OK);
    assert_string_equal(dq.name, "allowed.test");
    assert_int_equal(dq.qtype, 1);
    assert_int_equal(dq.id, 0x1234);
    assert_false(dq.bad_name);

    uint32_t a[2] = {htonl(0xC6336401u), htonl(0xC6336402u)};
    uint8_t r[SBX_EGRESS_DNS_MAX];
    size_t rn = sbx_egress_dns_reply_build(q, &dq, 0, a, 2, 60, r, sizeof r);
    assert_true(rn == qn + 32);
    uint32_t got[4];
    size_t n = 0;
    int rcode = -1;
    assert_int_equal(sbx_egress_dns_answer_parse(r, rn, 0x1234, "allowed.test", got, 4, &n, &rcode),
                     SBX_EGRESS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rcode, 0);
    assert_memory_equal(got, a, sizeof a);
    /* the wrong id or the wrong name is refused; a truncated answer too */
    assert_int_equal(sbx_egress_dns_answer_parse(r, rn, 0x1235, "allowed.test", got, 4, &n, &rcode),
                     SBX_EGRESS_BAD);
    assert_int_equal(sbx_egress_dns_answer_parse(r, rn, 0x1234, "evil.test", got, 4, &n, &rcode),
                     SBX_EGRESS_BAD);
    for (size_t k = 0; k < rn; k++) {
        sbx_egress_parse p =
            sbx_egress_dns_answer_parse(r, k, 0x1234, "allowed.test", got, 4, &n, &rcode);
        assert_true(p == SBX_EGRESS_BAD);
    }
    /* NXDOMAIN */
    rn = sbx_egress_dns_reply_build(q, &dq, 3, NULL, 0, 0, r, sizeof r);
    assert_int_equal(sbx_egress_dns_answer_parse(r, rn, 0x1234, "allowed.test", got, 4, &n, &rcode),
                     SBX_EGRESS_OK);
    assert_int_equal(rcode, 3);
    assert_int_equal(n, 0);
    /* a reply is not a query; compression in a query is refused */
    assert_int_equal(sbx_egress_dns_query_parse(r, rn, &dq), SBX_EGRESS_BAD);
    q[12] = 0xC0;
    assert_int_equal(sbx_egress_dns_query_parse(q, qn, &dq), SBX_EGRESS_BAD);
}

static void test_dns_cname_chain(void **state)
{
    (void)state;
    /* allowed.test CNAME cdn.test (compressed), cdn.test A 198.51.100.7, other.test A 1.2.3.4 */
    static const uint8_t m[] = {
        0x00, 0x07, 0x81, 0x80, 0x00, 0x01, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
        /* 12: allowed.test */
        7, 'a', 'l', 'l', 'o', 'w', 'e', 'd', 4, 't', 'e', 's', 't', 0, 0x00, 0x01, 0x00, 0x01,
        /* 30: CNAME */
        0xC0, 0x0C, 0x00, 0x05, 0x00, 0x01, 0, 0, 0, 60, 0x00, 0x06, 3, 'c', 'd', 'n', 0xC0, 0x14,
        /* 48: cdn.test A */
        0xC0, 0x2A, 0x00, 0x01, 0x00, 0x01, 0, 0, 0, 60, 0x00, 0x04, 198, 51, 100, 7,
        /* other.test A: not on the chain */
        5, 'o', 't', 'h', 'e', 'r', 0xC0, 0x14, 0x00, 0x01, 0x00, 0x01, 0, 0, 0, 60, 0x00, 0x04, 1,
        2, 3, 4};
    uint32_t got[4];
    size_t n = 0;
    int rcode = 0;
    assert_int_equal(
        sbx_egress_dns_answer_parse(m, sizeof m, 7, "allowed.test", got, 4, &n, &rcode),
        SBX_EGRESS_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ntohl(got[0]), 0xC6336407u);
}

static void test_rules(void **state)
{
    (void)state;
    const char *entries[] = {"allowed.test", "*.wild.test", "198.51.100.0/24:8080", "192.0.2.9"};
    sbx_egress_rule r[4];
    const char *why = NULL;
    for (size_t i = 0; i < 4; i++) {
        if (!sbx_egress_rule_parse(entries[i], &r[i], &why))
            fail_msg("%s: %s", entries[i], why);
    }
    assert_true(sbx_egress_allow_name(r, 4, "allowed.test", 443));
    assert_true(sbx_egress_allow_name(r, 4, "a.b.wild.test", 80));
    assert_false(sbx_egress_allow_name(r, 4, "wild.test", 80));
    assert_false(sbx_egress_allow_name(r, 4, "xwild.test", 80));
    assert_false(sbx_egress_allow_name(r, 4, "allowed.test.evil", 80));
    assert_false(sbx_egress_allow_name(r, 4, "sub.allowed.test", 80));
    assert_true(sbx_egress_allow_ip(r, 4, 0xC6336405u, 8080));
    assert_false(sbx_egress_allow_ip(r, 4, 0xC6336405u, 80));
    assert_true(sbx_egress_allow_ip(r, 4, 0xC0000209u, 22));
    assert_false(sbx_egress_allow_ip(r, 4, 0xC000020Au, 22));
    const char *bad[] = {"",         "*",           "*.",       "a..b",      "::1",
                         "[::1]:80", "10.0.0.0/33", "10.0.0/8", "1.2.3.4:0", "a.test:65536",
                         "a.test:",  "a b",         "*.*.x",    "01.2.3.4"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sbx_egress_rule x;
        if (sbx_egress_rule_parse(bad[i], &x, &why))
            fail_msg("accepted rule: '%s'", bad[i]);
        assert_non_null(why);
    }
    assert_true(sbx_egress_ip_special(0x7F000001u));
    assert_true(sbx_egress_ip_special(0x0A000001u));
    assert_true(sbx_egress_ip_special(0xA9FEA9FEu));
    assert_true(sbx_egress_ip_special(0x64400001u));
    assert_true(sbx_egress_ip_special(0xFFFFFFFFu));
    assert_true(sbx_egress_ip_special(0xE0000001u));
    assert_false(sbx_egress_ip_special(0xC6336401u));
    assert_false(sbx_egress_ip_special(0x08080808u));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sni),           cmocka_unit_test(test_http_host),
        cmocka_unit_test(test_dns_roundtrip), cmocka_unit_test(test_dns_cname_chain),
        cmocka_unit_test(test_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
