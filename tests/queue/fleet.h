/* fleet.h - a real queue fleet for tests: nats-server with JetStream on an ephemeral loopback
 * port (store in a temp dir), sbx-worker processes consuming it (fake provider), and queue
 * brokers connected to it. Everything started here is stopped by fleet_stop. */
#ifndef SBX_TESTS_QUEUE_FLEET_H
#define SBX_TESTS_QUEUE_FLEET_H

#include <stdbool.h>
#include <sys/types.h>

#include "sbx/broker.h"
#include "sbx/config.h"

/* Most workers and NATS servers one fleet starts. */
#define FLEET_MAX_WORKERS 8
#define FLEET_MAX_SERVERS 3

/* The bearer token the fleet's workers accept (from FLEET_TOKEN_ENV) for subjects tenant-a,
 * tenant-b and alice. */
#define FLEET_TOKEN_ENV "SBX_TEST_QUEUE_TOKEN"

typedef struct fleet {
    char dir[256];
    const char *worker_bin;
    int n_servers;
    int nats_port[FLEET_MAX_SERVERS];
    int cluster_port[FLEET_MAX_SERVERS];
    pid_t nats_pid[FLEET_MAX_SERVERS];
    int n_workers;
    pid_t worker_pid[FLEET_MAX_WORKERS];
    char node[FLEET_MAX_WORKERS][32];
    char url[512];                    /* nats://127.0.0.1:P1,nats://127.0.0.1:P2,... */
    int ack_wait_ms;                  /* queue.ack_wait_ms of workers and brokers */
    int node_wait_ms;                 /* queue.node_wait_ms */
    int replicas;                     /* queue.replicas */
    int threads;                      /* workers' broker.threads (their capacity) */
    const char *serve;                /* workers' worker.serve: "queue" (default) or "both" */
    int grpc_port[FLEET_MAX_WORKERS]; /* serve "both": each worker's gRPC port */
    bool stop_hung;                   /* a worker did not exit on its signal (fleet_kill_worker) */
    bool no_record;                   /* workers do not record executions (benchmarks) */
    sbx_config *client_cfg;           /* the brokers' configuration (kept for its queue block) */
    bool tenants; /* NATS users: "worker" (everything) and, per FLEET_TENANTS, a tenant that
                   * may use only its own partition and inbox (deploy/README's permissions) */
    bool tls;     /* one nats-server that demands TLS and a client certificate of the fleet's CA
                   * (ca.pem in dir): workers and brokers connect to tls:// with ca_file, cert_file
                   * (client.pem) and key_file; dir holds the rest of support/pki.h's files */
} fleet;

/* The tenants of a fleet with tenants set: NATS user (and principal subject) tenant-a and
 * tenant-b, password "<user>-pass", inbox prefix _INBOX_<user>. */
#define FLEET_TENANT_PASSWORD_ENV "SBX_TEST_NATS_TENANT_PASSWORD"

/* Sets defaults and makes the temp dir; worker_bin is the sbx-worker executable. */
void fleet_init(fleet *f, const char *worker_bin);
/* Starts n NATS servers (n > 1: a JetStream cluster on loopback) and waits until each accepts
 * connections. */
void fleet_start_nats(fleet *f, int n);
/* Kills NATS server i with SIGKILL. */
void fleet_kill_nats(fleet *f, int i);
/* Starts worker i as node "node-<i>" and waits for its "consuming" line (and, serving both,
 * learns its gRPC port). */
void fleet_start_worker(fleet *f, int i);
/* Sends sig to worker i and waits for it. */
void fleet_kill_worker(fleet *f, int i, int sig);
/* A queue broker on the fleet (token from FLEET_TOKEN_ENV unless token_env overrides it; ""
 * for none). */
sbx_broker *fleet_broker(fleet *f, const char *token_env);
/* The brokers' configuration (its queue block points at the fleet); caller frees. */
sbx_config *fleet_client_config(fleet *f);
/* A queue broker logged in to NATS as tenant user (fleet with tenants), with its inbox prefix. */
sbx_broker *fleet_tenant_broker(fleet *f, const char *user);
/* Executions per task id recorded by worker i (worker.record): calls fn for each. */
void fleet_recorded(fleet *f, int i, void (*fn)(void *arg, const char *task_id), void *arg);
/* Stops every process and removes the temp dir. */
void fleet_stop(fleet *f);

#endif
