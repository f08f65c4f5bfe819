#include "common/csv.h"

#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::common {

std::vector<std::string> SplitCsvLine(absl::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  for (std::string& f : fields) f = std::string(absl::StripAsciiWhitespace(f));
  return fields;
}

absl::StatusOr<CsvTable> ParseCsv(const std::string& path, const std::string& text) {
  CsvTable table;
  table.path = path;
  // A UTF-8 byte order mark (spreadsheet exports) is not part of the first column's name.
  constexpr absl::string_view kBom = "\xEF\xBB\xBF";
  absl::string_view body = text;
  absl::ConsumePrefix(&body, kBom);
  int64_t number = 0;
  // Line by line over the text, without copying it.
  for (absl::string_view line : absl::StrSplit(body, '\n')) {
    ++number;
    absl::ConsumeSuffix(&line, "\r");
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    std::vector<std::string> fields = SplitCsvLine(line);
    if (table.header.empty()) {
      table.header = std::move(fields);
      continue;
    }
    if (fields.size() != table.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", number, ": ", fields.size(),
                                                     " fields, the header has ",
                                                     table.header.size()));
    }
    table.rows.push_back(std::move(fields));
    table.lines.push_back(number);
  }
  if (table.header.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": file is empty"));
  }
  if (table.rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no data rows after the header"));
  }
  return table;
}

absl::StatusOr<CsvTable> ReadCsvFile(const std::string& path, uint64_t max_bytes,
                                     absl::string_view limit_name) {
  absl::StatusOr<std::string> text = ReadTextFile(path, max_bytes, limit_name);
  if (!text.ok()) return text.status();
  return ParseCsv(path, *text);
}

absl::StatusOr<size_t> FindColumn(const CsvTable& t, absl::string_view name) {
  for (size_t i = 0; i < t.header.size(); ++i) {
    if (t.header[i] == name) return i;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      t.path, ": no column \"", name, "\"; columns are: ", absl::StrJoin(t.header, ", ")));
}

absl::StatusOr<double> ParseNumber(const CsvTable& t, size_t row, size_t col) {
  const std::string& field = t.rows[row][col];
  double v = 0;
  // Decimal only: SimpleAtod also reads hexadecimal ("0x10", "0x1p4"). NaN and infinities go on
  // to be refused as not finite.
  const std::string word =
      absl::AsciiStrToLower(absl::StripPrefix(absl::StripPrefix(field, "-"), "+"));
  const bool decimal = field.find_first_not_of("0123456789+-.eE") == std::string::npos ||
                       word == "nan" || word == "inf" || word == "infinity";
  if (!decimal || !absl::SimpleAtod(field, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(t.path, " line ", t.lines[row], ", column \"",
                                                   t.header[col], "\": \"", field,
                                                   "\" is not a number"));
  }
  if (!std::isfinite(v)) {
    return absl::InvalidArgumentError(absl::StrCat(t.path, " line ", t.lines[row], ", column \"",
                                                   t.header[col], "\": ", field,
                                                   " is not a finite number"));
  }
  return v;
}

absl::StatusOr<int64_t> ParseInteger(const CsvTable& t, size_t row, size_t col) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(t.rows[row][col], &v)) {
    return absl::InvalidArgumentError(absl::StrCat(t.path, " line ", t.lines[row], ", column \"",
                                                   t.header[col], "\": \"", t.rows[row][col],
                                                   "\" is not an integer"));
  }
  return v;
}

absl::StatusOr<std::vector<AlibabaWorkerSeries>> ReadAlibabaPaiCsv(const std::string& path,
                                                                   absl::string_view column,
                                                                   uint64_t max_bytes,
                                                                   absl::string_view limit_name) {
  absl::StatusOr<CsvTable> t = ReadCsvFile(path, max_bytes, limit_name);
  if (!t.ok()) return t.status();
  absl::StatusOr<size_t> worker_col = FindColumn(*t, "worker");
  if (!worker_col.ok()) return worker_col.status();
  absl::StatusOr<size_t> time_col = FindColumn(*t, "time");
  if (!time_col.ok()) return time_col.status();
  absl::StatusOr<size_t> value_col = FindColumn(*t, column.empty() ? "batch_time_norm" : column);
  if (!value_col.ok()) return value_col.status();
  // worker -> time -> (value, line) in file order.
  std::map<int64_t, std::map<int64_t, std::vector<std::pair<double, int64_t>>>> by_worker;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    absl::StatusOr<int64_t> worker = ParseInteger(*t, r, *worker_col);
    if (!worker.ok()) return worker.status();
    absl::StatusOr<int64_t> time = ParseInteger(*t, r, *time_col);
    if (!time.ok()) return time.status();
    absl::StatusOr<double> v = ParseNumber(*t, r, *value_col);
    if (!v.ok()) return v.status();
    std::vector<std::pair<double, int64_t>>& at = by_worker[*worker][*time];
    if (!at.empty() && at.front().first != *v) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", t->lines[r], ": worker ", *worker, " has time ", *time,
                       " twice with different values (", at.front().first, " on line ",
                       at.front().second, ", ", *v, ")"));
    }
    at.emplace_back(*v, t->lines[r]);
  }
  std::vector<AlibabaWorkerSeries> out;
  for (const auto& [worker, points] : by_worker) {
    AlibabaWorkerSeries s;
    s.worker = worker;
    for (const auto& [time, rows] : points) {
      for (const auto& [value, line] : rows) {
        s.values.push_back(value);
        s.lines.push_back(line);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace falcon::common
