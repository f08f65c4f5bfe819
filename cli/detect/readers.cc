#include "cli/detect/readers.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/csv.h"
#include "common/json_parse.h"
#include "nlohmann/json.hpp"

namespace falcon::cli::detect {
namespace {

using analysis::detect::BlameInput;
using analysis::detect::CommTiming;

constexpr char kLimitName[] = "--max_input_bytes";

absl::StatusOr<std::string> ReadLimited(const std::string& path, const ReadLimits& limits) {
  return common::ReadTextFile(path, limits.max_bytes, kLimitName);
}

}  // namespace

absl::StatusOr<InputFormat> ParseFormat(absl::string_view name) {
  if (name == "csv") return InputFormat::kCsv;
  if (name == "tcpd") return InputFormat::kTcpd;
  if (name == "alibaba") return InputFormat::kAlibaba;
  if (name == "bytedance") return InputFormat::kBytedance;
  if (name == "pairwise") return InputFormat::kPairwise;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown format \"", name, "\"; expected one of: csv, tcpd, alibaba, bytedance, pairwise"));
}

absl::StatusOr<DetectInput> ReadInput(const std::string& path, InputFormat format,
                                      const std::string& column, const ReadLimits& limits) {
  switch (format) {
    case InputFormat::kCsv:
      return ReadCsv(path, column, limits);
    case InputFormat::kTcpd:
      return ReadTcpd(path, column, limits);
    case InputFormat::kAlibaba:
      return ReadAlibaba(path, column, limits);
    case InputFormat::kBytedance:
      return ReadBytedance(path, column, limits);
    case InputFormat::kPairwise:
      return ReadPairwise(path, column, limits);
  }
  return absl::InvalidArgumentError("unknown format");
}

absl::StatusOr<DetectInput> ReadCsv(const std::string& path, const std::string& column,
                                    const ReadLimits& limits) {
  absl::StatusOr<std::string> text = ReadLimited(path, limits);
  if (!text.ok()) return text.status();
  absl::StatusOr<common::CsvTable> t = common::ParseCsv(path, *text);
  if (!t.ok()) return t.status();
  size_t col = t->header.size() - 1;
  if (!column.empty()) {
    absl::StatusOr<size_t> c = common::FindColumn(*t, column);
    if (!c.ok()) return c.status();
    col = *c;
  }
  DetectInput input{path, {}, {}, {}};
  NamedSeries s;
  s.name = t->header[col];
  for (size_t r = 0; r < t->rows.size(); ++r) {
    absl::StatusOr<double> v = common::ParseNumber(*t, r, col);
    if (!v.ok()) return v.status();
    s.values.push_back(*v);
    s.origins.push_back(absl::StrCat("line ", t->lines[r]));
  }
  input.series.push_back(std::move(s));
  return input;
}

absl::StatusOr<DetectInput> ReadPairwise(const std::string& path, const std::string& column,
                                         const ReadLimits& limits) {
  absl::StatusOr<std::string> text = ReadLimited(path, limits);
  if (!text.ok()) return text.status();
  absl::StatusOr<common::CsvTable> t = common::ParseCsv(path, *text);
  if (!t.ok()) return t.status();
  absl::StatusOr<size_t> a = common::FindColumn(*t, "node_a");
  if (!a.ok()) return a.status();
  absl::StatusOr<size_t> b = common::FindColumn(*t, "node_b");
  if (!b.ok()) return b.status();
  absl::StatusOr<size_t> bw = common::FindColumn(*t, column.empty() ? "busbw_gbps" : column);
  if (!bw.ok()) return bw.status();
  DetectInput input{path, {}, {}, {}};
  for (size_t r = 0; r < t->rows.size(); ++r) {
    absl::StatusOr<double> v = common::ParseNumber(*t, r, *bw);
    if (!v.ok()) return v.status();
    const std::string origin = absl::StrCat(path, ":", t->lines[r]);
    const std::string& node_a = t->rows[r][*a];
    const std::string& node_b = t->rows[r][*b];
    for (const auto& [name, value] :
         {std::make_pair("node_a", &node_a), std::make_pair("node_b", &node_b)}) {
      if (value->empty()) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": column ", name, " is empty"));
      }
      for (unsigned char c : *value) {
        if (c < 0x20 || c == 0x7f) {
          return absl::InvalidArgumentError(
              absl::StrCat(origin, ": column ", name, " has a control character (byte ",
                           static_cast<int>(c), "): node names are printed"));
        }
      }
    }
    input.pairs.push_back({node_a, node_b, *v, origin});
  }
  return input;
}

absl::StatusOr<DetectInput> ReadTcpd(const std::string& path, const std::string& column,
                                     const ReadLimits& limits) {
  absl::StatusOr<std::string> text = ReadLimited(path, limits);
  if (!text.ok()) return text.status();
  absl::StatusOr<nlohmann::json> parsed = common::ParseJson(*text, path);
  if (!parsed.ok()) return parsed.status();
  nlohmann::json doc = *std::move(parsed);
  if (!doc.is_object() || !doc.contains("series") || !doc["series"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a TCPD object with a \"series\" array"));
  }
  const std::string dataset =
      doc.contains("name") && doc["name"].is_string() ? doc["name"].get<std::string>() : path;
  const nlohmann::json& all = doc["series"];
  DetectInput input{path, {}, {}, {}};
  for (size_t i = 0; i < all.size(); ++i) {
    const nlohmann::json& entry = all[i];
    const std::string label =
        entry.is_object() && entry.contains("label") && entry["label"].is_string()
            ? entry["label"].get<std::string>()
            : absl::StrCat("series[", i, "]");
    if (!column.empty() && label != column) continue;
    if (!entry.is_object() || !entry.contains("raw") || !entry["raw"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": series \"", label, "\" has no \"raw\" array"));
    }
    NamedSeries s;
    s.name = all.size() == 1 ? dataset : absl::StrCat(dataset, "/", label);
    const nlohmann::json& raw = entry["raw"];
    for (size_t j = 0; j < raw.size(); ++j) {
      if (!raw[j].is_number()) {
        // Name the type rather than dumping the value: dump() recurses (a deeply nested value
        // would overflow the stack) and a long string would flood the message.
        std::string shown = raw[j].is_structured() ? std::string("an ") + raw[j].type_name()
                                                   : raw[j].dump().substr(0, 40);
        return absl::InvalidArgumentError(absl::StrCat(path, ": series \"", label, "\" raw[", j,
                                                       "] is ", shown, ", not a number"));
      }
      const double v = raw[j].get<double>();
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": series \"", label, "\" raw[", j, "] is not finite"));
      }
      s.values.push_back(v);
      s.origins.push_back(absl::StrCat("raw[", j, "]"));
    }
    input.series.push_back(std::move(s));
  }
  if (input.series.empty()) {
    return absl::InvalidArgumentError(
        column.empty() ? absl::StrCat(path, ": no series")
                       : absl::StrCat(path, ": no series labelled \"", column, "\""));
  }
  return input;
}

absl::StatusOr<DetectInput> ReadAlibaba(const std::string& path, const std::string& column,
                                        const ReadLimits& limits) {
  absl::StatusOr<std::vector<common::AlibabaWorkerSeries>> workers =
      common::ReadAlibabaPaiCsv(path, column, limits.max_bytes, kLimitName);
  if (!workers.ok()) return workers.status();
  DetectInput input{path, {}, {}, {}};
  for (common::AlibabaWorkerSeries& w : *workers) {
    NamedSeries s;
    s.name = absl::StrCat("worker_", w.worker);
    s.values = std::move(w.values);
    for (int64_t line : w.lines) s.origins.push_back(absl::StrCat("line ", line));
    input.series.push_back(std::move(s));
  }
  return input;
}

namespace {

struct RankRow {
  int64_t rank = 0;
  int64_t dp = 0;
  int64_t stage = 0;
  std::map<std::string, double> ops;  // Op name without "_s" -> seconds.
  double Op(const std::string& name) const {
    auto it = ops.find(name);
    return it == ops.end() ? 0.0 : it->second;
  }
};

absl::Duration Seconds(double s) { return absl::Seconds(s); }

BlameInput BuildBlameInput(int64_t step, const std::vector<RankRow>& rows) {
  BlameInput in;
  in.step = step;
  std::map<std::pair<int64_t, int64_t>, const RankRow*> at;  // (dp, stage)
  int64_t last_stage = 0;
  for (const RankRow& r : rows) {
    in.ranks.push_back(
        {r.rank, r.stage, Seconds(r.Op("forward-compute") + r.Op("backward-compute"))});
    at[{r.dp, r.stage}] = &r;
    last_stage = std::max(last_stage, r.stage);
  }
  uint64_t next_id = 1;
  auto add = [&](const std::string& kind, std::vector<analysis::detect::CommMember> members) {
    if (members.empty()) return;
    in.comms.push_back(CommTiming{next_id++, kind, 0, std::move(members)});
  };
  // DP communicators: same stage, every replica.
  for (const char* op :
       {"grads-reduce-scatter", "params-all-gather", "layernorm-grads-all-reduce"}) {
    std::map<int64_t, std::vector<analysis::detect::CommMember>> by_stage;
    for (const RankRow& r : rows) {
      if (r.ops.count(op)) by_stage[r.stage].push_back({r.rank, Seconds(r.Op(op))});
    }
    for (auto& [stage, members] : by_stage) add(op, std::move(members));
  }
  // Per replica: gradient clipping over its stages; embedding all-reduce of first and last.
  std::map<int64_t, std::vector<analysis::detect::CommMember>> clip;
  for (const RankRow& r : rows) {
    if (r.ops.count("optimizer-clip-main-grad")) {
      clip[r.dp].push_back({r.rank, Seconds(r.Op("optimizer-clip-main-grad"))});
    }
  }
  for (auto& [dp, members] : clip) add("optimizer-clip-main-grad", std::move(members));
  for (const auto& [key, first] : at) {
    const auto [dp, stage] = key;
    if (stage != 0 || last_stage == 0 || !first->ops.count("embedding-grads-all-reduce")) continue;
    auto last = at.find({dp, last_stage});
    if (last == at.end()) continue;
    add("embedding-grads-all-reduce",
        {{first->rank, Seconds(first->Op("embedding-grads-all-reduce"))},
         {last->second->rank, Seconds(last->second->Op("embedding-grads-all-reduce"))}});
  }
  // Pipeline links between consecutive stages of a replica.
  for (const auto& [key, lo] : at) {
    const auto [dp, stage] = key;
    auto hi_it = at.find({dp, stage + 1});
    if (hi_it == at.end()) continue;
    const RankRow* hi = hi_it->second;
    if (!lo->ops.count("forward-send") || !lo->ops.count("backward-recv")) continue;
    add("forward-p2p",
        {{lo->rank, Seconds(lo->Op("forward-send"))}, {hi->rank, Seconds(hi->Op("forward-recv"))}});
    add("backward-p2p", {{hi->rank, Seconds(hi->Op("backward-send"))},
                         {lo->rank, Seconds(lo->Op("backward-recv"))}});
  }
  return in;
}

}  // namespace

absl::StatusOr<DetectInput> ReadBytedance(const std::string& path, const std::string& column,
                                          const ReadLimits& limits) {
  absl::StatusOr<std::string> text = ReadLimited(path, limits);
  if (!text.ok()) return text.status();
  absl::StatusOr<common::CsvTable> t = common::ParseCsv(path, *text);
  if (!t.ok()) return t.status();
  size_t key_cols[4];
  const char* key_names[4] = {"step", "rank", "dp_rank", "stage"};
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<size_t> c = common::FindColumn(*t, key_names[i]);
    if (!c.ok()) return c.status();
    key_cols[i] = *c;
  }
  for (const char* needed : {"forward-compute_s", "backward-compute_s"}) {
    absl::StatusOr<size_t> c = common::FindColumn(*t, needed);
    if (!c.ok()) return c.status();
  }
  std::vector<size_t> op_cols;
  for (size_t i = 0; i < t->header.size(); ++i) {
    if (absl::EndsWith(t->header[i], "_s")) op_cols.push_back(i);
  }
  if (!column.empty()) {
    absl::StatusOr<size_t> c = common::FindColumn(*t, column);
    if (!c.ok()) return c.status();
  }
  std::map<int64_t, std::vector<RankRow>> steps;
  std::map<int64_t, std::map<int64_t, std::pair<double, int64_t>>> by_rank;  // rank -> step -> v
  // step -> (dp_rank, stage) -> (rank, line): one rank per cell, or blame drops one silently.
  std::map<int64_t, std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>>> cells;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    int64_t keys[4];
    for (int i = 0; i < 4; ++i) {
      absl::StatusOr<int64_t> v = common::ParseInteger(*t, r, key_cols[i]);
      if (!v.ok()) return v.status();
      if (*v < 0 || *v > INT32_MAX) {  // Ranks are uint32 on the wire; no rank -1 or 2^40.
        return absl::InvalidArgumentError(absl::StrCat(path, " line ", t->lines[r], ", column \"",
                                                       key_names[i], "\": ", *v,
                                                       " is not in [0, 2147483647]"));
      }
      keys[i] = *v;
    }
    RankRow row{keys[1], keys[2], keys[3], {}};
    double total = 0;
    double chosen = 0;
    for (size_t c : op_cols) {
      absl::StatusOr<double> v = common::ParseNumber(*t, r, c);
      if (!v.ok()) return v.status();
      if (*v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(path, " line ", t->lines[r], ", column \"",
                                                       t->header[c], "\": negative time ", *v));
      }
      const std::string& name = t->header[c];
      row.ops[name.substr(0, name.size() - 2)] = *v;
      total += *v;
      if (name == column) chosen = *v;
    }
    if (!column.empty() && !absl::EndsWith(column, "_s")) {
      absl::StatusOr<size_t> c = common::FindColumn(*t, column);
      absl::StatusOr<double> v = common::ParseNumber(*t, r, *c);
      if (!v.ok()) return v.status();
      chosen = *v;
    }
    if (!by_rank[row.rank]
             .emplace(keys[0], std::make_pair(column.empty() ? total : chosen, t->lines[r]))
             .second) {
      return absl::InvalidArgumentError(absl::StrCat(path, " line ", t->lines[r], ": rank ",
                                                     row.rank, " has step ", keys[0], " twice"));
    }
    const auto [cell, fresh] = cells[keys[0]].emplace(std::make_pair(row.dp, row.stage),
                                                      std::make_pair(row.rank, t->lines[r]));
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " line ", t->lines[r], ": step ", keys[0], ": rank ", row.rank,
                       " and rank ", cell->second.first, " (line ", cell->second.second,
                       ") both have dp_rank ", row.dp, ", stage ", row.stage));
    }
    steps[keys[0]].push_back(std::move(row));
  }
  DetectInput input{path, {}, {}, {}};
  for (const auto& [rank, points] : by_rank) {
    NamedSeries s;
    s.name = absl::StrCat("rank_", rank);
    for (const auto& [step, value_line] : points) {
      s.values.push_back(value_line.first);
      s.origins.push_back(absl::StrCat("step ", step, " (line ", value_line.second, ")"));
    }
    input.series.push_back(std::move(s));
  }
  for (const auto& [step, rows] : steps) input.steps.push_back(BuildBlameInput(step, rows));
  return input;
}

}  // namespace falcon::cli::detect
