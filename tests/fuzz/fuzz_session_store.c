/* fuzz_session_store.c - libFuzzer harness for the session store's reading of its directory
 * (core/sessions.c: store_load, store_read): every `*.session` file is a packed SessionHandle
 * the CLI wrote earlier, but the directory is the user's, so a file may be truncated,
 * corrupted, or written by something else. The input is split into files (a name, then the
 * bytes) written into a fresh store directory, which sbx_sessions_open then loads.
 *
 * Input: records of [name length byte][name bytes][2-byte content length][content]; a name
 * gets ".session" appended when the length byte's high bit is clear.
 *
 * Properties: no crash or leak; every loaded handle has an id the store accepts (1..128 of
 * [A-Za-z0-9._:-], not starting with '.'), is found again by that id, re-packs under
 * SBX_SESSION_FILE_MAX and survives a save (put) and a reload unchanged; no two loaded
 * handles claim the same id. */
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz/fuzz_oracle.h"
#include "sbx/config.h"
#include "sbx/sessions.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Files one input may write. */
#define FUZZ_MAX_FILES 16

static sbx_config *cfg;
static char base[200];

static void cleanup_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char p[512];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static void at_exit(void)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/store", base);
    cleanup_dir(dir);
    rmdir(base);
    sbx_config_free(cfg);
}

static void setup(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(base, sizeof base, "%s/sbx-fuzz-sessions-XXXXXX", tmp);
    if (!mkdtemp(base))
        abort();
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "sandbox:\n"
             "  default_profile: fake\n"
             "  secret_file: %s/secret\n"
             "  profiles:\n"
             "    fake: { type: fake, scope: per_session }\n",
             base);
    sbx_error err = {0};
    if (sbx_config_load_string(yaml, strlen(yaml), "fuzz-sessions.yaml", &cfg, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_session_store: config: %s\n", err.message);
        abort();
    }
    atexit(at_exit);
}

static bool id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > 128 || id[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!cfg)
        setup();
    char dir[256];
    snprintf(dir, sizeof dir, "%s/store", base);
    cleanup_dir(dir);
    if (mkdir(dir, 0700) != 0)
        abort();
    size_t off = 0;
    for (int i = 0; i < FUZZ_MAX_FILES && off < size; i++) {
        uint8_t nl = data[off++];
        size_t namelen = nl & 0x3f;
        if (namelen > size - off)
            namelen = size - off;
        char name[80];
        size_t o = 0;
        for (size_t k = 0; k < namelen; k++) {
            char c = (char)data[off + k];
            if (c != '/' && c != '\0') /* a file name cannot hold these */
                name[o++] = c;
        }
        off += namelen;
        name[o] = '\0';
        if (!(nl & 0x80))
            strcat(name, ".session");
        size_t clen = 0;
        if (size - off >= 2) {
            clen = (size_t)data[off] << 8 | data[off + 1];
            off += 2;
        } else {
            off = size;
        }
        if (clen > size - off)
            clen = size - off;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || name[0] == '\0')
            name[0] = 'x', name[1] = '\0';
        char path[400];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (clen && write(fd, data + off, clen) != (ssize_t)clen)
                abort();
            close(fd);
        }
        off += clen;
    }

    sbx_sessions *s = NULL;
    sbx_error err = {0};
    if (sbx_sessions_open(cfg, NULL, dir, &s, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_session_store: open: %s\n", err.message);
        abort();
    }
    sbx_session_handle **list = NULL;
    size_t n = sbx_sessions_list(s, &list);
    FUZZ_REQUIRE(n <= SBX_SESSIONS_MAX, "%zu sessions loaded", n);
    for (size_t i = 0; i < n; i++) {
        const sbx_session_handle *h = list[i];
        FUZZ_REQUIRE(h->session_id && id_ok(h->session_id),
                     "a loaded session id the store refuses");
        for (size_t k = 0; k < i; k++)
            FUZZ_REQUIRE(strcmp(list[k]->session_id, h->session_id) != 0,
                         "two loaded handles claim the id %s", h->session_id);
        sbx_session_handle *again = sbx_sessions_get(s, h->session_id);
        FUZZ_REQUIRE(again != NULL, "a listed session is not found by its id %s", h->session_id);
        size_t len = 0;
        uint8_t *packed = sbx_message_pack(&h->base, &len);
        FUZZ_REQUIRE(packed && len < SBX_SESSION_FILE_MAX, "a loaded handle packs to %zu bytes",
                     len);
        free(packed);
        sbx_message_free(&again->base);
    }
    /* Save the first one and reload: it must come back as it was. */
    if (n > 0) {
        sbx_error perr = {0};
        FUZZ_REQUIRE(sbx_sessions_put(s, list[0], &perr) == SBX_OK, "put of a loaded handle: %s",
                     perr.message);
        sbx_sessions *s2 = NULL;
        if (sbx_sessions_open(cfg, NULL, dir, &s2, &err) != SBX_OK)
            abort();
        sbx_session_handle *back = sbx_sessions_get(s2, list[0]->session_id);
        FUZZ_REQUIRE(back != NULL, "a saved handle is not loaded again");
        size_t a_len = 0, b_len = 0;
        uint8_t *a = sbx_message_pack(&list[0]->base, &a_len);
        uint8_t *b = sbx_message_pack(&back->base, &b_len);
        FUZZ_REQUIRE(a && b && a_len == b_len && memcmp(a, b, a_len) == 0,
                     "a saved handle comes back different");
        free(a);
        free(b);
        sbx_message_free(&back->base);
        sbx_sessions_free(s2);
    }
    sbx_sessions_list_free(list, n);
    sbx_sessions_free(s);
    return 0;
}
