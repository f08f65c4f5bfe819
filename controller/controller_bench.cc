// controller_bench: ingest throughput on one core (summaries/s, op records/s), memory per rank,
// and detection delay with 1,024 simulated ranks. Runs the Controller in process on one thread
// (the controller loop is single-threaded by design), with the in-memory store and with RocksDB
// in a temporary directory. Also the cost of durable acknowledgements in wall-clock time (an
// fsync waits without using the CPU): RocksDB ingest with acks sent once the write is in the
// operating system (the controller before durable acks) against acks sent after an fsync, one per
// batch or one per group of batches (group commit). Prints a table: figure, value, target.
#include <prometheus/registry.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "common/proc_stats.h"
#include "controller/controller.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/rocksdb_kv_store.h"
#include "controller/testing/job_fixtures.h"

namespace falcon::controller {
namespace {

// Throughput "on one core" is measured in this thread's CPU time, so that other processes on a
// shared machine do not distort it.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  }
};

double Seconds(double a, double b) { return b - a; }

class CountingChannel : public core::AgentChannel {
 public:
  bool Send(const falcon::v1::ControllerMessage& m) override {
    if (m.has_batch_ack() && m.batch_ack().has_error()) ++errors;
    ++sent;
    return true;
  }
  void Close(const absl::Status&) override { ++closed; }
  uint64_t sent = 0;
  uint64_t errors = 0;
  uint64_t closed = 0;
};

struct Store {
  std::string dir;
  std::unique_ptr<store::KvStore> kv;
  ~Store() {
    kv.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

std::unique_ptr<Store> MakeStore(bool rocks, bool sync_writes = true) {
  auto s = std::make_unique<Store>();
  if (!rocks) {
    s->kv = std::make_unique<store::InMemoryKvStore>(store::ControllerStore::TableNames());
    return s;
  }
  char tmpl[] = "/tmp/falcon_bench_XXXXXX";
  s->dir = mkdtemp(tmpl);
  store::RocksDbOptions o;
  o.path = s->dir;
  o.sync_writes = sync_writes;
  s->kv = std::move(*store::RocksDbKvStore::Open(o, store::ControllerStore::TableNames()));
  return s;
}

// One simulated job: agents with their sessions and per-rank summary templates.
class Sim {
 public:
  Sim(const testing::LayoutSpec& spec, Controller* c) : spec_(spec), c_(c) {
    const uint32_t world = spec.dp * spec.pp;
    for (uint32_t r = 0; r < world; ++r) templates_.push_back(testing::MakeSummary(spec, r, 0, 1));
    for (uint32_t n = 0; n < testing::NodeCount(spec); ++n) {
      Agent a;
      a.channel = std::make_shared<CountingChannel>();
      a.session.channel = a.channel;
      a.ranks = testing::RanksOfNode(spec, n);
      falcon::v1::AgentMessage hello;
      hello.mutable_hello()->set_agent_id(testing::NodeName(n));
      hello.mutable_hello()->set_node(testing::NodeName(n));
      *hello.mutable_hello()->add_jobs() = testing::NodeRegistration(spec, n);
      if (!c_->OnAgentMessage(&a.session, hello).ok()) std::abort();
      agents_.push_back(std::move(a));
    }
  }
  // Called after every batch (e.g. to sync a group of them).
  void set_after_batch(std::function<void()> fn) { after_batch_ = std::move(fn); }

  // Sends iterations [from, from + count) of every rank, `per_batch` iterations per batch.
  uint64_t Run(int64_t from, int64_t count, int per_batch,
               const std::function<int64_t(uint32_t, int64_t)>& time_ns) {
    uint64_t summaries = 0;
    for (int64_t it = from; it < from + count; it += per_batch) {
      for (Agent& a : agents_) {
        falcon::v1::AgentMessage m;
        falcon::v1::TelemetryBatch* b = m.mutable_batch();
        b->set_sequence(++a.seq);
        b->set_job(spec_.job);
        for (int64_t k = it; k < std::min(from + count, it + per_batch); ++k) {
          for (uint32_t r : a.ranks) {
            falcon::v1::IterationSummary* s = b->add_iterations();
            *s = templates_[r];
            const int64_t t = time_ns(r, k);
            s->set_iteration(k);
            s->set_iteration_time_ns(t);
            s->set_start_ns(k * 100'000'000);
            for (auto& cs : *s->mutable_comms()) {
              cs.set_wait_ns(t / 10);
              cs.set_transfer_ns(t / 10);
              cs.set_busy_ns(t / 5);
            }
            s->set_compute_ns(t - t / 5 * s->comms_size());
            ++summaries;
          }
        }
        if (!c_->OnAgentMessage(&a.session, m).ok()) std::abort();
        if (after_batch_) after_batch_();
      }
    }
    return summaries;
  }
  uint64_t errors() const {
    uint64_t e = 0;
    for (const Agent& a : agents_) e += a.channel->errors;
    return e;
  }
  AgentSession& session(size_t i) { return agents_[i].session; }
  uint64_t NextSeq(size_t i) { return ++agents_[i].seq; }

 private:
  struct Agent {
    std::shared_ptr<CountingChannel> channel;
    AgentSession session;
    std::vector<uint32_t> ranks;
    uint64_t seq = 0;
  };
  testing::LayoutSpec spec_;
  Controller* c_;
  std::function<void()> after_batch_;
  std::vector<falcon::v1::IterationSummary> templates_;
  std::vector<Agent> agents_;
};

int64_t Noisy(std::mt19937_64& rng, double mean_ns, double cv) {
  std::normal_distribution<double> n(mean_ns, mean_ns * cv);
  return std::max<int64_t>(1, static_cast<int64_t>(n(rng)));
}

struct Row {
  std::string figure, value, target;
};

ControllerOptions BenchOptions() {
  ControllerOptions o;
  o.localization.profiling_iterations = 1000;  // Stay in profiling while measuring ops.
  o.localization.profiling_timeout = absl::Hours(1);
  return o;
}

testing::LayoutSpec Layout1024() {
  testing::LayoutSpec spec;
  spec.job = "bench-1024";
  spec.dp = 128;
  spec.pp = 8;
  spec.ranks_per_node = 8;
  return spec;
}

// Summaries per second over 1,024 ranks (128 agents, 16 iterations per batch). With RocksDB the
// acks are durable, one fsync per round of the 128 agents (group commit, as the controller loop
// does when they arrive together).
double SummaryThroughput(bool rocks) {
  auto store = MakeStore(rocks);
  common::FakeClock clock;
  ControllerOptions options = BenchOptions();
  options.group_commit = true;
  auto c = std::move(*Controller::Create(options, store->kv.get(), &clock, nullptr));
  Sim sim(Layout1024(), c.get());
  int pending = 0;
  sim.set_after_batch([&] {
    if (++pending < 128) return;
    pending = 0;
    if (!c->SyncStore().ok()) std::abort();
  });
  std::mt19937_64 rng(1);
  auto healthy = [&](uint32_t, int64_t) { return Noisy(rng, 1e8, 0.03); };
  sim.Run(0, 32, 16, healthy);  // Warm-up (detector warm-up, allocations).
  auto t0 = Clock::now();
  uint64_t n = sim.Run(32, rocks ? 96 : 160, 16, healthy);
  double s = Seconds(t0, Clock::now());
  if (sim.errors() > 0) std::abort();
  return n / s;
}

// Summaries per wall-clock second over 1,024 ranks with RocksDB (128 agents, 16 iterations per
// batch): `durable` false acknowledges once the write is in the operating system; true after an
// fsync, every `group` batches (1: one per batch; 128: one per round of all agents).
double WallSummaryThroughput(bool durable, int group, double* sync_ms = nullptr) {
  auto store = MakeStore(true, durable);
  common::FakeClock clock;
  ControllerOptions options = BenchOptions();
  options.group_commit = true;  // Synced below, as the controller loop does after a burst.
  auto c = std::move(*Controller::Create(options, store->kv.get(), &clock, nullptr));
  Sim sim(Layout1024(), c.get());
  int pending = 0;
  double sync_seconds = 0;
  int syncs = 0;
  sim.set_after_batch([&] {
    if (++pending < group) return;
    pending = 0;
    const auto s0 = std::chrono::steady_clock::now();
    if (!c->SyncStore().ok()) std::abort();
    sync_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    ++syncs;
  });
  std::mt19937_64 rng(1);
  auto healthy = [&](uint32_t, int64_t) { return Noisy(rng, 1e8, 0.03); };
  sim.Run(0, 32, 16, healthy);
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t n = sim.Run(32, 96, 16, healthy);
  if (!c->SyncStore().ok()) std::abort();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (sim.errors() > 0) std::abort();
  if (sync_ms != nullptr) *sync_ms = syncs > 0 ? 1e3 * sync_seconds / syncs : 0;
  return static_cast<double>(n) / s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Op records per second while the job is profiled: batches of 65,536 device-timed ops.
double OpThroughput(bool rocks, bool parse) {
  auto store = MakeStore(rocks);
  common::FakeClock clock;
  auto c = std::move(*Controller::Create(BenchOptions(), store->kv.get(), &clock, nullptr));
  testing::LayoutSpec spec;
  spec.job = "bench-ops";
  spec.dp = 4;
  spec.pp = 2;
  spec.ranks_per_node = 8;
  Sim sim(spec, c.get());
  std::mt19937_64 rng(2);
  sim.Run(0, 120, 1,
          [&](uint32_t r, int64_t i) { return Noisy(rng, r == 3 && i >= 60 ? 1.5e8 : 1e8, 0.02); });
  if (c->registry().Find(spec.job)->job().state() != falcon::v1::JOB_STATE_PROFILING) {
    std::fprintf(stderr, "bench: the job did not reach profiling\n");
    std::abort();
  }
  constexpr int kOps = 65536;
  falcon::v1::AgentMessage m;
  falcon::v1::TelemetryBatch* b = m.mutable_batch();
  b->set_job(spec.job);
  b->set_op_rank(0);
  for (int k = 0; k < kOps; ++k) {
    falcon::v1::OpRecord* op = b->add_ops();
    op->set_comm_id(k % 2 ? 1000 : 2000);
    op->set_op_kind(k % 2 ? falcon::v1::OP_KIND_ALL_REDUCE : falcon::v1::OP_KIND_SEND);
    op->set_peer(k % 2 ? -1 : 4);
    op->set_bytes(1 << 20);
    op->set_host_start_ns(1000 + 10 * k);
    op->set_host_end_ns(1005 + 10 * k);
    op->set_device_duration_ns(4);
    op->set_seq(k + 1);
    op->set_iteration(120 + k / 1024);
  }
  const int batches = rocks ? 24 : 40;
  double seconds = 0;
  for (int i = 0; i < batches; ++i) {
    b->set_sequence(sim.NextSeq(0));
    if (parse) {
      const std::string wire = m.SerializeAsString();  // What arrives off the network.
      auto t0 = Clock::now();
      falcon::v1::AgentMessage in;
      if (!in.ParseFromString(wire)) std::abort();
      if (!c->OnAgentMessage(&sim.session(0), in).ok()) std::abort();
      seconds += Seconds(t0, Clock::now());
    } else {
      auto t0 = Clock::now();
      if (!c->OnAgentMessage(&sim.session(0), m).ok()) std::abort();
      seconds += Seconds(t0, Clock::now());
    }
  }
  if (sim.errors() > 0) {
    std::fprintf(stderr, "bench: op batches rejected\n");
    std::abort();
  }
  return static_cast<double>(batches) * kOps / seconds;
}

struct DelayResult {
  double iterations = 0;  // Median over trials.
  double round_ms = 0;    // Controller CPU per 1,024-rank iteration.
  size_t bytes_per_rank = 0;
  long rss_per_rank = 0;
};

DelayResult DetectionDelay1024() {
  DelayResult out;
  std::vector<double> delays;
  double cpu = 0;
  uint64_t rounds = 0;
  for (int trial = 0; trial < 3; ++trial) {
    auto store = MakeStore(false);
    common::FakeClock clock;
    auto c = std::move(*Controller::Create(BenchOptions(), store->kv.get(), &clock, nullptr));
    const long rss0 = common::ResidentBytes(common::kSelf).value_or(0);
    Sim sim(Layout1024(), c.get());
    std::mt19937_64 rng(100 + trial);
    const uint32_t slow_rank = 97 + 331 * trial;
    const int64_t onset = 200;
    auto t0 = Clock::now();
    sim.Run(0, 240, 1, [&](uint32_t r, int64_t i) {
      return Noisy(rng, r == slow_rank && i >= onset ? 1.2e8 : 1e8, 0.03);
    });
    cpu += Seconds(t0, Clock::now());
    rounds += 240;
    if (trial == 0) {
      out.bytes_per_rank = c->detection().MemoryBytes() / 1024;
      out.rss_per_rank = (common::ResidentBytes(common::kSelf).value_or(0) - rss0) / 1024;
    }
    auto events = c->events().List("", false, 0);
    if (events.empty()) {
      std::fprintf(stderr, "bench: no event in trial %d\n", trial);
      continue;
    }
    const falcon::v1::Event& e = events.back()->event();
    delays.push_back(static_cast<double>(e.alarm_iteration() - onset));
  }
  std::sort(delays.begin(), delays.end());
  out.iterations = delays.empty() ? -1 : delays[delays.size() / 2];
  out.round_ms = 1e3 * cpu / static_cast<double>(rounds);
  return out;
}

}  // namespace
}  // namespace falcon::controller

int main() {
  using falcon::controller::Row;
  std::vector<Row> rows;
  const double sum_mem = falcon::controller::SummaryThroughput(false);
  rows.push_back(
      {"summaries/s, 1,024 ranks, in-memory store", absl::StrFormat("%.0f", sum_mem), "-"});
  const double sum_rocks = falcon::controller::SummaryThroughput(true);
  rows.push_back({"summaries/s, 1,024 ranks, RocksDB", absl::StrFormat("%.0f", sum_rocks), "-"});
  {
    using falcon::controller::Median;
    using falcon::controller::WallSummaryThroughput;
    // Interleaved rounds, medians: the three see the same machine load.
    std::vector<double> before_runs, per_batch_runs, grouped_runs, sync_1_runs, sync_128_runs;
    for (int round = 0; round < 5; ++round) {
      double ms = 0;
      before_runs.push_back(WallSummaryThroughput(false, 1));
      per_batch_runs.push_back(WallSummaryThroughput(true, 1, &ms));
      sync_1_runs.push_back(ms);
      grouped_runs.push_back(WallSummaryThroughput(true, 128, &ms));
      sync_128_runs.push_back(ms);
    }
    const double before = Median(before_runs);
    const double per_batch = Median(per_batch_runs);
    const double grouped = Median(grouped_runs);
    const double sync_ms_1 = Median(sync_1_runs);
    const double sync_ms_128 = Median(sync_128_runs);
    rows.push_back({"wall summaries/s, 1,024 ranks, RocksDB, acks not durable (no fsync)",
                    absl::StrFormat("%.0f", before), "-"});
    rows.push_back({"wall summaries/s, 1,024 ranks, RocksDB, durable acks, fsync per batch",
                    absl::StrFormat("%.0f", per_batch), "-"});
    rows.push_back({"wall summaries/s, 1,024 ranks, RocksDB, durable acks, fsync per 128 batches",
                    absl::StrFormat("%.0f", grouped), "-"});
    rows.push_back({"durable / not durable ingest, fsync per batch (ratio)",
                    absl::StrFormat("%.2f", per_batch / before), "-"});
    rows.push_back({"durable / not durable ingest, group commit of 128 batches (ratio)",
                    absl::StrFormat("%.2f", grouped / before), "-"});
    rows.push_back({"store sync (fsync + commit record) latency, per batch / per 128 (ms)",
                    absl::StrFormat("%.2f / %.2f", sync_ms_1, sync_ms_128), "-"});
  }
  const double ops_mem = falcon::controller::OpThroughput(false, false);
  rows.push_back(
      {"op records/s, profiling, in-memory store", absl::StrFormat("%.0f", ops_mem), ">= 1000000"});
  const double ops_rocks = falcon::controller::OpThroughput(true, true);
  rows.push_back({"op records/s, profiling, RocksDB + proto parse",
                  absl::StrFormat("%.0f", ops_rocks), ">= 1000000"});
  falcon::controller::DelayResult d = falcon::controller::DetectionDelay1024();
  rows.push_back({"detector + pipeline memory per rank (bytes)",
                  absl::StrFormat("%d", d.bytes_per_rank), "-"});
  rows.push_back({"RSS growth per rank incl. in-memory store, 240 iterations (bytes)",
                  absl::StrFormat("%d", d.rss_per_rank), "-"});
  rows.push_back({"detection delay, 1,024 ranks, x1.2 step in 3% noise (iterations, median of 3)",
                  absl::StrFormat("%.0f", d.iterations), "<= 5"});
  rows.push_back(
      {"controller CPU per 1,024-rank iteration (ms)", absl::StrFormat("%.2f", d.round_ms), "-"});
  std::printf("%-80s %14s %12s\n", "figure", "value", "target");
  for (const Row& r : rows) {
    std::printf("%-80s %14s %12s\n", r.figure.c_str(), r.value.c_str(), r.target.c_str());
  }
  return 0;
}
