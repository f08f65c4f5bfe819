#include "collective/fault/fault_spec.h"

#include <map>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/text_file.h"

namespace falcon::collective::fault {
namespace {

using Fields = std::map<std::string, std::string>;

// Parses one item's fields; tracks which were consumed so leftovers can be reported.
class ItemParser {
 public:
  ItemParser(int index, std::string kind, Fields fields)
      : index_(index), kind_(std::move(kind)), fields_(std::move(fields)) {}

  absl::Status Error(absl::string_view key, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("fault ", index_, " (", kind_, "): field '", key, "': ", what));
  }

  bool Has(const std::string& key) const { return fields_.count(key) > 0; }

  absl::StatusOr<int64_t> Int(const std::string& key, int64_t min, bool required,
                              int64_t fallback) {
    auto it = fields_.find(key);
    if (it == fields_.end()) {
      if (required) return Error(key, "is required");
      return fallback;
    }
    int64_t v = 0;
    if (!absl::SimpleAtoi(it->second, &v)) {
      return Error(key, absl::StrCat("not an integer: '", it->second, "'"));
    }
    if (v < min) return Error(key, absl::StrCat("must be >= ", min, ", got ", v));
    fields_.erase(it);
    return v;
  }

  absl::StatusOr<double> Double(const std::string& key, double min, bool exclusive_min,
                                bool required, double fallback) {
    auto it = fields_.find(key);
    if (it == fields_.end()) {
      if (required) return Error(key, "is required");
      return fallback;
    }
    double v = 0;
    if (!absl::SimpleAtod(it->second, &v) || !(v == v)) {
      return Error(key, absl::StrCat("not a number: '", it->second, "'"));
    }
    if (exclusive_min ? !(v > min) : !(v >= min)) {
      return Error(
          key, absl::StrCat("must be ", exclusive_min ? "> " : ">= ", min, ", got ", it->second));
    }
    fields_.erase(it);
    return v;
  }

  absl::StatusOr<IterationWindow> Window() {
    IterationWindow w;
    auto from = Int("from", 0, false, 0);
    if (!from.ok()) return from.status();
    auto to = Int("to", 0, false, IterationWindow::kForever);
    if (!to.ok()) return to.status();
    if (*to <= *from) {
      return Error("to", absl::StrCat("must be > from (", *from, "), got ", *to));
    }
    w.from = *from;
    w.to = *to;
    return w;
  }

  absl::StatusOr<std::vector<int>> CpuList(const std::string& key) {
    std::vector<int> cpus;
    auto it = fields_.find(key);
    if (it == fields_.end()) return cpus;
    for (absl::string_view part : absl::StrSplit(it->second, '+')) {
      std::vector<absl::string_view> range = absl::StrSplit(part, '-');
      int lo = 0, hi = 0;
      if (range.size() > 2 || !absl::SimpleAtoi(range[0], &lo) ||
          !absl::SimpleAtoi(range.back(), &hi) || lo < 0 || hi < lo) {
        return Error(key, absl::StrCat("bad CPU list '", it->second, "' (want e.g. 0+2-3)"));
      }
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    }
    fields_.erase(it);
    return cpus;
  }

  absl::Status Finish() const {
    if (!fields_.empty()) return Error(fields_.begin()->first, "unknown key");
    return absl::OkStatus();
  }

 private:
  int index_;
  std::string kind_;
  Fields fields_;
};

absl::Status ParseItem(int index, absl::string_view item, FaultPlan* plan) {
  std::pair<absl::string_view, absl::string_view> kv =
      absl::StrSplit(item, absl::MaxSplits(':', 1));
  const std::string kind(absl::StripAsciiWhitespace(kv.first));
  if (item.find(':') == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault ", index, ": expected KIND:key=value,... but got '", item, "'"));
  }
  Fields fields;
  for (absl::string_view field : absl::StrSplit(kv.second, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> f =
        absl::StrSplit(field, absl::MaxSplits('=', 1));
    std::string key(absl::StripAsciiWhitespace(f.first));
    std::string value(absl::StripAsciiWhitespace(f.second));
    if (field.find('=') == absl::string_view::npos || key.empty() || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fault ", index, " (", kind, "): expected key=value, got '", field, "'"));
    }
    if (!fields.emplace(key, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("fault ", index, " (", kind, "): field '", key, "': given twice"));
    }
  }
  ItemParser p(index, kind, std::move(fields));
  if (kind == "compute") {
    ComputeFault f;
    auto rank = p.Int("rank", 0, true, 0);
    if (!rank.ok()) return rank.status();
    auto factor = p.Double("factor", 1.0, false, true, 1.0);
    if (!factor.ok()) return factor.status();
    auto window = p.Window();
    if (!window.ok()) return window.status();
    f.rank = static_cast<int>(*rank);
    f.factor = *factor;
    f.window = *window;
    if (auto s = p.Finish(); !s.ok()) return s;
    plan->compute.push_back(f);
  } else if (kind == "link") {
    LinkFault f;
    auto src = p.Int("src", 0, true, 0);
    if (!src.ok()) return src.status();
    auto dst = p.Int("dst", 0, true, 0);
    if (!dst.ok()) return dst.status();
    if (*src == *dst) return p.Error("dst", "must differ from src");
    if (!p.Has("delay_ms") && !p.Has("bw_mbps")) {
      return p.Error("delay_ms", "one of delay_ms or bw_mbps is required");
    }
    auto delay = p.Double("delay_ms", 0.0, false, false, 0.0);
    if (!delay.ok()) return delay.status();
    auto bw = p.Double("bw_mbps", 0.0, true, false, 0.0);
    if (!bw.ok()) return bw.status();
    auto window = p.Window();
    if (!window.ok()) return window.status();
    f.src = static_cast<int>(*src);
    f.dst = static_cast<int>(*dst);
    f.delay = absl::Microseconds(static_cast<int64_t>(*delay * 1000.0 + 0.5));
    f.bandwidth_mbps = *bw;
    f.window = *window;
    if (auto s = p.Finish(); !s.ok()) return s;
    plan->links.push_back(f);
  } else if (kind == "contention") {
    ContentionFault f;
    auto rank = p.Int("rank", 0, true, 0);
    if (!rank.ok()) return rank.status();
    auto workers = p.Int("workers", 1, false, 1);
    if (!workers.ok()) return workers.status();
    auto cpus = p.CpuList("cpus");
    if (!cpus.ok()) return cpus.status();
    auto window = p.Window();
    if (!window.ok()) return window.status();
    f.rank = static_cast<int>(*rank);
    f.workers = static_cast<int>(*workers);
    f.cpus = *cpus;
    f.window = *window;
    if (auto s = p.Finish(); !s.ok()) return s;
    plan->contention.push_back(f);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("fault ", index, ": unknown kind '", kind,
                                                   "' (want compute, link or contention)"));
  }
  return absl::OkStatus();
}

std::string WindowString(const IterationWindow& w) {
  std::string s;
  if (w.from != 0) absl::StrAppend(&s, ",from=", w.from);
  if (w.to != IterationWindow::kForever) absl::StrAppend(&s, ",to=", w.to);
  return s;
}

}  // namespace

absl::StatusOr<FaultPlan> ParseFaultSpec(absl::string_view spec) {
  FaultPlan plan;
  int index = 0;
  for (absl::string_view line : absl::StrSplit(spec, '\n')) {
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    for (absl::string_view item : absl::StrSplit(line, ';')) {
      item = absl::StripAsciiWhitespace(item);
      if (item.empty()) continue;
      ++index;
      if (auto s = ParseItem(index, item, &plan); !s.ok()) return s;
    }
  }
  return plan;
}

absl::StatusOr<FaultPlan> LoadFaultSpec(absl::string_view flag) {
  if (!absl::ConsumePrefix(&flag, "@")) return ParseFaultSpec(flag);
  absl::StatusOr<std::string> text = common::ReadTextFile(std::string(flag), kMaxFaultSpecBytes);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("fault spec file ", text.status().message()));
  }
  return ParseFaultSpec(*text);
}

std::string FaultPlan::ToString() const {
  std::vector<std::string> items;
  for (const ComputeFault& f : compute) {
    items.push_back(
        absl::StrCat("compute:rank=", f.rank, ",factor=", f.factor, WindowString(f.window)));
  }
  for (const LinkFault& f : links) {
    std::string s = absl::StrCat("link:src=", f.src, ",dst=", f.dst);
    if (f.delay > absl::ZeroDuration()) {
      absl::StrAppend(&s, ",delay_ms=", absl::ToDoubleMilliseconds(f.delay));
    }
    if (f.bandwidth_mbps > 0) absl::StrAppend(&s, ",bw_mbps=", f.bandwidth_mbps);
    if (f.delay == absl::ZeroDuration() && f.bandwidth_mbps <= 0)
      absl::StrAppend(&s, ",delay_ms=0");
    items.push_back(s + WindowString(f.window));
  }
  for (const ContentionFault& f : contention) {
    std::string s = absl::StrCat("contention:rank=", f.rank, ",workers=", f.workers);
    if (!f.cpus.empty()) absl::StrAppend(&s, ",cpus=", absl::StrJoin(f.cpus, "+"));
    items.push_back(s + WindowString(f.window));
  }
  return absl::StrJoin(items, ";");
}

}  // namespace falcon::collective::fault
