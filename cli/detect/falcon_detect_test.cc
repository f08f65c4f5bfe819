// Runs the falcon_detect binary (path in argv[1]) on real data and on bad input.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/testing/run_binary.h"
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

// Runs the binary with `args` split at spaces (no argument here contains one). exit_code is the
// shell's: 128 + signal for a crash.
Result RunBinary(const std::string& args) {
  Result r;
  std::vector<std::string> argv = {g_binary};
  for (absl::string_view a : absl::StrSplit(args, ' ', absl::SkipEmpty())) argv.emplace_back(a);
  absl::StatusOr<falcon::common::testing::BinaryRun> run = falcon::common::testing::RunBinary(argv);
  if (!run.ok()) {
    r.out = run.status().ToString();
    return r;
  }
  r.exit_code = run->status.ShellCode();
  r.out = run->output();
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

// An operator's nccl-tests table: node n3's NIC is slow with everyone, the n1-n4 link alone is
// slow, and n6 was measured once (slow): the report names the node, the link, and what to measure.
TEST(FalconDetectTest, PairwiseTableNamesTheNodeTheLinkAndWhatToMeasure) {
  const std::string table = Temp("pairs.csv",
                                 "node_a,node_b,busbw_gbps\n"
                                 "n1,n2,92.1\nn1,n3,45.0\nn1,n4,51.3\nn1,n5,91.0\n"
                                 "n2,n3,44.1\nn2,n4,90.6\nn2,n5,92.4\nn3,n4,46.2\n"
                                 "n3,n5,44.8\nn4,n5,91.7\nn5,n6,30.0\n");
  Result r = RunBinary("--input " + table + " --format pairwise");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("pairwise: 11 pairs of 6 nodes"));
  EXPECT_THAT(r.out, HasSubstr("node n3: all 4 of its pairs are slow"));
  EXPECT_THAT(r.out, HasSubstr("link n1-n4: slow"));
  EXPECT_THAT(r.out, HasSubstr("node n6 or link n5-n6; measure n2-n6 to decide"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("link n1-n3")));  // Part of n3, not a link.
  r = RunBinary("--input " + table + " --format pairwise --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  const json& f = out["pairwise"]["findings"];
  ASSERT_EQ(f.size(), 3u) << r.out;
  EXPECT_EQ(f[0]["kind"], "node");
  EXPECT_EQ(f[0]["node"], "n3");
  EXPECT_EQ(f[1]["kind"], "ambiguous");
  EXPECT_EQ(f[1]["candidates"], json({"node n6", "link n5-n6"}));
  EXPECT_EQ(f[2]["kind"], "link");
  EXPECT_EQ(f[2]["link"], json({"n1", "n4"}));
  // Bad rows name the file and line.
  r = RunBinary("--input " + Temp("bad_pairs.csv", "node_a,node_b,busbw_gbps\nn1,n1,5\n") +
                " --format pairwise");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("bad_pairs.csv:2: pair of 'n1' with itself"));
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

// Each of these aborted (SIGABRT, exit 134) or grew without bound before.
TEST(FalconDetectTest, HostileInputIsAnErrorNeverACrash) {
  // A JSON number beyond the range of a double: nlohmann's out_of_range escaped.
  const std::string big = Temp("big.json", R"({"series":[{"label":"a","raw":[1,2,1e400]}]})");
  Result r = RunBinary("--input " + big + " --format tcpd");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(big + ": not valid JSON at line 1, column 40 (byte 40), at "
                                     "series[0].raw[2]: number overflow parsing '1e400'"));
  // An endless input: bounded by --max_input_bytes (it grew to 6.3 GB).
  r = RunBinary("--input /dev/zero --format csv");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("/dev/zero: larger than the limit of 67108864 bytes "
                               "(--max_input_bytes)"));
  r = RunBinary("--input /dev/zero --format tcpd --max_input_bytes 1000");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("larger than the limit of 1000 bytes (--max_input_bytes)"));
  for (const char* bad : {"0", "-1", "68719476737"}) {
    r = RunBinary("--input /dev/zero --format csv --max_input_bytes " + std::string(bad));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_THAT(
        r.out, HasSubstr("--max_input_bytes: " + std::string(bad) + " is not in [1, 68719476736]"));
  }
  // A CSV header that is not UTF-8, printed as JSON: dump() threw type_error.316.
  const std::string latin1 = Temp("latin1.csv", "t\xb5s\n1\n2\n3\n");
  r = RunBinary("--input " + latin1 + " --format csv --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"name\":\"t\xef\xbf\xbds\""));  // U+FFFD
  // A directory is not an (empty) file.
  const char* tmp = std::getenv("TEST_TMPDIR");
  r = RunBinary(std::string("--input ") + tmp + " --format csv");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr(std::string(tmp) + ": is a directory, not a file"));
  // Ranks out of range in a ByteDance trace.
  r = RunBinary(
      "--input " +
      Temp("bd.csv",
           "step,rank,dp_rank,stage,forward-compute_s,backward-compute_s\n1,-1,0,0,1,1\n") +
      " --format bytedance");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("column \"rank\": -1 is not in [0, 2147483647]"));
  r = RunBinary("--input " + big + " --format tcpd stray");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("unexpected argument 'stray'"));
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
