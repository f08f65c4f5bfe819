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
  std::optional<JobEntry> entry;
  util::MaybeFieldError e = registry->Merge(agent, node, reg, "reg", &entry);
  EXPECT_FALSE(e.has_value()) << e->field() << ": " << e->message();
  if (e) return nullptr;
  return registry->Install(std::move(*entry), txn);
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
  EXPECT_EQ(txn.size(), 2u);
  EXPECT_EQ(job->world_size(), 4u);
  EXPECT_EQ(job->ranks(), (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(job->job().nodes_size(), 2);
  EXPECT_EQ(*job->AgentOfRank(3), "agent-1");
  EXPECT_EQ(job->job().state(), falcon::v1::JOB_STATE_TRACKING);
  ASSERT_NE(job->FindComm(1000), nullptr);
  EXPECT_TRUE(job->FindComm(1000)->HasMember(1));
  EXPECT_FALSE(job->FindComm(1000)->HasMember(2));
  EXPECT_EQ(job->CommsOfRank(0).size(), 3u);  // world, dp.pp0, pp.dp0
  EXPECT_EQ(job->job().dp_size(), 2u);
  EXPECT_EQ(job->job().pp_size(), 2u);
}

TEST(JobRegistryTest, InfersRolesWithoutHints) {
  LayoutSpec spec;
  spec.dp = 4;
  spec.pp = 2;
  spec.ranks_per_node = 4;  // A DP group of one stage sits on one node: that is DP, not TP...
  spec.hint_kinds = false;
  spec.hint_layout = false;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  JobEntry* job = Register(&registry, "a1", "node-1", NodeRegistration(spec, 1), &txn);
  EXPECT_EQ(job->FindComm(1)->comm.kind(), falcon::v1::COMM_KIND_WORLD);
  // ...but without hints or traffic, a one-node group next to cross-node groups looks like TP;
  // observed collective traffic on the cross-node pairs and p2p traffic corrects the picture.
  EXPECT_EQ(job->FindComm(1000)->comm.kind(), falcon::v1::COMM_KIND_TP);
  EXPECT_EQ(job->FindComm(2000)->comm.kind(), falcon::v1::COMM_KIND_UNKNOWN);
  EXPECT_TRUE(job->ObserveTraffic(2000, 10, 0));
  EXPECT_EQ(job->FindComm(2000)->comm.kind(), falcon::v1::COMM_KIND_PP);
  EXPECT_EQ(job->job().communicators_size(), 7);
}

TEST(JobRegistryTest, ConflictsAreFieldErrors) {
  LayoutSpec spec;
  JobRegistry registry;
  store::StoreTxn txn;
  Register(&registry, "a0", "node-0", NodeRegistration(spec, 0), &txn);
  std::optional<JobEntry> out;

  falcon::v1::JobRegistration bigger = NodeRegistration(spec, 1);
  bigger.set_world_size(8);
  util::MaybeFieldError e = registry.Merge("a1", "node-1", bigger, "batch.registration", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "batch.registration.world_size");

  falcon::v1::JobRegistration older = NodeRegistration(spec, 1);
  older.set_epoch(0);
  e = registry.Merge("a1", "node-1", older, "reg", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field(), "reg.epoch");

  falcon::v1::JobRegistration other_members = NodeRegistration(spec, 1);
  for (auto& c : *other_members.mutable_communicators()) {
    if (c.comm_id() == 1) c.set_member_ranks(0, 3), c.set_member_ranks(3, 0);
  }
  e = registry.Merge("a1", "node-1", other_members, "reg", &out);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field().rfind("reg.communicators[", 0), 0u) << e->field();
  EXPECT_FALSE(out.has_value());
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
  reloaded.Load({job->record()});
  ASSERT_NE(reloaded.Find("job"), nullptr);
  EXPECT_EQ(reloaded.Find("job")->job().state(), falcon::v1::JOB_STATE_PROFILING);
  EXPECT_EQ(reloaded.Find("job")->ranks(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(reloaded.JobNames(), (std::vector<std::string>{"job"}));
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

}  // namespace
}  // namespace falcon::controller::registry
