/* clock.h - timed waits on the monotonic clock. A condition variable made by sbx_cond_init_mono
 * measures pthread_cond_timedwait against CLOCK_MONOTONIC, and sbx_mono_after_ms gives the
 * absolute time such a wait takes: a step of the wall clock (NTP, an operator's date) neither
 * cuts a wait short nor stretches it by the size of the step. Every timed wait in sbx uses
 * the pair; a condition variable waited on only without a time may use the default clock. */
#ifndef SBX_CORE_CLOCK_H
#define SBX_CORE_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* pthread_cond_init with CLOCK_MONOTONIC; its result. */
int sbx_cond_init_mono(pthread_cond_t *cv);
/* CLOCK_MONOTONIC now plus ms (negative counts as 0), normalised. */
struct timespec sbx_mono_after_ms(int64_t ms);

#endif
