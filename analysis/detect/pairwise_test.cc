#include "analysis/detect/pairwise.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace falcon::analysis::detect {
namespace {

using Kind = PairwiseFinding::Kind;

// Every pair of n1..n`nodes` at 100 GB/s, except those `slow` returns a lower figure for.
std::vector<PairMeasurement> Mesh(int nodes,
                                  double (*slow)(const std::string&, const std::string&)) {
  std::vector<PairMeasurement> out;
  for (int i = 1; i <= nodes; ++i) {
    for (int j = i + 1; j <= nodes; ++j) {
      const std::string a = "n" + std::to_string(i), b = "n" + std::to_string(j);
      const double bw = slow != nullptr ? slow(a, b) : 0;
      out.push_back({a, b, bw > 0 ? bw : 100.0, "pair " + a + "-" + b});
    }
  }
  return out;
}

TEST(PairwiseTest, AllPairsAtTheSameSpeedGiveNoFinding) {
  auto r = LocalizePairwise(Mesh(4, nullptr));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs, 6);
  EXPECT_EQ(r->endpoints, 4);
  EXPECT_EQ(r->slow_pairs, 0);
  EXPECT_DOUBLE_EQ(r->reference_bandwidth, 100);
  EXPECT_TRUE(r->findings.empty());
}

TEST(PairwiseTest, ASlowNodeIsNamedOnceNotAsItsLinks) {
  auto r = LocalizePairwise(Mesh(5, [](const std::string& a, const std::string& b) {
    return a == "n3" || b == "n3" ? 40.0 : 0.0;
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->slow_pairs, 4);
  ASSERT_EQ(r->findings.size(), 1u);
  const PairwiseFinding& f = r->findings[0];
  EXPECT_EQ(f.kind, Kind::kEndpoint);
  EXPECT_EQ(f.endpoint, "n3");
  EXPECT_EQ(f.slow_pairs.size(), 4u);
  EXPECT_DOUBLE_EQ(f.ratio, 2.5);
  EXPECT_EQ(
      DescribeFinding(f, "node"),
      "node n3: all 4 of its pairs are slow (x2.50 slower than the reference pair): its NIC or "
      "the node, not 4 separate links");
}

TEST(PairwiseTest, OneSlowPairBetweenHealthyNodesIsTheLink) {
  auto r = LocalizePairwise(Mesh(4, [](const std::string& a, const std::string& b) {
    return a == "n1" && b == "n4" ? 50.0 : 0.0;
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 1u);
  const PairwiseFinding& f = r->findings[0];
  EXPECT_EQ(f.kind, Kind::kLink);
  EXPECT_EQ(f.link, (EndpointPair{"n1", "n4"}));
  EXPECT_DOUBLE_EQ(f.ratio, 2.0);
  EXPECT_EQ(DescribeFinding(f, "node"),
            "link n1-n4: slow (x2.00 slower than the reference pair) while n1 and n4 are fine with "
            "others");
}

TEST(PairwiseTest, AnEndWithNoOtherPairIsAmbiguousAndTheDecidingPairIsNamed) {
  // n4 was measured only against n1: n4's NIC or the n1-n4 link.
  std::vector<PairMeasurement> m = Mesh(3, nullptr);
  m.push_back({"n4", "n1", 30, "line 5"});
  auto r = LocalizePairwise(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 1u);
  const PairwiseFinding& f = r->findings[0];
  EXPECT_EQ(f.kind, Kind::kAmbiguous);
  EXPECT_EQ(f.link, (EndpointPair{"n1", "n4"}));
  EXPECT_EQ(f.candidates, (std::vector<std::string>{"endpoint n4", "link n1-n4"}));
  ASSERT_EQ(f.deciding_pairs.size(), 1u);
  EXPECT_EQ(f.deciding_pairs[0], (EndpointPair{"n2", "n4"}));
  EXPECT_EQ(DescribeFinding(f, "node"),
            "ambiguous: pair n1-n4 is slow (x3.33 slower than the reference pair): node n4 or link "
            "n1-n4; measure n2-n4 to decide (fine: the link; slow: the node)");
}

TEST(PairwiseTest, TwoNodesOnlyCannotBeDecided) {
  auto r = LocalizePairwise({{"a", "b", 10, "line 2"}, {"b", "a", 12, "line 3"}});
  ASSERT_TRUE(r.ok()) << r.status();
  // The only pair is the reference: nothing is slower than it.
  EXPECT_TRUE(r->findings.empty());
  EXPECT_EQ(r->pairs, 1);  // A repeated pair keeps its fastest figure.
  EXPECT_DOUBLE_EQ(r->reference_bandwidth, 12);
}

TEST(PairwiseTest, ASlowNodeAndAnUnrelatedSlowLinkAreBothFound) {
  auto r = LocalizePairwise(Mesh(6, [](const std::string& a, const std::string& b) {
    if (a == "n2" || b == "n2") return 60.0;
    if (a == "n4" && b == "n5") return 20.0;
    return 0.0;
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 2u);
  EXPECT_EQ(r->findings[0].kind, Kind::kEndpoint);
  EXPECT_EQ(r->findings[0].endpoint, "n2");
  EXPECT_EQ(r->findings[1].kind, Kind::kLink);
  EXPECT_EQ(r->findings[1].link, (EndpointPair{"n4", "n5"}));
}

TEST(PairwiseTest, ANodeSlowWithSomePeersOnlyGetsLinksNotTheNode) {
  // n1 is slow with n2 and n3 but fine with n4 and n5: two slow links, n1's NIC is fine.
  auto r = LocalizePairwise(Mesh(5, [](const std::string& a, const std::string& b) {
    return a == "n1" && (b == "n2" || b == "n3") ? 50.0 : 0.0;
  }));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 2u);
  for (const PairwiseFinding& f : r->findings) EXPECT_EQ(f.kind, Kind::kLink);
}

TEST(PairwiseTest, TheThresholdIsTheSlowRatio) {
  auto mesh = Mesh(4, [](const std::string& a, const std::string& b) {
    return a == "n1" && b == "n2" ? 100 / 1.15 : 0.0;
  });
  PairwiseOptions strict;
  strict.slow_ratio = 0.2;
  EXPECT_TRUE(LocalizePairwise(mesh, strict)->findings.empty());
  EXPECT_EQ(LocalizePairwise(mesh)->findings.size(), 1u);  // 0.10 by default.
}

TEST(PairwiseTest, ANodeMeasuredOnlyAgainstSlowNodesIsUntestedNotSlow) {
  // n5 and n6 are slow (90 against 180); n7 was measured only with them.
  std::vector<PairMeasurement> m = Mesh(6, [](const std::string& a, const std::string& b) {
    return a == "n5" || a == "n6" || b == "n5" || b == "n6" ? 90.0 : 180.0;
  });
  m.push_back({"n5", "n7", 90, "x"});
  m.push_back({"n6", "n7", 90, "y"});
  auto r = LocalizePairwise(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 3u);
  EXPECT_EQ(r->findings[0].endpoint, "n5");
  EXPECT_EQ(r->findings[1].endpoint, "n6");
  const PairwiseFinding& f = r->findings[2];
  EXPECT_EQ(f.kind, Kind::kUntested);
  EXPECT_EQ(f.endpoint, "n7");
  ASSERT_EQ(f.deciding_pairs.size(), 1u);
  EXPECT_EQ(f.deciding_pairs[0], (EndpointPair{"n1", "n7"}));
  EXPECT_EQ(DescribeFinding(f, "node"),
            "node n7: measured only against slow nodes (n5-n7, n6-n7): nothing is known about "
            "it; measure n1-n7 to judge it");
}

TEST(PairwiseTest, ANodeWithOneSlowPairBesidesASlowNodeIsAmbiguous) {
  // n4 is slow; n5 has n4-n5 (n4's) and n1-n5 (slow): n5 or the link n1-n5.
  std::vector<PairMeasurement> m = Mesh(4, [](const std::string& a, const std::string& b) {
    return a == "n4" || b == "n4" ? 40.0 : 0.0;
  });
  m.push_back({"n4", "n5", 40, "x"});
  m.push_back({"n1", "n5", 40, "y"});
  auto r = LocalizePairwise(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->findings.size(), 2u);
  EXPECT_EQ(r->findings[0].kind, Kind::kEndpoint);
  EXPECT_EQ(r->findings[0].endpoint, "n4");
  EXPECT_EQ(r->findings[1].kind, Kind::kAmbiguous);
  EXPECT_EQ(r->findings[1].link, (EndpointPair{"n1", "n5"}));
}

// Uniform noise of +-8% around 180 in a 60-node mesh: the tail is not slow; a slow node still is.
TEST(PairwiseTest, MeasurementNoiseInALargeTableIsNotSlow) {
  auto noisy = [](bool slow_n7, const PairwiseOptions& options) {
    std::vector<PairMeasurement> m;
    uint64_t x = 12345;
    for (int i = 1; i <= 60; ++i) {
      for (int j = i + 1; j <= 60; ++j) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const double u = static_cast<double>(x >> 11) / 9007199254740992.0;  // [0, 1)
        const bool slow = slow_n7 && (i == 7 || j == 7);
        m.push_back({"n" + std::to_string(i), "n" + std::to_string(j),
                     (slow ? 90.0 : 180.0) * (0.92 + 0.16 * u), ""});
      }
    }
    return *LocalizePairwise(m, options);
  };
  const PairwiseResult healthy = noisy(false, {});
  EXPECT_EQ(healthy.slow_pairs, 0);
  EXPECT_TRUE(healthy.findings.empty());
  EXPECT_GT(healthy.noise_sigma, 0);
  PairwiseOptions off;
  off.noise_sigmas = 0;  // The ratio alone flags the tail of the noise (about 1 pair in 6).
  EXPECT_GT(noisy(false, off).slow_pairs, 100);
  const PairwiseResult one = noisy(true, {});
  ASSERT_EQ(one.findings.size(), 1u);
  EXPECT_EQ(one.findings[0].endpoint, "n7");
}

TEST(PairwiseTest, TheReferenceIsAMeasuredPairAndASlowMajorityIsWarnedOf) {
  // Two pairs: the reference is the faster one (not 97.5 between them), so 90 is slow.
  auto two = LocalizePairwise({{"a", "b", 100, ""}, {"b", "c", 90, ""}});
  ASSERT_TRUE(two.ok());
  EXPECT_DOUBLE_EQ(two->reference_bandwidth, 100);
  EXPECT_EQ(two->slow_pairs, 1);
  // 4 nodes, 2 of them slow: 5 of 6 pairs slow, the reference is a slow pair; the one fast
  // pair is counted as faster than the reference.
  auto most = LocalizePairwise(Mesh(4, [](const std::string& a, const std::string& b) {
    return a == "n1" && b == "n2" ? 0.0 : 50.0;
  }));
  ASSERT_TRUE(most.ok());
  EXPECT_EQ(most->fast_pairs, 1);
}

TEST(PairwiseTest, BadInputNamesItsOrigin) {
  EXPECT_NE(LocalizePairwise({}).status().message().find("no pair measured"), std::string::npos);
  auto self = LocalizePairwise({{"n1", "n1", 5, "line 4"}});
  EXPECT_EQ(self.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(self.status().message().find("line 4: pair of 'n1' with itself"), std::string::npos)
      << self.status();
  for (double bad : {0.0, -1.0, std::nan(""), 1.0 / 0.0, 1e-320}) {
    auto r = LocalizePairwise({{"n1", "n2", bad, "line 9"}});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("line 9: bandwidth of n1-n2"), std::string::npos)
        << r.status();
  }
  EXPECT_NE(LocalizePairwise({{"", "n2", 1, "line 3"}}).status().message().find("line 3: empty"),
            std::string::npos);
  PairwiseOptions bad;
  bad.slow_ratio = 0;
  EXPECT_NE(LocalizePairwise(Mesh(3, nullptr), bad).status().message().find("slow_ratio"),
            std::string::npos);
}

}  // namespace
}  // namespace falcon::analysis::detect
