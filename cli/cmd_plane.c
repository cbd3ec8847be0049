/* cmd_plane.c - shared plumbing of the executing commands (see cmd_plane.h). */
#include "cli/cmd_plane.h"

#include <errno.h>
#include <jansson.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/pbjson.h"

static int plane_open(cli_plane *p, bool with_sessions, bool one_shot);

/* A remote (or queue) broker serves the worker's profiles, not this host's: the session store's
 * checks (does the profile exist, its scope, environment, idle timeout) come from the worker's
 * Describe, and so does the default profile unless the client's own default names one of the
 * worker's profiles. A broker that cannot describe, or no worker that answers, keeps the local
 * file's (the request then says what is wrong with the transport). */
static sbx_status profiles_from_worker(cli_plane *p, sbx_error *err)
{
    Sbx__V1__DescribeResponse *d = NULL;
    sbx_status st = sbx_broker_describe(p->broker, &d, err);
    if (st == SBX_E_CAPABILITY || st == SBX_E_BROKER || st == SBX_E_TIMEOUT) {
        /* no answer (a worker down behind a balancer): the request itself reports it */
        sbx_error_clear(err);
        return SBX_OK;
    }
    if (st != SBX_OK)
        return st;
    sbx_profile_config *profiles = calloc(d->n_profiles > 0 ? d->n_profiles : 1, sizeof(*profiles));
    const char *want = d->default_profile;
    for (size_t i = 0; p->cfg->default_profile != NULL && i < d->n_profiles; i++)
        if (strcmp(d->profiles[i]->name, p->cfg->default_profile) == 0)
            want = p->cfg->default_profile;
    char *def = strdup(want);
    bool ok = profiles != NULL && def != NULL;
    size_t n = 0;
    for (; ok && n < d->n_profiles; n++) {
        const Sbx__V1__ProfileDescription *pd = d->profiles[n];
        sbx_profile_config *pc = &profiles[n];
        pc->name = strdup(pd->name);
        pc->type = strdup(pd->provider);
        pc->scope = strcmp(pd->scope, "per_call") == 0      ? SBX_SCOPE_PER_CALL
                    : strcmp(pd->scope, "per_runtime") == 0 ? SBX_SCOPE_PER_RUNTIME
                                                            : SBX_SCOPE_PER_SESSION;
        pc->environment =
            strcmp(pd->environment, "attached") == 0 ? SBX_ENV_ATTACHED : SBX_ENV_MANAGED;
        pc->idle_timeout_s = pd->idle_timeout_s;
        pc->idle_pause = pd->idle_pause;
        pc->policy = sbx_policy_new();
        pc->options = sbx_options_new(NULL);
        ok = pc->name != NULL && pc->type != NULL && pc->policy != NULL && pc->options != NULL;
    }
    if (!ok) {
        for (size_t i = 0; profiles != NULL && i < n; i++) {
            free(profiles[i].name);
            free(profiles[i].type);
            sbx_message_free((ProtobufCMessage *)profiles[i].policy);
            sbx_options_free(profiles[i].options);
        }
        free(profiles);
        free(def);
        sbx_message_free(&d->base);
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory reading the worker's profiles");
    }
    /* the file's own profiles go: they describe this host, not the worker */
    sbx_config *cfg = p->cfg;
    sbx_profile_config *old = cfg->profiles;
    size_t n_old = cfg->n_profiles;
    cfg->profiles = profiles;
    cfg->n_profiles = n;
    free(cfg->default_profile);
    cfg->default_profile = def;
    for (size_t i = 0; i < n_old; i++) {
        free(old[i].name);
        free(old[i].type);
        free(old[i].attach_to);
        sbx_message_free((ProtobufCMessage *)old[i].policy);
        sbx_options_free(old[i].options);
    }
    free(old);
    sbx_message_free(&d->base);
    return SBX_OK;
}

int cli_plane_open(cli_plane *p, bool with_sessions)
{
    return plane_open(p, with_sessions, false);
}

int cli_plane_open_one_shot(cli_plane *p)
{
    return plane_open(p, false, true);
}

static int plane_open(cli_plane *p, bool with_sessions, bool one_shot)
{
    memset(p, 0, sizeof(*p));
    sbx_error err;
    sbx_status st = cli_load_config(NULL, &p->cfg, &err);
    if (st != SBX_OK)
        return cli_report_error("config", &err);
    for (size_t i = 0; one_shot && i < p->cfg->n_profiles; i++)
        p->cfg->profiles[i].scope = SBX_SCOPE_PER_CALL;
    const char *flavor = p->cfg->broker.flavor != NULL ? p->cfg->broker.flavor : "embedded";
    Sbx__V1__PrincipalMode mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_UNSPECIFIED;
    const char *m = cli_global.principal_mode;
    if (m != NULL && strcmp(m, "agent") == 0)
        mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT;
    else if (m != NULL && strcmp(m, "user") == 0)
        mode = SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_USER;
    else if (m != NULL)
        st = sbx_error_set(&err, SBX_E_INVALID_ARGUMENT,
                           "--principal-mode '%s': expected agent or user", m);
    else if (cli_global.subject != NULL && cli_global.subject[0] == '\0')
        st = sbx_error_set(&err, SBX_E_INVALID_ARGUMENT,
                           "--subject is empty: name the principal (user:alice, svc:ci, ...)");
    if (st != SBX_OK) {
        /* nothing to open */
    } else if (strcmp(flavor, "remote") == 0) {
        st = sbx_broker_open_remote(&p->cfg->broker.remote, &p->broker, &err);
    } else if (strcmp(flavor, "queue") == 0) {
        st = sbx_broker_open_queue(&p->cfg->broker.queue, &p->broker, &err);
    } else {
        st = sbx_engine_new(p->cfg, &p->engine, &err);
        if (st == SBX_OK && strcmp(flavor, "thread") == 0)
            st = sbx_broker_open(p->cfg, p->engine, &p->broker, &err);
        else if (st == SBX_OK)
            st = sbx_broker_open_embedded(p->engine, &p->broker, &err);
    }
    if (st == SBX_OK && with_sessions && p->engine == NULL)
        st = profiles_from_worker(p, &err);
    if (st == SBX_OK && with_sessions) {
        char dir[4096];
        st = sbx_sessions_default_dir(dir, sizeof(dir))
                 ? sbx_sessions_open(p->cfg, p->broker, dir, &p->sessions, &err)
                 : sbx_error_set(&err, SBX_E_CONFIG,
                                 "no place to keep sessions: set XDG_STATE_HOME or HOME");
    }
    if (st != SBX_OK) {
        int code = cli_report_error("open", &err);
        cli_plane_close(p);
        return code;
    }
    p->principal = sbx_principal_new();
    p->principal->mode = mode;
    if (cli_global.subject != NULL) {
        sbx_set_string(&p->principal->subject, cli_global.subject);
    } else {
        struct passwd *pw = getpwuid(geteuid());
        char subject[300];
        snprintf(subject, sizeof(subject), "user:%s", pw != NULL ? pw->pw_name : "unknown");
        sbx_set_string(&p->principal->subject, subject);
    }
    return 0;
}

void cli_plane_close(cli_plane *p)
{
    sbx_sessions_free(p->sessions);
    sbx_broker_free(p->broker);
    sbx_engine_free(p->engine);
    sbx_config_free(p->cfg);
    sbx_message_free((ProtobufCMessage *)p->principal);
    memset(p, 0, sizeof(*p));
}

sbx_request *cli_plane_request(cli_plane *p, const char *profile)
{
    sbx_request *r = cli_plane_own(p, sbx_request_new());
    if (r != NULL && !sbx_set_string(&r->profile, profile)) {
        sbx_request_free(r);
        return NULL;
    }
    return r;
}

sbx_request *cli_plane_own(cli_plane *p, sbx_request *r)
{
    if (r == NULL)
        return NULL;
    sbx_message_free(r->principal ? &r->principal->base : NULL);
    r->principal = (sbx_principal *)sbx_message_copy(&p->principal->base);
    if (r->principal == NULL || !sbx_set_string(&r->agent, "sbx-cli")) {
        sbx_request_free(r);
        return NULL;
    }
    return r;
}

bool cli_plane_destroy_handle(cli_plane *p, const sbx_session_handle *h)
{
    if (h == NULL || h->sandbox_id[0] == '\0')
        return false;
    sbx_request *r = cli_plane_own(p, sbx_request_destroy(h));
    sbx_completion *c = NULL;
    if (r != NULL)
        sbx_broker_submit(p->broker, r, SBX_WAIT_FOREVER, NULL, &c);
    bool ok = c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED;
    if (!ok)
        fprintf(stderr, "sbx: notice: sandbox %s could not be destroyed: %s\n", h->sandbox_id,
                c != NULL ? c->error : "out of memory");
    sbx_completion_free(c);
    sbx_request_free(r);
    return ok;
}

/* ---- live output, stdin and signals --------------------------------------------------- */

static volatile sig_atomic_t cancel_signal; /* the signal that asked to stop; 0 if none */
static volatile int cancel_flag;            /* the hooks' cancel: non-zero stops the execution */

static void on_signal(int sig)
{
    cancel_signal = sig;
    cancel_flag = 1;
}

void cli_cancel_on_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_RESETHAND; /* a second signal ends sbx at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is seen as EPIPE and stops the execution */
}

int cli_cancelled_by(void)
{
    return (int)cancel_signal;
}

static bool write_all(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* The hook: each chunk to fd 1 or 2 as it arrives (called by the broker's thread). */
static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    cli_stream *s = arg;
    int i = stream == SBX__V1__STREAM__STREAM_STDERR ? 1 : 0;
    if (offset + len <= s->written[i])
        return; /* already written (a resent chunk) */
    size_t skip = offset < s->written[i] ? (size_t)(s->written[i] - offset) : 0;
    if (!s->broken[i] && !write_all(i + 1, data + skip, len - skip)) {
        s->broken[i] = true; /* the reader went away: stop the program, as SIGPIPE would */
        if (cancel_signal == 0)
            cancel_signal = SIGPIPE;
        cancel_flag = 1;
    }
    s->written[i] = offset + len;
}

sbx_engine_hooks cli_stream_hooks(cli_stream *s)
{
    memset(s, 0, sizeof(*s));
    fflush(stdout);
    fflush(stderr);
    sbx_engine_hooks h = {.on_output = cli_global.json ? NULL : on_output,
                          .on_output_arg = s,
                          .cancel = &cancel_flag};
    return h;
}

int cli_read_stdin(const char *cmd, bool force, ProtobufCBinaryData *out)
{
    out->data = NULL;
    out->len = 0;
    if (!force && isatty(STDIN_FILENO))
        return 0;
    size_t cap = 64 * 1024, len = 0;
    uint8_t *buf = malloc(cap);
    bool oom = buf == NULL; /* never send a cut input as if it were whole */
    while (!oom) {
        if (len == cap) {
            if (cap > CLI_STDIN_MAX)
                break;
            uint8_t *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                oom = true;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* EOF, or no usable stdin (closed): nothing more to send */
        len += (size_t)n;
    }
    if (oom || len > CLI_STDIN_MAX) {
        free(buf);
        if (oom)
            fprintf(stderr, "sbx %s: out of memory reading stdin\n", cmd);
        else
            fprintf(stderr,
                    "sbx %s: stdin is larger than %u bytes (the limit of one request); copy big "
                    "inputs in with `sbx cp` and redirect from the file inside the sandbox\n",
                    cmd, CLI_STDIN_MAX);
        return CLI_EXIT_USAGE;
    }
    out->data = buf;
    out->len = len;
    return 0;
}

int cli_plane_run_program(cli_plane *p, sbx_request *r, const char *session)
{
    cli_cancel_on_signals();
    cli_stream s;
    sbx_engine_hooks h = cli_stream_hooks(&s);
    sbx_completion *c = NULL;
    if (session != NULL)
        sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, &h, &c, NULL);
    else
        sbx_broker_submit(p->broker, r, SBX_WAIT_FOREVER, &h, &c);
    int rc = cli_print_completion(c, true, &s);
    bool destroyed = session == NULL && c != NULL && cli_plane_destroy_handle(p, c->session);
    int sig = cli_cancelled_by();
    if (sig != 0) {
        fprintf(stderr, "sbx: stopped by signal %d%s\n", sig,
                destroyed ? "; its sandbox was destroyed" : "");
        rc = 128 + sig;
    }
    sbx_completion_free(c);
    return rc;
}

/* ---- commands followed by id ---------------------------------------------------------- */

/* <sessions dir>/<session_id>.command holds the id of the command `sbx exec` ran last in that
 * session, so `sbx attach SESSION` finds it after the exec was killed. false for an id that
 * cannot be a file name. */
static bool last_command_path(const char *session_id, char *out, size_t cap)
{
    char dir[4096];
    if (session_id == NULL || session_id[0] == '\0' || session_id[0] == '.' ||
        strlen(session_id) > 200 || !sbx_sessions_default_dir(dir, sizeof(dir)))
        return false;
    for (const char *c = session_id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '-' || *c == '_' || *c == ':' || *c == '.'))
            return false;
    return (size_t)snprintf(out, cap, "%s/%s.command", dir, session_id) < cap;
}

static void note_last_command(const char *session_id, uint64_t id)
{
    char path[4400], tmp[4500];
    if (!last_command_path(session_id, path, sizeof(path)))
        return;
    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return; /* best effort: attach with the id still works */
    bool ok = fprintf(f, "%llu\n", (unsigned long long)id) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}

void cli_forget_last_command(const char *session_id)
{
    char path[4400];
    if (last_command_path(session_id, path, sizeof(path)))
        unlink(path);
}

bool cli_last_command(cli_plane *p, const char *session, uint64_t *id)
{
    sbx_session_handle *h = sbx_sessions_get(p->sessions, session);
    char path[4400], buf[32] = "";
    bool ok = h != NULL && last_command_path(h->session_id, path, sizeof(path));
    sbx_message_free((ProtobufCMessage *)h);
    FILE *f = ok ? fopen(path, "r") : NULL;
    ok = f != NULL && fgets(buf, sizeof(buf), f) != NULL;
    if (f != NULL)
        fclose(f);
    char *end = NULL;
    unsigned long long v = ok ? strtoull(buf, &end, 10) : 0;
    if (v == 0 || end == NULL || (*end != '\n' && *end != '\0'))
        return false;
    *id = v;
    return true;
}

/* Stops command id of session (SIGKILL to its tree); errors go to stderr. */
static void cancel_command(cli_plane *p, const char *session, uint64_t id)
{
    sbx_request *r = cli_plane_own(p, sbx_request_cancel_command(NULL, id, 0));
    sbx_completion *c = NULL;
    if (r != NULL)
        sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, NULL, &c, NULL);
    if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        fprintf(stderr, "sbx: command %llu could not be stopped: %s\n", (unsigned long long)id,
                c != NULL ? c->error : "out of memory");
    sbx_completion_free(c);
    sbx_request_free(r);
}

int cli_plane_follow(cli_plane *p, const char *session, uint64_t id, uint64_t stdout_offset,
                     uint64_t stderr_offset, bool stop_on_signal)
{
    cli_cancel_on_signals();
    sbx_request *r =
        cli_plane_own(p, sbx_request_attach_command(NULL, id, stdout_offset, stderr_offset));
    if (r == NULL) {
        fprintf(stderr, "sbx: out of memory\n");
        return CLI_EXIT_FAILED;
    }
    cli_stream s;
    sbx_engine_hooks h = cli_stream_hooks(&s);
    sbx_completion *c = NULL;
    sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, &h, &c, NULL);
    int sig = cli_cancelled_by();
    int rc;
    if (sig != 0 && stop_on_signal) {
        /* exec: a signal stops the program, as it would a program run attached */
        cancel_command(p, session, id);
        if (cli_global.json)
            cli_print_json(cli_pb_to_json(&c->base));
        fprintf(stderr, "sbx: stopped by signal %d\n", sig);
        rc = 128 + sig;
    } else {
        rc = cli_print_completion(c, true, &s);
        if (sig != 0) {
            fprintf(stderr, "sbx: stopped following command %llu by signal %d; it runs on\n",
                    (unsigned long long)id, sig);
            rc = 128 + sig;
        }
    }
    sbx_completion_free(c);
    sbx_request_free(r);
    return rc;
}

int cli_plane_exec_followed(cli_plane *p, sbx_request *r, const char *session)
{
    cli_cancel_on_signals();
    r->run_command->detach = true;
    sbx_completion *c = NULL;
    sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, NULL, &c, NULL);
    bool started = c != NULL &&
                   c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED &&
                   c->result != NULL && c->result->command_id != 0;
    if (!started && c != NULL &&
        (c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_CAPABILITY ||
         c->error_code == SBX__V1__ERROR_CODE__ERROR_CODE_INVALID_ARGUMENT)) {
        /* a provider without journals (or a request it refuses anyway): run it attached, the
         * refusal, if any, reported by that run */
        sbx_completion_free(c);
        char task[SBX_UUID_LEN];
        sbx_uuid_v4(task);
        sbx_set_string(&r->task_id, task);
        r->run_command->detach = false;
        return cli_plane_run_program(p, r, session);
    }
    if (!started) {
        int rc = cli_print_completion(c, true, NULL);
        sbx_completion_free(c);
        return rc;
    }
    uint64_t id = c->result->command_id;
    note_last_command(c->session != NULL ? c->session->session_id : NULL, id);
    if (!cli_global.json && c->notice[0] != '\0')
        fprintf(stderr, "sbx: notice: %s\n", c->notice);
    sbx_completion_free(c);
    if (cli_cancelled_by() != 0) {
        cancel_command(p, session, id);
        fprintf(stderr, "sbx: stopped by signal %d\n", cli_cancelled_by());
        return 128 + cli_cancelled_by();
    }
    return cli_plane_follow(p, session, id, 0, 0, true);
}

int cli_plane_start_detached(cli_plane *p, sbx_request *r, const char *session)
{
    sbx_completion *c = NULL;
    sbx_sessions_execute_hooks(p->sessions, r, session, SBX_WAIT_FOREVER, NULL, &c, NULL);
    if (c != NULL && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED &&
        c->result != NULL && c->result->command_id != 0) {
        if (cli_global.json)
            cli_print_json(cli_pb_to_json(&c->base));
        else
            printf("%llu\n", (unsigned long long)c->result->command_id);
        note_last_command(c->session != NULL ? c->session->session_id : NULL,
                          c->result->command_id);
        if (!cli_global.json && c->notice[0] != '\0')
            fprintf(stderr, "sbx: notice: %s\n", c->notice);
        sbx_completion_free(c);
        return CLI_EXIT_OK;
    }
    int rc = cli_print_completion(c, true, NULL);
    sbx_completion_free(c);
    return rc;
}

bool cli_parse_command_id(const char *cmd, const char *text, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || v == 0 || errno != 0 || text[0] == '-') {
        cli_usage_error(cmd, "'%s' is not a command id (the number `sbx exec --detach` printed)",
                        text);
        return false;
    }
    *out = v;
    return true;
}

int cli_print_completion(const sbx_completion *c, bool program, const cli_stream *streamed)
{
    if (c == NULL) {
        fprintf(stderr, "sbx: no completion (out of memory)\n");
        return program ? CLI_EXIT_NOT_RUN : CLI_EXIT_FAILED;
    }
    bool ran = c->result != NULL &&
               (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED ||
                c->result->outcome == SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    if (cli_global.json) {
        cli_print_json(cli_pb_to_json(&c->base));
    } else {
        if (c->result != NULL) {
            /* what the live output did not show already (all of it without streaming) */
            uint64_t out_done = streamed != NULL ? streamed->written[0] : 0;
            uint64_t err_done = streamed != NULL ? streamed->written[1] : 0;
            /* stream offsets (an attach starts at stdout_offset) to positions in the result */
            out_done =
                out_done > c->result->stdout_offset ? out_done - c->result->stdout_offset : 0;
            err_done =
                err_done > c->result->stderr_offset ? err_done - c->result->stderr_offset : 0;
            if (c->result->stdout.len > out_done && (streamed == NULL || !streamed->broken[0]))
                fwrite(c->result->stdout.data + out_done, 1,
                       c->result->stdout.len - (size_t)out_done, stdout);
            if (c->result->stderr.len > err_done && (streamed == NULL || !streamed->broken[1]))
                fwrite(c->result->stderr.data + err_done, 1,
                       c->result->stderr.len - (size_t)err_done, stderr);
            if (c->result->value[0] != '\0')
                printf("%s\n", c->result->value);
        }
        fflush(stdout);
        if (c->notice[0] != '\0')
            fprintf(stderr, "sbx: notice: %s\n", c->notice);
        if (c->result != NULL && c->result->outcome == SBX__V1__OUTCOME__OUTCOME_OOM)
            fprintf(stderr, "sbx: the program was killed for running out of memory (its sandbox's "
                            "memory_mb: the profile's, or --memory-mb's when lower)\n");
        if (c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
            fprintf(stderr, "sbx: %s: %s\n", sbx_status_name((sbx_status)c->error_code), c->error);
    }
    bool timed_out =
        c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_TIMED_OUT ||
        (c->result != NULL && c->result->outcome == SBX__V1__OUTCOME__OUTCOME_TIMED_OUT);
    if (program && timed_out)
        return CLI_EXIT_TIMEOUT; /* not 128+SIGKILL: scripts tell a deadline from a kill */
    if (program && ran) {
        if (c->result->signal != 0)
            return 128 + c->result->signal;
        return c->result->exit_code;
    }
    if (c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED)
        return CLI_EXIT_OK;
    int code = cli_exit_code((sbx_status)c->error_code);
    return program ? cli_program_exit_code(code) : code;
}
