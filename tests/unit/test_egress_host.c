/* test_egress_host.c - the host-side reading of providers/common/egress.c that needs no
 * namespace: the nameservers of a resolv.conf, which network_egress ALLOW's guard leaves
 * reachable and the egress proxy asks by default. Comments, IPv6 and malformed lines never
 * count; repeats count once; max bounds what is kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/common/egress.h"

/* A temporary resolv.conf holding text; its path in path. */
static void write_conf(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "/tmp/sbx-resolv-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void test_nameservers_in_a_resolv_conf(void **state)
{
    (void)state;
    char path[64];
    write_conf(path, sizeof path,
               "# nameserver 1.1.1.1\n"
               "search example.test\n"
               "nameserver 10.255.255.53\n"
               "nameserver ::1\n"
               "nameserver 10.0.0.300\n"
               "nameserver\n"
               "  nameserver\t192.0.2.53  # trailing words\n"
               "nameserver 10.255.255.53\n"
               "nameserverx 9.9.9.9\n"
               "nameserver9.9.9.9\n"
               "options ndots:0\n");
    uint32_t out[8];
    size_t n = 0;
    sbx_egress_nameservers_in(path, out, &n, 8);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 0x0AFFFF35u);
    assert_int_equal(out[1], 0xC0000235u);
    /* appended to what is there, without repeats, up to max */
    n = 1;
    out[0] = 0xC0000235u;
    sbx_egress_nameservers_in(path, out, &n, 2);
    assert_int_equal(n, 2);
    assert_int_equal(out[1], 0x0AFFFF35u);
    n = 0;
    sbx_egress_nameservers_in(path, out, &n, 1);
    assert_int_equal(n, 1);
    unlink(path);
    n = 0;
    sbx_egress_nameservers_in(path, out, &n, 8); /* gone: nothing */
    assert_int_equal(n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nameservers_in_a_resolv_conf),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
