// trainer_bench: figures of the reference trainer on this machine (`./falcon bench`).
//   1. Compute per micro-batch and stage (forward + backward), default model, DP=4 x PP=2 split.
//   2. DP=4 x PP=2 with the CPU defaults: CPU time per iteration of all ranks (from rusage, so
//      a loaded machine does not distort it) and the rate it allows on 2 idle cores (target
//      5-20), and the rate measured now.
//   3. A compute fail-slow (rank 3 at 2x from iteration 12): iteration time before and during.
//   4. S3 remap pause (swap ranks 1 and 4 mid-run) and the state it moved.
// Prints a table: figure, value, target. Finishes in well under a minute on 2 cores.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/stats.h"
#include "trainer/directives/remap.h"
#include "trainer/model/corpus.h"
#include "trainer/model/stage_model.h"
#include "trainer/testing/job.h"

namespace falcon::trainer {
namespace {

model::ModelConfig DefaultModel(int vocab) {
  model::ModelConfig c;  // The defaults of falcon_train.
  c.vocab_size = vocab;
  return c;
}

// CPU seconds (user + system) of the waited-for child processes so far.
double ChildrenCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Rank-0 iteration times for iterations in [from, to).
std::vector<double> Times(const std::vector<nlohmann::json>& log, int64_t from, int64_t to) {
  std::vector<double> out;
  for (const auto& j : log) {
    const int64_t it = j["iteration"];
    if (j["rank"] == 0 && it >= from && it < to) out.push_back(j["iteration_time_s"]);
  }
  return out;
}

void Row(const char* figure, const std::string& value, const char* target) {
  std::printf("%-58s %-22s %s\n", figure, value.c_str(), target);
}

int Main() {
  absl::StatusOr<model::Corpus> corpus = model::Corpus::Load(model::kDefaultCorpusPath);
  if (!corpus.ok()) {
    std::fprintf(stderr, "%s\n", std::string(corpus.status().message()).c_str());
    return 1;
  }
  const model::ModelConfig c = DefaultModel(corpus->vocab_size());
  std::printf("%-58s %-22s %s\n", "figure", "value", "target");

  {  // 1. Compute per micro-batch.
    model::StageModel s0(c, LayersOfStage(c, 2, 0)), s1(c, LayersOfStage(c, 2, 1));
    s0.InitParams(1);
    s1.InitParams(1);
    std::vector<int32_t> ctx(c.micro_batch_size * c.context), tgt(c.micro_batch_size);
    std::vector<float> act(c.activation_floats()), grad(c.activation_floats());
    const int n = 40;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      corpus->FillMicroBatch(1, 0, i, c.micro_batch_size, c.context, ctx.data(), tgt.data());
      s0.Forward(i, ctx.data(), nullptr, nullptr, 0, act.data());
      s1.Forward(i, nullptr, act.data(), tgt.data(), 1e-3f, nullptr);
      s1.Backward(i, nullptr, grad.data());
      s0.Backward(i, grad.data(), nullptr);
    }
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count() /
        (2 * n);
    Row("compute per micro-batch per stage (fwd+bwd), ms", absl::StrFormat("%.2f", ms),
        "visible next to comm");
    Row("parameters per stage (stage 0 / stage 1)",
        absl::StrFormat("%d / %d", s0.num_params(), s1.num_params()), "-");
  }

  testing::JobSpec spec;
  spec.dp = 4;
  spec.pp = 2;
  spec.micro_batches = 8;
  spec.model = c;
  spec.timeout = absl::Seconds(40);
  {  // 2. CPU time per iteration of all ranks (children's rusage), less start-up: what bounds the
     // rate on 2 idle cores, whatever else loads the machine now.
    double cpu[2] = {0, 0};
    const int64_t steps[2] = {4, 16};
    std::vector<nlohmann::json> log;
    for (int i = 0; i < 2; ++i) {
      spec.steps = steps[i];
      const double before = ChildrenCpuSeconds();
      const testing::JobRun run = testing::RunJob(spec, "bench_cpu");
      cpu[i] = ChildrenCpuSeconds() - before;
      if (!run.ok()) {
        std::fprintf(stderr, "DP=4 x PP=2 run failed: %s\n",
                     common::testing::Describe(run.exits).c_str());
        return 1;
      }
      log = testing::ReadJsonLines(run.json_log);
    }
    const double per_iteration = (cpu[1] - cpu[0]) / (steps[1] - steps[0]);
    const double measured = common::Median(Times(log, 2, 16));
    Row("DP=4 x PP=2 CPU per iteration, all 8 ranks, ms",
        absl::StrFormat("%.1f", per_iteration * 1e3), "-");
    Row("DP=4 x PP=2 iterations/s on 2 idle cores (CPU bound)",
        absl::StrFormat("%.1f", per_iteration > 0 ? 2.0 / per_iteration : 0), "5-20");
    Row("DP=4 x PP=2 iterations/s measured now (machine shared)",
        absl::StrFormat("%.1f", measured > 0 ? 1.0 / measured : 0), "-");
  }
  {  // 3. Rank 3 computes 2x slower from iteration 12 (burning CPU, the default).
    spec.steps = 24;
    spec.faults = "compute:rank=3,factor=2,from=12";
    const testing::JobRun run = testing::RunJob(spec, "bench_fault");
    if (!run.ok()) {
      std::fprintf(stderr, "DP=4 x PP=2 run failed: %s\n",
                   common::testing::Describe(run.exits).c_str());
      return 1;
    }
    const auto log = testing::ReadJsonLines(run.json_log);
    const double healthy = common::Median(Times(log, 2, 12));
    const double slow = common::Median(Times(log, 14, 24));
    Row("iteration time healthy -> rank 3 at 2x compute, ms",
        absl::StrFormat("%.1f -> %.1f (x%.2f)", healthy * 1e3, slow * 1e3,
                        healthy > 0 ? slow / healthy : 0),
        "> x1.1 (verification)");
  }
  {  // 4. S3 remap.
    spec.faults = "";
    spec.steps = 12;
    spec.directives =
        R"({"directive": {"directive_id": 1, "effective_iteration": 6, "plan_version": 1,)"
        R"( "topology_change": {"assignments": [)"
        R"({"rank": 0, "dp_index": 0, "pp_index": 0}, {"rank": 1, "dp_index": 0, "pp_index": 1},)"
        R"({"rank": 2, "dp_index": 2, "pp_index": 0}, {"rank": 3, "dp_index": 3, "pp_index": 0},)"
        R"({"rank": 4, "dp_index": 1, "pp_index": 0}, {"rank": 5, "dp_index": 1, "pp_index": 1},)"
        R"({"rank": 6, "dp_index": 2, "pp_index": 1}, {"rank": 7, "dp_index": 3, "pp_index": 1}]}}})"
        "\n";
    const testing::JobRun run = testing::RunJob(spec, "bench_s3");
    double pause = 0;
    for (const auto& j : testing::ReadJsonLines(run.json_log)) {
      if (j["iteration"] == 6) pause = std::max(pause, j["pause_s"].get<double>());
    }
    const analysis::plan::Layout from = *analysis::plan::Layout::Default(8, 4, 2);
    const analysis::plan::Layout to = *analysis::plan::Layout::Create({{0, "", 0, 0, 0},
                                                                       {1, "", 0, 1, 0},
                                                                       {2, "", 2, 0, 0},
                                                                       {3, "", 3, 0, 0},
                                                                       {4, "", 1, 0, 0},
                                                                       {5, "", 1, 1, 0},
                                                                       {6, "", 2, 1, 0},
                                                                       {7, "", 3, 1, 0}});
    Row("S3 remap pause (swap ranks 1 and 4), ms", absl::StrFormat("%.1f", pause * 1e3),
        "< 60 s (paper)");
    Row("S3 state moved, MiB",
        absl::StrFormat("%.2f",
                        directives::RemapBytes(c, directives::PlanRemap(c, from, to)) / 1048576.0),
        "-");
  }
  return 0;
}

}  // namespace
}  // namespace falcon::trainer

int main() { return falcon::trainer::Main(); }
