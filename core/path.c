/* path.c - the shape a policy path must have (path.h). */
#include "core/path.h"

#include <string.h>

bool sbx_path_has_dot_component(const char *path)
{
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return true;
        p += n;
    }
    return false;
}
