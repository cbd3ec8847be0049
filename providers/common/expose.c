/* expose.c - see expose.h. */
#include "expose.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/net.h"
#include "netns.h"
#include "providers/common/proc.h"

/* Connections one relay carries at once (more are accepted and closed at once). */
#define RELAY_MAX_CONNS 64
/* Bytes buffered per direction of a connection (>= SBX_EXPOSE_HEAD_MAX). */
#define RELAY_BUF 16384
/* How long a client has to send its request head (token check), and an upstream connect. */
#define RELAY_HEAD_MS 10000
#define RELAY_CONNECT_MS 10000
/* How long sbx_expose_port waits for a new relay to report that it joined the namespace. */
#define RELAY_START_MS 10000
/* Unprivileged ids a relay started by root runs as once its sockets are made. */
#define RELAY_NOBODY 65534

/* ---- the token check (pure) ------------------------------------------------------------- */

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static bool name_is(const char *p, size_t n, const char *want)
{
    size_t w = strlen(want);
    if (n != w)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)p[i]) != want[i])
            return false;
    return true;
}

/* Constant time over the token's length (which is public). */
static bool token_equal(const char *p, size_t n, const char *token)
{
    size_t t = strlen(token);
    if (n != t || t == 0)
        return false;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(p[i] ^ token[i]);
    return d == 0;
}

static void trim(const char **p, size_t *n)
{
    while (*n > 0 && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*n)--;
    }
    while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

/* A Cookie header's value: "a=b; sbx_expose_token=T; c=d". */
static bool cookie_has(const char *v, size_t n, const char *token)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && v[j] != ';')
            j++;
        const char *pair = v + i;
        size_t pn = j - i;
        trim(&pair, &pn);
        const char *eq = memchr(pair, '=', pn);
        if (eq != NULL) {
            const char *k = pair;
            size_t kn = (size_t)(eq - pair);
            const char *val = eq + 1;
            size_t vn = pn - kn - 1;
            trim(&k, &kn);
            trim(&val, &vn);
            if (kn == 16 && memcmp(k, "sbx_expose_token", 16) == 0 && token_equal(val, vn, token))
                return true;
        }
        i = j + 1;
    }
    return false;
}

sbx_expose_head sbx_expose_check_head(const char *buf, size_t len, const char *token)
{
    if (len > SBX_EXPOSE_HEAD_MAX)
        len = SBX_EXPOSE_HEAD_MAX;
    size_t end = 0;
    bool found = false;
    for (size_t i = 0; i + 4 <= len; i++)
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
            end = i + 2; /* through the last header line's CRLF */
            found = true;
            break;
        }
    if (!found)
        return len >= SBX_EXPOSE_HEAD_MAX ? SBX_EXPOSE_HEAD_TOO_LARGE : SBX_EXPOSE_HEAD_MORE;
    /* skip the request line */
    const char *nl = memchr(buf, '\n', end);
    size_t i = nl != NULL ? (size_t)(nl - buf) + 1 : end;
    bool ok = false;
    while (i < end) {
        const char *line = buf + i;
        const char *e = memchr(line, '\n', end - i);
        size_t ln = e != NULL ? (size_t)(e - line) : end - i;
        i += ln + 1;
        if (ln > 0 && line[ln - 1] == '\r')
            ln--;
        const char *colon = memchr(line, ':', ln);
        if (colon == NULL)
            continue;
        size_t nn = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vn = ln - nn - 1;
        trim(&v, &vn);
        if (name_is(line, nn, "x-sbx-expose-token"))
            ok |= token_equal(v, vn, token);
        else if (name_is(line, nn, "cookie"))
            ok |= cookie_has(v, vn, token);
    }
    return ok ? SBX_EXPOSE_HEAD_OK : SBX_EXPOSE_HEAD_DENIED;
}

/* ---- configuration ---------------------------------------------------------------------- */

typedef union addr_any {
    struct sockaddr sa;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} addr_any;

static bool parse_addr(const char *s, addr_any *a, socklen_t *len)
{
    memset(a, 0, sizeof *a);
    if (inet_pton(AF_INET, s, &a->in4.sin_addr) == 1) {
        a->in4.sin_family = AF_INET;
        *len = sizeof a->in4;
        return true;
    }
    if (inet_pton(AF_INET6, s, &a->in6.sin6_addr) == 1) {
        a->in6.sin6_family = AF_INET6;
        *len = sizeof a->in6;
        return true;
    }
    return false;
}

sbx_status sbx_expose_config(const char *address, const char *host, bool require_token,
                             sbx_expose_cfg *cfg, sbx_error *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (address == NULL || !address[0])
        address = "127.0.0.1";
    addr_any a;
    socklen_t len;
    if (strlen(address) >= sizeof cfg->address || !parse_addr(address, &a, &len))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "expose_address '%.80s' is not a numeric IPv4 or IPv6 address; give "
                             "one this host has (default 127.0.0.1)",
                             address);
    snprintf(cfg->address, sizeof cfg->address, "%s", address);
    cfg->token = require_token || !sbx_net_addr_is_loopback(&a.sa);
    bool unspecified = a.sa.sa_family == AF_INET ? a.in4.sin_addr.s_addr == htonl(INADDR_ANY)
                                                 : IN6_IS_ADDR_UNSPECIFIED(&a.in6.sin6_addr);
    if (host == NULL || !host[0]) {
        if (unspecified)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "expose_address %s listens on every address, so the URL needs a "
                                 "name: set expose_host to this host's name or address",
                                 address);
        if (a.sa.sa_family == AF_INET6)
            snprintf(cfg->host, sizeof cfg->host, "[%s]", address);
        else
            snprintf(cfg->host, sizeof cfg->host, "%s", address);
        return SBX_OK;
    }
    size_t n = strlen(host);
    bool ok = n < sizeof cfg->host;
    for (size_t i = 0; ok && i < n; i++) {
        unsigned char c = (unsigned char)host[i];
        ok = c > ' ' && c < 0x7f && c != '/' && c != '@' && c != '?' && c != '#' && c != '\\';
    }
    if (!ok)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "expose_host '%.80s' is not a host name or address (1-255 printable "
                             "characters without '/', '@', '?', '#', '\\' or spaces)",
                             host);
    snprintf(cfg->host, sizeof cfg->host, "%s", host);
    return SBX_OK;
}

/* ---- records ---------------------------------------------------------------------------- */

typedef struct record {
    long pid;
    unsigned long long start;
    char url[384];
    char token[SBX_EXPOSE_TOKEN_LEN + 1];
} record;

/* A port's record: "pid start\nurl\ntoken\n" (token line empty when none). */
static bool record_read(const char *dir, unsigned port, record *r)
{
    char path[4200], buf[1024];
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/%u", dir, port);
    if (sbx_read_small(path, O_NOFOLLOW, buf, sizeof buf) <= 0)
        return false;
    char url[sizeof r->url] = "", token[sizeof r->token] = "";
    int used = 0;
    if (sscanf(buf, "%ld %llu\n%n", &r->pid, &r->start, &used) != 2 || r->pid <= 1)
        return false;
    char *line = buf + used;
    char *e = strchr(line, '\n');
    if (e == NULL || (size_t)(e - line) >= sizeof url)
        return false;
    memcpy(url, line, (size_t)(e - line));
    url[e - line] = '\0';
    line = e + 1;
    e = strchr(line, '\n');
    if (e == NULL || (size_t)(e - line) >= sizeof token)
        return false;
    memcpy(token, line, (size_t)(e - line));
    token[e - line] = '\0';
    /* both bounded above: each fits its field with its terminator */
    memcpy(r->url, url, sizeof r->url);
    memcpy(r->token, token, sizeof r->token);
    return r->url[0] != '\0';
}

static bool record_alive(const record *r)
{
    char state = '?';
    unsigned long long s = sbx_proc_start_time(r->pid, &state);
    return s != 0 && s == r->start && state != 'Z' && state != 'X';
}

/* Kills a recorded relay (pidfd, after the start-time check: never a reused pid) and reaps it
 * when it is the caller's child (a subreaper's). */
static void record_kill(const record *r)
{
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)r->pid, 0);
    if (pidfd < 0)
        return;
    if (sbx_proc_start_time(r->pid, NULL) == r->start) {
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        struct pollfd pf = {pidfd, POLLIN, 0};
        poll(&pf, 1, 1000);
        waitpid((pid_t)r->pid, NULL, WNOHANG);
    }
    close(pidfd);
}

/* Calls fn for each port recorded under dir. */
/* False when dir cannot be opened (errno says why: ENOENT when nothing was ever exposed). */
static bool each_record(const char *dir, void (*fn)(const char *dir, unsigned port, void *arg),
                        void *arg)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return false;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end = NULL;
        unsigned long p = strtoul(de->d_name, &end, 10);
        if (de->d_name[0] < '1' || de->d_name[0] > '9' || *end != '\0' || p > 65535)
            continue;
        fn(dir, (unsigned)p, arg);
    }
    closedir(d);
    return true;
}

static void remove_record(const char *dir, unsigned port)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%u", dir, port);
    unlink(path);
}

static void count_one(const char *dir, unsigned port, void *arg)
{
    record r;
    if (record_read(dir, port, &r) && record_alive(&r))
        (*(size_t *)arg)++;
    else
        remove_record(dir, port);
}

size_t sbx_expose_count(const char *dir)
{
    size_t n = 0;
    each_record(dir, count_one, &n);
    return n;
}

static void kill_one(const char *dir, unsigned port, void *arg)
{
    (void)arg;
    record r;
    if (record_read(dir, port, &r))
        record_kill(&r);
    remove_record(dir, port);
}

void sbx_expose_close_all(const char *dir)
{
    if (!each_record(dir, kill_one, NULL) && errno == ENOENT)
        return; /* the sandbox never exposed a port: nothing to remove */
    char path[4200];
    snprintf(path, sizeof path, "%s/.new", dir);
    unlink(path);
    rmdir(dir);
}

/* ---- the relay (a forked child of a possibly threaded process: no malloc, no stdio) ------- */

typedef struct relay_conn {
    int c, u;  /* client, upstream (-1: none) */
    int state; /* 0 free, 1 reading the head, 2 connecting, 3 copying */
    int64_t deadline;
    char *cbuf, *ubuf; /* client->upstream, upstream->client */
    size_t clen, coff, ulen, uoff;
    bool c_eof, u_eof;
} relay_conn;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_close(relay_conn *k)
{
    if (k->c >= 0)
        close(k->c);
    if (k->u >= 0)
        close(k->u);
    k->c = k->u = -1;
    k->state = 0;
}

static void conn_connect(relay_conn *k, uint16_t port)
{
    k->u = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (k->u < 0 ||
        (connect(k->u, (struct sockaddr *)&sin, sizeof sin) != 0 && errno != EINPROGRESS)) {
        conn_close(k);
        return;
    }
    k->state = 2;
    k->deadline = now_ms() + RELAY_CONNECT_MS;
}

#define UNAUTHORIZED_BODY "sbx: this port needs its token (header X-Sbx-Expose-Token or cookie)\n"
_Static_assert(sizeof UNAUTHORIZED_BODY - 1 == 69, "Content-Length of the 401 below");
static const char unauthorized[] =
    "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 69\r\n"
    "Connection: close\r\n\r\n" UNAUTHORIZED_BODY;

/* Moves bytes from fd into buf (when empty); false when the connection must end. */
static bool pump_in(int fd, char *buf, size_t *len, size_t *off, bool *eof, int other,
                    size_t other_pending)
{
    ssize_t n = recv(fd, buf, RELAY_BUF, MSG_DONTWAIT);
    if (n > 0) {
        *len = (size_t)n;
        *off = 0;
        return true;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n < 0)
        return false;
    *eof = true;
    if (other_pending == 0)
        shutdown(other, SHUT_WR);
    return true;
}

static bool pump_out(int fd, const char *buf, size_t *len, size_t *off, bool src_eof)
{
    ssize_t n = send(fd, buf + *off, *len - *off, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR;
    *off += (size_t)n;
    if (*off == *len) {
        *len = *off = 0;
        if (src_eof)
            shutdown(fd, SHUT_WR);
    }
    return true;
}

static void relay_accept(int lfd, relay_conn *conns, char *mem, const char *token, uint16_t port)
{
    for (int burst = 0; burst < 16; burst++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        relay_conn *k = NULL;
        for (int i = 0; i < RELAY_MAX_CONNS && k == NULL; i++)
            if (conns[i].state == 0)
                k = &conns[i];
        if (k == NULL) {
            close(fd); /* full: refuse at once rather than queue */
            continue;
        }
        size_t idx = (size_t)(k - conns);
        *k = (relay_conn){.c = fd,
                          .u = -1,
                          .cbuf = mem + idx * 2 * RELAY_BUF,
                          .ubuf = mem + idx * 2 * RELAY_BUF + RELAY_BUF};
        if (token[0]) {
            k->state = 1;
            k->deadline = now_ms() + RELAY_HEAD_MS;
        } else {
            conn_connect(k, port);
        }
    }
}

/* One connection's events. */
static void relay_step(relay_conn *k, short cev, short uev, const char *token, uint16_t port)
{
    if (k->state == 1) {
        if (!(cev & (POLLIN | POLLHUP | POLLERR)))
            return;
        ssize_t n = recv(k->c, k->cbuf + k->clen, SBX_EXPOSE_HEAD_MAX - k->clen, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {
            conn_close(k);
            return;
        }
        k->clen += (size_t)n;
        sbx_expose_head h = sbx_expose_check_head(k->cbuf, k->clen, token);
        if (h == SBX_EXPOSE_HEAD_MORE)
            return;
        if (h != SBX_EXPOSE_HEAD_OK) {
            (void)send(k->c, unauthorized, sizeof unauthorized - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
            conn_close(k);
            return;
        }
        k->coff = 0; /* the head goes upstream once connected */
        conn_connect(k, port);
        return;
    }
    if (k->state == 2) {
        if (!(uev & (POLLOUT | POLLHUP | POLLERR)))
            return;
        int e = 0;
        socklen_t el = sizeof e;
        if (getsockopt(k->u, SOL_SOCKET, SO_ERROR, &e, &el) != 0 || e != 0) {
            conn_close(k);
            return;
        }
        k->state = 3;
        return;
    }
    if ((cev | uev) & POLLERR) {
        conn_close(k);
        return;
    }
    bool ok = true;
    if (ok && (cev & (POLLIN | POLLHUP)) && k->clen == 0 && !k->c_eof)
        ok = pump_in(k->c, k->cbuf, &k->clen, &k->coff, &k->c_eof, k->u, 0);
    if (ok && (uev & (POLLIN | POLLHUP)) && k->ulen == 0 && !k->u_eof)
        ok = pump_in(k->u, k->ubuf, &k->ulen, &k->uoff, &k->u_eof, k->c, 0);
    if (ok && (uev & (POLLOUT | POLLHUP)) && k->clen > 0)
        ok = pump_out(k->u, k->cbuf, &k->clen, &k->coff, k->c_eof);
    if (ok && (cev & (POLLOUT | POLLHUP)) && k->ulen > 0)
        ok = pump_out(k->c, k->ubuf, &k->ulen, &k->uoff, k->u_eof);
    if (!ok || (k->c_eof && k->u_eof && k->clen == 0 && k->ulen == 0))
        conn_close(k);
}

static __attribute__((noreturn)) void relay_loop(int lfd, int pidfd, const char *token,
                                                 uint16_t port)
{
    static relay_conn conns[RELAY_MAX_CONNS];
    char *mem = mmap(NULL, (size_t)RELAY_MAX_CONNS * 2 * RELAY_BUF, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        _exit(1);
    for (int i = 0; i < RELAY_MAX_CONNS; i++)
        conns[i] = (relay_conn){.c = -1, .u = -1};
    struct pollfd pf[2 + 2 * RELAY_MAX_CONNS];
    for (;;) {
        pf[0] = (struct pollfd){lfd, POLLIN, 0};
        pf[1] = (struct pollfd){pidfd, POLLIN, 0};
        /* the nearest connection deadline; none: sleep until an event (an idle relay woke
         * every second) */
        int64_t now = now_ms(), wait = -1;
        for (int i = 0; i < RELAY_MAX_CONNS; i++) {
            relay_conn *k = &conns[i];
            short ce = 0, ue = 0;
            if (k->state == 1) {
                ce = POLLIN;
            } else if (k->state == 2) {
                ue = POLLOUT;
            } else if (k->state == 3) {
                ce =
                    (short)((k->clen == 0 && !k->c_eof ? POLLIN : 0) | (k->ulen > 0 ? POLLOUT : 0));
                ue =
                    (short)((k->ulen == 0 && !k->u_eof ? POLLIN : 0) | (k->clen > 0 ? POLLOUT : 0));
            }
            if ((k->state == 1 || k->state == 2) && (wait < 0 || k->deadline - now < wait))
                wait = k->deadline - now > 0 ? k->deadline - now : 0;
            pf[2 + 2 * i] = (struct pollfd){ce ? k->c : -1, ce, 0};
            pf[3 + 2 * i] = (struct pollfd){ue ? k->u : -1, ue, 0};
        }
        int n = poll(pf, 2 + 2 * RELAY_MAX_CONNS, (int)wait);
        if (n < 0 && errno != EINTR)
            _exit(1);
        if (pf[1].revents)
            _exit(0); /* the sandbox's init is gone: so is its network */
        if (pf[0].revents & (POLLERR | POLLNVAL))
            _exit(1);
        now = now_ms();
        for (int i = 0; n > 0 && i < RELAY_MAX_CONNS; i++)
            if (conns[i].state != 0)
                relay_step(&conns[i], pf[2 + 2 * i].revents, pf[3 + 2 * i].revents, token, port);
        for (int i = 0; i < RELAY_MAX_CONNS; i++)
            if ((conns[i].state == 1 || conns[i].state == 2) && now >= conns[i].deadline)
                conn_close(&conns[i]);
        if (pf[0].revents & POLLIN)
            relay_accept(lfd, conns, mem, token, port);
    }
}

/* Closes every descriptor but keep[0..n) (sorted ascending) and 0-2. */
static void close_others(const int *keep, int n)
{
    int from = 3;
    for (int i = 0; i <= n; i++) {
        int to = i < n ? keep[i] - 1 : -1; /* -1: to the end */
        if (to != -1 && to < from) {
            from = keep[i] + 1;
            continue;
        }
        if (syscall(SYS_close_range, (unsigned)from, to == -1 ? ~0u : (unsigned)to, 0) != 0) {
            int last = to == -1 ? 65536 : to;
            for (int fd = from; fd <= last; fd++)
                close(fd);
        }
        if (i < n)
            from = keep[i] + 1;
    }
}

static void sort3(int *v)
{
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (v[j] < v[i]) {
                int t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
}

/* What a new relay tells sbx_expose_port (one pipe write, below PIPE_BUF). */
typedef struct relay_report {
    long pid;
    sbx_status status;
    char message[256];
} relay_report;

/* The grandchild: becomes the relay. Reports {pid, errno} on report, then serves. */
static __attribute__((noreturn)) void relay_main(int lfd, int pidfd, int report, pid_t target,
                                                 const char *token, uint16_t port)
{
    int keep[3] = {lfd, pidfd, report};
    sort3(keep);
    close_others(keep, 3);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
    prctl(PR_SET_NAME, "sbx-expose", 0, 0, 0);
    relay_report msg = {.pid = (long)getpid()};
    sbx_error e;
    memset(&e, 0, sizeof e);
    sbx_status st = sbx_netns_enter(target, &e);
    if (st != SBX_OK) {
        msg.status = st;
        memcpy(msg.message, e.message, sizeof msg.message - 1);
    } else if (geteuid() == 0 && (setgroups(0, NULL) != 0 ||
                                  setresgid(RELAY_NOBODY, RELAY_NOBODY, RELAY_NOBODY) != 0 ||
                                  setresuid(RELAY_NOBODY, RELAY_NOBODY, RELAY_NOBODY) != 0)) {
        msg.status = SBX_E_PROVISION;
        memcpy(msg.message, "cannot drop to uid 65534", 25);
    }
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ssize_t w = write(report, &msg, sizeof msg);
    close(report);
    if (msg.status != SBX_OK || w != (ssize_t)sizeof msg)
        _exit(1);
    relay_loop(lfd, pidfd, token, port);
}

/* ---- sbx_expose_port -------------------------------------------------------------------- */

static sbx_status give(const record *r, char **url, char **token, sbx_error *err)
{
    *url = strdup(r->url);
    *token = r->token[0] ? strdup(r->token) : NULL;
    if (*url == NULL || (r->token[0] && *token == NULL)) {
        free(*url);
        free(*token);
        *url = *token = NULL;
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "out of memory");
    }
    return SBX_OK;
}

static sbx_status new_token(char out[SBX_EXPOSE_TOKEN_LEN + 1], sbx_error *err)
{
    unsigned char raw[SBX_EXPOSE_TOKEN_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return sbx_error_set(err, SBX_E_INTERNAL, "expose: getrandom: %s", strerror(errno));
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[SBX_EXPOSE_TOKEN_LEN] = '\0';
    return SBX_OK;
}

static sbx_status make_listener(const sbx_expose_cfg *cfg, int *fd, unsigned *bound, sbx_error *err)
{
    addr_any a;
    socklen_t len;
    if (!parse_addr(cfg->address, &a, &len))
        return sbx_error_set(err, SBX_E_CONFIG, "expose_address '%s' is not numeric", cfg->address);
    *fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (*fd < 0 || setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(*fd, &a.sa, len) != 0 || listen(*fd, 128) != 0 || getsockname(*fd, &a.sa, &len) != 0) {
        int e = errno;
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        return sbx_error_set(err, SBX_E_PROVISION,
                             "expose: cannot listen on %s: %s; set expose_address to an address "
                             "of this host",
                             cfg->address, strerror(e));
    }
    *bound = ntohs(a.sa.sa_family == AF_INET ? a.in4.sin_port : a.in6.sin6_port);
    return SBX_OK;
}

/* Forks the relay (double fork, setsid) and reads its report: its pid, or why it failed. */
static sbx_status start_relay(int lfd, pid_t target, const char *token, uint16_t port, long *pid,
                              sbx_error *err)
{
    int pidfd = (int)syscall(SYS_pidfd_open, target, 0);
    if (pidfd < 0)
        return sbx_error_set(err, errno == ESRCH ? SBX_E_GONE : SBX_E_PROVISION,
                             "expose: the sandbox's init process %ld: %s", (long)target,
                             strerror(errno));
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        close(pidfd);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "expose: pipe: %s", strerror(errno));
    }
    pid_t c = fork();
    if (c == 0) {
        close(p[0]);
        setsid();
        pid_t g = fork();
        if (g == 0)
            relay_main(lfd, pidfd, p[1], target, token, port);
        _exit(g < 0 ? 1 : 0);
    }
    int fe = errno;
    close(p[1]);
    close(pidfd);
    if (c < 0) {
        close(p[0]);
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "expose: fork: %s", strerror(fe));
    }
    while (waitpid(c, NULL, 0) < 0 && errno == EINTR) {
    }
    relay_report msg;
    memset(&msg, 0, sizeof msg);
    size_t got = 0;
    int64_t deadline = now_ms() + RELAY_START_MS;
    while (got < sizeof msg) {
        struct pollfd pf = {p[0], POLLIN, 0};
        int64_t left = deadline - now_ms();
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
            break;
        ssize_t n = read(p[0], (char *)&msg + got, sizeof msg - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    if (got != sizeof msg)
        return sbx_error_set(err, SBX_E_PROVISION,
                             "expose: the relay for port %u ended before it was ready",
                             (unsigned)port);
    msg.message[sizeof msg.message - 1] = '\0';
    if (msg.status != SBX_OK)
        return sbx_error_set(err, msg.status == SBX_E_GONE ? SBX_E_GONE : SBX_E_PROVISION,
                             "expose: the relay for port %u could not start in the sandbox's "
                             "network namespace (process %ld): %s",
                             (unsigned)port, (long)target, msg.message);
    *pid = msg.pid;
    return SBX_OK;
}

sbx_status sbx_expose_port(const sbx_expose_cfg *cfg, const char *dir, pid_t target, uint32_t port,
                           char **url, char **token, sbx_error *err)
{
    *url = *token = NULL;
    if (port < 1 || port > 65535)
        return sbx_error_set(err, SBX_E_INVALID_ARGUMENT,
                             "expose.port %u is not a TCP port (1-65535)", port);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_PROVISION, "expose: cannot make %s: %s", dir,
                             strerror(errno));
    record r;
    if (record_read(dir, port, &r) && record_alive(&r))
        return give(&r, url, token, err);
    remove_record(dir, port);
    if (sbx_expose_count(dir) >= SBX_EXPOSE_MAX_PORTS)
        return sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED,
                             "expose: this sandbox already has %d exposed ports, the most it may "
                             "have; port %u is not exposed (ports close when the session's "
                             "sandbox is destroyed)",
                             SBX_EXPOSE_MAX_PORTS, port);
    memset(&r, 0, sizeof r);
    sbx_status st = cfg->token ? new_token(r.token, err) : SBX_OK;
    int lfd = -1;
    unsigned bound = 0;
    if (st == SBX_OK)
        st = make_listener(cfg, &lfd, &bound, err);
    if (st != SBX_OK)
        return st;
    snprintf(r.url, sizeof r.url, "http://%s:%u/", cfg->host, bound);
    st = start_relay(lfd, target, r.token, (uint16_t)port, &r.pid, err);
    close(lfd);
    if (st != SBX_OK)
        return st;
    r.start = sbx_proc_start_time(r.pid, NULL);
    char path[4200], tmp[4200], text[1024];
    snprintf(path, sizeof path, "%s/%u", dir, port);
    snprintf(tmp, sizeof tmp, "%s/.new", dir);
    int len = snprintf(text, sizeof text, "%ld %llu\n%s\n%s\n", r.pid, r.start, r.url, r.token);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && len > 0 && write(fd, text, (size_t)len) == len;
    if (fd >= 0)
        ok &= close(fd) == 0;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        record_kill(&r);
        return sbx_error_set(err, SBX_E_PROVISION, "expose: cannot record port %u in %s: %s", port,
                             dir, strerror(e));
    }
    return give(&r, url, token, err);
}
