// Command-line grammar of falconctl (`./falcon ctl`): a command, its positional arguments and
// flags, plus the global flags every command takes. Parsing is pure (the environment's default
// controller address is passed in), so tests run it without a process.
//
//   falconctl [global flags] COMMAND [ARGS...] [flags]
//   global flags (anywhere): --controller ADDR (default $FALCON_CONTROLLER, else
//     127.0.0.1:7070), --timeout DURATION (per call; "5s", "500ms" or seconds; default 10s),
//     --json, --help/-h.
//   Flags take `--name=value` or `--name value`; booleans take no value.
//
// Errors: kInvalidArgument whose message names the offending argument (unknown command, unknown
// flag, missing or extra positional, bad number); falconctl maps it to exit code 2.
#ifndef FALCON_CLI_CTL_ARGS_H_
#define FALCON_CLI_CTL_ARGS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

constexpr char kDefaultController[] = "127.0.0.1:7070";

struct Invocation {
  std::string command;                       // "jobs", "job", ..., "help"; never empty.
  std::vector<std::string> positional;       // Arguments after the command (flags removed).
  std::map<std::string, std::string> flags;  // Command flags by name (no dashes); bool: "true".
  std::string controller = kDefaultController;
  absl::Duration timeout = absl::Seconds(10);
  bool json = false;
  bool help = false;  // --help/-h or `help`: print usage (of `command` when not "help").

  bool Has(const std::string& flag) const { return flags.count(flag) > 0; }
  std::string Flag(const std::string& flag, const std::string& fallback = "") const;
};

// Parses argv[1..] (the program name excluded). `env_controller` is $FALCON_CONTROLLER or empty.
absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view env_controller);

// The usage text: every command when `command` is empty or unknown, else that command's.
std::string Usage(absl::string_view command = "");

// `plan` flags --cause, --slow-ranks, --slow-links, --slowdown as a hypothetical verdict in `req`
// (left as is when none is given). Errors name the flag and the bad item.
absl::Status ApplyPlanFlags(const Invocation& inv, falcon::v1::DryRunPlanRequest* req);

// Number parsers whose errors name `what` (e.g. "--count" or "event ID").
absl::StatusOr<uint64_t> ParseUint(absl::string_view text, absl::string_view what);
absl::StatusOr<int64_t> ParseInt(absl::string_view text, absl::string_view what);
// "5s", "250ms", "1m" (absl durations) or plain seconds ("2.5"); must be > 0.
absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view what);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_ARGS_H_
