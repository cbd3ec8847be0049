/* fuzz_k8s_kubeconfig.c - libFuzzer harness for the kubeconfig reader
 * (providers/kubernetes/k8s_config.c): the input is written to a private file and loaded as a
 * kubeconfig (current context). Properties: no crash, leak or hang; a failure is a CONFIG (or
 * out-of-memory) error with a message; a success has a server that is https, or http to
 * loopback, and credentials. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "providers/kubernetes/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (path[0] == '\0')
        snprintf(path, sizeof(path), "/tmp/sbx-fuzz-kubeconfig-%ld", (long)getpid());
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    k8s_cluster c;
    sbx_error err;
    err.message[0] = '\0';
    sbx_status st = k8s_cluster_load_kubeconfig(path, NULL, &c, &err);
    unlink(path);
    if (st != SBX_OK) {
        if ((st != SBX_E_CONFIG && st != SBX_E_RESOURCE_EXHAUSTED) || err.message[0] == '\0')
            abort();
        return 0;
    }
    if (c.server == NULL ||
        (strncmp(c.server, "https://", 8) != 0 && strncmp(c.server, "http://", 7) != 0))
        abort();
    if (c.token == NULL && c.cert_file == NULL && c.cert_pem == NULL)
        abort();
    k8s_cluster_clear(&c);
    return 0;
}
