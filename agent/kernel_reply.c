/* kernel_reply.c - see kernel_reply.h. */
#include "kernel_reply.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool kernel_reply_parse(uint8_t *rep, size_t len, int *exit_code, const char **value)
{
    if (len < KERNEL_REPLY_HEADER)
        return false;
    uint32_t status = le32(rep), code = le32(rep + 4), vlen = le32(rep + 8);
    if (vlen > KERNEL_MAX_VALUE || len < KERNEL_REPLY_HEADER + vlen)
        vlen = (uint32_t)(len - KERNEL_REPLY_HEADER);
    if (vlen > KERNEL_MAX_VALUE)
        vlen = KERNEL_MAX_VALUE;
    rep[KERNEL_REPLY_HEADER + vlen] = '\0';
    /* the value is the program's text: it must be a C string for AgentExit.value */
    for (uint32_t i = 0; i < vlen; i++)
        if (rep[KERNEL_REPLY_HEADER + i] == '\0')
            rep[KERNEL_REPLY_HEADER + i] = '?';
    *exit_code = status == 0 ? 0 : (int)(code & 0xff);
    if (status != 0 && *exit_code == 0 && status == 1)
        *exit_code = 1;
    *value = (const char *)rep + KERNEL_REPLY_HEADER;
    return true;
}
