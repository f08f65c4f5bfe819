#include "controller/settings/settings_manager.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace falcon::controller::settings {
namespace {

absl::Status CheckRange(const char* field, double v, double lo, double hi, bool lo_open,
                        bool hi_open) {
  bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("settings.", field, ": ", v, " is outside ",
                                                 lo_open ? "(" : "[", lo, ", ", hi,
                                                 hi_open ? ")" : "]"));
}

void Merge(const falcon::v1::Settings& src, falcon::v1::Settings* dst) {
  // Settings has only optional scalars: MergeFrom copies exactly the fields that are set.
  std::string job = dst->job();
  dst->MergeFrom(src);
  dst->set_job(job);
}

void ApplyTo(const falcon::v1::Settings& s, EffectiveSettings* e) {
  if (s.has_detection_enabled()) e->detection_enabled = s.detection_enabled();
  if (s.has_mitigation_enabled()) e->mitigation_enabled = s.mitigation_enabled();
  if (s.has_dry_run()) e->dry_run = s.dry_run();
  if (s.has_verification_min_ratio()) e->verification_min_ratio = s.verification_min_ratio();
  if (s.has_hazard()) e->hazard = s.hazard();
  if (s.has_change_probability()) e->change_probability = s.change_probability();
  if (s.has_min_gap_iterations()) e->min_gap_iterations = s.min_gap_iterations();
  if (s.has_suspicious_group_ratio()) e->suspicious_group_ratio = s.suspicious_group_ratio();
  if (s.has_s2_enabled()) e->s2_enabled = s.s2_enabled();
  if (s.has_s3_enabled()) e->s3_enabled = s.s3_enabled();
  if (s.has_s4_enabled()) e->s4_enabled = s.s4_enabled();
  if (s.has_s2_cost_iterations()) e->s2_cost_iterations = s.s2_cost_iterations();
  if (s.has_s3_cost_seconds()) e->s3_cost_seconds = s.s3_cost_seconds();
  if (s.has_s4_cost_seconds()) e->s4_cost_seconds = s.s4_cost_seconds();
  if (s.has_s2l_enabled()) e->s2l_enabled = s.s2l_enabled();
  if (s.has_s2l_bandwidth_bytes_per_s()) {
    e->s2l_bandwidth_bytes_per_s = s.s2l_bandwidth_bytes_per_s();
  }
  if (s.has_s2l_pause_seconds()) e->s2l_pause_seconds = s.s2l_pause_seconds();
}

}  // namespace

bool EffectiveSettings::DetectorParamsDiffer(const EffectiveSettings& o) const {
  return verification_min_ratio != o.verification_min_ratio || hazard != o.hazard ||
         change_probability != o.change_probability || min_gap_iterations != o.min_gap_iterations;
}

std::string SettingsFields(const falcon::v1::Settings& settings) {
  const google::protobuf::Descriptor* d = settings.GetDescriptor();
  const google::protobuf::Reflection* r = settings.GetReflection();
  std::vector<std::string> out;
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->name() == "job" || !r->HasField(settings, f)) continue;
    std::string value;
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
        value = r->GetBool(settings, f) ? "true" : "false";
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
        value = absl::StrFormat("%g", r->GetDouble(settings, f));
        break;
      case google::protobuf::FieldDescriptor::CPPTYPE_UINT32:
        value = absl::StrCat(r->GetUInt32(settings, f));
        break;
      default:
        value = "?";  // No other type in Settings; a new one shows up here.
        break;
    }
    out.push_back(absl::StrCat(f->name(), "=", value));
  }
  return absl::StrJoin(out, " ");
}

absl::Status ValidateSettings(const falcon::v1::Settings& s) {
  if (s.job().size() > 128)
    return absl::InvalidArgumentError("settings.job: longer than 128 bytes");
  if (s.has_verification_min_ratio()) {
    absl::Status st =
        CheckRange("verification_min_ratio", s.verification_min_ratio(), 0, 10, true, false);
    if (!st.ok()) return st;
  }
  if (s.has_hazard()) {
    absl::Status st = CheckRange("hazard", s.hazard(), 0, 1, true, true);
    if (!st.ok()) return st;
  }
  if (s.has_change_probability()) {
    absl::Status st = CheckRange("change_probability", s.change_probability(), 0, 1, true, true);
    if (!st.ok()) return st;
  }
  if (s.has_min_gap_iterations()) {
    absl::Status st =
        CheckRange("min_gap_iterations", s.min_gap_iterations(), 1, 10000, false, false);
    if (!st.ok()) return st;
  }
  if (s.has_suspicious_group_ratio()) {
    absl::Status st =
        CheckRange("suspicious_group_ratio", s.suspicious_group_ratio(), 0, 10, true, false);
    if (!st.ok()) return st;
  }
  if (s.has_s2_cost_iterations()) {
    absl::Status st =
        CheckRange("s2_cost_iterations", s.s2_cost_iterations(), 0, 1e6, false, false);
    if (!st.ok()) return st;
  }
  if (s.has_s3_cost_seconds()) {
    absl::Status st = CheckRange("s3_cost_seconds", s.s3_cost_seconds(), 0, 1e6, false, false);
    if (!st.ok()) return st;
  }
  if (s.has_s4_cost_seconds()) {
    absl::Status st = CheckRange("s4_cost_seconds", s.s4_cost_seconds(), 0, 1e7, false, false);
    if (!st.ok()) return st;
  }
  if (s.has_s2l_bandwidth_bytes_per_s()) {
    // At least 1 kB/s: the cost divides by it, and a slower "network" is a typo.
    absl::Status st = CheckRange("s2l_bandwidth_bytes_per_s", s.s2l_bandwidth_bytes_per_s(), 1e3,
                                 1e13, false, false);
    if (!st.ok()) return st;
  }
  if (s.has_s2l_pause_seconds()) {
    absl::Status st = CheckRange("s2l_pause_seconds", s.s2l_pause_seconds(), 0, 1e6, false, false);
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

void SettingsManager::Load(const std::vector<falcon::v1::Settings>& stored) {
  overrides_.clear();
  for (const falcon::v1::Settings& s : stored) overrides_[s.job()] = s;
}

EffectiveSettings SettingsManager::Effective(const std::string& job) const {
  EffectiveSettings e;
  auto d = overrides_.find("");
  if (d != overrides_.end()) ApplyTo(d->second, &e);
  if (!job.empty()) {
    auto j = overrides_.find(job);
    if (j != overrides_.end()) ApplyTo(j->second, &e);
  }
  return e;
}

falcon::v1::Settings SettingsManager::Get(const std::string& job) const {
  EffectiveSettings e = Effective(job);
  falcon::v1::Settings s;
  s.set_job(job);
  s.set_detection_enabled(e.detection_enabled);
  s.set_mitigation_enabled(e.mitigation_enabled);
  s.set_dry_run(e.dry_run);
  s.set_verification_min_ratio(e.verification_min_ratio);
  s.set_hazard(e.hazard);
  s.set_change_probability(e.change_probability);
  s.set_min_gap_iterations(e.min_gap_iterations);
  s.set_suspicious_group_ratio(e.suspicious_group_ratio);
  s.set_s2_enabled(e.s2_enabled);
  s.set_s3_enabled(e.s3_enabled);
  s.set_s4_enabled(e.s4_enabled);
  s.set_s2_cost_iterations(e.s2_cost_iterations);
  s.set_s3_cost_seconds(e.s3_cost_seconds);
  s.set_s4_cost_seconds(e.s4_cost_seconds);
  s.set_s2l_enabled(e.s2l_enabled);
  s.set_s2l_bandwidth_bytes_per_s(e.s2l_bandwidth_bytes_per_s);
  s.set_s2l_pause_seconds(e.s2l_pause_seconds);
  return s;
}

absl::StatusOr<falcon::v1::Settings> SettingsManager::Prepare(const falcon::v1::Settings& update,
                                                              store::StoreTxn* txn) const {
  absl::Status valid = ValidateSettings(update);
  if (!valid.ok()) return valid;
  falcon::v1::Settings stored;
  auto it = overrides_.find(update.job());
  if (it != overrides_.end()) stored = it->second;
  stored.set_job(update.job());
  Merge(update, &stored);
  txn->PutSettings(stored);
  return stored;
}

void SettingsManager::Apply(const falcon::v1::Settings& overrides) {
  overrides_[overrides.job()] = overrides;
  if (listener_) listener_(overrides.job());
}

void SettingsManager::Forget(const std::string& job) {
  if (!job.empty()) overrides_.erase(job);
}

}  // namespace falcon::controller::settings
