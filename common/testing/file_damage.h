// Damage to a file on disk, for tests of what a reader does with a corrupt file.
#ifndef FALCON_COMMON_TESTING_FILE_DAMAGE_H_
#define FALCON_COMMON_TESTING_FILE_DAMAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace falcon::common::testing {

// XORs the byte at `offset` of `path` with 0x5a (so it surely changes). kNotFound when the file
// cannot be opened for writing; kOutOfRange when it has no byte at `offset`.
absl::Status FlipByte(const std::string& path, uint64_t offset);

}  // namespace falcon::common::testing

#endif  // FALCON_COMMON_TESTING_FILE_DAMAGE_H_
