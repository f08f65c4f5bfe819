#include "trainer_shim/nccl/comm_registry.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace falcon::trainer_shim::nccl {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

struct CacheSlot {
  const CommRegistry* registry = nullptr;
  const void* comm = nullptr;
  uint64_t generation = 0;
  uint64_t comm_id = 0;
  int comm_rank = 0;
  int comm_size = 0;
  bool ops_by_plugin = false;
};
thread_local CacheSlot t_cache;

}  // namespace

uint64_t CommIdFromUniqueId(const void* bytes, size_t size) {
  const uint64_t h = Fnv(kFnvOffset, static_cast<const unsigned char*>(bytes), size);
  return h == 0 ? 1 : h;
}

uint64_t SplitCommId(uint64_t parent_id, uint64_t split_index, int color) {
  unsigned char buf[20];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<unsigned char>(parent_id >> (8 * i));
  for (int i = 0; i < 8; ++i) buf[8 + i] = static_cast<unsigned char>(split_index >> (8 * i));
  const uint32_t c = static_cast<uint32_t>(color);
  for (int i = 0; i < 4; ++i) buf[16 + i] = static_cast<unsigned char>(c >> (8 * i));
  const uint64_t h = Fnv(kFnvOffset, buf, sizeof(buf));
  return h == 0 ? 1 : h;
}

absl::StatusOr<std::vector<uint32_t>> CheckGatheredMembers(const std::vector<int32_t>& gathered,
                                                           int comm_rank, uint32_t my_global_rank,
                                                           uint32_t world_size) {
  if (comm_rank < 0 || static_cast<size_t>(comm_rank) >= gathered.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm_rank ", comm_rank, " outside ", gathered.size(), " members"));
  }
  if (gathered[comm_rank] != static_cast<int32_t>(my_global_rank)) {
    return absl::InvalidArgumentError(absl::StrCat("members[", comm_rank,
                                                   "]: ", gathered[comm_rank],
                                                   " is not this rank (", my_global_rank, ")"));
  }
  std::vector<uint32_t> out;
  out.reserve(gathered.size());
  absl::flat_hash_set<int32_t> seen;
  for (size_t i = 0; i < gathered.size(); ++i) {
    const int32_t g = gathered[i];
    if (g < 0 || static_cast<uint32_t>(g) >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("members[", i, "]: rank ", g, " outside world of ", world_size));
    }
    if (!seen.insert(g).second) {
      return absl::InvalidArgumentError(absl::StrCat("members[", i, "]: duplicate rank ", g));
    }
    out.push_back(static_cast<uint32_t>(g));
  }
  return out;
}

void CommRegistry::Add(const void* comm, Entry entry) {
  absl::MutexLock lock(&mu_);
  storage_.push_back(std::make_unique<Entry>(std::move(entry)));
  entries_[comm] = storage_.back().get();
  generation_.fetch_add(1, std::memory_order_release);
}

bool CommRegistry::SetMembers(const void* comm, std::vector<uint32_t> members) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(comm);
  if (it == entries_.end()) return false;
  // Replace rather than mutate: a racing GlobalPeer may read the old entry.
  storage_.push_back(std::make_unique<Entry>(*it->second));
  storage_.back()->members = std::move(members);
  it->second = storage_.back().get();
  generation_.fetch_add(1, std::memory_order_release);
  return true;
}

bool CommRegistry::SetOpsByPlugin(const void* comm) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(comm);
  if (it == entries_.end()) return false;
  storage_.push_back(std::make_unique<Entry>(*it->second));
  storage_.back()->ops_by_plugin = true;
  it->second = storage_.back().get();
  generation_.fetch_add(1, std::memory_order_release);
  return true;
}

bool CommRegistry::Lookup(const void* comm, uint64_t* comm_id, int* comm_rank, int* comm_size,
                          bool* ops_by_plugin) const {
  const uint64_t gen = generation_.load(std::memory_order_acquire);
  CacheSlot& c = t_cache;
  if (c.registry == this && c.comm == comm && c.generation == gen) {
    *comm_id = c.comm_id;
    *comm_rank = c.comm_rank;
    *comm_size = c.comm_size;
    if (ops_by_plugin != nullptr) *ops_by_plugin = c.ops_by_plugin;
    return true;
  }
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(comm);
  if (it == entries_.end()) return false;
  *comm_id = it->second->comm_id;
  *comm_rank = it->second->comm_rank;
  *comm_size = it->second->comm_size;
  if (ops_by_plugin != nullptr) *ops_by_plugin = it->second->ops_by_plugin;
  c = CacheSlot{this, comm, gen, *comm_id, *comm_rank, *comm_size, it->second->ops_by_plugin};
  return true;
}

int32_t CommRegistry::GlobalPeer(const void* comm, int peer) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(comm);
  if (it == entries_.end() || peer < 0) return -1;
  const std::vector<uint32_t>& m = it->second->members;
  return static_cast<size_t>(peer) < m.size() ? static_cast<int32_t>(m[peer]) : -1;
}

void CommRegistry::Remove(const void* comm) {
  absl::MutexLock lock(&mu_);
  entries_.erase(comm);
  split_counts_.erase(comm);
  generation_.fetch_add(1, std::memory_order_release);
}

uint64_t CommRegistry::NextSplitIndex(const void* parent) {
  absl::MutexLock lock(&mu_);
  return split_counts_[parent]++;
}

size_t CommRegistry::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace falcon::trainer_shim::nccl
