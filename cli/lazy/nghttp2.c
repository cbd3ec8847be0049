/* nghttp2.c - the `sbx` executable's stubs for libnghttp2 (see lazy.h), used by `sbx worker`. */
#include <nghttp2/nghttp2.h>

#include "cli/lazy/lazy.h"

static cli_lazy_lib nghttp2 = CLI_LAZY_LIB(SBX_LAZY_SONAME_NGHTTP2, "libnghttp2-14");

SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_del, (nghttp2_session_callbacks * a0), (a0))
SBX_LAZY(nghttp2, int, nghttp2_session_callbacks_new, (nghttp2_session_callbacks * *a0), (a0))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_on_begin_headers_callback,
              (nghttp2_session_callbacks * a0, nghttp2_on_begin_headers_callback a1), (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_on_data_chunk_recv_callback,
              (nghttp2_session_callbacks * a0, nghttp2_on_data_chunk_recv_callback a1), (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_on_frame_recv_callback,
              (nghttp2_session_callbacks * a0, nghttp2_on_frame_recv_callback a1), (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_on_header_callback,
              (nghttp2_session_callbacks * a0, nghttp2_on_header_callback a1), (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_on_stream_close_callback,
              (nghttp2_session_callbacks * a0, nghttp2_on_stream_close_callback a1), (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_del, (nghttp2_session * a0), (a0))
SBX_LAZY(nghttp2, int32_t, nghttp2_session_get_last_proc_stream_id, (nghttp2_session * a0), (a0))
SBX_LAZY(nghttp2, void *, nghttp2_session_get_stream_user_data, (nghttp2_session * a0, int32_t a1),
         (a0, a1))
SBX_LAZY(nghttp2, ssize_t, nghttp2_session_mem_recv,
         (nghttp2_session * a0, const uint8_t *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(nghttp2, ssize_t, nghttp2_session_mem_send, (nghttp2_session * a0, const uint8_t **a1),
         (a0, a1))
SBX_LAZY(nghttp2, int, nghttp2_session_resume_data, (nghttp2_session * a0, int32_t a1), (a0, a1))
SBX_LAZY(nghttp2, int, nghttp2_session_server_new,
         (nghttp2_session * *a0, const nghttp2_session_callbacks *a1, void *a2), (a0, a1, a2))
SBX_LAZY(nghttp2, int, nghttp2_session_set_local_window_size,
         (nghttp2_session * a0, uint8_t a1, int32_t a2, int32_t a3), (a0, a1, a2, a3))
SBX_LAZY(nghttp2, int, nghttp2_session_set_stream_user_data,
         (nghttp2_session * a0, int32_t a1, void *a2), (a0, a1, a2))
SBX_LAZY(nghttp2, int, nghttp2_session_want_read, (nghttp2_session * a0), (a0))
SBX_LAZY(nghttp2, int, nghttp2_session_want_write, (nghttp2_session * a0), (a0))
SBX_LAZY(nghttp2, int, nghttp2_submit_goaway,
         (nghttp2_session * a0, uint8_t a1, int32_t a2, uint32_t a3, const uint8_t *a4, size_t a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY(nghttp2, int, nghttp2_submit_response,
         (nghttp2_session * a0, int32_t a1, const nghttp2_nv *a2, size_t a3,
          const nghttp2_data_provider *a4),
         (a0, a1, a2, a3, a4))
SBX_LAZY(nghttp2, int, nghttp2_submit_settings,
         (nghttp2_session * a0, uint8_t a1, const nghttp2_settings_entry *a2, size_t a3),
         (a0, a1, a2, a3))
SBX_LAZY(nghttp2, int, nghttp2_submit_trailer,
         (nghttp2_session * a0, int32_t a1, const nghttp2_nv *a2, size_t a3), (a0, a1, a2, a3))
SBX_LAZY_VOID(nghttp2, nghttp2_option_del, (nghttp2_option * a0), (a0))
SBX_LAZY(nghttp2, int, nghttp2_option_new, (nghttp2_option * *a0), (a0))
SBX_LAZY_VOID(nghttp2, nghttp2_option_set_no_auto_window_update, (nghttp2_option * a0, int a1),
              (a0, a1))
SBX_LAZY_VOID(nghttp2, nghttp2_session_callbacks_set_send_callback,
              (nghttp2_session_callbacks * a0, nghttp2_send_callback a1), (a0, a1))
SBX_LAZY(nghttp2, int, nghttp2_session_client_new,
         (nghttp2_session * *a0, const nghttp2_session_callbacks *a1, void *a2), (a0, a1, a2))
SBX_LAZY(nghttp2, int, nghttp2_session_consume, (nghttp2_session * a0, int32_t a1, size_t a2),
         (a0, a1, a2))
SBX_LAZY(nghttp2, int, nghttp2_session_consume_connection, (nghttp2_session * a0, size_t a1),
         (a0, a1))
SBX_LAZY(nghttp2, int, nghttp2_session_send, (nghttp2_session * a0), (a0))
SBX_LAZY(nghttp2, int, nghttp2_session_server_new2,
         (nghttp2_session * *a0, const nghttp2_session_callbacks *a1, void *a2,
          const nghttp2_option *a3),
         (a0, a1, a2, a3))
SBX_LAZY(nghttp2, int, nghttp2_submit_ping, (nghttp2_session * a0, uint8_t a1, const uint8_t *a2),
         (a0, a1, a2))
SBX_LAZY(nghttp2, int32_t, nghttp2_submit_request,
         (nghttp2_session * a0, const nghttp2_priority_spec *a1, const nghttp2_nv *a2, size_t a3,
          const nghttp2_data_provider *a4, void *a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY(nghttp2, int, nghttp2_submit_rst_stream,
         (nghttp2_session * a0, uint8_t a1, int32_t a2, uint32_t a3), (a0, a1, a2, a3))
