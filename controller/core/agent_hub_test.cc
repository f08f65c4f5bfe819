#include "controller/core/agent_hub.h"

#include <memory>

#include "controller/testing/fake_agent_channel.h"
#include "gtest/gtest.h"

namespace falcon::controller::core {
namespace {

TEST(AgentHubTest, ReconnectReplacesAndStaleDetachIsIgnored) {
  AgentHub hub;
  auto first = std::make_shared<testing::FakeAgentChannel>();
  auto second = std::make_shared<testing::FakeAgentChannel>();
  uint64_t s1 = hub.Attach("a", first);
  uint64_t s2 = hub.Attach("a", second);
  EXPECT_NE(s1, s2);
  falcon::v1::ControllerMessage m;
  m.mutable_batch_ack()->set_sequence(3);
  EXPECT_TRUE(hub.Send("a", m));
  EXPECT_TRUE(first->sent.empty());
  EXPECT_EQ(second->sent.size(), 1u);
  EXPECT_FALSE(hub.Detach("a", s1));  // The old stream ending does not drop the new one.
  EXPECT_TRUE(hub.IsConnected("a"));
  EXPECT_FALSE(hub.Send("b", m));
  EXPECT_EQ(hub.dropped(), 1u);
  second->closed = true;
  EXPECT_FALSE(hub.Send("a", m));
  EXPECT_TRUE(hub.Detach("a", s2));
  EXPECT_EQ(hub.connected(), 0u);
}

}  // namespace
}  // namespace falcon::controller::core
