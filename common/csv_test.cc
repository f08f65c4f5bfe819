#include "common/csv.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace falcon::common {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CsvTest, SplitsQuotedFieldsAndTrims) {
  EXPECT_EQ(SplitCsvLine(R"(a, "b,c" ,"say ""hi""")"),
            (std::vector<std::string>{"a", "b,c", "say \"hi\""}));
}

TEST(CsvTest, ParsesHeaderRowsAndLineNumbers) {
  absl::StatusOr<CsvTable> t = ParseCsv("f.csv", "\xEF\xBB\xBFx,y\r\n1,2\n\n3,4\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->header, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(t->lines, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(*FindColumn(*t, "y"), 1u);
  EXPECT_EQ(*ParseNumber(*t, 1, 1), 4.0);
  EXPECT_EQ(*ParseInteger(*t, 0, 0), 1);
  EXPECT_EQ(FindColumn(*t, "z").status().message(), "f.csv: no column \"z\"; columns are: x, y");
}

TEST(CsvTest, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(ParseCsv("f.csv", "x,y\n1\n").status().message(),
            "f.csv line 2: 1 fields, the header has 2");
  EXPECT_EQ(ParseCsv("f.csv", "").status().message(), "f.csv: file is empty");
  EXPECT_EQ(ParseCsv("f.csv", "x\n").status().message(), "f.csv: no data rows after the header");
  absl::StatusOr<CsvTable> t = ParseCsv("f.csv", "x\nabc\ninf\n0x10\n1e400\n-2.5e-3\n");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(ParseNumber(*t, 0, 0).status().message(),
            "f.csv line 2, column \"x\": \"abc\" is not a number");
  EXPECT_FALSE(ParseNumber(*t, 1, 0).ok());
  EXPECT_EQ(ParseNumber(*t, 2, 0).status().message(),
            "f.csv line 4, column \"x\": \"0x10\" is not a number");  // Decimal only.
  EXPECT_FALSE(ParseNumber(*t, 3, 0).ok());
  EXPECT_DOUBLE_EQ(*ParseNumber(*t, 4, 0), -2.5e-3);
  EXPECT_EQ(ReadCsvFile("/nonexistent/x.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(AlibabaPaiTest, OneSeriesPerWorkerInTimeOrderKeepingRepeatedRows) {
  const std::string p = WriteTemp("job.csv",
                                  ",worker,gpu,time,batch_time_norm\n"
                                  "0,1,0,20,0.5\n"
                                  "1,0,0,10,1.5\n"
                                  "2,1,0,10,0.25\n"
                                  "3,1,0,10,0.25\n");
  absl::StatusOr<std::vector<AlibabaWorkerSeries>> s = ReadAlibabaPaiCsv(p);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].worker, 0);
  EXPECT_EQ((*s)[0].values, (std::vector<double>{1.5}));
  EXPECT_EQ((*s)[1].worker, 1);
  EXPECT_EQ((*s)[1].values, (std::vector<double>{0.25, 0.25, 0.5}));
  EXPECT_EQ((*s)[1].lines, (std::vector<int64_t>{4, 5, 2}));
  EXPECT_EQ(ReadAlibabaPaiCsv(p, "gpu")->at(1).values, (std::vector<double>{0, 0, 0}));
}

TEST(AlibabaPaiTest, ConflictingRowsAndMissingColumnsAreErrors) {
  const std::string p = WriteTemp("bad.csv", "worker,time,batch_time_norm\n0,1,5\n0,1,6\n");
  EXPECT_NE(ReadAlibabaPaiCsv(p).status().message().find("worker 0 has time 1 twice"),
            std::string::npos);
  const std::string q = WriteTemp("bad2.csv", "worker,time,x\n0,1,5\n");
  EXPECT_NE(ReadAlibabaPaiCsv(q).status().message().find("no column \"batch_time_norm\""),
            std::string::npos);
}

}  // namespace
}  // namespace falcon::common
