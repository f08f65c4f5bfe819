#include "common/testing/http_get.h"

#include <httplib.h>

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::common::testing {

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                                    absl::Duration timeout) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(host_port.substr(colon + 1), &port) ||
      port < 1 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not HOST:PORT"));
  }
  std::string host = host_port.substr(0, colon);
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1] -> ::1
  }
  httplib::Client client(host, port);
  const auto limit = absl::ToChronoMicroseconds(timeout);
  client.set_connection_timeout(limit);
  client.set_read_timeout(limit);
  client.set_write_timeout(limit);
  httplib::Result result = client.Get(path.c_str());
  if (!result) {
    return absl::UnavailableError(
        absl::StrCat("GET http://", host_port, path, ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::InternalError(absl::StrCat("GET http://", host_port, path, ": HTTP ",
                                            result->status, ": ", result->body.substr(0, 200)));
  }
  return std::move(result->body);
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  return HttpGet(absl::StrCat("127.0.0.1:", port), path, timeout);
}

absl::StatusOr<double> ScrapeValue(int port, const std::string& series) {
  absl::StatusOr<std::string> body = HttpGet(port, "/metrics");
  if (!body.ok()) return body.status();
  const std::string prefix = series + " ";
  for (absl::string_view line : absl::StrSplit(*body, '\n')) {
    if (!absl::ConsumePrefix(&line, prefix)) continue;
    double v = 0;
    if (!absl::SimpleAtod(line, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(series, ": '", line, "' is not a number"));
    }
    return v;
  }
  return absl::NotFoundError(absl::StrCat(series, ": not exposed on port ", port));
}

}  // namespace falcon::common::testing
