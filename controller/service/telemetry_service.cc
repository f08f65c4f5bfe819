#include "controller/service/telemetry_service.h"

#include <memory>

#include "controller/service/write_queue.h"
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
  WriteQueue<Reactor, falcon::v1::ControllerMessage>& writes() { return writes_; }

 private:
  WriteQueue<Reactor, falcon::v1::ControllerMessage> writes_;
};

class ConnectReactor : public Reactor {
 public:
  ConnectReactor(EventLoop* loop, Controller* controller)
      : loop_(loop), controller_(controller), channel_(std::make_shared<StreamChannel>(this)) {
    session_.channel = channel_;
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
  std::shared_ptr<StreamChannel> channel_;
  AgentSession session_;
  falcon::v1::AgentMessage in_;
  bool disconnected_ = false;  // Loop thread only.
};

}  // namespace

Reactor* TelemetryService::Connect(grpc::CallbackServerContext*) {
  return new ConnectReactor(loop_, controller_);
}

}  // namespace falcon::controller::service
