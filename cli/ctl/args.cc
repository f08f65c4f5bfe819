#include "cli/ctl/args.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace falcon::cli::ctl {
namespace {

struct FlagSpec {
  const char* name;
  bool takes_value;
  const char* help;
};

struct CommandSpec {
  const char* name;
  const char* synopsis;
  const char* help;
  int min_positional;
  int max_positional;  // -1: unlimited.
  std::vector<FlagSpec> flags;
};

const std::vector<CommandSpec>& Commands() {
  static const auto* const kCommands = new std::vector<CommandSpec>{
      {"jobs",
       "jobs",
       "List jobs: state, layout, epoch, iteration, iteration time, events.",
       0,
       0,
       {}},
      {"job", "job JOB", "One job: layout, ranks, communicators, plan in force.", 1, 1, {}},
      {"events",
       "events [--job J] [--active] [--limit N] [--watch [--count N]]",
       "List events; --watch streams one line per event transition until Ctrl-C (or N lines).",
       0,
       0,
       {{"job", true, "only this job"},
        {"active", false, "only events not recovered or closed"},
        {"limit", true, "at most N events"},
        {"watch", false, "stream transitions (WatchEvents) instead of listing"},
        {"count", true, "with --watch: stop after N transitions"}}},
      {"event",
       "event ID",
       "One event's timeline: onset, alarm, verdict, actions, recovery; iteration times and the "
       "seconds lost.",
       1,
       1,
       {}},
      {"directives",
       "directives [--job J] [--limit N]",
       "Directives: id, job, epoch, kind, effective iteration, state, acks.",
       0,
       0,
       {{"job", true, "only this job"}, {"limit", true, "at most N directives"}}},
      {"settings",
       "settings get [JOB] | settings set [JOB] KEY=VALUE ...",
       "Per-job settings (no JOB: the defaults for new jobs). Keys as in the Settings message, "
       "e.g. dry_run=true s2_cost_iterations=8.",
       1,
       -1,
       {}},
      {"validate",
       "validate JOB",
       "Pause the job and run validation now (GEMM on every rank, link passes).",
       1,
       1,
       {}},
      {"plan",
       "plan JOB --dry-run [--cause compute|communication] [--slow-ranks R,..] "
       "[--slow-links A-B,..] [--slowdown X]",
       "What the planner would do for the job's active event (or the hypothetical verdict the "
       "flags describe); never acts.",
       1,
       1,
       {{"dry-run", false, "required: only show the plan"},
        {"cause", true, "hypothetical verdict: compute, communication or unknown"},
        {"slow-ranks", true, "hypothetical culprit ranks, e.g. 5,6"},
        {"slow-links", true, "hypothetical culprit links SRC-DST, e.g. 1-3,2-3"},
        {"slowdown", true, "hypothetical slow / healthy iteration time, e.g. 1.4"}}},
      {"export",
       "export JOB [--csv] [--out FILE] [--from N] [--max-points N]",
       "Iteration-time history with event marks as CSV (default) or --json.",
       1,
       1,
       {{"csv", false, "CSV output (the default)"},
        {"out", true, "write to FILE instead of stdout"},
        {"from", true, "first iteration (default 0)"},
        {"max-points", true, "downsample to at most N points (default 10000)"}}},
      {"help", "help [COMMAND]", "Show usage.", 0, 1, {}},
  };
  return *kCommands;
}

const CommandSpec* FindCommand(absl::string_view name) {
  for (const auto& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

const FlagSpec* FindFlag(const CommandSpec& spec, absl::string_view name) {
  for (const auto& f : spec.flags) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

absl::Status UsageError(absl::string_view message) { return absl::InvalidArgumentError(message); }

}  // namespace

std::string Invocation::Flag(const std::string& flag, const std::string& fallback) const {
  auto it = flags.find(flag);
  return it == flags.end() ? fallback : it->second;
}

absl::StatusOr<uint64_t> ParseUint(absl::string_view text, absl::string_view what) {
  uint64_t v = 0;
  if (text.empty() || text[0] == '-' || text[0] == '+' || !absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not a non-negative integer"));
  }
  return v;
}

absl::StatusOr<int64_t> ParseInt(absl::string_view text, absl::string_view what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' is not an integer"));
  }
  return v;
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view what) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not a duration (e.g. 5s, 500ms, 2.5)"));
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", text, "' must be > 0 and finite"));
  }
  return d;
}

absl::Status ApplyPlanFlags(const Invocation& inv, falcon::v1::DryRunPlanRequest* req) {
  if (inv.Has("cause")) {
    const std::string c = inv.Flag("cause");
    if (c == "compute") {
      req->set_cause(falcon::v1::CAUSE_COMPUTE);
    } else if (c == "communication" || c == "comm") {
      req->set_cause(falcon::v1::CAUSE_COMMUNICATION);
    } else if (c == "unknown") {
      req->set_cause(falcon::v1::CAUSE_UNKNOWN);
    } else {
      return UsageError(
          absl::StrCat("--cause: '", c, "' is not compute, communication or unknown"));
    }
  }
  if (inv.Has("slow-ranks")) {
    for (absl::string_view r : absl::StrSplit(inv.Flag("slow-ranks"), ',')) {
      auto v = ParseUint(r, "--slow-ranks");
      if (!v.ok()) return v.status();
      if (*v > std::numeric_limits<uint32_t>::max()) {
        return UsageError(absl::StrCat("--slow-ranks: '", r, "' is out of range"));
      }
      req->add_slow_ranks(static_cast<uint32_t>(*v));
    }
  }
  if (inv.Has("slow-links")) {
    for (absl::string_view l : absl::StrSplit(inv.Flag("slow-links"), ',')) {
      std::vector<absl::string_view> ends = absl::StrSplit(l, '-');
      if (ends.size() != 2) {
        return UsageError(absl::StrCat("--slow-links: '", l, "' is not SRC-DST"));
      }
      auto src = ParseUint(ends[0], "--slow-links");
      if (!src.ok()) return src.status();
      auto dst = ParseUint(ends[1], "--slow-links");
      if (!dst.ok()) return dst.status();
      if (*src > std::numeric_limits<uint32_t>::max() ||
          *dst > std::numeric_limits<uint32_t>::max()) {
        return UsageError(absl::StrCat("--slow-links: '", l, "' is out of range"));
      }
      auto* link = req->add_slow_links();
      link->set_src_rank(static_cast<uint32_t>(*src));
      link->set_dst_rank(static_cast<uint32_t>(*dst));
    }
  }
  if (inv.Has("slowdown")) {
    double x = 0;
    if (!absl::SimpleAtod(inv.Flag("slowdown"), &x) || !std::isfinite(x) || x < 1) {
      return UsageError(
          absl::StrCat("--slowdown: '", inv.Flag("slowdown"), "' is not a number >= 1"));
    }
    req->set_slowdown_ratio(x);
  }
  return absl::OkStatus();
}

absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view env_controller) {
  Invocation inv;
  if (!env_controller.empty()) inv.controller = std::string(env_controller);
  const CommandSpec* spec = nullptr;
  bool only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool is_flag = !only_positional && a.size() > 1 && a[0] == '-';
    if (!is_flag) {
      if (spec == nullptr) {
        spec = FindCommand(a);
        if (spec == nullptr) {
          return UsageError(absl::StrCat("unknown command '", a, "' (try: falconctl help)"));
        }
        inv.command = a;
      } else {
        inv.positional.push_back(a);
      }
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    if (a == "-h") {
      inv.help = true;
      continue;
    }
    absl::string_view body = a;
    if (!absl::ConsumePrefix(&body, "--")) {
      return UsageError(absl::StrCat("unknown flag '", a, "' (flags start with --)"));
    }
    std::string name(body.substr(0, body.find('=')));
    std::optional<std::string> value;
    if (body.find('=') != absl::string_view::npos) {
      value = std::string(body.substr(body.find('=') + 1));
    }
    // Accept snake_case spellings of dashed flags (--dry_run, --max_points).
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    auto take_value = [&]() -> absl::StatusOr<std::string> {
      if (value.has_value()) return *value;
      if (i + 1 >= args.size()) {
        return UsageError(absl::StrCat("flag --", name, " needs a value"));
      }
      return args[++i];
    };
    auto no_value = [&]() -> absl::Status {
      if (value.has_value() && *value != "true") {
        return UsageError(absl::StrCat("flag --", name, " takes no value (got '", *value, "')"));
      }
      return absl::OkStatus();
    };
    if (name == "help") {
      if (absl::Status s = no_value(); !s.ok()) return s;
      inv.help = true;
    } else if (name == "json") {
      if (absl::Status s = no_value(); !s.ok()) return s;
      inv.json = true;
    } else if (name == "controller") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      if (v->empty()) return UsageError("--controller: empty address");
      inv.controller = *v;
    } else if (name == "timeout") {
      auto v = take_value();
      if (!v.ok()) return v.status();
      auto d = ParseTimeout(*v, "--timeout");
      if (!d.ok()) return d.status();
      inv.timeout = *d;
    } else {
      const FlagSpec* f = spec == nullptr ? nullptr : FindFlag(*spec, name);
      if (f == nullptr) {
        return UsageError(spec == nullptr ? absl::StrCat("unknown flag '", a, "' before a command")
                                          : absl::StrCat("unknown flag '", a, "' for command '",
                                                         spec->name, "'"));
      }
      if (f->takes_value) {
        auto v = take_value();
        if (!v.ok()) return v.status();
        inv.flags[name] = *v;
      } else {
        if (absl::Status s = no_value(); !s.ok()) return s;
        inv.flags[name] = "true";
      }
    }
  }
  if (spec == nullptr) {
    if (inv.help) {
      inv.command = "help";
      return inv;
    }
    return UsageError("no command given (try: falconctl help)");
  }
  if (inv.command == "help") {
    inv.help = true;
    if (!inv.positional.empty()) {
      if (FindCommand(inv.positional[0]) == nullptr) {
        return UsageError(absl::StrCat("help: unknown command '", inv.positional[0], "'"));
      }
      inv.command = inv.positional[0];
      inv.positional.clear();
    }
    return inv;
  }
  if (inv.help) return inv;
  const int n = static_cast<int>(inv.positional.size());
  if (n < spec->min_positional) {
    return UsageError(
        absl::StrCat(spec->name, ": missing argument (usage: falconctl ", spec->synopsis, ")"));
  }
  if (spec->max_positional >= 0 && n > spec->max_positional) {
    return UsageError(absl::StrCat(spec->name, ": unexpected argument '",
                                   inv.positional[spec->max_positional], "' (usage: falconctl ",
                                   spec->synopsis, ")"));
  }
  if (inv.command == "settings") {
    const std::string& verb = inv.positional[0];
    if (verb != "get" && verb != "set") {
      return UsageError(absl::StrCat("settings: '", verb, "' is not get or set"));
    }
    std::vector<std::string> rest(inv.positional.begin() + 1, inv.positional.end());
    size_t kv = 0;
    if (!rest.empty() && rest[0].find('=') == std::string::npos) kv = 1;  // rest[0] is JOB.
    if (verb == "get" && rest.size() > kv) {
      return UsageError(absl::StrCat("settings get: unexpected argument '", rest[kv],
                                     "' (usage: falconctl settings get [JOB])"));
    }
    if (verb == "set") {
      if (rest.size() == kv) {
        return UsageError("settings set: no KEY=VALUE given");
      }
      for (size_t j = kv; j < rest.size(); ++j) {
        if (rest[j].find('=') == std::string::npos) {
          return UsageError(absl::StrCat("settings set: '", rest[j], "' is not KEY=VALUE"));
        }
      }
    }
  }
  if (inv.command == "plan") {
    if (!inv.Has("dry-run")) {
      return UsageError(
          "plan: --dry-run is required (falconctl never acts; it shows what the planner would "
          "do)");
    }
    falcon::v1::DryRunPlanRequest check;
    if (absl::Status s = ApplyPlanFlags(inv, &check); !s.ok()) return s;
  }
  if (inv.command == "events" && inv.Has("count") && !inv.Has("watch")) {
    return UsageError("events: --count only applies with --watch");
  }
  if (inv.command == "events" && inv.Has("active") && inv.Has("watch")) {
    return UsageError(
        "events: --active does not apply with --watch (a watch shows every transition)");
  }
  if (inv.command == "export" && inv.Has("csv") && inv.json) {
    return UsageError("export: --csv and --json exclude each other");
  }
  for (const char* numeric : {"limit", "count", "max-points", "from"}) {
    if (!inv.Has(numeric)) continue;
    auto v = ParseUint(inv.Flag(numeric), absl::StrCat("--", numeric));
    if (!v.ok()) return v.status();
  }
  return inv;
}

std::string Usage(absl::string_view command) {
  const CommandSpec* only = command.empty() || command == "help" ? nullptr : FindCommand(command);
  std::string out;
  if (only != nullptr) {
    absl::StrAppend(&out, "usage: falconctl ", only->synopsis, "\n\n  ", only->help, "\n");
    if (!only->flags.empty()) absl::StrAppend(&out, "\nflags:\n");
    for (const auto& f : only->flags) {
      absl::StrAppend(&out, "  --", f.name, f.takes_value ? " VALUE" : "", "\t", f.help, "\n");
    }
  } else {
    absl::StrAppend(&out,
                    "usage: falconctl [--controller ADDR] [--timeout D] [--json] COMMAND "
                    "[ARGS...]\n\nFalcon's operator CLI: talks to the controller's Control "
                    "service.\n\ncommands:\n");
    for (const auto& c : Commands())
      absl::StrAppend(&out, "  ", c.synopsis, "\n      ", c.help, "\n");
  }
  absl::StrAppend(
      &out,
      "\nglobal flags:\n"
      "  --controller ADDR  controller address (default $FALCON_CONTROLLER, else ",
      kDefaultController,
      ")\n"
      "  --timeout D        per-call deadline, e.g. 5s or 500ms (default 10s)\n"
      "  --json             one JSON document instead of tables\n"
      "  --help             this text\n"
      "\nexit codes: 0 ok, 1 not found, 2 usage or invalid argument, 3 controller unavailable, "
      "deadline exceeded, not implemented or other server error\n");
  return out;
}

}  // namespace falcon::cli::ctl
