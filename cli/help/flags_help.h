// --help for Falcon's command-line tools. Abseil (20220623) answers --help by printing the usage
// and exiting with status 1, which scripts read as a failure; a tool calls WantsHelp() before
// absl::ParseCommandLine and, when it is true, prints FlagsHelp() to stdout and exits 0.
//
//   if (falcon::cli::help::WantsHelp(argc, argv)) {
//     std::fputs(falcon::cli::help::FlagsHelp(kUsage, "falcon_plan_main.cc", true).c_str(),
//     stdout); return 0;
//   }
//
// Thread-compatible; reads the process's flag registry, no I/O.
#ifndef FALCON_CLI_HELP_FLAGS_HELP_H_
#define FALCON_CLI_HELP_FLAGS_HELP_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace falcon::cli::help {

// True when an argument before a bare "--" is -h, -?, --help, --helpshort, --helpfull or
// --help=... (one or two leading dashes).
bool WantsHelp(int argc, char** argv);

// `usage` (ending in a newline), then "Flags:" and one entry per flag defined in a source file
// whose path contains `file_filter` (every flag when empty), sorted by name:
//   --name (help text) default: VALUE
// With `dashes`, flag names are shown with '-' for '_' (tools that accept both spellings).
std::string FlagsHelp(absl::string_view usage, absl::string_view file_filter, bool dashes);

// Flags renamed over time: old name -> current name (both with underscores). A renamed flag keeps
// working under its old name, e.g. {"microbatches", "micro_batches"}.
using FlagAliases = std::map<std::string, std::string>;

// The process's arguments with every flag name before a bare "--" normalized for Abseil: dashes
// in the name become underscores ("--json-log=x" -> "--json_log=x", "-micro-batches" too), and an
// old name in `aliases` becomes its current name. Values and positional arguments are untouched.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv, const FlagAliases& aliases = {});

}  // namespace falcon::cli::help

#endif  // FALCON_CLI_HELP_FLAGS_HELP_H_
