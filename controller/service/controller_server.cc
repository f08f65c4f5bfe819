#include "controller/service/controller_server.h"

#include <glog/logging.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "controller/metrics/controller_metrics.h"
#include "controller/service/control_service.h"
#include "controller/service/event_loop.h"
#include "controller/service/telemetry_service.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/rocksdb_kv_store.h"
#include "proto/grpc_util.h"

namespace falcon::controller {

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    const ServerOptions& options, const common::Clock* clock, MitigationHook* hook) {
  if (options.listen.empty()) return absl::InvalidArgumentError("listen: must not be empty");
  if (options.tick_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("tick_interval: must be > 0");
  }
  std::unique_ptr<ControllerServer> s(new ControllerServer());
  s->data_dir_ = options.data_dir;
  s->registry_ = std::make_shared<prometheus::Registry>();
  s->metrics_ = std::make_unique<ControllerMetrics>(*s->registry_, options.version);
  if (options.data_dir.empty()) {
    s->kv_ = std::make_unique<InMemoryKvStore>(ControllerStore::TableNames());
  } else {
    RocksDbOptions rocks;
    rocks.path = options.data_dir;
    rocks.sync_writes = options.sync_writes;
    auto kv = RocksDbKvStore::Open(rocks, ControllerStore::TableNames());
    if (!kv.ok()) return kv.status();
    s->kv_ = std::move(*kv);
  }
  auto controller =
      Controller::Create(options.controller, s->kv_.get(), clock, s->metrics_.get(), hook);
  if (!controller.ok()) return controller.status();
  s->controller_ = std::move(*controller);
  Controller* c = s->controller_.get();
  s->loop_ = std::make_unique<EventLoop>([c] { c->Tick(); }, options.tick_interval);
  s->telemetry_ = std::make_unique<TelemetryService>(s->loop_.get(), c);
  s->control_ = std::make_unique<ControlService>(s->loop_.get(), c);
  auto started = StartGrpcServer(options.listen, {s->telemetry_.get(), s->control_.get()});
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

}  // namespace falcon::controller
