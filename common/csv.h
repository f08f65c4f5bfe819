// CSV files as Falcon reads them (recorded series, the Alibaba PAI trace), and the Alibaba PAI
// mini-batch format on top. Every error names the file and the line, column or worker at fault.
//
// CSV: a header row, then one record per line; comma-separated; double-quoted fields may contain
// commas and "" for a quote; fields are trimmed of ASCII whitespace; blank lines are skipped; a
// UTF-8 byte order mark at the start is skipped; CRLF line ends are accepted.
#ifndef FALCON_COMMON_CSV_H_
#define FALCON_COMMON_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/text_file.h"

namespace falcon::common {

struct CsvTable {
  std::string path;  // For messages.
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // Each of header.size() fields.
  std::vector<int64_t> lines;                  // 1-based line number of each row.
};

// One CSV record split into trimmed fields.
std::vector<std::string> SplitCsvLine(absl::string_view line);

// kInvalidArgument: a row whose field count differs from the header's, an empty file, or no
// data rows.
absl::StatusOr<CsvTable> ParseCsv(const std::string& path, const std::string& text);
// ReadTextFile (at most `max_bytes`, `limit_name` as there) + ParseCsv.
absl::StatusOr<CsvTable> ReadCsvFile(const std::string& path,
                                     uint64_t max_bytes = kDefaultMaxTextFileBytes,
                                     absl::string_view limit_name = "");

// Index of the column named `name`; kInvalidArgument listing the columns otherwise.
absl::StatusOr<size_t> FindColumn(const CsvTable& t, absl::string_view name);
// The field at (row, col) as a finite double / an integer; kInvalidArgument naming line and column.
absl::StatusOr<double> ParseNumber(const CsvTable& t, size_t row, size_t col);
absl::StatusOr<int64_t> ParseInteger(const CsvTable& t, size_t row, size_t col);

// Alibaba PAI mini-batch trace (job_N_norm.csv: "<row>,worker,gpu,time,batch_time_norm"): one
// series per worker, ascending worker, values in ascending "time". A repeated row (same worker,
// time and value, which the published job_2_norm.csv has once) is kept, so positions match the
// source rows sorted by time; the same (worker, time) with different values is kInvalidArgument.
struct AlibabaWorkerSeries {
  int64_t worker = 0;
  std::vector<double> values;
  std::vector<int64_t> lines;  // Source line of each value.
};
// `column` picks the value column ("" = batch_time_norm); the file is read as by ReadCsvFile.
absl::StatusOr<std::vector<AlibabaWorkerSeries>> ReadAlibabaPaiCsv(
    const std::string& path, absl::string_view column = "",
    uint64_t max_bytes = kDefaultMaxTextFileBytes, absl::string_view limit_name = "");

}  // namespace falcon::common

#endif  // FALCON_COMMON_CSV_H_
