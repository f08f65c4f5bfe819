#include "cli/ctl/commands.h"

#include "gtest/gtest.h"

namespace falcon::cli::ctl {
namespace {

// A script tells a refusal of its identity (4) from an outage (3) and from its own mistakes (2).
TEST(ExitCodeForTest, DenialsOutagesAndUsageDiffer) {
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OK), kExitOk);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::NOT_FOUND), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::INVALID_ARGUMENT), kExitUsage);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::OUT_OF_RANGE), kExitUsage);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::PERMISSION_DENIED), kExitDenied);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAUTHENTICATED), kExitDenied);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNAVAILABLE), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::UNIMPLEMENTED), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(grpc::StatusCode::INTERNAL), kExitUnavailable);
}

}  // namespace
}  // namespace falcon::cli::ctl
