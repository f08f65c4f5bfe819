// HTTP GET for tests (scraping /metrics, querying Prometheus' API), on cpp-httplib.
#ifndef FALCON_COMMON_TESTING_HTTP_GET_H_
#define FALCON_COMMON_TESTING_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace falcon::common::testing {

// The body of GET http://`host_port``path` (`path` starts with '/', query string included, already
// URL-encoded). `host_port` is HOST:PORT; a listen address's wildcard host (0.0.0.0 or empty) means
// 127.0.0.1. `timeout` bounds the connect and each read. Errors: kInvalidArgument for a malformed
// `host_port`; kUnavailable when there is no connection or no answer (naming httplib's reason);
// kInternal for an HTTP status other than 200 (naming it and the start of the body).
absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(10));

// The same, from 127.0.0.1:`port`.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(10));

// The value of the line of 127.0.0.1:`port`/metrics that starts with `series` ("name" or
// "name{labels}" exactly as exposed) followed by a space. Errors: HttpGet's; kNotFound when no
// line has that series; kInvalidArgument when its value is not a number.
absl::StatusOr<double> ScrapeValue(int port, const std::string& series);

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_HTTP_GET_H_
