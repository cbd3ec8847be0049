/* fuzz_daytona.c - libFuzzer harness for everything the Daytona provider reads from Daytona
 * (providers/daytona/: the REST API's sandbox JSON and its state machine while a sandbox
 * starts, the toolbox's process/execute, file download, listing and folder answers, NestJS
 * error bodies), through a scripted server (fuzz_cloud.h) that answers the provider's calls in
 * order with the input's responses. The provider is opened once; create_timeout_s is 1 so a
 * sandbox that never starts costs an input at most a second. A second provider, for
 * per_session sessions, then lists what it holds (list_held: GET /sandbox by labels, page by
 * page through nextCursor).
 *
 * Properties (fuzz_cloud.h): no crash, leak or hang; failures carry a text that never shows
 * the API key; output within the limit; a sandbox only with an id; a listed sandbox only with
 * an id fit for a path and a subject. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakes/fake_daytona.h"
#include "fuzz/fuzz_cloud.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const sbx_provider_ops sbx_provider_daytona;

#define FUZZ_KEY_ENV "SBX_FUZZ_DAYTONA_KEY"
#define FUZZ_KEY "dtn_fuzz_key_5b0e8c3f71a2"

static fuzz_cloud server;
static sbx_options *opts;
static void *state;
static void *session_state; /* per_session: list_held */

static void at_exit(void)
{
    sbx_provider_daytona.close(state);
    sbx_provider_daytona.close(session_state);
    sbx_options_free(opts);
    fuzz_cloud_stop(&server);
}

static void open_provider(const char *url);

/* SBX_FUZZ_RECORD=FILE: drive the project's fake instead, write its answers as a seed. */
static void record(const char *path)
{
    setenv(FUZZ_KEY_ENV, FUZZ_KEY, 1);
    fake_daytona *rf = fake_daytona_start(FUZZ_KEY);
    if (!rf)
        abort();
    open_provider(fake_daytona_url(rf));
    /* two sandboxes of the per_session provider (not part of the script), listed one per page
     * after the drive */
    fuzz_cloud_drive_create(&sbx_provider_daytona, session_state, "alice");
    fuzz_cloud_drive_create(&sbx_provider_daytona, session_state, "bob");
    fake_daytona_list_page(rf, 1);
    fake_http_log_clear(fake_daytona_http(rf));
    fuzz_cloud_drive(&sbx_provider_daytona, state, FUZZ_KEY, "fuzz-sandbox-1");
    fuzz_cloud_list_held(&sbx_provider_daytona, session_state, FUZZ_KEY);
    fuzz_cloud_record(fake_daytona_http(rf), path);
    sbx_provider_daytona.close(state);
    sbx_provider_daytona.close(session_state);
    sbx_options_free(opts);
    fake_daytona_stop(rf);
    exit(0);
}

static void setup(void)
{
    const char *rec = getenv("SBX_FUZZ_RECORD");
    if (rec)
        record(rec);
    fuzz_cloud_start(&server);
    setenv(FUZZ_KEY_ENV, FUZZ_KEY, 1);
    open_provider(fake_http_url(server.http));
    atexit(at_exit);
}

static void open_provider(const char *url)
{
    const char *kv[] = {"api_key_env", FUZZ_KEY_ENV, "api_url", url, "create_timeout_s", "1", NULL};
    opts = sbx_options_new(sbx_provider_daytona.options);
    sbx_error err = {0};
    for (size_t i = 0; kv[i]; i += 2)
        if (sbx_options_set(opts, kv[i], kv[i + 1], &err) != SBX_OK) {
            fprintf(stderr, "fuzz_daytona: option %s: %s\n", kv[i], err.message);
            abort();
        }
    sbx_provider_ctx ctx = {
        .profile = "fuzz", .options = opts, .environment = SBX_ENV_MANAGED, .node = "n1"};
    sbx_provider_ctx sctx = ctx;
    sctx.scope = SBX_SCOPE_PER_SESSION;
    if (sbx_provider_daytona.open(&ctx, &state, &err) != SBX_OK ||
        sbx_provider_daytona.open(&sctx, &session_state, &err) != SBX_OK) {
        fprintf(stderr, "fuzz_daytona: open: %s\n", err.message);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!state)
        setup();
    fuzz_cloud_script(&server, data, size);
    fuzz_cloud_drive(&sbx_provider_daytona, state, FUZZ_KEY, "fuzz-sandbox-1");
    fuzz_cloud_list_held(&sbx_provider_daytona, session_state, FUZZ_KEY);
    return 0;
}
