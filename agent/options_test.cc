#include "agent/options.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace falcon::agent {
namespace {

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(OptionsTest, KeyValueFile) {
  AgentOptions o;
  const std::string path = WriteFile("agent.conf",
                                     "# falcon agent\n"
                                     "controller = ctl.example:7070\n"
                                     "\n"
                                     "summary_interval = 250ms\n"
                                     "buffer_batches = 100\n"
                                     "drain_timeout = 2.5\n");
  ASSERT_TRUE(ApplyConfigFile(path, &o).ok());
  EXPECT_EQ(o.controller, "ctl.example:7070");
  EXPECT_EQ(o.summary_interval, absl::Milliseconds(250));
  EXPECT_EQ(o.buffer.max_batches, 100u);
  EXPECT_EQ(o.drain_timeout, absl::Milliseconds(2500));
}

TEST(OptionsTest, JsonFile) {
  AgentOptions o;
  const std::string path = WriteFile(
      "agent.json", R"({"controller": "c:1", "buffer_bytes": 1048576, "backoff_max": "5s"})");
  ASSERT_TRUE(ApplyConfigFile(path, &o).ok());
  EXPECT_EQ(o.controller, "c:1");
  EXPECT_EQ(o.buffer.max_bytes, 1048576u);
  EXPECT_EQ(o.backoff.max, absl::Seconds(5));
}

TEST(OptionsTest, ErrorsNameFileLineAndKey) {
  AgentOptions o;
  absl::Status s = ApplyConfigFile(WriteFile("bad.conf", "controller = x\nbogus = 1\n"), &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bad.conf:2: bogus: unknown setting"), std::string::npos)
      << s.message();
  s = ApplyConfigFile(WriteFile("bad2.conf", "summary_interval = soon\n"), &o);
  EXPECT_NE(s.message().find("summary_interval"), std::string::npos) << s.message();
  s = ApplyConfigFile(WriteFile("bad.json", R"({"seed": [1]})"), &o);
  EXPECT_NE(s.message().find("seed: must be a string or a number"), std::string::npos);
  EXPECT_EQ(ApplyConfigFile("/nonexistent/agent.conf", &o).code(), absl::StatusCode::kNotFound);
}

TEST(OptionsTest, ValidateAndDefaults) {
  AgentOptions o;
  EXPECT_EQ(Validate(o).message(), "controller: required (host:port)");
  o.controller = "c:1";
  FillDefaults(&o);
  EXPECT_FALSE(o.node.empty());
  EXPECT_EQ(o.agent_id, o.node);
  EXPECT_EQ(o.hub.node, o.node);
  EXPECT_TRUE(Validate(o).ok());
  o.summary_interval = absl::Minutes(2);
  EXPECT_EQ(Validate(o).message(), "summary_interval: must be in [1ms, 60s]");
}

TEST(OptionsTest, EveryListedKeyIsAccepted) {
  for (const std::string& key : OptionKeys()) {
    AgentOptions o;
    const bool numeric = key != "controller" && key != "socket" && key != "socket_group" &&
                         key != "node" && key != "agent_id" && key != "metrics_listen";
    EXPECT_TRUE(ApplyValue(key, numeric ? "1" : "x", &o).ok()) << key;
  }
}

}  // namespace
}  // namespace falcon::agent
