/* listing.c - the paths of a ListFiles answer (listing.h). */
#include "core/listing.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

bool sbx_listing_entry_name(const char *path, const char **name, size_t *len)
{
    size_t end = strlen(path);
    while (end > 0 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    *name = path + start;
    *len = end - start;
    if (*len == 0 || (*len == 1 && path[start] == '.'))
        return false;
    return !(*len == 2 && path[start] == '.' && path[start + 1] == '.');
}

typedef struct entry {
    sbx_file *f;
    size_t at; /* its place in the provider's answer: of two with one path, the first is kept */
} entry;

static int by_path(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(x->f->path, y->f->path);
    return c != 0 ? c : (x->at > y->at) - (x->at < y->at);
}

/* Sorts the n files by path and drops repeats; false when out of memory (nothing changed). */
static bool sort_unique(sbx_result *res, size_t n, long *dropped)
{
    entry *e = malloc(n * sizeof *e);
    if (e == NULL)
        return false;
    for (size_t i = 0; i < n; i++)
        e[i] = (entry){res->files[i], i};
    qsort(e, n, sizeof *e, by_path);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && strcmp(res->files[out - 1]->path, e[i].f->path) == 0) {
            sbx_message_free(&e[i].f->base);
            (*dropped)++;
            continue;
        }
        res->files[out++] = e[i].f;
    }
    res->n_files = out;
    free(e);
    return true;
}

long sbx_listing_normalize(const char *dir, sbx_result *res)
{
    if (dir == NULL)
        dir = "";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    bool root = dl == 1 && dir[0] == '/';
    size_t kept = 0;
    long dropped = 0;
    for (size_t i = 0; i < res->n_files; i++) {
        sbx_file *f = res->files[i];
        const char *name = NULL;
        size_t nl = 0;
        if (f == NULL || f->path == NULL || !sbx_listing_entry_name(f->path, &name, &nl)) {
            if (f != NULL)
                sbx_message_free(&f->base);
            dropped++;
            continue;
        }
        size_t sep = root || dl == 0 ? 0 : 1;
        char *p = malloc(dl + sep + nl + 1);
        if (p == NULL) {
            /* what was dropped is gone; the rest stays, in the provider's order */
            memmove(res->files + kept, res->files + i, (res->n_files - i) * sizeof *res->files);
            res->n_files = kept + (res->n_files - i);
            return -1;
        }
        memcpy(p, dir, dl);
        if (sep)
            p[dl] = '/';
        memcpy(p + dl + sep, name, nl);
        p[dl + sep + nl] = '\0';
        char *old = f->path;
        f->path = p;
        if (old != protobuf_c_empty_string)
            free(old);
        res->files[kept++] = f;
    }
    res->n_files = kept;
    if (kept > 1 && !sort_unique(res, kept, &dropped))
        return -1;
    return dropped;
}
