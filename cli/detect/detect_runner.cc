#include "cli/detect/detect_runner.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "analysis/detect/blame.h"
#include "analysis/detect/imbalance.h"
#include "analysis/detect/pairwise.h"
#include "analysis/detect/verification.h"
#include "common/stats.h"

namespace falcon::cli::detect {
namespace {

using nlohmann::json;

json Ratio(double before, double after) {
  if (before == 0 || !std::isfinite(after / before)) return nullptr;
  return after / before;
}

json PointJson(const analysis::detect::ChangePoint& cp) {
  return {{"index", cp.index},
          {"kind", std::string(analysis::detect::ChangeKindName(cp.kind))},
          {"ratio", Ratio(cp.mean_before, cp.mean_after)},
          {"probability", cp.probability}};
}

absl::StatusOr<json> AnalyseSeries(const NamedSeries& s, const DetectOptions& options) {
  if (s.values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("series \"", s.name, "\" is empty"));
  }
  if (!options.raw) {
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (s.values[i] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("series \"", s.name, "\" ", s.origins[i], ": negative time ", s.values[i],
                         " (verification compares times; use --raw for signed data)"));
      }
    }
  }
  if (!options.zscore) {
    // Without z-scoring BOCD sees the values as they are (any finite value is fine with it).
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (std::fabs(s.values[i]) > analysis::detect::kMaxUnscaledObservation) {
        return absl::InvalidArgumentError(
            absl::StrCat("series \"", s.name, "\" ", s.origins[i], ": ", s.values[i],
                         " is too large for BOCD without z-scoring (|x| <= ",
                         analysis::detect::kMaxUnscaledObservation, "); drop --nozscore"));
      }
    }
  }
  analysis::detect::SegmentOptions seg;
  seg.bocd.prior = options.prior;
  seg.bocd.hazard = 1.0 / options.expected_run_length;
  seg.bocd.prune_threshold = 1e-4;  // ocp's truncRlim in TCPDBench.
  seg.bocd.max_hypotheses = 10000;  // ocp's maxRlength: offline, no need to cap lower.
  seg.zscore = options.zscore && s.values.size() >= 2;
  // The statistic the online detector thresholds (its lag), so min_probability means the same.
  seg.probability_lag = analysis::detect::OnlineDetectorOptions().lag;
  absl::StatusOr<analysis::detect::Segmentation> segmentation =
      analysis::detect::SegmentSeries(s.values, seg);
  if (!segmentation.ok()) {
    return absl::Status(segmentation.status().code(),
                        absl::StrCat("series \"", s.name, "\": ", segmentation.status().message()));
  }
  json points = json::array();
  const std::vector<int64_t>& cps = segmentation->change_points;
  json below = json::array();  // Verified changes left out for their probability.
  if (options.raw) {
    for (size_t j = 0; j < cps.size(); ++j) {
      const size_t c = static_cast<size_t>(cps[j]);
      const size_t next = j + 1 < cps.size() ? static_cast<size_t>(cps[j + 1]) : s.values.size();
      json ratio = 1.0;
      if (j > 0) {
        const size_t prev = static_cast<size_t>(cps[j - 1]);
        const absl::Span<const double> values = s.values;
        ratio = Ratio(common::Mean(values.subspan(prev, c - prev)),
                      common::Mean(values.subspan(c, next - c)));
      }
      points.push_back({{"index", cps[j]},
                        {"kind", "raw"},
                        {"ratio", ratio},
                        {"probability", segmentation->probabilities[j]}});
    }
  } else {
    analysis::detect::VerificationOptions v;
    v.min_relative_change = options.min_change;
    v.min_gap = options.min_gap;
    std::vector<int64_t> candidates;
    std::vector<double> probabilities;
    for (size_t j = 0; j < cps.size(); ++j) {
      if (cps[j] > 0 && segmentation->probabilities[j] < options.min_probability) continue;
      candidates.push_back(cps[j]);
      probabilities.push_back(segmentation->probabilities[j]);
    }
    absl::StatusOr<std::vector<analysis::detect::ChangePoint>> kept =
        analysis::detect::VerifyChangePoints(s.values, candidates, probabilities, v);
    // What verification keeps of every segment start: those below min_probability are listed
    // apart (what --min_probability 0 would report).
    absl::StatusOr<std::vector<analysis::detect::ChangePoint>> all =
        analysis::detect::VerifyChangePoints(s.values, cps, segmentation->probabilities, v);
    if (!kept.ok() || !all.ok()) {
      const absl::Status& e = kept.ok() ? all.status() : kept.status();
      return absl::Status(e.code(), absl::StrCat("series \"", s.name, "\": ", e.message()));
    }
    for (const analysis::detect::ChangePoint& cp : *kept) points.push_back(PointJson(cp));
    for (const analysis::detect::ChangePoint& cp : *all) {
      if (cp.probability < options.min_probability) below.push_back(PointJson(cp));
    }
  }
  json out = {{"name", s.name}, {"change_points", std::move(points)}};
  if (!options.raw) out["below_min_probability"] = below;
  return out;
}

}  // namespace

namespace {

json PairsJson(const std::vector<analysis::detect::EndpointPair>& pairs) {
  json out = json::array();
  for (const analysis::detect::EndpointPair& p : pairs) out.push_back({p.a, p.b});
  return out;
}

absl::StatusOr<json> RunPairwise(const DetectInput& input, const DetectOptions& options) {
  analysis::detect::PairwiseOptions p;
  p.slow_ratio = options.min_change;
  absl::StatusOr<analysis::detect::PairwiseResult> r =
      analysis::detect::LocalizePairwise(input.pairs, p);
  if (!r.ok()) return r.status();
  json findings = json::array();
  for (const analysis::detect::PairwiseFinding& f : r->findings) {
    json j;
    switch (f.kind) {
      case analysis::detect::PairwiseFinding::Kind::kEndpoint:
        j["kind"] = "node";
        j["node"] = f.endpoint;
        j["slow_pairs"] = PairsJson(f.slow_pairs);
        break;
      case analysis::detect::PairwiseFinding::Kind::kLink:
        j["kind"] = "link";
        j["link"] = {f.link.a, f.link.b};
        break;
      case analysis::detect::PairwiseFinding::Kind::kAmbiguous:
        j["kind"] = "ambiguous";
        j["link"] = {f.link.a, f.link.b};
        j["candidates"] = json::array();
        for (const std::string& c : f.candidates) {
          j["candidates"].push_back(absl::StrReplaceAll(c, {{"endpoint ", "node "}}));
        }
        j["deciding_pairs"] = PairsJson(f.deciding_pairs);
        break;
      case analysis::detect::PairwiseFinding::Kind::kUntested:
        j["kind"] = "untested";
        j["node"] = f.endpoint;
        j["pairs"] = PairsJson(f.slow_pairs);
        j["deciding_pairs"] = PairsJson(f.deciding_pairs);
        break;
    }
    j["ratio"] = f.ratio;
    j["text"] = analysis::detect::DescribeFinding(f, "node");
    findings.push_back(std::move(j));
  }
  json out;
  out["pairwise"] = {{"pairs", r->pairs},
                     {"nodes", r->endpoints},
                     {"slow_pairs", r->slow_pairs},
                     {"fast_pairs", r->fast_pairs},
                     {"reference_bandwidth", r->reference_bandwidth},
                     {"noise_sigma", r->noise_sigma},
                     {"noise_sigmas", p.noise_sigmas},
                     {"slow_ratio", p.slow_ratio},
                     {"findings", std::move(findings)}};
  return out;
}

json ImbalanceJson(const analysis::detect::ImbalanceReport& r,
                   const analysis::detect::ImbalanceOptions& options) {
  json out = {{"steps", r.steps},
              {"stages", r.stages},
              {"ranks", r.ranks},
              {"stage_compute_s", r.stage_compute_s},
              {"stage_imbalance", nullptr},
              {"jitter", nullptr},
              {"persistent_stragglers", json::array()}};
  if (r.stage_imbalance.has_value()) {
    const analysis::detect::StageImbalance& s = *r.stage_imbalance;
    out["stage_imbalance"] = {{"stage", s.stage},
                              {"ranks", s.ranks},
                              {"ratio", s.ratio},
                              {"slowest_share", s.slowest_share},
                              {"shed_fraction", s.shed_fraction}};
  }
  if (r.jitter.has_value()) {
    const analysis::detect::DataJitter& j = *r.jitter;
    out["jitter"] = {{"median_spread", j.median_spread},
                     {"ranks_sometimes_slow", j.ranks_sometimes_slow},
                     {"ranks", j.ranks},
                     {"max_slow_share", j.max_slow_share}};
  }
  for (const analysis::detect::PersistentStraggler& p : r.stragglers) {
    out["persistent_stragglers"].push_back({{"rank", p.rank},
                                            {"stage", p.stage},
                                            {"slow_share", p.slow_share},
                                            {"slow_iterations", p.slow_iterations},
                                            {"iterations", p.iterations},
                                            {"first_step", p.first_step},
                                            {"last_step", p.last_step},
                                            {"ratio", p.ratio}});
  }
  out["findings"] = analysis::detect::DescribeImbalance(r, options);
  return out;
}

}  // namespace

absl::StatusOr<json> RunDetect(const DetectInput& input, const DetectOptions& options) {
  if (!(options.expected_run_length > 1) || !std::isfinite(options.expected_run_length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hazard: the expected run length must be > 1, got ", options.expected_run_length));
  }
  analysis::detect::BocdOptions check;
  check.prior = options.prior;
  if (absl::Status s = check.Validate(); !s.ok()) return s;
  if (!(options.min_change > 0 && options.min_change <= 10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_change must be in (0, 10], got ", options.min_change));
  }
  if (options.min_gap < 1) {
    return absl::InvalidArgumentError(absl::StrCat("min_gap must be >= 1, got ", options.min_gap));
  }
  if (!(options.min_probability >= 0 && options.min_probability <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_probability must be in [0, 1], got ", options.min_probability));
  }
  if (!input.pairs.empty()) return RunPairwise(input, options);
  if (input.series.empty())
    return absl::InvalidArgumentError(absl::StrCat(input.path, ": no series"));
  json out;
  if (!options.raw) out["min_probability"] = options.min_probability;
  out["series"] = json::array();
  for (const NamedSeries& s : input.series) {
    absl::StatusOr<json> one = AnalyseSeries(s, options);
    if (!one.ok()) return one.status();
    out["series"].push_back(*std::move(one));
  }
  if (!input.steps.empty()) {
    analysis::detect::BlameOptions b;
    b.slow_ratio = options.min_change;
    json blame = json::array();
    for (const analysis::detect::BlameInput& step : input.steps) {
      absl::StatusOr<analysis::detect::BlameResult> r = analysis::detect::BlameStep(step, b);
      if (!r.ok()) return r.status();
      for (const analysis::detect::Blame& x : r->blamed) {
        blame.push_back({{"step", step.step},
                         {"rank", x.rank},
                         {"cause", std::string(analysis::detect::BlameCauseName(x.cause))},
                         {"ratio", x.ratio}});
      }
    }
    out["blame"] = std::move(blame);
    analysis::detect::ImbalanceOptions io;
    io.slow_ratio = options.min_change;
    absl::StatusOr<analysis::detect::ImbalanceReport> imbalance =
        analysis::detect::AnalyzeImbalance(input.steps, io);
    if (imbalance.ok()) {
      out["imbalance"] = ImbalanceJson(*imbalance, io);
    } else {  // Too few steps: say why rather than leave it out.
      out["imbalance"] = {{"error", std::string(imbalance.status().message())}};
    }
  }
  return out;
}

std::string FormatReport(const json& result) {
  std::string out;
  if (result.contains("pairwise")) {
    const json& p = result["pairwise"];
    absl::StrAppendFormat(&out,
                          "pairwise: %d pairs of %d nodes, reference (upper quartile) bandwidth "
                          "%.3g, %d slow (at least "
                          "x%.2f slower than the reference pair)\n",
                          p["pairs"].get<int>(), p["nodes"].get<int>(),
                          p["reference_bandwidth"].get<double>(), p["slow_pairs"].get<int>(),
                          1 + p["slow_ratio"].get<double>());
    if (p["pairs"].get<int>() < 2) {
      absl::StrAppend(&out, "  one pair only: nothing to compare it with, no judgement\n");
    } else if (p["findings"].empty()) {
      absl::StrAppend(&out, "  no slow pair: nothing to localize\n");
    }
    if (p["fast_pairs"].get<int>() > 0) {
      absl::StrAppendFormat(&out,
                            "  warning: %d pairs are at least x%.2f faster than the reference: it "
                            "may itself be a slow pair (more than 3/4 of the pairs slow), so slow "
                            "pairs may be missed\n",
                            p["fast_pairs"].get<int>(), 1 + p["slow_ratio"].get<double>());
    }
    for (const json& f : p["findings"])
      absl::StrAppend(&out, "  ", f["text"].get<std::string>(), "\n");
    return out;
  }
  for (const json& s : result.value("series", json::array())) {
    absl::StrAppend(&out, s["name"].get<std::string>(), ": ", s["change_points"].size(),
                    " change point(s)");
    const size_t below =
        s.contains("below_min_probability") ? s["below_min_probability"].size() : 0;
    if (below > 0) {
      absl::StrAppendFormat(&out,
                            " (%d more below change probability %.2f left out; "
                            "--min_probability 0 lists them)",
                            below, result["min_probability"].get<double>());
    }
    absl::StrAppend(&out, "\n");
    for (const json& cp : s["change_points"]) {
      const std::string ratio =
          cp["ratio"].is_null() ? "n/a" : absl::StrFormat("%.3f", cp["ratio"].get<double>());
      absl::StrAppendFormat(&out, "  index %6d  %-9s ratio %s  probability %.3f\n",
                            cp["index"].get<int64_t>(), cp["kind"].get<std::string>(), ratio,
                            cp["probability"].get<double>());
    }
  }
  if (result.contains("blame")) {
    absl::StrAppend(&out, "blame: ", result["blame"].size(), " entr",
                    result["blame"].size() == 1 ? "y" : "ies",
                    result["blame"].empty()
                        ? ""
                        : " (per step; imbalance below says which ranks are persistently slow)",
                    "\n");
    for (const json& b : result["blame"]) {
      absl::StrAppendFormat(&out, "  step %6d  rank %5d  %-13s ratio %.3f\n",
                            b["step"].get<int64_t>(), b["rank"].get<int64_t>(),
                            b["cause"].get<std::string>(), b["ratio"].get<double>());
    }
  }
  if (result.contains("imbalance")) {
    const json& im = result["imbalance"];
    if (im.contains("error")) {
      absl::StrAppend(&out, "imbalance: not analysed: ", im["error"].get<std::string>(), "\n");
    } else {
      absl::StrAppend(&out, "imbalance (", im["steps"].get<int>(), " steps, ",
                      im["stages"].get<int>(), " stages, ", im["ranks"].get<int>(), " ranks):\n");
      for (const json& f : im["findings"]) {
        absl::StrAppend(&out, "  ", f.get<std::string>(), "\n");
      }
    }
  }
  return out;
}

}  // namespace falcon::cli::detect
