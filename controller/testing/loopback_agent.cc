#include "controller/testing/loopback_agent.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "controller/testing/job_fixtures.h"

namespace falcon::controller::testing {

LoopbackAgent::LoopbackAgent(std::string agent_id, std::string node, std::vector<uint32_t> ranks,
                             std::vector<falcon::v1::JobRegistration> jobs)
    : agent_id_(std::move(agent_id)),
      node_(std::move(node)),
      ranks_(std::move(ranks)),
      jobs_(std::move(jobs)) {}

LoopbackAgent::~LoopbackAgent() { Close(); }

absl::Status LoopbackAgent::Connect(const std::string& target, absl::Duration timeout) {
  Close();
  auto channel = grpc::CreateChannel(target, credentials_);
  stub_ = falcon::v1::Telemetry::NewStub(channel);
  context_ = std::make_unique<grpc::ClientContext>();
  stream_ = stub_->Connect(context_.get());
  {
    absl::MutexLock lock(&mu_);
    hello_received_ = false;
    reader_done_ = false;
  }
  falcon::v1::AgentMessage hello;
  falcon::v1::AgentHello* h = hello.mutable_hello();
  h->set_agent_id(agent_id_);
  h->set_node(node_);
  h->set_version("loopback");
  for (const auto& j : jobs_) *h->add_jobs() = j;
  {
    absl::MutexLock lock(&mu_);
    h->set_first_unacked_sequence(unacked_.empty() ? 0 : unacked_.begin()->first);
  }
  // A write fails when the controller has already closed the stream (e.g. refused it); the reader
  // still runs, to collect the final status that Connect and WaitClosed report.
  const bool hello_written = Write(hello);
  reader_ = std::thread([this] { ReadLoop(); });
  absl::MutexLock lock(&mu_);
  auto ready = [this]()
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return hello_received_ || reader_done_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout) || !hello_received_) {
    return absl::UnavailableError(
        absl::StrCat(hello_written ? "" : "cannot write hello; ",
                     "no ControllerHello: ", final_status_.error_message()));
  }
  // Resend everything the controller has not stored, in order.
  std::vector<falcon::v1::AgentMessage> resend;
  for (auto it = unacked_.begin(); it != unacked_.end();) {
    if (it->first <= hello_acked_) {
      it = unacked_.erase(it);
      continue;
    }
    falcon::v1::AgentMessage m;
    *m.mutable_batch() = it->second;
    resend.push_back(std::move(m));
    ++it;
  }
  mu_.Unlock();
  for (const auto& m : resend) Write(m);
  mu_.Lock();
  return absl::OkStatus();
}

void LoopbackAgent::Close() {
  if (stream_ != nullptr) {
    {
      absl::MutexLock lock(&write_mu_);
      stream_->WritesDone();
    }
    if (reader_.joinable()) reader_.join();
    stream_.reset();
    context_.reset();
  }
  if (reader_.joinable()) reader_.join();
}

bool LoopbackAgent::Write(const falcon::v1::AgentMessage& msg) {
  absl::MutexLock lock(&write_mu_);
  return stream_ != nullptr && stream_->Write(msg);
}

uint64_t LoopbackAgent::Send(falcon::v1::TelemetryBatch batch) {
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    seq = next_sequence_++;
    batch.set_sequence(seq);
    unacked_[seq] = batch;
  }
  falcon::v1::AgentMessage m;
  *m.mutable_batch() = std::move(batch);
  Write(m);  // On failure it stays buffered and goes out after the next Connect.
  return seq;
}

bool LoopbackAgent::SendRaw(const falcon::v1::AgentMessage& message) { return Write(message); }

absl::Status LoopbackAgent::WaitAcked(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unacked_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(agent_id_ + ": batches not acknowledged");
  }
  return absl::OkStatus();
}

absl::StatusOr<grpc::Status> LoopbackAgent::WaitClosed(absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return reader_done_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
      return absl::DeadlineExceededError("stream still open");
    }
  }
  if (reader_.joinable()) reader_.join();
  absl::MutexLock lock(&mu_);
  return final_status_;
}

void LoopbackAgent::set_responder(Responder responder) {
  absl::MutexLock lock(&mu_);
  responder_ = std::move(responder);
}

bool LoopbackAgent::profiling(const std::string& job) const {
  absl::MutexLock lock(&mu_);
  return profiling_.count(job) > 0;
}

uint64_t LoopbackAgent::hello_acked_sequence() const {
  absl::MutexLock lock(&mu_);
  return hello_acked_;
}

std::vector<falcon::v1::BatchAck> LoopbackAgent::rejected() const {
  absl::MutexLock lock(&mu_);
  return rejected_;
}

void LoopbackAgent::ReadLoop() {
  falcon::v1::ControllerMessage msg;
  while (stream_->Read(&msg)) Handle(msg);
  grpc::Status status = stream_->Finish();
  absl::MutexLock lock(&mu_);
  final_status_ = status;
  reader_done_ = true;
}

void LoopbackAgent::Handle(const falcon::v1::ControllerMessage& msg) {
  Responder responder;
  {
    absl::MutexLock lock(&mu_);
    if (msg.has_hello()) {
      hello_received_ = true;
      hello_acked_ = msg.hello().acked_sequence();
    }
    if (msg.has_batch_ack()) {
      // Acks are cumulative: everything up to this sequence is stored.
      unacked_.erase(unacked_.begin(), unacked_.upper_bound(msg.batch_ack().sequence()));
      if (msg.batch_ack().has_error()) rejected_.push_back(msg.batch_ack());
    }
    if (msg.has_profiling()) {
      if (msg.profiling().enabled()) {
        profiling_.insert(msg.profiling().job());
      } else {
        profiling_.erase(msg.profiling().job());
      }
    }
    responder = responder_;
  }
  if (msg.has_directive() && responder.ack_directives) {
    const falcon::v1::Directive& d = msg.directive();
    for (const falcon::v1::AgentMessage& ack : AppliedAcks(d, ranks_, d.effective_iteration())) {
      Write(ack);
    }
  }
  if (msg.has_validation_task() && responder.answer_tasks) {
    const falcon::v1::ValidationTask& t = msg.validation_task();
    for (const falcon::v1::AgentMessage& out :
         ValidationAnswers(t, ranks_, responder.gemm_ns, responder.link_ns)) {
      Write(out);
    }
  }
}

}  // namespace falcon::controller::testing
