#include "agent/controller_link.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_metrics_table.h"
#include "proto/grpc_tls.h"

namespace falcon::agent {

ControllerLink::ControllerLink(Options options, TelemetryBuffer* buffer, Handler* handler,
                               AgentMetrics* metrics, const common::Clock& clock)
    : options_(std::move(options)),
      buffer_(buffer),
      handler_(handler),
      metrics_(metrics),
      clock_(clock) {}

ControllerLink::~ControllerLink() { Stop(); }

void ControllerLink::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void ControllerLink::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

void ControllerLink::Notify() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void ControllerLink::Send(v1::AgentMessage msg) {
  absl::MutexLock lock(&mu_);
  if (outbox_.size() >= options_.max_outbox) {
    outbox_.pop_front();
    stats_.outbox_dropped++;
  }
  outbox_.push_back(std::move(msg));
}

bool ControllerLink::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

bool ControllerLink::WaitConnected(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&connected_), timeout);
}

ControllerLink::Stats ControllerLink::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void ControllerLink::Run() {
  common::Backoff backoff(options_.backoff);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    std::string ended;
    const bool established = RunConnection(&ended);
    if (established) backoff.Reset();
    const absl::Duration delay = backoff.Next();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    LOG(WARNING) << (established ? "controller disconnected" : "controller connect failed")
                 << " agent=" << options_.agent_id << " address=" << options_.address << " "
                 << ended << " reconnect_in=" << absl::FormatDuration(delay);
    metrics_->CountError(metric::where::kControllerStream);
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
    if (stopping_) break;
  }
}

void ControllerLink::ReadLoop(
    grpc::ClientReaderWriter<v1::AgentMessage, v1::ControllerMessage>* stream,
    uint64_t generation) {
  v1::ControllerMessage msg;
  while (stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case v1::ControllerMessage::kHello: {
        buffer_->OnConnected(msg.hello().acked_sequence());
        const TelemetryBuffer::Stats held = buffer_->stats();
        if (held.unsent > 0) {
          LOG(INFO) << "resending held batches agent=" << options_.agent_id
                    << " unsent=" << held.unsent
                    << " controller_acked=" << msg.hello().acked_sequence();
        }
        absl::MutexLock lock(&mu_);
        if (generation == generation_) {
          hello_received_ = true;
          wake_ = true;
        }
        break;
      }
      case v1::ControllerMessage::kBatchAck:
        if (msg.batch_ack().has_error()) {
          LOG(WARNING) << "batch rejected by the controller agent=" << options_.agent_id
                       << " sequence=" << msg.batch_ack().sequence()
                       << " field=" << msg.batch_ack().error().field() << " error=\""
                       << msg.batch_ack().error().message() << "\"";
          metrics_->CountRejectedBatch();
          metrics_->CountError(metric::where::kControllerBatchRejected);
          absl::MutexLock lock(&mu_);
          stats_.rejected_batches++;
        }
        buffer_->Ack(msg.batch_ack().sequence());
        break;
      default:
        handler_->OnControllerMessage(msg);
    }
  }
  absl::MutexLock lock(&mu_);
  if (generation == generation_) {
    broken_ = true;
    read_ended_ = true;  // The controller ended the stream: its status says why.
  }
}

bool ControllerLink::RunConnection(std::string* ended) {
  grpc::ChannelArguments args;
  // A fresh channel per attempt, with its own subchannel, so that our backoff (not gRPC's
  // shared reconnect backoff, up to 2 minutes) decides when the next attempt happens.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  const int max_backoff_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.backoff.max));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, std::max(max_backoff_ms, 100));
  // Read at every attempt: a renewed certificate is used from the next connection on.
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      proto::MakeChannelCredentials(options_.tls);
  if (!credentials.ok()) {
    *ended = absl::StrCat("error=\"", credentials.status().message(), "\"");
    return false;
  }
  auto channel = grpc::CreateCustomChannel(options_.address, *credentials, args);
  auto stub = v1::Telemetry::NewStub(channel);
  grpc::ClientContext ctx;
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    ctx_ = &ctx;
    generation = ++generation_;
    hello_received_ = false;
    broken_ = false;
    read_ended_ = false;
    stats_.attempts++;
  }
  auto stream = stub->Connect(&ctx);

  v1::AgentMessage hello;
  v1::AgentHello* h = hello.mutable_hello();
  h->set_agent_id(options_.agent_id);
  h->set_node(options_.node);
  for (v1::JobRegistration& reg : handler_->Registrations()) *h->add_jobs() = std::move(reg);
  h->set_first_unacked_sequence(buffer_->FirstUnacked());
  h->set_version(options_.version);

  std::thread reader;
  if (stream->Write(hello)) {
    reader = std::thread([this, s = stream.get(), generation] { ReadLoop(s, generation); });
  } else {
    absl::MutexLock lock(&mu_);
    broken_ = true;
  }

  bool established = false;
  {
    absl::MutexLock lock(&mu_);
    auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return hello_received_ || broken_ || stopping_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&answered), options_.hello_timeout);
    established = hello_received_ && !broken_ && !stopping_;
    if (established) {
      connected_ = true;
      stats_.connects++;
    }
  }
  if (established) {
    metrics_->SetControllerConnected(true);
    metrics_->CountConnect();
    LOG(INFO) << "controller connected agent=" << options_.agent_id << " node=" << options_.node
              << " address=" << options_.address << " jobs=" << h->jobs_size()
              << " first_unacked=" << h->first_unacked_sequence();
  }

  absl::Time last_write = absl::Now();
  while (established) {
    std::deque<v1::AgentMessage> outbox;
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || broken_ || !outbox_.empty() || wake_;
      };
      mu_.AwaitWithDeadline(absl::Condition(&work), last_write + options_.heartbeat_interval);
      if (stopping_ || broken_) break;
      wake_ = false;
      outbox.swap(outbox_);
    }
    bool ok = true;
    bool wrote = false;
    while (ok && !outbox.empty()) {
      ok = stream->Write(outbox.front());
      if (ok) {
        outbox.pop_front();
        wrote = true;
      }
    }
    if (!ok) {
      absl::MutexLock lock(&mu_);  // Keep them for the next connection, in order.
      for (auto it = outbox.rbegin(); it != outbox.rend(); ++it) outbox_.push_front(*it);
      break;
    }
    for (int i = 0; ok && i < options_.max_batches_per_round; ++i) {
      std::optional<v1::TelemetryBatch> batch = buffer_->NextToSend();
      if (!batch.has_value()) break;
      v1::AgentMessage msg;
      *msg.mutable_batch() = std::move(*batch);
      ok = stream->Write(msg);
      wrote = true;
    }
    if (!ok) break;
    if (buffer_->HasUnsent()) {
      absl::MutexLock lock(&mu_);
      wake_ = true;
    }
    if (!wrote && absl::Now() >= last_write + options_.heartbeat_interval) {
      v1::AgentMessage beat;
      beat.mutable_heartbeat()->set_agent_time_ns(clock_.MonotonicNanos());
      if (!stream->Write(beat)) break;
      wrote = true;
    }
    if (wrote) last_write = absl::Now();
  }

  // A stream the controller ended (an error such as a refused hello) is not cancelled, so Finish
  // returns the controller's status, which says why; otherwise cancelling ends the reader and the
  // status is CANCELLED.
  bool read_ended = false;
  {
    absl::MutexLock lock(&mu_);
    read_ended = read_ended_;
  }
  if (!read_ended) ctx.TryCancel();
  if (reader.joinable()) reader.join();
  const grpc::Status status = stream->Finish();
  *ended = status.ok()
               ? "status=OK"
               : absl::StrCat(
                     "status=",
                     absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                     " error=\"", status.error_message(), "\"");
  bool was_connected = false;
  {
    absl::MutexLock lock(&mu_);
    ctx_ = nullptr;
    was_connected = connected_;
    connected_ = false;
  }
  if (was_connected) metrics_->SetControllerConnected(false);
  return established;
}

}  // namespace falcon::agent
