#include "cli/plan/layout_io.h"

#include <map>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/json_parse.h"

namespace falcon::cli::plan {
namespace {

using analysis::plan::Layout;
using analysis::plan::RankPlacement;

constexpr const char* kIntColumns[] = {"rank", "dp", "pp", "tp"};

absl::StatusOr<Layout> Finish(std::vector<RankPlacement> ranks, absl::string_view source) {
  absl::StatusOr<Layout> layout = Layout::Create(std::move(ranks));
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", layout.status().message()));
  }
  return layout;
}

absl::StatusOr<Layout> ParseCsv(absl::string_view text, absl::string_view source) {
  std::map<std::string, int> column;
  std::vector<RankPlacement> ranks;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    for (std::string& c : cells) c = std::string(absl::StripAsciiWhitespace(c));
    const std::string where = absl::StrCat(source, ":", line_number);
    if (column.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) column[absl::AsciiStrToLower(cells[i])] = i;
      for (const char* name : {"rank", "node", "dp", "pp", "tp"}) {
        if (column.count(name) == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": header has no column '", name, "' (want rank,node,dp,pp,tp)"));
        }
      }
      continue;
    }
    RankPlacement r;
    auto cell = [&](const char* name) -> absl::StatusOr<std::string> {
      const size_t i = column.at(name);
      if (i >= cells.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": column ", name, ": missing (row has ", cells.size(), " cells)"));
      }
      return cells[i];
    };
    for (const char* name : kIntColumns) {
      absl::StatusOr<std::string> value = cell(name);
      if (!value.ok()) return value.status();
      int32_t v;
      if (!absl::SimpleAtoi(*value, &v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": column ", name, ": '", *value, "' is not an integer"));
      }
      const std::string n = name;
      (n == "rank" ? r.rank : n == "dp" ? r.dp : n == "pp" ? r.pp : r.tp) = v;
    }
    absl::StatusOr<std::string> node = cell("node");
    if (!node.ok()) return node.status();
    r.node = *node;
    ranks.push_back(std::move(r));
  }
  if (column.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no header"));
  return Finish(std::move(ranks), source);
}

absl::StatusOr<Layout> ParseJson(absl::string_view text, absl::string_view source) {
  absl::StatusOr<nlohmann::json> parsed = common::ParseJson(text, source);
  if (!parsed.ok()) return parsed.status();
  nlohmann::json doc = *std::move(parsed);
  const nlohmann::json* list = &doc;
  std::string path = "";
  if (doc.is_object()) {
    if (!doc.contains("layout")) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": object has no \"layout\" array"));
    }
    list = &doc["layout"];
    path = "layout";
  }
  if (!list->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", path.empty() ? "document" : path, ": want an array of ranks"));
  }
  std::vector<RankPlacement> ranks;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& e = (*list)[i];
    const std::string where = absl::StrCat(source, ": ", path, "[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": want an object"));
    RankPlacement r;
    for (const char* name : kIntColumns) {
      if (!e.contains(name) || !e[name].is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", name, ": ", e.contains(name) ? "not an integer" : "missing"));
      }
      // An unsigned value above INT64_MAX would wrap in get<int64_t>() (2^64 - 1 -> -1).
      if (e[name].is_number_unsigned() && e[name].get<uint64_t>() > uint64_t{INT32_MAX}) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", name, ": ", e[name].dump(), " is out of range"));
      }
      const int64_t v = e[name].get<int64_t>();
      if (v < INT32_MIN || v > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".", name, ": ", v, " is out of range"));
      }
      const std::string n = name;
      (n == "rank" ? r.rank : n == "dp" ? r.dp : n == "pp" ? r.pp : r.tp) = static_cast<int32_t>(v);
    }
    if (!e.contains("node") || !e["node"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".node: ", e.contains("node") ? "not a string" : "missing"));
    }
    r.node = e["node"].get<std::string>();
    ranks.push_back(std::move(r));
  }
  return Finish(std::move(ranks), source);
}

}  // namespace

absl::StatusOr<Layout> ParseLayout(absl::string_view text, absl::string_view source) {
  absl::ConsumePrefix(&text, "\xEF\xBB\xBF");  // UTF-8 byte order mark (spreadsheet exports)
  const absl::string_view body = absl::StripLeadingAsciiWhitespace(text);
  if (!body.empty() && (body[0] == '{' || body[0] == '[')) return ParseJson(body, source);
  return ParseCsv(text, source);
}

nlohmann::ordered_json LayoutToJson(const Layout& layout) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const RankPlacement& r : layout.ranks()) {
    out.push_back({{"rank", r.rank}, {"node", r.node}, {"dp", r.dp}, {"pp", r.pp}, {"tp", r.tp}});
  }
  return out;
}

std::string LayoutToCsv(const Layout& layout) {
  std::string out = "rank,node,dp,pp,tp\n";
  for (const RankPlacement& r : layout.ranks()) {
    absl::StrAppend(&out, r.rank, ",", r.node, ",", r.dp, ",", r.pp, ",", r.tp, "\n");
  }
  return out;
}

}  // namespace falcon::cli::plan
