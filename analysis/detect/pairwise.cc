#include "analysis/detect/pairwise.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "analysis/detect/bandwidth_reference.h"
#include "common/stats.h"

namespace falcon::analysis::detect {
namespace {

struct EndpointCounts {
  int slow = 0;
  int fine = 0;
};

std::string LinkName(const EndpointPair& p) { return absl::StrCat(p.a, "-", p.b); }

}  // namespace

absl::Status PairwiseOptions::Validate() const {
  if (!(slow_ratio > 0 && slow_ratio <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("slow_ratio: ", slow_ratio, " is outside (0, 10]"));
  }
  if (!(noise_sigmas >= 0 && noise_sigmas <= 100)) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise_sigmas: ", noise_sigmas, " is outside [0, 100]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PairwiseResult> LocalizePairwise(const std::vector<PairMeasurement>& measurements,
                                                const PairwiseOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (measurements.empty()) return absl::InvalidArgumentError("no pair measured");
  // Fastest figure per unordered pair.
  std::map<std::pair<std::string, std::string>, double> best;
  for (const PairMeasurement& m : measurements) {
    const std::string where = m.origin.empty() ? "" : absl::StrCat(m.origin, ": ");
    if (m.a.empty() || m.b.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, "empty endpoint name"));
    }
    if (m.a == m.b) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "pair of '", m.a, "' with itself: a pair needs two endpoints"));
    }
    // Normal, not subnormal: a ratio against it must stay finite.
    if (!std::isnormal(m.bandwidth) || m.bandwidth <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, "bandwidth of ", m.a, "-", m.b, " is ",
                                                     m.bandwidth,
                                                     ": must be a finite number > 1e-300"));
    }
    const auto key = m.a < m.b ? std::make_pair(m.a, m.b) : std::make_pair(m.b, m.a);
    auto [it, inserted] = best.emplace(key, m.bandwidth);
    if (!inserted) it->second = std::max(it->second, m.bandwidth);
  }

  PairwiseResult result;
  std::vector<double> values;
  values.reserve(best.size());
  for (const auto& [pair, bw] : best) values.push_back(bw);
  const BandwidthReference judge =
      JudgeBandwidths(values, options.slow_ratio, options.noise_sigmas);
  result.reference_bandwidth = judge.reference;
  result.pairs = static_cast<int>(best.size());
  result.noise_sigma = judge.noise_sigma;
  auto ratio_of = [&](double bw) { return judge.Ratio(bw); };
  auto is_slow = [&](double bw) { return judge.Slow(bw); };
  for (double v : values) {
    if (v >= result.reference_bandwidth * (1 + options.slow_ratio)) ++result.fast_pairs;
  }
  std::map<std::string, EndpointCounts> counts;
  for (const auto& [pair, bw] : best) {
    const bool slow = is_slow(bw);
    result.slow_pairs += slow ? 1 : 0;
    for (const std::string& e : {pair.first, pair.second}) {
      (slow ? counts[e].slow : counts[e].fine) += 1;
    }
  }
  result.endpoints = static_cast<int>(counts.size());

  // Slow endpoints: every pair slow, and at least two of them with partners seen fine elsewhere
  // (a node measured only against slow nodes is not evidence against itself).
  std::set<std::string> slow_endpoints;
  std::vector<PairwiseFinding> endpoint_findings, link_findings;
  for (const auto& [e, c] : counts) {
    if (c.slow < 2 || c.fine > 0) continue;
    int evidence = 0;
    for (const auto& [pair, bw] : best) {
      if (pair.first != e && pair.second != e) continue;
      const std::string& partner = pair.first == e ? pair.second : pair.first;
      if (is_slow(bw) && counts[partner].fine > 0) ++evidence;
    }
    if (evidence < 2) continue;
    slow_endpoints.insert(e);
    PairwiseFinding f;
    f.kind = PairwiseFinding::Kind::kEndpoint;
    f.endpoint = e;
    std::vector<double> ratios;
    for (const auto& [pair, bw] : best) {
      if (pair.first != e && pair.second != e) continue;
      f.slow_pairs.push_back({pair.first, pair.second});
      ratios.push_back(ratio_of(bw));
    }
    f.ratio = common::Median(ratios);
    endpoint_findings.push_back(std::move(f));
  }
  // Endpoints seen fine with someone: the witnesses an undecided end can be measured against,
  // first those whose every slow pair is explained by a slow endpoint.
  auto explained = [&](const std::pair<std::string, std::string>& pair) {
    return slow_endpoints.count(pair.first) > 0 || slow_endpoints.count(pair.second) > 0;
  };
  std::map<std::string, int> unexplained_slow;
  for (const auto& [pair, bw] : best) {
    if (!is_slow(bw) || explained(pair)) continue;
    ++unexplained_slow[pair.first];
    ++unexplained_slow[pair.second];
  }
  std::vector<std::string> witnesses;
  for (int clean = 1; clean >= 0; --clean) {
    for (const auto& [e, c] : counts) {
      if (c.fine > 0 && (unexplained_slow[e] == 0) == (clean == 1)) witnesses.push_back(e);
    }
  }
  // The first unmeasured pair of `end` with a witness (clean ones first, in name order: the
  // advice is deterministic); fine -> not `end`, slow -> `end`.
  auto deciding_pair = [&](const std::string& end, const std::string& not_a,
                           const std::string& not_b) -> std::optional<EndpointPair> {
    for (const std::string& w : witnesses) {
      if (w == not_a || w == not_b || w == end) continue;
      const auto key = end < w ? std::make_pair(end, w) : std::make_pair(w, end);
      if (best.count(key) > 0) continue;
      return EndpointPair{key.first, key.second};
    }
    return std::nullopt;
  };
  // Endpoints measured only against slow endpoints: nothing is known about them.
  for (const auto& [e, c] : counts) {
    if (slow_endpoints.count(e) > 0) continue;
    bool all_explained = true;
    for (const auto& [pair, bw] : best) {
      if (pair.first != e && pair.second != e) continue;
      const std::string& partner = pair.first == e ? pair.second : pair.first;
      all_explained = all_explained && slow_endpoints.count(partner) > 0;
    }
    if (!all_explained) continue;
    PairwiseFinding f;
    f.kind = PairwiseFinding::Kind::kUntested;
    f.endpoint = e;
    for (const auto& [pair, bw] : best) {
      if (pair.first == e || pair.second == e) f.slow_pairs.push_back({pair.first, pair.second});
    }
    if (std::optional<EndpointPair> d = deciding_pair(e, "", "")) f.deciding_pairs.push_back(*d);
    link_findings.push_back(std::move(f));
  }
  for (const auto& [pair, bw] : best) {
    if (!is_slow(bw)) continue;
    if (explained(pair)) continue;  // Part of a slow endpoint.
    PairwiseFinding f;
    f.link = {pair.first, pair.second};
    f.ratio = ratio_of(bw);
    const bool a_fine = counts[pair.first].fine > 0;
    const bool b_fine = counts[pair.second].fine > 0;
    if (a_fine && b_fine) {
      f.kind = PairwiseFinding::Kind::kLink;
    } else {
      f.kind = PairwiseFinding::Kind::kAmbiguous;
      for (const std::string& end : {pair.first, pair.second}) {
        if (counts[end].fine > 0) continue;
        f.candidates.push_back(absl::StrCat("endpoint ", end));
        // One unmeasured pair of this end with a witness decides it: fine -> the link, slow ->
        // the end.
        if (std::optional<EndpointPair> d = deciding_pair(end, pair.first, pair.second)) {
          f.deciding_pairs.push_back(*d);
        }
      }
      f.candidates.push_back(absl::StrCat("link ", LinkName(f.link)));
    }
    link_findings.push_back(std::move(f));
  }
  auto slowest_first = [](const PairwiseFinding& x, const PairwiseFinding& y) {
    return x.ratio > y.ratio;
  };
  std::stable_sort(endpoint_findings.begin(), endpoint_findings.end(), slowest_first);
  std::stable_sort(link_findings.begin(), link_findings.end(), slowest_first);
  result.findings = std::move(endpoint_findings);
  for (PairwiseFinding& f : link_findings) result.findings.push_back(std::move(f));
  return result;
}

std::string DescribeFinding(const PairwiseFinding& f, const std::string& endpoint_word) {
  switch (f.kind) {
    case PairwiseFinding::Kind::kEndpoint:
      return absl::StrFormat(
          "%s %s: all %d of its pairs are slow (x%.2f slower than the reference pair): its NIC or "
          "the "
          "%s, not "
          "%d separate links",
          endpoint_word, f.endpoint, f.slow_pairs.size(), f.ratio, endpoint_word,
          f.slow_pairs.size());
    case PairwiseFinding::Kind::kLink:
      return absl::StrFormat(
          "link %s: slow (x%.2f slower than the reference pair) while %s and %s are fine with "
          "others",
          LinkName(f.link), f.ratio, f.link.a, f.link.b);
    case PairwiseFinding::Kind::kUntested: {
      std::vector<std::string> pairs;
      for (const EndpointPair& p : f.slow_pairs) pairs.push_back(LinkName(p));
      return absl::StrFormat(
          "%s %s: measured only against slow %ss (%s): nothing is known about it; %s",
          endpoint_word, f.endpoint, endpoint_word, absl::StrJoin(pairs, ", "),
          f.deciding_pairs.empty()
              ? std::string("no endpoint was measured fine to judge it against")
              : absl::StrCat("measure ", LinkName(f.deciding_pairs[0]), " to judge it"));
    }
    case PairwiseFinding::Kind::kAmbiguous: {
      std::vector<std::string> decide;
      for (const EndpointPair& p : f.deciding_pairs) decide.push_back(LinkName(p));
      std::string candidates = absl::StrJoin(f.candidates, " or ");
      return absl::StrFormat(
          "ambiguous: pair %s is slow (x%.2f slower than the reference pair): %s; %s",
          LinkName(f.link), f.ratio,
          absl::StrReplaceAll(candidates, {{"endpoint ", endpoint_word + " "}}),
          decide.empty()
              ? std::string("no other endpoint was measured fine to decide against")
              : absl::StrCat("measure ", absl::StrJoin(decide, " and "),
                             " to decide (fine: the link; slow: the ", endpoint_word, ")"));
    }
  }
  return "";
}

}  // namespace falcon::analysis::detect
