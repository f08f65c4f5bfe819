#include "controller/util/page_token.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace falcon::controller::util {

std::string EncodePageToken(const PageToken& token) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(token.list, "\n", token.filter, "\n", token.served, "\n", token.cursor));
}

absl::StatusOr<PageToken> DecodePageToken(absl::string_view token, absl::string_view list,
                                          absl::string_view filter) {
  PageToken out;
  out.list = std::string(list);
  out.filter = std::string(filter);
  if (token.empty()) return out;
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) {
    return absl::InvalidArgumentError("page_token: malformed (not a token this server made)");
  }
  std::vector<std::string> parts = absl::StrSplit(raw, absl::MaxSplits('\n', 3));
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[2], &out.served) || parts[3].empty()) {
    return absl::InvalidArgumentError("page_token: malformed (not a token this server made)");
  }
  if (parts[0] != list || parts[1] != filter) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: belongs to another request (a ", parts[0],
        " listing with other fields); keep every field but page_token as on the first page"));
  }
  out.cursor = std::move(parts[3]);
  return out;
}

}  // namespace falcon::controller::util
