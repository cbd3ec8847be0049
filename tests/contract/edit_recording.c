/* edit_recording.c - test helper: copies a recording with the first record's completion
 * stdout replaced, so `sbx replay` must report it and exit 1.
 *   sbx_edit_recording IN OUT
 */
#include <stdio.h>

#include "sbx/recorder.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IN OUT\n", argv[0]);
        return 2;
    }
    sbx_recording **recs = NULL;
    size_t n = 0;
    sbx_error err;
    if (sbx_recordings_load(argv[1], 100000, &recs, &n, &err) != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    if (n == 0 || recs[0]->completion == NULL || recs[0]->completion->result == NULL) {
        fprintf(stderr, "%s: first record has no result to edit\n", argv[1]);
        return 1;
    }
    sbx_set_bytes(&recs[0]->completion->result->stdout, "edited\n", 7);
    sbx_status st = sbx_recordings_save(argv[2], recs, n, &err);
    sbx_recordings_free(recs, n);
    if (st != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    return 0;
}
