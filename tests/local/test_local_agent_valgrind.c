/* test_local_agent_valgrind.c - sbx-agent under valgrind memcheck: the protocol path (ping,
 * chunked file writes and reads, listings, refusals, malformed and oversized frames, the idle
 * TTL exit) must produce no memcheck error. Only static glibc's start-up/exit code is
 * suppressed (agent/valgrind.supp). Program execution is not covered here: valgrind implements
 * neither seccomp() nor clone(CLONE_VM|CLONE_VFORK) with a private stack, so the agent refuses
 * to run programs under it (fail closed) -- tests/local and tests/escape cover that path.
 */
#include "tests/local/local_helpers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "providers/common/agent_client.h"
#include "support/die_with_parent.h"

#define VALGRIND "/usr/bin/valgrind"

static void test_local_agent_protocol_is_valgrind_clean(void **state)
{
    (void)state;
    if (access(VALGRIND, X_OK) != 0) {
        print_message("skipped: valgrind is not installed (scripts/install-deps.sh)\n");
        skip();
    }
    char agent[4096], supp[4096];
    sbx_error err = {0};
    assert_int_equal(sbx_agent_binary_path(agent, sizeof agent, &err), SBX_OK);
    const char *src = getenv("SBX_SOURCE_DIR");
    assert_non_null(src);
    snprintf(supp, sizeof supp, "--suppressions=%s/agent/valgrind.supp", src);
    char dir[] = "/tmp/sbxv-XXXXXX";
    assert_non_null(mkdtemp(dir));
    chmod(dir, 0755); /* file operations run as the agent's program uid (65534) */
    char sock[64], ws[64], log[64];
    snprintf(sock, sizeof sock, "%s/agent.sock", dir);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    snprintf(log, sizeof log, "%s/valgrind.log", dir);
    assert_int_equal(mkdir(ws, 0777), 0);
    chmod(ws, 0777);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        dup2(fd, 1);
        execl(VALGRIND, VALGRIND, "--error-exitcode=9", supp, agent, "--socket", sock, "--workdir",
              ws, "--idle-ttl", "3", (char *)NULL);
        _exit(127);
    }
    sbx_agent_conn *c = NULL;
    sbx_status st = SBX_E_GONE;
    for (int i = 0; i < 300 && st != SBX_OK; i++) { /* valgrind starts slowly */
        usleep(100000);
        st = sbx_agent_connect(sock, 0, &c, &err);
    }
    assert_int_equal(st, SBX_OK);
    int64_t deadline = sbx_monotonic_ms() + 120000;
    assert_int_equal(sbx_agent_ping(c, deadline, NULL, &err), SBX_OK);
    size_t n = 100000;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 7);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "a/b/c.bin";
    w.mkdirs = true;
    w.content.data = data;
    w.content.len = n;
    assert_int_equal(sbx_agent_write_file(c, &w, NULL, deadline, NULL, &err), SBX_OK);
    sbx_result *r = sbx_result_new();
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "a/b/c.bin";
    assert_int_equal(sbx_agent_read_file(c, &rd, deadline, r, &err), SBX_OK);
    assert_int_equal(r->files[0]->content.len, n);
    assert_memory_equal(r->files[0]->content.data, data, n);
    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = "a/b";
    assert_int_equal(sbx_agent_list_files(c, &ls, deadline, r, &err), SBX_OK);
    rd.path = "../../../../../nonexistent-sbx-file";
    assert_int_not_equal(sbx_agent_read_file(c, &rd, deadline, r, &err), SBX_OK);
    sbx_exec_opts o = lt_opts(0, NULL);
    assert_int_equal(sbx_agent_reattach(c, 424242, 0, 0, &o, r, &err), SBX_E_GONE);
    sbx_message_free((ProtobufCMessage *)r);
    free(data);
    sbx_agent_close(c);
    /* raw junk: a malformed frame gets an error event; an oversized length drops the link */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {0};
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    uint8_t junk[] = {5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    assert_int_equal(send(fd, junk, sizeof junk, MSG_NOSIGNAL), (ssize_t)sizeof junk);
    uint8_t reply[256];
    assert_true(recv(fd, reply, sizeof reply, 0) > 4);
    close(fd);
    /* the idle TTL ends the agent; valgrind's exit status says whether it saw errors */
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "tail -40 %s >&2", log);
        if (system(cmd) != 0)
            print_message("(no valgrind log)\n");
        fail_msg("valgrind reported errors in sbx-agent (status %d)", status);
    }
    unlink(log);
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_agent_protocol_is_valgrind_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
