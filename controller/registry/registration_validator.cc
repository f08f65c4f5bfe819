#include "controller/registry/registration_validator.h"

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/layer_split.h"
#include "common/names.h"

namespace falcon::controller::registry {
namespace {

util::MaybeFieldError CheckIndex(const std::string& path, const char* name, int32_t index,
                                 uint32_t size) {
  if (index == -1) return std::nullopt;
  if (index < 0 || (size > 0 && static_cast<uint32_t>(index) >= size)) {
    return util::MakeFieldError(absl::StrCat(path, ".", name),
                                absl::StrCat(index, " is not -1 or in [0, ", size, ")"));
  }
  return std::nullopt;
}

// "field: message" (common's validators) as a FieldError.
util::MaybeFieldError FromStatus(const absl::Status& s) {
  const absl::string_view m = s.message();
  const size_t colon = m.find(": ");
  if (colon == absl::string_view::npos) return util::MakeFieldError("", std::string(m));
  return util::MakeFieldError(std::string(m.substr(0, colon)), std::string(m.substr(colon + 2)));
}

}  // namespace

util::MaybeFieldError ValidateJobRegistration(const falcon::v1::JobRegistration& reg,
                                              absl::string_view path) {
  if (!common::IsValidJobName(reg.job())) {
    return util::MakeFieldError(absl::StrCat(path, ".job"),
                                absl::StrCat("must be ", common::kJobNameRule));
  }
  if (reg.world_size() < 1 || reg.world_size() > kMaxWorldSize) {
    return util::MakeFieldError(
        absl::StrCat(path, ".world_size"),
        absl::StrCat(reg.world_size(), " is outside [1, ", kMaxWorldSize, "]"));
  }
  const uint32_t world = reg.world_size();
  if (reg.ranks_size() > static_cast<int>(world)) {
    return util::MakeFieldError(absl::StrCat(path, ".ranks"), "more ranks than world_size");
  }
  if (reg.dp_size() > world || reg.pp_size() > world || reg.tp_size() > world) {
    return util::MakeFieldError(absl::StrCat(path, ".dp_size"), "layout sizes exceed world_size");
  }
  if (reg.dp_size() > 0 && reg.pp_size() > 0 && reg.tp_size() > 0 &&
      static_cast<uint64_t>(reg.dp_size()) * reg.pp_size() * reg.tp_size() != world) {
    return util::MakeFieldError(
        absl::StrCat(path, ".dp_size"),
        absl::StrCat("dp_size * pp_size * tp_size = ", reg.dp_size(), "*", reg.pp_size(), "*",
                     reg.tp_size(), " != world_size ", world));
  }
  if (absl::Status s = common::ValidatePipelineShape(reg.pipeline_blocks(), reg.block_state_bytes(),
                                                     reg.pp_size(), absl::StrCat(path, "."));
      !s.ok()) {
    return FromStatus(s);
  }
  absl::flat_hash_set<uint32_t> seen_ranks;
  for (int i = 0; i < reg.ranks_size(); ++i) {
    const falcon::v1::RankInfo& r = reg.ranks(i);
    std::string rp = util::Indexed(absl::StrCat(path, ".ranks"), i);
    if (r.rank() >= world) {
      return util::MakeFieldError(rp + ".rank",
                                  absl::StrCat(r.rank(), " is outside [0, ", world, ")"));
    }
    if (!seen_ranks.insert(r.rank()).second) {
      return util::MakeFieldError(rp + ".rank", absl::StrCat("rank ", r.rank(), " listed twice"));
    }
    if (!common::IsValidNodeName(r.node())) {
      return util::MakeFieldError(rp + ".node", "must be 1 to 256 bytes");
    }
    if (r.pid() <= 0)
      return util::MakeFieldError(rp + ".pid", absl::StrCat(r.pid(), " is not > 0"));
    if (r.gpu() < -1)
      return util::MakeFieldError(rp + ".gpu", absl::StrCat(r.gpu(), " is below -1"));
    if (r.local_rank() >= world) {
      return util::MakeFieldError(rp + ".local_rank",
                                  absl::StrCat(r.local_rank(), " >= world_size"));
    }
    if (auto e = CheckIndex(rp, "dp_index", r.dp_index(), reg.dp_size())) return e;
    if (auto e = CheckIndex(rp, "pp_index", r.pp_index(), reg.pp_size())) return e;
    if (auto e = CheckIndex(rp, "tp_index", r.tp_index(), reg.tp_size())) return e;
  }
  absl::flat_hash_set<uint64_t> seen_comms;
  for (int i = 0; i < reg.communicators_size(); ++i) {
    const falcon::v1::Communicator& c = reg.communicators(i);
    std::string cp = util::Indexed(absl::StrCat(path, ".communicators"), i);
    if (c.comm_id() == 0) return util::MakeFieldError(cp + ".comm_id", "must not be 0");
    if (!seen_comms.insert(c.comm_id()).second) {
      return util::MakeFieldError(cp + ".comm_id",
                                  absl::StrCat("comm ", c.comm_id(), " listed twice"));
    }
    if (!falcon::v1::CommKind_IsValid(c.kind())) {
      return util::MakeFieldError(cp + ".kind", absl::StrCat("unknown kind ", c.kind()));
    }
    if (c.member_ranks_size() == 0)
      return util::MakeFieldError(cp + ".member_ranks", "must not be empty");
    if (c.member_ranks_size() > static_cast<int>(world)) {
      return util::MakeFieldError(cp + ".member_ranks", "more members than world_size");
    }
    if (c.name().size() > 128) return util::MakeFieldError(cp + ".name", "longer than 128 bytes");
    absl::flat_hash_set<uint32_t> members;
    for (int m = 0; m < c.member_ranks_size(); ++m) {
      uint32_t rank = c.member_ranks(m);
      if (rank >= world) {
        return util::MakeFieldError(util::Indexed(cp + ".member_ranks", m),
                                    absl::StrCat(rank, " is outside [0, ", world, ")"));
      }
      if (!members.insert(rank).second) {
        return util::MakeFieldError(util::Indexed(cp + ".member_ranks", m),
                                    absl::StrCat("rank ", rank, " listed twice"));
      }
    }
  }
  return std::nullopt;
}

}  // namespace falcon::controller::registry
