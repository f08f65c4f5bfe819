// One Prometheus metric as a daemon declares it: name, type, unit, label names and help. Each
// daemon keeps its metrics in one table of MetricSpec (controller/metrics/metric_table.h,
// agent/agent_metrics_table.h); its registration builds every family from the table, and the
// docs' metrics table (docs/metrics.md, printed by //tools/metrics_doc) is rendered from the same
// table, so a metric's name is written once.
//
// Conventions: names carry the daemon's prefix (falcon_controller_, falcon_agent_)
// and a base unit (_seconds, _bytes, _ratio); counters end in _total; labels never carry per-op
// or per-iteration values.
#ifndef FALCON_COMMON_METRICS_METRIC_SPEC_H_
#define FALCON_COMMON_METRICS_METRIC_SPEC_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace falcon::common::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

struct MetricSpec {
  const char* name;  // Full Prometheus name, e.g. "falcon_controller_events".
  MetricType type;
  const char* unit;    // What one unit of the value is: "seconds", "batches", "1" (a 0/1 flag).
  const char* labels;  // Label names, comma-separated ("job,rank"); "" for none. Includes
                       // constant labels (the agent's node).
  const char* help;    // One sentence; the # HELP text and the docs' description.
};

// One value of the `where` label of a daemon's falcon_<daemon>_errors_total: a site that logs a
// handled error (one LOG(WARNING) or LOG(ERROR) line) and counts it there. Each daemon lists its
// sites next to its metric table; its metrics export every listed series from the start (at 0),
// and the docs' metrics page lists them.
struct ErrorSite {
  const char* where;  // snake_case and stable, e.g. "directive_timed_out".
  const char* what;   // One sentence: what failed and what the daemon did about it.
};

// "counter", "gauge", "histogram".
const char* MetricTypeName(MetricType type);

// The spec's label names, in order.
std::vector<std::string> LabelNames(const MetricSpec& spec);

// Register the spec's family on `registry`, with `constant_labels` on every series. The spec's
// type must match the call (a mismatch is a programming error: the process aborts).
prometheus::Family<prometheus::Counter>& AddCounterFamily(
    prometheus::Registry& registry, const MetricSpec& spec,
    const prometheus::Labels& constant_labels = {});
prometheus::Family<prometheus::Gauge>& AddGaugeFamily(
    prometheus::Registry& registry, const MetricSpec& spec,
    const prometheus::Labels& constant_labels = {});
prometheus::Family<prometheus::Histogram>& AddHistogramFamily(
    prometheus::Registry& registry, const MetricSpec& spec,
    const prometheus::Labels& constant_labels = {});

// A markdown table of `specs`, one row each in table order:
//   | Name | Type | Unit | Labels | Help |
// Pipes in the help are escaped.
std::string MetricsMarkdownTable(absl::Span<const MetricSpec> specs);

// A markdown table of `sites`, one row each in order: | `where` | What happened |. Pipes escaped.
std::string ErrorSitesMarkdownTable(absl::Span<const ErrorSite> sites);

// Checks a list of sites: each `where` unique, non-empty, lower-case snake_case ([a-z0-9_],
// starting with a letter), each with a `what`. Returns the problems; empty when well formed.
std::vector<std::string> CheckErrorSites(absl::Span<const ErrorSite> sites);

// Checks a table: names unique, each starting with `prefix`, counters ending in _total and only
// counters, histograms without a _bucket/_sum/_count suffix, help and unit not empty. Returns the
// problems, one per entry; empty when the table is well formed.
std::vector<std::string> CheckMetricTable(absl::Span<const MetricSpec> specs,
                                          absl::string_view prefix);

// Compares what a registry collected with the table the daemon declares: every collected family
// is in the table with the same type and help, every table entry was collected with at least one
// series, and each series carries exactly the table's labels. Returns one line per mismatch
// naming the metric; empty when registration follows the table. Used by each daemon's tests.
std::vector<std::string> RegistryMismatches(const std::vector<prometheus::MetricFamily>& families,
                                            absl::Span<const MetricSpec> specs);

}  // namespace falcon::common::metrics

#endif  // FALCON_COMMON_METRICS_METRIC_SPEC_H_
