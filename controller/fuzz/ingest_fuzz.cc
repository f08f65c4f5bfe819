#include "controller/fuzz/ingest_fuzz.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "controller/control_api.h"
#include "controller/controller.h"
#include "controller/core/agent_hub.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/testing/job_fixtures.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"

namespace falcon::controller::fuzz {
namespace {

testing::LayoutSpec Spec() {
  testing::LayoutSpec spec;
  spec.job = "fuzz";
  spec.dp = 4;
  spec.pp = 2;
  spec.ranks_per_node = 8;  // One agent with every rank.
  return spec;
}

class RecordingChannel : public core::AgentChannel {
 public:
  bool Send(const falcon::v1::ControllerMessage& m) override {
    sent.push_back(m);
    return true;
  }
  void Close(const absl::Status& status) override { closed = status; }
  std::vector<falcon::v1::ControllerMessage> sent;
  absl::Status closed;
};

falcon::v1::AgentMessage Hello() {
  falcon::v1::AgentMessage m;
  m.mutable_hello()->set_agent_id("fuzz-agent");
  m.mutable_hello()->set_node("node-0");
  *m.mutable_hello()->add_jobs() = testing::NodeRegistration(Spec(), 0);
  return m;
}

}  // namespace

std::string EncodeInput(const std::vector<falcon::v1::AgentMessage>& messages) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  for (const auto& m : messages) {
    google::protobuf::util::SerializeDelimitedToZeroCopyStream(m, &stream);
  }
  return out;
}

absl::Status FuzzIngestOnce(absl::string_view data) {
  common::FakeClock clock;
  store::InMemoryKvStore kv(store::ControllerStore::TableNames());
  ControllerOptions options;
  options.limits.max_ops_per_batch = 4096;  // Keep single inputs cheap.
  auto controller = Controller::Create(options, &kv, &clock, /*metrics=*/nullptr);
  if (!controller.ok())
    return absl::InternalError(absl::StrCat("setup: ", controller.status().ToString()));
  Controller& c = **controller;

  auto channel = std::make_shared<RecordingChannel>();
  auto session = std::make_unique<AgentSession>();
  session->channel = channel;
  if (absl::Status s = c.OnAgentMessage(session.get(), Hello()); !s.ok()) {
    return absl::InternalError(absl::StrCat("setup hello: ", s.ToString()));
  }

  google::protobuf::io::ArrayInputStream raw(data.data(), static_cast<int>(data.size()));
  int messages = 0;
  for (;;) {
    falcon::v1::AgentMessage m;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&m, &raw, &clean_eof)) break;
    if (++messages > 128) break;
    const size_t before = channel->sent.size();
    absl::Status s = c.OnAgentMessage(session.get(), m);
    if (!s.ok()) {
      if (s.code() != absl::StatusCode::kInvalidArgument &&
          s.code() != absl::StatusCode::kFailedPrecondition) {
        return absl::InternalError(
            absl::StrCat("message ", messages, ": unexpected status ", s.ToString()));
      }
      // The stream ends; the agent reconnects and says hello again.
      c.OnAgentDisconnected(session.get());
      channel = std::make_shared<RecordingChannel>();
      session = std::make_unique<AgentSession>();
      session->channel = channel;
      if (absl::Status h = c.OnAgentMessage(session.get(), Hello()); !h.ok()) {
        return absl::InternalError(absl::StrCat("reconnect hello: ", h.ToString()));
      }
      continue;
    }
    if (m.has_batch()) {
      int acks = 0;
      for (size_t i = before; i < channel->sent.size(); ++i) {
        const auto& reply = channel->sent[i];
        if (reply.has_batch_ack() && reply.batch_ack().sequence() == m.batch().sequence()) ++acks;
      }
      if (acks != 1) {
        return absl::InternalError(absl::StrCat("message ", messages, ": batch ",
                                                m.batch().sequence(), " got ", acks, " acks"));
      }
    }
  }
  c.Tick();
  clock.Advance(absl::Minutes(10));
  c.Tick();
  ControlApi api(&c);
  if (!api.ListJobs({}).ok() || !api.ListEvents({}).ok()) {
    return absl::InternalError("Control API failed after the input");
  }
  falcon::v1::GetHistoryRequest h;
  h.set_job("fuzz");
  if (!api.GetHistory(h).ok()) return absl::InternalError("GetHistory failed after the input");
  return absl::OkStatus();
}

std::vector<std::vector<falcon::v1::AgentMessage>> SeedMessages(
    const std::map<int, std::vector<double>>* iteration_times) {
  const testing::LayoutSpec spec = Spec();
  std::vector<std::vector<falcon::v1::AgentMessage>> seeds;
  auto time_ns = [&](uint32_t rank, int64_t it) -> int64_t {
    if (iteration_times != nullptr) {
      auto w = iteration_times->find(static_cast<int>(rank));
      if (w != iteration_times->end() && it < static_cast<int64_t>(w->second.size())) {
        return static_cast<int64_t>(w->second[it] * 1e6);
      }
    }
    return 100'000'000 + rank * 1'000'000 + (it % 7) * 500'000;
  };
  uint64_t seq = 1;
  for (int64_t start = 0; start < 300; start += 30) {
    std::vector<falcon::v1::AgentMessage> input;
    for (int64_t it = start; it < start + 30; ++it) {
      falcon::v1::AgentMessage m;
      falcon::v1::TelemetryBatch* b = m.mutable_batch();
      b->set_sequence(seq++);
      b->set_job(spec.job);
      for (uint32_t r = 0; r < 8; ++r)
        *b->add_iterations() = testing::MakeSummary(spec, r, it, time_ns(r, it));
      input.push_back(m);
    }
    // Ops of one rank, a validation result and a directive ack.
    falcon::v1::AgentMessage ops;
    falcon::v1::TelemetryBatch* b = ops.mutable_batch();
    b->set_sequence(seq++);
    b->set_job(spec.job);
    b->set_op_rank(1);
    for (uint64_t k = 1; k <= 8; ++k) {
      falcon::v1::OpRecord* op = b->add_ops();
      op->set_comm_id(k % 2 ? 1000 : 2001);
      op->set_op_kind(k % 2 ? falcon::v1::OP_KIND_ALL_REDUCE : falcon::v1::OP_KIND_SEND);
      op->set_peer(k % 2 ? -1 : 5);
      op->set_bytes(1 << 20);
      op->set_host_start_ns(static_cast<int64_t>(k) * 1000);
      op->set_host_end_ns(static_cast<int64_t>(k) * 1000 + 700);
      op->set_device_duration_ns(600);
      op->set_seq(k);
      op->set_iteration(start);
    }
    input.push_back(ops);
    // The same ops as a node's RankOps (ranks 1 and 0), as agents send them now.
    falcon::v1::AgentMessage rank_ops;
    falcon::v1::TelemetryBatch* rb = rank_ops.mutable_batch();
    rb->set_sequence(seq++);
    rb->set_job(spec.job);
    for (uint32_t r : {1u, 0u}) {
      falcon::v1::RankOps* ro = rb->add_rank_ops();
      ro->set_rank(r);
      for (const falcon::v1::OpRecord& op : b->ops()) {
        if (r == 0 && op.op_kind() == falcon::v1::OP_KIND_SEND) continue;  // Rank 1's peer sends.
        *ro->add_ops() = op;
      }
    }
    input.push_back(rank_ops);
    falcon::v1::AgentMessage result;
    result.mutable_validation_result()->set_task_id(1);
    result.mutable_validation_result()->set_job(spec.job);
    result.mutable_validation_result()->set_rank(3);
    result.mutable_validation_result()->set_gemm_duration_ns(1'000'000);
    input.push_back(result);
    falcon::v1::AgentMessage ack;
    ack.mutable_directive_ack()->set_directive_id(1);
    ack.mutable_directive_ack()->set_job(spec.job);
    ack.mutable_directive_ack()->set_rank(2);
    ack.mutable_directive_ack()->set_status(falcon::v1::ACK_STATUS_APPLIED);
    input.push_back(ack);
    seeds.push_back(std::move(input));
  }
  // A longer stretch with a slowdown (Alibaba worker 6 at 181, or a synthetic step on rank 6):
  // reaches onset, profiling and the pause directive.
  std::vector<falcon::v1::AgentMessage> slow;
  for (int64_t it = 150; it < 215; ++it) {
    falcon::v1::AgentMessage m;
    falcon::v1::TelemetryBatch* b = m.mutable_batch();
    b->set_sequence(seq++);
    b->set_job(spec.job);
    for (uint32_t r = 0; r < 8; ++r) {
      int64_t t = time_ns(r, it);
      if (iteration_times == nullptr && r == 6 && it >= 181 && it < 195) t = t * 3 / 2;
      *b->add_iterations() = testing::MakeSummary(spec, r, it, t);
    }
    slow.push_back(m);
  }
  seeds.push_back(std::move(slow));
  return seeds;
}

}  // namespace falcon::controller::fuzz
