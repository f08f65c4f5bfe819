// collective_bench: all-reduce latency and bus bandwidth over loopback (Gloo, float32 sum, 2 and
// 4 rank processes, 4 B .. 64 MiB), and the observer's cost per op (target < 1 us).
// Run with no arguments; prints a table (figure, value, target). Bus bandwidth follows the
// nccl-tests convention: size / time * 2 (n - 1) / n.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collective/buffer.h"
#include "collective/comm_runtime.h"
#include "collective/gloo/gloo_communicator.h"
#include "common/subprocess.h"

namespace falcon::collective {
namespace {

constexpr double kBudgetPerSizeS = 0.4;  // Timed seconds per message size.
constexpr size_t kSizes[] = {4, 64, 1 << 10, 16 << 10, 256 << 10, 4 << 20, 64 << 20};

struct Row {
  size_t bytes;
  double seconds_per_op;
};

std::string TempDir(const char* tag) {
  const char* base = getenv("TMPDIR");
  std::string dir = absl::StrFormat("%s/%s.XXXXXX", base != nullptr ? base : "/tmp", tag);
  return mkdtemp(dir.data()) != nullptr ? dir : "/tmp";
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One rank of the sweep; rank 0 writes one Row per size to `out_fd`.
int SweepRank(int rank, int n, const std::string& dir, int out_fd) {
  CommRuntimeOptions ro;
  ro.rank = rank;
  auto runtime = std::make_shared<CommRuntime>(ro);
  gloo::GlooWorldOptions o;
  o.rank = rank;
  o.world_size = n;
  o.rendezvous_dir = dir;
  o.timeout = absl::Seconds(60);
  auto world = gloo::CreateGlooWorld(o, runtime);
  if (!world.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, world.status().ToString().c_str());
    return 1;
  }
  Communicator& c = **world;
  for (size_t bytes : kSizes) {
    auto buf = OwnedBuffer::Allocate(MemoryKind::kHost, DataType::kFloat32, bytes / 4);
    if (!buf.ok()) return 1;
    std::vector<float> init(bytes / 4, 1.0f);
    if (!buf->Upload(init).ok()) return 1;
    // Warm-up, timed on rank 0 to size the run to about kBudgetPerSize; rank 0 decides.
    const double warm_start = Now();
    if (!c.AllReduce(buf->view(), buf->view(), ReduceOp::kSum).ok()) return 1;
    int32_t iters = static_cast<int32_t>(
        std::clamp(kBudgetPerSizeS / std::max(Now() - warm_start, 1e-6), 2.0, 100.0));
    if (!c.Broadcast(HostBuffer(&iters, 1), 0).ok()) return 1;
    if (!c.Barrier().ok()) return 1;
    const double start = Now();
    for (int i = 0; i < iters; ++i) {
      if (!c.AllReduce(buf->view(), buf->view(), ReduceOp::kSum).ok()) return 1;
    }
    double per_op = (Now() - start) / iters;
    // The slowest rank's time is the op's time.
    if (!c.AllReduce(HostBuffer(&per_op, 1), HostBuffer(&per_op, 1), ReduceOp::kMax).ok()) return 1;
    if (rank == 0) {
      const Row row{bytes, per_op};
      if (write(out_fd, &row, sizeof(row)) != sizeof(row)) return 1;
    }
  }
  return 0;
}

std::vector<Row> Sweep(int n) {
  const std::string dir = TempDir("falcon-bench");
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(stdout);
  std::vector<common::Subprocess> ranks;
  for (int r = 0; r < n; ++r) {
    common::SpawnOptions options;
    options.name = absl::StrCat("bench rank ", r);
    options.parent_death_signal = SIGKILL;
    absl::StatusOr<common::Subprocess> child = common::Subprocess::SpawnFunction(options, [&, r] {
      close(fds[0]);
      return SweepRank(r, n, dir, fds[1]);
    });
    if (!child.ok()) {
      std::fprintf(stderr, "%s\n", child.status().ToString().c_str());
      break;  // The ranks started cannot meet: their destructors kill and reap them.
    }
    ranks.push_back(std::move(*child));
  }
  close(fds[1]);
  std::vector<Row> rows;
  Row row;
  if (static_cast<int>(ranks.size()) == n) {
    while (read(fds[0], &row, sizeof(row)) == sizeof(row)) rows.push_back(row);
  }
  close(fds[0]);
  for (common::Subprocess& rank : ranks) {
    absl::StatusOr<common::ExitStatus> e = rank.Wait();
    if (!e.ok() || !e->success()) {
      std::fprintf(stderr, "%s: %s\n", rank.name().c_str(),
                   e.ok() ? e->ToString().c_str() : e.status().ToString().c_str());
    }
  }
  return rows;
}

// What a shim would do: copy the event into a preallocated ring.
class RingObserver : public OpObserver {
 public:
  void OnOp(const OpEvent& e) noexcept override {
    ring_[next_.fetch_add(1, std::memory_order_relaxed) % ring_.size()] = e;
  }

 private:
  std::array<OpEvent, 4096> ring_{};
  std::atomic<uint64_t> next_{0};
};

// Nanoseconds per Barrier() on a one-rank communicator (no transport work), with `observer`.
double NsPerOp(Communicator& c, CommRuntime& runtime, OpObserver* observer, int ops) {
  runtime.SetObserver(observer);
  const double start = Now();
  for (int i = 0; i < ops; ++i) {
    if (!c.Barrier().ok()) return -1;
  }
  const double ns = (Now() - start) * 1e9 / ops;
  runtime.SetObserver(nullptr);
  return ns;
}

void Print(const std::string& figure, const std::string& value, const std::string& target) {
  std::printf("%-44s %16s   %s\n", figure.c_str(), value.c_str(), target.c_str());
}

int Main() {
  std::printf(
      "collective_bench: Gloo over loopback 127.0.0.1, ring all-reduce (float32 sum), "
      "rank processes on this machine\n\n");
  Print("figure", "value", "target");
  Print(std::string(44, '-'), std::string(16, '-'), "------");
  for (int n : {2, 4}) {
    const std::vector<Row> rows = Sweep(n);
    if (rows.size() != sizeof(kSizes) / sizeof(kSizes[0])) {
      std::printf("all_reduce sweep with %d ranks FAILED\n", n);
      return 1;
    }
    for (const Row& r : rows) {
      const std::string size = r.bytes >= (1 << 20)   ? absl::StrFormat("%d MiB", r.bytes >> 20)
                               : r.bytes >= (1 << 10) ? absl::StrFormat("%d KiB", r.bytes >> 10)
                                                      : absl::StrFormat("%d B", r.bytes);
      const double busbw = static_cast<double>(r.bytes) / r.seconds_per_op * 2.0 * (n - 1) / n;
      Print(absl::StrFormat("all_reduce %d ranks %s latency", n, size),
            absl::StrFormat("%.1f us", r.seconds_per_op * 1e6), "-");
      Print(absl::StrFormat("all_reduce %d ranks %s bus bandwidth", n, size),
            absl::StrFormat("%.3f GB/s", busbw / 1e9), "-");
    }
  }
  // Observer cost: same one-rank op with no observer, then with a ring-buffer observer.
  CommRuntimeOptions ro;
  auto runtime = std::make_shared<CommRuntime>(ro);
  gloo::GlooWorldOptions o;
  o.rank = 0;
  o.world_size = 1;
  o.rendezvous_dir = TempDir("falcon-bench1");
  auto world = gloo::CreateGlooWorld(o, runtime);
  if (!world.ok()) {
    std::printf("one-rank world FAILED: %s\n", world.status().ToString().c_str());
    return 1;
  }
  RingObserver ring;
  constexpr int kOps = 2'000'000;
  NsPerOp(**world, *runtime, nullptr, kOps / 10);  // Warm-up.
  double best_without = 1e18, best_with = 1e18;
  for (int rep = 0; rep < 3; ++rep) {
    best_without = std::min(best_without, NsPerOp(**world, *runtime, nullptr, kOps));
    best_with = std::min(best_with, NsPerOp(**world, *runtime, &ring, kOps));
  }
  Print("instrumented op path, no observer (1 rank)", absl::StrFormat("%.0f ns", best_without),
        "-");
  Print("instrumented op path, ring observer", absl::StrFormat("%.0f ns", best_with), "-");
  Print("observer cost per op", absl::StrFormat("%.3f us", (best_with - best_without) / 1e3),
        "< 1 us");
  return 0;
}

}  // namespace
}  // namespace falcon::collective

int main() { return falcon::collective::Main(); }
