// falcon.v1.FieldError helpers: bad peer input is answered with the dotted path of the offending
// field ("batch.iterations[3].iteration_time_ns") and what is wrong with it.
#ifndef FALCON_CONTROLLER_UTIL_FIELD_ERROR_H_
#define FALCON_CONTROLLER_UTIL_FIELD_ERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::controller::util {

using MaybeFieldError = std::optional<falcon::v1::FieldError>;

inline falcon::v1::FieldError MakeFieldError(std::string field, std::string message) {
  falcon::v1::FieldError e;
  e.set_field(std::move(field));
  e.set_message(std::move(message));
  return e;
}

// "path[index]".
inline std::string Indexed(absl::string_view path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

// kInvalidArgument with "field: message".
inline absl::Status ToStatus(const falcon::v1::FieldError& e) {
  return absl::InvalidArgumentError(absl::StrCat(e.field(), ": ", e.message()));
}

}  // namespace falcon::controller::util

#endif  // FALCON_CONTROLLER_UTIL_FIELD_ERROR_H_
