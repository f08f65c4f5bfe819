#include "trainer/directives/validation_executor.h"

#include <memory>
#include <string>

#include "collective/comm_runtime.h"
#include "collective/fault/recording_sleeper.h"
#include "collective/gloo/gloo_communicator.h"
#include "common/clock.h"
#include "common/testing/multiprocess.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::trainer::directives {
namespace {

using ::testing::HasSubstr;

falcon::v1::ValidationTask Gemm(uint32_t m, uint32_t n, uint32_t k, uint32_t repeats) {
  falcon::v1::ValidationTask t;
  t.set_task_id(1);
  t.set_job("j");
  t.add_ranks(0);
  t.mutable_gemm()->set_m(m);
  t.mutable_gemm()->set_n(n);
  t.mutable_gemm()->set_k(k);
  t.mutable_gemm()->set_repeats(repeats);
  return t;
}

falcon::v1::ValidationTask LinkPass(std::vector<std::pair<int, int>> links, uint64_t bytes) {
  falcon::v1::ValidationTask t;
  t.set_task_id(2);
  t.add_ranks(0);
  t.add_ranks(1);
  falcon::v1::LinkPassTest* l = t.mutable_link_pass();
  l->set_bytes(bytes);
  l->set_repeats(2);
  for (auto [src, dst] : links) {
    falcon::v1::Link* link = l->add_links();
    link->set_src_rank(src);
    link->set_dst_rank(dst);
  }
  return t;
}

TEST(ValidationExecutorTest, MalformedTasksNameTheField) {
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(Gemm(0, 4, 4, 1), 1).message()),
              HasSubstr("gemm.m = 0"));
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(Gemm(4, 4, 4, 101), 1).message()),
              HasSubstr("gemm.repeats"));
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(Gemm(65536, 65536, 65536, 1), 1).message()),
              HasSubstr("bytes"));
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(Gemm(4096, 4096, 4096, 100), 1).message()),
              HasSubstr("FLOP"));
  falcon::v1::ValidationTask huge = LinkPass({{0, 1}}, 1 << 30);
  huge.mutable_link_pass()->set_repeats(10);
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(huge, 2).message()),
              HasSubstr("bytes per link"));
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(LinkPass({{0, 0}}, 8), 2).message()),
              HasSubstr("links[0]"));
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(LinkPass({{0, 1}}, 8), 1).message()),
              HasSubstr("ranks[1] = 1"));
  falcon::v1::ValidationTask empty;
  empty.set_task_id(3);
  empty.add_ranks(0);
  EXPECT_THAT(std::string(ValidationExecutor::CheckTask(empty, 1).message()),
              HasSubstr("neither gemm nor link_pass"));
  EXPECT_TRUE(ValidationExecutor::CheckTask(Gemm(8, 8, 8, 1), 1).ok());
}

struct OneRank {
  common::RealClock clock;
  std::shared_ptr<collective::CommRuntime> runtime;
  std::unique_ptr<collective::Communicator> world;
};

std::unique_ptr<OneRank> MakeRank(int rank, int world, const std::string& dir,
                                  std::vector<collective::fault::LinkFault> links = {}) {
  auto r = std::make_unique<OneRank>();
  collective::CommRuntimeOptions o;
  o.rank = rank;
  o.clock = &r->clock;
  o.link_faults = std::move(links);
  r->runtime = std::make_shared<collective::CommRuntime>(o);
  collective::gloo::GlooWorldOptions w;
  w.rank = rank;
  w.world_size = world;
  w.rendezvous_dir = dir;
  w.timeout = absl::Seconds(20);
  absl::StatusOr<std::unique_ptr<collective::Communicator>> c =
      collective::gloo::CreateGlooWorld(w, r->runtime);
  if (!c.ok()) return nullptr;
  r->world = *std::move(c);
  return r;
}

TEST(ValidationExecutorTest, GemmIsTimedAndStretchedByTheComputeFault) {
  std::unique_ptr<OneRank> r = MakeRank(0, 1, common::testing::FreshDir("gemm"));
  ASSERT_NE(r, nullptr);
  collective::fault::RecordingSleeper sleeper;
  collective::fault::ComputeFault fault;
  fault.rank = 0;
  fault.factor = 3.0;
  collective::fault::ComputeSlowdown slowdown({fault}, 0, &sleeper);
  ValidationExecutor executor(r->world.get(), r->runtime.get(), &slowdown, &r->clock);
  const falcon::v1::ValidationTask task = Gemm(64, 48, 32, 4);
  EXPECT_TRUE(executor.Participates(task));
  const falcon::v1::ValidationResult result = executor.Run(task);
  EXPECT_EQ(result.error(), "");
  EXPECT_EQ(result.task_id(), 1u);
  EXPECT_EQ(result.rank(), 0u);
  EXPECT_GT(result.gemm_duration_ns(), 0);
  EXPECT_GT(result.gemm_flops(), 0);
  // Warm-up plus 4 timed runs, each stretched by (factor - 1) x its compute time.
  ASSERT_EQ(sleeper.spent().size(), 5u);
  for (absl::Duration d : sleeper.spent()) EXPECT_GT(d, absl::ZeroDuration());
}

TEST(ValidationExecutorTest, GemmRunsWhileThePauseGateHoldsOtherOps) {
  std::unique_ptr<OneRank> r = MakeRank(0, 1, common::testing::FreshDir("gate"));
  ASSERT_NE(r, nullptr);
  ValidationExecutor executor(r->world.get(), r->runtime.get(), nullptr, &r->clock);
  r->runtime->pause_gate().Pause(absl::Seconds(30));
  const falcon::v1::ValidationResult result = executor.Run(Gemm(8, 8, 8, 1));
  r->runtime->pause_gate().Resume();
  EXPECT_EQ(result.error(), "");
  EXPECT_GT(result.gemm_duration_ns(), 0);
}

TEST(ValidationExecutorTest, MalformedTaskGivesAnErrorResult) {
  std::unique_ptr<OneRank> r = MakeRank(0, 1, common::testing::FreshDir("bad"));
  ASSERT_NE(r, nullptr);
  ValidationExecutor executor(r->world.get(), r->runtime.get(), nullptr, &r->clock);
  const falcon::v1::ValidationResult result = executor.Run(Gemm(0, 8, 8, 1));
  EXPECT_THAT(result.error(), HasSubstr("gemm.m"));
  EXPECT_EQ(result.gemm_duration_ns(), 0);
}

TEST(ValidationExecutorTest, LinkPassTimesEachLinkAtItsSender) {
  const std::string dir = common::testing::FreshDir("links");
  // The 1 -> 0 link is slowed by 30 ms per message; 0 -> 1 is not.
  collective::fault::LinkFault slow;
  slow.src = 1;
  slow.dst = 0;
  slow.delay = absl::Milliseconds(30);
  const std::vector<common::testing::RankExit> exits = common::testing::RunRanks(
      2,
      [&](int rank) {
        std::unique_ptr<OneRank> r = MakeRank(rank, 2, dir, {slow});
        if (r == nullptr) return 2;
        ValidationExecutor executor(r->world.get(), r->runtime.get(), nullptr, &r->clock);
        // Two passes of a ring of 2, as the controller's pass plan gives them.
        const falcon::v1::ValidationResult a = executor.Run(LinkPass({{0, 1}}, 4096));
        const falcon::v1::ValidationResult b = executor.Run(LinkPass({{1, 0}}, 4096));
        if (!a.error().empty() || !b.error().empty()) return 3;
        const falcon::v1::ValidationResult& sent = rank == 0 ? a : b;
        const falcon::v1::ValidationResult& received = rank == 0 ? b : a;
        if (sent.links_size() != 1 || received.links_size() != 0) return 4;
        if (sent.links(0).link().src_rank() != static_cast<uint32_t>(rank)) return 5;
        if (sent.links(0).bytes() != 4096 || sent.links(0).duration_ns() <= 0) return 6;
        // The injected delay is a lower bound of every round trip over the slow link.
        if (rank == 1 && sent.links(0).duration_ns() < 30'000'000) return 7;
        return 0;
      },
      absl::Seconds(40));
  for (const common::testing::RankExit& e : exits)
    EXPECT_TRUE(e.ok()) << common::testing::Describe(exits);
}

}  // namespace
}  // namespace falcon::trainer::directives
