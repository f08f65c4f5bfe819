#include "controller/testing/sim_agent.h"

#include <glog/logging.h>

#include <algorithm>

#include "controller/testing/job_fixtures.h"

namespace falcon::controller::testing {

SimAgent::SimAgent(std::string agent_id, std::string node, std::vector<uint32_t> ranks)
    : agent_id_(std::move(agent_id)), node_(std::move(node)), ranks_(std::move(ranks)) {}

absl::Status SimAgent::Connect(Controller& c, const std::vector<falcon::v1::JobRegistration>& jobs,
                               uint64_t first_unacked_sequence) {
  // A stream that said hello is gone before the next one opens (an agent id is live on one
  // stream at a time).
  if (session_.hello_done && !session_.ended) Disconnect(c);
  channel_ = std::make_shared<FakeAgentChannel>();
  session_ = AgentSession();
  session_.channel = channel_;
  handled_ = 0;
  profiling_.clear();
  falcon::v1::AgentMessage m;
  falcon::v1::AgentHello* h = m.mutable_hello();
  h->set_agent_id(agent_id_);
  h->set_node(node_);
  h->set_version("sim");
  h->set_first_unacked_sequence(first_unacked_sequence);
  for (const auto& j : jobs) *h->add_jobs() = j;
  absl::Status s = c.OnAgentMessage(&session_, m);
  if (!s.ok()) return s;
  for (const auto& msg : channel_->sent) {
    if (msg.has_hello()) hello_ = msg.hello();
  }
  return s;
}

void SimAgent::Disconnect(Controller& c) {
  c.OnAgentDisconnected(&session_);
  if (channel_) channel_->closed = true;
}

absl::StatusOr<falcon::v1::BatchAck> SimAgent::Send(Controller& c,
                                                    falcon::v1::TelemetryBatch batch) {
  if (batch.sequence() == 0) batch.set_sequence(next_sequence_++);
  falcon::v1::AgentMessage m;
  *m.mutable_batch() = std::move(batch);
  const uint64_t seq = m.batch().sequence();
  const size_t before = channel_->sent.size();
  absl::Status s = c.OnAgentMessage(&session_, m);
  if (!s.ok()) return s;
  for (size_t i = before; i < channel_->sent.size(); ++i) {
    const auto& msg = channel_->sent[i];
    if (msg.has_batch_ack() && msg.batch_ack().sequence() == seq) return msg.batch_ack();
  }
  return absl::InternalError("no BatchAck");
}

int SimAgent::Respond(Controller& c, const Responder& responder) {
  int answered = 0;
  // Answers may make the controller send more to this agent; keep going until caught up.
  while (handled_ < channel_->sent.size()) {
    const falcon::v1::ControllerMessage msg = channel_->sent[handled_++];
    if (msg.has_profiling()) {
      if (msg.profiling().enabled()) {
        profiling_.insert(msg.profiling().job());
      } else {
        profiling_.erase(msg.profiling().job());
      }
    }
    if (msg.has_directive() && responder.ack_directives) {
      const falcon::v1::Directive& d = msg.directive();
      for (falcon::v1::AgentMessage ack : AppliedAcks(d, ranks_, d.effective_iteration())) {
        if (responder.reject) {
          const std::string why = responder.reject(d, ack.directive_ack().rank());
          if (!why.empty()) {
            falcon::v1::DirectiveAck* a = ack.mutable_directive_ack();
            a->set_status(falcon::v1::ACK_STATUS_REJECTED);
            a->set_reason(why);
            a->set_applied_iteration(-1);
          }
        }
        // The controller answers acks with OK (a refused ack changes only its record); an
        // error here is a controller regression, and fails the test that drives this agent.
        const absl::Status status = c.OnAgentMessage(&session_, ack);
        CHECK(status.ok()) << "sim agent: directive ack refused: " << status;
      }
      ++answered;
    }
    if (msg.has_validation_task() && responder.answer_tasks) {
      const falcon::v1::ValidationTask& t = msg.validation_task();
      for (const falcon::v1::AgentMessage& res :
           ValidationAnswers(t, ranks_, responder.gemm_ns, responder.link_ns)) {
        const absl::Status status = c.OnAgentMessage(&session_, res);
        CHECK(status.ok()) << "sim agent: validation result refused: " << status;
      }
      ++answered;
    }
  }
  return answered;
}

}  // namespace falcon::controller::testing
