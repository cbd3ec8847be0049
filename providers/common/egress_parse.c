/* egress_parse.c - the egress proxy's pure parsers and matchers (see egress_parse.h). */
#include "providers/common/egress_parse.h"

#include <string.h>

static uint16_t rd16(const uint8_t *p)
{
    return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static uint32_t rd24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool sbx_egress_name_norm(const char *s, size_t n, char *out)
{
    if (n > 0 && s[n - 1] == '.')
        n--;
    if (n == 0 || n > SBX_EGRESS_NAME_MAX)
        return false;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if (name_char(c)) {
            if (++label > 63)
                return false;
        } else {
            return false;
        }
        out[i] = c;
    }
    if (label == 0)
        return false;
    out[n] = '\0';
    return true;
}

/* Whether name (normalised) is all digits and dots: an IPv4 literal, not a name. */
static bool name_is_numeric(const char *name)
{
    for (const char *p = name; *p; p++) {
        if (!(*p == '.' || (*p >= '0' && *p <= '9')))
            return false;
    }
    return true;
}

/* ---- TLS ClientHello ---- */

sbx_egress_parse sbx_egress_tls_sni(const uint8_t *buf, size_t len, char *name)
{
    name[0] = '\0';
    if (len > SBX_EGRESS_HEAD_MAX)
        len = SBX_EGRESS_HEAD_MAX;
    if (len < 5)
        return len > 0 && buf[0] != 22 ? SBX_EGRESS_BAD : SBX_EGRESS_NEED_MORE;
    if (buf[0] != 22 || buf[1] != 3)
        return SBX_EGRESS_BAD;
    size_t rec = rd16(buf + 3);
    if (rec < 4 || rec > 16384)
        return SBX_EGRESS_BAD;
    if (len < 5 + rec)
        return 5 + rec > SBX_EGRESS_HEAD_MAX ? SBX_EGRESS_BAD : SBX_EGRESS_NEED_MORE;
    const uint8_t *p = buf + 5;
    if (p[0] != 1) /* client_hello */
        return SBX_EGRESS_BAD;
    size_t hs = rd24(p + 1);
    if (hs + 4 > rec) /* the whole message in the first record */
        return SBX_EGRESS_BAD;
    const uint8_t *end = p + 4 + hs;
    p += 4;
    /* version(2) random(32) */
    if (end - p < 34)
        return SBX_EGRESS_BAD;
    p += 34;
    /* session_id<0..32> */
    if (end - p < 1 || p[0] > 32 || end - p < 1 + p[0])
        return SBX_EGRESS_BAD;
    p += 1 + p[0];
    /* cipher_suites<2..2^16-2> */
    if (end - p < 2)
        return SBX_EGRESS_BAD;
    size_t cs = rd16(p);
    if (cs < 2 || (size_t)(end - p) < 2 + cs)
        return SBX_EGRESS_BAD;
    p += 2 + cs;
    /* compression_methods<1..2^8-1> */
    if (end - p < 1 || p[0] < 1 || end - p < 1 + p[0])
        return SBX_EGRESS_BAD;
    p += 1 + p[0];
    /* extensions<8..2^16-1> */
    if (end - p < 2)
        return SBX_EGRESS_BAD;
    size_t ext = rd16(p);
    p += 2;
    if ((size_t)(end - p) != ext)
        return SBX_EGRESS_BAD;
    bool found = false;
    while (p < end) {
        if (end - p < 4)
            return SBX_EGRESS_BAD;
        uint16_t type = rd16(p);
        size_t elen = rd16(p + 2);
        p += 4;
        if ((size_t)(end - p) < elen)
            return SBX_EGRESS_BAD;
        if (type == 0) { /* server_name */
            if (found || elen < 2)
                return SBX_EGRESS_BAD;
            const uint8_t *q = p;
            const uint8_t *qend = p + elen;
            size_t list = rd16(q);
            q += 2;
            if ((size_t)(qend - q) != list)
                return SBX_EGRESS_BAD;
            while (q < qend) {
                if (qend - q < 3)
                    return SBX_EGRESS_BAD;
                uint8_t nt = q[0];
                size_t nl = rd16(q + 1);
                q += 3;
                if ((size_t)(qend - q) < nl)
                    return SBX_EGRESS_BAD;
                if (nt == 0) {
                    if (found || !sbx_egress_name_norm((const char *)q, nl, name) ||
                        name_is_numeric(name)) {
                        name[0] = '\0';
                        return SBX_EGRESS_BAD;
                    }
                    found = true;
                }
                q += nl;
            }
            if (!found)
                return SBX_EGRESS_BAD;
        }
        p += elen;
    }
    return found ? SBX_EGRESS_OK : SBX_EGRESS_BAD;
}

/* ---- HTTP request head ---- */

static bool ieq(const uint8_t *a, size_t n, const char *b)
{
    if (strlen(b) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = a[i];
        if (c >= 'A' && c <= 'Z')
            c = (uint8_t)(c - 'A' + 'a');
        if (c != (uint8_t)b[i])
            return false;
    }
    return true;
}

/* Splits "host[:port]" (no brackets: IPv6 literals are refused) into a normalised name and a
 * port. */
static bool host_port(const uint8_t *s, size_t n, char *name, uint16_t *port)
{
    *port = 0;
    size_t hn = n;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ':') {
            hn = i;
            break;
        }
    }
    if (hn < n) {
        size_t digits = n - hn - 1;
        if (digits == 0 || digits > 5)
            return false;
        uint32_t v = 0;
        for (size_t i = hn + 1; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                return false;
            v = v * 10 + (uint32_t)(s[i] - '0');
        }
        if (v == 0 || v > 65535)
            return false;
        *port = (uint16_t)v;
    }
    return sbx_egress_name_norm((const char *)s, hn, name);
}

/* Long because it is one bounded parser of an HTTP request head (request line, absolute-form
 * target, then the Host header), each stage refusing its own malformations in order. */
sbx_egress_parse sbx_egress_http_host(const uint8_t *buf, size_t len, char *name, uint16_t *port)
{
    name[0] = '\0';
    *port = 0;
    if (len > SBX_EGRESS_HEAD_MAX)
        len = SBX_EGRESS_HEAD_MAX;
    /* the head ends at the first empty line */
    size_t head = 0;
    for (size_t i = 0; i + 3 < len; i++) {
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            head = i + 2; /* through the last header's CRLF */
            break;
        }
    }
    /* Every byte before the end must be a token, space or CRLF: refuse binary early. */
    size_t scan = head ? head : len;
    for (size_t i = 0; i < scan; i++) {
        uint8_t c = buf[i];
        if (c < 0x20 && c != '\r' && c != '\n' && c != '\t')
            return SBX_EGRESS_BAD;
        if (c >= 0x7f)
            return SBX_EGRESS_BAD;
    }
    if (!head)
        return len >= SBX_EGRESS_HEAD_MAX ? SBX_EGRESS_BAD : SBX_EGRESS_NEED_MORE;

    /* request line: method SP target SP HTTP/1.x */
    size_t eol = 0;
    while (eol + 1 < head && !(buf[eol] == '\r' && buf[eol + 1] == '\n'))
        eol++;
    size_t sp1 = 0;
    while (sp1 < eol && buf[sp1] != ' ')
        sp1++;
    if (sp1 == 0 || sp1 >= eol)
        return SBX_EGRESS_BAD;
    for (size_t i = 0; i < sp1; i++) {
        if (buf[i] < 'A' || buf[i] > 'Z')
            return SBX_EGRESS_BAD;
    }
    size_t t0 = sp1 + 1;
    size_t sp2 = t0;
    while (sp2 < eol && buf[sp2] != ' ')
        sp2++;
    if (sp2 == t0 || sp2 >= eol || eol - (sp2 + 1) != 8 ||
        memcmp(buf + sp2 + 1, "HTTP/1.", 7) != 0 || (buf[eol - 1] != '0' && buf[eol - 1] != '1'))
        return SBX_EGRESS_BAD;
    if (sp1 == 7 && memcmp(buf, "CONNECT", 7) == 0)
        return SBX_EGRESS_BAD;

    bool have = false;
    size_t i = eol + 2;
    while (i < head) {
        size_t e = i;
        while (e + 1 < head + 2 && !(buf[e] == '\r' && buf[e + 1] == '\n'))
            e++;
        if (e + 1 >= head + 2)
            return SBX_EGRESS_BAD;
        size_t colon = i;
        while (colon < e && buf[colon] != ':')
            colon++;
        if (colon == i || colon == e)
            return SBX_EGRESS_BAD; /* no name, or a line without a colon (obs-fold too) */
        for (size_t k = i; k < colon; k++) {
            if (buf[k] == ' ' || buf[k] == '\t')
                return SBX_EGRESS_BAD;
        }
        if (ieq(buf + i, colon - i, "host")) {
            if (have)
                return SBX_EGRESS_BAD;
            size_t v0 = colon + 1;
            size_t v1 = e;
            while (v0 < v1 && (buf[v0] == ' ' || buf[v0] == '\t'))
                v0++;
            while (v1 > v0 && (buf[v1 - 1] == ' ' || buf[v1 - 1] == '\t'))
                v1--;
            if (!host_port(buf + v0, v1 - v0, name, port)) {
                name[0] = '\0';
                return SBX_EGRESS_BAD;
            }
            have = true;
        }
        i = e + 2;
    }
    if (!have || name_is_numeric(name)) {
        name[0] = '\0';
        return SBX_EGRESS_BAD;
    }
    /* absolute-form: http://host[:port]/... must name the same host and port */
    if (buf[t0] != '/' && !(sp2 - t0 == 1 && buf[t0] == '*')) {
        static const char scheme[] = "http://";
        size_t sl = sizeof scheme - 1;
        if (sp2 - t0 <= sl || !ieq(buf + t0, sl, scheme))
            return SBX_EGRESS_BAD;
        size_t h0 = t0 + sl;
        size_t h1 = h0;
        while (h1 < sp2 && buf[h1] != '/' && buf[h1] != '?')
            h1++;
        char other[SBX_EGRESS_NAME_MAX + 1];
        uint16_t oport = 0;
        if (!host_port(buf + h0, h1 - h0, other, &oport) || strcmp(other, name) != 0 ||
            oport != *port) {
            name[0] = '\0';
            return SBX_EGRESS_BAD;
        }
    }
    return SBX_EGRESS_OK;
}

/* ---- DNS ---- */

/* Reads the (possibly compressed) name at *off of msg into out (normalised when it can be,
 * *ok_name false otherwise); advances *off past it in place. Bounded: at most 16 pointer hops,
 * names of at most 255 wire bytes. */
static bool dns_name(const uint8_t *msg, size_t len, size_t *off, bool allow_ptr, char *out,
                     bool *ok_name)
{
    char raw[256];
    size_t rn = 0;
    size_t pos = *off;
    size_t after = 0;
    int hops = 0;
    bool jumped = false;
    for (;;) {
        if (pos >= len)
            return false;
        uint8_t l = msg[pos];
        if (l == 0) {
            pos++;
            break;
        }
        if ((l & 0xC0) == 0xC0) {
            if (!allow_ptr || pos + 1 >= len || ++hops > 16)
                return false;
            size_t target = (size_t)(l & 0x3F) << 8 | msg[pos + 1];
            if (!jumped)
                after = pos + 2;
            jumped = true;
            if (target >= pos) /* only backwards: no loops */
                return false;
            pos = target;
            continue;
        }
        if (l & 0xC0)
            return false;
        if (pos + 1 + l > len || rn + l + 1 > sizeof raw - 1)
            return false;
        if (rn)
            raw[rn++] = '.';
        for (size_t k = 0; k < l; k++) {
            char c = (char)msg[pos + 1 + k];
            raw[rn++] = c == '.' ? '\x01' : c; /* a dot inside a label never matches */
        }
        pos += 1 + (size_t)l;
    }
    *off = jumped ? after : pos;
    *ok_name = rn > 0 && sbx_egress_name_norm(raw, rn, out);
    if (!*ok_name)
        out[0] = '\0';
    return true;
}

sbx_egress_parse sbx_egress_dns_query_parse(const uint8_t *buf, size_t len, sbx_egress_dns_query *q)
{
    memset(q, 0, sizeof *q);
    if (len < 12 || len > SBX_EGRESS_DNS_MAX)
        return SBX_EGRESS_BAD;
    q->id = rd16(buf);
    q->flags = rd16(buf + 2);
    if (q->flags & 0x8000) /* a response */
        return SBX_EGRESS_BAD;
    if (((q->flags >> 11) & 0xF) != 0) /* opcode QUERY only */
        return SBX_EGRESS_BAD;
    if (rd16(buf + 4) != 1 || rd16(buf + 6) != 0 || rd16(buf + 8) != 0)
        return SBX_EGRESS_BAD;
    size_t off = 12;
    bool ok = false;
    if (!dns_name(buf, len, &off, false, q->name, &ok))
        return SBX_EGRESS_BAD;
    if (off + 4 > len)
        return SBX_EGRESS_BAD;
    q->bad_name = !ok;
    q->qtype = rd16(buf + off);
    q->qclass = rd16(buf + off + 2);
    q->question_end = off + 4;
    return SBX_EGRESS_OK;
}

size_t sbx_egress_dns_query_build(uint16_t id, const char *name, uint8_t *out, size_t cap)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > SBX_EGRESS_NAME_MAX || cap < 12 + nl + 2 + 4)
        return 0;
    memset(out, 0, 12);
    wr16(out, id);
    wr16(out + 2, 0x0100); /* RD */
    wr16(out + 4, 1);
    size_t o = 12;
    const char *s = name;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        if (l == 0 || l > 63)
            return 0;
        out[o++] = (uint8_t)l;
        memcpy(out + o, s, l);
        o += l;
        s += l;
        if (*s == '.')
            s++;
    }
    out[o++] = 0;
    wr16(out + o, 1);     /* A */
    wr16(out + o + 2, 1); /* IN */
    return o + 4;
}

sbx_egress_parse sbx_egress_dns_answer_parse(const uint8_t *buf, size_t len, uint16_t id,
                                             const char *name, uint32_t *addrs, size_t max,
                                             size_t *n, int *rcode)
{
    *n = 0;
    *rcode = 0;
    if (len < 12 || len > 65535 || rd16(buf) != id)
        return SBX_EGRESS_BAD;
    uint16_t flags = rd16(buf + 2);
    if (!(flags & 0x8000) || (flags & 0x0200)) /* not a response, or truncated */
        return SBX_EGRESS_BAD;
    *rcode = flags & 0xF;
    if (rd16(buf + 4) != 1)
        return SBX_EGRESS_BAD;
    size_t an = rd16(buf + 6);
    size_t off = 12;
    char qn[SBX_EGRESS_NAME_MAX + 1];
    bool ok = false;
    if (!dns_name(buf, len, &off, true, qn, &ok) || !ok || strcmp(qn, name) != 0)
        return SBX_EGRESS_BAD;
    if (off + 4 > len || rd16(buf + off) != 1 || rd16(buf + off + 2) != 1)
        return SBX_EGRESS_BAD;
    off += 4;
    /* the chain of names that lead to name's addresses: name, then CNAME targets in order */
    char want[SBX_EGRESS_NAME_MAX + 1];
    memcpy(want, qn, sizeof want);
    if (an > 64)
        return SBX_EGRESS_BAD;
    for (size_t i = 0; i < an; i++) {
        char owner[SBX_EGRESS_NAME_MAX + 1];
        bool oko = false;
        if (!dns_name(buf, len, &off, true, owner, &oko))
            return SBX_EGRESS_BAD;
        if (off + 10 > len)
            return SBX_EGRESS_BAD;
        uint16_t type = rd16(buf + off);
        uint16_t cls = rd16(buf + off + 2);
        size_t rdlen = rd16(buf + off + 8);
        off += 10;
        if (off + rdlen > len)
            return SBX_EGRESS_BAD;
        bool mine = oko && cls == 1 && strcmp(owner, want) == 0;
        if (mine && type == 5) { /* CNAME: follow it */
            size_t t = off;
            char target[SBX_EGRESS_NAME_MAX + 1];
            bool okt = false;
            if (!dns_name(buf, off + rdlen, &t, true, target, &okt) || t != off + rdlen)
                return SBX_EGRESS_BAD;
            if (okt)
                memcpy(want, target, sizeof want);
            else
                want[0] = '\0';
        } else if (mine && type == 1) {
            if (rdlen != 4)
                return SBX_EGRESS_BAD;
            if (*n < max)
                memcpy(&addrs[(*n)++], buf + off, 4);
        }
        off += rdlen;
    }
    return SBX_EGRESS_OK;
}

size_t sbx_egress_dns_reply_build(const uint8_t *buf, const sbx_egress_dns_query *q, int rcode,
                                  const uint32_t *addrs, size_t n, uint32_t ttl, uint8_t *out,
                                  size_t cap)
{
    size_t need = q->question_end + n * 16;
    if (q->question_end < 12 || need > cap || q->question_end > SBX_EGRESS_DNS_MAX)
        return 0;
    memcpy(out, buf, q->question_end);
    /* QR, opcode 0, RD copied, RA, rcode */
    wr16(out + 2, (uint16_t)(0x8000 | (q->flags & 0x0100) | 0x0080 | (rcode & 0xF)));
    wr16(out + 4, 1);
    wr16(out + 6, (uint16_t)n);
    wr16(out + 8, 0);
    wr16(out + 10, 0);
    size_t o = q->question_end;
    for (size_t i = 0; i < n; i++) {
        wr16(out + o, 0xC00C); /* the question's name */
        wr16(out + o + 2, 1);
        wr16(out + o + 4, 1);
        wr16(out + o + 6, (uint16_t)(ttl >> 16));
        wr16(out + o + 8, (uint16_t)ttl);
        wr16(out + o + 10, 4);
        memcpy(out + o + 12, &addrs[i], 4);
        o += 16;
    }
    return o;
}

/* ---- allowlist ---- */

static bool parse_port(const char *s, uint16_t *port)
{
    uint32_t v = 0;
    size_t k = 0;
    for (; s[k]; k++) {
        if (s[k] < '0' || s[k] > '9' || k >= 5)
            return false;
        v = v * 10 + (uint32_t)(s[k] - '0');
    }
    if (k == 0 || v == 0 || v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

static bool parse_ipv4(const char *s, size_t n, uint32_t *ip)
{
    uint32_t v = 0;
    int parts = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t o = 0;
        size_t d = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (++d > 3)
                return false;
            o = o * 10 + (uint32_t)(s[i] - '0');
            i++;
        }
        if (d == 0 || o > 255 || (d > 1 && s[i - d] == '0'))
            return false;
        v = v << 8 | o;
        if (++parts > 4)
            return false;
        if (i < n) {
            if (s[i] != '.' || i + 1 == n)
                return false;
            i++;
        }
    }
    if (parts != 4)
        return false;
    *ip = v;
    return true;
}

bool sbx_egress_rule_parse(const char *entry, sbx_egress_rule *r, const char **why)
{
    memset(r, 0, sizeof *r);
    *why = NULL;
    size_t n = strlen(entry);
    if (n == 0 || n > SBX_EGRESS_NAME_MAX + 2 + 6) {
        *why = "empty or too long";
        return false;
    }
    if (strchr(entry, '[') || strchr(entry, ']') || strchr(entry, ':') != strrchr(entry, ':')) {
        *why = "IPv6 is not supported by the egress proxy (list IPv4 addresses or names)";
        return false;
    }
    const char *colon = strchr(entry, ':');
    size_t hn = colon ? (size_t)(colon - entry) : n;
    if (colon && !parse_port(colon + 1, &r->port)) {
        *why = "bad port (1..65535 after ':')";
        return false;
    }
    const char *slash = memchr(entry, '/', hn);
    uint32_t ip = 0;
    if (slash || parse_ipv4(entry, hn, &ip)) {
        size_t an = slash ? (size_t)(slash - entry) : hn;
        uint32_t bits = 32;
        if (slash) {
            size_t bl = hn - an - 1;
            if (bl == 0 || bl > 2)
                goto bad_cidr;
            bits = 0;
            for (size_t k = an + 1; k < hn; k++) {
                if (entry[k] < '0' || entry[k] > '9')
                    goto bad_cidr;
                bits = bits * 10 + (uint32_t)(entry[k] - '0');
            }
            if (bits > 32)
                goto bad_cidr;
        }
        if (!parse_ipv4(entry, an, &ip))
            goto bad_cidr;
        r->kind = SBX_EGRESS_RULE_CIDR;
        r->mask = bits == 0 ? 0 : 0xFFFFFFFFu << (32 - bits);
        r->net = ip & r->mask;
        return true;
    bad_cidr:
        *why = "bad IPv4 address or CIDR (a.b.c.d or a.b.c.d/len)";
        return false;
    }
    const char *host = entry;
    if (hn >= 2 && entry[0] == '*' && entry[1] == '.') {
        r->kind = SBX_EGRESS_RULE_WILDCARD;
        host += 2;
        hn -= 2;
    } else {
        r->kind = SBX_EGRESS_RULE_NAME;
    }
    if (!sbx_egress_name_norm(host, hn, r->name) || name_is_numeric(r->name)) {
        *why = "bad domain name (letters, digits, '-', '.'; '*.' only as a prefix)";
        return false;
    }
    return true;
}

bool sbx_egress_allow_name(const sbx_egress_rule *rules, size_t n, const char *name, uint16_t port)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < n; i++) {
        const sbx_egress_rule *r = &rules[i];
        if (r->port && r->port != port)
            continue;
        if (r->kind == SBX_EGRESS_RULE_NAME && strcmp(r->name, name) == 0)
            return true;
        if (r->kind == SBX_EGRESS_RULE_WILDCARD) {
            size_t sl = strlen(r->name);
            if (nl > sl + 1 && name[nl - sl - 1] == '.' && strcmp(name + nl - sl, r->name) == 0)
                return true;
        }
    }
    return false;
}

bool sbx_egress_allow_ip(const sbx_egress_rule *rules, size_t n, uint32_t ip, uint16_t port)
{
    for (size_t i = 0; i < n; i++) {
        const sbx_egress_rule *r = &rules[i];
        if (r->kind == SBX_EGRESS_RULE_CIDR && (!r->port || r->port == port) &&
            (ip & r->mask) == r->net)
            return true;
    }
    return false;
}

bool sbx_egress_ip_special(uint32_t ip)
{
    static const struct {
        uint32_t net;
        int bits;
    } nets[] = {
        {0x00000000u, 8},  {0x0A000000u, 8},  {0x64400000u, 10}, {0x7F000000u, 8},
        {0xA9FE0000u, 16}, {0xAC100000u, 12}, {0xC0000000u, 24}, {0xC0A80000u, 16},
        {0xC6120000u, 15}, {0xE0000000u, 4},  {0xF0000000u, 4},
    };
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
        uint32_t mask = 0xFFFFFFFFu << (32 - nets[i].bits);
        if ((ip & mask) == nets[i].net)
            return true;
    }
    return false;
}
