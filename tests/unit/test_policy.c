/* test_policy.c - core/policy.c: a request's policy over its profile's. Every dimension may
 * narrow and never widen (DESIGN §4): each one is tried both ways here, with the text the
 * refusal names, and the list of what a provider's capabilities cannot enforce.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/policy.h"

typedef struct merged {
    sbx_policy prof, req, eff;
    sbx_strlist widened;
    sbx_error err;
    sbx_status st;
} merged;

static merged *fresh(void)
{
    merged *m = calloc(1, sizeof *m);
    assert_non_null(m);
    sbx__v1__policy__init(&m->prof);
    sbx__v1__policy__init(&m->req);
    sbx__v1__policy__init(&m->eff);
    return m;
}

static void merge(merged *m)
{
    m->st = sbx_policy_merge(&m->prof, &m->req, &m->eff, &m->widened, &m->err);
}

/* Frees the lists the test and the merge added (the messages are stack-free otherwise). */
static void release(merged *m)
{
    sbx_policy *ps[] = {&m->prof, &m->req, &m->eff};
    for (size_t i = 0; i < 3; i++) {
        for (size_t j = 0; j < ps[i]->n_fs_read; j++)
            free(ps[i]->fs_read[j]);
        free(ps[i]->fs_read);
        for (size_t j = 0; j < ps[i]->n_fs_write; j++)
            free(ps[i]->fs_write[j]);
        free(ps[i]->fs_write);
        for (size_t j = 0; j < ps[i]->n_network_allow; j++)
            free(ps[i]->network_allow[j]);
        free(ps[i]->network_allow);
    }
    sbx_strlist_clear(&m->widened);
    free(m);
}

static void add(size_t *n, char ***items, const char *s)
{
    assert_true(sbx_add_string(n, items, s));
}

/* The one widening the merge reported contains text. */
static void assert_widened(merged *m, const char *text)
{
    assert_int_equal(m->st, SBX_OK);
    assert_int_equal(m->widened.n, 1);
    if (!strstr(m->widened.items[0], text))
        fail_msg("widened '%s', expected it to contain '%s'", m->widened.items[0], text);
}

static void test_policy_request_fs_read_under_profile_path_is_accepted(void **state)
{
    (void)state;
    const char *inside[] = {"/data", "/data/", "/data/sub", "/data/sub/deeper", "/data//x"};
    for (size_t i = 0; i < sizeof inside / sizeof inside[0]; i++) {
        merged *m = fresh();
        add(&m->prof.n_fs_read, &m->prof.fs_read, "/data");
        add(&m->req.n_fs_read, &m->req.fs_read, inside[i]);
        merge(m);
        assert_int_equal(m->st, SBX_OK);
        if (m->widened.n)
            fail_msg("'%s' under /data was refused: %s", inside[i], m->widened.items[0]);
        assert_int_equal(m->eff.n_fs_read, 1);
        assert_string_equal(m->eff.fs_read[0], inside[i]);
        release(m);
    }
}

/* "/data/../etc" starts with "/data/" and names /etc: a prefix test alone let a request read
 * any host path through a profile's fs_read (the docker provider binds it as given). */
static void test_policy_request_fs_path_with_dot_components_is_refused(void **state)
{
    (void)state;
    const char *dotted[] = {
        "/data/..",   "/data/../etc",  "/data/sub/../../etc/shadow", "/data/./x", "/data/.",
        "/data/x/..", "/data//../etc", "/data/../data/../etc"};
    for (size_t i = 0; i < sizeof dotted / sizeof dotted[0]; i++) {
        for (int write = 0; write < 2; write++) {
            merged *m = fresh();
            sbx_policy *p = &m->prof, *r = &m->req;
            add(write ? &p->n_fs_write : &p->n_fs_read, write ? &p->fs_write : &p->fs_read,
                "/data");
            add(write ? &r->n_fs_write : &r->n_fs_read, write ? &r->fs_write : &r->fs_read,
                dotted[i]);
            merge(m);
            assert_widened(m, write ? "fs_write '" : "fs_read '");
            assert_non_null(strstr(m->widened.items[0], dotted[i]));
            assert_non_null(strstr(m->widened.items[0], "'.' or '..'"));
            release(m);
        }
    }
}

static void test_policy_request_fs_path_outside_profile_is_refused(void **state)
{
    (void)state;
    const char *outside[] = {"/database", "/dat", "/etc", "data", "/", "/other/data"};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        merged *m = fresh();
        add(&m->prof.n_fs_write, &m->prof.fs_write, "/data/");
        add(&m->prof.n_fs_write, &m->prof.fs_write, "/scratch");
        add(&m->req.n_fs_write, &m->req.fs_write, "/scratch/ok");
        add(&m->req.n_fs_write, &m->req.fs_write, outside[i]);
        merge(m);
        assert_widened(m, "outside the profile's fs_write");
        assert_non_null(strstr(m->widened.items[0], outside[i]));
        release(m);
    }
    /* a profile without fs_read grants none: any request path widens it */
    merged *m = fresh();
    add(&m->req.n_fs_read, &m->req.fs_read, "/data");
    merge(m);
    assert_widened(m, "fs_read '/data' outside the profile's fs_read");
    release(m);
    /* a profile granting "/" grants every plain absolute path */
    m = fresh();
    add(&m->prof.n_fs_read, &m->prof.fs_read, "/");
    add(&m->req.n_fs_read, &m->req.fs_read, "/anything/at/all");
    merge(m);
    assert_int_equal(m->widened.n, 0);
    release(m);
}

/* A request's lists are bounded (each is compared entry by entry with the profile's and with
 * its session sandbox's, so an unbounded one would cost its square). */
static void test_policy_request_lists_are_bounded(void **state)
{
    (void)state;
    for (int which = 0; which < 3; which++) {
        for (size_t n = 256; n <= 257; n++) {
            merged *m = fresh();
            add(&m->prof.n_fs_read, &m->prof.fs_read, "/");
            add(&m->prof.n_fs_write, &m->prof.fs_write, "/");
            m->prof.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
            for (size_t i = 0; i < n; i++) {
                char entry[64];
                snprintf(entry, sizeof entry, which == 0 ? "h%zu.example" : "/p/%zu", i);
                if (which == 0)
                    add(&m->req.n_network_allow, &m->req.network_allow, entry);
                else if (which == 1)
                    add(&m->req.n_fs_read, &m->req.fs_read, entry);
                else
                    add(&m->req.n_fs_write, &m->req.fs_write, entry);
            }
            merge(m);
            if (n == 256) {
                assert_int_equal(m->st, SBX_OK);
            } else {
                assert_int_equal(m->st, SBX_E_INVALID_ARGUMENT);
                assert_non_null(strstr(m->err.message, "has 257 entries; at most 256"));
            }
            release(m);
        }
    }
    merged *m = fresh();
    add(&m->prof.n_fs_read, &m->prof.fs_read, "/");
    char *long_path = malloc(4098);
    assert_non_null(long_path);
    memset(long_path, 'a', 4097);
    long_path[0] = '/';
    long_path[4097] = '\0';
    add(&m->req.n_fs_read, &m->req.fs_read, long_path);
    free(long_path);
    merge(m);
    assert_int_equal(m->st, SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(m->err.message, "policy.fs_read[0] is longer than 4096 bytes"));
    release(m);
}

static void test_policy_profile_paths_apply_when_the_request_has_none(void **state)
{
    (void)state;
    merged *m = fresh();
    add(&m->prof.n_fs_read, &m->prof.fs_read, "/data");
    add(&m->prof.n_fs_write, &m->prof.fs_write, "/scratch");
    add(&m->prof.n_network_allow, &m->prof.network_allow, "example.com");
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_int_equal(m->eff.n_fs_read, 1);
    assert_string_equal(m->eff.fs_read[0], "/data");
    assert_int_equal(m->eff.n_fs_write, 1);
    assert_string_equal(m->eff.fs_write[0], "/scratch");
    assert_int_equal(m->eff.n_network_allow, 1);
    assert_string_equal(m->eff.network_allow[0], "example.com");
    release(m);
}

static void test_policy_network_egress_only_moves_towards_deny(void **state)
{
    (void)state;
    enum {
        D = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY,
        L = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST,
        A = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW
    };
    static const struct {
        int prof, req;
        const char *widened; /* NULL: accepted, the request's value applies */
    } cases[] = {
        {A, L, NULL},
        {A, D, NULL},
        {L, D, NULL},
        {L, L, NULL},
        {L, A, "network_egress allow > profile's allowlist"},
        {D, L, "network_egress allowlist > profile's deny"},
        {D, A, "network_egress allow > profile's deny"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        merged *m = fresh();
        m->prof.network_egress = (Sbx__V1__NetworkEgress)cases[i].prof;
        m->req.network_egress = (Sbx__V1__NetworkEgress)cases[i].req;
        merge(m);
        if (cases[i].widened) {
            assert_widened(m, cases[i].widened);
            assert_int_equal(m->eff.network_egress, cases[i].prof);
        } else {
            assert_int_equal(m->widened.n, 0);
            assert_int_equal(m->eff.network_egress, cases[i].req);
        }
        release(m);
    }
    /* a profile left unspecified (built by hand) is held to what providers give it: no
     * network; before, it skipped the check and a request's ALLOW opened the network */
    const int wider[] = {A, L};
    for (size_t i = 0; i < 2; i++) {
        merged *m = fresh();
        m->req.network_egress = (Sbx__V1__NetworkEgress)wider[i];
        if (wider[i] == L)
            add(&m->req.n_network_allow, &m->req.network_allow, "pypi.org");
        merge(m);
        assert_int_equal(m->st, SBX_OK);
        assert_true(m->widened.n >= 1);
        assert_non_null(strstr(m->widened.items[0], "> profile's unspecified"));
        release(m);
    }
    /* unspecified in the request keeps the profile's */
    merged *m = fresh();
    m->prof.network_egress = (Sbx__V1__NetworkEgress)L;
    merge(m);
    assert_int_equal(m->eff.network_egress, L);
    release(m);
}

static void test_policy_network_allow_entries_must_be_the_profiles(void **state)
{
    (void)state;
    merged *m = fresh();
    m->prof.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    add(&m->prof.n_network_allow, &m->prof.network_allow, "pypi.org");
    add(&m->prof.n_network_allow, &m->prof.network_allow, "*.example.com");
    add(&m->req.n_network_allow, &m->req.network_allow, "pypi.org");
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_int_equal(m->eff.n_network_allow, 1); /* the request's narrower list applies */
    assert_string_equal(m->eff.network_allow[0], "pypi.org");
    release(m);

    /* an entry the profile does not list, even one its wildcard would match, widens it */
    const char *extra[] = {"evil.example", "api.example.com", "pypi.org.evil"};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        m = fresh();
        m->prof.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
        add(&m->prof.n_network_allow, &m->prof.network_allow, "pypi.org");
        add(&m->prof.n_network_allow, &m->prof.network_allow, "*.example.com");
        add(&m->req.n_network_allow, &m->req.network_allow, extra[i]);
        merge(m);
        assert_widened(m, "not in the profile's allowlist");
        assert_non_null(strstr(m->widened.items[0], extra[i]));
        release(m);
    }
    /* under a deny profile any entry widens it */
    m = fresh();
    m->prof.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    add(&m->req.n_network_allow, &m->req.network_allow, "pypi.org");
    merge(m);
    assert_widened(m, "network_allow 'pypi.org' not in the profile's allowlist");
    release(m);
}

static void test_policy_cpu_narrows_and_never_widens(void **state)
{
    (void)state;
    merged *m = fresh();
    m->prof.cpu = 2;
    m->req.cpu = 0.5;
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_true(m->eff.cpu == 0.5);
    release(m);

    m = fresh();
    m->prof.cpu = 1;
    m->req.cpu = 4;
    merge(m);
    assert_widened(m, "cpu 4 > profile's 1");
    assert_true(m->eff.cpu == 1);
    release(m);

    m = fresh(); /* a profile without a cpu limit takes any */
    m->req.cpu = 64;
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_true(m->eff.cpu == 64);
    release(m);

    /* outside what every provider can hold: 1e-12 cores became Docker's NanoCpus 0, which it
     * reads as no limit at all */
    const double bad[] = {-1, NAN, -INFINITY, INFINITY, 1e-12, 0.009, 1025, 1e308};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        m = fresh();
        m->req.cpu = bad[i];
        merge(m);
        assert_int_equal(m->st, SBX_E_INVALID_ARGUMENT);
        assert_non_null(strstr(m->err.message, "is not a number of cores from 0.01 to 1024"));
        release(m);
    }
    const double edges[] = {0.01, 1024};
    for (size_t i = 0; i < 2; i++) {
        m = fresh();
        m->req.cpu = edges[i];
        merge(m);
        assert_int_equal(m->st, SBX_OK);
        release(m);
    }
}

/* Each limit of a request within a profile's bounds (core/limits.h): past them a provider
 * would wrap it (memory_mb * 2^20 past 2^64 bytes is a few MiB) or cannot hold it. */
static void test_policy_request_limits_past_their_bounds_are_invalid(void **state)
{
    (void)state;
    static const struct {
        size_t offset;
        size_t size;
        unsigned long long max;
        const char *name;
    } limits[] = {
        {offsetof(sbx_policy, memory_mb), 8, 16ull * 1024 * 1024, "memory_mb"},
        {offsetof(sbx_policy, pids), 4, 4194304, "pids"},
        {offsetof(sbx_policy, disk_mb), 8, 1ull << 30, "disk_mb"},
        {offsetof(sbx_policy, timeout_ms), 8, 7ull * 24 * 3600 * 1000, "timeout_ms"},
        {offsetof(sbx_policy, output_limit_bytes), 8, 1ull << 34, "output_limit_bytes"},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        for (int over = 0; over < 2; over++) {
            merged *m = fresh();
            unsigned long long v = limits[i].max + (unsigned long long)over;
            uint8_t *field = (uint8_t *)&m->req + limits[i].offset;
            if (limits[i].size == 4) {
                uint32_t v32 = (uint32_t)v;
                memcpy(field, &v32, 4);
            } else {
                memcpy(field, &v, 8);
            }
            merge(m);
            if (!over) {
                assert_int_equal(m->st, SBX_OK);
            } else {
                assert_int_equal(m->st, SBX_E_INVALID_ARGUMENT);
                char want[256];
                snprintf(want, sizeof want, "policy.%s %llu is above its bound %llu",
                         limits[i].name, v, limits[i].max);
                if (!strstr(m->err.message, want))
                    fail_msg("'%s' lacks '%s'", m->err.message, want);
            }
            release(m);
        }
    }
}

static void test_policy_integer_limits_narrow_and_never_widen(void **state)
{
    (void)state;
    merged *m = fresh();
    m->prof.memory_mb = 512;
    m->prof.pids = 64;
    m->prof.disk_mb = 100;
    m->prof.timeout_ms = 1000;
    m->prof.output_limit_bytes = 4096;
    m->req.memory_mb = 128;
    m->req.pids = 8;
    m->req.disk_mb = 10;
    m->req.timeout_ms = 10;
    m->req.output_limit_bytes = 16;
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_int_equal(m->eff.memory_mb, 128);
    assert_int_equal(m->eff.pids, 8);
    assert_int_equal(m->eff.disk_mb, 10);
    assert_int_equal(m->eff.timeout_ms, 10);
    assert_int_equal(m->eff.output_limit_bytes, 16);
    release(m);

    m = fresh();
    m->prof.memory_mb = 512;
    m->prof.pids = 64;
    m->prof.disk_mb = 100;
    m->prof.timeout_ms = 1000;
    m->prof.output_limit_bytes = 4096;
    m->req.memory_mb = 513;
    m->req.pids = 65;
    m->req.disk_mb = 101;
    m->req.timeout_ms = 1001;
    m->req.output_limit_bytes = 4097;
    merge(m);
    assert_int_equal(m->st, SBX_OK);
    assert_int_equal(m->widened.n, 5); /* every one is named, not only the first */
    const char *want[] = {"memory_mb 513 > profile's 512", "pids 65 > profile's 64",
                          "disk_mb 101 > profile's 100", "timeout_ms 1001 > profile's 1000",
                          "output_limit_bytes 4097 > profile's 4096"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(m->widened.items[i], want[i]);
    assert_int_equal(m->eff.memory_mb, 512);
    release(m);
}

static void test_policy_lenient_request_never_loosens_a_strict_profile(void **state)
{
    (void)state;
    merged *m = fresh();
    m->req.lenient = true;
    merge(m);
    assert_widened(m, "lenient true > profile's strict");
    assert_false(m->eff.lenient);
    release(m);

    m = fresh();
    m->prof.lenient = true;
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_true(m->eff.lenient);
    release(m);
}

/* strict narrows a lenient profile: lenient false is the unset value and cannot. */
static void test_policy_strict_request_narrows_a_lenient_profile(void **state)
{
    (void)state;
    merged *m = fresh();
    m->prof.lenient = true;
    m->req.strict = true;
    merge(m);
    assert_int_equal(m->widened.n, 0);
    assert_false(m->eff.lenient);
    assert_true(m->eff.strict);
    release(m);
}

static void test_policy_no_request_takes_the_profile(void **state)
{
    (void)state;
    merged *m = fresh();
    m->prof.memory_mb = 256;
    m->prof.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    m->st = sbx_policy_merge(&m->prof, NULL, &m->eff, &m->widened, &m->err);
    assert_int_equal(m->st, SBX_OK);
    assert_int_equal(m->widened.n, 0);
    assert_int_equal(m->eff.memory_mb, 256);
    assert_int_equal(m->eff.network_egress, SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY);
    release(m);
}

static void test_policy_unenforceable_lists_each_dimension(void **state)
{
    (void)state;
    sbx_policy p = SBX__V1__POLICY__INIT;
    char *paths[] = {"/data"};
    p.n_fs_read = p.n_fs_write = 1;
    p.fs_read = p.fs_write = paths;
    p.cpu = 1;
    p.memory_mb = 1;
    p.pids = 1;
    p.disk_mb = 1;
    p.timeout_ms = 5;         /* enforced by the engine: never listed */
    p.output_limit_bytes = 5; /* likewise */
    sbx_capabilities none = {0};
    const Sbx__V1__NetworkEgress egress[] = {SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY,
                                             SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST,
                                             SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW};
    const char *first[] = {"network_egress=deny", "network_egress=allowlist", "fs_read"};
    for (size_t i = 0; i < 3; i++) {
        p.network_egress = egress[i];
        sbx_strlist out = {0};
        assert_int_equal(sbx_policy_unenforceable(&none, &p, &out), SBX_OK);
        assert_string_equal(out.items[0], first[i]);
        assert_int_equal(out.n, i < 2 ? 7 : 6);
        assert_string_equal(out.items[out.n - 1], "disk_mb");
        sbx_strlist_clear(&out);
    }
    sbx_capabilities all = {.policy_network = true,
                            .policy_network_domains = true,
                            .policy_filesystem = true,
                            .policy_resources = true};
    for (size_t i = 0; i < 3; i++) {
        p.network_egress = egress[i];
        sbx_strlist out = {0};
        assert_int_equal(sbx_policy_unenforceable(&all, &p, &out), SBX_OK);
        assert_int_equal(out.n, 0);
        sbx_strlist_clear(&out);
    }
}

/* An existing sandbox against a later request's effective policy: each dimension in which the
 * sandbox grants more is named; one that grants less, or the same, is not. */
static void test_policy_sandbox_wider_names_each_dimension(void **state)
{
    (void)state;
    sbx_policy sb = SBX__V1__POLICY__INIT, want = SBX__V1__POLICY__INIT;
    char *net_sb[] = {"pypi.org", "example.com"}, *net_want[] = {"pypi.org"};
    char *fs_sb[] = {"/data"}, *fs_want[] = {"/data/in"}, *root[] = {"/"};
    sb.network_egress = want.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    sb.network_allow = net_sb;
    sb.n_network_allow = 2;
    want.network_allow = net_want;
    want.n_network_allow = 1;
    sb.fs_read = sb.fs_write = fs_sb;
    sb.n_fs_read = sb.n_fs_write = 1;
    want.fs_read = fs_want;
    want.n_fs_read = 1;
    want.fs_write = root; /* "/" holds /data */
    want.n_fs_write = 1;
    sb.cpu = 0; /* unlimited */
    want.cpu = 0.5;
    sb.memory_mb = 512;
    want.memory_mb = 256;
    sb.pids = 0;
    want.pids = 8;
    sb.disk_mb = 10;
    want.disk_mb = 100; /* the sandbox's is narrower: fine */
    sbx_strlist w = {0};
    assert_true(sbx_policy_sandbox_wider(&sb, &want, &w));
    const char *expect[] = {"network_allow 'example.com' not asked for",
                            "fs_read '/data' not asked for", "cpu unlimited > 0.5",
                            "memory_mb 512 > 256", "pids unlimited > 8"};
    assert_int_equal(w.n, 5);
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(w.items[i], expect[i]);
    sbx_strlist_clear(&w);

    /* egress: only a wider rank counts; a request leaving a limit unset (0) asks for none */
    sbx_policy a = SBX__V1__POLICY__INIT, b = SBX__V1__POLICY__INIT;
    a.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    b.network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    a.memory_mb = 64;
    assert_true(sbx_policy_sandbox_wider(&a, &b, &w));
    assert_int_equal(w.n, 1);
    assert_string_equal(w.items[0], "network_egress allowlist > deny");
    sbx_strlist_clear(&w);
    b.memory_mb = 32;
    assert_true(sbx_policy_sandbox_wider(&b, &a, &w)); /* deny under allowlist: narrower */
    assert_int_equal(w.n, 0);
    a.cpu = 2;
    b.cpu = 1;
    assert_true(sbx_policy_sandbox_wider(&a, &b, &w));
    assert_int_equal(w.n, 3);
    assert_string_equal(w.items[1], "cpu 2 > 1");
    assert_string_equal(w.items[2], "memory_mb 64 > 32");
    sbx_strlist_clear(&w);
}

static void test_policy_egress_names(void **state)
{
    (void)state;
    assert_string_equal(sbx_policy_egress_name(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY),
                        "deny");
    assert_string_equal(sbx_policy_egress_name(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW),
                        "allow");
    assert_string_equal(sbx_policy_egress_name(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST),
                        "allowlist");
    assert_string_equal(sbx_policy_egress_name(SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_UNSPECIFIED),
                        "unspecified");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_request_fs_read_under_profile_path_is_accepted),
        cmocka_unit_test(test_policy_request_fs_path_with_dot_components_is_refused),
        cmocka_unit_test(test_policy_request_fs_path_outside_profile_is_refused),
        cmocka_unit_test(test_policy_request_lists_are_bounded),
        cmocka_unit_test(test_policy_profile_paths_apply_when_the_request_has_none),
        cmocka_unit_test(test_policy_network_egress_only_moves_towards_deny),
        cmocka_unit_test(test_policy_network_allow_entries_must_be_the_profiles),
        cmocka_unit_test(test_policy_cpu_narrows_and_never_widens),
        cmocka_unit_test(test_policy_integer_limits_narrow_and_never_widen),
        cmocka_unit_test(test_policy_request_limits_past_their_bounds_are_invalid),
        cmocka_unit_test(test_policy_lenient_request_never_loosens_a_strict_profile),
        cmocka_unit_test(test_policy_strict_request_narrows_a_lenient_profile),
        cmocka_unit_test(test_policy_no_request_takes_the_profile),
        cmocka_unit_test(test_policy_unenforceable_lists_each_dimension),
        cmocka_unit_test(test_policy_sandbox_wider_names_each_dimension),
        cmocka_unit_test(test_policy_egress_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
