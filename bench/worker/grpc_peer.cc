// grpc_peer.cc - the benchmark peer: a C++ gRPC server (Debian's libgrpc++, callback API, the
// fastest server style gRPC offers) that answers sbx.v1.Execution/Execute with a no-op
// completion, so the load generator drives it exactly like sbx-worker. The completion has the
// shape and size of sbx-worker's for a no-op on a per_call profile of the fake provider: the
// task id, SUCCEEDED, an OK result, and the session handle (a new session id per call, profile,
// provider, node, a 32-byte binding, two timestamps, CLOSED), so the client parses the same
// bytes from both servers and the figures compare the servers. Prints "peer listening on port
// N" and serves until SIGTERM/SIGINT. Benchmark code only: no auth, loopback only.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "sbx/v1/execution.grpc.pb.h"

namespace
{

std::atomic<unsigned long long> sessions{0};

class NoopExecution final : public sbx::v1::Execution::CallbackService
{
    grpc::ServerUnaryReactor *Execute(grpc::CallbackServerContext *ctx,
                                      const sbx::v1::ExecutionRequest *req,
                                      sbx::v1::ExecutionCompletion *resp) override
    {
        resp->set_task_id(req->task_id());
        resp->set_status(sbx::v1::COMPLETION_STATUS_SUCCEEDED);
        resp->mutable_result()->set_outcome(sbx::v1::OUTCOME_OK);
        char id[40];
        unsigned long long n = sessions.fetch_add(1, std::memory_order_relaxed);
        std::snprintf(id, sizeof id, "%08llx-0000-4000-8000-%012llx", n >> 48,
                      n & 0xffffffffffffULL);
        long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
        auto *session = resp->mutable_session();
        session->set_session_id(id);
        session->set_profile("fake");
        session->set_provider("fake");
        session->set_node("vm");
        session->set_binding(std::string(32, '\x5a'));
        session->set_created_at_ms(now);
        session->set_last_used_at_ms(now);
        session->set_status(sbx::v1::SESSION_STATUS_CLOSED);
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
