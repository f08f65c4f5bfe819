#include "controller/service/telemetry_service.h"

#include <memory>
#include <string>
#include <vector>

#include "controller/service/write_queue.h"
#include "proto/grpc_tls.h"
#include "proto/grpc_util.h"

namespace falcon::controller::service {
namespace {

using Reactor = grpc::ServerBidiReactor<falcon::v1::AgentMessage, falcon::v1::ControllerMessage>;

// The controller's handle on the stream; outlives the reactor when the hub still holds it.
class StreamChannel : public core::AgentChannel {
 public:
  explicit StreamChannel(Reactor* reactor) : writes_(reactor) {}
  bool Send(const falcon::v1::ControllerMessage& message) override {
    return writes_.Write(message);
  }
  void Close(const absl::Status& status) override {
    writes_.RequestFinish(proto::ToGrpcStatus(status));
  }
  WriteQueue<Reactor, falcon::v1::ControllerMessage>& writes() { return writes_; }

 private:
  WriteQueue<Reactor, falcon::v1::ControllerMessage> writes_;
};

// A stream refused before it started (stream limit): finished at once with the refusal.
class RefusedReactor : public Reactor {
 public:
  explicit RefusedReactor(const absl::Status& status) { Finish(proto::ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

class ConnectReactor : public Reactor {
 public:
  ConnectReactor(EventLoop* loop, Controller* controller, StreamLimiter* limiter, std::string peer,
                 bool authenticated, std::vector<std::string> identities, std::string role)
      : loop_(loop),
        controller_(controller),
        limiter_(limiter),
        channel_(std::make_shared<StreamChannel>(this)) {
    session_.channel = channel_;
    session_.peer = std::move(peer);
    session_.authenticated = authenticated;
    session_.identities = std::move(identities);
    session_.role = std::move(role);
    // Before the first read: the loop runs it before any message of the stream.
    loop_->Post([this] { controller_->OnAgentConnected(&session_); });
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The agent closed its side (or the call broke).
      loop_->Post([this] {
        Disconnect();
        channel_->writes().RequestFinish(grpc::Status::OK);
      });
      return;
    }
    // `in_` is not touched by gRPC until the next StartRead, which the loop task issues.
    loop_->Post([this] {
      absl::Status s = controller_->OnAgentMessage(&session_, in_);
      if (!s.ok()) {
        Disconnect();
        channel_->writes().RequestFinish(proto::ToGrpcStatus(s));
        return;
      }
      if (!channel_->writes().finish_requested()) StartRead(&in_);
    });
  }

  void OnWriteDone(bool ok) override { channel_->writes().OnWriteDone(ok); }

  void OnCancel() override {
    loop_->Post([this] {
      Disconnect();
      channel_->writes().RequestFinish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    });
  }

  void OnDone() override {
    channel_->writes().MarkDone();
    limiter_->Release(session_.peer);
    // Runs after every task this stream posted before (the loop is FIFO).
    loop_->Post([this] {
      Disconnect();
      delete this;
    });
  }

 private:
  void Disconnect() {
    if (disconnected_) return;
    disconnected_ = true;
    controller_->OnAgentDisconnected(&session_);
  }

  EventLoop* const loop_;
  Controller* const controller_;
  StreamLimiter* const limiter_;
  std::shared_ptr<StreamChannel> channel_;
  AgentSession session_;
  falcon::v1::AgentMessage in_;
  bool disconnected_ = false;  // Loop thread only.
};

}  // namespace

Reactor* TelemetryService::Connect(grpc::CallbackServerContext* context) {
  std::string peer = context->peer();
  if (absl::Status s = limiter_->Admit(peer, "Telemetry.Connect"); !s.ok()) {
    return new RefusedReactor(s);
  }
  std::vector<std::string> identities;
  std::string role;
  bool authenticated = false;
  if (std::shared_ptr<const grpc::AuthContext> auth = context->auth_context()) {
    authenticated = auth->IsPeerAuthenticated();
    identities = proto::PeerIdentities(*auth);
    role = proto::PeerRole(*auth);
  }
  return new ConnectReactor(loop_, controller_, limiter_, std::move(peer), authenticated,
                            std::move(identities), std::move(role));
}

}  // namespace falcon::controller::service
