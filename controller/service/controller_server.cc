#include "controller/service/controller_server.h"

#include <glog/logging.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <exception>
#include <optional>

#include "absl/strings/str_cat.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/metrics/metric_table.h"
#include "controller/service/control_service.h"
#include "controller/service/event_loop.h"
#include "controller/service/stream_limiter.h"
#include "controller/service/telemetry_service.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/rocksdb_kv_store.h"
#include "proto/grpc_util.h"

namespace falcon::controller::service {
namespace {

// A damaged store stays as it is unless the operator decides to repair it.
absl::Status WithRepairHint(absl::Status s) {
  if (!absl::IsDataLoss(s)) return s;
  return absl::DataLossError(
      absl::StrCat(s.message(),
                   " -- the store is damaged; to start anyway, restart with --store_repair: the "
                   "damaged part is repaired or dropped, and what was lost is logged and counted"));
}

// Logs and counts what the repair lost: the figures recorded with the last durable commit
// against those of the repaired store.
void ReportRepair(const store::RepairReport& report, const store::StoreFigures& after,
                  metrics::ControllerMetrics* metrics) {
  std::string lost_line, before_line, after_line;
  for (const auto& [kind, now] : after) {
    uint64_t before = now;
    bool known = false;
    for (const auto& [k, v] : report.figures_before) {
      if (k == kind) {
        before = v;
        known = true;
      }
    }
    const int64_t lost = static_cast<int64_t>(before) - static_cast<int64_t>(now);
    absl::StrAppend(&lost_line, " ", kind, "=", known ? absl::StrCat(lost) : "unknown");
    absl::StrAppend(&before_line, before_line.empty() ? "" : ",", kind, ":",
                    known ? absl::StrCat(before) : "?");
    absl::StrAppend(&after_line, after_line.empty() ? "" : ",", kind, ":", now);
    if (metrics != nullptr && known) metrics->StoreRepairLost(kind, lost);
  }
  LOG(WARNING) << "store repaired lost:" << lost_line << " before={" << before_line << "} after={"
               << after_line << "} commits_before=" << report.commits_before
               << " commits_after=" << report.commits_after << " method=\"" << report.method
               << "\" damage=\"" << report.damage << "\"";
  if (metrics != nullptr) metrics->CountError(metrics::where::kStoreRepair);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    const ServerOptions& options, const common::Clock* clock, detection::MitigationHook* hook) {
  if (options.listen.empty()) return absl::InvalidArgumentError("listen: must not be empty");
  if (options.tick_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tick_interval: must be > 0");
  }
  std::unique_ptr<ControllerServer> s(new ControllerServer());
  s->data_dir_ = options.data_dir;
  s->registry_ = std::make_shared<prometheus::Registry>();
  s->metrics_ = std::make_unique<metrics::ControllerMetrics>(*s->registry_, options.version);
  if (options.data_dir.empty()) {
    s->kv_ = std::make_unique<store::InMemoryKvStore>(store::ControllerStore::TableNames());
  } else {
    store::RocksDbOptions rocks;
    rocks.path = options.data_dir;
    rocks.sync_writes = options.sync_writes;
    rocks.repair = options.store_repair;
    auto kv = store::RocksDbKvStore::Open(rocks, store::ControllerStore::TableNames());
    if (!kv.ok()) return WithRepairHint(kv.status());
    s->kv_ = std::move(*kv);
    if (const auto& report = static_cast<store::RocksDbKvStore*>(s->kv_.get())->repair_report()) {
      // What the repaired store holds, before the controller acts on it.
      auto after = Controller::StoredFigures(store::ControllerStore(s->kv_.get(), clock));
      if (!after.ok()) return WithRepairHint(after.status());
      ReportRepair(*report, *after, s->metrics_.get());
    }
  }
  ControllerOptions controller_options = options.controller;
  controller_options.group_commit = true;  // The loop syncs after each burst (below).
  controller_options.drop_damaged_samples = options.store_repair;
  auto controller =
      Controller::Create(controller_options, s->kv_.get(), clock, s->metrics_.get(), hook);
  if (!controller.ok()) return WithRepairHint(controller.status());
  s->controller_ = std::move(*controller);
  Controller* c = s->controller_.get();
  s->loop_ = std::make_unique<EventLoop>([c] { c->Tick(); }, options.tick_interval,
                                         // SyncStore logs and counts a failure when the
                                         // store turns unhealthy; later retries fail quietly.
                                         [c] {
                                           if (absl::Status st = c->SyncStore(); !st.ok()) {
                                             VLOG(1) << "store sync retry failed error=\""
                                                     << st.message() << "\"";
                                           }
                                         });
  s->limiter_ =
      std::make_unique<StreamLimiter>(options.controller.resource_limits, s->metrics_.get());
  s->telemetry_ = std::make_unique<TelemetryService>(s->loop_.get(), c, s->limiter_.get());
  s->control_ = std::make_unique<ControlService>(s->loop_.get(), c, s->limiter_.get(),
                                                 options.tls.plaintext());
  proto::GrpcKeepalive keepalive;
  keepalive.time = options.keepalive_time;
  keepalive.timeout = options.keepalive_timeout;
  if (options.tls_refresh < absl::Seconds(1) || options.tls_refresh > absl::Hours(24)) {
    return absl::InvalidArgumentError("tls_refresh: must be in [1s, 24h]");
  }
  auto credentials = proto::MakeServerCredentials(options.tls, options.tls_refresh);
  if (!credentials.ok()) {
    s->Shutdown();
    return credentials.status();
  }
  if (options.tls.plaintext()) {
    LOG(WARNING) << "plaintext gRPC on " << options.listen
                 << ": no TLS, any peer that reaches the port is trusted and every Control caller "
                    "acts as an operator, audited as identity \"plaintext\" (local demo only; give "
                    "--tls_cert, --tls_key, --tls_ca)";
  }
  auto started = proto::StartGrpcServer(options.listen, {s->telemetry_.get(), s->control_.get()},
                                        keepalive, *credentials);
  if (!started.ok()) {
    s->Shutdown();
    return started.status();
  }
  s->server_ = std::move(started->server);
  s->port_ = started->port;
  if (!options.metrics_listen.empty()) {
    try {
      s->exposer_ = std::make_unique<prometheus::Exposer>(options.metrics_listen);
    } catch (const std::exception& e) {
      s->Shutdown();
      return absl::UnavailableError(
          absl::StrCat("metrics_listen: cannot bind ", options.metrics_listen, ": ", e.what()));
    }
    s->exposer_->RegisterCollectable(s->registry_);
    std::vector<int> ports = s->exposer_->GetListeningPorts();
    s->metrics_port_ = ports.empty() ? 0 : ports[0];
  }
  return s;
}

ControllerServer::~ControllerServer() { Shutdown(); }

void ControllerServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  const bool serving = server_ != nullptr;  // Else Start failed: nothing to tell.
  if (serving) LOG(INFO) << "controller shutting down port=" << port_;
  exposer_.reset();
  if (server_ != nullptr) {
    // Open streams are cancelled; their reactors finish through the loop, which still runs.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
    LOG(INFO) << "grpc server stopped port=" << port_ << " (open streams cancelled)";
  }
  loop_.reset();  // Drains what the reactors posted.
  if (serving) LOG(INFO) << "controller loop drained (pending work committed)";
  server_.reset();
  telemetry_.reset();
  control_.reset();
  limiter_.reset();
  controller_.reset();
  kv_.reset();
  if (serving) {
    LOG(INFO) << "store closed data_dir=" << (data_dir_.empty() ? "(in memory)" : data_dir_);
  }
}

void ControllerServer::RunOnLoop(const std::function<void(Controller&)>& fn) {
  Controller* c = controller_.get();
  loop_->RunSync([&] { fn(*c); });
}

}  // namespace falcon::controller::service
