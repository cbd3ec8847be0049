/* replay.h - replay (DESIGN §12): a recording (sbx/recorder.h) re-runs through any broker with
 * its completions compared, volatile fields normalised. Part of the client layer (client/),
 * above the brokers.
 */
#ifndef SBX_REPLAY_H
#define SBX_REPLAY_H

#include <stddef.h>

#include "sbx/broker.h"
#include "sbx/recorder.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* The outcome of a replay: how many records ran, how many differed, and a readable report
 * (one block per differing record: "field: recorded X, replayed Y" lines). */
typedef struct sbx_replay_report {
    size_t total;
    size_t differing;
    char *text; /* malloc'd, "" when nothing differs */
} sbx_replay_report;

/* Re-runs every recorded request of path through b, in order, and compares each completion with
 * the recorded one after normalising volatile fields (timings, timestamps, bindings, node, and
 * session/sandbox ids, which are matched by order of first appearance). Sessions created during
 * the recording are followed: a later request on a recorded session uses the replayed handle.
 * Returns an error only when the file cannot be read; differences are in the report. */
sbx_status sbx_replay_file(const char *path, sbx_broker *b, sbx_replay_report *report,
                           sbx_error *err);
void sbx_replay_report_clear(sbx_replay_report *r);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
