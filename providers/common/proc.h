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

/* Start time of process pid, 0 when there is none (or /proc cannot be read); its state letter
 * (field 3: R, S, Z, ...) in *state when state is not NULL ('?' when unknown). */
unsigned long long sbx_proc_start_time(long pid, char *state);

/* The same, but 0 for a zombie or dead process too: one that can no longer do anything. */
unsigned long long sbx_proc_live_start_time(long pid);

#endif
