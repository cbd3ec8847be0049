/* path.h - what a path given as policy (fs_read, fs_write) must look like, for the config's
 * profiles and a request's policy alike. Internal to libsbx (not installed).
 */
#ifndef SBX_CORE_PATH_H
#define SBX_CORE_PATH_H

#include <stdbool.h>

/* True when path has a "." or ".." component ("/data/../etc", "/data/."): such a path names
 * something other than its text, so no comparison of text can place it under another path. */
bool sbx_path_has_dot_component(const char *path);

#endif
