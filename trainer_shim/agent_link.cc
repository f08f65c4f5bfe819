#include "trainer_shim/agent_link.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/falcon/v1/shim.grpc.pb.h"

namespace falcon::trainer_shim {
namespace {

constexpr size_t kDrainChunk = 1024;

int64_t ToMillis(absl::Duration d) { return std::max<int64_t>(1, absl::ToInt64Milliseconds(d)); }

gpr_timespec ToGpr(absl::Time t) {
  gpr_timespec ts;
  ts.clock_type = GPR_CLOCK_REALTIME;
  const absl::Duration since = t - absl::UnixEpoch();
  ts.tv_sec = absl::ToInt64Seconds(since);
  ts.tv_nsec = static_cast<int32_t>(absl::ToInt64Nanoseconds(since - absl::Seconds(ts.tv_sec)));
  return ts;
}

}  // namespace

struct AgentLink::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<falcon::v1::Shim::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<falcon::v1::ShimMessage, falcon::v1::AgentToShim>>
      stream;
  std::thread reader;
};

AgentLink::AgentLink(const ShimOptions& options, SpscRing<OpRecord>* ring,
                     const std::atomic<uint64_t>* ring_dropped, Listener* listener,
                     std::function<falcon::v1::ShimHello()> make_hello)
    : options_(options),
      target_(options.AgentTarget()),
      ring_(ring),
      ring_dropped_(ring_dropped),
      listener_(listener),
      make_hello_(std::move(make_hello)),
      drain_buffer_(kDrainChunk),
      outbox_(Outbox::Options{options.max_buffered_records, options.max_batch_records}) {}

AgentLink::~AgentLink() { Stop(); }

void AgentLink::Log(std::string_view message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    std::cerr << "[falcon_shim rank " << options_.rank << "] " << message << "\n";
  }
}

void AgentLink::Start() {
  if (started_) return;
  started_ = true;
  owner_pid_ = getpid();
  thread_ = std::thread([this] { Run(); });
}

void AgentLink::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  if (getpid() != owner_pid_) {
    // A forked child: the link thread lives only in the parent. Nothing to flush or join.
    thread_.detach();
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    wake_ = true;
    stop_deadline_ = absl::Now() + options_.shutdown_flush_timeout;
    // Give the link thread the flush window, then cancel a stream stuck in a blocking call.
    auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return finished_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done),
                              options_.shutdown_flush_timeout + absl::Milliseconds(200))) {
      if (active_ctx_ != nullptr) active_ctx_->TryCancel();
    }
  }
  thread_.join();
}

void AgentLink::RegisterCommunicator(const falcon::v1::Communicator& communicator) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < comms_.size(); ++i) {
    if (comms_[i].comm_id() == communicator.comm_id()) {
      comms_[i] = communicator;
      // Send the update again: move it behind the sent prefix.
      if (i < comms_sent_) {
        std::swap(comms_[i], comms_[comms_sent_ - 1]);
        --comms_sent_;
      }
      wake_ = true;
      return;
    }
  }
  comms_.push_back(communicator);
  wake_ = true;
}

void AgentLink::SendControl(falcon::v1::ShimMessage message) {
  absl::MutexLock lock(&mu_);
  control_.push_back(std::move(message));
  wake_ = true;
}

void AgentLink::SendHint(const falcon::v1::IterationHint& hint) {
  absl::MutexLock lock(&mu_);
  *hints_.emplace_back().mutable_iteration() = hint;
  BoundHintsLocked();
}

void AgentLink::BoundHintsLocked() {
  while (hints_.size() + sent_hints_.size() > options_.max_pending_hints) {
    if (!sent_hints_.empty()) {
      sent_hints_.pop_front();
    } else {
      hints_.pop_front();
    }
    ++stats_.hints_dropped;
  }
}

void AgentLink::OnWelcomeLocked(const falcon::v1::ShimWelcome& welcome) {
  delivery_acks_ = welcome.delivery_acks();
  const uint64_t before = outbox_.held_records();
  if (!delivery_acks_) {
    // An older agent: what it holds counts as delivered (its OpBatchAcks release batches).
    outbox_.Release(welcome.acked_sequence());
  }
  outbox_.OnReconnect(welcome.acked_sequence());
  stats_.records_acked += before - outbox_.held_records();
  // Hints sent earlier and not delivered go again, before the newer ones, unless this agent
  // already holds them (the same agent, reattached).
  const int64_t held = welcome.has_hinted_iteration() ? welcome.hinted_iteration() : -1;
  for (auto it = sent_hints_.rbegin(); it != sent_hints_.rend(); ++it) {
    if (it->iteration() <= held) break;
    *hints_.emplace_front().mutable_iteration() = *it;
  }
  while (!sent_hints_.empty() && sent_hints_.back().iteration() > held) sent_hints_.pop_back();
  if (!delivery_acks_) sent_hints_.clear();  // An older agent never says what is delivered.
}

void AgentLink::OnDeliveredLocked(const falcon::v1::DeliveryAck& delivered) {
  stats_.records_acked += outbox_.Release(delivered.sequence());
  delivered_iteration_ = std::max(delivered_iteration_, delivered.iteration());
  while (!sent_hints_.empty() && sent_hints_.front().iteration() <= delivered_iteration_) {
    sent_hints_.pop_front();
  }
}

AgentLink::Stats AgentLink::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.held_records = outbox_.held_records();
  s.records_evicted = outbox_.evicted_records();
  s.records_evicted_accepted = outbox_.evicted_accepted_records();
  s.delivered_iteration = delivered_iteration_;
  s.last_sequence = outbox_.last_sequence();
  return s;
}

void AgentLink::DrainRing() {
  const uint64_t dropped = ring_dropped_->load(std::memory_order_relaxed);
  const uint64_t new_drops = dropped - ring_dropped_seen_;
  ring_dropped_seen_ = dropped;
  bool first = true;
  for (;;) {
    const size_t n = ring_->PopBulk(drain_buffer_.data(), drain_buffer_.size());
    if (n == 0 && !(first && new_drops > 0)) break;
    absl::MutexLock lock(&mu_);
    if (first && new_drops > 0) outbox_.AddDropped(new_drops);
    first = false;
    outbox_.Add(drain_buffer_.data(), n);
    if (n < drain_buffer_.size()) break;
  }
}

bool AgentLink::FlushedLocked() const {
  // Accepted is enough: the agent delivers what it holds without this process.
  return outbox_.all_accepted() && control_.empty() && hints_.empty() &&
         comms_sent_ == comms_.size() && ring_->SizeApprox() == 0;
}

void AgentLink::Run() {
  common::Backoff backoff(options_.reconnect_backoff);
  for (;;) {
    DrainRing();
    {
      absl::MutexLock lock(&mu_);
      outbox_.SealOpen();
      // Stopping: keep trying to deliver until everything is acked or the flush window closes.
      if (stop_ && (target_.empty() || FlushedLocked() || absl::Now() >= stop_deadline_)) break;
    }
    if (!target_.empty()) {
      auto conn = std::make_unique<Connection>();
      const bool ok = Connect(conn.get());
      if (ok) {
        backoff.Reset();
        Session(conn.get());
      }
      Teardown(conn.get());
      if (ok) {
        absl::MutexLock lock(&mu_);
        ++stats_.disconnects;
        if (!stop_) Log("lost the agent; reconnecting");
      }
    }
    // Wait out the backoff (or, without an agent, a flush interval), draining the ring meanwhile.
    const absl::Time until =
        absl::Now() + (target_.empty() ? options_.flush_interval : backoff.Next());
    for (;;) {
      DrainRing();
      absl::MutexLock lock(&mu_);
      outbox_.SealOpen();
      const absl::Time now = absl::Now();
      const absl::Time limit = stop_ ? std::min(until, stop_deadline_) : until;
      if (now >= limit || (stop_ && target_.empty())) break;
      const bool was_stopping = stop_;
      auto stop_changed = [this, was_stopping]()
                              ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ != was_stopping; };
      mu_.AwaitWithTimeout(absl::Condition(&stop_changed),
                           std::min(limit - now, options_.flush_interval));
    }
  }
  absl::MutexLock lock(&mu_);
  finished_ = true;
}

bool AgentLink::Connect(Connection* c) {
  grpc::ChannelArguments args;
  // A private subchannel, so a fresh attempt never inherits another channel's gRPC backoff.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, ToMillis(options_.reconnect_backoff.initial));
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, ToMillis(options_.reconnect_backoff.initial));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, ToMillis(options_.reconnect_backoff.max));
  c->channel = grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args);
  const absl::Time deadline = absl::Now() + options_.connect_timeout;
  grpc_connectivity_state state = c->channel->GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) break;
    if (!c->channel->WaitForStateChange(state, ToGpr(deadline))) break;
    state = c->channel->GetState(/*try_to_connect=*/true);
  }
  if (state != GRPC_CHANNEL_READY) {
    absl::MutexLock lock(&mu_);
    ++stats_.failed_attempts;
    return false;
  }
  c->stub = falcon::v1::Shim::NewStub(c->channel);
  c->ctx.set_wait_for_ready(false);
  c->stream = c->stub->Attach(&c->ctx);
  falcon::v1::ShimMessage hello;
  *hello.mutable_hello() = make_hello_();
  {
    absl::MutexLock lock(&mu_);
    hello.mutable_hello()->set_first_unacked_sequence(outbox_.first_unacked_sequence());
    if (delivered_iteration_ >= 0) {
      hello.mutable_hello()->set_delivered_iteration(delivered_iteration_);
    }
    broken_ = false;
    welcomed_ = false;
    active_ctx_ = &c->ctx;
  }
  c->reader = std::thread([this, c] { ReadLoop(c); });
  if (!c->stream->Write(hello)) {
    absl::MutexLock lock(&mu_);
    ++stats_.failed_attempts;
    return false;
  }
  absl::MutexLock lock(&mu_);
  // Not cut short by Stop: a stopping shim still wants to flush (Stop cancels a stuck stream).
  auto settled = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return welcomed_ || broken_; };
  mu_.AwaitWithTimeout(absl::Condition(&settled), options_.welcome_timeout);
  if (!welcomed_ || broken_) {
    ++stats_.failed_attempts;
    return false;
  }
  comms_sent_ = 0;  // The agent may be new: register every communicator again.
  ++stats_.connects;
  stats_.connected = true;
  Log(absl::StrCat("connected to the agent at ", target_));
  return true;
}

void AgentLink::ReadLoop(Connection* c) {
  falcon::v1::AgentToShim msg;
  while (c->stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case falcon::v1::AgentToShim::kWelcome: {
        {
          absl::MutexLock lock(&mu_);
          // Everything the agent does not hold is resent in sequence order.
          OnWelcomeLocked(msg.welcome());
          welcomed_ = true;
        }
        listener_->OnWelcome(msg.welcome());
        break;
      }
      case falcon::v1::AgentToShim::kOpBatchAck: {
        absl::MutexLock lock(&mu_);
        outbox_.Accept(msg.op_batch_ack().sequence());
        if (!delivery_acks_) stats_.records_acked += outbox_.Release(msg.op_batch_ack().sequence());
        break;
      }
      case falcon::v1::AgentToShim::kDelivered: {
        absl::MutexLock lock(&mu_);
        OnDeliveredLocked(msg.delivered());
        break;
      }
      case falcon::v1::AgentToShim::kDirective:
        listener_->OnDirective(msg.directive());
        break;
      case falcon::v1::AgentToShim::kValidationTask:
        listener_->OnValidationTask(msg.validation_task());
        break;
      case falcon::v1::AgentToShim::kProfiling:
        listener_->OnProfiling(msg.profiling());
        break;
      case falcon::v1::AgentToShim::kError: {
        {
          absl::MutexLock lock(&mu_);
          ++stats_.agent_errors;
        }
        listener_->OnAgentError(msg.error());
        break;
      }
      case falcon::v1::AgentToShim::MSG_NOT_SET:
        break;
    }
  }
  absl::MutexLock lock(&mu_);
  broken_ = true;
  wake_ = true;
}

bool AgentLink::WritePending(Connection* c) {
  for (;;) {
    falcon::v1::ShimMessage m;
    enum { kNone, kComm, kControl, kHint, kBatch } what = kNone;
    uint64_t sequence = 0;
    {
      absl::MutexLock lock(&mu_);
      if (comms_sent_ < comms_.size()) {
        *m.mutable_communicator() = comms_[comms_sent_];
        what = kComm;
      } else if (!control_.empty()) {
        m = std::move(control_.front());
        control_.pop_front();
        what = kControl;
      } else if (!hints_.empty()) {
        m = std::move(hints_.front());
        hints_.pop_front();
        what = kHint;
      } else if (const Outbox::Batch* b = outbox_.NextToSend(); b != nullptr) {
        falcon::v1::OpBatch* pb = m.mutable_op_batch();
        pb->set_sequence(b->sequence);
        pb->set_dropped_records(b->dropped_records);
        pb->mutable_records()->Reserve(static_cast<int>(b->records.size()));
        for (const OpRecord& r : b->records) ToProto(r, pb->add_records());
        sequence = b->sequence;
        what = kBatch;
      }
    }
    if (what == kNone) return true;
    if (!c->stream->Write(m)) {
      absl::MutexLock lock(&mu_);
      if (what == kControl) {
        control_.push_front(std::move(m));  // Acks and results are never dropped.
      } else if (what == kHint) {
        hints_.push_front(std::move(m));  // Sent again on the next connection.
      }
      return false;
    }
    absl::MutexLock lock(&mu_);
    if (what == kComm) {
      ++comms_sent_;
    } else if (what == kHint) {
      // Kept until delivered, for a resend to the next agent should this one die first.
      if (delivery_acks_ && m.iteration().iteration() > delivered_iteration_) {
        sent_hints_.push_back(std::move(*m.mutable_iteration()));
        BoundHintsLocked();
      }
    } else if (what == kBatch) {
      outbox_.MarkSent(sequence);
      ++stats_.batches_sent;
      if (sequence <= max_sequence_sent_) ++stats_.batches_resent;
      max_sequence_sent_ = std::max(max_sequence_sent_, sequence);
    }
  }
}

void AgentLink::Session(Connection* c) {
  for (;;) {
    DrainRing();
    {
      absl::MutexLock lock(&mu_);
      outbox_.SealOpen();
    }
    if (!WritePending(c)) return;
    absl::MutexLock lock(&mu_);
    if (broken_) return;
    if (stop_ && (FlushedLocked() || absl::Now() >= stop_deadline_)) return;
    auto woken = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return wake_ || broken_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), options_.flush_interval);
    wake_ = false;
  }
}

void AgentLink::Teardown(Connection* c) {
  if (c->stream != nullptr) {
    c->ctx.TryCancel();
    if (c->reader.joinable()) c->reader.join();
    (void)c->stream->Finish();  // Cancelled on purpose; the status carries nothing new.
  }
  absl::MutexLock lock(&mu_);
  active_ctx_ = nullptr;
  stats_.connected = false;
}

}  // namespace falcon::trainer_shim
