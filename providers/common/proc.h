/* proc.h - which process a pid names, from /proc/<pid>/stat.
 *
 * A pid alone can be reused; the pid with its start time (field 22, clock ticks since boot)
 * names one process. Providers keep both for the helpers they start (the egress proxy, expose
 * relays, a sandbox's boot process, a docker or kubernetes port-forward) and compare them
 * before they signal, so a recycled pid is never killed by mistake. The comm field (2) may hold
 * spaces and ')': fields are counted after its last ')'.
 */
#ifndef SBX_PROVIDERS_PROC_H
#define SBX_PROVIDERS_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Reads the start of a small file (a /proc or /sys entry, a helper's pid or record file) into
 * buf with one read(2), NUL-terminated: at most cap - 1 bytes. open_flags adds to
 * O_RDONLY | O_CLOEXEC (O_NOFOLLOW for files in a state directory). Returns the byte count,
 * -1 when the file cannot be opened or read. cap must be at least 1. */
ssize_t sbx_read_small(const char *path, int open_flags, char *buf, size_t cap);

/* Start time of process pid, 0 when there is none (or /proc cannot be read); its state letter
 * (field 3: R, S, Z, ...) in *state when state is not NULL ('?' when unknown). */
unsigned long long sbx_proc_start_time(long pid, char *state);

/* The same, but 0 for a zombie or dead process too: one that can no longer do anything. */
unsigned long long sbx_proc_live_start_time(long pid);

/* True when process pid is on its way out: exiting or taking a fatal signal (PF_EXITING or
 * PF_SIGNALED in field 9) or with a SIGKILL pending (ShdPnd or SigPnd of /proc/<pid>/status); a
 * kill it has not acted on yet counts. */
bool sbx_proc_killed(long pid);

#endif
