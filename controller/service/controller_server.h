// The assembled controller process: the store (RocksDB in --data_dir, or in memory), the
// Controller, its loop with the periodic tick, the gRPC server (Telemetry + Control, reflection
// on) and the Prometheus /metrics endpoint. Used by falcon_controller's main and by the loopback
// tests. Thread-safe.
#ifndef FALCON_CONTROLLER_SERVICE_CONTROLLER_SERVER_H_
#define FALCON_CONTROLLER_SERVICE_CONTROLLER_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "controller/controller.h"
#include "controller/detection/mitigation_hook.h"
#include "proto/grpc_tls.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace grpc {
class Server;
}  // namespace grpc

namespace falcon::controller::service {
class ControllerMetrics;
}  // namespace falcon::controller::service

namespace falcon::controller::store {
class KvStore;
}  // namespace falcon::controller::store

namespace falcon::controller::service {

class ControlService;
class EventLoop;
class TelemetryService;
class StreamLimiter;

struct ServerOptions {
  // gRPC address; port 0 picks a free one (see port()). Default 127.0.0.1:7070.
  std::string listen = "127.0.0.1:7070";
  // Mutual TLS on `listen` (docs/operations.md#tls): every client presents a certificate signed
  // by tls.ca, and an agent's must name the node its hello claims. Empty: plaintext (logged as a
  // warning at start).
  proto::TlsFiles tls;
  // How often the TLS files are read again: a rotated certificate serves new connections, open
  // agent streams stay up. [1 s, 24 h]. Default 60 s.
  absl::Duration tls_refresh = absl::Seconds(60);
  // Prometheus endpoint address; "" = none. Port 0 picks a free one (see metrics_port()).
  std::string metrics_listen;
  // RocksDB directory; "" keeps state in memory (lost on exit; tests only).
  std::string data_dir;
  // Acknowledge only what the log has fsynced (RocksDbOptions::sync_writes); false: what the
  // operating system holds (survives a controller crash, not a power loss). Default true.
  bool sync_writes = true;
  // Open a damaged store by repairing it (RocksDbOptions::repair), logging and counting what was
  // lost (falcon_controller_store_repair_lost); false: refuse to start with kDataLoss naming the
  // damaged file. Default false.
  bool store_repair = false;
  // How often Controller::Tick runs. Default 1 s.
  absl::Duration tick_interval = absl::Seconds(1);
  // HTTP/2 keepalive of every connection (proto/grpc_util.h): ping after `keepalive_time`, close
  // the connection (ending its streams: the agent is marked disconnected) when no answer came
  // within `keepalive_timeout`. Defaults 30 s and 10 s.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
  // Reported as falcon_controller_build_info{version}.
  std::string version = "dev";
  ControllerOptions controller;
};

class ControllerServer {
 public:
  // Errors: kInvalidArgument for bad options; kUnavailable when an address cannot be bound or
  // the data directory is locked; store errors while loading.
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(
      const ServerOptions& options, const common::Clock* clock,
      detection::MitigationHook* hook = nullptr);
  ~ControllerServer();

  // Stops the gRPC server (cancelling open streams), drains the loop (what it runs is committed)
  // and closes the store, logging each step. Idempotent.
  void Shutdown();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  prometheus::Registry& registry() { return *registry_; }
  // Runs `fn` on the controller loop and waits for it.
  void RunOnLoop(const std::function<void(Controller&)>& fn);

 private:
  ControllerServer() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::ControllerMetrics> metrics_;
  std::unique_ptr<store::KvStore> kv_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<StreamLimiter> limiter_;
  std::unique_ptr<TelemetryService> telemetry_;
  std::unique_ptr<ControlService> control_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string data_dir_;
  int port_ = 0;
  int metrics_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_CONTROLLER_SERVER_H_
