#include "common/testing/file_damage.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace falcon::common::testing {

absl::Status FlipByte(const std::string& path, uint64_t offset) {
  const int fd = open(path.c_str(), O_RDWR);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened for writing"));
  char c = 0;
  absl::Status status;
  if (pread(fd, &c, 1, static_cast<off_t>(offset)) != 1) {
    status = absl::OutOfRangeError(absl::StrCat(path, ": no byte at offset ", offset));
  } else {
    c = static_cast<char>(c ^ 0x5a);
    if (pwrite(fd, &c, 1, static_cast<off_t>(offset)) != 1) {
      status = absl::InternalError(absl::StrCat(path, ": byte ", offset, " not written"));
    }
  }
  close(fd);
  return status;
}

}  // namespace falcon::common::testing
