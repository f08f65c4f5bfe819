#include "controller/registry/job_registry.h"

#include <optional>
#include <string>

#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::registry {
namespace {

using testing::LayoutSpec;
using testing::NodeRegistration;

JobEntry* Register(JobRegistry* registry, const std::string& agent, const std::string& node,
                   const falcon::v1::JobRegistration& reg, store::StoreTxn* txn) {
  JobEntry* entry = nullptr;
  util::MaybeFieldError e = registry->Register(agent, node, reg, "reg", txn, &entry);
  EXPECT_FALSE(e.has_value()) << e->field() << ": " << e->message();
  return entry;
}

TEST(JobRegistryTest, MergesNodesIntoOneJob) {
  LayoutSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "agent-0", "node-0", NodeRegistration(spec, 0), &txn);
  JobEntry* job = Register(&registry, "agent-1", "node-1", NodeRegistration(spec, 1), &txn);
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(txn.size(), 4u);  // Per registration: the job's record and the agent's part.
  EXPECT_EQ(job->world_size(), 4u);
  EXPECT_EQ(job->ranks(), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(job->View().nodes_size(), 2);
  EXPECT_EQ(job->View().ranks_size(), 4);
  EXPECT_EQ(*job->AgentOfRank(3), "agent-1");
  EXPECT_EQ(job->job().state(), falcon::v1::JOB_STATE_TRACKING);
  ASSERT_NE(job->FindComm(1000), nullptr);
  EXPECT_TRUE(job->FindComm(1000)->HasMember(1));
  EXPECT_FALSE(job->FindComm(1000)->HasMember(2));
  EXPECT_EQ(job->CommsOfRank(0).size(), 3u);  // world, dp.pp0, pp.dp0
  EXPECT_EQ(job->RanksOnNode("node-1"), (std::vector<uint32_t>{2, 3}));
  EXPECT_TRUE(job->RanksOnNode("node-9").empty());
  EXPECT_TRUE(job->RanksOnNode("").empty());
  EXPECT_EQ(job->job().dp_size(), 2u);
  EXPECT_EQ(job->job().pp_size(), 2u);
  EXPECT_FALSE(job->HasUnhintedComms());
}

TEST(JobRegistryTest, InfersRolesWithoutHints) {
  LayoutSpec spec;
  spec.dp = 4;
  spec.pp = 2;
  spec.ranks_per_node = 4;  // A stage's DP communicator sits on one node: that is DP, not TP...
  spec.hint_kinds = false;
  spec.hint_layout = false;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  JobEntry* job = Register(&registry, "a1", "node-1", NodeRegistration(spec, 1), &txn);
  EXPECT_TRUE(job->HasUnhintedComms());
  EXPECT_EQ(job->FindComm(1)->comm.kind(), falcon::v1::COMM_KIND_WORLD);
  // ...but without hints or traffic, a one-node group next to cross-node groups looks like TP;
  // observed collective traffic on the cross-node pairs and p2p traffic corrects the picture.
  EXPECT_EQ(job->FindComm(1000)->comm.kind(), falcon::v1::COMM_KIND_TP);
  EXPECT_EQ(job->FindComm(2000)->comm.kind(), falcon::v1::COMM_KIND_UNKNOWN);
  EXPECT_TRUE(job->ObserveTraffic(2000, 10, 0));
  EXPECT_EQ(job->FindComm(2000)->comm.kind(), falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(job->View().communicators_size(), 7);
}

TEST(JobRegistryTest, ConflictsAreFieldErrors) {
  LayoutSpec spec;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  const size_t staged = txn.size();

  falcon::v1::JobRegistration bigger = NodeRegistration(spec, 1);
  bigger.set_world_size(8);
  util::MaybeFieldError e = registry.Register("a1", "node-1", bigger, "batch.registration", &txn);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.registration.world_size");

  falcon::v1::JobRegistration older = NodeRegistration(spec, 1);
  older.set_epoch(0);
  e = registry.Register("a1", "node-1", older, "reg", &txn);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "reg.epoch");

  falcon::v1::JobRegistration other_members = NodeRegistration(spec, 1);
  for (auto& c : *other_members.mutable_communicators()) {
    if (c.comm_id() == 1) c.set_member_ranks(0, 3), c.set_member_ranks(3, 0);
  }
  e = registry.Check("a1", other_members, "reg");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field().rfind("reg.communicators[", 0), 0u) << e->field();
  e = registry.Register("a1", "node-1", other_members, "reg", &txn);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(txn.size(), staged) << "a refused registration stages nothing";
  EXPECT_EQ(registry.Find("job")->AgentIds(), std::vector<std::string>{"a0"});
}

TEST(JobRegistryTest, NewEpochDropsOldPartsAndRanksMove) {
  LayoutSpec spec;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  Register(&registry, "a1", "node-1", NodeRegistration(spec, 1), &txn);
  // Rank 1 moves to agent a1 (same epoch): last writer wins.
  falcon::v1::JobRegistration moved = NodeRegistration(spec, 1);
  *moved.add_ranks() = NodeRegistration(spec, 0).ranks(1);
  JobEntry* job = Register(&registry, "a1", "node-1", moved, &txn);
  EXPECT_EQ(*job->AgentOfRank(1), "a1");
  EXPECT_EQ(job->ranks().size(), 4u);
  // A restart at epoch 2 from a0 drops a1's epoch-1 part.
  spec.epoch = 2;
  job = Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  EXPECT_EQ(job->epoch(), 2u);
  EXPECT_EQ(job->AgentIds(), (std::vector<std::string>{"a0"}));
  EXPECT_EQ(job->ranks(), (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(job->RemoveAgent("a0"));
  EXPECT_TRUE(job->ranks().empty());
}

TEST(JobRegistryTest, LoadRestoresFromRecords) {
  LayoutSpec spec;
  JobRegistry registry;
  store::StoreTxn txn;
  JobEntry* job = Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  job->set_state(falcon::v1::JOB_STATE_PROFILING);
  JobRegistry reloaded;
  reloaded.Load({job->record()}, {{"job", job->parts().at("a0")}});
  ASSERT_NE(reloaded.Find("job"), nullptr);
  EXPECT_EQ(reloaded.Find("job")->job().state(), falcon::v1::JOB_STATE_PROFILING);
  EXPECT_EQ(reloaded.Find("job")->ranks(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(reloaded.JobNames(), (std::vector<std::string>{"job"}));
  EXPECT_EQ(reloaded.JobsOfAgent("a0"), (std::vector<std::string>{"job"}));
}

// Stores of earlier versions hold each job as one record with every part inside: it loads, and
// is stored again as the job's record plus one row per part.
TEST(JobRegistryTest, LoadsAndUpgradesARecordWithItsPartsInside) {
  LayoutSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  falcon::controller::v1::JobRecord whole;
  whole.mutable_job()->set_job("job");
  whole.mutable_job()->set_state(falcon::v1::JOB_STATE_PROFILING);
  whole.mutable_job()->set_plan_version(3);
  for (uint32_t n = 0; n < 2; ++n) {
    falcon::controller::v1::AgentJob* a = whole.add_agents();
    a->set_agent_id(testing::NodeName(n));
    a->set_node(testing::NodeName(n));
    *a->mutable_registration() = NodeRegistration(spec, n);
    *whole.mutable_job()->mutable_ranks() = a->registration().ranks();  // As stored: ignored.
  }
  JobRegistry registry;
  store::StoreTxn upgrade;
  registry.Load({whole}, {}, &upgrade);
  const JobEntry* job = registry.Find("job");
  ASSERT_NE(job, nullptr);
  EXPECT_EQ(job->ranks(), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(job->job().state(), falcon::v1::JOB_STATE_PROFILING);
  EXPECT_EQ(job->job().plan_version(), 3);
  EXPECT_EQ(job->job().ranks_size(), 0);
  EXPECT_EQ(job->record().agents_size(), 0);
  EXPECT_EQ(upgrade.size(), 3u);  // The record and two parts.

  // What the upgrade stored loads to the same job.
  JobRegistry again;
  again.Load({job->record()}, {{"job", job->parts().at(testing::NodeName(0))},
                               {"job", job->parts().at(testing::NodeName(1))}});
  EXPECT_EQ(again.Find("job")->View().SerializeAsString(), job->View().SerializeAsString());
}

// A registration costs what the agent's part holds: merged in place, and undone exactly.
TEST(JobRegistryTest, UndoRestoresTheJobExactly) {
  LayoutSpec spec;
  spec.dp = 4;
  spec.pp = 2;
  spec.hint_kinds = false;
  JobRegistry registry;
  store::StoreTxn txn;
  for (uint32_t n = 0; n < 3; ++n) {
    Register(&registry, testing::NodeName(n), testing::NodeName(n), NodeRegistration(spec, n),
             &txn);
  }
  JobEntry* job = registry.Find("job");
  job->ObserveTraffic(2000, 10, 0);  // Traffic stays through the undo.
  const std::string before = job->View().SerializeAsString();
  const std::vector<uint32_t> ranks_before = job->ranks();

  // Node 3 registers, taking rank 0 from node 0 (last writer wins).
  falcon::v1::JobRegistration reg = NodeRegistration(spec, 3);
  *reg.add_ranks() = NodeRegistration(spec, 0).ranks(0);
  RegistrationUndo undo;
  store::StoreTxn discarded;
  ASSERT_FALSE(registry
                   .Register(testing::NodeName(3), testing::NodeName(3), reg, "reg", &discarded,
                             nullptr, &undo)
                   .has_value());
  EXPECT_EQ(*job->AgentOfRank(0), testing::NodeName(3));
  EXPECT_NE(job->View().SerializeAsString(), before);
  registry.Undo(std::move(undo));
  EXPECT_EQ(job->View().SerializeAsString(), before);
  EXPECT_EQ(job->ranks(), ranks_before);
  EXPECT_EQ(*job->AgentOfRank(0), testing::NodeName(0));
  EXPECT_TRUE(registry.JobsOfAgent(testing::NodeName(3)).empty());

  // Undoing the registration that created a job forgets it.
  falcon::v1::JobRegistration other = NodeRegistration(spec, 0);
  other.set_job("other");
  RegistrationUndo created;
  ASSERT_FALSE(
      registry.Register("a", "node-0", other, "reg", &discarded, nullptr, &created).has_value());
  registry.Undo(std::move(created));
  EXPECT_EQ(registry.Find("other"), nullptr);
  EXPECT_TRUE(registry.JobsOfAgent("a").empty());
}

// Whatever order parts come and go in, the job is what merging its parts from scratch gives.
TEST(JobRegistryTest, IncrementalMergeEqualsAFreshLoad) {
  LayoutSpec spec;
  spec.dp = 4;
  spec.pp = 2;
  spec.hint_kinds = false;
  spec.hint_layout = false;
  JobRegistry registry;
  store::StoreTxn txn;
  for (uint32_t n : {2u, 0u, 3u, 1u}) {
    Register(&registry, testing::NodeName(n), testing::NodeName(n), NodeRegistration(spec, n),
             &txn);
  }
  JobEntry* job = registry.Find("job");
  store::StoreTxn removal;
  registry.RemoveAgent("job", testing::NodeName(3), &removal);
  Register(&registry, testing::NodeName(3), testing::NodeName(3), NodeRegistration(spec, 3), &txn);
  JobRegistry fresh;
  std::vector<std::pair<std::string, falcon::controller::v1::AgentJob>> parts;
  for (const auto& [id, part] : job->parts()) parts.emplace_back("job", part);
  fresh.Load({job->record()}, parts);
  EXPECT_EQ(fresh.Find("job")->View().SerializeAsString(), job->View().SerializeAsString());
  EXPECT_EQ(job->ranks().size(), 8u);
}

TEST(JobRegistryTest, WithEarlierPartKeepsTheRanksOfARejoiningAgent) {
  LayoutSpec spec;
  spec.dp = 4;
  spec.pp = 1;
  spec.ranks_per_node = 2;
  JobRegistry registry;
  store::StoreTxn txn;
  const falcon::v1::JobRegistration full = NodeRegistration(spec, 0);  // Ranks 0 and 1.
  ASSERT_EQ(full.ranks_size(), 2);
  JobEntry* job = Register(&registry, "a0", "node-0", full, &txn);
  Register(&registry, "a1", "node-1", NodeRegistration(spec, 1), &txn);

  // The restarted agent's first registration has only the shim that came back first.
  falcon::v1::JobRegistration partial = full;
  partial.mutable_ranks()->DeleteSubrange(1, 1);
  partial.clear_communicators();
  partial.set_dp_size(0);
  job = registry.Find(spec.job);
  const falcon::v1::JobRegistration merged = WithEarlierPart(*job, "a0", partial);
  EXPECT_EQ(merged.ranks_size(), 2);
  EXPECT_EQ(merged.communicators_size(), full.communicators_size());
  EXPECT_EQ(merged.dp_size(), full.dp_size());
  job = Register(&registry, "a0", "node-0", merged, &txn);
  EXPECT_EQ(job->ranks(), (std::vector<uint32_t>{0, 1, 2, 3}));

  // Another agent's part is not borrowed; another epoch starts over.
  EXPECT_EQ(WithEarlierPart(*job, "a9", partial).ranks_size(), 1);
  falcon::v1::JobRegistration next_epoch = partial;
  next_epoch.set_epoch(full.epoch() + 1);
  EXPECT_EQ(WithEarlierPart(*job, "a0", next_epoch).ranks_size(), 1);
}

// S2L: the model's pipeline shape, as the agents register it, is the Job's (GetJob, ListJobs),
// survives a reload, and an agent that reports another model at the same epoch is refused naming
// the field and the agent that registered the first; 0 (unknown) agrees with anything.
TEST(JobRegistryTest, PipelineShapeReachesTheJobAndAgentsMustAgree) {
  LayoutSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  JobRegistry registry;
  store::StoreTxn txn;
  falcon::v1::JobRegistration r0 = NodeRegistration(spec, 0);
  r0.set_pipeline_blocks(16);
  r0.set_block_state_bytes(3 << 20);
  Register(&registry, "a0", "node-0", r0, &txn);
  JobEntry* job = Register(&registry, "a1", "node-1", NodeRegistration(spec, 1), &txn);
  EXPECT_EQ(job->job().pipeline_blocks(), 16u);
  EXPECT_EQ(job->job().block_state_bytes(), 3u << 20);
  EXPECT_EQ(job->View().pipeline_blocks(), 16u);

  falcon::v1::JobRegistration other = NodeRegistration(spec, 1);
  other.set_pipeline_blocks(12);
  util::MaybeFieldError e = registry.Check("a1", other, "reg");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "reg.pipeline_blocks");
  EXPECT_EQ(e->message(),
            "12 conflicts with pipeline_blocks 16 registered by agent 'a0' at epoch 1: every rank "
            "of a job must report the same model");
  other.set_pipeline_blocks(16);
  other.set_block_state_bytes(1);
  e = registry.Check("a1", other, "reg");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "reg.block_state_bytes");
  // An agent may change its own part's values while it is the only one with them.
  r0.set_pipeline_blocks(12);
  EXPECT_FALSE(registry.Check("a0", r0, "reg").has_value());
  // A new epoch (a relaunch) may run another model.
  r0.set_epoch(spec.epoch + 1);
  job = Register(&registry, "a0", "node-0", r0, &txn);
  EXPECT_EQ(job->job().pipeline_blocks(), 12u);

  // The shape is part of the stored record.
  JobRegistry reloaded;
  reloaded.Load({job->record()}, {{spec.job, job->parts().at("a0")}});
  EXPECT_EQ(reloaded.Find(spec.job)->job().pipeline_blocks(), 12u);
  EXPECT_EQ(reloaded.Find(spec.job)->job().block_state_bytes(), 3u << 20);

  // A rejoining agent's partial registration keeps the shape of its earlier part.
  falcon::v1::JobRegistration partial = r0;
  partial.set_pipeline_blocks(0);
  partial.set_block_state_bytes(0);
  const falcon::v1::JobRegistration merged = WithEarlierPart(*job, "a0", partial);
  EXPECT_EQ(merged.pipeline_blocks(), 12u);
  EXPECT_EQ(merged.block_state_bytes(), 3u << 20);
}

}  // namespace
}  // namespace falcon::controller::registry
