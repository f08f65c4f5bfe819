#include "controller/registry/registration_validator.h"

#include <functional>
#include <string>
#include <vector>

#include "common/layer_split.h"
#include "controller/testing/job_fixtures.h"
#include "gtest/gtest.h"

namespace falcon::controller::registry {
namespace {

using falcon::v1::JobRegistration;

JobRegistration Valid() {
  testing::LayoutSpec spec;
  spec.dp = 2;
  spec.pp = 2;
  return testing::NodeRegistration(spec, 0);
}

TEST(RegistrationValidatorTest, FixtureIsValid) {
  EXPECT_FALSE(ValidateJobRegistration(Valid(), "reg").has_value());
}

TEST(RegistrationValidatorTest, EachBadFieldIsNamed) {
  struct Case {
    std::function<void(JobRegistration*)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](JobRegistration* r) { r->set_job(""); }, "reg.job"},
      {[](JobRegistration* r) { r->set_job("bad name!"); }, "reg.job"},
      {[](JobRegistration* r) { r->set_world_size(0); }, "reg.world_size"},
      {[](JobRegistration* r) { r->set_world_size(kMaxWorldSize + 1); }, "reg.world_size"},
      {[](JobRegistration* r) { r->set_dp_size(3); }, "reg.dp_size"},
      {[](JobRegistration* r) { r->set_pipeline_blocks(1); }, "reg.pipeline_blocks"},  // < PP 2.
      {[](JobRegistration* r) { r->set_pipeline_blocks(4097); }, "reg.pipeline_blocks"},
      {[](JobRegistration* r) { r->set_block_state_bytes(common::kMaxBlockStateBytes + 1); },
       "reg.block_state_bytes"},
      {[](JobRegistration* r) { r->mutable_ranks(1)->set_rank(4); }, "reg.ranks[1].rank"},
      {[](JobRegistration* r) { r->mutable_ranks(1)->set_rank(0); }, "reg.ranks[1].rank"},
      {[](JobRegistration* r) { r->mutable_ranks(0)->set_node(""); }, "reg.ranks[0].node"},
      {[](JobRegistration* r) { r->mutable_ranks(0)->set_pid(0); }, "reg.ranks[0].pid"},
      {[](JobRegistration* r) { r->mutable_ranks(0)->set_gpu(-2); }, "reg.ranks[0].gpu"},
      {[](JobRegistration* r) { r->mutable_ranks(0)->set_dp_index(2); }, "reg.ranks[0].dp_index"},
      {[](JobRegistration* r) { r->mutable_ranks(0)->set_pp_index(-3); }, "reg.ranks[0].pp_index"},
      {[](JobRegistration* r) { r->mutable_communicators(0)->set_comm_id(0); },
       "reg.communicators[0].comm_id"},
      {[](JobRegistration* r) {
         r->mutable_communicators(1)->set_comm_id(r->communicators(0).comm_id());
       },
       "reg.communicators[1].comm_id"},
      {[](JobRegistration* r) { r->mutable_communicators(0)->clear_member_ranks(); },
       "reg.communicators[0].member_ranks"},
      {[](JobRegistration* r) { r->mutable_communicators(0)->set_member_ranks(1, 9); },
       "reg.communicators[0].member_ranks[1]"},
      {[](JobRegistration* r) { r->mutable_communicators(0)->set_member_ranks(1, 0); },
       "reg.communicators[0].member_ranks[1]"},
      {[](JobRegistration* r) { r->mutable_communicators(0)->set_name(std::string(200, 'n')); },
       "reg.communicators[0].name"},
      {[](JobRegistration* r) {
         r->mutable_communicators(0)->set_kind(static_cast<falcon::v1::CommKind>(77));
       },
       "reg.communicators[0].kind"},
  };
  for (const Case& c : cases) {
    JobRegistration reg = Valid();
    c.mutate(&reg);
    util::MaybeFieldError e = ValidateJobRegistration(reg, "reg");
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field(), c.field) << e->message();
    EXPECT_FALSE(e->message().empty());
  }
}

}  // namespace
}  // namespace falcon::controller::registry
