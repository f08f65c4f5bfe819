#include "cluster/netns_names.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace falcon::cluster {
namespace {

constexpr absl::string_view kFalconTag = "fn";
constexpr size_t kMaxPidHexDigits = 8;

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool IsCounterLetter(char c) { return c >= 'g' && c < 'g' + kPrefixCounterLetters; }

// Splits "fn<hex><letter><rest>": the prefix, the pid and the rest; nullopt when `name` does not
// start that way.
std::optional<FalconNetName> ParsePrefix(absl::string_view name, absl::string_view* rest) {
  if (!absl::StartsWith(name, kFalconTag)) return std::nullopt;
  size_t i = kFalconTag.size();
  uint64_t pid = 0;
  while (i < name.size() && IsLowerHex(name[i]) && i - kFalconTag.size() < kMaxPidHexDigits) {
    pid = pid * 16 +
          static_cast<uint64_t>(absl::ascii_isdigit(name[i]) ? name[i] - '0' : name[i] - 'a' + 10);
    ++i;
  }
  const size_t digits = i - kFalconTag.size();
  if (digits == 0 || name[kFalconTag.size()] == '0' || pid > INT32_MAX) return std::nullopt;
  if (i >= name.size() || !IsCounterLetter(name[i])) return std::nullopt;
  ++i;
  FalconNetName parsed;
  parsed.kind = FalconNetName::Kind::kBridge;
  parsed.prefix = std::string(name.substr(0, i));
  parsed.pid = static_cast<pid_t>(pid);
  *rest = name.substr(i);
  return parsed;
}

bool AllDigits(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool IsNodeNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

}  // namespace

std::string NetnsPrefix(pid_t pid, int counter) {
  return absl::StrFormat("%s%x%c", kFalconTag, static_cast<unsigned>(pid),
                         static_cast<char>('g' + counter));
}

std::string BridgeName(absl::string_view prefix) { return absl::StrCat(prefix, "br"); }

std::string HostVethName(absl::string_view prefix, int node_index) {
  return absl::StrCat(prefix, "h", node_index);
}

std::string NetnsName(absl::string_view prefix, absl::string_view node) {
  return absl::StrCat(prefix, "-", node);
}

std::optional<FalconNetName> ParseLinkName(absl::string_view name) {
  if (name.size() > kMaxLinkNameBytes) return std::nullopt;
  absl::string_view rest;
  std::optional<FalconNetName> parsed = ParsePrefix(name, &rest);
  if (!parsed.has_value()) return std::nullopt;
  if (rest == "br") {
    parsed->kind = FalconNetName::Kind::kBridge;
    return parsed;
  }
  if (absl::StartsWith(rest, "h") && AllDigits(rest.substr(1))) {
    parsed->kind = FalconNetName::Kind::kHostVeth;
    return parsed;
  }
  return std::nullopt;
}

std::optional<pid_t> PrefixCreatorPid(absl::string_view prefix) {
  absl::string_view rest;
  std::optional<FalconNetName> parsed = ParsePrefix(prefix, &rest);
  if (!parsed.has_value() || !rest.empty()) return std::nullopt;
  return parsed->pid;
}

std::optional<FalconNetName> ParseNetnsName(absl::string_view name) {
  absl::string_view rest;
  std::optional<FalconNetName> parsed = ParsePrefix(name, &rest);
  if (!parsed.has_value() || !absl::StartsWith(rest, "-")) return std::nullopt;
  if (!ValidateNetnsNodeName(rest.substr(1), "").ok()) return std::nullopt;
  parsed->kind = FalconNetName::Kind::kNetns;
  return parsed;
}

absl::Status ValidateNetnsNodeName(absl::string_view name, absl::string_view field) {
  if (name.empty() || name.size() > kMaxNetnsNodeNameBytes || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", name, "' is not 1 to ", kMaxNetnsNodeNameBytes,
                     " bytes of [A-Za-z0-9._-] (it names a network namespace)"));
  }
  for (char c : name) {
    if (!IsNodeNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": '", name, "' is not 1 to ", kMaxNetnsNodeNameBytes,
                       " bytes of [A-Za-z0-9._-] (it names a network namespace)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace falcon::cluster
