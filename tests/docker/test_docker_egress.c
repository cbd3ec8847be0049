/* test_docker_egress.c - network_egress ALLOWLIST on the docker provider: a managed container
 * with NetworkMode none and the egress proxy (providers/common/egress.c) in its namespace.
 *
 * Like tests/local/test_local_egress, the test runs in a network namespace of its own (a forked
 * child) holding its "internet": 198.51.100.0/24 local on lo, HTTP servers on 198.51.100.1:80
 * (allowed) and 198.51.100.2:80 (refused), a test resolver on 198.51.100.53. The proxy, started
 * by the provider in this process's namespace, reaches them; the container reaches only what
 * ["allowed.test"] allows, and the refusals are counted in the completion. Needs root and the
 * shared test daemon (scripts/dockerd-test.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "docker_test.h"
#include "providers/common/egress.h"
#include "providers/common/egress_parse.h"
#include "support/die_with_parent.h"
#include "sbx/contract.h"

static atomic_int hits_refused;

static int bound(int type, uint32_t ip, uint16_t port)
{
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(ip);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("bind: %s", strerror(errno));
    if (type == SOCK_STREAM)
        assert_int_equal(listen(s, 64), 0);
    return s;
}

typedef struct {
    int fd;
    const char *tag;
    atomic_int *hits;
} server;

static void *serve(void *arg)
{
    server *sv = arg;
    for (;;) {
        int c = accept4(sv->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        char buf[4096];
        size_t len = 0;
        while (len < sizeof buf - 1) {
            struct pollfd pf = {c, POLLIN, 0};
            if (poll(&pf, 1, 5000) <= 0)
                break;
            ssize_t n = read(c, buf + len, sizeof buf - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            buf[len] = '\0';
            if (strstr(buf, "\r\n\r\n"))
                break;
        }
        if (sv->hits)
            atomic_fetch_add(sv->hits, 1);
        char out[128];
        int ol = snprintf(out, sizeof out, "HTTP/1.0 200 OK\r\n\r\nhello %s", sv->tag);
        (void)!write(c, out, (size_t)ol);
        close(c);
    }
    return NULL;
}

static void *resolver(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        uint8_t q[SBX_EGRESS_DNS_MAX], r[SBX_EGRESS_DNS_MAX];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
        sbx_egress_dns_query dq;
        if (n <= 0 || sbx_egress_dns_query_parse(q, (size_t)n, &dq) != SBX_EGRESS_OK)
            continue;
        uint32_t a = strcmp(dq.name, "allowed.test") == 0 ? htonl(0xC6336401u)
                     : strcmp(dq.name, "evil.test") == 0  ? htonl(0xC6336402u)
                                                          : 0;
        size_t rn =
            sbx_egress_dns_reply_build(q, &dq, a ? 0 : 3, &a, a && dq.qtype == 1, 60, r, sizeof r);
        sendto(fd, r, rn, 0, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

static int setup_internet(void **state)
{
    (void)state;
    assert_int_equal(sbx_egress_lo_up(), 0);
    assert_int_equal(sbx_egress_local_route(0xC6336400u, 24), 0);
    static server s1 = {.tag = "allowed"};
    static server s2 = {.tag = "refused", .hits = &hits_refused};
    static int dns;
    s1.fd = bound(SOCK_STREAM, 0xC6336401u, 80);
    s2.fd = bound(SOCK_STREAM, 0xC6336402u, 80);
    dns = bound(SOCK_DGRAM, 0xC6336435u, 53);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve, &s1), 0);
    assert_int_equal(pthread_create(&t, NULL, serve, &s2), 0);
    assert_int_equal(pthread_create(&t, NULL, resolver, &dns), 0);
    return 0;
}

static const char probe[] =
    "import socket, struct\n"
    "def dns(name):\n"
    "    q = struct.pack('>HHHHHH', 7, 0x0100, 1, 0, 0, 0)\n"
    "    q += b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\\0'\n"
    "    q += struct.pack('>HH', 1, 1)\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n"
    "    s.sendto(q, ('198.51.100.53', 53)); r = s.recv(2048)\n"
    "    an = struct.unpack('>H', r[6:8])[0]\n"
    "    return '%d/%d/%s' % (r[3] & 15, an, '.'.join(str(b) for b in r[-4:]) if an else '-')\n"
    "def http(ip, host):\n"
    "    try:\n"
    "        s = socket.create_connection((ip, 80), timeout=5)\n"
    "        s.sendall(('GET / HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % host).encode())\n"
    "        out = b''\n"
    "        while True:\n"
    "            d = s.recv(4096)\n"
    "            if not d: break\n"
    "            out += d\n"
    "        return out.decode().split('\\r\\n\\r\\n')[-1] or 'closed'\n"
    "    except Exception as e:\n"
    "        return type(e).__name__\n"
    "print('DNS_ALLOWED', dns('allowed.test'))\n"
    "print('DNS_EVIL', dns('evil.test'))\n"
    "print('H_ALLOWED', http('198.51.100.2', 'allowed.test'))\n"
    "print('H_EVIL', http('198.51.100.2', 'evil.test'))\n"
    "print('DONE')\n";

static bool has(const sbx_result *r, const char *needle)
{
    char *s = strndup((const char *)r->stdout.data, r->stdout.len);
    bool ok = s && strstr(s, needle) != NULL;
    free(s);
    return ok;
}

static void test_docker_egress_allowlist(void **state)
{
    (void)state;
    if (dt_agent_path() == NULL)
        skip();
    dt_env env;
    dt_env_load(&env);
    char *rt = dt_tempdir();
    char image[160];
    snprintf(image, sizeof image, "image=%s", env.image_python);
    const char *opts[] = {image, "egress_resolver=198.51.100.53", NULL};
    void *prov = dt_provider_open(&env, SBX_ENV_MANAGED, NULL, rt, opts);
    const sbx_provider_ops *ops = sbx_provider_lookup("docker");

    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    p->n_network_allow = 1;
    p->network_allow = malloc(sizeof *p->network_allow);
    p->network_allow[0] = strdup("allowed.test");
    sbx_sandbox *sb = NULL;
    sbx_error err = {0};
    sbx_status st = ops->create(prov, NULL, NULL, p, &sb, &err);
    if (st != SBX_OK)
        fail_msg("create: %s: %s", sbx_status_name(st), err.message);

    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = (char *)probe;
    sbx_exec_opts o = {.policy = p, .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    st = ops->run_code(sb, &op, &o, r, &err);
    if (st != SBX_OK)
        fail_msg("probe: %s: %s", sbx_status_name(st), err.message);
    if (!has(r, "DONE"))
        fail_msg("probe: %.*s / %.*s", (int)r->stdout.len, (const char *)r->stdout.data,
                 (int)r->stderr.len, (const char *)r->stderr.data);
    assert_true(has(r, "DNS_ALLOWED 0/1/198.51.100.1"));
    assert_true(has(r, "DNS_EVIL 3/0/-"));
    assert_true(has(r, "H_ALLOWED hello allowed"));
    assert_false(has(r, "H_EVIL hello"));
    assert_int_equal(atomic_load(&hits_refused), 0);
    uint32_t evil = 0;
    for (size_t i = 0; i < r->n_egress_refused; i++) {
        if (strcmp(r->egress_refused[i]->destination, "evil.test") == 0)
            evil = r->egress_refused[i]->count;
    }
    assert_int_equal(evil, 2); /* the DNS question and the HTTP request */
    sbx_message_free((ProtobufCMessage *)r);

    char id[128];
    snprintf(id, sizeof id, "%s", sb->id);
    ops->sandbox_close(sb);
    assert_int_equal(ops->destroy(prov, id, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)p);
    dt_provider_close(prov);
    dt_rmtree(rt);
    free(rt);
    dt_env_free(&env);
}

int main(void)
{
    if (geteuid() != 0) {
        print_message("skipped: needs root (network namespaces)\n");
        return 0;
    }
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        if (unshare(CLONE_NEWNET) != 0) {
            perror("unshare");
            _exit(1);
        }
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_docker_egress_allowlist),
        };
        _exit(cmocka_run_group_tests(tests, setup_internet, NULL));
    }
    int wst = 0;
    waitpid(child, &wst, 0);
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 1;
}
