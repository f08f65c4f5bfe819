// The agent-stream protocol and the pipeline's branches, in process (no gRPC): hello, acks,
// dedup across restarts, field errors, job end, settings, forced validation, synchronous-training
// blame, communication verdicts and timeouts.
#include "controller/controller.h"

#include <prometheus/registry.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/testing/log_capture.h"
#include "common/testing/series_value.h"
#include "controller/control_api.h"
#include "controller/detection/localizer.h"
#include "controller/metrics/metric_table.h"
#include "controller/store/in_memory_kv_store.h"
#include "controller/store/keys.h"
#include "controller/testing/job_fixtures.h"
#include "controller/testing/sim_agent.h"
#include "gtest/gtest.h"

namespace falcon::controller {
namespace {

using testing::LayoutSpec;
using testing::SimAgent;

// 100 ms +-1% noise that differs per rank and iteration, deterministic.
int64_t Healthy(uint32_t rank, int64_t i) {
  return 100'000'000 + static_cast<int64_t>(((rank * 7919 + i * 104729) % 201) - 100) * 10'000;
}

// Two events, newest first: the first a COMPUTE verdict naming `rank` alone, the second CLOSED
// as part of it (Event.explained_by_event_id) with nothing mitigated.
void ExpectSecondEventIsPartOfTheFirst(const std::vector<falcon::v1::Event>& events,
                                       uint32_t rank) {
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& first = events[1];
  const falcon::v1::Event& second = events[0];
  EXPECT_EQ(first.cause(), falcon::v1::CAUSE_COMPUTE) << first.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(first.ranks().begin(), first.ranks().end()),
            std::vector<uint32_t>{rank});
  EXPECT_EQ(second.state(), falcon::v1::EVENT_STATE_CLOSED) << second.DebugString();
  EXPECT_EQ(second.explained_by_event_id(), first.event_id()) << second.DebugString();
  EXPECT_EQ(second.actions_size(), 0) << second.DebugString();
}

class ControllerTest : public ::testing::Test {
 protected:
  ControllerTest() : kv_(store::ControllerStore::TableNames()), metrics_(registry_, "t") {
    spec_.dp = 4;
    spec_.pp = 2;
    spec_.ranks_per_node = 2;  // 8 ranks on 4 nodes.
  }
  void SetUp() override { Start(); }

  void Start(ControllerOptions options = ControllerOptions()) {
    options_ = options;
    auto c = Controller::Create(options, &kv_, &clock_, &metrics_);
    ASSERT_TRUE(c.ok()) << c.status();
    c_ = std::move(*c);
  }
  void ConnectAll() {
    agents_.clear();
    for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
      agents_.push_back(std::make_unique<SimAgent>(testing::NodeName(n), testing::NodeName(n),
                                                   testing::RanksOfNode(spec_, n)));
      ASSERT_TRUE(agents_.back()->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
    }
  }
  falcon::v1::TelemetryBatch Batch(const SimAgent& a, int64_t iteration,
                                   const std::function<int64_t(uint32_t)>& time_ns) {
    falcon::v1::TelemetryBatch b;
    b.set_job(spec_.job);
    for (uint32_t r : a.ranks()) {
      *b.add_iterations() = testing::MakeSummary(spec_, r, iteration, time_ns(r));
    }
    return b;
  }
  // Runs iterations [from, to) with `time_ns(rank, iteration)`, agents answering as `responder`.
  void Run(int64_t from, int64_t to, const std::function<int64_t(uint32_t, int64_t)>& time_ns,
           const testing::Responder& responder = testing::Responder()) {
    for (int64_t i = from; i < to; ++i) {
      for (auto& a : agents_) {
        auto ack = a->Send(*c_, Batch(*a, i, [&](uint32_t r) { return time_ns(r, i); }));
        ASSERT_TRUE(ack.ok()) << ack.status();
        ASSERT_FALSE(ack->has_error()) << ack->error().field() << ": " << ack->error().message();
      }
      Settle(responder);
      clock_.Advance(absl::Milliseconds(100));
    }
  }
  // Lets the agents answer until the controller asks nothing more.
  // Rank 5's compute slows by 40% from iteration 60, in the iterations `slow_compute` picks; in
  // synchronous training every rank's iteration takes as long, the others waiting in their
  // communicators. Iterations 0-89; GEMM answers: rank 5 1.4x its peers from iteration 60.
  // `gemm_slow_ns`: rank 5's GEMM answer from iteration 60 (its peers answer 1 ms).
  // `rank2_gemm_ns`: healthy rank 2's GEMM answer from iteration 60 (noise of a shared CPU).
  void RunSynchronousSlowdown(const std::function<bool(int64_t)>& slow_compute,
                              int64_t gemm_slow_ns = 1'400'000, int64_t rank2_gemm_ns = 1'000'000) {
    auto time_ns = [](uint32_t r, int64_t i) {
      return i >= 60 ? Healthy(0, i) * 14 / 10 : Healthy(r, i);
    };
    for (int64_t i = 0; i < 90; ++i) {
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          // The healthy split of compute and communication, plus what the slow rank adds.
          falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, Healthy(r, i));
          s.set_iteration_time_ns(time_ns(r, i));
          if (i >= 60) {
            // The slow rank computes longer; the others wait for it in their DP communicator.
            const int64_t extra = Healthy(0, i) * 4 / 10;
            if (r == 5) {
              if (slow_compute(i)) s.set_compute_ns(s.compute_ns() + extra);
            } else {
              for (auto& cs : *s.mutable_comms()) {
                if (cs.comm_id() == 1001) {
                  cs.set_wait_ns(cs.wait_ns() + extra);
                  cs.set_busy_ns(cs.busy_ns() + extra);
                }
              }
              if (r / spec_.dp != 1)
                s.set_compute_ns(s.compute_ns() + extra);  // Other stage idles.
            }
          }
          *b.add_iterations() = s;
        }
        ASSERT_FALSE(a->Send(*c_, b)->has_error());
      }
      testing::Responder responder;
      responder.gemm_ns = [i, gemm_slow_ns, rank2_gemm_ns](uint32_t r) -> int64_t {
        if (i < 60) return 1'000'000;
        return r == 5 ? gemm_slow_ns : r == 2 ? rank2_gemm_ns : 1'000'000;
      };
      Settle(responder);
      clock_.Advance(absl::Milliseconds(140));
    }
  }

  void Settle(const testing::Responder& responder) {
    for (int answered = 1; answered > 0;) {
      answered = 0;
      for (auto& a : agents_) answered += a->Respond(*c_, responder);
    }
  }
  // falcon_controller_errors_total{where}.
  double Errors(const std::string& where) {
    return common::testing::SeriesValue(registry_.Collect(), metrics::kErrors.name,
                                        {{"where", where}})
        .value_or(0);
  }
  // Acks of `seq` the agent received on its current stream.
  static int AcksOf(SimAgent& a, uint64_t seq) {
    int n = 0;
    for (const auto& m : a.channel().Of(falcon::v1::ControllerMessage::kBatchAck)) {
      n += m.batch_ack().sequence() == seq ? 1 : 0;
    }
    return n;
  }
  std::vector<falcon::v1::Event> Events() {
    ControlApi api(c_.get());
    auto r = api.ListEvents({});
    std::vector<falcon::v1::Event> out(r->events().begin(), r->events().end());
    return out;
  }

  // Iterations [from, to) of a job whose stage-1 DP ring (ranks 4 -> 5 -> 6 -> 7 -> 4, comm 1001)
  // takes `extra(i)` longer to move its data, every member waiting for the slowest link; the ranks
  // of the ring send NCCL profiler peer transfers (PEER_SEND / PEER_RECV with the raw ops) in which
  // the links `slow(i)` (by sender) move data 4x slower.
  void RunRingWithPeerTiming(std::map<uint32_t, uint64_t>* seq, int64_t from, int64_t to,
                             const std::function<int64_t(int64_t)>& extra_ns,
                             const std::function<std::set<uint32_t>(int64_t)>& slow_senders) {
    for (int64_t i = from; i < to; ++i) {
      const int64_t extra = extra_ns(i);
      const std::set<uint32_t> slow = slow_senders(i);
      for (auto& a : agents_) {
        falcon::v1::TelemetryBatch b;
        b.set_job(spec_.job);
        for (uint32_t r : a->ranks()) {
          falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, Healthy(r, i) + extra);
          s.set_compute_ns(s.compute_ns() - extra);
          for (auto& cs : *s.mutable_comms()) {
            if (cs.comm_id() != 1001) continue;
            cs.set_transfer_ns(cs.transfer_ns() + extra);
            cs.set_busy_ns(cs.busy_ns() + extra);
          }
          *b.add_iterations() = s;
        }
        ASSERT_FALSE(a->Send(*c_, b)->has_error());
        for (uint32_t r : a->ranks()) {
          if (r < 4) continue;
          falcon::v1::TelemetryBatch ops;
          ops.set_job(spec_.job);
          ops.set_op_rank(r);
          const uint32_t next = 4 + (r - 4 + 1) % 4;
          const uint32_t prev = 4 + (r - 4 + 3) % 4;
          for (auto [kind, peer, slow_link] :
               {std::tuple{falcon::v1::OP_KIND_PEER_SEND, next, slow.count(r) > 0},
                std::tuple{falcon::v1::OP_KIND_PEER_RECV, prev, slow.count(prev) > 0}}) {
            falcon::v1::OpRecord* op = ops.add_ops();
            op->set_comm_id(1001);
            op->set_op_kind(kind);
            op->set_peer(static_cast<int32_t>(peer));
            op->set_bytes(32 << 20);
            op->set_iteration(i);
            op->set_seq(++(*seq)[r]);
            op->set_host_start_ns(i * 100'000'000);
            op->set_host_end_ns(i * 100'000'000 + 50'000'000);
            op->set_device_duration_ns(slow_link ? 40'000'000 : 10'000'000);
          }
          auto ack = a->Send(*c_, ops);
          ASSERT_TRUE(ack.ok());
          ASSERT_FALSE(ack->has_error()) << ack->error().field() << ": " << ack->error().message();
        }
      }
      Settle(testing::Responder());
      clock_.Advance(absl::Milliseconds(130));
    }
  }

  LayoutSpec spec_;
  common::FakeClock clock_;
  store::InMemoryKvStore kv_;
  prometheus::Registry registry_;
  metrics::ControllerMetrics metrics_;
  ControllerOptions options_;
  std::unique_ptr<Controller> c_;
  std::vector<std::unique_ptr<SimAgent>> agents_;
};

TEST_F(ControllerTest, HelloFirstThenAckEveryBatch) {
  SimAgent a("a0", "node-0", {0, 1});
  // Data before the hello ends the stream.
  falcon::v1::AgentMessage batch;
  batch.mutable_batch()->set_sequence(1);
  AgentSession raw;
  EXPECT_EQ(c_->OnAgentMessage(&raw, batch).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(a.Connect(*c_, {testing::NodeRegistration(spec_, 0)}).ok());
  EXPECT_EQ(a.hello().acked_sequence(), 0u);
  EXPECT_EQ(a.hello().controller_id(), options_.controller_id);
  EXPECT_EQ(a.channel().sent[0].msg_case(), falcon::v1::ControllerMessage::kHello);
  auto ack = a.Send(*c_, Batch(a, 0, [](uint32_t) { return 100'000'000; }));
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->sequence(), 1u);
  EXPECT_FALSE(ack->has_error());
  // A second hello on the same stream is a protocol error.
  falcon::v1::AgentMessage hello;
  hello.mutable_hello()->set_agent_id("a0");
  hello.mutable_hello()->set_node("node-0");
  // Not while a0 is live on its stream (peer checks)...
  EXPECT_EQ(c_->OnAgentMessage(&raw, hello).code(), absl::StatusCode::kPermissionDenied);
  a.Disconnect(*c_);
  raw = AgentSession();
  EXPECT_EQ(c_->OnAgentMessage(&raw, hello).code(), absl::StatusCode::kOk);  // Fresh session.
  AgentSession again = raw;
  EXPECT_EQ(c_->OnAgentMessage(&again, hello).code(), absl::StatusCode::kInvalidArgument);
  // A malformed hello names the field.
  AgentSession bad;
  falcon::v1::AgentMessage bad_hello;
  bad_hello.mutable_hello()->set_node("n");
  absl::Status s = c_->OnAgentMessage(&bad, bad_hello);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("hello.agent_id"), std::string::npos);
}

TEST_F(ControllerTest, DuplicatesAreAckedNotReappliedAcrossRestart) {
  ConnectAll();
  Run(0, 5, Healthy);
  SimAgent& a = *agents_[0];
  EXPECT_EQ(a.last_sequence(), 5u);
  // Resend batch 3 on the same stream: acked, not applied (the rank's data does not move).
  falcon::v1::TelemetryBatch dup = Batch(a, 2, [](uint32_t) { return 999'000'000; });
  dup.set_sequence(3);
  auto ack = a.Send(*c_, dup);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->sequence(), 3u);
  EXPECT_FALSE(ack->has_error());
  // Restart the controller on the same store: the hello says everything up to 5 is stored.
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  Start();
  ASSERT_TRUE(a.Connect(*c_, {testing::NodeRegistration(spec_, 0)}, /*first_unacked=*/4).ok());
  EXPECT_EQ(a.hello().acked_sequence(), 5u);
  // The agent resends 4 and 5 anyway: acknowledged as duplicates; 6 is new.
  for (uint64_t seq : {4, 5}) {
    falcon::v1::TelemetryBatch b = Batch(a, 3, [](uint32_t) { return 555'000'000; });
    b.set_sequence(seq);
    ASSERT_FALSE(a.Send(*c_, b)->has_error());
  }
  auto fresh = a.Send(*c_, Batch(a, 5, [](uint32_t r) { return Healthy(r, 5); }));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->sequence(), 6u);
  // Stored samples: iterations 0..5 for rank 0, each once, with the original values.
  std::map<int64_t, int64_t> rank0;
  ASSERT_TRUE(c_->store()
                  .ScanSamples(spec_.job,
                               [&](uint32_t r, int64_t it, int64_t ns) {
                                 if (r == 0) rank0[it] = ns;
                               })
                  .ok());
  EXPECT_EQ(rank0.size(), 6u);
  EXPECT_EQ(rank0[2], Healthy(0, 2));
  EXPECT_EQ(rank0[3], Healthy(0, 3));
}

// A store written by an earlier version holds each job as one record with every agent's part
// inside. It loads as it is, is stored again as the job's record plus one row per part (in one
// commit at start-up), and the job runs on across further restarts.
TEST_F(ControllerTest, AJobStoredWholeByAnEarlierVersionLoadsAndIsStoredInParts) {
  ConnectAll();
  Run(0, 3, Healthy);
  const falcon::v1::Job before = c_->registry().Find(spec_.job)->View();
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  // Rewrite the store as an earlier version left it.
  falcon::controller::v1::JobRecord whole;
  *whole.mutable_job() = before;
  store::KvWriteBatch b;
  for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
    falcon::controller::v1::AgentJob* a = whole.add_agents();
    a->set_agent_id(testing::NodeName(n));
    a->set_node(testing::NodeName(n));
    *a->mutable_registration() = testing::NodeRegistration(spec_, n);
    b.Delete(store::tables::kJobParts, store::keys::JobPartKey(spec_.job, testing::NodeName(n)));
  }
  b.Put(store::tables::kJobs, spec_.job, whole.SerializeAsString());
  ASSERT_TRUE(kv_.Write(b).ok());

  Start();
  const registry::JobEntry* job = c_->registry().Find(spec_.job);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->View().SerializeAsString(), before.SerializeAsString());
  auto records = c_->store().LoadJobs();
  ASSERT_TRUE(records.ok());
  ASSERT_EQ(records->size(), 1u);
  EXPECT_EQ(records->at(0).agents_size(), 0) << "stored again without its parts inside";
  EXPECT_EQ(records->at(0).job().ranks_size(), 0);
  auto parts = c_->store().LoadJobParts();
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->size(), testing::NodeCount(spec_));

  c_.reset();
  Start();
  EXPECT_EQ(c_->registry().Find(spec_.job)->View().SerializeAsString(), before.SerializeAsString());
  ConnectAll();
  Run(3, 6, Healthy);
  EXPECT_EQ(c_->registry().Find(spec_.job)->ranks().size(), 8u);
}

// The job's samples are one row per agent batch and iteration, trimmed to the job's window in
// one range: with a window of 32, never more than 40 iterations stored, never fewer than 32.
TEST_F(ControllerTest, SampleRowsKeepTheJobsWindow) {
  ControllerOptions options;
  options.detection.resume_window_iterations = 32;
  Start(options);
  ConnectAll();
  Run(0, 70, Healthy);
  std::map<int64_t, int> ranks_of;
  ASSERT_TRUE(c_->store()
                  .ScanSamples(spec_.job, [&](uint32_t, int64_t it, int64_t) { ranks_of[it]++; })
                  .ok());
  ASSERT_FALSE(ranks_of.empty());
  EXPECT_EQ(ranks_of.rbegin()->first, 69);
  EXPECT_GE(ranks_of.size(), 32u);
  EXPECT_LE(ranks_of.size(), 40u);
  for (const auto& [it, n] : ranks_of) EXPECT_EQ(n, 8) << "iteration " << it;
  int rows = 0;
  ASSERT_TRUE(kv_.Scan(store::tables::kSampleRows, "",
                       [&](absl::string_view, absl::string_view) {
                         ++rows;
                         return true;
                       })
                  .ok());
  EXPECT_EQ(rows, static_cast<int>(ranks_of.size() * testing::NodeCount(spec_)));
  // One rank far ahead (an absurd iteration number) trims nothing of the others: the window
  // follows the job's complete iterations.
  SimAgent& a = *agents_[0];
  falcon::v1::TelemetryBatch far;
  far.set_job(spec_.job);
  *far.add_iterations() = testing::MakeSummary(spec_, a.ranks()[0], 1'000'000, Healthy(0, 70));
  ASSERT_FALSE(a.Send(*c_, far)->has_error());
  Run(70, 72, Healthy);
  std::map<int64_t, int> after;
  ASSERT_TRUE(
      c_->store().ScanSamples(spec_.job, [&](uint32_t, int64_t it, int64_t) { after[it]++; }).ok());
  EXPECT_GE(after.size(), 32u);
  EXPECT_EQ(after.count(1'000'000), 1u);
  EXPECT_EQ(after[60], 8);
}

// A job relaunched on a new layout (a new epoch, another world size) starts detection over, and
// its stored samples with it: none of the old layout's is replayed after a restart.
TEST_F(ControllerTest, ARelaunchOnANewLayoutDeletesTheStoredSamples) {
  ConnectAll();
  Run(0, 30, Healthy);
  for (auto& agent : agents_) agent->Disconnect(*c_);
  LayoutSpec relaunched = spec_;
  relaunched.dp = 2;  // 4 ranks on 2 nodes.
  relaunched.epoch = 2;
  spec_ = relaunched;
  agents_.resize(testing::NodeCount(spec_));       // The first two nodes hold ranks 0-3 as before.
  for (uint32_t n = 0; n < agents_.size(); ++n) {  // Their sequences go on.
    ASSERT_EQ(agents_[n]->ranks(), testing::RanksOfNode(spec_, n));
    ASSERT_TRUE(agents_[n]->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
  }
  Run(5, 8, Healthy);  // From a checkpoint below the stored iterations.
  std::map<int64_t, std::set<uint32_t>> ranks_of;
  ASSERT_TRUE(
      c_->store()
          .ScanSamples(spec_.job, [&](uint32_t r, int64_t it, int64_t) { ranks_of[it].insert(r); })
          .ok());
  ASSERT_EQ(ranks_of.size(), 3u);
  EXPECT_EQ(ranks_of.begin()->first, 5);
  EXPECT_EQ(ranks_of[7], (std::set<uint32_t>{0, 1, 2, 3}));
}

// Samples stored by an earlier version (a row per rank and iteration, table samples) are
// replayed after the upgrade and stored again as sample rows in the start-up commit.
TEST_F(ControllerTest, SamplesStoredPerRankByAnEarlierVersionAreReplayedAndMoved) {
  ConnectAll();
  Run(0, 10, Healthy);
  std::set<std::tuple<uint32_t, int64_t, int64_t>> before;
  ASSERT_TRUE(c_->store()
                  .ScanSamples(spec_.job, [&](uint32_t r, int64_t it,
                                              int64_t ns) { before.emplace(r, it, ns); })
                  .ok());
  ASSERT_EQ(before.size(), 80u);
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  store::KvWriteBatch b;
  b.DeleteRange(store::tables::kSampleRows, store::keys::JobPrefix(spec_.job),
                store::keys::JobPrefix(spec_.job + "~"));
  for (const auto& [r, it, ns] : before) {
    std::string v;
    store::keys::AppendU64(&v, static_cast<uint64_t>(ns));
    b.Put(store::tables::kLegacySamples, store::keys::LegacySampleKey(spec_.job, r, it), v);
  }
  ASSERT_TRUE(kv_.Write(b).ok());

  Start();
  int legacy = 0, rows = 0;
  ASSERT_TRUE(kv_.Scan(store::tables::kLegacySamples, "",
                       [&](absl::string_view, absl::string_view) {
                         ++legacy;
                         return true;
                       })
                  .ok());
  ASSERT_TRUE(kv_.Scan(store::tables::kSampleRows, "",
                       [&](absl::string_view, absl::string_view) {
                         ++rows;
                         return true;
                       })
                  .ok());
  EXPECT_EQ(legacy, 0);
  EXPECT_EQ(rows, 10);  // One per iteration: the earlier rows carry no agent.
  std::set<std::tuple<uint32_t, int64_t, int64_t>> after;
  ASSERT_TRUE(c_->store()
                  .ScanSamples(spec_.job, [&](uint32_t r, int64_t it,
                                              int64_t ns) { after.emplace(r, it, ns); })
                  .ok());
  EXPECT_EQ(after, before);
  // Replayed: the ranks' series are at iteration 9, so a resent iteration 9 is stale.
  common::testing::LogCapture log;
  for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {  // Their sequences go on from 11.
    ASSERT_TRUE(agents_[n]->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
  }
  ASSERT_FALSE(agents_[0]
                   ->Send(*c_, Batch(*agents_[0], 9, [](uint32_t r) { return Healthy(r, 9); }))
                   ->has_error());
  EXPECT_EQ(log.Count("stale summaries job=job rank=0 iteration=9 last_iteration=9"), 1);
  Run(10, 12, Healthy);
  EXPECT_EQ(log.Count("stale summaries job=job"), 2);
}

// A damaged sample row: the controller refuses to start naming it; with --store_repair
// (drop_damaged_samples) it starts, drops and counts that row, and replays the others. A stored
// sample of a rank the job never registered is skipped, not made a series.
TEST_F(ControllerTest, DamagedSampleRowsRefuseTheStartOrAreDroppedWithTheRepair) {
  ConnectAll();
  Run(0, 10, Healthy);
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  const std::string damaged_key = store::keys::SampleRowKey(spec_.job, 4, 0);
  store::KvWriteBatch b;
  b.Put(store::tables::kSampleRows, damaged_key, std::string(23, '\1'));
  std::string ghost;
  store::keys::AppendU32(&ghost, 4'000'000'000u);
  store::keys::AppendU64(&ghost, 5);
  b.Put(store::tables::kSampleRows, store::keys::SampleRowKey(spec_.job, 5, 4'000'000'000u), ghost);
  ASSERT_TRUE(kv_.Write(b).ok());
  absl::StatusOr<std::unique_ptr<Controller>> refused =
      Controller::Create(ControllerOptions(), &kv_, &clock_, &metrics_);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(refused.status().message().find("23 bytes are not whole (rank, time) pairs"),
            std::string::npos)
      << refused.status();
  common::testing::LogCapture log;
  ControllerOptions repair;
  repair.drop_damaged_samples = true;
  Start(repair);
  EXPECT_EQ(log.Count("store row dropped table=sample_rows"), 1);
  EXPECT_EQ(log.Count("stored samples skipped job=job samples=1 rank=4000000000"), 1);
  EXPECT_FALSE(kv_.Get(store::tables::kSampleRows, damaged_key).ok());
  EXPECT_EQ(common::testing::SeriesValue(registry_.Collect(), metrics::kErrors.name,
                                         {{"where", metrics::where::kStoreDamagedRow}}),
            1.0);
  // The sound rows were replayed: a resent iteration 9 is stale.
  for (uint32_t n = 0; n < testing::NodeCount(spec_); ++n) {
    ASSERT_TRUE(agents_[n]->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
  }
  ASSERT_FALSE(agents_[0]
                   ->Send(*c_, Batch(*agents_[0], 9, [](uint32_t r) { return Healthy(r, 9); }))
                   ->has_error());
  EXPECT_EQ(log.Count("stale summaries job=job rank=0 iteration=9 last_iteration=9"), 1);
}

TEST_F(ControllerTest, ADirectiveStoredWithItsAcksByAnEarlierVersionLoadsAndIsStoredInRows) {
  ConnectAll();
  Run(0, 3, Healthy);
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  // A Pause of every rank, applied, as an earlier version stored it: the acks inside the record.
  falcon::v1::DirectiveRecord whole;
  whole.mutable_directive()->set_directive_id(1000);
  whole.mutable_directive()->set_job(spec_.job);
  whole.mutable_directive()->set_epoch(1);
  whole.mutable_directive()->mutable_pause()->set_max_duration_ns(1'000'000'000);
  whole.set_state(falcon::v1::DirectiveRecord::STATE_APPLIED);
  whole.set_issued_time_ns(absl::ToUnixNanos(clock_.Now()));
  whole.set_last_delivery_time_ns(absl::ToUnixNanos(clock_.Now()));
  whole.set_deliveries(1);
  for (uint32_t r : {5u, 0u, 7u, 1u, 2u, 3u, 4u, 6u}) {
    falcon::v1::DirectiveAck* a = whole.add_acks();
    a->set_directive_id(1000);
    a->set_job(spec_.job);
    a->set_rank(r);
    a->set_epoch(1);
    a->set_status(falcon::v1::ACK_STATUS_APPLIED);
  }
  store::KvWriteBatch b;
  b.Put(store::tables::kDirectives, store::keys::DirectiveKey(spec_.job, 1000),
        whole.SerializeAsString());
  ASSERT_TRUE(kv_.Write(b).ok());

  Start();
  const falcon::v1::DirectiveRecord* loaded = c_->directives().Find(1000);
  ASSERT_NE(loaded, nullptr);
  EXPECT_EQ(loaded->SerializeAsString(), whole.SerializeAsString());
  auto row = kv_.Get(store::tables::kDirectives, store::keys::DirectiveKey(spec_.job, 1000));
  ASSERT_TRUE(row.ok());
  falcon::v1::DirectiveRecord head;
  ASSERT_TRUE(head.ParseFromString(*row));
  EXPECT_EQ(head.acks_size(), 0) << "stored again without its acks inside";
  size_t ack_rows = 0;
  ASSERT_TRUE(kv_.Scan(store::tables::kDirectiveAcks, store::keys::DirectiveKey(spec_.job, 1000),
                       [&](absl::string_view, absl::string_view) {
                         ++ack_rows;
                         return true;
                       })
                  .ok());
  EXPECT_EQ(ack_rows, 8u);

  c_.reset();
  Start();
  ASSERT_NE(c_->directives().Find(1000), nullptr);
  EXPECT_EQ(c_->directives().Find(1000)->SerializeAsString(), whole.SerializeAsString());
}

TEST_F(ControllerTest, MalformedBatchGetsFieldErrorAndStreamStaysOpen) {
  ConnectAll();
  SimAgent& a = *agents_[1];
  falcon::v1::TelemetryBatch bad = Batch(a, 0, [](uint32_t) { return 100'000'000; });
  bad.mutable_iterations(1)->set_iteration_time_ns(-5);
  auto ack = a.Send(*c_, bad);
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(ack->sequence(), 1u);
  ASSERT_TRUE(ack->has_error());
  EXPECT_EQ(ack->error().field(), "batch.iterations[1].iteration_time_ns");
  // Unknown job, unknown rank, unknown comm: all named.
  falcon::v1::TelemetryBatch unknown_job = Batch(a, 0, [](uint32_t) { return 1; });
  unknown_job.set_job("nope");
  EXPECT_EQ(a.Send(*c_, unknown_job)->error().field(), "batch.job");
  falcon::v1::TelemetryBatch unknown_rank = Batch(a, 0, [](uint32_t) { return 1; });
  unknown_rank.mutable_iterations(0)->set_rank(8);
  EXPECT_EQ(a.Send(*c_, unknown_rank)->error().field(), "batch.iterations[0].rank");
  falcon::v1::TelemetryBatch unknown_comm = Batch(a, 0, [](uint32_t) { return 1; });
  unknown_comm.mutable_iterations(0)->mutable_comms(0)->set_comm_id(31337);
  EXPECT_EQ(a.Send(*c_, unknown_comm)->error().field(), "batch.iterations[0].comms[0].comm_id");
  // The stream goes on; the rejected sequences count as handled (they are not resent).
  auto good = a.Send(*c_, Batch(a, 0, [](uint32_t r) { return Healthy(r, 0); }));
  ASSERT_TRUE(good.ok());
  EXPECT_FALSE(good->has_error());
  EXPECT_EQ(good->sequence(), 5u);
  a.Disconnect(*c_);
  ASSERT_TRUE(a.Connect(*c_, {testing::NodeRegistration(spec_, 1)}).ok());
  EXPECT_EQ(a.hello().acked_sequence(), 5u);
}

TEST_F(ControllerTest, UnambiguousProfilingLocalizesWithoutAPause) {
  ConnectAll();
  RunSynchronousSlowdown([](int64_t) { return true; });
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_NEAR(e.onset_iteration(), 60, 3);
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(e.ranks().begin(), e.ranks().end()), std::vector<uint32_t>{5});
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_LOCALIZED);
  // Profiling blamed rank 5's compute in every profiled iteration and no communicator: that is
  // the verdict, and the job was never paused.
  EXPECT_TRUE(e.localized_from_profiling()) << e.DebugString();
  EXPECT_EQ(e.evidence(), falcon::v1::EVIDENCE_PROFILING);
  EXPECT_EQ(e.validation_pause_ns(), 0);
  EXPECT_GT(e.validation_ratio(), 1.3);
  const auto* record = c_->events().Find(e.event_id());
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->tasks_size(), 0);
  EXPECT_EQ(record->pause_directive_id(), 0u);
  for (const auto& d : c_->directives().List(spec_.job, 0)) {
    EXPECT_FALSE(d.directive().has_pause()) << d.DebugString();
  }
}

// The pipeline pair of replica 1 (ranks 1 and 5, comm 2001) slows one way, 1 -> 5: every rank's
// iteration grows, the pair's transfer time grows, no rank computes longer.
TEST_F(ControllerTest, ASlowPipelinePairIsJudgedWithAReferencePairOnOtherNodes) {
  ConnectAll();
  for (int64_t i = 0; i < 90; ++i) {
    const bool slow = i >= 60;
    const int64_t extra = slow ? 30'000'000 : 0;
    for (auto& a : agents_) {
      falcon::v1::TelemetryBatch b;
      b.set_job(spec_.job);
      for (uint32_t r : a->ranks()) {
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, Healthy(r, i) + extra);
        s.set_compute_ns(s.compute_ns() - extra);  // The iteration grows by the transfer alone.
        for (auto& cs : *s.mutable_comms()) {
          if (cs.comm_id() != 2001) continue;
          cs.set_transfer_ns(cs.transfer_ns() + extra);
          cs.set_busy_ns(cs.busy_ns() + extra);
        }
        *b.add_iterations() = s;
      }
      ASSERT_FALSE(a->Send(*c_, b)->has_error());
    }
    testing::Responder responder;
    // 1 -> 5 at 2.5x; a pair alone would read it 1.43x its mean with 5 -> 1.
    responder.link_ns = [slow](uint32_t src, uint32_t dst) {
      return slow && src == 1 && dst == 5 ? 5'000'000 : 2'000'000;
    };
    Settle(responder);
    clock_.Advance(absl::Milliseconds(130));
  }
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMMUNICATION) << e.DebugString();
  ASSERT_EQ(e.links_size(), 1) << e.DebugString();
  EXPECT_EQ(e.links(0).src_rank(), 1u);
  EXPECT_EQ(e.links(0).dst_rank(), 5u);
  EXPECT_NEAR(e.validation_ratio(), 2.5, 0.01);
  EXPECT_EQ(e.evidence(), falcon::v1::EVIDENCE_VALIDATION);
  const auto* record = c_->events().Find(e.event_id());
  ASSERT_NE(record, nullptr);
  // Profiling blamed the pair for communication: its passes and its reference's, no GEMM. The
  // reference is replica 2's pair (ranks 2, 6 on nodes 1, 3; replica 0's shares nodes 0, 2), and
  // its passes run in the pair's rounds. The pair sees nodes 0 and 2 only against each other, so
  // its ranks' DP communicators (1000 on nodes 0, 1; 1001 on nodes 2, 3) are validated too, in
  // rounds of their own that they share (docs/algorithms.md#node-nic-faults; covered passes are not
  // run); they find nothing slow.
  std::map<uint64_t, std::vector<uint32_t>> rounds_of_comm;
  for (const auto& t : record->tasks()) {
    ASSERT_TRUE(t.task().has_link_pass()) << t.DebugString();
    const uint64_t comm = t.task().link_pass().comm_id();
    if (!t.covered()) rounds_of_comm[comm].push_back(t.task().round());
    EXPECT_EQ(t.compare_with_comm(), comm == 2002 ? 2001u : 0u) << t.DebugString();
  }
  ASSERT_EQ(rounds_of_comm.size(), 4u) << record->DebugString();
  EXPECT_EQ(rounds_of_comm[2001], (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(rounds_of_comm[2002], (std::vector<uint32_t>{1, 2}));
  std::vector<uint32_t> dp0 = rounds_of_comm[1000], dp1 = rounds_of_comm[1001];
  std::sort(dp0.begin(), dp0.end());
  std::sort(dp1.begin(), dp1.end());
  ASSERT_FALSE(dp0.empty());
  EXPECT_GT(dp0.front(), 2u);
  EXPECT_EQ(dp0, dp1);
}

// Stage 1's DP ring (ranks 4 -> 5 -> 6 -> 7 -> 4, comm 1001) slows because link 6 -> 7 moves data
// 4x slower; every member of the ring waits for it. NCCL's profiler plugin times each peer's
// transfers (PEER_SEND / PEER_RECV records with the raw ops): the link is named from that, with
// no validation pause (docs/algorithms.md#peer-timing).
// Link 6 -> 7 of stage 1's DP ring moves data 4x slower from iteration 60: NCCL's profiler plugin
// times each peer's transfers, and the link is named from that with no validation pause
// (docs/algorithms.md#peer-timing).
TEST_F(ControllerTest, PeerTimingNamesASlowRingLinkWithoutAPause) {
  ConnectAll();
  std::map<uint32_t, uint64_t> seq;  // Per-rank op sequence.
  RunRingWithPeerTiming(
      &seq, 0, 90, [](int64_t i) { return i >= 60 ? 30'000'000 : 0; },
      [](int64_t i) { return i >= 60 ? std::set<uint32_t>{6} : std::set<uint32_t>{}; });
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMMUNICATION) << e.DebugString();
  ASSERT_EQ(e.links_size(), 1) << e.DebugString();
  EXPECT_EQ(e.links(0).src_rank(), 6u);
  EXPECT_EQ(e.links(0).dst_rank(), 7u);
  EXPECT_TRUE(e.localized_from_profiling());
  EXPECT_EQ(e.evidence(), falcon::v1::EVIDENCE_PEER_TIMING);
  EXPECT_NEAR(e.validation_ratio(), 4.0, 0.01);
  EXPECT_EQ(e.validation_pause_ns(), 0);
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_LOCALIZED);
  const auto* record = c_->events().Find(e.event_id());
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->tasks_size(), 0);
  for (const auto& d : c_->directives().List(spec_.job, 0)) {
    EXPECT_FALSE(d.directive().has_pause()) << d.DebugString();
  }
}

// A second link of the ring (4 -> 5) slows too while the first event is still active: the new
// event names 4 -> 5 alone from peer timing; 6 -> 7 is the first event's (concurrent events).
TEST_F(ControllerTest, PeerTimingLeavesOutALinkAnotherEventNamed) {
  ConnectAll();
  std::map<uint32_t, uint64_t> seq;
  RunRingWithPeerTiming(
      &seq, 0, 170, [](int64_t i) { return i >= 110  ? 60'000'000
                                           : i >= 60 ? 30'000'000
                                                     : 0; },
      [](int64_t i) {
        return i >= 110  ? std::set<uint32_t>{4, 6}
               : i >= 60 ? std::set<uint32_t>{6}
                         : std::set<uint32_t>{};
      });
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& second = events[0];  // Newest first.
  EXPECT_EQ(second.cause(), falcon::v1::CAUSE_COMMUNICATION) << second.DebugString();
  ASSERT_EQ(second.links_size(), 1) << second.DebugString();
  EXPECT_EQ(second.links(0).src_rank(), 4u);
  EXPECT_EQ(second.links(0).dst_rank(), 5u);
  EXPECT_EQ(second.evidence(), falcon::v1::EVIDENCE_PEER_TIMING);
  EXPECT_NE(second.transitions().rbegin()->reason().find("left out: link 6->7"), std::string::npos)
      << second.DebugString();
  EXPECT_EQ(events[1].links(0).src_rank(), 6u);
}

// Roles of unhinted communicators come from their traffic (p2p or collective ops). Peer transfers
// are parts of ops, not ops: they count as neither.
TEST_F(ControllerTest, PeerTransfersAreNotTrafficForRoleInference) {
  spec_.hint_kinds = false;
  spec_.hint_layout = false;
  ConnectAll();
  auto kind_of_2000 = [&] { return c_->registry().Find(spec_.job)->FindComm(2000)->comm.kind(); };
  ASSERT_EQ(kind_of_2000(), falcon::v1::COMM_KIND_UNKNOWN);
  uint64_t seq = 0;
  auto send_ops = [&](falcon::v1::OpKind kind) {
    falcon::v1::TelemetryBatch b;
    b.set_job(spec_.job);
    b.set_op_rank(0);
    for (int i = 0; i < 10; ++i) {
      falcon::v1::OpRecord* op = b.add_ops();
      op->set_comm_id(2000);  // The pipeline pair of replica 0: ranks 0 and 4.
      op->set_op_kind(kind);
      op->set_peer(4);
      op->set_bytes(1 << 20);
      op->set_iteration(0);
      op->set_seq(++seq);
      op->set_host_start_ns(1000);
      op->set_host_end_ns(2000);
    }
    auto ack = agents_[0]->Send(*c_, b);
    ASSERT_TRUE(ack.ok());
    ASSERT_FALSE(ack->has_error()) << ack->error().field() << ": " << ack->error().message();
  };
  send_ops(falcon::v1::OP_KIND_PEER_SEND);
  EXPECT_EQ(kind_of_2000(), falcon::v1::COMM_KIND_UNKNOWN);
  send_ops(falcon::v1::OP_KIND_SEND);
  EXPECT_EQ(kind_of_2000(), falcon::v1::COMM_KIND_PP);
}

TEST_F(ControllerTest, ComputeBlamedInSomeProfiledIterationsIsValidatedByGemmAlone) {
  ConnectAll();
  // Rank 5 computes longer in two iterations of three: profiling blames it, but not in every
  // iteration, so a GEMM test decides; no link is suspected, so no link pass is run.
  RunSynchronousSlowdown([](int64_t i) { return i % 3 != 0; });
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(e.ranks().begin(), e.ranks().end()), std::vector<uint32_t>{5});
  EXPECT_FALSE(e.localized_from_profiling());
  const auto* record = c_->events().Find(e.event_id());
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->tasks_size(), 1) << record->DebugString();
  EXPECT_TRUE(record->tasks(0).task().has_gemm());
  // Every rank slowed down, so the rank-level series alone could not name the culprit: the
  // suspects came from profiling (rank 5 blamed for its compute).
  EXPECT_NE(std::find(record->suspect_ranks().begin(), record->suspect_ranks().end(), 5u),
            record->suspect_ranks().end());
  EXPECT_LT(record->suspect_ranks_size(), 8);
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_LOCALIZED);
}

// Rank 5 slows x1.4 from iteration 60 (event 1 names it), then x1.8 from iteration 120: a second
// slowdown on its series opens a second event, whose validation finds rank 5's GEMM 1.8x (event
// 1's culprit) and rank 2's 1.12x. Rank 2 is not named by elimination: too weak to explain the
// job's x1.29, the slowdown is event 1's and the second event closes as part of it.
TEST_F(ControllerTest, ASlowdownOnlyAnotherEventsCulpritExplainsIsThatEvents) {
  ConnectAll();
  auto tenths = [](int64_t i) -> int64_t { return i >= 120 ? 18 : i >= 60 ? 14 : 10; };
  for (int64_t i = 0; i < 170; ++i) {
    for (auto& a : agents_) {
      falcon::v1::TelemetryBatch b;
      b.set_job(spec_.job);
      for (uint32_t r : a->ranks()) {
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, Healthy(r, i));
        s.set_iteration_time_ns(i >= 60 ? Healthy(0, i) * tenths(i) / 10 : Healthy(r, i));
        const int64_t extra = Healthy(0, i) * (tenths(i) - 10) / 10;
        if (extra > 0) {
          if (r == 5) {
            s.set_compute_ns(s.compute_ns() + extra);
          } else {
            for (auto& cs : *s.mutable_comms()) {
              if (cs.comm_id() == 1001) {
                cs.set_wait_ns(cs.wait_ns() + extra);
                cs.set_busy_ns(cs.busy_ns() + extra);
              }
            }
          }
        }
        *b.add_iterations() = s;
      }
      ASSERT_FALSE(a->Send(*c_, b)->has_error());
    }
    testing::Responder responder;
    responder.gemm_ns = [i](uint32_t r) -> int64_t {
      if (r == 5 && i >= 60) return i >= 120 ? 1'800'000 : 1'400'000;
      if (r == 2 && i >= 120) return 1'120'000;
      return 1'000'000;
    };
    Settle(responder);
    clock_.Advance(absl::Milliseconds(140));
  }
  std::vector<falcon::v1::Event> events = Events();
  ExpectSecondEventIsPartOfTheFirst(events, 5);
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& second = events[0];
  EXPECT_NE(second.cause(), falcon::v1::CAUSE_COMPUTE) << second.DebugString();
  EXPECT_NE(second.transitions().rbegin()->reason().find("left out: rank 5"), std::string::npos)
      << second.DebugString();
}

// Rank 1 computes x1.4 from iteration 60 (event 1 names it from profiling). From 120 its
// pipeline pair's transfers (comm 2001) slow the job further, and the second event's validation
// reads link 1 -> 5 at 2.5x: a throttled rank sends late (seen with the PyTorch job under a CPU
// quota: link 3 -> 0 at 3.72x from compute culprit rank 3). The link is event 1's culprit's, so
// the second event closes as part of event 1 instead of naming a link nothing slowed.
TEST_F(ControllerTest, ALinkFromAnotherEventsComputeCulpritIsThatEvents) {
  ConnectAll();
  for (int64_t i = 0; i < 170; ++i) {
    const int64_t compute_extra = i >= 60 ? Healthy(0, i) * 4 / 10 : 0;
    const int64_t transfer_extra = i >= 120 ? 150'000'000 : 0;
    for (auto& a : agents_) {
      falcon::v1::TelemetryBatch b;
      b.set_job(spec_.job);
      for (uint32_t r : a->ranks()) {
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, Healthy(r, i));
        s.set_iteration_time_ns(Healthy(0, i) + compute_extra + transfer_extra);
        if (r == 1) {
          s.set_compute_ns(s.compute_ns() + compute_extra);
        } else if (compute_extra > 0) {
          for (auto& cs : *s.mutable_comms()) {
            if (cs.comm_id() != 1000) continue;
            cs.set_wait_ns(cs.wait_ns() + compute_extra);
            cs.set_busy_ns(cs.busy_ns() + compute_extra);
          }
        }
        for (auto& cs : *s.mutable_comms()) {
          if (cs.comm_id() != 2001 || transfer_extra == 0) continue;
          cs.set_transfer_ns(cs.transfer_ns() + transfer_extra);
          cs.set_busy_ns(cs.busy_ns() + transfer_extra);
        }
        *b.add_iterations() = s;
      }
      ASSERT_FALSE(a->Send(*c_, b)->has_error());
    }
    testing::Responder responder;
    responder.gemm_ns = [i](uint32_t r) -> int64_t {
      return r == 1 && i >= 60 ? 1'400'000 : 1'000'000;
    };
    responder.link_ns = [i](uint32_t src, uint32_t dst) -> int64_t {
      return i >= 120 && src == 1 && dst == 5 ? 5'000'000 : 2'000'000;
    };
    Settle(responder);
    clock_.Advance(absl::Milliseconds(140));
  }
  std::vector<falcon::v1::Event> events = Events();
  ExpectSecondEventIsPartOfTheFirst(events, 1);
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& second = events[0];
  EXPECT_EQ(second.links_size(), 0) << second.DebugString();
  EXPECT_NE(second.transitions().rbegin()->reason().find("link 1->5"), std::string::npos)
      << second.DebugString();
}

// Validation's GEMM finds rank 5 1.4x its peers and healthy rank 2 1.2x (a shared CPU's noise):
// rank 2 cannot explain the job's x1.4 on its own, so only rank 5 is named, and the reason says
// why rank 2 is not.
TEST_F(ControllerTest, ASecondCulpritTooWeakToExplainTheSlowdownIsNotNamed) {
  ConnectAll();
  RunSynchronousSlowdown([](int64_t i) { return i % 3 != 0; }, 1'400'000, 1'200'000);
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_COMPUTE) << e.DebugString();
  EXPECT_EQ(std::vector<uint32_t>(e.ranks().begin(), e.ranks().end()), std::vector<uint32_t>{5})
      << e.DebugString();
  bool said = false;
  for (const auto& t : e.transitions()) {
    said = said || t.reason().find("not named: rank 2 (1.20x)") != std::string::npos;
  }
  EXPECT_TRUE(said) << e.DebugString();
}

// The job slows x1.4, but the GEMM that validation runs finds rank 5 only 1.15x its peers: a part
// slowed x1.15 cannot slow the job x1.4, so no culprit is named (docs/algorithms.md#verdict).
TEST_F(ControllerTest, ACulpritTooWeakToExplainTheSlowdownIsNotNamed) {
  ConnectAll();
  RunSynchronousSlowdown([](int64_t i) { return i % 3 != 0; }, 1'150'000);
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_UNKNOWN) << e.DebugString();
  EXPECT_GT(e.slowdown_ratio(), 1.3);
  bool said = false;
  for (const auto& t : e.transitions()) {
    if (t.state() != falcon::v1::EVENT_STATE_LOCALIZED) continue;
    said = t.reason().find("GEMM on rank 5 takes 1.15x") != std::string::npos &&
           t.reason().find("too little to explain the job's x1.") != std::string::npos;
  }
  EXPECT_TRUE(said) << e.DebugString();
}

// Detection is armed once the detectors' warm-up (20 settled iterations) has ended: the job view
// says so (tests and game days start their faults then), and the controller logs it once.
TEST_F(ControllerTest, TheJobViewSaysWhenDetectionIsArmed) {
  common::testing::LogCapture log;
  ConnectAll();
  ControlApi api(c_.get());
  auto view = [&] {
    falcon::v1::GetJobRequest r;
    r.set_job(spec_.job);
    absl::StatusOr<falcon::v1::Job> job = api.GetJob(r);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : falcon::v1::Job();
  };
  Run(0, 10, Healthy);
  EXPECT_EQ(view().detection_armed_iteration(), -1);
  EXPECT_EQ(view().detection_armed_ranks(), 0u);
  EXPECT_EQ(log.Count("detection armed"), 0);
  Run(10, 30, Healthy);
  const falcon::v1::Job job = view();
  EXPECT_GE(job.detection_armed_iteration(), 19);
  EXPECT_LE(job.detection_armed_iteration(), 29);
  EXPECT_EQ(job.detection_armed_ranks(), static_cast<uint32_t>(spec_.dp * spec_.pp));
  EXPECT_EQ(log.Count("detection armed job=job series=job iteration="), 1);
  EXPECT_EQ(log.Count("detection armed on every rank job=job ranks="), 1);
}

// A second run under a job name in use starts over at iteration 0: its summaries are skipped
// as stale, and the operator sees one line per rank for the streak, not one per summary.
TEST_F(ControllerTest, StaleSummariesAreLoggedOncePerRankAndStreak) {
  common::testing::LogCapture log;
  ConnectAll();
  Run(0, 20, Healthy);
  EXPECT_EQ(log.Count("stale summaries job=job"), 0);
  Run(0, 5, Healthy);
  EXPECT_EQ(log.Count("stale summaries job=job rank=0 iteration=0 last_iteration=19"), 1);
  EXPECT_EQ(log.Count("stale summaries job=job"), spec_.dp * spec_.pp);
  Run(20, 22, Healthy);  // Fresh again: the streak ends.
  Run(0, 2, Healthy);
  EXPECT_EQ(log.Count("stale summaries job=job"), 2 * spec_.dp * spec_.pp);
}

// Rank 3 rejects the first pause as late (the controller's view of the job lags behind it): the
// ranks that took it are released, the pause goes out again further ahead, and validation runs.
// A rank that keeps rejecting ends it after kMaxLatePauses re-issues.
TEST_F(ControllerTest, APauseRejectedAsLateIsReissuedFurtherAhead) {
  common::testing::LogCapture log;
  ConnectAll();
  Run(0, 40, Healthy);
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  ASSERT_TRUE(api.ForceValidation(req).ok());
  std::vector<int64_t> pauses;  // Effective iterations of the pauses sent.
  testing::Responder late_once;
  late_once.reject = [&](const falcon::v1::Directive& d, uint32_t rank) -> std::string {
    if (!d.has_pause() || rank != 3) return "";
    if (pauses.empty() || pauses.back() != d.effective_iteration()) {
      pauses.push_back(d.effective_iteration());
    }
    return pauses.size() == 1 ? "late: effective_iteration 42 passed (rank reached iteration 43)"
                              : "";
  };
  Run(40, 46, Healthy, late_once);
  ASSERT_EQ(pauses.size(), 2u);
  EXPECT_GT(pauses[1], pauses[0]);
  EXPECT_EQ(log.Count("validation pause late, re-issued job=job event="), 1);
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state(), falcon::v1::EVENT_STATE_CLOSED) << events[0].DebugString();
  EXPECT_GT(c_->events().Find(events[0].event_id())->results_size(), 0);  // Validation ran.

  // Always late: given up after the re-issues, with the rank's reason.
  ASSERT_TRUE(api.ForceValidation(req).ok());
  testing::Responder always_late;
  always_late.reject = [](const falcon::v1::Directive& d, uint32_t rank) -> std::string {
    return d.has_pause() && rank == 3 ? "late: effective_iteration 1 passed" : "";
  };
  Run(46, 60, Healthy, always_late);
  events = Events();
  ASSERT_EQ(events.size(), 2u);
  const falcon::v1::Event& e = events[0].event_id() > events[1].event_id() ? events[0] : events[1];
  EXPECT_EQ(c_->events().Find(e.event_id())->late_pauses(), detection::Localizer::kMaxLatePauses);
  bool said = false;
  for (const auto& t : e.transitions()) {
    said = said || t.reason().find("pause rejected (rank 3: late:") != std::string::npos;
  }
  EXPECT_TRUE(said) << e.DebugString();
}

TEST_F(ControllerTest, ForcedValidationOfAHealthyJobNamesNoCulpritAndCloses) {
  ConnectAll();
  Run(0, 40, Healthy);  // Every GEMM and link measures the same: nothing is slower than its peers.
  ASSERT_TRUE(Events().empty());
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  auto forced = api.ForceValidation(req);
  ASSERT_TRUE(forced.ok()) << forced.status();
  // A second request while it runs is refused.
  EXPECT_EQ(api.ForceValidation(req).status().code(), absl::StatusCode::kFailedPrecondition);
  Run(40, 45, Healthy);
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.event_id(), forced->event_id());
  // The verdict (LOCALIZED, cause unknown), then the event ends: there is nothing to mitigate.
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_CLOSED) << e.DebugString();
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_UNKNOWN);
  EXPECT_EQ(e.ranks_size(), 0);
  EXPECT_EQ(e.links_size(), 0);
  ASSERT_GE(e.transitions_size(), 2);
  EXPECT_EQ(e.transitions(e.transitions_size() - 2).state(), falcon::v1::EVENT_STATE_LOCALIZED);
  EXPECT_EQ(c_->events().Active(spec_.job), nullptr);
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_TRACKING);
  // Validation ran GEMM on every rank and link passes on every comm (ring and tree).
  const auto* record = c_->events().Find(e.event_id());
  EXPECT_GT(record->tasks_size(), 4);
  for (const auto& t : record->tasks()) EXPECT_TRUE(t.finished());
  // In rounds, numbered in task order: the tasks of a round run on disjoint nodes, and the
  // pipeline pairs of replicas 0 (nodes 0, 2) and 2 (nodes 1, 3) share rounds.
  std::map<uint32_t, std::set<std::string>> nodes_of_round;
  uint32_t last_round = 0;
  int covered = 0;
  for (const auto& t : record->tasks()) {
    if (t.covered()) {  // Not run: its links were measured by an earlier pass (they come last).
      EXPECT_EQ(t.task().round(), 0u);
      EXPECT_EQ(t.sent_time_ns(), 0);
      last_round = UINT32_MAX;
      ++covered;
      continue;
    }
    EXPECT_NE(last_round, UINT32_MAX) << "a task to run after a covered one";
    const uint32_t round = t.task().round();
    EXPECT_GE(round, std::max(last_round, 1u)) << t.DebugString();
    last_round = round;
    std::set<std::string> nodes;
    for (uint32_t r : t.task().ranks())
      nodes.insert(*c_->registry().Find(spec_.job)->AgentOfRank(r));
    for (const std::string& n : nodes) {
      EXPECT_TRUE(nodes_of_round[round].insert(n).second)
          << "node " << n << " twice in round " << round << ": " << record->DebugString();
    }
  }
  EXPECT_LT(nodes_of_round.size(), static_cast<size_t>(record->tasks_size() - covered));
  // Numbered 1..R without gaps (covered tasks take no round).
  ASSERT_FALSE(nodes_of_round.empty());
  EXPECT_EQ(nodes_of_round.rbegin()->first, nodes_of_round.size());
  // The world's ring and tree repeat links of the DP and pipeline communicators: those passes
  // are covered.
  EXPECT_GT(covered, 0);
  // The job can be validated again right away.
  EXPECT_TRUE(api.ForceValidation(req).ok());
  EXPECT_EQ(api.ForceValidation([] {
                 falcon::v1::ForceValidationRequest r;
                 r.set_job("unknown");
                 return r;
               }())
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ControllerTest, CommunicatorsOverTheSameRanksAreTestedOnce) {
  // DP=1 x PP=2: the pipeline pair and the world are both ranks {0, 1} (the DP communicators have
  // one rank: no link).
  spec_.dp = 1;
  spec_.pp = 2;
  spec_.ranks_per_node = 1;
  ConnectAll();
  Run(0, 40, Healthy);
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  auto forced = api.ForceValidation(req);
  ASSERT_TRUE(forced.ok()) << forced.status();
  Run(40, 45, Healthy);
  const auto* record = c_->events().Find(forced->event_id());
  ASSERT_NE(record, nullptr);
  // GEMM, then 0 -> 1 and 1 -> 0 once (for one of the two communicators), each on both nodes.
  ASSERT_EQ(record->tasks_size(), 3) << record->DebugString();
  EXPECT_TRUE(record->tasks(0).task().has_gemm());
  std::set<uint64_t> comms;
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(record->tasks(i).task().has_link_pass());
    comms.insert(record->tasks(i).task().link_pass().comm_id());
    EXPECT_EQ(record->tasks(i).task().round(), static_cast<uint32_t>(i + 1));
  }
  EXPECT_EQ(comms.size(), 1u);
  for (const auto& t : record->tasks()) EXPECT_TRUE(t.finished());
}

TEST_F(ControllerTest, ForcedValidationBlamesNoLinkThatDoesNotSlowTheJob) {
  ConnectAll();
  testing::Responder responder;
  // Link 2->3 measures 1.4x its peers (as concurrent transfers on a shared CPU can), but the
  // job's iteration time stays healthy.
  responder.link_ns = [](uint32_t src, uint32_t dst) {
    return src == 2 && dst == 3 ? 2'800'000 : 2'000'000;
  };
  Run(0, 40, Healthy, responder);
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  ASSERT_TRUE(api.ForceValidation(req).ok());
  Run(40, 45, Healthy, responder);
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  const falcon::v1::Event& e = events[0];
  EXPECT_EQ(e.state(), falcon::v1::EVENT_STATE_CLOSED) << e.DebugString();
  EXPECT_EQ(e.cause(), falcon::v1::CAUSE_UNKNOWN);
  EXPECT_EQ(e.links_size(), 0);
  // What validation measured is kept for the operator.
  const std::string& verdict = e.transitions(e.transitions_size() - 2).reason();
  EXPECT_NE(verdict.find("link 2->3 takes 1.40x"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("without a detected slowdown"), std::string::npos) << verdict;
}

TEST_F(ControllerTest, SilentAgentsTimeOutIntoAnUnknownVerdict) {
  ConnectAll();
  testing::Responder silent;
  silent.ack_directives = false;
  silent.answer_tasks = false;
  Run(0, 30, Healthy, silent);
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  ASSERT_TRUE(api.ForceValidation(req).ok());
  // Pause not acknowledged: validation starts after pause_ack_timeout; each task times out.
  for (int k = 0; k < 80; ++k) {  // 41 tasks (links both ways), one at a time.
    clock_.Advance(options_.localization.task_timeout);
    c_->Tick();
  }
  std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state(), falcon::v1::EVENT_STATE_CLOSED);
  EXPECT_EQ(events[0].cause(), falcon::v1::CAUSE_UNKNOWN);
  // The directives were never applied: they time out.
  clock_.Advance(options_.directives.ack_timeout);
  c_->Tick();
  int directives = 0;
  for (const auto& d : c_->directives().List(spec_.job, 0)) {
    EXPECT_EQ(d.state(), falcon::v1::DirectiveRecord::STATE_TIMED_OUT);
    ++directives;
  }
  // Every timeout was logged as a warning and counted at its site.
  EXPECT_EQ(Errors(metrics::where::kValidationPauseTimeout), 1);
  int sent = 0;
  for (const auto& t : c_->events().Find(events[0].event_id())->tasks()) sent += !t.covered();
  EXPECT_EQ(Errors(metrics::where::kValidationTaskTimeout), sent);
  EXPECT_EQ(Errors(metrics::where::kDirectiveTimedOut), directives);
}

TEST_F(ControllerTest, RefusedMessagesAreCountedWhereTheyAreLogged) {
  ConnectAll();
  SimAgent& a = *agents_[0];
  falcon::v1::TelemetryBatch bad = Batch(a, 0, [](uint32_t) { return 100'000'000; });
  bad.mutable_iterations(0)->set_iteration_time_ns(-5);
  ASSERT_TRUE(a.Send(*c_, bad)->has_error());
  EXPECT_EQ(Errors(metrics::where::kBatchRejected), 1);
  falcon::v1::AgentMessage ack;
  ack.mutable_directive_ack()->set_job(spec_.job);
  ack.mutable_directive_ack()->set_directive_id(77);  // Never issued.
  ack.mutable_directive_ack()->set_rank(0);
  ack.mutable_directive_ack()->set_status(falcon::v1::ACK_STATUS_APPLIED);
  AgentSession session;
  session.hello_done = true;
  session.agent_id = a.agent_id();
  ASSERT_TRUE(c_->OnAgentMessage(&session, ack).ok());
  EXPECT_EQ(Errors(metrics::where::kDirectiveAckRefused), 1);
  falcon::v1::AgentMessage result;
  result.mutable_validation_result()->set_job("ghost");
  ASSERT_TRUE(c_->OnAgentMessage(&session, result).ok());
  EXPECT_EQ(Errors(metrics::where::kValidationResultRefused), 1);
}

TEST_F(ControllerTest, DetectionCanBeDisabledPerJob) {
  ConnectAll();
  ControlApi api(c_.get());
  falcon::v1::SetSettingsRequest set;
  set.mutable_settings()->set_job(spec_.job);
  set.mutable_settings()->set_detection_enabled(false);
  auto settings = api.SetSettings(set);
  ASSERT_TRUE(settings.ok());
  EXPECT_FALSE(settings->detection_enabled());
  EXPECT_DOUBLE_EQ(settings->hazard(), 1.0 / 250);
  Run(0, 80, [](uint32_t r, int64_t i) { return i >= 50 && r == 3 ? 200'000'000 : Healthy(r, i); });
  EXPECT_TRUE(Events().empty());
  // Out-of-range and unknown-job settings name the field.
  set.mutable_settings()->set_hazard(2);
  EXPECT_EQ(api.SetSettings(set).status().code(), absl::StatusCode::kInvalidArgument);
  set.mutable_settings()->clear_hazard();
  set.mutable_settings()->set_job("ghost");
  auto unknown = api.SetSettings(set);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("settings.job"), std::string::npos);
  // Survives a restart.
  c_.reset();
  Start();
  EXPECT_FALSE(c_->settings().Effective(spec_.job).detection_enabled);
}

// Load from outside the job: every rank's iteration, its compute included, 15% longer for 40
// iterations. Every series verifies the slowdown; it is one environment shift, logged and counted
// once, and no event opens (docs/algorithms.md#environment-shifts).
TEST_F(ControllerTest, OutsideLoadOnEveryRankIsAnEnvironmentShiftNotAnEvent) {
  common::testing::LogCapture log;
  ConnectAll();
  Run(0, 140, [](uint32_t r, int64_t i) {
    return i >= 60 && i < 100 ? Healthy(r, i) * 115 / 100 : Healthy(r, i);
  });
  EXPECT_TRUE(Events().empty());
  EXPECT_EQ(common::testing::SeriesValue(registry_.Collect(), metrics::kEnvironmentShifts.name,
                                         {{"job", spec_.job}}),
            1);
  EXPECT_EQ(log.Count("environment shift job=job series="), 1);
}

// Load from outside the job that changes its shape: from iteration 60 every rank's iteration and
// compute x1.3 (an environment shift); from 80 the compute is back to healthy while the iterations
// stay x1.3 (the load now holds back every communicator alike). The slowdown the shift left on the
// job series opens an event; validation measures every GEMM and link alike, so it is outside load:
// the event closes as a transient, not left LOCALIZED with an UNKNOWN cause
// (docs/algorithms.md#transients).
TEST_F(ControllerTest, ASlowdownLeftAfterAnEnvironmentShiftThatValidationFindsAlikeIsTransient) {
  common::testing::LogCapture log;
  ConnectAll();
  for (int64_t i = 0; i < 140; ++i) {
    for (auto& a : agents_) {
      falcon::v1::TelemetryBatch b;
      b.set_job(spec_.job);
      for (uint32_t r : a->ranks()) {
        const int64_t loaded = i >= 60 ? Healthy(r, i) * 13 / 10 : Healthy(r, i);
        falcon::v1::IterationSummary s = testing::MakeSummary(spec_, r, i, loaded);
        if (i >= 80) {
          s.set_compute_ns(testing::MakeSummary(spec_, r, i, Healthy(r, i)).compute_ns());
        }
        *b.add_iterations() = s;
      }
      ASSERT_FALSE(a->Send(*c_, b)->has_error());
    }
    Settle(testing::Responder());
    clock_.Advance(absl::Milliseconds(100));
  }
  ASSERT_GE(log.Count("environment shift job=job series="), 1) << absl::StrJoin(log.Lines(), "\n");
  ASSERT_EQ(log.Count("slowdown left after an environment shift job=job"), 1)
      << absl::StrJoin(log.Lines(), "\n");
  const std::vector<falcon::v1::Event> events = Events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state(), falcon::v1::EVENT_STATE_CLOSED) << events[0].DebugString();
  EXPECT_TRUE(events[0].transient()) << events[0].DebugString();
  EXPECT_NE(events[0].transitions(events[0].transitions_size() - 1).reason().find("outside load"),
            std::string::npos)
      << events[0].DebugString();
}

TEST_F(ControllerTest, SettingsAndConnectionsAreLoggedAsKeyValuePairs) {
  common::testing::LogCapture log;
  SimAgent idle("idle", "node-9", {});
  ASSERT_TRUE(idle.Connect(*c_, {}).ok());  // An agent without jobs yet.
  ConnectAll();
  falcon::v1::Settings s;
  s.set_job(spec_.job);
  s.set_dry_run(true);
  s.set_verification_min_ratio(0.2);
  ASSERT_TRUE(c_->SetSettings(s).ok());
  s.clear_job();
  s.clear_dry_run();
  ASSERT_TRUE(c_->SetSettings(s).ok());
  EXPECT_EQ(log.Count("settings changed job=job dry_run=true verification_min_ratio=0.2"), 1);
  EXPECT_EQ(log.Count("settings changed job=* verification_min_ratio=0.2"), 1);
  const std::vector<std::string> idle_line = log.Matching("agent connected agent=idle ");
  ASSERT_EQ(idle_line.size(), 1u);
  EXPECT_EQ(idle_line[0].find("jobs="), std::string::npos) << idle_line[0];
  // No certificate without TLS: the identity says so.
  EXPECT_NE(idle_line[0].find(" identity=plaintext"), std::string::npos) << idle_line[0];
  EXPECT_EQ(log.Count("agent connected agent=node-0 node=node-0 version=sim jobs=job "), 1);
  for (const std::string& l : log.Lines()) {
    EXPECT_EQ(l.find("={"), std::string::npos) << l;  // No proto text.
    EXPECT_EQ(l.find("= "), std::string::npos) << l;  // No empty value.
  }
}

TEST_F(ControllerTest, JobEndsWhenNoAgentStaysConnected) {
  ConnectAll();
  Run(
      0, 60, [](uint32_t r, int64_t i) { return i >= 40 && r == 3 ? 200'000'000 : Healthy(r, i); },
      [] {
        testing::Responder silent;
        silent.answer_tasks = false;
        return silent;
      }());
  ASSERT_EQ(Events().size(), 1u);
  EXPECT_EQ(Events()[0].state() == falcon::v1::EVENT_STATE_CONFIRMED ||
                Events()[0].state() == falcon::v1::EVENT_STATE_LOCALIZED,
            true);
  for (auto& a : agents_) a->Disconnect(*c_);
  clock_.Advance(options_.job_end_grace / 2);
  c_->Tick();
  EXPECT_NE(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
  clock_.Advance(options_.job_end_grace);
  c_->Tick();
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
  EXPECT_EQ(Events()[0].state(), falcon::v1::EVENT_STATE_CLOSED);
  // A returning agent revives it.
  ASSERT_TRUE(agents_[0]->Connect(*c_, {testing::NodeRegistration(spec_, 0)}).ok());
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_TRACKING);
}

// A store write that fails (a full disk) leaves the batch unacknowledged and the acknowledged
// sequence where it was; once the store works again the batch's writes are stored, and then, and
// only then, acknowledged; after a restart the store has the batch.
TEST_F(ControllerTest, FailedWriteNeverAdvancesTheAckedSequence) {
  ConnectAll();
  Run(0, 3, Healthy);  // Batches 1..3 of every agent: stored and acknowledged.
  SimAgent& a = *agents_[0];
  const auto reg = testing::NodeRegistration(spec_, 0);
  kv_.FailWritesForTest(absl::UnavailableError("No space left on device"));
  falcon::v1::TelemetryBatch fourth = Batch(a, 3, [](uint32_t r) { return Healthy(r, 3); });
  fourth.set_sequence(4);
  EXPECT_EQ(a.Send(*c_, fourth).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(AcksOf(a, 4), 0);
  EXPECT_EQ(Errors("batch_commit"), 1);
  // The stream ended; while the disk is full the agent's reconnect is refused, and nothing at all
  // is acknowledged to it (its ControllerHello would be).
  a.Disconnect(*c_);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(a.Connect(*c_, {reg}, /*first_unacked_sequence=*/4).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(a.channel().sent.empty());
  EXPECT_GE(Errors("hello_store_unavailable"), 1);
  // Space is back: the next hello recovers the store, which then holds batch 4.
  kv_.FailWritesForTest(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(a.Connect(*c_, {reg}, 4).ok());
  EXPECT_EQ(a.hello().acked_sequence(), 4u);
  // Resent anyway: acknowledged as a duplicate, not applied again.
  fourth.set_sequence(4);
  auto dup = a.Send(*c_, fourth);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_FALSE(dup->has_error());
  a.set_next_sequence(5);
  ASSERT_TRUE(a.Send(*c_, Batch(a, 4, [](uint32_t r) { return Healthy(r, 4); })).ok());
  // Restart on the same store: everything acknowledged is there, iteration 3 exactly once.
  for (auto& agent : agents_) agent->Disconnect(*c_);
  c_.reset();
  Start();
  ASSERT_TRUE(a.Connect(*c_, {reg}, 6).ok());
  EXPECT_EQ(a.hello().acked_sequence(), 5u);
  std::map<int64_t, int> rank0;
  ASSERT_TRUE(c_->store()
                  .ScanSamples(spec_.job,
                               [&](uint32_t r, int64_t it, int64_t) {
                                 if (r == 0) rank0[it]++;
                               })
                  .ok());
  EXPECT_EQ(rank0, (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}}));
}

// A write that succeeds but cannot be made durable is not acknowledged either.
TEST_F(ControllerTest, FailedSyncHoldsTheAckUntilTheStoreRecovers) {
  ConnectAll();
  Run(0, 2, Healthy);
  SimAgent& a = *agents_[1];
  kv_.FailSyncsForTest(absl::UnavailableError("fsync: I/O error"));
  auto ack = a.Send(*c_, Batch(a, 2, [](uint32_t r) { return Healthy(r, 2); }));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(AcksOf(a, 3), 0);
  EXPECT_EQ(Errors("batch_commit"), 1);
  EXPECT_FALSE(c_->store().healthy());
  // Timeouts wait too: a tick while failed changes nothing.
  kv_.FailSyncsForTest(absl::OkStatus());
  clock_.Advance(absl::Seconds(2));
  ASSERT_TRUE(c_->SyncStore().ok());
  EXPECT_TRUE(c_->store().healthy());
  EXPECT_EQ(c_->Figures(),
            (store::StoreFigures{{"jobs", 1}, {"events", 0}, {"directives", 0}, {"batches", 9}}));
  EXPECT_EQ(kv_.last_figures(), c_->Figures());
}

// With group commit every message waits for one sync covering the whole burst.
TEST_F(ControllerTest, GroupCommitReleasesHellosAndAcksAfterOneSync) {
  ControllerOptions options;
  options.group_commit = true;
  c_.reset();
  Start(options);
  std::vector<std::unique_ptr<SimAgent>> agents;
  for (uint32_t n = 0; n < 2; ++n) {
    agents.push_back(std::make_unique<SimAgent>(testing::NodeName(n), testing::NodeName(n),
                                                testing::RanksOfNode(spec_, n)));
    ASSERT_TRUE(agents.back()->Connect(*c_, {testing::NodeRegistration(spec_, n)}).ok());
    EXPECT_TRUE(agents.back()->channel().sent.empty());
  }
  int64_t syncs = kv_.sync_count();
  ASSERT_TRUE(c_->SyncStore().ok());
  EXPECT_EQ(kv_.sync_count(), syncs + 1);
  for (auto& a : agents) {
    ASSERT_EQ(a->channel().sent.size(), 1u);
    EXPECT_TRUE(a->channel().sent[0].has_hello());
  }
  for (auto& a : agents) {
    EXPECT_EQ(a->Send(*c_, Batch(*a, 0, [](uint32_t r) { return Healthy(r, 0); })).status().code(),
              absl::StatusCode::kInternal);  // No BatchAck yet.
    EXPECT_EQ(AcksOf(*a, 1), 0);
  }
  ASSERT_TRUE(c_->SyncStore().ok());
  EXPECT_EQ(kv_.sync_count(), syncs + 2);
  for (auto& a : agents) EXPECT_EQ(AcksOf(*a, 1), 1);
  // Nothing new: a sync costs nothing.
  ASSERT_TRUE(c_->SyncStore().ok());
  EXPECT_EQ(kv_.sync_count(), syncs + 2);
}

// Agents that answer no validation task and acknowledge no directive.
testing::Responder Unresponsive() {
  testing::Responder r;
  r.answer_tasks = false;
  r.ack_directives = false;
  return r;
}
int64_t SlowRank3From40(uint32_t r, int64_t i) {
  return i >= 40 && r == 3 ? 200'000'000 : Healthy(r, i);
}

bool HasDirective(SimAgent& a) {
  for (const auto& m : a.channel().sent) {
    if (m.has_directive()) return true;
  }
  return false;
}

TEST_F(ControllerTest, AnAgentRestartedWithinTheGraceKeepsItsJobEventAndDirectives) {
  spec_.ranks_per_node = 8;  // One agent has every rank.
  ConnectAll();
  ASSERT_EQ(agents_.size(), 1u);
  // An active event with a directive the shims never acknowledge: a forced validation's pause.
  Run(0, 40, Healthy);
  ControlApi api(c_.get());
  falcon::v1::ForceValidationRequest req;
  req.set_job(spec_.job);
  ASSERT_TRUE(api.ForceValidation(req).ok());
  Run(40, 60, Healthy, Unresponsive());
  ASSERT_EQ(Events().size(), 1u);
  const falcon::v1::EventState state = Events()[0].state();
  ASSERT_TRUE(detection::EventManager::IsActiveState(state));
  ASSERT_FALSE(c_->directives().List(spec_.job, 0).empty());
  const uint64_t pending = c_->directives().List(spec_.job, 0).back().directive().directive_id();
  ASSERT_EQ(c_->directives().Find(pending)->state(), falcon::v1::DirectiveRecord::STATE_PENDING);

  // kill -9, then the new process: its hello lists no job (no shim has reattached yet).
  SimAgent& a = *agents_[0];
  a.Disconnect(*c_);
  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(a.Connect(*c_, {}).ok());
  clock_.Advance(options_.job_end_grace / 2);
  c_->Tick();
  const registry::JobEntry* job = c_->registry().Find(spec_.job);
  EXPECT_NE(job->job().state(), falcon::v1::JOB_STATE_ENDED);
  EXPECT_EQ(job->ranks().size(), 8u);
  EXPECT_EQ(job->AgentIds(), std::vector<std::string>{"node-0"});
  EXPECT_EQ(Events()[0].state(), state) << "the event is untouched";

  // The first shim reattaches: a registration with rank 0 only takes the job back, keeps every
  // rank of the agent's part (the others come back one by one), and the PENDING directive goes
  // to the new agent.
  falcon::v1::JobRegistration partial = testing::NodeRegistration(spec_, 0);
  partial.mutable_ranks()->DeleteSubrange(1, partial.ranks_size() - 1);
  falcon::v1::TelemetryBatch b = Batch(a, 60, [](uint32_t r) { return Healthy(r, 60); });
  *b.mutable_registration() = partial;
  auto ack = a.Send(*c_, b);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_FALSE(ack->has_error()) << ack->error().message();
  EXPECT_EQ(c_->registry().Find(spec_.job)->ranks().size(), 8u);
  EXPECT_TRUE(HasDirective(a)) << "the pending directive is sent again at once";
  clock_.Advance(options_.job_end_grace);
  c_->Tick();
  EXPECT_NE(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
  // The validation may have given up on its unanswered pause by now; the job's end did not end it.
  EXPECT_EQ(Events()[0].transitions().rbegin()->reason().find("job ended"), std::string::npos)
      << Events()[0].DebugString();
}

TEST_F(ControllerTest, AJobWhoseAgentDoesNotTakeItBackEndsAtTheGrace) {
  spec_.ranks_per_node = 8;
  ConnectAll();
  Run(0, 60, SlowRank3From40, Unresponsive());
  ASSERT_EQ(Events().size(), 1u);
  SimAgent& a = *agents_[0];
  a.Disconnect(*c_);  // The grace runs from here.
  clock_.Advance(absl::Seconds(10));
  ASSERT_TRUE(a.Connect(*c_, {}).ok());  // Back, but its trainer is gone.
  clock_.Advance(options_.job_end_grace - absl::Seconds(11));
  c_->Tick();
  EXPECT_NE(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
  clock_.Advance(absl::Seconds(1));
  c_->Tick();
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_ENDED);
  EXPECT_EQ(Events()[0].state(), falcon::v1::EVENT_STATE_CLOSED);
  EXPECT_NE(Events()[0].transitions().rbegin()->reason().find("job ended"), std::string::npos);
}

TEST_F(ControllerTest, AnAgentAwayForTheGraceLosesItsPartWhileOthersReportTheJob) {
  ConnectAll();  // Four agents, two ranks each.
  Run(0, 20, Healthy);
  SimAgent& a = *agents_[0];
  a.Disconnect(*c_);
  ASSERT_TRUE(a.Connect(*c_, {}).ok());
  clock_.Advance(options_.job_end_grace - absl::Seconds(1));
  c_->Tick();
  EXPECT_EQ(c_->registry().Find(spec_.job)->ranks().size(), 8u) << "within the grace";
  clock_.Advance(absl::Seconds(1));
  c_->Tick();
  const registry::JobEntry* job = c_->registry().Find(spec_.job);
  EXPECT_EQ(job->ranks().size(), 6u);
  EXPECT_EQ(job->AgentIds().size(), 3u);
  EXPECT_EQ(job->job().state(), falcon::v1::JOB_STATE_TRACKING);
}

TEST_F(ControllerTest, AControllerRestartGivesEveryAgentTheGrace) {
  spec_.ranks_per_node = 8;
  ConnectAll();
  Run(0, 20, Healthy);
  c_.reset();
  Start(options_);
  clock_.Advance(options_.job_end_grace / 2);
  ASSERT_TRUE(agents_[0]->Connect(*c_, {testing::NodeRegistration(spec_, 0)}).ok());
  clock_.Advance(options_.job_end_grace);
  c_->Tick();
  EXPECT_EQ(c_->registry().Find(spec_.job)->job().state(), falcon::v1::JOB_STATE_TRACKING);
}

}  // namespace
}  // namespace falcon::controller
