/* serve.c - the whole life of a worker process, shared by `sbx-worker` and `sbx worker serve`:
 * load the configuration, open the engine and the broker that runs executions, bind, announce
 * the port, serve until SIGTERM/SIGINT, drain, exit 0. The only file of worker/ that installs
 * signal handlers (it runs in a program's main thread, never in a library caller's). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/worker.h"

static sbx_worker *volatile signal_target;

static void on_signal(int sig)
{
    (void)sig;
    sbx_worker_shutdown(signal_target);
}

/* Returns the process exit status: 0 after a clean drain, 2 for a configuration error, 1 for
 * anything else. Errors go to log (stderr), one line each, naming the fix. */
int sbx_worker_serve_main(const char *config_path, const char *listen_addr, FILE *log)
{
    sbx_error err = {0};
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_worker *w = NULL;
    sbx_strlist swept = {0};
    int rc = 1;
    if (sbx_config_load(config_path, &cfg, &err) != SBX_OK)
        goto out;
    if (listen_addr) {
        char *copy = strdup(listen_addr);
        if (!copy) {
            sbx_error_set(&err, SBX_E_INTERNAL, "out of memory");
            goto out;
        }
        free(cfg->worker.listen);
        cfg->worker.listen = copy;
    }
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
    if (sbx_worker_new(cfg, engine, broker, &w, &err) != SBX_OK)
        goto out;

    signal(SIGPIPE, SIG_IGN);
    signal_target = w;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    /* One machine-readable line: tests and supervisors learn the (possibly ephemeral) port. */
    fprintf(log, "sbx-worker listening on port %d (broker %s)\n", sbx_worker_port(w),
            sbx_broker_flavor(broker));
    for (size_t i = 0; i < swept.n; i++)
        fprintf(log, "sbx-worker: swept %s (its owner is gone or it was dead)\n", swept.items[i]);
    if (sweep_st != SBX_OK)
        fprintf(log, "sbx-worker: sweep: %s\n", sweep_err.message);
    fflush(log);
    if (sbx_worker_run(w, &err) == SBX_OK) {
        rc = 0;
        fprintf(log, "sbx-worker drained, exiting\n");
    }
out:
    if (rc != 0 && err.message[0])
        fprintf(log, "sbx-worker: %s\n", err.message);
    if (rc != 0 && err.code == SBX_E_CONFIG)
        rc = 2;
    signal_target = NULL;
    sbx_worker_free(w);
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    sbx_strlist_clear(&swept);
    return rc;
}
