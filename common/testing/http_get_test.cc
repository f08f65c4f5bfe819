#include "common/testing/http_get.h"

#include <httplib.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace falcon::common::testing {
namespace {

// An HTTP server on a free loopback port, serving until destroyed.
class LoopbackServer {
 public:
  LoopbackServer() {
    server_.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("falcon_up 1\nfalcon_jobs{state=\"x\"} 2.5\nfalcon_upx 7\nfalcon_bad abc\n",
                      "text/plain");
    });
    server_.Get("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.get_param_value("q"), "text/plain");
    });
    server_.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      absl::SleepFor(absl::Seconds(1));
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) absl::SleepFor(absl::Milliseconds(1));  // stop() needs it.
  }
  ~LoopbackServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
};

TEST(HttpGet, ReturnsTheBodyOf200) {
  LoopbackServer server;
  ASSERT_GT(server.port(), 0);
  auto body = HttpGet(server.port(), "/metrics");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(body->substr(0, 12), "falcon_up 1\n");
  auto by_address = HttpGet(absl::StrCat("127.0.0.1:", server.port()), "/echo?q=a%20b");
  ASSERT_TRUE(by_address.ok()) << by_address.status();
  EXPECT_EQ(*by_address, "a b");
  // A listen address with the wildcard host is reached on loopback.
  auto wildcard = HttpGet(absl::StrCat("0.0.0.0:", server.port()), "/metrics");
  ASSERT_TRUE(wildcard.ok()) << wildcard.status();
}

TEST(ScrapeValue, TheExactSeriesOrAnErrorNamingIt) {
  LoopbackServer server;
  EXPECT_EQ(*ScrapeValue(server.port(), "falcon_up"), 1);
  EXPECT_EQ(*ScrapeValue(server.port(), "falcon_jobs{state=\"x\"}"), 2.5);
  EXPECT_EQ(ScrapeValue(server.port(), "falcon_u").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ScrapeValue(server.port(), "falcon_bad").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HttpGet, OtherStatusIsInternalNamingIt) {
  LoopbackServer server;
  auto missing = HttpGet(server.port(), "/nothing-here");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "HTTP 404")) << missing.status();
}

TEST(HttpGet, NoServerOrNoAnswerIsUnavailable) {
  int closed_port = 0;
  {
    LoopbackServer gone;
    closed_port = gone.port();
  }
  auto refused = HttpGet(closed_port, "/metrics", absl::Seconds(2));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  LoopbackServer server;
  const absl::Time start = absl::Now();
  auto late = HttpGet(server.port(), "/slow", absl::Milliseconds(200));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable) << late.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(900));
}

TEST(HttpGet, MalformedAddressIsInvalidArgument) {
  for (const char* bad : {"localhost", "h:0", "h:70000", "h:x"}) {
    EXPECT_EQ(HttpGet(bad, "/").status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace falcon::common::testing
