#include "controller/settings/settings_manager.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::controller::settings {
namespace {

TEST(SettingsManagerTest, BuiltInDefaultsMatchTheProto) {
  SettingsManager m;
  falcon::v1::Settings s = m.Get("job");
  EXPECT_EQ(s.job(), "job");
  EXPECT_TRUE(s.detection_enabled());
  EXPECT_FALSE(s.dry_run());
  EXPECT_DOUBLE_EQ(s.verification_min_ratio(), 0.10);
  EXPECT_DOUBLE_EQ(s.hazard(), 1.0 / 250);
  EXPECT_DOUBLE_EQ(s.change_probability(), 0.9);
  EXPECT_EQ(s.min_gap_iterations(), 10u);
  EXPECT_DOUBLE_EQ(s.s4_cost_seconds(), 600);
  EXPECT_FALSE(s.s2l_enabled());  // Opt-in.
  EXPECT_DOUBLE_EQ(s.s2l_bandwidth_bytes_per_s(), 1e9);
  EXPECT_DOUBLE_EQ(s.s2l_pause_seconds(), 1);
}

TEST(SettingsManagerTest, S2LSettingsLayerAndShowAsTheirFields) {
  SettingsManager m;
  store::StoreTxn txn;
  falcon::v1::Settings job;
  job.set_job("a");
  job.set_s2l_enabled(true);
  job.set_s2l_bandwidth_bytes_per_s(2.5e9);
  job.set_s2l_pause_seconds(0.25);
  absl::StatusOr<falcon::v1::Settings> stored = m.Prepare(job, &txn);
  ASSERT_TRUE(stored.ok()) << stored.status();
  m.Apply(*stored);
  const EffectiveSettings a = m.Effective("a");
  EXPECT_TRUE(a.s2l_enabled);
  EXPECT_DOUBLE_EQ(a.s2l_bandwidth_bytes_per_s, 2.5e9);
  EXPECT_DOUBLE_EQ(a.s2l_pause_seconds, 0.25);
  EXPECT_FALSE(m.Effective("b").s2l_enabled);  // The default: opt-in.
  EXPECT_EQ(SettingsFields(job),
            "s2l_enabled=true s2l_bandwidth_bytes_per_s=2.5e+09 s2l_pause_seconds=0.25");
}

TEST(SettingsManagerTest, LayersDefaultsAndJobOverrides) {
  SettingsManager m;
  std::vector<std::string> changed;
  m.set_listener([&](const std::string& job) { changed.push_back(job); });
  store::StoreTxn txn;
  falcon::v1::Settings defaults;
  defaults.set_hazard(0.01);
  defaults.set_min_gap_iterations(20);
  auto d = m.Prepare(defaults, &txn);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(m.Effective("a").hazard, 1.0 / 250);  // Not applied before Apply.
  m.Apply(*d);
  falcon::v1::Settings job;
  job.set_job("a");
  job.set_hazard(0.05);
  job.set_detection_enabled(false);
  auto j = m.Prepare(job, &txn);
  ASSERT_TRUE(j.ok());
  m.Apply(*j);
  EXPECT_EQ(txn.size(), 2u);
  EXPECT_EQ(changed, (std::vector<std::string>{"", "a"}));

  EffectiveSettings a = m.Effective("a");
  EXPECT_DOUBLE_EQ(a.hazard, 0.05);
  EXPECT_EQ(a.min_gap_iterations, 20u);  // From the defaults layer.
  EXPECT_FALSE(a.detection_enabled);
  EffectiveSettings b = m.Effective("b");
  EXPECT_DOUBLE_EQ(b.hazard, 0.01);
  EXPECT_TRUE(b.detection_enabled);
  EXPECT_TRUE(a.DetectorParamsDiffer(b));

  // A second partial update keeps earlier overrides.
  falcon::v1::Settings again;
  again.set_job("a");
  again.set_dry_run(true);
  m.Apply(*m.Prepare(again, &txn));
  EXPECT_DOUBLE_EQ(m.Effective("a").hazard, 0.05);
  EXPECT_TRUE(m.Effective("a").dry_run);

  // Reload from what was stored gives the same view.
  SettingsManager reloaded;
  reloaded.Load({*d, *m.Prepare(again, &txn)});
  EXPECT_DOUBLE_EQ(reloaded.Effective("a").hazard, 0.05);
  EXPECT_EQ(reloaded.Effective("a").min_gap_iterations, 20u);
}

TEST(SettingsManagerTest, SettingsFieldsAreKeyValuePairsOfTheSetFields) {
  falcon::v1::Settings s;
  s.set_job("demo");
  EXPECT_EQ(SettingsFields(s), "");
  s.set_detection_enabled(false);
  s.set_verification_min_ratio(0.15);
  s.set_min_gap_iterations(12);
  s.set_s3_cost_seconds(3);
  EXPECT_EQ(SettingsFields(s),
            "detection_enabled=false verification_min_ratio=0.15 min_gap_iterations=12 "
            "s3_cost_seconds=3");
}

TEST(SettingsManagerTest, OutOfRangeFieldsAreNamed) {
  SettingsManager m;
  store::StoreTxn txn;
  struct Case {
    falcon::v1::Settings s;
    std::string field;
  };
  std::vector<Case> cases(11);
  cases[0].s.set_hazard(1.0);
  cases[0].field = "settings.hazard";
  cases[1].s.set_verification_min_ratio(0);
  cases[1].field = "settings.verification_min_ratio";
  cases[2].s.set_change_probability(-0.5);
  cases[2].field = "settings.change_probability";
  cases[3].s.set_min_gap_iterations(0);
  cases[3].field = "settings.min_gap_iterations";
  cases[4].s.set_suspicious_group_ratio(std::nan(""));
  cases[4].field = "settings.suspicious_group_ratio";
  cases[5].s.set_s2_cost_iterations(-1);
  cases[5].field = "settings.s2_cost_iterations";
  cases[6].s.set_s4_cost_seconds(1e8);
  cases[6].field = "settings.s4_cost_seconds";
  cases[7].s.set_job(std::string(129, 'x'));
  cases[7].field = "settings.job";
  cases[8].s.set_s2l_bandwidth_bytes_per_s(0);  // The cost divides by it.
  cases[8].field = "settings.s2l_bandwidth_bytes_per_s: 0 is outside [1000, 1e+13]";
  cases[9].s.set_s2l_bandwidth_bytes_per_s(std::nan(""));
  cases[9].field = "settings.s2l_bandwidth_bytes_per_s";
  cases[10].s.set_s2l_pause_seconds(-1);
  cases[10].field = "settings.s2l_pause_seconds: -1 is outside [0, 1e+06]";
  for (const Case& c : cases) {
    auto r = m.Prepare(c.s, &txn);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status();
  }
  EXPECT_TRUE(txn.empty());
}

}  // namespace
}  // namespace falcon::controller::settings
