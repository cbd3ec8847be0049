/* request.c - builders for the requests an embedding program sends most (a shell line, an argv,
 * source code, a file written, read or listed, a destroy), so no caller allocates protobuf-c
 * submessages by hand. Each returns a request with a fresh task_id (sbx_request_new) that the
 * caller frees with sbx_request_free, or NULL when memory ran out. Pure construction: nothing
 * here validates a request (the engine does, once) or sends one. */
#include <stdlib.h>
#include <string.h>

#include "sbx/contract.h"

/* A new request for profile (NULL or "": the default one) with op_case set to op, holding
 * sub (allocated here, zeroed and initialised by init) in *slot. */
static sbx_request *with_op(const char *profile, Sbx__V1__ExecutionRequest__OpCase op,
                            size_t sub_size, void (*init)(void *), void **slot_out)
{
    sbx_request *req = sbx_request_new();
    void *sub = req ? calloc(1, sub_size) : NULL;
    if (!sub || (profile && profile[0] && !sbx_set_string(&req->profile, profile))) {
        free(sub);
        sbx_request_free(req);
        return NULL;
    }
    init(sub);
    req->op_case = op;
    *slot_out = sub;
    return req;
}

#define BUILD(req, profile, OP, type, init_fn, field)                                              \
    do {                                                                                           \
        void *sub_ = NULL;                                                                         \
        (req) = with_op((profile), SBX__V1__EXECUTION_REQUEST__OP_##OP, sizeof(type),              \
                        (void (*)(void *))(init_fn), &sub_);                                       \
        if (req)                                                                                   \
            (req)->field = sub_;                                                                   \
    } while (0)

sbx_request *sbx_request_shell(const char *profile, const char *line)
{
    sbx_request *req;
    BUILD(req, profile, RUN_COMMAND, Sbx__V1__RunCommand, sbx__v1__run_command__init, run_command);
    if (req && !sbx_set_string(&req->run_command->shell, line ? line : "")) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

sbx_request *sbx_request_argv(const char *profile, const char *const *argv, size_t argc)
{
    sbx_request *req;
    BUILD(req, profile, RUN_COMMAND, Sbx__V1__RunCommand, sbx__v1__run_command__init, run_command);
    if (!req)
        return NULL;
    Sbx__V1__RunCommand *cmd = req->run_command;
    cmd->argv = argc ? calloc(argc, sizeof(char *)) : NULL;
    if (argc && !cmd->argv) {
        sbx_request_free(req);
        return NULL;
    }
    for (size_t i = 0; i < argc; i++) {
        if (!(cmd->argv[i] = strdup(argv[i] ? argv[i] : ""))) {
            sbx_request_free(req);
            return NULL;
        }
        cmd->n_argv = i + 1;
    }
    return req;
}

sbx_request *sbx_request_code(const char *profile, const char *language, const char *code)
{
    sbx_request *req;
    BUILD(req, profile, RUN_CODE, Sbx__V1__RunCode, sbx__v1__run_code__init, run_code);
    if (req && (!sbx_set_string(&req->run_code->language, language ? language : "") ||
                !sbx_set_string(&req->run_code->code, code ? code : ""))) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

sbx_request *sbx_request_write_file(const char *profile, const char *path, const void *data,
                                    size_t len, uint32_t mode)
{
    sbx_request *req;
    BUILD(req, profile, WRITE_FILE, Sbx__V1__WriteFile, sbx__v1__write_file__init, write_file);
    if (req && (!sbx_set_string(&req->write_file->path, path ? path : "") ||
                !sbx_set_bytes(&req->write_file->content, data, len))) {
        sbx_request_free(req);
        return NULL;
    }
    if (req)
        req->write_file->mode = mode;
    return req;
}

sbx_request *sbx_request_read_file(const char *profile, const char *path)
{
    sbx_request *req;
    BUILD(req, profile, READ_FILE, Sbx__V1__ReadFile, sbx__v1__read_file__init, read_file);
    if (req && !sbx_set_string(&req->read_file->path, path ? path : "")) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

sbx_request *sbx_request_list_files(const char *profile, const char *path)
{
    sbx_request *req;
    BUILD(req, profile, LIST_FILES, Sbx__V1__ListFiles, sbx__v1__list_files__init, list_files);
    if (req && !sbx_set_string(&req->list_files->path, path ? path : "")) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

/* The session and its profile onto a freshly built request; frees it and answers NULL when
 * memory ran out. */
static sbx_request *on_session(sbx_request *req, const sbx_session_handle *session)
{
    if (req && session && !sbx_request_set_session(req, session)) {
        sbx_request_free(req);
        return NULL;
    }
    if (req && session && session->profile && session->profile[0] &&
        !sbx_set_string(&req->profile, session->profile)) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

sbx_request *sbx_request_destroy(const sbx_session_handle *session)
{
    sbx_request *req;
    BUILD(req, NULL, DESTROY, Sbx__V1__Destroy, sbx__v1__destroy__init, destroy);
    return on_session(req, session);
}

sbx_request *sbx_request_pause(const sbx_session_handle *session)
{
    sbx_request *req;
    BUILD(req, NULL, PAUSE, Sbx__V1__PauseSandbox, sbx__v1__pause_sandbox__init, pause);
    return on_session(req, session);
}

sbx_request *sbx_request_resume(const sbx_session_handle *session)
{
    sbx_request *req;
    BUILD(req, NULL, RESUME, Sbx__V1__ResumeSandbox, sbx__v1__resume_sandbox__init, resume);
    return on_session(req, session);
}

sbx_request *sbx_request_expose(const sbx_session_handle *session, uint32_t port)
{
    sbx_request *req;
    BUILD(req, NULL, EXPOSE, Sbx__V1__ExposePort, sbx__v1__expose_port__init, expose);
    if (req)
        req->expose->port = port;
    return on_session(req, session);
}

sbx_request *sbx_request_attach_command(const sbx_session_handle *session, uint64_t command_id,
                                        uint64_t stdout_offset, uint64_t stderr_offset)
{
    sbx_request *req;
    BUILD(req, NULL, ATTACH_COMMAND, Sbx__V1__AttachCommand, sbx__v1__attach_command__init,
          attach_command);
    if (req) {
        req->attach_command->command_id = command_id;
        req->attach_command->stdout_offset = stdout_offset;
        req->attach_command->stderr_offset = stderr_offset;
    }
    return on_session(req, session);
}

sbx_request *sbx_request_cancel_command(const sbx_session_handle *session, uint64_t command_id,
                                        int32_t signal)
{
    sbx_request *req;
    BUILD(req, NULL, CANCEL_COMMAND, Sbx__V1__CancelCommand, sbx__v1__cancel_command__init,
          cancel_command);
    if (req) {
        req->cancel_command->command_id = command_id;
        req->cancel_command->signal = signal;
    }
    return on_session(req, session);
}

sbx_request *sbx_request_snapshot(const sbx_session_handle *session, const char *name)
{
    sbx_request *req;
    BUILD(req, NULL, SNAPSHOT, Sbx__V1__SnapshotWorkspace, sbx__v1__snapshot_workspace__init,
          snapshot);
    if (req && !sbx_set_string(&req->snapshot->name, name ? name : "")) {
        sbx_request_free(req);
        return NULL;
    }
    return on_session(req, session);
}

sbx_request *sbx_request_list_snapshots(const char *profile)
{
    sbx_request *req;
    BUILD(req, profile, LIST_SNAPSHOTS, Sbx__V1__ListSnapshots, sbx__v1__list_snapshots__init,
          list_snapshots);
    return req;
}

sbx_request *sbx_request_delete_snapshot(const char *profile, const char *name)
{
    sbx_request *req;
    BUILD(req, profile, DELETE_SNAPSHOT, Sbx__V1__DeleteSnapshot, sbx__v1__delete_snapshot__init,
          delete_snapshot);
    if (req && !sbx_set_string(&req->delete_snapshot->name, name ? name : "")) {
        sbx_request_free(req);
        return NULL;
    }
    return req;
}

bool sbx_request_set_principal(sbx_request *req, Sbx__V1__PrincipalMode mode, const char *subject)
{
    if (!req)
        return false;
    if (!req->principal && !(req->principal = sbx_principal_new()))
        return false;
    req->principal->mode = mode;
    return sbx_set_string(&req->principal->subject, subject ? subject : "");
}

bool sbx_request_set_session(sbx_request *req, const sbx_session_handle *session)
{
    if (!req)
        return false;
    sbx_session_handle *copy = NULL;
    if (session && !(copy = (sbx_session_handle *)sbx_message_copy(&session->base)))
        return false;
    if (req->session)
        sbx_message_free(&req->session->base);
    req->session = copy;
    return true;
}

bool sbx_request_set_stdin(sbx_request *req, const void *data, size_t len)
{
    if (req && req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RUN_COMMAND && req->run_command)
        return sbx_set_bytes(&req->run_command->stdin, data, len);
    if (req && req->op_case == SBX__V1__EXECUTION_REQUEST__OP_RUN_CODE && req->run_code)
        return sbx_set_bytes(&req->run_code->stdin, data, len);
    return false; /* no operation that takes stdin */
}
