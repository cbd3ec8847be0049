/* snapshot.h - the engine's snapshot store (folder-private): named workspace snapshots kept on
 * this host, one directory per principal, taken from and restored into sandboxes through the
 * provider's own operations (a command and the file API), never unpacked by sbx itself.
 */
#ifndef SBX_CORE_SNAPSHOT_H
#define SBX_CORE_SNAPSHOT_H

#include <stdint.h>

#include "sbx/provider.h"

/* Longest snapshot name: short enough for a file name with its suffix and a temp prefix, long
 * enough for "<project>-<date>-<purpose>". Equals proto/sbx/v1/execution.options' 65 (with NUL). */
#define SNAPSHOT_NAME_MAX 64

/* Most snapshots one principal keeps: a directory listing stays one short read, and a caller
 * looping on SnapshotWorkspace fills its own quota, not the host's disk. */
#define SNAPSHOT_PER_PRINCIPAL_MAX 64

/* Bytes moved per file operation while taking or restoring: the file API's chunk size (sbx cp
 * uses the same 4 MiB), well inside a 16 MiB gRPC message. */
#define SNAPSHOT_CHUNK (4u * 1024u * 1024u)

/* One snapshot operation: a sandbox reached through its provider, and where the store is. */
typedef struct snapshot_ctx {
    const sbx_provider_ops *ops;
    sbx_sandbox *sb;        /* NULL for list and delete */
    const sbx_exec_opts *o; /* deadline, principal and policy of the request */
    const char *root;       /* the store (sbx_config.snapshot_dir) */
    const char *subject;    /* the principal's subject: the store's scope */
    const char *task_id;    /* names temporary files, inside the sandbox and in the store */
    uint64_t max_bytes;     /* largest snapshot kept */
} snapshot_ctx;

/* SBX_OK when name is [A-Za-z0-9._-]{1,SNAPSHOT_NAME_MAX} not starting with '.'; else
 * INVALID_ARGUMENT naming `what` (the request field) and the rule. */
sbx_status snapshot_check_name(const char *what, const char *name, sbx_error *err);

/* Packs the sandbox's working directory (tar, inside the sandbox) and keeps it as `name`,
 * adding its entry to res->snapshots. INVALID_ARGUMENT when the name exists,
 * RESOURCE_EXHAUSTED past max_bytes or SNAPSHOT_PER_PRINCIPAL_MAX; nothing is kept then. */
sbx_status snapshot_take(const snapshot_ctx *x, const char *name, sbx_result *res, sbx_error *err);

/* SBX_OK when the principal has a snapshot `name`; INVALID_ARGUMENT naming it otherwise. */
sbx_status snapshot_check_exists(const snapshot_ctx *x, const char *name, sbx_error *err);

/* Copies snapshot `name` into the sandbox and unpacks it in its working directory. */
sbx_status snapshot_restore(const snapshot_ctx *x, const char *name, sbx_error *err);

/* The principal's snapshots into res->snapshots, sorted by name. */
sbx_status snapshot_list(const snapshot_ctx *x, sbx_result *res, sbx_error *err);

/* Deletes the principal's snapshot `name`; GONE when there is none. */
sbx_status snapshot_delete(const snapshot_ctx *x, const char *name, sbx_error *err);

#endif
