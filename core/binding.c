/* binding.c - the deployment secret and the session binding HMAC (see binding.h).
 *
 * The secret file is the only key that lets a worker vouch for a session handle, so it is
 * treated like an ssh private key: opened without following symlinks, refused when another
 * user could read it, created with O_EXCL so two processes racing to create it cannot both
 * write (the loser reads the winner's key). It must not log or return the key bytes.
 */
#include "core/binding.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/sha256.h"

struct sbx_binding_key {
    sbx_hmac_sha256 template; /* keyed once; each signature works on a copy (read-only use of
                                 the template, so signing is thread-safe without a lock) */
};

void sbx_binding_key_free(sbx_binding_key *k)
{
    if (k == NULL)
        return;
    sbx_wipe(k, sizeof(*k));
    free(k);
}

sbx_status sbx_binding_key_from_bytes(const uint8_t *key, size_t len, sbx_binding_key **out,
                                      sbx_error *err)
{
    *out = NULL;
    if (key == NULL || len < SBX_SECRET_MIN_LEN)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "binding secret is %zu bytes; at least %d are needed", len,
                             SBX_SECRET_MIN_LEN);
    sbx_binding_key *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return sbx_error_set(err, SBX_E_INTERNAL, "out of memory loading the binding secret");
    sbx_hmac_sha256_init(&k->template, key, len);
    *out = k;
    return SBX_OK;
}

/* mkdir -p for the secret's directory, new directories 0700 (the secret's neighbours are none
 * of anyone's business). */
static sbx_status make_parent_dirs(const char *path, sbx_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return sbx_error_set(err, SBX_E_CONFIG, "secret_file path '%.200s...' is too long", path);
    char *dir = dirname(buf);
    for (char *p = dir + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) != 0 && errno != EEXIST)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "cannot create directory '%s' for secret_file: %s", dir,
                                 strerror(errno));
        *p = '/';
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sbx_error_set(err, SBX_E_CONFIG, "cannot create directory '%s' for secret_file: %s",
                             dir, strerror(errno));
    return SBX_OK;
}

/* The secret's directory exists (a configured secret_file is never given new directories). */
static sbx_status require_parent_dir(const char *path, sbx_error *err)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return sbx_error_set(err, SBX_E_CONFIG, "secret_file path '%.200s...' is too long", path);
    char *dir = dirname(buf);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "sandbox.secret_file '%s': its directory '%s' does not exist (%s); "
                             "create it (mode 0700) or fix the path: a secret is never created "
                             "in a directory that is not there, so a typo cannot give this "
                             "worker a secret of its own",
                             path, dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return sbx_error_set(err, SBX_E_CONFIG, "sandbox.secret_file '%s': '%s' is not a directory",
                             path, dir);
    return SBX_OK;
}

/* The secret's directory and every one above it (symlinks resolved) must be out of other
 * users' hands: owned by root or by this user, and one of this user's not writable by everyone
 * unless sticky (as /tmp is). Whoever may rearrange a directory on the way can put a file of
 * theirs in the secret's place: a hard link to any file this user owns whose bytes they know (a
 * log they fill, where protected_hardlinks is off) passes every check of the file itself, and
 * whoever knows the secret signs session handles for every principal. The default's fallback,
 * /tmp/sbx-UID when HOME is unset, is a name anyone may create first. A directory root owns,
 * for a process that is not root, is taken as root made it, whatever its mode: container
 * platforms make volumes that way (Kubernetes' emptyDir is root's, mode 0777) in a pod where
 * nobody else runs. */
static sbx_status require_private_dirs(const char *path, sbx_error *err)
{
    char buf[PATH_MAX], real[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return sbx_error_set(err, SBX_E_CONFIG, "secret_file path '%.200s...' is too long", path);
    if (realpath(dirname(buf), real) == NULL)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "secret_file '%s': cannot resolve its directory: %s", path,
                             strerror(errno));
    for (;;) {
        struct stat sb;
        if (lstat(real, &sb) != 0)
            return sbx_error_set(err, SBX_E_CONFIG, "secret_file '%s': cannot stat '%s': %s", path,
                                 real, strerror(errno));
        if (sb.st_uid != 0 && sb.st_uid != geteuid())
            return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                                 "secret_file '%s': directory '%s' is owned by uid %ld, neither "
                                 "root nor this user (uid %ld), who could replace the secret; "
                                 "chown it or point secret_file elsewhere",
                                 path, real, (long)sb.st_uid, (long)geteuid());
        if (sb.st_uid == geteuid() && (sb.st_mode & S_IWOTH) != 0 && (sb.st_mode & S_ISVTX) == 0)
            return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                                 "secret_file '%s': directory '%s' has mode %04o: anyone may "
                                 "replace the secret in it; run `chmod o-w %s` or point "
                                 "secret_file elsewhere",
                                 path, real, (unsigned)(sb.st_mode & 07777), real);
        char *slash = strrchr(real, '/');
        if (slash == NULL || (slash == real && real[1] == '\0'))
            return SBX_OK;
        slash[slash == real ? 1 : 0] = '\0';
    }
}

static sbx_status create_secret(const char *path, bool make_dirs, sbx_error *err)
{
    sbx_status st = make_dirs ? make_parent_dirs(path, err) : require_parent_dir(path, err);
    if (st == SBX_OK)
        st = require_private_dirs(path, err);
    if (st != SBX_OK)
        return st;
    uint8_t key[SBX_SECRET_NEW_LEN];
    if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key))
        return sbx_error_set(err, SBX_E_INTERNAL, "getrandom failed creating the binding secret");
    /* Write to a private temp name, then link() into place: link fails with EEXIST if another
     * process created the secret meanwhile, and no reader ever sees a half-written key. */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return sbx_error_set(err, SBX_E_CONFIG, "secret_file path '%.200s...' is too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_CONFIG, "cannot create secret_file '%s': %s", path,
                             strerror(errno));
    bool ok = write(fd, key, sizeof(key)) == (ssize_t)sizeof(key) && fsync(fd) == 0;
    sbx_wipe(key, sizeof(key));
    close(fd);
    if (!ok) {
        unlink(tmp);
        return sbx_error_set(err, SBX_E_CONFIG, "cannot write secret_file '%s': %s", path,
                             strerror(errno));
    }
    int rc = link(tmp, path);
    int saved = errno;
    unlink(tmp);
    if (rc != 0 && saved != EEXIST)
        return sbx_error_set(err, SBX_E_CONFIG, "cannot create secret_file '%s': %s", path,
                             strerror(saved));
    return SBX_OK;
}

static sbx_status key_load(const char *path, bool make_dirs, sbx_binding_key **out, sbx_error *err);

sbx_status sbx_binding_key_load(const char *path, sbx_binding_key **out, sbx_error *err)
{
    return key_load(path, true, out, err);
}

sbx_status sbx_binding_key_load_configured(const char *path, sbx_binding_key **out, sbx_error *err)
{
    return key_load(path, false, out, err);
}

static sbx_status key_load(const char *path, bool make_dirs, sbx_binding_key **out, sbx_error *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "no secret_file configured; set sandbox.secret_file to a path "
                             "(created 0600 when absent)");
    /* O_NONBLOCK: a FIFO's open would otherwise wait for a writer forever (it is refused below
     * as not a regular file); on a regular file it changes nothing. */
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    int fd = open(path, flags);
    if (fd < 0 && errno == ENOENT) {
        sbx_status st = create_secret(path, make_dirs, err);
        if (st != SBX_OK)
            return st;
        fd = open(path, flags);
    }
    if (fd < 0)
        return sbx_error_set(err, errno == ELOOP ? SBX_E_PERMISSION_DENIED : SBX_E_CONFIG,
                             "cannot open secret_file '%s': %s%s", path, strerror(errno),
                             errno == ELOOP ? " (symlinks are refused; point secret_file at the "
                                              "real file)"
                                            : "");
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG, "cannot stat secret_file '%s': %s", path,
                             strerror(errno));
    }
    if (!S_ISREG(stt.st_mode)) {
        close(fd);
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED, "secret_file '%s' is not a regular file",
                             path);
    }
    if (stt.st_uid != geteuid()) {
        close(fd);
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "secret_file '%s' is owned by uid %ld, not by this user (uid %ld); "
                             "chown it or point secret_file elsewhere",
                             path, (long)stt.st_uid, (long)geteuid());
    }
    if ((stt.st_mode & 077) != 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_PERMISSION_DENIED,
                             "secret_file '%s' has mode %04o: group or others can access it; "
                             "run `chmod 600 %s`",
                             path, (unsigned)(stt.st_mode & 07777), path);
    }
    sbx_status dirs = require_private_dirs(path, err);
    if (dirs != SBX_OK) {
        close(fd);
        return dirs;
    }
    uint8_t key[SBX_SECRET_MAX_LEN];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, key + len, sizeof(key) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == sizeof(key))
            break;
    }
    close(fd);
    sbx_status st;
    if (len < SBX_SECRET_MIN_LEN)
        st = sbx_error_set(err, SBX_E_CONFIG,
                           "secret_file '%s' holds %zu bytes; at least %d are needed (delete it "
                           "to have a new one generated)",
                           path, len, SBX_SECRET_MIN_LEN);
    else
        st = sbx_binding_key_from_bytes(key, len, out, err);
    sbx_wipe(key, sizeof(key));
    return st;
}

static void mac_field(sbx_hmac_sha256 *mac, const char *s)
{
    size_t len = s != NULL ? strlen(s) : 0;
    char prefix[32];
    size_t n = sizeof(prefix);
    prefix[--n] = ':';
    size_t v = len;
    do {
        prefix[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    sbx_hmac_sha256_update(mac, prefix + n, sizeof(prefix) - n);
    if (len > 0)
        sbx_hmac_sha256_update(mac, s, len);
    sbx_hmac_sha256_update(mac, "|", 1);
}

/* v in decimal, as a field (the digits written by hand: this runs on every request). */
static void mac_number(sbx_hmac_sha256 *mac, uint64_t v)
{
    char text[24];
    size_t n = sizeof text - 1;
    text[n] = '\0';
    do {
        text[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    mac_field(mac, text + n);
}

static void mac_list(sbx_hmac_sha256 *mac, size_t n, char *const *items)
{
    mac_number(mac, n);
    for (size_t i = 0; i < n; i++)
        mac_field(mac, items[i]);
}

/* The sandbox dimensions of a handle's policy, each a field (lists as their count, then their
 * items); cpu as the bits of the double (exact, and no formatting on every request). */
static void mac_policy(sbx_hmac_sha256 *mac, const sbx_policy *p)
{
    mac_field(mac, "policy");
    mac_number(mac, (uint64_t)p->network_egress);
    mac_list(mac, p->n_network_allow, p->network_allow);
    mac_list(mac, p->n_fs_read, p->fs_read);
    mac_list(mac, p->n_fs_write, p->fs_write);
    uint64_t cpu_bits;
    memcpy(&cpu_bits, &p->cpu, sizeof cpu_bits);
    mac_number(mac, cpu_bits);
    mac_number(mac, p->memory_mb);
    mac_number(mac, p->pids);
    mac_number(mac, p->disk_mb);
}

bool sbx_binding_sign(const sbx_binding_key *k, const sbx_session_handle *h, const char *subject,
                      uint8_t out[SBX_BINDING_LEN])
{
    _Static_assert(SBX_BINDING_LEN == SBX_SHA256_LEN, "a binding is one HMAC-SHA256");
    sbx_hmac_sha256 mac = k->template;
    mac_field(&mac, h->session_id);
    mac_field(&mac, h->profile);
    mac_field(&mac, h->provider);
    mac_field(&mac, h->sandbox_id);
    mac_field(&mac, subject);
    if (h->policy != NULL)
        mac_policy(&mac, h->policy);
    sbx_hmac_sha256_final(&mac, out);
    return true;
}

bool sbx_binding_derive_provider_key(const sbx_binding_key *k, const char *provider,
                                     uint8_t out[SBX_BINDING_LEN])
{
    sbx_hmac_sha256 mac = k->template;
    /* Two fields, where a binding always has five or more: no handle signs to the same bytes. */
    mac_field(&mac, "sbx provider credential key");
    mac_field(&mac, provider);
    sbx_hmac_sha256_final(&mac, out);
    return true;
}

bool sbx_binding_verify(const sbx_binding_key *k, const sbx_session_handle *h, const char *subject)
{
    uint8_t want[SBX_BINDING_LEN];
    if (h->binding.len != SBX_BINDING_LEN || !sbx_binding_sign(k, h, subject, want))
        return false;
    return sbx_ct_equal(want, h->binding.data, SBX_BINDING_LEN);
}

bool sbx_binding_stamp(const sbx_binding_key *k, sbx_session_handle *h, const char *subject)
{
    uint8_t mac[SBX_BINDING_LEN];
    if (!sbx_binding_sign(k, h, subject, mac))
        return false;
    if (h->binding.len == SBX_BINDING_LEN) {
        memcpy(h->binding.data, mac, SBX_BINDING_LEN);
        return true;
    }
    return sbx_set_bytes(&h->binding, mac, SBX_BINDING_LEN);
}
