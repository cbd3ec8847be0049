/* test_worker_log.c - the worker's JSON log lines (worker/log.c): strings are escaped, a line
 * that would be too long stays one valid object marked truncated, and a log file receives the
 * queued lines and is reopened on request; an idle log's writer sleeps until a line comes.
 * Validity is checked by Python's json module (an independent parser) on the lines written to
 * a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/observe.h"
#include "support/switches.h"

static void test_json_strings_are_escaped(void **state)
{
    (void)state;
    worker_json j;
    worker_json_begin(&j, WORKER_LOG_INFO, "call");
    worker_json_str(&j, "principal", "a\"b\\c\nd\x01");
    worker_json_int(&j, "bytes_out", 42);
    worker_json_ms(&j, "duration_ms", 1234567);
    worker_json_end(&j);
    assert_non_null(strstr(j.buf, "\"principal\":\"a\\\"b\\\\c\\u000ad\\u0001\""));
    assert_non_null(strstr(j.buf, "\"bytes_out\":42"));
    assert_non_null(strstr(j.buf, "\"duration_ms\":1234.567"));
    assert_non_null(strstr(j.buf, "\"level\":\"info\",\"event\":\"call\""));
    assert_int_equal(j.buf[0], '{');
    assert_int_equal(j.buf[j.len - 1], '}');
    assert_int_equal(strlen(j.buf), j.len);
}

static void test_json_line_that_is_too_long_stays_one_object(void **state)
{
    (void)state;
    char big[WORKER_LOG_FIELD_MAX * 2];
    memset(big, '"', sizeof big - 1); /* every byte needs an escape: 2 bytes each */
    big[sizeof big - 1] = '\0';
    worker_json j;
    worker_json_begin(&j, WORKER_LOG_WARN, "auth_failure");
    for (int i = 0; i < 10; i++)
        worker_json_str(&j, "message", big);
    worker_json_end(&j);
    assert_true(j.len < WORKER_LOG_LINE_MAX);
    assert_non_null(strstr(j.buf, ",\"truncated\":true}"));
    /* fields are whole: the escaped field was cut at WORKER_LOG_FIELD_MAX input bytes */
    const char *first = strstr(j.buf, "\"message\":\"");
    assert_non_null(first);
    const char *end = strstr(first + 11, "\",\"");
    assert_non_null(end);
    assert_int_equal((size_t)(end - (first + 11)), 2 * WORKER_LOG_FIELD_MAX);
}

static void test_log_file_gets_lines_and_is_reopened(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-log-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64], moved[80], cmd[1024];
    snprintf(path, sizeof path, "%s/worker.log", dir);
    snprintf(moved, sizeof moved, "%s.1", path);
    worker_log *log = NULL;
    assert_int_equal(worker_log_open(path, WORKER_LOG_INFO, &log, NULL), SBX_OK);
    assert_true(worker_log_enabled(log, WORKER_LOG_WARN));
    assert_false(worker_log_enabled(log, WORKER_LOG_DEBUG));
    worker_json j;
    worker_json_begin(&j, WORKER_LOG_INFO, "first");
    worker_json_str(&j, "text", "\xe2\x9c\x93 \t tab");
    worker_json_end(&j);
    worker_log_line(log, j.buf, j.len);
    worker_log_close(log); /* writes what is queued */

    assert_int_equal(worker_log_open(path, WORKER_LOG_INFO, &log, NULL), SBX_OK);
    assert_int_equal(rename(path, moved), 0);
    worker_log_reopen(log);
    for (int tries = 0; access(path, F_OK) != 0 && tries < 3000; tries++)
        usleep(1000);
    assert_int_equal(access(path, F_OK), 0);
    worker_json_begin(&j, WORKER_LOG_INFO, "second");
    worker_json_end(&j);
    worker_log_line(log, j.buf, j.len);
    worker_log_close(log);

    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import json,sys\n"
             "a=[json.loads(l) for l in open(sys.argv[1])]\n"
             "b=[json.loads(l) for l in open(sys.argv[2])]\n"
             "assert [x[\"event\"] for x in a]==[\"first\"], a\n"
             "assert a[0][\"text\"]==\"\\u2713 \\t tab\", a\n"
             "assert [x[\"event\"] for x in b]==[\"second\"], b' %s %s",
             moved, path);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Voluntary context switches of this process's threads other than the caller's: the writer. */
static long other_threads_switches(void)
{
    long total = 0;
    char path[320];
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atol(e->d_name) == (long)syscall(SYS_gettid))
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        long n = sbx_test_switches_at(path);
        if (n > 0)
            total += n;
    }
    closedir(d);
    return total;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* The writer of an idle log sleeps until a line comes (it woke every 20 ms, 50 times a second
 * in an idle worker), and the first line after the pause still reaches the file. */
static void test_idle_log_writer_sleeps_until_a_line_comes(void **state)
{
    (void)state;
    char dir[] = "/tmp/sbx-test-log-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64], cmd[128];
    snprintf(path, sizeof path, "%s/worker.log", dir);
    worker_log *log = NULL;
    assert_int_equal(worker_log_open(path, WORKER_LOG_INFO, &log, NULL), SBX_OK);
    worker_json j;
    for (int round = 0; round < 2; round++) {
        long before = file_size(path);
        worker_json_begin(&j, WORKER_LOG_INFO, round == 0 ? "first" : "after the pause");
        worker_json_end(&j);
        worker_log_line(log, j.buf, j.len);
        for (int tries = 0; file_size(path) == before && tries < 5000; tries++)
            usleep(1000);
        assert_true(file_size(path) > before);
        if (round == 1)
            break;
        usleep(50 * 1000); /* the writer is back to waiting */
        long switches = other_threads_switches();
        usleep(400 * 1000);
        long woke = other_threads_switches() - switches;
        assert_true(woke <= 2); /* 20 times in 400 ms when it polled */
    }
    worker_log_close(log);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_log_file_in_a_missing_directory_is_a_config_error(void **state)
{
    (void)state;
    worker_log *log = NULL;
    sbx_error err = {0};
    assert_int_equal(
        worker_log_open("/nonexistent-sbx-dir/worker.log", WORKER_LOG_INFO, &log, &err),
        SBX_E_CONFIG);
    assert_null(log);
    assert_non_null(strstr(err.message, "worker.log_file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_strings_are_escaped),
        cmocka_unit_test(test_json_line_that_is_too_long_stays_one_object),
        cmocka_unit_test(test_log_file_gets_lines_and_is_reopened),
        cmocka_unit_test(test_idle_log_writer_sleeps_until_a_line_comes),
        cmocka_unit_test(test_log_file_in_a_missing_directory_is_a_config_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
