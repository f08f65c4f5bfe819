#include "agent/options.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/names.h"
#include "nlohmann/json.hpp"

namespace falcon::agent {
namespace {

absl::Status Bad(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
}

absl::Status ParseDurationValue(absl::string_view key, absl::string_view value,
                                absl::Duration* out) {
  double seconds = 0;
  if (absl::SimpleAtod(value, &seconds)) {
    *out = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(value, out)) {
    return Bad(key, absl::StrCat("'", value, "' is not a duration (e.g. 1s, 500ms, 2.5)"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ParseUint(absl::string_view key, absl::string_view value, T* out) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return Bad(key, absl::StrCat("'", value, "' is not a non-negative integer"));
  }
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& OptionKeys() {
  static const auto* keys = new std::vector<std::string>{"controller",
                                                         "socket",
                                                         "socket_group",
                                                         "node",
                                                         "agent_id",
                                                         "metrics_listen",
                                                         "summary_interval",
                                                         "buffer_batches",
                                                         "buffer_bytes",
                                                         "backoff_initial",
                                                         "backoff_max",
                                                         "backoff_jitter",
                                                         "seed",
                                                         "heartbeat_interval",
                                                         "drain_timeout",
                                                         "hint_hold",
                                                         "match_hold",
                                                         "job_idle_timeout",
                                                         "max_raw_ops_per_rank"};
  return *keys;
}

absl::Status ApplyValue(absl::string_view key, absl::string_view value, AgentOptions* o) {
  const std::string v(absl::StripAsciiWhitespace(value));
  if (key == "controller") {
    o->controller = v;
  } else if (key == "socket") {
    o->socket_path = v;
  } else if (key == "socket_group") {
    o->socket_group = v;
  } else if (key == "node") {
    o->node = v;
  } else if (key == "agent_id") {
    o->agent_id = v;
  } else if (key == "metrics_listen") {
    o->metrics_listen = v;
  } else if (key == "summary_interval") {
    return ParseDurationValue(key, v, &o->summary_interval);
  } else if (key == "buffer_batches") {
    return ParseUint(key, v, &o->buffer.max_batches);
  } else if (key == "buffer_bytes") {
    return ParseUint(key, v, &o->buffer.max_bytes);
  } else if (key == "backoff_initial") {
    return ParseDurationValue(key, v, &o->backoff.initial);
  } else if (key == "backoff_max") {
    return ParseDurationValue(key, v, &o->backoff.max);
  } else if (key == "backoff_jitter") {
    if (!absl::SimpleAtod(v, &o->backoff.jitter)) return Bad(key, "not a number");
  } else if (key == "seed") {
    return ParseUint(key, v, &o->backoff.seed);
  } else if (key == "heartbeat_interval") {
    return ParseDurationValue(key, v, &o->heartbeat_interval);
  } else if (key == "drain_timeout") {
    return ParseDurationValue(key, v, &o->drain_timeout);
  } else if (key == "hint_hold") {
    return ParseDurationValue(key, v, &o->hub.reduce.rank.hint_hold);
  } else if (key == "match_hold") {
    return ParseDurationValue(key, v, &o->hub.reduce.match_hold);
  } else if (key == "job_idle_timeout") {
    return ParseDurationValue(key, v, &o->hub.job_idle_timeout);
  } else if (key == "max_raw_ops_per_rank") {
    return ParseUint(key, v, &o->hub.max_raw_ops_per_rank);
  } else {
    return Bad(key, "unknown setting");
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigFile(const std::string& path, AgentOptions* options) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("config ", path, ": cannot read (", std::strerror(errno), ")"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && trimmed.front() == '{') {
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("config ", path, ": not a JSON object"));
    }
    for (const auto& [key, value] : doc.items()) {
      std::string s;
      if (value.is_string()) {
        s = value.get<std::string>();
      } else if (value.is_number()) {
        s = value.dump();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("config ", path, ": ", key, ": must be a string or a number"));
      }
      if (absl::Status st = ApplyValue(key, s, options); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("config ", path, ": ", st.message()));
      }
    }
    return absl::OkStatus();
  }
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", path, ":", line_no, ": expected key = value"));
    }
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    if (absl::Status st = ApplyValue(key, line.substr(eq + 1), options); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config ", path, ":", line_no, ": ", st.message()));
    }
  }
  return absl::OkStatus();
}

void FillDefaults(AgentOptions* options) {
  if (options->node.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) options->node = host;
    if (options->node.empty()) options->node = "localhost";
  }
  if (options->agent_id.empty()) options->agent_id = options->node;
  options->hub.node = options->node;
}

absl::Status Validate(const AgentOptions& o) {
  if (o.controller.empty()) return Bad("controller", "required (host:port)");
  if (o.socket_path.empty()) return Bad("socket", "required");
  if (o.socket_path.size() > 100) return Bad("socket", "longer than 100 bytes (unix socket limit)");
  if (absl::Status s = common::ValidateNodeName(o.node, "node"); !s.ok()) return s;
  if (absl::Status s = common::ValidateAgentId(o.agent_id, "agent_id"); !s.ok()) return s;
  if (o.summary_interval < absl::Milliseconds(1) || o.summary_interval > absl::Seconds(60)) {
    return Bad("summary_interval", "must be in [1ms, 60s]");
  }
  if (o.heartbeat_interval <= absl::ZeroDuration()) return Bad("heartbeat_interval", "must be > 0");
  if (o.drain_timeout < absl::ZeroDuration()) return Bad("drain_timeout", "must be >= 0");
  if (o.hub.max_raw_ops_per_rank == 0) return Bad("max_raw_ops_per_rank", "must be > 0");
  if (o.hub.reduce.rank.hint_hold < absl::ZeroDuration()) return Bad("hint_hold", "must be >= 0");
  if (o.hub.reduce.match_hold < absl::ZeroDuration()) return Bad("match_hold", "must be >= 0");
  if (absl::Status s = reduce::JobReducer::Validate(o.hub.reduce); !s.ok()) return s;
  if (absl::Status s = TelemetryBuffer::Validate(o.buffer); !s.ok()) return s;
  if (absl::Status s = common::Backoff::Validate(o.backoff, "backoff_"); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace falcon::agent
