#include "controller/detection/verdict.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/detect/pairwise.h"
#include "common/stats.h"

namespace falcon::controller::detection {
namespace {

using LinkTimes = std::map<uint64_t, std::map<std::pair<uint32_t, uint32_t>, double>>;

// A slow link whose extra time per byte (over its communicator's fine links) is under this share of
// the worst slow link's is left out of a communication verdict as noise beside it.
constexpr double kLinkNoiseShareOfWorst = 0.1;

// Per communicator, pairwise localization over its measured links (ns per byte; a pair's figure
// is its slower direction), and the ranks it names as slow endpoints.
std::vector<uint32_t> SlowEndpoints(const LinkTimes& links, double slow_ratio) {
  std::set<uint32_t> out;
  for (const auto& [comm, per_link] : links) {
    std::map<std::pair<uint32_t, uint32_t>, double> slowest;  // Unordered pair -> ns per byte.
    for (const auto& [link, x] : per_link) {
      const auto key = std::minmax(link.first, link.second);
      double& v = slowest[{key.first, key.second}];
      v = std::max(v, x);
    }
    std::vector<analysis::detect::PairMeasurement> pairs;
    for (const auto& [pair, x] : slowest) {
      pairs.push_back({absl::StrCat(pair.first), absl::StrCat(pair.second), 1 / x,
                       absl::StrCat("communicator ", comm)});
    }
    analysis::detect::PairwiseOptions options;
    options.slow_ratio = slow_ratio;
    absl::StatusOr<analysis::detect::PairwiseResult> r =
        analysis::detect::LocalizePairwise(pairs, options);
    if (!r.ok()) continue;  // Figures were checked > 0 above; options as the verdict's.
    for (const analysis::detect::PairwiseFinding& f : r->findings) {
      uint32_t rank = 0;
      if (f.kind == analysis::detect::PairwiseFinding::Kind::kEndpoint &&
          absl::SimpleAtoi(f.endpoint, &rank)) {
        out.insert(rank);
      }
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace

Verdict JudgeValidation(const std::vector<falcon::controller::v1::PendingTask>& tasks,
                        const std::vector<falcon::v1::ValidationResult>& results,
                        const VerdictOptions& options, const RankNodes& nodes) {
  std::map<uint64_t, const falcon::controller::v1::PendingTask*> by_id;
  for (const auto& t : tasks) by_id[t.task().task_id()] = &t;

  std::map<uint32_t, double> gemm;  // rank -> duration ns (latest result wins)
  // comm -> link (src,dst) -> ns per byte
  LinkTimes links;
  for (const falcon::v1::ValidationResult& r : results) {
    auto it = by_id.find(r.task_id());
    if (it == by_id.end() || !r.error().empty()) continue;
    const falcon::v1::ValidationTask& task = it->second->task();
    // A reference pair's links are judged with the pair they are a reference for.
    const uint64_t group = it->second->compare_with_comm() != 0 ? it->second->compare_with_comm()
                                                                : task.link_pass().comm_id();
    if (task.has_gemm() && r.gemm_duration_ns() > 0) {
      gemm[r.rank()] = static_cast<double>(r.gemm_duration_ns());
    }
    if (task.has_link_pass()) {
      for (const falcon::v1::LinkTiming& l : r.links()) {
        uint64_t bytes = l.bytes() > 0 ? l.bytes() : task.link_pass().bytes();
        if (bytes == 0 || l.duration_ns() <= 0) continue;
        links[group][{l.link().src_rank(), l.link().dst_rank()}] =
            static_cast<double>(l.duration_ns()) / static_cast<double>(bytes);
      }
    }
  }

  // Covered passes (not run: an earlier pass measured each of their links) lend their comm's
  // group the measurement of the same directed link from wherever it was taken.
  std::map<std::pair<uint32_t, uint32_t>, double> any_comm;
  for (const auto& [comm, per_link] : links) {
    for (const auto& [link, x] : per_link) any_comm.emplace(link, x);
  }
  for (const auto& t : tasks) {
    if (!t.covered() || !t.task().has_link_pass()) continue;
    const uint64_t group =
        t.compare_with_comm() != 0 ? t.compare_with_comm() : t.task().link_pass().comm_id();
    for (const falcon::v1::Link& l : t.task().link_pass().links()) {
      auto it = any_comm.find({l.src_rank(), l.dst_rank()});
      if (it != any_comm.end()) links[group].emplace(it->first, it->second);
    }
  }

  Verdict v;
  v.gemm_ranks_measured = static_cast<int>(gemm.size());
  std::vector<std::pair<double, uint32_t>> slow_ranks;
  double gemm_median = 0;
  if (gemm.size() >= 2) {
    std::vector<double> d;
    for (const auto& [rank, ns] : gemm) d.push_back(ns);
    gemm_median = common::Median(d);
    for (const auto& [rank, ns] : gemm) {
      if (ns > gemm_median * (1 + options.gemm_slow_ratio)) {
        slow_ranks.push_back({ns / gemm_median, rank});
      }
    }
  }
  std::vector<std::pair<double, falcon::v1::Link>> slow_links;
  // Slow directed link -> its time over its communicator's fine links' median (the largest when
  // slow in several communicators).
  std::map<std::pair<uint32_t, uint32_t>, double> slow_ratio_of;
  // Slow directed link -> its time per byte over its communicator's fine links' (ns per byte;
  // the largest when slow in several: the noise filter compares the worst link's whole excess).
  std::map<std::pair<uint32_t, uint32_t>, double> excess_of;
  // Directed link -> its time over its communicator's median (the largest when in several).
  std::map<std::pair<uint32_t, uint32_t>, double> link_ratio_of;
  for (const auto& [comm, per_link] : links) {
    v.links_measured += static_cast<int>(per_link.size());
    if (per_link.size() < 2) continue;
    std::vector<double> d;
    for (const auto& [link, x] : per_link) d.push_back(x);
    double median = common::Median(d);
    for (const auto& [link, x] : per_link) {
      double& r = link_ratio_of[link];
      r = std::max(r, x / median);
    }
    // A slow link's ratio is over the median of the links judged fine: slow links lift the
    // median (a pair slow both ways and its reference pair: the median is the mean of a slow and
    // a fine link, and the slow ones would read at most 2x), and a fail-slow's ratio is its
    // slowdown over healthy peers (docs/algorithms.md#verdict). At least the links at or below
    // the median are fine.
    std::vector<double> fine;
    for (const auto& [link, x] : per_link) {
      if (x <= median * (1 + options.link_slow_ratio)) fine.push_back(x);
    }
    const double fine_median = common::Median(fine);
    for (const auto& [link, x] : per_link) {
      if (x > median * (1 + options.link_slow_ratio)) {
        double& e = excess_of[link];
        e = std::max(e, x - fine_median);
        double& r = slow_ratio_of[link];
        r = std::max(r, x / fine_median);
      }
    }
  }
  for (const auto& [link, r] : slow_ratio_of) {
    falcon::v1::Link l;
    l.set_src_rank(link.first);
    l.set_dst_rank(link.second);
    slow_links.push_back({r, l});
  }
  auto by_ratio = [](const auto& a, const auto& b) { return a.first > b.first; };
  std::sort(slow_ranks.begin(), slow_ranks.end(), by_ratio);
  std::sort(slow_links.begin(), slow_links.end(), by_ratio);
  // Node NIC faults: every measured link judged across communicators, by node pair
  // (docs/algorithms.md#node-nic-faults); their ratios take part in the cause.
  NodeNicResult nic;
  double nic_ratio = 0;
  if (!nodes.empty()) {
    std::vector<LinkFigure> figures;
    for (const auto& [comm, per_link] : links) {
      for (const auto& [link, x] : per_link) figures.push_back({link.first, link.second, 1 / x});
    }
    std::vector<falcon::v1::Link> comm_slow;
    for (const auto& [r, l] : slow_links) comm_slow.push_back(l);
    NodeNicOptions nic_options;
    nic_options.slow_ratio = options.link_slow_ratio;
    nic = FindNodeNicFaults(figures, nodes, comm_slow, nic_options);
    for (const NodeNicFault& f : nic.faults) nic_ratio = std::max(nic_ratio, f.ratios.front());
  }
  const double rank_ratio = slow_ranks.empty() ? 0 : slow_ranks[0].first;
  const double link_ratio = std::max(slow_links.empty() ? 0 : slow_links[0].first, nic_ratio);

  if (rank_ratio > 0 && rank_ratio >= link_ratio) {
    v.cause = falcon::v1::CAUSE_COMPUTE;
    v.ratio = rank_ratio;
    for (const auto& [r, rank] : slow_ranks) {
      v.ranks.push_back(rank);
      v.rank_ratios.push_back(r);
    }
    v.reason = absl::StrFormat("GEMM on rank %d takes %.2fx the median of %d ranks", v.ranks[0],
                               rank_ratio, v.gemm_ranks_measured);
  } else if (!nic.faults.empty()) {
    // The named nodes' links and the communicators' slow links (each touching a named node).
    v.cause = falcon::v1::CAUSE_COMMUNICATION;
    const std::vector<std::pair<double, falcon::v1::Link>> all =
        NodeNicVerdictLinks(slow_links, nic, &v.nodes);
    for (const auto& [r, l] : all) {
      v.links.push_back(l);
      v.link_ratios.push_back(r);
    }
    v.ratio = all.front().first;
    v.reason = DescribeNodeNicFaults(nic);
    if (!slow_links.empty()) {
      absl::StrAppendFormat(&v.reason,
                            "; per communicator, link %d->%d takes %.2fx the median of its "
                            "communicator's links",
                            slow_links[0].second.src_rank(), slow_links[0].second.dst_rank(),
                            slow_links[0].first);
    }
  } else if (link_ratio > 0) {
    v.cause = falcon::v1::CAUSE_COMMUNICATION;
    v.ratio = link_ratio;
    // A slow link whose extra time per byte is a small part of the worst one's is noise beside it
    // (the slow links' extra times add up per iteration; CPU noise in a two-link communicator
    // reads 1.5x on a busy machine): named, it would send S3 after healthy links.
    double worst_excess = 0;
    for (const auto& [link, e] : excess_of) worst_excess = std::max(worst_excess, e);
    std::vector<std::string> noise;
    for (const auto& [r, link] : slow_links) {
      const double e = excess_of[{link.src_rank(), link.dst_rank()}];
      if (e < kLinkNoiseShareOfWorst * worst_excess) {
        noise.push_back(absl::StrFormat("%d->%d (%.2fx)", link.src_rank(), link.dst_rank(), r));
        continue;
      }
      v.links.push_back(link);
      v.link_ratios.push_back(r);
    }
    v.reason = absl::StrFormat("link %d->%d takes %.2fx the median of its communicator's links",
                               v.links[0].src_rank(), v.links[0].dst_rank(), link_ratio);
    for (const falcon::v1::Link& l : v.links) {
      auto reverse = link_ratio_of.find({l.dst_rank(), l.src_rank()});
      if (reverse == link_ratio_of.end()) continue;
      const bool slow_back = reverse->second > 1 + options.link_slow_ratio;
      if (!slow_back) v.one_way_links.push_back(l);
      if (&l == &v.links[0]) {
        if (slow_back) {
          absl::StrAppendFormat(&v.reason, "; both directions: %d->%d takes %.2fx", l.dst_rank(),
                                l.src_rank(), reverse->second);
        } else {
          absl::StrAppendFormat(&v.reason, "; one way: the reverse %d->%d is %.1fx faster",
                                l.dst_rank(), l.src_rank(), link_ratio / reverse->second);
        }
      }
    }
    v.link_endpoints = SlowEndpoints(links, options.link_slow_ratio);
    for (uint32_t rank : v.link_endpoints) {
      absl::StrAppendFormat(&v.reason,
                            "; every measured link of rank %d is slow: its NIC or its node rather "
                            "than separate links",
                            rank);
    }
    if (!noise.empty()) {
      absl::StrAppendFormat(
          &v.reason, "; left out as noise beside it (extra time per byte under %.0f%% of its): %s",
          100 * kLinkNoiseShareOfWorst, absl::StrJoin(noise, ", "));
    }
    if (!nic.note.empty()) absl::StrAppend(&v.reason, "; ", nic.note);
  } else {
    v.cause = falcon::v1::CAUSE_UNKNOWN;
    v.reason = absl::StrCat("no slow GEMM among ", v.gemm_ranks_measured,
                            " ranks and no slow link among ", v.links_measured, " links");
    if (!nic.note.empty()) absl::StrAppend(&v.reason, "; ", nic.note);
  }
  return v;
}

SlowdownToExplain SlowdownValidationMustExplain(double event_ratio,
                                                absl::Span<const double> latest_seconds,
                                                double healthy_seconds, double min_ratio) {
  SlowdownToExplain out;
  out.ratio = event_ratio;
  if (latest_seconds.empty() || !(healthy_seconds > 0)) return out;
  const double latest = common::Median(latest_seconds) / healthy_seconds;
  if (latest >= 1 + min_ratio && latest < event_ratio) {
    out.ratio = latest;
    out.latest = true;
  }
  return out;
}

bool CanExplain(double culprit_ratio, double slowdown) {
  // The rest of the excess is measurement noise.
  constexpr double kExplainedShare = 0.8;
  return slowdown <= 1 || culprit_ratio >= 1 + (slowdown - 1) * kExplainedShare;
}

namespace {

// Keeps culprits[0] and the others whose ratio explains `slowdown`, their ratios with them
// (parallel lists only); describes each one dropped into `weak`.
template <typename T, typename Describe>
void KeepExplaining(double slowdown, std::vector<T>* culprits, std::vector<double>* ratios,
                    const Describe& describe, std::vector<std::string>* weak) {
  // keep(i) runs before either list changes.
  KeepCulpritsIf(culprits, ratios, [&](size_t i) {
    if (i == 0 || CanExplain((*ratios)[i], slowdown)) return true;
    weak->push_back(absl::StrFormat("%s (%.2fx)", describe((*culprits)[i]), (*ratios)[i]));
    return false;
  });
}

}  // namespace

std::string DropCulpritsTooWeakToExplain(double slowdown, Verdict* v) {
  std::vector<std::string> weak;
  if (v->rank_ratios.size() == v->ranks.size() && v->ranks.size() > 1) {
    KeepExplaining(
        slowdown, &v->ranks, &v->rank_ratios, [](uint32_t r) { return absl::StrCat("rank ", r); },
        &weak);
  }
  if (v->nodes.empty() && v->link_ratios.size() == v->links.size() && v->links.size() > 1) {
    KeepExplaining(
        slowdown, &v->links, &v->link_ratios,
        [](const falcon::v1::Link& l) {
          return absl::StrCat("link ", l.src_rank(), "->", l.dst_rank());
        },
        &weak);
    const std::vector<falcon::v1::Link>& links = v->links;
    std::vector<falcon::v1::Link> one_way;
    for (const falcon::v1::Link& l : v->one_way_links) {
      for (const falcon::v1::Link& k : links) {
        if (k.src_rank() == l.src_rank() && k.dst_rank() == l.dst_rank()) one_way.push_back(l);
      }
    }
    v->one_way_links = std::move(one_way);
  }
  return absl::StrJoin(weak, ", ");
}

}  // namespace falcon::controller::detection
