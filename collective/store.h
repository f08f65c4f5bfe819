// Rendezvous key-value store over a directory every rank can see (falcon_launch creates a fresh
// one per job and passes it as FALCON_RENDEZVOUS). Used to bootstrap Gloo connections, exchange
// NCCL unique ids and split colors. Keys are arbitrary strings (stored under an escaped file
// name); values are bytes. A key is written once: Set writes a temporary file and renames it, so a
// reader never sees a partial value.
//
// Thread-safe; safe across processes.
#ifndef FALCON_COLLECTIVE_STORE_H_
#define FALCON_COLLECTIVE_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace falcon::collective {

class RendezvousStore {
 public:
  // Opens (creating if needed) `dir`. kInvalidArgument for an empty path, kUnavailable when the
  // directory cannot be created or is not writable.
  static absl::StatusOr<std::shared_ptr<RendezvousStore>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }

  // Writes `key` (overwriting). kUnavailable on I/O errors.
  absl::Status Set(absl::string_view key, absl::string_view value) const;
  // Waits until `key` exists, then returns its value. kDeadlineExceeded naming the key after
  // `timeout`.
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) const;
  // Waits until every key exists. kDeadlineExceeded naming the first missing key.
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) const;
  // Whether `key` exists now.
  bool Has(absl::string_view key) const;

 private:
  explicit RendezvousStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view key) const;

  const std::string dir_;
};

}  // namespace falcon::collective

#endif  // FALCON_COLLECTIVE_STORE_H_
