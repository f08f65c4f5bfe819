#include "agent/options.h"

#include <unistd.h>

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flag_checks.h"
#include "common/host_port.h"
#include "common/json_parse.h"
#include "common/names.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace falcon::agent {
namespace {

absl::Status Bad(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", what));
}

// Finite durations only ("inf" and NaN are refused here, ranges in Validate).
absl::Status ParseDurationValue(absl::string_view key, absl::string_view value,
                                absl::Duration* out) {
  absl::StatusOr<absl::Duration> d = common::ParseDuration(value, key);
  if (!d.ok()) return d.status();
  *out = *d;
  return absl::OkStatus();
}

// Decimal digits within T (never truncated to T); ranges in Validate.
template <typename T>
absl::Status ParseUint(absl::string_view key, absl::string_view value, T* out) {
  absl::StatusOr<uint64_t> v =
      common::ParseCount(value, key, static_cast<uint64_t>(std::numeric_limits<T>::max()));
  if (!v.ok()) return v.status();
  *out = static_cast<T>(*v);
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& OptionKeys() {
  static const auto* keys = new std::vector<std::string>{"controller",
                                                         "tls_cert",
                                                         "tls_key",
                                                         "tls_ca",
                                                         "plaintext",
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
  } else if (key == "tls_cert") {
    o->tls.cert = v;
  } else if (key == "tls_key") {
    o->tls.key = v;
  } else if (key == "tls_ca") {
    o->tls.ca = v;
  } else if (key == "plaintext") {
    if (!absl::SimpleAtob(v, &o->plaintext)) {
      return Bad(key,
                 absl::StrCat("'", absl::CHexEscape(v.substr(0, 64)), "' is not true or false"));
    }
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
    if (!absl::SimpleAtod(v, &o->backoff.jitter)) {
      return Bad(key, absl::StrCat("'", absl::CHexEscape(v.substr(0, 64)), "' is not a number"));
    }
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
  absl::StatusOr<std::string> read = common::ReadTextFile(path, kMaxConfigFileBytes);
  if (!read.ok()) {
    return absl::Status(read.status().code(), absl::StrCat("config ", read.status().message()));
  }
  const std::string& text = *read;
  const absl::string_view trimmed = absl::StripLeadingAsciiWhitespace(text);
  if (!trimmed.empty() && trimmed.front() == '{') {
    absl::StatusOr<nlohmann::json> parsed = common::ParseJson(text, absl::StrCat("config ", path));
    if (!parsed.ok()) return parsed.status();
    const nlohmann::json& doc = *parsed;
    if (!doc.is_object()) {
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
  if (absl::Status s =
          common::ParseHostPort(o.controller, "controller", common::PortZero::kRefused).status();
      !s.ok()) {
    return s;
  }
  if (!o.metrics_listen.empty()) {  // Empty: no /metrics endpoint.
    if (absl::Status s =
            common::ParseHostPort(o.metrics_listen, "metrics_listen", common::PortZero::kAnyFree)
                .status();
        !s.ok()) {
      return s;
    }
  }
  if (o.socket_path.empty()) return Bad("socket", "required");
  if (o.socket_path.size() > 100) return Bad("socket", "longer than 100 bytes (unix socket limit)");
  if (absl::Status s = common::ValidateNodeName(o.node, "node"); !s.ok()) return s;
  if (absl::Status s = common::ValidateAgentId(o.agent_id, "agent_id"); !s.ok()) return s;
  struct DurationRange {
    const char* key;
    absl::Duration value;
    absl::Duration min;
    absl::Duration max;
  };
  const DurationRange durations[] = {
      {"summary_interval", o.summary_interval, absl::Milliseconds(1), absl::Seconds(60)},
      {"heartbeat_interval", o.heartbeat_interval, absl::Milliseconds(10), absl::Minutes(10)},
      {"drain_timeout", o.drain_timeout, absl::ZeroDuration(), absl::Minutes(10)},
      {"hint_hold", o.hub.reduce.rank.hint_hold, absl::ZeroDuration(), absl::Minutes(10)},
      {"match_hold", o.hub.reduce.match_hold, absl::ZeroDuration(), absl::Minutes(10)},
      {"job_idle_timeout", o.hub.job_idle_timeout, absl::Seconds(1), absl::Hours(7 * 24)},
      {"backoff_initial", o.backoff.initial, absl::Milliseconds(1), absl::Minutes(10)},
      {"backoff_max", o.backoff.max, absl::Milliseconds(1), absl::Hours(1)},
  };
  for (const DurationRange& d : durations) {
    if (absl::Status s = common::CheckDurationIn(d.value, d.key, d.min, d.max); !s.ok()) return s;
  }
  struct CountRange {
    const char* key;
    uint64_t value;
    uint64_t max;
  };
  const CountRange counts[] = {
      {"buffer_batches", o.buffer.max_batches, kMaxBufferBatches},
      {"buffer_bytes", o.buffer.max_bytes, kMaxBufferBytes},
      {"max_raw_ops_per_rank", o.hub.max_raw_ops_per_rank, kMaxRawOpsPerRank},
  };
  for (const CountRange& c : counts) {
    if (c.value < 1 || c.value > c.max) {
      return Bad(c.key, absl::StrCat(c.value, " is not in [1, ", c.max, "]"));
    }
  }
  if (absl::Status s = reduce::JobReducer::Validate(o.hub.reduce); !s.ok()) return s;
  if (absl::Status s = TelemetryBuffer::Validate(o.buffer); !s.ok()) return s;
  if (absl::Status s = common::Backoff::Validate(o.backoff, "backoff_"); !s.ok()) return s;
  return proto::CheckTlsSettings(o.tls, o.plaintext, "");
}

}  // namespace falcon::agent
