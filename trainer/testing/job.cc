#include "trainer/testing/job.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>

#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"

namespace falcon::trainer::testing {

model::ModelConfig SmallModel() {
  model::ModelConfig c;
  c.context = 6;
  c.embed_dim = 16;
  c.hidden = 64;
  c.ffn = 128;
  c.num_blocks = 4;
  c.micro_batch_size = 16;
  return c;
}

bool JobRun::ok() const {
  for (const common::testing::RankExit& e : exits) {
    if (!e.ok()) return false;
  }
  return !exits.empty();
}

JobRun RunJob(const JobSpec& spec, const std::string& tag) {
  JobRun run;
  run.dir = common::testing::FreshDir(tag);
  run.checkpoint_dir = spec.checkpoint_dir.empty() ? run.dir + "/final" : spec.checkpoint_dir;
  run.json_log = run.dir + "/log.jsonl";
  run.events = run.dir + "/events.jsonl";
  run.restart_file = run.dir + "/restart.json";
  const std::string rendezvous = run.dir + "/rendezvous";
  std::string script_path;
  if (!spec.directives.empty()) {
    script_path = run.dir + "/directives.jsonl";
    std::ofstream(script_path) << spec.directives;
  }
  const int world = spec.world > 0 ? spec.world : spec.dp * spec.pp;
  run.exits = common::testing::RunRanks(
      world,
      [&](int rank) {
        WorkerOptions o;
        o.trainer.model = spec.model;
        o.trainer.dp = spec.dp;
        o.trainer.pp = spec.pp;
        o.trainer.micro_batches = spec.micro_batches;
        o.trainer.steps = spec.steps;
        o.trainer.seed = spec.seed;
        o.trainer.checkpoint_dir = run.checkpoint_dir;
        o.trainer.resume_dir = spec.resume_dir;
        o.trainer.json_log_path = run.json_log;
        o.trainer.restart_file = run.restart_file;
        o.trainer.poll_interval = absl::Milliseconds(2);
        o.rank = rank;
        o.world_size = world;
        o.rendezvous_dir = rendezvous;
        o.faults = spec.faults;
        o.directives_path = script_path;
        o.events_path = run.events;
        o.comm_timeout = absl::Seconds(30);
        absl::StatusOr<RunResult> result = RunWorker(o);
        if (!result.ok()) {
          fprintf(stderr, "rank %d: %s\n", rank, std::string(result.status().message()).c_str());
          return 1;
        }
        return result->outcome == RunResult::Outcome::kCheckpointRestart ? kExitCheckpointRestart
                                                                         : 0;
      },
      spec.timeout);
  return run;
}

std::vector<std::vector<float>> ReadParams(const std::string& dir,
                                           const model::ModelConfig& model) {
  absl::StatusOr<checkpoint::CheckpointManifest> m = checkpoint::ReadManifest(dir);
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return {};
  }
  model::ModelConfig c = model;
  c.vocab_size = m->model.vocab_size;
  std::vector<std::vector<float>> out;
  for (int l = 0; l < c.num_layers(); ++l) {
    const int64_t n = LayerParamCount(c, l);
    std::vector<float> p(n), mm(n), v(n);
    if (absl::Status s = checkpoint::ReadLayer(dir, l, n, p.data(), mm.data(), v.data()); !s.ok()) {
      ADD_FAILURE() << s;
      return {};
    }
    out.push_back(std::move(p));
  }
  return out;
}

double MaxRelativeDiff(const std::vector<std::vector<float>>& a,
                       const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t l = 0; l < a.size(); ++l) {
    if (a[l].size() != b[l].size()) return std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < a[l].size(); ++i) {
      worst = std::max(worst, std::abs(double{a[l][i]} - b[l][i]) / (1.0 + std::abs(b[l][i])));
    }
  }
  return worst;
}

std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

std::vector<double> LossCurve(const std::vector<nlohmann::json>& log) {
  std::map<int64_t, double> by_iteration;
  for (const nlohmann::json& j : log) {
    if (j.value("rank", -1) == 0) by_iteration[j["iteration"].get<int64_t>()] = j["loss"];
  }
  std::vector<double> out;
  for (const auto& [it, loss] : by_iteration) out.push_back(loss);
  return out;
}

}  // namespace falcon::trainer::testing
