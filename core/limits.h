/* limits.h - the limits and defaults that more than one part of sbx must agree on, each a named
 * constant with its reason (sqlite's sqliteLimit.h is the model). A limit that only one file
 * uses stays beside its use; one that two places need lives here, so there is one copy of it,
 * and where two limits must keep a relation a _Static_assert says so.
 *
 * Included by libsbx and by sbx-agent (a static program built apart), so this file holds
 * macros only and includes nothing. Internal: not part of include/sbx/.
 */
#ifndef SBX_CORE_LIMITS_H
#define SBX_CORE_LIMITS_H

/* ---- the agent protocol (host <-> sbx-agent, proto/sbx/v1/agent.proto) -------------------- */

/* Largest frame either side sends (4-byte little-endian length prefix excluded). Bulk data
 * moves in SBX_AGENT_CHUNK pieces; the rest of the headroom is for argv/env/shell of one exec,
 * whose sum this bounds. The agent (agent/agent.h) and the host client
 * (providers/common/agent_client.h) both use this one value. */
#define SBX_AGENT_MAX_FRAME (160u * 1024u)
/* Output or file data per frame: agent.options' max_size of the chunk fields. */
#define SBX_AGENT_CHUNK 32768u
/* Output kept per stream when a request sets no limit: 64 MiB, then the command is killed. */
#define SBX_AGENT_DEFAULT_OUTPUT_LIMIT (64ull * 1024u * 1024u)

_Static_assert(SBX_AGENT_MAX_FRAME >= 4u * SBX_AGENT_CHUNK,
               "an agent frame must hold a data chunk with room for its envelope");

/* Inodes of a sandbox's writable tmpfs mounts (local: /tmp, the workspace, /dev/shm; docker:
 * /tmp, the workdir, fs_write paths) per MiB of their size, one per 4 KiB page: as many files as
 * a full mount of small files holds. Without a cap an empty file costs no size, and the
 * kernel's default (half the host's RAM pages) lets a program hold millions of inodes, about
 * 1 KiB of kernel memory each. At least SBX_TMPFS_INODES_MIN, for the smallest mounts. */
#define SBX_TMPFS_INODES_PER_MB 256ull
#define SBX_TMPFS_INODES_MIN 1024ull

/* An agent that also listens on TCP (a pod, reached over the pod network) takes a client only
 * after its first bytes are SBX_AGENT_AUTH_MAGIC followed by the sandbox's SBX_AGENT_TOKEN_LEN
 * byte credential, compared in constant time; anything else is dropped before one frame is
 * read. 32 bytes = one HMAC-SHA256 output, which is how providers derive the credential. */
#define SBX_AGENT_AUTH_MAGIC "SBXA"
#define SBX_AGENT_AUTH_MAGIC_LEN 4u
#define SBX_AGENT_TOKEN_LEN 32u

/* ---- configuration defaults (DESIGN §10) that code outside core/config.c falls back on ------ */

/* broker.threads: executor threads of the thread broker. */
#define SBX_BROKER_DEFAULT_THREADS 16
/* broker.queue_depth: requests queued, not yet running; beyond it RESOURCE_EXHAUSTED. One
 * principal may hold all but a quarter of it (broker/thread.c tenant_share). */
#define SBX_BROKER_DEFAULT_QUEUE_DEPTH 1024
/* broker.lru_size: completions every broker keeps for result() (DESIGN §6). */
#define SBX_BROKER_DEFAULT_LRU_SIZE 1024
/* worker.max_message_bytes: largest gRPC message the worker accepts; also the largest
 * response the remote broker reads, so any completion a default worker sends is readable. */
#define SBX_WORKER_DEFAULT_MAX_MESSAGE (16u * 1024u * 1024u)

/* ---- decoding an ExecutionRequest (core/contract.c sbx_request_decode) ---------------------- */

/* Elements of one repeated field, or entries of one map, in one message of a request (argv,
 * env, groups, credentials, packages, network_allow, fs_read, fs_write): far above any real
 * command line or policy (the agent takes 64 arguments), and counted on the wire before
 * decoding, so 4 M empty strings (8 MB on the wire, 300 MB decoded) are refused unallocated. */
#define SBX_REQUEST_MAX_LIST 4096u
/* What decoding one request may allocate: this many times its wire size plus the slack below
 * (a decoded string costs a pointer and a malloc chunk beside its bytes; the slack covers a
 * request with every list at its limit). Past it the request is RESOURCE_EXHAUSTED, so the
 * memory a request takes is bounded by its size, whatever its shape (e.g. unknown fields). */
#define SBX_REQUEST_DECODE_FACTOR 4
#define SBX_REQUEST_DECODE_SLACK (8u * 1024u * 1024u)

/* ---- policy limits: a profile's (core/config_profile.c) and a request's (core/policy.c) ---- */

#define MAX_POLICY_CPU 1024 /* cores; beyond any single host */
/* The smallest cpu limit every provider can hold: a cgroup's quota of 1 ms per 100 ms period,
 * Docker's 0.01 CPUs. Less would be rounded to 0, which Docker reads as "no limit". */
#define MIN_POLICY_CPU 0.01
#define MAX_POLICY_MEMORY_MB (16LL * 1024 * 1024) /* 16 TiB */
#define MAX_POLICY_PIDS 4194304                   /* the kernel's PID_MAX_LIMIT */
#define MAX_POLICY_DISK_MB (1LL << 30)            /* 1 PiB */
/* a week: longer is a service, not a call */
#define MAX_POLICY_TIMEOUT_MS (7LL * 24 * 3600 * 1000)
#define MAX_POLICY_OUTPUT_BYTES (1LL << 34) /* 16 GiB per stream */
/* Entries of each list of a request's policy (network_allow, fs_read, fs_write), and the bytes
 * of each: a request's lists are compared with the profile's and with its session sandbox's,
 * entry by entry, so their product must stay small whatever a caller sends. */
#define MAX_POLICY_LIST_ENTRIES 256
#define MAX_POLICY_ENTRY_BYTES 4096 /* PATH_MAX */

#endif
