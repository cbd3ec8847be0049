/* test_kubernetes_live.c - live smoke test of the kubernetes provider against a real cluster,
 * through the engine: run a command, run stateful python, round-trip a file, destroy twice, and
 * check that the pod is gone. Runs only when SBX_TEST_KUBECONFIG names a kubeconfig and
 * SBX_TEST_K8S_AGENT_IMAGE an image holding the static sbx-agent (at SBX_TEST_K8S_AGENT_PATH,
 * default /usr/libexec/sbx/sbx-agent); otherwise prints "skipped: ..." and exits 77 (a ctest
 * skip). SBX_TEST_K8S_NAMESPACE (default: the context's), SBX_TEST_K8S_IMAGE (default
 * python:3.12-slim), SBX_TEST_K8S_NETWORK_POLICY=1 (the CNI enforces NetworkPolicy: the policy
 * then denies egress). The worker running this must reach pod IPs (run it in the cluster, or on
 * a node).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"

#define SKIP 77

static int failures;

static void check(int ok, const char *what, const sbx_completion *c)
{
    if (ok) {
        printf("ok: %s\n", what);
        return;
    }
    failures++;
    printf("FAIL: %s: %s\n", what, c && c->error && c->error[0] ? c->error : "unexpected result");
}

static sbx_completion *submit(sbx_broker *b, sbx_request *r, sbx_session_handle **session)
{
    sbx_set_string(&r->profile, "live");
    sbx_request_set_principal(r, SBX__V1__PRINCIPAL_MODE__PRINCIPAL_MODE_AGENT, "live-smoke");
    if (*session && r->session == NULL)
        r->session = (sbx_session_handle *)sbx_message_copy(&(*session)->base);
    sbx_completion *c = NULL;
    sbx_broker_submit(b, r, SBX_WAIT_FOREVER, NULL, &c);
    sbx_request_free(r);
    if (c && c->session && c->session->session_id[0] &&
        c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_FAILED) {
        if (*session)
            sbx_message_free(&(*session)->base);
        *session = (sbx_session_handle *)sbx_message_copy(&c->session->base);
    }
    return c;
}

static int stdout_is(const sbx_completion *c, const char *want)
{
    return c && c->result && c->result->stdout.len == strlen(want) &&
           memcmp(c->result->stdout.data, want, strlen(want)) == 0;
}

static const char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : def;
}

int main(void)
{
    const char *kc = getenv("SBX_TEST_KUBECONFIG");
    if (kc == NULL || kc[0] == '\0') {
        printf("skipped: SBX_TEST_KUBECONFIG not set (no cluster to run against)\n");
        return SKIP;
    }
    const char *agent_image = getenv("SBX_TEST_K8S_AGENT_IMAGE");
    if (agent_image == NULL || agent_image[0] == '\0') {
        printf("skipped: SBX_TEST_K8S_AGENT_IMAGE not set (an image holding the static "
               "sbx-agent)\n");
        return SKIP;
    }
    bool np = strcmp(env_or("SBX_TEST_K8S_NETWORK_POLICY", "0"), "1") == 0;
    const char *ns = env_or("SBX_TEST_K8S_NAMESPACE", "");
    char dir[] = "/tmp/sbx-k8s-live-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char *yaml = NULL;
    if (asprintf(&yaml,
                 "sandbox:\n  secret_file: %s/secret\n  profiles:\n    live:\n"
                 "      type: kubernetes\n"
                 "      policy: { network_egress: %s, cpu: 0.5, memory_mb: 256, pids: 0 }\n"
                 "      kubernetes: { kubeconfig: \"%s\", agent_image: \"%s\", "
                 "agent_image_path: \"%s\", image: \"%s\", network_policy: %s%s%s%s }\n",
                 dir, np ? "deny" : "allow", kc, agent_image,
                 env_or("SBX_TEST_K8S_AGENT_PATH", "/usr/libexec/sbx/sbx-agent"),
                 env_or("SBX_TEST_K8S_IMAGE", "python:3.12-slim"), np ? "true" : "false",
                 ns[0] ? ", namespace: \"" : "", ns, ns[0] ? "\"" : "") < 0)
        return 1;
    sbx_config *cfg = NULL;
    sbx_engine *engine = NULL;
    sbx_broker *broker = NULL;
    sbx_error err;
    if (sbx_config_load_string(yaml, strlen(yaml), "live.yaml", &cfg, &err) != SBX_OK ||
        sbx_engine_new(cfg, &engine, &err) != SBX_OK ||
        sbx_broker_open_embedded(engine, &broker, &err) != SBX_OK) {
        printf("FAIL: setup: %s\n", err.message);
        return 1;
    }
    free(yaml);
    sbx_session_handle *s = NULL;
    sbx_completion *c = submit(broker, sbx_request_shell("live", "echo live; id -u"), &s);
    check(stdout_is(c, "live\n65534\n"), "command in a new pod", c);
    sbx_completion_free(c);
    c = submit(broker, sbx_request_code("live", "python", "v = 20"), &s);
    sbx_completion_free(c);
    c = submit(broker, sbx_request_code("live", "python", "print(v * 2 + 2)"), &s);
    check(stdout_is(c, "42\n"), "stateful python", c);
    sbx_completion_free(c);
    c = submit(broker, sbx_request_write_file("live", "f.txt", "round trip", 10, 0), &s);
    sbx_completion_free(c);
    c = submit(broker, sbx_request_shell("live", "cat f.txt"), &s);
    check(stdout_is(c, "round trip"), "file round trip", c);
    sbx_completion_free(c);
    if (np) {
        c = submit(broker,
                   sbx_request_shell("live", "python3 -c \"import socket; "
                                             "socket.create_connection(('1.1.1.1', 53), 3)\" "
                                             ">/dev/null 2>&1 && echo open || echo closed"),
                   &s);
        check(stdout_is(c, "closed\n"), "egress denied by the NetworkPolicy", c);
        sbx_completion_free(c);
    }
    for (int i = 0; i < 2; i++) {
        c = submit(broker, sbx_request_destroy(s), &s);
        check(c && c->status == SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED,
              i == 0 ? "destroy" : "destroy again", c);
        sbx_completion_free(c);
    }
    if (s)
        sbx_message_free(&s->base);
    sbx_broker_free(broker);
    sbx_engine_free(engine);
    sbx_config_free(cfg);
    char path[128];
    snprintf(path, sizeof(path), "%s/secret", dir);
    unlink(path);
    rmdir(dir);
    printf("%s\n", failures ? "live smoke FAILED" : "live smoke passed");
    return failures ? 1 : 0;
}
