// What a simulated job's ranks report: iteration times from a noise model fitted to the Alibaba
// PAI per-worker series (or replaying them), and injected faults that stay consistent across the
// iteration summaries, the raw op records sent while profiled, and the validation answers.
//
// Shape of one healthy iteration of base time T (synchronous training: every rank's iteration
// takes the same time): compute 0.6 T; TP all-reduce 0.1 T (transfer 0.09 T); DP all-reduce
// 0.25 T (transfer 0.2 T); PP send/recv 0.05 T (transfer 0.02 T); per-rank compute jitter (0.3 %)
// is absorbed by the DP wait. A compute fault of factor f on rank s adds 0.6 T (f - 1) to s's
// compute and, as waiting, to every other rank's DP time; the job's iteration time grows by it. A
// link fault of factor f on the link s -> d of s's DP ring adds 0.2 T (f - 1) to the transfer of
// every member of that DP communicator (a ring is as slow as its slowest link) and, as waiting, to
// every other rank. Validation: a GEMM takes 1 ms (x f on the slow rank), a link 2 ms (x f on the
// slow link), each with 1 % per-rank jitter. With peer timing (as NCCL's profiler plugin gives,
// docs/algorithms.md#peer-timing), a rank's raw ops also carry a peer transfer of its DP all-reduce
// to its ring successor: the DP bytes in 0.2 T (x f on the slow link), with 1 % jitter.
#ifndef FALCON_FLEET_MODEL_H_
#define FALCON_FLEET_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/csv.h"
#include "fleet/layout.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::fleet {

// Relative deviation of a job's iteration time from its mean, x_k = phi x_{k-1} + e_k, with
// stationary deviation `sigma` (AR(1)); or, when `replay` is non-empty, the series themselves
// (each normalized to mean 1), one per job chosen by the job's name.
struct NoiseModel {
  double sigma = 0.0165;  // Median per-worker deviation of Alibaba PAI job 2 (stable workers).
  double phi = 0.62;      // Median lag-1 autocorrelation of the same series.
  std::vector<std::vector<double>> replay;
};

// Fits sigma and phi (medians over workers of the per-worker relative deviation and lag-1
// autocorrelation). Errors: kInvalidArgument when no worker has 3 values.
absl::StatusOr<NoiseModel> FitNoiseModel(const std::vector<common::AlibabaWorkerSeries>& workers);
// Every worker's series normalized to mean 1 (the replay mode).
NoiseModel ReplayModel(const std::vector<common::AlibabaWorkerSeries>& workers);

struct Fault {
  enum class Kind { kNone, kCompute, kLink };
  Kind kind = Kind::kNone;
  uint32_t rank = 0;  // kCompute: the slow rank; kLink: the link's sender.
  double factor = 1;  // Slowdown of the rank's compute or the link's transfers, > 1.
  int64_t onset = 0;  // First slow iteration.
};

class JobModel {
 public:
  JobModel(Layout layout, Fault fault, const NoiseModel& noise, uint64_t seed, int64_t base_ns);

  const Layout& layout() const { return layout_; }
  const Fault& fault() const { return fault_; }
  // kLink: the slow link's receiver (the sender's successor in its DP ring) and its communicator.
  uint32_t link_dst() const { return link_dst_; }
  uint64_t link_comm() const { return link_comm_; }

  // The job's base iteration time at iteration `k` (ns), the same in every process for a seed.
  int64_t BaseNs(int64_t k);
  // Rank `r`'s summary of iteration `k`.
  void Fill(uint32_t r, int64_t k, falcon::v1::IterationSummary* s);
  // Rank `r`'s raw op records of iteration `k` (one per communicator used, and with peer timing a
  // PEER_SEND to its DP ring successor), consistent with its summary; `seq` is the rank's op
  // sequence, advanced per record.
  void AddOps(uint32_t r, int64_t k, uint64_t* seq,
              google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>* ops);
  // Whether AddOps adds peer transfers (default false: no profiler plugin).
  void set_peer_timing(bool on) { peer_timing_ = on; }
  int64_t GemmNs(uint32_t r) const;
  int64_t LinkNs(uint32_t src, uint32_t dst) const;

 private:
  double Gauss(uint64_t a, uint64_t b, uint64_t c) const;

  Layout layout_;
  Fault fault_;
  const NoiseModel& noise_;
  uint64_t seed_;
  int64_t base_ns_;
  uint32_t link_dst_ = 0;
  uint64_t link_comm_ = 0;
  bool peer_timing_ = false;
  std::vector<double> factors_;  // Base time / base_ns per iteration, computed in order.
  double ar_state_ = 0;
};

// A stable 64-bit hash of a string (FNV-1a), the same in every process.
uint64_t StableHash(const std::string& s);

}  // namespace falcon::fleet

#endif  // FALCON_FLEET_MODEL_H_
