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
  // TLS by default: the files, or plaintext said explicitly.
  EXPECT_EQ(Validate(o).message(),
            "tls_cert, tls_key, tls_ca: required (or plaintext for a local demo)");
  o.tls.cert = "/etc/falcon/tls/node.pem";
  EXPECT_EQ(Validate(o).message(), "tls_key: required with the other TLS files");
  o.tls = {};
  ASSERT_TRUE(ApplyValue("plaintext", "true", &o).ok());
  EXPECT_TRUE(Validate(o).ok());
  EXPECT_EQ(ApplyValue("plaintext", "yes please", &o).message(),
            "plaintext: 'yes please' is not true or false");
  o.summary_interval = absl::Minutes(2);
  EXPECT_EQ(Validate(o).message(), "summary_interval: 2m is not in [1ms, 1m]");
}

TEST(OptionsTest, EveryListedKeyIsAccepted) {
  for (const std::string& key : OptionKeys()) {
    AgentOptions o;
    const bool numeric = key != "controller" && key != "socket" && key != "socket_group" &&
                         key != "node" && key != "agent_id" && key != "metrics_listen" &&
                         key.rfind("tls_", 0) != 0;
    EXPECT_TRUE(ApplyValue(key, numeric ? "1" : "x", &o).ok()) << key;
  }
}

// Each of these was accepted: an infinite or 1ns heartbeat, an endless drain, a controller port
// that gRPC wraps (99999 -> 34463), a metrics address civetweb could not bind (exit 1, unclear).
TEST(OptionsTest, OutOfRangeSettingsAreNamed) {
  auto error = [](const std::string& key, const std::string& value) {
    AgentOptions o;
    o.controller = "127.0.0.1:7070";
    o.plaintext = true;
    FillDefaults(&o);
    absl::Status s = ApplyValue(key, value, &o);
    if (s.ok()) s = Validate(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << "=" << value;
    return std::string(s.message());
  };
  EXPECT_EQ(error("heartbeat_interval", "inf"),
            "heartbeat_interval: 'inf' is not a finite duration");
  EXPECT_EQ(error("heartbeat_interval", "nan"),
            "heartbeat_interval: 'nan' is not a finite duration");
  EXPECT_EQ(error("heartbeat_interval", "1ns"), "heartbeat_interval: 1ns is not in [10ms, 10m]");
  EXPECT_EQ(error("drain_timeout", "1h"), "drain_timeout: 1h is not in [0, 10m]");
  EXPECT_EQ(error("hint_hold", "-1s"), "hint_hold: -1s is not in [0, 10m]");
  EXPECT_EQ(error("job_idle_timeout", "0"), "job_idle_timeout: 0 is not in [1s, 168h]");
  EXPECT_EQ(error("backoff_initial", "1ns"), "backoff_initial: 1ns is not in [1ms, 10m]");
  EXPECT_EQ(error("backoff_max", "1e300"), "backoff_max: '1e300' is not a finite duration");
  EXPECT_EQ(error("buffer_batches", "18446744073709551617"),
            "buffer_batches: '18446744073709551617' is not an integer in [0, "
            "18446744073709551615]");
  EXPECT_EQ(error("buffer_batches", "2000000"), "buffer_batches: 2000000 is not in [1, 1048576]");
  EXPECT_EQ(error("buffer_bytes", "-1"),
            "buffer_bytes: '-1' is not an integer in [0, 18446744073709551615]");
  EXPECT_EQ(error("max_raw_ops_per_rank", "0"), "max_raw_ops_per_rank: 0 is not in [1, 67108864]");
  EXPECT_EQ(error("backoff_jitter", "nan"), "backoff_jitter: must be in [0, 1)");
  EXPECT_EQ(error("controller", "127.0.0.1:99999"),
            "controller: '127.0.0.1:99999': port '99999' is not in [1, 65535]");
  EXPECT_EQ(error("controller", ""), "controller: required (host:port)");
  EXPECT_EQ(error("metrics_listen", "127.0.0.1:99999"),
            "metrics_listen: '127.0.0.1:99999': port '99999' is not in [0, 65535] (0 = any free)");
  EXPECT_EQ(error("metrics_listen", "nonsense"), "metrics_listen: 'nonsense' is not HOST:PORT");
  EXPECT_EQ(error("node", "\xff"), "node: must be 1 to 256 bytes of UTF-8");
  EXPECT_EQ(error("socket", ""), "socket: required");
}

TEST(OptionsTest, EmptyMetricsListenDisablesTheEndpoint) {
  AgentOptions o;
  o.controller = "127.0.0.1:7070";
  o.plaintext = true;
  FillDefaults(&o);
  ASSERT_TRUE(ApplyValue("metrics_listen", "", &o).ok());
  EXPECT_EQ(o.metrics_listen, "");
  EXPECT_TRUE(Validate(o).ok());
}

// A JSON number beyond a double was "not a JSON object"; a directory was read as an empty file
// (no settings, no error).
TEST(OptionsTest, ConfigFileErrorsSayWhere) {
  AgentOptions o;
  const std::string big = WriteFile("big.json", "{\"seed\": 1e400}");
  EXPECT_EQ(std::string(ApplyConfigFile(big, &o).message()),
            "config " + big +
                ": not valid JSON at line 1, column 14 (byte 14), at seed: number "
                "overflow parsing '1e400'");
  const std::string dir = std::getenv("TEST_TMPDIR");
  absl::Status s = ApplyConfigFile(dir, &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "config " + dir + ": is a directory, not a file");
  s = ApplyConfigFile("/dev/zero", &o);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "config /dev/zero: larger than the limit of 1048576 bytes");
  EXPECT_EQ(ApplyConfigFile(WriteFile("arr.json", "{\"x\": 1} "), &o).message(),
            "config " + std::string(std::getenv("TEST_TMPDIR")) + "/arr.json: x: unknown setting");
}

}  // namespace
}  // namespace falcon::agent
