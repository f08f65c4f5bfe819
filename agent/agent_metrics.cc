#include "agent/agent_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace falcon::agent {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

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
      iteration_time_(BuildGauge()
                          .Name("falcon_agent_iteration_time_seconds")
                          .Help("Latest iteration time of a rank")
                          .Labels({{"node", node}})
                          .Register(*registry_)),
      compute_time_(BuildGauge()
                        .Name("falcon_agent_compute_time_seconds")
                        .Help("Latest iteration's compute time of a rank (outside comm ops)")
                        .Labels({{"node", node}})
                        .Register(*registry_)),
      iterations_(BuildCounter()
                      .Name("falcon_agent_iterations_total")
                      .Help("Iteration summaries made for a rank")
                      .Labels({{"node", node}})
                      .Register(*registry_)),
      op_duration_(BuildHistogram()
                       .Name("falcon_agent_op_duration_seconds")
                       .Help("Host duration of collective and p2p ops, per communicator kind")
                       .Labels({{"node", node}})
                       .Register(*registry_)),
      records_in_(BuildCounter()
                      .Name("falcon_agent_records_in_total")
                      .Help("Op records received from shims")
                      .Labels({{"node", node}})
                      .Register(*registry_)),
      records_out_(
          BuildCounter()
              .Name("falcon_agent_records_out_total")
              .Help("Records handed to the controller stream (iteration summaries, raw ops)")
              .Labels({{"node", node}})
              .Register(*registry_)),
      records_dropped_(BuildCounter()
                           .Name("falcon_agent_records_dropped_total")
                           .Help("Op records dropped before reduction, by reason")
                           .Labels({{"node", node}})
                           .Register(*registry_)) {
  const prometheus::Labels node_label{{"node", node}};
  auto gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Labels(node_label).Register(*registry_).Add({});
  };
  auto counter = [&](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Labels(node_label).Register(*registry_).Add({});
  };
  BuildGauge()
      .Name("falcon_agent_build_info")
      .Help("Agent build; value 1")
      .Labels(node_label)
      .Register(*registry_)
      .Add({{"version", version}})
      .Set(1);
  buffer_batches_ =
      gauge("falcon_agent_buffer_batches", "Telemetry batches held for the controller");
  buffer_bytes_ = gauge("falcon_agent_buffer_bytes", "Serialized bytes held for the controller");
  buffer_occupancy_ =
      gauge("falcon_agent_buffer_occupancy_ratio", "Buffer fill, the larger of batches and bytes");
  buffer_dropped_batches_ = counter("falcon_agent_buffer_dropped_batches_total",
                                    "Telemetry batches dropped because the buffer was full");
  buffer_dropped_records_ = counter("falcon_agent_buffer_dropped_records_total",
                                    "Summaries and raw ops inside dropped batches");
  sent_ = counter("falcon_agent_batches_sent_total", "Telemetry batches sent the first time");
  resent_ = counter("falcon_agent_batches_resent_total", "Telemetry batches sent again");
  acked_ = counter("falcon_agent_batches_acked_total", "Telemetry batches the controller stored");
  rejected_ =
      counter("falcon_agent_batches_rejected_total", "Telemetry batches the controller rejected");
  connected_ = gauge("falcon_agent_controller_connected", "1 while the controller stream is up");
  connects_ = counter("falcon_agent_controller_connects_total", "Controller streams established");
  shim_sessions_ = gauge("falcon_agent_shim_sessions", "Live shim sessions");
  shim_errors_ = counter("falcon_agent_shim_errors_total", "Malformed shim messages answered");
  directives_ = counter("falcon_agent_directives_relayed_total", "Directives relayed to shims");
  tasks_ =
      counter("falcon_agent_validation_tasks_relayed_total", "Validation tasks relayed to shims");
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
