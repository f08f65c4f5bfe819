#include "controller/mitigation/compute_probe.h"

#include <algorithm>
#include <utility>

#include "common/stats.h"

namespace falcon::controller::mitigation {

ComputeProbe::ComputeProbe(std::vector<uint32_t> culprits, int clear_iterations)
    : culprits_(std::move(culprits)), clear_iterations_(std::max(1, clear_iterations)) {}

void ComputeProbe::SetLayout(const analysis::plan::Layout& layout,
                             std::vector<uint32_t> even_split) {
  rank_dp_.clear();
  rank_pp_.clear();
  for (const analysis::plan::RankPlacement& p : layout.ranks()) {
    rank_dp_.push_back(p.dp);
    rank_pp_.push_back(p.pp);
  }
  even_split_ = std::move(even_split);
}

bool ComputeProbe::IsCulprit(uint32_t rank) const {
  return std::find(culprits_.begin(), culprits_.end(), rank) != culprits_.end();
}

bool ComputeProbe::Add(uint32_t rank, int64_t compute_ns,
                       const std::vector<uint32_t>& micro_batches) {
  const std::vector<uint32_t>& m =
      micro_batches.size() == even_split_.size() ? micro_batches : even_split_;
  if (rank >= rank_dp_.size() || static_cast<size_t>(rank_dp_[rank]) >= m.size() ||
      m[rank_dp_[rank]] == 0) {
    return false;
  }
  std::vector<double>& v = samples_[rank];
  v.push_back(static_cast<double>(compute_ns) / m[rank_dp_[rank]]);
  if (v.size() > kWindow) v.erase(v.begin());
  return true;
}

double ComputeProbe::Ratio(uint32_t rank, size_t min_samples) const {
  auto it = samples_.find(rank);
  if (it == samples_.end() || it->second.size() < min_samples || rank >= rank_pp_.size()) {
    return 0;
  }
  std::vector<double> peers;
  for (const auto& [r, samples] : samples_) {
    if (r == rank || samples.size() < 3 || r >= rank_pp_.size() || rank_pp_[r] != rank_pp_[rank] ||
        IsCulprit(r)) {
      continue;
    }
    peers.push_back(common::Median(samples));
  }
  if (peers.empty()) return 0;
  const double peer = common::Median(peers);
  return peer > 0 ? common::Median(it->second) / peer : 0;
}

double ComputeProbe::WorstCulpritRatio(size_t min_samples) const {
  double worst = 0;
  for (uint32_t r : culprits_) worst = std::max(worst, Ratio(r, min_samples));
  return worst;
}

double ComputeProbe::PeerLevel() const {
  std::vector<double> peers;
  for (const auto& [r, samples] : samples_) {
    if (samples.empty() || IsCulprit(r) || r >= rank_pp_.size()) continue;
    const bool stage_peer = std::any_of(culprits_.begin(), culprits_.end(), [&](uint32_t c) {
      return c < rank_pp_.size() && rank_pp_[c] == rank_pp_[r];
    });
    if (stage_peer) peers.push_back(common::Median(samples));
  }
  return peers.empty() ? 0 : common::Median(peers);
}

ComputeProbe::Reading ComputeProbe::Observe(uint32_t rank, double min_ratio) {
  Reading reading;
  reading.ratio = Ratio(rank, kWindow);
  if (reading.ratio <= 0) {
    reading.streak = clear_streak_;
    return reading;
  }
  if (reading.ratio >= 1 + min_ratio) {
    saw_slow_ = true;
    clear_streak_ = 0;
    reading.state = State::kSlow;
  } else if (!saw_slow_ || reading.ratio >= 1 + min_ratio / 2) {
    clear_streak_ = 0;
    reading.state = State::kNotClear;
  } else {
    ++clear_streak_;
    reading.state = clear_streak_ < clear_iterations_ ? State::kClearing : State::kCleared;
  }
  reading.streak = clear_streak_;
  return reading;
}

}  // namespace falcon::controller::mitigation
