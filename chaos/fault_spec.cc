#include "chaos/fault_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace falcon::chaos {
namespace {

// A number followed by a unit: "2.5mbit" -> {2.5, "mbit"}. nullopt when the number part is not a
// finite decimal >= 0.
std::optional<std::pair<double, std::string>> SplitUnit(absl::string_view v) {
  size_t i = 0;
  while (i < v.size() && (absl::ascii_isdigit(v[i]) || v[i] == '.')) ++i;
  double number = 0;
  if (i == 0 || !absl::SimpleAtod(v.substr(0, i), &number) || !std::isfinite(number)) {
    return std::nullopt;
  }
  return std::make_pair(number, absl::AsciiStrToLower(v.substr(i)));
}

class Fields {
 public:
  Fields(std::string text, std::string kind) : text_(std::move(text)), kind_(std::move(kind)) {}

  absl::Status Error(absl::string_view field, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("fault '", text_, "': ", field, ": ", what));
  }

  // Splits "k=v,k=v,flag"; `flags` are the keys allowed without a value.
  absl::Status Split(absl::string_view body, const std::set<std::string>& allowed,
                     const std::set<std::string>& flags) {
    for (absl::string_view raw : absl::StrSplit(body, ',')) {
      const absl::string_view field = absl::StripAsciiWhitespace(raw);
      if (field.empty()) return Error("(fields)", "empty field (two commas in a row?)");
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(field, absl::MaxSplits('=', 1));
      const std::string key(absl::StripAsciiWhitespace(kv.first));
      const std::string value(absl::StripAsciiWhitespace(kv.second));
      const bool has_value = field.find('=') != absl::string_view::npos;
      if (allowed.count(key) == 0) {
        return Error(key, absl::StrCat("unknown key for a ", kind_,
                                       " fault (known: ", absl::StrJoin(allowed, ", "), ")"));
      }
      if (flags.count(key) > 0) {
        if (has_value) return Error(key, "takes no value (write just '" + key + "')");
      } else if (!has_value || value.empty()) {
        return Error(key, "expected key=value");
      }
      if (!values_.emplace(key, value).second) return Error(key, "given twice");
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& key) const { return values_.count(key) > 0; }
  const std::string& Get(const std::string& key) const { return values_.at(key); }

  absl::StatusOr<int64_t> Int(const std::string& key, int64_t min, int64_t max) const {
    int64_t v = 0;
    if (!absl::SimpleAtoi(Get(key), &v)) {
      return Error(key, absl::StrCat("'", Get(key), "' is not an integer"));
    }
    if (v < min || v > max) {
      return Error(key, absl::StrCat(v, " is out of range [", min, ", ", max, "]"));
    }
    return v;
  }

  absl::StatusOr<int64_t> Rate(const std::string& key) const {
    static const std::map<std::string, double> kUnits = {
        {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}};
    auto split = SplitUnit(Get(key));
    auto unit = split ? kUnits.find(split->second) : kUnits.end();
    if (unit == kUnits.end()) {
      return Error(key, absl::StrCat("'", Get(key),
                                     "' is not a rate (a number with unit bit, kbit, mbit or gbit, "
                                     "e.g. 8mbit)"));
    }
    const double bits = split->first * unit->second;
    if (!(bits >= kMinRateBitPerSecond) || bits > kMaxRateBitPerSecond) {
      return Error(key, absl::StrCat("'", Get(key), "' is outside [1kbit, 100gbit]"));
    }
    return static_cast<int64_t>(std::llround(bits));
  }

  absl::StatusOr<int64_t> Size(const std::string& key) const {
    static const std::map<std::string, double> kUnits = {
        {"", 1}, {"b", 1}, {"kb", 1024}, {"mb", 1024 * 1024}};
    auto split = SplitUnit(Get(key));
    auto unit = split ? kUnits.find(split->second) : kUnits.end();
    if (unit == kUnits.end()) {
      return Error(key, absl::StrCat("'", Get(key),
                                     "' is not a size (bytes, or a number with unit b, kb or mb, "
                                     "e.g. 32kb)"));
    }
    const double bytes = split->first * unit->second;
    if (bytes < kMinBurstBytes || bytes > kMaxBurstBytes) {
      return Error(key, absl::StrCat("'", Get(key), "' is outside [2kb, 64mb]"));
    }
    return static_cast<int64_t>(std::llround(bytes));
  }

  absl::StatusOr<absl::Duration> Duration(const std::string& key) const {
    static const std::map<std::string, absl::Duration> kUnits = {
        {"us", absl::Microseconds(1)}, {"ms", absl::Milliseconds(1)}, {"s", absl::Seconds(1)}};
    auto split = SplitUnit(Get(key));
    auto unit = split ? kUnits.find(split->second) : kUnits.end();
    if (unit == kUnits.end()) {
      return Error(key, absl::StrCat("'", Get(key),
                                     "' is not a duration (a number with unit us, ms or s, e.g. "
                                     "10ms)"));
    }
    return absl::Microseconds(std::llround(split->first * (unit->second / absl::Microseconds(1))));
  }

  // Seconds since the driver's start: a decimal in [0, 1e6].
  absl::StatusOr<absl::Duration> Seconds(const std::string& key) const {
    double v = 0;
    if (!absl::SimpleAtod(Get(key), &v) || !std::isfinite(v)) {
      return Error(key, absl::StrCat("'", Get(key), "' is not a number of seconds"));
    }
    if (v < 0 || v > 1e6) return Error(key, absl::StrCat(Get(key), " is outside [0, 1e6] seconds"));
    return absl::Milliseconds(std::llround(v * 1000));
  }

  absl::StatusOr<double> Double(const std::string& key) const {
    double v = 0;
    if (!absl::SimpleAtod(Get(key), &v) || !std::isfinite(v)) {
      return Error(key, absl::StrCat("'", Get(key), "' is not a number"));
    }
    return v;
  }

 private:
  std::string text_;
  std::string kind_;
  std::map<std::string, std::string> values_;
};

constexpr int kMaxRank = (1 << 24) - 1;  // As the rank table.

absl::StatusOr<Endpoint> ParseEndpoint(const Fields& f, const std::string& side) {
  const std::string rank_key = side + "_rank";
  if (f.Has(side) == f.Has(rank_key)) {
    return f.Error(side, f.Has(side)
                             ? absl::StrCat("give ", side, " or ", rank_key, ", not both")
                             : absl::StrCat("required (", side, "=NODE or ", rank_key, "=RANK)"));
  }
  Endpoint e;
  if (f.Has(side)) {
    e.node = f.Get(side);
  } else {
    auto r = f.Int(rank_key, 0, kMaxRank);
    if (!r.ok()) return r.status();
    e.rank = static_cast<int>(*r);
  }
  return e;
}

absl::StatusOr<ProcessRef> ParseProcess(const Fields& f) {
  if (f.Has("rank") == f.Has("pid")) {
    return f.Error(
        "rank", f.Has("rank") ? "give rank or pid, not both" : "required (rank=RANK or pid=PID)");
  }
  ProcessRef p;
  if (f.Has("rank")) {
    auto r = f.Int("rank", 0, kMaxRank);
    if (!r.ok()) return r.status();
    p.rank = static_cast<int>(*r);
  } else {
    auto pid = f.Int("pid", 1, (int64_t{1} << 31) - 1);
    if (!pid.ok()) return pid.status();
    p.pid = static_cast<int>(*pid);
  }
  return p;
}

absl::Status ParseShaping(const Fields& f, FaultSpec* spec) {
  if (!f.Has("rate")) return f.Error("rate", "required (e.g. rate=8mbit)");
  auto rate = f.Rate("rate");
  if (!rate.ok()) return rate.status();
  spec->rate_bit_per_second = *rate;
  spec->burst_bytes = std::max<int64_t>(kDefaultBurstBytes, *rate / 8 / 1000);
  if (f.Has("burst")) {
    auto burst = f.Size("burst");
    if (!burst.ok()) return burst.status();
    spec->burst_bytes = *burst;
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kLink:
      return "link";
    case FaultKind::kNic:
      return "nic";
    case FaultKind::kCompute:
      return "compute";
    case FaultKind::kContention:
      return "contention";
  }
  return "unknown";
}

absl::StatusOr<FaultSpec> ParseFaultSpec(absl::string_view text, int cpus) {
  FaultSpec spec;
  spec.text = std::string(absl::StripAsciiWhitespace(text));
  const size_t colon = spec.text.find(':');
  const std::string kind =
      absl::AsciiStrToLower(absl::StripAsciiWhitespace(spec.text.substr(0, colon)));
  Fields f(spec.text, kind);
  if (colon == std::string::npos) {
    return f.Error("kind", "expected KIND:key=value,... (KIND: link, nic, compute, contention)");
  }
  const std::set<std::string> kTime = {"from", "until"};
  auto allowed = [&](std::set<std::string> keys) {
    keys.insert(kTime.begin(), kTime.end());
    return keys;
  };
  const absl::string_view body = absl::string_view(spec.text).substr(colon + 1);
  absl::Status split;
  if (kind == "link") {
    spec.kind = FaultKind::kLink;
    split = f.Split(body, allowed({"src", "dst", "src_rank", "dst_rank", "rate", "burst", "both"}),
                    {"both"});
  } else if (kind == "nic") {
    spec.kind = FaultKind::kNic;
    split = f.Split(body, allowed({"node", "rate", "burst"}), {});
  } else if (kind == "compute") {
    spec.kind = FaultKind::kCompute;
    split = f.Split(body, allowed({"rank", "pid", "quota", "slowdown", "period", "thread"}), {});
  } else if (kind == "contention") {
    spec.kind = FaultKind::kContention;
    split = f.Split(body, allowed({"rank", "pid", "workers"}), {});
  } else {
    return f.Error(
        "kind", absl::StrCat("unknown kind '", kind, "' (known: link, nic, compute, contention)"));
  }
  if (!split.ok()) return split;

  switch (spec.kind) {
    case FaultKind::kLink: {
      auto src = ParseEndpoint(f, "src");
      if (!src.ok()) return src.status();
      auto dst = ParseEndpoint(f, "dst");
      if (!dst.ok()) return dst.status();
      spec.src = *std::move(src);
      spec.dst = *std::move(dst);
      if (!spec.src.node.empty() && spec.src.node == spec.dst.node) {
        return f.Error("dst", absl::StrCat("equals src ('", spec.src.node, "')"));
      }
      if (spec.src.rank.has_value() && spec.src.rank == spec.dst.rank) {
        return f.Error("dst_rank", absl::StrCat("equals src_rank (", *spec.src.rank, ")"));
      }
      spec.both = f.Has("both");
      if (absl::Status s = ParseShaping(f, &spec); !s.ok()) return s;
      break;
    }
    case FaultKind::kNic:
      if (!f.Has("node")) return f.Error("node", "required (node=NODE)");
      spec.node = f.Get("node");
      if (absl::Status s = ParseShaping(f, &spec); !s.ok()) return s;
      break;
    case FaultKind::kCompute: {
      auto p = ParseProcess(f);
      if (!p.ok()) return p.status();
      spec.process = *p;
      if (f.Has("period")) {
        auto period = f.Duration("period");
        if (!period.ok()) return period.status();
        if (*period < absl::Milliseconds(1) || *period > absl::Seconds(1)) {
          return f.Error("period", absl::StrCat("'", f.Get("period"), "' is outside [1ms, 1s]"));
        }
        spec.period = *period;
      }
      if (f.Has("thread")) {
        spec.thread = f.Get("thread");
        if (spec.thread.size() > kMaxThreadNameBytes) {
          return f.Error("thread",
                         absl::StrCat("'", spec.thread, "' is longer than ", kMaxThreadNameBytes,
                                      " bytes (the kernel's limit of a thread name: "
                                      "no thread can have it)"));
        }
      }
      if (f.Has("quota") == f.Has("slowdown")) {
        return f.Error("quota", f.Has("quota")
                                    ? "give quota or slowdown, not both"
                                    : "required (quota=CORES, e.g. 0.3, or slowdown=F, e.g. 1.5)");
      }
      if (f.Has("slowdown")) {
        auto slowdown = f.Double("slowdown");
        if (!slowdown.ok()) return slowdown.status();
        if (!(*slowdown > 1) || *slowdown > 100) {
          return f.Error("slowdown",
                         absl::StrCat(f.Get("slowdown"),
                                      " is outside (1, 100] (a factor: the process gets "
                                      "1/F of the CPU it used)"));
        }
        spec.slowdown = *slowdown;
        break;
      }
      auto quota = f.Double("quota");
      if (!quota.ok()) return quota.status();
      if (!(*quota > 0) || *quota > cpus) {
        return f.Error("quota", absl::StrCat(f.Get("quota"), " cores is outside (0, ", cpus,
                                             "] (this machine's CPUs)"));
      }
      if (*quota * spec.period < absl::Milliseconds(1)) {
        return f.Error("quota",
                       absl::StrCat(f.Get("quota"), " cores x period ", FormatDuration(spec.period),
                                    " is below the kernel's minimum quota of 1ms per period "
                                    "(raise the quota or the period)"));
      }
      spec.quota_cores = *quota;
      break;
    }
    case FaultKind::kContention: {
      auto p = ParseProcess(f);
      if (!p.ok()) return p.status();
      spec.process = *p;
      if (f.Has("workers")) {
        auto w = f.Int("workers", 1, kMaxWorkers);
        if (!w.ok()) return w.status();
        spec.workers = static_cast<int>(*w);
      }
      break;
    }
  }

  if (f.Has("from")) {
    auto from = f.Seconds("from");
    if (!from.ok()) return from.status();
    spec.from = *from;
  }
  if (f.Has("until")) {
    auto until = f.Seconds("until");
    if (!until.ok()) return until.status();
    if (*until <= spec.from) {
      // Both are kept to the millisecond: say so when rounding made them equal.
      return f.Error(
          "until",
          absl::StrCat(f.Get("until"), " s is not after from (", absl::ToDoubleSeconds(spec.from),
                       " s)", *until == spec.from ? " at millisecond resolution" : ""));
    }
    spec.until = *until;
  }
  return spec;
}

int OnlineCpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string RateString(int64_t bit_per_second) {
  static constexpr std::pair<int64_t, const char*> kUnits[] = {
      {1'000'000'000, "gbit"}, {1'000'000, "mbit"}, {1'000, "kbit"}};
  for (const auto& [scale, unit] : kUnits) {
    if (bit_per_second % scale == 0) return absl::StrCat(bit_per_second / scale, unit);
  }
  return absl::StrCat(bit_per_second, "bit");
}

}  // namespace falcon::chaos
