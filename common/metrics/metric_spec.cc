#include "common/metrics/metric_spec.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace falcon::common::metrics {
namespace {

void CheckType(const MetricSpec& spec, MetricType want) {
  CHECK(spec.type == want) << "metric " << spec.name << " is declared a "
                           << MetricTypeName(spec.type) << ", registered as a "
                           << MetricTypeName(want);
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "unknown";
}

std::vector<std::string> LabelNames(const MetricSpec& spec) {
  return absl::StrSplit(spec.labels, ',', absl::SkipEmpty());
}

prometheus::Family<prometheus::Counter>& AddCounterFamily(
    prometheus::Registry& registry, const MetricSpec& spec,
    const prometheus::Labels& constant_labels) {
  CheckType(spec, MetricType::kCounter);
  return prometheus::BuildCounter()
      .Name(spec.name)
      .Help(spec.help)
      .Labels(constant_labels)
      .Register(registry);
}

prometheus::Family<prometheus::Gauge>& AddGaugeFamily(prometheus::Registry& registry,
                                                      const MetricSpec& spec,
                                                      const prometheus::Labels& constant_labels) {
  CheckType(spec, MetricType::kGauge);
  return prometheus::BuildGauge()
      .Name(spec.name)
      .Help(spec.help)
      .Labels(constant_labels)
      .Register(registry);
}

prometheus::Family<prometheus::Histogram>& AddHistogramFamily(
    prometheus::Registry& registry, const MetricSpec& spec,
    const prometheus::Labels& constant_labels) {
  CheckType(spec, MetricType::kHistogram);
  return prometheus::BuildHistogram()
      .Name(spec.name)
      .Help(spec.help)
      .Labels(constant_labels)
      .Register(registry);
}

std::string MetricsMarkdownTable(absl::Span<const MetricSpec> specs) {
  std::string out = "| Name | Type | Unit | Labels | Help |\n|---|---|---|---|---|\n";
  for (const MetricSpec& s : specs) {
    std::string labels = absl::StrReplaceAll(s.labels, {{",", ", "}});
    absl::StrAppend(&out, "| `", s.name, "` | ", MetricTypeName(s.type), " | ", s.unit, " | ",
                    labels.empty() ? "" : labels, " | ",
                    absl::StrReplaceAll(s.help, {{"|", "\\|"}}), " |\n");
  }
  return out;
}

std::string ErrorSitesMarkdownTable(absl::Span<const ErrorSite> sites) {
  std::string out = "| `where` | What happened |\n|---|---|\n";
  for (const ErrorSite& s : sites) {
    absl::StrAppend(&out, "| `", s.where, "` | ", absl::StrReplaceAll(s.what, {{"|", "\\|"}}),
                    " |\n");
  }
  return out;
}

std::vector<std::string> CheckErrorSites(absl::Span<const ErrorSite> sites) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const ErrorSite& s : sites) {
    const std::string where = s.where == nullptr ? "" : s.where;
    if (!seen.insert(where).second) problems.push_back(absl::StrCat(where, ": listed twice"));
    const bool snake = !where.empty() && where[0] >= 'a' && where[0] <= 'z' &&
                       std::all_of(where.begin(), where.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                       });
    if (!snake) problems.push_back(absl::StrCat("'", where, "': not snake_case"));
    if (s.what == nullptr || *s.what == '\0') {
      problems.push_back(absl::StrCat(where, ": no description"));
    }
  }
  return problems;
}

std::vector<std::string> CheckMetricTable(absl::Span<const MetricSpec> specs,
                                          absl::string_view prefix) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (const MetricSpec& s : specs) {
    const std::string name = s.name == nullptr ? "" : s.name;
    if (!seen.insert(name).second) problems.push_back(absl::StrCat(name, ": declared twice"));
    if (!absl::StartsWith(name, prefix)) {
      problems.push_back(absl::StrCat(name, ": does not start with ", prefix));
    }
    const bool total = absl::EndsWith(name, "_total");
    if (s.type == MetricType::kCounter && !total) {
      problems.push_back(absl::StrCat(name, ": a counter's name ends in _total"));
    }
    if (s.type != MetricType::kCounter && total) {
      problems.push_back(absl::StrCat(name, ": only counters end in _total"));
    }
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix)) {
        problems.push_back(absl::StrCat(name, ": ends in a histogram series suffix"));
      }
    }
    if (s.help == nullptr || *s.help == '\0') problems.push_back(absl::StrCat(name, ": no help"));
    if (s.unit == nullptr || *s.unit == '\0') problems.push_back(absl::StrCat(name, ": no unit"));
    if (s.labels == nullptr) problems.push_back(absl::StrCat(name, ": labels is null"));
  }
  return problems;
}

std::vector<std::string> RegistryMismatches(const std::vector<prometheus::MetricFamily>& families,
                                            absl::Span<const MetricSpec> specs) {
  std::vector<std::string> problems;
  std::set<std::string> collected;
  for (const prometheus::MetricFamily& f : families) {
    collected.insert(f.name);
    const MetricSpec* spec = nullptr;
    for (const MetricSpec& s : specs) {
      if (f.name == s.name) spec = &s;
    }
    if (spec == nullptr) {
      problems.push_back(absl::StrCat(f.name, ": registered but not in the table"));
      continue;
    }
    if (f.help != spec->help) problems.push_back(absl::StrCat(f.name, ": help differs"));
    const prometheus::MetricType want =
        spec->type == MetricType::kCounter ? prometheus::MetricType::Counter
        : spec->type == MetricType::kGauge ? prometheus::MetricType::Gauge
                                           : prometheus::MetricType::Histogram;
    if (f.type != want) problems.push_back(absl::StrCat(f.name, ": type differs"));
    if (f.metric.empty()) problems.push_back(absl::StrCat(f.name, ": no series collected"));
    std::vector<std::string> want_labels = LabelNames(*spec);
    std::sort(want_labels.begin(), want_labels.end());
    for (const prometheus::ClientMetric& cm : f.metric) {
      std::vector<std::string> got;
      for (const auto& l : cm.label) got.push_back(l.name);
      std::sort(got.begin(), got.end());
      if (got != want_labels) {
        problems.push_back(absl::StrCat(f.name, ": labels {", absl::StrJoin(got, ","),
                                        "}, table says {", absl::StrJoin(want_labels, ","), "}"));
      }
    }
  }
  for (const MetricSpec& s : specs) {
    if (collected.count(s.name) == 0) {
      problems.push_back(absl::StrCat(s.name, ": in the table but not collected"));
    }
  }
  return problems;
}

}  // namespace falcon::common::metrics
