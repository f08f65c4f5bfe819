#include "controller/service/control_service.h"

#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/service/write_queue.h"
#include "proto/grpc_tls.h"
#include "proto/grpc_util.h"

namespace falcon::controller::service {
namespace {

// Streams event transitions: the open events first, then every committed transition.
class WatchReactor : public grpc::ServerWriteReactor<falcon::v1::Event> {
 public:
  WatchReactor(EventLoop* loop, Controller* controller, ControlApi* api,
               falcon::v1::WatchEventsRequest request, StreamLimiter* limiter, std::string peer)
      : loop_(loop),
        controller_(controller),
        limiter_(limiter),
        peer_(std::move(peer)),
        writes_(this) {
    loop_->Post([this, api, request] {
      absl::StatusOr<std::vector<falcon::v1::Event>> replay = api->StartWatch(request);
      if (!replay.ok()) {
        writes_.RequestFinish(proto::ToGrpcStatus(replay.status()));
        return;
      }
      for (const falcon::v1::Event& e : *replay) writes_.Write(e);
      watch_id_ = controller_->events().Watch(
          request.job(), [this](const falcon::v1::Event& e) { writes_.Write(e); });
    });
  }

  void OnWriteDone(bool ok) override { writes_.OnWriteDone(ok); }
  void OnCancel() override {
    loop_->Post([this] { writes_.RequestFinish(grpc::Status::CANCELLED); });
  }
  void OnDone() override {
    writes_.MarkDone();
    limiter_->Release(peer_);
    loop_->Post([this] {
      if (watch_id_ != 0) controller_->events().Unwatch(watch_id_);
      delete this;
    });
  }

 private:
  EventLoop* const loop_;
  Controller* const controller_;
  StreamLimiter* const limiter_;
  const std::string peer_;
  WriteQueue<grpc::ServerWriteReactor<falcon::v1::Event>, falcon::v1::Event> writes_;
  uint64_t watch_id_ = 0;  // Loop thread only.
};

// A watch refused before it started (stream limit): finished at once with the refusal.
class RefusedWatch : public grpc::ServerWriteReactor<falcon::v1::Event> {
 public:
  explicit RefusedWatch(const absl::Status& status) { Finish(proto::ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

template <typename Req, typename Resp, typename Fn>
grpc::ServerUnaryReactor* ControlService::Mutating(grpc::CallbackServerContext* ctx,
                                                   const char* method, const Req* request,
                                                   Resp* response, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  falcon::v1::AuditRecord audit;
  audit.set_method(method);
  audit.set_peer(ctx->peer());
  audit.set_request(request->ShortDebugString());
  if (plaintext_) {
    audit.set_identity(kPlaintextIdentity);
    audit.set_role(kOperatorRole);
  } else {
    const std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
    if (auth != nullptr) {
      audit.set_identity(proto::PeerCommonName(*auth));
      audit.set_role(proto::PeerRole(*auth));
    }
  }
  absl::Status allowed;
  if (audit.role() != kOperatorRole) {
    allowed = absl::PermissionDeniedError(
        absl::StrCat(method, ": identity \"", audit.identity(), "\" (role ",
                     audit.role().empty() ? "none" : audit.role(), ", peer ", audit.peer(),
                     ") may not call it: it needs the ", kOperatorRole,
                     " role (the OU of the client certificate)"));
  }
  loop_->Post([this, reactor, request, response, fn, audit = std::move(audit),
               allowed = std::move(allowed)]() mutable {
    absl::Status status = allowed;
    if (status.ok()) {
      auto result = (api_.*fn)(*request);
      if (result.ok()) *response = std::move(*result);
      status = result.status();
    }
    audit.set_result(status.ToString());
    controller_->RecordAudit(std::move(audit));
    reactor->Finish(proto::ToGrpcStatus(status));
  });
  return reactor;
}

template <typename Req, typename Resp, typename Fn>
grpc::ServerUnaryReactor* ControlService::Unary(grpc::CallbackServerContext* ctx,
                                                const Req* request, Resp* response, Fn fn) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  loop_->Post([this, reactor, request, response, fn] {
    auto result = (api_.*fn)(*request);
    if (result.ok()) *response = std::move(*result);
    reactor->Finish(proto::ToGrpcStatus(result.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ControlService::ListJobs(grpc::CallbackServerContext* ctx,
                                                   const falcon::v1::ListJobsRequest* request,
                                                   falcon::v1::ListJobsResponse* response) {
  return Unary(ctx, request, response, &ControlApi::ListJobs);
}

grpc::ServerUnaryReactor* ControlService::GetJob(grpc::CallbackServerContext* ctx,
                                                 const falcon::v1::GetJobRequest* request,
                                                 falcon::v1::Job* response) {
  return Unary(ctx, request, response, &ControlApi::GetJob);
}

grpc::ServerUnaryReactor* ControlService::ListEvents(grpc::CallbackServerContext* ctx,
                                                     const falcon::v1::ListEventsRequest* request,
                                                     falcon::v1::ListEventsResponse* response) {
  return Unary(ctx, request, response, &ControlApi::ListEvents);
}

grpc::ServerUnaryReactor* ControlService::GetEvent(grpc::CallbackServerContext* ctx,
                                                   const falcon::v1::GetEventRequest* request,
                                                   falcon::v1::Event* response) {
  return Unary(ctx, request, response, &ControlApi::GetEvent);
}

grpc::ServerWriteReactor<falcon::v1::Event>* ControlService::WatchEvents(
    grpc::CallbackServerContext* ctx, const falcon::v1::WatchEventsRequest* request) {
  std::string peer = ctx->peer();
  if (absl::Status s = limiter_->Admit(peer, "Control.WatchEvents"); !s.ok()) {
    return new RefusedWatch(s);
  }
  return new WatchReactor(loop_, controller_, &api_, *request, limiter_, std::move(peer));
}

grpc::ServerUnaryReactor* ControlService::ListDirectives(
    grpc::CallbackServerContext* ctx, const falcon::v1::ListDirectivesRequest* request,
    falcon::v1::ListDirectivesResponse* response) {
  return Unary(ctx, request, response, &ControlApi::ListDirectives);
}

grpc::ServerUnaryReactor* ControlService::GetHistory(grpc::CallbackServerContext* ctx,
                                                     const falcon::v1::GetHistoryRequest* request,
                                                     falcon::v1::GetHistoryResponse* response) {
  return Unary(ctx, request, response, &ControlApi::GetHistory);
}

grpc::ServerUnaryReactor* ControlService::GetSettings(grpc::CallbackServerContext* ctx,
                                                      const falcon::v1::GetSettingsRequest* request,
                                                      falcon::v1::Settings* response) {
  return Unary(ctx, request, response, &ControlApi::GetSettings);
}

grpc::ServerUnaryReactor* ControlService::SetSettings(grpc::CallbackServerContext* ctx,
                                                      const falcon::v1::SetSettingsRequest* request,
                                                      falcon::v1::Settings* response) {
  return Mutating(ctx, "SetSettings", request, response, &ControlApi::SetSettings);
}

grpc::ServerUnaryReactor* ControlService::ForceValidation(
    grpc::CallbackServerContext* ctx, const falcon::v1::ForceValidationRequest* request,
    falcon::v1::ForceValidationResponse* response) {
  return Mutating(ctx, "ForceValidation", request, response, &ControlApi::ForceValidation);
}

grpc::ServerUnaryReactor* ControlService::DryRunPlan(grpc::CallbackServerContext* ctx,
                                                     const falcon::v1::DryRunPlanRequest* request,
                                                     falcon::v1::DryRunPlanResponse* response) {
  return Unary(ctx, request, response, &ControlApi::DryRunPlan);
}

grpc::ServerUnaryReactor* ControlService::ListAudit(grpc::CallbackServerContext* ctx,
                                                    const falcon::v1::ListAuditRequest* request,
                                                    falcon::v1::ListAuditResponse* response) {
  return Unary(ctx, request, response, &ControlApi::ListAudit);
}

}  // namespace falcon::controller::service
