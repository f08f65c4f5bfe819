// Shared helpers for the Shim tests (shim_test.cc, shim_directives_test.cc): a fast-reconnecting
// ShimOptions, op and directive builders, and a fixture with a FakeAgent on a fresh socket.
#ifndef FALCON_TRAINER_SHIM_SHIM_TEST_UTIL_H_
#define FALCON_TRAINER_SHIM_SHIM_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "trainer_shim/fake_agent.h"
#include "trainer_shim/shim.h"

namespace falcon::trainer_shim {

inline constexpr uint64_t kComm = 0x1234;

// Polls `predicate` every 5 ms for up to 20 s (for state the FakeAgent does not see).
inline bool WaitUntil(const std::function<bool()>& predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!predicate()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class LogSink {
 public:
  std::function<void(std::string_view)> Fn() {
    return [this](std::string_view m) {
      absl::MutexLock lock(&mu_);
      lines_.emplace_back(m);
    };
  }
  bool Contains(const std::string& needle) const {
    absl::MutexLock lock(&mu_);
    for (const auto& l : lines_) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> lines_;
};

inline ShimOptions FastOptions(const std::string& socket, LogSink* log) {
  ShimOptions o;
  o.job = "job1";
  o.rank = 1;
  o.world_size = 4;
  o.node = "node-a";
  o.epoch = 5;
  o.dp_size = 2;
  o.global_micro_batches = 8;
  o.agent_socket = socket;
  o.flush_interval = absl::Milliseconds(2);
  o.reconnect_backoff.initial = absl::Milliseconds(5);
  o.reconnect_backoff.max = absl::Milliseconds(40);
  o.connect_timeout = absl::Milliseconds(500);
  o.max_batch_records = 64;
  o.log = log->Fn();
  return o;
}

inline OpRecord Op(int64_t i) {
  OpRecord r;
  r.comm_id = kComm;
  r.op_kind = (i % 2 == 0) ? OpKind::OP_KIND_ALL_REDUCE : OpKind::OP_KIND_SEND;
  r.peer = (i % 2 == 0) ? -1 : 2;
  r.bytes = 1000 + static_cast<uint64_t>(i);
  r.host_start_ns = 10 * i;
  r.host_end_ns = 10 * i + 5;
  return r;
}

inline void RecordN(Shim& shim, int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; ++i) ASSERT_TRUE(shim.RecordOp(Op(i)).ok());
}

inline std::set<uint64_t> SeqSet(const std::vector<falcon::v1::OpRecord>& records) {
  std::set<uint64_t> out;
  for (const auto& r : records) out.insert(r.seq());
  return out;
}

inline bool HasAck(const FakeAgent& agent, uint64_t id, falcon::v1::AckStatus status) {
  for (const falcon::v1::DirectiveAck& a : agent.acks()) {
    if (a.directive_id() == id && a.status() == status) return true;
  }
  return false;
}

inline falcon::v1::DirectiveAck FindAck(const FakeAgent& agent, uint64_t id,
                                        falcon::v1::AckStatus status) {
  for (const falcon::v1::DirectiveAck& a : agent.acks()) {
    if (a.directive_id() == id && a.status() == status) return a;
  }
  return falcon::v1::DirectiveAck();
}

inline falcon::v1::Directive BaseDirective(uint64_t id, uint64_t epoch, int64_t iteration) {
  falcon::v1::Directive d;
  d.set_directive_id(id);
  d.set_job("job1");
  d.set_epoch(epoch);
  d.set_effective_iteration(iteration);
  d.set_plan_version(3);
  return d;
}

inline falcon::v1::Directive Plan(uint64_t id, uint64_t epoch, int64_t iteration) {
  falcon::v1::Directive d = BaseDirective(id, epoch, iteration);
  d.mutable_micro_batch_plan()->add_micro_batches(6);
  d.mutable_micro_batch_plan()->add_micro_batches(2);
  return d;
}

class ShimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = TestSocketPath("agent.sock");
    auto agent = FakeAgent::Start(socket_);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = *std::move(agent);
  }
  std::unique_ptr<Shim> MakeShim(const common::Clock* clock = nullptr) {
    auto shim = Shim::Create(FastOptions(socket_, &log_), clock);
    EXPECT_TRUE(shim.ok()) << shim.status();
    return shim.ok() ? *std::move(shim) : nullptr;
  }
  bool WaitConnected(Shim& shim) {
    return agent_->WaitFor([&] { return shim.stats().link.connected && agent_->attached(); });
  }

  std::string socket_;
  LogSink log_;
  std::unique_ptr<FakeAgent> agent_;
};

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_SHIM_TEST_UTIL_H_
