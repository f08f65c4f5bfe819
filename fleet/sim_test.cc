#include <set>

#include "fleet/agents.h"
#include "fleet/layout.h"
#include "fleet/model.h"
#include "fleet/scenario.h"
#include "gtest/gtest.h"

namespace falcon::fleet {
namespace {

Layout Hybrid() {
  Layout l;
  l.job = "j";
  l.tp = 4;
  l.pp = 2;
  l.dp = 3;
  l.ranks_per_node = 4;
  return l;
}

TEST(LayoutTest, RanksNodesAndCommsAgree) {
  const Layout l = Hybrid();
  EXPECT_EQ(l.world(), 24u);
  EXPECT_EQ(l.nodes(), 6u);
  for (uint32_t r = 0; r < l.world(); ++r) {
    EXPECT_EQ(l.Rank(l.pp_index(r), l.dp_index(r), l.tp_index(r)), r);
    for (uint64_t c : {TpComm(l, r), DpComm(l, r), PpComm(l, r)}) {
      const std::vector<uint32_t> m = CommMembers(l, c);
      EXPECT_NE(std::find(m.begin(), m.end(), r), m.end()) << c;
    }
  }
  EXPECT_EQ(CommMembers(l, DpComm(l, 5)).size(), 3u);
  EXPECT_EQ(CommMembers(l, PpComm(l, 5)).size(), 2u);
  const falcon::v1::JobRegistration reg = NodeRegistration(l, 1);
  ASSERT_EQ(reg.ranks_size(), 4);
  EXPECT_EQ(reg.ranks(0).rank(), 4u);
  // world, one TP communicator, four DP communicators and four PP chains.
  EXPECT_EQ(reg.communicators_size(), 1 + 1 + 4 + 4);
}

TEST(ModelTest, ComputeFaultIsConsistentAcrossSummariesOpsAndValidation) {
  const Layout l = Hybrid();
  NoiseModel noise;
  JobModel m(l, Fault{Fault::Kind::kCompute, 5, 1.5, 10}, noise, 7, 1'000'000'000);
  falcon::v1::IterationSummary before, slow, peer;
  m.Fill(5, 9, &before);
  m.Fill(5, 10, &slow);
  m.Fill(6, 10, &peer);
  EXPECT_EQ(slow.iteration_time_ns(), peer.iteration_time_ns());
  EXPECT_GT(slow.iteration_time_ns(), m.BaseNs(10) * 1.25);
  EXPECT_GT(slow.compute_ns(), peer.compute_ns() * 1.4);
  EXPECT_LT(before.compute_ns(), slow.compute_ns() / 1.4);
  for (const auto* s : {&slow, &peer}) {
    int64_t busy = 0;
    for (const auto& c : s->comms()) {
      EXPECT_EQ(c.busy_ns(), c.wait_ns() + c.transfer_ns());
      busy += c.busy_ns();
    }
    EXPECT_NEAR(static_cast<double>(s->compute_ns() + busy),
                static_cast<double>(s->iteration_time_ns()), 4);
  }
  google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> ops;
  uint64_t seq = 0;
  m.AddOps(5, 10, &seq, &ops);
  ASSERT_EQ(ops.size(), slow.comms_size());
  EXPECT_EQ(ops[0].host_start_ns(), slow.start_ns() + slow.compute_ns());
  EXPECT_EQ(seq, static_cast<uint64_t>(ops.size()));
  EXPECT_GT(m.GemmNs(5), m.GemmNs(6) * 1.4);
  EXPECT_NEAR(static_cast<double>(m.LinkNs(5, 9)), 2e6, 1e5);
}

TEST(ModelTest, LinkFaultSlowsTheRingOfItsDpCommunicatorOnly) {
  const Layout l = Hybrid();
  NoiseModel noise;
  JobModel m(l, Fault{Fault::Kind::kLink, 5, 2.0, 0}, noise, 7, 1'000'000'000);
  EXPECT_EQ(m.link_dst(), l.Rank(l.pp_index(5), (l.dp_index(5) + 1) % 3, l.tp_index(5)));
  EXPECT_GT(m.LinkNs(5, m.link_dst()), m.LinkNs(m.link_dst(), 5) * 1.8);
  falcon::v1::IterationSummary member, other;
  m.Fill(m.link_dst(), 3, &member);
  m.Fill(6, 3, &other);
  auto dp_transfer = [&](const falcon::v1::IterationSummary& s, uint32_t r) {
    for (const auto& c : s.comms()) {
      if (c.comm_id() == DpComm(l, r)) return c.transfer_ns();
    }
    return int64_t{-1};
  };
  EXPECT_GT(dp_transfer(member, m.link_dst()), dp_transfer(other, 6) * 1.8);
  EXPECT_EQ(member.iteration_time_ns(), other.iteration_time_ns());
}

// With peer timing, each rank's raw ops carry its DP all-reduce's transfer to its ring successor;
// the slow link's is f times longer, the others are not.
TEST(ModelTest, PeerTransfersSingleOutTheSlowLink) {
  const Layout l = Hybrid();
  NoiseModel noise;
  JobModel m(l, Fault{Fault::Kind::kLink, 5, 2.0, 0}, noise, 7, 1'000'000'000);
  auto peer_send = [&](uint32_t r) {
    google::protobuf::RepeatedPtrField<falcon::v1::OpRecord> ops;
    uint64_t seq = 0;
    m.AddOps(r, 3, &seq, &ops);
    for (const auto& op : ops) {
      if (op.op_kind() == falcon::v1::OP_KIND_PEER_SEND) return op;
    }
    return falcon::v1::OpRecord();
  };
  EXPECT_EQ(peer_send(5).op_kind(), falcon::v1::OP_KIND_UNSPECIFIED) << "off by default";
  m.set_peer_timing(true);
  const falcon::v1::OpRecord slow = peer_send(5);
  ASSERT_EQ(slow.op_kind(), falcon::v1::OP_KIND_PEER_SEND);
  EXPECT_EQ(static_cast<uint32_t>(slow.peer()), m.link_dst());
  EXPECT_EQ(slow.comm_id(), DpComm(l, 5));
  const falcon::v1::OpRecord fine = peer_send(m.link_dst());
  ASSERT_EQ(fine.op_kind(), falcon::v1::OP_KIND_PEER_SEND);
  EXPECT_EQ(fine.bytes(), slow.bytes());
  EXPECT_GT(slow.device_duration_ns(), fine.device_duration_ns() * 1.8);
  EXPECT_LT(slow.device_duration_ns(), fine.device_duration_ns() * 2.2);
}

TEST(ModelTest, NoiseIsDeterministicAndFitted) {
  NoiseModel noise;
  JobModel a(Hybrid(), Fault{}, noise, 3, 1000000), b(Hybrid(), Fault{}, noise, 3, 1000000);
  EXPECT_EQ(a.BaseNs(50), b.BaseNs(50));
  std::vector<common::AlibabaWorkerSeries> workers(1);
  workers[0].values = {1, 1.1, 0.9, 1, 1.05, 0.95};
  absl::StatusOr<NoiseModel> fitted = FitNoiseModel(workers);
  ASSERT_TRUE(fitted.ok());
  EXPECT_GT(fitted->sigma, 0.05);
  EXPECT_LT(fitted->sigma, 0.1);
  EXPECT_FALSE(FitNoiseModel({}).ok());
  NoiseModel replay = ReplayModel(workers);
  JobModel r(Hybrid(), Fault{}, replay, 3, 1000);
  EXPECT_EQ(r.BaseNs(1), 1100);
}

TEST(ScenarioTest, RoundTripsAndRejectsBadJobs) {
  Scenario s;
  s.jobs.push_back({Hybrid(), Fault{Fault::Kind::kLink, 5, 1.5, 30}});
  s.jobs.push_back({Hybrid(), Fault{}});
  s.jobs[1].layout.job = "k";
  absl::StatusOr<Scenario> back = ParseScenario(EncodeScenario(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(EncodeScenario(*back), EncodeScenario(s));
  EXPECT_EQ(back->Nodes().size(), 12u);
  EXPECT_EQ(back->Ranks(), 48u);
  EXPECT_FALSE(ParseScenario("a,1,1,1,8,c:5:1.5:3").ok());  // Rank outside the world.
  EXPECT_FALSE(ParseScenario("a,0,1,1,8,-").ok());
  EXPECT_FALSE(ParseScenario("").ok());
}

TEST(ReportTest, SerializesAndMerges) {
  FleetReport a;
  a.summaries = 10;
  a.foreign = 1;
  a.streams_lost = 3;
  a.ack_rtt.Add(absl::Milliseconds(2));
  a.tasks[{"j", 4}] = {"gemm", 100};
  a.directives[{"j", 7}] = {"pause", 10, 20, 2};
  absl::StatusOr<FleetReport> b = FleetReport::Parse(a.Serialize());
  ASSERT_TRUE(b.ok()) << b.status();
  b->directives[{"j", 7}] = {"pause", 5, 15, 3};
  a.Merge(*b);
  EXPECT_EQ(a.summaries, 20u);
  EXPECT_EQ(a.foreign, 2u);
  EXPECT_EQ(a.streams_lost, 6u);
  EXPECT_EQ(a.ack_rtt.count(), 2u);
  EXPECT_EQ(a.directives[std::make_pair(std::string("j"), uint64_t{7})].first_ns, 5);
  EXPECT_EQ(a.directives[std::make_pair(std::string("j"), uint64_t{7})].last_ns, 20);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(a.ack_rtt.Quantile(0.5)), 2, 0.15);
  EXPECT_FALSE(FleetReport::Parse("bogus 1").ok());
}

}  // namespace
}  // namespace falcon::fleet
