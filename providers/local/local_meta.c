/* local_meta.c - the strict reader of the local provider's meta file (see local_meta.h). Pure
 * parsing: no file system access, no signals. */
#include "providers/local/local_meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal number filling the rest of the line (no sign, no junk after it). */
static bool whole_number(const char *s, unsigned long long *out)
{
    if (*s < '0' || *s > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* A cgroup directory the provider could have created for sandbox_id: under /sys/fs/cgroup/,
 * no empty, "." or ".." component, and the last component is the sandbox id. */
static bool cgroup_ok(const char *path, const char *sandbox_id)
{
    static const char root[] = "/sys/fs/cgroup/";
    size_t n = strlen(path);
    if (strncmp(path, root, sizeof root - 1) != 0 || n >= LOCAL_MAX_CGROUP_DIR + 32)
        return false;
    for (const char *c = path + sizeof root - 2; *c;) { /* at a '/' */
        const char *e = strchr(c + 1, '/');
        size_t len = e ? (size_t)(e - c - 1) : strlen(c + 1);
        if (len == 0 || (len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
            return false;
        if (!e)
            return len == strlen(sandbox_id) && memcmp(c + 1, sandbox_id, len) == 0;
        c = e;
    }
    return false;
}

bool local_meta_hex(const char *s, char out[2 * LOCAL_META_MAX_NAME + 1])
{
    static const char digits[] = "0123456789abcdef";
    size_t n = strlen(s);
    if (n > LOCAL_META_MAX_NAME)
        return false;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = digits[(unsigned char)s[i] & 15];
    }
    out[2 * n] = '\0';
    return true;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes the lowercase hex filling the rest of the line into out (LOCAL_META_MAX_NAME + 1
 * bytes): false for an odd length, a longer name, a byte that is not a digit, or a NUL. */
static bool hex_name(const char *hex, char *out)
{
    size_t n = strlen(hex);
    if (n % 2 != 0 || n / 2 > LOCAL_META_MAX_NAME)
        return false;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0 || (hi | lo) == 0)
            return false;
        out[i] = (char)(hi << 4 | lo);
    }
    out[n / 2] = '\0';
    return true;
}

/* "PID START" (an owner's, a reaper's): both whole numbers and a pid that can be one, or
 * nothing set at all. */
static void pid_and_start(char *text, long *pid, unsigned long long *start)
{
    unsigned long long v, st;
    char *sp = strchr(text, ' ');
    if (sp == NULL)
        return;
    *sp = '\0';
    if (whole_number(text, &v) && v > 1 && v <= (1u << 22) && whole_number(sp + 1, &st)) {
        *pid = (long)v;
        *start = st;
    }
}

bool local_meta_parse(char *text, const char *sandbox_id, meta *m)
{
    bool subject_ok = false, profile_ok = false;
    memset(m, 0, sizeof *m);
    m->uid_slot = -1;
    for (char *save, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        unsigned long long v;
        if (strncmp(line, "pid ", 4) == 0) {
            m->pid = whole_number(line + 4, &v) && v <= (1u << 22) ? (long)v : 0;
        } else if (strncmp(line, "start ", 6) == 0) {
            m->start = whole_number(line + 6, &v) ? v : 0;
        } else if (strncmp(line, "uid_slot ", 9) == 0) {
            m->uid_slot = whole_number(line + 9, &v) && v <= 65535 ? (long)v : -1;
        } else if (strncmp(line, "owner ", 6) == 0) {
            pid_and_start(line + 6, &m->owner_pid, &m->owner_start);
        } else if (strncmp(line, "reaper ", 7) == 0) {
            pid_and_start(line + 7, &m->reaper_pid, &m->reaper_start);
        } else if (strcmp(line, "scope per_call") == 0) {
            m->per_call = true;
        } else if (strncmp(line, "cgroup ", 7) == 0 && m->n_cg < LOCAL_META_MAX_CGROUPS &&
                   cgroup_ok(line + 7, sandbox_id)) {
            snprintf(m->cg[m->n_cg++], sizeof m->cg[0], "%s", line + 7);
        } else if (strncmp(line, "principal ", 10) == 0) {
            subject_ok = hex_name(line + 10, m->subject);
        } else if (strncmp(line, "profile ", 8) == 0) {
            profile_ok = hex_name(line + 8, m->profile) && m->profile[0] != '\0';
        }
    }
    m->has_principal = subject_ok && profile_ok;
    if (!m->has_principal)
        m->subject[0] = m->profile[0] = '\0';
    return m->pid > 1;
}
