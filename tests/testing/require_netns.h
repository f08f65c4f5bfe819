// Skip-or-fail (skip.h) for a test that needs network namespaces of its own (the netns cluster,
// cluster/netns.h): root with CAP_NET_ADMIN, iproute2, a usable lock directory.
#ifndef FALCON_TESTS_TESTING_REQUIRE_NETNS_H_
#define FALCON_TESTS_TESTING_REQUIRE_NETNS_H_

#include <string>

#include "absl/status/status.h"
#include "cluster/netns.h"
#include "tests/testing/skip.h"

// Stops the current test (a void function: a TEST body or SetUp()) with
// cluster::CheckNetnsSupport()'s reason when namespaces cannot be made here: a failure under
// CI=true, else a skip.
#define FALCON_REQUIRE_NETNS()                                               \
  do {                                                                       \
    if (absl::Status falcon_netns_ = ::falcon::cluster::CheckNetnsSupport(); \
        !falcon_netns_.ok()) {                                               \
      FALCON_SKIP_OR_FAIL(std::string(falcon_netns_.message()));             \
    }                                                                        \
  } while (0)

#endif  // FALCON_TESTS_TESTING_REQUIRE_NETNS_H_
