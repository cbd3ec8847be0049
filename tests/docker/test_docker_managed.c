/* test_docker_managed.c - managed docker sandboxes against the real private dockerd: the policy
 * as the daemon recorded it (inspect), labels, destroy (twice), GONE for removed and stopped
 * containers (the stopped one cleaned up), the daemon's own error for a missing image,
 * reconnect from a fresh process, and -- through sbx-agent -- execution, files and stateful
 * python. One behaviour per test. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "docker_test.h"
#include "providers/common/egress.h"
#include "support/uid_slots.h"
#include "sbx/contract.h"

extern const sbx_provider_ops sbx_provider_docker;
static const sbx_provider_ops *ops = &sbx_provider_docker;
static const char *self_path;

/* Managed containers run sbx-agent as PID 1: without it in this tree, the test skips. */
#define NEED_AGENT()                                                                               \
    do {                                                                                           \
        if (dt_agent_path() == NULL)                                                               \
            skip();                                                                                \
    } while (0)

typedef struct fixture {
    dt_env env;
    char *runtime_dir;
    void *provider; /* managed, python image */
    sbx_policy *policy;
    sbx_principal *principal;
    sbx_session_handle *session;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    dt_env_load(&f->env);
    f->runtime_dir = dt_tempdir();
    char image[160];
    snprintf(image, sizeof(image), "image=%s", f->env.image_python);
    const char *opts[] = {image, NULL};
    f->provider = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, opts);
    f->policy = sbx_policy_new();
    f->policy->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    f->principal = sbx_principal_new();
    sbx_set_string(&f->principal->subject, "alice");
    f->session = sbx_session_handle_new();
    sbx_set_string(&f->session->session_id, "sess-docker-1");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    dt_provider_close(f->provider);
    dt_rmtree(f->runtime_dir);
    free(f->runtime_dir);
    sbx_message_free((ProtobufCMessage *)f->policy);
    sbx_message_free((ProtobufCMessage *)f->principal);
    sbx_message_free((ProtobufCMessage *)f->session);
    dt_env_free(&f->env);
    free(f);
    return 0;
}

static sbx_sandbox *create(fixture *f, const sbx_policy *policy)
{
    sbx_sandbox *sb = NULL;
    sbx_error err;
    sbx_status st =
        ops->create(f->provider, f->session, f->principal, policy ? policy : f->policy, &sb, &err);
    if (st != SBX_OK)
        fail_msg("create: %s: %s", sbx_status_name(st), err.message);
    return sb;
}

static void destroy(fixture *f, sbx_sandbox *sb)
{
    char *id = strdup(sb->id);
    ops->sandbox_close(sb);
    sbx_error err;
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    free(id);
}

static sbx_status run_shell(fixture *f, sbx_sandbox *sb, const char *line, sbx_result **out,
                            sbx_error *err)
{
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = (char *)line;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    *out = sbx_result_new();
    return ops->run_command(sb, &op, &o, *out, err);
}

static void assert_stdout(const sbx_result *r, const char *want)
{
    if (r->stdout.len != strlen(want) || memcmp(r->stdout.data, want, r->stdout.len) != 0)
        fail_msg("stdout '%.*s' (stderr '%.*s'), wanted '%s'", (int)r->stdout.len,
                 (const char *)r->stdout.data, (int)r->stderr.len, (const char *)r->stderr.data,
                 want);
}

static void test_docker_managed_policy_is_what_the_daemon_recorded(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->memory_mb = 96;
    p->cpu = 0.5;
    p->pids = 64;
    p->disk_mb = 32;
    sbx_sandbox *sb = create(f, p);
    json_t *j = dt_container_inspect(&f->env, sb->id);
    assert_non_null(j);
    json_t *hc = json_object_get(j, "HostConfig");
    assert_string_equal(json_string_value(json_object_get(hc, "NetworkMode")), "none");
    assert_int_equal(json_integer_value(json_object_get(hc, "Memory")), 96 * 1024 * 1024);
    assert_int_equal(json_integer_value(json_object_get(hc, "MemorySwap")), 96 * 1024 * 1024);
    assert_int_equal(json_integer_value(json_object_get(hc, "NanoCpus")), 500000000);
    assert_int_equal(json_integer_value(json_object_get(hc, "PidsLimit")), 64);
    assert_true(json_is_true(json_object_get(hc, "ReadonlyRootfs")));
    const char *tmp = json_string_value(json_object_get(json_object_get(hc, "Tmpfs"), "/tmp"));
    assert_non_null(tmp);
    assert_non_null(strstr(tmp, "size=32m"));
    assert_non_null(strstr(tmp, "nr_inodes=8192")); /* 256 per MiB: core/limits.h */
    assert_non_null(json_object_get(json_object_get(hc, "Tmpfs"), "/workspace"));
    json_t *drop = json_object_get(hc, "CapDrop");
    assert_int_equal(json_array_size(drop), 1);
    assert_string_equal(json_string_value(json_array_get(drop, 0)), "ALL");
    json_t *sec = json_object_get(hc, "SecurityOpt");
    assert_string_equal(json_string_value(json_array_get(sec, 0)), "no-new-privileges");
    json_t *labels = json_object_get(json_object_get(j, "Config"), "Labels");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.session")), "sess-docker-1");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.profile")),
                        "docker-managed");
    assert_string_equal(json_string_value(json_object_get(labels, "sbx.owner")), "alice");
    json_decref(j);
    destroy(f, sb);
    sbx_message_free((ProtobufCMessage *)p);
}

static void test_docker_managed_allow_uses_the_configured_network(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    /* ALLOW puts the container on docker.network; a network the daemon does not have fails
     * with the daemon's own words, as PROVISION, and nothing is left behind. */
    char image[160];
    snprintf(image, sizeof(image), "image=%s", f->env.image_busybox);
    const char *opts[] = {"network=sbx-no-such-network", image, NULL};
    void *prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, opts);
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->create(prov, f->session, f->principal, p, &sb, &err), SBX_E_PROVISION);
    assert_null(sb);
    assert_non_null(strstr(err.message, "sbx-no-such-network"));
    assert_non_null(strstr(err.message, "not found"));
    sbx_message_free((ProtobufCMessage *)p);
    dt_provider_close(prov);
}

/* Entries of the provider's runtime dir (state dirs of the sandboxes it made). */
static int runtime_entries(const fixture *f)
{
    char dir[1024], cmd[1100];
    snprintf(dir, sizeof(dir), "%s/docker", f->runtime_dir);
    snprintf(cmd, sizeof(cmd), "ls -A %s 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p == NULL || fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p != NULL)
        pclose(p);
    return n;
}

static sbx_status create_on(fixture *f, void *prov, const sbx_policy *p, sbx_error *err)
{
    sbx_sandbox *sb = NULL;
    sbx_status st = ops->create(prov, f->session, f->principal, p, &sb, err);
    if (st != SBX_OK) {
        assert_null(sb);
        return st;
    }
    sbx_result *r;
    sbx_error run_err;
    assert_int_equal(run_shell(f, sb, "echo up", &r, &run_err), SBX_OK);
    assert_stdout(r, "up\n");
    sbx_message_free((ProtobufCMessage *)r);
    char *id = strdup(sb->id);
    ops->sandbox_close(sb);
    assert_int_equal(ops->destroy(prov, id, &run_err), SBX_OK);
    free(id);
    return SBX_OK;
}

/* ALLOW on a network whose containers reach each other (Docker's default bridge; here the
 * host's network, the private daemon having no bridge) would let another tenant's sandbox
 * connect to what this one's programs listen on: refused (POLICY) before anything is made,
 * naming the fixes. docker.shared_network accepts it knowingly; the null driver ("none") keeps
 * containers apart. Which bridges pass is test_docker_codec's (the daemon's network document). */
static void test_docker_managed_allow_on_a_shared_network_is_refused(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    char image[160];
    snprintf(image, sizeof(image), "image=%s", f->env.image_busybox);
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_error err;
    int before = runtime_entries(f);

    const char *host[] = {"network=host", image, NULL};
    void *prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, host);
    assert_int_equal(create_on(f, prov, p, &err), SBX_E_POLICY);
    assert_non_null(strstr(err.message, "docker.network 'host'"));
    assert_non_null(strstr(err.message, "host's network namespace"));
    assert_non_null(strstr(err.message, "enable_icc=false"));
    assert_non_null(strstr(err.message, "shared_network: true"));
    assert_int_equal(runtime_entries(f), before);
    dt_provider_close(prov);

    const char *accepted[] = {"network=host", "shared_network=true", image, NULL};
    prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, accepted);
    assert_int_equal(create_on(f, prov, p, &err), SBX_OK);
    dt_provider_close(prov);

    const char *none[] = {"network=none", image, NULL};
    prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, none);
    assert_int_equal(create_on(f, prov, p, &err), SBX_OK);
    dt_provider_close(prov);
    sbx_message_free((ProtobufCMessage *)p);
}

/* A bridge network that keeps containers apart, made on the test daemon; its gateway (the
 * host's address on the bridge) in gw. Removed by remove_network. */
static void make_network(fixture *f, const char *name, char *gw, size_t cap)
{
    json_t *body =
        json_pack("{s:s,s:s,s:b,s:{s:s}}", "Name", name, "Driver", "bridge", "CheckDuplicate", 1,
                  "Options", "com.docker.network.bridge.enable_icc", "false");
    long status = 0;
    json_t *resp = NULL;
    sbx_error err;
    assert_int_equal(
        docker_api_json(&f->env.api, "POST", "/networks/create", body, &status, &resp, &err),
        SBX_OK);
    json_decref(body);
    if (status != 201)
        fail_msg("network create: HTTP %ld: %s", status,
                 json_string_value(json_object_get(resp, "message")));
    json_decref(resp);
    char path[128];
    snprintf(path, sizeof(path), "/networks/%s", name);
    assert_int_equal(docker_api_json(&f->env.api, "GET", path, NULL, &status, &resp, &err), SBX_OK);
    assert_int_equal(status, 200);
    const char *g = json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(resp, "IPAM"), "Config"), 0), "Gateway"));
    assert_non_null(g);
    snprintf(gw, cap, "%s", g);
    json_decref(resp);
}

static void remove_network(fixture *f, const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/networks/%s", name);
    long status = 0;
    sbx_error err;
    docker_api_json(&f->env.api, "DELETE", path, NULL, &status, NULL, &err);
}

/* ALLOW gives a container the internet, not the host: on a network that keeps containers
 * apart, a program could still reach every host service listening on all addresses through the
 * network's gateway (the host's address on the bridge) or the host's other addresses, and the
 * cloud metadata address and the host's private neighbours (other machines of its VPC) through
 * the host's NAT. Each connection is now refused at once (EACCES: prohibit routes in the
 * container's namespace, which programs without CAP_NET_ADMIN cannot remove), and the listener
 * of this process on all addresses is never reached; the host's nameserver stays reachable on
 * DNS's port alone (before, its every port and protocol was: TCP 80 and UDP 54 reached it). */
static void test_docker_managed_allow_reaches_no_host_neighbour_or_metadata_address(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    if (geteuid() != 0)
        skip(); /* the guard takes root, as the egress proxy does */
    char name[64], gw[64], host_ip[64] = "", opt[96], image[160], line[2048];
    snprintf(name, sizeof(name), "sbx-test-allow-%ld", (long)getpid());
    make_network(f, name, gw, sizeof(gw));
    uint32_t addrs[8];
    size_t n = sbx_egress_host_addrs(addrs, 8);
    for (size_t i = 0; i < n && host_ip[0] == '\0'; i++) {
        struct in_addr a = {.s_addr = htonl(addrs[i])};
        if (strcmp(inet_ntoa(a), gw) != 0)
            snprintf(host_ip, sizeof(host_ip), "%s", inet_ntoa(a));
    }
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(ls, 16), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &sl), 0);

    snprintf(opt, sizeof(opt), "network=%s", name);
    snprintf(image, sizeof(image), "image=%s", f->env.image_python); /* UDP: python's socket */
    const char *opts[] = {opt, image, NULL};
    void *prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, opts);
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOW;
    sbx_sandbox *sb = NULL;
    sbx_error err;
    sbx_status st = ops->create(prov, f->session, f->principal, p, &sb, &err);
    if (st != SBX_OK) {
        remove_network(f, name);
        fail_msg("create: %s", err.message);
    }
    /* the host's private neighbours, outside the test network (its /16, as Docker's pools
     * hand out) */
    char neighbours[128] = "";
    const char *private_addrs[] = {"10.255.255.1", "172.16.255.1", "192.168.255.1"};
    struct in_addr gw_a;
    assert_int_equal(inet_pton(AF_INET, gw, &gw_a), 1);
    for (size_t i = 0; i < sizeof(private_addrs) / sizeof(private_addrs[0]); i++) {
        struct in_addr a;
        assert_int_equal(inet_pton(AF_INET, private_addrs[i], &a), 1);
        if ((ntohl(a.s_addr) >> 16) != (ntohl(gw_a.s_addr) >> 16))
            snprintf(neighbours + strlen(neighbours), sizeof(neighbours) - strlen(neighbours),
                     " %s", private_addrs[i]);
    }
    /* the host's first nameserver in a private range, which stays reachable on DNS's port
     * (UDP and TCP 53) and no other: a connect that meets the prohibit route fails with EACCES
     * at once (UDP's connect looks the route up too); any other outcome (connected, refused,
     * timed out) went past the guard */
    uint32_t dns[SBX_EGRESS_GUARD_DNS_MAX];
    size_t n_dns = sbx_egress_host_resolvers(dns, SBX_EGRESS_GUARD_DNS_MAX);
    char resolver[32] = "";
    for (size_t i = 0; i < n_dns && resolver[0] == '\0'; i++) {
        uint32_t d = dns[i];
        if ((d >> 24) == 10 || (d >> 20) == 0xAC1 || (d >> 16) == 0xC0A8) {
            struct in_addr a = {.s_addr = htonl(d)};
            snprintf(resolver, sizeof(resolver), "%s", inet_ntoa(a));
        }
    }
    snprintf(line, sizeof(line),
             "for a in %s %s 169.254.169.254 100.100.100.200%s; do "
             "if timeout 3 nc -w 2 $a %u </dev/null 2>/tmp/e; then echo $a:open; "
             "elif grep -q 'Permission denied' /tmp/e; then echo $a:refused; "
             "else echo $a:not-refused; fi; done; "
             "for a in %s; do python3 -c '\n"
             "import socket, sys\n"
             "for kind, port in ((socket.SOCK_DGRAM, 53), (socket.SOCK_STREAM, 53),\n"
             "                   (socket.SOCK_DGRAM, 54), (socket.SOCK_STREAM, 80)):\n"
             "    s = socket.socket(socket.AF_INET, kind)\n"
             "    s.settimeout(2)\n"
             "    name = (\"udp\" if kind == socket.SOCK_DGRAM else \"tcp\") + str(port)\n"
             "    try:\n"
             "        s.connect((sys.argv[1], port))\n"
             "        print(sys.argv[1] + \":\" + name + \":reached\")\n"
             "    except PermissionError:\n"
             "        print(sys.argv[1] + \":\" + name + \":refused\")\n"
             "    except OSError:\n"
             "        print(sys.argv[1] + \":\" + name + \":reached\")\n"
             "' $a; done",
             gw, host_ip[0] ? host_ip : gw, neighbours, (unsigned)ntohs(sa.sin_port), resolver);
    sbx_result *r;
    st = run_shell(f, sb, line, &r, &err);
    char *id = strdup(sb->id);
    ops->sandbox_close(sb);
    assert_int_equal(ops->destroy(prov, id, &err), SBX_OK);
    free(id);
    dt_provider_close(prov);
    remove_network(f, name);
    assert_int_equal(st, SBX_OK);
    char want[1024];
    snprintf(want, sizeof(want),
             "%s:refused\n%s:refused\n169.254.169.254:refused\n100.100.100.200:refused\n", gw,
             host_ip[0] ? host_ip : gw);
    for (char *a = strtok(neighbours, " "); a != NULL; a = strtok(NULL, " "))
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s:refused\n", a);
    if (resolver[0] != '\0')
        snprintf(want + strlen(want), sizeof(want) - strlen(want),
                 "%s:udp53:reached\n%s:tcp53:reached\n%s:udp54:refused\n%s:tcp80:refused\n",
                 resolver, resolver, resolver, resolver);
    assert_stdout(r, want);
    int c = accept(ls, NULL, NULL);
    assert_int_equal(c, -1); /* nothing reached it */
    close(ls);
    sbx_message_free((ProtobufCMessage *)r);
    sbx_message_free((ProtobufCMessage *)p);
}

/* allowlist is enforced by the egress proxy (test_docker_egress); an entry it cannot enforce
 * (IPv6) is not. */
static void test_docker_managed_allowlist_ipv6_is_unenforceable(void **state)
{
    fixture *f = *state;
    sbx_policy *p = sbx_policy_new();
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_ALLOWLIST;
    p->n_network_allow = 2;
    p->network_allow = malloc(2 * sizeof *p->network_allow);
    assert_non_null(p->network_allow);
    p->network_allow[0] = strdup("pypi.org");
    p->network_allow[1] = strdup("2001:db8::/32");
    sbx_strlist list = {0};
    sbx_error err;
    assert_int_equal(ops->check_policy(f->provider, p, &list, &err), SBX_OK);
    assert_int_equal(list.n, 1);
    assert_non_null(strstr(list.items[0], "network_allow=2001:db8::/32"));
    sbx_strlist_clear(&list);
    p->network_egress = SBX__V1__NETWORK_EGRESS__NETWORK_EGRESS_DENY;
    p->memory_mb = 64;
    assert_int_equal(ops->check_policy(f->provider, p, &list, &err), SBX_OK);
    assert_int_equal(list.n, 0);
    sbx_strlist_clear(&list);
    sbx_message_free((ProtobufCMessage *)p);
}

/* pids 1: the container's init (its agent) is one of its processes, so nothing could run. Refused
 * at create, before any container is made; before, every exec failed with RESOURCE_EXHAUSTED. */
static void test_docker_managed_pids_1_is_refused(void **state)
{
    fixture *f = *state;
    sbx_policy *p = sbx_policy_new();
    p->pids = 1;
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->create(f->provider, f->session, f->principal, p, &sb, &err),
                     SBX_E_POLICY);
    assert_null(sb);
    assert_non_null(strstr(err.message, "pids 1"));
    assert_non_null(strstr(err.message, "use 2 or more"));
    sbx_message_free((ProtobufCMessage *)p);
}

static void test_docker_managed_missing_image_is_provision_with_the_daemons_words(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    const char *opts[] = {"image=sbx-no-such-image:never", NULL};
    void *prov = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, f->runtime_dir, opts);
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->create(prov, f->session, f->principal, f->policy, &sb, &err),
                     SBX_E_PROVISION);
    assert_non_null(strstr(err.message, "sbx-no-such-image:never"));
    assert_non_null(strstr(err.message, "No such image"));
    dt_provider_close(prov);
}

/* A provider call that must succeed; a failure names its status and the provider's message
 * (err is the caller's sbx_error). */
#define ASSERT_OK(call)                                                                            \
    do {                                                                                           \
        sbx_status st_ = (call);                                                                   \
        if (st_ != SBX_OK)                                                                         \
            fail_msg("%s: %s: %s", #call, sbx_status_name(st_), err.message);                      \
    } while (0)

/* Paused by the daemon's freezer: inspect says Paused, the session's state survives the resume
 * (a background process, a file), resume reports that it thawed, both are idempotent, and a
 * paused container is neither GONE nor swept, and is still destroyed whole. */
static void test_docker_managed_pause_keeps_state_and_resume_thaws(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char id[128]; /* not strdup'd: a failed assertion would leak it, and ASan then aborts */
    snprintf(id, sizeof id, "%s", sb->id);
    sbx_result *r;
    sbx_error err = {0};
    ASSERT_OK(run_shell(f, sb, "echo kept > /tmp/file", &r, &err));
    sbx_message_free((ProtobufCMessage *)r);
    /* a detached command: it runs on across the pause */
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "exec sleep 300";
    op.detach = 1;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    r = sbx_result_new();
    ASSERT_OK(ops->run_command(sb, &op, &o, r, &err));
    assert_true(r->command_id > 0);
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(sb);
    ASSERT_OK(ops->pause(f->provider, id, &err));
    ASSERT_OK(ops->pause(f->provider, id, &err)); /* idempotent */
    json_t *j = dt_container_inspect(&f->env, id);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(json_object_get(j, "State"), "Paused")));
    json_decref(j);
    /* alive while paused: attach refuses it without declaring it gone, the sweep keeps it */
    sbx_sandbox *again = NULL;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &again, &err),
                     SBX_E_PROVISION);
    sbx_strlist removed = {0};
    assert_int_equal(ops->sweep(f->provider, &removed, &err), SBX_OK);
    assert_false(sbx_strlist_contains(&removed, id));
    sbx_strlist_clear(&removed);
    bool was = false;
    ASSERT_OK(ops->resume(f->provider, id, &was, &err));
    assert_true(was);
    ASSERT_OK(ops->resume(f->provider, id, &was, &err));
    assert_false(was); /* it ran: nothing to do */
    ASSERT_OK(ops->attach(f->provider, id, f->principal, f->policy, &again, &err));
    ASSERT_OK(run_shell(f, again, "cat /tmp/file; grep -qx sleep /proc/[0-9]*/comm && echo alive",
                        &r, &err));
    assert_stdout(r, "kept\nalive\n");
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(again);
    /* paused again, then destroyed: the daemon removes a paused container too */
    ASSERT_OK(ops->pause(f->provider, id, &err));
    ASSERT_OK(ops->destroy(f->provider, id, &err));
    assert_null(dt_container_inspect(&f->env, id));
    assert_int_equal(ops->pause(f->provider, id, &err), SBX_E_GONE);
}

/* GET path from 127.0.0.1:port; the whole answer into out ("" when the connection fails). */
static void http_get(unsigned port, const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {20, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    assert_int_equal(write(s, req, (size_t)n), n);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(s, out + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(s);
}

/* ExposePort: a server that listens on 127.0.0.1 inside a container without a network is
 * reached from the host through the relay; the same port is the same URL; destroy ends it. */
static void test_docker_managed_expose_reaches_a_server_inside(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "cd /tmp && echo exposed-bytes > hello.txt && exec python3 -m http.server 8000 "
               "--bind 127.0.0.1";
    op.detach = 1;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_command(sb, &op, &o, r, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_equal(run_shell(f, sb,
                               "for i in $(seq 100); do python3 -c 'import socket; "
                               "socket.create_connection((\"127.0.0.1\", 8000), 1)' "
                               "2>/dev/null && exit 0; sleep 0.1; done; exit 1",
                               &r, &err),
                     SBX_OK);
    assert_int_equal(r->exit_code, 0);
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(sb);
    char *url = NULL, *token = NULL;
    assert_int_equal(ops->expose(f->provider, id, 8000, &url, &token, &err), SBX_OK);
    assert_null(token);
    assert_non_null(strstr(url, "http://127.0.0.1:"));
    unsigned port = (unsigned)atoi(strrchr(url, ':') + 1);
    char body[4096];
    http_get(port, "/hello.txt", body, sizeof body);
    assert_non_null(strstr(body, "200"));
    assert_non_null(strstr(body, "exposed-bytes"));
    char *url2 = NULL, *token2 = NULL;
    assert_int_equal(ops->expose(f->provider, id, 8000, &url2, &token2, &err), SBX_OK);
    assert_string_equal(url2, url);
    free(url2);
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    http_get(port, "/hello.txt", body, sizeof body);
    assert_string_equal(body, "");
    assert_int_equal(ops->expose(f->provider, id, 8000, &url2, &token2, &err), SBX_E_GONE);
    free(url);
    free(id);
}

static void test_docker_managed_runs_a_command(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, sb, "echo hello; exit 4", &r, &err), SBX_OK);
    assert_stdout(r, "hello\n");
    assert_int_equal(r->exit_code, 4);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_NONZERO);
    sbx_message_free((ProtobufCMessage *)r);
    destroy(f, sb);
}

/* Detached commands through the container's agent: started, followed from an offset by a
 * second handle (another connection, as a later process would), cancelled, and declared. */
static void test_docker_managed_detached_command_is_followed_and_cancelled(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    ops->capabilities(f->provider, &caps);
    assert_true(caps.detach);
    for (size_t i = 0; i < caps.n_languages; i++)
        free(caps.languages[i]);
    free(caps.languages);
    sbx_sandbox *sb = create(f, NULL);
    Sbx__V1__RunCommand op = SBX__V1__RUN_COMMAND__INIT;
    op.shell = "echo 0123456789; echo err >&2; exec sleep 600";
    op.detach = true;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    assert_int_equal(ops->run_command(sb, &op, &o, r, &err), SBX_OK);
    uint64_t id = r->command_id;
    assert_true(id > 0);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_UNSPECIFIED);
    sbx_message_free((ProtobufCMessage *)r);

    /* follow from offset 4 until a short deadline: the output so far, and it runs on */
    sbx_sandbox *other = NULL;
    assert_int_equal(ops->attach(f->provider, sb->id, f->principal, f->policy, &other, &err),
                     SBX_OK);
    Sbx__V1__AttachCommand at = SBX__V1__ATTACH_COMMAND__INIT;
    at.command_id = id;
    at.stdout_offset = 4;
    sbx_exec_opts brief = o;
    brief.deadline_mono_ms = sbx_monotonic_ms() + 1000;
    r = sbx_result_new();
    while (r->stdout.len < 7) { /* until the echo ran: each try follows for a second */
        sbx_message_free((ProtobufCMessage *)r);
        r = sbx_result_new();
        brief.deadline_mono_ms = sbx_monotonic_ms() + 1000;
        assert_int_equal(ops->attach_command(other, &at, &brief, r, &err), SBX_E_TIMEOUT);
        assert_non_null(strstr(err.message, "it runs on"));
    }
    assert_stdout(r, "456789\n");
    assert_int_equal(r->stdout_offset, 4);
    sbx_message_free((ProtobufCMessage *)r);

    Sbx__V1__CancelCommand cc = SBX__V1__CANCEL_COMMAND__INIT;
    cc.command_id = id;
    r = sbx_result_new();
    assert_int_equal(ops->cancel_command(sb, &cc, &o, r, &err), SBX_OK);
    assert_int_equal(r->outcome, SBX__V1__OUTCOME__OUTCOME_SIGNALED);
    sbx_message_free((ProtobufCMessage *)r);
    r = sbx_result_new();
    assert_int_equal(ops->attach_command(other, &at, &o, r, &err), SBX_OK);
    assert_int_equal(r->signal, 9);
    assert_stdout(r, "456789\n");
    assert_int_equal(r->stderr.len, 4);
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(other);
    destroy(f, sb);
}

/* The state dir of container id (its sbx.state_dir label); malloc'd. */
static char *state_dir_of(fixture *f, const char *id)
{
    json_t *j = dt_container_inspect(&f->env, id);
    const char *dir = json_string_value(
        json_object_get(json_object_get(json_object_get(j, "Config"), "Labels"), "sbx.state_dir"));
    assert_non_null(dir);
    char *state_dir = strdup(dir);
    json_decref(j);
    return state_dir;
}

static void test_docker_managed_destroy_removes_container_and_state_and_is_idempotent(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    char *state_dir = state_dir_of(f, id);
    struct stat stbuf;
    assert_int_equal(stat(state_dir, &stbuf), 0);
    ops->sandbox_close(sb);
    sbx_error err;
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    assert_null(dt_container_inspect(&f->env, id));
    assert_int_not_equal(stat(state_dir, &stbuf), 0);
    /* Again: already gone is success. */
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    free(state_dir);
    free(id);
}

/* A container's state dir is bound into it, so its agent (root there) can plant what it likes
 * among the files sbx reads back: a FIFO as `uid_slot` no longer stops the destroy (the read
 * waited forever for a writer), and the dir still goes. */
static void test_docker_managed_destroy_does_not_wait_on_a_planted_fifo(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    char *state_dir = state_dir_of(f, id);
    ops->sandbox_close(sb);
    char slot_file[1200];
    snprintf(slot_file, sizeof slot_file, "%s/uid_slot", state_dir);
    assert_int_equal(unlink(slot_file), 0);
    assert_int_equal(mkfifo(slot_file, 0600), 0);
    sbx_error err;
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    assert_int_equal(access(state_dir, F_OK), -1);
    free(state_dir);
    free(id);
}

static void test_docker_managed_destroy_refuses_a_container_sbx_did_not_create(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    sbx_error err;
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_E_PERMISSION_DENIED);
    json_t *j = dt_container_inspect(&f->env, id);
    assert_non_null(j);
    json_decref(j);
    dt_container_remove(&f->env, id);
    free(id);
}

/* A container removed behind sbx's back (docker rm -f) is GONE to an attach, and the sweep then
 * removes the state dir it left and frees its uid slot, once the dir is old enough not to be a
 * create's in progress (aged here). Before, both stayed for good: the slot named a dir that
 * still existed, so no slot sweep freed it (seen after every CI run, one slot pointing into a
 * removed test dir). An old empty state dir goes too; another profile's stays. */
static void test_docker_managed_removed_container_is_gone(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    char *state_dir = state_dir_of(f, id);
    ops->sandbox_close(sb);
    dt_container_remove(&f->env, id);
    sbx_error err;
    sb = NULL;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_E_GONE);
    assert_null(sb);
    assert_true(sbx_test_slot_names(state_dir));
    sbx_strlist removed = {0};
    assert_int_equal(ops->sweep(f->provider, &removed, &err), SBX_OK);
    assert_int_equal(access(state_dir, F_OK), 0); /* young: maybe a create's */
    /* beside it, an empty dir (a create's owner killed right after making it: before, never
     * removed) and another profile's dir (kept: not this profile's to judge) */
    char empty[1100], foreign[1100], file[1200];
    const char *base = strrchr(state_dir, '/');
    snprintf(empty, sizeof empty, "%.*s/00000000-0000-4000-8000-00000000e0e0",
             (int)(base - state_dir), state_dir);
    snprintf(foreign, sizeof foreign, "%.*s/00000000-0000-4000-8000-00000000f0f0",
             (int)(base - state_dir), state_dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    assert_int_equal(mkdir(foreign, 0700), 0);
    snprintf(file, sizeof file, "%s/owner", foreign);
    FILE *o = fopen(file, "w");
    assert_non_null(o);
    fputs("node elsewhere\nprofile other\n", o);
    fclose(o);
    struct timeval old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    assert_int_equal(utimes(state_dir, old), 0);
    assert_int_equal(utimes(empty, old), 0);
    assert_int_equal(utimes(foreign, old), 0);
    assert_int_equal(ops->sweep(f->provider, &removed, &err), SBX_OK);
    sbx_strlist_clear(&removed);
    assert_int_equal(access(state_dir, F_OK), -1);
    assert_false(sbx_test_slot_names(state_dir));
    assert_int_equal(access(empty, F_OK), -1);
    assert_int_equal(access(foreign, F_OK), 0);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(foreign), 0);
    free(state_dir);
    free(id);
}

static void test_docker_managed_stopped_container_is_gone_and_cleaned_up(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    ops->sandbox_close(sb);
    dt_container_stop(&f->env, id);
    sbx_error err;
    sb = NULL;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, "not running"));
    /* The dead container is removed, so the engine's self-heal leaves nothing behind. */
    assert_null(dt_container_inspect(&f->env, id));
    free(id);
}

static void test_docker_managed_container_stopped_under_a_live_handle_is_gone(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    char *id = strdup(sb->id);
    dt_container_stop(&f->env, id);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, sb, "echo never", &r, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, "stopped or was removed"));
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(sb);
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    free(id);
}

static void test_docker_managed_attach_to_a_foreign_container_is_gone(void **state)
{
    fixture *f = *state;
    const char *argv[] = {"sleep", "600", NULL};
    char *id = dt_container_run(&f->env, f->env.image_busybox, argv);
    sbx_sandbox *sb = NULL;
    sbx_error err;
    assert_int_equal(ops->attach(f->provider, id, f->principal, f->policy, &sb, &err), SBX_E_GONE);
    assert_non_null(strstr(err.message, "not created by sbx"));
    dt_container_remove(&f->env, id);
    free(id);
}

/* The child half of the fresh-process test: attach by id, read the marker, print it. */
static int child_main(const char *id)
{
    fixture f0 = {0}, *f = &f0;
    dt_env_load(&f->env);
    const char *rt = getenv("SBX_TEST_RUNTIME_DIR");
    f->provider = dt_provider_open(&f->env, SBX_ENV_MANAGED, NULL, rt, NULL);
    f->policy = sbx_policy_new();
    f->principal = sbx_principal_new();
    sbx_sandbox *sb = NULL;
    sbx_error err;
    if (ops->attach(f->provider, id, f->principal, f->policy, &sb, &err) != SBX_OK) {
        fprintf(stderr, "child attach: %s\n", err.message);
        return 2;
    }
    sbx_result *r;
    if (run_shell(f, sb, "cat /workspace/marker", &r, &err) != SBX_OK) {
        fprintf(stderr, "child run: %s\n", err.message);
        return 3;
    }
    int rc = r->stdout.len == 6 && memcmp(r->stdout.data, "alive\n", 6) == 0 ? 0 : 4;
    sbx_message_free((ProtobufCMessage *)r);
    ops->sandbox_close(sb);
    dt_provider_close(f->provider);
    sbx_message_free((ProtobufCMessage *)f->policy);
    sbx_message_free((ProtobufCMessage *)f->principal);
    dt_env_free(&f->env);
    return rc;
}

static void test_docker_managed_reconnects_from_a_fresh_process(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    sbx_result *r;
    sbx_error err;
    assert_int_equal(run_shell(f, sb, "echo alive > /workspace/marker", &r, &err), SBX_OK);
    sbx_message_free((ProtobufCMessage *)r);
    char *id = strdup(sb->id);
    /* This process lets go of the sandbox entirely; another process finds it by id. */
    ops->sandbox_close(sb);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("SBX_TEST_RUNTIME_DIR", f->runtime_dir, 1);
        execl(self_path, self_path, "--child", id, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(ops->destroy(f->provider, id, &err), SBX_OK);
    free(id);
}

static bool stateful(fixture *f)
{
    sbx_capabilities caps = SBX__V1__CAPABILITIES__INIT;
    ops->capabilities(f->provider, &caps);
    bool s = caps.stateful;
    for (size_t i = 0; i < caps.n_languages; i++)
        free(caps.languages[i]);
    free(caps.languages);
    return s;
}

static void test_docker_managed_python_keeps_state_between_calls(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    assert_true(stateful(f));
    sbx_sandbox *sb = create(f, NULL);
    Sbx__V1__RunCode op = SBX__V1__RUN_CODE__INIT;
    op.language = "python";
    op.code = "x = 41";
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    if (ops->run_code(sb, &op, &o, r, &err) != SBX_OK)
        fail_msg("run_code: %s", err.message);
    sbx_message_free((ProtobufCMessage *)r);
    op.code = "x + 1";
    r = sbx_result_new();
    assert_int_equal(ops->run_code(sb, &op, &o, r, &err), SBX_OK);
    assert_string_equal(r->value, "42");
    sbx_message_free((ProtobufCMessage *)r);
    destroy(f, sb);
}

static void test_docker_managed_files_roundtrip_in_the_workspace(void **state)
{
    fixture *f = *state;
    NEED_AGENT();
    sbx_sandbox *sb = create(f, NULL);
    Sbx__V1__WriteFile w = SBX__V1__WRITE_FILE__INIT;
    w.path = "sub/dir/data.txt";
    w.content.data = (uint8_t *)"payload";
    w.content.len = 7;
    w.mkdirs = true;
    sbx_exec_opts o = {.principal = f->principal,
                       .policy = f->policy,
                       .deadline_mono_ms = sbx_monotonic_ms() + 60000};
    sbx_result *r = sbx_result_new();
    sbx_error err;
    if (ops->write_file(sb, &w, &o, r, &err) != SBX_OK)
        fail_msg("write_file: %s", err.message);
    sbx_message_free((ProtobufCMessage *)r);
    assert_int_equal(run_shell(f, sb, "cat /workspace/sub/dir/data.txt", &r, &err), SBX_OK);
    assert_stdout(r, "payload");
    sbx_message_free((ProtobufCMessage *)r);
    Sbx__V1__ReadFile rd = SBX__V1__READ_FILE__INIT;
    rd.path = "/workspace/sub/dir/data.txt";
    r = sbx_result_new();
    assert_int_equal(ops->read_file(sb, &rd, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    assert_int_equal(r->files[0]->content.len, 7);
    sbx_message_free((ProtobufCMessage *)r);
    Sbx__V1__ListFiles ls = SBX__V1__LIST_FILES__INIT;
    ls.path = "sub/dir";
    r = sbx_result_new();
    assert_int_equal(ops->list_files(sb, &ls, &o, r, &err), SBX_OK);
    assert_int_equal(r->n_files, 1);
    sbx_message_free((ProtobufCMessage *)r);
    destroy(f, sb);
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_managed_policy_is_what_the_daemon_recorded),
        cmocka_unit_test(test_docker_managed_allow_uses_the_configured_network),
        cmocka_unit_test(test_docker_managed_allow_on_a_shared_network_is_refused),
        cmocka_unit_test(test_docker_managed_allow_reaches_no_host_neighbour_or_metadata_address),
        cmocka_unit_test(test_docker_managed_allowlist_ipv6_is_unenforceable),
        cmocka_unit_test(test_docker_managed_pids_1_is_refused),
        cmocka_unit_test(test_docker_managed_missing_image_is_provision_with_the_daemons_words),
        cmocka_unit_test(test_docker_managed_runs_a_command),
        cmocka_unit_test(test_docker_managed_pause_keeps_state_and_resume_thaws),
        cmocka_unit_test(test_docker_managed_expose_reaches_a_server_inside),
        cmocka_unit_test(test_docker_managed_detached_command_is_followed_and_cancelled),
        cmocka_unit_test(test_docker_managed_destroy_removes_container_and_state_and_is_idempotent),
        cmocka_unit_test(test_docker_managed_destroy_refuses_a_container_sbx_did_not_create),
        cmocka_unit_test(test_docker_managed_removed_container_is_gone),
        cmocka_unit_test(test_docker_managed_destroy_does_not_wait_on_a_planted_fifo),
        cmocka_unit_test(test_docker_managed_stopped_container_is_gone_and_cleaned_up),
        cmocka_unit_test(test_docker_managed_container_stopped_under_a_live_handle_is_gone),
        cmocka_unit_test(test_docker_managed_attach_to_a_foreign_container_is_gone),
        cmocka_unit_test(test_docker_managed_reconnects_from_a_fresh_process),
        cmocka_unit_test(test_docker_managed_python_keeps_state_between_calls),
        cmocka_unit_test(test_docker_managed_files_roundtrip_in_the_workspace),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
