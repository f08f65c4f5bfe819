#include "agent/agent.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace falcon::agent {

Agent::Agent(AgentOptions options, const common::Clock& clock)
    : options_(std::move(options)), clock_(clock), summary_interval_(options_.summary_interval) {}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentOptions options,
                                                    const common::Clock& clock) {
  FillDefaults(&options);
  if (absl::Status s = Validate(options); !s.ok()) return s;
  std::unique_ptr<Agent> agent(new Agent(std::move(options), clock));
  Agent& a = *agent;
  a.registry_ = std::make_shared<prometheus::Registry>();
  a.metrics_ = std::make_unique<AgentMetrics>(a.registry_, a.options_.node, a.options_.version);
  a.buffer_ = std::make_unique<TelemetryBuffer>(a.options_.buffer);

  ControllerLink::Options link;
  link.address = a.options_.controller;
  link.tls = a.options_.tls;
  link.agent_id = a.options_.agent_id;
  link.node = a.options_.node;
  link.version = a.options_.version;
  link.backoff = a.options_.backoff;
  link.heartbeat_interval = a.options_.heartbeat_interval;
  ControllerLink::Handler* handler = &a;  // Private base: convert here, where it is accessible.
  a.link_ =
      std::make_unique<ControllerLink>(link, a.buffer_.get(), handler, a.metrics_.get(), clock);
  a.hub_ = std::make_unique<ShimHub>(a.options_.hub, clock, a.metrics_.get(), a.link_.get());
  // Batches the controller acknowledged (or the buffer dropped) tell the shims what is delivered.
  a.buffer_->set_on_settled(
      [hub = a.hub_.get()](const std::vector<uint64_t>& tags) { hub->OnSettled(tags); });

  if (!a.options_.metrics_listen.empty()) {
    try {
      a.exposer_ = std::make_unique<prometheus::Exposer>(a.options_.metrics_listen);
    } catch (const std::exception& e) {  // prometheus-cpp reports bind failures by throwing.
      return absl::UnavailableError(absl::StrCat("metrics_listen: cannot serve on ",
                                                 a.options_.metrics_listen, ": ", e.what()));
    }
    a.exposer_->RegisterCollectable(a.registry_);
    const std::vector<int> ports = a.exposer_->GetListeningPorts();
    const std::string host =
        a.options_.metrics_listen.substr(0, a.options_.metrics_listen.rfind(':'));
    a.metrics_address_ = absl::StrCat(host, ":", ports.empty() ? 0 : ports.front());
  }

  ShimServer::Options shim;
  shim.socket_path = a.options_.socket_path;
  shim.group = a.options_.socket_group;
  shim.allowed_uids.assign(a.options_.socket_uids.begin(), a.options_.socket_uids.end());
  shim.allowed_gids.assign(a.options_.socket_gids.begin(), a.options_.socket_gids.end());
  shim.errors = a.metrics_.get();
  auto server = ShimServer::Start(shim, a.hub_.get());
  if (!server.ok()) return server.status();
  a.shim_server_ = std::move(*server);

  a.link_->Start();
  a.flush_thread_ = std::thread([&a] { a.FlushLoop(); });
  return agent;
}

Agent::~Agent() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (flush_thread_.joinable()) flush_thread_.join();
  if (shim_server_ != nullptr) {
    hub_->CloseAll(absl::UnavailableError("agent stopping"));
    shim_server_->Shutdown(absl::Seconds(1));
  }
  if (link_ != nullptr) link_->Stop();
}

absl::Duration Agent::summary_interval() const {
  absl::MutexLock lock(&mu_);
  return summary_interval_;
}

std::vector<v1::JobRegistration> Agent::Registrations() { return hub_->Registrations(); }

void Agent::OnControllerMessage(const v1::ControllerMessage& msg) {
  switch (msg.msg_case()) {
    case v1::ControllerMessage::kDirective:
      hub_->OnDirective(msg.directive());
      break;
    case v1::ControllerMessage::kValidationTask:
      hub_->OnValidationTask(msg.validation_task());
      break;
    case v1::ControllerMessage::kProfiling:
      hub_->OnProfiling(msg.profiling());
      break;
    case v1::ControllerMessage::kConfig: {
      const int64_t ns = msg.config().summary_interval_ns();
      if (ns >= 1'000'000 && ns <= 60'000'000'000) {
        absl::MutexLock lock(&mu_);
        summary_interval_ = absl::Nanoseconds(ns);
      }
      break;
    }
    default:
      break;
  }
}

void Agent::FlushOnce(bool drain) {
  absl::MutexLock flush_lock(&flush_mu_);
  std::vector<v1::TelemetryBatch> batches;
  std::vector<uint64_t> tags;
  hub_->Flush(drain, &batches, &tags);
  for (size_t i = 0; i < batches.size(); ++i) buffer_->Push(std::move(batches[i]), tags[i]);
  if (!batches.empty()) link_->Notify();
  metrics_->UpdateBuffer(buffer_->stats(), buffer_->options());
}

void Agent::FlushNow() { FlushOnce(/*drain=*/false); }

void Agent::FlushLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), summary_interval_);
      if (stopping_) return;
    }
    FlushOnce(/*drain=*/false);
  }
}

absl::Status Agent::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (drained_) return absl::OkStatus();
    drained_ = true;
    stopping_ = true;
  }
  // Shim streams stay open until the controller has everything, so the shims hear what was
  // delivered (DeliveryAck) and resend to the next agent only what was not.
  hub_->StopAccepting();
  if (flush_thread_.joinable()) flush_thread_.join();
  FlushOnce(/*drain=*/true);
  const bool empty = buffer_->WaitUntilEmpty(timeout);
  metrics_->UpdateBuffer(buffer_->stats(), buffer_->options());
  hub_->CloseAll(absl::UnavailableError("agent draining"));
  shim_server_->Shutdown(absl::Seconds(1));
  link_->Stop();
  if (!empty) {
    return absl::DeadlineExceededError(absl::StrCat(
        buffer_->stats().batches, " telemetry batches were not acknowledged by the controller"));
  }
  return absl::OkStatus();
}

}  // namespace falcon::agent
