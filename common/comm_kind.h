// The communicator-role vocabulary: falcon.v1.CommKind (proto/falcon/v1/common.proto) is its
// single source. C++ modules (collective, the shim, the trainer, falconctl) use this alias of the
// proto enum; the C ABI (trainer_shim/falcon_shim.h) passes the values as plain integers.
#ifndef FALCON_COMMON_COMM_KIND_H_
#define FALCON_COMMON_COMM_KIND_H_

#include <string>

#include "proto/falcon/v1/common.pb.h"

namespace falcon::common {

using CommKind = ::falcon::v1::CommKind;

// The lower-case name without the COMM_KIND_ prefix ("dp", "world", "unspecified"); "invalid" for
// a value outside the enum.
std::string CommKindName(CommKind kind);

}  // namespace falcon::common

#endif  // FALCON_COMMON_COMM_KIND_H_
