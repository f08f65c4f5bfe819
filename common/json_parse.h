// Parsing user-given JSON (TCPD series, layouts, config files, directive scripts) without
// exceptions: nlohmann::json::parse throws, also for a valid-looking number beyond the range of a
// double ("1e400", out_of_range.406), and an exception a caller forgot to catch aborts the
// program. ParseJson never throws, names where in the document the error is, and bounds the
// nesting depth (deeper documents are refused before anything recurses over them, e.g. dump()).
//
// Errors: kInvalidArgument "SOURCE: not valid JSON at line L, column C (byte B)[, at PATH]:
// DETAIL", where PATH is the position in the document ("series[0].raw[2]", "layout[3].rank") of
// the value being read when the error was found, and DETAIL nlohmann's reason without its prefix
// ("number overflow parsing '1e400'", "syntax error while parsing value - ...", "nested deeper
// than 100 levels").
#ifndef FALCON_COMMON_JSON_PARSE_H_
#define FALCON_COMMON_JSON_PARSE_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace falcon::common {

// Deeper than any document Falcon reads (3 levels for TCPD, 2 for a layout) by far.
inline constexpr size_t kDefaultMaxJsonDepth = 100;

// One JSON document (trailing content other than whitespace is an error). `source` names it in
// errors (a path, or e.g. "directive script line 3").
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, absl::string_view source,
                                         size_t max_depth = kDefaultMaxJsonDepth);

}  // namespace falcon::common

#endif  // FALCON_COMMON_JSON_PARSE_H_
