#include "controller/detection/detection_manager.h"

#include "gtest/gtest.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::controller::detection {
namespace {

falcon::v1::Event MitigatingWith(
    std::initializer_list<std::pair<int64_t, falcon::v1::Strategy>> plans) {
  falcon::v1::Event e;
  e.set_state(falcon::v1::EVENT_STATE_MITIGATING);
  uint64_t id = 0;
  for (const auto& [iteration, strategy] : plans) {
    falcon::v1::Action* a = e.add_actions();
    a->set_iteration(iteration);
    a->set_strategy(strategy);
    a->set_directive_id(++id);
  }
  return e;
}

analysis::detect::DetectorEvent SpeedupAt(int64_t iteration) {
  analysis::detect::DetectorEvent ev;
  ev.kind = analysis::detect::ChangeKind::kRecovery;
  ev.iteration = iteration;
  return ev;
}

TEST(PlanCausedChangeTest, AnEarlierPlanOfTheEventCausedTheChangeToo) {
  // S2 in force at 72, S2L at 80 (the demo): the job back near healthy at 72 is S2's doing, not
  // the fault clearing, although S2L is the latest plan.
  const falcon::v1::Event e = MitigatingWith(
      {{72, falcon::v1::STRATEGY_S2_MICRO_BATCH}, {80, falcon::v1::STRATEGY_S2L_LAYER_SPLIT}});
  EXPECT_TRUE(DetectionManager::PlanCausedChange(e, SpeedupAt(72)));
  EXPECT_TRUE(DetectionManager::PlanCausedChange(e, SpeedupAt(80)));
  EXPECT_TRUE(DetectionManager::PlanCausedChange(e, SpeedupAt(69)));  // Within the slack.
  // Far from every plan: the fail-slow's own change.
  EXPECT_FALSE(DetectionManager::PlanCausedChange(e, SpeedupAt(60)));
  EXPECT_FALSE(DetectionManager::PlanCausedChange(e, SpeedupAt(120)));
}

TEST(PlanCausedChangeTest, DryRunsAndActionsWithoutDirectivesAndOtherStatesDoNotCount) {
  falcon::v1::Event e = MitigatingWith({{72, falcon::v1::STRATEGY_S2_MICRO_BATCH}});
  e.mutable_actions(0)->set_dry_run(true);
  EXPECT_FALSE(DetectionManager::PlanCausedChange(e, SpeedupAt(72)));
  e.mutable_actions(0)->set_dry_run(false);
  e.mutable_actions(0)->set_directive_id(0);
  EXPECT_FALSE(DetectionManager::PlanCausedChange(e, SpeedupAt(72)));
  e.mutable_actions(0)->set_directive_id(1);
  e.set_state(falcon::v1::EVENT_STATE_LOCALIZED);
  EXPECT_FALSE(DetectionManager::PlanCausedChange(e, SpeedupAt(72)));
}

}  // namespace
}  // namespace falcon::controller::detection
