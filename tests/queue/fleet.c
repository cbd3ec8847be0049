/* fleet.c - see fleet.h. */
#include "queue/fleet.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbx/recorder.h"
#include "support/die_with_parent.h"
#include "support/pki.h"

/* How long a process may take to come up on a loaded machine. */
#define FLEET_START_WAIT_MS 60000
/* How long a signalled worker may take to exit (its drain included) before it is killed. */
#define FLEET_STOP_WAIT_MS 60000

static void die(const char *what)
{
    fprintf(stderr, "fleet: %s\n", what);
    abort();
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* A free loopback port (bound then released: another process may take it in between, which
 * the callers' start-up waits turn into a clear failure). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("no free port");
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static bool file_has(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, fp) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(fp);
    return found;
}

#define FLEET_WORKER_PASSWORD_ENV "SBX_TEST_NATS_WORKER_PASSWORD"

/* Forked from the test's main thread (die_with_parent.h): nats-server and the workers die with
 * the test, even one killed before fleet_stop. SIGKILL for both: the store and the recordings
 * are in the fleet's temp dir, which nothing else reads. */
static pid_t spawn(char *const argv[], const char *log)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        sbx_test_die_with_parent(parent, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

void fleet_init(fleet *f, const char *worker_bin)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof f->dir, "/tmp/sbx-queue-XXXXXX");
    if (mkdtemp(f->dir) == NULL)
        die("mkdtemp");
    f->worker_bin = worker_bin;
    f->ack_wait_ms = 2000;
    f->node_wait_ms = 3000;
    f->replicas = 1;
    f->threads = 4;
    f->serve = "queue";
    setenv(FLEET_TOKEN_ENV, "fleet-test-token-0123456789", 1);
    setenv(FLEET_WORKER_PASSWORD_ENV, "worker-pass", 1);
}

static const char *nats_server(void)
{
    static const char *const candidates[] = {"/usr/bin/nats-server", "/usr/sbin/nats-server",
                                             "/usr/local/bin/nats-server", NULL};
    for (int i = 0; candidates[i] != NULL; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    die("nats-server is not installed (scripts/install-deps.sh installs it)");
    return NULL;
}

/* The users of a fleet with tenants: the workers may do everything; each tenant only what a
 * submitter needs, within its partition (broker/jetstream.h) and its own inbox: the permissions
 * deploy/README gives operators. */
static void write_users(FILE *fp, const fleet *f)
{
    (void)f;
    fprintf(fp, "authorization {\n  users: [\n"
                "    { user: worker, password: worker-pass }\n");
    static const char *const tenants[] = {"tenant-a", "tenant-b"};
    for (int i = 0; i < 2; i++) {
        const char *t = tenants[i];
        fprintf(fp,
                "    { user: %s, password: %s-pass, permissions: {\n"
                "      publish: { allow: [\"sbx.work\", \"sbx.node.*\", \"sbx.cancel.s-%s.*\",\n"
                "        \"sbx.done.s-%s.*\", \"$KV.sbx_done.s-%s.*\",\n"
                "        \"$JS.API.STREAM.INFO.sbx_tasks\", \"$JS.API.STREAM.INFO.KV_sbx_done\",\n"
                "        \"$JS.API.DIRECT.GET.KV_sbx_done.$KV.sbx_done.s-%s.*\"] }\n"
                "      subscribe: { allow: [\"_INBOX_%s.>\", \"sbx.done.s-%s.*\", "
                "\"sbx.out.s-%s.*\"] }\n"
                "    } }\n",
                t, t, t, t, t, t, t, t, t);
    }
    fprintf(fp, "  ]\n}\n");
}

static void start_server(fleet *f, int i)
{
    char conf[512], store[512], log[512];
    snprintf(conf, sizeof conf, "%s/nats-%d.conf", f->dir, i);
    snprintf(store, sizeof store, "%s/js-%d", f->dir, i);
    snprintf(log, sizeof log, "%s/nats-%d.log", f->dir, i);
    FILE *fp = fopen(conf, "w");
    if (fp == NULL)
        die("nats config");
    fprintf(fp,
            "server_name: s%d\nhost: 127.0.0.1\nport: %d\n"
            "jetstream { store_dir: \"%s\" }\n",
            i, f->nats_port[i], store);
    if (f->tenants)
        write_users(fp, f);
    if (f->tls)
        fprintf(fp,
                "tls { cert_file: \"%s/server.pem\", key_file: \"%s/server.key\",\n"
                "  ca_file: \"%s/ca.pem\", verify: true, timeout: 5 }\n",
                f->dir, f->dir, f->dir);
    if (f->n_servers > 1) {
        fprintf(fp, "cluster { name: sbxtest\n  host: 127.0.0.1\n  port: %d\n  routes: [",
                f->cluster_port[i]);
        for (int j = 0; j < f->n_servers; j++)
            if (j != i)
                fprintf(fp, " \"nats-route://127.0.0.1:%d\",", f->cluster_port[j]);
        fprintf(fp, " ]\n}\n");
    }
    fclose(fp);
    char *argv[] = {(char *)nats_server(), "-c", conf, NULL};
    f->nats_pid[i] = spawn(argv, log);
}

void fleet_start_nats(fleet *f, int n)
{
    if (f->tls && n != 1)
        die("a TLS fleet has one nats-server (its routes would need TLS too)");
    if (f->tls && !sbx_test_make_pki(f->dir))
        die("openssl could not make the fleet's certificates");
    f->n_servers = n;
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        f->nats_port[i] = free_port();
        f->cluster_port[i] = free_port();
        off += (size_t)snprintf(f->url + off, sizeof f->url - off, "%s%s://127.0.0.1:%d",
                                i ? "," : "", f->tls ? "tls" : "nats", f->nats_port[i]);
    }
    for (int i = 0; i < n; i++)
        start_server(f, i);
    for (int i = 0; i < n; i++) {
        char log[512];
        snprintf(log, sizeof log, "%s/nats-%d.log", f->dir, i);
        int waited = 0;
        while (!file_has(log, "Server is ready")) {
            if (waited > FLEET_START_WAIT_MS)
                die("nats-server did not become ready (see its log in the temp dir)");
            sleep_ms(50);
            waited += 50;
        }
    }
    if (n > 1) { /* the cluster elects a JetStream meta leader after the routes connect */
        int waited = 0;
        bool leader = false;
        while (!leader && waited < FLEET_START_WAIT_MS) {
            for (int i = 0; i < n && !leader; i++) {
                char log[512];
                snprintf(log, sizeof log, "%s/nats-%d.log", f->dir, i);
                leader = file_has(log, "JetStream cluster new metadata leader") ||
                         file_has(log, "Self is new JetStream cluster metadata leader");
            }
            sleep_ms(100);
            waited += 100;
        }
    }
}

void fleet_kill_nats(fleet *f, int i)
{
    if (f->nats_pid[i] > 0) {
        kill(f->nats_pid[i], SIGKILL);
        waitpid(f->nats_pid[i], NULL, 0);
        f->nats_pid[i] = 0;
    }
}

static void write_config(fleet *f, const char *path, const char *node, bool worker)
{
    FILE *fp = fopen(path, "w");
    if (fp == NULL)
        die("config");
    fprintf(fp,
            "sandbox:\n"
            "  node: %s\n"
            "  secret_file: %s/secret\n"
            "  runtime_dir: %s/run-%s\n"
            "  default_profile: fake\n"
            "  broker:\n"
            "    flavor: %s\n"
            "    threads: %d\n"
            "    queue:\n"
            "      url: \"%s\"\n"
            "      ack_wait_ms: %d\n"
            "      node_wait_ms: %d\n"
            "      replicas: %d\n"
            "      token_env: %s\n",
            node, f->dir, f->dir, node, worker ? "thread" : "queue", f->threads, f->url,
            f->ack_wait_ms, f->node_wait_ms, f->replicas, FLEET_TOKEN_ENV);
    if (worker && f->tenants)
        fprintf(fp, "      user: worker\n      password_env: %s\n", FLEET_WORKER_PASSWORD_ENV);
    if (f->tls)
        fprintf(fp,
                "      ca_file: %s/ca.pem\n      cert_file: %s/client.pem\n"
                "      key_file: %s/client.key\n",
                f->dir, f->dir, f->dir);
    if (worker)
        fprintf(fp,
                "  worker:\n"
                "    serve: %s\n"
                "    listen: 127.0.0.1:0\n"
                "    %s: %s/rec-%s\n"
                "    auth:\n"
                "      callers:\n"
                "        - { name: agent, token_env: %s, subjects: [tenant-a, tenant-b, alice] }\n",
                f->serve, f->no_record ? "# record" : "record", f->dir, node, FLEET_TOKEN_ENV);
    fprintf(fp, "  profiles:\n"
                "    fake: { type: fake }\n"
                "    oneshot: { type: fake, scope: per_call }\n"
                "    slow: { type: fake, scope: per_call, fake: { slow_ms: 20 } }\n"
                "    sleepy: { type: fake, scope: per_call, fake: { slow_ms: 3000 } }\n");
    fclose(fp);
}

void fleet_start_worker(fleet *f, int i)
{
    snprintf(f->node[i], sizeof f->node[i], "node-%d", i);
    char cfg[512], log[512];
    snprintf(cfg, sizeof cfg, "%s/worker-%d.yaml", f->dir, i);
    snprintf(log, sizeof log, "%s/worker-%d.log", f->dir, i);
    write_config(f, cfg, f->node[i], true);
    unlink(log);
    char *argv[] = {(char *)f->worker_bin, "--config", cfg, NULL};
    f->worker_pid[i] = spawn(argv, log);
    if (i >= f->n_workers)
        f->n_workers = i + 1;
    int waited = 0;
    while (!file_has(log, "consuming queue")) {
        int status;
        if (waitpid(f->worker_pid[i], &status, WNOHANG) == f->worker_pid[i]) {
            char cmd[600];
            snprintf(cmd, sizeof cmd, "cat %s >&2", log);
            if (system(cmd) != 0)
                fprintf(stderr, "(no log)\n");
            die("the worker exited during start-up (its log is above)");
        }
        if (waited > FLEET_START_WAIT_MS)
            die("the worker did not start consuming");
        sleep_ms(50);
        waited += 50;
    }
    f->grpc_port[i] = 0;
    FILE *fp = fopen(log, "r");
    char line[512];
    while (fp != NULL && fgets(line, sizeof line, fp) != NULL)
        if (sscanf(line, "sbx-worker listening on port %d", &f->grpc_port[i]) == 1)
            break;
    if (fp != NULL)
        fclose(fp);
}

void fleet_kill_worker(fleet *f, int i, int sig)
{
    if (f->worker_pid[i] <= 0)
        return;
    kill(f->worker_pid[i], sig);
    /* Bounded: a worker whose shutdown hangs (once, in libnats' natsConnection_Close) made the
     * test wait for its whole ctest timeout (15 minutes) and say nothing. */
    int waited = 0;
    while (waitpid(f->worker_pid[i], NULL, WNOHANG) == 0) {
        if (waited >= FLEET_STOP_WAIT_MS) {
            kill(f->worker_pid[i], SIGKILL);
            waitpid(f->worker_pid[i], NULL, 0);
            f->worker_pid[i] = 0;
            fprintf(stderr,
                    "fleet: worker %d did not exit within %d ms of signal %d (killed); "
                    "the end of its log:\n",
                    i, FLEET_STOP_WAIT_MS, sig);
            char cmd[400];
            snprintf(cmd, sizeof cmd, "tail -n 20 '%s/worker-%d.log' >&2", f->dir, i);
            if (system(cmd) != 0)
                fprintf(stderr, "fleet: (no log)\n");
            f->stop_hung = true; /* fails the test once fleet_stop has cleaned up */
            return;
        }
        sleep_ms(50);
        waited += 50;
    }
    f->worker_pid[i] = 0;
}

/* The brokers' configuration, written to dir/<name>.yaml and loaded (aborts on failure). */
static sbx_config *client_config(fleet *f, const char *name)
{
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/%s.yaml", f->dir, name);
    write_config(f, cfg, "client", false);
    sbx_config *c = NULL;
    sbx_error err;
    if (sbx_config_load(cfg, &c, &err) != SBX_OK) {
        fprintf(stderr, "fleet: %s\n", err.message);
        abort();
    }
    return c;
}

sbx_config *fleet_client_config(fleet *f)
{
    return client_config(f, "client");
}

sbx_broker *fleet_tenant_broker(fleet *f, const char *user)
{
    char name[64], inbox[64], password[64];
    snprintf(name, sizeof name, "client-%s", user);
    sbx_config *c = client_config(f, name);
    sbx_error err;
    snprintf(inbox, sizeof inbox, "_INBOX_%s", user);
    snprintf(password, sizeof password, "%s-pass", user);
    setenv(FLEET_TENANT_PASSWORD_ENV, password, 1); /* read once, at the connect below */
    sbx_queue_config *q = &c->broker.queue;
    q->user = strdup(user);
    q->password_env = strdup(FLEET_TENANT_PASSWORD_ENV);
    q->inbox_prefix = strdup(inbox);
    sbx_broker *b = NULL;
    if (sbx_broker_open_queue(q, &b, &err) != SBX_OK) {
        fprintf(stderr, "fleet: queue broker of %s: %s\n", user, err.message);
        abort();
    }
    sbx_config_free(c);
    return b;
}

sbx_broker *fleet_broker(fleet *f, const char *token_env)
{
    sbx_config *c = client_config(f, "client");
    sbx_error err;
    if (token_env != NULL) {
        free(c->broker.queue.token_env);
        c->broker.queue.token_env = token_env[0] ? strdup(token_env) : NULL;
    }
    sbx_broker *b = NULL;
    if (sbx_broker_open_queue(&c->broker.queue, &b, &err) != SBX_OK) {
        fprintf(stderr, "fleet: queue broker: %s\n", err.message);
        abort();
    }
    sbx_config_free(c); /* the broker copies its block */
    return b;
}

void fleet_recorded(fleet *f, int i, void (*fn)(void *arg, const char *task_id), void *arg)
{
    char path[512];
    snprintf(path, sizeof path, "%s/rec-%s", f->dir, f->node[i]);
    sbx_recording_reader *r = NULL;
    sbx_error err;
    if (sbx_recording_reader_open(path, &r, &err) != SBX_OK)
        return; /* nothing recorded */
    for (;;) {
        sbx_recording *rec = NULL;
        /* A worker killed with SIGKILL may leave a short last frame: stop there. */
        if (sbx_recording_reader_next(r, &rec, &err) != SBX_OK || rec == NULL)
            break;
        if (rec->request != NULL && rec->request->task_id != NULL)
            fn(arg, rec->request->task_id);
        sbx_message_free(&rec->base);
    }
    sbx_recording_reader_close(r);
}

void fleet_stop(fleet *f)
{
    for (int i = 0; i < f->n_workers; i++)
        fleet_kill_worker(f, i, SIGTERM);
    for (int i = 0; i < f->n_servers; i++)
        if (f->nats_pid[i] > 0) {
            kill(f->nats_pid[i], SIGTERM);
            waitpid(f->nats_pid[i], NULL, 0);
            f->nats_pid[i] = 0;
        }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "fleet: could not remove %s\n", f->dir);
    if (f->stop_hung)
        die("a worker did not exit on its signal (above); everything else was stopped");
}
