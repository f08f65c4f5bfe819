// Reading iteration-time traces for `falcon_plan escalate`.
//
// Format: CSV with a header naming the columns iteration,iteration_time_s,cause (any order;
// other columns ignored), one row per iteration in order, each with the header's number of
// columns (trailing empty fields aside; a short row is an error naming the missing column). Blank
// lines and lines starting with '#' are skipped. `cause` says what the detector knew at that
// iteration:
//   none (or healthy, or empty)  no fail-slow;
//   compute | communication (or comm) | unknown   a fail-slow of that cause is active.
// A run of rows with the same cause is one event; it clears at the next `none` row.
//   iteration,iteration_time_s,cause
//   0,1.00,none
//   1,1.52,compute
// Thread-compatible; no I/O.
#ifndef FALCON_CLI_PLAN_TRACE_IO_H_
#define FALCON_CLI_PLAN_TRACE_IO_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "analysis/plan/escalation.h"

namespace falcon::cli::plan {

struct TraceRow {
  int64_t iteration = 0;
  absl::Duration iteration_time;               // > 0
  std::optional<analysis::plan::Cause> cause;  // nullopt: healthy
  int line = 0;                                // line number in the file, for messages
};

// kInvalidArgument naming "source:line: column ..." for a missing header column, a non-numeric
// or non-positive time, an unknown cause, iterations that do not increase, or no rows.
absl::StatusOr<std::vector<TraceRow>> ParseTrace(absl::string_view text, absl::string_view source);

}  // namespace falcon::cli::plan

#endif  // FALCON_CLI_PLAN_TRACE_IO_H_
