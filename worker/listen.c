/* listen.c - the worker's listening sockets: the gRPC listener (server.c) and the metrics one
 * (metrics.c) are opened here, with one parser of "host:port" / "[v6]:port", one bind loop and
 * one read of the bound port, so the two listeners cannot come to differ in what they accept. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/net.h"
#include "worker/worker_internal.h"

/* Splits "host:port" or "[v6]:port" into host and port; false when addr is neither. */
static bool split_host_port(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *h = addr, *colon;
    size_t hlen;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (end == NULL || end[1] != ':')
            return false;
        h = addr + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (colon == NULL)
            return false;
        hlen = (size_t)(colon - addr);
    }
    if (hlen == 0 || hlen >= hcap || colon[1] == '\0' || strlen(colon + 1) >= pcap)
        return false;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return true;
}

/* The port a bound socket got (the one asked for, or the kernel's pick for port 0); -1 with
 * errno set when it cannot be read. */
static int bound_port(int fd)
{
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } a;
    memset(&a, 0, sizeof a);
    socklen_t len = sizeof a;
    if (getsockname(fd, &a.sa, &len) != 0)
        return -1;
    if (a.sa.sa_family == AF_INET6)
        return ntohs(a.in6.sin6_port);
    if (a.sa.sa_family == AF_INET)
        return ntohs(a.in.sin_port);
    errno = EAFNOSUPPORT;
    return -1;
}

int worker_listen(const char *option, const char *addr, const char *example, int backlog,
                  int sock_flags, bool *loopback, int *port, sbx_error *err)
{
    char host[256], serv[16];
    if (!split_host_port(addr, host, sizeof host, serv, sizeof serv)) {
        sbx_error_set(err, SBX_E_CONFIG, "%s '%s' is not host:port (e.g. %s)", option, addr,
                      example);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host, serv, &hints, &res);
    if (gai != 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s '%s': %s", option, addr, gai_strerror(gai));
        return -1;
    }
    int fd = -1, last = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | sock_flags, 0);
        if (fd < 0) {
            last = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
            if (loopback != NULL)
                *loopback = sbx_net_addr_is_loopback(ai->ai_addr);
            break;
        }
        last = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s '%s': cannot listen: %s (is the port in use?)", option,
                      addr, strerror(last));
        return -1;
    }
    int p = bound_port(fd);
    if (p < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s '%s': cannot read the bound port: %s", option, addr,
                      strerror(errno));
        close(fd);
        return -1;
    }
    *port = p;
    return fd;
}
