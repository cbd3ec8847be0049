/* ssl.c - the `sbx` executable's stubs for libssl (see lazy.h), used by `sbx worker`'s TLS. */
#include <openssl/ssl.h>

#include "cli/lazy/lazy.h"

static cli_lazy_lib ssl = CLI_LAZY_LIB(SBX_LAZY_SONAME_SSL, "libssl3");

SBX_LAZY(ssl, long, SSL_CTX_ctrl, (SSL_CTX * a0, int a1, long a2, void *a3), (a0, a1, a2, a3))
SBX_LAZY_VOID(ssl, SSL_CTX_free, (SSL_CTX * a0), (a0))
SBX_LAZY(ssl, int, SSL_CTX_load_verify_locations, (SSL_CTX * a0, const char *a1, const char *a2),
         (a0, a1, a2))
SBX_LAZY(ssl, SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *a0), (a0))
SBX_LAZY_VOID(ssl, SSL_CTX_set_alpn_select_cb,
              (SSL_CTX * a0, SSL_CTX_alpn_select_cb_func a1, void *a2), (a0, a1, a2))
SBX_LAZY_VOID(ssl, SSL_CTX_set_client_CA_list, (SSL_CTX * a0, struct stack_st_X509_NAME *a1),
              (a0, a1))
SBX_LAZY(ssl, uint64_t, SSL_CTX_set_options, (SSL_CTX * a0, uint64_t a1), (a0, a1))
SBX_LAZY_VOID(ssl, SSL_CTX_set_verify, (SSL_CTX * a0, int a1, SSL_verify_cb a2), (a0, a1, a2))
SBX_LAZY_VOID(ssl, SSL_CTX_set_verify_depth, (SSL_CTX * a0, int a1), (a0, a1))
SBX_LAZY(ssl, int, SSL_CTX_use_PrivateKey_file, (SSL_CTX * a0, const char *a1, int a2),
         (a0, a1, a2))
SBX_LAZY(ssl, int, SSL_CTX_use_certificate_chain_file, (SSL_CTX * a0, const char *a1), (a0, a1))
SBX_LAZY(ssl, int, SSL_do_handshake, (SSL * a0), (a0))
SBX_LAZY_VOID(ssl, SSL_free, (SSL * a0), (a0))
SBX_LAZY_VOID(ssl, SSL_get0_alpn_selected,
              (const SSL *a0, const unsigned char **a1, unsigned int *a2), (a0, a1, a2))
SBX_LAZY(ssl, X509 *, SSL_get1_peer_certificate, (const SSL *a0), (a0))
SBX_LAZY(ssl, int, SSL_get_error, (const SSL *a0, int a1), (a0, a1))
SBX_LAZY(ssl, long, SSL_get_verify_result, (const SSL *a0), (a0))
SBX_LAZY(ssl, struct stack_st_X509_NAME *, SSL_load_client_CA_file, (const char *a0), (a0))
SBX_LAZY(ssl, SSL *, SSL_new, (SSL_CTX * a0), (a0))
SBX_LAZY(ssl, int, SSL_read, (SSL * a0, void *a1, int a2), (a0, a1, a2))
SBX_LAZY(ssl, int, SSL_select_next_proto,
         (unsigned char **a0, unsigned char *a1, const unsigned char *a2, unsigned int a3,
          const unsigned char *a4, unsigned int a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY_VOID(ssl, SSL_set_accept_state, (SSL * a0), (a0))
SBX_LAZY(ssl, int, SSL_set_fd, (SSL * a0, int a1), (a0, a1))
SBX_LAZY(ssl, int, SSL_write, (SSL * a0, const void *a1, int a2), (a0, a1, a2))
SBX_LAZY(ssl, const SSL_METHOD *, TLS_server_method, (void), ())
