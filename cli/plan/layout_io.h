// Reading and writing job layouts for `falcon_plan s3` (rank → node and (dp, pp, tp)).
//
// Formats (chosen by content: JSON when the first non-blank character is '{' or '['):
//   CSV:  a header naming the columns rank,node,dp,pp,tp (any order; other columns ignored), then
//         one row per rank. Blank lines and lines starting with '#' are skipped.
//           rank,node,dp,pp,tp
//           0,node1,0,0,0
//   JSON: {"layout": [{"rank": 0, "node": "node1", "dp": 0, "pp": 0, "tp": 0}, ...]} or the bare
//         array. Other keys are ignored, so the output of `falcon_plan s3 --json` reads back.
// Thread-compatible; no I/O (files are read with common::ReadTextFile).
#ifndef FALCON_CLI_PLAN_LAYOUT_IO_H_
#define FALCON_CLI_PLAN_LAYOUT_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "analysis/plan/layout.h"
#include "nlohmann/json.hpp"

namespace falcon::cli::plan {

// Parses and validates a layout. `source` names the input in errors ("layout.csv:3: column dp:
// ..."). kInvalidArgument for malformed text (a JSON error names the line, column and field, also
// for a number beyond the range of a double), a missing or non-integer field, an integer outside
// [-2^31, 2^31), or a layout that Layout::Create rejects.
absl::StatusOr<analysis::plan::Layout> ParseLayout(absl::string_view text,
                                                   absl::string_view source);

// The layout as a JSON array of {"rank","node","dp","pp","tp"} objects, sorted by rank.
nlohmann::ordered_json LayoutToJson(const analysis::plan::Layout& layout);

// The layout as CSV with the header rank,node,dp,pp,tp.
std::string LayoutToCsv(const analysis::plan::Layout& layout);

}  // namespace falcon::cli::plan

#endif  // FALCON_CLI_PLAN_LAYOUT_IO_H_
