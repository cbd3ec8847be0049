/* crypto.c - the `sbx` executable's stubs for libcrypto (see lazy.h). */
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "cli/lazy/lazy.h"

static cli_lazy_lib crypto = CLI_LAZY_LIB(SBX_LAZY_SONAME_CRYPTO, "libssl3");

SBX_LAZY(crypto, int, CRYPTO_memcmp, (const void *a0, const void *a1, size_t a2), (a0, a1, a2))
SBX_LAZY_VOID(crypto, ERR_clear_error, (void), ())
SBX_LAZY_VOID(crypto, ERR_error_string_n, (unsigned long a0, char *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(crypto, unsigned long, ERR_get_error, (void), ())
SBX_LAZY(crypto, unsigned long, ERR_peek_error, (void), ())
SBX_LAZY(crypto, int, EVP_DecodeBlock, (unsigned char *a0, const unsigned char *a1, int a2),
         (a0, a1, a2))
SBX_LAZY(crypto, int, EVP_Digest,
         (const void *a0, size_t a1, unsigned char *a2, unsigned int *a3, const EVP_MD *a4,
          ENGINE *a5),
         (a0, a1, a2, a3, a4, a5))
SBX_LAZY(crypto, int, EVP_DigestFinal_ex, (EVP_MD_CTX * a0, unsigned char *a1, unsigned int *a2),
         (a0, a1, a2))
SBX_LAZY(crypto, int, EVP_DigestInit_ex, (EVP_MD_CTX * a0, const EVP_MD *a1, ENGINE *a2),
         (a0, a1, a2))
SBX_LAZY(crypto, int, EVP_DigestUpdate, (EVP_MD_CTX * a0, const void *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(crypto, int, EVP_EncodeBlock, (unsigned char *a0, const unsigned char *a1, int a2),
         (a0, a1, a2))
SBX_LAZY_VOID(crypto, EVP_MD_CTX_free, (EVP_MD_CTX * a0), (a0))
SBX_LAZY(crypto, EVP_MD_CTX *, EVP_MD_CTX_new, (void), ())
SBX_LAZY(crypto, const EVP_MD *, EVP_sha256, (void), ())
SBX_LAZY(crypto, unsigned char *, HMAC,
         (const EVP_MD *a0, const void *a1, int a2, const unsigned char *a3, size_t a4,
          unsigned char *a5, unsigned int *a6),
         (a0, a1, a2, a3, a4, a5, a6))
SBX_LAZY_VOID(crypto, OPENSSL_cleanse, (void *a0, size_t a1), (a0, a1))
SBX_LAZY(crypto, int, RAND_bytes, (unsigned char *a0, int a1), (a0, a1))
SBX_LAZY(crypto, int, X509_NAME_get_text_by_NID, (const X509_NAME *a0, int a1, char *a2, int a3),
         (a0, a1, a2, a3))
SBX_LAZY_VOID(crypto, X509_free, (X509 * a0), (a0))
SBX_LAZY(crypto, X509_NAME *, X509_get_subject_name, (const X509 *a0), (a0))
SBX_LAZY(crypto, EVP_MAC_CTX *, EVP_MAC_CTX_dup, (const EVP_MAC_CTX *a0), (a0))
SBX_LAZY_VOID(crypto, EVP_MAC_CTX_free, (EVP_MAC_CTX * a0), (a0))
SBX_LAZY(crypto, int, EVP_MAC_final, (EVP_MAC_CTX * a0, unsigned char *a1, size_t *a2, size_t a3),
         (a0, a1, a2, a3))
SBX_LAZY(crypto, EVP_MAC *, EVP_MAC_fetch, (OSSL_LIB_CTX * a0, const char *a1, const char *a2),
         (a0, a1, a2))
SBX_LAZY(crypto, EVP_MAC_CTX *, EVP_MAC_CTX_new, (EVP_MAC * a0), (a0))
SBX_LAZY(crypto, int, EVP_MAC_init,
         (EVP_MAC_CTX * a0, const unsigned char *a1, size_t a2, const OSSL_PARAM a3[]),
         (a0, a1, a2, a3))
SBX_LAZY(crypto, int, EVP_MAC_update, (EVP_MAC_CTX * a0, const unsigned char *a1, size_t a2),
         (a0, a1, a2))
SBX_LAZY_VOID(crypto, EVP_MAC_free, (EVP_MAC * a0), (a0))
SBX_LAZY(crypto, OSSL_PARAM, OSSL_PARAM_construct_utf8_string,
         (const char *a0, char *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(crypto, OSSL_PARAM, OSSL_PARAM_construct_end, (void), ())
SBX_LAZY(crypto, unsigned char *, SHA1, (const unsigned char *a0, size_t a1, unsigned char *a2),
         (a0, a1, a2))
