#include "controller/store/commit_record.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace falcon::controller::store {
namespace {

constexpr char kMagic[] = "falcon commit record 1";
constexpr char kCheck[] = "check ";

uint64_t Fnv1a64(absl::string_view data) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : data) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

absl::Status Errno(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

bool WriteAll(int fd, const std::string& data, off_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        pwrite(fd, data.data() + done, data.size() - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string Padded(const std::string& copy) {
  std::string out = copy;
  out.resize(CommitRecordFile::kCopyBytes, '\0');
  return out;
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string CommitRecord::Encode() const {
  std::string text = absl::StrCat(kMagic, "\n", "generation ", generation, "\n", "commit ", commit,
                                  "\n", "wal ", wal.empty() ? "-" : wal, " ", wal_bytes, "\n",
                                  "tables ", absl::StrJoin(tables, " "), "\n");
  for (const auto& [name, value] : figures)
    absl::StrAppend(&text, "figure ", name, " ", value, "\n");
  char check[17];
  std::snprintf(check, sizeof(check), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(text)));  // NOLINT(runtime/int)
  absl::StrAppend(&text, kCheck, check, "\n");
  return text;
}

std::optional<CommitRecord> CommitRecord::Decode(absl::string_view copy) {
  const size_t nul = copy.find('\0');
  if (nul != absl::string_view::npos) copy = copy.substr(0, nul);
  const size_t check_at = copy.rfind(kCheck);
  if (check_at == absl::string_view::npos || (check_at > 0 && copy[check_at - 1] != '\n')) {
    return std::nullopt;
  }
  absl::string_view body = copy.substr(0, check_at);
  absl::string_view check = copy.substr(check_at + sizeof(kCheck) - 1);
  if (check.size() != 17 || check.back() != '\n') return std::nullopt;
  char want[17];
  std::snprintf(want, sizeof(want), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(body)));  // NOLINT(runtime/int)
  if (check.substr(0, 16) != want) return std::nullopt;

  CommitRecord r;
  std::vector<absl::string_view> lines = absl::StrSplit(body, '\n', absl::SkipEmpty());
  if (lines.size() < 5 || lines[0] != kMagic) return std::nullopt;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> f = absl::StrSplit(lines[i], ' ', absl::SkipEmpty());
    if (f.empty()) return std::nullopt;
    if (f[0] == "generation" && f.size() == 2 && absl::SimpleAtoi(f[1], &r.generation)) continue;
    if (f[0] == "commit" && f.size() == 2 && absl::SimpleAtoi(f[1], &r.commit)) continue;
    if (f[0] == "wal" && f.size() == 3 && absl::SimpleAtoi(f[2], &r.wal_bytes)) {
      r.wal = f[1] == "-" ? "" : std::string(f[1]);
      continue;
    }
    if (f[0] == "tables") {
      for (size_t k = 1; k < f.size(); ++k) r.tables.emplace_back(f[k]);
      continue;
    }
    uint64_t v = 0;
    if (f[0] == "figure" && f.size() == 3 && ValidName(f[1]) && absl::SimpleAtoi(f[2], &v)) {
      r.figures.emplace_back(std::string(f[1]), v);
      continue;
    }
    return std::nullopt;
  }
  return r;
}

CommitRecordFile::CommitRecordFile(std::string dir)
    : dir_(std::move(dir)), path_(absl::StrCat(dir_, "/", kFileName)) {}

CommitRecordFile::~CommitRecordFile() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::optional<CommitRecord>> CommitRecordFile::Read() {
  if (fd_ < 0) {
    fd_ = open(path_.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT) return std::optional<CommitRecord>();
      return Errno("opening", path_);
    }
  }
  std::string data(2 * kCopyBytes, '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = pread(fd_, &data[got], data.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("reading", path_);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  std::optional<CommitRecord> best;
  for (size_t copy = 0; copy < 2; ++copy) {
    if (got < (copy + 1) * kCopyBytes) break;
    std::optional<CommitRecord> r =
        CommitRecord::Decode(absl::string_view(data).substr(copy * kCopyBytes, kCopyBytes));
    if (r.has_value() && (!best.has_value() || r->generation > best->generation)) best = r;
  }
  if (!best.has_value()) {
    readable_ = false;
    return absl::DataLossError(absl::StrCat("commit record ", path_,
                                            " is damaged: neither of its two copies is readable"));
  }
  generation_ = best->generation;
  readable_ = true;
  return best;
}

absl::Status CommitRecordFile::Create(const std::string& copy) {
  const std::string tmp = absl::StrCat(path_, ".tmp");
  int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("creating", tmp);
  const std::string padded = Padded(copy);
  if (!WriteAll(fd, padded, 0) || !WriteAll(fd, padded, kCopyBytes) || fsync(fd) != 0) {
    absl::Status s = Errno("writing", tmp);
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  if (rename(tmp.c_str(), path_.c_str()) != 0) {
    absl::Status s = Errno("renaming", tmp);
    close(fd);
    unlink(tmp.c_str());
    return s;
  }
  int dir = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || fsync(dir) != 0) {
    absl::Status s = Errno("syncing directory", dir_);
    if (dir >= 0) close(dir);
    close(fd);
    return s;
  }
  close(dir);
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  return absl::OkStatus();
}

absl::Status CommitRecordFile::Write(CommitRecord record, bool durable) {
  record.generation = generation_ + 1;
  std::string copy = record.Encode();
  if (copy.size() > kCopyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("commit record: ", copy.size(), " bytes exceed a copy of ", kCopyBytes));
  }
  if (fd_ < 0 || !readable_) {
    // First write of this instance: learn the last generation, or write the file whole when it
    // is missing or damaged.
    absl::StatusOr<std::optional<CommitRecord>> last = Read();
    if (!last.ok() && !absl::IsDataLoss(last.status())) return last.status();
    if (!last.ok() || !last->has_value()) {
      if (absl::Status s = Create(copy); !s.ok()) return s;
      generation_ = record.generation;
      readable_ = true;
      return absl::OkStatus();
    }
    record.generation = generation_ + 1;
    copy = record.Encode();
  }
  const off_t offset = static_cast<off_t>((record.generation % 2) * kCopyBytes);
  if (!WriteAll(fd_, Padded(copy), offset)) return Errno("writing", path_);
  if (durable && fdatasync(fd_) != 0) return Errno("syncing", path_);
  generation_ = record.generation;
  return absl::OkStatus();
}

}  // namespace falcon::controller::store
