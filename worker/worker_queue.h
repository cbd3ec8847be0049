/* worker_queue.h - sbx-worker's JetStream consumer (worker/queue.c): pulls requests from the
 * queue's shared work subject and from this node's own subject, runs them through the worker's
 * broker and stores each completion in the fleet's bucket (broker/jetstream.h). Private to
 * worker/. */
#ifndef SBX_WORKER_QUEUE_H
#define SBX_WORKER_QUEUE_H

#include <stdio.h>

#include "sbx/broker.h"
#include "sbx/config.h"
#include "sbx/status.h"

typedef struct worker_queue worker_queue;

/* Connects to cfg->broker.queue, makes sure the stream, the bucket and the two durable pull
 * consumers exist, resolves the callers' tokens (cfg->worker.auth: the same rules as gRPC) and
 * starts consuming: at most `capacity` requests of each subject at a time (capacity <= 0:
 * cfg->broker.threads). broker runs the requests (its blocking submit is called from the
 * consumer's threads); cfg and broker are borrowed and must outlive the consumer. Redeliveries
 * and dropped messages are reported on log, one line each. */
sbx_status worker_queue_start(const sbx_config *cfg, sbx_broker *broker, int capacity, FILE *log,
                              worker_queue **out, sbx_error *err);
/* Stops pulling, lets the requests in flight finish, stores their completions, closes. NULL is
 * fine. */
void worker_queue_stop(worker_queue *q);

#endif
