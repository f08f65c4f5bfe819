// Injecting a scenario's faults from outside the job (the kernel fault driver, chaos/) at the
// iterations the scenario names: the trainer's JSON log says which iteration the job finished
// (IterationTail), and FaultSchedule says which faults to apply or remove once it is reached.
// A fault active in [from, to) is applied when iteration from - 1 is finished (so it slows
// iteration `from` on) and removed when iteration to - 1 is. A schedule may hold its faults until
// the controller's detection is armed (HoldUntilArmed): a fault that starts while the detectors
// still learn the job's healthy level becomes part of that level and is never detected, which
// scores a run as a miss for the warm-up's sake (seen in scenario-bench runs on a loaded machine,
// detection armed at iteration 69 for a fault from 66).
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

  // Iterations a held fault waits after the one detection was armed at.
  static constexpr int64_t kArmedMargin = 10;

  // From now on no fault is applied before Armed() is called, and then not before iteration
  // armed + kArmedMargin. A fault held past its `from` keeps its length: its window moves on by
  // the delay (from() / to() below say where it lies).
  void HoldUntilArmed() { hold_ = true; }
  // Whether HoldUntilArmed was called and Armed was not.
  bool Waiting() const { return hold_ && armed_ < 0; }
  // Detection was armed at job iteration `iteration` (>= 0).
  void Armed(int64_t iteration) { armed_ = iteration; }

  // The steps due once the job has finished `iteration` that were not returned before, applies
  // before removes of the same iteration, in fault order. A fault whose window is already over
  // when first seen is neither applied nor removed (a held one never is: its window moves).
  std::vector<Step> Advance(int64_t finished_iteration);

  // Fault i's window as it stands (moved on when it was held).
  int64_t from(int i) const { return faults_[i].fault.from_iteration; }
  int64_t to(int i) const { return faults_[i].fault.to_iteration; }

  // Every applied fault not removed yet (the runner removes them at the end of the run).
  std::vector<int> Active() const;

 private:
  struct State {
    InjectedFault fault;
    bool applied = false;
    bool removed = false;
  };
  std::vector<State> faults_;
  bool hold_ = false;
  int64_t armed_ = -1;
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
