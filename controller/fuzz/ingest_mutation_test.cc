// Deterministic mutation fuzzing of the ingest path with gcc (the libFuzzer target needs clang):
// realistic inputs built from real data (Alibaba PAI job 1) are mutated byte-wise (bit flips,
// overwrites, inserts, deletes, truncation, splices) and field-wise (protobuf reflection sets a
// random field of a random message to an extreme or random value, clears or duplicates repeated
// fields), and every mutant runs through FuzzIngestOnce, which checks the invariants. Seeded, so
// every run tries the same inputs; bounded by a count, not by time.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "controller/fuzz/ingest_fuzz.h"
#include "controller/testing/alibaba_data.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "gtest/gtest.h"
#include "tests/real_data.h"

namespace falcon::controller::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string MutateBytes(std::string s) {
    const int edits = 1 + Below(4);
    for (int e = 0; e < edits; ++e) {
      if (s.empty()) s.push_back(static_cast<char>(Below(256)));
      size_t pos = Below(s.size());
      switch (Below(6)) {
        case 0:
          s[pos] = static_cast<char>(s[pos] ^ (1 << Below(8)));
          break;
        case 1:
          s[pos] = static_cast<char>(Below(256));
          break;
        case 2:
          s.insert(pos, std::string(1 + Below(8), static_cast<char>(Below(256))));
          break;
        case 3:
          s.erase(pos, 1 + Below(16));
          break;
        case 4:
          s.resize(pos);
          break;
        default: {
          size_t from = Below(s.size());
          s.insert(pos, s.substr(from, 1 + Below(64)));
        }
      }
    }
    return s;
  }

  // Picks a (possibly nested) message and changes one field.
  void MutateMessage(Message* m, int depth = 0) {
    const auto* d = m->GetDescriptor();
    const Reflection* r = m->GetReflection();
    if (d->field_count() == 0) return;
    const FieldDescriptor* f = d->field(Below(d->field_count()));
    if (f->is_repeated()) {
      int n = r->FieldSize(*m, f);
      if (n > 0 && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && depth < 4 && Below(3)) {
        MutateMessage(r->MutableRepeatedMessage(m, f, Below(n)), depth + 1);
      } else if (n > 0 && Below(2)) {
        r->RemoveLast(m, f);
      } else if (n > 0 && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        r->AddMessage(m, f)->CopyFrom(r->GetRepeatedMessage(*m, f, Below(n)));
      } else {
        r->ClearField(m, f);
      }
      return;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (depth < 4) MutateMessage(r->MutableMessage(m, f), depth + 1);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(m, f, Pick<int32_t>({0, -1, 1, INT32_MAX, INT32_MIN}));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(m, f, Pick<int64_t>({0, -1, 1, INT64_MAX, INT64_MIN, 3'600'000'000'001}));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(m, f, Pick<uint32_t>({0, 1, 7, 8, 1u << 20, UINT32_MAX}));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(m, f, Pick<uint64_t>({0, 1, 2, 1000, (1ull << 40) + 1, UINT64_MAX}));
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        r->SetDouble(m, f, Pick<double>({0, -1, 1e308, std::numeric_limits<double>::quiet_NaN()}));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        r->SetBool(m, f, !r->GetBool(*m, f));
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        r->SetEnumValue(m, f, Pick<int>({0, 1, 2, 3, 7, 99, -1}));
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(m, f,
                     Pick<std::string>(
                         {"", "fuzz", "other-job", std::string(300, 'x'), std::string("a\0b", 3)}));
        break;
      default:
        break;
    }
  }

  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
  }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Below(values.size()));
  }

 private:
  std::mt19937_64 rng_;
};

TEST(IngestMutationTest, MutatedRealMessagesKeepTheInvariants) {
  FALCON_REQUIRE_REAL_DATA();
  auto data = testing::LoadAlibabaJob(
      falcon::tests::RealDataPath("alibaba_pai_minibatch_time/job_1_norm.csv"));
  ASSERT_TRUE(data.ok()) << data.status();
  std::vector<std::vector<falcon::v1::AgentMessage>> seeds = SeedMessages(&*data);
  ASSERT_GE(seeds.size(), 10u);
  // The seeds themselves are valid and accepted.
  for (const auto& seed : seeds) {
    absl::Status s = FuzzIngestOnce(EncodeInput(seed));
    ASSERT_TRUE(s.ok()) << s;
  }
  Mutator mutator(20240901);
  constexpr int kInputs = 2500;
  int field_mutants = 0;
  for (int i = 0; i < kInputs; ++i) {
    std::vector<falcon::v1::AgentMessage> messages = seeds[mutator.Below(seeds.size())];
    // Shorten most inputs: most of the work is per message, and short ones explore faster.
    if (messages.size() > 12 && mutator.Below(4) != 0) {
      size_t start = mutator.Below(messages.size() - 12);
      messages = std::vector<falcon::v1::AgentMessage>(messages.begin() + start,
                                                       messages.begin() + start + 12);
    }
    std::string input;
    if (i % 2 == 0) {
      const int edits = 1 + static_cast<int>(mutator.Below(3));
      for (int e = 0; e < edits; ++e)
        mutator.MutateMessage(&messages[mutator.Below(messages.size())]);
      if (mutator.Below(4) == 0) std::swap(messages[0], messages[mutator.Below(messages.size())]);
      input = EncodeInput(messages);
      ++field_mutants;
    } else {
      input = mutator.MutateBytes(EncodeInput(messages));
    }
    absl::Status s = FuzzIngestOnce(input);
    ASSERT_TRUE(s.ok()) << "input " << i << ": " << s;
  }
  EXPECT_EQ(field_mutants, kInputs / 2);
}

}  // namespace
}  // namespace falcon::controller::fuzz
