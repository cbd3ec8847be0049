/* cmd_cp.c - `sbx cp SRC DST`: copies one file between the host and a session
 * (SESSION:/path on one side). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cmd_plane.h"

/* Largest file copied: a completion must fit one gRPC message (16 MiB default); 12 MiB leaves
 * room for the rest. Bigger transfers belong to the provider's own tools. */
#define CP_MAX_BYTES (12u * 1024u * 1024u)

const char cmd_cp_help[] =
    "Usage: sbx cp HOST_PATH SESSION:PATH\n"
    "       sbx cp SESSION:PATH HOST_PATH\n\n"
    "Copies one file into or out of a session's sandbox (SESSION is an id or a name from\n"
    "`sbx session ls`). Files up to 12 MiB.\n";

/* Splits "SESSION:/path" (the session part has no '/'); false for a host path. */
static bool split_remote(const char *arg, char *session, size_t size, const char **path)
{
    const char *colon = strchr(arg, ':');
    const char *slash = strchr(arg, '/');
    if (colon == NULL || colon == arg || (slash != NULL && slash < colon))
        return false;
    /* Session ids may contain ':' ("default:p"): an absolute path starts at the first ":/",
     * a relative one after the last ':'. */
    const char *split = strstr(arg, ":/");
    if (split == NULL)
        split = strrchr(arg, ':');
    if ((size_t)(split - arg) >= size)
        return false;
    memcpy(session, arg, (size_t)(split - arg));
    session[split - arg] = '\0';
    *path = split + 1;
    return **path != '\0';
}

static int upload(cli_plane *p, const char *host, const char *session, const char *path)
{
    int fd = open(host, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sbx cp: cannot open '%s': %s\n", host, strerror(errno));
        return CLI_EXIT_FAILED;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > CP_MAX_BYTES) {
        fprintf(stderr, "sbx cp: '%s' is not a regular file of at most %u bytes\n", host,
                CP_MAX_BYTES);
        close(fd);
        return CLI_EXIT_FAILED;
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    size_t len = 0;
    ssize_t n;
    while (buf != NULL && len < (size_t)st.st_size &&
           (n = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
        len += (size_t)n;
    close(fd);
    sbx_request *r = cli_plane_request(p, NULL);
    r->write_file = malloc(sizeof(*r->write_file));
    sbx__v1__write_file__init(r->write_file);
    sbx_set_string(&r->write_file->path, path);
    sbx_set_bytes(&r->write_file->content, buf, len);
    r->write_file->mode = (uint32_t)(st.st_mode & 0777);
    r->write_file->mkdirs = 1;
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_WRITE_FILE;
    free(buf);
    sbx_completion *c = NULL;
    sbx_sessions_execute(p->sessions, r, session, SBX_WAIT_FOREVER, &c, NULL);
    int rc = cli_print_completion(c, false, NULL);
    sbx_completion_free(c);
    sbx_request_free(r);
    return rc;
}

static int download(cli_plane *p, const char *session, const char *path, const char *host)
{
    sbx_request *r = cli_plane_request(p, NULL);
    r->read_file = malloc(sizeof(*r->read_file));
    sbx__v1__read_file__init(r->read_file);
    sbx_set_string(&r->read_file->path, path);
    r->read_file->max_bytes = CP_MAX_BYTES;
    r->op_case = SBX__V1__EXECUTION_REQUEST__OP_READ_FILE;
    sbx_completion *c = NULL;
    sbx_sessions_execute(p->sessions, r, session, SBX_WAIT_FOREVER, &c, NULL);
    sbx_request_free(r);
    int rc;
    if (c == NULL || c->status != SBX__V1__COMPLETION_STATUS__COMPLETION_STATUS_SUCCEEDED ||
        c->result == NULL || c->result->n_files != 1) {
        rc = cli_print_completion(c, false, NULL);
        if (rc == CLI_EXIT_OK)
            rc = CLI_EXIT_FAILED;
    } else {
        const sbx_file *f = c->result->files[0];
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.sbx-cp.%ld", host, (long)getpid());
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        bool ok = fd >= 0 && write(fd, f->content.data, f->content.len) == (ssize_t)f->content.len;
        if (fd >= 0) {
            fchmod(fd, f->mode != 0 ? (f->mode & 0777) : 0644);
            close(fd);
        }
        if (!ok || rename(tmp, host) != 0) {
            fprintf(stderr, "sbx cp: cannot write '%s': %s\n", host, strerror(errno));
            unlink(tmp);
            rc = CLI_EXIT_FAILED;
        } else {
            rc = CLI_EXIT_OK;
        }
    }
    sbx_completion_free(c);
    return rc;
}

int cmd_cp(int argc, char **argv)
{
    cli_parser a = {.cmd = "cp", .help = cmd_cp_help};
    cli_opt_init(&a, argc, argv);
    if (cli_opt_next(&a) == CLI_OPT_EXIT)
        return a.exit_code;
    if (a.n_operands != 2)
        return cli_usage_error("cp", "need SRC and DST");
    argv = a.operands - 1;
    char s_src[256], s_dst[256];
    const char *p_src = NULL, *p_dst = NULL;
    bool r_src = split_remote(argv[1], s_src, sizeof(s_src), &p_src);
    bool r_dst = split_remote(argv[2], s_dst, sizeof(s_dst), &p_dst);
    if (r_src == r_dst)
        return cli_usage_error("cp", "exactly one of SRC and DST must be SESSION:PATH");
    cli_plane p;
    int rc = cli_plane_open(&p, true);
    if (rc != 0)
        return rc;
    rc = r_dst ? upload(&p, argv[1], s_dst, p_dst) : download(&p, s_src, p_src, argv[2]);
    cli_plane_close(&p);
    return rc;
}
