/* test_local_egress.c - network_egress ALLOWLIST on the local provider (providers/common/egress.c).
 *
 * The test builds its own "internet" in a network namespace it creates (the whole test runs in
 * a forked child that unshared it): 198.51.100.0/24 is local there (a `local` route on lo), an
 * HTTP server answers on 198.51.100.1:80 ("allowed") and 198.51.100.2:80 ("refused"), a fake
 * TLS server on 198.51.100.1:443 answers any ClientHello, a UDP sink listens on
 * 198.51.100.1:5353, and a test resolver on 198.51.100.53:53 answers allowed.test,
 * x.wild.test and evil.test (and loopy.test with 127.0.0.1). The sandbox, allowed
 * ["allowed.test", "*.wild.test", "loopy.test"], must reach allowed names by HTTP Host and TLS
 * SNI whatever address it dials, and nothing else: refused names, raw IPs, other ports, UDP
 * other than DNS, IPv6, an allowed name resolving to loopback; every refusal is counted in the
 * completion. Never a public address. Needs root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "local_helpers.h"
#include "providers/common/agent_client.h"
#include "providers/common/egress.h"
#include "support/die_with_parent.h"
#include "support/switches.h"
#include "providers/common/egress_parse.h"
#include "sbx/config.h"

static atomic_int hits_allowed, hits_refused, hits_tls, hits_udp;

static int bound(int type, const char *ip, uint16_t port)
{
    int s = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    assert_int_equal(inet_pton(AF_INET, ip, &a.sin_addr), 1);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("bind %s:%u: %s", ip, port, strerror(errno));
    if (type == SOCK_STREAM)
        assert_int_equal(listen(s, 64), 0);
    return s;
}

typedef struct {
    int fd;
    const char *ip;
    atomic_int *hits;
    bool tls;
} server;

/* Serves forever (the test child's exit ends it): reads a head, answers, closes. */
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
            if (sv->tls ? len >= 5 : strstr(buf, "\r\n\r\n") != NULL)
                break;
        }
        atomic_fetch_add(sv->hits, 1);
        char out[256];
        int ol = sv->tls ? snprintf(out, sizeof out, "TLS-REACHED %s\n", sv->ip)
                         : snprintf(out, sizeof out, "HTTP/1.0 200 OK\r\n\r\nhello %s", sv->ip);
        (void)!write(c, out, (size_t)ol);
        close(c);
    }
    return NULL;
}

static void *udp_sink(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        char b[512];
        if (recv(fd, b, sizeof b, 0) >= 0)
            atomic_fetch_add(&hits_udp, 1);
    }
    return NULL;
}

/* The test resolver: A records for the test's names, NXDOMAIN for others. */
static void *resolver(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        uint8_t q[SBX_EGRESS_DNS_MAX];
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, q, sizeof q, 0, (struct sockaddr *)&from, &fl);
        sbx_egress_dns_query dq;
        if (n <= 0 || sbx_egress_dns_query_parse(q, (size_t)n, &dq) != SBX_EGRESS_OK)
            continue;
        uint32_t a = 0;
        size_t nl = strlen(dq.name);
        if (strcmp(dq.name, "allowed.test") == 0 ||
            (nl > 10 && strcmp(dq.name + nl - 10, ".wild.test") == 0))
            a = htonl(0xC6336401u);
        else if (strcmp(dq.name, "evil.test") == 0)
            a = htonl(0xC6336402u);
        else if (strcmp(dq.name, "loopy.test") == 0)
            a = htonl(0x7F000001u);
        uint8_t r[SBX_EGRESS_DNS_MAX];
        size_t rn = sbx_egress_dns_reply_build(q, &dq, a ? 0 : 3, &a, a && dq.qtype == 1 ? 1 : 0,
                                               60, r, sizeof r);
        sendto(fd, r, rn, 0, (struct sockaddr *)&from, fl);
    }
    return NULL;
}

static void start(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
    pthread_detach(t);
}

static int setup_internet(void **state)
{
    (void)state;
    assert_int_equal(sbx_egress_lo_up(), 0);
    assert_int_equal(sbx_egress_local_route(0xC6336400u, 24), 0);
    static server s1 = {.ip = "198.51.100.1", .hits = &hits_allowed};
    static server s2 = {.ip = "198.51.100.2", .hits = &hits_refused};
    static server s3 = {.ip = "198.51.100.1", .hits = &hits_tls, .tls = true};
    static int udp, dns;
    s1.fd = bound(SOCK_STREAM, "198.51.100.1", 80);
    s2.fd = bound(SOCK_STREAM, "198.51.100.2", 80);
    s3.fd = bound(SOCK_STREAM, "198.51.100.1", 443);
    udp = bound(SOCK_DGRAM, "198.51.100.1", 5353);
    dns = bound(SOCK_DGRAM, "198.51.100.53", 53);
    start(serve, &s1);
    start(serve, &s2);
    start(serve, &s3);
    start(udp_sink, &udp);
    start(resolver, &dns);
    return 0;
}

static void open_with_resolver(lt_env *e, const char *resolver_addr)
{
    e->ops = sbx_provider_lookup("local");
    assert_non_null(e->ops);
    snprintf(e->runtime_dir, sizeof e->runtime_dir, "/tmp/sbxt-XXXXXX");
    assert_non_null(mkdtemp(e->runtime_dir));
    lt_track(e->runtime_dir);
    sbx_options *o = sbx_options_new(e->ops->options);
    assert_non_null(o);
    sbx_error err = {0};
    assert_int_equal(sbx_options_set(o, "egress_resolver", resolver_addr, &err), SBX_OK);
    sbx_provider_ctx ctx = {0};
    ctx.profile = "test";
    ctx.runtime_dir = e->runtime_dir;
    ctx.node = "test";
    ctx.options = o;
    sbx_status st = e->ops->open(&ctx, &e->state, &err);
    sbx_options_free(o);
    if (st != SBX_OK)
        fail_msg("open local provider: %s", err.message);
}

static sbx_policy *allowlist(void)
{
    sbx_policy *p = lt_policy(0, 0);
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    static char *allow[] = {"allowed.test", "*.wild.test", "loopy.test"};
    p->n_network_allow = 3;
    p->network_allow = malloc(sizeof allow);
    for (size_t i = 0; i < 3; i++)
        p->network_allow[i] = strdup(allow[i]);
    return p;
}

static uint32_t refused(const sbx_result *r, const char *dest)
{
    for (size_t i = 0; i < r->n_egress_refused; i++) {
        if (strcmp(r->egress_refused[i]->destination, dest) == 0)
            return r->egress_refused[i]->count;
    }
    return 0;
}

static const char probe[] =
    "import socket, ssl, struct\n"
    "def dns(name, qtype=1, at='198.51.100.53'):\n"
    "    q = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)\n"
    "    q += b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + b'\\0'\n"
    "    q += struct.pack('>HH', qtype, 1)\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n"
    "    s.sendto(q, (at, 53)); r = s.recv(2048)\n"
    "    an = struct.unpack('>H', r[6:8])[0]\n"
    "    return '%d/%d/%s' % (r[3] & 15, an, '.'.join(str(b) for b in r[-4:]) if an else '-')\n"
    "def http(ip, host, port=80):\n"
    "    try:\n"
    "        s = socket.create_connection((ip, port), timeout=5)\n"
    "        s.sendall(('GET / HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % host).encode())\n"
    "        out = b''\n"
    "        while True:\n"
    "            d = s.recv(4096)\n"
    "            if not d: break\n"
    "            out += d\n"
    "        return out.decode().split('\\r\\n\\r\\n')[-1] or 'closed'\n"
    "    except Exception as e:\n"
    "        return type(e).__name__\n"
    "def tls(name):\n"
    "    ctx = ssl.create_default_context()\n"
    "    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
    "    obj = ctx.wrap_bio(i, o, server_hostname=name)\n"
    "    try: obj.do_handshake()\n"
    "    except ssl.SSLWantReadError: pass\n"
    "    try:\n"
    "        s = socket.create_connection(('203.0.113.9', 443), timeout=5)\n"
    "        s.sendall(o.read()); return s.recv(100).decode().strip() or 'closed'\n"
    "    except Exception as e:\n"
    "        return type(e).__name__\n"
    "def raw(ip, port, fam=socket.AF_INET):\n"
    "    try:\n"
    "        s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(5); s.connect((ip, port))\n"
    "        return 'connected'\n"
    "    except Exception as e:\n"
    "        return type(e).__name__\n"
    "print('DNS_ALLOWED', dns('allowed.test'))\n"
    "print('DNS_ANYWHERE', dns('x.wild.test', at='192.0.2.1'))\n"
    "print('DNS_EVIL', dns('evil.test'))\n"
    "print('DNS_AAAA', dns('allowed.test', 28))\n"
    "print('H_ALLOWED', http('198.51.100.1', 'allowed.test'))\n"
    "print('H_REDIRECTED', http('198.51.100.2', 'allowed.test'))\n"
    "print('H_WILD', http('198.51.100.1', 'a.b.wild.test'))\n"
    "print('H_EVIL', http('198.51.100.1', 'evil.test'), http('198.51.100.2', 'evil.test'))\n"
    "print('H_RAWIP', http('198.51.100.2', '198.51.100.2'))\n"
    "print('H_LOOPY', http('198.51.100.1', 'loopy.test'))\n"
    "print('T_ALLOWED', tls('allowed.test'))\n"
    "print('T_EVIL', tls('evil.test'))\n"
    "print('PORT22', raw('198.51.100.1', 22))\n"
    "print('V6', raw('2001:db8::1', 80, socket.AF_INET6))\n"
    "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b'x', ('198.51.100.1', "
    "5353))\n"
    "print('DONE')\n";

static void expect_line(const sbx_result *r, const char *line)
{
    if (!lt_stdout_has(r, line))
        fail_msg("stdout lacks '%s':\n%.*s\nstderr:\n%.*s", line, (int)r->stdout.len,
                 (const char *)r->stdout.data, (int)r->stderr.len, (const char *)r->stderr.data);
}

static void test_egress_allowlist(void **state)
{
    (void)state;
    lt_env e;
    open_with_resolver(&e, "198.51.100.53");
    sbx_policy *p = allowlist();
    sbx_sandbox *sb = lt_create_with(&e, p);
    sbx_message_free((ProtobufCMessage *)p);

    char dir[256], pidfile[300];
    snprintf(dir, sizeof dir, "%s/%s", e.runtime_dir, sb->id);
    snprintf(pidfile, sizeof pidfile, "%s/egress.pid", dir);
    long proxy = 0;
    FILE *f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &proxy), 1);
    fclose(f);
    assert_int_equal(kill((pid_t)proxy, 0), 0);

    sbx_result *r = NULL;
    sbx_error err = {0};
    sbx_status st = lt_py(&e, sb, probe, &r, &err);
    if (st != SBX_OK)
        fail_msg("probe: %s: %s", sbx_status_name(st), err.message);
    expect_line(r, "DONE");
    expect_line(r, "DNS_ALLOWED 0/1/198.51.100.1");
    expect_line(r, "DNS_ANYWHERE 0/1/198.51.100.1");
    expect_line(r, "DNS_EVIL 3/0/-");
    expect_line(r, "DNS_AAAA 0/0/-");
    expect_line(r, "H_ALLOWED hello 198.51.100.1");
    /* the proxy connects where the name resolves, not where the sandbox dialled */
    expect_line(r, "H_REDIRECTED hello 198.51.100.1");
    expect_line(r, "H_WILD hello 198.51.100.1");
    expect_line(r, "T_ALLOWED TLS-REACHED 198.51.100.1");
    assert_false(lt_stdout_has(r, "hello 198.51.100.2"));
    assert_false(lt_stdout_has(r, "H_EVIL hello"));
    assert_false(lt_stdout_has(r, "H_RAWIP hello"));
    assert_false(lt_stdout_has(r, "H_LOOPY hello"));
    assert_false(lt_stdout_has(r, "T_EVIL TLS"));
    assert_false(lt_stdout_has(r, "PORT22 connected"));
    assert_false(lt_stdout_has(r, "V6 connected"));
    /* evil.test: one DNS question, two HTTP requests, one ClientHello */
    assert_int_equal(refused(r, "evil.test"), 4);
    assert_int_equal(refused(r, "198.51.100.2:80"), 1);
    assert_int_equal(refused(r, "loopy.test"), 1);
    assert_int_equal(refused(r, "allowed.test"), 0);
    assert_int_equal(atomic_load(&hits_refused), 0);
    assert_int_equal(atomic_load(&hits_udp), 0);
    assert_int_equal(atomic_load(&hits_tls), 1);
    sbx_message_free((ProtobufCMessage *)r);

    /* per operation: the next one reports only its own refusals */
    r = lt_run(&e, sb, "true");
    assert_int_equal(r->n_egress_refused, 0);
    sbx_message_free((ProtobufCMessage *)r);

    lt_destroy(&e, sb);
    for (int i = 0; i < 100 && kill((pid_t)proxy, 0) == 0; i++) {
        waitpid((pid_t)proxy, NULL, WNOHANG);
        usleep(20000);
    }
    assert_int_equal(kill((pid_t)proxy, 0), -1);
    assert_int_equal(access(dir, F_OK), -1);
    lt_close(&e);
}

static long read_first_long(const char *path, const char *prefix)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long v = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, prefix, strlen(prefix)) == 0) {
            v = strtol(line + strlen(prefix), NULL, 10);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

/* True once pid is gone or a zombie (reaping it when it is ours: the provider is a subreaper). */
static bool ended(long pid)
{
    waitpid((pid_t)pid, NULL, WNOHANG);
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

/* An idle proxy sleeps until something happens (it woke every second: a thousand wake-ups a
 * second beside a thousand idle sandboxes). The proxy ends with the sandbox's PID 1 (an idle
 * TTL, an OOM of the agent), not only by destroy: nothing of it outlives the sandbox. */
static void test_egress_proxy_ends_with_the_sandbox(void **state)
{
    (void)state;
    lt_env e;
    open_with_resolver(&e, "198.51.100.53");
    sbx_policy *p = allowlist();
    sbx_sandbox *sb = lt_create_with(&e, p);
    sbx_message_free((ProtobufCMessage *)p);
    char path[300];
    snprintf(path, sizeof path, "%s/%s/egress.pid", e.runtime_dir, sb->id);
    long proxy = read_first_long(path, "");
    snprintf(path, sizeof path, "%s/%s/meta", e.runtime_dir, sb->id);
    long init = read_first_long(path, "pid ");
    assert_true(proxy > 1 && init > 1);
    assert_false(ended(proxy));
    usleep(100000); /* past its start */
    long before = sbx_test_switches(proxy);
    usleep(2200000);
    long woke = sbx_test_switches(proxy) - before;
    assert_true(before >= 0 && woke <= 1); /* 2 or 3 when it woke every second */
    assert_int_equal(kill((pid_t)init, SIGKILL), 0);
    for (int i = 0; i < 250 && !ended(proxy); i++)
        usleep(20000);
    assert_true(ended(proxy));
    lt_destroy(&e, sb);
    lt_close(&e);
}

static void test_egress_bad_entries_and_resolver(void **state)
{
    (void)state;
    lt_env e;
    open_with_resolver(&e, "not-an-address");
    sbx_policy *p = allowlist();
    sbx_error err = {0};
    sbx_sandbox *sb = NULL;
    /* a proxy that cannot start fails the create: never a wider network */
    sbx_status st = e.ops->create(e.state, NULL, NULL, p, &sb, &err);
    assert_int_not_equal(st, SBX_OK);
    assert_non_null(strstr(err.message, "egress_resolver"));
    assert_int_equal(lt_count_dir(e.runtime_dir), 0);
    /* an entry the proxy cannot enforce is refused under strict, naming it */
    free(p->network_allow[2]);
    p->network_allow[2] = strdup("[2001:db8::1]:443");
    memset(&err, 0, sizeof err);
    st = e.ops->create(e.state, NULL, NULL, p, &sb, &err);
    assert_int_equal(st, SBX_E_POLICY);
    assert_non_null(strstr(err.message, "network_allow=[2001:db8::1]:443"));
    sbx_message_free((ProtobufCMessage *)p);
    lt_close(&e);
}

/* Rootless (uid 65534): the sandbox's agent is not dumpable, so an unprivileged caller cannot
 * open its namespaces and the proxy cannot get in: allowlist is unenforceable, refused under
 * strict, and the capability is not declared. */
static char agent_copy[128];

static bool copy_agent(void)
{
    char src[4096];
    sbx_error err = {0};
    if (sbx_agent_binary_path(src, sizeof src, &err) != SBX_OK)
        return false;
    char dir[] = "/tmp/sbxa-XXXXXX";
    if (!mkdtemp(dir))
        return false;
    chmod(dir, 0755);
    snprintf(agent_copy, sizeof agent_copy, "%s/sbx-agent", dir);
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod 0755 '%s'", src, agent_copy, agent_copy);
    return system(cmd) == 0;
}

static void remove_agent_copy(void)
{
    unlink(agent_copy);
    char *slash = strrchr(agent_copy, '/');
    if (slash) {
        *slash = '\0';
        rmdir(agent_copy);
    }
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rootless egress check failed at line %d: ", __LINE__);                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static void rootless_body(void)
{
    if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(65534, 65534, 65534) < 0)
        _exit(2);
    setenv("SBX_AGENT", agent_copy, 1);
    unsetenv("XDG_RUNTIME_DIR");
    lt_env e;
    e.ops = sbx_provider_lookup("local");
    snprintf(e.runtime_dir, sizeof e.runtime_dir, "/tmp/sbxr-XXXXXX");
    CHECK(mkdtemp(e.runtime_dir) != NULL, "mkdtemp");
    sbx_options *o = sbx_options_new(e.ops->options);
    sbx_error err = {0};
    CHECK(sbx_options_set(o, "egress_resolver", "198.51.100.53", &err) == SBX_OK, "option");
    sbx_provider_ctx ctx = {0};
    ctx.profile = "rootless";
    ctx.runtime_dir = e.runtime_dir;
    ctx.options = o;
    CHECK(e.ops->open(&ctx, &e.state, &err) == SBX_OK, "open: %s", err.message);
    sbx_options_free(o);
    sbx_policy *p = allowlist();
    sbx_sandbox *sb = NULL;
    sbx_status st = e.ops->create(e.state, NULL, NULL, p, &sb, &err);
    CHECK(st == SBX_E_POLICY, "rootless allowlist create: %s: %s", sbx_status_name(st),
          err.message);
    CHECK(strstr(err.message, "network_egress=allowlist (rootless") != NULL, "message: %s",
          err.message);
    CHECK(lt_count_dir(e.runtime_dir) == 0, "a refused create left state");
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    e.ops->capabilities(e.state, &caps);
    CHECK(!caps.policy_network_domains, "rootless claims to filter egress by domain");
    for (size_t k = 0; k < caps.n_languages; k++)
        free(caps.languages[k]);
    free(caps.languages);
    sbx_message_free((ProtobufCMessage *)p);
    e.ops->close(e.state);
    lt_remove_runtime_dir(e.runtime_dir);
}

static void test_egress_rootless(void **state)
{
    (void)state;
    assert_true(copy_agent());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        rootless_body();
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    remove_agent_copy();
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    if (geteuid() != 0) {
        print_message("skipped: needs root (network namespaces, the local provider as root)\n");
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
            cmocka_unit_test(test_egress_allowlist),
            cmocka_unit_test(test_egress_proxy_ends_with_the_sandbox),
            cmocka_unit_test(test_egress_bad_entries_and_resolver),
            cmocka_unit_test(test_egress_rootless),
        };
        _exit(cmocka_run_group_tests(tests, setup_internet, NULL));
    }
    int wst = 0;
    waitpid(child, &wst, 0);
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 1;
}
