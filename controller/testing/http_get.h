// A minimal HTTP/1.0 GET over a loopback TCP socket, for scraping /metrics in tests.
#ifndef FALCON_CONTROLLER_TESTING_HTTP_GET_H_
#define FALCON_CONTROLLER_TESTING_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace falcon::controller::testing {

// The response body of GET `path` from 127.0.0.1:`port`. kUnavailable when the connection fails.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace falcon::controller::testing

#endif  // FALCON_CONTROLLER_TESTING_HTTP_GET_H_
