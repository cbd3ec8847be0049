/* held.h - what list_held (sbx/provider.h) shares among the providers that list a cloud's
 * sandboxes page by page (e2b, daytona): the pages read to the end under a bound, and the
 * sandboxes reported only once every page is read, so a listing that fails part way counts
 * nothing (the engine then refuses to count from zero).
 */
#ifndef SBX_PROVIDERS_COMMON_HELD_H
#define SBX_PROVIDERS_COMMON_HELD_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/provider.h"
#include "sbx/status.h"

/* The sandboxes a listing found so far, each with the subject of the principal it was made
 * for. */
typedef struct sbx_held_found {
    sbx_strlist ids, subjects;
} sbx_held_found;

/* Keeps one; false: no memory. */
bool sbx_held_add(sbx_held_found *found, const char *sandbox_id, const char *subject);

/* Reads one page: token is the page's ("" for the first). Adds what the page lists to found
 * and sets *next to a malloc'd token of the next page, or NULL when this page was the last. */
typedef sbx_status (*sbx_held_page_fn)(void *arg, const char *token, sbx_held_found *found,
                                       char **next, sbx_error *err);

typedef struct sbx_held_pager {
    const char *provider; /* for messages: "e2b" */
    const char *profile;  /* for messages */
    int page_size;        /* sandboxes a page asks for (for messages) */
    int max_pages;        /* pages read before the listing is refused */
    size_t max_token;     /* longest next-page token followed */
} sbx_held_pager;

/* Reads pages from the first until one names no next page, then reports each found sandbox to
 * held. Fails, reporting nothing, when a page fails, a next token is longer than max_token or
 * the one just read (a server that loops), or max_pages did not reach the end. */
sbx_status sbx_held_list_pages(const sbx_held_pager *pager, sbx_held_page_fn page, void *arg,
                               void (*held)(void *arg, const char *sandbox_id, const char *subject),
                               void *held_arg, sbx_error *err);

#endif
