/* fuzz_local_meta.c - libFuzzer harness for the local provider's reader of its meta files
 * (providers/local/local_meta.c). What a meta file names is killed and removed by destroy and
 * the sweep, so the reader must accept nothing the provider would not have written itself.
 *
 * Properties: no crash; at most LOCAL_META_MAX_CGROUPS cgroups; every accepted cgroup is a
 * directory under /sys/fs/cgroup/ without an empty, "." or ".." component whose last component
 * is the sandbox id; an accepted pid or owner pid is a real one (2 .. 2^22); a principal is
 * recorded only with a profile, and both are names the provider could have written (at most
 * LOCAL_META_MAX_NAME bytes, the profile not empty). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_oracle.h"
#include "providers/local/local_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ID "l-0123456789abcdef"

/* Largest meta text the provider reads (its read buffer). */
#define FUZZ_META_MAX 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= FUZZ_META_MAX)
        size = FUZZ_META_MAX - 1;
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    meta m;
    bool ok = local_meta_parse(text, FUZZ_ID, &m);
    FUZZ_REQUIRE(m.n_cg >= 0 && m.n_cg <= LOCAL_META_MAX_CGROUPS, "%d cgroups", m.n_cg);
    if (ok)
        FUZZ_REQUIRE(m.pid > 1 && m.pid <= (1L << 22), "pid %ld accepted", m.pid);
    FUZZ_REQUIRE(m.owner_pid == 0 || (m.owner_pid > 1 && m.owner_pid <= (1L << 22)),
                 "owner pid %ld accepted", m.owner_pid);
    char hex[2 * LOCAL_META_MAX_NAME + 1];
    if (m.has_principal)
        FUZZ_REQUIRE(m.profile[0] != '\0' && local_meta_hex(m.subject, hex) &&
                         local_meta_hex(m.profile, hex),
                     "principal '%s' of profile '%s' accepted", m.subject, m.profile);
    else
        FUZZ_REQUIRE(m.subject[0] == '\0' && m.profile[0] == '\0', "a half principal kept");
    for (int i = 0; i < m.n_cg; i++) {
        const char *p = m.cg[i];
        size_t n = strlen(p);
        FUZZ_REQUIRE(strncmp(p, "/sys/fs/cgroup/", 15) == 0, "cgroup outside the tree: %s", p);
        FUZZ_REQUIRE(strstr(p, "/../") == NULL && strstr(p, "/./") == NULL &&
                         strstr(p, "//") == NULL,
                     "cgroup with a relative component: %s", p);
        FUZZ_REQUIRE(n > sizeof FUZZ_ID && strcmp(p + n - (sizeof FUZZ_ID - 1), FUZZ_ID) == 0 &&
                         p[n - sizeof FUZZ_ID] == '/',
                     "cgroup not named after the sandbox: %s", p);
    }
    free(text);
    return 0;
}
