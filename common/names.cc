#include "common/names.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace falcon::common {
namespace {

bool IsJobNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

absl::Status Bad(absl::string_view field, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", rule));
}

}  // namespace

bool IsValidJobName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxJobNameBytes) return false;
  for (char c : name) {
    if (!IsJobNameChar(c)) return false;
  }
  return true;
}

absl::Status ValidateJobName(absl::string_view name, absl::string_view field) {
  if (IsValidJobName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": '", absl::CHexEscape(name.substr(0, kMaxJobNameBytes + 1)),
                   "' is not ", kJobNameRule));
}

bool IsValidUtf8(absl::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= text.size()) return false;  // Truncated sequence.
    for (size_t k = 1; k <= n; ++k) {
      const unsigned char d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

bool IsValidNodeName(absl::string_view name) {
  return !name.empty() && name.size() <= kMaxNodeNameBytes && IsValidUtf8(name);
}

absl::Status ValidateNodeName(absl::string_view name, absl::string_view field) {
  return IsValidNodeName(name) ? absl::OkStatus() : Bad(field, "1 to 256 bytes of UTF-8");
}

bool IsValidAgentId(absl::string_view id) {
  return !id.empty() && id.size() <= kMaxAgentIdBytes && IsValidUtf8(id);
}

absl::Status ValidateAgentId(absl::string_view id, absl::string_view field) {
  return IsValidAgentId(id) ? absl::OkStatus() : Bad(field, "1 to 256 bytes of UTF-8");
}

}  // namespace falcon::common
