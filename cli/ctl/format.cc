#include "cli/ctl/format.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/directive_kind.h"
#include "google/protobuf/descriptor.h"

namespace falcon::cli::ctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

std::string StripRtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

nlohmann::json FieldValue(const Message& m, const Reflection* r, const FieldDescriptor* f,
                          int index) {
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float v = rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
      return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* v = rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f);
      return v->name();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

}  // namespace

std::string Table::Render() const {
  std::vector<size_t> width(headers_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  };
  measure(headers_);
  for (const auto& row : rows_) measure(row);
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      absl::StrAppend(&line, cell, std::string(width[c] - cell.size(), ' '),
                      c + 1 < width.size() ? "  " : "");
    }
    absl::StrAppend(&out, StripRtrim(line), "\n");
  };
  emit(headers_);
  for (const auto& row : rows_) emit(row);
  return out;
}

std::string FormatDurationNs(int64_t ns) {
  if (ns <= 0) return "-";
  if (ns >= 1'000'000'000) return absl::StrFormat("%.3f s", ns / 1e9);
  if (ns >= 1'000'000) return absl::StrFormat("%.1f ms", ns / 1e6);
  return absl::StrFormat("%.1f us", ns / 1e3);
}

std::string FormatSeconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds == 0) return "0 s";
  const double a = std::fabs(seconds);
  if (a >= 60) {
    const int64_t minutes = static_cast<int64_t>(a / 60);
    return absl::StrFormat("%s%dm %04.1fs", seconds < 0 ? "-" : "", minutes, a - 60.0 * minutes);
  }
  if (a >= 1) return absl::StrFormat("%.1f s", seconds);
  return absl::StrFormat("%.1f ms", seconds * 1e3);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    v /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[unit]);
}

std::string FormatTimeNs(int64_t unix_ns) {
  if (unix_ns <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixNanos(unix_ns), absl::UTCTimeZone());
}

std::string FormatIteration(int64_t iteration) {
  return iteration < 0 ? "-" : absl::StrCat(iteration);
}

std::string JobStateName(falcon::v1::JobState s) {
  std::string n = falcon::v1::JobState_Name(s);
  if (n.empty()) return absl::StrCat(static_cast<int>(s));
  return absl::AsciiStrToLower(n.substr(std::string("JOB_STATE_").size()));
}

std::string EventStateName(falcon::v1::EventState s) {
  std::string n = falcon::v1::EventState_Name(s);
  if (n.empty()) return absl::StrCat(static_cast<int>(s));
  return absl::AsciiStrToLower(n.substr(std::string("EVENT_STATE_").size()));
}

std::string EventStateOf(const falcon::v1::Event& e) {
  if (e.state() == falcon::v1::EVENT_STATE_CLOSED && e.transient()) return "transient";
  if (e.state() == falcon::v1::EVENT_STATE_CLOSED && e.explained_by_event_id() != 0) {
    return absl::StrCat("part-of-", e.explained_by_event_id());
  }
  return EventStateName(e.state());
}

std::string CauseName(falcon::v1::Cause c) {
  std::string n = falcon::v1::Cause_Name(c);
  if (n.empty()) return absl::StrCat(static_cast<int>(c));
  if (c == falcon::v1::CAUSE_UNSPECIFIED) return "-";
  return absl::AsciiStrToLower(n.substr(std::string("CAUSE_").size()));
}

std::string StrategyName(falcon::v1::Strategy s) {
  switch (s) {
    case falcon::v1::STRATEGY_S1_IGNORE:
      return "S1 ignore";
    case falcon::v1::STRATEGY_S2_MICRO_BATCH:
      return "S2 micro-batch";
    case falcon::v1::STRATEGY_S2L_LAYER_SPLIT:
      return "S2L layer split";
    case falcon::v1::STRATEGY_S3_TOPOLOGY:
      return "S3 topology";
    case falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART:
      return "S4 checkpoint-restart";
    default:
      return "-";
  }
}

std::string StrategyShortName(falcon::v1::Strategy s) {
  const absl::string_view word = common::StrategyShortName(s);
  return word.empty() ? "-" : std::string(word);
}

std::string DirectiveStateName(falcon::v1::DirectiveRecord::State s) {
  std::string n = falcon::v1::DirectiveRecord::State_Name(s);
  if (n.empty()) return absl::StrCat(static_cast<int>(s));
  return absl::AsciiStrToLower(n.substr(std::string("STATE_").size()));
}

std::string Culprit(const falcon::v1::Event& e) {
  std::vector<std::string> parts;
  if (e.ranks_size() > 0) {
    parts.push_back(
        absl::StrCat(e.ranks_size() == 1 ? "rank " : "ranks ", absl::StrJoin(e.ranks(), ",")));
  }
  if (e.nodes_size() > 0) {
    // The links are the evidence (every link of the node to other nodes, slow): counted.
    std::vector<std::string> nics;
    for (const std::string& n : e.nodes()) nics.push_back(absl::StrCat(n, "'s NIC"));
    parts.push_back(absl::StrCat(absl::StrJoin(nics, ", "), " (", e.links_size(),
                                 e.links_size() == 1 ? " link)" : " links)"));
  } else if (e.links_size() > 0) {
    std::vector<std::string> links;
    for (const auto& l : e.links()) links.push_back(absl::StrCat(l.src_rank(), "->", l.dst_rank()));
    parts.push_back(
        absl::StrCat(e.links_size() == 1 ? "link " : "links ", absl::StrJoin(links, ",")));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

nlohmann::json ToJson(const Message& message) {
  nlohmann::json out = nlohmann::json::object();
  const auto* d = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      nlohmann::json arr = nlohmann::json::array();
      for (int k = 0; k < r->FieldSize(message, f); ++k)
        arr.push_back(FieldValue(message, r, f, k));
      out[f->name()] = std::move(arr);
    } else if (f->has_presence() && !r->HasField(message, f)) {
      // Optional scalars and unset messages/oneof members: absent when unset.
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE && f->containing_oneof() == nullptr) {
        out[f->name()] = nullptr;
      }
    } else {
      out[f->name()] = FieldValue(message, r, f, -1);
    }
  }
  return out;
}

}  // namespace falcon::cli::ctl
