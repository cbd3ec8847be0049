/* test_worker_replay.c - the recorded corpus (tests/contract/recordings) replays through the
 * remote broker -- over HTTP/2 to a real worker running the thread broker -- with completions
 * identical to the recorded (embedded) ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "sbx/replay.h"
#include "worker/worker_fixture.h"

static void test_worker_recorded_corpus_replays_identically_through_remote(void **state)
{
    (void)state;
    const char *src = getenv("SBX_SOURCE_DIR");
    assert_non_null(src);
    char cfg[1024], corpus[1024];
    snprintf(cfg, sizeof cfg, "%s/tests/contract/recordings/fake.yaml", src);
    snprintf(corpus, sizeof corpus, "%s/tests/contract/recordings/fake-basic.rec", src);
    worker_fixture f;
    worker_fixture_opts o = {.config_path = cfg};
    fixture_start(&f, &o);
    sbx_broker *b = fixture_client(&f, NULL, NULL, NULL);
    assert_string_equal(sbx_broker_flavor(b), "remote");
    sbx_replay_report rep;
    sbx_error err;
    assert_int_equal(sbx_replay_file(corpus, b, &rep, &err), SBX_OK);
    if (rep.differing != 0)
        fail_msg("%zu of %zu records differ through remote:\n%s", rep.differing, rep.total,
                 rep.text);
    assert_true(rep.total >= 20);
    sbx_replay_report_clear(&rep);
    sbx_broker_free(b);
    fixture_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_recorded_corpus_replays_identically_through_remote),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
