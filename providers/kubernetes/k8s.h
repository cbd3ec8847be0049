/* k8s.h - the kubernetes provider's private types, shared by its files: where the API server
 * is and how to authenticate to it (k8s_config.c), the REST client (k8s_api.c), the provider
 * state and the sandbox handle (kubernetes.c). Private to providers/kubernetes/.
 */
#ifndef SBX_K8S_H
#define SBX_K8S_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/limits.h"
#include "providers/common/agent_client.h"
#include "sbx/provider.h"

/* Largest kubeconfig or service-account file read: real ones are a few KiB (a kubeconfig with
 * dozens of clusters and embedded certificates stays well under 1 MiB). */
#define K8S_MAX_FILE_BYTES (1024u * 1024u)
/* Largest API response buffered: a pod is a few KiB, a list of every sandbox pod of a profile
 * (the sweep) a few MiB. */
#define K8S_MAX_RESPONSE_BYTES (16u * 1024u * 1024u)
/* Kubernetes names: a DNS-1123 subdomain is at most 253 characters, a label value 63. */
#define K8S_MAX_NAME 253
#define K8S_MAX_LABEL 63
/* One API call: connect within 10 s, answer within 30 s (create and delete return at once;
 * the wait for a pod to run is polling, each poll its own call). */
#define K8S_CONNECT_TIMEOUT_MS 10000
#define K8S_CALL_TIMEOUT_MS 30000

/* Where the API server is and who we are to it: one kubeconfig context, or the pod's service
 * account. Owned by the provider; secrets are wiped when it is freed. */
typedef struct k8s_cluster {
    char *server;    /* https://host:port (http only to loopback), no trailing slash */
    char *ca_file;   /* CA bundle file, or NULL */
    char *ca_pem;    /* CA bundle bytes (certificate-authority-data), or NULL */
    char *cert_file; /* client certificate file, or NULL */
    char *cert_pem;  /* client certificate bytes (client-certificate-data), or NULL */
    char *key_file;  /* client key file, or NULL */
    char *key_pem;   /* client key bytes (client-key-data), or NULL */
    char *token;     /* bearer token, or NULL */
    char *namespace; /* the context's (or service account's) namespace, or NULL */
    char *origin;    /* "kubeconfig FILE context NAME" or "in-cluster service account" */
} k8s_cluster;

/* Loads the cluster: the kubeconfig file `path` (context `context`, NULL = current-context),
 * or -- path NULL -- the in-cluster service account under sa_dir with the API server from
 * KUBERNETES_SERVICE_HOST/PORT. Errors are SBX_E_CONFIG naming the file, line and column. */
sbx_status k8s_cluster_load_kubeconfig(const char *path, const char *context, k8s_cluster *out,
                                       sbx_error *err);
sbx_status k8s_cluster_load_in_cluster(const char *sa_dir, k8s_cluster *out, sbx_error *err);
void k8s_cluster_clear(k8s_cluster *c);

/* Who a call is made as: the provider's own identity (user NULL), or a user impersonated with
 * Impersonate-User and one Impersonate-Group per group. */
typedef struct k8s_identity {
    const char *user;
    const char *const *groups;
    size_t n_groups;
} k8s_identity;

/* Sets the cluster's TLS material on a curl handle (CA, client certificate and key; peer and
 * host verification on). */
void k8s_curl_tls(void *curl_handle, const k8s_cluster *c);

/* Output of one exec, bounded per stream; streamed to the callback as it arrives. */
typedef struct k8s_exec_io {
    const uint8_t *stdin_data; /* NULL: no stdin */
    size_t stdin_len;
    sbx_result *result;        /* stdout/stderr/exit_code/outcome filled */
    const sbx_exec_opts *opts; /* deadline, output limit, streaming callback, cancel */
} k8s_exec_io;

/* Runs argv in pod ns/pod through the exec API (GET .../exec upgraded to a WebSocket,
 * subprotocol v5.channel.k8s.io, else v4.channel.k8s.io) and fills io->result. The exit code
 * comes from the channel-3 Status. SBX_E_TIMEOUT on the deadline (the API cannot kill the
 * process: it may run on), GONE on 404, the Status error of a refused upgrade otherwise.
 * (k8s_exec.c) */
sbx_status k8s_exec(const k8s_cluster *c, const k8s_identity *as, const char *ns, const char *pod,
                    const char *const *argv, size_t argc, k8s_exec_io *io, sbx_error *err);

/* One WebSocket frame header (k8s_exec.c; exposed for the fuzz harness). */
typedef struct k8s_ws_frame {
    uint8_t opcode;
    bool fin, masked;
    uint8_t mask[4];
    size_t payload_len;
} k8s_ws_frame;
/* Decodes the frame header at buf[0..len): its length, 0 when more bytes are needed, -1 for a
 * frame this client refuses (reserved bits or opcodes, fragmented or long control frames, a
 * payload above 1 MiB). */
int k8s_ws_frame_header(const uint8_t *buf, size_t len, k8s_ws_frame *f);
/* The exit code from the exec's final Status (channel 3): Success -> 0, NonZeroExitCode with an
 * ExitCode cause -> that code (0..255); anything else is PROVISION with the API's message. */
sbx_status k8s_exec_exit_status(const uint8_t *text, size_t len, int *code, sbx_error *err);

/* Initialises libcurl once per process (call before the first k8s_call; thread-safe). */
void k8s_api_init(void);

/* One API call. body (may be NULL) is sent as JSON. On SBX_OK *status is the HTTP status and
 * *out the parsed JSON body (an object, or NULL when the body was empty / not JSON); the caller
 * decides what a status means. Transport failures: SBX_E_PROVISION, or SBX_E_TIMEOUT once the
 * deadline (monotonic ms, 0 = none) passed. */
sbx_status k8s_call(const k8s_cluster *c, const char *method, const char *path, const json_t *body,
                    const k8s_identity *as, int64_t deadline_mono_ms, long *status, json_t **out,
                    sbx_error *err);
/* An error for a failed call from the Status object the API server sent (reason, message):
 * "kubernetes: POST /api/v1/... answered 403 (Forbidden): pods is forbidden: ...". Codes:
 * 401 -> CONFIG, 403 -> PERMISSION_DENIED, 404/410 -> GONE, 409 -> PROVISION, 400/422 ->
 * INVALID_ARGUMENT, 429 -> RESOURCE_EXHAUSTED, else PROVISION; a 2xx without a JSON object
 * (body NULL: a proxy's page) says so, PROVISION. */
sbx_status k8s_status_error(const char *method, const char *path, long status, const json_t *body,
                            sbx_error *err);

#endif
