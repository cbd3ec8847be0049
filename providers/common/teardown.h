/* teardown.h - removing what a local sandbox leaves on the host once its processes are gone:
 * its cgroups, its state directory and its uid slot. The local provider's destroy and sweep do
 * it, and so does the reaper the launcher leaves for a one-shot sandbox (`sbx-agent boot
 * --reap`, agent/boot_local.c), which compiles this file (and proc.c, for sbx_read_small) into
 * the static agent: libc only, no allocation, nothing else of sbx's library.
 */
#ifndef SBX_PROVIDERS_TEARDOWN_H
#define SBX_PROVIDERS_TEARDOWN_H

/* Levels of cgroups below a sandbox's own that are removed with it (the agent makes one: a
 * cgroup per command). */
#define SBX_TEARDOWN_CGROUP_DEPTH 2

/* Kills whatever is left in cgroup dir and removes it, the cgroups below it first, retrying
 * while the kernel finishes (up to 2 s: a process that was just killed). */
void sbx_teardown_cgroup(const char *dir);

/* Removes a local sandbox's state directory: box/agent.sock, box, meta, meta.tmp and the
 * directory itself (anything else in it keeps it). */
void sbx_teardown_state_dir(const char *dir);

/* Frees uid slot slot of registry dir (providers/common/uid_slots.h) if it is still owner's
 * (one freed and taken by another sandbox since stays); slot < 0: none. */
void sbx_uid_slot_release(const char *dir, long slot, const char *owner);

#endif
