// Benchmarks of the detection algorithms; prints a table (figure, value, target).
//   bazel run -c opt //analysis/detect:detect_bench
// Times are CPU time of this thread (CLOCK_THREAD_CPUTIME_ID), so that other processes sharing
// the machine inflate them less than wall-clock time would.
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "analysis/detect/bocd.h"
#include "analysis/detect/online_detector.h"
#include "analysis/detect/period_finder.h"

namespace falcon::analysis::detect {
namespace {

int64_t CpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<double> Noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> out(n);
  for (double& v : out) v = d(rng);
  return out;
}

void Row(const std::string& figure, const std::string& value, const std::string& target) {
  std::printf("%-62s %-22s %s\n", figure.c_str(), value.c_str(), target.c_str());
}

// Default options; cost of the updates that take the current run from length r to r + 1000.
void BocdCostAtRunLength(int64_t r) {
  const BocdOptions options;  // Defaults: prune 1e-4, max_hypotheses 50, hazard 1/250.
  int64_t ns = 0, updates = 0, live = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    Bocd bocd = *Bocd::Create(options);
    const std::vector<double> xs = Noise(static_cast<size_t>(r) + 1000, seed);
    for (int64_t i = 0; i < r; ++i) (void)bocd.Update(xs[i]);
    const int64_t start = CpuNanos();
    for (size_t i = static_cast<size_t>(r); i < xs.size(); ++i) (void)bocd.Update(xs[i]);
    ns += CpuNanos() - start;
    updates += 1000;
    live += bocd.live_hypotheses();
  }
  Row(absl::StrFormat("BOCD update, default pruning, run length R = %d", r),
      absl::StrFormat("%.0f ns (%d hyp.)", static_cast<double>(ns) / updates, live / 20),
      "<= 1000 ns");
}

// max_hypotheses = R with the default threshold, over a long stationary stream.
void BocdCostWithCap(int cap) {
  BocdOptions options;
  options.max_hypotheses = cap;
  Bocd bocd = *Bocd::Create(options);
  const std::vector<double> xs = Noise(40000, 7);
  for (size_t i = 0; i < 20000; ++i) (void)bocd.Update(xs[i]);
  const int64_t start = CpuNanos();
  int64_t live = 0;
  for (size_t i = 20000; i < xs.size(); ++i) {
    (void)bocd.Update(xs[i]);
    live += bocd.live_hypotheses();
  }
  const double ns = static_cast<double>(CpuNanos() - start) / 20000;
  Row(absl::StrFormat("BOCD update, cap R = %d (live hypotheses)", cap),
      absl::StrFormat("%.0f ns (%lld hyp.)", ns, static_cast<long long>(live / 20000)),
      cap <= 50 ? "<= 1000 ns" : "(reference)");
  Row(absl::StrFormat("BOCD memory, cap R = %d", cap),
      absl::StrFormat("%.1f KiB", bocd.MemoryBytes() / 1024.0), "");
}

void OnlineDetectorCost() {
  OnlineDetector d = *OnlineDetector::Create(OnlineDetectorOptions());
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(0.0, 0.03);
  std::vector<double> xs(100000);
  for (double& v : xs) v = 1.0 + noise(rng);
  const int64_t start = CpuNanos();
  for (size_t i = 0; i < xs.size(); ++i) (void)d.AddValue(static_cast<int64_t>(i), xs[i]);
  const double ns = static_cast<double>(CpuNanos() - start) / xs.size();
  Row("Online detector (BOCD + signal + verification), per sample", absl::StrFormat("%.0f ns", ns),
      "<= 1000 ns");
  Row("Memory per online detector (defaults, after 100k samples)",
      absl::StrFormat("%.1f KiB", d.MemoryBytes() / 1024.0), "");
}

std::vector<OpEvent> OpStream(size_t n, int period, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> pattern(period);
  for (int i = 0; i < period; ++i) pattern[i] = OpSymbol(1 + i % 5, 10 + i % 7);
  std::shuffle(pattern.begin(), pattern.end(), rng);
  std::vector<OpEvent> ops;
  int64_t t = 0;
  for (size_t i = 0; ops.size() < n; ++i) {
    ops.push_back({pattern[i % period], t});
    t += 1000 + static_cast<int64_t>(rng() % 500);
    if (rng() % 100 == 0) ops.push_back({rng(), t});  // Stray op.
  }
  ops.resize(n);
  return ops;
}

void PeriodFinderCost() {
  for (int period : {24, 240}) {
    const std::vector<OpEvent> ops = OpStream(100000, period, 5);
    PeriodOptions options;
    options.window = 100000;
    options.max_lag = 256;
    const int64_t start = CpuNanos();
    absl::StatusOr<PeriodResult> r = FindPeriod(ops, options);
    const double ms = static_cast<double>(CpuNanos() - start) / 1e6;
    Row(absl::StrFormat("Period finder, 100,000 ops, period %d (found %d)", period,
                        r.ok() ? r->period : -1),
        absl::StrFormat("%.1f ms", ms), "");
  }
  const std::vector<OpEvent> ops = OpStream(100000, 240, 6);
  IterationTracker tracker = *IterationTracker::Create(IterationTracker::Options());
  const int64_t start = CpuNanos();
  int64_t iterations = 0;
  for (const OpEvent& op : ops) iterations += tracker.Add(op)->has_value() ? 1 : 0;
  const double ns = static_cast<double>(CpuNanos() - start) / ops.size();
  Row(absl::StrFormat("Iteration tracker (window 4096, redetect 1024), per op (%lld it.)",
                      static_cast<long long>(iterations)),
      absl::StrFormat("%.0f ns", ns), "");
}

}  // namespace
}  // namespace falcon::analysis::detect

int main() {
  using namespace falcon::analysis::detect;  // NOLINT: a benchmark's main.
  std::printf("%-62s %-22s %s\n", "figure", "value", "target");
  std::printf("%s\n", std::string(100, '-').c_str());
  for (int64_t r : {100, 1000, 10000}) BocdCostAtRunLength(r);
  for (int cap : {50, 100, 1000, 10000}) BocdCostWithCap(cap);
  OnlineDetectorCost();
  PeriodFinderCost();
  return 0;
}
