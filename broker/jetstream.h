/* jetstream.h - what both ends of the queue transport share (the queue broker in broker/queue.c
 * and the JetStream consumer of sbx-worker in worker/queue.c): connecting to NATS with TLS and
 * credentials, the stream and the completion bucket (created when missing), the names of
 * subjects, consumers and keys, and the record kept in the bucket for each task.
 *
 * Layout, for a queue named N (sandbox.broker.queue.name, default "sbx"):
 *   stream  N_tasks   subjects N.work (one-shot and new-session requests, every worker pulls)
 *                     and N.node.<node> (an existing host-local session's, its node only);
 *                     work-queue retention, Nats-Msg-Id dedup window = dedup_window_s.
 *   bucket  N_done    key = hex SHA-256 of (principal subject, task_id); value = a record
 *                     (claimed by a delivery, or done with the completion); TTL completion_ttl_s.
 *   core    N.done.<key>    "the record changed" (the new record), for whoever waits
 *           N.out.<key>     OutputChunk messages while the task runs (streaming callers)
 *           N.cancel.<key>  a caller cancels the task
 *
 * Private to broker/ and worker/. This module must not run requests or know the engine.
 */
#ifndef SBX_BROKER_JETSTREAM_H
#define SBX_BROKER_JETSTREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nats/nats.h>

#include "sbx/config.h"
#include "sbx/contract.h"
#include "sbx/status.h"

/* A principal's partition: "s-<subject>" when the subject is 1 to 64 of [A-Za-z0-9_-] (so an
 * operator can read it in NATS permissions), else "h-" and 32 hex digits of its SHA-256. The
 * prefixes keep the two forms apart, and the token is one NATS subject token. */
#define SBXQ_PARTITION_LEN 67
/* A key: the partition, a dot, 64 hex digits of SHA-256 of (subject, task_id), and the NUL.
 * Every record, output and cancel of a principal lives below its partition ("N.out.<p>.<hash>",
 * bucket key "<p>.<hash>"), so NATS permissions can give each tenant its own and nobody else's
 * (deploy/README); the hash keeps any task_id within the characters NATS allows. */
#define SBXQ_KEY_LEN (SBXQ_PARTITION_LEN + 65)
/* Longest subject we build: the prefix (a NATS name, at most 32 bytes by config), a verb and a
 * key or an escaped node (a 253-byte DNS name escaped at 3 bytes per character). */
#define SBXQ_SUBJECT_MAX 1024
/* Longest node kept in a record (a DNS name). */
#define SBXQ_NODE_MAX 253
/* Most servers of sandbox.broker.queue.url: a JetStream cluster has 3 or 5. */
#define SBXQ_MAX_SERVERS 16
/* Header carrying the caller's bearer token (the worker's callers table decides, as on gRPC). */
#define SBXQ_HDR_AUTH "Sbx-Authorization"
/* Header asking the worker to publish output chunks on N.out.<key>. */
#define SBXQ_HDR_STREAM "Sbx-Stream"
/* Header carrying the revision at which the submitter created (or read) the task's record as
 * QUEUED with its request's digest: the worker claims by a compare-and-set on it without reading
 * the record first (one round trip fewer per task), and reads it only when the record has moved
 * on since. Taken only with a bearer token the workers' callers table accepts for the request's
 * principal (a caller that lies then overwrites only records it may write anyway); without a
 * callers table, or from any other caller, it is ignored. */
#define SBXQ_HDR_REVISION "Sbx-Record-Revision"

/* A connection with its JetStream context and the completion bucket. One per broker or worker;
 * nats.c objects are thread-safe, so every thread of the owner uses it. */
typedef struct sbxq_conn {
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
    const sbx_queue_config *cfg; /* borrowed */
    char name[64];               /* the queue's name: subject prefix */
    char stream[80];             /* N_tasks */
    int64_t max_payload;         /* the server's, for completions that would not fit */
    /* Ended subscriptions not yet freed (see sbxq_unsubscribe), under retired_mu. */
    pthread_mutex_t retired_mu;
    natsSubscription **retired;
    size_t n_retired, cap_retired;
    bool reaping; /* a thread is proving the read loop past a batch */
} sbxq_conn;

/* Connects (TLS, user/password or nkey, per cfg) and makes sure the stream and bucket exist
 * (creating them with cfg's settings when missing; an existing one is used as it is).
 * client is the connection name the server shows (e.g. "sbx-worker node-a"). */
sbx_status sbxq_connect(const sbx_queue_config *cfg, const char *client, sbxq_conn **out,
                        sbx_error *err);
/* Closes and frees. NULL is fine. */
void sbxq_close(sbxq_conn *c);
/* sbxq_close, waiting at most ms for it: true when it finished. Otherwise the close goes on in
 * a thread of its own and c is left to it (a process about to exit does not wait for a client
 * library that never returns; libnats 3.4 once hung in natsConnection_Close). */
bool sbxq_close_within(sbxq_conn *c, int ms);

/* Ended subscriptions wait for a flush in batches of this many (one round trip to the server
 * per batch; at most this many wait while traffic is low). */
#define SBXQ_RETIRE_BATCH 64
/* That flush's wait: a server that does not answer within it keeps the batch for the next. */
#define SBXQ_RETIRE_FLUSH_MS 2000

/* Ends sub, a subscription on c (NULL is fine): unsubscribes it unless drained (a finished
 * drain has), and frees it once c's read loop can no longer be using it. libnats 3.4's read
 * loop looks a subscription up and then uses it without a reference (nats.c #637, fixed in
 * nats.c 3.6.1): freeing it at once let a message that arrived at that moment touch freed
 * memory (CI: SIGABRT in natsConn_processMsg). So an ended subscription waits here; once
 * SBXQ_RETIRE_BATCH wait, a flush proves the read loop past them (it handles the PONG after
 * every message that came before it, and an unsubscribed subscription is no longer looked up)
 * and they are freed; sbxq_close frees the rest once the read loop has stopped. */
void sbxq_unsubscribe(sbxq_conn *c, natsSubscription *sub, bool drained);

/* The partition of a principal subject (see SBXQ_PARTITION_LEN). */
void sbxq_partition(const char *subject, char out[SBXQ_PARTITION_LEN]);
/* The key of (subject, task_id): "<partition>.<hash>". */
void sbxq_key(const char *subject, const char *task_id, char out[SBXQ_KEY_LEN]);
/* "N.<verb>.<key>" into out. */
void sbxq_subject(const sbxq_conn *c, const char *verb, const char *key,
                  char out[SBXQ_SUBJECT_MAX]);
/* "N.node.<escaped node>" into out: every byte outside [A-Za-z0-9-] becomes _XX, so any DNS
 * name is one subject token and two names never share one. */
void sbxq_node_subject(const sbxq_conn *c, const char *node, char out[SBXQ_SUBJECT_MAX]);
/* The durable consumer name of node's subject ("node_<escaped node>") into out. */
void sbxq_node_consumer(const char *node, char out[SBXQ_SUBJECT_MAX]);

/* A task's record in the bucket. Its life: QUEUED (created by the first submitter, atomically:
 * the fleet-wide dedup), CLAIMED by one delivery of its message (compare-and-set on the
 * revision, so two deliveries never both run it), DONE with the completion. Each step is a
 * compare-and-set on the previous revision. */
typedef enum sbxq_state { SBXQ_QUEUED = 1, SBXQ_CLAIMED = 2, SBXQ_DONE = 3 } sbxq_state;
typedef struct sbxq_record {
    sbxq_state state;
    uint8_t digest[SBX_REQUEST_DIGEST_LEN]; /* of the request that made the task */
    uint64_t seq;                           /* CLAIMED/DONE: the stream sequence of its message */
    uint32_t deliveries;                    /* the delivery that claimed or completed it */
    char node[SBXQ_NODE_MAX + 1];           /* the worker's node that claimed or completed it */
    const uint8_t *completion;              /* DONE: the packed completion (points into data) */
    size_t completion_len;
} sbxq_record;

/* Packs a record (c only for DONE) into a new malloc'd buffer; NULL on ENOMEM. */
uint8_t *sbxq_record_pack(sbxq_state state, const uint8_t digest[SBX_REQUEST_DIGEST_LEN],
                          uint64_t seq, uint32_t deliveries, const char *node,
                          const sbx_completion *c, size_t *len);
/* Bounded decoder of a record read from the bucket (untrusted bytes: anyone with write access
 * to the bucket can put anything there). false when malformed. */
bool sbxq_record_parse(const void *data, size_t len, sbxq_record *out);
/* The completion of a DONE record (caller frees), with deliveries set; NULL when it does not
 * decode. */
sbx_completion *sbxq_record_completion(const sbxq_record *r, const char *task_id);

/* Reads key's record: 1 found (*data malloc'd, caller frees; *rev its revision), 0 absent
 * (never written, or expired by the TTL), -1 on a transport error (err set). */
int sbxq_get(sbxq_conn *c, const char *key, uint8_t **data, size_t *len, uint64_t *rev,
             sbx_error *err);
/* Publishes a DONE record on N.done.<key> for whoever waits (core NATS: at most once; waiters
 * also poll the bucket). */
void sbxq_notify(sbxq_conn *c, const char *key, const void *record, size_t len);
/* The completion of a node-bound request that its node did not take within wait_ms: BROKER
 * (gRPC UNAVAILABLE) naming the node in completion.node. Caller frees. */
sbx_completion *sbxq_unavailable(const char *task_id, const char *node, int64_t wait_ms);

/* Sets err from a nats.c failure: what was being done, the library's text and last error. */
sbx_status sbxq_fail(sbx_error *err, sbx_status code, natsStatus s, const char *what, ...)
    __attribute__((format(printf, 4, 5)));

#endif
