#include "trainer_shim/directive_intake.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer_shim {
namespace {

using falcon::v1::ACK_STATUS_APPLIED;
using falcon::v1::ACK_STATUS_RECEIVED;
using falcon::v1::ACK_STATUS_REJECTED;
using falcon::v1::Directive;
using falcon::v1::DirectiveAck;

DirectiveIntake::Options Opts() {
  DirectiveIntake::Options o;
  o.job = "job1";
  o.rank = 1;
  o.world_size = 4;
  o.epoch = 5;
  o.dp_size = 2;
  o.global_micro_batches = 8;
  return o;
}

Directive Plan(uint64_t id, uint64_t epoch, int64_t iteration) {
  Directive d;
  d.set_directive_id(id);
  d.set_job("job1");
  d.set_epoch(epoch);
  d.set_effective_iteration(iteration);
  d.set_plan_version(2);
  d.mutable_micro_batch_plan()->add_micro_batches(5);
  d.mutable_micro_batch_plan()->add_micro_batches(3);
  return d;
}

Directive Resume(uint64_t id, uint64_t epoch, int64_t iteration) {
  Directive d;
  d.set_directive_id(id);
  d.set_job("job1");
  d.set_epoch(epoch);
  d.set_effective_iteration(iteration);
  d.mutable_resume();
  return d;
}

std::string RejectReason(DirectiveIntake& intake, const Directive& d) {
  std::optional<DirectiveAck> ack = intake.Receive(d);
  if (!ack.has_value()) return "<no ack>";
  if (ack->status() != ACK_STATUS_REJECTED) return "<not rejected>";
  EXPECT_EQ(ack->applied_iteration(), -1);
  return ack->reason();
}

TEST(DirectiveIntakeTest, ReceivedThenDueAtItsIterationThenApplied) {
  DirectiveIntake intake(Opts());
  std::optional<DirectiveAck> ack = intake.Receive(Plan(11, 5, 10));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->status(), ACK_STATUS_RECEIVED);
  EXPECT_EQ(ack->rank(), 1u);
  EXPECT_EQ(ack->job(), "job1");
  EXPECT_TRUE(intake.HasPending());
  EXPECT_TRUE(intake.TakeDue(8).due.empty());
  EXPECT_TRUE(intake.TakeDue(9).due.empty());
  DirectiveIntake::Due due = intake.TakeDue(10);
  ASSERT_EQ(due.due.size(), 1u);
  EXPECT_EQ(due.due[0].directive_id(), 11u);
  EXPECT_FALSE(intake.HasPending());
  DirectiveAck done = intake.Complete(due.due[0], 10, absl::OkStatus());
  EXPECT_EQ(done.status(), ACK_STATUS_APPLIED);
  EXPECT_EQ(done.applied_iteration(), 10);
  EXPECT_EQ(done.epoch(), 5u);
}

TEST(DirectiveIntakeTest, DueDirectivesComeInIterationThenIdOrder) {
  DirectiveIntake intake(Opts());
  intake.Receive(Plan(30, 5, 4));
  intake.Receive(Plan(20, 5, 4));
  intake.Receive(Plan(40, 5, 3));
  DirectiveIntake::Due due = intake.TakeDue(-1);  // Unknown iteration: all due now.
  ASSERT_EQ(due.due.size(), 3u);
  EXPECT_EQ(due.due[0].directive_id(), 40u);
  EXPECT_EQ(due.due[1].directive_id(), 20u);
  EXPECT_EQ(due.due[2].directive_id(), 30u);
}

TEST(DirectiveIntakeTest, StaleEpochRejectedOnArrival) {
  DirectiveIntake intake(Opts());
  const std::string reason = RejectReason(intake, Plan(1, 4, 10));
  EXPECT_NE(reason.find("stale epoch"), std::string::npos) << reason;
  EXPECT_NE(reason.find("4 < shim epoch 5"), std::string::npos) << reason;
  EXPECT_FALSE(intake.HasPending());
}

TEST(DirectiveIntakeTest, AppliedNewerEpochMakesQueuedOlderOnesStale) {
  DirectiveIntake intake(Opts());
  ASSERT_EQ(intake.Receive(Plan(1, 6, 3))->status(), ACK_STATUS_RECEIVED);  // S3 at epoch 6.
  ASSERT_EQ(intake.Receive(Plan(2, 5, 7))->status(), ACK_STATUS_RECEIVED);  // Older plan.
  DirectiveIntake::Due due = intake.TakeDue(3);
  ASSERT_EQ(due.due.size(), 1u);
  intake.Complete(due.due[0], 3, absl::OkStatus());
  EXPECT_EQ(intake.epoch(), 6u);
  DirectiveIntake::Due later = intake.TakeDue(7);
  EXPECT_TRUE(later.due.empty());
  ASSERT_EQ(later.acks.size(), 1u);
  EXPECT_EQ(later.acks[0].directive_id(), 2u);
  EXPECT_EQ(later.acks[0].status(), ACK_STATUS_REJECTED);
  EXPECT_NE(later.acks[0].reason().find("stale epoch"), std::string::npos);
  // A directive at the new epoch is fine; one below it is not.
  EXPECT_EQ(intake.Receive(Plan(3, 6, 9))->status(), ACK_STATUS_RECEIVED);
  EXPECT_NE(RejectReason(intake, Plan(4, 5, 9)).find("stale epoch"), std::string::npos);
}

TEST(DirectiveIntakeTest, RejectedResultDoesNotAdvanceTheEpoch) {
  DirectiveIntake intake(Opts());
  intake.Receive(Plan(1, 9, 0));
  DirectiveIntake::Due due = intake.TakeDue(0);
  DirectiveAck ack = intake.Complete(due.due[0], 0, absl::InternalError("loader busy"));
  EXPECT_EQ(ack.status(), ACK_STATUS_REJECTED);
  EXPECT_NE(ack.reason().find("loader busy"), std::string::npos);
  EXPECT_NE(ack.reason().find("micro_batch_plan"), std::string::npos);
  EXPECT_EQ(intake.epoch(), 5u);
}

TEST(DirectiveIntakeTest, LateDirectivesRejectedButResumeIsNot) {
  DirectiveIntake intake(Opts());
  intake.TakeDue(10);  // The rank started iteration 10.
  const std::string reason = RejectReason(intake, Plan(1, 5, 10));
  EXPECT_NE(reason.find("late"), std::string::npos) << reason;
  const Directive resume = Resume(2, 5, 3);
  EXPECT_EQ(intake.Receive(resume)->status(), ACK_STATUS_RECEIVED);
  // Queued, then the rank moves past it.
  ASSERT_EQ(intake.Receive(Plan(3, 5, 12))->status(), ACK_STATUS_RECEIVED);
  DirectiveIntake::Due due = intake.TakeDue(13);
  ASSERT_EQ(due.due.size(), 1u);
  EXPECT_EQ(due.due[0].directive_id(), 2u);
  ASSERT_EQ(due.acks.size(), 1u);
  EXPECT_EQ(due.acks[0].directive_id(), 3u);
  EXPECT_NE(due.acks[0].reason().find("late"), std::string::npos);
}

// Agreed mode: a job-wide directive waits for the ranks' agreement and is never late; the others
// (Resume, Profiling, targeted) are due as in the default mode.
TEST(DirectiveIntakeTest, AgreedModeAppliesWhatTheRanksAgreedOnLateOrNot) {
  DirectiveIntake::Options o = Opts();
  o.agreed = true;
  DirectiveIntake intake(o);
  intake.TakeDue(10);  // The rank started iteration 10.
  ASSERT_EQ(intake.Receive(Plan(1, 5, 10))->status(), ACK_STATUS_RECEIVED) << "not late";
  ASSERT_EQ(intake.Receive(Plan(3, 5, 12))->status(), ACK_STATUS_RECEIVED);
  const Directive resume = Resume(2, 5, 3);
  ASSERT_EQ(intake.Receive(resume)->status(), ACK_STATUS_RECEIVED);
  Directive targeted = Plan(4, 5, 11);
  targeted.add_target_ranks(1);
  ASSERT_EQ(intake.Receive(targeted)->status(), ACK_STATUS_RECEIVED);
  std::vector<DirectiveIntake::PendingId> pending = intake.PendingAgreed();
  ASSERT_EQ(pending.size(), 2u) << "the job-wide plans only";
  EXPECT_EQ(pending[0].directive_id, 1u);
  EXPECT_EQ(pending[0].effective_iteration, 10);
  EXPECT_EQ(pending[1].directive_id, 3u);
  // Nothing agreed at 11: only the Resume and the targeted plan (due at 11) come.
  DirectiveIntake::Due due = intake.TakeDue(11);
  EXPECT_TRUE(due.acks.empty()) << "nothing rejected as late";
  ASSERT_EQ(due.due.size(), 2u);
  EXPECT_EQ(due.due[0].directive_id(), 2u);
  EXPECT_EQ(due.due[1].directive_id(), 4u);
  // Agreed at 13: plan 1, two iterations after its own; plan 3 (also due) was not agreed.
  const absl::flat_hash_set<uint64_t> agreed = {1};
  due = intake.TakeDue(13, &agreed);
  ASSERT_EQ(due.due.size(), 1u);
  EXPECT_EQ(due.due[0].directive_id(), 1u);
  EXPECT_TRUE(due.acks.empty());
  EXPECT_EQ(intake.Complete(due.due[0], 13, absl::OkStatus()).applied_iteration(), 13);
  ASSERT_EQ(intake.PendingAgreed().size(), 1u);
  EXPECT_EQ(intake.PendingAgreed()[0].directive_id, 3u);
  // Never agreed (some rank never held it): rejected past the grace, not kept forever.
  EXPECT_TRUE(intake.TakeDue(12 + o.agree_grace_iterations).acks.empty());
  due = intake.TakeDue(13 + o.agree_grace_iterations);
  ASSERT_EQ(due.acks.size(), 1u);
  EXPECT_EQ(due.acks[0].directive_id(), 3u);
  EXPECT_NE(due.acks[0].reason().find("not agreed"), std::string::npos) << due.acks[0].reason();
  EXPECT_TRUE(intake.PendingAgreed().empty());
  // A Resume while not paused supersedes the pauses before it that wait for agreement.
  Directive pause = Plan(20, 5, 30);
  pause.mutable_pause()->set_max_duration_ns(1'000'000'000);
  Directive later_pause = pause;
  later_pause.set_directive_id(22);
  ASSERT_EQ(intake.Receive(pause)->status(), ACK_STATUS_RECEIVED);
  ASSERT_EQ(intake.Receive(later_pause)->status(), ACK_STATUS_RECEIVED);
  std::vector<DirectiveAck> superseded = intake.SupersedePauses(21);
  ASSERT_EQ(superseded.size(), 1u);
  EXPECT_EQ(superseded[0].directive_id(), 20u);
  EXPECT_EQ(superseded[0].status(), ACK_STATUS_REJECTED);
  ASSERT_EQ(intake.PendingAgreed().size(), 1u);
  EXPECT_EQ(intake.PendingAgreed()[0].directive_id, 22u);
}

TEST(DirectiveIntakeTest, MalformedDirectivesRejectedWithTheField) {
  DirectiveIntake intake(Opts());
  struct Case {
    std::function<void(Directive*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](Directive* d) { d->clear_micro_batch_plan(); }, "directive.kind"},
      {[](Directive* d) { d->set_effective_iteration(-4); }, "effective_iteration"},
      {[](Directive* d) { d->set_job(""); }, "directive.job"},
      {[](Directive* d) { d->mutable_micro_batch_plan()->add_micro_batches(1); },
       "micro_batches: 3 entries, but dp_size is 2"},
      {[](Directive* d) { d->mutable_micro_batch_plan()->set_micro_batches(0, 1); },
       "sum 4 != global micro-batches 8"},
      {[](Directive* d) { d->set_plan_version(0); }, "plan_version"},
      {[](Directive* d) { d->add_target_ranks(1), d->add_target_ranks(9); }, "target_ranks[1]"},
      {[](Directive* d) { d->mutable_pause()->set_max_duration_ns(0); }, "pause.max_duration_ns"},
      {[](Directive* d) { d->mutable_pause()->set_max_duration_ns(601'000'000'000); },
       "pause.max_duration_ns"},
      {[](Directive* d) { d->mutable_topology_change()->add_assignments()->set_rank(0); },
       "need one per rank"},
      {[](Directive* d) { d->mutable_checkpoint_restart()->add_excluded_ranks(1); },
       "checkpoint_dir"},
      {[](Directive* d) { d->set_reverts_directive_id(d->directive_id()); }, "reverts itself"},
  };
  uint64_t id = 100;
  for (const Case& c : cases) {
    Directive d = Plan(++id, 5, 50);
    c.mutate(&d);
    const std::string reason = RejectReason(intake, d);
    EXPECT_NE(reason.find("malformed"), std::string::npos) << reason;
    EXPECT_NE(reason.find(c.field), std::string::npos) << reason;
  }
  EXPECT_FALSE(intake.HasPending());
  Directive zero = Plan(0, 5, 50);
  EXPECT_NE(RejectReason(intake, zero).find("directive_id"), std::string::npos);
}

void SetStages(falcon::v1::ReplicaSplit* r, std::initializer_list<uint32_t> blocks) {
  r->clear_stage_blocks();
  for (uint32_t b : blocks) r->add_stage_blocks(b);
}

// An S2L directive for the 2 x 2 job of Opts() with 8 blocks: DP group 0's stage 0 sheds 2.
Directive Split(uint64_t id) {
  Directive d;
  d.set_directive_id(id);
  d.set_job("job1");
  d.set_epoch(5);
  d.set_effective_iteration(20);
  d.set_plan_version(3);
  falcon::v1::LayerSplit* split = d.mutable_layer_split();
  SetStages(split->add_replicas(), {2, 6});
  SetStages(split->add_replicas(), {4, 4});
  split->add_micro_batches(3);
  split->add_micro_batches(5);
  return d;
}

DirectiveIntake::Options SplitOpts() {
  DirectiveIntake::Options o = Opts();
  o.pp_size = 2;
  o.pipeline_blocks = 8;
  return o;
}

TEST(DirectiveIntakeTest, LayerSplitOfTheJobsShapeIsQueued) {
  DirectiveIntake intake(SplitOpts());
  std::optional<DirectiveAck> ack = intake.Receive(Split(1));
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->status(), ACK_STATUS_RECEIVED) << ack->reason();
  DirectiveIntake::Due due = intake.TakeDue(20);
  ASSERT_EQ(due.due.size(), 1u);
  EXPECT_EQ(intake.Complete(due.due[0], 20, absl::OkStatus()).status(), ACK_STATUS_APPLIED);
  // A shim that knows no sizes checks the split's own shape: every pipeline the same blocks
  // (replicas[0]'s), its replicas x stages within the world.
  DirectiveIntake::Options unknown = Opts();
  unknown.dp_size = 0;
  unknown.global_micro_batches = 0;
  DirectiveIntake bare(unknown);
  Directive odd = Split(2);
  SetStages(odd.mutable_layer_split()->mutable_replicas(1), {5, 3});  // 8 blocks, as replicas[0].
  odd.mutable_layer_split()->set_micro_batches(1, 9);                 // M unknown.
  ack = bare.Receive(odd);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->status(), ACK_STATUS_RECEIVED) << ack->reason();
  Directive two_models = Split(3);
  SetStages(two_models.mutable_layer_split()->mutable_replicas(1), {4, 1});  // 5 blocks, not 8.
  EXPECT_NE(RejectReason(bare, two_models)
                .find("layer_split.replicas[1].stage_blocks sum to 5, not the 8 blocks of "
                      "replicas[0]"),
            std::string::npos)
      << RejectReason(bare, two_models);
  Directive too_many = Split(4);  // 3 pipelines of 2 stages: 6 ranks in a world of 4.
  SetStages(too_many.mutable_layer_split()->add_replicas(), {4, 4});
  too_many.mutable_layer_split()->add_micro_batches(1);
  EXPECT_NE(RejectReason(bare, too_many)
                .find("directive.layer_split.replicas: 3 pipelines of 2 stages need more than "
                      "the job's 4 ranks"),
            std::string::npos)
      << RejectReason(bare, too_many);
  Directive no_stage = Split(5);
  no_stage.mutable_layer_split()->mutable_replicas(0)->clear_stage_blocks();
  EXPECT_NE(RejectReason(bare, no_stage).find("layer_split.replicas[0].stage_blocks: empty"),
            std::string::npos)
      << RejectReason(bare, no_stage);
}

TEST(DirectiveIntakeTest, MalformedLayerSplitsRejectedWithTheField) {
  DirectiveIntake intake(SplitOpts());
  struct Case {
    std::function<void(falcon::v1::LayerSplit*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](falcon::v1::LayerSplit* s) { s->clear_replicas(); }, "layer_split.replicas: empty"},
      {[](falcon::v1::LayerSplit* s) {
         SetStages(s->add_replicas(), {4, 4});
       },
       "layer_split.replicas: 3 entries for 2 DP groups"},
      {[](falcon::v1::LayerSplit* s) { s->add_micro_batches(1); },
       "layer_split.micro_batches: 3 entries for 2 DP groups"},
      {[](falcon::v1::LayerSplit* s) { s->mutable_replicas(1)->add_stage_blocks(1); },
       "layer_split.replicas[1].stage_blocks: 3 entries for 2 stages"},
      {[](falcon::v1::LayerSplit* s) { s->mutable_replicas(0)->set_stage_blocks(0, 0); },
       "layer_split.replicas[0].stage_blocks[0] = 0"},
      {[](falcon::v1::LayerSplit* s) { s->mutable_replicas(1)->set_stage_blocks(1, 5); },
       "layer_split.replicas[1].stage_blocks sum to 9, not the 8 blocks"},
      {[](falcon::v1::LayerSplit* s) { s->set_micro_batches(0, 0); },
       "layer_split.micro_batches[0] = 0"},
      {[](falcon::v1::LayerSplit* s) { s->set_micro_batches(0, 4); },
       "layer_split.micro_batches sum to 9, not the global 8"},
  };
  uint64_t id = 100;
  for (const Case& c : cases) {
    Directive d = Split(++id);
    c.mutate(d.mutable_layer_split());
    const std::string reason = RejectReason(intake, d);
    EXPECT_NE(reason.find("malformed: directive.layer_split"), std::string::npos) << reason;
    EXPECT_NE(reason.find(c.field), std::string::npos) << reason;
  }
  Directive d = Split(200);
  d.set_plan_version(0);
  EXPECT_NE(RejectReason(intake, d).find("plan_version"), std::string::npos);
  // Without pp_size, every replica needs the first one's stage count.
  DirectiveIntake::Options no_pp = SplitOpts();
  no_pp.pp_size = 0;
  DirectiveIntake first(no_pp);
  d = Split(201);
  SetStages(d.mutable_layer_split()->mutable_replicas(1), {2, 2, 4});
  EXPECT_NE(RejectReason(first, d).find("replicas[1].stage_blocks: 3 entries for 2 stages"),
            std::string::npos);
  EXPECT_FALSE(intake.HasPending());
  EXPECT_FALSE(first.HasPending());
}

TEST(DirectiveIntakeTest, TopologyNeedsDistinctRanks) {
  DirectiveIntake intake(Opts());
  Directive d = Plan(1, 5, 9);
  auto* t = d.mutable_topology_change();
  for (uint32_t r : {0u, 1u, 1u, 3u}) t->add_assignments()->set_rank(r);
  EXPECT_NE(RejectReason(intake, d).find("assignments[2].rank: duplicate 1"), std::string::npos);
}

TEST(DirectiveIntakeTest, OtherJobRejected) {
  DirectiveIntake intake(Opts());
  Directive d = Plan(1, 5, 9);
  d.set_job("job2");
  EXPECT_NE(RejectReason(intake, d).find("not this shim's job"), std::string::npos);
}

TEST(DirectiveIntakeTest, NotTargetedIsIgnored) {
  DirectiveIntake intake(Opts());
  Directive d = Plan(1, 5, 9);
  d.add_target_ranks(0);
  d.add_target_ranks(2);
  EXPECT_FALSE(intake.Receive(d).has_value());
  d.add_target_ranks(1);
  EXPECT_EQ(intake.Receive(d)->status(), ACK_STATUS_RECEIVED);
}

TEST(DirectiveIntakeTest, RedeliveryGetsTheSameAnswerAndIsNotQueuedTwice) {
  DirectiveIntake intake(Opts());
  EXPECT_EQ(intake.Receive(Plan(7, 5, 2))->status(), ACK_STATUS_RECEIVED);
  EXPECT_EQ(intake.Receive(Plan(7, 5, 2))->status(), ACK_STATUS_RECEIVED);
  DirectiveIntake::Due due = intake.TakeDue(2);
  ASSERT_EQ(due.due.size(), 1u);
  intake.Complete(due.due[0], 2, absl::OkStatus());
  std::optional<DirectiveAck> again = intake.Receive(Plan(7, 5, 2));
  EXPECT_EQ(again->status(), ACK_STATUS_APPLIED);
  EXPECT_EQ(again->applied_iteration(), 2);
  EXPECT_FALSE(intake.HasPending());
}

TEST(DirectiveIntakeTest, TakeResumeIgnoresTheIteration) {
  DirectiveIntake intake(Opts());
  Directive resume;
  resume.set_directive_id(5);
  resume.set_job("job1");
  resume.set_epoch(5);
  resume.set_effective_iteration(1000);
  resume.mutable_resume();
  intake.Receive(Plan(4, 5, 1000));
  intake.Receive(resume);
  std::optional<Directive> r = intake.TakeResume();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->directive_id(), 5u);
  EXPECT_FALSE(intake.TakeResume().has_value());
  EXPECT_TRUE(intake.HasPending()) << "the plan stays queued";
}

// Trainer-applied mode: the intake screens, the trainer acks.
TEST(DirectiveIntakeTest, ScreenForTrainerForwardsOnceAndRejectsOnlyWhatIsBroken) {
  DirectiveIntake intake(Opts());
  DirectiveIntake::Screened s = intake.ScreenForTrainer(Plan(1, 5, 0));
  EXPECT_TRUE(s.forward);
  EXPECT_FALSE(s.reply.has_value());           // No ack until the trainer acks.
  s = intake.ScreenForTrainer(Plan(1, 5, 0));  // Re-delivered before any ack: dropped.
  EXPECT_FALSE(s.forward);
  EXPECT_FALSE(s.reply.has_value());

  Directive stale = Plan(2, 4, 9);
  s = intake.ScreenForTrainer(stale);
  EXPECT_FALSE(s.forward);
  ASSERT_TRUE(s.reply.has_value());
  EXPECT_EQ(s.reply->status(), ACK_STATUS_REJECTED);
  EXPECT_NE(s.reply->reason().find("stale epoch"), std::string::npos);

  Directive not_mine = Plan(3, 5, 9);  // Not a target: forwarded (applied globally), not acked.
  not_mine.add_target_ranks(2);
  s = intake.ScreenForTrainer(not_mine);
  EXPECT_TRUE(s.forward);
  EXPECT_FALSE(s.reply.has_value());
  Directive foreign = Plan(4, 5, 9);  // Another job's, not targeting this rank: dropped silently.
  foreign.add_target_ranks(2);
  foreign.set_job("job2");
  s = intake.ScreenForTrainer(foreign);
  EXPECT_FALSE(s.forward);
  EXPECT_FALSE(s.reply.has_value());
}

TEST(DirectiveIntakeTest, TrainerAcksAreSentOncePerOutcomeAndAnsweredOnRedelivery) {
  DirectiveIntake intake(Opts());
  const Directive d = Plan(7, 6, 3);
  ASSERT_TRUE(intake.ScreenForTrainer(d).forward);
  std::optional<DirectiveAck> a = intake.TrainerAck(d, ACK_STATUS_RECEIVED, "", -1);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->status(), ACK_STATUS_RECEIVED);
  EXPECT_FALSE(intake.TrainerAck(d, ACK_STATUS_RECEIVED, "", -1).has_value());
  DirectiveIntake::Screened again = intake.ScreenForTrainer(d);
  EXPECT_FALSE(again.forward);
  ASSERT_TRUE(again.reply.has_value());
  EXPECT_EQ(again.reply->status(), ACK_STATUS_RECEIVED);

  a = intake.TrainerAck(d, ACK_STATUS_APPLIED, "", 3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->applied_iteration(), 3);
  EXPECT_EQ(intake.epoch(), 6u);  // An applied newer epoch moves the fence.
  EXPECT_FALSE(intake.TrainerAck(d, ACK_STATUS_APPLIED, "", 3).has_value());
  EXPECT_FALSE(intake.TrainerAck(d, ACK_STATUS_REJECTED, "x", -1).has_value());
  again = intake.ScreenForTrainer(d);
  EXPECT_FALSE(again.forward);
  ASSERT_TRUE(again.reply.has_value());
  EXPECT_EQ(again.reply->status(), ACK_STATUS_APPLIED);
  // Now older epochs are stale.
  EXPECT_FALSE(intake.ScreenForTrainer(Plan(8, 5, 9)).forward);
}

}  // namespace
}  // namespace falcon::trainer_shim
