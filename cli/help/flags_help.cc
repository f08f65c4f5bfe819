#include "cli/help/flags_help.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"

namespace falcon::cli::help {

bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "-h" || a == "-?") return true;
    if (!absl::ConsumePrefix(&a, "--")) {
      if (!absl::ConsumePrefix(&a, "-")) continue;
    }
    if (a == "help" || a == "helpshort" || a == "helpfull" || absl::StartsWith(a, "help=")) {
      return true;
    }
  }
  return false;
}

std::string FlagsHelp(absl::string_view usage, absl::string_view file_filter, bool dashes) {
  std::string out(usage);
  if (!out.empty() && out.back() != '\n') out += '\n';
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired()) continue;
    if (!file_filter.empty() && !absl::StrContains(flag->Filename(), file_filter)) continue;
    flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  absl::StrAppend(&out, "\nFlags:\n");
  for (const absl::CommandLineFlag* flag : flags) {
    std::string name(flag->Name());
    if (dashes) name = absl::StrReplaceAll(name, {{"_", "-"}});
    std::string value = flag->DefaultValue();
    if (value.empty()) value = "\"\"";
    absl::StrAppend(&out, "  --", name, " (", flag->Help(), ") default: ", value, "\n");
  }
  return out;
}

std::vector<std::string> NormalizeFlagNames(int argc, char** argv, const FlagAliases& aliases) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || a == "-") continue;
    const size_t start = a[1] == '-' ? 2 : 1;
    const size_t end = std::min(a.find('='), a.size());
    std::string name = a.substr(start, end - start);
    std::replace(name.begin(), name.end(), '-', '_');
    // --noflag is Abseil's negation of a boolean flag: alias the flag part.
    const bool negated =
        name.size() > 2 && name.compare(0, 2, "no") == 0 && aliases.count(name.substr(2)) > 0;
    auto it = aliases.find(negated ? name.substr(2) : name);
    if (it != aliases.end()) name = (negated ? "no" : "") + it->second;
    a = a.substr(0, start) + name + a.substr(end);
  }
  return args;
}

}  // namespace falcon::cli::help
