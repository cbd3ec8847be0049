/* test_binding.c - the deployment secret file rules and the binding HMAC (core/binding.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/binding.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/sbx-binding-XXXXXX");
    return mkdtemp(dir) == NULL;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) != 0;
}

static void test_binding_secret_is_created_0600_with_private_dir(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/sub/secret", dir);
    sbx_binding_key *k = NULL;
    assert_int_equal(sbx_binding_key_load(path, &k, NULL), SBX_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, SBX_SECRET_NEW_LEN);
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    sbx_binding_key_free(k);
}

static void test_binding_secret_readable_by_group_is_refused(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/secret", dir);
    sbx_binding_key *k = NULL;
    assert_int_equal(sbx_binding_key_load(path, &k, NULL), SBX_OK);
    sbx_binding_key_free(k);
    chmod(path, 0640);
    sbx_error err;
    assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
    assert_null(k);
    assert_non_null(strstr(err.message, "chmod 600"));
}

static void test_binding_secret_symlink_is_refused(void **state)
{
    (void)state;
    char path[128], link[128];
    snprintf(path, sizeof(path), "%s/secret", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    sbx_binding_key *k = NULL;
    assert_int_equal(sbx_binding_key_load(path, &k, NULL), SBX_OK);
    sbx_binding_key_free(k);
    assert_int_equal(symlink(path, link), 0);
    k = NULL;
    assert_int_not_equal(sbx_binding_key_load(link, &k, NULL), SBX_OK);
    assert_null(k);
}

/* What secret_file may not be: each is refused with its reason, nothing loaded, and a FIFO
 * (whose open would wait for a writer forever) refused at once. */
static void test_binding_secret_that_is_not_a_private_regular_file_is_refused(void **state)
{
    (void)state;
    char path[128];
    sbx_binding_key *k = NULL;
    sbx_error err = {0};

    snprintf(path, sizeof(path), "%s/adir", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(err.message, "is not a regular file"));
    assert_null(k);

    snprintf(path, sizeof(path), "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    alarm(10); /* a hang fails the test (SIGALRM) instead of stalling the suite */
    assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
    alarm(0);
    assert_non_null(strstr(err.message, "is not a regular file"));
    assert_null(k);

    snprintf(path, sizeof(path), "%s/short", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "holds 10 bytes; at least"));
    assert_non_null(strstr(err.message, "delete it to have a new one generated"));
    assert_null(k);

    if (geteuid() == 0) { /* owned by someone else: only root can make one here */
        snprintf(path, sizeof(path), "%s/theirs", dir);
        assert_int_equal(sbx_binding_key_load(path, &k, NULL), SBX_OK);
        sbx_binding_key_free(k);
        k = NULL;
        assert_int_equal(chown(path, 4242, 4242), 0);
        assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
        assert_non_null(strstr(err.message, "is owned by uid 4242, not by this user (uid 0)"));
        assert_null(k);
    }

    assert_int_equal(sbx_binding_key_load("", &k, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "no secret_file configured; set sandbox.secret_file"));
    assert_int_equal(sbx_binding_key_load(NULL, &k, &err), SBX_E_CONFIG);

    /* a configured secret_file never gets directories made for it (a typo would otherwise
     * give this process a secret of its own) */
    snprintf(path, sizeof(path), "%s/typo/secret", dir);
    assert_int_equal(sbx_binding_key_load_configured(path, &k, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "does not exist"));
    snprintf(path, sizeof(path), "%s/short/secret", dir); /* its "directory" is a file */
    assert_int_equal(sbx_binding_key_load_configured(path, &k, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "cannot open secret_file"));
    assert_non_null(strstr(err.message, "Not a directory"));
    assert_null(k);

    uint8_t few[8] = {0};
    assert_int_equal(sbx_binding_key_from_bytes(few, sizeof few, &k, &err), SBX_E_CONFIG);
    assert_non_null(strstr(err.message, "binding secret is 8 bytes; at least"));
    assert_null(k);
}

/* A secret in a directory another user owns, or this user's that anyone may write, is refused,
 * made or found: they could have put a file of theirs in its place. A sticky directory (as /tmp)
 * is not theirs to rearrange, and the check follows the real path, so a symlink does not hide
 * an open one. The directory is made with mkdtemp here, so it is this user's. */
static void test_binding_secret_in_a_directory_others_may_write_is_refused(void **state)
{
    (void)state;
    char open_dir[96], path[128], link_path[128];
    sbx_binding_key *k = NULL;
    sbx_error err = {0};
    snprintf(open_dir, sizeof(open_dir), "%s/open", dir);
    assert_int_equal(mkdir(open_dir, 0700), 0);
    assert_int_equal(chmod(open_dir, 0777), 0);
    snprintf(path, sizeof(path), "%s/secret", open_dir);
    assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(err.message, "has mode 0777: anyone may replace the secret"));
    assert_non_null(strstr(err.message, "chmod o-w"));
    assert_int_equal(access(path, F_OK), -1); /* nothing made there */
    assert_null(k);

    assert_int_equal(chmod(open_dir, 0700), 0); /* made while private, then opened up */
    assert_int_equal(sbx_binding_key_load(path, &k, NULL), SBX_OK);
    sbx_binding_key_free(k);
    k = NULL;
    assert_int_equal(chmod(open_dir, 0703), 0);
    assert_int_equal(sbx_binding_key_load_configured(path, &k, &err), SBX_E_PERMISSION_DENIED);
    assert_non_null(strstr(err.message, "has mode 0703"));
    snprintf(link_path, sizeof(link_path), "%s/via-link", dir);
    assert_int_equal(symlink(open_dir, link_path), 0);
    snprintf(link_path, sizeof(link_path), "%s/via-link/secret", dir);
    assert_int_equal(sbx_binding_key_load_configured(link_path, &k, &err), SBX_E_PERMISSION_DENIED);
    assert_null(k);

    assert_int_equal(chmod(open_dir, 01777), 0); /* sticky: nobody moves our file */
    assert_int_equal(sbx_binding_key_load_configured(path, &k, NULL), SBX_OK);
    sbx_binding_key_free(k);
    k = NULL;
    assert_int_equal(chmod(open_dir, 0770), 0); /* the group's: a grant made on purpose */
    assert_int_equal(sbx_binding_key_load_configured(path, &k, NULL), SBX_OK);
    sbx_binding_key_free(k);
    k = NULL;

    if (geteuid() == 0) { /* a directory of another user's: only root can make one here */
        assert_int_equal(chmod(open_dir, 0755), 0);
        assert_int_equal(chown(open_dir, 4242, 4242), 0);
        assert_int_equal(sbx_binding_key_load_configured(path, &k, &err), SBX_E_PERMISSION_DENIED);
        assert_non_null(strstr(err.message, "is owned by uid 4242, neither root nor this user"));
        assert_null(k);
        /* the fallback's name, /tmp/sbx-UID, taken first by another user: nothing made in it */
        snprintf(path, sizeof(path), "%s/new-secret", open_dir);
        assert_int_equal(sbx_binding_key_load(path, &k, &err), SBX_E_PERMISSION_DENIED);
        assert_int_equal(access(path, F_OK), -1);
        assert_null(k);
    }
}

static void test_binding_secret_is_stable_across_loads(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/secret", dir);
    sbx_binding_key *k1 = NULL, *k2 = NULL;
    assert_int_equal(sbx_binding_key_load(path, &k1, NULL), SBX_OK);
    assert_int_equal(sbx_binding_key_load(path, &k2, NULL), SBX_OK);
    sbx_session_handle h = SBX__V1__SESSION_HANDLE__INIT;
    h.session_id = "s1";
    h.sandbox_id = "fk-1";
    uint8_t a[SBX_BINDING_LEN], b[SBX_BINDING_LEN];
    assert_true(sbx_binding_sign(k1, &h, "alice", a));
    assert_true(sbx_binding_sign(k2, &h, "alice", b));
    assert_memory_equal(a, b, SBX_BINDING_LEN);
    sbx_binding_key_free(k1);
    sbx_binding_key_free(k2);
}

static void test_binding_verify_fails_for_other_subject_or_field(void **state)
{
    (void)state;
    const uint8_t key[32] = {1, 2, 3};
    sbx_binding_key *k = NULL;
    assert_int_equal(sbx_binding_key_from_bytes(key, sizeof(key), &k, NULL), SBX_OK);
    sbx_session_handle *h = sbx_session_handle_new();
    sbx_set_string(&h->session_id, "s1");
    sbx_set_string(&h->profile, "p");
    sbx_set_string(&h->provider, "fake");
    sbx_set_string(&h->sandbox_id, "fk-1");
    assert_true(sbx_binding_stamp(k, h, "alice"));
    assert_true(sbx_binding_verify(k, h, "alice"));
    assert_false(sbx_binding_verify(k, h, "bob"));
    /* Field boundaries are unambiguous: moving a character between fields changes the MAC. */
    sbx_set_string(&h->profile, "pf");
    sbx_set_string(&h->provider, "ake");
    assert_false(sbx_binding_verify(k, h, "alice"));
    sbx_message_free(&h->base);
    sbx_binding_key_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_binding_secret_is_created_0600_with_private_dir, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_binding_secret_readable_by_group_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_binding_secret_symlink_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_binding_secret_that_is_not_a_private_regular_file_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_binding_secret_in_a_directory_others_may_write_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binding_secret_is_stable_across_loads, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_binding_verify_fails_for_other_subject_or_field, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
