// grpc_peer.cc - the benchmark peer: a C++ gRPC server (Debian's libgrpc++, callback API, the
// fastest server style gRPC offers) that answers sbx.v1.Execution/Execute with a no-op
// completion, so h2load can drive it exactly like sbx-worker. Prints "peer listening on port N"
// and serves until SIGTERM/SIGINT. Benchmark code only: no auth, loopback only.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "sbx/v1/execution.grpc.pb.h"

namespace
{

class NoopExecution final : public sbx::v1::Execution::CallbackService
{
    grpc::ServerUnaryReactor *Execute(grpc::CallbackServerContext *ctx,
                                      const sbx::v1::ExecutionRequest *req,
                                      sbx::v1::ExecutionCompletion *resp) override
    {
        resp->set_task_id(req->task_id());
        resp->set_status(sbx::v1::COMPLETION_STATUS_SUCCEEDED);
        resp->mutable_result()->set_outcome(sbx::v1::OUTCOME_OK);
        auto *reactor = ctx->DefaultReactor();
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }
};

volatile std::sig_atomic_t stop_requested = 0;

void on_signal(int)
{
    stop_requested = 1;
}

} // namespace

int main(int argc, char **argv)
{
    std::string addr = argc > 1 ? argv[1] : "127.0.0.1:0";
    NoopExecution service;
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(addr, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) {
        std::fprintf(stderr, "peer: cannot listen on %s\n", addr.c_str());
        return 1;
    }
    std::fprintf(stderr, "peer listening on port %d\n", port);
    std::fflush(stderr);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    while (!stop_requested)
        pause();
    server->Shutdown();
    return 0;
}
