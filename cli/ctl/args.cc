#include "cli/ctl/args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/flag_checks.h"
#include "common/host_port.h"
#include "common/names.h"

namespace falcon::cli::ctl {
namespace {

constexpr char kOverview[] =
    "Falcon's operator CLI: reads jobs, events and directives from the controller's Control "
    "service, changes settings, starts a validation. `falconctl COMMAND --help` describes one "
    "command.";

constexpr char kGlobalFooter[] =
    "Global flags (before or after the command):\n"
    "  --controller HOST:PORT      default $FALCON_CONTROLLER, else 127.0.0.1:7070\n"
    "  --timeout D                 per-call deadline, e.g. 5s, 500ms, 2.5 (default 10s)\n"
    "  --json                      one JSON document instead of tables\n"
    "  --tls_cert, --tls_key, --tls_ca FILE   your client certificate, its key and the cluster\n"
    "                              CA (default $FALCON_TLS_CERT, $FALCON_TLS_KEY, $FALCON_TLS_CA)\n"
    "  --plaintext                 no TLS (a local demo only)";

constexpr char kExitCodes[] =
    "Exit codes: 0 ok, 1 not found, 2 usage or invalid argument, 3 controller unavailable,\n"
    "deadline exceeded, not implemented or other server error, 4 permission denied or\n"
    "unauthenticated.";

// Reads `text` as a duration ("5s", "250ms", "1m" or plain seconds "2.5") into `d`; else returns
// what is wrong with it (CLI11 prefixes the flag's name; so do the checks below).
std::string ToDuration(const std::string& text, absl::Duration* d) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    *d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, d)) {
    return absl::StrCat("'", text, "' is not a duration (e.g. 5s, 500ms, 2.5)");
  }
  if (*d <= absl::ZeroDuration() || *d == absl::InfiniteDuration()) {
    return absl::StrCat("'", text, "' must be > 0 and finite");
  }
  return "";
}

std::string TimeoutError(const std::string& text) {
  absl::Duration d;
  return ToDuration(text, &d);
}

std::string AddressError(const std::string& address) {
  return std::string(
      common::ParseHostPort(address, "", common::PortZero::kRefused).status().message());
}

// An integer option in [0, max], written in decimal digits. CLI11 alone reads "-1" into an
// unsigned option as its maximum, "010" as octal 8, and clamps an overflowing value
// (99999999999999999999 became 2^64 - 1); this transform refuses all three and hands CLI11 the
// canonical decimal form, so its conversion is exact.
CLI::Validator Decimal(uint64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        absl::StatusOr<uint64_t> v = common::ParseCount(text, "", max);
        if (!v.ok()) return std::string(v.status().message());
        text = std::to_string(*v);
        return "";
      },
      "", "decimal");
}

// A job name (common/names.h); also tells a JOB positional from a KEY=VALUE ('=' is not allowed).
std::string JobNameError(const std::string& job) {
  if (common::IsValidJobName(job)) return "";
  return absl::StrCat("'", absl::CHexEscape(job.substr(0, common::kMaxJobNameBytes + 1)),
                      "' is not a job name (", common::kJobNameRule, ")");
}

std::string SlowLinkError(const std::string& link) {
  std::vector<absl::string_view> ends = absl::StrSplit(link, '-');
  uint32_t rank = 0;
  if (ends.size() != 2 || ends[0].empty() || ends[1].empty() ||
      !std::all_of(ends[0].begin(), ends[0].end(), absl::ascii_isdigit) ||
      !std::all_of(ends[1].begin(), ends[1].end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(ends[0], &rank) || !absl::SimpleAtoi(ends[1], &rank)) {
    return absl::StrCat("'", link, "' is not SRC-DST (two ranks)");
  }
  return "";
}

std::string SlowdownError(const std::string& text) {
  double x = 0;
  if (!absl::SimpleAtod(text, &x) || !std::isfinite(x) || x < 1) {
    return absl::StrCat("'", text, "' is not a number >= 1");
  }
  return "";
}

// The command path of `app` ("falconctl settings set").
std::string PathOf(const CLI::App& app) {
  std::vector<std::string> path;
  for (const CLI::App* a = &app; a != nullptr; a = a->get_parent()) {
    path.insert(path.begin(), a->get_name());
  }
  return absl::StrJoin(path, " ");
}

// The help text of `app` with its full command path in the usage line.
std::string HelpOf(const CLI::App& app) {
  return app.get_formatter()->make_help(&app, PathOf(app), CLI::AppFormatMode::Normal);
}

// The whole grammar, bound to one Invocation.
class Grammar {
 public:
  explicit Grammar(absl::string_view env_controller)
      : env_controller_(env_controller), app_(kOverview, "falconctl") {
    app_.fallthrough();  // Global flags also after the command (subcommands inherit this).
    app_.require_subcommand(0, 1);  // One command; a second name is an unexpected argument.
    app_.footer(kExitCodes);
    controller_ = app_.add_option("--controller", inv_.controller,
                                  "controller address (default $FALCON_CONTROLLER, else " +
                                      std::string(kDefaultController) + ")")
                      ->type_name("HOST:PORT")
                      ->check(AddressError);
    app_.add_option("--timeout", timeout_text_,
                    "per-call deadline, e.g. 5s, 500ms or 2.5 seconds (default 10s)")
        ->type_name("D")
        ->check(TimeoutError);
    app_.add_flag("--json", inv_.json, "one JSON document instead of tables");
    app_.add_option("--tls_cert", inv_.tls_cert, "your PEM client certificate")->type_name("FILE");
    app_.add_option("--tls_key", inv_.tls_key, "its PEM private key")->type_name("FILE");
    app_.add_option("--tls_ca", inv_.tls_ca, "the cluster CA's PEM certificate")->type_name("FILE");
    app_.add_flag("--plaintext", inv_.plaintext, "no TLS (a local demo only)");

    Command("jobs", "List jobs: state, layout, epoch, iteration, iteration time, events.");

    Command("job", "One job: layout, ranks, communicators, plan in force.")
        ->add_option("JOB", inv_.job, "job name")
        ->check(JobNameError)
        ->required();

    CLI::App* events = Command("events",
                               "List events; --watch streams one line per event transition "
                               "until Ctrl-C (or --count N lines).");
    events->add_option("--job", inv_.job, "only this job")->type_name("J")->check(JobNameError);
    CLI::Option* active =
        events->add_flag("--active", inv_.active, "only events not recovered or closed");
    events->add_option("--limit", inv_.limit, "at most N events")
        ->type_name("N")
        ->transform(Decimal(UINT32_MAX));
    CLI::Option* watch = events->add_flag("--watch", inv_.watch,
                                          "stream transitions (WatchEvents) instead of "
                                          "listing; JSON Lines with --json");
    events->add_option("--count", inv_.count, "with --watch: stop after N transitions")
        ->type_name("N")
        ->transform(Decimal(UINT64_MAX))
        ->needs(watch);
    active->excludes(watch);

    Command("event",
            "One event's timeline: onset, alarm, verdict, actions, recovery; iteration times and "
            "the seconds lost.")
        ->add_option("ID", inv_.event_id, "event id")
        ->transform(Decimal(UINT64_MAX))
        ->required();

    CLI::App* directives = Command(
        "directives", "Directives: id, job, epoch, kind, effective iteration, state, acks.");
    directives->add_option("--job", inv_.job, "only this job")->type_name("J")->check(JobNameError);
    directives->add_option("--limit", inv_.limit, "at most N directives")
        ->type_name("N")
        ->transform(Decimal(UINT32_MAX));

    CLI::App* audit = Command(
        "audit",
        "The audit trail of mutating calls (settings set, validate), allowed or refused, newest "
        "first: time, identity, role, method, result, request.");
    audit->add_option("--limit", inv_.limit, "at most N records")
        ->type_name("N")
        ->transform(Decimal(UINT32_MAX));

    settings_ = Command("settings",
                        "Per-job settings, or with no JOB the defaults for new jobs: settings get "
                        "[JOB] | settings set [JOB] KEY=VALUE ...");
    settings_->validate_positionals();  // A KEY=VALUE is never taken for the JOB.
    get_ = settings_->add_subcommand("get", "Show the settings of JOB (no JOB: the defaults).");
    get_->add_option("JOB", inv_.job, "job name (none: the defaults for new jobs)")
        ->check(JobNameError);
    set_ = settings_->add_subcommand(
        "set",
        "Change settings of JOB (no JOB: the defaults for new jobs). Keys as in the Settings "
        "message, e.g. dry_run=true s2_cost_iterations=8; prints the settings in force.");
    set_->add_option("JOB", inv_.job, "job name (none: the defaults for new jobs)")
        ->check(JobNameError);
    set_->add_option("SETTING", inv_.assignments, "one or more settings to change")
        ->type_name("KEY=VALUE")
        ->required()
        ->check([](const std::string& kv) {
          return kv.find('=') == std::string::npos ? absl::StrCat("'", kv, "' is not KEY=VALUE")
                                                   : std::string();
        });

    Command("validate", "Pause the job and run validation now (GEMM on every rank, link passes).")
        ->add_option("JOB", inv_.job, "job name")
        ->check(JobNameError)
        ->required();

    CLI::App* plan = Command("plan",
                             "What the planner would do for the job's active event (or the "
                             "hypothetical verdict the flags describe); never acts.");
    plan->add_option("JOB", inv_.job, "job name")->check(JobNameError)->required();
    plan->add_flag("--dry-run,--dry_run", dry_run_,
                   "required: falconctl never acts, it only shows the plan")
        ->required();
    plan->add_option("--cause", cause_, "hypothetical verdict: compute, communication or unknown")
        ->type_name("C")
        ->check(CLI::IsMember({"compute", "communication", "comm", "unknown"}));
    plan->add_option("--slow-ranks,--slow_ranks", slow_ranks_,
                     "hypothetical culprit ranks, e.g. 5,6")
        ->type_name("R,..")
        ->delimiter(',')
        ->transform(Decimal(UINT32_MAX));
    plan->add_option("--slow-links,--slow_links", slow_links_,
                     "hypothetical culprit links SRC-DST, e.g. 1-3,2-3")
        ->type_name("A-B,..")
        ->delimiter(',')
        ->check(SlowLinkError);
    plan->add_option("--slow-nodes,--slow_nodes", slow_nodes_,
                     "hypothetical culprit nodes (their NICs), as the ranks registered them, "
                     "e.g. node2")
        ->type_name("N,..")
        ->delimiter(',')
        ->check([](const std::string& n) {
          return n.empty() ? std::string("empty node name") : std::string();
        });
    slowdown_ = plan->add_option("--slowdown", slowdown_text_,
                                 "hypothetical slow / healthy iteration time, e.g. 1.4")
                    ->type_name("X")
                    ->check(SlowdownError);

    CLI::App* exp =
        Command("export", "Iteration-time history with event marks as CSV (default) or --json.");
    exp->add_option("JOB", inv_.job, "job name")->check(JobNameError)->required();
    csv_ = exp->add_flag("--csv", "CSV output (the default)");
    exp->add_option("--out", inv_.out, "write to FILE instead of stdout")
        ->type_name("FILE")
        ->check([](const std::string& f) {
          return f.empty() ? std::string("empty file name") : std::string();
        });
    exp->add_option("--from", inv_.from_iteration, "first iteration (default 0)")
        ->type_name("N")
        ->transform(Decimal(INT64_MAX));
    exp->add_option("--max-points,--max_points", inv_.max_points,
                    "downsample to at most N points (default 10000)")
        ->type_name("N")
        ->transform(Decimal(UINT32_MAX));

    help_ = app_.add_subcommand("help", "Show the overview, or one command's help.");
    help_->add_option("COMMAND", help_topic_, "a command")->check(CLI::IsMember(CommandNames()));
  }

  absl::StatusOr<Invocation> Parse(const std::vector<std::string>& args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back.
    try {
      app_.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      inv_.help = true;
      inv_.help_text = app_.help();  // That of the deepest command given.
      inv_.command = app_.get_subcommands().empty() ? "" : app_.get_subcommands()[0]->get_name();
      return inv_;
    } catch (const CLI::ExtrasError& e) {
      const std::vector<std::string> extras = app_.remaining();
      if (app_.get_subcommands().empty() && !extras.empty() && extras[0].rfind("-", 0) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown command '", extras[0],
                         "' (commands: ", absl::StrJoin(CommandNames(), ", "), ")"));
      }
      return UsageError(WithHint(e.what()));
    } catch (const CLI::ParseError& e) {
      return UsageError(WithHint(e.what()));
    }
    return Finish();
  }

  absl::StatusOr<std::string> HelpFor(absl::string_view command) const {
    if (command.empty()) return HelpOf(app_);  // Not app_.help(): that of the command given.
    for (const CLI::App* sub : {get_, set_}) {
      if (command == absl::StrCat("settings ", sub->get_name())) return HelpOf(*sub);
    }
    for (const CLI::App* sub : app_.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub->get_name() == command) return HelpOf(*sub);
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", command, "'"));
  }

 private:
  // `message` and where to read the usage of the command given (the deepest one parsed).
  std::string WithHint(absl::string_view message) const {
    const CLI::App* deepest = &app_;
    while (!deepest->get_subcommands().empty()) deepest = deepest->get_subcommands()[0];
    return absl::StrCat(message, " (see: ", PathOf(*deepest), " --help)");
  }

  CLI::App* Command(const std::string& name, const std::string& description) {
    CLI::App* sub = app_.add_subcommand(name, description);
    sub->footer(kGlobalFooter);
    return sub;
  }

  std::vector<std::string> CommandNames() const {
    std::vector<std::string> names;
    for (const CLI::App* sub : app_.get_subcommands([](const CLI::App*) { return true; })) {
      if (sub != help_) names.push_back(sub->get_name());
    }
    return names;
  }

  // The checks that span flags, and the values CLI11 leaves as text.
  absl::StatusOr<Invocation> Finish() {
    if (help_->parsed()) {
      inv_.help = true;
      inv_.command = help_topic_;
      auto text = HelpFor(help_topic_);
      if (!text.ok()) return text.status();
      inv_.help_text = *text;
      return inv_;
    }
    if (app_.get_subcommands().empty()) {
      return absl::InvalidArgumentError("no command given (try: falconctl --help)");
    }
    inv_.command = app_.get_subcommands()[0]->get_name();
    if (controller_->count() == 0 && !env_controller_.empty()) {
      if (std::string e = AddressError(env_controller_); !e.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("$FALCON_CONTROLLER: ", e));
      }
      inv_.controller = env_controller_;
    }
    if (!timeout_text_.empty()) inv_.timeout = *ParseTimeout(timeout_text_, "--timeout");
    if (settings_->parsed()) {
      if (!get_->parsed() && !set_->parsed()) {
        return UsageError("settings: say get or set (see: falconctl settings --help)");
      }
      inv_.settings_set = set_->parsed();
    }
    if (csv_->count() > 0 && inv_.json) {
      return UsageError("export: --csv and --json exclude each other");
    }
    if (inv_.command == "plan") FillPlan();
    return inv_;
  }

  void FillPlan() {
    falcon::v1::DryRunPlanRequest& req = inv_.plan;
    req.set_job(inv_.job);
    if (cause_ == "compute") req.set_cause(falcon::v1::CAUSE_COMPUTE);
    if (cause_ == "communication" || cause_ == "comm") {
      req.set_cause(falcon::v1::CAUSE_COMMUNICATION);
    }
    if (cause_ == "unknown") req.set_cause(falcon::v1::CAUSE_UNKNOWN);
    for (uint32_t r : slow_ranks_) req.add_slow_ranks(r);
    for (const std::string& l : slow_links_) {  // Checked by SlowLinkError.
      std::vector<absl::string_view> ends = absl::StrSplit(l, '-');
      uint32_t src = 0;
      uint32_t dst = 0;
      if (absl::SimpleAtoi(ends[0], &src) && absl::SimpleAtoi(ends[1], &dst)) {
        auto* link = req.add_slow_links();
        link->set_src_rank(src);
        link->set_dst_rank(dst);
      }
    }
    for (const std::string& n : slow_nodes_) req.add_slow_nodes(n);
    double x = 0;
    if (slowdown_->count() > 0 && absl::SimpleAtod(slowdown_text_, &x)) req.set_slowdown_ratio(x);
  }

  static absl::Status UsageError(absl::string_view message) {
    return absl::InvalidArgumentError(message);
  }

  const std::string env_controller_;
  Invocation inv_;
  CLI::App app_;
  CLI::Option* controller_ = nullptr;
  std::string timeout_text_;
  CLI::App* settings_ = nullptr;
  CLI::App* get_ = nullptr;
  CLI::App* set_ = nullptr;
  bool dry_run_ = false;
  std::string cause_;
  std::vector<uint32_t> slow_ranks_;
  std::vector<std::string> slow_links_;
  std::vector<std::string> slow_nodes_;
  CLI::Option* slowdown_ = nullptr;
  std::string slowdown_text_;
  CLI::Option* csv_ = nullptr;
  CLI::App* help_ = nullptr;
  std::string help_topic_;
};

}  // namespace

absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view env_controller) {
  return Grammar(env_controller).Parse(args);
}

absl::StatusOr<std::string> Usage(absl::string_view command) {
  return Grammar("").HelpFor(command);
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view what) {
  absl::Duration d;
  if (std::string e = ToDuration(std::string(text), &d); !e.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", e));
  }
  return d;
}

absl::Status CheckControllerAddress(absl::string_view address, absl::string_view what) {
  if (std::string e = AddressError(std::string(address)); !e.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", e));
  }
  return absl::OkStatus();
}

}  // namespace falcon::cli::ctl
