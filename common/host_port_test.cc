#include "common/host_port.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace falcon::common {
namespace {

using ::testing::HasSubstr;

std::string Error(absl::string_view address, PortZero zero = PortZero::kRefused) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address, "--controller", zero);
  EXPECT_TRUE(absl::IsInvalidArgument(hp.status())) << address;
  return std::string(hp.status().message());
}

TEST(HostPortTest, AcceptsNamesIpv4AndBracketedIpv6) {
  absl::StatusOr<HostPort> a = ParseHostPort("127.0.0.1:7070", "--controller", PortZero::kRefused);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 7070);
  absl::StatusOr<HostPort> b = ParseHostPort("[::1]:65535", "x", PortZero::kRefused);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 65535);
  EXPECT_TRUE(ParseHostPort("ctl-1.example_net:1", "x", PortZero::kRefused).ok());
  EXPECT_TRUE(ParseHostPort("0.0.0.0:0", "x", PortZero::kAnyFree).ok());
  EXPECT_TRUE(ParseHostPort("[::]:0", "x", PortZero::kAnyFree).ok());
}

// 127.0.0.1:99999 used to reach port 99999 mod 65536 = 34463.
TEST(HostPortTest, PortOutsideItsRangeIsNamed) {
  EXPECT_EQ(Error("127.0.0.1:99999"),
            "--controller: '127.0.0.1:99999': port '99999' is not in [1, 65535]");
  EXPECT_EQ(Error("h:0"), "--controller: 'h:0': port '0' is not in [1, 65535]");
  EXPECT_EQ(Error("h:65536", PortZero::kAnyFree),
            "--controller: 'h:65536': port '65536' is not in [0, 65535] (0 = any free)");
  EXPECT_THAT(Error("h:-1"), HasSubstr("port '-1'"));
  EXPECT_THAT(Error("h:+80"), HasSubstr("port '+80'"));
  EXPECT_THAT(Error("h:7070x"), HasSubstr("port '7070x'"));
  EXPECT_THAT(Error("h:"), HasSubstr("port ''"));
  EXPECT_THAT(Error("h:000000080"), HasSubstr("port '000000080'"));
  EXPECT_THAT(Error("h:18446744073709551617"), HasSubstr("is not in [1, 65535]"));
}

TEST(HostPortTest, MalformedHostsAreNamed) {
  EXPECT_EQ(Error("nohost"), "--controller: 'nohost' is not HOST:PORT");
  EXPECT_EQ(Error(""), "--controller: '' is not HOST:PORT");
  EXPECT_EQ(Error(":7070"), "--controller: ':7070' has no host");
  EXPECT_EQ(Error("[]:7070"), "--controller: '[]:7070' has no host");
  EXPECT_EQ(Error("[::1:7070"), "--controller: '[::1:7070': unterminated [IPv6] host");
  EXPECT_THAT(Error("a b:7070"), HasSubstr("host 'a b' is not a DNS name"));
  EXPECT_THAT(Error("\xff:7070"), HasSubstr("is not a DNS name"));
  EXPECT_THAT(Error("[zz]:7070"), HasSubstr("host 'zz' is not an IPv6 address"));
  EXPECT_THAT(Error("unix:/run/x.sock"), HasSubstr("port '/run/x.sock'"));
}

TEST(HostPortTest, EmptyFieldStartsAtTheAddress) {
  EXPECT_EQ(ParseHostPort("h:0", "", PortZero::kRefused).status().message(),
            "'h:0': port '0' is not in [1, 65535]");
}

}  // namespace
}  // namespace falcon::common
