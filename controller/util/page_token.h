// Page tokens of the Control API's paged List RPCs (control.proto; AIP-158): where the next page
// starts, how many items came before it, and which request it belongs to. Opaque to clients:
// web-safe base64 of "list \n filter \n served \n cursor".
#ifndef FALCON_CONTROLLER_UTIL_PAGE_TOKEN_H_
#define FALCON_CONTROLLER_UTIL_PAGE_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::controller::util {

struct PageToken {
  std::string list;     // The RPC: "jobs", "events", "directives". No '\n'.
  std::string filter;   // The request fields that must not change between pages. No '\n'.
  uint64_t served = 0;  // Items returned by the earlier pages.
  std::string cursor;   // The last item of the previous page (a job name, a decimal id).
};

std::string EncodePageToken(const PageToken& token);

// Decodes `token` for a request of `list` with `filter`. An empty token is the first page
// (served 0, empty cursor). Errors: kInvalidArgument "page_token: ..." when the token is malformed
// or belongs to another list or filter (a request whose other fields changed).
absl::StatusOr<PageToken> DecodePageToken(absl::string_view token, absl::string_view list,
                                          absl::string_view filter);

}  // namespace falcon::controller::util

#endif  // FALCON_CONTROLLER_UTIL_PAGE_TOKEN_H_
