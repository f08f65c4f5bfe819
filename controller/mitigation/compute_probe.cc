#include "controller/mitigation/compute_probe.h"

#include <algorithm>
#include <utility>

#include "common/layer_split.h"
#include "common/stats.h"

namespace falcon::controller::mitigation {

ComputeProbe::ComputeProbe(std::vector<uint32_t> culprits, int clear_iterations)
    : culprits_(std::move(culprits)), clear_iterations_(std::max(1, clear_iterations)) {}

void ComputeProbe::SetLayout(const analysis::plan::Layout& layout, std::vector<uint32_t> even_split,
                             int pipeline_blocks) {
  rank_dp_.clear();
  rank_pp_.clear();
  dp_size_ = layout.dp_size();
  pp_size_ = layout.pp_size();
  even_blocks_.clear();
  for (int b : common::EvenStageBlocks(pipeline_blocks, pp_size_)) {
    even_blocks_.push_back(static_cast<uint32_t>(b));
  }
  for (const analysis::plan::RankPlacement& p : layout.ranks()) {
    rank_dp_.push_back(p.dp);
    rank_pp_.push_back(p.pp);
  }
  even_split_ = std::move(even_split);
  stage_peers_.clear();
  for (size_t r = 0; r < rank_pp_.size(); ++r) {
    if (!IsCulprit(static_cast<uint32_t>(r))) ++stage_peers_[rank_pp_[r]];
  }
}

size_t ComputeProbe::StagePeers(int pp) const {
  auto it = stage_peers_.find(pp);
  return it == stage_peers_.end() ? 1 : std::max<size_t>(1, it->second);
}

bool ComputeProbe::IsCulprit(uint32_t rank) const {
  return std::find(culprits_.begin(), culprits_.end(), rank) != culprits_.end();
}

uint32_t ComputeProbe::BlocksHeld(
    int dp, int pp,
    const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& layer_split) const {
  if (layer_split.size() == dp_size_ && dp >= 0 && dp < dp_size_ && pp >= 0 &&
      layer_split[dp].stage_blocks_size() == pp_size_ && layer_split[dp].stage_blocks(pp) > 0) {
    return layer_split[dp].stage_blocks(pp);
  }
  if (pp >= 0 && static_cast<size_t>(pp) < even_blocks_.size()) return even_blocks_[pp];
  return 1;
}

bool ComputeProbe::Add(uint32_t rank, int64_t compute_ns,
                       const std::vector<uint32_t>& micro_batches,
                       const google::protobuf::RepeatedPtrField<falcon::v1::ReplicaSplit>& split) {
  const std::vector<uint32_t>& m =
      micro_batches.size() == even_split_.size() ? micro_batches : even_split_;
  if (rank >= rank_dp_.size() || static_cast<size_t>(rank_dp_[rank]) >= m.size() ||
      m[rank_dp_[rank]] == 0) {
    return false;
  }
  const uint32_t units = m[rank_dp_[rank]] * BlocksHeld(rank_dp_[rank], rank_pp_[rank], split);
  std::vector<Sample>& v = samples_[rank];
  v.push_back({units, static_cast<double>(compute_ns)});
  if (v.size() > kWindow) v.erase(v.begin());
  std::map<uint32_t, CountHistory>& h = history_[rank];
  CountHistory& at = h[units];
  at.compute_ns.push_back(static_cast<double>(compute_ns));
  if (at.compute_ns.size() > kWindow) at.compute_ns.erase(at.compute_ns.begin());
  at.median = common::Median(at.compute_ns);
  at.last_seen = ++sequence_;
  if (h.size() > kHistoryCounts) {
    auto oldest = std::min_element(h.begin(), h.end(), [](const auto& a, const auto& b) {
      return a.second.last_seen < b.second.last_seen;
    });
    h.erase(oldest);
  }
  // One fit per stage per round of its peers' summaries (about one per iteration): a fit reads
  // every peer's history, so one per summary would cost peers^2 per iteration.
  if (!IsCulprit(rank) && ++adds_since_fit_[rank_pp_[rank]] >= StagePeers(rank_pp_[rank])) {
    adds_since_fit_[rank_pp_[rank]] = 0;
    if (const double fixed = FitFixedCost(rank); fixed > 0) {
      std::vector<double>& fits = fits_[rank_pp_[rank]];
      fits.push_back(fixed);
      if (fits.size() > kFits) fits.erase(fits.begin());
    }
  }
  return true;
}

double ComputeProbe::FixedCostNs(uint32_t rank) const {
  if (rank >= rank_pp_.size()) return 0;
  auto it = fits_.find(rank_pp_[rank]);
  return it == fits_.end() || it->second.empty() ? 0 : common::Median(it->second);
}

double ComputeProbe::FitFixedCost(uint32_t rank) const {
  // (units, median compute) of every non-culprit rank of the stage, per unit count it ran.
  std::vector<std::pair<double, double>> points;
  for (const auto& [r, counts] : history_) {
    if (r >= rank_pp_.size() || rank_pp_[r] != rank_pp_[rank] || IsCulprit(r)) continue;
    for (const auto& [count, at] : counts) {
      if (at.compute_ns.size() >= 3) points.emplace_back(count, at.median);
    }
  }
  if (points.size() < 2) return 0;
  double mean_m = 0, mean_y = 0, smallest = points[0].second;
  for (const auto& [m, y] : points) {
    mean_m += m;
    mean_y += y;
    smallest = std::min(smallest, y);
  }
  mean_m /= points.size();
  mean_y /= points.size();
  double sxx = 0, sxy = 0;
  for (const auto& [m, y] : points) {
    sxx += (m - mean_m) * (m - mean_m);
    sxy += (m - mean_m) * (y - mean_y);
  }
  if (sxx <= 0) return 0;  // One count only: no slope.
  const double slope = sxy / sxx;
  if (slope <= 0) return 0;
  const double fixed = mean_y - slope * mean_m;
  return fixed < 0 || fixed > kMaxFixedShare * smallest ? 0 : fixed;
}

double ComputeProbe::PerUnit(const std::vector<Sample>& samples, double fixed_ns) const {
  std::vector<double> per;
  per.reserve(samples.size());
  for (const Sample& s : samples) {
    const double work = s.compute_ns - fixed_ns;
    per.push_back((work > 0 ? work : s.compute_ns) / s.units);
  }
  return common::Median(per);
}

double ComputeProbe::Ratio(uint32_t rank, size_t min_samples) const {
  auto it = samples_.find(rank);
  if (it == samples_.end() || it->second.size() < min_samples || rank >= rank_pp_.size()) {
    return 0;
  }
  const double fixed = FixedCostNs(rank);
  std::vector<double> peers;
  for (const auto& [r, samples] : samples_) {
    if (r == rank || samples.size() < 3 || r >= rank_pp_.size() || rank_pp_[r] != rank_pp_[rank] ||
        IsCulprit(r)) {
      continue;
    }
    peers.push_back(PerUnit(samples, fixed));
  }
  if (peers.empty()) return 0;
  const double peer = common::Median(peers);
  return peer > 0 ? PerUnit(it->second, fixed) / peer : 0;
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
    if (stage_peer) peers.push_back(PerUnit(samples, 0));
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
