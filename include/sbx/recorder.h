/* recorder.h - the Recording file format (DESIGN §12): brokers append Recording frames to a
 * file; replay (sbx/replay.h) re-runs them through any broker.
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

#include "sbx/contract.h"
#include "sbx/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Public API: exported although libsbx is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

/* Largest frame accepted: twice the worker's default max message (16 MiB), since a recording
 * holds a request and its completion. Anything bigger is corruption, not data. */
#define SBX_RECORDING_FRAME_MAX (32u * 1024u * 1024u)

typedef struct sbx_recorder sbx_recorder;

/* Opens path for appending (created 0600 when absent). */
sbx_status sbx_recorder_open(const char *path, sbx_recorder **out, sbx_error *err);
/* The same, rotating by size: when a frame would take the file past max_bytes, path becomes
 * path.1 (path.1 becomes path.2, ..., the file beyond keep is replaced) and a new path is
 * started, so at most keep + 1 files of about max_bytes exist. Frames never span files. A
 * rotation assumes this recorder is the file's only writer. max_bytes 0: never rotate. */
sbx_status sbx_recorder_open_rotating(const char *path, uint64_t max_bytes, unsigned keep,
                                      sbx_recorder **out, sbx_error *err);
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

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
