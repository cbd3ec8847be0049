/* test_ssm_units.c - the ec2_ssm provider's pure parts: shell quoting and script building, user
 * and env name validation, the shared credentials file parser, the STS XML parser, AWS error
 * codes, timestamps and session names, and the fake's interpreter (so a wrong fake cannot make
 * the provider tests pass). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fakes/ssm_fake.h"
#include "providers/ec2_ssm/aws.h"
#include "providers/ec2_ssm/creds.h"
#include "providers/ec2_ssm/shell.h"

static char *quoted(const char *s)
{
    sbx_strbuf b = {0};
    sbx_strbuf_shell_quote(&b, s, strlen(s));
    assert_false(b.oom);
    return b.p;
}

static void test_ssm_quote_plain_word(void **state)
{
    (void)state;
    char *q = quoted("hello");
    assert_string_equal(q, "'hello'");
    free(q);
}

static void test_ssm_quote_single_quote_is_closed_escaped_reopened(void **state)
{
    (void)state;
    char *q = quoted("it's");
    assert_string_equal(q, "'it'\\''s'");
    free(q);
}

static void test_ssm_quote_empty_word(void **state)
{
    (void)state;
    char *q = quoted("");
    assert_string_equal(q, "''");
    free(q);
}

/* Every quoted word, interpreted by the fake's shell, comes back byte for byte. */
static void test_ssm_quote_round_trips_through_a_shell(void **state)
{
    (void)state;
    const char *words[] = {"$(reboot)",  "`id`",      "a\"b",  "back\\slash",
                           "semi;colon", "new\nline", "'",     "''",
                           "pipe|amp&",  "*glob?",    "#hash", "tab\tx"};
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        char *q = quoted(words[i]);
        char script[512];
        snprintf(script, sizeof(script), "printf '%%s' %s", q);
        char *out = NULL, *err = NULL;
        assert_int_equal(ssm_fake_interpret(script, &out, &err), 0);
        assert_string_equal(out, words[i]);
        free(out);
        free(err);
        free(q);
    }
}

static void test_ssm_user_names(void **state)
{
    (void)state;
    assert_true(ssm_valid_user_name("deploy"));
    assert_true(ssm_valid_user_name("ec2-user"));
    assert_true(ssm_valid_user_name("_svc.app1"));
    assert_false(ssm_valid_user_name(""));
    assert_false(ssm_valid_user_name("-u"));
    assert_false(ssm_valid_user_name("1abc"));
    assert_false(ssm_valid_user_name("a b"));
    assert_false(ssm_valid_user_name("a;b"));
    assert_false(ssm_valid_user_name("a'b"));
    assert_false(ssm_valid_user_name("a$b"));
    assert_false(ssm_valid_user_name("abcdefghijabcdefghijabcdefghijabc")); /* 33 */
    assert_true(ssm_valid_user_name("abcdefghijabcdefghijabcdefghijab"));   /* 32 */
}

static void test_ssm_script_with_env_stdin_and_run_as(void **state)
{
    (void)state;
    const char *argv[] = {"cat"};
    const char *k[] = {"A"}, *v[] = {"x'y"};
    ssm_script_spec s = {.argv = (char *const *)argv,
                         .n_argv = 1,
                         .env_keys = k,
                         .env_values = v,
                         .n_env = 1,
                         .stdin_data = (const uint8_t *)"in",
                         .stdin_len = 2,
                         .run_as = "deploy"};
    char *script = NULL;
    sbx_error err = {0};
    assert_int_equal(ssm_build_script(&s, &script, &err), SBX_OK);
    assert_string_equal(script, "sudo -n -u 'deploy' -- sh -c 'export A='\\''x'\\''\\'\\'''\\''y"
                                "'\\''\nprintf '\\''%s'\\'' '\\''in'\\'' | '\\''cat'\\''\n'\n");
    char *out = NULL, *errs = NULL;
    assert_int_equal(ssm_fake_interpret(script, &out, &errs), 0);
    assert_string_equal(out, "in");
    free(out);
    free(errs);
    free(script);
}

static void test_ssm_script_too_large_is_refused(void **state)
{
    (void)state;
    char *big = malloc(SSM_MAX_SCRIPT_BYTES + 10);
    memset(big, 'x', SSM_MAX_SCRIPT_BYTES + 9);
    big[SSM_MAX_SCRIPT_BYTES + 9] = '\0';
    ssm_script_spec s = {.shell = big, .interpreter = "sh"};
    char *script = NULL;
    sbx_error err = {0};
    assert_int_equal(ssm_build_script(&s, &script, &err), SBX_E_INVALID_ARGUMENT);
    assert_null(script);
    free(big);
}

static void test_ssm_script_empty_is_refused(void **state)
{
    (void)state;
    ssm_script_spec s = {.shell = "", .interpreter = "sh"};
    char *script = NULL;
    sbx_error err = {0};
    assert_int_equal(ssm_build_script(&s, &script, &err), SBX_E_INVALID_ARGUMENT);
}

/* ---- credentials file ---------------------------------------------------------------------- */

static const char *creds_file = "# comment\n"
                                "; another\n"
                                "[default]\n"
                                "aws_access_key_id = AKIDDEFAULT\n"
                                "aws_secret_access_key = secretdefault\n"
                                "\n"
                                "[ work ]\r\n"
                                "AWS_ACCESS_KEY_ID=AKIDWORK\r\n"
                                "aws_secret_access_key =  secret/work+x  \r\n"
                                "aws_session_token = tok\r\n"
                                "region = eu-west-1\r\n";

static void test_ssm_creds_file_default_profile(void **state)
{
    (void)state;
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(creds_file, strlen(creds_file), "default", "f", &c, &err),
                     SBX_OK);
    assert_string_equal(c.access_key_id, "AKIDDEFAULT");
    assert_string_equal(c.secret_access_key, "secretdefault");
    assert_null(c.session_token);
    aws_creds_clear(&c);
}

static void test_ssm_creds_file_named_profile_with_token(void **state)
{
    (void)state;
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(creds_file, strlen(creds_file), "work", "f", &c, &err),
                     SBX_OK);
    assert_string_equal(c.access_key_id, "AKIDWORK");
    assert_string_equal(c.secret_access_key, "secret/work+x");
    assert_string_equal(c.session_token, "tok");
    aws_creds_clear(&c);
}

static void test_ssm_creds_file_missing_profile_names_it(void **state)
{
    (void)state;
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(creds_file, strlen(creds_file), "nope", "f", &c, &err),
                     SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "[nope]"));
    assert_null(strstr(err.message, "secretdefault"));
}

static void test_ssm_creds_file_incomplete_profile(void **state)
{
    (void)state;
    const char *t = "[p]\naws_access_key_id = A\n";
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(t, strlen(t), "p", "f", &c, &err), SBX_E_CONFIG);
}

static void test_ssm_creds_file_garbage_line_is_refused_without_echo(void **state)
{
    (void)state;
    const char *t = "[p]\nthis-is-a-secret-looking-line\n";
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(t, strlen(t), "p", "f", &c, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "line 2"));
    assert_null(strstr(err.message, "secret-looking"));
}

static void test_ssm_creds_file_long_line_is_refused(void **state)
{
    (void)state;
    size_t n = AWS_CREDS_MAX_LINE + 100;
    char *t = malloc(n + 8);
    strcpy(t, "[p]\nk=");
    memset(t + 6, 'v', n);
    t[n + 6] = '\0';
    aws_creds c = {0};
    sbx_error err = {0};
    assert_int_equal(aws_creds_parse_file(t, strlen(t), "p", "f", &c, &err), SBX_E_CONFIG);
    free(t);
}

/* ---- STS XML ------------------------------------------------------------------------------- */

static void test_ssm_sts_parse_credentials_with_entities(void **state)
{
    (void)state;
    const char *xml = "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
                      "<AssumeRoleResult><Credentials>\n"
                      "  <AccessKeyId>ASIAEXAMPLE</AccessKeyId>\n"
                      "  <SecretAccessKey>s/e+c</SecretAccessKey>\n"
                      "  <SessionToken>a&amp;b&lt;c&gt;d&#43;e</SessionToken>\n"
                      "  <Expiration>2026-11-29T20:00:00Z</Expiration>\n"
                      "</Credentials></AssumeRoleResult></AssumeRoleResponse>";
    aws_creds c = {0};
    char code[AWS_CODE_MAX], msg[64];
    assert_int_equal(aws_sts_parse(xml, strlen(xml), &c, code, msg, sizeof(msg)), SBX_OK);
    assert_string_equal(c.access_key_id, "ASIAEXAMPLE");
    assert_string_equal(c.secret_access_key, "s/e+c");
    assert_string_equal(c.session_token, "a&b<c>d+e");
    assert_int_equal(c.expires_unix_s, 1795982400);
    aws_creds_clear(&c);
}

static void test_ssm_sts_parse_error_response(void **state)
{
    (void)state;
    const char *xml = "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                      "<Message>not authorized</Message></Error></ErrorResponse>";
    aws_creds c = {0};
    char code[AWS_CODE_MAX], msg[64];
    assert_int_equal(aws_sts_parse(xml, strlen(xml), &c, code, msg, sizeof(msg)), SBX_E_PROVISION);
    assert_string_equal(code, "AccessDenied");
    assert_string_equal(msg, "not authorized");
    assert_null(c.access_key_id);
}

static void test_ssm_sts_parse_rejects_incomplete_and_garbage(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "not xml at all",
        "<Credentials><AccessKeyId>A</AccessKeyId></Credentials>",
        "<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
        "<SessionToken>T</SessionToken><Expiration>tomorrow</Expiration></Credentials>",
        "<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        aws_creds c = {0};
        char code[AWS_CODE_MAX], msg[64];
        assert_int_equal(aws_sts_parse(bad[i], strlen(bad[i]), &c, code, msg, sizeof(msg)),
                         SBX_E_PROVISION);
        assert_null(c.access_key_id);
    }
}

static void test_ssm_sts_parse_refuses_oversized_values(void **state)
{
    (void)state;
    size_t n = AWS_XML_MAX_VALUE + 10;
    char *xml = malloc(n + 512);
    char *p = xml;
    p += sprintf(p, "<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S"
                    "</SecretAccessKey><SessionToken>");
    memset(p, 't', n);
    p += n;
    sprintf(p, "</SessionToken><Expiration>2026-11-29T20:00:00Z</Expiration></Credentials>");
    aws_creds c = {0};
    char code[AWS_CODE_MAX], msg[64];
    assert_int_equal(aws_sts_parse(xml, strlen(xml), &c, code, msg, sizeof(msg)), SBX_E_PROVISION);
    free(xml);
}

static void test_ssm_error_code_normalisation(void **state)
{
    (void)state;
    char c[AWS_CODE_MAX];
    aws_error_code("com.amazonaws.ssm#InvalidInstanceId", c);
    assert_string_equal(c, "InvalidInstanceId");
    aws_error_code("ThrottlingException:http://internal", c);
    assert_string_equal(c, "ThrottlingException");
    aws_error_code("Plain", c);
    assert_string_equal(c, "Plain");
    aws_error_code(NULL, c);
    assert_string_equal(c, "");
    aws_error_code("bad\ncode", c);
    assert_string_equal(c, "bad?code");
}

static void test_ssm_iso8601(void **state)
{
    (void)state;
    int64_t t = 0;
    assert_true(aws_parse_iso8601("2015-08-30T12:36:00Z", &t));
    assert_int_equal(t, 1440938160);
    assert_true(aws_parse_iso8601("2015-08-30T12:36:00.123Z", &t));
    assert_int_equal(t, 1440938160);
    assert_true(aws_parse_iso8601("2015-08-30T12:36:00+00:00", &t));
    assert_false(aws_parse_iso8601("2015-08-30T12:36:00+02:00", &t));
    assert_false(aws_parse_iso8601("2015-13-30T12:36:00Z", &t));
    assert_false(aws_parse_iso8601("yesterday", &t));
}

static void test_ssm_role_session_name(void **state)
{
    (void)state;
    char s[65];
    aws_role_session_name("alice@example.com", s);
    assert_string_equal(s, "sbx-alice@example.com");
    aws_role_session_name("a b/c:d", s);
    assert_string_equal(s, "sbx-a-b-c-d");
    aws_role_session_name("", s);
    assert_string_equal(s, "sbx-anonymous");
    char longname[200];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    aws_role_session_name(longname, s);
    assert_int_equal(strlen(s), 64);
}

/* ---- the fake's interpreter ---------------------------------------------------------------- */

static void test_ssm_fake_interpreter_basics(void **state)
{
    (void)state;
    char *out = NULL, *err = NULL;
    assert_int_equal(ssm_fake_interpret("echo a b\necho c >&2; exit 4\necho never", &out, &err), 4);
    assert_string_equal(out, "a b\n");
    assert_string_equal(err, "c\n");
    free(out);
    free(err);
    assert_int_equal(ssm_fake_interpret("nosuchprogram", &out, &err), 127);
    assert_non_null(strstr(err, "not found"));
    free(out);
    free(err);
    assert_int_equal(ssm_fake_interpret("sudo -u bob -- sh -c 'whoami'", &out, &err), 1);
    assert_string_equal(out, ""); /* without -n, sudo would prompt: refused */
    free(out);
    free(err);
    assert_int_equal(ssm_fake_interpret("sudo -n -u bob -- sh -c 'whoami'", &out, &err), 0);
    assert_string_equal(out, "bob\n");
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ssm_quote_plain_word),
        cmocka_unit_test(test_ssm_quote_single_quote_is_closed_escaped_reopened),
        cmocka_unit_test(test_ssm_quote_empty_word),
        cmocka_unit_test(test_ssm_quote_round_trips_through_a_shell),
        cmocka_unit_test(test_ssm_user_names),
        cmocka_unit_test(test_ssm_script_with_env_stdin_and_run_as),
        cmocka_unit_test(test_ssm_script_too_large_is_refused),
        cmocka_unit_test(test_ssm_script_empty_is_refused),
        cmocka_unit_test(test_ssm_creds_file_default_profile),
        cmocka_unit_test(test_ssm_creds_file_named_profile_with_token),
        cmocka_unit_test(test_ssm_creds_file_missing_profile_names_it),
        cmocka_unit_test(test_ssm_creds_file_incomplete_profile),
        cmocka_unit_test(test_ssm_creds_file_garbage_line_is_refused_without_echo),
        cmocka_unit_test(test_ssm_creds_file_long_line_is_refused),
        cmocka_unit_test(test_ssm_sts_parse_credentials_with_entities),
        cmocka_unit_test(test_ssm_sts_parse_error_response),
        cmocka_unit_test(test_ssm_sts_parse_rejects_incomplete_and_garbage),
        cmocka_unit_test(test_ssm_sts_parse_refuses_oversized_values),
        cmocka_unit_test(test_ssm_error_code_normalisation),
        cmocka_unit_test(test_ssm_iso8601),
        cmocka_unit_test(test_ssm_role_session_name),
        cmocka_unit_test(test_ssm_fake_interpreter_basics),
    };
    return cmocka_run_group_tests_name("ssm_units", tests, NULL, NULL);
}
