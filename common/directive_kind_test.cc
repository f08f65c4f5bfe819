#include "common/directive_kind.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

TEST(DirectiveKindTest, OneWordPerKind) {
  ::falcon::v1::Directive d;
  EXPECT_EQ(DirectiveKindName(d), "none");
  d.mutable_micro_batch_plan();
  EXPECT_EQ(DirectiveKindName(d), "s2");
  d.mutable_topology_change();
  EXPECT_EQ(DirectiveKindName(d), "s3");
  d.mutable_checkpoint_restart();
  EXPECT_EQ(DirectiveKindName(d), "s4");
  d.mutable_pause();
  EXPECT_EQ(DirectiveKindName(d), "pause");
  d.mutable_resume();
  EXPECT_EQ(DirectiveKindName(d), "resume");
  d.mutable_profiling();
  EXPECT_EQ(DirectiveKindName(d), "profiling");
  d.mutable_layer_split();
  EXPECT_EQ(DirectiveKindName(d), "s2l");
}

TEST(DirectiveKindTest, StrategyShortNames) {
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_S1_IGNORE), "S1");
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_S2_MICRO_BATCH), "S2");
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_S2L_LAYER_SPLIT), "S2L");
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_S3_TOPOLOGY), "S3");
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_S4_CHECKPOINT_RESTART), "S4");
  EXPECT_EQ(StrategyShortName(::falcon::v1::STRATEGY_UNSPECIFIED), "");
}

// A kind added to the proto gets a word of its own (this fails until it does).
TEST(DirectiveKindTest, EveryKindOfTheProtoHasADistinctWord) {
  const auto* oneof = ::falcon::v1::Directive::descriptor()->FindOneofByName("kind");
  ASSERT_NE(oneof, nullptr);
  std::set<std::string> words;
  for (int i = 0; i < oneof->field_count(); ++i) {
    ::falcon::v1::Directive d;
    d.GetReflection()->MutableMessage(&d, oneof->field(i));
    const std::string word(DirectiveKindName(d));
    EXPECT_NE(word, "none") << oneof->field(i)->name();
    EXPECT_TRUE(words.insert(word).second) << word;
  }
}

}  // namespace
}  // namespace falcon::common
