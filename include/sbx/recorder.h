/* recorder.h - record and replay (DESIGN §12): brokers append Recording frames to a file, and a
 * recording re-runs through any broker with its completions compared, volatile fields
 * normalised.
 *
 * File format: a plain sequence of frames, no file header. Each frame is a 4-byte big-endian
 * unsigned length N (1 <= N <= SBX_RECORDING_FRAME_MAX) followed by N bytes holding one packed
 * sbx.v1.Recording. Frames are appended with one write() each on an O_APPEND descriptor, so
 * several writers (threads or processes) never interleave inside a frame. A reader stops at a
 * clean end of file; a short or oversized frame is an error naming its offset.
 */
#ifndef SBX_RECORDER_H
#define SBX_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/broker.h"
#include "sbx/contract.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest frame accepted: twice the worker's default max message (16 MiB), since a recording
 * holds a request and its completion. Anything bigger is corruption, not data. */
#define SBX_RECORDING_FRAME_MAX (32u * 1024u * 1024u)

typedef struct sbx_recorder sbx_recorder;

/* Opens path for appending (created 0600 when absent). */
sbx_status sbx_recorder_open(const char *path, sbx_recorder **out, sbx_error *err);
/* Appends one frame. Thread-safe. */
sbx_status sbx_recorder_append(sbx_recorder *r, const sbx_recording *rec, sbx_error *err);
void sbx_recorder_close(sbx_recorder *r);

typedef struct sbx_recording_reader sbx_recording_reader;

sbx_status sbx_recording_reader_open(const char *path, sbx_recording_reader **out, sbx_error *err);
/* The next recording (free with sbx_message_free), or *out = NULL at the end of the file. */
sbx_status sbx_recording_reader_next(sbx_recording_reader *r, sbx_recording **out, sbx_error *err);
void sbx_recording_reader_close(sbx_recording_reader *r);

/* Reads a whole recording file (at most max_records frames) into a malloc'd array of
 * recordings; free with sbx_recordings_free. */
sbx_status sbx_recordings_load(const char *path, size_t max_records, sbx_recording ***out,
                               size_t *n, sbx_error *err);
void sbx_recordings_free(sbx_recording **recs, size_t n);
/* Writes recordings to path (replacing it atomically). */
sbx_status sbx_recordings_save(const char *path, sbx_recording *const *recs, size_t n,
                               sbx_error *err);

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

#ifdef __cplusplus
}
#endif
#endif
