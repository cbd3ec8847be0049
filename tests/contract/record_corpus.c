/* record_corpus.c - makes the recorded replay corpus: runs a fixed script of requests (every
 * operation, program failures, machinery refusals, a timeout, truncation, destroy, attached)
 * against the fake provider through the embedded broker with recording on.
 *   sbx_record_corpus CONFIG OUT.rec
 * Not a test: its output is checked in under tests/contract/recordings/.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"

static sbx_broker *broker;
static sbx_session_handle *s1;

static sbx_request *req(const char *profile)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "recorder");
    sbx_set_string(&r->agent, "corpus");
    return r;
}

static sbx_request *shell(const char *profile, const char *line)
{
    sbx_request *r = req(profile);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

static sbx_request *code(const char *profile, const char *lang, const char *text)
{
    sbx_request *r = req(profile);
    r->run_code = malloc(sizeof(*r->run_code));
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, lang);
    sbx_set_string(&r->run_code->code, text);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    return r;
}

static void on(sbx_request *r, const sbx_session_handle *h)
{
    r->session = (sbx_session_handle *)sbx_message_copy(&h->base);
}

/* Submits, keeps the latest handle of session 1 when asked, frees. */
static void go(sbx_request *r, bool keep)
{
    sbx_completion *c = NULL;
    sbx_broker_submit(broker, r, SBX_WAIT_FOREVER, NULL, &c);
    if (keep && c != NULL && c->session != NULL) {
        sbx_message_free((ProtobufCMessage *)s1);
        s1 = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    }
    sbx_completion_free(c);
    sbx_request_free(r);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONFIG OUT.rec\n", argv[0]);
        return 2;
    }
    sbx_config *cfg = NULL;
    sbx_error err;
    if (sbx_config_load(argv[1], &cfg, &err) != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    char dir[] = "/tmp/sbx-corpus-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char secret[64];
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    free(cfg->secret_file);
    cfg->secret_file = strdup(secret);
    sbx_engine *e = NULL;
    if (sbx_engine_new(cfg, &e, &err) != SBX_OK || sbx_broker_open_embedded(e, &broker, &err) ||
        (unlink(argv[2]), sbx_broker_record_to(broker, argv[2], &err)) != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }

    go(shell("default", "echo hello"), true);
    sbx_request *r = code("", "python", "x = 6 * 7");
    on(r, s1);
    go(r, true);
    r = code("", "python", "print('x is', x)\nx + 1");
    on(r, s1);
    go(r, true);
    r = req("");
    r->write_file = malloc(sizeof(*r->write_file));
    sbx__v1__write_file__init(r->write_file);
    sbx_set_string(&r->write_file->path, "/workspace/notes.txt");
    sbx_set_bytes(&r->write_file->content, "line one\n", 9);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    on(r, s1);
    go(r, true);
    r = req("");
    r->read_file = malloc(sizeof(*r->read_file));
    sbx__v1__read_file__init(r->read_file);
    sbx_set_string(&r->read_file->path, "/workspace/notes.txt");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_READ_FILE;
    on(r, s1);
    go(r, true);
    r = req("");
    r->list_files = malloc(sizeof(*r->list_files));
    sbx__v1__list_files__init(r->list_files);
    sbx_set_string(&r->list_files->path, "/workspace");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES;
    on(r, s1);
    go(r, true);
    r = shell("", "cat notes.txt; warn failing on purpose; exit 3");
    on(r, s1);
    go(r, true);
    r = code("", "python", "y = 1\ny / 0");
    on(r, s1);
    go(r, true);
    r = req("");
    r->install_packages = malloc(sizeof(*r->install_packages));
    sbx__v1__install_packages__init(r->install_packages);
    sbx_set_string(&r->install_packages->manager, "pip");
    sbx_add_string(&r->install_packages->n_packages, &r->install_packages->packages, "requests");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES;
    on(r, s1);
    go(r, true);
    r = shell("", "yes 100");
    r->policy = sbx_policy_new();
    r->policy->output_limit_bytes = 20;
    on(r, s1);
    go(r, true);
    r = shell("", "echo started; sleep 60000");
    r->policy = sbx_policy_new();
    r->policy->timeout_ms = 30;
    on(r, s1);
    go(r, true);
    go(code("default", "ruby", "puts 1"), false); /* CAPABILITY */
    go(req("default"), false);                    /* INVALID_ARGUMENT: no op */
    go(shell("nosuchprofile", "echo x"), false);  /* CONFIG */
    r = shell("default", "echo wide");
    r->policy = sbx_policy_new();
    r->policy->memory_mb = 4096;
    go(r, false);                          /* POLICY: widening */
    go(shell("weak", "echo weak"), false); /* POLICY: strict, unenforceable */
    go(shell("attached", "echo attached; pwd"), false);
    r = req("");
    r->destroy = malloc(sizeof(*r->destroy));
    sbx__v1__destroy__init(r->destroy);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    on(r, s1);
    go(r, true);
    r = shell("", "echo after destroy");
    on(r, s1);
    go(r, true);
    go(code("default", "bash", "echo from bash && printenv NOPE || echo no var"), false);

    sbx_message_free((ProtobufCMessage *)s1);
    sbx_broker_free(broker);
    sbx_engine_free(e);
    sbx_config_free(cfg);
    unlink(secret);
    rmdir(dir);
    return 0;
}
