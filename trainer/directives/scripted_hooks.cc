#include "trainer/directives/scripted_hooks.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/json_parse.h"
#include "common/text_file.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace falcon::trainer::directives {
namespace {

absl::Status FromJson(const nlohmann::json& j, google::protobuf::Message* msg) {
  const auto status = google::protobuf::util::JsonStringToMessage(j.dump(), msg);
  if (!status.ok()) return absl::InvalidArgumentError(std::string(status.message()));
  return absl::OkStatus();
}

std::string ToJson(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, options);
  return out;
}

}  // namespace

absl::StatusOr<DirectiveScript> ParseDirectiveScript(absl::string_view text) {
  DirectiveScript script;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = absl::StrCat("directive script line ", line_no, ": ");
    absl::StatusOr<nlohmann::json> parsed =
        common::ParseJson(line, absl::StrCat("directive script line ", line_no));
    if (!parsed.ok()) return parsed.status();
    const nlohmann::json& j = *parsed;
    if (!j.is_object()) return absl::InvalidArgumentError(where + "not a JSON object");
    if (j.contains("directive")) {
      ScriptedDirective d;
      if (absl::Status s = FromJson(j["directive"], &d.directive); !s.ok()) {
        return absl::InvalidArgumentError(where + "directive: " + std::string(s.message()));
      }
      if (j.contains("deliver_at")) {
        if (!j["deliver_at"].is_number_integer() || j["deliver_at"].get<int64_t>() < 0) {
          return absl::InvalidArgumentError(where + "\"deliver_at\" must be an integer >= 0");
        }
        d.deliver_at = j["deliver_at"].get<int64_t>();
      }
      if (j.contains("ranks")) {
        if (!j["ranks"].is_array()) {
          return absl::InvalidArgumentError(where + "\"ranks\" must be an array of ranks");
        }
        for (const auto& r : j["ranks"]) {
          if (!r.is_number_integer() || r.get<int>() < 0) {
            return absl::InvalidArgumentError(where + "\"ranks\" must hold integers >= 0");
          }
          d.ranks.push_back(r.get<int>());
        }
      }
      script.directives.push_back(std::move(d));
    } else if (j.contains("validation_task")) {
      ScriptedTask t;
      if (absl::Status s = FromJson(j["validation_task"], &t.task); !s.ok()) {
        return absl::InvalidArgumentError(where + "validation_task: " + std::string(s.message()));
      }
      if (j.contains("iteration")) {
        if (!j["iteration"].is_number_integer() ||
            (j["iteration"].is_number_unsigned() &&
             j["iteration"].get<uint64_t>() > uint64_t{INT64_MAX})) {
          return absl::InvalidArgumentError(where + "\"iteration\" must be an integer");
        }
        t.iteration = j["iteration"].get<int64_t>();
      }
      if (j.contains("after_polls")) {
        if (!j["after_polls"].is_number_integer() || j["after_polls"].get<int64_t>() < 0 ||
            j["after_polls"].get<int64_t>() > 1'000'000) {
          return absl::InvalidArgumentError(where +
                                            "\"after_polls\" must be an integer in [0, 1000000]");
        }
        t.after_polls = j["after_polls"].get<int>();
      }
      script.tasks.push_back(std::move(t));
    } else {
      return absl::InvalidArgumentError(where +
                                        "expected a \"directive\" or \"validation_task\" key");
    }
  }
  return script;
}

absl::StatusOr<DirectiveScript> LoadDirectiveScript(const std::string& path) {
  absl::StatusOr<std::string> text = common::ReadTextFile(path, kMaxDirectiveScriptBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("cannot read directive script '", path, "'"));
  }
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("directive script ", text.status().message()));
  }
  return ParseDirectiveScript(*text);
}

ScriptedHooks::ScriptedHooks(DirectiveScript script, int rank, std::string events_path)
    : script_(std::move(script)),
      directive_sent_(script_.directives.size(), false),
      task_sent_(script_.tasks.size(), false),
      task_polls_(script_.tasks.size(), 0),
      rank_(rank),
      events_path_(std::move(events_path)) {}

std::vector<falcon::v1::Directive> ScriptedHooks::PollDirectives(int64_t iteration) {
  bool tasks_pending = false;
  for (size_t i = 0; i < script_.tasks.size(); ++i) {
    if (!task_sent_[i] && script_.tasks[i].iteration <= iteration) tasks_pending = true;
  }
  std::vector<falcon::v1::Directive> out;
  for (size_t i = 0; i < script_.directives.size(); ++i) {
    const ScriptedDirective& item = script_.directives[i];
    const falcon::v1::Directive& d = item.directive;
    const int64_t at = item.deliver_at >= 0 ? item.deliver_at : d.effective_iteration();
    if (directive_sent_[i] || at > iteration) continue;
    if (!item.ranks.empty() &&
        std::find(item.ranks.begin(), item.ranks.end(), rank_) == item.ranks.end()) {
      continue;
    }
    if (d.has_resume() && tasks_pending) continue;
    directive_sent_[i] = true;
    out.push_back(d);
  }
  return out;
}

std::vector<falcon::v1::ValidationTask> ScriptedHooks::PollValidationTasks(int64_t iteration) {
  std::vector<falcon::v1::ValidationTask> out;
  for (size_t i = 0; i < script_.tasks.size(); ++i) {
    if (task_sent_[i] || script_.tasks[i].iteration > iteration) continue;
    if (task_polls_[i]++ < script_.tasks[i].after_polls) continue;
    task_sent_[i] = true;
    out.push_back(script_.tasks[i].task);
  }
  return out;
}

void ScriptedHooks::Ack(const falcon::v1::Directive& directive, falcon::v1::AckStatus status,
                        const std::string& reason, int64_t applied_iteration) {
  acks_.push_back(RecordedAck{directive.directive_id(), status, reason, applied_iteration});
  nlohmann::json j = {{"event", "ack"},
                      {"rank", rank_},
                      {"directive_id", directive.directive_id()},
                      {"status", falcon::v1::AckStatus_Name(status)},
                      {"reason", reason},
                      {"applied_iteration", applied_iteration}};
  AppendEvent(j.dump());
}

void ScriptedHooks::ReportValidation(const falcon::v1::ValidationResult& result) {
  results_.push_back(result);
  AppendEvent(absl::StrCat("{\"event\":\"validation\",\"rank\":", rank_,
                           ",\"result\":", ToJson(result), "}"));
}

void ScriptedHooks::AppendEvent(const std::string& line) const {
  if (events_path_.empty()) return;
  // One write() per line on an O_APPEND descriptor: lines of concurrent ranks never interleave.
  const int fd = open(events_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  const std::string text = line + "\n";
  (void)!write(fd, text.data(), text.size());
  close(fd);
}

}  // namespace falcon::trainer::directives
