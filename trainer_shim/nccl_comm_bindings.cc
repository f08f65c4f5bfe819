#include "trainer_shim/nccl_comm_bindings.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace falcon::trainer_shim {

absl::Status NcclCommBindings::Open(uint64_t handle, uint32_t nranks, uint32_t rank) {
  if (handle == 0) return absl::InvalidArgumentError("nccl_comm: handle 0");
  if (nranks == 0) return absl::InvalidArgumentError("nccl_comm.nranks: 0");
  if (rank >= nranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("nccl_comm.rank: ", rank, " not below nranks ", nranks));
  }
  absl::MutexLock lock(&mu_);
  if (!entries_.try_emplace(handle, Entry{nranks, rank, false, 0, {}}).second) {
    return absl::InvalidArgumentError(absl::StrCat("nccl_comm: handle ", handle, " already open"));
  }
  unbound_order_.push_back(handle);
  return absl::OkStatus();
}

absl::Status NcclCommBindings::Bind(uint32_t nranks, uint32_t rank, uint64_t comm_id,
                                    std::vector<uint32_t> member_ranks) {
  if (comm_id == 0) return absl::InvalidArgumentError("comm_id: 0");
  if (member_ranks.size() != nranks) {
    return absl::InvalidArgumentError(absl::StrCat("member_ranks: ", member_ranks.size(),
                                                   " members for a communicator of ", nranks));
  }
  absl::flat_hash_set<uint32_t> seen;
  for (uint32_t m : member_ranks) {
    if (!seen.insert(m).second) {
      return absl::InvalidArgumentError(absl::StrCat("member_ranks: rank ", m, " twice"));
    }
  }
  absl::MutexLock lock(&mu_);
  for (auto it = unbound_order_.begin(); it != unbound_order_.end(); ++it) {
    Entry& e = entries_.at(*it);
    if (e.nranks != nranks || e.rank != rank) continue;
    e.bound = true;
    e.comm_id = comm_id;
    e.member_ranks = std::move(member_ranks);
    unbound_order_.erase(it);
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no open NCCL profiler communicator of ", nranks, " ranks as rank ", rank));
}

absl::Status NcclCommBindings::Close(uint64_t handle) {
  absl::MutexLock lock(&mu_);
  if (entries_.erase(handle) == 0) {
    return absl::NotFoundError(absl::StrCat("nccl_comm: handle ", handle, " not open"));
  }
  unbound_order_.erase(std::remove(unbound_order_.begin(), unbound_order_.end(), handle),
                       unbound_order_.end());
  return absl::OkStatus();
}

std::optional<uint64_t> NcclCommBindings::CommId(uint64_t handle) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end() || !it->second.bound) return std::nullopt;
  return it->second.comm_id;
}

absl::StatusOr<NcclCommBindings::Resolved> NcclCommBindings::Resolve(
    uint64_t handle, int64_t comm_rank, absl::string_view field) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end() || !it->second.bound) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ".nccl_comm: not bound to a Falcon communicator"));
  }
  const std::vector<uint32_t>& m = it->second.member_ranks;
  Resolved r;
  r.comm_id = it->second.comm_id;
  if (comm_rank < -1 || comm_rank >= static_cast<int64_t>(m.size())) {
    return absl::FailedPreconditionError(absl::StrCat(
        field, ".peer: ", comm_rank, " is outside the communicator of ", m.size(), " ranks"));
  }
  if (comm_rank >= 0) r.global_rank = static_cast<int32_t>(m[static_cast<size_t>(comm_rank)]);
  return r;
}

size_t NcclCommBindings::open_handles() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

}  // namespace falcon::trainer_shim
