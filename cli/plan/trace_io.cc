#include "cli/plan/trace_io.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::cli::plan {

absl::StatusOr<std::vector<TraceRow>> ParseTrace(absl::string_view text, absl::string_view source) {
  std::map<std::string, size_t> column;
  std::vector<std::string> header;
  std::vector<TraceRow> rows;
  int line_number = 0;
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");  // UTF-8 byte order mark (spreadsheet exports)
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
    const std::string where = absl::StrCat(source, ":", line_number);
    if (column.empty()) {
      header = cells;
      for (size_t i = 0; i < cells.size(); ++i) column[absl::AsciiStrToLower(cells[i])] = i;
      for (const char* name : {"iteration", "iteration_time_s", "cause"}) {
        if (column.count(name) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": header has no column '", name,
                           "' (want iteration,iteration_time_s,cause)"));
        }
      }
      continue;
    }
    // Every row has the header's columns: a short row is an error, not an empty cause.
    while (cells.size() > header.size() && cells.back().empty()) cells.pop_back();
    if (cells.size() < header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column ", header[cells.size()],
                                                     ": missing (the row has ", cells.size(),
                                                     " columns, the header ", header.size(), ")"));
    }
    if (cells.size() > header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the row has ", cells.size(),
                                                     " columns, the header ", header.size()));
    }
    auto cell = [&](const char* name) -> const std::string& { return cells[column.at(name)]; };
    TraceRow row;
    row.line = line_number;
    if (!absl::SimpleAtoi(cell("iteration"), &row.iteration)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": column iteration: '", cell("iteration"), "' is not an integer"));
    }
    if (!rows.empty() && row.iteration <= rows.back().iteration) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column iteration: ", row.iteration,
                                                     " does not increase (previous ",
                                                     rows.back().iteration, ")"));
    }
    double seconds;
    if (!absl::SimpleAtod(cell("iteration_time_s"), &seconds) || !std::isfinite(seconds) ||
        seconds <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": column iteration_time_s: '",
                                                     cell("iteration_time_s"),
                                                     "' is not a finite number of seconds > 0"));
    }
    row.iteration_time = absl::Seconds(seconds);
    const std::string cause = absl::AsciiStrToLower(cell("cause"));
    if (cause == "compute") {
      row.cause = analysis::plan::Cause::kCompute;
    } else if (cause == "communication" || cause == "comm") {
      row.cause = analysis::plan::Cause::kCommunication;
    } else if (cause == "unknown") {
      row.cause = analysis::plan::Cause::kUnknown;
    } else if (cause != "none" && cause != "healthy" && !cause.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": column cause: '", cell("cause"),
                       "' is not one of none, compute, communication, unknown"));
    }
    rows.push_back(row);
  }
  if (column.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no header"));
  if (rows.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no rows"));
  return rows;
}

}  // namespace falcon::cli::plan
