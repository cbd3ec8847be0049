/* test_local_detach.c - detached commands on the local provider, through its ops table and so
 * through the agent protocol: a detached start answers with the command id at once; several
 * followers of one command each get its live output and its end (the agent serves every
 * attached client, none steals another's); an offset older than the journal is refused naming
 * the range kept; a follower's deadline stops following, never the command; a cancel reports
 * the end, also of a command that ended already. And the orders a loaded host can produce,
 * forced by holding a process stopped from the host or by raw frames on two connections: a
 * spare that has not taken its job, a signal before the command made its process group,
 * chunked code from two connections, a refused code's tail, a file write while an earlier
 * request's end waits, a call after the python kernel died unreaped.
 */
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "local_helpers.h"

#include "providers/common/agent_client.h"

/* Output of the journal-overflow test: more than the agent keeps (AGENT_JOURNAL_BYTES). */
#define JOURNAL_BYTES (256u * 1024u)
#define OVERFLOW_TOTAL (JOURNAL_BYTES + 40000u)

static sbx_sandbox *reopen(lt_env *e, const char *id)
{
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    sbx_status st = e->ops->attach(e->state, id, NULL, NULL, &sb, &err);
    if (st != SBX_OK)
        fail_msg("attach %s: %s", id, err.message);
    return sb;
}

static uint64_t start_detached(lt_env *e, sbx_sandbox *sb, const char *line)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    op.detach = true;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    sbx_error err = {0};
    sbx_status st = e->ops->run_command(sb, &op, &o, r, &err);
    if (st != SBX_OK)
        fail_msg("detach '%s': %s", line, err.message);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED);
    uint64_t id = r->command_id;
    assert_true(id > 0);
    sbx_message_free(&r->base);
    return id;
}

static sbx_status follow(lt_env *e, sbx_sandbox *sb, uint64_t id, uint64_t out_off,
                         int64_t timeout_ms, sbx_exec_opts *o, sbx_result **out, sbx_error *err)
{
    Sbx__V1__AttachCommand op = SBX__V1__ATTACH_COMMAND__INIT;
    op.command_id = id;
    op.stdout_offset = out_off;
    sbx_exec_opts local = lt_opts(timeout_ms, NULL);
    if (o == NULL)
        o = &local;
    *out = sbx_result_new();
    return e->ops->attach_command(sb, &op, o, *out, err);
}

static sbx_status cancel(lt_env *e, sbx_sandbox *sb, uint64_t id, sbx_result **out, sbx_error *err)
{
    Sbx__V1__CancelCommand op = SBX__V1__CANCEL_COMMAND__INIT;
    op.command_id = id;
    *out = sbx_result_new();
    sbx_exec_opts o = lt_opts(0, NULL);
    return e->ops->cancel_command(sb, &op, &o, *out, err);
}

/* ---- several followers ------------------------------------------------------------------ */

typedef struct follower {
    lt_env *e;
    sbx_sandbox *sb;
    uint64_t id;
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    int *seen_first; /* followers that received the first line */
    bool got_first;
    sbx_status st;
    sbx_result *r;
    sbx_error err;
} follower;

static void on_output(void *arg, Sbx__V1__Stream stream, const uint8_t *data, size_t len,
                      uint64_t offset)
{
    (void)stream;
    (void)data;
    follower *f = arg;
    if (!f->got_first && offset + len >= 6) { /* "first\n" */
        f->got_first = true;
        pthread_mutex_lock(f->mu);
        (*f->seen_first)++;
        pthread_cond_broadcast(f->cv);
        pthread_mutex_unlock(f->mu);
    }
}

static void *follow_thread(void *arg)
{
    follower *f = arg;
    sbx_exec_opts o = lt_opts(0, NULL);
    o.on_output = on_output;
    o.on_output_arg = f;
    f->st = follow(f->e, f->sb, f->id, 0, 0, &o, &f->r, &f->err);
    return NULL;
}

static void test_detach_every_follower_gets_the_output_and_the_end(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    uint64_t id = start_detached(&e, sb,
                                 "echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; "
                                 "echo second; exit 5");
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int seen = 0;
    follower f[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        memset(&f[i], 0, sizeof f[i]);
        f[i] = (follower){&e, reopen(&e, sb->id), id, &mu, &cv, &seen, false, SBX_OK, NULL, {0}};
        assert_int_equal(pthread_create(&t[i], NULL, follow_thread, &f[i]), 0);
    }
    /* both follow it now (each received the first line): let the command go on */
    pthread_mutex_lock(&mu);
    while (seen < 2)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    sbx_message_free(&lt_run(&e, sb, "touch /workspace/go")->base);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        if (f[i].st != SBX_OK)
            fail_msg("follower %d: %s: %s", i, sbx_status_name(f[i].st), f[i].err.message);
        assert_int_equal(f[i].r->exit_code, 5);
        assert_int_equal(f[i].r->stdout.len, 13);
        assert_memory_equal(f[i].r->stdout.data, "first\nsecond\n", 13);
        assert_int_equal(f[i].r->command_id, id);
        sbx_message_free(&f[i].r->base);
        e.ops->sandbox_close(f[i].sb);
    }
    lt_destroy(&e, sb);
    lt_close(&e);
}

/* ---- offsets ---------------------------------------------------------------------------- */

static void test_detach_offset_older_than_the_journal_is_refused(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    char line[128];
    snprintf(line, sizeof line, "head -c %u /dev/zero | tr '\\0' x", OVERFLOW_TOTAL);
    uint64_t id = start_detached(&e, sb, line);
    sbx_result *r;
    sbx_error err = {0};
    /* from the last byte on: waits for the end */
    assert_int_equal(follow(&e, sb, id, OVERFLOW_TOTAL - 1, 0, NULL, &r, &err), SBX_OK);
    assert_int_equal(r->stdout.len, 1);
    assert_int_equal(r->stdout_offset, OVERFLOW_TOTAL - 1);
    sbx_message_free(&r->base);
    assert_int_equal(follow(&e, sb, id, 0, 0, NULL, &r, &err), SBX_E_INVALID_ARGUMENT);
    char want[160];
    snprintf(want, sizeof want, "now holds stdout bytes %u to %u; attach from offset %u",
             OVERFLOW_TOTAL - JOURNAL_BYTES, OVERFLOW_TOTAL, OVERFLOW_TOTAL - JOURNAL_BYTES);
    if (strstr(err.message, want) == NULL)
        fail_msg("message does not name the range kept: %s", err.message);
    sbx_message_free(&r->base);
    assert_int_equal(follow(&e, sb, id, OVERFLOW_TOTAL - JOURNAL_BYTES, 0, NULL, &r, &err), SBX_OK);
    assert_int_equal(r->stdout.len, JOURNAL_BYTES);
    sbx_message_free(&r->base);
    lt_destroy(&e, sb);
    lt_close(&e);
}

/* ---- deadlines and cancel --------------------------------------------------------------- */

static void test_detach_follower_deadline_never_stops_the_command(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    uint64_t id = start_detached(&e, sb, "sleep 600");
    sbx_result *r;
    sbx_error err = {0};
    assert_int_equal(follow(&e, sb, id, 0, 200, NULL, &r, &err), SBX_E_TIMEOUT);
    assert_non_null(strstr(err.message, "it runs on"));
    sbx_message_free(&r->base);
    /* it still ran: the cancel is what ends it */
    sbx_sandbox *other = reopen(&e, sb->id);
    assert_int_equal(cancel(&e, other, id, &r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_SIGNALED);
    assert_int_equal(r->signal, 9);
    sbx_message_free(&r->base);
    e.ops->sandbox_close(other);
    lt_destroy(&e, sb);
    lt_close(&e);
}

static void test_detach_cancel_of_an_ended_command_reports_its_end(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    uint64_t id = start_detached(&e, sb, "exit 4");
    sbx_result *r;
    sbx_error err = {0};
    assert_int_equal(follow(&e, sb, id, 0, 0, NULL, &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    assert_int_equal(cancel(&e, sb, id, &r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    assert_int_equal(r->exit_code, 4);
    sbx_message_free(&r->base);
    assert_int_equal(cancel(&e, sb, id + 1000, &r, &err), SBX_E_GONE);
    sbx_message_free(&r->base);
    lt_destroy(&e, sb);
    lt_close(&e);
}

/* ---- a spare slow to take its job -------------------------------------------------------- */

/* The agent's pid (host view), from the sandbox's meta file. */
static long agent_pid_of(sbx_sandbox *sb)
{
    char meta[512], line[200];
    snprintf(meta, sizeof meta, "%s/meta", sbx_local_state_dir(sb));
    FILE *f = fopen(meta, "r");
    assert_non_null(f);
    long pid = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "pid ", 4) == 0)
            pid = strtol(line + 4, NULL, 10);
    fclose(f);
    assert_true(pid > 1);
    return pid;
}

/* The agent's only child (its spare, in a session with nothing running), waited for; 0 when
 * there is none after a while (no delegated cgroup: no spare). */
static long the_spare(long agent)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", agent, agent);
    for (int i = 0; i < 1000; i++) {
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        long kid = 0, more = 0;
        int n = fscanf(f, "%ld %ld", &kid, &more);
        fclose(f);
        if (n == 1)
            return kid;
        usleep(10 * 1000);
    }
    return 0;
}

/* Stops sb's waiting spare with SIGSTOP from the host and returns its pid; skips the test
 * (after cleaning up) where there is none. */
static long stop_the_spare(lt_env *e, sbx_sandbox *sb)
{
    long spare = the_spare(agent_pid_of(sb));
    if (spare <= 0) {
        lt_destroy(e, sb);
        lt_close(e);
        skip(); /* no spare on this host */
    }
    assert_int_equal(kill((pid_t)spare, SIGSTOP), 0);
    return spare;
}

/* A command handed to a spare that has not yet taken its job (a loaded host: the spare is not
 * scheduled before the next request arrives) runs what it was given, not the next command: the
 * job the agent writes for the next spare must not be the one the first still reads. The first
 * spare is held stopped from the host while the next command starts and ends. */
static void test_detach_a_slow_spare_runs_its_own_command_not_the_next(void **state)
{
    (void)state;
    if (getuid() != 0)
        skip(); /* rootless: no delegated cgroup, no spare */
    lt_env e;
    lt_open_scoped(&e, "test-session", SBX_SCOPE_PER_SESSION);
    sbx_error err = {0};
    sbx_sandbox *sb = lt_create(&e);
    long spare = stop_the_spare(&e, sb);
    uint64_t id = start_detached(&e, sb, "echo first");
    sbx_result *r = lt_run(&e, sb, "echo second");
    bool second = lt_stdout_has(r, "second");
    sbx_message_free(&r->base);
    assert_int_equal(kill((pid_t)spare, SIGCONT), 0);
    assert_int_equal(follow(&e, sb, id, 0, 0, NULL, &r, &err), SBX_OK);
    bool first = r->stdout.len == 6 && memcmp(r->stdout.data, "first\n", 6) == 0;
    if (!first)
        fprintf(stderr, "the first command printed: %.*s\n", (int)r->stdout.len,
                (const char *)r->stdout.data);
    sbx_message_free(&r->base);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_true(second);
    assert_true(first);
}

/* A signal sent to a command before its first process made its process group (a spare not
 * yet scheduled: between fork and setsid) reaches it: kill(-pid) failed with ESRCH and the
 * signal was lost, so a command cancelled with SIGTERM right after its start ran on. */
static void test_detach_a_signal_before_the_command_runs_still_reaches_it(void **state)
{
    (void)state;
    if (getuid() != 0)
        skip(); /* rootless: no delegated cgroup, no spare */
    lt_env e;
    lt_open_scoped(&e, "test-session", SBX_SCOPE_PER_SESSION);
    sbx_sandbox *sb = lt_create(&e);
    long spare = stop_the_spare(&e, sb);
    uint64_t id = start_detached(&e, sb, "sleep 1; echo survived");
    char sock[256];
    snprintf(sock, sizeof sock, "%s/box/agent.sock", sbx_local_state_dir(sb));
    sbx_agent_conn *c = NULL;
    sbx_error err = {0};
    assert_int_equal(sbx_agent_connect(sock, 0, &c, &err), SBX_OK);
    assert_int_equal(sbx_agent_signal(c, id, SIGTERM, &err), SBX_OK);
    sbx_agent_close(c);
    assert_int_equal(kill((pid_t)spare, SIGCONT), 0);
    sbx_result *r;
    assert_int_equal(follow(&e, sb, id, 0, 0, NULL, &r, &err), SBX_OK);
    int outcome = r->outcome, signo = r->signal;
    bool survived = r->stdout.len > 0;
    sbx_message_free(&r->base);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_false(survived);
    assert_int_equal(outcome, SBX__V1__OUTCOME__OUTCOME_SIGNALED);
    assert_int_equal(signo, SIGTERM);
}

/* ---- run_code in chunks, from two connections ----------------------------------------- */

static int raw_connect(sbx_sandbox *sb)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s/box/agent.sock", sbx_local_state_dir(sb));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void raw_send(int fd, const Sbx__V1__AgentRequest *r)
{
    size_t n = sbx__v1__agent_request__get_packed_size(r);
    uint8_t *buf = malloc(4 + n);
    assert_non_null(buf);
    buf[0] = (uint8_t)n;
    buf[1] = (uint8_t)(n >> 8);
    buf[2] = (uint8_t)(n >> 16);
    buf[3] = (uint8_t)(n >> 24);
    sbx__v1__agent_request__pack(r, buf + 4);
    assert_int_equal(write(fd, buf, 4 + n), (ssize_t)(4 + n));
    free(buf);
}

static void raw_read_all(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        assert_true(r > 0);
        p += r;
        n -= (size_t)r;
    }
}

/* The next event on fd (caller frees). */
static Sbx__V1__AgentEvent *raw_event(int fd)
{
    uint8_t h[4];
    raw_read_all(fd, h, 4);
    uint32_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
    assert_true(n <= SBX_AGENT_MAX_FRAME);
    uint8_t *buf = malloc(n ? n : 1);
    assert_non_null(buf);
    raw_read_all(fd, buf, n);
    Sbx__V1__AgentEvent *ev = sbx__v1__agent_event__unpack(NULL, n, buf);
    free(buf);
    assert_non_null(ev);
    return ev;
}

/* Sends one chunk of a run_code with request id 1. */
static void code_frame(int fd, const char *language, bool stateful, const char *code, bool more)
{
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentCode x = SBX__V1__AGENT_CODE__INIT;
    r.id = 1;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_CODE;
    r.code = &x;
    x.language = (char *)language;
    x.stateful = stateful;
    x.code.data = (uint8_t *)code;
    x.code.len = strlen(code);
    x.more = more;
    raw_send(fd, &r);
}

static void code_chunk(int fd, const char *code, bool more)
{
    code_frame(fd, "sh", false, code, more);
}

/* Pings with request id 2 and waits for the pong: every frame sent before it was handled. */
static void ping_through(int fd)
{
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentPing p = SBX__V1__AGENT_PING__INIT;
    r.id = 2;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_PING;
    r.ping = &p;
    raw_send(fd, &r);
    for (;;) {
        Sbx__V1__AgentEvent *ev = raw_event(fd);
        bool pong = ev->id == 2 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_PONG;
        sbx__v1__agent_event__free_unpacked(ev, NULL);
        if (pong)
            return;
    }
}

/* What request 1 printed on stdout until its end (or its error, as "error: ..."); *restarted
 * (if asked) is its end's kernel_restarted. */
static void code_output_end(int fd, char *out, size_t cap, bool *restarted)
{
    size_t len = 0;
    out[0] = '\0';
    for (;;) {
        Sbx__V1__AgentEvent *ev = raw_event(fd);
        bool end = false;
        if (ev->id == 1 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_OUTPUT &&
            ev->output->stream == SBX__V1__AGENT_STREAM__AGENT_STREAM_STDOUT) {
            size_t n = ev->output->data.len < cap - 1 - len ? ev->output->data.len : cap - 1 - len;
            memcpy(out + len, ev->output->data.data, n);
            out[len += n] = '\0';
        } else if (ev->id == 1 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_ERROR) {
            snprintf(out, cap, "error: %s", ev->error->message);
            end = true;
        } else if (ev->id == 1 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_EXIT) {
            if (restarted != NULL)
                *restarted = ev->exit->kernel_restarted;
            end = true;
        }
        sbx__v1__agent_event__free_unpacked(ev, NULL);
        if (end)
            return;
    }
}

static void code_output(int fd, char *out, size_t cap)
{
    code_output_end(fd, out, cap, NULL);
}

/* Two connections of one sandbox each send a chunked run_code with the same request id (ids
 * are per connection), interleaved: each runs its own code and prints only its own output.
 * The chunks gathered in one buffer for the whole agent, keyed by request id: the second
 * connection's code ran appended to the first's chunk and the first ran its tail alone. */
static void test_detach_chunked_code_of_two_connections_never_meets(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    int a = raw_connect(sb), b = raw_connect(sb);
    code_chunk(a, "echo A1\n", true);
    ping_through(a);
    code_chunk(b, "echo B1\n", true);
    ping_through(b);
    code_chunk(a, "echo A2\n", false);
    char out_a[256], out_b[256];
    code_output(a, out_a, sizeof out_a);
    code_chunk(b, "echo B2\n", false);
    code_output(b, out_b, sizeof out_b);
    close(a);
    close(b);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_string_equal(out_a, "A1\nA2\n");
    assert_string_equal(out_b, "B1\nB2\n");
}

/* A chunked run_code refused for its size is refused whole: the chunks after the refusal are
 * dropped, not run as a program of their own (the tail of the code started a new one). */
static void test_detach_code_refused_for_its_size_runs_no_tail(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    int a = raw_connect(sb);
    static char chunk[32768];
    memset(chunk, '#', sizeof chunk - 2);
    chunk[sizeof chunk - 2] = '\n';
    chunk[sizeof chunk - 1] = '\0';
    for (int i = 0; i < 40; i++) /* 40 x 32 KiB: past the 1 MiB the agent gathers */
        code_chunk(a, chunk, true);
    code_chunk(a, "echo TAIL-RAN\n", false);
    char out[256];
    code_output(a, out, sizeof out); /* up to the refusal */
    /* A tail started as a program would have answered Started before the agent reads the ping
     * sent after it. */
    Sbx__V1__AgentRequest r = SBX__V1__AGENT_REQUEST__INIT;
    Sbx__V1__AgentPing p = SBX__V1__AGENT_PING__INIT;
    r.id = 2;
    r.body_case = SBX__V1__AGENT_REQUEST__BODY_PING;
    r.ping = &p;
    raw_send(a, &r);
    int started = 0;
    for (bool pong = false; !pong;) {
        Sbx__V1__AgentEvent *ev = raw_event(a);
        started += ev->id == 1 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_STARTED;
        pong = ev->id == 2 && ev->body_case == SBX__V1__AGENT_EVENT__BODY_PONG;
        sbx__v1__agent_event__free_unpacked(ev, NULL);
    }
    close(a);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_non_null(strstr(out, "error: code is larger than"));
    assert_int_equal(started, 0);
}

/* A file written on a connection that still follows a command (a cancel whose signal the
 * command handled leaves it followed, and its end comes later) is written whole: the client
 * took any waiting event for an early answer to the write, stopped sending after the first
 * chunk, and then waited for an answer the agent never sent (the file cut at 32 KiB, the write
 * a timeout). */
static void test_detach_a_write_while_the_end_of_a_followed_command_waits(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    uint64_t id = start_detached(&e, sb, "trap '' TERM; touch /tmp/ready; sleep 1; exit 0");
    bool ready = false;
    for (int i = 0; i < 100 && !ready; i++) { /* its trap is set */
        sbx_result *t = lt_run(&e, sb, "test -e /tmp/ready && echo yes");
        ready = lt_stdout_has(t, "yes");
        sbx_message_free(&t->base);
    }
    assert_true(ready);
    Sbx__V1__CancelCommand op = SBX__V1__CANCEL_COMMAND__INIT;
    op.command_id = id;
    op.signal = SIGTERM;
    sbx_result *r = sbx_result_new();
    sbx_exec_opts o = lt_opts(500, NULL);
    sbx_error err = {0};
    assert_int_equal(e.ops->cancel_command(sb, &op, &o, r, &err), SBX_OK);
    bool handled = false; /* the cancel's notice: the command still runs */
    for (size_t i = 0; i < r->n_provider_data; i++)
        handled = handled || strcmp(r->provider_data[i]->key, "notice") == 0;
    sbx_message_free(&r->base);
    usleep(1500 * 1000); /* its end waits on the connection */
    static uint8_t data[100 * 1024];
    memset(data, 'w', sizeof data);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "/tmp/big";
    w.content.data = data;
    w.content.len = sizeof data;
    o = lt_opts(10000, NULL);
    r = sbx_result_new();
    sbx_status st = e.ops->write_file(sb, &w, &o, r, &err);
    if (st != SBX_OK)
        fprintf(stderr, "write: %s\n", err.message);
    sbx_message_free(&r->base);
    r = lt_run(&e, sb, "wc -c < /tmp/big");
    bool whole = lt_stdout_has(r, "102400");
    sbx_message_free(&r->base);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_true(handled);
    assert_int_equal(st, SBX_OK);
    assert_true(whole);
}

/* The pid of a child of parent whose comm is name, 0 when there is none. */
static long child_named(long parent, const char *name)
{
    char path[64], comm[64];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", parent, parent);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    long kid, found = 0;
    while (found == 0 && fscanf(f, "%ld", &kid) == 1) {
        snprintf(path, sizeof path, "/proc/%ld/comm", kid);
        FILE *c = fopen(path, "r");
        if (c != NULL && fgets(comm, sizeof comm, c) != NULL &&
            strncmp(comm, name, strlen(name)) == 0 && comm[strlen(name)] == '\n')
            found = kid;
        if (c != NULL)
            fclose(c);
    }
    fclose(f);
    return found;
}

/* Whether pid is in state (its /proc stat letter: 'Z' dead and not reaped, 'T' stopped),
 * waited for up to 5 s. */
static bool reaches_state(long pid, char state)
{
    char path[64], line[256], want[8];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    snprintf(want, sizeof want, ") %c ", state);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        if (f == NULL)
            return false;
        bool in = fgets(line, sizeof line, f) != NULL && strstr(line, want) != NULL;
        fclose(f);
        if (in)
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* Whether pid sleeps in poll(2) (its /proc syscall is SYS_poll), waited for up to 5 s. */
static bool in_poll(long pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/syscall", pid);
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        long nr = -1;
        if (f == NULL || fscanf(f, "%ld", &nr) != 1)
            nr = -1;
        if (f != NULL)
            fclose(f);
#ifdef SYS_poll
        if (nr == SYS_poll || nr == SYS_ppoll)
#else
        if (nr == SYS_ppoll)
#endif
            return true;
        usleep(10 * 1000);
    }
    return false;
}

/* A stateful call that arrives after the idle python kernel died, before the agent reaped it
 * (both in one poll round: here the agent is held stopped meanwhile), runs in a new kernel and
 * says so: it was bound to the dead one and ended with that process's status, never run. */
static void test_detach_a_call_after_the_kernel_died_unreaped_runs_in_a_new_one(void **state)
{
    (void)state;
    lt_env e;
    lt_open(&e);
    sbx_sandbox *sb = lt_create(&e);
    sbx_result *r;
    sbx_error err = {0};
    assert_int_equal(lt_py(&e, sb, "x = 1", &r, &err), SBX_OK);
    sbx_message_free(&r->base);
    long agent = agent_pid_of(sb), kernel = child_named(agent, "python3");
    assert_true(kernel > 0);
    int a = raw_connect(sb);
    ping_through(a); /* accepted */
    /* stopped in its poll (not still ending the ping's round, which reaps last): the death and
     * the call then meet in one round */
    bool polling = in_poll(agent);
    assert_int_equal(kill((pid_t)agent, SIGSTOP), 0);
    bool stopped = reaches_state(agent, 'T');
    assert_int_equal(kill((pid_t)kernel, SIGKILL), 0);
    bool died = reaches_state(kernel, 'Z');
    code_frame(a, "python", true, "print(6 * 7)", false);
    assert_int_equal(kill((pid_t)agent, SIGCONT), 0);
    char out[256];
    bool restarted = false;
    code_output_end(a, out, sizeof out, &restarted);
    close(a);
    lt_destroy(&e, sb);
    lt_close(&e);
    assert_true(polling);
    assert_true(stopped);
    assert_true(died);
    assert_string_equal(out, "42\n");
    assert_true(restarted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detach_every_follower_gets_the_output_and_the_end),
        cmocka_unit_test(test_detach_offset_older_than_the_journal_is_refused),
        cmocka_unit_test(test_detach_follower_deadline_never_stops_the_command),
        cmocka_unit_test(test_detach_cancel_of_an_ended_command_reports_its_end),
        cmocka_unit_test(test_detach_a_slow_spare_runs_its_own_command_not_the_next),
        cmocka_unit_test(test_detach_a_signal_before_the_command_runs_still_reaches_it),
        cmocka_unit_test(test_detach_chunked_code_of_two_connections_never_meets),
        cmocka_unit_test(test_detach_code_refused_for_its_size_runs_no_tail),
        cmocka_unit_test(test_detach_a_write_while_the_end_of_a_followed_command_waits),
        cmocka_unit_test(test_detach_a_call_after_the_kernel_died_unreaped_runs_in_a_new_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
