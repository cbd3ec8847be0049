// grpc_load.cc - the worker bench's load generator: a gRPC C++ client (Debian's libgrpc++,
// completion-queue API) sending sbx.v1.Execution/Execute no-op requests (`true` on profile
// "fake") with a UNIQUE task_id per call, so a server's dedup store can never answer for the
// provider; --same-id sends one id every time (the dedup path, reported as such). It keeps
// --concurrency calls in flight over --connections TCP connections and prints one JSON line:
// calls, failures, seconds, rps, mean_us, p50_us, p99_us. The same binary drives sbx-worker and
// the peer, so both see the same client. Benchmark code only: h2c, loopback.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "sbx/v1/execution.grpc.pb.h"

namespace
{

struct Options {
    std::string target = "127.0.0.1:7443";
    long calls = 10000;
    int concurrency = 1;
    int connections = 1;
    int threads = 1;
    bool same_id = false;
    long warmup = 1000;
};

int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// A task id shaped like the uuid v4 sbx_request_new assigns, unique per (run, call).
std::string task_id(uint64_t run, uint64_t n)
{
    char id[40];
    std::snprintf(id, sizeof id, "%08" PRIx64 "-0000-4000-8000-%012" PRIx64, run & 0xffffffffu,
                  n & 0xffffffffffffull);
    return id;
}

struct Call {
    grpc::ClientContext ctx;
    sbx::v1::ExecutionCompletion resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<sbx::v1::ExecutionCompletion>> rpc;
    int64_t start_ns = 0;
};

struct Shared {
    const Options *o;
    std::vector<std::unique_ptr<sbx::v1::Execution::Stub>> stubs;
    std::atomic<long> next{0}; // calls handed out in this phase
    std::atomic<long> failures{0};
    uint64_t run = 0;
    long base = 0;  // task-id offset of this phase (ids stay unique across phases)
    long total = 0; // calls of this phase
    bool measure = false;
};

// One thread: its own completion queue, its share of the in-flight calls, and the latencies of
// its calls when the phase is measured.
void drive(Shared *s, int index, int in_flight, std::vector<int64_t> *lat)
{
    grpc::CompletionQueue cq;
    sbx::v1::ExecutionRequest req;
    req.set_profile("fake");
    req.mutable_principal()->set_subject("bench");
    req.mutable_run_command()->add_argv("true");
    size_t channel = (size_t)index;
    auto issue = [&]() -> bool {
        long n = s->next.fetch_add(1);
        if (n >= s->total)
            return false;
        req.set_task_id(task_id(s->run, s->o->same_id ? 0 : (uint64_t)(s->base + n)));
        Call *c = new Call;
        c->start_ns = s->measure ? now_ns() : 0;
        c->rpc = s->stubs[channel % s->stubs.size()]->AsyncExecute(&c->ctx, req, &cq);
        channel += (size_t)s->o->threads;
        c->rpc->Finish(&c->resp, &c->status, c);
        return true;
    };
    int outstanding = 0;
    for (int i = 0; i < in_flight && issue(); i++)
        outstanding++;
    void *tag;
    bool ok;
    while (outstanding > 0 && cq.Next(&tag, &ok)) {
        Call *c = static_cast<Call *>(tag);
        if (c->start_ns)
            lat->push_back(now_ns() - c->start_ns);
        if (!ok || !c->status.ok() || c->resp.status() != sbx::v1::COMPLETION_STATUS_SUCCEEDED) {
            if (s->failures.fetch_add(1) < 3)
                std::fprintf(stderr, "grpc_load: call failed: %s %s\n",
                             c->status.error_message().c_str(), c->resp.error().c_str());
        }
        delete c;
        outstanding--;
        if (issue())
            outstanding++;
    }
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
}

bool parse(int argc, char **argv, Options *o)
{
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
        const char *v = nullptr;
        if (a == "--same-id") {
            o->same_id = true;
            continue;
        }
        if ((v = val()) == nullptr)
            return false;
        if (a == "--target")
            o->target = v;
        else if (a == "--calls")
            o->calls = std::atol(v);
        else if (a == "--concurrency")
            o->concurrency = std::atoi(v);
        else if (a == "--connections")
            o->connections = std::atoi(v);
        else if (a == "--threads")
            o->threads = std::atoi(v);
        else if (a == "--warmup")
            o->warmup = std::atol(v);
        else
            return false;
    }
    return o->calls > 0 && o->concurrency > 0 && o->connections > 0 && o->threads > 0 &&
           o->warmup >= 0;
}

} // namespace

int main(int argc, char **argv)
{
    Options o;
    if (!parse(argc, argv, &o)) {
        std::fprintf(stderr, "usage: grpc_load --target HOST:PORT [--calls N] [--concurrency C] "
                             "[--connections K] [--threads T] [--warmup W] [--same-id]\n");
        return 2;
    }
    o.threads = std::min(o.threads, o.concurrency);
    Shared s;
    s.o = &o;
    s.run = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
    for (int i = 0; i < o.connections; i++) {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1); // one TCP connection per channel
        args.SetInt("sbx.bench.channel", i);
        auto ch = grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args);
        if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
            std::fprintf(stderr, "grpc_load: cannot connect to %s\n", o.target.c_str());
            return 1;
        }
        s.stubs.push_back(sbx::v1::Execution::NewStub(ch));
    }
    std::vector<std::vector<int64_t>> lat((size_t)o.threads);
    auto phase = [&](long base, long total, bool measure) {
        s.next = 0;
        s.base = base;
        s.total = total;
        s.measure = measure;
        std::vector<std::thread> th;
        for (int i = 0; i < o.threads; i++) {
            int share = o.concurrency / o.threads + (i < o.concurrency % o.threads ? 1 : 0);
            th.emplace_back(drive, &s, i, share, &lat[(size_t)i]);
        }
        for (auto &t : th)
            t.join();
    };
    phase(0, o.warmup, false);
    int64_t t0 = now_ns();
    phase(o.warmup, o.calls, true);
    int64_t t1 = now_ns();
    std::vector<int64_t> all;
    for (auto &v : lat)
        all.insert(all.end(), v.begin(), v.end());
    std::sort(all.begin(), all.end());
    double sum = 0;
    for (int64_t v : all)
        sum += (double)v;
    size_t n = all.size();
    double secs = (double)(t1 - t0) / 1e9;
    std::printf("{\"calls\": %zu, \"failures\": %ld, \"seconds\": %.3f, \"rps\": %.0f, "
                "\"mean_us\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
                n, s.failures.load(), secs, (double)n / secs, n ? sum / (double)n / 1e3 : 0,
                n ? (double)all[n / 2] / 1e3 : 0, n ? (double)all[n * 99 / 100] / 1e3 : 0);
    return s.failures.load() == 0 ? 0 : 1;
}
