/* health.c - the gRPC health protocol (grpc.health.v1.Health): Check answers once; Watch sends
 * the current status and then every change until the drain ends the stream. The served
 * services are "" (the whole server), sbx.v1.Execution and the health service itself; the
 * status is NOT_SERVING from the moment shutdown is asked. Loop thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "worker/server_impl.h"

static bool health_service_known(const char *service)
{
    return service[0] == '\0' || strcmp(service, "sbx.v1.Execution") == 0 ||
           strcmp(service, "grpc.health.v1.Health") == 0;
}

/* Sends one HealthCheckResponse on a Watch stream (which stays open). */
static void watch_send(call *c, Grpc__Health__V1__HealthCheckResponse__ServingStatus status)
{
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = status;
    size_t len;
    uint8_t *framed = sbx_grpc_frame_message(&resp.base, &len);
    if (!framed || !worker_call_append(c, framed, len)) {
        free(framed);
        worker_call_decide(c, SBX_GRPC_INTERNAL, "worker: out of memory answering Health/Watch");
        return;
    }
    free(framed);
    worker_call_start_response(c);
    worker_call_resume(c);
}

static Grpc__Health__V1__HealthCheckResponse__ServingStatus serving_status(const sbx_worker *w)
{
    return w->not_serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                          : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
}

/* The request of Check and Watch, or NULL once the call is answered INTERNAL (as gRPC answers a
 * request it cannot deserialize). */
static Grpc__Health__V1__HealthCheckRequest *health_request(call *c, const uint8_t *msg,
                                                            size_t mlen)
{
    Grpc__Health__V1__HealthCheckRequest *hr =
        grpc__health__v1__health_check_request__unpack(NULL, mlen, msg);
    if (!hr)
        worker_call_decide(c, SBX_GRPC_INTERNAL, "malformed HealthCheckRequest");
    return hr;
}

/* Health/Watch: the current status now, then every change (worker_health_changed) until the drain
 * ends the stream. An unknown service is SERVICE_UNKNOWN on the stream, as the protocol says
 * (Check answers NOT_FOUND instead). */
void worker_health_watch(call *c, const uint8_t *msg, size_t mlen)
{
    Grpc__Health__V1__HealthCheckRequest *hr = health_request(c, msg, mlen);
    if (!hr)
        return;
    c->watch_known = health_service_known(hr->service);
    grpc__health__v1__health_check_request__free_unpacked(hr, NULL);
    watch_send(c, c->watch_known
                      ? serving_status(c->w)
                      : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN);
}

/* Every open Watch of a served service learns the new status (loop thread). */
void worker_health_changed(sbx_worker *w)
{
    for (conn *cn = w->conns; cn; cn = cn->next)
        for (call *c = cn->calls; c; c = c->next)
            if (c->method == RPC_HEALTH_WATCH && c->watch_known && c->response_started &&
                !c->decided)
                watch_send(c, serving_status(w));
}

/* Health/Check: SERVING, or NOT_SERVING once shutdown was asked; an unknown service is
 * NOT_FOUND (Watch answers SERVICE_UNKNOWN on its stream instead). */
void worker_health_check(call *c, const uint8_t *msg, size_t mlen)
{
    Grpc__Health__V1__HealthCheckRequest *hr = health_request(c, msg, mlen);
    if (!hr)
        return;
    if (!health_service_known(hr->service)) {
        worker_call_decide(c, SBX_GRPC_NOT_FOUND, "unknown service '%.200s'", hr->service);
    } else {
        Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        resp.status = serving_status(c->w);
        worker_call_reply(c, &resp.base);
    }
    grpc__health__v1__health_check_request__free_unpacked(hr, NULL);
}
