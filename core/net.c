/* net.c - the loopback and plaintext rule (core/net.h). The URL is parsed by libcurl's own
 * parser (curl_url), the same one that later connects, and the host is tested with inet_pton,
 * so the check and the connection cannot disagree about which host is meant.
 * This file must not resolve names or open sockets.
 */
#include "core/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <curl/curl.h>

/* Longest host text tested: an IPv6 literal in brackets is at most 47 bytes; longer is not a
 * loopback literal. */
#define NET_HOST_MAX 64

bool sbx_net_host_is_loopback(const char *host, size_t len)
{
    char buf[NET_HOST_MAX];
    if (host == NULL || len == 0 || len >= sizeof(buf))
        return false;
    memcpy(buf, host, len);
    buf[len] = '\0';
    if (strcasecmp(buf, "localhost") == 0)
        return true;
    struct in_addr v4;
    if (inet_pton(AF_INET, buf, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    char *h = buf;
    if (len >= 2 && buf[0] == '[' && buf[len - 1] == ']') {
        buf[len - 1] = '\0';
        h = buf + 1;
    }
    struct in6_addr v6;
    return inet_pton(AF_INET6, h, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool sbx_net_addr_is_loopback(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return false;
}

/* True when the text itself begins with SCHEME "://", the scheme in lower case as libcurl
 * gives it. libcurl's parser also takes "https:/host", "https:host", "HTTPS://" and
 * backslashes for slashes, which the text's later readers (a path appended to it, a prefix
 * test such as ec2_ssm's, a log, a person) would not read the same way: only the plain form
 * is accepted. */
static bool written_as_parsed(const char *url, const char *scheme)
{
    size_t n = strlen(scheme);
    return strncmp(url, scheme, n) == 0 && strncmp(url + n, "://", 3) == 0;
}

sbx_net_url sbx_net_url_transport(const char *url)
{
    if (url == NULL)
        return SBX_NET_URL_INVALID;
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL;
    sbx_net_url kind = SBX_NET_URL_INVALID;
    if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host[0] != '\0' &&
        written_as_parsed(url, scheme)) {
        if (strcmp(scheme, "https") == 0)
            kind = SBX_NET_URL_TLS;
        else if (strcmp(scheme, "http") != 0)
            kind = SBX_NET_URL_OTHER_SCHEME;
        else if (sbx_net_host_is_loopback(host, strlen(host)))
            kind = SBX_NET_URL_PLAIN_LOOPBACK;
        else
            kind = SBX_NET_URL_PLAIN_REMOTE;
    }
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return kind;
}
