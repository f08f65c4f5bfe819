#include "trainer_shim/fake_agent.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace falcon::trainer_shim {

std::string TestSocketPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  if (tmp != nullptr && std::strlen(tmp) + name.size() + 2 < 100)
    return absl::StrCat(tmp, "/", name);
  char dir[] = "/tmp/fshim_XXXXXX";
  if (mkdtemp(dir) == nullptr) return absl::StrCat("/tmp/fshim_", getpid(), "_", name);
  return absl::StrCat(dir, "/", name);
}

using Stream = grpc::ServerReaderWriter<falcon::v1::AgentToShim, falcon::v1::ShimMessage>;

class FakeAgent::Service final : public falcon::v1::Shim::Service {
 public:
  explicit Service(FakeAgent* agent) : agent_(agent) {}
  grpc::Status Attach(grpc::ServerContext* /*context*/, Stream* stream) override {
    {
      absl::MutexLock lock(&agent_->write_mu_);
      agent_->stream_ = stream;
    }
    falcon::v1::ShimMessage message;
    while (stream->Read(&message)) agent_->OnMessage(message, stream);
    absl::MutexLock lock(&agent_->write_mu_);
    if (agent_->stream_ == stream) agent_->stream_ = nullptr;
    return grpc::Status::OK;
  }

 private:
  FakeAgent* const agent_;
};

FakeAgent::FakeAgent(Options options) : options_(options) {}

absl::StatusOr<std::unique_ptr<FakeAgent>> FakeAgent::Start(const std::string& socket_path,
                                                            Options options) {
  std::unique_ptr<FakeAgent> agent(new FakeAgent(options));
  agent->service_ = std::make_unique<Service>(agent.get());
  grpc::ServerBuilder builder;
  int selected = 0;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials(),
                           &selected);
  builder.RegisterService(agent->service_.get());
  agent->server_ = builder.BuildAndStart();
  if (agent->server_ == nullptr || selected == 0) {
    return absl::UnavailableError(absl::StrCat("fake agent cannot listen on unix:", socket_path));
  }
  return agent;
}

FakeAgent::~FakeAgent() { Stop(); }

void FakeAgent::Stop() {
  if (stopped_ || server_ == nullptr) return;
  stopped_ = true;
  // An immediate deadline cancels the open streams, as a killed agent would drop them.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
}

void FakeAgent::OnMessage(const falcon::v1::ShimMessage& message, Stream* stream) {
  falcon::v1::AgentToShim reply;
  bool has_reply = false;
  {
    absl::MutexLock lock(&mu_);
    ++events_;
    switch (message.msg_case()) {
      case falcon::v1::ShimMessage::kHello: {
        hellos_.push_back(message.hello());
        falcon::v1::ShimWelcome* w = reply.mutable_welcome();
        w->set_session_id(absl::StrCat("fake-", hellos_.size()));
        w->set_acked_sequence(options_.welcome_acked_sequence);
        w->set_profiling(options_.profiling);
        w->set_delivery_acks(options_.delivery_acks);
        if (options_.welcome_hinted_iteration >= 0) {
          w->set_hinted_iteration(options_.welcome_hinted_iteration);
        }
        has_reply = true;
        break;
      }
      case falcon::v1::ShimMessage::kCommunicator:
        communicators_.push_back(message.communicator());
        break;
      case falcon::v1::ShimMessage::kOpBatch:
        batches_.push_back(message.op_batch());
        if (options_.ack_batches) {
          for (const auto& r : message.op_batch().records()) acked_records_.push_back(r);
          reply.mutable_op_batch_ack()->set_sequence(message.op_batch().sequence());
          has_reply = true;
        }
        break;
      case falcon::v1::ShimMessage::kIteration:
        hints_.push_back(message.iteration());
        break;
      case falcon::v1::ShimMessage::kDirectiveAck:
        acks_.push_back(message.directive_ack());
        break;
      case falcon::v1::ShimMessage::kValidationResult:
        results_.push_back(message.validation_result());
        break;
      case falcon::v1::ShimMessage::MSG_NOT_SET:
        break;
    }
  }
  if (has_reply) {
    absl::MutexLock lock(&write_mu_);
    stream->Write(reply);
  }
}

bool FakeAgent::Send(const falcon::v1::AgentToShim& message) {
  absl::MutexLock lock(&write_mu_);
  return stream_ != nullptr && stream_->Write(message);
}

bool FakeAgent::SendDirective(const falcon::v1::Directive& directive) {
  falcon::v1::AgentToShim m;
  *m.mutable_directive() = directive;
  return Send(m);
}

bool FakeAgent::SendDelivered(uint64_t sequence, int64_t iteration) {
  falcon::v1::AgentToShim m;
  m.mutable_delivered()->set_sequence(sequence);
  m.mutable_delivered()->set_iteration(iteration);
  return Send(m);
}

void FakeAgent::set_ack_batches(bool ack) {
  absl::MutexLock lock(&mu_);
  options_.ack_batches = ack;
}

bool FakeAgent::WaitFor(const std::function<bool()>& predicate, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    uint64_t seen = 0;
    {
      absl::MutexLock lock(&mu_);
      seen = events_;
    }
    // The predicate runs unlocked: it usually reads this agent's observations.
    if (predicate()) return true;
    if (absl::Now() >= deadline) return false;
    absl::MutexLock lock(&mu_);
    auto changed = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return events_ != seen; };
    // Re-check at least every 10 ms: the predicate may depend on state outside this agent.
    mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Milliseconds(10));
  }
}

std::vector<falcon::v1::ShimHello> FakeAgent::hellos() const {
  absl::MutexLock lock(&mu_);
  return hellos_;
}
std::vector<falcon::v1::OpBatch> FakeAgent::batches() const {
  absl::MutexLock lock(&mu_);
  return batches_;
}
std::vector<falcon::v1::OpRecord> FakeAgent::records() const {
  absl::MutexLock lock(&mu_);
  std::vector<falcon::v1::OpRecord> out;
  for (const auto& b : batches_) out.insert(out.end(), b.records().begin(), b.records().end());
  return out;
}
std::vector<falcon::v1::OpRecord> FakeAgent::acked_records() const {
  absl::MutexLock lock(&mu_);
  return acked_records_;
}
std::vector<falcon::v1::Communicator> FakeAgent::communicators() const {
  absl::MutexLock lock(&mu_);
  return communicators_;
}
std::vector<falcon::v1::DirectiveAck> FakeAgent::acks() const {
  absl::MutexLock lock(&mu_);
  return acks_;
}
std::vector<falcon::v1::ValidationResult> FakeAgent::results() const {
  absl::MutexLock lock(&mu_);
  return results_;
}
std::vector<falcon::v1::IterationHint> FakeAgent::hints() const {
  absl::MutexLock lock(&mu_);
  return hints_;
}
bool FakeAgent::attached() const {
  absl::MutexLock lock(&write_mu_);
  return stream_ != nullptr;
}

}  // namespace falcon::trainer_shim
