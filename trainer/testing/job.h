// Test helper: runs a whole training job as forked rank processes over Gloo on loopback
// (trainer/worker.h), and reads back its final checkpoint, JSON log and events.
#ifndef FALCON_TRAINER_TESTING_JOB_H_
#define FALCON_TRAINER_TESTING_JOB_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/testing/multiprocess.h"
#include "nlohmann/json.hpp"
#include "trainer/model/model_config.h"
#include "trainer/worker.h"

namespace falcon::trainer::testing {

// A model small enough for multi-process tests on two loaded cores.
model::ModelConfig SmallModel();

struct JobSpec {
  int dp = 1;
  int pp = 1;
  int micro_batches = 4;
  int64_t steps = 4;
  uint64_t seed = 7;
  model::ModelConfig model = SmallModel();
  int world = 0;               // 0: dp * pp.
  std::string directives;      // Script text (directives/scripted_hooks.h); empty: none.
  std::string faults;          // Fault spec; empty: none.
  std::string resume_dir;      // Resume from this checkpoint.
  std::string checkpoint_dir;  // Final checkpoint dir; empty: <dir>/final.
  absl::Duration timeout = absl::Seconds(50);
};

struct JobRun {
  std::vector<common::testing::RankExit> exits;
  std::string dir;             // Fresh directory of the run.
  std::string checkpoint_dir;  // Final checkpoint.
  std::string json_log;
  std::string events;
  std::string restart_file;
  bool ok() const;
};

// Runs `spec` (blocking). Each child exits 0 after a completed run, 75 after an S4
// checkpoint-restart, 1 on error (printed to stderr).
JobRun RunJob(const JobSpec& spec, const std::string& tag);

// Every layer's parameters (index = layer) from a checkpoint; empty on error (test failure added).
std::vector<std::vector<float>> ReadParams(const std::string& checkpoint_dir,
                                           const model::ModelConfig& model);
// Largest |a - b| / (1 + |b|) over all parameters; +inf when the shapes differ.
double MaxRelativeDiff(const std::vector<std::vector<float>>& a,
                       const std::vector<std::vector<float>>& b);

// The JSON lines of a file (skips unparsable lines).
std::vector<nlohmann::json> ReadJsonLines(const std::string& path);
// Loss per iteration from a JSON log (rank 0's lines).
std::vector<double> LossCurve(const std::vector<nlohmann::json>& log);

}  // namespace falcon::trainer::testing

#endif  // FALCON_TRAINER_TESTING_JOB_H_
