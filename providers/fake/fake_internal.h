/* fake_internal.h - what the fake provider's two files share: one in-memory sandbox (files and
 * interpreter variables) and the deterministic interpreter that runs commands and code in it.
 * Private to providers/fake.
 */
#ifndef SBX_PROVIDERS_FAKE_INTERNAL_H
#define SBX_PROVIDERS_FAKE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/provider.h"

/* Largest string a fake program may build ("x" * n): keeps a hostile test program from
 * exhausting memory; 1 MiB is plenty for output-limit tests. */
#define FAKE_STRING_MAX (1u << 20)

/* Most variables / files one fake sandbox holds: a fake is for tests, a test needs few. */
#define FAKE_VARS_MAX 1024
#define FAKE_FILES_MAX 4096

typedef struct fake_value {
    bool is_str;
    int64_t num;
    char *str; /* malloc'd when is_str */
} fake_value;

typedef struct fake_var {
    char *name;
    fake_value v;
} fake_var;

typedef struct fake_file {
    char *path; /* normalised absolute path */
    uint8_t *data;
    size_t len;
    uint32_t mode;
    int64_t mtime_ms;
} fake_file;

/* One sandbox. `mu` serializes operations on its contents (an attached environment can be used
 * by several sessions at once); refs/alive are guarded by the provider state's lock. */
typedef struct fake_box {
    char *id;
    int refs;
    bool alive;
    int running; /* operations in flight (state lock) */
    pthread_mutex_t mu;
    fake_var *vars;
    size_t n_vars;
    fake_file *files;
    size_t n_files;
} fake_box;

/* Files of a box (box->mu held). */
fake_file *fake_file_find(fake_box *b, const char *path);

/* Deadline- and cancel-aware sleep: false when the deadline passed or cancel was set first. */
bool fake_sleep_ms(int64_t ms, const sbx_exec_opts *o);

/* Runs a command (argv or shell line) / code in the box (box->mu held). A program failure is
 * SBX_OK with the result saying so; SBX_E_TIMEOUT when the deadline passed. */
sbx_status fake_run_command(fake_box *b, const Sbx__V1__RunCommand *op, const sbx_exec_opts *o,
                            sbx_result *res, sbx_error *err);
sbx_status fake_run_code(fake_box *b, const Sbx__V1__RunCode *op, const sbx_exec_opts *o,
                         sbx_result *res, sbx_error *err);

void fake_value_free(fake_value *v);

#endif
