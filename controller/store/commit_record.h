// The commit record: a small file beside the RocksDB files (FALCON_COMMIT in the data directory)
// that says what the store had made durable, so that a reopened store can prove it still holds
// it. RocksDB's own checks find a damaged record (a checksum mismatch) but not a log or MANIFEST
// cut short at a record boundary, nor a MANIFEST that lost its column families (the database then
// opens empty); the commit record catches those (rocksdb_kv_store.h says how).
//
// What it holds, after every successful RocksDbKvStore::Sync: the store's commit number (counted
// in the database itself, one per write batch), the write-ahead log file then being written and
// its synced size, the tables, and figures the controller supplies (jobs, events, directives,
// batches) so that a repair can say what the damage lost.
//
// Layout: 8 KiB, two 4 KiB copies written alternately (a torn write of one leaves the other, an
// older and therefore safe record), each a few text lines ending in an FNV-1a 64 checksum and
// padded with NUL bytes:
//   falcon commit record 1
//   generation 17
//   commit 1234
//   wal 000012.log 56789
//   tables agents directives events history jobs meta samples settings
//   figure jobs 505
//   check 0123456789abcdef
// The file is created whole (temporary file, fsync, rename, fsync of the directory); later
// updates overwrite one copy in place. Not thread-safe.
#ifndef FALCON_CONTROLLER_STORE_COMMIT_RECORD_H_
#define FALCON_CONTROLLER_STORE_COMMIT_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/store/kv_store.h"

namespace falcon::controller::store {

struct CommitRecord {
  uint64_t generation = 0;  // Updates of the file so far; picks the newer copy.
  uint64_t commit = 0;      // Durable commit number of the store.
  std::string wal;          // Write-ahead log file name ("000012.log"); empty when unknown.
  uint64_t wal_bytes = 0;   // Its size once synced.
  std::vector<std::string> tables;
  store::StoreFigures figures;

  // The text of one copy (without padding).
  std::string Encode() const;
  // Parses one copy; nullopt when it is torn, damaged or not a commit record.
  static std::optional<CommitRecord> Decode(absl::string_view copy);
};

class CommitRecordFile {
 public:
  static constexpr char kFileName[] = "FALCON_COMMIT";
  static constexpr size_t kCopyBytes = 4096;

  // The record file of the store in `dir`.
  explicit CommitRecordFile(std::string dir);
  ~CommitRecordFile();
  CommitRecordFile(const CommitRecordFile&) = delete;
  CommitRecordFile& operator=(const CommitRecordFile&) = delete;

  // Full path of the file.
  const std::string& path() const { return path_; }

  // The newer readable copy; nullopt when there is no file. Errors: kDataLoss naming the file
  // when it exists but neither copy is readable; kUnavailable when it cannot be read.
  absl::StatusOr<std::optional<CommitRecord>> Read();

  // Stores `record` (its generation is set to one above the newest copy). Creates the file whole
  // when it is missing or damaged (both copies, fsynced); else overwrites the older copy, with an
  // fsync when `durable`.
  // Errors: kUnavailable on I/O failure; kInvalidArgument when the record exceeds a copy.
  absl::Status Write(CommitRecord record, bool durable);

 private:
  absl::Status Create(const std::string& copy);

  const std::string dir_;
  const std::string path_;
  int fd_ = -1;              // Open for updates once created or read.
  bool readable_ = false;    // fd_ holds a readable record (Read or Write succeeded).
  uint64_t generation_ = 0;  // Of the last copy read or written.
};

}  // namespace falcon::controller::store

#endif  // FALCON_CONTROLLER_STORE_COMMIT_RECORD_H_
