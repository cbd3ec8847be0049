/* serve.c - the whole life of a worker process, shared by `sbx-worker` and `sbx worker serve`:
 * parse the shared options, load the configuration with them applied, open the engine and the
 * broker that runs executions, sweep, bind and/or start consuming the queue (worker.serve:
 * grpc, queue or both), announce, serve until SIGTERM/SIGINT (SIGHUP reopens the log and record
 * files), drain, exit with a status of the one table in worker.h.
 * The only file of worker/ that installs signal handlers (it runs in a program's main thread,
 * never in a library caller's).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/worker.h"
#include "worker/worker_queue.h"

static sbx_worker *volatile signal_target;
/* Written by the handler: wakes a queue-only worker's main thread (write is async-signal-safe). */
static volatile int signal_pipe = -1;

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGHUP) {
        sbx_worker_reopen(signal_target);
    } else {
        sbx_worker_shutdown(signal_target);
        if (signal_pipe >= 0 && write(signal_pipe, "x", 1) < 0) {
            /* nothing to do: the pipe is only a wake-up */
        }
    }
    errno = saved;
}

int sbx_worker_serve_parse_arg(sbx_worker_serve_opts *opts, int argc, char **argv, int *i)
{
    static const struct {
        const char *flag;
        size_t offset;
    } table[] = {
        {"--config", offsetof(sbx_worker_serve_opts, config_path)},
        {"--listen", offsetof(sbx_worker_serve_opts, listen)},
        {"--log-level", offsetof(sbx_worker_serve_opts, log_level)},
        {"--metrics-listen", offsetof(sbx_worker_serve_opts, metrics_listen)},
    };
    const char *arg = argv[*i];
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
        size_t n = strlen(table[k].flag);
        if (strncmp(arg, table[k].flag, n) != 0 || (arg[n] != '\0' && arg[n] != '='))
            continue;
        const char **field = (const char **)(void *)((char *)opts + table[k].offset);
        if (arg[n] == '=') {
            *field = arg + n + 1;
            return 1;
        }
        if (*i + 1 >= argc)
            return -1;
        *field = argv[++*i];
        return 1;
    }
    return 0;
}

/* Long because it is `sbx worker`'s life in order (open, find the node's sandboxes again, the
 * listeners, the ready lines, serve, drain, close), a few lines each. */
int sbx_worker_serve(const sbx_worker_serve_opts *opts, FILE *log)
{
    sbx_worker_serve_opts none = {0};
    if (!opts)
        opts = &none;
    sbx_error err = {0};
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_worker *w = NULL;
    sbx_strlist swept = {0};
    worker_queue *wq = NULL;
    int pipe_fds[2] = {-1, -1};
    int rc = SBX_WORKER_EXIT_FAILED;
    sbx_config_overrides ov = {.worker_listen = opts->listen,
                               .worker_log_level = opts->log_level,
                               .worker_metrics_listen = opts->metrics_listen};
    if (sbx_config_load_with(opts->config_path, &ov, &cfg, &err) != SBX_OK)
        goto out;
    if (cfg->broker.flavor && strcmp(cfg->broker.flavor, "remote") == 0) {
        sbx_error_set(&err, SBX_E_CONFIG,
                      "%s: broker.flavor is 'remote', but a worker runs executions itself: use "
                      "'thread' for the worker's configuration",
                      cfg->path ? cfg->path : "configuration");
        goto out;
    }
    if (sbx_engine_new(cfg, &engine, &err) != SBX_OK)
        goto out;
    /* A restarted worker: its node's per_session sandboxes are found again by their handles;
     * what nobody can reach (per_call sandboxes of a killed worker or CLI, dead ones) goes. */
    sbx_error sweep_err = {0};
    sbx_status sweep_st = sbx_engine_sweep(engine, &swept, &sweep_err);
    if (sbx_broker_open(cfg, engine, &broker, &err) != SBX_OK)
        goto out;
    bool grpc = cfg->worker.serve == NULL || strcmp(cfg->worker.serve, "queue") != 0;
    bool queue = cfg->worker.serve != NULL && strcmp(cfg->worker.serve, "grpc") != 0;
    if (grpc && sbx_worker_new(cfg, engine, broker, &w, &err) != SBX_OK)
        goto out;
    if (grpc && sbx_worker_log_to(w, cfg->worker.log_file, cfg->worker.log_level, &err) != SBX_OK)
        goto out;
    /* sbx_worker_new turns recording on for gRPC; a queue-only worker records the same way. */
    if (!grpc && cfg->worker.record != NULL &&
        sbx_broker_record_to(broker, cfg->worker.record, &err) != SBX_OK)
        goto out;
    if (!grpc && pipe2(pipe_fds, O_CLOEXEC) != 0) {
        sbx_error_set(&err, SBX_E_INTERNAL, "cannot create a pipe: %s", strerror(errno));
        goto out;
    }

    signal(SIGPIPE, SIG_IGN);
    signal_target = w;
    signal_pipe = pipe_fds[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    /* One machine-readable line each: tests and supervisors learn the (possibly ephemeral)
     * ports, and that the queue is being consumed. */
    if (grpc && sbx_worker_metrics_port(w) > 0)
        fprintf(log, "sbx-worker listening on port %d (broker %s, metrics on port %d)\n",
                sbx_worker_port(w), sbx_broker_flavor(broker), sbx_worker_metrics_port(w));
    else if (grpc)
        fprintf(log, "sbx-worker listening on port %d (broker %s)\n", sbx_worker_port(w),
                sbx_broker_flavor(broker));
    for (size_t i = 0; i < swept.n; i++)
        fprintf(log, "sbx-worker: swept %s (its owner is gone or it was dead)\n", swept.items[i]);
    if (sweep_st != SBX_OK)
        fprintf(log, "sbx-worker: sweep: %s\n", sweep_err.message);
    fflush(log);
    if (queue) {
        if (worker_queue_start(cfg, broker, 0, log, &wq, &err) != SBX_OK)
            goto out;
        fprintf(log, "sbx-worker consuming queue '%s' at %s as node %s\n", cfg->broker.queue.name,
                cfg->broker.queue.url, cfg->node);
        fflush(log);
    }
    sbx_status served = SBX_OK;
    if (grpc) {
        served = sbx_worker_run(w, &err);
    } else {
        char c;
        while (read(pipe_fds[0], &c, 1) < 0 && errno == EINTR) {
        }
    }
    /* Drain: the queue's in-flight requests finish and their completions are stored. */
    worker_queue_stop(wq);
    wq = NULL;
    if (served == SBX_OK) {
        rc = SBX_WORKER_EXIT_OK;
        fprintf(log, "sbx-worker drained, exiting\n");
    }
out:
    if (rc != SBX_WORKER_EXIT_OK && err.message[0])
        fprintf(log, "sbx-worker: %s\n", err.message);
    if (rc != SBX_WORKER_EXIT_OK && err.code == SBX_E_CONFIG)
        rc = SBX_WORKER_EXIT_CONFIG;
    signal_target = NULL;
    signal_pipe = -1;
    worker_queue_stop(wq);
    for (int i = 0; i < 2; i++)
        if (pipe_fds[i] >= 0)
            close(pipe_fds[i]);
    sbx_worker_free(w);
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    sbx_strlist_clear(&swept);
    return rc;
}
