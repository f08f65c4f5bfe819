#include "fleet/model.h"

#include <algorithm>
#include <cmath>

#include "common/split_mix.h"
#include "common/stats.h"

namespace falcon::fleet {
namespace {

using common::SplitMix64;

double Uniform(uint64_t h) { return (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0; }

constexpr double kCompute = 0.6, kTpBusy = 0.1, kTpTransfer = 0.09, kDpBusy = 0.25,
                 kDpTransfer = 0.2, kPpBusy = 0.05, kPpTransfer = 0.02;

}  // namespace

uint64_t StableHash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

absl::StatusOr<NoiseModel> FitNoiseModel(const std::vector<common::AlibabaWorkerSeries>& workers) {
  std::vector<double> sigmas, phis;
  for (const common::AlibabaWorkerSeries& w : workers) {
    if (w.values.size() < 3) continue;
    const double mean = common::Mean(w.values);
    if (mean <= 0) continue;
    std::vector<double> x;
    for (double v : w.values) x.push_back(v / mean - 1);
    double ss = 0, lag = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ss += x[i] * x[i];
      if (i + 1 < x.size()) lag += x[i] * x[i + 1];
    }
    sigmas.push_back(std::sqrt(ss / static_cast<double>(x.size())));
    phis.push_back(ss > 0 ? lag / ss : 0);
  }
  if (sigmas.empty()) return absl::InvalidArgumentError("workers: no series with 3 values");
  NoiseModel m;
  m.sigma = common::Median(sigmas);
  m.phi = std::clamp(common::Median(phis), 0.0, 0.99);
  return m;
}

NoiseModel ReplayModel(const std::vector<common::AlibabaWorkerSeries>& workers) {
  NoiseModel m;
  for (const common::AlibabaWorkerSeries& w : workers) {
    if (w.values.empty()) continue;
    const double mean = common::Mean(w.values);
    if (mean <= 0) continue;
    std::vector<double> v;
    for (double x : w.values) v.push_back(x / mean);
    m.replay.push_back(std::move(v));
  }
  return m;
}

JobModel::JobModel(Layout layout, Fault fault, const NoiseModel& noise, uint64_t seed,
                   int64_t base_ns)
    : layout_(std::move(layout)),
      fault_(fault),
      noise_(noise),
      seed_(SplitMix64(seed ^ StableHash(layout_.job))),
      base_ns_(base_ns) {
  if (fault_.kind == Fault::Kind::kLink) {
    const uint32_t s = fault_.rank;
    link_dst_ = layout_.Rank(layout_.pp_index(s), (layout_.dp_index(s) + 1) % layout_.dp,
                             layout_.tp_index(s));
    link_comm_ = DpComm(layout_, s);
  }
}

double JobModel::Gauss(uint64_t a, uint64_t b, uint64_t c) const {
  const uint64_t h = SplitMix64(seed_ ^ SplitMix64(a ^ SplitMix64(b ^ SplitMix64(c))));
  const double u1 = Uniform(h), u2 = Uniform(SplitMix64(h));
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

int64_t JobModel::BaseNs(int64_t k) {
  if (k < 0) k = 0;
  if (!noise_.replay.empty()) {
    const std::vector<double>& series = noise_.replay[seed_ % noise_.replay.size()];
    return static_cast<int64_t>(static_cast<double>(base_ns_) *
                                series[static_cast<size_t>(k) % series.size()]);
  }
  const double innovation = noise_.sigma * std::sqrt(1 - noise_.phi * noise_.phi);
  while (static_cast<int64_t>(factors_.size()) <= k) {
    const uint64_t i = factors_.size();
    ar_state_ = (i == 0 ? noise_.sigma * Gauss(1, i, 0)
                        : noise_.phi * ar_state_ + innovation * Gauss(1, i, 0));
    factors_.push_back(std::max(0.5, 1 + ar_state_));
  }
  return static_cast<int64_t>(static_cast<double>(base_ns_) * factors_[static_cast<size_t>(k)]);
}

void JobModel::Fill(uint32_t r, int64_t k, falcon::v1::IterationSummary* s) {
  const double t = static_cast<double>(BaseNs(k));
  const double jitter = 0.003 * Gauss(2, r, static_cast<uint64_t>(k));
  const bool active = fault_.kind != Fault::Kind::kNone && k >= fault_.onset;
  const double extra_compute =
      active && fault_.kind == Fault::Kind::kCompute ? kCompute * t * (fault_.factor - 1) : 0;
  const double extra_link =
      active && fault_.kind == Fault::Kind::kLink ? kDpTransfer * t * (fault_.factor - 1) : 0;
  const bool slow_rank = fault_.kind == Fault::Kind::kCompute && r == fault_.rank;
  const uint64_t dp = DpComm(layout_, r);
  const bool slow_comm = fault_.kind == Fault::Kind::kLink && dp == link_comm_;
  const double iteration = t + extra_compute + extra_link;
  s->Clear();
  s->set_rank(r);
  s->set_iteration(k);
  s->set_start_ns(k * base_ns_);
  s->set_iteration_time_ns(static_cast<int64_t>(iteration));
  s->set_from_hint(true);
  double busy_total = 0;
  auto add = [&](uint64_t comm, double transfer, double wait, uint64_t bytes) {
    if (comm == 0) return;
    falcon::v1::CommIterationSummary* c = s->add_comms();
    c->set_comm_id(comm);
    c->set_op_count(1);
    c->set_bytes(bytes);
    const int64_t tr = static_cast<int64_t>(std::max(0.0, transfer));
    const int64_t w = static_cast<int64_t>(std::max(0.0, wait));
    c->set_transfer_ns(tr);
    c->set_wait_ns(w);
    c->set_busy_ns(tr + w);
    busy_total += static_cast<double>(tr + w);
  };
  add(TpComm(layout_, r), kTpTransfer * t, (kTpBusy - kTpTransfer) * t, 16 << 20);
  add(dp, kDpTransfer * t + (slow_comm ? extra_link : 0),
      (kDpBusy - kDpTransfer) * t - kCompute * t * jitter + (slow_rank ? 0 : extra_compute) +
          (slow_comm ? 0 : extra_link),
      64 << 20);
  add(PpComm(layout_, r), kPpTransfer * t, (kPpBusy - kPpTransfer) * t, 1 << 20);
  s->set_compute_ns(static_cast<int64_t>(std::max(0.0, iteration - busy_total)));
}

void JobModel::AddOps(uint32_t r, int64_t k, uint64_t* seq,
                      google::protobuf::RepeatedPtrField<falcon::v1::OpRecord>* ops) {
  falcon::v1::IterationSummary s;
  Fill(r, k, &s);
  // Compute first, then the communicators one after the other, ending with the iteration.
  int64_t at = s.start_ns() + s.compute_ns();
  for (const falcon::v1::CommIterationSummary& c : s.comms()) {
    falcon::v1::OpRecord* op = ops->Add();
    op->set_comm_id(c.comm_id());
    op->set_bytes(c.bytes());
    op->set_peer(-1);
    op->set_op_kind(falcon::v1::OP_KIND_ALL_REDUCE);
    if (c.comm_id() / kCommBase == 3) {
      const uint32_t stage = layout_.pp_index(r);
      const bool last = stage + 1 == layout_.pp;
      op->set_op_kind(last ? falcon::v1::OP_KIND_RECV : falcon::v1::OP_KIND_SEND);
      op->set_peer(static_cast<int32_t>(
          layout_.Rank(last ? stage - 1 : stage + 1, layout_.dp_index(r), layout_.tp_index(r))));
    }
    op->set_host_start_ns(at);
    op->set_host_end_ns(at + c.busy_ns());
    op->set_device_duration_ns(std::max<int64_t>(1, c.transfer_ns()));
    op->set_seq(++*seq);
    op->set_iteration(k);
    if (peer_timing_ && c.comm_id() / kCommBase == 2) {
      // The DP all-reduce's network part toward the ring successor.
      const uint32_t next = layout_.Rank(
          layout_.pp_index(r), (layout_.dp_index(r) + 1) % layout_.dp, layout_.tp_index(r));
      const bool slow = fault_.kind == Fault::Kind::kLink && k >= fault_.onset &&
                        r == fault_.rank && next == link_dst_;
      const double busy = kDpTransfer * static_cast<double>(BaseNs(k)) *
                          (slow ? fault_.factor : 1) *
                          (1 + 0.01 * Gauss(5, r, static_cast<uint64_t>(k)));
      falcon::v1::OpRecord* t = ops->Add();
      t->set_comm_id(c.comm_id());
      t->set_op_kind(falcon::v1::OP_KIND_PEER_SEND);
      t->set_peer(static_cast<int32_t>(next));
      t->set_bytes(c.bytes());
      t->set_host_start_ns(at);
      t->set_host_end_ns(at + std::max<int64_t>(1, static_cast<int64_t>(busy)));
      t->set_device_duration_ns(std::max<int64_t>(1, static_cast<int64_t>(busy)));
      t->set_seq(++*seq);
      t->set_iteration(k);
    }
    at += c.busy_ns();
  }
}

int64_t JobModel::GemmNs(uint32_t r) const {
  const double f = fault_.kind == Fault::Kind::kCompute && r == fault_.rank ? fault_.factor : 1;
  return static_cast<int64_t>(1e6 * f * (1 + 0.01 * Gauss(3, r, 0)));
}

int64_t JobModel::LinkNs(uint32_t src, uint32_t dst) const {
  const double f = fault_.kind == Fault::Kind::kLink && src == fault_.rank && dst == link_dst_
                       ? fault_.factor
                       : 1;
  return static_cast<int64_t>(2e6 * f * (1 + 0.01 * Gauss(4, src, dst)));
}

}  // namespace falcon::fleet
