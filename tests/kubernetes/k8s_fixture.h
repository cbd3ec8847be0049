/* k8s_fixture.h - the kubernetes provider's tests: the fake API server (fake_k8s.py, a real
 * process on a loopback port whose pods run the real sbx-agent), a kubeconfig pointing at it,
 * an engine over a one-profile config, requests, and the fake's request log.
 */
#ifndef SBX_TESTS_K8S_FIXTURE_H
#define SBX_TESTS_K8S_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#include <jansson.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/engine.h"

/* The namespace the fake serves. */
#define KT_NS "sbx"
#define KT_TOKEN "fake-worker-token-5c1d"

typedef struct kt_fake {
    pid_t pid;
    int port;
    char dir[64];         /* temp dir: kubeconfig, secret, certificates */
    char tmp[64];         /* the fake's TMPDIR (its pods' directories): empty once it stopped */
    char kubeconfig[128]; /* bearer-token kubeconfig (http on loopback) */
    char url[64];         /* http://127.0.0.1:PORT */
    bool tls;             /* started with certificates (https, client CA) */
} kt_fake;

/* Starts the fake (plain http, bearer token). extra: more fake_k8s.py args or NULL. */
void kt_fake_start(kt_fake *f, const char *const *extra);
/* Starts it with TLS: a CA, a server certificate for 127.0.0.1 and a client certificate
 * (CN sbx-worker) made with openssl under f->dir (ca.pem, server.pem, client.pem, ...). */
void kt_fake_start_tls(kt_fake *f);
void kt_fake_stop(kt_fake *f);
/* POST /_fake/<what> with a JSON body (text); fails the test on error. */
void kt_fake_control(const kt_fake *f, const char *what, const char *json);
/* GET /_fake/requests: the array of logged requests (new reference). */
json_t *kt_fake_requests(const kt_fake *f);
/* The logged requests matching method and a path substring (new array). */
json_t *kt_requests_matching(const kt_fake *f, const char *method, const char *path_part);
/* HTTP GET of an API path on the fake with the token: the status (404 ...). */
long kt_fake_get(const kt_fake *f, const char *path, json_t **body);
/* HTTP DELETE of an API path on the fake (as a cluster user would delete the object). */
long kt_fake_delete(const kt_fake *f, const char *path);

/* The YAML of a config with one profile "k" of type kubernetes pointed at the fake. policy and
 * options are YAML flow-mapping contents ("network_egress: deny", "create_timeout_s: 5"). */
char *kt_yaml(const kt_fake *f, const char *profile_extra, const char *policy, const char *options);

typedef struct kt_env {
    sbx_config *cfg;
    sbx_engine *engine;
    sbx_broker *broker;
} kt_env;

void kt_env_open(kt_env *e, const kt_fake *f, const char *yaml);
void kt_env_close(kt_env *e);

/* Requests on profile "k"; *session (may point to NULL) is updated from the completion. */
sbx_completion *kt_shell(kt_env *e, sbx_session_handle **session, const char *line);
sbx_completion *kt_submit(kt_env *e, sbx_request *r, sbx_session_handle **session);
/* stdout of a completion as a static NUL-terminated string. */
const char *kt_stdout(const sbx_completion *c);

/* The path of the sbx-agent under test ($SBX_AGENT). */
const char *kt_agent(void);

#endif
