#include "chaos/record.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/json_parse.h"
#include "nlohmann/json.hpp"

namespace falcon::chaos {
namespace {

using nlohmann::json;
// Written in the order of the format's documentation (record.h), for people reading it.
using nlohmann::ordered_json;

template <typename T>
ordered_json Optional(const std::optional<T>& v) {
  return v.has_value() ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json TargetToJson(FaultKind kind, const Target& t) {
  ordered_json shaped = ordered_json::array();
  for (const ShapedInterface& s : t.shaped) {
    ordered_json e = {{"node", s.node}, {"netns", s.netns}, {"iface", s.iface}};
    if (kind == FaultKind::kLink) {
      e["dst_node"] = s.dst_node;
      e["dst_address"] = s.dst_address;
      e["class"] = s.handle;
    } else {
      e["qdisc"] = s.handle;
    }
    shaped.push_back(std::move(e));
  }
  switch (kind) {
    case FaultKind::kLink:
      return {{"src_node", t.src_node},
              {"dst_node", t.dst_node},
              {"src_rank", Optional(t.src_rank)},
              {"dst_rank", Optional(t.dst_rank)},
              {"both", t.both},
              {"rate_bit_per_second", t.rate_bit_per_second},
              {"burst_bytes", t.burst_bytes},
              {"shaped", shaped}};
    case FaultKind::kNic:
      return {{"node", t.node},
              {"address", t.address},
              {"rate_bit_per_second", t.rate_bit_per_second},
              {"burst_bytes", t.burst_bytes},
              {"shaped", shaped}};
    case FaultKind::kCompute:
      return {{"rank", Optional(t.rank)},
              {"node", t.node},
              {"pid", t.pid},
              {"rank_generation", Optional(t.rank_generation)},
              {"cgroup_version", t.cgroup_version},
              {"cgroup", t.cgroup},
              {"origin_cgroup", t.origin_cgroup},
              {"thread", t.thread.empty() ? ordered_json(nullptr) : ordered_json(t.thread)},
              {"tids", t.tids},
              {"slowdown", Optional(t.slowdown)},
              {"measured_cores", Optional(t.measured_cores)},
              {"quota_cores", t.quota_cores},
              {"period_us", t.period_us},
              {"quota_us", t.quota_us}};
    case FaultKind::kContention:
      return {{"rank", Optional(t.rank)},
              {"node", t.node},
              {"pid", t.pid},
              {"rank_generation", Optional(t.rank_generation)},
              {"cpus", t.cpus},
              {"workers", t.workers},
              {"nice", t.nice},
              {"stress_pid", t.stress_pid}};
  }
  return ordered_json::object();
}

// Reads fields, keeping the first error.
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  const absl::Status& status() const { return status_; }

  const json* Field(const json& o, const std::string& path, const char* key) {
    if (!status_.ok()) return nullptr;
    auto it = o.find(key);
    if (it == o.end()) {
      Fail(path + key, "missing");
      return nullptr;
    }
    return &*it;
  }
  std::string Str(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr) return "";
    if (!v->is_string()) return Fail(path + key, "must be a string"), "";
    return v->get<std::string>();
  }
  // A string, or "" for null.
  std::string OptStr(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr || v->is_null()) return "";
    if (!v->is_string()) return Fail(path + key, "must be a string or null"), "";
    return v->get<std::string>();
  }
  std::vector<int> IntList(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    std::vector<int> out;
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(path + key, "must be an array of integers"), out;
    for (const json& e : *v) {
      if (!e.is_number_integer()) return Fail(path + key, "must be an array of integers"), out;
      out.push_back(e.get<int>());
    }
    return out;
  }
  std::optional<int64_t> OptInt(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number_integer()) return Fail(path + key, "must be an integer or null"), 0;
    return v->get<int64_t>();
  }
  int64_t Int(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return Fail(path + key, "must be an integer"), 0;
    return v->get<int64_t>();
  }
  std::optional<double> OptNum(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number()) return Fail(path + key, "must be a number or null"), 0.0;
    return v->get<double>();
  }
  double Num(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr) return 0;
    if (!v->is_number()) return Fail(path + key, "must be a number"), 0.0;
    return v->get<double>();
  }
  bool Bool(const json& o, const std::string& path, const char* key) {
    const json* v = Field(o, path, key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Fail(path + key, "must be true or false"), false;
    return v->get<bool>();
  }
  void Fail(const std::string& field, absl::string_view what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(absl::StrCat(source_, ": ", field, ": ", what));
    }
  }

 private:
  std::string source_;
  absl::Status status_;
};

std::optional<int> OptInt32(const std::optional<int64_t>& v) {
  return v.has_value() ? std::optional<int>(static_cast<int>(*v)) : std::nullopt;
}

Target TargetFromJson(Reader& r, FaultKind kind, const json& t, const std::string& path) {
  Target out;
  if (!t.is_object()) {
    r.Fail(path.substr(0, path.size() - 1), "must be an object");
    return out;
  }
  if (kind == FaultKind::kLink || kind == FaultKind::kNic) {
    out.rate_bit_per_second = r.Int(t, path, "rate_bit_per_second");
    out.burst_bytes = r.Int(t, path, "burst_bytes");
    const json* shaped = r.Field(t, path, "shaped");
    if (shaped != nullptr && !shaped->is_array()) r.Fail(path + "shaped", "must be an array");
    for (size_t i = 0; shaped != nullptr && shaped->is_array() && i < shaped->size(); ++i) {
      const std::string p = absl::StrCat(path, "shaped[", i, "].");
      const json& e = (*shaped)[i];
      if (!e.is_object()) {
        r.Fail(p.substr(0, p.size() - 1), "must be an object");
        break;
      }
      ShapedInterface s;
      s.node = r.Str(e, p, "node");
      s.netns = r.Str(e, p, "netns");
      s.iface = r.Str(e, p, "iface");
      if (kind == FaultKind::kLink) {
        s.dst_node = r.Str(e, p, "dst_node");
        s.dst_address = r.Str(e, p, "dst_address");
        s.handle = r.Str(e, p, "class");
      } else {
        s.handle = r.Str(e, p, "qdisc");
      }
      out.shaped.push_back(std::move(s));
    }
  }
  switch (kind) {
    case FaultKind::kLink:
      out.src_node = r.Str(t, path, "src_node");
      out.dst_node = r.Str(t, path, "dst_node");
      out.src_rank = OptInt32(r.OptInt(t, path, "src_rank"));
      out.dst_rank = OptInt32(r.OptInt(t, path, "dst_rank"));
      out.both = r.Bool(t, path, "both");
      break;
    case FaultKind::kNic:
      out.node = r.Str(t, path, "node");
      out.address = r.Str(t, path, "address");
      break;
    case FaultKind::kCompute:
    case FaultKind::kContention:
      out.rank = OptInt32(r.OptInt(t, path, "rank"));
      out.node = r.Str(t, path, "node");
      out.pid = static_cast<int>(r.Int(t, path, "pid"));
      out.rank_generation = r.OptInt(t, path, "rank_generation");
      if (kind == FaultKind::kCompute) {
        out.cgroup_version = static_cast<int>(r.Int(t, path, "cgroup_version"));
        out.cgroup = r.Str(t, path, "cgroup");
        out.origin_cgroup = r.Str(t, path, "origin_cgroup");
        out.thread = r.OptStr(t, path, "thread");
        out.tids = r.IntList(t, path, "tids");
        out.slowdown = r.OptNum(t, path, "slowdown");
        out.measured_cores = r.OptNum(t, path, "measured_cores");
        out.quota_cores = r.Num(t, path, "quota_cores");
        out.period_us = r.Int(t, path, "period_us");
        out.quota_us = r.Int(t, path, "quota_us");
      } else {
        out.cpus = r.Str(t, path, "cpus");
        out.workers = static_cast<int>(r.Int(t, path, "workers"));
        out.nice = static_cast<int>(r.Int(t, path, "nice"));
        out.stress_pid = static_cast<int>(r.Int(t, path, "stress_pid"));
      }
      break;
  }
  return out;
}

}  // namespace

const FaultRecord* Record::Fault(int id) const {
  for (const FaultRecord& f : faults) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

std::string RecordToJson(const Record& record) {
  ordered_json faults = ordered_json::array();
  for (const FaultRecord& f : record.faults) {
    faults.push_back({{"id", f.id},
                      {"spec", f.spec},
                      {"kind", std::string(FaultKindName(f.kind))},
                      {"from_s", f.from_s},
                      {"until_s", Optional(f.until_s)},
                      {"target", TargetToJson(f.kind, f.target)},
                      {"applied_unix_ms", Optional(f.applied_unix_ms)},
                      {"applied_iteration", Optional(f.applied_iteration)},
                      {"removed_unix_ms", Optional(f.removed_unix_ms)},
                      {"removed_iteration", Optional(f.removed_iteration)},
                      {"error", f.error},
                      {"note", f.note}});
  }
  ordered_json doc = {{"driver_pid", record.driver_pid},
                      {"cluster_kind", record.cluster_kind},
                      {"cluster_prefix", record.cluster_prefix},
                      {"started_unix_ms", record.started_unix_ms},
                      {"faults", faults}};
  return doc.dump(2) + "\n";
}

absl::StatusOr<Record> ParseRecord(absl::string_view text, absl::string_view source) {
  absl::StatusOr<json> doc = common::ParseJson(text, source);
  if (!doc.ok()) return doc.status();
  Reader r(source);
  if (!doc->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  Record out;
  out.driver_pid = static_cast<int>(r.Int(*doc, "", "driver_pid"));
  out.cluster_kind = r.Str(*doc, "", "cluster_kind");
  out.cluster_prefix = r.Str(*doc, "", "cluster_prefix");
  out.started_unix_ms = r.Int(*doc, "", "started_unix_ms");
  const json* faults = r.Field(*doc, "", "faults");
  if (faults != nullptr && !faults->is_array()) r.Fail("faults", "must be an array");
  for (size_t i = 0; r.status().ok() && faults != nullptr && i < faults->size(); ++i) {
    const std::string p = absl::StrCat("faults[", i, "].");
    const json& e = (*faults)[i];
    if (!e.is_object()) {
      r.Fail(p.substr(0, p.size() - 1), "must be an object");
      break;
    }
    FaultRecord f;
    f.id = static_cast<int>(r.Int(e, p, "id"));
    f.spec = r.Str(e, p, "spec");
    const std::string kind = r.Str(e, p, "kind");
    bool known = false;
    for (FaultKind k :
         {FaultKind::kLink, FaultKind::kNic, FaultKind::kCompute, FaultKind::kContention}) {
      if (kind == FaultKindName(k)) {
        f.kind = k;
        known = true;
      }
    }
    if (!known) r.Fail(p + "kind", absl::StrCat("unknown kind '", kind, "'"));
    f.from_s = r.Num(e, p, "from_s");
    f.until_s = r.OptNum(e, p, "until_s");
    const json* target = r.Field(e, p, "target");
    if (target != nullptr && known) f.target = TargetFromJson(r, f.kind, *target, p + "target.");
    f.applied_unix_ms = r.OptInt(e, p, "applied_unix_ms");
    f.applied_iteration = r.OptInt(e, p, "applied_iteration");
    f.removed_unix_ms = r.OptInt(e, p, "removed_unix_ms");
    f.removed_iteration = r.OptInt(e, p, "removed_iteration");
    f.error = r.Str(e, p, "error");
    f.note = r.Str(e, p, "note");
    out.faults.push_back(std::move(f));
  }
  if (!r.status().ok()) return r.status();
  return out;
}

}  // namespace falcon::chaos
