/* pki.h - the certificates TLS tests use, made per run with the openssl CLI into a directory:
 * ca.pem/ca.key (CN=sbx-test-ca), server.pem/key (CN=localhost, SAN localhost and 127.0.0.1,
 * signed by ca), client.pem/key (CN=agent-1, signed by ca), stranger.pem/key (CN=stranger,
 * signed by ca), other-ca.pem/key (CN=sbx-other-ca) and rogue.pem/key (CN=agent-1, signed by
 * other-ca). Header-only (a static function).
 */
#ifndef SBX_TESTS_SUPPORT_PKI_H
#define SBX_TESTS_SUPPORT_PKI_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Makes them in dir (quoted for the shell: no single quote in it); false when openssl failed. */
static inline bool sbx_test_make_pki(const char *dir)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; exec >/dev/null 2>&1;"
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
             "  -subj /CN=sbx-test-ca;"
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem "
             "  -days 2 -subj /CN=sbx-other-ca;"
             "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext;"
             "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
             "  -subj /CN=localhost;"
             "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "  -out server.pem -days 2 -extfile san.ext;"
             "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr "
             "  -subj /CN=agent-1;"
             "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "  -out client.pem -days 2;"
             "openssl req -newkey rsa:2048 -nodes -keyout rogue.key -out rogue.csr "
             "  -subj /CN=agent-1;"
             "openssl x509 -req -in rogue.csr -CA other-ca.pem -CAkey other-ca.key "
             "  -CAcreateserial -out rogue.pem -days 2;"
             "openssl req -newkey rsa:2048 -nodes -keyout stranger.key -out stranger.csr "
             "  -subj /CN=stranger;"
             "openssl x509 -req -in stranger.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
             "  -out stranger.pem -days 2",
             dir);
    return system(cmd) == 0;
}

#endif
