#include "controller/mitigation/escalation_settings.h"

#include "gtest/gtest.h"

namespace falcon::controller::mitigation {
namespace {

TEST(EscalationSettings, LevelsCostsAndCause) {
  settings::EffectiveSettings s;
  s.s3_enabled = false;
  s.s2_cost_iterations = 7;
  s.s3_cost_seconds = 30;
  s.s4_cost_seconds = 100;
  analysis::plan::EscalationOptions o = EscalationOptionsFor(s);
  EXPECT_TRUE(o.s2_enabled);
  EXPECT_FALSE(o.s3_enabled);
  EXPECT_TRUE(o.s4_enabled);
  EXPECT_EQ(o.s2_cost_iterations, 7);
  EXPECT_EQ(o.s3_cost, absl::Seconds(30));
  EXPECT_EQ(o.checkpoint_write + o.checkpoint_read + o.restart, absl::Seconds(100));
  EXPECT_TRUE(o.Validate().ok());
  EXPECT_TRUE(SameEscalationOptions(o, EscalationOptionsFor(s)));
  // Mitigation off disables every level.
  s.mitigation_enabled = false;
  analysis::plan::EscalationOptions off = EscalationOptionsFor(s);
  EXPECT_FALSE(off.s2_enabled || off.s3_enabled || off.s4_enabled);
  EXPECT_FALSE(SameEscalationOptions(o, off));
  s.mitigation_enabled = true;
  s.s4_cost_seconds = 101;
  EXPECT_FALSE(SameEscalationOptions(o, EscalationOptionsFor(s)));
  s.s4_cost_seconds = 100;

  // S2L: its switch, bandwidth and pause setting; a measured pause or the plan's bytes differ.
  s.s2l_enabled = true;  // Opt-in.
  s.s2l_bandwidth_bytes_per_s = 5e8;
  s.s2l_pause_seconds = 2;
  o = EscalationOptionsFor(s);
  EXPECT_TRUE(o.s2l_enabled);
  EXPECT_FALSE(o.s2l_resplittable);  // The event's to fill.
  EXPECT_EQ(o.s2l_bandwidth_bytes_per_s, 5e8);
  EXPECT_EQ(o.s2l_pause, absl::Seconds(2));
  analysis::plan::EscalationOptions measured = o;
  measured.s2l_measured = analysis::plan::S2LMeasurement{absl::Seconds(3), std::nullopt};
  EXPECT_FALSE(SameEscalationOptions(o, measured));
  analysis::plan::EscalationOptions rate = measured;
  rate.s2l_measured->bandwidth_bytes_per_s = 1e6;
  EXPECT_FALSE(SameEscalationOptions(rate, measured));
  measured = o;
  measured.s2l_bytes_moved = 1;
  EXPECT_FALSE(SameEscalationOptions(o, measured));
  s.s2l_enabled = false;
  EXPECT_FALSE(EscalationOptionsFor(s).s2l_enabled);
  s.s2l_enabled = true;
  s.mitigation_enabled = false;
  EXPECT_FALSE(EscalationOptionsFor(s).s2l_enabled);

  EXPECT_EQ(ToEscalationCause(falcon::v1::CAUSE_COMPUTE), analysis::plan::Cause::kCompute);
  EXPECT_EQ(ToEscalationCause(falcon::v1::CAUSE_COMMUNICATION),
            analysis::plan::Cause::kCommunication);
  EXPECT_EQ(ToEscalationCause(falcon::v1::CAUSE_UNKNOWN), analysis::plan::Cause::kUnknown);
}

}  // namespace
}  // namespace falcon::controller::mitigation
