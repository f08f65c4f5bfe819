#include "agent/agent_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics_table.h"

namespace falcon::agent {
namespace {

using common::metrics::AddCounterFamily;
using common::metrics::AddGaugeFamily;
using common::metrics::AddHistogramFamily;

// 10 us .. ~42 s in factors of 2.
prometheus::Histogram::BucketBoundaries OpBuckets() {
  prometheus::Histogram::BucketBoundaries b;
  for (double v = 1e-5; v < 60; v *= 2) b.push_back(v);
  return b;
}

}  // namespace

AgentMetrics::AgentMetrics(std::shared_ptr<prometheus::Registry> registry, const std::string& node,
                           const std::string& version)
    : registry_(std::move(registry)),
      node_label_{{"node", node}},
      iteration_time_(AddGaugeFamily(*registry_, metric::kIterationTime, node_label_)),
      compute_time_(AddGaugeFamily(*registry_, metric::kComputeTime, node_label_)),
      iterations_(AddCounterFamily(*registry_, metric::kIterations, node_label_)),
      op_duration_(AddHistogramFamily(*registry_, metric::kOpDuration, node_label_)),
      records_in_(AddCounterFamily(*registry_, metric::kRecordsIn, node_label_)),
      records_out_(AddCounterFamily(*registry_, metric::kRecordsOut, node_label_)),
      records_dropped_(AddCounterFamily(*registry_, metric::kRecordsDropped, node_label_)),
      errors_(AddCounterFamily(*registry_, metric::kErrors, node_label_)) {
  auto gauge = [&](const common::metrics::MetricSpec& spec) {
    return &AddGaugeFamily(*registry_, spec, node_label_).Add({});
  };
  auto counter = [&](const common::metrics::MetricSpec& spec) {
    return &AddCounterFamily(*registry_, spec, node_label_).Add({});
  };
  AddGaugeFamily(*registry_, metric::kBuildInfo, node_label_).Add({{"version", version}}).Set(1);
  buffer_batches_ = gauge(metric::kBufferBatches);
  buffer_bytes_ = gauge(metric::kBufferBytes);
  buffer_occupancy_ = gauge(metric::kBufferOccupancy);
  buffer_dropped_batches_ = counter(metric::kBufferDroppedBatches);
  buffer_dropped_records_ = counter(metric::kBufferDroppedRecords);
  sent_ = counter(metric::kBatchesSent);
  resent_ = counter(metric::kBatchesResent);
  acked_ = counter(metric::kBatchesAcked);
  rejected_ = counter(metric::kBatchesRejected);
  connected_ = gauge(metric::kControllerConnected);
  connects_ = counter(metric::kControllerConnects);
  shim_sessions_ = gauge(metric::kShimSessions);
  shim_errors_ = counter(metric::kShimErrors);
  directives_ = counter(metric::kDirectivesRelayed);
  tasks_ = counter(metric::kValidationTasksRelayed);
  // Every known site from the start, so the series exist (at 0) before the first error.
  for (const common::metrics::ErrorSite& site : metric::kErrorSites)
    errors_.Add({{"where", site.where}});
}

void AgentMetrics::CountError(absl::string_view where) {
  errors_.Add({{"where", std::string(where)}}).Increment();
}

const char* AgentMetrics::CommKindLabel(v1::CommKind kind) {
  switch (kind) {
    case v1::COMM_KIND_DP:
      return "dp";
    case v1::COMM_KIND_PP:
      return "pp";
    case v1::COMM_KIND_TP:
      return "tp";
    case v1::COMM_KIND_WORLD:
      return "world";
    default:
      return "unknown";
  }
}

AgentMetrics::RankSeries AgentMetrics::AddRank(const std::string& job, uint32_t rank, int32_t gpu) {
  const prometheus::Labels labels{{"job", job},
                                  {"rank", absl::StrCat(rank)},
                                  {"gpu", gpu < 0 ? std::string("cpu") : absl::StrCat(gpu)}};
  RankSeries s;
  s.iteration_time_seconds = &iteration_time_.Add(labels);
  s.compute_time_seconds = &compute_time_.Add(labels);
  s.iterations = &iterations_.Add(labels);
  s.records_in = &records_in_.Add(labels);
  return s;
}

void AgentMetrics::RemoveRank(const RankSeries& s) {
  if (s.iteration_time_seconds != nullptr) iteration_time_.Remove(s.iteration_time_seconds);
  if (s.compute_time_seconds != nullptr) compute_time_.Remove(s.compute_time_seconds);
  if (s.iterations != nullptr) iterations_.Remove(s.iterations);
  if (s.records_in != nullptr) records_in_.Remove(s.records_in);
}

AgentMetrics::JobSeries AgentMetrics::AddJob(const std::string& job) {
  JobSeries s;
  for (int k = 0; k < static_cast<int>(s.op_duration.size()); ++k) {
    // UNSPECIFIED shares the "unknown" series with UNKNOWN.
    const v1::CommKind kind = k == 0 ? v1::COMM_KIND_UNKNOWN : static_cast<v1::CommKind>(k);
    s.op_duration[k] =
        &op_duration_.Add({{"job", job}, {"comm_kind", CommKindLabel(kind)}}, OpBuckets());
  }
  s.summaries_out = &records_out_.Add({{"job", job}, {"type", "summary"}});
  s.ops_out = &records_out_.Add({{"job", job}, {"type", "op"}});
  s.dropped_shim_ring = &records_dropped_.Add({{"job", job}, {"reason", "shim_ring"}});
  s.dropped_unassigned = &records_dropped_.Add({{"job", job}, {"reason", "unassigned"}});
  s.dropped_overflow = &records_dropped_.Add({{"job", job}, {"reason", "overflow"}});
  s.dropped_profiling = &records_dropped_.Add({{"job", job}, {"reason", "profiling"}});
  return s;
}

void AgentMetrics::RemoveJob(const JobSeries& s) {
  // Kinds 0 and 1 share one series.
  for (size_t k = 1; k < s.op_duration.size(); ++k) {
    if (s.op_duration[k] != nullptr) op_duration_.Remove(s.op_duration[k]);
  }
  for (prometheus::Counter* c : {s.summaries_out, s.ops_out}) {
    if (c != nullptr) records_out_.Remove(c);
  }
  for (prometheus::Counter* c :
       {s.dropped_shim_ring, s.dropped_unassigned, s.dropped_overflow, s.dropped_profiling}) {
    if (c != nullptr) records_dropped_.Remove(c);
  }
}

void AgentMetrics::UpdateBuffer(const TelemetryBuffer::Stats& stats,
                                const TelemetryBuffer::Options& options) {
  buffer_batches_->Set(static_cast<double>(stats.batches));
  buffer_bytes_->Set(static_cast<double>(stats.bytes));
  buffer_occupancy_->Set(std::max(static_cast<double>(stats.batches) / options.max_batches,
                                  static_cast<double>(stats.bytes) / options.max_bytes));
  absl::MutexLock lock(&mu_);
  auto add = [](prometheus::Counter* c, uint64_t now, uint64_t before) {
    if (now > before) c->Increment(static_cast<double>(now - before));
  };
  add(buffer_dropped_batches_, stats.dropped_batches, last_buffer_.dropped_batches);
  add(buffer_dropped_records_, stats.dropped_summaries + stats.dropped_ops,
      last_buffer_.dropped_summaries + last_buffer_.dropped_ops);
  add(sent_, stats.sent_batches, last_buffer_.sent_batches);
  add(resent_, stats.resent_batches, last_buffer_.resent_batches);
  add(acked_, stats.acked_batches, last_buffer_.acked_batches);
  last_buffer_ = stats;
}

void AgentMetrics::SetControllerConnected(bool connected) { connected_->Set(connected ? 1 : 0); }

}  // namespace falcon::agent
