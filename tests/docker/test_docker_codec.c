/* test_docker_codec.c - the docker provider's decoders of daemon bytes, without a daemon: the
 * exec stream demultiplexer (8-byte frame headers), the tar writer/reader of the archive API,
 * and which network documents keep containers apart.
 * Each test feeds bytes the way a hostile or merely chunky daemon could send them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "providers/docker/docker_api.h"
#include "providers/docker/docker_provider.h"
#include "providers/docker/docker_tar.h"

typedef struct captured {
    char out[256], err[256];
    size_t n_out, n_err;
} captured;

static void capture(void *arg, int stream, const uint8_t *data, size_t len)
{
    captured *c = arg;
    char *dst = stream == 1 ? c->out : c->err;
    size_t *n = stream == 1 ? &c->n_out : &c->n_err;
    assert_true(*n + len < sizeof(c->out));
    memcpy(dst + *n, data, len);
    *n += len;
}

static size_t frame(uint8_t *buf, uint8_t stream, const char *payload)
{
    size_t len = strlen(payload);
    uint8_t h[8] = {
        stream,      0, 0, 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
        (uint8_t)len};
    memcpy(buf, h, 8);
    memcpy(buf + 8, payload, len);
    return 8 + len;
}

static void test_docker_demux_splits_stdout_and_stderr_fed_byte_by_byte(void **state)
{
    (void)state;
    uint8_t buf[128];
    size_t n = frame(buf, 1, "hello ");
    n += frame(buf + n, 2, "oops");
    n += frame(buf + n, 1, "world");
    docker_demux d = {0};
    captured c = {0};
    for (size_t i = 0; i < n; i++)
        assert_true(docker_demux_feed(&d, buf + i, 1, capture, &c));
    assert_int_equal(c.n_out, 11);
    assert_memory_equal(c.out, "hello world", 11);
    assert_int_equal(c.n_err, 4);
    assert_memory_equal(c.err, "oops", 4);
}

static void test_docker_demux_refuses_unknown_stream_type(void **state)
{
    (void)state;
    uint8_t buf[32];
    size_t n = frame(buf, 7, "x");
    docker_demux d = {0};
    captured c = {0};
    assert_false(docker_demux_feed(&d, buf, n, capture, &c));
    assert_int_equal(c.n_out + c.n_err, 0);
}

static void test_docker_demux_refuses_nonzero_padding(void **state)
{
    (void)state;
    uint8_t buf[32];
    size_t n = frame(buf, 1, "x");
    buf[2] = 1;
    docker_demux d = {0};
    captured c = {0};
    assert_false(docker_demux_feed(&d, buf, n, capture, &c));
}

static void test_docker_demux_huge_frame_length_is_streamed_not_buffered(void **state)
{
    (void)state;
    /* A header announcing 4 GiB followed by 3 bytes: the demuxer hands on what came and waits
     * for more; it never allocates by the announced size. */
    uint8_t buf[11] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'a', 'b', 'c'};
    docker_demux d = {0};
    captured c = {0};
    assert_true(docker_demux_feed(&d, buf, sizeof(buf), capture, &c));
    assert_int_equal(c.n_out, 3);
    assert_int_equal(d.remaining, 0xffffffffu - 3);
}

/* ---- tar ---------------------------------------------------------------------------------- */

typedef struct tar_seen {
    char names[8][DOCKER_TAR_MAX_NAME + 1];
    docker_tar_kind kinds[8];
    unsigned modes[8];
    int n;
    char data[256];
    size_t n_data;
} tar_seen;

static bool seen_entry(void *arg, const docker_tar_entry *e)
{
    tar_seen *s = arg;
    assert_true(s->n < 8);
    snprintf(s->names[s->n], sizeof(s->names[0]), "%s", e->name);
    s->kinds[s->n] = e->kind;
    s->modes[s->n] = e->mode;
    s->n++;
    return true;
}

static bool seen_data(void *arg, const uint8_t *data, size_t len)
{
    tar_seen *s = arg;
    assert_true(s->n_data + len <= sizeof(s->data));
    memcpy(s->data + s->n_data, data, len);
    s->n_data += len;
    return true;
}

static void test_docker_tar_roundtrip_keeps_long_names_modes_and_content(void **state)
{
    (void)state;
    char long_name[300];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    memcpy(long_name, "dir/", 4);
    docker_tar_buf b = {0};
    assert_true(docker_tar_add_dir(&b, "dir", 0755));
    assert_true(docker_tar_add_file(&b, long_name, 0600, (const uint8_t *)"content!", 8));
    assert_true(docker_tar_finish(&b));
    assert_int_equal(b.len % DOCKER_TAR_BLOCK, 0);

    tar_seen s = {0};
    docker_tar_reader r = {.on_entry = seen_entry, .on_data = seen_data, .arg = &s};
    docker_tar_reader_init(&r);
    /* Fed in odd slices, as a socket would deliver it. */
    for (size_t off = 0; off < b.len; off += 7) {
        size_t n = b.len - off < 7 ? b.len - off : 7;
        assert_true(docker_tar_reader_feed(&r, b.data + off, n));
    }
    assert_true(r.done);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.names[0], "dir");
    assert_int_equal(s.kinds[0], DOCKER_TAR_DIRECTORY);
    assert_string_equal(s.names[1], long_name);
    assert_int_equal(s.kinds[1], DOCKER_TAR_REGULAR);
    assert_int_equal(s.modes[1], 0600);
    assert_int_equal(s.n_data, 8);
    assert_memory_equal(s.data, "content!", 8);
    docker_tar_reader_free(&r);
    docker_tar_buf_free(&b);
}

static void test_docker_tar_reader_refuses_bad_checksum(void **state)
{
    (void)state;
    docker_tar_buf b = {0};
    assert_true(docker_tar_add_file(&b, "f", 0644, (const uint8_t *)"x", 1));
    assert_true(docker_tar_finish(&b));
    b.data[0] = 'g'; /* name changed, checksum not */
    tar_seen s = {0};
    docker_tar_reader r = {.on_entry = seen_entry, .on_data = seen_data, .arg = &s};
    docker_tar_reader_init(&r);
    assert_false(docker_tar_reader_feed(&r, b.data, b.len));
    assert_non_null(strstr(r.error, "checksum"));
    assert_int_equal(s.n, 0);
    docker_tar_reader_free(&r);
    docker_tar_buf_free(&b);
}

static void fix_checksum(uint8_t *h)
{
    unsigned sum = 0;
    memset(h + 148, ' ', 8);
    for (size_t i = 0; i < DOCKER_TAR_BLOCK; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static void test_docker_tar_reader_refuses_oversized_pax_header(void **state)
{
    (void)state;
    uint8_t h[DOCKER_TAR_BLOCK] = {0};
    memcpy(h, "././@PaxHeader", 14);
    snprintf((char *)h + 124, 12, "%011o", (unsigned)(DOCKER_TAR_MAX_PAX + 1));
    h[156] = 'x';
    memcpy(h + 257, "ustar", 6);
    fix_checksum(h);
    tar_seen s = {0};
    docker_tar_reader r = {.on_entry = seen_entry, .arg = &s};
    docker_tar_reader_init(&r);
    assert_false(docker_tar_reader_feed(&r, h, sizeof(h)));
    assert_non_null(strstr(r.error, "too large"));
    docker_tar_reader_free(&r);
}

static void test_docker_tar_reader_refuses_malformed_pax_record(void **state)
{
    (void)state;
    /* A record whose length runs past the header's data. */
    const char rec[] = "99 path=x\n";
    uint8_t a[3 * DOCKER_TAR_BLOCK] = {0};
    memcpy(a, "././@PaxHeader", 14);
    snprintf((char *)a + 124, 12, "%011o", (unsigned)strlen(rec));
    a[156] = 'x';
    memcpy(a + 257, "ustar", 6);
    fix_checksum(a);
    memcpy(a + DOCKER_TAR_BLOCK, rec, strlen(rec));
    tar_seen s = {0};
    docker_tar_reader r = {.on_entry = seen_entry, .arg = &s};
    docker_tar_reader_init(&r);
    assert_false(docker_tar_reader_feed(&r, a, sizeof(a)));
    assert_non_null(strstr(r.error, "pax"));
    docker_tar_reader_free(&r);
}

/* An object's endpoint path: the reference percent-encoded (a name is the caller's text, and
 * "a/../../images" must stay one path segment), and a reference that does not fit is refused,
 * never sent as a path without it (before: "/containers//json" on a failed escape). */
static void test_docker_object_path_encodes_or_refuses(void **state)
{
    (void)state;
    char path[64];
    sbx_error err = {0};
    assert_true(docker_object_path(path, sizeof path, "/containers/", "abc123", "/json", &err));
    assert_string_equal(path, "/containers/abc123/json");
    assert_true(docker_object_path(path, sizeof path, "/networks/", "a/../x?y=1", "", &err));
    assert_string_equal(path, "/networks/a%2F..%2Fx%3Fy%3D1");
    char longref[80];
    memset(longref, 'a', sizeof longref - 1);
    longref[sizeof longref - 1] = '\0';
    assert_false(docker_object_path(path, sizeof path, "/containers/", longref, "/json", &err));
    assert_int_equal(err.code, SBX_E_INTERNAL);
    assert_non_null(strstr(err.message, "too long"));
    assert_string_equal(path, "");
}

/* Which networks keep containers apart, on the documents GET /networks/NAME answers (Docker
 * Engine API, NetworkInspect): a bridge only with inter-container communication off; the null
 * driver ("none"); never the host's network, a bridge without the option (Docker's default
 * bridge says "true"; a user-defined one without -o says nothing and is on), an internal
 * bridge with it on (internal cuts the way out, not the way between), or another driver. */
static void test_docker_network_isolation_verdicts(void **state)
{
    (void)state;
    static const struct {
        const char *doc;
        bool apart;
    } cases[] = {
        {"{\"Name\":\"sbx-allow\",\"Driver\":\"bridge\",\"Options\":"
         "{\"com.docker.network.bridge.enable_icc\":\"false\"}}",
         true},
        {"{\"Name\":\"none\",\"Driver\":\"null\",\"Options\":{}}", true},
        {"{\"Name\":\"bridge\",\"Driver\":\"bridge\",\"Options\":"
         "{\"com.docker.network.bridge.default_bridge\":\"true\","
         "\"com.docker.network.bridge.enable_icc\":\"true\"}}",
         false},
        {"{\"Name\":\"mine\",\"Driver\":\"bridge\",\"Options\":{}}", false},
        {"{\"Name\":\"mine\",\"Driver\":\"bridge\"}", false},
        {"{\"Name\":\"in\",\"Driver\":\"bridge\",\"Internal\":true}", false},
        {"{\"Name\":\"odd\",\"Driver\":\"bridge\",\"Options\":"
         "{\"com.docker.network.bridge.enable_icc\":false}}",
         false},
        {"{\"Name\":\"host\",\"Driver\":\"host\"}", false},
        {"{\"Name\":\"o\",\"Driver\":\"overlay\",\"Options\":"
         "{\"com.docker.network.bridge.enable_icc\":\"false\"}}",
         false},
        {"{\"Name\":\"x\"}", false},
        {"[]", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *j = json_loads(cases[i].doc, 0, NULL);
        assert_non_null(j);
        const char *why = docker_network_shared(j);
        if (cases[i].apart != (why == NULL))
            fail_msg("%s: %s", cases[i].doc, why ? why : "kept apart");
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_demux_splits_stdout_and_stderr_fed_byte_by_byte),
        cmocka_unit_test(test_docker_demux_refuses_unknown_stream_type),
        cmocka_unit_test(test_docker_demux_refuses_nonzero_padding),
        cmocka_unit_test(test_docker_demux_huge_frame_length_is_streamed_not_buffered),
        cmocka_unit_test(test_docker_tar_roundtrip_keeps_long_names_modes_and_content),
        cmocka_unit_test(test_docker_tar_reader_refuses_bad_checksum),
        cmocka_unit_test(test_docker_tar_reader_refuses_oversized_pax_header),
        cmocka_unit_test(test_docker_tar_reader_refuses_malformed_pax_record),
        cmocka_unit_test(test_docker_network_isolation_verdicts),
        cmocka_unit_test(test_docker_object_path_encodes_or_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
