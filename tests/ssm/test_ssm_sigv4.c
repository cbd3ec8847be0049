/* test_ssm_sigv4.c - runs EVERY case of AWS's Signature Version 4 test suite
 * ($SBX_SOURCE_DIR/tests/ssm/data/aws-sigv4, from awslabs/aws-c-auth, Apache-2.0) through the
 * ec2_ssm signer, for header signing and for presigned query signing, and compares every
 * intermediate step with the suite's artifact: canonical request, string to sign, signature and the
 * signed request. One cmocka test per case and mode, named "<case>/header" and "<case>/query", so
 * the output lists each case by name. A missing or short suite is a failure, never a silent pass.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <jansson.h>

#include "providers/ec2_ssm/sigv4.h"

/* The published v4 suite has 38 cases; fewer means the fixture was not found or was cut. */
#define SUITE_MIN_CASES 38
#define SUITE_MAX_CASES 256
#define MAX_FILE (1 << 20)

static char suite_dir[4096];

static char *read_text(const char *dir, const char *name, size_t *len_out)
{
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s/%s", suite_dir, dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        print_error("cannot open %s\n", path);
        return NULL;
    }
    char *buf = malloc(MAX_FILE + 1);
    size_t n = buf != NULL ? fread(buf, 1, MAX_FILE, f) : 0;
    fclose(f);
    if (buf == NULL)
        return NULL;
    buf[n] = '\0';
    if (len_out != NULL)
        *len_out = n;
    return buf;
}

/* The suite's single-value artifacts carry no trailing newline, but tolerate one. */
static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
}

typedef struct parsed_request {
    char *text; /* request.txt */
    char method[16];
    char *path;         /* malloc'd */
    char *query;        /* malloc'd or NULL */
    char *request_line; /* malloc'd: first line without "\n" */
    char *head_lines;   /* malloc'd: the header lines exactly as written, each ending "\n" */
    sigv4_header headers[32];
    char *names[32], *values[32];
    size_t n_headers;
    const char *body;
    size_t body_len;
} parsed_request;

static void parsed_free(parsed_request *r)
{
    free(r->text);
    free(r->path);
    free(r->query);
    free(r->request_line);
    free(r->head_lines);
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->names[i]);
        free(r->values[i]);
    }
}

/* request.txt: "METHOD PATH[?QUERY] HTTP/1.1", header lines "Name:value" (a line starting with
 * whitespace continues the previous value), a blank line, the body. Paths may hold spaces. */
static void parse_request(const char *dir, parsed_request *r)
{
    memset(r, 0, sizeof(*r));
    size_t len = 0;
    r->text = read_text(dir, "request.txt", &len);
    assert_non_null(r->text);
    char *nl = strchr(r->text, '\n');
    size_t l1 = nl != NULL ? (size_t)(nl - r->text) : len;
    r->request_line = strndup(r->text, l1);
    char *sp = strchr(r->request_line, ' ');
    char *ver = strstr(r->request_line, " HTTP/");
    assert_non_null(sp);
    assert_non_null(ver);
    assert_true((size_t)(sp - r->request_line) < sizeof(r->method));
    memcpy(r->method, r->request_line, (size_t)(sp - r->request_line));
    char *target = strndup(sp + 1, (size_t)(ver - sp - 1));
    char *q = strchr(target, '?');
    if (q != NULL) {
        r->query = strdup(q + 1);
        *q = '\0';
    }
    r->path = target;

    const char *p = nl != NULL ? nl + 1 : r->text + len;
    const char *head_start = p;
    const char *end = r->text + len;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t ll = e != NULL ? (size_t)(e - p) : (size_t)(end - p);
        if (ll == 0) { /* blank line: the body follows */
            r->head_lines = strndup(head_start, (size_t)(p - head_start));
            r->body = e + 1;
            r->body_len = (size_t)(end - (e + 1));
            break;
        }
        if ((p[0] == ' ' || p[0] == '\t') && r->n_headers > 0) {
            char *prev = r->values[r->n_headers - 1];
            size_t pl = strlen(prev);
            char *v = malloc(pl + 1 + ll + 1);
            memcpy(v, prev, pl);
            v[pl] = '\n';
            memcpy(v + pl + 1, p, ll);
            v[pl + 1 + ll] = '\0';
            free(prev);
            r->values[r->n_headers - 1] = v;
        } else {
            const char *colon = memchr(p, ':', ll);
            assert_non_null(colon);
            assert_true(r->n_headers < 32);
            r->names[r->n_headers] = strndup(p, (size_t)(colon - p));
            r->values[r->n_headers] = strndup(colon + 1, ll - (size_t)(colon - p) - 1);
            r->n_headers++;
        }
        p = e != NULL ? e + 1 : end;
    }
    if (r->head_lines == NULL) { /* no blank line: headers run to the end of the file */
        size_t hl = (size_t)(end - head_start);
        r->head_lines = malloc(hl + 2);
        memcpy(r->head_lines, head_start, hl);
        r->head_lines[hl] = '\0';
        if (hl > 0 && r->head_lines[hl - 1] != '\n')
            strcat(r->head_lines, "\n");
        r->body = end;
        r->body_len = 0;
    }
    for (size_t i = 0; i < r->n_headers; i++) {
        r->headers[i].name = r->names[i];
        r->headers[i].value = r->values[i];
    }
}

typedef struct context {
    json_t *root;
    sigv4_credentials creds;
    sigv4_params params;
} context;

static void load_context(const char *dir, context *c)
{
    memset(c, 0, sizeof(*c));
    char *txt = read_text(dir, "context.json", NULL);
    assert_non_null(txt);
    json_error_t jerr;
    c->root = json_loads(txt, 0, &jerr);
    free(txt);
    assert_non_null(c->root);
    json_t *cr = json_object_get(c->root, "credentials");
    c->creds.access_key_id = json_string_value(json_object_get(cr, "access_key_id"));
    c->creds.secret_access_key = json_string_value(json_object_get(cr, "secret_access_key"));
    c->creds.session_token = json_string_value(json_object_get(cr, "token"));
    c->params.region = json_string_value(json_object_get(c->root, "region"));
    c->params.service = json_string_value(json_object_get(c->root, "service"));
    c->params.normalize_path = json_is_true(json_object_get(c->root, "normalize"));
    c->params.sign_body = json_is_true(json_object_get(c->root, "sign_body"));
    c->params.omit_session_token = json_is_true(json_object_get(c->root, "omit_session_token"));
    c->params.expires_s = json_integer_value(json_object_get(c->root, "expiration_in_seconds"));
    const char *ts = json_string_value(json_object_get(c->root, "timestamp"));
    assert_non_null(ts);
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    assert_non_null(strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm));
    c->params.time_s = (int64_t)timegm(&tm);
}

static void expect_step(const char *dir, const char *file, const char *got)
{
    char *want = read_text(dir, file, NULL);
    assert_non_null(want);
    chomp(want);
    bool same = got != NULL && strcmp(want, got) == 0;
    if (!same)
        print_error("%s/%s differs\n--- expected\n%s\n--- got\n%s\n", dir, file, want,
                    got != NULL ? got : "(null)");
    free(want);
    assert_true(same);
}

static void run_case(const char *dir, bool query_mode)
{
    parsed_request r;
    context c;
    parse_request(dir, &r);
    load_context(dir, &c);
    sigv4_request req = {.method = r.method,
                         .path = r.path,
                         .query = r.query,
                         .headers = r.headers,
                         .n_headers = r.n_headers,
                         .body = r.body,
                         .body_len = r.body_len};
    sigv4_signed s;
    sbx_error err = {0};
    sbx_status st = query_mode ? sigv4_sign_query(&req, &c.creds, &c.params, &s, &err)
                               : sigv4_sign_headers(&req, &c.creds, &c.params, &s, &err);
    if (st != SBX_OK)
        print_error("%s: %s\n", dir, err.message);
    assert_int_equal(st, SBX_OK);

    const char *pfx = query_mode ? "query" : "header";
    char name[64];
    snprintf(name, sizeof(name), "%s-canonical-request.txt", pfx);
    expect_step(dir, name, s.canonical_request);
    snprintf(name, sizeof(name), "%s-string-to-sign.txt", pfx);
    expect_step(dir, name, s.string_to_sign);
    snprintf(name, sizeof(name), "%s-signature.txt", pfx);
    expect_step(dir, name, s.signature);

    /* The signed request: the request as written plus what the signer added. */
    size_t cap = strlen(r.text) + 8192 + (s.query_suffix ? strlen(s.query_suffix) : 0);
    for (size_t i = 0; i < s.n_added; i++)
        cap += strlen(s.added[i].value) + 64;
    char *out = malloc(cap);
    out[0] = '\0';
    if (query_mode) {
        char *ver = strstr(r.request_line, " HTTP/");
        strncat(out, r.request_line, (size_t)(ver - r.request_line));
        strcat(out, r.query != NULL ? "&" : "?");
        strcat(out, s.query_suffix);
        strcat(out, ver);
        strcat(out, "\n");
    } else {
        strcat(out, r.request_line);
        strcat(out, "\n");
    }
    strcat(out, r.head_lines);
    for (size_t i = 0; i < s.n_added; i++) {
        strcat(out, s.added[i].name);
        strcat(out, ":");
        strcat(out, s.added[i].value);
        strcat(out, "\n");
    }
    strcat(out, "\n");
    strncat(out, r.body, r.body_len);
    char *want =
        read_text(dir, query_mode ? "query-signed-request.txt" : "header-signed-request.txt", NULL);
    assert_non_null(want);
    /* Compare modulo trailing newlines at the very end (the files differ in that alone). */
    chomp(want);
    chomp(out);
    if (strcmp(want, out) != 0) {
        print_error("%s/%s-signed-request.txt differs\n--- expected\n%s\n--- got\n%s\n", dir, pfx,
                    want, out);
        free(want);
        free(out);
        fail();
    }
    free(want);
    free(out);
    sigv4_signed_clear(&s);
    json_decref(c.root);
    parsed_free(&r);
}

static void test_header_case(void **state)
{
    run_case((const char *)*state, false);
}
static void test_query_case(void **state)
{
    run_case((const char *)*state, true);
}

/* Secondary checks that the suite cannot express. */
static void test_sigv4_rejects_caller_supplied_authorization(void **state)
{
    (void)state;
    sigv4_header h[] = {{"Host", "example.amazonaws.com"}, {"Authorization", "forged"}};
    sigv4_request req = {.method = "GET", .path = "/", .headers = h, .n_headers = 2};
    sigv4_credentials cr = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL};
    sigv4_params p = {
        .region = "us-east-1", .service = "ssm", .time_s = 1440938160, .normalize_path = true};
    sigv4_signed s;
    sbx_error err = {0};
    assert_int_equal(sigv4_sign_headers(&req, &cr, &p, &s, &err), SBX_E_INVALID_ARGUMENT);
    assert_null(strstr(err.message, cr.secret_access_key));
}

static void test_sigv4_error_never_contains_secret(void **state)
{
    (void)state;
    sigv4_header h[] = {{"Host", "example.amazonaws.com"}};
    sigv4_request req = {.method = "GET", .path = "/", .headers = h, .n_headers = 1};
    sigv4_credentials cr = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", NULL};
    sigv4_params p = {.region = "us east 1", .service = "ssm", .time_s = 1440938160};
    sigv4_signed s;
    sbx_error err = {0};
    assert_int_equal(sigv4_sign_headers(&req, &cr, &p, &s, &err), SBX_E_INVALID_ARGUMENT);
    assert_null(strstr(err.message, cr.secret_access_key));
}

static void test_sigv4_amz_date_round_trips(void **state)
{
    (void)state;
    char d[SIGV4_AMZ_DATE_LEN];
    sigv4_amz_date(1440938160, d);
    assert_string_equal(d, "20150830T123600Z");
    int64_t t = 0;
    assert_true(sigv4_parse_amz_date(d, &t));
    assert_int_equal(t, 1440938160);
    assert_false(sigv4_parse_amz_date("2015-08-30T12:36:00Z", &t));
    assert_false(sigv4_parse_amz_date("20151330T123600Z", &t));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(void)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    snprintf(suite_dir, sizeof(suite_dir), "%s/tests/ssm/data/aws-sigv4", src != NULL ? src : ".");
    DIR *d = opendir(suite_dir);
    if (d == NULL) {
        fprintf(stderr,
                "FAIL: the SigV4 suite is not at %s (SBX_SOURCE_DIR=%s); it is part of "
                "the source tree (tests/ssm/data/aws-sigv4)\n",
                suite_dir, src != NULL ? src : "(unset)");
        return 1;
    }
    char *cases[SUITE_MAX_CASES] = {0};
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < SUITE_MAX_CASES) {
        if (de->d_name[0] == '.')
            continue;
        char probe[8192];
        snprintf(probe, sizeof(probe), "%s/%s/context.json", suite_dir, de->d_name);
        FILE *f = fopen(probe, "r");
        if (f == NULL)
            continue;
        fclose(f);
        cases[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(cases, n, sizeof(char *), cmp_str);
    if (n < SUITE_MIN_CASES) {
        fprintf(stderr, "FAIL: only %zu SigV4 cases under %s, expected at least %d\n", n, suite_dir,
                SUITE_MIN_CASES);
        return 1;
    }
    size_t nt = 2 * n + 3;
    struct CMUnitTest *tests = calloc(nt, sizeof(*tests));
    char **names = calloc(2 * n, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        names[2 * i] = malloc(strlen(cases[i]) + 8);
        names[2 * i + 1] = malloc(strlen(cases[i]) + 8);
        sprintf(names[2 * i], "%s/header", cases[i]);
        sprintf(names[2 * i + 1], "%s/query", cases[i]);
        tests[2 * i] = (struct CMUnitTest){names[2 * i], test_header_case, NULL, NULL, cases[i]};
        tests[2 * i + 1] =
            (struct CMUnitTest){names[2 * i + 1], test_query_case, NULL, NULL, cases[i]};
    }
    tests[2 * n] =
        (struct CMUnitTest)cmocka_unit_test(test_sigv4_rejects_caller_supplied_authorization);
    tests[2 * n + 1] = (struct CMUnitTest)cmocka_unit_test(test_sigv4_error_never_contains_secret);
    tests[2 * n + 2] = (struct CMUnitTest)cmocka_unit_test(test_sigv4_amz_date_round_trips);
    printf("SigV4 suite: %zu cases from %s\n", n, suite_dir);
    int rc = _cmocka_run_group_tests("ssm_sigv4", tests, nt, NULL, NULL);
    for (size_t i = 0; i < n; i++) {
        free(cases[i]);
        free(names[2 * i]);
        free(names[2 * i + 1]);
    }
    free(names);
    free(tests);
    return rc;
}
