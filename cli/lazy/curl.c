/* curl.c - the `sbx` executable's stubs for libcurl (see lazy.h): each function sbx calls,
 * loaded on first use. The variadic setopt/getinfo functions forward their one argument by
 * the type libcurl itself reads for the option (the CURLOPTTYPE_* range it lies in). */
#define CURL_DISABLE_TYPECHECK /* the type-checking macros would hide the functions' names */
#include <curl/curl.h>
#include <stdarg.h>

#include "cli/lazy/lazy.h"

static cli_lazy_lib curl = CLI_LAZY_LIB(SBX_LAZY_SONAME_CURL, "libcurl4");

SBX_LAZY_VOID(curl, curl_easy_cleanup, (CURL * a0), (a0))
SBX_LAZY(curl, char *, curl_easy_escape, (CURL * a0, const char *a1, int a2), (a0, a1, a2))
SBX_LAZY(curl, CURL *, curl_easy_init, (void), ())
SBX_LAZY(curl, CURLcode, curl_easy_perform, (CURL * a0), (a0))
SBX_LAZY(curl, const char *, curl_easy_strerror, (CURLcode a0), (a0))
SBX_LAZY_VOID(curl, curl_free, (void *a0), (a0))
SBX_LAZY(curl, time_t, curl_getdate, (const char *a0, const time_t *a1), (a0, a1))
SBX_LAZY(curl, CURLcode, curl_global_init, (long a0), (a0))
SBX_LAZY(curl, CURLMcode, curl_multi_add_handle, (CURLM * a0, CURL *a1), (a0, a1))
SBX_LAZY(curl, CURLMcode, curl_multi_cleanup, (CURLM * a0), (a0))
SBX_LAZY(curl, CURLMsg *, curl_multi_info_read, (CURLM * a0, int *a1), (a0, a1))
SBX_LAZY(curl, CURLM *, curl_multi_init, (void), ())
SBX_LAZY(curl, CURLMcode, curl_multi_perform, (CURLM * a0, int *a1), (a0, a1))
SBX_LAZY(curl, CURLMcode, curl_multi_poll,
         (CURLM * a0, struct curl_waitfd a1[], unsigned int a2, int a3, int *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(curl, CURLMcode, curl_multi_remove_handle, (CURLM * a0, CURL *a1), (a0, a1))
SBX_LAZY(curl, CURLMcode, curl_multi_wakeup, (CURLM * a0), (a0))
SBX_LAZY(curl, CURLSHcode, curl_share_cleanup, (CURLSH * a0), (a0))
SBX_LAZY(curl, CURLSH *, curl_share_init, (void), ())
SBX_LAZY(curl, struct curl_slist *, curl_slist_append, (struct curl_slist * a0, const char *a1),
         (a0, a1))
SBX_LAZY_VOID(curl, curl_slist_free_all, (struct curl_slist * a0), (a0))
SBX_LAZY(curl, CURLU *, curl_url, (void), ())
SBX_LAZY_VOID(curl, curl_url_cleanup, (CURLU * a0), (a0))
SBX_LAZY(curl, CURLUcode, curl_url_get, (CURLU * a0, CURLUPart a1, char **a2, unsigned int a3),
         (a0, a1, a2, a3))
SBX_LAZY(curl, CURLUcode, curl_url_set, (CURLU * a0, CURLUPart a1, const char *a2, unsigned int a3),
         (a0, a1, a2, a3))

SBX_LAZY(curl, CURLcode, curl_easy_recv, (CURL * a0, void *a1, size_t a2, size_t *a3),
         (a0, a1, a2, a3))
SBX_LAZY(curl, CURLcode, curl_easy_send, (CURL * a0, const void *a1, size_t a2, size_t *a3),
         (a0, a1, a2, a3))

/* A function pointer passed through `...`: libcurl reads it back as its own callback type. */
typedef void (*curl_any_fn)(void);

CURLcode curl_easy_setopt(CURL *a0, CURLoption a1, ...)
{
    static CURLcode (*real_)(CURL *, CURLoption, ...);
    CLI_LAZY_RESOLVE(curl, curl_easy_setopt, real_);
    CURLcode (*f)(CURL *, CURLoption, ...) = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);
    va_list ap;
    va_start(ap, a1);
    CURLcode rc;
    if (a1 < CURLOPTTYPE_OBJECTPOINT)
        rc = f(a0, a1, va_arg(ap, long));
    else if (a1 < CURLOPTTYPE_FUNCTIONPOINT)
        rc = f(a0, a1, va_arg(ap, void *));
    else if (a1 < CURLOPTTYPE_OFF_T)
        rc = f(a0, a1, va_arg(ap, curl_any_fn));
    else if (a1 < CURLOPTTYPE_BLOB)
        rc = f(a0, a1, va_arg(ap, curl_off_t));
    else
        rc = f(a0, a1, va_arg(ap, void *)); /* struct curl_blob * */
    va_end(ap);
    return rc;
}

CURLMcode curl_multi_setopt(CURLM *a0, CURLMoption a1, ...)
{
    static CURLMcode (*real_)(CURLM *, CURLMoption, ...);
    CLI_LAZY_RESOLVE(curl, curl_multi_setopt, real_);
    CURLMcode (*f)(CURLM *, CURLMoption, ...) = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);
    va_list ap;
    va_start(ap, a1);
    CURLMcode rc;
    if (a1 < CURLOPTTYPE_OBJECTPOINT)
        rc = f(a0, a1, va_arg(ap, long));
    else if (a1 < CURLOPTTYPE_FUNCTIONPOINT)
        rc = f(a0, a1, va_arg(ap, void *));
    else if (a1 < CURLOPTTYPE_OFF_T)
        rc = f(a0, a1, va_arg(ap, curl_any_fn));
    else
        rc = f(a0, a1, va_arg(ap, curl_off_t));
    va_end(ap);
    return rc;
}

CURLSHcode curl_share_setopt(CURLSH *a0, CURLSHoption a1, ...)
{
    static CURLSHcode (*real_)(CURLSH *, CURLSHoption, ...);
    CLI_LAZY_RESOLVE(curl, curl_share_setopt, real_);
    CURLSHcode (*f)(CURLSH *, CURLSHoption, ...) = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);
    va_list ap;
    va_start(ap, a1);
    CURLSHcode rc;
    switch (a1) {
    case CURLSHOPT_SHARE:
    case CURLSHOPT_UNSHARE: rc = f(a0, a1, va_arg(ap, int)); break; /* a curl_lock_data */
    case CURLSHOPT_LOCKFUNC:
    case CURLSHOPT_UNLOCKFUNC: rc = f(a0, a1, va_arg(ap, curl_any_fn)); break;
    default: rc = f(a0, a1, va_arg(ap, void *)); break; /* CURLSHOPT_USERDATA */
    }
    va_end(ap);
    return rc;
}

CURLcode curl_easy_getinfo(CURL *a0, CURLINFO a1, ...)
{
    static CURLcode (*real_)(CURL *, CURLINFO, ...);
    CLI_LAZY_RESOLVE(curl, curl_easy_getinfo, real_);
    CURLcode (*f)(CURL *, CURLINFO, ...) = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);
    va_list ap;
    va_start(ap, a1);
    CURLcode rc = f(a0, a1, va_arg(ap, void *)); /* every CURLINFO takes a pointer */
    va_end(ap);
    return rc;
}
