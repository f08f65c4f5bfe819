// A real Prometheus server (Debian's /usr/bin/prometheus) scrapes a real falcon_controller and two
// real falcon_agent processes on loopback, with the shipped deploy/prometheus/prometheus.yml
// (file_sd paths pointed at temporary target files, 1 s scrape and evaluation interval) and its
// recording and alert rules. Two ranks of one job, one per agent, send iterations through the
// agents' shim sockets. The test queries Prometheus' HTTP API (/api/v1/query) until `up` is 1 for
// all three targets and the falcon_ series of the controller and of both agents are there, with
// the training job in label `falcon_job`. Skipped, with a message, when /usr/bin/prometheus is
// not installed (deploy/install-deps.sh installs it).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/testing/messages.h"
#include "agent/testing/prometheus_text.h"
#include "agent/testing/shim_test_client.h"
#include "common/subprocess.h"
#include "common/testing/http_get.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/skip.h"

namespace falcon::tests::prometheus {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kJob[] = "scrape-job";
constexpr absl::Duration kWait = absl::Seconds(90);

std::string Runfile(const std::string& path) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"), "/", path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A child process with stdout and stderr in `log`; SIGTERM, then SIGKILL after 10 s, on Stop.
class Child {
 public:
  ~Child() { Stop(); }

  ::testing::AssertionResult Start(std::vector<std::string> args, const std::string& log) {
    log_ = log;
    falcon::common::SpawnOptions options;
    options.argv = std::move(args);
    options.stdout_stream = falcon::common::Stdio::File(log_);
    options.stderr_stream = falcon::common::Stdio::SameAsStdout();
    absl::StatusOr<falcon::common::Subprocess> proc = falcon::common::Subprocess::Spawn(options);
    if (!proc.ok()) return ::testing::AssertionFailure() << proc.status();
    proc_ = std::move(*proc);
    return ::testing::AssertionSuccess();
  }

  // The rest of the first log line starting with `prefix`; fails when the process exits first.
  ::testing::AssertionResult WaitLine(const std::string& prefix, std::string* rest) {
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      std::stringstream text(ReadFile(log_));
      std::string line;
      while (std::getline(text, line)) {
        if (line.rfind(prefix, 0) == 0) {
          *rest = line.substr(prefix.size());
          return ::testing::AssertionSuccess();
        }
      }
      if (!Running()) return ::testing::AssertionFailure() << "exited:\n" << ReadFile(log_);
      absl::SleepFor(absl::Milliseconds(20));
    }
    return ::testing::AssertionFailure() << "no line '" << prefix << "':\n" << ReadFile(log_);
  }

  bool Running() {
    if (!proc_.has_value()) return false;
    absl::StatusOr<std::optional<falcon::common::ExitStatus>> ended = proc_->Poll();
    return ended.ok() && !ended->has_value();
  }

  void Stop() {
    if (!proc_.has_value()) return;
    absl::StatusOr<falcon::common::ExitStatus> ended = proc_->Stop(SIGTERM, absl::Seconds(10));
    EXPECT_TRUE(ended.ok()) << ended.status();
    proc_.reset();
  }

  const std::string& log() const { return log_; }

 private:
  std::optional<falcon::common::Subprocess> proc_;
  std::string log_;
};

// A loopback TCP port that was free a moment ago (Prometheus has no "port 0, print it" mode).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrCat("%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

class PrometheusScrapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FALCON_REQUIRE_EXECUTABLE(kPrometheus,
                              "Debian package 'prometheus'; deploy/install-deps.sh installs it");
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/scrape");
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/targets");
    // Unix socket paths must stay short (TEST_TMPDIR can be long).
    char tmpl[] = "/tmp/falcon-prom-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    socket_dir_ = tmpl;
  }

  void TearDown() override {
    shims_.clear();
    prometheus_.Stop();
    for (auto& a : agents_) a.Stop();
    controller_.Stop();
    if (!socket_dir_.empty()) std::filesystem::remove_all(socket_dir_);
  }

  // Result vector of an instant query; empty on any error.
  nlohmann::json Query(const std::string& promql) {
    auto body =
        common::testing::HttpGet(prometheus_address_, "/api/v1/query?query=" + UrlEncode(promql));
    if (!body.ok()) return nlohmann::json::array();
    nlohmann::json j = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || j.value("status", "") != "success") return nlohmann::json::array();
    return j["data"]["result"];
  }

  // Waits until `promql` returns at least `n` series; returns the last result.
  nlohmann::json WaitSeries(const std::string& promql, size_t n) {
    nlohmann::json r = nlohmann::json::array();
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      r = Query(promql);
      if (r.size() >= n) return r;
      absl::SleepFor(absl::Milliseconds(250));
    }
    ADD_FAILURE() << "query '" << promql << "' returned " << r.dump() << ", want >= " << n
                  << " series; prometheus log:\n"
                  << ReadFile(prometheus_.log());
    return r;
  }

  void SendIteration(agent::testing::ShimTestClient& c, int64_t i) {
    ASSERT_TRUE(c.Send(agent::testing::IterationOpsMsg(static_cast<uint64_t>(i) + 1, i)));
    ASSERT_TRUE(c.Send(agent::testing::HintMsg(i)));
  }

  std::string dir_;
  std::string socket_dir_;
  Child controller_;
  Child agents_[2];
  Child prometheus_;
  std::string prometheus_address_;
  std::vector<std::unique_ptr<agent::testing::ShimTestClient>> shims_;
};

TEST_F(PrometheusScrapeTest, ScrapesControllerAndAgents) {
  std::string controller_address, controller_metrics;
  ASSERT_TRUE(controller_.Start(
      {Runfile("controller/falcon_controller"), "--listen=127.0.0.1:0", "--plaintext",
       "--metrics_listen=127.0.0.1:0", "--data_dir=" + dir_ + "/ctl", "--tick=50ms"},
      dir_ + "/controller.log"));
  ASSERT_TRUE(controller_.WaitLine("listening on ", &controller_address));
  ASSERT_TRUE(controller_.WaitLine("metrics on ", &controller_metrics));

  std::string agent_metrics[2];
  for (int n = 0; n < 2; ++n) {
    const std::string node = absl::StrCat("node", n + 1);
    ASSERT_TRUE(agents_[n].Start(
        {Runfile("agent/falcon_agent"), "--controller=" + controller_address, "--plaintext=true",
         absl::StrCat("--socket=", socket_dir_, "/", node, ".sock"), "--node=" + node,
         "--metrics_listen=127.0.0.1:0", "--summary_interval=100ms"},
        absl::StrCat(dir_, "/", node, ".log")));
    ASSERT_TRUE(agents_[n].WaitLine("metrics on ", &agent_metrics[n]));
  }

  // The shipped config, with file_sd pointed at this test's targets and 1 s intervals.
  std::string config = ReadFile(Runfile("deploy/prometheus/prometheus.yml"));
  ASSERT_NE(config.find("/etc/prometheus/falcon/"), std::string::npos);
  config = absl::StrReplaceAll(config, {{"/etc/prometheus/falcon/", dir_ + "/targets/"},
                                        {"scrape_interval: 15s", "scrape_interval: 1s"},
                                        {"evaluation_interval: 15s", "evaluation_interval: 1s"},
                                        {"refresh_interval: 1m", "refresh_interval: 1s"}});
  std::ofstream(dir_ + "/prometheus.yml") << config;
  for (const char* rules : {"falcon_rules.yml", "falcon_alerts.yml"}) {
    std::filesystem::copy_file(Runfile(absl::StrCat("deploy/prometheus/", rules)),
                               absl::StrCat(dir_, "/", rules));
  }
  std::ofstream(dir_ + "/targets/controller.yml")
      << "- targets: [\"" << controller_metrics << "\"]\n";
  std::ofstream(dir_ + "/targets/agents.yml")
      << "- targets: [\"" << agent_metrics[0] << "\", \"" << agent_metrics[1] << "\"]\n";

  const int port = FreePort();
  ASSERT_GT(port, 0);
  prometheus_address_ = absl::StrCat("127.0.0.1:", port);
  ASSERT_TRUE(prometheus_.Start({kPrometheus, "--config.file=" + dir_ + "/prometheus.yml",
                                 "--storage.tsdb.path=" + dir_ + "/data",
                                 "--web.listen-address=" + prometheus_address_, "--log.level=warn"},
                                dir_ + "/prometheus.log"));

  // One rank of the job on each agent; iterations keep coming while Prometheus scrapes.
  for (uint32_t r = 0; r < 2; ++r) {
    shims_.push_back(std::make_unique<agent::testing::ShimTestClient>(
        absl::StrCat(socket_dir_, "/node", r + 1, ".sock")));
    v1::ShimMessage hello = agent::testing::HelloMsg(kJob, r, 2, 7000 + static_cast<int32_t>(r));
    hello.mutable_hello()->mutable_rank()->set_node(absl::StrCat("node", r + 1));
    ASSERT_TRUE(shims_[r]->Send(hello));
    ASSERT_TRUE(shims_[r]->Next(v1::AgentToShim::kWelcome).has_value());
    ASSERT_TRUE(shims_[r]->Send(agent::testing::CommMsg(agent::testing::kDpComm, {0, 1})));
  }

  // `up` is 1 for the controller and both agents.
  int64_t iteration = 0;
  auto send_some = [&](int count) {
    for (int k = 0; k < count; ++k, ++iteration) {
      for (auto& s : shims_) SendIteration(*s, iteration);
    }
  };
  nlohmann::json up;
  const absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    send_some(5);
    up = Query("up == 1");
    if (up.size() >= 3) break;
    ASSERT_TRUE(prometheus_.Running()) << ReadFile(prometheus_.log());
    absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_EQ(up.size(), 3u) << up.dump() << "\nprometheus log:\n" << ReadFile(prometheus_.log());
  std::multiset<std::string> jobs;
  for (const auto& s : up) jobs.insert(s["metric"].value("job", ""));
  EXPECT_EQ(jobs,
            (std::multiset<std::string>{"falcon-agent", "falcon-agent", "falcon-controller"}));

  // Series of the controller.
  nlohmann::json r = WaitSeries("falcon_controller_build_info{job=\"falcon-controller\"}", 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["metric"].value("instance", ""), controller_metrics);
  r = WaitSeries("falcon_controller_agents_connected == 2", 1);
  EXPECT_EQ(r.size(), 1u);

  // Series of both agents, each with its node label.
  r = WaitSeries("falcon_agent_build_info{job=\"falcon-agent\"}", 2);
  std::set<std::string> nodes;
  for (const auto& s : r) nodes.insert(s["metric"].value("node", ""));
  EXPECT_EQ(nodes, (std::set<std::string>{"node1", "node2"}));
  EXPECT_EQ(WaitSeries("falcon_agent_controller_connected == 1", 2).size(), 2u);

  // Per-job series: the training job is in falcon_job (not exported_job) on both sides.
  const std::string job = absl::StrCat("falcon_job=\"", kJob, "\"");
  nlohmann::json ranks;
  nlohmann::json controller_iterations;
  const absl::Time job_deadline = absl::Now() + kWait;
  while (absl::Now() < job_deadline) {
    send_some(5);
    ranks = Query("falcon_agent_iterations_total{" + job + "} > 0");
    controller_iterations = Query("falcon_controller_job_iterations_total{" + job + "} > 0");
    if (ranks.size() >= 2 && controller_iterations.size() >= 1) break;
    absl::SleepFor(absl::Milliseconds(250));
  }
  ASSERT_EQ(ranks.size(), 2u) << ranks.dump() << "\ncontroller:\n" << controller_iterations.dump();
  std::set<std::string> rank_nodes;
  for (const auto& s : ranks) {
    rank_nodes.insert(s["metric"].value("rank", "") + "@" + s["metric"].value("node", ""));
    EXPECT_FALSE(s["metric"].contains("exported_job")) << s.dump();
  }
  EXPECT_EQ(rank_nodes, (std::set<std::string>{"0@node1", "1@node2"}));
  ASSERT_EQ(controller_iterations.size(), 1u);
  EXPECT_EQ(controller_iterations[0]["metric"].value("job", ""), "falcon-controller");
  EXPECT_EQ(WaitSeries("falcon_controller_job_iteration_time_seconds{" + job + "} > 0", 1).size(),
            1u);
  EXPECT_EQ(WaitSeries("falcon_agent_compute_time_seconds{" + job + "} > 0", 2).size(), 2u);

  // The shipped recording rules evaluate against the scraped series.
  EXPECT_EQ(WaitSeries("falcon_job:iterations:rate5m{" + job + "} > 0", 1).size(), 1u);
  EXPECT_EQ(WaitSeries("falcon_rank:compute_slowdown:ratio{" + job + "}", 2).size(), 2u);
  // The scraped falcon_ series (recorded ones have a ':') come from both kinds of targets only.
  r = WaitSeries("count by (job) ({__name__=~\"falcon_[a-z_]+\"})", 2);
  std::set<std::string> scrape_jobs;
  for (const auto& s : r) scrape_jobs.insert(s["metric"].value("job", ""));
  EXPECT_EQ(scrape_jobs, (std::set<std::string>{"falcon-agent", "falcon-controller"}));
  EXPECT_TRUE(prometheus_.Running());
}

}  // namespace
}  // namespace falcon::tests::prometheus
