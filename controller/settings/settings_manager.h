// Per-job run-time settings (falcon.v1.Settings): detection on/off, thresholds, mitigation
// switches. Layered: built-in defaults < defaults set for new jobs (job "") < per-job overrides.
// Only fields a user set are stored, so changing a default reaches every job that did not
// override it. Not thread-safe: controller loop only.
#ifndef FALCON_CONTROLLER_SETTINGS_SETTINGS_MANAGER_H_
#define FALCON_CONTROLLER_SETTINGS_SETTINGS_MANAGER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "controller/store/controller_store.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::settings {

// Every setting resolved to a value. Defaults are those documented in control.proto.
struct EffectiveSettings {
  bool detection_enabled = true;
  bool mitigation_enabled = true;
  bool dry_run = false;
  double verification_min_ratio = 0.10;  // Min relative mean shift for a fail-slow.
  double hazard = 1.0 / 250;             // BOCD constant hazard.
  double change_probability = 0.9;       // Lagged change-point probability threshold.
  uint32_t min_gap_iterations = 10;      // Min iterations between kept change points.
  double suspicious_group_ratio = 0.10;  // Comm suspicious above median x (1 + this).
  bool s2_enabled = true;
  bool s3_enabled = true;
  bool s4_enabled = true;
  double s2_cost_iterations = 5;
  double s3_cost_seconds = 60;
  double s4_cost_seconds = 600;
  // Off by default until S2L re-sizes from its own measurement
  // (docs/algorithms.md#layer-split-planner).
  bool s2l_enabled = false;
  double s2l_bandwidth_bytes_per_s = 1e9;  // S2L cost: bytes moved / this + the pause.
  double s2l_pause_seconds = 1;            // S2L pause until one was measured.

  // True when the detector parameters differ (the detectors must be rebuilt).
  bool DetectorParamsDiffer(const EffectiveSettings& other) const;
};

// Checks every field that is set. Errors: kInvalidArgument naming the field, e.g.
// "settings.hazard: 1.5 is outside (0, 1)".
absl::Status ValidateSettings(const falcon::v1::Settings& settings);

// The fields set in `settings` (job excepted) as "key=value" pairs in the message's order,
// separated by spaces: "dry_run=true verification_min_ratio=0.2"; "" when none is set.
std::string SettingsFields(const falcon::v1::Settings& settings);

class SettingsManager {
 public:
  // Called after a successful Set with the job whose settings changed ("" = the defaults, which
  // may change every job).
  using ChangeListener = std::function<void(const std::string& job)>;

  SettingsManager() = default;

  // Replaces the stored overrides (from ControllerStore::LoadSettings()).
  void Load(const std::vector<falcon::v1::Settings>& stored);
  void set_listener(ChangeListener listener) { listener_ = std::move(listener); }

  // The effective settings of `job` ("" = what a new job gets), every field set.
  falcon::v1::Settings Get(const std::string& job) const;
  EffectiveSettings Effective(const std::string& job) const;

  // Merges the fields set in `update` into the overrides of update.job() and stages the new
  // overrides record in `txn`; nothing changes in memory yet. The caller commits `txn`, then
  // calls Apply with the returned record. Errors: kInvalidArgument (ValidateSettings).
  absl::StatusOr<falcon::v1::Settings> Prepare(const falcon::v1::Settings& update,
                                               store::StoreTxn* txn) const;
  // Installs an overrides record from Prepare and tells the listener.
  void Apply(const falcon::v1::Settings& overrides);
  // Whether `job` has overrides of its own.
  bool HasOverrides(const std::string& job) const { return overrides_.count(job) > 0; }
  // Drops the overrides of a purged job (ControllerStore's StoreTxn::DeleteJob deletes its row).
  // Never the defaults ("").
  void Forget(const std::string& job);

 private:
  absl::flat_hash_map<std::string, falcon::v1::Settings> overrides_;
  ChangeListener listener_;
};

}  // namespace falcon::controller::settings

#endif  // FALCON_CONTROLLER_SETTINGS_SETTINGS_MANAGER_H_
