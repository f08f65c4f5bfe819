// Standalone TrainerHooks for `falcon_train --directives FILE` and the tests: directives and
// validation tasks come from a script; acks and validation results go to an optional events file
// (JSON lines) and are kept in memory.
//
// Script: one JSON object per line ('#' lines and blank lines are skipped), either
//   {"directive": <falcon.v1.Directive in proto3 JSON>, "deliver_at": I, "ranks": [R, ...]}
//   {"validation_task": <falcon.v1.ValidationTask in proto3 JSON>, "iteration": I,
//    "after_polls": P}
// Any directive kind is written as its proto3 JSON, e.g. an S2 plan
//   {"directive": {"directive_id": 3, "effective_iteration": 5, "plan_version": 1,
//                  "micro_batch_plan": {"micro_batches": [6, 2]}}}
// and an S2L layer split (blocks per stage of each DP group's pipeline, and its micro-batches)
//   {"directive": {"directive_id": 4, "effective_iteration": 8, "plan_version": 2,
//                  "layer_split": {"replicas": [{"stage_blocks": [3, 5]}, {"stage_blocks": [4,
//                  4]}],
//                                  "micro_batches": [3, 5]}}}
// Directives are delivered once, at the first PollDirectives(iteration) with
// iteration >= deliver_at (default: the directive's effective_iteration), to the ranks listed in
// "ranks" (default: every rank; agents deliver to the ranks of different nodes at different
// times, and a line per group of ranks emulates that); a Resume is held back while a validation
// task due at or before that iteration has not been delivered yet, so scripted tasks run inside
// the pause.
// Tasks are delivered once, at the first PollValidationTasks(iteration) with iteration >= I
// (default 0), i.e. while the trainer is paused at or after iteration I; with "after_polls" P, at
// the (P + 1)-th such poll.
//
// Events file lines: {"event":"ack","rank":R,"directive_id":D,"status":"ACK_STATUS_APPLIED",
// "reason":"...","applied_iteration":I} and {"event":"validation","rank":R,"result":{...}}.
//
// Thread-compatible (called from the training thread only).
#ifndef FALCON_TRAINER_DIRECTIVES_SCRIPTED_HOOKS_H_
#define FALCON_TRAINER_DIRECTIVES_SCRIPTED_HOOKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trainer/hooks.h"

namespace falcon::trainer::directives {

struct ScriptedTask {
  int64_t iteration = 0;
  // Delivered only at the (after_polls + 1)-th poll at or after `iteration` (as when another
  // node's agent delivers its part of a validation later).
  int after_polls = 0;
  falcon::v1::ValidationTask task;
};

struct ScriptedDirective {
  falcon::v1::Directive directive;
  int64_t deliver_at = -1;  // -1: at directive.effective_iteration().
  std::vector<int> ranks;   // Empty: every rank.
};

struct DirectiveScript {
  std::vector<ScriptedDirective> directives;
  std::vector<ScriptedTask> tasks;
};

// The largest script LoadDirectiveScript reads.
inline constexpr uint64_t kMaxDirectiveScriptBytes = uint64_t{16} << 20;

// Parses a script (format above). kInvalidArgument naming the line and the JSON position or the
// proto JSON error.
absl::StatusOr<DirectiveScript> ParseDirectiveScript(absl::string_view text);
// Reads and parses a script file. kNotFound when it cannot be read; kInvalidArgument for a
// directory; kResourceExhausted above kMaxDirectiveScriptBytes.
absl::StatusOr<DirectiveScript> LoadDirectiveScript(const std::string& path);

struct RecordedAck {
  uint64_t directive_id = 0;
  falcon::v1::AckStatus status = falcon::v1::ACK_STATUS_UNSPECIFIED;
  std::string reason;
  int64_t applied_iteration = -1;
};

class ScriptedHooks : public TrainerHooks {
 public:
  // `rank` labels the events; `events_path` empty: keep events in memory only.
  ScriptedHooks(DirectiveScript script, int rank, std::string events_path = "");

  std::vector<falcon::v1::Directive> PollDirectives(int64_t iteration) override;
  void Ack(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
           const std::string& reason, int64_t applied_iteration) override;
  std::vector<falcon::v1::ValidationTask> PollValidationTasks(int64_t iteration) override;
  void ReportValidation(const falcon::v1::ValidationResult& result) override;
  void OnIteration(const IterationReport& report) override { reports_.push_back(report); }

  const std::vector<RecordedAck>& acks() const { return acks_; }
  const std::vector<falcon::v1::ValidationResult>& results() const { return results_; }
  const std::vector<IterationReport>& reports() const { return reports_; }

 private:
  void AppendEvent(const std::string& line) const;

  DirectiveScript script_;
  std::vector<bool> directive_sent_;
  std::vector<bool> task_sent_;
  std::vector<int> task_polls_;  // Polls at or after its iteration so far, per task.
  int rank_;
  std::string events_path_;
  std::vector<RecordedAck> acks_;
  std::vector<falcon::v1::ValidationResult> results_;
  std::vector<IterationReport> reports_;
};

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_SCRIPTED_HOOKS_H_
