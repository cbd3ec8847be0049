/* fuzz_k8s_exec.c - libFuzzer harness for what the kubernetes provider reads from the exec API
 * (providers/kubernetes/k8s_exec.c): WebSocket frame headers, and the channel-3 Status that
 * carries the exit code. The input is split at its first byte: frames are decoded one after
 * another from the rest as far as they go, and the whole rest is also read as a Status.
 *
 * Properties: no crash, leak or hang; a decoded header never claims more than the bound or a
 * length past what it consumed; an exit code is within 0..255; a failure has a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "providers/kubernetes/k8s.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        k8s_ws_frame f;
        int hl = k8s_ws_frame_header(data + off, size - off, &f);
        if (hl <= 0)
            break;
        if ((size_t)hl > size - off || hl > 14 || f.payload_len > 1024u * 1024u)
            abort();
        if (f.opcode >= 8 && (!f.fin || f.payload_len > 125))
            abort();
        size_t skip = (size_t)hl + f.payload_len;
        if (skip > size - off)
            break;
        off += skip;
    }
    int code = -1;
    sbx_error err;
    err.message[0] = '\0';
    sbx_status st = k8s_exec_exit_status(data, size, &code, &err);
    if (st == SBX_OK && (code < 0 || code > 255))
        abort();
    if (st != SBX_OK && err.message[0] == '\0')
        abort();
    return 0;
}
