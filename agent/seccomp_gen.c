/* seccomp_gen.c - sbx-seccomp-gen OUT.h: compiles the programs' seccomp policy
 * (seccomp_policy.c) to BPF with libseccomp, twice (the programs' filter, and the agent's, which
 * also allows clone3), and writes both as C arrays for sbx-agent to embed. Before it writes
 * anything it checks that the agent's filter together with the delta a program adds
 * (seccomp_delta.h) answers exactly as the programs' filter does, and fails the build if not.
 * A build-time tool: it runs on the build host, whose architecture is the agent's (the agent is
 * built for the host it runs on), so the BPF's architecture check is the agent's own. It must
 * not be installed or run by the agent.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "seccomp_delta.h"
#include "seccomp_policy.h"

typedef struct prog {
    struct sock_filter insn[BPF_MAXINSNS];
    size_t n;
} prog;

static prog programs, agent;

/* Compiles the policy (for_agent: the agent's) into *p; 0, or 1 after a line on stderr. */
static int compile(bool for_agent, prog *p)
{
    scmp_filter_ctx ctx;
    int rc = seccomp_policy_build(&ctx, for_agent);
    if (rc != 0) {
        fprintf(stderr, "sbx-seccomp-gen: building the policy failed: %s\n", strerror(-rc));
        return 1;
    }
    int fd = memfd_create("sbx-seccomp", MFD_CLOEXEC);
    if (fd < 0 || (rc = seccomp_export_bpf(ctx, fd)) != 0) {
        fprintf(stderr, "sbx-seccomp-gen: exporting the BPF failed: %s\n",
                strerror(fd < 0 ? errno : -rc));
        return 1;
    }
    seccomp_release(ctx);
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size <= 0 || (size_t)st.st_size > sizeof p->insn ||
        st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
        pread(fd, p->insn, (size_t)st.st_size, 0) != st.st_size) {
        fprintf(stderr, "sbx-seccomp-gen: the BPF program is empty or longer than %d insns\n",
                BPF_MAXINSNS);
        return 1;
    }
    close(fd);
    p->n = (size_t)st.st_size / sizeof(struct sock_filter);
    return 0;
}

/* ---- the check: a classic BPF interpreter for what libseccomp emits -------------------- */

#define BAD_PROGRAM 0xffffffffu /* not an action any filter here returns */

/* Runs insn[0..n) on d as the kernel would; BAD_PROGRAM for an instruction outside the subset
 * libseccomp and seccomp_delta.h use (then the check fails: nothing is assumed). */
static uint32_t run(const struct sock_filter *insn, size_t n, const struct seccomp_data *d,
                    bool *read_args)
{
    uint32_t a = 0;
    for (size_t pc = 0; pc < n; pc++) {
        const struct sock_filter *i = &insn[pc];
        switch (i->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (i->k > sizeof *d - 4 || i->k % 4 != 0)
                return BAD_PROGRAM;
            memcpy(&a, (const char *)d + i->k, 4);
            *read_args |= i->k >= offsetof(struct seccomp_data, args);
            break;
        case BPF_ALU | BPF_AND | BPF_K: a &= i->k; break;
        case BPF_JMP | BPF_JA: pc += i->k; break;
        case BPF_JMP | BPF_JEQ | BPF_K: pc += a == i->k ? i->jt : i->jf; break;
        case BPF_JMP | BPF_JGT | BPF_K: pc += a > i->k ? i->jt : i->jf; break;
        case BPF_JMP | BPF_JGE | BPF_K: pc += a >= i->k ? i->jt : i->jf; break;
        case BPF_JMP | BPF_JSET | BPF_K: pc += (a & i->k) ? i->jt : i->jf; break;
        case BPF_RET | BPF_K: return i->k;
        default: return BAD_PROGRAM;
        }
    }
    return BAD_PROGRAM; /* fell off the end */
}

/* What the kernel answers with filters older and newer installed: the answer whose action has
 * the lower value as a signed number (KILL_PROCESS first, ALLOW last); on a tie, the newer's. */
static uint32_t stacked(uint32_t older, uint32_t newer)
{
    int32_t o = (int32_t)(older & SECCOMP_RET_ACTION_FULL);
    int32_t w = (int32_t)(newer & SECCOMP_RET_ACTION_FULL);
    return o < w ? older : newer;
}

/* The values a filter compares with: every k of a compare or mask, each with its neighbours,
 * so that each range between two of them is tried once. */
static size_t constants(const prog *p, uint32_t *out, size_t cap, size_t n)
{
    for (size_t i = 0; i < p->n && n + 3 <= cap; i++) {
        if (BPF_CLASS(p->insn[i].code) != BPF_JMP && BPF_CLASS(p->insn[i].code) != BPF_ALU)
            continue;
        uint32_t k = p->insn[i].k;
        out[n++] = k;
        out[n++] = k + 1;
        out[n++] = k - 1;
    }
    return n;
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Whether one seccomp_data gets the same answer (prints it when not); *read_args when some
 * filter looked at an argument. */
static bool same_answer(const prog *delta, const struct seccomp_data *d, bool *read_args)
{
    uint32_t want = run(programs.insn, programs.n, d, read_args);
    uint32_t got =
        stacked(run(agent.insn, agent.n, d, read_args), run(delta->insn, delta->n, d, read_args));
    if (want != BAD_PROGRAM && got == want)
        return true;
    fprintf(stderr,
            "sbx-seccomp-gen: the agent's filter with the programs' delta answers 0x%08x, the "
            "programs' filter 0x%08x, for syscall %d on arch 0x%08x with args 0x%llx...: "
            "seccomp_delta.h must refuse everything the agent's filter allows beyond the "
            "programs' (or a filter uses an instruction the check does not know)\n",
            got, want, d->nr, d->arch, (unsigned long long)d->args[0]);
    return false;
}

static int by_value(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

#define MAX_CONSTANTS 8192
#define RANDOM_ARGS 64

/* One syscall number on one architecture: a few arguments; where a filter looks at them, each
 * constant (and random values, and a constant under junk in the upper half) in each argument
 * alone and in all six. */
static bool check_number(const prog *delta, struct seccomp_data *d, const uint32_t *k, size_t nk,
                         uint64_t *seed, size_t *checked)
{
    bool read_args = false;
    uint64_t base[] = {0, ~0ull, next_random(seed), next_random(seed)};
    for (size_t b = 0; b < sizeof base / sizeof base[0]; b++) {
        for (int a = 0; a < 6; a++)
            d->args[a] = base[b];
        if (!same_answer(delta, d, &read_args))
            return false;
        (*checked)++;
    }
    for (size_t vi = 0; read_args && vi < nk + 2 * RANDOM_ARGS; vi++) {
        uint64_t v = vi < nk ? k[vi] : next_random(seed);
        if (vi >= nk + RANDOM_ARGS) /* a constant in the low half, junk in the high */
            v = (v << 32) | k[v % nk];
        for (int which = -1; which < 6; which++) {
            for (int a = 0; a < 6; a++)
                d->args[a] = which < 0 || a == which ? v : 0;
            bool ignored = false;
            if (!same_answer(delta, d, &ignored))
                return false;
            (*checked)++;
        }
    }
    return true;
}

/* Every syscall number 0..1023 and every constant of the three filters with its neighbours (as
 * a number, and with the x32 bit), on the native and foreign architectures (check_number). */
static int check_stack(void)
{
    prog delta = {.n = sizeof seccomp_delta_bpf / sizeof seccomp_delta_bpf[0]};
    memcpy(delta.insn, seccomp_delta_bpf, sizeof seccomp_delta_bpf);
    static uint32_t k[MAX_CONSTANTS];
    size_t nk = constants(&programs, k, MAX_CONSTANTS, 0);
    nk = constants(&agent, k, MAX_CONSTANTS, nk);
    nk = constants(&delta, k, MAX_CONSTANTS, nk);
    qsort(k, nk, sizeof k[0], by_value);
    size_t u = 0;
    for (size_t i = 0; i < nk; i++)
        if (u == 0 || k[u - 1] != k[i])
            k[u++] = k[i];
    nk = u;
    static const uint32_t arches[] = {
        AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, 0, 0xffffffffu};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t checked = 0;
    for (size_t ai = 0; ai < sizeof arches / sizeof arches[0]; ai++)
        for (size_t ni = 0; ni < 1024 + 2 * nk; ni++) {
            struct seccomp_data d;
            memset(&d, 0, sizeof d);
            d.arch = arches[ai];
            uint32_t nr = ni < 1024 ? (uint32_t)ni : k[(ni - 1024) % nk];
            d.nr = (int)(ni < 1024 + nk ? nr : nr | 0x40000000u);
            if (!check_number(&delta, &d, k, nk, &seed, &checked))
                return 1;
        }
    fprintf(stderr,
            "sbx-seccomp-gen: the agent's filter with the delta answers as the programs' filter "
            "in %zu cases\n",
            checked);
    return 0;
}

static void write_array(FILE *f, const char *name, const prog *p)
{
    fprintf(f, "static struct sock_filter %s[%zu] = {\n", name, p->n);
    for (size_t i = 0; i < p->n; i++)
        fprintf(f, "    {0x%04x, %u, %u, 0x%08x},\n", p->insn[i].code, p->insn[i].jt, p->insn[i].jf,
                p->insn[i].k);
    fprintf(f, "};\n");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: sbx-seccomp-gen OUT.h\n");
        return 2;
    }
    if (compile(false, &programs) != 0 || compile(true, &agent) != 0 || check_stack() != 0)
        return 1;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "sbx-seccomp-gen: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    fprintf(f, "/* Generated by sbx-seccomp-gen from agent/seccomp_policy.c at build time: do not "
               "edit. */\n");
    write_array(f, "seccomp_policy_bpf", &programs);
    write_array(f, "seccomp_agent_bpf", &agent);
    if (fclose(f) != 0 || rename(tmp, argv[1]) != 0) {
        fprintf(stderr, "sbx-seccomp-gen: cannot write %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    return 0;
}
