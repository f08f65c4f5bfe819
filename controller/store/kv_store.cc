#include "controller/store/kv_store.h"

#include <iterator>
#include <utility>

namespace falcon::controller::store {

void KvWriteBatch::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  ops_.push_back(Op{Op::Kind::kPut, std::string(table), std::string(key), std::string(value)});
  bytes_ += key.size() + value.size();
}

void KvWriteBatch::Delete(absl::string_view table, absl::string_view key) {
  ops_.push_back(Op{Op::Kind::kDelete, std::string(table), std::string(key), std::string()});
  bytes_ += key.size();
}

void KvWriteBatch::DeleteRange(absl::string_view table, absl::string_view begin,
                               absl::string_view end) {
  ops_.push_back(
      Op{Op::Kind::kDeleteRange, std::string(table), std::string(begin), std::string(end)});
  bytes_ += begin.size() + end.size();
}

void KvWriteBatch::Append(KvWriteBatch&& other) {
  ops_.insert(ops_.end(), std::make_move_iterator(other.ops_.begin()),
              std::make_move_iterator(other.ops_.end()));
  bytes_ += other.bytes_;
  other.Clear();
}

std::string PrefixSuccessor(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) != 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

absl::Status KvStore::Scan(absl::string_view table, absl::string_view prefix,
                           const KvScanFn& fn) const {
  return ScanRange(table, prefix, PrefixSuccessor(prefix), fn);
}

}  // namespace falcon::controller::store
