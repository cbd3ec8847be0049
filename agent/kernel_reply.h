/* kernel_reply.h - reading the python kernel's reply to a stateful run_code (kernel_reply.c,
 * used by kernel.c; kernel_python.c's top comment is the protocol). The kernel shares its
 * process with the program it runs, so every byte of a reply is untrusted. Private to agent/
 * (and the fuzz harness tests/fuzz/fuzz_agent_kernel_reply.c). */
#ifndef SBX_AGENT_KERNEL_REPLY_H
#define SBX_AGENT_KERNEL_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of the kernel's reply header: status, exit code, value length (3 x u32). */
#define KERNEL_REPLY_HEADER 12
/* Longest value display the kernel may send (it cuts at 4000; AgentExit.value holds 4096). */
#define KERNEL_MAX_VALUE 4000
/* Size of the buffer one reply is read into: at most KERNEL_REPLY_BUF - 1 bytes are read. */
#define KERNEL_REPLY_BUF (KERNEL_REPLY_HEADER + KERNEL_MAX_VALUE + 1)

/* Reads the reply in rep[0..len), len < KERNEL_REPLY_BUF, in place: false when it is shorter
 * than its header. Else *exit_code is the call's (0 for status 0, never 0 for status 1, else
 * the low byte of the code) and *value points into rep at the value display: the value's bytes
 * as far as the reply holds them, at most KERNEL_MAX_VALUE, each NUL made '?', NUL-ended. */
bool kernel_reply_parse(uint8_t *rep, size_t len, int *exit_code, const char **value);

#endif
