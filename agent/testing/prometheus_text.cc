#include "agent/testing/prometheus_text.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::agent::testing {

absl::StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  std::string host = host_port.substr(0, colon);
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
  }
  const int fd = socket(res->ai_family, res->ai_socktype, res->ai_protocol);
  const bool connected = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
  freeaddrinfo(res);
  if (!connected) {
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", host_port, "\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos) return absl::InternalError("no HTTP header end");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (status_line.find(" 200") == std::string::npos) {
    return absl::InternalError(absl::StrCat("HTTP answer: ", status_line));
  }
  return response.substr(body + 4);
}

absl::StatusOr<std::vector<Sample>> ParsePrometheusText(const std::string& text) {
  std::vector<Sample> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    Sample s;
    const size_t brace = line.find('{');
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": no value"));
    }
    absl::string_view value = line.substr(space + 1);
    if (brace != absl::string_view::npos && brace < space) {
      s.name = std::string(line.substr(0, brace));
      const size_t close_brace = line.rfind('}');
      if (close_brace == absl::string_view::npos || close_brace < brace) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": unclosed labels"));
      }
      absl::string_view labels = line.substr(brace + 1, close_brace - brace - 1);
      // Label values here never contain '",' (job names are [A-Za-z0-9._-]).
      for (absl::string_view pair : absl::StrSplit(labels, "\",", absl::SkipEmpty())) {
        const size_t eq = pair.find('=');
        if (eq == absl::string_view::npos) {
          return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": bad label"));
        }
        absl::string_view v = pair.substr(eq + 1);
        absl::ConsumePrefix(&v, "\"");
        absl::ConsumeSuffix(&v, "\"");
        s.labels[std::string(pair.substr(0, eq))] = std::string(v);
      }
    } else {
      s.name = std::string(line.substr(0, space));
    }
    if (value == "+Inf") {
      s.value = HUGE_VAL;
    } else if (!absl::SimpleAtod(value, &s.value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": bad value '", value, "'"));
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> FindSample(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (all) return s.value;
  }
  return std::nullopt;
}

}  // namespace falcon::agent::testing
