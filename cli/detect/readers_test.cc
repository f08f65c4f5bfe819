#include "cli/detect/readers.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::cli::detect {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& content) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << content;
  return path;
}

std::string Message(const absl::StatusOr<DetectInput>& r) {
  return std::string(r.status().message());
}

TEST(ParseFormatTest, KnownAndUnknown) {
  EXPECT_EQ(*ParseFormat("csv"), InputFormat::kCsv);
  EXPECT_EQ(*ParseFormat("tcpd"), InputFormat::kTcpd);
  EXPECT_EQ(*ParseFormat("alibaba"), InputFormat::kAlibaba);
  EXPECT_EQ(*ParseFormat("bytedance"), InputFormat::kBytedance);
  EXPECT_EQ(*ParseFormat("pairwise"), InputFormat::kPairwise);
  EXPECT_THAT(ParseFormat("parquet").status().message(), HasSubstr("unknown format \"parquet\""));
}

TEST(ReadPairwiseTest, OnePairPerRowWithItsLineAndAChosenColumn) {
  const std::string path =
      WriteTemp("p.csv", "node_a,node_b,busbw_gbps,algbw_gbps\nn1,n2,92.5,46\n\nn2,n3,40,20\n");
  const DetectInput in = *ReadPairwise(path, "");
  EXPECT_TRUE(in.series.empty());
  ASSERT_EQ(in.pairs.size(), 2u);
  EXPECT_EQ(in.pairs[0].a, "n1");
  EXPECT_EQ(in.pairs[0].b, "n2");
  EXPECT_DOUBLE_EQ(in.pairs[0].bandwidth, 92.5);
  EXPECT_EQ(in.pairs[1].origin, path + ":4");
  EXPECT_DOUBLE_EQ(ReadPairwise(path, "algbw_gbps")->pairs[1].bandwidth, 20);
}

TEST(ReadPairwiseTest, BadInputNamesTheLineOrColumn) {
  EXPECT_THAT(Message(ReadPairwise(WriteTemp("p1.csv", "a,b,busbw_gbps\nn1,n2,3\n"), "")),
              HasSubstr("node_a"));
  EXPECT_THAT(Message(ReadPairwise(WriteTemp("p2.csv", "node_a,node_b,bw\nn1,n2,3\n"), "")),
              HasSubstr("busbw_gbps"));
  EXPECT_THAT(
      Message(ReadPairwise(WriteTemp("p3.csv", "node_a,node_b,busbw_gbps\nn1,n2,fast\n"), "")),
      HasSubstr("line 2"));
  const std::string empty = WriteTemp("p4.csv", "node_a,node_b,busbw_gbps\nn1,,3\n");
  EXPECT_THAT(Message(ReadPairwise(empty, "")), HasSubstr(empty + ":2: column node_b is empty"));
}

TEST(ReadCsvTest, DefaultLastColumnOrNamedColumn) {
  const std::string path =
      WriteTemp("a.csv", "iteration,\"time, ms\"\r\n1,10.5\n2,11\n\n3,\"12\"\n");
  const DetectInput in = *ReadCsv(path, "");
  ASSERT_EQ(in.series.size(), 1u);
  EXPECT_EQ(in.series[0].name, "time, ms");
  EXPECT_THAT(in.series[0].values, ElementsAre(10.5, 11, 12));
  EXPECT_THAT(in.series[0].origins, ElementsAre("line 2", "line 3", "line 5"));
  EXPECT_THAT(ReadCsv(path, "iteration")->series[0].values, ElementsAre(1, 2, 3));
}

TEST(ReadCsvTest, Utf8ByteOrderMarkIsNotPartOfTheFirstColumnName) {
  // Spreadsheet exports (Excel "CSV UTF-8") start with EF BB BF.
  const std::string path = WriteTemp("bom.csv", "\xEF\xBB\xBFiteration,time\r\n1,10\n2,11\n");
  absl::StatusOr<DetectInput> in = ReadCsv(path, "iteration");
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->series[0].name, "iteration");
  EXPECT_THAT(in->series[0].values, ElementsAre(1, 2));
  const std::string bd =
      WriteTemp("bom_bd.csv",
                "\xEF\xBB\xBFstep,rank,dp_rank,stage,forward-compute_s,backward-compute_s\n"
                "1,0,0,0,1,2\n");
  absl::StatusOr<DetectInput> b = ReadBytedance(bd, "");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->series[0].values, ElementsAre(3));
}

TEST(ReadCsvTest, BadInputNamesTheProblem) {
  EXPECT_EQ(ReadCsv("/nonexistent/x.csv", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(ReadCsv(WriteTemp("e.csv", ""), "")), HasSubstr("file is empty"));
  EXPECT_THAT(Message(ReadCsv(WriteTemp("h.csv", "a,b\n"), "")), HasSubstr("no data rows"));
  const std::string p = WriteTemp("c.csv", "a,b\n1,2\n3,nan\n5,x\n");
  EXPECT_THAT(Message(ReadCsv(p, "zz")), HasSubstr("no column \"zz\"; columns are: a, b"));
  EXPECT_THAT(Message(ReadCsv(p, "b")), HasSubstr("line 3, column \"b\": nan is not a finite"));
  EXPECT_THAT(Message(ReadCsv(WriteTemp("d.csv", "a,b\n1,2\n5,x\n"), "b")),
              HasSubstr("line 3, column \"b\": \"x\" is not a number"));
  EXPECT_THAT(Message(ReadCsv(WriteTemp("f.csv", "a,b\n1,2,3\n"), "")),
              HasSubstr("line 2: 3 fields, the header has 2"));
}

TEST(ReadTcpdTest, SeriesAndErrors) {
  const std::string p =
      WriteTemp("t.json", R"({"name": "toy", "series": [{"label": "V1", "raw": [1, 2.5, 3]},
                                             {"label": "V2", "raw": [4, 5, 6]}]})");
  const DetectInput in = *ReadTcpd(p, "");
  ASSERT_EQ(in.series.size(), 2u);
  EXPECT_EQ(in.series[0].name, "toy/V1");
  EXPECT_THAT(in.series[0].values, ElementsAre(1, 2.5, 3));
  EXPECT_THAT(ReadTcpd(p, "V2")->series[0].values, ElementsAre(4, 5, 6));
  EXPECT_THAT(Message(ReadTcpd(p, "V9")), HasSubstr("no series labelled \"V9\""));
  EXPECT_THAT(
      Message(ReadTcpd(WriteTemp("n.json", R"({"series":[{"label":"V1","raw":[1,null]}]})"), "")),
      HasSubstr("series \"V1\" raw[1] is null, not a number"));
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("b.json", "{"), "")), HasSubstr("not valid JSON"));
  // A parse error says where: line, column and byte offset, and what nlohmann found there.
  const std::string bad = WriteTemp("b2.json", "{\"series\": [\n  {\"raw\": [1, 2,, 3]}\n]}\n");
  EXPECT_THAT(
      Message(ReadTcpd(bad, "")),
      HasSubstr(bad + ": not valid JSON at line 2, column 17 (byte 30), at series[0].raw[2]: "
                      "syntax error"));
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("b3.json", "{\"series\": ["), "")),
              HasSubstr("not valid JSON at line 1, column 13 (byte 13), at series[0]: syntax error "
                        "while parsing value - unexpected end of input"));
  // A deeply nested value is refused while parsing (dump() recursed and crashed); a shallow one
  // is named by its type, not dumped.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("d.json", R"({"series":[{"raw":[)" + deep + "]}]}"), "")),
              HasSubstr("at series[0].raw[0][0]"));
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("d.json", R"({"series":[{"raw":[)" + deep + "]}]}"), "")),
              HasSubstr("nested deeper than 100 levels"));
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("d2.json", R"({"series":[{"raw":[[[1]]]}]})"), "")),
              HasSubstr("raw[0] is an array, not a number"));
  EXPECT_THAT(Message(ReadTcpd(WriteTemp("o.json", "[]"), "")), HasSubstr("\"series\" array"));
}

// 1e400 parses as a valid JSON number beyond the range of a double: nlohmann threw
// out_of_range, uncaught, and falcon_detect aborted (SIGABRT).
TEST(ReadTcpdTest, NumberBeyondDoubleRangeIsAnErrorNamingTheField) {
  const std::string p =
      WriteTemp("big.json", "{\"series\": [{\"label\": \"a\", \"raw\": [1, 2,\n 1e400]}]}");
  absl::StatusOr<DetectInput> in = ReadTcpd(p, "");
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(in), p + ": not valid JSON at line 2, column 6 (byte 47), at "
                             "series[0].raw[2]: number overflow parsing '1e400'");
}

// falcon_detect --input /dev/zero grew to 6.3 GB; a directory read as an empty file.
TEST(ReadInputTest, InputIsBoundedAndMustBeAFile) {
  for (InputFormat f :
       {InputFormat::kCsv, InputFormat::kTcpd, InputFormat::kAlibaba, InputFormat::kBytedance}) {
    absl::StatusOr<DetectInput> in = ReadInput("/dev/zero", f, "", ReadLimits{1 << 20});
    EXPECT_EQ(in.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(Message(in), "/dev/zero: larger than the limit of 1048576 bytes (--max_input_bytes)");
    const char* tmp = std::getenv("TEST_TMPDIR");
    const std::string dir = tmp != nullptr ? tmp : "/tmp";
    EXPECT_EQ(Message(ReadInput(dir, f, "")), dir + ": is a directory, not a file");
  }
  const std::string p = WriteTemp("limit.csv", "t\n1\n2\n");
  EXPECT_TRUE(ReadCsv(p, "", ReadLimits{6}).ok());
  EXPECT_EQ(ReadCsv(p, "", ReadLimits{5}).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(ReadAlibabaTest, OneSeriesPerWorkerSortedByTime) {
  const std::string p = WriteTemp("al.csv",
                                  ",worker,gpu,time,batch_time_norm\n"
                                  "0,1,25,11,500\n1,0,25,1,400\n2,1,25,1,510\n3,0,25,11,410\n"
                                  "4,0,25,11,410\n");
  const DetectInput in = *ReadAlibaba(p, "");
  ASSERT_EQ(in.series.size(), 2u);
  EXPECT_EQ(in.series[0].name, "worker_0");
  EXPECT_THAT(in.series[0].values, ElementsAre(400, 410, 410));  // The repeated row is kept.
  EXPECT_EQ(in.series[1].name, "worker_1");
  EXPECT_THAT(in.series[1].values, ElementsAre(510, 500));
  EXPECT_THAT(Message(ReadAlibaba(WriteTemp("al2.csv",
                                            ",worker,time,batch_time_norm\n"
                                            "0,1,1,5\n1,1,1,6\n"),
                                  "")),
              HasSubstr("worker 1 has time 1 twice with different values"));
  EXPECT_THAT(Message(ReadAlibaba(WriteTemp("al3.csv", "worker,time,x\n0,1,5\n"), "")),
              HasSubstr("no column \"batch_time_norm\""));
}

TEST(ReadBytedanceTest, SeriesPerRankAndBlameInputPerStep) {
  const std::string header =
      "step,rank,dp_rank,stage,forward-compute_s,backward-compute_s,forward-send_s,"
      "forward-recv_s,backward-send_s,backward-recv_s,grads-reduce-scatter_s\n";
  const std::string p = WriteTemp("bd.csv", header +
                                                "5,0,0,0,1,2,0.1,0,0,0.2,0.3\n"
                                                "5,1,0,1,1,2,0,0.5,0.1,0,0.3\n"
                                                "3,0,0,0,1,1,0.1,0,0,0.1,0.1\n"
                                                "3,1,0,1,1,1,0,0.1,0.1,0,0.1\n");
  const DetectInput in = *ReadBytedance(p, "");
  ASSERT_EQ(in.series.size(), 2u);
  EXPECT_EQ(in.series[0].name, "rank_0");
  EXPECT_THAT(in.series[0].values, ElementsAre(DoubleEq(2.3), DoubleEq(3.6)));  // Steps 3, 5.
  ASSERT_EQ(in.steps.size(), 2u);
  const analysis::detect::BlameInput& s5 = in.steps[1];
  EXPECT_EQ(s5.step, 5);
  ASSERT_EQ(s5.ranks.size(), 2u);
  EXPECT_EQ(s5.ranks[1].group, 1);
  EXPECT_EQ(s5.ranks[1].compute, absl::Seconds(3));
  // Two DP communicators (one per stage) and a forward and a backward pipeline pair.
  ASSERT_EQ(s5.comms.size(), 4u);
  EXPECT_EQ(s5.comms[2].kind, "forward-p2p");
  EXPECT_EQ(s5.comms[2].members[1].busy, absl::Seconds(0.5));
  EXPECT_THAT(ReadBytedance(p, "forward-compute_s")->series[1].values, ElementsAre(1, 1));
  EXPECT_THAT(Message(ReadBytedance(p, "nope_s")), HasSubstr("no column \"nope_s\""));
  EXPECT_THAT(Message(ReadBytedance(WriteTemp("bd2.csv", header + "5,0,0,0,1,-2,0,0,0,0,0\n"), "")),
              HasSubstr("line 2, column \"backward-compute_s\": negative time"));
  // Two ranks in one (dp_rank, stage) cell of a step: blame would silently drop one of them.
  EXPECT_THAT(Message(ReadBytedance(WriteTemp("bd4.csv", header + "5,0,0,0,1,2,0.1,0,0,0.2,0.3\n"
                                                                  "5,1,0,1,1,2,0,0.5,0.1,0,0.3\n"
                                                                  "5,2,0,1,1,2,0,0.5,0.1,0,0.3\n"),
                                    "")),
              HasSubstr("line 4: step 5: rank 2 and rank 1 (line 3) both have dp_rank 0, stage 1"));
  EXPECT_THAT(
      Message(ReadBytedance(WriteTemp("bd3.csv", "step,rank,dp_rank,stage\n1,0,0,0\n"), "")),
      HasSubstr("no column \"forward-compute_s\""));
}

// A rank -1 or 99999999999999 became a series "rank_-1" / "rank_99999999999999".
TEST(ReadBytedanceTest, KeysOutOfRangeAreNamed) {
  const std::string header = "step,rank,dp_rank,stage,forward-compute_s,backward-compute_s\n";
  EXPECT_EQ(Message(ReadBytedance(WriteTemp("r1.csv", header + "1,-1,0,0,1,1\n"), "")),
            WriteTemp("r1.csv", header + "1,-1,0,0,1,1\n") +
                " line 2, column \"rank\": -1 is not in [0, 2147483647]");
  EXPECT_THAT(
      Message(ReadBytedance(WriteTemp("r2.csv", header + "1,99999999999999,0,0,1,1\n"), "")),
      HasSubstr("column \"rank\": 99999999999999 is not in [0, 2147483647]"));
  EXPECT_THAT(Message(ReadBytedance(WriteTemp("r3.csv", header + "1,0,0,-2,1,1\n"), "")),
              HasSubstr("column \"stage\": -2 is not in"));
  EXPECT_THAT(Message(ReadBytedance(WriteTemp("r4.csv", header + "-5,0,0,0,1,1\n"), "")),
              HasSubstr("column \"step\": -5 is not in"));
}

}  // namespace
}  // namespace falcon::cli::detect
