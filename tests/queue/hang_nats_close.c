/* hang_nats_close.c - preloaded into a worker by test_queue_fleet (LD_PRELOAD): its
 * natsConnection_Close never returns, as libnats 3.4's once did in a worker's SIGTERM shutdown
 * (its read loop blocked on a subscription's lock). The worker must exit anyway. */
#include <unistd.h>

void natsConnection_Close(void *nc);

void natsConnection_Close(void *nc)
{
    (void)nc;
    for (;;)
        pause();
}
