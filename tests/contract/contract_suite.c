/* contract_suite.c - the provider contract suite (see contract_suite.h). Runs on any provider:
 * everything goes through the engine, the embedded broker, or the provider's own ops table,
 * never through provider internals.
 */
#include "contract/contract_suite.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/broker.h"
#include "sbx/engine.h"
#include "sbx/provider.h"

typedef struct suite {
    const char *profile;
    const sbx_profile_config *pc;
    sbx_engine *e;
    sbx_broker *b;
    const sbx_capabilities *caps;
    sbx_session_handle *session; /* the suite's session, updated after each request */
    int failures;
} suite;

static void report(suite *s, const char *verdict, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(suite *s, const char *verdict, const char *name, const char *fmt, ...)
{
    char detail[1024] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    fprintf(stderr, "contract[%s] %s %s%s%s\n", s->profile, verdict, name, detail[0] ? ": " : "",
            detail);
    if (strcmp(verdict, "FAIL") == 0)
        s->failures++;
}

#define CHECK(s, name, cond, ...)                                                                  \
    do {                                                                                           \
        if (cond)                                                                                  \
            report(s, "PASS", name, "%s", "");                                                     \
        else                                                                                       \
            report(s, "FAIL", name, __VA_ARGS__);                                                  \
    } while (0)

static sbx_request *new_req(suite *s)
{
    sbx_request *r = sbx_request_new();
    sbx_set_string(&r->profile, s->profile);
    r->principal = sbx_principal_new();
    sbx_set_string(&r->principal->subject, "contract-suite");
    if (s->pc->identity_mode == SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER)
        r->principal->mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    if (s->session != NULL)
        r->session = (sbx_session_handle *)sbx_message_copy(&s->session->base);
    return r;
}

/* True when the suite can reuse one session across requests: the provider reconnects
 * (attach), or the profile is attached to one environment. */
static bool reuses_session(const suite *s)
{
    return s->caps->attach || s->pc->environment == SBX_ENV_ATTACHED;
}

/* Submits and frees the request. A provider that reconnects keeps one session for the whole
 * suite; otherwise every request gets a fresh sandbox, destroyed right after. */
static sbx_completion *submit(suite *s, sbx_request *r)
{
    sbx_completion *c = NULL;
    bool is_destroy = r->op_case == SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
    sbx_broker_submit(s->b, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    if (c == NULL || c->session == NULL || c->session->session_id[0] == '\0' ||
        c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED)
        return c;
    if (reuses_session(s) || is_destroy) {
        sbx_message_free((ProtobufCMessage *)s->session);
        s->session = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    } else if (c->session->sandbox_id[0] != '\0') {
        sbx_request *d = new_req(s);
        sbx_message_free((ProtobufCMessage *)d->session);
        d->session = (sbx_session_handle *)sbx_message_copy(&c->session->base);
        d->destroy = malloc(sizeof(*d->destroy));
        sbx__v1__destroy__init(d->destroy);
        d->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
        sbx_completion *dc = NULL;
        sbx_broker_submit(s->b, d, SBX_WAIT_FOREVER, NULL, &dc);
        if (dc == NULL || dc->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            report(s, "FAIL", "destroy_after_use", "%s", dc != NULL ? dc->error : "no completion");
        sbx_completion_free(dc);
        sbx_request_free(d);
    }
    return c;
}

static sbx_request *code_req(suite *s, const char *lang, const char *code)
{
    sbx_request *r = new_req(s);
    r->run_code = malloc(sizeof(*r->run_code));
    sbx__v1__run_code__init(r->run_code);
    sbx_set_string(&r->run_code->language, lang);
    sbx_set_string(&r->run_code->code, code);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE;
    return r;
}

static sbx_request *argv_req(suite *s, const char *a0, const char *a1)
{
    sbx_request *r = new_req(s);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_add_string(&r->run_command->n_argv, &r->run_command->argv, a0);
    if (a1 != NULL)
        sbx_add_string(&r->run_command->n_argv, &r->run_command->argv, a1);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

static sbx_request *shell_req(suite *s, const char *line)
{
    sbx_request *r = new_req(s);
    r->run_command = malloc(sizeof(*r->run_command));
    sbx__v1__run_command__init(r->run_command);
    sbx_set_string(&r->run_command->shell, line);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND;
    return r;
}

static bool succeeded(const sbx_completion *c)
{
    return c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
}

static bool out_is(const sbx_completion *c, const char *want)
{
    return c != NULL && c->result != NULL && c->result->stdout.len == strlen(want) &&
           memcmp(c->result->stdout.data, want, strlen(want)) == 0;
}

static const char *why(const sbx_completion *c)
{
    if (c == NULL)
        return "no completion";
    if (c->error != NULL && c->error[0] != '\0')
        return c->error;
    return "unexpected result";
}

/* The program each known language must run, and what it prints. */
static bool language_program(const char *lang, const char **code, const char **want)
{
    static const struct {
        const char *lang, *code, *want;
    } known[] = {
        {"python", "print(6 * 7)", "42\n"},
        {"python3", "print(6 * 7)", "42\n"},
        {"bash", "echo 42", "42\n"},
        {"sh", "echo 42", "42\n"},
        {"node", "console.log(6 * 7)", "42\n"},
        {"javascript", "console.log(6 * 7)", "42\n"},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(known[i].lang, lang) == 0) {
            *code = known[i].code;
            *want = known[i].want;
            return true;
        }
    return false;
}

static void check_languages(suite *s)
{
    for (size_t i = 0; i < s->caps->n_languages; i++) {
        const char *lang = s->caps->languages[i], *code, *want;
        char name[96];
        snprintf(name, sizeof(name), "language_%s_runs", lang);
        if (!language_program(lang, &code, &want)) {
            report(s, "SKIP", name, "no reference program for this language");
            continue;
        }
        sbx_completion *c = submit(s, code_req(s, lang, code));
        CHECK(s, name, succeeded(c) && out_is(c, want) && c->result->exit_code == 0,
              "expected stdout \"42\\n\" and exit 0: %s", why(c));
        sbx_completion_free(c);
    }
    bool has_python = false;
    for (size_t i = 0; i < s->caps->n_languages; i++)
        has_python |= strcmp(s->caps->languages[i], "python") == 0;
    if (has_python) {
        sbx_completion *c = submit(s, code_req(s, "python", "import sys\nsys.exit(3)"));
        CHECK(s, "failing_python_program_is_a_result",
              succeeded(c) && c->result->exit_code == 3 &&
                  c->result->outcome == SBX__V1__OUTCOME__OUTCOME_NONZERO,
              "expected SUCCEEDED with exit 3: %s", why(c));
        sbx_completion_free(c);
    }
    sbx_completion *c = submit(s, code_req(s, "no-such-language", "x"));
    CHECK(s, "undeclared_language_is_capability",
          c != NULL && c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY,
          "expected CAPABILITY: %s", why(c));
    sbx_completion_free(c);
}

static void check_shell(suite *s)
{
    sbx_completion *c = submit(s, argv_req(s, "echo", "hi"));
    if (!s->caps->shell) {
        CHECK(s, "undeclared_shell_is_capability",
              c != NULL && c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY,
              "expected CAPABILITY: %s", why(c));
        sbx_completion_free(c);
        return;
    }
    CHECK(s, "run_command_argv_runs", succeeded(c) && out_is(c, "hi\n"),
          "expected stdout \"hi\\n\": %s", why(c));
    sbx_completion_free(c);
    c = submit(s, shell_req(s, "exit 3"));
    CHECK(s, "failing_command_is_a_result",
          succeeded(c) && c->result->exit_code == 3 &&
              c->result->outcome == SBX__V1__OUTCOME__OUTCOME_NONZERO,
          "expected SUCCEEDED with exit 3: %s", why(c));
    sbx_completion_free(c);
}

static void check_packages(suite *s)
{
    if (s->caps->package_install)
        return; /* installing needs a network the suite cannot assume */
    sbx_request *r = new_req(s);
    r->install_packages = malloc(sizeof(*r->install_packages));
    sbx__v1__install_packages__init(r->install_packages);
    sbx_set_string(&r->install_packages->manager, "pip");
    sbx_add_string(&r->install_packages->n_packages, &r->install_packages->packages, "x");
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_INSTALL_PACKAGES;
    sbx_completion *c = submit(s, r);
    CHECK(s, "undeclared_package_install_is_capability",
          c != NULL && c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY,
          "expected CAPABILITY: %s", why(c));
    sbx_completion_free(c);
}

static void check_files(suite *s)
{
    static const uint8_t content[] = "contract \x01\xff bytes\n";
    const char *path = "sbx_contract_roundtrip.txt";
    sbx_request *w = new_req(s);
    w->write_file = malloc(sizeof(*w->write_file));
    sbx__v1__write_file__init(w->write_file);
    sbx_set_string(&w->write_file->path, path);
    sbx_set_bytes(&w->write_file->content, content, sizeof(content) - 1);
    w->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    sbx_completion *c = submit(s, w);
    if (!s->caps->files) {
        CHECK(s, "undeclared_files_is_capability",
              c != NULL && c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY,
              "expected CAPABILITY: %s", why(c));
        sbx_completion_free(c);
        return;
    }
    CHECK(s, "write_file_succeeds", succeeded(c), "%s", why(c));
    sbx_completion_free(c);
    sbx_request *r = new_req(s);
    r->read_file = malloc(sizeof(*r->read_file));
    sbx__v1__read_file__init(r->read_file);
    sbx_set_string(&r->read_file->path, path);
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_READ_FILE;
    c = submit(s, r);
    bool same = succeeded(c) && c->result->n_files == 1 &&
                c->result->files[0]->content.len == sizeof(content) - 1 &&
                memcmp(c->result->files[0]->content.data, content, sizeof(content) - 1) == 0;
    CHECK(s, "file_round_trip_is_byte_identical", same, "%s", why(c));
    sbx_completion_free(c);
    sbx_request *l = new_req(s);
    l->list_files = malloc(sizeof(*l->list_files));
    sbx__v1__list_files__init(l->list_files);
    sbx_set_string(&l->list_files->path, ".");
    l->op_case = SBX__V1__EXECUTION_REQUEST__OP_LIST_FILES;
    c = submit(s, l);
    /* Every provider answers in the same terms: the listed path joined with each entry's
     * name, sorted, whether it lists names (the agent) or whole paths (E2B, Daytona, SSM). */
    bool listed = false, sorted = true;
    for (size_t i = 0; succeeded(c) && i < c->result->n_files; i++) {
        const char *p = c->result->files[i]->path;
        listed |= strcmp(p, "./sbx_contract_roundtrip.txt") == 0;
        sorted &= i == 0 || strcmp(c->result->files[i - 1]->path, p) < 0;
    }
    CHECK(s, "written_file_is_listed_as_dir_slash_name", listed, "%s",
          succeeded(c) ? "no ./sbx_contract_roundtrip.txt in the listing of ." : why(c));
    CHECK(s, "listing_is_sorted_by_path", sorted, "%s", succeeded(c) ? "out of order" : why(c));
    sbx_completion_free(c);
}

/* Directly on the ops: close releases only the handle, destroy is idempotent, unknown ids. */
static void check_lifecycle_ops(suite *s)
{
    const sbx_provider_ops *ops = sbx_provider_lookup(s->pc->type);
    const sbx_config *cfg = sbx_engine_config(s->e);
    sbx_provider_ctx ctx = {s->pc->name, s->pc->options,   s->pc->environment, s->pc->attach_to,
                            cfg->node,   cfg->runtime_dir, s->pc->scope,       NULL};
    void *state = NULL;
    sbx_error err;
    if (ops->open != NULL && ops->open(&ctx, &state, &err) != SBX_OK) {
        report(s, "FAIL", "provider_opens", "%s", err.message);
        return;
    }
    if (ops->sandbox_close != NULL)
        ops->sandbox_close(NULL);
    report(s, "PASS", "sandbox_close_accepts_null", "%s", "");
    const char *unknown = "sbx-contract-no-such-sandbox";
    bool idem = ops->destroy == NULL || (ops->destroy(state, unknown, &err) == SBX_OK &&
                                         ops->destroy(state, unknown, &err) == SBX_OK);
    CHECK(s, "destroy_unknown_id_is_ok_twice", idem, "%s", err.message);
    sbx_sandbox *sb = NULL;
    sbx_status st =
        ops->attach != NULL ? ops->attach(state, unknown, NULL, NULL, &sb, &err) : SBX_E_CAPABILITY;
    if (s->caps->attach)
        CHECK(s, "attach_unknown_id_is_gone", st == SBX_E_GONE && sb == NULL, "got %s: %s",
              sbx_status_name(st), err.message);
    else
        CHECK(s, "attach_unknown_id_is_gone_or_capability",
              (st == SBX_E_GONE || st == SBX_E_CAPABILITY) && sb == NULL, "got %s",
              sbx_status_name(st));
    if (sb != NULL && ops->sandbox_close != NULL)
        ops->sandbox_close(sb);
    if (s->pc->environment == SBX_ENV_MANAGED && s->caps->provisions && ops->create != NULL) {
        sbx_session_handle h = SBX__V1__SESSION_HANDLE__INIT;
        h.session_id = "sbx-contract-lifecycle";
        h.profile = (char *)s->pc->name;
        sbx_principal pr = SBX__V1__PRINCIPAL__INIT;
        pr.subject = "contract-suite";
        pr.mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
        st = ops->create(state, &h, &pr, s->pc->policy, &sb, &err);
        CHECK(s, "create_returns_a_sandbox", st == SBX_OK && sb != NULL && sb->id != NULL, "%s",
              err.message);
        if (st == SBX_OK && sb != NULL) {
            char *id = strdup(sb->id);
            ops->sandbox_close(sb);
            sb = NULL;
            if (s->caps->attach) {
                st = ops->attach(state, id, &pr, s->pc->policy, &sb, &err);
                CHECK(s, "close_keeps_the_sandbox", st == SBX_OK && sb != NULL,
                      "attach after close: %s", err.message);
                if (sb != NULL)
                    ops->sandbox_close(sb);
                sb = NULL;
            }
            CHECK(s, "destroy_is_idempotent",
                  ops->destroy(state, id, &err) == SBX_OK &&
                      ops->destroy(state, id, &err) == SBX_OK,
                  "%s", err.message);
            if (s->caps->attach) {
                st = ops->attach(state, id, &pr, s->pc->policy, &sb, &err);
                CHECK(s, "attach_after_destroy_is_gone", st == SBX_E_GONE && sb == NULL, "got %s",
                      sbx_status_name(st));
                if (sb != NULL)
                    ops->sandbox_close(sb);
            }
            free(id);
        }
    }
    if (ops->close != NULL)
        ops->close(state);
}

static void check_session_destroy(suite *s)
{
    if (s->session == NULL)
        return;
    for (int i = 0; i < 2; i++) {
        sbx_request *r = new_req(s);
        r->destroy = malloc(sizeof(*r->destroy));
        sbx__v1__destroy__init(r->destroy);
        r->op_case = SBX__V1__EXECUTION_REQUEST__OP_DESTROY;
        sbx_completion *c = submit(s, r);
        CHECK(s, i == 0 ? "destroy_session" : "destroy_session_again_is_ok",
              succeeded(c) && c->session != NULL && c->session->sandbox_id[0] == '\0', "%s",
              why(c));
        sbx_completion_free(c);
    }
}

int sbx_contract_run(const sbx_config *cfg, const char *profile)
{
    suite s = {.profile = profile};
    s.pc = sbx_config_profile(cfg, profile);
    if (s.pc == NULL) {
        fprintf(stderr, "contract[%s] FAIL profile_exists: not in the configuration\n", profile);
        return 1;
    }
    sbx_error err;
    if (sbx_engine_new(cfg, &s.e, &err) != SBX_OK ||
        sbx_broker_open_embedded(s.e, &s.b, &err) != SBX_OK) {
        fprintf(stderr, "contract[%s] FAIL engine_opens: %s\n", profile, err.message);
        sbx_engine_free(s.e);
        return 1;
    }
    Sbx__V1__DescribeResponse *d = NULL;
    if (sbx_engine_describe(s.e, &d, &err) == SBX_OK)
        for (size_t i = 0; i < d->n_profiles; i++)
            if (strcmp(d->profiles[i]->name, s.pc->name) == 0)
                s.caps = d->profiles[i]->capabilities;
    if (s.caps == NULL) {
        report(&s, "FAIL", "provider_opens", "the provider did not open (no capabilities)");
    } else {
        check_languages(&s);
        check_shell(&s);
        check_packages(&s);
        check_files(&s);
        check_session_destroy(&s);
        check_lifecycle_ops(&s);
    }
    sbx_message_free((ProtobufCMessage *)d);
    sbx_message_free((ProtobufCMessage *)s.session);
    sbx_broker_free(s.b);
    sbx_engine_free(s.e);
    fprintf(stderr, "contract[%s] %s (%d failed)\n", profile, s.failures ? "FAILED" : "passed",
            s.failures);
    return s.failures;
}

int sbx_contract_run_yaml(const char *yaml, const char *profile)
{
    sbx_config *cfg = NULL;
    sbx_error err;
    if (sbx_config_load_string(yaml, strlen(yaml), "contract.yaml", &cfg, &err) != SBX_OK) {
        fprintf(stderr, "contract[%s] FAIL config_loads: %s\n", profile, err.message);
        return 1;
    }
    char dir[] = "/tmp/sbx-contract-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        sbx_config_free(cfg);
        return 1;
    }
    char secret[96];
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    free(cfg->secret_file);
    cfg->secret_file = strdup(secret);
    int failures = sbx_contract_run(cfg, profile);
    sbx_config_free(cfg);
    unlink(secret);
    rmdir(dir);
    return failures;
}
