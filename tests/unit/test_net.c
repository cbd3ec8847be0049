/* test_net.c - the one loopback and plaintext rule (core/net.c): which hosts, addresses and URLs
 * count as loopback. Look-alike DNS names ("127.attacker.example") must never pass, since they
 * resolve wherever their owner likes. Must not open sockets or resolve names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "core/net.h"

static bool loopback(const char *host)
{
    return sbx_net_host_is_loopback(host, strlen(host));
}

static void test_net_literal_loopback_hosts(void **state)
{
    (void)state;
    const char *yes[] = {"127.0.0.1", "127.1.2.3",       "127.255.255.255", "::1",
                         "[::1]",     "0:0:0:0:0:0:0:1", "localhost",       "LocalHost"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!loopback(yes[i]))
            fail_msg("'%s' is loopback", yes[i]);
    }
}

static void test_net_lookalikes_are_not_loopback(void **state)
{
    (void)state;
    const char *no[] = {"127.attacker.example",
                        "127.0.0.1.attacker.example",
                        "127.",
                        "127",
                        "128.0.0.1",
                        "10.0.0.1",
                        "0.0.0.0",
                        "::",
                        "[::2]",
                        "::ffff:8.8.8.8",
                        "localhost.attacker.example",
                        "localhostx",
                        "",
                        "[::1",
                        "::1]"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        if (loopback(no[i]))
            fail_msg("'%s' must not be loopback", no[i]);
    }
    /* len bounds the host: the port after it is not part of it */
    assert_true(sbx_net_host_is_loopback("127.0.0.1:80", 9));
    assert_false(sbx_net_host_is_loopback("127.0.0.1:80", 12));
    assert_false(sbx_net_host_is_loopback(NULL, 0));
}

static void test_net_socket_addresses(void **state)
{
    (void)state;
    struct sockaddr_in in = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.9.9.9", &in.sin_addr);
    assert_true(sbx_net_addr_is_loopback((struct sockaddr *)&in));
    inet_pton(AF_INET, "192.0.2.1", &in.sin_addr);
    assert_false(sbx_net_addr_is_loopback((struct sockaddr *)&in));
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    assert_true(sbx_net_addr_is_loopback((struct sockaddr *)&in6));
    in6.sin6_addr = in6addr_any;
    assert_false(sbx_net_addr_is_loopback((struct sockaddr *)&in6));
    assert_false(sbx_net_addr_is_loopback(NULL));
}

static void test_net_url_transport_as_libcurl_parses_it(void **state)
{
    (void)state;
    assert_int_equal(sbx_net_url_transport("https://ssm.eu-west-1.amazonaws.com/"),
                     SBX_NET_URL_TLS);
    assert_int_equal(sbx_net_url_transport("http://127.0.0.1:8080/x"), SBX_NET_URL_PLAIN_LOOPBACK);
    assert_int_equal(sbx_net_url_transport("http://[::1]:9/"), SBX_NET_URL_PLAIN_LOOPBACK);
    assert_int_equal(sbx_net_url_transport("http://localhost/"), SBX_NET_URL_PLAIN_LOOPBACK);
    assert_int_equal(sbx_net_url_transport("http://127.attacker.example/"),
                     SBX_NET_URL_PLAIN_REMOTE);
    assert_int_equal(sbx_net_url_transport("http://127.0.0.1.attacker.example:80/"),
                     SBX_NET_URL_PLAIN_REMOTE);
    assert_int_equal(sbx_net_url_transport("http://ssm.example.com/"), SBX_NET_URL_PLAIN_REMOTE);
    assert_int_equal(sbx_net_url_transport("ftp://127.0.0.1/"), SBX_NET_URL_OTHER_SCHEME);
    assert_int_equal(sbx_net_url_transport("127.0.0.1:80"), SBX_NET_URL_INVALID);
    assert_int_equal(sbx_net_url_transport("http://"), SBX_NET_URL_INVALID);
    assert_int_equal(sbx_net_url_transport(NULL), SBX_NET_URL_INVALID);
    /* forms libcurl's parser repairs but the text does not say (fuzz_k8s_kubeconfig found the
     * first: a kubeconfig server kept as written no longer began with https://) */
    static const char *const repaired[] = {"https:/.10.0.0.1:6443", "https:10.0.0.1",
                                           "https:\\\\10.0.0.1/",   " https://10.0.0.1",
                                           "http:/127.0.0.1:80",    "htTp://127.0.0.1:8080",
                                           "HTTPS://10.0.0.1/"};
    for (size_t i = 0; i < sizeof(repaired) / sizeof(repaired[0]); i++)
        assert_int_equal(sbx_net_url_transport(repaired[i]), SBX_NET_URL_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_net_literal_loopback_hosts),
        cmocka_unit_test(test_net_lookalikes_are_not_loopback),
        cmocka_unit_test(test_net_socket_addresses),
        cmocka_unit_test(test_net_url_transport_as_libcurl_parses_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
