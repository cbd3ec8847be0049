/* test_replay.c - the recorded corpus (recordings/fake-basic.rec, made from the fake provider)
 * replays with identical completions through the embedded and the thread broker, and an edited
 * recorded completion is reported as a difference naming the field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"
#include "sbx/replay.h"

typedef struct env {
    char dir[64];
    char corpus[1024];
    sbx_config *cfg;
    sbx_engine *e;
} env;

static int setup(void **state)
{
    env *t = calloc(1, sizeof(*t));
    snprintf(t->dir, sizeof(t->dir), "/tmp/sbx-replay-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    const char *src = getenv("SBX_SOURCE_DIR");
    assert_non_null(src);
    char cfg_path[1024];
    snprintf(cfg_path, sizeof(cfg_path), "%s/tests/contract/recordings/fake.yaml", src);
    snprintf(t->corpus, sizeof(t->corpus), "%s/tests/contract/recordings/fake-basic.rec", src);
    sbx_error err;
    if (sbx_config_load(cfg_path, &t->cfg, &err) != SBX_OK)
        fail_msg("%s", err.message);
    char secret[128];
    snprintf(secret, sizeof(secret), "%s/secret", t->dir);
    free(t->cfg->secret_file);
    t->cfg->secret_file = strdup(secret);
    assert_int_equal(sbx_engine_new(t->cfg, &t->e, &err), SBX_OK);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    env *t = *state;
    sbx_engine_free(t->e);
    sbx_config_free(t->cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
    if (system(cmd) != 0)
        return 1;
    free(t);
    return 0;
}

static void replay_expect_identical(env *t, sbx_broker *b)
{
    sbx_replay_report rep;
    sbx_error err;
    assert_int_equal(sbx_replay_file(t->corpus, b, &rep, &err), SBX_OK);
    if (rep.differing != 0)
        fail_msg("%zu of %zu records differ:\n%s", rep.differing, rep.total, rep.text);
    assert_true(rep.total >= 20);
    sbx_replay_report_clear(&rep);
}

static void test_replay_corpus_identical_through_embedded(void **state)
{
    env *t = *state;
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    replay_expect_identical(t, b);
    sbx_broker_free(b);
}

static void test_replay_corpus_identical_through_thread(void **state)
{
    env *t = *state;
    sbx_thread_broker_opts o = {4, 64, 64, 0};
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_thread(t->e, &o, &b, NULL), SBX_OK);
    replay_expect_identical(t, b);
    sbx_broker_free(b);
}

static void test_replay_reports_edited_completion(void **state)
{
    env *t = *state;
    sbx_recording **recs = NULL;
    size_t n = 0;
    assert_int_equal(sbx_recordings_load(t->corpus, 1000, &recs, &n, NULL), SBX_OK);
    assert_true(n > 1);
    sbx_result *r = recs[0]->completion->result; /* "echo hello" */
    assert_non_null(r);
    sbx_set_bytes(&r->stdout, "goodbye\n", 8);
    char edited[128];
    snprintf(edited, sizeof(edited), "%s/edited.rec", t->dir);
    assert_int_equal(sbx_recordings_save(edited, recs, n, NULL), SBX_OK);
    sbx_recordings_free(recs, n);
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    sbx_replay_report rep;
    assert_int_equal(sbx_replay_file(edited, b, &rep, NULL), SBX_OK);
    assert_int_equal(rep.differing, 1);
    assert_non_null(strstr(rep.text, "record 1 (run_command"));
    assert_non_null(
        strstr(rep.text, "result.stdout: recorded \"goodbye\\n\", replayed \"hello\\n\""));
    sbx_replay_report_clear(&rep);
    sbx_broker_free(b);
}

static void test_replay_truncated_file_is_an_error_naming_offset(void **state)
{
    env *t = *state;
    char cut[128];
    snprintf(cut, sizeof(cut), "%s/cut.rec", t->dir);
    FILE *in = fopen(t->corpus, "rb");
    FILE *out = fopen(cut, "wb");
    char buf[100];
    size_t got = fread(buf, 1, sizeof(buf), in);
    fwrite(buf, 1, got, out);
    fclose(in);
    fclose(out);
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    sbx_replay_report rep;
    sbx_error err;
    assert_int_equal(sbx_replay_file(cut, b, &rep, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "offset 0"));
    sbx_replay_report_clear(&rep);
    sbx_broker_free(b);
}

/* A frame protobuf-c 1.4 alone would accept (field number 0) must be refused by the strict
 * decoder, naming the frame, instead of failing later when the record is copied. */
static void test_replay_frame_with_field_zero_is_refused(void **state)
{
    env *t = *state;
    char bad[128];
    snprintf(bad, sizeof(bad), "%s/field0.rec", t->dir);
    static const unsigned char frame[] = {0x00, 0x00, 0x00, 0x03, 0x80, 0x00, 0x6f};
    FILE *out = fopen(bad, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(frame, 1, sizeof(frame), out), sizeof(frame));
    fclose(out);
    sbx_broker *b = NULL;
    assert_int_equal(sbx_broker_open_embedded(t->e, &b, NULL), SBX_OK);
    sbx_replay_report rep;
    sbx_error err;
    assert_int_equal(sbx_replay_file(bad, b, &rep, &err), SBX_E_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "offset 0"));
    assert_non_null(strstr(err.message, "numbered 0"));
    sbx_replay_report_clear(&rep);
    sbx_broker_free(b);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_replay_corpus_identical_through_embedded),
        T(test_replay_corpus_identical_through_thread),
        T(test_replay_reports_edited_completion),
        T(test_replay_truncated_file_is_an_error_naming_offset),
        T(test_replay_frame_with_field_zero_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
