/* test_contract.c - the contract helpers of include/sbx/contract.h (core/contract.c): uuids,
 * requests and completions, deep copies, the setters' ownership rule (run under ASan/LSan, a
 * leak fails the suite), the bounded decoders, and sbx_strlist.
 * Must not depend on any provider, broker or the network. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/limits.h"
#include "sbx/contract.h"
#include "sbx/provider.h"

/* ---- uuid --------------------------------------------------------------------------------- */

static bool is_lower_hex(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

static void test_uuid_v4_has_the_canonical_form_and_version_bits(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        char id[SBX_UUID_LEN];
        memset(id, 'Z', sizeof(id));
        sbx_uuid_v4(id);
        assert_int_equal(strlen(id), 36);
        for (int i = 0; i < 36; i++) {
            if (i == 8 || i == 13 || i == 18 || i == 23)
                assert_int_equal(id[i], '-');
            else
                assert_true(is_lower_hex(id[i]));
        }
        assert_int_equal(id[14], '4');           /* version 4 */
        assert_non_null(strchr("89ab", id[19])); /* RFC 4122 variant 10xx */
    }
}

static int cmp_ids(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static void test_uuid_v4_does_not_repeat(void **state)
{
    (void)state;
    enum { N = 20000 };
    char(*ids)[SBX_UUID_LEN] = calloc(N, SBX_UUID_LEN);
    assert_non_null(ids);
    for (int i = 0; i < N; i++)
        sbx_uuid_v4(ids[i]);
    qsort(ids, N, SBX_UUID_LEN, cmp_ids);
    for (int i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

/* The uuids a fork()ed child mints are not the ones its parent mints next: the random bytes are
 * drawn ahead, per thread, so a child that kept its parent's would repeat them. */
static void test_uuid_v4_differs_between_parent_and_forked_child(void **state)
{
    (void)state;
    char warm[SBX_UUID_LEN];
    sbx_uuid_v4(warm); /* the pool is filled: the next bytes are already in memory */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char child[4][SBX_UUID_LEN];
        for (int i = 0; i < 4; i++)
            sbx_uuid_v4(child[i]);
        _exit(write(fds[1], child, sizeof child) == (ssize_t)sizeof child ? 0 : 1);
    }
    close(fds[1]);
    char parent[4][SBX_UUID_LEN], child[4][SBX_UUID_LEN];
    for (int i = 0; i < 4; i++)
        sbx_uuid_v4(parent[i]);
    assert_int_equal(read(fds[0], child, sizeof child), (ssize_t)sizeof child);
    close(fds[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 4; k++)
            assert_string_not_equal(parent[i], child[k]);
}

enum { UUID_THREADS = 8, UUID_PER_THREAD = 2000 };

static void *mint_uuids(void *arg)
{
    char(*ids)[SBX_UUID_LEN] = arg;
    for (int i = 0; i < UUID_PER_THREAD; i++)
        sbx_uuid_v4(ids[i]);
    return NULL;
}

/* Threads each draw from a pool of their own: no two hand out the same id. */
static void test_uuid_v4_does_not_repeat_across_threads(void **state)
{
    (void)state;
    char(*ids)[SBX_UUID_LEN] = calloc(UUID_THREADS * UUID_PER_THREAD, SBX_UUID_LEN);
    assert_non_null(ids);
    pthread_t th[UUID_THREADS];
    for (int t = 0; t < UUID_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, mint_uuids, ids + t * UUID_PER_THREAD), 0);
    for (int t = 0; t < UUID_THREADS; t++)
        pthread_join(th[t], NULL);
    qsort(ids, UUID_THREADS * UUID_PER_THREAD, SBX_UUID_LEN, cmp_ids);
    for (int i = 1; i < UUID_THREADS * UUID_PER_THREAD; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

/* ---- requests ----------------------------------------------------------------------------- */

static void test_request_new_has_a_fresh_task_id_and_no_op(void **state)
{
    (void)state;
    sbx_request *a = sbx_request_new(), *b = sbx_request_new();
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(strlen(a->task_id), 36);
    assert_int_equal(a->task_id[14], '4');
    assert_string_not_equal(a->task_id, b->task_id);
    assert_int_equal(a->op_case, SBX__V1__EXECUTION_REQUEST__OP__NOT_SET);
    assert_string_equal(sbx_request_op_name(a), "none");
    assert_null(a->principal);
    assert_null(a->policy);
    assert_null(a->session);
    sbx_request_free(a);
    sbx_request_free(b);
}

static void test_request_free_and_completion_free_accept_null(void **state)
{
    (void)state;
    sbx_request_free(NULL);
    sbx_completion_free(NULL);
    sbx_message_free(NULL);
    assert_null(sbx_message_copy(NULL));
}

/* A request whose op is a RunCommand with two argv entries and a policy, built with the
 * setters only (so that freeing it checks the ownership rule). */
static sbx_request *build_run_command(void)
{
    sbx_request *req = sbx_request_new();
    assert_non_null(req);
    Sbx__V1__RunCommand *rc = malloc(sizeof(*rc));
    assert_non_null(rc);
    sbx__v1__run_command__init(rc);
    assert_true(sbx_add_string(&rc->n_argv, &rc->argv, "echo"));
    assert_true(sbx_add_string(&rc->n_argv, &rc->argv, "héllo 世界"));
    assert_true(sbx_set_bytes(&rc->stdin, "in\0put", 6));
    req->run_command = rc;
    req->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    req->policy = sbx_policy_new();
    assert_non_null(req->policy);
    req->policy->memory_mb = 512;
    assert_true(sbx_add_string(&req->policy->n_fs_write, &req->policy->fs_write, "/out"));
    req->principal = sbx_principal_new();
    assert_non_null(req->principal);
    assert_true(sbx_set_string(&req->principal->subject, "alice"));
    return req;
}

static void test_request_op_name_names_each_op(void **state)
{
    (void)state;
    static const struct {
        Sbx__V1__ExecutionRequest__OpCase op;
        const char *name;
    } ops[] = {
        {SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE, "run_code"},
        {SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND, "run_command"},
        {SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES, "install_packages"},
        {SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE, "write_file"},
        {SBX__V1__EXECUTION_REQUEST__OP_READ_FILE, "read_file"},
        {SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES, "list_files"},
        {SBX__V1__EXECUTION_REQUEST__OP_DESTROY, "destroy"},
    };
    sbx_request req;
    sbx__v1__execution_request__init(&req);
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        req.op_case = ops[i].op;
        assert_string_equal(sbx_request_op_name(&req), ops[i].name);
        /* the name is the protobuf field name of the op */
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
            &sbx__v1__execution_request__descriptor, (unsigned)ops[i].op);
        assert_non_null(f);
        assert_string_equal(f->name, ops[i].name);
    }
}

static void test_request_copy_is_deep_and_equal(void **state)
{
    (void)state;
    sbx_request *req = build_run_command();
    sbx_request *copy = sbx_request_copy(req);
    assert_non_null(copy);
    assert_ptr_not_equal(copy, req);
    assert_ptr_not_equal(copy->run_command, req->run_command);
    assert_ptr_not_equal(copy->task_id, req->task_id);
    assert_string_equal(copy->task_id, req->task_id);
    assert_int_equal(copy->op_case, SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND);
    assert_int_equal(copy->run_command->n_argv, 2);
    assert_string_equal(copy->run_command->argv[1], "héllo 世界");
    assert_int_equal(copy->run_command->stdin.len, 6);
    assert_memory_equal(copy->run_command->stdin.data, "in\0put", 6);
    assert_int_equal(copy->policy->memory_mb, 512);

    /* Changing the original leaves the copy alone. */
    assert_true(sbx_set_string(&req->run_command->argv[0], "printf"));
    req->policy->memory_mb = 1;
    assert_string_equal(copy->run_command->argv[0], "echo");
    assert_int_equal(copy->policy->memory_mb, 512);
    sbx_request_free(req);

    /* The copy outlives the original and packs to what a fresh pack of it gives. */
    size_t len = 0;
    uint8_t *bytes = sbx_message_pack(&copy->base, &len);
    assert_non_null(bytes);
    sbx_request *again = NULL;
    assert_int_equal(sbx_request_decode(bytes, len, len, &again, NULL), SBX_OK);
    assert_string_equal(again->run_command->argv[1], "héllo 世界");
    free(bytes);
    sbx_request_free(again);
    sbx_request_free(copy);
}

/* A ListFiles request followed by fields this contract does not know (varint field 100 and a
 * length-delimited field 101), as a newer client would send. */
static const uint8_t request_with_unknown_fields[] = {
    0x0a, 0x03, 'a',  'b',  'c',           /* task_id = "abc" */
    0x7a, 0x03, 0x0a, 0x01, '/',           /* list_files { path = "/" } */
    0xa0, 0x06, 0x2a,                      /* field 100 (varint) = 42 */
    0xaa, 0x06, 0x04, 'n',  'e', 'w', '!', /* field 101 (bytes) = "new!" */
};

static void test_request_copy_keeps_unknown_fields(void **state)
{
    (void)state;
    sbx_request *req = NULL;
    assert_int_equal(sbx_request_decode(request_with_unknown_fields,
                                        sizeof(request_with_unknown_fields), 1024, &req, NULL),
                     SBX_OK);
    assert_int_equal(req->base.n_unknown_fields, 2);
    sbx_request *copy = sbx_request_copy(req);
    sbx_request_free(req);
    assert_non_null(copy);
    assert_int_equal(copy->base.n_unknown_fields, 2);
    size_t len = 0;
    uint8_t *bytes = sbx_message_pack(&copy->base, &len);
    assert_non_null(bytes);
    assert_int_equal(len, sizeof(request_with_unknown_fields));
    assert_memory_equal(bytes, request_with_unknown_fields, len);
    free(bytes);
    sbx_request_free(copy);
}

/* A copy is what a pack and an unpack would give, also for hand-built messages that hold what
 * the wire cannot: a NULL string comes out as the shared empty one, a oneof case whose message is
 * NULL comes out unset; bytes are copied whole; the original is left as it was. */
static void test_copy_is_what_the_wire_would_give(void **state)
{
    (void)state;
    sbx_request *req = build_run_command();
    free(req->task_id);
    req->task_id = NULL;
    sbx_request *copy = sbx_request_copy(req);
    assert_non_null(copy);
    assert_non_null(copy->task_id);
    assert_string_equal(copy->task_id, "");
    assert_null(req->task_id);
    size_t a = 0, b = 0;
    uint8_t *pa = sbx_message_pack(&req->base, &a), *pb = sbx_message_pack(&copy->base, &b);
    assert_int_equal(a, b);
    assert_memory_equal(pa, pb, a);
    free(pa);
    free(pb);
    sbx_request_free(copy);

    sbx_message_free((ProtobufCMessage *)req->run_command);
    req->run_command = NULL; /* the case still says RUN_COMMAND */
    copy = sbx_request_copy(req);
    assert_non_null(copy);
    assert_int_equal(copy->op_case, SBX__V1__EXECUTION_REQUEST__OP__NOT_SET);
    assert_int_equal(req->op_case, SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND);
    sbx_request_free(copy);
    req->op_case = SBX__V1__EXECUTION_REQUEST__OP__NOT_SET;
    sbx_request_free(req);

    sbx_completion *c = sbx_completion_new("t");
    assert_non_null(c);
    assert_true(sbx_set_bytes(&c->result->stdout, "out\0put", 7));
    sbx_completion *cc = sbx_completion_copy(c);
    assert_non_null(cc);
    assert_ptr_not_equal(cc->result->stdout.data, c->result->stdout.data);
    assert_int_equal(cc->result->stdout.len, 7);
    assert_memory_equal(cc->result->stdout.data, "out\0put", 7);
    sbx_completion_free(c);
    sbx_completion_free(cc);
}

/* ---- completions -------------------------------------------------------------------------- */

static void test_completion_new_is_succeeded_with_an_empty_result(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_new("task-1");
    assert_non_null(c);
    assert_string_equal(c->task_id, "task-1");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_NONE);
    assert_non_null(c->result);
    assert_int_equal(c->result->exit_code, 0);
    assert_int_equal(c->result->stdout.len, 0);
    assert_string_equal(c->error, "");
    assert_string_equal(c->notice, "");
    sbx_completion_free(c);
}

static void test_completion_fail_is_failed_with_code_and_text(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_fail("task-2", SBX_E_POLICY,
                                            "cannot enforce %s on profile '%s'", "cpu", "default");
    assert_non_null(c);
    assert_string_equal(c->task_id, "task-2");
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_POLICY);
    assert_string_equal(c->error, "cannot enforce cpu on profile 'default'");
    assert_null(c->result);
    sbx_completion_free(c);
}

static void test_completion_fail_with_timeout_is_timed_out(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_fail("task-3", SBX_E_TIMEOUT, "deadline of %d ms", 5);
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_TIMEOUT);
    assert_string_equal(c->error, "deadline of 5 ms");
    sbx_completion_free(c);
}

static void test_completion_fail_with_ok_reports_internal(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_fail("task-4", SBX_OK, "oops");
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_INTERNAL);
    sbx_completion_free(c);
}

static void test_completion_fail_cuts_long_text_with_ellipsis(void **state)
{
    (void)state;
    char *big = malloc(3 * SBX_ERROR_MAX);
    assert_non_null(big);
    memset(big, 'x', 3 * SBX_ERROR_MAX - 1);
    big[3 * SBX_ERROR_MAX - 1] = '\0';
    sbx_completion *c = sbx_completion_fail("t", SBX_E_INTERNAL, "%s", big);
    assert_non_null(c);
    size_t n = strlen(c->error);
    assert_int_equal(n, SBX_ERROR_MAX - 1);
    assert_string_equal(c->error + n - 3, "...");
    sbx_completion_free(c);
    free(big);
}

static void test_completion_from_error_carries_code_and_message(void **state)
{
    (void)state;
    sbx_error err;
    sbx_error_set(&err, SBX_E_GONE, "sandbox %s no longer exists", "sbx-1");
    sbx_completion *c = sbx_completion_from_error("task-5", &err);
    assert_non_null(c);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_GONE);
    assert_string_equal(c->error, "sandbox sbx-1 no longer exists");
    sbx_completion_free(c);

    sbx_error_set(&err, SBX_E_TIMEOUT, "too slow");
    c = sbx_completion_from_error("task-6", &err);
    assert_int_equal(c->status, SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT);
    sbx_completion_free(c);

    c = sbx_completion_from_error("task-7", NULL);
    assert_non_null(c);
    assert_int_equal(c->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_INTERNAL);
    sbx_completion_free(c);
}

static void test_completion_add_notice_joins_with_semicolons(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_new("t");
    sbx_completion_add_notice(c, "the sandbox was recreated");
    assert_string_equal(c->notice, "the sandbox was recreated");
    sbx_completion_add_notice(c, "stdout cut at %d bytes", 1024);
    assert_string_equal(c->notice, "the sandbox was recreated; stdout cut at 1024 bytes");
    sbx_completion_add_notice(c, "idle reset");
    assert_string_equal(c->notice,
                        "the sandbox was recreated; stdout cut at 1024 bytes; idle reset");
    sbx_completion_free(c);
}

static void test_completion_copy_is_deep_and_lossless(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_new("t");
    assert_true(sbx_set_bytes(&c->result->stdout, "out", 3));
    assert_true(sbx_result_set_data(c->result, "container_id", "abc"));
    sbx_file *f = sbx_file_new();
    assert_true(sbx_set_string(&f->path, "/w/a"));
    assert_true(sbx_result_add_file(c->result, f));
    c->session = sbx_session_handle_new();
    assert_true(sbx_set_bytes(&c->session->binding, "\x01\x02\x00\x03", 4));
    sbx_completion_add_notice(c, "n");

    sbx_completion *copy = sbx_completion_copy(c);
    assert_non_null(copy);
    assert_ptr_not_equal(copy->result, c->result);
    size_t a_len = 0, b_len = 0;
    uint8_t *a = sbx_message_pack(&c->base, &a_len), *b = sbx_message_pack(&copy->base, &b_len);
    assert_int_equal(a_len, b_len);
    assert_memory_equal(a, b, a_len);
    free(a);
    free(b);
    sbx_completion_free(c);
    assert_string_equal(copy->result->files[0]->path, "/w/a");
    assert_string_equal(copy->result->provider_data[0]->value, "abc");
    assert_memory_equal(copy->session->binding.data, "\x01\x02\x00\x03", 4);
    sbx_completion_free(copy);
}

/* ---- setters and ownership (leaks show under ASan/LSan) ----------------------------------- */

static void test_set_string_replaces_and_null_resets_to_the_shared_empty(void **state)
{
    (void)state;
    sbx_session_handle *s = sbx_session_handle_new();
    assert_true(sbx_set_string(&s->sandbox_id, "first"));
    assert_true(sbx_set_string(&s->sandbox_id, "second")); /* "first" is freed */
    assert_string_equal(s->sandbox_id, "second");
    assert_true(sbx_set_string(&s->sandbox_id, NULL));
    assert_ptr_equal(s->sandbox_id, protobuf_c_empty_string);
    assert_true(sbx_set_string(&s->sandbox_id, ""));
    assert_ptr_equal(s->sandbox_id, protobuf_c_empty_string);
    assert_true(sbx_set_string(&s->name, "n"));
    sbx_message_free(&s->base); /* frees "n", never the shared empty string */
}

static void test_set_bytes_and_append_bytes_own_their_copy(void **state)
{
    (void)state;
    sbx_result *r = sbx_result_new();
    char src[] = "abc";
    assert_true(sbx_set_bytes(&r->stdout, src, 3));
    src[0] = 'z'; /* the field holds its own copy */
    assert_memory_equal(r->stdout.data, "abc", 3);
    assert_true(sbx_append_bytes(&r->stdout, "\0de", 3));
    assert_int_equal(r->stdout.len, 6);
    assert_memory_equal(r->stdout.data, "abc\0de", 6);
    assert_true(sbx_append_bytes(&r->stdout, NULL, 0));
    assert_int_equal(r->stdout.len, 6);
    assert_true(sbx_set_bytes(&r->stdout, NULL, 0));
    assert_int_equal(r->stdout.len, 0);
    assert_null(r->stdout.data);
    assert_true(sbx_append_bytes(&r->stderr, "err", 3)); /* append onto an empty field */
    assert_int_equal(r->stderr.len, 3);
    sbx_message_free(&r->base);
}

static void test_text_valid_accepts_utf8_and_refuses_the_rest(void **state)
{
    (void)state;
    assert_true(sbx_text_valid("", 0));
    assert_true(sbx_text_valid("plain", 5));
    assert_true(sbx_text_valid("\xe6\x97\xa5\xf0\x9f\xa6\x80", 7)); /* 日 crab */
    assert_false(sbx_text_valid("a\0b", 3));
    assert_false(sbx_text_valid("\xc0\xaf", 2));         /* overlong '/' */
    assert_false(sbx_text_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(sbx_text_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(sbx_text_valid("\xe6\x97", 2));         /* cut */
    assert_false(sbx_text_valid("\xff", 1));
}

static void test_set_text_replaces_what_is_not_utf8(void **state)
{
    (void)state;
    sbx_file *f = sbx_file_new();
    assert_true(sbx_set_text(&f->path, "/w/\xffname\0x\xe6\x97\xa5", 13));
    assert_string_equal(f->path, "/w/\xef\xbf\xbdname\xef\xbf\xbdx\xe6\x97\xa5");
    assert_true(sbx_text_valid(f->path, strlen(f->path)));
    assert_true(sbx_set_text(&f->path, "\xe6\x97", 2)); /* cut sequence: each byte replaced */
    assert_string_equal(f->path, "\xef\xbf\xbd\xef\xbf\xbd");
    assert_true(sbx_set_text(&f->path, "", 0));
    assert_ptr_equal(f->path, protobuf_c_empty_string);
    sbx_message_free(&f->base);
}

static void test_add_string_appends_copies(void **state)
{
    (void)state;
    sbx_principal *p = sbx_principal_new();
    char group[] = "admins";
    assert_true(sbx_add_string(&p->n_groups, &p->groups, group));
    group[0] = 'X';
    assert_true(sbx_add_string(&p->n_groups, &p->groups, NULL));
    assert_true(sbx_add_string(&p->n_groups, &p->groups, "ops"));
    assert_int_equal(p->n_groups, 3);
    assert_string_equal(p->groups[0], "admins");
    assert_string_equal(p->groups[1], "");
    assert_string_equal(p->groups[2], "ops");
    sbx_message_free(&p->base);
}

static void test_result_set_data_adds_and_replaces_keys(void **state)
{
    (void)state;
    sbx_result *r = sbx_result_new();
    assert_true(sbx_result_set_data(r, "image", "debian:12"));
    assert_true(sbx_result_set_data(r, "id", "c1"));
    assert_true(sbx_result_set_data(r, "image", "busybox")); /* replaced, not added */
    assert_int_equal(r->n_provider_data, 2);
    assert_string_equal(r->provider_data[0]->key, "image");
    assert_string_equal(r->provider_data[0]->value, "busybox");
    assert_string_equal(r->provider_data[1]->value, "c1");
    assert_true(sbx_result_add_file(r, sbx_file_new()));
    assert_true(sbx_result_add_file(r, sbx_file_new()));
    assert_int_equal(r->n_files, 2);
    sbx_message_free(&r->base);
}

/* ---- bounded decoding --------------------------------------------------------------------- */

static void test_request_decode_accepts_a_valid_message(void **state)
{
    (void)state;
    sbx_request *req = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    assert_int_equal(sbx_request_decode(request_with_unknown_fields,
                                        sizeof(request_with_unknown_fields),
                                        sizeof(request_with_unknown_fields), &req, &err),
                     SBX_OK);
    assert_string_equal(req->task_id, "abc");
    assert_int_equal(req->op_case, SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES);
    assert_string_equal(req->list_files->path, "/");
    assert_int_equal(err.code, SBX_OK);
    sbx_request_free(req);
}

static void test_request_decode_of_empty_input_is_an_empty_request(void **state)
{
    (void)state;
    sbx_request *req = NULL;
    assert_int_equal(sbx_request_decode((const uint8_t *)"", 0, 16, &req, NULL), SBX_OK);
    assert_non_null(req);
    assert_string_equal(req->task_id, "");
    sbx_request_free(req);
}

static void test_request_decode_refuses_input_over_the_limit(void **state)
{
    (void)state;
    sbx_request *req = (sbx_request *)(uintptr_t)1; /* must be reset to NULL */
    sbx_error err;
    assert_int_equal(sbx_request_decode(request_with_unknown_fields,
                                        sizeof(request_with_unknown_fields),
                                        sizeof(request_with_unknown_fields) - 1, &req, &err),
                     SBX_E_RESOURCE_EXHAUSTED);
    assert_null(req);
    assert_int_equal(err.code, SBX_E_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.message, "ExecutionRequest of 20 bytes"));
    assert_non_null(strstr(err.message, "limit of 19 bytes"));
}

static void test_request_decode_refuses_malformed_bytes(void **state)
{
    (void)state;
    static const struct {
        const char *why;
        uint8_t bytes[8];
        size_t len;
    } bad[] = {
        {"truncated varint", {0x40, 0x80}, 2},              /* deadline_ms, no end byte */
        {"length past the end", {0x0a, 0x05, 'a', 'b'}, 4}, /* task_id of 5, 2 given */
        {"wire type 7", {0x0f, 0x00}, 2},                   /* field 1, wire type 7 */
        {"field number 0", {0x00, 0x01}, 2},
        {"submessage past the end", {0x7a, 0x03, 0x0a, 0x05, 'x'}, 5},
        {"string for a varint field", {0x42, 0x01, 'x'}, 3}, /* deadline_ms as bytes */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sbx_request *req = NULL;
        sbx_error err;
        sbx_status st = sbx_request_decode(bad[i].bytes, bad[i].len, 1024, &req, &err);
        if (st != SBX_E_INVALID_ARGUMENT)
            fail_msg("%s: decoded with status %d", bad[i].why, (int)st);
        assert_null(req);
        assert_non_null(strstr(err.message, "not a valid sbx.v1 protobuf message"));
    }
}

static void expect_refused(const uint8_t *bytes, size_t len, const char *reason)
{
    sbx_request *req = NULL;
    sbx_error err;
    sbx_status st = sbx_request_decode(bytes, len, 1024, &req, &err);
    if (st != SBX_E_INVALID_ARGUMENT)
        fail_msg("decoded with status %d", (int)st);
    assert_null(req);
    if (strstr(err.message, reason) == NULL)
        fail_msg("message \"%s\" does not say \"%s\"", err.message, reason);
}

/* A RunCommand request with n empty argv strings, packed by hand (*len set; free it). */
static uint8_t *request_with_empty_args(size_t n, size_t *len)
{
    size_t inner = 2 * n;
    uint8_t *msg = malloc(inner + 16);
    assert_non_null(msg);
    uint8_t *w = msg;
    *w++ = 11 << 3 | 2; /* run_command */
    for (size_t v = inner; v; v >>= 7)
        *w++ = (uint8_t)((v & 0x7f) | (v >> 7 ? 0x80 : 0));
    if (inner == 0)
        *w++ = 0;
    for (size_t i = 0; i < n; i++) {
        *w++ = 1 << 3 | 2; /* argv: "" */
        *w++ = 0;
    }
    *len = (size_t)(w - msg);
    return msg;
}

/* A list longer than SBX_REQUEST_MAX_LIST is refused before it is decoded, naming the field
 * and the limit; one at the limit decodes. */
static void test_request_decode_refuses_a_list_over_the_limit_naming_it(void **state)
{
    (void)state;
    size_t len;
    uint8_t *at = request_with_empty_args(SBX_REQUEST_MAX_LIST, &len);
    sbx_request *req = NULL;
    assert_int_equal(sbx_request_decode(at, len, len, &req, NULL), SBX_OK);
    assert_int_equal(req->run_command->n_argv, SBX_REQUEST_MAX_LIST);
    sbx_request_free(req);
    free(at);
    uint8_t *over = request_with_empty_args(SBX_REQUEST_MAX_LIST + 1, &len);
    sbx_error err;
    assert_int_equal(sbx_request_decode(over, len, len, &req, &err), SBX_E_INVALID_ARGUMENT);
    assert_null(req);
    assert_non_null(strstr(err.message, "'argv' of sbx.v1.RunCommand"));
    assert_non_null(strstr(err.message, "4096"));
    free(over);
}

/* What decoding allocates is bounded by the input's size: 2 M unknown fields (6 MB on the
 * wire, a decoded entry and a scan slot each) are RESOURCE_EXHAUSTED, not hundreds of MB. */
static void test_request_decode_bounds_what_decoding_allocates(void **state)
{
    (void)state;
    size_t n = 2u << 20, len = 3 * n;
    uint8_t *msg = malloc(len);
    assert_non_null(msg);
    for (size_t i = 0; i < n; i++) { /* field 100, varint 0 */
        msg[3 * i] = 0xa0;
        msg[3 * i + 1] = 0x06;
        msg[3 * i + 2] = 0x00;
    }
    sbx_request *req = NULL;
    sbx_error err;
    assert_int_equal(sbx_request_decode(msg, len, len, &req, &err), SBX_E_RESOURCE_EXHAUSTED);
    assert_null(req);
    assert_non_null(strstr(err.message, "once decoded"));
    free(msg);
}

/* Completions come from workers, the queue's bucket and recording files: what decoding one
 * allocates is bounded too. 1,000,000 empty Result.files entries (2 MB on the wire, a File each
 * once decoded: ~120 MB before) are RESOURCE_EXHAUSTED. */
static void test_completion_decode_bounds_what_decoding_allocates(void **state)
{
    (void)state;
    size_t n = 1000000, inner = 2 * n, len = 1 + 3 + inner; /* inner < 2^21: 3 varint bytes */
    uint8_t *msg = malloc(len);
    assert_non_null(msg);
    msg[0] = 0x1a; /* result (3), length-delimited, the length as a 3-byte varint */
    msg[1] = (uint8_t)(0x80 | (inner & 0x7f));
    msg[2] = (uint8_t)(0x80 | ((inner >> 7) & 0x7f));
    msg[3] = (uint8_t)(inner >> 14);
    for (size_t i = 0; i < n; i++) { /* files (8), an empty File */
        msg[4 + 2 * i] = 0x42;
        msg[4 + 2 * i + 1] = 0x00;
    }
    sbx_completion *c = NULL;
    sbx_error err;
    assert_int_equal(sbx_completion_decode(msg, len, SIZE_MAX, &c, &err), SBX_E_RESOURCE_EXHAUSTED);
    assert_null(c);
    assert_non_null(strstr(err.message, "once decoded"));
    free(msg);
}

/* protobuf-c takes field number 0 written as two bytes (80 00) and then cannot pack it back. */
static void test_request_decode_refuses_field_number_zero_in_any_form(void **state)
{
    (void)state;
    static const uint8_t top[] = {0x80, 0x00, 0x6f};
    expect_refused(top, sizeof(top), "field numbered 0");
    static const uint8_t nested[] = {0x52, 0x0b, 0x0a, 0x06, 'p',  'y', 't',
                                     'h',  'o',  'n',  0x82, 0x00, 0x00}; /* inside run_code */
    expect_refused(nested, sizeof(nested), "field numbered 0");
}

static void test_request_decode_refuses_field_numbers_above_the_protobuf_range(void **state)
{
    (void)state;
    static const uint8_t over[] = {0x80, 0x80, 0x80, 0x80, 0x10, 0x01}; /* field 2^29 */
    expect_refused(over, sizeof(over), "field numbered 536870912");
}

/* The spec merges two parts of the same oneof member, protobuf-c keeps the last: refused. */
static void test_request_decode_refuses_a_oneof_member_sent_twice(void **state)
{
    (void)state;
    static const uint8_t twice[] = {0x5a, 0x03, 0x0a, 0x01, 'a',  /* run_command{argv a} */
                                    0x5a, 0x03, 0x0a, 0x01, 'b'}; /* run_command{argv b} */
    expect_refused(twice, sizeof(twice), "oneof member 'run_command'");
}

/* proto3 strings are UTF-8 (Python refuses the whole message otherwise), and protobuf-c's
 * char * cannot hold a NUL. */
static void test_request_decode_refuses_strings_that_are_not_utf8_text(void **state)
{
    (void)state;
    static const struct {
        const char *why;
        uint8_t bytes[8];
        size_t len;
    } bad[] = {
        {"invalid byte", {0x0a, 0x03, 0xc3, 0x28, 0xff}, 5},
        {"overlong slash", {0x0a, 0x02, 0xc0, 0xaf}, 4},
        {"surrogate", {0x0a, 0x03, 0xed, 0xa0, 0x80}, 5},
        {"above U+10FFFF", {0x0a, 0x04, 0xf4, 0x90, 0x80, 0x80}, 6},
        {"cut sequence", {0x0a, 0x02, 0xe6, 0x97}, 4},
        {"NUL", {0x0a, 0x03, 'a', 0x00, 'b'}, 5},
        {"NUL in a map key", {0x1a, 0x05, 0x22, 0x03, 0x0a, 0x01, 0x00}, 7}, /* principal */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sbx_request *req = NULL;
        sbx_error err;
        if (sbx_request_decode(bad[i].bytes, bad[i].len, 1024, &req, &err) !=
            SBX_E_INVALID_ARGUMENT)
            fail_msg("%s: accepted", bad[i].why);
        assert_null(req);
        assert_non_null(strstr(err.message, "not UTF-8 text"));
    }
    static const uint8_t good[] = {
        0x0a, 0x0a, 0xe6, 0x97, 0xa5, 0xf0,
        0x9f, 0xa6, 0x80, 'e',  0xcc, 0x81}; /* 日, crab, e + combining acute */
    sbx_request *req = NULL;
    assert_int_equal(sbx_request_decode(good, sizeof(good), 1024, &req, NULL), SBX_OK);
    sbx_request_free(req);
}

/* Two different members: the last one wins in every implementation, so this is accepted. */
static void test_request_decode_keeps_the_last_of_two_oneof_members(void **state)
{
    (void)state;
    static const uint8_t two[] = {0x5a, 0x03, 0x0a, 0x01, 'a',  /* run_command{argv a} */
                                  0x7a, 0x03, 0x0a, 0x01, '/'}; /* list_files{path /} */
    sbx_request *req = NULL;
    assert_int_equal(sbx_request_decode(two, sizeof(two), 1024, &req, NULL), SBX_OK);
    assert_int_equal(req->op_case, SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES);
    sbx_request_free(req);
}

static void test_completion_decode_is_bounded_and_strict(void **state)
{
    (void)state;
    sbx_completion *c = sbx_completion_fail("t", SBX_E_GONE, "gone");
    size_t len = 0;
    uint8_t *bytes = sbx_message_pack(&c->base, &len);
    sbx_completion_free(c);

    sbx_completion *out = NULL;
    assert_int_equal(sbx_completion_decode(bytes, len, len, &out, NULL), SBX_OK);
    assert_int_equal(out->error_code, SBX__V1__ERROR_CODE__ERROR_CODE_GONE);
    sbx_completion_free(out);

    sbx_error err;
    assert_int_equal(sbx_completion_decode(bytes, len, len - 1, &out, &err),
                     SBX_E_RESOURCE_EXHAUSTED);
    assert_null(out);
    assert_non_null(strstr(err.message, "ExecutionCompletion"));

    assert_int_equal(sbx_completion_decode(bytes, len - 1, len, &out, &err),
                     SBX_E_INVALID_ARGUMENT); /* cut inside the error text */
    assert_null(out);
    free(bytes);
}

/* ---- sbx_strlist -------------------------------------------------------------------------- */

static void test_strlist_adds_finds_joins_and_clears(void **state)
{
    (void)state;
    sbx_strlist l = {NULL, 0};
    char *empty = sbx_strlist_join(&l, ", ");
    assert_string_equal(empty, "");
    free(empty);
    assert_false(sbx_strlist_contains(&l, "cpu"));

    assert_true(sbx_strlist_add(&l, "cpu"));
    char *one = sbx_strlist_join(&l, ", ");
    assert_string_equal(one, "cpu");
    free(one);
    assert_true(sbx_strlist_add(&l, "memory_mb"));
    assert_true(sbx_strlist_add(&l, "network_egress=allowlist"));
    assert_true(sbx_strlist_contains(&l, "memory_mb"));
    assert_false(sbx_strlist_contains(&l, "memory"));
    char *all = sbx_strlist_join(&l, ", ");
    assert_string_equal(all, "cpu, memory_mb, network_egress=allowlist");
    free(all);
    char *bare = sbx_strlist_join(&l, NULL);
    assert_string_equal(bare, "cpumemory_mbnetwork_egress=allowlist");
    free(bare);

    sbx_strlist_clear(&l);
    assert_int_equal(l.n, 0);
    assert_null(l.items);
    sbx_strlist_clear(&l); /* clearing twice is fine */
}

/* ---- clocks ------------------------------------------------------------------------------- */

static void test_clocks_are_plausible_and_monotonic(void **state)
{
    (void)state;
    assert_true(sbx_now_ms() > INT64_C(1600000000000)); /* after September 2020 */
    int64_t a = sbx_monotonic_us(), b = sbx_monotonic_us();
    assert_true(b >= a);
    int64_t ms = sbx_monotonic_ms();
    assert_true(ms >= a / 1000);
}

/* A program printing many tiny chunks: appending must grow the buffer geometrically. Growing by
 * exactly the chunk made 200,000 two-byte appends copy ~40 GB under ASan (whose realloc always
 * moves), so a streaming test ran for minutes. Counted by moves of the buffer, not by time. */
static void test_append_bytes_grows_geometrically(void **state)
{
    (void)state;
    ProtobufCBinaryData field = {0};
    const uint8_t *last = NULL;
    int moves = 0;
    for (int i = 0; i < 200000; i++) {
        assert_true(sbx_append_bytes(&field, "y\n", 2));
        if (field.data != last)
            moves++;
        last = field.data;
    }
    assert_int_equal(field.len, 400000);
    for (size_t i = 0; i < field.len; i += 2)
        assert_memory_equal(field.data + i, "y\n", 2);
    assert_true(moves <= 32);
    free(field.data);
}

/* ---- request builders (core/request.c) ------------------------------------------------- */

/* A built request survives the wire: encode, decode, and compare what the builder set. */
static sbx_request *round_trip(const sbx_request *req)
{
    size_t n = 0;
    uint8_t *buf = sbx_message_pack(&req->base, &n);
    assert_non_null(buf);
    sbx_request *back = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_request_decode(buf, n, 1u << 20, &back, &err), SBX_OK);
    free(buf);
    return back;
}

static void test_request_builders_set_the_op_and_its_fields(void **state)
{
    (void)state;
    sbx_request *r = sbx_request_shell("prof", "echo hi");
    assert_non_null(r);
    assert_true(
        sbx_request_set_principal(r, SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT, "tenant-a"));
    assert_true(sbx_request_set_stdin(r, "in", 2));
    sbx_request *b = round_trip(r);
    assert_int_equal(b->op_case, SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND);
    assert_string_equal(b->profile, "prof");
    assert_string_equal(b->run_command->shell, "echo hi");
    assert_string_equal(b->principal->subject, "tenant-a");
    assert_int_equal(b->run_command->stdin.len, 2);
    assert_int_equal(strlen(b->task_id), SBX_UUID_LEN - 1);
    sbx_request_free(b);
    sbx_request_free(r);

    const char *argv[] = {"printf", "%s", "x y"};
    r = sbx_request_argv(NULL, argv, 3);
    b = round_trip(r);
    assert_string_equal(b->profile, "");
    assert_int_equal(b->run_command->n_argv, 3);
    assert_string_equal(b->run_command->argv[2], "x y");
    sbx_request_free(b);
    sbx_request_free(r);

    r = sbx_request_code("", "python", "print(1)");
    assert_true(sbx_request_set_stdin(r, "z", 1));
    b = round_trip(r);
    assert_int_equal(b->op_case, SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE);
    assert_string_equal(b->run_code->language, "python");
    assert_string_equal(b->run_code->code, "print(1)");
    sbx_request_free(b);
    sbx_request_free(r);

    r = sbx_request_write_file(NULL, "/workspace/a", "\0\1\2", 3, 0600);
    assert_false(sbx_request_set_stdin(r, "x", 1)); /* no stdin for a file write */
    b = round_trip(r);
    assert_int_equal(b->write_file->content.len, 3);
    assert_int_equal(b->write_file->mode, 0600);
    sbx_request_free(b);
    sbx_request_free(r);

    r = sbx_request_read_file(NULL, "/workspace/a");
    assert_string_equal(r->read_file->path, "/workspace/a");
    sbx_request_free(r);
    r = sbx_request_list_files(NULL, "/workspace");
    assert_int_equal(r->op_case, SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES);
    sbx_request_free(r);

    sbx_session_handle *h = sbx_session_handle_new();
    assert_true(sbx_set_string(&h->profile, "p2"));
    assert_true(sbx_set_string(&h->sandbox_id, "sb-1"));
    r = sbx_request_destroy(h);
    sbx_message_free(&h->base); /* the request holds its own copy */
    b = round_trip(r);
    assert_int_equal(b->op_case, SBX__V1__EXECUTION_REQUEST__OP_DESTROY);
    assert_string_equal(b->profile, "p2");
    assert_string_equal(b->session->sandbox_id, "sb-1");
    assert_true(sbx_request_set_session(b, NULL));
    assert_null(b->session);
    sbx_request_free(b);
    sbx_request_free(r);
}

/* Every operation of the contract has a builder: an embedder never allocates a protobuf-c
 * submessage by hand. Each is checked through an encode/decode round trip. */
static void test_request_builders_cover_the_session_operations(void **state)
{
    (void)state;
    sbx_session_handle *h = sbx_session_handle_new();
    assert_true(sbx_set_string(&h->profile, "p3"));
    assert_true(sbx_set_string(&h->sandbox_id, "sb-2"));
    sbx_request *made[] = {
        sbx_request_pause(h),
        sbx_request_resume(h),
        sbx_request_expose(h, 8080),
        sbx_request_attach_command(h, 7, 11, 13),
        sbx_request_cancel_command(h, 7, 15),
        sbx_request_snapshot(h, "snap-1"),
        sbx_request_list_snapshots(NULL),
        sbx_request_delete_snapshot("p4", "snap-1"),
    };
    sbx_message_free(&h->base);
    const Sbx__V1__ExecutionRequest__OpCase want[] = {
        SBX__V1__EXECUTION_REQUEST__OP_PAUSE,
        SBX__V1__EXECUTION_REQUEST__OP_RESUME,
        SBX__V1__EXECUTION_REQUEST__OP_EXPOSE,
        SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND,
        SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND,
        SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT,
        SBX__V1__EXECUTION_REQUEST__OP_LIST_SNAPSHOTS,
        SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT,
    };
    for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
        assert_non_null(made[i]);
        sbx_request *b = round_trip(made[i]);
        assert_int_equal(b->op_case, want[i]);
        assert_true(b->task_id[0] != '\0');
        if (i < 6) {
            assert_string_equal(b->profile, "p3");
            assert_string_equal(b->session->sandbox_id, "sb-2");
        } else {
            assert_null(b->session);
        }
        switch (b->op_case) {
        case SBX__V1__EXECUTION_REQUEST__OP_EXPOSE: assert_int_equal(b->expose->port, 8080); break;
        case SBX__V1__EXECUTION_REQUEST__OP_ATTACH_COMMAND:
            assert_int_equal(b->attach_command->command_id, 7);
            assert_int_equal(b->attach_command->stdout_offset, 11);
            assert_int_equal(b->attach_command->stderr_offset, 13);
            break;
        case SBX__V1__EXECUTION_REQUEST__OP_CANCEL_COMMAND:
            assert_int_equal(b->cancel_command->command_id, 7);
            assert_int_equal(b->cancel_command->signal, 15);
            break;
        case SBX__V1__EXECUTION_REQUEST__OP_SNAPSHOT:
            assert_string_equal(b->snapshot->name, "snap-1");
            break;
        case SBX__V1__EXECUTION_REQUEST__OP_DELETE_SNAPSHOT:
            assert_string_equal(b->delete_snapshot->name, "snap-1");
            assert_string_equal(b->profile, "p4");
            break;
        default: break;
        }
        sbx_request_free(b);
        sbx_request_free(made[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uuid_v4_has_the_canonical_form_and_version_bits),
        cmocka_unit_test(test_uuid_v4_does_not_repeat),
        cmocka_unit_test(test_uuid_v4_differs_between_parent_and_forked_child),
        cmocka_unit_test(test_uuid_v4_does_not_repeat_across_threads),
        cmocka_unit_test(test_request_new_has_a_fresh_task_id_and_no_op),
        cmocka_unit_test(test_request_free_and_completion_free_accept_null),
        cmocka_unit_test(test_request_op_name_names_each_op),
        cmocka_unit_test(test_request_copy_is_deep_and_equal),
        cmocka_unit_test(test_request_copy_keeps_unknown_fields),
        cmocka_unit_test(test_copy_is_what_the_wire_would_give),
        cmocka_unit_test(test_completion_new_is_succeeded_with_an_empty_result),
        cmocka_unit_test(test_completion_fail_is_failed_with_code_and_text),
        cmocka_unit_test(test_completion_fail_with_timeout_is_timed_out),
        cmocka_unit_test(test_completion_fail_with_ok_reports_internal),
        cmocka_unit_test(test_completion_fail_cuts_long_text_with_ellipsis),
        cmocka_unit_test(test_completion_from_error_carries_code_and_message),
        cmocka_unit_test(test_completion_add_notice_joins_with_semicolons),
        cmocka_unit_test(test_completion_copy_is_deep_and_lossless),
        cmocka_unit_test(test_set_string_replaces_and_null_resets_to_the_shared_empty),
        cmocka_unit_test(test_set_bytes_and_append_bytes_own_their_copy),
        cmocka_unit_test(test_text_valid_accepts_utf8_and_refuses_the_rest),
        cmocka_unit_test(test_set_text_replaces_what_is_not_utf8),
        cmocka_unit_test(test_add_string_appends_copies),
        cmocka_unit_test(test_result_set_data_adds_and_replaces_keys),
        cmocka_unit_test(test_request_decode_accepts_a_valid_message),
        cmocka_unit_test(test_request_decode_of_empty_input_is_an_empty_request),
        cmocka_unit_test(test_request_decode_refuses_input_over_the_limit),
        cmocka_unit_test(test_request_decode_refuses_malformed_bytes),
        cmocka_unit_test(test_request_decode_refuses_field_number_zero_in_any_form),
        cmocka_unit_test(test_request_decode_refuses_field_numbers_above_the_protobuf_range),
        cmocka_unit_test(test_request_decode_refuses_a_oneof_member_sent_twice),
        cmocka_unit_test(test_request_decode_keeps_the_last_of_two_oneof_members),
        cmocka_unit_test(test_request_decode_refuses_strings_that_are_not_utf8_text),
        cmocka_unit_test(test_completion_decode_is_bounded_and_strict),
        cmocka_unit_test(test_strlist_adds_finds_joins_and_clears),
        cmocka_unit_test(test_clocks_are_plausible_and_monotonic),
        cmocka_unit_test(test_append_bytes_grows_geometrically),
        cmocka_unit_test(test_request_builders_set_the_op_and_its_fields),
        cmocka_unit_test(test_request_builders_cover_the_session_operations),
        cmocka_unit_test(test_request_decode_refuses_a_list_over_the_limit_naming_it),
        cmocka_unit_test(test_request_decode_bounds_what_decoding_allocates),
        cmocka_unit_test(test_completion_decode_bounds_what_decoding_allocates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
