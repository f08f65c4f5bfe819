#include "agent/testing/shim_test_client.h"

namespace falcon::agent::testing {

ShimTestClient::ShimTestClient(const std::string& socket_path) {
  auto channel = grpc::CreateChannel("unix:" + socket_path, grpc::InsecureChannelCredentials());
  stub_ = v1::Shim::NewStub(channel);
  stream_ = stub_->Attach(&ctx_);
  reader_ = std::thread([this] { ReadLoop(); });
}

ShimTestClient::~ShimTestClient() { Close(); }

void ShimTestClient::ReadLoop() {
  v1::AgentToShim msg;
  while (stream_->Read(&msg)) {
    absl::MutexLock lock(&mu_);
    received_.push_back(msg);
  }
  absl::MutexLock lock(&mu_);
  ended_ = true;
}

bool ShimTestClient::Send(const v1::ShimMessage& msg) { return stream_->Write(msg); }

std::optional<v1::AgentToShim> ShimTestClient::Next(v1::AgentToShim::MsgCase kind,
                                                    absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto has = [this, kind]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ended_) return true;
    for (const auto& m : received_) {
      if (m.msg_case() == kind) return true;
    }
    return false;
  };
  mu_.AwaitWithTimeout(absl::Condition(&has), timeout);
  for (auto it = received_.begin(); it != received_.end(); ++it) {
    if (it->msg_case() == kind) {
      v1::AgentToShim out = *it;
      received_.erase(it);
      return out;
    }
  }
  return std::nullopt;
}

bool ShimTestClient::Ended() const {
  absl::MutexLock lock(&mu_);
  return ended_;
}

grpc::Status ShimTestClient::Close() {
  if (closed_) return status_;
  closed_ = true;
  stream_->WritesDone();
  reader_.join();
  status_ = stream_->Finish();
  return status_;
}

}  // namespace falcon::agent::testing
