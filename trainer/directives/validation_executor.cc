#include "trainer/directives/validation_executor.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "trainer/model/layers.h"

namespace falcon::trainer::directives {
namespace {

constexpr uint32_t kMaxDim = 65536;
constexpr uint32_t kMaxRepeats = 100;
constexpr uint64_t kMaxLinkBytes = uint64_t{1} << 30;
// Host memory one GEMM test may take (the three matrices): 1 GiB.
constexpr uint64_t kMaxGemmFloats = uint64_t{1} << 28;
// Work of one GEMM task, all repetitions and the warm-up: a few seconds of CPU, so ranks waiting
// for the task at the next agreement stay far inside the communicator timeout.
constexpr double kMaxGemmFlops = 4e10;
// Bytes one link of a pass may move, all repetitions and the warm-up.
constexpr double kMaxLinkTotalBytes = 4.0 * (uint64_t{1} << 30);

}  // namespace

ValidationExecutor::ValidationExecutor(collective::Communicator* comm,
                                       collective::CommRuntime* runtime,
                                       const collective::fault::ComputeSlowdown* slowdown,
                                       const common::Clock* clock)
    : comm_(comm), runtime_(runtime), slowdown_(slowdown), clock_(clock) {}

absl::Status ValidationExecutor::CheckTask(const falcon::v1::ValidationTask& task, int world_size) {
  if (task.task_id() == 0) return absl::InvalidArgumentError("validation_task.task_id must be > 0");
  if (task.ranks_size() == 0) {
    return absl::InvalidArgumentError("validation_task.ranks must not be empty");
  }
  for (int i = 0; i < task.ranks_size(); ++i) {
    if (task.ranks(i) >= static_cast<uint32_t>(world_size)) {
      return absl::InvalidArgumentError(absl::StrCat("validation_task.ranks[", i,
                                                     "] = ", task.ranks(i),
                                                     " is outside the world of ", world_size));
    }
  }
  auto range = [](const char* field, uint64_t v, uint64_t lo, uint64_t hi) -> absl::Status {
    if (v < lo || v > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat("validation_task.", field, " = ", v, " is outside [", lo, ", ", hi, "]"));
    }
    return absl::OkStatus();
  };
  if (task.has_gemm()) {
    const falcon::v1::GemmTest& g = task.gemm();
    for (absl::Status s :
         {range("gemm.m", g.m(), 1, kMaxDim), range("gemm.n", g.n(), 1, kMaxDim),
          range("gemm.k", g.k(), 1, kMaxDim), range("gemm.repeats", g.repeats(), 1, kMaxRepeats)}) {
      if (!s.ok()) return s;
    }
    const uint64_t floats =
        uint64_t{g.m()} * g.k() + uint64_t{g.k()} * g.n() + uint64_t{g.m()} * g.n();
    if (floats > kMaxGemmFloats) {
      return absl::InvalidArgumentError(
          absl::StrCat("validation_task.gemm (", g.m(), " x ", g.n(), " x ", g.k(), ") needs ",
                       floats * 4, " bytes; this executor allows ", kMaxGemmFloats * 4));
    }
    const double flops = 2.0 * g.m() * g.n() * g.k() * (g.repeats() + 1);
    if (flops > kMaxGemmFlops) {
      return absl::InvalidArgumentError(absl::StrCat(
          "validation_task.gemm (", g.m(), " x ", g.n(), " x ", g.k(), ", ", g.repeats(),
          " repeats + warm-up) is ", flops, " FLOP; a CPU executor allows ", kMaxGemmFlops));
    }
    return absl::OkStatus();
  }
  if (task.has_link_pass()) {
    const falcon::v1::LinkPassTest& l = task.link_pass();
    for (absl::Status s : {range("link_pass.bytes", l.bytes(), 1, kMaxLinkBytes),
                           range("link_pass.repeats", l.repeats(), 1, kMaxRepeats)}) {
      if (!s.ok()) return s;
    }
    const double total = static_cast<double>(l.bytes()) * (l.repeats() + 1);
    if (total > kMaxLinkTotalBytes) {
      return absl::InvalidArgumentError(absl::StrCat("validation_task.link_pass moves ", total,
                                                     " bytes per link (bytes x (repeats + 1)); "
                                                     "at most ",
                                                     kMaxLinkTotalBytes, " are allowed"));
    }
    for (int i = 0; i < l.links_size(); ++i) {
      const falcon::v1::Link& link = l.links(i);
      if (link.src_rank() >= static_cast<uint32_t>(world_size) ||
          link.dst_rank() >= static_cast<uint32_t>(world_size) ||
          link.src_rank() == link.dst_rank()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "validation_task.link_pass.links[", i, "] = ", link.src_rank(), " -> ", link.dst_rank(),
            " is not a link between two ranks of the world of ", world_size));
      }
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("validation_task has neither gemm nor link_pass");
}

bool ValidationExecutor::Participates(const falcon::v1::ValidationTask& task) const {
  const uint32_t me = static_cast<uint32_t>(comm_->rank());
  if (std::find(task.ranks().begin(), task.ranks().end(), me) != task.ranks().end()) return true;
  if (!task.has_link_pass()) return false;
  for (const falcon::v1::Link& l : task.link_pass().links()) {
    if (l.src_rank() == me || l.dst_rank() == me) return true;
  }
  return false;
}

falcon::v1::ValidationResult ValidationExecutor::Run(const falcon::v1::ValidationTask& task) {
  absl::MutexLock lock(&mu_);
  collective::PauseGate::ScopedBypass bypass(&runtime_->pause_gate());
  falcon::v1::ValidationResult result;
  result.set_task_id(task.task_id());
  result.set_job(task.job());
  result.set_rank(static_cast<uint32_t>(comm_->rank()));
  absl::Status status = CheckTask(task, comm_->size());
  if (status.ok()) {
    status =
        task.has_gemm() ? RunGemm(task.gemm(), &result) : RunLinkPass(task.link_pass(), &result);
  }
  if (!status.ok()) {
    result.clear_links();
    result.set_gemm_duration_ns(0);
    result.set_gemm_flops(0);
    result.set_error(std::string(status.message()));
  }
  return result;
}

absl::Status ValidationExecutor::RunGemm(const falcon::v1::GemmTest& test,
                                         falcon::v1::ValidationResult* result) {
  const int m = static_cast<int>(test.m()), n = static_cast<int>(test.n()),
            k = static_cast<int>(test.k());
  model::Matrix a = model::Matrix::Constant(m, k, 0.5f);
  model::Matrix b = model::Matrix::Constant(k, n, 0.25f);
  model::Matrix c(m, n);
  for (int i = 0; i < std::min(m, k); ++i) a(i, i) = 1.0f;  // Not a trivially constant product.
  // Like the link shaper, an unknown iteration (-1) counts as 0.
  const int64_t iteration = std::max<int64_t>(0, runtime_->iteration());
  // The fastest repetition: a slow device slows every repetition, while scheduling noise on
  // shared CPUs only inflates some (a mean lets one descheduled repetition fake a culprit).
  int64_t best_ns = 0;
  for (uint32_t rep = 0; rep <= test.repeats(); ++rep) {
    const int64_t start = clock_->MonotonicNanos();
    c.noalias() = a * b;
    int64_t elapsed = clock_->MonotonicNanos() - start;
    if (slowdown_ != nullptr) {
      slowdown_->Apply(iteration, absl::Nanoseconds(elapsed));
      elapsed = clock_->MonotonicNanos() - start;
    }
    if (emulated_gemm_ > absl::ZeroDuration() && device_ != nullptr) {
      device_->Run(emulated_gemm_ * (slowdown_ != nullptr ? slowdown_->FactorAt(iteration) : 1.0));
      elapsed = clock_->MonotonicNanos() - start;
    }
    // Repetition 0 warms caches up.
    if (rep > 0 && (best_ns == 0 || elapsed < best_ns)) best_ns = elapsed;
  }
  const int64_t mean_ns = std::max<int64_t>(1, best_ns);
  result->set_gemm_duration_ns(mean_ns);
  result->set_gemm_flops(2.0 * m * n * k / (static_cast<double>(mean_ns) * 1e-9));
  // Keeps the product observable so it cannot be optimized away.
  if (!(c(0, 0) > -1.0f)) return absl::InternalError("GEMM produced a non-finite value");
  return absl::OkStatus();
}

absl::Status ValidationExecutor::RunLinkPass(const falcon::v1::LinkPassTest& test,
                                             falcon::v1::ValidationResult* result) {
  const int me = comm_->rank();
  std::vector<uint8_t> payload;
  uint8_t ack = 1;
  const collective::Buffer ack_buf = collective::HostBuffer(&ack, 1);
  for (const falcon::v1::Link& link : test.links()) {
    const int src = static_cast<int>(link.src_rank());
    const int dst = static_cast<int>(link.dst_rank());
    if (me != src && me != dst) continue;
    if (payload.empty()) payload.assign(test.bytes(), 0x5a);
    const collective::Buffer data = collective::HostBuffer(payload.data(), payload.size());
    int64_t best_ns = 0;  // Fastest round trip (see RunGemm).
    for (uint32_t rep = 0; rep <= test.repeats(); ++rep) {
      if (me == src) {
        const int64_t start = clock_->MonotonicNanos();
        absl::Status s = comm_->Send(data, dst);
        if (s.ok() && emulated_link_ > absl::ZeroDuration()) absl::SleepFor(emulated_link_);
        if (s.ok()) s = comm_->Recv(ack_buf, dst);
        if (!s.ok()) return s;
        const int64_t elapsed = clock_->MonotonicNanos() - start;
        if (rep > 0 && (best_ns == 0 || elapsed < best_ns)) best_ns = elapsed;
      } else {
        absl::Status s = comm_->Recv(data, src);
        if (s.ok()) s = comm_->Send(ack_buf, src);
        if (!s.ok()) return s;
      }
    }
    if (me == src) {
      falcon::v1::LinkTiming* t = result->add_links();
      *t->mutable_link() = link;
      t->set_duration_ns(std::max<int64_t>(1, best_ns));
      t->set_bytes(test.bytes());
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::trainer::directives
