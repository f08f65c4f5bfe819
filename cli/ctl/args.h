// Command-line grammar of falconctl (`./falcon ctl`), declared with CLI11: one subcommand per
// command, typed positionals and flags, help per subcommand. Parsing is pure (the environment's
// default controller address is passed in), so tests run it without a process.
//
//   falconctl [global flags] COMMAND [ARGS...] [flags]
//   global flags (before or after the command): --controller HOST:PORT (default
//     $FALCON_CONTROLLER, else 127.0.0.1:7070; port in [1, 65535]), --timeout DURATION (per call;
//     "5s", "500ms" or seconds; default 10s), --json, --help/-h, and mutual TLS to the controller
//     (docs/operations.md#tls): --tls_cert FILE, --tls_key FILE, --tls_ca FILE (defaults
//     $FALCON_TLS_CERT, $FALCON_TLS_KEY, $FALCON_TLS_CA), or --plaintext for a local demo;
//     Main refuses a call with neither (proto::CheckTlsSettings).
//   Flags take `--name=value` or `--name value`; booleans take no value. Dashed flags also take
//   their snake_case spelling (--dry_run, --max_points, --slow_ranks, --slow_links).
//
//   Integer arguments are decimal digits within their type's range (--limit and --max-points in
//   [0, 2^32), --count and event IDs in [0, 2^64), --from in [0, 2^63), ranks in [0, 2^32)): no
//   sign, no octal, never wrapped or clamped. JOB arguments and --job follow the job-name rule
//   (common/names.h).
//
// Errors: kInvalidArgument whose message names the offending argument (unknown command, unknown
// flag, missing or extra positional, bad number, job name or address); falconctl maps it to exit
// code 2.
#ifndef FALCON_CLI_CTL_ARGS_H_
#define FALCON_CLI_CTL_ARGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/falcon/v1/control.pb.h"

namespace falcon::cli::ctl {

constexpr char kDefaultController[] = "127.0.0.1:7070";
constexpr uint32_t kDefaultMaxPoints = 10000;

// One parsed command line. Only the fields of `command` are set; the others keep their defaults.
struct Invocation {
  // "jobs", "job", "events", "event", "directives", "settings", "validate", "plan", "export";
  // with `help`, the command whose help was asked for ("" for the overview).
  std::string command;
  bool help = false;      // --help/-h or `help [COMMAND]`: print `help_text`, exit 0.
  std::string help_text;  // Set with `help`.

  std::string controller = kDefaultController;  // HOST:PORT, checked.
  absl::Duration timeout = absl::Seconds(10);   // Per-call deadline, > 0 and finite.
  bool json = false;
  std::string tls_cert, tls_key, tls_ca;  // PEM files; empty: unset.
  bool plaintext = false;

  // job, validate, plan, export: the JOB positional; events, directives: --job (empty: all
  // jobs); settings: the optional JOB (empty: the defaults for new jobs).
  std::string job;
  uint64_t event_id = 0;      // event ID.
  uint32_t limit = 0;         // events, directives: --limit N (0: the controller's default).
  bool active = false;        // events --active.
  bool watch = false;         // events --watch.
  uint64_t count = 0;         // events --watch --count N: stop after N transitions (0: never).
  bool settings_set = false;  // settings set (else settings get).
  std::vector<std::string> assignments;  // settings set: KEY=VALUE, each with a '='.
  // plan: the job and the hypothetical verdict of --cause, --slow-ranks, --slow-links,
  // --slowdown (fields left unset when the flag is not given).
  falcon::v1::DryRunPlanRequest plan;
  std::string out;                          // export --out FILE (empty: stdout).
  int64_t from_iteration = 0;               // export --from N, >= 0.
  uint32_t max_points = kDefaultMaxPoints;  // export --max-points N.
};

// Parses argv[1..] (the program name excluded). `env_controller` is $FALCON_CONTROLLER or empty.
absl::StatusOr<Invocation> ParseArgs(const std::vector<std::string>& args,
                                     absl::string_view env_controller);

// The help text: the overview (every command) when `command` is empty, else that command's
// (`settings get`, `settings set` for the settings verbs). kInvalidArgument for an unknown one.
absl::StatusOr<std::string> Usage(absl::string_view command = "");

// "5s", "250ms", "1m" (absl durations) or plain seconds ("2.5"); must be > 0 and finite. Errors
// name `what`.
absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text, absl::string_view what);

// OK when `address` is HOST:PORT ([V6]:PORT for IPv6) with a non-empty host and a decimal port
// in [1, 65535]; else kInvalidArgument naming `what` and the address.
absl::Status CheckControllerAddress(absl::string_view address, absl::string_view what);

}  // namespace falcon::cli::ctl

#endif  // FALCON_CLI_CTL_ARGS_H_
