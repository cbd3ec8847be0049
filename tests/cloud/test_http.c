/* test_http.c - the cloud providers' HTTP helper (providers/common/http.c) against the fake
 * server framework: retries (429 + Retry-After, 5xx only when idempotent), timeouts, bounded
 * bodies, JSON errors, streaming, redaction of secrets in errors and traces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakes/fake_http.h"
#include "providers/common/http.h"
#include "sbx/contract.h"

#define TEST_KEY "sk_test_0123456789abcdef"

typedef struct fixture {
    fake_http *server;
    sbx_http_client *client;
    char trace[16384];
} fixture;

static void trace_collect(void *arg, const char *line)
{
    fixture *fx = arg;
    size_t n = strlen(fx->trace);
    snprintf(fx->trace + n, sizeof fx->trace - n, "%s\n", line);
}

static void ok_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg, (void)req;
    fake_response_json(resp, 200, "{\"ok\":true}");
}

static void big_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg, (void)req;
    size_t n = 2u * 1024u * 1024u;
    char *buf = malloc(n);
    memset(buf, 'x', n);
    fake_response_status(resp, 200);
    fake_response_body(resp, buf, n);
    free(buf);
}

static void echo_key_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg;
    const char *k = fake_request_header(req, "X-API-Key");
    fake_response_json(resp, 401, "{\"code\":401,\"message\":\"Invalid API key %s\"}", k ? k : "");
}

static void chunked_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg, (void)req;
    fake_response_status(resp, 200);
    fake_response_chunk(resp, "one,", 4, 0);
    fake_response_chunk(resp, "two,", 4, 20);
    fake_response_chunk(resp, "three", 5, 20);
}

static void deep_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg, (void)req;
    char body[400];
    size_t n = 0;
    for (int i = 0; i < 100; i++)
        body[n++] = '[';
    for (int i = 0; i < 100; i++)
        body[n++] = ']';
    body[n] = 0;
    fake_response_json(resp, 200, "%s", body);
}

/* Answers with X-Next-Token set to the query's `n` bytes of 't' (none when n is 0). */
static void token_handler(void *arg, const fake_request *req, fake_response *resp)
{
    (void)arg;
    const char *q = fake_request_query(req, "n");
    size_t n = q != NULL ? strtoul(q, NULL, 10) : 0;
    if (n > 0 && n < 4096) {
        char tok[4096];
        memset(tok, 't', n);
        tok[n] = '\0';
        fake_response_header(resp, "X-Next-Token", tok);
    }
    fake_response_json(resp, 200, "[]");
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    fx->server = fake_http_start();
    assert_non_null(fx->server);
    fake_http_route(fx->server, NULL, "/ok", ok_handler, NULL);
    fake_http_route(fx->server, NULL, "/big", big_handler, NULL);
    fake_http_route(fx->server, NULL, "/echo-key", echo_key_handler, NULL);
    fake_http_route(fx->server, NULL, "/chunked", chunked_handler, NULL);
    fake_http_route(fx->server, NULL, "/deep", deep_handler, NULL);
    fake_http_route(fx->server, NULL, "/token", token_handler, NULL);
    sbx_http_client_config cfg = {
        .provider = "e2b",
        .auth_hint = "check that E2B_API_KEY holds a valid key",
        .backoff_base_ms = 10,
        .total_timeout_ms = 20000,
        .max_body_bytes = 1024 * 1024,
        .trace = trace_collect,
        .trace_arg = fx,
    };
    sbx_error err;
    assert_int_equal(sbx_http_client_new(&cfg, &fx->client, &err), SBX_OK);
    assert_true(sbx_http_client_add_secret(fx->client, TEST_KEY));
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    sbx_http_client_free(fx->client);
    fake_http_stop(fx->server);
    free(fx);
    return 0;
}

static char *url(fixture *fx, const char *path)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s%s", fake_http_url(fx->server), path);
    return buf;
}

static const char *const key_headers[] = {"X-API-Key: " TEST_KEY, "Content-Type: application/json"};

static sbx_status call(fixture *fx, const char *method, const char *path, bool idempotent,
                       sbx_http_response *resp, sbx_error *err)
{
    sbx_http_request req = {.method = method,
                            .url = url(fx, path),
                            .headers = key_headers,
                            .n_headers = 2,
                            .idempotent = idempotent};
    if (strcmp(method, "POST") == 0) {
        req.body = "{}";
        req.body_len = 2;
    }
    return sbx_http_do(fx->client, &req, resp, err);
}

static void test_http_429_with_retry_after_is_retried_after_waiting(void **state)
{
    fixture *fx = *state;
    fake_fault f = {
        .status = 429, .retry_after = "1", .body = "{\"code\":429,\"message\":\"slow down\"}"};
    fake_http_fault(fx->server, "POST", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    int64_t t0 = sbx_monotonic_ms();
    assert_int_equal(call(fx, "POST", "/ok", false, &resp, &err), SBX_OK);
    int64_t took = sbx_monotonic_ms() - t0;
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(fake_http_log_matching(fx->server, "POST", "/ok"), 2);
    /* Retry-After: 1 was honoured (a lower bound is robust on a loaded machine). */
    assert_true(took >= 900);
    sbx_http_response_clear(&resp);
}

static void test_http_retry_after_longer_than_cap_returns_the_429(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.status = 429, .retry_after = "3600"};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/ok", true, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 429);
    assert_int_equal(resp.attempts, 1);
    sbx_http_request req = {.method = "GET", .url = url(fx, "/ok")};
    assert_int_equal(sbx_http_check(fx->client, &req, &resp, &err), SBX_E_RESOURCE_EXHAUSTED);
    sbx_http_response_clear(&resp);
}

static void test_http_retry_after_parses_seconds_and_http_dates(void **state)
{
    (void)state;
    assert_int_equal(sbx_http_parse_retry_after("7", 0), 7000);
    assert_int_equal(sbx_http_parse_retry_after(" 0", 0), 0);
    /* Wed, 21 Oct 2015 07:28:00 GMT = 1445412480 */
    assert_int_equal(sbx_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412470),
                     10000);
    assert_int_equal(sbx_http_parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412490), 0);
    assert_int_equal(sbx_http_parse_retry_after("soon", 0), -1);
    assert_int_equal(sbx_http_parse_retry_after("5x", 0), -1);
    assert_int_equal(sbx_http_parse_retry_after(NULL, 0), -1);
}

static void test_http_503_then_success_is_retried_when_idempotent(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.status = 503, .body = "{\"message\":\"unavailable\"}"};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/ok", true, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.attempts, 2);
    assert_int_equal(fake_http_log_matching(fx->server, "GET", "/ok"), 2);
    sbx_http_response_clear(&resp);
}

static void test_http_503_on_non_idempotent_post_is_not_retried(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.status = 503, .body = "{\"message\":\"try later\"}"};
    fake_http_fault(fx->server, "POST", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "POST", "/ok", false, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 503);
    assert_int_equal(resp.attempts, 1);
    assert_int_equal(fake_http_log_matching(fx->server, "POST", "/ok"), 1);
    sbx_http_request req = {.method = "POST", .url = url(fx, "/ok")};
    assert_int_equal(sbx_http_check(fx->client, &req, &resp, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "returned 503: try later"));
    sbx_http_response_clear(&resp);
}

static void test_http_persistent_5xx_gives_up_after_max_attempts(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.status = 502, .times = -1};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/ok", true, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 502);
    assert_int_equal(resp.attempts, SBX_HTTP_MAX_ATTEMPTS);
    assert_int_equal(fake_http_log_matching(fx->server, "GET", "/ok"), SBX_HTTP_MAX_ATTEMPTS);
    sbx_http_response_clear(&resp);
}

static void test_http_truncated_body_is_a_provision_error(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.truncate = true, .times = -1};
    fake_http_fault(fx->server, "POST", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "POST", "/ok", false, &resp, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "truncated"));
    assert_non_null(strstr(err.message, "e2b: POST http://127.0.0.1:"));
    sbx_http_response_clear(&resp);
}

static void test_http_invalid_json_is_a_provision_error_naming_the_call(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.invalid_json = true};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/ok", true, &resp, &err), SBX_OK);
    sbx_http_request req = {.method = "GET", .url = url(fx, "/ok")};
    json_t *j = NULL;
    assert_int_equal(sbx_http_response_json(fx->client, &req, &resp, &j, &err), SBX_E_PROVISION);
    assert_null(j);
    assert_non_null(strstr(err.message, "invalid JSON at line 1"));
    assert_non_null(strstr(err.message, "GET http://127.0.0.1:"));
    sbx_http_response_clear(&resp);
}

static void test_http_too_deep_json_is_refused(void **state)
{
    fixture *fx = *state;
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/deep", true, &resp, &err), SBX_OK);
    json_t *j = NULL;
    sbx_http_request req = {.method = "GET", .url = url(fx, "/deep")};
    assert_int_equal(sbx_http_response_json(fx->client, &req, &resp, &j, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "nesting deeper than"));
    sbx_http_response_clear(&resp);
}

static void test_http_slow_response_hits_the_timeout(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.delay_ms = 5000};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_request req = {
        .method = "GET", .url = url(fx, "/ok"), .idempotent = true, .timeout_ms = 300};
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_E_TIMEOUT);
    assert_non_null(strstr(err.message, "timed out"));
    sbx_http_response_clear(&resp);
}

static void test_http_deadline_bounds_the_call(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.delay_ms = 5000};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    sbx_http_request req = {.method = "GET",
                            .url = url(fx, "/ok"),
                            .idempotent = true,
                            .deadline_mono_ms = sbx_monotonic_ms() + 300};
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_E_TIMEOUT);
    assert_non_null(strstr(err.message, "deadline"));
    sbx_http_response_clear(&resp);
}

static void test_http_oversize_body_is_refused(void **state)
{
    fixture *fx = *state;
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "GET", "/big", true, &resp, &err), SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.message, "larger than the limit"));
    assert_null(resp.body);
    sbx_http_response_clear(&resp);
}

static void test_http_401_names_the_env_var_and_redacts_the_key(void **state)
{
    fixture *fx = *state;
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(call(fx, "POST", "/echo-key", false, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 401);
    sbx_http_request req = {.method = "POST", .url = url(fx, "/echo-key")};
    assert_int_equal(sbx_http_check(fx->client, &req, &resp, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "e2b: POST http://127.0.0.1:"));
    assert_non_null(strstr(err.message, "/echo-key returned 401: Invalid API key"));
    assert_non_null(strstr(err.message, "check that E2B_API_KEY holds a valid key"));
    assert_null(strstr(err.message, TEST_KEY));
    assert_non_null(strstr(err.message, "[REDACTED]"));
    sbx_http_response_clear(&resp);
}

static void test_http_trace_never_shows_credentials(void **state)
{
    fixture *fx = *state;
    sbx_http_response resp;
    sbx_error err;
    const char *const hdrs[] = {"Authorization: Bearer " TEST_KEY, "X-API-Key: other-key-42"};
    sbx_http_request req = {
        .method = "GET", .url = url(fx, "/ok"), .headers = hdrs, .n_headers = 2};
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_OK);
    assert_non_null(strstr(fx->trace, "GET http://127.0.0.1:"));
    assert_non_null(strstr(fx->trace, "Authorization: [REDACTED]"));
    assert_null(strstr(fx->trace, TEST_KEY));
    assert_null(strstr(fx->trace, "other-key-42"));
    sbx_http_response_clear(&resp);
}

typedef struct collected {
    char data[256];
    size_t len;
    int calls;
} collected;

static bool collect_body(void *arg, const uint8_t *data, size_t len)
{
    collected *c = arg;
    if (c->len + len >= sizeof c->data)
        return false;
    memcpy(c->data + c->len, data, len);
    c->len += len;
    c->calls++;
    return true;
}

static void test_http_streamed_body_reaches_the_callback(void **state)
{
    fixture *fx = *state;
    collected c = {0};
    sbx_http_request req = {.method = "POST",
                            .url = url(fx, "/chunked"),
                            .body = "x",
                            .body_len = 1,
                            .on_body = collect_body,
                            .on_body_arg = &c};
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_OK);
    assert_int_equal(resp.status, 200);
    assert_null(resp.body);
    assert_int_equal(c.len, strlen("one,two,three"));
    assert_memory_equal(c.data, "one,two,three", c.len);
    assert_true(c.calls >= 2);
    sbx_http_response_clear(&resp);
}

static void test_http_connection_refused_is_a_provision_error(void **state)
{
    fixture *fx = *state;
    /* A port that was just free: start and stop a server to learn one. */
    fake_http *tmp = fake_http_start();
    char u[128];
    snprintf(u, sizeof u, "%s/x", fake_http_url(tmp));
    fake_http_stop(tmp);
    sbx_http_request req = {.method = "GET", .url = u, .idempotent = true};
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "e2b: GET http://127.0.0.1:"));
    sbx_http_response_clear(&resp);
}

static void test_http_cancel_abandons_the_call(void **state)
{
    fixture *fx = *state;
    fake_fault f = {.delay_ms = 5000};
    fake_http_fault(fx->server, "GET", "/ok", &f);
    volatile int cancel = 1;
    sbx_http_request req = {.method = "GET", .url = url(fx, "/ok"), .cancel = &cancel};
    sbx_http_response resp;
    sbx_error err;
    assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_E_TIMEOUT);
    assert_non_null(strstr(err.message, "cancelled"));
    sbx_http_response_clear(&resp);
}

static void test_http_redact_replaces_every_occurrence(void **state)
{
    fixture *fx = *state;
    char text[256];
    snprintf(text, sizeof text, "a %s b %s c", TEST_KEY, TEST_KEY);
    sbx_http_redact(fx->client, text);
    assert_string_equal(text, "a [REDACTED] b [REDACTED] c");
}

/* capture_header keeps one response header: its value, NULL when absent, and "" (never a
 * truncated value) when longer than SBX_HTTP_MAX_CAPTURED bytes. */
static void test_http_captured_header_is_whole_or_refused(void **state)
{
    fixture *fx = *state;
    const struct {
        const char *n;
        const char *want; /* NULL: absent; "": too long; else its first bytes */
        size_t len;
    } cases[] = {{"0", NULL, 0}, {"5", "ttttt", 5}, {"1024", "tttt", 1024}, {"1025", "", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/token?n=%s", cases[i].n);
        sbx_http_request req = {
            .method = "GET", .url = url(fx, path), .capture_header = "x-next-token"};
        sbx_http_response resp;
        sbx_error err;
        assert_int_equal(sbx_http_do(fx->client, &req, &resp, &err), SBX_OK);
        if (cases[i].want == NULL) {
            assert_null(resp.captured);
        } else {
            assert_non_null(resp.captured);
            assert_int_equal(strlen(resp.captured), cases[i].len);
            assert_memory_equal(resp.captured, cases[i].want, strlen(cases[i].want));
        }
        sbx_http_response_clear(&resp);
    }
}

/* A prefix of at most max bytes ends between UTF-8 characters. */
static void test_http_utf8_prefix_never_cuts_a_character(void **state)
{
    (void)state;
    assert_int_equal(sbx_utf8_prefix_len("abc", 5), 3);
    assert_int_equal(sbx_utf8_prefix_len("abcde", 5), 5);
    assert_int_equal(sbx_utf8_prefix_len("abcdef", 5), 5);
    assert_int_equal(sbx_utf8_prefix_len("ab\xc3\xa9z", 3), 2);       /* inside e-acute */
    assert_int_equal(sbx_utf8_prefix_len("ab\xc3\xa9z", 4), 4);       /* right after it */
    assert_int_equal(sbx_utf8_prefix_len("a\xf0\x9f\x98\x80", 3), 1); /* inside a 4-byte one */
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_http_429_with_retry_after_is_retried_after_waiting),
        T(test_http_retry_after_longer_than_cap_returns_the_429),
        T(test_http_retry_after_parses_seconds_and_http_dates),
        T(test_http_503_then_success_is_retried_when_idempotent),
        T(test_http_503_on_non_idempotent_post_is_not_retried),
        T(test_http_persistent_5xx_gives_up_after_max_attempts),
        T(test_http_truncated_body_is_a_provision_error),
        T(test_http_invalid_json_is_a_provision_error_naming_the_call),
        T(test_http_too_deep_json_is_refused),
        T(test_http_slow_response_hits_the_timeout),
        T(test_http_deadline_bounds_the_call),
        T(test_http_oversize_body_is_refused),
        T(test_http_401_names_the_env_var_and_redacts_the_key),
        T(test_http_trace_never_shows_credentials),
        T(test_http_streamed_body_reaches_the_callback),
        T(test_http_connection_refused_is_a_provision_error),
        T(test_http_cancel_abandons_the_call),
        T(test_http_redact_replaces_every_occurrence),
        T(test_http_captured_header_is_whole_or_refused),
        T(test_http_utf8_prefix_never_cuts_a_character),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
