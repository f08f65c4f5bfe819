#include "agent/testing/prometheus_text.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::agent::testing {

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
