/* listing.h - the paths of a ListFiles answer, the same from every provider. Internal to libsbx
 * (not installed).
 *
 * Providers answer a listing in their own terms: the agent (local, docker) gives each entry's
 * name, E2B's envd and Daytona the whole path, ec2_ssm the path resolved against the working
 * directory. A caller that moves from one provider to another, or replays a recording through
 * another, must not see a different answer, and an entry name comes from inside the sandbox (or
 * from a service running there): hostile bytes that may name no file of the directory at all.
 */
#ifndef SBX_CORE_LISTING_H
#define SBX_CORE_LISTING_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/contract.h"

/* The name of a listed entry in path: its last component, trailing slashes ignored (*name,
 * *len: not NUL-terminated); false for one that names no file of the directory ("", ".",
 * ".."). */
bool sbx_listing_entry_name(const char *path, const char **name, size_t *len);

/* Rewrites res's files as one listing of dir: each entry's path becomes dir joined with its
 * name (the last component of what the provider gave, trailing slashes ignored; "a/" joined to
 * "/w/" is "/w/a"), sorted by path, each path once. An entry without a name ("", ".", "..")
 * names no file of the directory and is dropped. Returns how many entries were dropped (their
 * names repeated or empty), or -1 when out of memory (res then keeps the entries it has not
 * dropped yet, some or all paths rewritten, perhaps unsorted). */
long sbx_listing_normalize(const char *dir, sbx_result *res);

#endif
