// agent_bench: throughput and memory of the agent's edge reduction.
//   1. ShimHub end to end, in process: OpBatch messages (validated, reduced, metrics observed,
//      acked), 8 ranks of one job with hints; summaries flushed every 100 iterations.
//   2. The same without hints: iterations found by the ACF period finder.
//   3. Over the unix socket: one shim stream per rank through gRPC into a running Agent.
//   4. Memory per rank: resident memory growth with 64 ranks in steady state.
// Prints a table (figure, value, target); finishes in well under a minute on 2 cores.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "agent/reduce/held_op.h"
#include "agent/shim_hub.h"
#include "common/clock.h"
#include "common/proc_stats.h"
#include "prometheus/registry.h"
#include "proto/falcon/v1/shim.grpc.pb.h"

namespace falcon::agent {
namespace {

constexpr int64_t kIterationNs = 50'000'000;
constexpr int kOpsPerIteration = 24;  // 16 DP all-reduces + 4 sends + 4 receives.
constexpr uint64_t kDpComm = 0xD0;
constexpr uint64_t kPpComm = 0xB0;

class NullStream : public ShimStream {
 public:
  void Send(const v1::AgentToShim&) override {}
  void Close(const absl::Status&) override {}
};

class NullSink : public ControllerSink {
 public:
  void Send(v1::AgentMessage) override {}
};

v1::ShimMessage Hello(uint32_t rank, uint32_t world) {
  v1::ShimMessage m;
  v1::ShimHello* h = m.mutable_hello();
  h->set_job("bench");
  h->set_world_size(world);
  h->mutable_rank()->set_rank(rank);
  h->mutable_rank()->set_node("n1");
  h->mutable_rank()->set_pid(1000 + static_cast<int32_t>(rank));
  h->mutable_rank()->set_gpu(static_cast<int32_t>(rank % 8));
  h->mutable_rank()->set_dp_index(-1);
  h->mutable_rank()->set_pp_index(-1);
  h->mutable_rank()->set_tp_index(-1);
  return m;
}

std::vector<v1::ShimMessage> Comms(uint32_t rank, uint32_t world) {
  std::vector<v1::ShimMessage> out(2);
  v1::Communicator* dp = out[0].mutable_communicator();
  dp->set_comm_id(kDpComm);
  dp->set_kind(v1::COMM_KIND_DP);
  for (uint32_t r = 0; r < world; ++r) dp->add_member_ranks(r);
  v1::Communicator* pp = out[1].mutable_communicator();
  pp->set_comm_id(kPpComm + rank / 2);
  pp->set_kind(v1::COMM_KIND_PP);
  pp->add_member_ranks(rank - rank % 2);
  pp->add_member_ranks(rank - rank % 2 + 1);
  return out;
}

// Op batch with iterations [first, first + n) of `rank`.
v1::ShimMessage Batch(uint32_t rank, uint64_t sequence, int64_t first, int n, bool stamped) {
  v1::ShimMessage m;
  v1::OpBatch* b = m.mutable_op_batch();
  b->set_sequence(sequence);
  const int32_t peer = static_cast<int32_t>(rank % 2 == 0 ? rank + 1 : rank - 1);
  for (int64_t it = first; it < first + n; ++it) {
    for (int j = 0; j < kOpsPerIteration; ++j) {
      v1::OpRecord* r = b->add_records();
      const bool p2p = j >= 16;
      r->set_comm_id(p2p ? kPpComm + rank / 2 : kDpComm);
      r->set_op_kind(!p2p
                         ? v1::OP_KIND_ALL_REDUCE
                         : ((j % 2 == 0) == (rank % 2 == 0) ? v1::OP_KIND_SEND : v1::OP_KIND_RECV));
      r->set_peer(p2p ? peer : -1);
      r->set_bytes(16 << 20);
      const int64_t start = it * kIterationNs + j * 2'000'000 + rank * 1000;
      r->set_host_start_ns(start);
      r->set_host_end_ns(start + 1'000'000);
      r->set_seq(static_cast<uint64_t>(it * kOpsPerIteration + j + 1));
      r->set_iteration(stamped ? it : -1);
    }
  }
  return m;
}

v1::ShimMessage Hint(int64_t it) {
  v1::ShimMessage m;
  m.mutable_iteration()->set_iteration(it);
  m.mutable_iteration()->set_start_ns(it * kIterationNs);
  m.mutable_iteration()->set_end_ns((it + 1) * kIterationNs);
  return m;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

struct HubResult {
  double ops_per_s = 0;
  uint64_t summaries = 0;
};

// Feeds `iterations` iterations of `ranks` ranks through a ShimHub; batches of 10 iterations.
HubResult RunHub(uint32_t ranks, int iterations, bool hints) {
  common::RealClock clock;
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics metrics(registry, "n1", "bench");
  NullSink sink;
  ShimHub::Options options;
  options.node = "n1";
  ShimHub hub(options, clock, &metrics, &sink);
  std::vector<NullStream> streams(ranks);
  std::vector<uint64_t> ids;
  for (uint32_t r = 0; r < ranks; ++r) {
    ids.push_back(hub.Open(&streams[r]));
    hub.OnMessage(ids[r], Hello(r, ranks));
    for (const auto& c : Comms(r, ranks)) hub.OnMessage(ids[r], c);
  }
  // Build every message first: the figure is the agent's work, not the benchmark's.
  constexpr int kPerBatch = 10;
  std::vector<std::vector<v1::ShimMessage>> batches(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    for (int b = 0; b * kPerBatch < iterations; ++b) {
      batches[r].push_back(Batch(r, b + 1, b * kPerBatch, kPerBatch, hints));
    }
  }
  std::vector<v1::TelemetryBatch> out;
  HubResult result;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t b = 0; b < batches[0].size(); ++b) {
    for (uint32_t r = 0; r < ranks; ++r) {
      hub.OnMessage(ids[r], batches[r][b]);
      if (hints) {
        for (int i = 0; i < kPerBatch; ++i) hub.OnMessage(ids[r], Hint(b * kPerBatch + i));
      }
    }
    if (b % 10 == 9) {
      out.clear();
      hub.Flush(false, &out);
      for (const auto& t : out) result.summaries += t.iterations_size();
    }
  }
  const double s = Seconds(t0);
  result.ops_per_s = static_cast<double>(ranks) * iterations * kOpsPerIteration / s;
  return result;
}

// Ops per second through the unix socket into a running agent (one gRPC stream per rank).
double RunSocket(uint32_t ranks, int iterations) {
  char tmpl[] = "/tmp/falcon-agent-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 0;
  const std::string dir = tmpl;
  common::RealClock clock;
  AgentOptions o;
  o.plaintext = true;            // Loopback (docs/operations.md#tls).
  o.controller = "127.0.0.1:1";  // Nobody: summaries stay buffered.
  o.socket_path = dir + "/agent.sock";
  o.node = "n1";
  o.metrics_listen = "";
  auto agent = Agent::Start(o, clock);
  if (!agent.ok()) {
    std::fprintf(stderr, "agent: %s\n", agent.status().ToString().c_str());
    return 0;
  }
  constexpr int kPerBatch = 20;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto channel =
          grpc::CreateChannel("unix:" + o.socket_path, grpc::InsecureChannelCredentials());
      auto stub = v1::Shim::NewStub(channel);
      grpc::ClientContext ctx;
      auto stream = stub->Attach(&ctx);
      stream->Write(Hello(r, ranks));
      for (const auto& c : Comms(r, ranks)) stream->Write(c);
      const int batches = iterations / kPerBatch;
      std::thread reader([&] {
        v1::AgentToShim msg;
        while (stream->Read(&msg)) {
          if (msg.has_op_batch_ack() &&
              msg.op_batch_ack().sequence() == static_cast<uint64_t>(batches)) {
            break;
          }
        }
      });
      for (int b = 0; b < batches; ++b) {
        stream->Write(Batch(r, b + 1, b * kPerBatch, kPerBatch, true));
        for (int i = 0; i < kPerBatch; ++i) stream->Write(Hint(b * kPerBatch + i));
      }
      reader.join();
      stream->WritesDone();
      ctx.TryCancel();
      (void)stream->Finish();
    });
  }
  for (auto& t : threads) t.join();
  const double s = Seconds(t0);
  agent->reset();
  std::filesystem::remove_all(dir);
  return static_cast<double>(ranks) * iterations * kOpsPerIteration / s;
}

struct Memory {
  double rss_per_rank = 0;    // Resident growth / ranks.
  double state_per_rank = 0;  // Held ops and instance entries / ranks, by their sizes.
};

// Memory per rank with `ranks` ranks held in steady state (hinted, flushed every 10 iterations).
Memory MemoryPerRank(uint32_t ranks) {
  common::RealClock clock;
  auto registry = std::make_shared<prometheus::Registry>();
  AgentMetrics metrics(registry, "n1", "bench");
  NullSink sink;
  ShimHub::Options options;
  options.node = "n1";
  std::vector<std::vector<v1::ShimMessage>> batches(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    for (int b = 0; b < 20; ++b) batches[r].push_back(Batch(r, b + 1, b * 10, 10, true));
  }
  const double before = static_cast<double>(common::ResidentBytes(common::kSelf).value_or(0));
  auto hub = std::make_unique<ShimHub>(options, clock, &metrics, &sink);
  std::vector<NullStream> streams(ranks);
  std::vector<uint64_t> ids;
  for (uint32_t r = 0; r < ranks; ++r) {
    ids.push_back(hub->Open(&streams[r]));
    hub->OnMessage(ids[r], Hello(r, ranks));
    for (const auto& c : Comms(r, ranks)) hub->OnMessage(ids[r], c);
  }
  std::vector<v1::TelemetryBatch> out;
  for (int b = 0; b < 20; ++b) {
    for (uint32_t r = 0; r < ranks; ++r) {
      hub->OnMessage(ids[r], batches[r][b]);
      for (int i = 0; i < 10; ++i) hub->OnMessage(ids[r], Hint(b * 10 + i));
    }
    out.clear();
    hub->Flush(false, &out);
  }
  Memory m;
  m.rss_per_rank =
      (static_cast<double>(common::ResidentBytes(common::kSelf).value_or(0)) - before) / ranks;
  const auto stats = hub->job_stats("bench");
  m.state_per_rank = (static_cast<double>(stats.held_ops) * sizeof(reduce::HeldOp) +
                      static_cast<double>(stats.instances) * 64) /
                     ranks;
  return m;
}

}  // namespace
}  // namespace falcon::agent

int main() {
  using falcon::agent::MemoryPerRank;
  using falcon::agent::RunHub;
  using falcon::agent::RunSocket;
  const auto memory = MemoryPerRank(256);  // First: before other runs warm the allocator.
  const auto hinted = RunHub(8, 2000, true);
  const auto acf = RunHub(8, 2000, false);
  const double socket = RunSocket(8, 1000);
  auto row = [](const char* figure, const std::string& value, const char* target) {
    std::printf("%-60s %16s %14s\n", figure, value.c_str(), target);
  };
  row("figure", "value", "target");
  row("op records reduced/s, in process, hints (8 ranks)",
      absl::StrFormat("%.3g", hinted.ops_per_s), ">= 1e6");
  row("op records reduced/s, in process, ACF period (8 ranks)",
      absl::StrFormat("%.3g", acf.ops_per_s), ">= 5e5");
  row("op records reduced/s over the unix socket (8 streams)", absl::StrFormat("%.3g", socket),
      ">= 2e5");
  row("iteration summaries made, hints / ACF (of 16000)",
      absl::StrFormat("%d / %d", hinted.summaries, acf.summaries), "~16000");
  row("memory per rank: resident growth (256 ranks, 240 ops/flush)",
      absl::StrFormat("%.0f KiB", memory.rss_per_rank / 1024), "<= 1024 KiB");
  row("memory per rank: held reduction state between flushes",
      absl::StrFormat("%.1f KiB", memory.state_per_rank / 1024), "<= 256 KiB");
  return 0;
}
