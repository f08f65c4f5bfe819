// Shim directive intake end to end against FakeAgent: effective iterations, epochs, malformed
// directives, pause and validation, profiling control, iteration hints.
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "trainer_shim/shim.h"
#include "trainer_shim/shim_test_util.h"

namespace falcon::trainer_shim {
namespace {

using falcon::v1::ACK_STATUS_APPLIED;
using falcon::v1::ACK_STATUS_RECEIVED;
using falcon::v1::ACK_STATUS_REJECTED;
using falcon::v1::Directive;

TEST_F(ShimTest, DirectiveReachesTheTrainerAtItsEffectiveIteration) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(21, 5, 4)));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 21, ACK_STATUS_RECEIVED); }));
  std::vector<std::pair<int64_t, uint64_t>> applied;  // (iteration, directive id)
  for (int64_t it = 0; it < 7; ++it) {
    ASSERT_TRUE(shim->PollDirectives(it,
                                     [&](const Directive& d) {
                                       applied.emplace_back(it, d.directive_id());
                                       EXPECT_EQ(d.micro_batch_plan().micro_batches(0), 6u);
                                       return absl::OkStatus();
                                     })
                    .ok());
    RecordN(*shim, it, 1);
  }
  EXPECT_EQ(applied, (std::vector<std::pair<int64_t, uint64_t>>{{4, 21}}));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 21, ACK_STATUS_APPLIED); }));
  EXPECT_EQ(FindAck(*agent_, 21, ACK_STATUS_APPLIED).applied_iteration(), 4);
  EXPECT_EQ(FindAck(*agent_, 21, ACK_STATUS_APPLIED).rank(), 1u);
}

TEST_F(ShimTest, StaleEpochsAreRejectedAndAnAppliedEpochMovesTheFence) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(1, 4, 2)));  // Older than the shim's epoch 5.
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 1, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 1, ACK_STATUS_REJECTED).reason().find("stale epoch"),
            std::string::npos);

  Directive topo = BaseDirective(2, 6, 2);  // S3 at a new epoch.
  for (uint32_t r = 0; r < 4; ++r) topo.mutable_topology_change()->add_assignments()->set_rank(r);
  ASSERT_TRUE(agent_->SendDirective(topo));
  ASSERT_TRUE(agent_->SendDirective(Plan(3, 5, 3)));  // Queued at the old epoch.
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 3, ACK_STATUS_RECEIVED); }));
  int handled = 0;
  auto handler = [&](const Directive&) {
    ++handled;
    return absl::OkStatus();
  };
  ASSERT_TRUE(shim->PollDirectives(2, handler).ok());
  EXPECT_EQ(shim->epoch(), 6u);
  ASSERT_TRUE(shim->PollDirectives(3, handler).ok());
  EXPECT_EQ(handled, 1) << "only the topology change was applied";
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 3, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 3, ACK_STATUS_REJECTED).reason().find("5 < shim epoch 6"),
            std::string::npos);
  EXPECT_TRUE(HasAck(*agent_, 2, ACK_STATUS_APPLIED));
}

TEST_F(ShimTest, MalformedDirectiveIsRejectedWithAReasonAndTrainingContinues) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  Directive no_kind = BaseDirective(8, 5, 1);
  Directive bad_plan = Plan(9, 5, 1);
  bad_plan.mutable_micro_batch_plan()->set_micro_batches(0, 1);  // Sum 3, job has 8.
  ASSERT_TRUE(agent_->SendDirective(no_kind));
  ASSERT_TRUE(agent_->SendDirective(bad_plan));
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 8, ACK_STATUS_REJECTED) && HasAck(*agent_, 9, ACK_STATUS_REJECTED);
  }));
  EXPECT_NE(FindAck(*agent_, 8, ACK_STATUS_REJECTED).reason().find("directive.kind: not set"),
            std::string::npos);
  EXPECT_NE(FindAck(*agent_, 9, ACK_STATUS_REJECTED).reason().find("sum 3"), std::string::npos);
  bool called = false;
  for (int64_t it = 0; it < 3; ++it) {
    ASSERT_TRUE(shim->PollDirectives(it,
                                     [&](const Directive&) {
                                       called = true;
                                       return absl::OkStatus();
                                     })
                    .ok());
    RecordN(*shim, it * 10, 10);
  }
  EXPECT_FALSE(called);
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->acked_records().size() == 30; }));
  EXPECT_FALSE(shim->paused());
  EXPECT_EQ(shim->stats().directives_rejected, 2u);
}

// A trainer that applies directives itself checks a split against its layout (S3 changes it):
// the shim screens a layer split only against the model's block count and the world size, which
// S3 does not change.
TEST_F(ShimTest, TrainerAppliedLayerSplitsAreScreenedByBlockCountAndWorldSize) {
  ShimOptions o = FastOptions(socket_, &log_);
  o.pp_size = 2;
  o.pipeline_blocks = 6;
  o.trainer_applies_directives = true;
  absl::StatusOr<std::unique_ptr<Shim>> shim = Shim::Create(o);
  ASSERT_TRUE(shim.ok()) << shim.status();
  ASSERT_TRUE(WaitConnected(**shim));
  EXPECT_EQ(agent_->hellos()[0].pipeline_blocks(), 6u);
  auto split = [](uint64_t id, std::vector<std::vector<uint32_t>> replicas) {
    Directive d = BaseDirective(id, 5, 4);
    for (const std::vector<uint32_t>& stages : replicas) {
      falcon::v1::ReplicaSplit* r = d.mutable_layer_split()->add_replicas();
      for (uint32_t b : stages) r->add_stage_blocks(b);
      d.mutable_layer_split()->add_micro_batches(1);
    }
    return d;
  };
  // One DP group of four stages (the job's layout at start was 2 x 2): the trainer decides.
  ASSERT_TRUE(agent_->SendDirective(split(40, {{1, 2, 2, 1}})));
  ASSERT_TRUE(agent_->SendDirective(split(41, {{1, 5}, {3, 2}})));  // 3+2: not 6 blocks.
  // Three DP groups of three stages: more ranks than the world's 4, whatever the layout.
  ASSERT_TRUE(agent_->SendDirective(split(42, {{1, 2, 3}, {2, 2, 2}, {3, 2, 1}})));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 42, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 42, ACK_STATUS_REJECTED)
                .reason()
                .find("layer_split.replicas: 3 pipelines of 3 stages need more than the job's 4 "
                      "ranks"),
            std::string::npos)
      << FindAck(*agent_, 42, ACK_STATUS_REJECTED).reason();
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 41, ACK_STATUS_REJECTED); }));
  EXPECT_NE(FindAck(*agent_, 41, ACK_STATUS_REJECTED)
                .reason()
                .find("layer_split.replicas[1].stage_blocks sum to 5, not the 6 blocks"),
            std::string::npos)
      << FindAck(*agent_, 41, ACK_STATUS_REJECTED).reason();
  absl::StatusOr<std::vector<Directive>> got = (*shim)->TakeDirectives();
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].directive_id(), 40u);
}

TEST_F(ShimTest, HandlerErrorAndMissingHandlerAreRejectedWithReasons) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(agent_->SendDirective(Plan(31, 5, 1)));
  ASSERT_TRUE(agent_->SendDirective(Plan(32, 5, 2)));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 32, ACK_STATUS_RECEIVED); }));
  ASSERT_TRUE(
      shim->PollDirectives(
              1, [](const Directive&) { return absl::FailedPreconditionError("pipeline drained"); })
          .ok());
  ASSERT_TRUE(shim->PollDirectives(2, nullptr).ok());
  ASSERT_TRUE(agent_->WaitFor([&] {
    return HasAck(*agent_, 31, ACK_STATUS_REJECTED) && HasAck(*agent_, 32, ACK_STATUS_REJECTED);
  }));
  EXPECT_NE(FindAck(*agent_, 31, ACK_STATUS_REJECTED).reason().find("pipeline drained"),
            std::string::npos);
  EXPECT_NE(FindAck(*agent_, 32, ACK_STATUS_REJECTED).reason().find("no handler"),
            std::string::npos);
}

TEST_F(ShimTest, PauseHoldsAtTheSafePointRunsValidationAndResumes) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  std::vector<bool> pause_calls;
  std::thread::id executor_thread;
  shim->SetPauseHandler([&](bool paused) { pause_calls.push_back(paused); });
  shim->SetValidationExecutor(
      [&](const falcon::v1::ValidationTask& t) -> absl::StatusOr<falcon::v1::ValidationResult> {
        executor_thread = std::this_thread::get_id();
        falcon::v1::ValidationResult r;
        r.set_gemm_duration_ns(1000 * t.gemm().m());
        r.set_gemm_flops(2.0e12);
        return r;
      });
  Directive pause = BaseDirective(41, 5, 3);
  pause.mutable_pause()->set_max_duration_ns(300'000'000'000);
  ASSERT_TRUE(agent_->SendDirective(pause));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 41, ACK_STATUS_RECEIVED); }));

  std::atomic<bool> returned{false};
  std::thread::id trainer_thread;
  std::thread trainer([&] {
    trainer_thread = std::this_thread::get_id();
    EXPECT_TRUE(shim->PollDirectives(3, nullptr).ok());
    returned = true;
  });
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 41, ACK_STATUS_APPLIED); }));
  EXPECT_TRUE(shim->paused());

  falcon::v1::AgentToShim task;
  falcon::v1::ValidationTask* t = task.mutable_validation_task();
  t->set_task_id(77);
  t->set_job("job1");
  t->set_epoch(5);
  t->add_ranks(1);
  t->mutable_gemm()->set_m(64);
  t->mutable_gemm()->set_n(64);
  t->mutable_gemm()->set_k(64);
  t->mutable_gemm()->set_repeats(3);
  ASSERT_TRUE(agent_->Send(task));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 1; }));
  const falcon::v1::ValidationResult result = agent_->results()[0];
  EXPECT_EQ(result.task_id(), 77u);
  EXPECT_EQ(result.rank(), 1u);
  EXPECT_EQ(result.job(), "job1");
  EXPECT_EQ(result.gemm_duration_ns(), 64000);
  EXPECT_TRUE(result.error().empty());
  EXPECT_FALSE(returned.load()) << "still held at the safe point";

  Directive resume = BaseDirective(42, 5, 0);
  resume.mutable_resume();
  ASSERT_TRUE(agent_->SendDirective(resume));
  trainer.join();
  EXPECT_TRUE(returned.load());
  EXPECT_FALSE(shim->paused());
  EXPECT_EQ(executor_thread, trainer_thread) << "validation runs on the trainer's thread";
  EXPECT_EQ(pause_calls, (std::vector<bool>{true, false}));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 42, ACK_STATUS_APPLIED); }));
  EXPECT_EQ(shim->stats().pauses, 1u);
}

TEST_F(ShimTest, PauseReleasesItselfAfterMaxDuration) {
  common::FakeClock clock;
  std::unique_ptr<Shim> shim = MakeShim(&clock);
  ASSERT_TRUE(WaitConnected(*shim));
  Directive pause = BaseDirective(51, 5, 0);
  pause.mutable_pause()->set_max_duration_ns(1'000'000'000);
  ASSERT_TRUE(agent_->SendDirective(pause));
  ASSERT_TRUE(agent_->WaitFor([&] { return HasAck(*agent_, 51, ACK_STATUS_RECEIVED); }));
  std::thread trainer([&] { EXPECT_TRUE(shim->PollDirectives(0, nullptr).ok()); });
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->paused(); }));
  clock.Advance(absl::Milliseconds(999));
  EXPECT_TRUE(shim->paused());
  clock.Advance(absl::Milliseconds(2));
  trainer.join();
  EXPECT_FALSE(shim->paused());
  EXPECT_TRUE(log_.Contains("released after max_duration_ns"));
}

TEST_F(ShimTest, ValidationProblemsComeBackAsErrors) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  falcon::v1::AgentToShim m;
  falcon::v1::ValidationTask* t = m.mutable_validation_task();
  t->set_task_id(5);
  t->set_job("job1");
  t->set_epoch(5);
  t->mutable_link_pass()->add_links()->set_src_rank(1);  // dst 0
  t->mutable_link_pass()->set_bytes(1 << 20);
  t->mutable_link_pass()->set_repeats(2);
  ASSERT_TRUE(agent_->Send(m));  // Valid, but no executor.
  t->set_task_id(6);
  t->set_epoch(2);  // Stale.
  ASSERT_TRUE(agent_->Send(m));
  t->set_task_id(7);
  t->set_epoch(5);
  t->clear_ranks();
  t->add_ranks(0);  // Not this rank: ignored.
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 1; }));
  ASSERT_TRUE(shim->PollDirectives(0, nullptr).ok());
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->results().size() == 2; }));
  std::vector<falcon::v1::ValidationResult> results = agent_->results();
  EXPECT_EQ(results[0].task_id(), 6u);
  EXPECT_NE(results[0].error().find("stale epoch"), std::string::npos);
  EXPECT_EQ(results[1].task_id(), 5u);
  EXPECT_NE(results[1].error().find("no validation executor"), std::string::npos);
}

TEST_F(ShimTest, ProfilingFollowsTheAgentAndExpires) {
  common::FakeClock clock;
  std::unique_ptr<Shim> shim = MakeShim(&clock);
  ASSERT_TRUE(WaitConnected(*shim));
  EXPECT_FALSE(shim->profiling());
  falcon::v1::AgentToShim m;
  m.mutable_profiling()->set_job("job1");
  m.mutable_profiling()->set_enabled(true);
  m.mutable_profiling()->set_max_duration_ns(5'000'000'000);
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->profiling(); }));
  clock.Advance(absl::Seconds(4));
  EXPECT_TRUE(shim->profiling());
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE(shim->profiling());
  m.mutable_profiling()->clear_max_duration_ns();
  m.mutable_profiling()->add_ranks(0);  // Another rank only.
  ASSERT_TRUE(agent_->Send(m));
  m.mutable_profiling()->add_ranks(1);
  ASSERT_TRUE(agent_->Send(m));
  ASSERT_TRUE(agent_->WaitFor([&] { return shim->profiling(); }));
}

TEST_F(ShimTest, IterationHintsAreForwarded) {
  std::unique_ptr<Shim> shim = MakeShim();
  ASSERT_TRUE(WaitConnected(*shim));
  ASSERT_TRUE(shim->RecordIteration({3, 100, 900, 2.5, 1}).ok());
  EXPECT_FALSE(shim->RecordIteration({4, 100, 50, 0, 1}).ok());
  ASSERT_TRUE(agent_->WaitFor([&] { return agent_->hints().size() == 1; }));
  EXPECT_EQ(agent_->hints()[0].iteration(), 3);
  EXPECT_EQ(agent_->hints()[0].end_ns(), 900);
  EXPECT_DOUBLE_EQ(agent_->hints()[0].loss(), 2.5);
}

}  // namespace
}  // namespace falcon::trainer_shim
