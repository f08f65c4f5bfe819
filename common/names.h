// The naming rules every module checks identifiers against (job names, node names, agent ids),
// in one place so the shim, the agent, the trainer and the controller accept exactly the same
// names.
//
// Rules:
//  - Job name: 1 to 128 bytes of [A-Za-z0-9._-]. Job names become store-key prefixes
//    (never contain '\0'), Prometheus label values and file names, hence the restricted set.
//  - Node name and agent id: 1 to 256 bytes of UTF-8 (host names come from gethostname(); the
//    names travel in proto3 string fields, which a peer refuses to parse unless they are UTF-8).
//
// The Validate* functions return kInvalidArgument whose message starts with `field` (the
// caller's name for the value: "hello.job", "--job", "options.job"), then ": ", then the rule.
#ifndef FALCON_COMMON_NAMES_H_
#define FALCON_COMMON_NAMES_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace falcon::common {

inline constexpr size_t kMaxJobNameBytes = 128;
inline constexpr size_t kMaxNodeNameBytes = 256;
inline constexpr size_t kMaxAgentIdBytes = 256;

// The job-name rule, as a phrase for error messages and flag help.
inline constexpr absl::string_view kJobNameRule = "1 to 128 bytes of [A-Za-z0-9._-]";

bool IsValidJobName(absl::string_view name);
absl::Status ValidateJobName(absl::string_view name, absl::string_view field);

// Well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool IsValidUtf8(absl::string_view text);

bool IsValidNodeName(absl::string_view name);
absl::Status ValidateNodeName(absl::string_view name, absl::string_view field);

bool IsValidAgentId(absl::string_view id);
absl::Status ValidateAgentId(absl::string_view id, absl::string_view field);

}  // namespace falcon::common

#endif  // FALCON_COMMON_NAMES_H_
