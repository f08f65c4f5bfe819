#include "trainer_shim/directive_intake.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/directive_kind.h"
#include "common/layer_split.h"

namespace falcon::trainer_shim {
namespace {

using falcon::v1::AckStatus;
using falcon::v1::Directive;
using falcon::v1::DirectiveAck;

constexpr int64_t kMaxPauseNs = 600'000'000'000;

const char* KindName(const Directive& d) {
  switch (d.kind_case()) {
    case Directive::kMicroBatchPlan:
      return "micro_batch_plan";
    case Directive::kLayerSplit:
      return "layer_split";
    case Directive::kTopologyChange:
      return "topology_change";
    case Directive::kCheckpointRestart:
      return "checkpoint_restart";
    case Directive::kPause:
      return "pause";
    case Directive::kResume:
      return "resume";
    case Directive::kProfiling:
      return "profiling";
    case Directive::KIND_NOT_SET:
      break;
  }
  return "none";
}

}  // namespace

DirectiveIntake::DirectiveIntake(Options options)
    : options_(std::move(options)), epoch_(options_.epoch) {}

uint64_t DirectiveIntake::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

void DirectiveIntake::AdvanceEpoch(uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  epoch_ = std::max(epoch_, epoch);
}

bool DirectiveIntake::IsLateExempt(const Directive& d) {
  return d.kind_case() == Directive::kResume || d.kind_case() == Directive::kProfiling;
}

absl::Status DirectiveIntake::CheckWellFormed(const Directive& d) const {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (d.directive_id() == 0) return bad("directive.directive_id: must be > 0");
  if (d.job().empty()) return bad("directive.job: empty");
  if (d.effective_iteration() < 0) {
    return bad("directive.effective_iteration: ", d.effective_iteration(), " < 0");
  }
  if (d.plan_version() < 0) return bad("directive.plan_version: negative");
  if (d.reverts_directive_id() != 0 && d.reverts_directive_id() == d.directive_id()) {
    return bad("directive.reverts_directive_id: reverts itself");
  }
  for (int i = 0; i < d.target_ranks_size(); ++i) {
    if (d.target_ranks(i) >= options_.world_size) {
      return bad("directive.target_ranks[", i, "]: rank ", d.target_ranks(i), " >= world_size ",
                 options_.world_size);
    }
  }
  switch (d.kind_case()) {
    case Directive::KIND_NOT_SET:
      return bad("directive.kind: not set");
    case Directive::kMicroBatchPlan: {
      const auto& mb = d.micro_batch_plan().micro_batches();
      if (mb.empty()) return bad("directive.micro_batch_plan.micro_batches: empty");
      if (options_.dp_size > 0 && static_cast<uint32_t>(mb.size()) != options_.dp_size) {
        return bad("directive.micro_batch_plan.micro_batches: ", mb.size(),
                   " entries, but dp_size is ", options_.dp_size);
      }
      uint64_t sum = 0;
      for (uint32_t m : mb) sum += m;
      if (sum == 0) return bad("directive.micro_batch_plan.micro_batches: sum is 0");
      if (options_.global_micro_batches > 0 && sum != options_.global_micro_batches) {
        return bad("directive.micro_batch_plan.micro_batches: sum ", sum,
                   " != global micro-batches ", options_.global_micro_batches);
      }
      if (d.plan_version() <= 0) return bad("directive.plan_version: must be > 0 for a new plan");
      break;
    }
    case Directive::kLayerSplit: {
      const auto& split = d.layer_split();
      // Unknown sizes are taken from the split itself: its replica count for DP, the first
      // replica's stage count for PP (every replica must then have as many).
      const int dp =
          options_.dp_size > 0 ? static_cast<int>(options_.dp_size) : split.replicas_size();
      if (split.replicas().empty()) return bad("directive.layer_split.replicas: empty");
      const int pp = options_.pp_size > 0 ? static_cast<int>(options_.pp_size)
                                          : split.replicas(0).stage_blocks_size();
      // Each stage of each pipeline is at least one rank.
      if (static_cast<int64_t>(dp) * pp > options_.world_size) {
        return bad("directive.layer_split.replicas: ", dp, " pipelines of ", pp,
                   " stages need more than the job's ", options_.world_size, " ranks");
      }
      if (absl::Status s =
              common::ValidateLayerSplit(split, dp, pp, static_cast<int>(options_.pipeline_blocks),
                                         options_.global_micro_batches);
          !s.ok()) {
        return bad("directive.", s.message());
      }
      if (d.plan_version() <= 0) return bad("directive.plan_version: must be > 0 for a new plan");
      break;
    }
    case Directive::kTopologyChange: {
      const auto& as = d.topology_change().assignments();
      if (static_cast<uint32_t>(as.size()) != options_.world_size) {
        return bad("directive.topology_change.assignments: ", as.size(),
                   " entries, need one per rank (", options_.world_size, ")");
      }
      absl::flat_hash_set<uint32_t> ranks;
      for (int i = 0; i < as.size(); ++i) {
        if (as[i].rank() >= options_.world_size) {
          return bad("directive.topology_change.assignments[", i, "].rank: ", as[i].rank(),
                     " >= world_size");
        }
        if (!ranks.insert(as[i].rank()).second) {
          return bad("directive.topology_change.assignments[", i, "].rank: duplicate ",
                     as[i].rank());
        }
      }
      if (d.plan_version() <= 0) return bad("directive.plan_version: must be > 0 for a new plan");
      break;
    }
    case Directive::kCheckpointRestart: {
      const auto& cr = d.checkpoint_restart();
      if (cr.checkpoint_dir().empty()) {
        return bad("directive.checkpoint_restart.checkpoint_dir: empty");
      }
      for (int i = 0; i < cr.excluded_ranks_size(); ++i) {
        if (cr.excluded_ranks(i) >= options_.world_size) {
          return bad("directive.checkpoint_restart.excluded_ranks[", i, "]: rank ",
                     cr.excluded_ranks(i), " >= world_size");
        }
      }
      break;
    }
    case Directive::kPause: {
      const int64_t ns = d.pause().max_duration_ns();
      if (ns <= 0 || ns > kMaxPauseNs) {
        return bad("directive.pause.max_duration_ns: ", ns, " not in (0, 600e9]");
      }
      break;
    }
    case Directive::kResume:
      break;
    case Directive::kProfiling: {
      const auto& p = d.profiling();
      if (!p.job().empty() && p.job() != d.job()) {
        return bad("directive.profiling.job: '", p.job(), "' != directive job '", d.job(), "'");
      }
      if (p.max_duration_ns() < 0) return bad("directive.profiling.max_duration_ns: negative");
      break;
    }
  }
  return absl::OkStatus();
}

DirectiveAck DirectiveIntake::MakeAck(const Directive& d, AckStatus status, std::string reason,
                                      int64_t applied_iteration) const {
  DirectiveAck ack;
  ack.set_directive_id(d.directive_id());
  ack.set_job(options_.job);
  ack.set_rank(options_.rank);
  ack.set_epoch(d.epoch());
  ack.set_status(status);
  ack.set_reason(std::move(reason));
  ack.set_applied_iteration(status == falcon::v1::ACK_STATUS_APPLIED ? applied_iteration : -1);
  return ack;
}

DirectiveAck DirectiveIntake::RejectLocked(const Directive& d, std::string reason) {
  DirectiveAck ack = MakeAck(d, falcon::v1::ACK_STATUS_REJECTED, std::move(reason), -1);
  if (d.directive_id() != 0) seen_[d.directive_id()] = Seen{ack, /*final=*/true};
  return ack;
}

std::optional<DirectiveAck> DirectiveIntake::Receive(const Directive& d) {
  if (!d.target_ranks().empty() && std::find(d.target_ranks().begin(), d.target_ranks().end(),
                                             options_.rank) == d.target_ranks().end()) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  if (d.directive_id() != 0) {
    auto it = seen_.find(d.directive_id());
    if (it != seen_.end()) return it->second.last_ack;  // Re-delivery: same answer again.
  }
  if (absl::Status s = CheckWellFormed(d); !s.ok()) {
    return RejectLocked(d, absl::StrCat("malformed: ", s.message()));
  }
  if (d.job() != options_.job) {
    return RejectLocked(d, absl::StrCat("directive.job: '", d.job(), "' is not this shim's job '",
                                        options_.job, "'"));
  }
  if (d.epoch() < epoch_) {
    return RejectLocked(
        d, absl::StrCat("stale epoch: directive epoch ", d.epoch(), " < shim epoch ", epoch_));
  }
  if (iteration_ >= 0 && d.effective_iteration() <= iteration_ && !IsLateExempt(d) &&
      !(options_.agreed && AgreedKind(d))) {
    return RejectLocked(
        d,
        absl::StrCat(common::kLateRejectionPrefix, " effective_iteration ", d.effective_iteration(),
                     " already started (rank is at iteration ", iteration_, ")"));
  }
  pending_.push_back(d);
  pending_count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
  DirectiveAck ack = MakeAck(d, falcon::v1::ACK_STATUS_RECEIVED, "", -1);
  seen_[d.directive_id()] = Seen{ack, /*final=*/false};
  return ack;
}

bool DirectiveIntake::AgreedKind(const Directive& d) {
  return d.target_ranks().empty() && !IsLateExempt(d);
}

std::vector<DirectiveIntake::PendingId> DirectiveIntake::PendingAgreed() const {
  std::vector<PendingId> out;
  absl::MutexLock lock(&mu_);
  for (const Directive& p : pending_) {
    if (AgreedKind(p)) out.push_back({p.directive_id(), p.effective_iteration()});
  }
  std::sort(out.begin(), out.end(),
            [](const PendingId& a, const PendingId& b) { return a.directive_id < b.directive_id; });
  return out;
}

std::vector<DirectiveAck> DirectiveIntake::SupersedePauses(uint64_t resume_id) {
  std::vector<DirectiveAck> acks;
  absl::MutexLock lock(&mu_);
  std::vector<Directive> keep;
  for (Directive& p : pending_) {
    if (p.kind_case() == Directive::kPause && p.directive_id() < resume_id) {
      acks.push_back(
          RejectLocked(p, absl::StrCat("superseded by resume ", resume_id,
                                       ": the pause ended before every rank agreed on it")));
    } else {
      keep.push_back(std::move(p));
    }
  }
  pending_ = std::move(keep);
  pending_count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
  return acks;
}

DirectiveIntake::Due DirectiveIntake::TakeDue(int64_t iteration,
                                              const absl::flat_hash_set<uint64_t>* agreed) {
  Due out;
  absl::MutexLock lock(&mu_);
  if (iteration >= 0) iteration_ = iteration;
  std::vector<Directive> keep;
  for (Directive& p : pending_) {
    if (p.epoch() < epoch_) {
      out.acks.push_back(RejectLocked(
          p, absl::StrCat("stale epoch: directive epoch ", p.epoch(), " < shim epoch ", epoch_)));
    } else if (options_.agreed && AgreedKind(p)) {
      // Applied where the ranks agreed, late or not; else it waits.
      if (agreed != nullptr && agreed->contains(p.directive_id())) {
        out.due.push_back(std::move(p));
      } else if (iteration >= 0 &&
                 p.effective_iteration() + options_.agree_grace_iterations < iteration) {
        out.acks.push_back(RejectLocked(
            p, absl::StrCat("not agreed: some rank did not hold it within ",
                            options_.agree_grace_iterations, " iterations of effective_iteration ",
                            p.effective_iteration(), " (rank reached iteration ", iteration, ")")));
      } else {
        keep.push_back(std::move(p));
      }
    } else if (iteration >= 0 && p.effective_iteration() < iteration && !IsLateExempt(p)) {
      out.acks.push_back(
          RejectLocked(p, absl::StrCat(common::kLateRejectionPrefix, " effective_iteration ",
                                       p.effective_iteration(), " passed (rank reached iteration ",
                                       iteration, ")")));
    } else if (iteration < 0 || p.effective_iteration() <= iteration) {
      out.due.push_back(std::move(p));
    } else {
      keep.push_back(std::move(p));
    }
  }
  pending_ = std::move(keep);
  pending_count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
  std::sort(out.due.begin(), out.due.end(), [](const Directive& a, const Directive& b) {
    if (a.effective_iteration() != b.effective_iteration()) {
      return a.effective_iteration() < b.effective_iteration();
    }
    return a.directive_id() < b.directive_id();
  });
  return out;
}

DirectiveAck DirectiveIntake::Complete(const Directive& d, int64_t iteration,
                                       const absl::Status& result) {
  absl::MutexLock lock(&mu_);
  if (!result.ok()) {
    return RejectLocked(d, absl::StrCat(KindName(d), " not applied: ", result.message()));
  }
  if (d.epoch() > epoch_) epoch_ = d.epoch();
  DirectiveAck ack = MakeAck(d, falcon::v1::ACK_STATUS_APPLIED, "", iteration);
  seen_[d.directive_id()] = Seen{ack, /*final=*/true};
  return ack;
}

DirectiveIntake::Screened DirectiveIntake::ScreenForTrainer(const Directive& d) {
  Screened out;
  const bool target = d.target_ranks().empty() ||
                      std::find(d.target_ranks().begin(), d.target_ranks().end(), options_.rank) !=
                          d.target_ranks().end();
  absl::MutexLock lock(&mu_);
  if (d.directive_id() != 0) {
    auto it = seen_.find(d.directive_id());
    if (it != seen_.end()) {
      if (target && it->second.last_ack.status() != falcon::v1::ACK_STATUS_UNSPECIFIED) {
        out.reply = it->second.last_ack;
      }
      return out;
    }
  }
  std::string reason;
  if (absl::Status s = CheckWellFormed(d); !s.ok()) {
    reason = absl::StrCat("malformed: ", s.message());
  } else if (d.job() != options_.job) {
    reason =
        absl::StrCat("directive.job: '", d.job(), "' is not this shim's job '", options_.job, "'");
  } else if (d.epoch() < epoch_) {
    reason = absl::StrCat("stale epoch: directive epoch ", d.epoch(), " < shim epoch ", epoch_);
  }
  if (!reason.empty()) {
    if (target) out.reply = RejectLocked(d, std::move(reason));
    return out;
  }
  seen_[d.directive_id()] = Seen{};  // Forwarded; no ack yet.
  out.forward = true;
  return out;
}

std::optional<DirectiveAck> DirectiveIntake::TrainerAck(const Directive& d, AckStatus status,
                                                        std::string reason,
                                                        int64_t applied_iteration) {
  absl::MutexLock lock(&mu_);
  Seen& seen = seen_[d.directive_id()];
  if (seen.final) return std::nullopt;
  if (status == falcon::v1::ACK_STATUS_RECEIVED) {
    if (seen.last_ack.status() == falcon::v1::ACK_STATUS_RECEIVED) return std::nullopt;
    seen.last_ack = MakeAck(d, status, "", -1);
    return seen.last_ack;
  }
  const bool applied = status == falcon::v1::ACK_STATUS_APPLIED;
  if (applied && d.epoch() > epoch_) epoch_ = d.epoch();
  seen.last_ack = MakeAck(d, status, std::move(reason), applied ? applied_iteration : -1);
  seen.final = applied || status == falcon::v1::ACK_STATUS_REJECTED;
  return seen.last_ack;
}

std::optional<Directive> DirectiveIntake::TakeResume() {
  absl::MutexLock lock(&mu_);
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->kind_case() == Directive::kResume && it->epoch() >= epoch_) {
      Directive d = std::move(*it);
      pending_.erase(it);
      pending_count_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
      return d;
    }
  }
  return std::nullopt;
}

}  // namespace falcon::trainer_shim
