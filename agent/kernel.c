/* kernel.c - the driver of the persistent python kernel (its code is kernel_python.c, whose top
 * comment is the protocol): starts and resets it, sends each stateful run_code call with its
 * cwd, env and framed stdin, and turns its reply into the call's end. run_code of other
 * languages, or stateless python, starts a program like exec (commands.c).
 * Everything the kernel sends is untrusted: it runs the program in its own process.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel_reply.h"
#include "serve_impl.h"

kernel agent_py = {0, -1, -1, {-1, -1}, -1, false, -1};
static uint8_t code_buf[AGENT_MAX_CODE]; /* the run_code being started: filled and used at once */
static size_t code_len;
static size_t code_touched; /* bytes of code_buf written since its pages were last given back */

void kernel_drop_scratch(void)
{
    if (code_touched > 0) /* whole pages within code_buf only (agent_drop_pages rounds in) */
        agent_drop_pages(code_buf,
                         code_touched < sizeof code_buf ? code_touched + 1 : sizeof code_buf);
    code_touched = 0;
}

/* Takes the whole code into code_buf. */
static void code_take(const uint8_t *p, size_t n)
{
    memcpy(code_buf, p, n);
    code_len = n;
    if (n > code_touched)
        code_touched = n;
}

void kernel_reset(void)
{
    if (agent_py.pid > 0) {
        kill(-agent_py.pid, SIGKILL);
        kill(agent_py.pid, SIGKILL);
    }
    if (agent_py.ctl_fd >= 0)
        close(agent_py.ctl_fd);
    if (agent_py.rep_fd >= 0)
        close(agent_py.rep_fd);
    if (agent_py.in_fd >= 0)
        close(agent_py.in_fd);
    for (int s = 0; s < 2; s++)
        if (agent_py.out_fd[s] >= 0)
            close(agent_py.out_fd[s]);
    agent_py.pid = 0;
    agent_py.ctl_fd = agent_py.rep_fd = agent_py.in_fd = agent_py.out_fd[0] = agent_py.out_fd[1] =
        -1;
    agent_py.busy = -1;
}

static int kernel_start(uid_t u, gid_t g, bool keep)
{
    int ctl[2], rep[2];
    if (pipe2(ctl, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(rep, O_CLOEXEC) < 0) {
        int e = errno;
        close(ctl[0]);
        close(ctl[1]);
        return -e;
    }
    static char python[] = "python3", dash_c[] = "-c";
    static char *kargv[4];
    kargv[0] = python;
    kargv[1] = dash_c;
    kargv[2] = (char *)agent_python_kernel;
    kargv[3] = NULL;
    static char *kenv[AGENT_MAX_ENV + 8];
    size_t kenv_n = 0;
    build_env(kenv, &kenv_n);
    pid_t pid = spawn(kargv, kenv, kenv_n, agent_cfg.workdir, u, g, keep, true, agent_py.out_fd,
                      &agent_py.in_fd, ctl[0], rep[1], -1, -1);
    close(ctl[0]);
    close(rep[1]);
    if (pid < 0) {
        close(ctl[1]);
        close(rep[0]);
        return (int)pid;
    }
    agent_py.pid = pid;
    agent_py.ctl_fd = ctl[1];
    agent_py.rep_fd = rep[0];
    agent_py.busy = -1;
    return 0;
}

static bool put_u32(uint8_t *p, size_t cap, size_t *len, uint32_t v)
{
    if (*len + 4 > cap)
        return false;
    p[(*len)++] = (uint8_t)v;
    p[(*len)++] = (uint8_t)(v >> 8);
    p[(*len)++] = (uint8_t)(v >> 16);
    p[(*len)++] = (uint8_t)(v >> 24);
    return true;
}

/* One frame of a kernel call's stdin (n == 0: its end). false when the kernel is gone. */
bool kernel_stdin(command *c, const uint8_t *p, size_t n)
{
    uint8_t l4[4];
    size_t z = 0;
    put_u32(l4, 4, &z, (uint32_t)n);
    return write_to_program(c, c->in_fd, l4, 4) && (n == 0 || write_to_program(c, c->in_fd, p, n));
}

/* Ends a kernel call's stdin once (the kernel reads exactly one end per call). */
void kernel_stdin_end(command *c)
{
    if (c->in_fd >= 0)
        kernel_stdin(c, NULL, 0);
    c->in_fd = -1; /* the pipe is the kernel's, kept for its next call */
}

static void handle_code_complete(int ci, uint64_t id, sbx_v1_AgentCode *x);

void code_drop(client *cl)
{
    free(cl->cbuf);
    cl->cbuf = NULL;
    cl->clen = 0;
    cl->creq = 0;
    cl->crefused_req = 0;
}

/* Refuses client ci's run_code id: the rest of its chunks, if more follow, is dropped unrun. */
static void code_refuse(int ci, uint64_t id, bool more, const char *why)
{
    client *cl = &agent_clients[ci];
    code_drop(cl);
    cl->crefused_req = more ? id : 0;
    send_error(ci, id, EC_RESOURCE_EXHAUSTED, "%s", why);
}

void handle_code(int ci, uint64_t id, sbx_v1_AgentCode *x)
{
    client *cl = &agent_clients[ci];
    /* Chunks of one request gather, per client, until `more` is false. Another request of the
     * client drops what an unfinished one left; the chunks after a refusal are dropped, never
     * run on their own (a tail of a program is not the program). */
    if (cl->crefused_req != 0) {
        if (cl->crefused_req == id) {
            if (!x->more)
                cl->crefused_req = 0;
            return;
        }
        cl->crefused_req = 0;
    }
    if (cl->creq != id)
        code_drop(cl);
    if (cl->clen == 0 && !x->more) { /* the whole code in one frame */
        code_take(x->code.bytes, x->code.size);
        handle_code_complete(ci, id, x);
        return;
    }
    if (cl->clen + x->code.size > AGENT_MAX_CODE) {
        char why[64];
        snprintf(why, sizeof why, "code is larger than %u bytes", (unsigned)AGENT_MAX_CODE);
        code_refuse(ci, id, x->more, why);
        return;
    }
    /* Room for the largest code at once: malloc maps it, and only the pages the chunks fill
     * are ever touched; freed when the code starts or is dropped. */
    if (cl->cbuf == NULL && (cl->cbuf = malloc(AGENT_MAX_CODE)) == NULL) {
        code_refuse(ci, id, x->more, "out of memory gathering the code's chunks");
        return;
    }
    cl->creq = id;
    memcpy(cl->cbuf + cl->clen, x->code.bytes, x->code.size);
    cl->clen += x->code.size;
    if (x->more)
        return;
    code_take(cl->cbuf, cl->clen);
    code_drop(cl);
    handle_code_complete(ci, id, x);
}

/* run_code of a language other than python, or stateless python: a one-shot interpreter started
 * like exec, its code as the -c argument. */
static void run_code_once(int ci, uint64_t id, sbx_v1_AgentCode *x, bool python)
{
    static char bash[] = "bash", sh[] = "sh", python3[] = "python3", dash_c[] = "-c";
    if (code_len >= sizeof code_buf) {
        send_error(ci, id, EC_RESOURCE_EXHAUSTED, "code is larger than %u bytes",
                   (unsigned)sizeof code_buf - 1);
        return;
    }
    code_buf[code_len] = '\0';
    char *code = (char *)code_buf;
    if (python)
        agent_argv_tab[0] = python3;
    else if (strcmp(x->language, "bash") == 0)
        agent_argv_tab[0] = access("/bin/bash", X_OK) == 0 ? bash : sh;
    else if (strcmp(x->language, "sh") == 0)
        agent_argv_tab[0] = sh;
    else {
        send_error(ci, id, EC_INVALID_ARGUMENT,
                   "language '%s' is not offered; use python, bash or sh", x->language);
        return;
    }
    agent_argv_tab[1] = dash_c;
    agent_argv_tab[2] = code;
    agent_argv_tab[3] = NULL;
    agent_argv_n = 3;
    start_program(ci, id, agent_argv_tab, x->cwd, x->uid, x->gid, x->timeout_ms,
                  x->output_limit_bytes, x->stdin_follows, x->detach);
}

/* Sends the kernel call's request: code, cwd, env pairs. false when the kernel is gone or the
 * call's deadline passed. */
static bool kernel_send_call(command *c, const char *cwd)
{
    /* request: code, cwd, env pairs (the env entries sit in agent_env_tab as NAME=VALUE) */
    static uint8_t hdr[4 + AGENT_MAX_PATH + 4];
    size_t hl = 0;
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)code_len);
    bool ok = write_to_program(c, agent_py.ctl_fd, hdr, hl) &&
              write_to_program(c, agent_py.ctl_fd, code_buf, code_len);
    hl = 0;
    size_t cwdl = strnlen(cwd, AGENT_MAX_PATH - 1);
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)cwdl);
    memcpy(hdr + hl, cwd, cwdl);
    hl += cwdl;
    put_u32(hdr, sizeof hdr, &hl, (uint32_t)agent_env_n);
    ok = ok && write_to_program(c, agent_py.ctl_fd, hdr, hl);
    for (size_t i = 0; ok && i < agent_env_n; i++) {
        char *eq = strchr(agent_env_tab[i], '=');
        size_t nl = (size_t)(eq - agent_env_tab[i]), vl = strlen(eq + 1);
        uint8_t l4[4];
        size_t z = 0;
        put_u32(l4, 4, &z, (uint32_t)nl);
        ok = write_to_program(c, agent_py.ctl_fd, l4, 4) &&
             write_to_program(c, agent_py.ctl_fd, (uint8_t *)agent_env_tab[i], nl);
        z = 0;
        put_u32(l4, 4, &z, (uint32_t)vl);
        ok = ok && write_to_program(c, agent_py.ctl_fd, l4, 4) &&
             write_to_program(c, agent_py.ctl_fd, (uint8_t *)eq + 1, vl);
    }
    return ok;
}

/* One whole run_code (its code in code_buf): the stateful kernel's one-call-at-a-time path
 * (request with cwd and env pairs, then its stdin), or a one-shot interpreter (run_code_once). */
static void handle_code_complete(int ci, uint64_t id, sbx_v1_AgentCode *x)
{
    if (!collect_env(x->env, x->env_count)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "an environment name is empty or contains '='");
        return;
    }
    if (memchr(code_buf, '\0', code_len)) {
        send_error(ci, id, EC_INVALID_ARGUMENT, "code contains a NUL byte");
        return;
    }
    bool python = strcmp(x->language, "python") == 0 || strcmp(x->language, "python3") == 0;
    if (!python || !x->stateful) {
        run_code_once(ci, id, x, python);
        return;
    }
    /* Stateful python: one call at a time into the persistent kernel. */
    uid_t u;
    gid_t g;
    bool keep;
    if (!pick_uid(x->uid, x->gid, &u, &g, &keep)) {
        send_error(ci, id, EC_PERMISSION_DENIED, "programs never run as the agent's uid");
        return;
    }
    if (agent_py.busy >= 0) {
        send_error(ci, id, EC_RESOURCE_EXHAUSTED,
                   "the python kernel is busy with another call; calls of one session run "
                   "one at a time");
        return;
    }
    if (!agent_seccomp_ready) {
        send_error(ci, id, EC_INTERNAL, "the seccomp filter could not be built on this kernel");
        return;
    }
    /* An idle kernel that died since the last poll round (killed, out of memory, its own
     * os._exit) is not reaped yet: reap it here, or this call would be bound to a dead process
     * and end with that process's status without having run. */
    int dead;
    if (agent_py.pid > 0 && waitpid(agent_py.pid, &dead, WNOHANG) == agent_py.pid) {
        agent_py.pid = 0;
        agent_py.died_before = true;
        kernel_reset();
    }
    bool restarted = false;
    if (agent_py.pid == 0) {
        restarted = agent_py.died_before;
        int rc = kernel_start(u, g, keep);
        if (rc < 0) {
            send_error(ci, id, EC_RESOURCE_EXHAUSTED, "cannot start the python kernel: %s",
                       strerror(-rc));
            return;
        }
    }
    command *c = alloc_command();
    if (!c) {
        send_error(ci, id, EC_RESOURCE_EXHAUSTED, "every command slot is busy");
        return;
    }
    command_init(c, ci, id, x->timeout_ms, x->output_limit_bytes);
    c->is_kernel = true;
    c->pid = agent_py.pid;
    c->out_fd[0] = agent_py.out_fd[0];
    c->out_fd[1] = agent_py.out_fd[1];
    c->exit.kernel_restarted = restarted;
    agent_py.busy = (int)(c - agent_commands);
    send_started(c, ci, id, x->detach);
    bool ok = kernel_send_call(c, x->cwd);
    /* its stdin: AgentStdin frames follow, or it has none (the end goes at once) */
    c->in_fd = agent_py.in_fd;
    if (ok && !x->stdin_follows)
        kernel_stdin_end(c);
    if (!ok) {
        /* the kernel died or the deadline passed: its SIGCHLD or the deadline ends the call */
        if (c->deadline_ms && now_ms() >= c->deadline_ms) {
            c->timed_out = true;
            kill_tree(c);
        }
    }
}

/* The kernel replied (or its reply pipe closed). */
void kernel_reply(void)
{
    static uint8_t rep[KERNEL_REPLY_BUF];
    ssize_t r = read(agent_py.rep_fd, rep, sizeof rep - 1);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (agent_py.busy < 0) {
        if (r <= 0) { /* closed between calls: the SIGCHLD path cleans up */
            close(agent_py.rep_fd);
            agent_py.rep_fd = -1;
        }
        return;
    }
    command *c = &agent_commands[agent_py.busy];
    if (r < KERNEL_REPLY_HEADER) {
        /* kernel gone mid-call: wait for SIGCHLD to report its status */
        if (r <= 0) {
            close(agent_py.rep_fd);
            agent_py.rep_fd = -1;
        }
        return;
    }
    int exit_code;
    const char *value;
    kernel_reply_parse(rep, (size_t)r, &exit_code, &value);
    agent_py.busy = -1;
    finish(c, exit_code, true, value);
}

/* Output of the kernel on stream s (0 stdout, 1 stderr): the busy call's, or between calls (a
 * background thread) read and dropped so the pipe stays drained. */
void kernel_output(int s)
{
    if (agent_py.busy >= 0) {
        pump(&agent_commands[agent_py.busy], s);
    } else {
        /* output between calls (a background thread): keep the pipe drained */
        ssize_t got = read(agent_py.out_fd[s], agent_chunk, sizeof agent_chunk);
        if (got == 0) {
            close(agent_py.out_fd[s]);
            agent_py.out_fd[s] = -1;
        }
    }
}
