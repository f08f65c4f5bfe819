// Falcon's release version: the one source of every daemon's build_info{version} metric, its start
// line and `--version`, and of the version an agent sends in AgentHello.
#ifndef FALCON_COMMON_VERSION_H_
#define FALCON_COMMON_VERSION_H_

namespace falcon::common {

inline constexpr char kFalconVersion[] = "0.9.0";

// Makes Abseil's `--version` print "<program> <kFalconVersion>". Call before
// absl::ParseCommandLine.
void InstallVersionFlag(const char* program);

}  // namespace falcon::common

#endif  // FALCON_COMMON_VERSION_H_
