// One rank in process (trainer/worker.h), its ops seen through the comm runtime's observer: the
// iteration stamps the agent assigns op time by.
#include "trainer/worker.h"

#include <map>
#include <mutex>
#include <vector>

#include "common/testing/multiprocess.h"
#include "gtest/gtest.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

class Recorder final : public collective::OpObserver {
 public:
  void OnOp(const collective::OpEvent& event) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.push_back(event);
  }
  void OnCommCreated(const collective::CommInfo& info) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    if (info.parent_comm_id == 0) world_ = info.comm_id;
  }
  std::vector<collective::OpEvent> ops() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ops_;
  }
  uint64_t world() const {
    std::lock_guard<std::mutex> lock(mu_);
    return world_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<collective::OpEvent> ops_;
  uint64_t world_ = 0;
};

class Reports final : public TrainerHooks {
 public:
  void OnIteration(const IterationReport& report) override { reports[report.iteration] = report; }
  std::map<int64_t, IterationReport> reports;
};

// The agreement at the boundary after iteration t ends t (its report's end is when it completes):
// its op is stamped t, so the agent counts it as that iteration's communication (with the wait
// for the slowest rank in it) and not as compute. Before, it was stamped t + 1 and fell outside
// both iterations, and a rank waiting there for a slow peer seemed to compute that long.
TEST(WorkerTest, TheBoundaryAgreementBelongsToTheIterationItEnds) {
  const std::string dir = common::testing::FreshDir("worker_boundary");
  WorkerOptions o;
  o.trainer.model = testing::SmallModel();
  o.trainer.micro_batches = 2;
  o.trainer.steps = 4;
  o.rendezvous_dir = dir + "/rendezvous";
  Recorder recorder;
  o.observer = &recorder;
  Reports hooks;
  absl::StatusOr<RunResult> result = RunWorker(o, &hooks);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(hooks.reports.size(), 4u);
  ASSERT_NE(recorder.world(), 0u);
  for (const auto& [t, report] : hooks.reports) {
    // The last world op that completes by the report's end: the agreement that ended t.
    const collective::OpEvent* last = nullptr;
    for (const collective::OpEvent& op : recorder.ops()) {
      if (op.comm_id != recorder.world() || op.host_end_ns > report.end_ns) continue;
      if (last == nullptr || op.host_end_ns > last->host_end_ns) last = &op;
    }
    ASSERT_NE(last, nullptr) << "iteration " << t;
    EXPECT_GE(last->host_start_ns, report.start_ns) << "iteration " << t;
    EXPECT_EQ(last->iteration, t);
  }
}

}  // namespace
}  // namespace falcon::trainer
