/* deadline.c - the deadline of the engine call running on this thread, as providers see it
 * while they create or reach a sandbox (sbx_provider_deadline_ms in include/sbx/provider.h).
 * It lives with the providers, below the engine that sets it; it must hold nothing else. */
#include "sbx/contract.h"
#include "sbx/provider.h"

static _Thread_local int64_t acquire_deadline;

void sbx_provider_set_deadline_ms(int64_t deadline_mono_ms)
{
    acquire_deadline = deadline_mono_ms;
}

int64_t sbx_provider_deadline_ms(void)
{
    return acquire_deadline;
}

int64_t sbx_provider_step_deadline(int64_t step_ms)
{
    int64_t d = sbx_monotonic_ms() + step_ms;
    return acquire_deadline > 0 && acquire_deadline < d ? acquire_deadline : d;
}
