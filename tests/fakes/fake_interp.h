/* fake_interp.h - a tiny deterministic interpreter for the fake cloud sandboxes: a shell subset
 * (echo, printf, exit, sleep, true, false, cat, ls, pwd, sh -c, redirections, ; && ||) and a
 * python subset (print, assignments, + - * / on ints and strings, sys.exit, time.sleep, raise,
 * a last-expression value). Enough to drive providers through their contract; it NEVER runs a
 * real program on the host. An in-memory file system backs cat, > and the fakes' file APIs.
 */
#ifndef SBX_TESTS_FAKE_INTERP_H
#define SBX_TESTS_FAKE_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- in-memory file system (per fake sandbox) ---- */
typedef struct fake_fs fake_fs;
fake_fs *fake_fs_new(void);
void fake_fs_free(fake_fs *fs);
/* Relative paths (and ".") resolve against home; default /home/user. */
void fake_fs_set_home(fake_fs *fs, const char *home);
void fake_fs_write(fake_fs *fs, const char *path, const void *data, size_t len, bool append);
/* Borrowed content (NUL-terminated) or NULL when absent. */
const uint8_t *fake_fs_read(fake_fs *fs, const char *path, size_t *len);
bool fake_fs_is_dir(fake_fs *fs, const char *path);
/* Entries directly under dir: calls fn(arg, name, is_dir, size) once per entry. */
void fake_fs_list(fake_fs *fs, const char *dir,
                  void (*fn)(void *arg, const char *name, bool is_dir, size_t size), void *arg);

/* ---- what a program did ---- */
typedef enum fake_event_kind { FAKE_OUT = 1, FAKE_ERR = 2, FAKE_SLEEP = 3 } fake_event_kind;

typedef struct fake_event {
    fake_event_kind kind;
    char *data; /* FAKE_OUT / FAKE_ERR */
    size_t len;
    int ms; /* FAKE_SLEEP */
} fake_event;

typedef struct fake_exec {
    fake_event *events;
    size_t n_events;
    int exit_code;
    char *value;      /* python: display of the last expression (NULL when none) */
    char *error_name; /* python: exception name when one was raised */
    char *error_value;
    char *traceback; /* python: the traceback text when an exception escaped */
} fake_exec;

void fake_exec_free(fake_exec *x);
/* Sum of the sleeps (ms). */
int fake_exec_sleep_ms(const fake_exec *x);

/* Python variables that persist between calls (a stateful kernel). */
typedef struct fake_pyvars fake_pyvars;
fake_pyvars *fake_pyvars_new(void);
void fake_pyvars_free(fake_pyvars *v);

/* Runs argv (program + args) or a shell line, with stdin bytes. fs may be NULL. */
void fake_run_argv(const char *const *argv, size_t argc, const uint8_t *stdin_data,
                   size_t stdin_len, fake_fs *fs, fake_exec *out);
void fake_run_shell(const char *line, const uint8_t *stdin_data, size_t stdin_len, fake_fs *fs,
                    fake_exec *out);
/* Runs python source. vars NULL: a script (fresh namespace, traceback on stderr); vars given:
 * a kernel (state kept, the traceback only in out->traceback). */
void fake_run_python(const char *code, fake_pyvars *vars, fake_fs *fs, fake_exec *out);

#endif
