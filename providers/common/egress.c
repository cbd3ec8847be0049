/* egress.c - the egress proxy of an ALLOWLIST sandbox (see egress.h). */
#include "providers/common/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/fib_rules.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "providers/common/netns.h"
#include "providers/common/proc.h"

/* Bytes buffered per direction of a connection (at least SBX_EGRESS_HEAD_MAX: the head is read
 * into the client-to-upstream buffer and sent on once allowed). */
#define EG_BUF 65536
/* How long a connection may take to show its ClientHello or HTTP head, and to connect on. */
#define EG_SNIFF_MS 10000
#define EG_CONNECT_MS 10000
/* One DNS question to the resolver: tries and how long each waits. */
#define EG_DNS_TRIES 2
#define EG_DNS_WAIT_MS 1500
/* Most extra TCP ports (named by CIDR entries) the proxy listens on. */
#define EG_MAX_PORTS 24
/* TTL of the A records the proxy answers with, and how long it keeps an answer it got. */
#define EG_TTL 30
/* Answers kept (names of the allowlist recently resolved). */
#define EG_CACHE 32

/* ---- netns setup (runs in a child inside the sandbox's namespace: syscalls only) ---------- */

int sbx_egress_lo_up(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int rc = 0;
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
        rc = errno;
    ifr.ifr_flags |= IFF_UP;
    if (rc == 0 && ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
        rc = errno;
    close(s);
    return rc;
}

static int lo_index(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int idx = ioctl(s, SIOCGIFINDEX, &ifr) == 0 ? ifr.ifr_ifindex : -1;
    close(s);
    return idx;
}

static void nl_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len)
{
    struct rtattr *a = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
    a->rta_type = type;
    a->rta_len = (unsigned short)RTA_LENGTH(len);
    memcpy(RTA_DATA(a), data, len);
    nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(a->rta_len);
}

/* Sends one request to the kernel's routing netlink in the caller's namespace and reads its
 * one answer into buf: 0 or an errno value; async-signal-safe. */
static int nl_talk(const struct nlmsghdr *req, char *buf, size_t cap, ssize_t *got)
{
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (s < 0)
        return errno;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = 0;
    if (sendto(s, req, req->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
        rc = errno;
    else if ((*got = recv(s, buf, cap, 0)) < 0)
        rc = errno;
    close(s);
    return rc;
}

/* Sends a request asking for an acknowledgement (NLM_F_ACK) and reads it: 0, or the kernel's
 * errno value; async-signal-safe. */
static int nl_ack(const struct nlmsghdr *req)
{
    char buf[512];
    ssize_t n = 0;
    int rc = nl_talk(req, buf, sizeof buf, &n);
    const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
    if (rc == 0 &&
        ((size_t)n < NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR))
        rc = EPROTO;
    if (rc == 0)
        rc = -((const struct nlmsgerr *)NLMSG_DATA(h))->error;
    return rc;
}

/* A routing request: its header, the route's message and room for its attributes. */
typedef struct nl_route_req {
    struct nlmsghdr nh;
    struct rtmsg rt;
    char attrs[64];
} nl_route_req;

/* Starts req as a request of type with flags about the IPv4 route to dst/len (host order). */
static void nl_route_req_init(nl_route_req *req, unsigned short type, unsigned short flags,
                              uint32_t dst, int len)
{
    memset(req, 0, sizeof *req);
    req->nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
    req->nh.nlmsg_type = type;
    req->nh.nlmsg_flags = flags;
    req->nh.nlmsg_seq = 1;
    req->rt.rtm_family = AF_INET;
    req->rt.rtm_dst_len = (unsigned char)len;
    uint32_t d = htonl(dst);
    nl_attr(&req->nh, RTA_DST, &d, sizeof d);
}

/* A route to add: in table, of scope and type, through device oif (0: none, as prohibit routes
 * have) and gateway gw (host order; 0: none). */
typedef struct nl_route_spec {
    unsigned char table, scope, type;
    int oif;
    uint32_t gw;
} nl_route_spec;

/* Adds one IPv4 route net/len over netlink in the caller's namespace: 0 or an errno value (an
 * equal route already there is 0); async-signal-safe. */
static int nl_route(uint32_t net, int len, const nl_route_spec *r)
{
    nl_route_req req;
    nl_route_req_init(&req, RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK, net, len);
    req.rt.rtm_table = r->table;
    req.rt.rtm_protocol = RTPROT_BOOT;
    req.rt.rtm_scope = r->scope;
    req.rt.rtm_type = r->type;
    if (r->oif > 0)
        nl_attr(&req.nh, RTA_OIF, &r->oif, sizeof r->oif);
    if (r->gw != 0) {
        uint32_t gw = htonl(r->gw);
        nl_attr(&req.nh, RTA_GATEWAY, &gw, sizeof gw);
    }
    int rc = nl_ack(&req.nh);
    return rc == EEXIST ? 0 : rc;
}

/* The routing table of the guard's way to the host's nameservers: only the policy rules below
 * (DNS's port, UDP and TCP) look it up, so every other port of a nameserver still meets the
 * prohibit route of the main table. Any id but the kernel's own (253-255) and 0 will do in the
 * sandbox's fresh namespace. */
#define GUARD_DNS_TABLE 53
/* The rules' priority: ahead of the main table's rule (32766). */
#define GUARD_DNS_RULE_PRIORITY 1000

/* Adds a policy rule over netlink in the caller's namespace: packets to dst (host order) of IP
 * protocol proto and destination port port are routed by table GUARD_DNS_TABLE. 0 or an errno
 * value (a kernel before 4.17 knows no port or protocol selector: EINVAL, and the guard fails
 * rather than open every port); async-signal-safe. */
static int nl_dns_rule(uint32_t dst, uint8_t proto, uint16_t port)
{
    struct {
        struct nlmsghdr nh;
        struct fib_rule_hdr fr;
        char attrs[64];
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct fib_rule_hdr));
    req.nh.nlmsg_type = RTM_NEWRULE;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
    req.nh.nlmsg_seq = 1;
    req.fr.family = AF_INET;
    req.fr.dst_len = 32;
    req.fr.table = GUARD_DNS_TABLE;
    req.fr.action = FR_ACT_TO_TBL;
    uint32_t d = htonl(dst), prio = GUARD_DNS_RULE_PRIORITY, table = GUARD_DNS_TABLE;
    struct fib_rule_port_range ports = {port, port}; /* host order, as the kernel compares */
    nl_attr(&req.nh, FRA_DST, &d, sizeof d);
    nl_attr(&req.nh, FRA_PRIORITY, &prio, sizeof prio);
    nl_attr(&req.nh, FRA_TABLE, &table, sizeof table);
    nl_attr(&req.nh, FRA_IP_PROTO, &proto, sizeof proto);
    nl_attr(&req.nh, FRA_DPORT_RANGE, &ports, sizeof ports);
    return nl_ack(&req.nh);
}

/* The route the caller's namespace takes to dst now (RTM_GETROUTE), as a spec for a route of
 * its own to dst alone: 0, or an errno value (ENETUNREACH: none; EPROTO: not a unicast one);
 * async-signal-safe. */
static int nl_route_to(uint32_t dst, nl_route_spec *out)
{
    nl_route_req req;
    nl_route_req_init(&req, RTM_GETROUTE, NLM_F_REQUEST, dst, 32);
    union {
        struct nlmsghdr h;
        char buf[1024];
    } a;
    ssize_t n = 0;
    int rc = nl_talk(&req.nh, a.buf, sizeof a.buf, &n);
    if (rc != 0)
        return rc;
    if ((size_t)n < sizeof a.h || a.h.nlmsg_len > (size_t)n)
        return EPROTO;
    if (a.h.nlmsg_type == NLMSG_ERROR && a.h.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr)))
        return -((struct nlmsgerr *)NLMSG_DATA(&a.h))->error;
    if (a.h.nlmsg_type != RTM_NEWROUTE || a.h.nlmsg_len < NLMSG_LENGTH(sizeof(struct rtmsg)))
        return EPROTO;
    const struct rtmsg *rt = NLMSG_DATA(&a.h);
    if (rt->rtm_type != RTN_UNICAST)
        return EPROTO;
    *out = (nl_route_spec){RT_TABLE_MAIN, RT_SCOPE_LINK, RTN_UNICAST, 0, 0};
    int left = (int)RTM_PAYLOAD(&a.h);
    for (const struct rtattr *at = RTM_RTA(rt); RTA_OK(at, left); at = RTA_NEXT(at, left)) {
        if (at->rta_type == RTA_OIF && RTA_PAYLOAD(at) == sizeof(int))
            memcpy(&out->oif, RTA_DATA(at), sizeof(int));
        if (at->rta_type == RTA_GATEWAY && RTA_PAYLOAD(at) == sizeof(uint32_t)) {
            uint32_t gw;
            memcpy(&gw, RTA_DATA(at), sizeof gw);
            out->gw = ntohl(gw);
            out->scope = RT_SCOPE_UNIVERSE;
        }
    }
    return out->oif > 0 ? 0 : EPROTO;
}

int sbx_egress_local_route(uint32_t net, int len)
{
    int idx = lo_index();
    if (idx < 0)
        return ENODEV;
    nl_route_spec r = {RT_TABLE_LOCAL, RT_SCOPE_HOST, RTN_LOCAL, idx, 0};
    return nl_route(net, len, &r);
}

/* ---- network_egress ALLOW's guard --------------------------------------------------------- */

typedef struct {
    const uint32_t *host;
    size_t n_host;
    const uint32_t *dns; /* the resolvers the sandbox's DNS reaches, exempted */
    size_t n_dns;
} guard_arg;

/* What ALLOW's guard closes besides the host's own addresses. */
static const struct {
    uint32_t net;
    int len;
} guard_nets[] = {
    {0xA9FE0000u, 16}, /* link-local: the cloud metadata address (169.254.169.254) */
    {0x64400000u, 10}, /* shared address space: Alibaba's metadata (100.100.100.200) */
    /* RFC 1918: the host's private neighbours (the other machines of its VPC or LAN, reached
     * through its NAT). The sandbox's own network lies in one of them too, but its connected
     * route is more specific and stays (another sandbox on it: the network's icc setting). */
    {0x0A000000u, 8},
    {0xAC100000u, 12},
    {0xC0A80000u, 16},
};

static bool in_guard_nets(uint32_t a)
{
    for (size_t i = 0; i < sizeof guard_nets / sizeof guard_nets[0]; i++)
        if ((a & (0xFFFFFFFFu << (32 - guard_nets[i].len))) == guard_nets[i].net)
            return true;
    return false;
}

/* Writes "1" to a sysctl file of the caller's network namespace; a kernel without IPv6 has
 * none (0). */
static int sysctl_one(const char *path)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : errno;
    int rc = write(fd, "1", 1) == 1 ? 0 : errno;
    close(fd);
    return rc;
}

/* In the sandbox's namespace (an sbx_netns_fn making no descriptors): the prohibit routes,
 * a way to DNS's port alone of each resolver they would cover (a route of its own, the way the
 * namespace took to it before, in a table only rules for UDP and TCP port 53 to it look up:
 * every other port and protocol of the resolver meets the prohibit route), and IPv6 off. */
static int guard_in_ns(void *varg, int *fds, size_t max, size_t *n)
{
    (void)fds;
    (void)max;
    *n = 0;
    const guard_arg *g = varg;
    nl_route_spec to_dns[SBX_EGRESS_GUARD_DNS_MAX];
    bool keep[SBX_EGRESS_GUARD_DNS_MAX] = {false};
    for (size_t i = 0; i < g->n_dns && i < SBX_EGRESS_GUARD_DNS_MAX; i++) {
        bool host = false;
        for (size_t k = 0; k < g->n_host && !host; k++)
            host = g->host[k] == g->dns[i];
        /* no way to it now, or the host's own: left closed */
        keep[i] = !host && in_guard_nets(g->dns[i]) && nl_route_to(g->dns[i], &to_dns[i]) == 0;
    }
    const nl_route_spec prohibit = {RT_TABLE_MAIN, RT_SCOPE_UNIVERSE, RTN_PROHIBIT, 0, 0};
    for (size_t i = 0; i < sizeof guard_nets / sizeof guard_nets[0]; i++) {
        int rc = nl_route(guard_nets[i].net, guard_nets[i].len, &prohibit);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; i < g->n_host; i++) {
        if ((g->host[i] >> 24) == 127)
            continue; /* the sandbox's own loopback (the local table answers it first anyway) */
        int rc = nl_route(g->host[i], 32, &prohibit);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; i < g->n_dns && i < SBX_EGRESS_GUARD_DNS_MAX; i++) {
        if (!keep[i])
            continue;
        to_dns[i].table = GUARD_DNS_TABLE;
        int rc = nl_route(g->dns[i], 32, &to_dns[i]);
        if (rc == 0)
            rc = nl_dns_rule(g->dns[i], IPPROTO_UDP, 53);
        if (rc == 0)
            rc = nl_dns_rule(g->dns[i], IPPROTO_TCP, 53);
        if (rc != 0)
            return rc;
    }
    /* No IPv6 at all: the host's link-local address on the network's bridge would be another
     * way to it, and an IPv6 network's own routes other ways around these. */
    int rc = sysctl_one("/proc/sys/net/ipv6/conf/all/disable_ipv6");
    if (rc == 0)
        rc = sysctl_one("/proc/sys/net/ipv6/conf/default/disable_ipv6");
    return rc;
}

void sbx_egress_nameservers_in(const char *path, uint32_t *out, size_t *n, size_t max)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        const char *p = line + strspn(line, " \t");
        char addr[64];
        struct in_addr a;
        if (strncmp(p, "nameserver", 10) != 0 || (p[10] != ' ' && p[10] != '\t') ||
            sscanf(p + 10, "%63s", addr) != 1 || inet_pton(AF_INET, addr, &a) != 1)
            continue;
        uint32_t h = ntohl(a.s_addr);
        bool seen = false;
        for (size_t k = 0; k < *n && !seen; k++)
            seen = out[k] == h;
        if (!seen && *n < max)
            out[(*n)++] = h;
    }
    fclose(f);
}

size_t sbx_egress_host_resolvers(uint32_t *out, size_t max)
{
    size_t n = 0;
    sbx_egress_nameservers_in("/etc/resolv.conf", out, &n, max);
    for (size_t i = 0; i < n; i++)
        if (out[i] == 0x7F000035u) { /* systemd-resolved's local stub: its upstream ones too */
            sbx_egress_nameservers_in("/run/systemd/resolve/resolv.conf", out, &n, max);
            break;
        }
    return n;
}

size_t sbx_egress_host_addrs(uint32_t *out, size_t max)
{
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) != 0)
        return 0;
    size_t n = 0;
    for (struct ifaddrs *i = ifa; i != NULL && n < max; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET)
            continue;
        uint32_t a =
            ntohl(((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr);
        bool seen = false;
        for (size_t k = 0; k < n && !seen; k++)
            seen = out[k] == a;
        if (!seen && (a >> 24) != 127)
            out[n++] = a;
    }
    freeifaddrs(ifa);
    return n;
}

sbx_status sbx_egress_guard_allow(pid_t target, sbx_error *err)
{
    uint32_t host[SBX_EGRESS_GUARD_HOST_MAX];
    uint32_t dns[SBX_EGRESS_GUARD_DNS_MAX];
    guard_arg g = {.host = host,
                   .n_host = sbx_egress_host_addrs(host, SBX_EGRESS_GUARD_HOST_MAX),
                   .dns = dns,
                   .n_dns = sbx_egress_host_resolvers(dns, SBX_EGRESS_GUARD_DNS_MAX)};
    int fds[1];
    size_t n = 0;
    sbx_error why = {0};
    sbx_status st = sbx_netns_call(target, guard_in_ns, &g, fds, 0, &n, &why);
    if (st != SBX_OK)
        return sbx_error_set(
            err, st,
            "network_egress allow: cannot close the sandbox's way to the host, its "
            "private networks and the cloud metadata address: %s (it takes root: run the provider "
            "as "
            "root, or use network_egress allowlist or deny)",
            why.message);
    return SBX_OK;
}

typedef struct {
    uint16_t ports[EG_MAX_PORTS + 2];
    size_t n_ports;
} setup_arg;

static int tcp_listener(uint16_t port, int *out)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0) {
        int e = errno;
        close(s);
        return e;
    }
    *out = s;
    return 0;
}

/* In the sandbox's namespace: lo up, every IPv4 address local, then the listeners: UDP 53
 * first, then TCP on each port of arg. */
static int setup_in_ns(void *varg, int *fds, size_t max, size_t *n)
{
    const setup_arg *arg = varg;
    if (max < 1 + arg->n_ports)
        return EOVERFLOW;
    int rc = sbx_egress_lo_up();
    if (rc == 0)
        rc = sbx_egress_local_route(0, 0);
    if (rc)
        return rc;
    int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (u < 0)
        return errno;
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
    if (setsockopt(u, IPPROTO_IP, IP_PKTINFO, &one, sizeof one) != 0 ||
        bind(u, (struct sockaddr *)&a, sizeof a) != 0) {
        rc = errno;
        close(u);
        return rc;
    }
    fds[(*n)++] = u;
    for (size_t i = 0; i < arg->n_ports; i++) {
        rc = tcp_listener(arg->ports[i], &fds[*n]);
        if (rc) {
            for (size_t k = 0; k < *n; k++)
                close(fds[k]);
            *n = 0;
            return rc;
        }
        (*n)++;
    }
    return 0;
}

/* ---- configuration ------------------------------------------------------------------------ */

bool sbx_egress_check(char *const *allow, size_t n_allow, sbx_strlist *un)
{
    bool ok = true;
    if (n_allow > SBX_EGRESS_MAX_RULES)
        ok = ok && sbx_strlist_add(un, "network_allow (more than 256 entries)");
    for (size_t i = 0; i < n_allow && i < SBX_EGRESS_MAX_RULES; i++) {
        sbx_egress_rule r;
        const char *why = NULL;
        if (!sbx_egress_rule_parse(allow[i] ? allow[i] : "", &r, &why)) {
            char item[SBX_EGRESS_NAME_MAX + 200];
            snprintf(item, sizeof item, "network_allow=%.*s (%s)", SBX_EGRESS_NAME_MAX,
                     allow[i] ? allow[i] : "", why);
            ok = ok && sbx_strlist_add(un, item);
        }
    }
    return ok;
}

typedef struct conn conn;

typedef struct {
    char name[SBX_EGRESS_NAME_MAX + 1];
    uint32_t addrs[SBX_EGRESS_DNS_MAX_ADDRS];
    size_t n;
    int64_t until; /* monotonic ms; 0 = empty */
} cache_entry;

typedef struct {
    sbx_egress_rule rules[SBX_EGRESS_MAX_RULES];
    size_t n_rules;
    struct sockaddr_in resolver;
    setup_arg ports;
    int pidfd, dirfd, udp;
    int lst[EG_MAX_PORTS + 2];
    size_t n_lst;
    sbx_egress_table table;
    conn *conns[SBX_EGRESS_MAX_CONNS];
    cache_entry cache[EG_CACHE];
} proxy;

static bool parse_resolver(const char *s, struct sockaddr_in *out)
{
    char host[64];
    const char *colon = strchr(s, ':');
    size_t hl = colon ? (size_t)(colon - s) : strlen(s);
    if (hl == 0 || hl >= sizeof host)
        return false;
    memcpy(host, s, hl);
    host[hl] = '\0';
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(53);
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
        return false;
    if (colon) {
        char *end = NULL;
        long p = strtol(colon + 1, &end, 10);
        if (!end || *end || p < 1 || p > 65535)
            return false;
        out->sin_port = htons((uint16_t)p);
    }
    return true;
}

/* The host's first IPv4 nameserver, port 53. */
static bool host_resolver(struct sockaddr_in *out)
{
    uint32_t a;
    if (sbx_egress_host_resolvers(&a, 1) == 0)
        return false;
    memset(out, 0, sizeof *out);
    out->sin_family = AF_INET;
    out->sin_port = htons(53);
    out->sin_addr.s_addr = htonl(a);
    return true;
}

/* ---- refusal table ------------------------------------------------------------------------ */

static bool dest_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
           c == ':' || c == '(' || c == ')';
}

void sbx_egress_table_parse(const char *text, size_t len, sbx_egress_table *t)
{
    memset(t, 0, sizeof *t);
    size_t i = 0;
    while (i < len && t->n < SBX_EGRESS_MAX_REFUSALS + 1) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        /* "COUNT DEST" */
        size_t k = i;
        uint64_t count = 0;
        while (k < e && text[k] >= '0' && text[k] <= '9' && k - i < 10)
            count = count * 10 + (uint64_t)(text[k++] - '0');
        bool ok = k > i && k < e && text[k] == ' ' && count > 0 && count <= UINT32_MAX;
        size_t d0 = k + 1;
        size_t dl = ok ? e - d0 : 0;
        ok = ok && dl > 0 && dl < SBX_EGRESS_NAME_MAX_DEST;
        for (size_t j = d0; ok && j < e; j++)
            ok = dest_char(text[j]);
        if (ok) {
            memcpy(t->e[t->n].dest, text + d0, dl);
            t->e[t->n].dest[dl] = '\0';
            t->e[t->n].count = (uint32_t)count;
            t->n++;
        }
        i = e + 1;
    }
}

void sbx_egress_table_read(const char *state_dir, sbx_egress_table *t)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/egress.refused", state_dir);
    memset(t, 0, sizeof *t);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return;
    char buf[(SBX_EGRESS_MAX_REFUSALS + 1) * (SBX_EGRESS_NAME_MAX_DEST + 12)];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof buf && (n = read(fd, buf + len, sizeof buf - len)) > 0)
        len += (size_t)n;
    close(fd);
    sbx_egress_table_parse(buf, len, t);
}

bool sbx_egress_report(const sbx_egress_table *before, const sbx_egress_table *after, sbx_result *r)
{
    for (size_t i = 0; i < after->n; i++) {
        uint32_t was = 0;
        for (size_t k = 0; k < before->n; k++) {
            if (strcmp(before->e[k].dest, after->e[i].dest) == 0) {
                was = before->e[k].count;
                break;
            }
        }
        uint32_t delta = after->e[i].count >= was ? after->e[i].count - was : after->e[i].count;
        if (delta == 0)
            continue;
        Sbx__V1__EgressRefusal *e = malloc(sizeof *e);
        if (!e)
            return false;
        sbx__v1__egress_refusal__init(e);
        e->count = delta;
        Sbx__V1__EgressRefusal **grown =
            realloc(r->egress_refused, (r->n_egress_refused + 1) * sizeof *grown);
        if (!grown || !sbx_set_string(&e->destination, after->e[i].dest)) {
            if (grown)
                r->egress_refused = grown;
            free(e);
            return false;
        }
        grown[r->n_egress_refused++] = e;
        r->egress_refused = grown;
    }
    return true;
}

/* Counts one refusal of dest and writes the table (before the refused party hears of it, so a
 * command that waited for the answer finds it counted). */
static void refuse(proxy *px, const char *dest)
{
    sbx_egress_table *t = &px->table;
    size_t i = 0;
    for (; i < t->n; i++) {
        if (strcmp(t->e[i].dest, dest) == 0)
            break;
    }
    if (i == t->n) {
        if (t->n >= SBX_EGRESS_MAX_REFUSALS) {
            dest = "(other)";
            for (i = 0; i < t->n && strcmp(t->e[i].dest, dest) != 0; i++) {
            }
        }
        if (i == t->n) {
            snprintf(t->e[i].dest, sizeof t->e[i].dest, "%s", dest);
            t->e[i].count = 0;
            t->n++;
        }
    }
    if (t->e[i].count < UINT32_MAX)
        t->e[i].count++;
    char buf[(SBX_EGRESS_MAX_REFUSALS + 1) * (SBX_EGRESS_NAME_MAX_DEST + 12)];
    size_t len = 0;
    for (size_t k = 0; k < t->n; k++)
        len +=
            (size_t)snprintf(buf + len, sizeof buf - len, "%u %s\n", t->e[k].count, t->e[k].dest);
    int fd = openat(px->dirfd, "egress.refused.tmp",
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    bool ok = write(fd, buf, len) == (ssize_t)len;
    close(fd);
    if (ok)
        renameat(px->dirfd, "egress.refused.tmp", px->dirfd, "egress.refused");
}

static void ip_port(uint32_t ip, uint16_t port, char *out, size_t cap)
{
    snprintf(out, cap, "%u.%u.%u.%u:%u", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255,
             port);
}

/* ---- decisions ---------------------------------------------------------------------------- */

/* Whether a connection to ip:port (host order) is allowed by a CIDR entry; a special address
 * needs an entry of at least /8 that covers it (0.0.0.0/0 does not open the host's loopback). */
static bool allow_dst(const proxy *px, uint32_t ip, uint16_t port)
{
    bool special = sbx_egress_ip_special(ip);
    for (size_t i = 0; i < px->n_rules; i++) {
        const sbx_egress_rule *r = &px->rules[i];
        if (r->kind != SBX_EGRESS_RULE_CIDR || (r->port && r->port != port) ||
            (ip & r->mask) != r->net)
            continue;
        if (!special || r->mask >= 0xFF000000u)
            return true;
    }
    return false;
}

/* Whether name is listed at all (any port): DNS answers for it. */
static bool name_listed(const proxy *px, const char *name)
{
    for (size_t i = 0; i < px->n_rules; i++) {
        sbx_egress_rule r = px->rules[i];
        r.port = 0;
        if (r.kind != SBX_EGRESS_RULE_CIDR && sbx_egress_allow_name(&r, 1, name, 0))
            return true;
    }
    return false;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Asks the resolver for name's A records (blocking, bounded by EG_DNS_TRIES x EG_DNS_WAIT_MS).
 * Returns the number of addresses (network order) or -1; *rcode is the resolver's. */
static int resolve_now(const proxy *px, const char *name, uint32_t *addrs, size_t max, int *rcode)
{
    *rcode = 2;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -1;
    if (connect(s, (const struct sockaddr *)&px->resolver, sizeof px->resolver) != 0) {
        close(s);
        return -1;
    }
    int got = -1;
    for (int t = 0; t < EG_DNS_TRIES && got < 0; t++) {
        uint16_t id = 0;
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id)
            id = (uint16_t)now_ms();
        uint8_t q[SBX_EGRESS_DNS_MAX];
        size_t qn = sbx_egress_dns_query_build(id, name, q, sizeof q);
        if (qn == 0 || send(s, q, qn, 0) != (ssize_t)qn)
            break;
        int64_t until = now_ms() + EG_DNS_WAIT_MS;
        for (int reads = 0; reads < 8 && got < 0; reads++) {
            int64_t left = until - now_ms();
            struct pollfd pf = {s, POLLIN, 0};
            if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
                break;
            uint8_t r[4096];
            ssize_t n = recv(s, r, sizeof r, 0);
            if (n <= 0)
                continue;
            size_t k = 0;
            if (sbx_egress_dns_answer_parse(r, (size_t)n, id, name, addrs, max, &k, rcode) ==
                SBX_EGRESS_OK)
                got = (int)k;
        }
    }
    close(s);
    return got;
}

/* resolve_now through a cache of answers with addresses, kept EG_TTL seconds: the question the
 * sandbox asks before it connects also serves the connection. */
static int resolve(proxy *px, const char *name, uint32_t *addrs, size_t max, int *rcode)
{
    int64_t now = now_ms();
    size_t oldest = 0;
    for (size_t i = 0; i < EG_CACHE; i++) {
        cache_entry *c = &px->cache[i];
        if (c->until > now && strcmp(c->name, name) == 0) {
            size_t n = c->n < max ? c->n : max;
            memcpy(addrs, c->addrs, n * sizeof *addrs);
            *rcode = 0;
            return (int)n;
        }
        if (c->until < px->cache[oldest].until)
            oldest = i;
    }
    int n = resolve_now(px, name, addrs, max, rcode);
    if (n > 0) {
        cache_entry *c = &px->cache[oldest];
        snprintf(c->name, sizeof c->name, "%s", name);
        c->n = (size_t)n < SBX_EGRESS_DNS_MAX_ADDRS ? (size_t)n : SBX_EGRESS_DNS_MAX_ADDRS;
        memcpy(c->addrs, addrs, c->n * sizeof *addrs);
        c->until = now + EG_TTL * 1000;
    }
    return n;
}

/* ---- connections -------------------------------------------------------------------------- */

enum { C_SNIFF, C_CONNECTING, C_SPLICE };

struct conn {
    int c, u;
    int state;
    uint32_t dst_ip; /* host order */
    uint16_t dst_port;
    int64_t deadline;
    bool c_eof, u_eof, u_shut, c_shut;
    size_t c2u_len, c2u_off, u2c_len, u2c_off;
    uint8_t c2u[EG_BUF];
    uint8_t u2c[EG_BUF];
};

static void conn_close(proxy *px, size_t i, bool reset)
{
    conn *k = px->conns[i];
    if (reset) {
        struct linger l = {1, 0};
        setsockopt(k->c, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    close(k->c);
    if (k->u >= 0)
        close(k->u);
    free(k);
    px->conns[i] = NULL;
}

static void conn_refuse(proxy *px, size_t i, const char *dest)
{
    conn *k = px->conns[i];
    char d[SBX_EGRESS_NAME_MAX_DEST];
    if (!dest) {
        ip_port(k->dst_ip, k->dst_port, d, sizeof d);
        dest = d;
    }
    refuse(px, dest);
    conn_close(px, i, true);
}

/* Starts the connection upstream to ip:port (host order). */
static void conn_connect(proxy *px, size_t i, uint32_t ip, uint16_t port)
{
    conn *k = px->conns[i];
    k->u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (k->u < 0) {
        conn_close(px, i, true);
        return;
    }
    int one = 1;
    setsockopt(k->u, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(ip);
    if (connect(k->u, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        conn_close(px, i, true);
        return;
    }
    k->state = C_CONNECTING;
    k->deadline = now_ms() + EG_CONNECT_MS;
}

/* A name was read off the connection: allowed names are resolved by the proxy and connected to
 * on the original port. */
static void conn_decide_name(proxy *px, size_t i, const char *name, uint16_t host_port)
{
    conn *k = px->conns[i];
    if ((host_port && host_port != k->dst_port) ||
        !sbx_egress_allow_name(px->rules, px->n_rules, name, k->dst_port)) {
        conn_refuse(px, i, name);
        return;
    }
    uint32_t addrs[SBX_EGRESS_DNS_MAX_ADDRS];
    int rcode = 0;
    int n = resolve(px, name, addrs, SBX_EGRESS_DNS_MAX_ADDRS, &rcode);
    for (int a = 0; a < n; a++) {
        uint32_t ip = ntohl(addrs[a]);
        if (!sbx_egress_ip_special(ip) || allow_dst(px, ip, k->dst_port)) {
            conn_connect(px, i, ip, k->dst_port);
            return;
        }
    }
    conn_refuse(px, i, name); /* unresolvable, or only special addresses */
}

static void conn_sniff(proxy *px, size_t i)
{
    conn *k = px->conns[i];
    ssize_t n = read(k->c, k->c2u + k->c2u_len, SBX_EGRESS_HEAD_MAX - k->c2u_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        conn_close(px, i, false);
        return;
    }
    k->c2u_len += (size_t)n;
    char name[SBX_EGRESS_NAME_MAX + 1];
    uint16_t port = 0;
    sbx_egress_parse p = k->dst_port == 443 ? sbx_egress_tls_sni(k->c2u, k->c2u_len, name)
                                            : sbx_egress_http_host(k->c2u, k->c2u_len, name, &port);
    if (p == SBX_EGRESS_NEED_MORE && k->c2u_len >= SBX_EGRESS_HEAD_MAX)
        p = SBX_EGRESS_BAD;
    if (p == SBX_EGRESS_BAD)
        conn_refuse(px, i, name[0] ? name : NULL);
    else if (p == SBX_EGRESS_OK)
        conn_decide_name(px, i, name, port);
}

static void on_accept(proxy *px, int l)
{
    for (int burst = 0; burst < 64; burst++) {
        int c = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0)
            return;
        /* zeroed: the family test below then never reads bytes getsockname did not write */
        struct sockaddr_in dst = {0};
        socklen_t dl = sizeof dst;
        size_t i = 0;
        while (i < SBX_EGRESS_MAX_CONNS && px->conns[i])
            i++;
        conn *k = i < SBX_EGRESS_MAX_CONNS ? calloc(1, sizeof *k) : NULL;
        if (!k || getsockname(c, (struct sockaddr *)&dst, &dl) != 0 || dst.sin_family != AF_INET) {
            struct linger lg = {1, 0};
            setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            close(c);
            free(k);
            continue;
        }
        k->c = c;
        k->u = -1;
        k->dst_ip = ntohl(dst.sin_addr.s_addr);
        k->dst_port = ntohs(dst.sin_port);
        k->state = C_SNIFF;
        k->deadline = now_ms() + EG_SNIFF_MS;
        px->conns[i] = k;
        if (allow_dst(px, k->dst_ip, k->dst_port))
            conn_connect(px, i, k->dst_ip, k->dst_port);
        else if (k->dst_port != 80 && k->dst_port != 443)
            conn_refuse(px, i, NULL);
    }
}

/* Moves bytes one step in each direction the poll said is ready. */
static void conn_splice(proxy *px, size_t i, short crev, short urev)
{
    conn *k = px->conns[i];
    if ((crev | urev) & POLLERR) {
        conn_close(px, i, true);
        return;
    }
    if ((crev & (POLLIN | POLLHUP)) && !k->c_eof && k->c2u_len == 0) {
        ssize_t n = read(k->c, k->c2u, sizeof k->c2u);
        if (n > 0) {
            k->c2u_len = (size_t)n;
            k->c2u_off = 0;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            k->c_eof = true;
        }
    }
    if ((urev & (POLLIN | POLLHUP)) && !k->u_eof && k->u2c_len == 0) {
        ssize_t n = read(k->u, k->u2c, sizeof k->u2c);
        if (n > 0) {
            k->u2c_len = (size_t)n;
            k->u2c_off = 0;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            k->u_eof = true;
        }
    }
    if (k->c2u_len > k->c2u_off) {
        ssize_t n = send(k->u, k->c2u + k->c2u_off, k->c2u_len - k->c2u_off, MSG_NOSIGNAL);
        if (n > 0)
            k->c2u_off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_close(px, i, true);
            return;
        }
        if (k->c2u_off == k->c2u_len)
            k->c2u_len = k->c2u_off = 0;
    }
    if (k->u2c_len > k->u2c_off) {
        ssize_t n = send(k->c, k->u2c + k->u2c_off, k->u2c_len - k->u2c_off, MSG_NOSIGNAL);
        if (n > 0)
            k->u2c_off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            conn_close(px, i, true);
            return;
        }
        if (k->u2c_off == k->u2c_len)
            k->u2c_len = k->u2c_off = 0;
    }
    if (k->c_eof && k->c2u_len == 0 && !k->u_shut) {
        shutdown(k->u, SHUT_WR);
        k->u_shut = true;
    }
    if (k->u_eof && k->u2c_len == 0 && !k->c_shut) {
        shutdown(k->c, SHUT_WR);
        k->c_shut = true;
    }
    if (k->u_shut && k->c_shut)
        conn_close(px, i, false);
}

static void conn_event(proxy *px, size_t i, short crev, short urev)
{
    conn *k = px->conns[i];
    if (k->state == C_SNIFF) {
        if (crev)
            conn_sniff(px, i);
    } else if (k->state == C_CONNECTING) {
        if (!urev)
            return;
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(k->u, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
            conn_close(px, i, true);
            return;
        }
        k->state = C_SPLICE;
        conn_splice(px, i, 0, 0); /* the head read while sniffing goes first */
    } else {
        conn_splice(px, i, crev, urev);
    }
}

/* ---- DNS ---------------------------------------------------------------------------------- */

static void on_dns(proxy *px)
{
    for (int burst = 0; burst < 16; burst++) {
        uint8_t q[SBX_EGRESS_DNS_MAX];
        struct sockaddr_in from;
        char cbuf[CMSG_SPACE(sizeof(struct in_pktinfo))];
        struct iovec iov = {q, sizeof q};
        struct msghdr msg = {.msg_name = &from,
                             .msg_namelen = sizeof from,
                             .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cbuf,
                             .msg_controllen = sizeof cbuf};
        ssize_t n = recvmsg(px->udp, &msg, MSG_DONTWAIT);
        if (n < 0)
            return;
        struct in_pktinfo info;
        bool have_info = false;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
                memcpy(&info, CMSG_DATA(c), sizeof info);
                have_info = true;
            }
        }
        sbx_egress_dns_query dq;
        if (!have_info || (msg.msg_flags & MSG_TRUNC) ||
            sbx_egress_dns_query_parse(q, (size_t)n, &dq) != SBX_EGRESS_OK)
            continue; /* not a question: no answer */
        uint32_t addrs[SBX_EGRESS_DNS_MAX_ADDRS];
        size_t na = 0;
        int rcode = 0;
        if (dq.bad_name || dq.qclass != 1) {
            rcode = 5; /* REFUSED */
        } else if (!name_listed(px, dq.name)) {
            refuse(px, dq.name);
            rcode = 3; /* NXDOMAIN */
        } else if (dq.qtype == 1) {
            uint32_t got[SBX_EGRESS_DNS_MAX_ADDRS];
            int k = resolve(px, dq.name, got, SBX_EGRESS_DNS_MAX_ADDRS, &rcode);
            if (k < 0)
                rcode = 2; /* SERVFAIL */
            for (int a = 0; a < k; a++) {
                if (!sbx_egress_ip_special(ntohl(got[a])) || allow_dst(px, ntohl(got[a]), 0))
                    addrs[na++] = got[a];
            }
        } /* other types of a listed name: an empty answer (IPv6 is not carried) */
        uint8_t r[SBX_EGRESS_DNS_MAX];
        size_t rn = sbx_egress_dns_reply_build(q, &dq, rcode, addrs, na, EG_TTL, r, sizeof r);
        if (rn == 0)
            continue;
        /* from the address the question went to: the sandbox's resolver may be any address */
        struct in_pktinfo out = {0};
        out.ipi_spec_dst = info.ipi_addr;
        char obuf[CMSG_SPACE(sizeof out)];
        memset(obuf, 0, sizeof obuf);
        struct iovec oiov = {r, rn};
        struct msghdr om = {.msg_name = &from,
                            .msg_namelen = sizeof from,
                            .msg_iov = &oiov,
                            .msg_iovlen = 1,
                            .msg_control = obuf,
                            .msg_controllen = sizeof obuf};
        struct cmsghdr *c = CMSG_FIRSTHDR(&om);
        c->cmsg_level = IPPROTO_IP;
        c->cmsg_type = IP_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof out);
        memcpy(CMSG_DATA(c), &out, sizeof out);
        sendmsg(px->udp, &om, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
}

/* ---- the proxy process -------------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Closes every descriptor but keep[] (and 0-2, pointed at /dev/null). */
static void keep_only(int *keep, size_t n)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3 && null >= 0; fd++)
        dup2(null, fd);
    qsort(keep, n, sizeof *keep, cmp_int);
    unsigned lo = 3;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned)keep[i] > lo)
            syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
        lo = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, lo, ~0U, 0);
}

static void proxy_main(proxy *px)
{
    prctl(PR_SET_NAME, "sbx-egress", 0, 0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    int keep[EG_MAX_PORTS + 8];
    size_t nk = 0;
    keep[nk++] = px->pidfd;
    keep[nk++] = px->dirfd;
    keep[nk++] = px->udp;
    for (size_t i = 0; i < px->n_lst; i++)
        keep[nk++] = px->lst[i];
    keep_only(keep, nk);

    enum { FIXED = 2 + EG_MAX_PORTS + 2 };
    static struct pollfd pf[FIXED + 2 * SBX_EGRESS_MAX_CONNS];
    static int who[FIXED + 2 * SBX_EGRESS_MAX_CONNS]; /* conn index * 2 + (0 client, 1 up) */
    for (;;) {
        size_t n = 0;
        pf[n++] = (struct pollfd){px->pidfd, POLLIN, 0};
        pf[n++] = (struct pollfd){px->udp, POLLIN, 0};
        for (size_t i = 0; i < px->n_lst; i++)
            pf[n++] = (struct pollfd){px->lst[i], POLLIN, 0};
        size_t fixed = n;
        int64_t now = now_ms();
        /* the nearest connection deadline; none: sleep until an event (an idle proxy woke
         * every second, a thousand wake-ups a second beside a thousand sandboxes) */
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < SBX_EGRESS_MAX_CONNS; i++) {
            conn *k = px->conns[i];
            if (!k)
                continue;
            if (k->state != C_SPLICE && now >= k->deadline) {
                if (k->state == C_SNIFF)
                    conn_refuse(px, i, NULL);
                else
                    conn_close(px, i, true);
                continue;
            }
            if (k->state != C_SPLICE && k->deadline < next)
                next = k->deadline;
            short ce = 0, ue = 0;
            if (k->state == C_SNIFF) {
                ce = POLLIN;
            } else if (k->state == C_CONNECTING) {
                ue = POLLOUT;
            } else {
                if (!k->c_eof && k->c2u_len == 0)
                    ce |= POLLIN;
                if (k->u2c_len)
                    ce |= POLLOUT;
                if (!k->u_eof && k->u2c_len == 0)
                    ue |= POLLIN;
                if (k->c2u_len)
                    ue |= POLLOUT;
            }
            pf[n] = (struct pollfd){k->c, ce, 0};
            who[n++] = (int)(i * 2);
            if (k->u >= 0) {
                pf[n] = (struct pollfd){k->u, ue, 0};
                who[n++] = (int)(i * 2 + 1);
            }
        }
        int wait = next == INT64_MAX ? -1 : next < now ? 0 : (int)(next - now); /* <= 10 s */
        if (poll(pf, n, wait) < 0 && errno != EINTR)
            _exit(1);
        if (pf[0].revents)
            _exit(0); /* the sandbox's PID 1 is gone */
        if (pf[1].revents)
            on_dns(px);
        for (size_t i = 2; i < fixed; i++) {
            if (pf[i].revents)
                on_accept(px, pf[i].fd);
        }
        /* one event call per connection with both of its descriptors' events */
        for (size_t j = fixed; j < n; j++) {
            size_t ci = (size_t)who[j] / 2;
            if (who[j] % 2 == 1 || !px->conns[ci])
                continue;
            short crev = pf[j].revents, urev = 0;
            if (j + 1 < n && who[j + 1] == who[j] + 1)
                urev = pf[j + 1].revents;
            if ((crev || urev) && px->conns[ci]->c == pf[j].fd)
                conn_event(px, ci, crev, urev);
        }
    }
}

/* Long because it starts the proxy in order (refuse what cannot be enforced, the table, the
 * listeners made inside the sandbox's namespace, fork, hand-off of the descriptors), and every
 * failure closes the same descriptors at one exit. */
sbx_status sbx_egress_start(pid_t pid, char *const *allow, size_t n_allow, const char *resolver,
                            const char *state_dir, sbx_error *err)
{
    proxy *px = calloc(1, sizeof *px);
    if (!px)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    px->pidfd = px->dirfd = px->udp = -1;
    /* entries the proxy cannot enforce were refused under strict (check_policy); under
     * lenient they are left out: narrower, never wider */
    for (size_t i = 0; i < n_allow && px->n_rules < SBX_EGRESS_MAX_RULES; i++) {
        const char *why = NULL;
        if (allow[i] && sbx_egress_rule_parse(allow[i], &px->rules[px->n_rules], &why))
            px->n_rules++;
    }
    px->ports.ports[px->ports.n_ports++] = 80;
    px->ports.ports[px->ports.n_ports++] = 443;
    for (size_t i = 0; i < px->n_rules; i++) {
        uint16_t p = px->rules[i].port;
        if (px->rules[i].kind != SBX_EGRESS_RULE_CIDR || p == 0 || p == 53)
            continue;
        bool have = false;
        for (size_t k = 0; k < px->ports.n_ports; k++)
            have = have || px->ports.ports[k] == p;
        if (!have && px->ports.n_ports < EG_MAX_PORTS + 2)
            px->ports.ports[px->ports.n_ports++] = p;
    }
    sbx_status st = SBX_OK;
    if (resolver && resolver[0]) {
        if (!parse_resolver(resolver, &px->resolver))
            st = sbx_error_set(err, SBX_E_CONFIG,
                               "egress_resolver '%s' is not an IPv4 address with an optional "
                               ":port (e.g. 192.0.2.53:53)",
                               resolver);
    } else if (!host_resolver(&px->resolver)) {
        st = sbx_error_set(err, SBX_E_PROVISION,
                           "the egress proxy has no resolver: /etc/resolv.conf names no IPv4 "
                           "nameserver; set egress_resolver in the provider's options");
    }
    if (st == SBX_OK) {
        px->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        px->dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (px->pidfd < 0 || px->dirfd < 0)
            st = sbx_error_set(err, SBX_E_PROVISION, "egress proxy: %s: %s",
                               px->pidfd < 0 ? "pidfd_open of the sandbox" : state_dir,
                               strerror(errno));
    }
    int fds[SBX_NETNS_MAX_FDS];
    size_t nfds = 0;
    if (st == SBX_OK)
        st = sbx_netns_call(pid, setup_in_ns, &px->ports, fds, SBX_NETNS_MAX_FDS, &nfds, err);
    if (st == SBX_OK && nfds != 1 + px->ports.n_ports) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        st = sbx_error_set(err, SBX_E_PROVISION, "egress proxy: %zu listeners, not %zu", nfds,
                           1 + px->ports.n_ports);
    }
    if (st == SBX_OK) {
        px->udp = fds[0];
        for (size_t i = 1; i < nfds; i++)
            px->lst[px->n_lst++] = fds[i];
    }
    int pp[2] = {-1, -1};
    if (st == SBX_OK && pipe2(pp, O_CLOEXEC) != 0)
        st = sbx_error_set(err, SBX_E_PROVISION, "egress proxy: pipe: %s", strerror(errno));
    long proxy_pid = -1;
    if (st == SBX_OK) {
        pid_t mid = fork();
        if (mid == 0) {
            /* its own session, and the grandchild of the caller: the caller's exit or a
             * terminal's hangup does not end it */
            setsid();
            pid_t g = fork();
            if (g == 0) {
                close(pp[0]);
                close(pp[1]);
                proxy_main(px);
                _exit(0);
            }
            long v = g;
            _exit(write(pp[1], &v, sizeof v) == (ssize_t)sizeof v && g > 0 ? 0 : 1);
        }
        close(pp[1]);
        long v = -1;
        if (mid > 0) {
            while (waitpid(mid, NULL, 0) < 0 && errno == EINTR) {
            }
            if (read(pp[0], &v, sizeof v) == (ssize_t)sizeof v)
                proxy_pid = v;
        }
        close(pp[0]);
        if (proxy_pid <= 1)
            st = sbx_error_set(err, SBX_E_PROVISION, "egress proxy: could not start: %s",
                               mid < 0 ? strerror(errno) : "its process ended");
    }
    if (st == SBX_OK) {
        char path[4200], tmp[4200], text[64];
        snprintf(path, sizeof path, "%s/egress.pid", state_dir);
        snprintf(tmp, sizeof tmp, "%s/egress.pid.tmp", state_dir);
        int tl = snprintf(text, sizeof text, "%ld %llu\n", proxy_pid,
                          sbx_proc_start_time(proxy_pid, NULL));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        bool ok = fd >= 0 && write(fd, text, (size_t)tl) == tl;
        if (fd >= 0)
            close(fd);
        if (!ok || rename(tmp, path) != 0) {
            kill((pid_t)proxy_pid, SIGKILL);
            waitpid((pid_t)proxy_pid, NULL, WNOHANG);
            unlink(tmp);
            st = sbx_error_set(err, SBX_E_PROVISION, "egress proxy: cannot write %s", path);
        }
    }
    if (px->pidfd >= 0)
        close(px->pidfd);
    if (px->dirfd >= 0)
        close(px->dirfd);
    if (px->udp >= 0)
        close(px->udp);
    for (size_t i = 0; i < px->n_lst; i++)
        close(px->lst[i]);
    free(px);
    return st;
}

static bool read_pid_file(const char *state_dir, long *pid, unsigned long long *start)
{
    char path[4200], buf[64];
    snprintf(path, sizeof path, "%s/egress.pid", state_dir);
    if (sbx_read_small(path, O_NOFOLLOW, buf, sizeof buf) <= 0)
        return false;
    return sscanf(buf, "%ld %llu", pid, start) == 2 && *pid > 1 && *pid <= (1L << 22);
}

bool sbx_egress_active(const char *state_dir)
{
    long pid = 0;
    unsigned long long start = 0;
    return read_pid_file(state_dir, &pid, &start);
}

void sbx_egress_stop(const char *state_dir)
{
    long pid = 0;
    unsigned long long start = 0;
    if (read_pid_file(state_dir, &pid, &start)) {
        int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (pidfd >= 0 && start != 0 && sbx_proc_start_time(pid, NULL) == start) {
            syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
            struct pollfd pf = {pidfd, POLLIN, 0};
            poll(&pf, 1, 2000);
            waitpid((pid_t)pid, NULL, WNOHANG); /* ours when we are its subreaper */
        }
        if (pidfd >= 0)
            close(pidfd);
    }
    static const char *const files[] = {"egress.pid", "egress.pid.tmp", "egress.refused",
                                        "egress.refused.tmp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", state_dir, files[i]);
        unlink(path);
    }
}
