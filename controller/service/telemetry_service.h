// gRPC adapter of falcon.v1.Telemetry: one bidi reactor per agent stream. It only translates:
// each AgentMessage is run on the controller loop (Controller::OnAgentMessage), the next read
// starts after it was handled (so a stream is processed strictly in order and a slow store
// back-pressures its agent), replies go out through a WriteQueue, and an error from the
// controller ends the stream with that status. A stream beyond the peer's limit
// (stream_limiter.h) is finished at once with RESOURCE_EXHAUSTED; an admitted one is announced to
// the controller (Controller::OnAgentConnected), whose idle timeout may close it.
#ifndef FALCON_CONTROLLER_SERVICE_TELEMETRY_SERVICE_H_
#define FALCON_CONTROLLER_SERVICE_TELEMETRY_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "controller/controller.h"
#include "controller/service/event_loop.h"
#include "controller/service/stream_limiter.h"
#include "proto/falcon/v1/telemetry.grpc.pb.h"

namespace falcon::controller::service {

class TelemetryService final : public falcon::v1::Telemetry::CallbackService {
 public:
  // `loop`, `controller` and `limiter` must outlive the server.
  TelemetryService(EventLoop* loop, Controller* controller, StreamLimiter* limiter)
      : loop_(loop), controller_(controller), limiter_(limiter) {}

  grpc::ServerBidiReactor<falcon::v1::AgentMessage, falcon::v1::ControllerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

 private:
  EventLoop* const loop_;
  Controller* const controller_;
  StreamLimiter* const limiter_;
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_TELEMETRY_SERVICE_H_
