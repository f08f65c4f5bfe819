#include "agent/testing/fake_controller.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/grpc_util.h"

namespace falcon::agent::testing {

bool FakeControllerStore::Store(const std::string& agent_id, const v1::TelemetryBatch& batch) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = batches_[agent_id].try_emplace(batch.sequence(), batch);
  if (!inserted) duplicates_++;
  return inserted;
}

uint64_t FakeControllerStore::Acked(const std::string& agent_id, uint64_t first_unacked) {
  absl::MutexLock lock(&mu_);
  uint64_t& settled = settled_[agent_id];
  if (first_unacked > 0 && first_unacked - 1 > settled) settled = first_unacked - 1;
  const auto& stored = batches_[agent_id];
  while (stored.count(settled + 1) > 0) settled++;
  return settled;
}

void FakeControllerStore::AddHello(const v1::AgentHello& hello) {
  absl::MutexLock lock(&mu_);
  hellos_.push_back(hello);
}

void FakeControllerStore::AddOther(const v1::AgentMessage& msg) {
  absl::MutexLock lock(&mu_);
  others_.push_back(msg);
}

std::vector<v1::TelemetryBatch> FakeControllerStore::Batches(const std::string& agent_id) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::TelemetryBatch> out;
  auto it = batches_.find(agent_id);
  if (it == batches_.end()) return out;
  for (const auto& [seq, b] : it->second) out.push_back(b);
  return out;
}

std::vector<v1::AgentHello> FakeControllerStore::Hellos() const {
  absl::MutexLock lock(&mu_);
  return hellos_;
}

std::vector<v1::AgentMessage> FakeControllerStore::Others() const {
  absl::MutexLock lock(&mu_);
  return others_;
}

uint64_t FakeControllerStore::duplicates() const {
  absl::MutexLock lock(&mu_);
  return duplicates_;
}

bool FakeControllerStore::WaitFor(const std::function<bool(const FakeControllerStore&)>& pred,
                                  absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (!pred(*this)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

class FakeController::Service final : public v1::Telemetry::Service {
 public:
  explicit Service(FakeController* owner) : owner_(owner) {}

  grpc::Status Connect(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<v1::ControllerMessage, v1::AgentMessage>* stream) override {
    v1::AgentMessage msg;
    if (!stream->Read(&msg)) return grpc::Status::OK;
    if (!msg.has_hello() || msg.hello().agent_id().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "hello: must come first");
    }
    const std::string agent_id = msg.hello().agent_id();
    owner_->store_->AddHello(msg.hello());
    v1::ControllerMessage hello;
    hello.mutable_hello()->set_controller_id("fake");
    hello.mutable_hello()->set_acked_sequence(
        owner_->store_->Acked(agent_id, msg.hello().first_unacked_sequence()));
    {
      absl::MutexLock lock(&owner_->write_mu_);
      if (!stream->Write(hello)) return grpc::Status::OK;
    }
    {
      absl::MutexLock lock(&owner_->mu_);
      owner_->stream_ = stream;
    }
    while (stream->Read(&msg)) {
      if (msg.has_batch()) {
        bool store = false;
        bool ack = false;
        {
          absl::MutexLock lock(&owner_->mu_);
          store = owner_->store_batches_;
          ack = owner_->ack_;
        }
        if (!store) continue;
        owner_->store_->Store(agent_id, msg.batch());
        if (!ack) continue;
        v1::ControllerMessage out;
        out.mutable_batch_ack()->set_sequence(msg.batch().sequence());
        absl::MutexLock lock(&owner_->write_mu_);
        stream->Write(out);
      } else if (msg.has_validation_result() || msg.has_directive_ack()) {
        owner_->store_->AddOther(msg);
      }
    }
    absl::MutexLock lock(&owner_->mu_);
    if (owner_->stream_ == stream) owner_->stream_ = nullptr;
    return grpc::Status::OK;
  }

 private:
  FakeController* const owner_;
};

FakeController::FakeController(FakeControllerStore* store)
    : store_(store), service_(std::make_unique<Service>(this)) {}

FakeController::~FakeController() { Kill(); }

absl::Status FakeController::Start(int port) {
  auto started = proto::StartGrpcServer(absl::StrCat("127.0.0.1:", port), {service_.get()});
  if (!started.ok()) return started.status();
  server_ = std::move(started->server);
  port_ = started->port;
  return absl::OkStatus();
}

void FakeController::Kill() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
  absl::MutexLock lock(&mu_);
  stream_ = nullptr;
}

void FakeController::set_ack(bool ack) {
  absl::MutexLock lock(&mu_);
  ack_ = ack;
}

void FakeController::set_store(bool store) {
  absl::MutexLock lock(&mu_);
  store_batches_ = store;
}

bool FakeController::Send(const v1::ControllerMessage& msg) {
  absl::MutexLock lock(&mu_);
  if (stream_ == nullptr) return false;
  absl::MutexLock write_lock(&write_mu_);
  return stream_->Write(msg);
}

bool FakeController::WaitForAgent(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto live = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stream_ != nullptr; };
  return mu_.AwaitWithTimeout(absl::Condition(&live), timeout);
}

}  // namespace falcon::agent::testing
