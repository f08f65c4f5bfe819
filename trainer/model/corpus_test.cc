#include "trainer/model/corpus.h"

#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::trainer::model {
namespace {

TEST(CorpusTest, LoadsTheDefaultDebianText) {
  absl::StatusOr<Corpus> c = Corpus::Load(kDefaultCorpusPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->size(), 30000);
  EXPECT_GT(c->vocab_size(), 40);
  EXPECT_LT(c->vocab_size(), 128);
  EXPECT_GE(c->IdOf('e'), 0);
  EXPECT_EQ(c->CharOf(c->IdOf('e')), 'e');
}

TEST(CorpusTest, MissingFileIsNotFoundNamingThePath) {
  absl::StatusOr<Corpus> c = Corpus::Load("/nonexistent/text.txt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/text.txt"), std::string::npos);
}

// /dev/zero aborted falcon_train (std::bad_alloc); a directory read as an empty text.
TEST(CorpusTest, EndlessFileAndDirectoryAreInvalidNamingThem) {
  absl::StatusOr<Corpus> c = Corpus::Load("/dev/zero");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "training text: /dev/zero: larger than the limit of 67108864 bytes");
  c = Corpus::Load("/");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "training text: /: is a directory, not a file");
}

TEST(CorpusTest, TooShortTextIsInvalid) {
  EXPECT_EQ(Corpus::FromText("abc", 16).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CorpusTest, VocabularyIsSortedDistinctBytes) {
  absl::StatusOr<Corpus> c = Corpus::FromText("banana bandana", 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->vocab_size(), 5);  // ' ', a, b, d, n
  EXPECT_EQ(c->CharOf(0), ' ');
  EXPECT_EQ(c->IdOf('z'), -1);
  std::string decoded;
  for (int id : c->ids()) decoded.push_back(static_cast<char>(c->CharOf(id)));
  EXPECT_EQ(decoded, "banana bandana");
}

TEST(CorpusTest, MicroBatchesAreRealWindowsAndDeterministic) {
  const std::string text = "the quick brown fox jumps over the lazy dog, again and again.";
  absl::StatusOr<Corpus> c = Corpus::FromText(text, 4);
  ASSERT_TRUE(c.ok());
  const int b = 16, k = 5;
  std::vector<int32_t> ctx(b * k), tgt(b), ctx2(b * k), tgt2(b);
  c->FillMicroBatch(7, 3, 2, b, k, ctx.data(), tgt.data());
  c->FillMicroBatch(7, 3, 2, b, k, ctx2.data(), tgt2.data());
  EXPECT_EQ(ctx, ctx2);
  EXPECT_EQ(tgt, tgt2);
  for (int r = 0; r < b; ++r) {
    std::string window;
    for (int j = 0; j < k; ++j) window.push_back(static_cast<char>(c->CharOf(ctx[r * k + j])));
    window.push_back(static_cast<char>(c->CharOf(tgt[r])));
    EXPECT_NE(text.find(window), std::string::npos) << window;
  }
  // Another micro-batch, iteration or seed samples other windows.
  std::set<std::vector<int32_t>> distinct;
  for (int it = 0; it < 4; ++it) {
    c->FillMicroBatch(7, it, 0, b, k, ctx2.data(), tgt2.data());
    distinct.insert(ctx2);
  }
  c->FillMicroBatch(8, 0, 0, b, k, ctx2.data(), tgt2.data());
  distinct.insert(ctx2);
  EXPECT_EQ(distinct.size(), 5u);
}

}  // namespace
}  // namespace falcon::trainer::model
