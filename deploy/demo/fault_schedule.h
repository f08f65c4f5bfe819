// Injecting a scenario's faults from outside the job (the kernel fault driver, chaos/) at the
// iterations the scenario names: the trainer's JSON log says which iteration the job finished
// (IterationTail), and FaultSchedule says which faults to apply or remove once it is reached.
// A fault active in [from, to) is applied when iteration from - 1 is finished (so it slows
// iteration `from` on) and removed when iteration to - 1 is.
#ifndef FALCON_DEPLOY_DEMO_FAULT_SCHEDULE_H_
#define FALCON_DEPLOY_DEMO_FAULT_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/demo/scenario.h"

namespace falcon::deploy::demo {

class FaultSchedule {
 public:
  struct Step {
    int fault = 0;      // Index into the scenario's faults.
    bool apply = true;  // false: remove.
  };

  explicit FaultSchedule(std::vector<InjectedFault> faults);

  // The steps due once the job has finished `iteration` that were not returned before, applies
  // before removes of the same iteration, in fault order. A fault whose window is already over
  // when first seen is neither applied nor removed.
  std::vector<Step> Advance(int64_t finished_iteration);

  // Every applied fault not removed yet (the runner removes them at the end of the run).
  std::vector<int> Active() const;

 private:
  struct State {
    InjectedFault fault;
    bool applied = false;
    bool removed = false;
  };
  std::vector<State> faults_;
};

// Follows a trainer JSON log (one line per iteration per rank, trainer/README.md) as it grows:
// reads only what was appended since the last call, complete lines only.
class IterationTail {
 public:
  explicit IterationTail(std::string path) : path_(std::move(path)) {}
  // The highest iteration of any complete line so far; -1 before the first (or while the file
  // does not exist). Malformed lines are skipped and counted.
  int64_t Latest();
  int64_t malformed_lines() const { return malformed_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
  int64_t latest_ = -1;
  int64_t malformed_ = 0;
};

}  // namespace falcon::deploy::demo

#endif  // FALCON_DEPLOY_DEMO_FAULT_SCHEDULE_H_
