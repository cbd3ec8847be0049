/* held.c - list_held's paging and all-or-nothing report (see held.h). */
#include "providers/common/held.h"

#include <stdlib.h>
#include <string.h>

bool sbx_held_add(sbx_held_found *found, const char *sandbox_id, const char *subject)
{
    return sbx_strlist_add(&found->ids, sandbox_id) && sbx_strlist_add(&found->subjects, subject);
}

sbx_status sbx_held_list_pages(const sbx_held_pager *pager, sbx_held_page_fn page, void *arg,
                               void (*held)(void *arg, const char *sandbox_id, const char *subject),
                               void *held_arg, sbx_error *err)
{
    sbx_held_found found = {0};
    char *token = strdup("");
    sbx_status s = token != NULL ? SBX_OK
                                 : sbx_error_set(err, SBX_E_RESOURCE_EXHAUSTED, "%s: out of memory",
                                                 pager->provider);
    for (int n = 0; s == SBX_OK && token != NULL; n++) {
        if (n == pager->max_pages) {
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "%s: profile '%s': listing its sandboxes did not end after %d "
                              "pages of %d",
                              pager->provider, pager->profile, pager->max_pages, pager->page_size);
            break;
        }
        char *next = NULL;
        s = page(arg, token, &found, &next, err);
        if (s == SBX_OK && next != NULL &&
            (strlen(next) > pager->max_token || strcmp(next, token) == 0))
            s = sbx_error_set(err, SBX_E_PROVISION,
                              "%s: profile '%s': listing its sandboxes: the next page's token is "
                              "%s",
                              pager->provider, pager->profile,
                              strlen(next) > pager->max_token ? "too long"
                                                              : "the page just read (a loop)");
        free(token);
        token = next;
    }
    free(token);
    for (size_t k = 0; s == SBX_OK && k < found.ids.n; k++)
        held(held_arg, found.ids.items[k], found.subjects.items[k]);
    sbx_strlist_clear(&found.ids);
    sbx_strlist_clear(&found.subjects);
    return s;
}
