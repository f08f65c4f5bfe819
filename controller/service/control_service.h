// gRPC adapter of falcon.v1.Control: every unary RPC runs ControlApi on the controller loop and
// finishes its reactor from there; WatchEvents is a write reactor fed by an EventManager watcher.
// Only translates (proto in, proto out, absl::Status -> grpc::Status). A WatchEvents stream beyond
// the peer's stream limit (stream_limiter.h) is finished at once with RESOURCE_EXHAUSTED.
//
// Authorization (docs/operations.md#authorization-and-audit): the mutating RPCs (SetSettings,
// ForceValidation) need the operator role, the OU of the caller's client certificate; any other
// caller (OU viewer, a node's certificate) gets PERMISSION_DENIED naming the method and the
// identity (the certificate's CN). Every mutating call, allowed or refused, is recorded in the
// audit trail (Controller::RecordAudit) before its reply. The read RPCs (and ListAudit) take any
// certificate of the cluster CA. On a plaintext server there is no identity: every caller is
// "plaintext" with the operator role.
#ifndef FALCON_CONTROLLER_SERVICE_CONTROL_SERVICE_H_
#define FALCON_CONTROLLER_SERVICE_CONTROL_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "controller/control_api.h"
#include "controller/controller.h"
#include "controller/service/event_loop.h"
#include "controller/service/stream_limiter.h"
#include "proto/falcon/v1/control.grpc.pb.h"

namespace falcon::controller::service {

class ControlService final : public falcon::v1::Control::CallbackService {
 public:
  // `loop`, `controller` and `limiter` must outlive the server.
  // `plaintext`: the server runs without TLS (no caller identity).
  ControlService(EventLoop* loop, Controller* controller, StreamLimiter* limiter, bool plaintext)
      : loop_(loop),
        controller_(controller),
        limiter_(limiter),
        plaintext_(plaintext),
        api_(controller) {}

  // The role the mutating RPCs need, and the identity of a plaintext server's callers.
  static constexpr char kOperatorRole[] = "operator";
  static constexpr char kPlaintextIdentity[] = "plaintext";

  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx,
                                     const falcon::v1::ListJobsRequest* request,
                                     falcon::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx,
                                   const falcon::v1::GetJobRequest* request,
                                   falcon::v1::Job* response) override;
  grpc::ServerUnaryReactor* ListEvents(grpc::CallbackServerContext* ctx,
                                       const falcon::v1::ListEventsRequest* request,
                                       falcon::v1::ListEventsResponse* response) override;
  grpc::ServerUnaryReactor* GetEvent(grpc::CallbackServerContext* ctx,
                                     const falcon::v1::GetEventRequest* request,
                                     falcon::v1::Event* response) override;
  grpc::ServerWriteReactor<falcon::v1::Event>* WatchEvents(
      grpc::CallbackServerContext* ctx, const falcon::v1::WatchEventsRequest* request) override;
  grpc::ServerUnaryReactor* ListDirectives(grpc::CallbackServerContext* ctx,
                                           const falcon::v1::ListDirectivesRequest* request,
                                           falcon::v1::ListDirectivesResponse* response) override;
  grpc::ServerUnaryReactor* GetHistory(grpc::CallbackServerContext* ctx,
                                       const falcon::v1::GetHistoryRequest* request,
                                       falcon::v1::GetHistoryResponse* response) override;
  grpc::ServerUnaryReactor* GetSettings(grpc::CallbackServerContext* ctx,
                                        const falcon::v1::GetSettingsRequest* request,
                                        falcon::v1::Settings* response) override;
  grpc::ServerUnaryReactor* SetSettings(grpc::CallbackServerContext* ctx,
                                        const falcon::v1::SetSettingsRequest* request,
                                        falcon::v1::Settings* response) override;
  grpc::ServerUnaryReactor* ForceValidation(grpc::CallbackServerContext* ctx,
                                            const falcon::v1::ForceValidationRequest* request,
                                            falcon::v1::ForceValidationResponse* response) override;
  grpc::ServerUnaryReactor* DryRunPlan(grpc::CallbackServerContext* ctx,
                                       const falcon::v1::DryRunPlanRequest* request,
                                       falcon::v1::DryRunPlanResponse* response) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* ctx,
                                      const falcon::v1::ListAuditRequest* request,
                                      falcon::v1::ListAuditResponse* response) override;

 private:
  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* ctx, const Req* request,
                                  Resp* response, Fn fn);
  // As Unary for a mutating RPC: authorized and audited.
  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Mutating(grpc::CallbackServerContext* ctx, const char* method,
                                     const Req* request, Resp* response, Fn fn);

  EventLoop* const loop_;
  Controller* const controller_;
  StreamLimiter* const limiter_;
  const bool plaintext_;
  ControlApi api_;  // Loop thread only.
};

}  // namespace falcon::controller::service

#endif  // FALCON_CONTROLLER_SERVICE_CONTROL_SERVICE_H_
