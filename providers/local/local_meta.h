/* local_meta.h - the local provider's meta file (state_dir/meta): what it records about a
 * sandbox so a later process can find and remove it (the PID 1 it started, that process's
 * start time, the cgroup directories it created), and the strict reader of that file. Private
 * to providers/local/ and its tests and fuzz harness (never installed).
 *
 * The file is written by the provider, but it lives in a directory other processes of the
 * user can reach, and what it names gets SIGKILLed and removed: the reader accepts only what
 * the provider itself writes, never a cgroup outside /sys/fs/cgroup, a ".." or "." component,
 * or a directory not named after the sandbox. */
#ifndef SBX_PROVIDERS_LOCAL_META_H
#define SBX_PROVIDERS_LOCAL_META_H

#include <stdbool.h>

/* Longest cgroup directory the provider uses (its own cgroup's path plus room). */
#define LOCAL_MAX_CGROUP_DIR 1024
/* Longest principal subject and profile name a meta file records (the engine's own bounds are
 * 256 and 128 bytes); each is written as hex, since a subject may hold any byte but NUL. */
#define LOCAL_META_MAX_NAME 256
/* Cgroup directories per sandbox: v1 memory, pids, cpu; v2 one. */
#define LOCAL_META_MAX_CGROUPS 4 /* v1: memory, pids, cpu and freezer */

typedef struct meta {
    long pid;
    unsigned long long start; /* /proc/<pid>/stat field 22 */
    long owner_pid;           /* the process that created it (0 = unknown) */
    unsigned long long owner_start;
    bool per_call; /* made for a per_call session */
    /* the launcher's reaper (a per_call sandbox): while it runs, it removes the sandbox once its
     * PID 1 has ended (agent/reap.c); 0 = none */
    long reaper_pid;
    unsigned long long reaper_start;
    char cg[LOCAL_META_MAX_CGROUPS][LOCAL_MAX_CGROUP_DIR + 32]; /* cgroup dirs to remove */
    int n_cg;
    long uid_slot; /* -1: none (rootless) */
    /* made for a per_session (or per_runtime) session of profile `profile` on behalf of the
     * principal `subject` (provider_ops.list_held); false: no such lines (or not well formed) */
    bool has_principal;
    char subject[LOCAL_META_MAX_NAME + 1];
    char profile[LOCAL_META_MAX_NAME + 1];
} meta;

/* Parses the meta text of sandbox sandbox_id (NUL-terminated; modified). Lines: "pid N",
 * "start N", "uid_slot N", "owner PID START", "reaper PID START", "scope per_call",
 * "cgroup /sys/fs/cgroup/.../<sandbox_id>", "principal HEX" and "profile HEX" (both or neither:
 * has_principal; hex of at most LOCAL_META_MAX_NAME bytes, none of them NUL); unknown lines are
 * ignored, a cgroup line that is not exactly that shape is dropped (a uid_slot that is not a
 * whole number is -1, none). True when it names a usable PID 1 (pid > 1). */
bool local_meta_parse(char *text, const char *sandbox_id, meta *m);

/* Writes s (at most LOCAL_META_MAX_NAME bytes; longer is false) as lowercase hex into out
 * (2 * LOCAL_META_MAX_NAME + 1 bytes). */
bool local_meta_hex(const char *s, char out[2 * LOCAL_META_MAX_NAME + 1]);

#endif
