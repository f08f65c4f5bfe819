// Runs the falcon_detect binary (path in argv[1]) on real data and on bad input.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/real_data.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string g_binary;

struct Result {
  int exit_code = -1;
  std::string out;  // stdout and stderr together.
};

Result RunBinary(const std::string& args) {
  Result r;
  const std::string cmd = g_binary + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Data(const std::string& relative) { return falcon::tests::RealDataPath(relative); }

std::string Temp(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << content;
  return path;
}

TEST(FalconDetectTest, HelpPrintsUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h", "--helpfull"}) {
    const Result r = RunBinary(flag);
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("falcon_detect --input FILE --format")) << flag;
    EXPECT_THAT(r.out, HasSubstr("--hazard")) << flag;
    EXPECT_THAT(r.out, HasSubstr("default: 250")) << flag;
  }
}

TEST(FalconDetectTest, ReproducesOcpOnNile) {
  FALCON_REQUIRE_REAL_DATA();
  const Result r = RunBinary("--input " + Data("tcpd/nile.json") +
                             " --format tcpd --raw --zscore --prior 0,1,1,1 --hazard 100 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  const json& cps = out["series"][0]["change_points"];
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_EQ(cps[0]["index"], 0);
  EXPECT_EQ(cps[1]["index"], 28);  // TCPDBench's ocp output: [0, 28].
  EXPECT_EQ(cps[1]["kind"], "raw");
  EXPECT_EQ(out["series"][0]["name"], "nile");
}

TEST(FalconDetectTest, AlibabaJob1OneSeriesPerWorker) {
  FALCON_REQUIRE_REAL_DATA();
  const Result r = RunBinary("--input " + Data("alibaba_pai_minibatch_time/job_1_norm.csv") +
                             " --format alibaba --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  ASSERT_EQ(out["series"].size(), 10u);
  std::vector<std::string> kinds;
  for (const json& s : out["series"]) {
    for (const json& cp : s["change_points"]) {
      if (cp["kind"] == "speedup") continue;
      EXPECT_EQ(s["name"], "worker_6");
      kinds.push_back(cp["kind"].get<std::string>() + "@" +
                      std::to_string(cp["index"].get<int>() / 10));  // 181 -> 18, 195 -> 19.
    }
  }
  EXPECT_THAT(kinds, ::testing::ElementsAre("slowdown@18", "recovery@19"));
}

TEST(FalconDetectTest, BytedanceBlame) {
  FALCON_REQUIRE_REAL_DATA();
  const Result r =
      RunBinary("--input " + Data("bytedance_straggler_analysis/AR_per_step_rank.csv") +
                " --format bytedance --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  std::set<int64_t> steps;
  for (const json& b : out["blame"]) {
    EXPECT_EQ(b["rank"], 0);
    steps.insert(b["step"].get<int64_t>());
  }
  EXPECT_EQ(steps.size(), 44u);
  // The text report as well.
  const Result text =
      RunBinary("--input " + Data("bytedance_straggler_analysis/AR_per_step_rank.csv") +
                " --format bytedance");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, HasSubstr("blame: 44 entries"));
}

TEST(FalconDetectTest, BadInputExitsNonZeroNamingTheProblem) {
  struct Case {
    std::string args;
    std::string message;
  };
  const std::string csv = Temp("ok.csv", "iteration,time\n1,1.0\n2,1.1\n");
  const std::vector<Case> cases = {
      {"--format csv", "--input is required"},
      {"--input " + csv, "--format is required"},
      {"--input " + csv + " --format xml", "unknown format \"xml\""},
      {"--input /nonexistent.csv --format csv", "/nonexistent.csv: cannot open file"},
      {"--input " + csv + " --format csv --column latency", "no column \"latency\""},
      {"--input " + Temp("empty.csv", "") + " --format csv", "file is empty"},
      {"--input " + Temp("header.csv", "t\n") + " --format csv", "no data rows"},
      {"--input " + Temp("e.json", R"({"name":"x","series":[{"label":"a","raw":[]}]})") +
           " --format tcpd",
       "series \"x\" is empty"},
      {"--input " + Temp("nan.csv", "t\n1\nNaN\n") + " --format csv", "line 3"},
      {"--input " + Temp("neg.csv", "t\n1\n-2\n") + " --format csv", "negative time -2"},
      {"--input " + csv + " --format csv --prior 0,1,1", "--prior must be m,k,a,b"},
      {"--input " + csv + " --format csv --prior 0,x,1,1", "k = \"x\""},
      {"--input " + csv + " --format csv --hazard 0.01", "expected run length must be > 1"},
      {"--input " + csv + " --format csv --bogus", "bogus"},
  };
  for (const Case& c : cases) {
    const Result r = RunBinary(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_THAT(r.out, HasSubstr(c.message)) << c.args;
  }
  // Signed data is fine with --raw.
  EXPECT_EQ(
      RunBinary("--input " + Temp("neg2.csv", "t\n1\n-2\n3\n") + " --format csv --raw").exit_code,
      0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: falcon_detect_test PATH_TO_falcon_detect\n");
    return 2;
  }
  g_binary = argv[1];
  return RUN_ALL_TESTS();
}
