#include "trainer/directives/directive_queue.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/layer_split.h"
#include "trainer/directives/micro_batch_plan.h"

namespace falcon::trainer::directives {

absl::StatusOr<analysis::plan::Layout> LayoutFromTopologyChange(
    const falcon::v1::TopologyChange& change, int world) {
  if (change.assignments_size() != world) {
    return absl::InvalidArgumentError(absl::StrCat("topology_change.assignments has ",
                                                   change.assignments_size(),
                                                   " entries; the world has ", world, " ranks"));
  }
  std::vector<analysis::plan::RankPlacement> ranks;
  std::vector<bool> seen(world, false);
  for (int i = 0; i < change.assignments_size(); ++i) {
    const falcon::v1::RankAssignment& a = change.assignments(i);
    const std::string field = absl::StrCat("topology_change.assignments[", i, "]");
    if (a.rank() >= static_cast<uint32_t>(world)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".rank = ", a.rank(), " is outside the world of ", world));
    }
    if (seen[a.rank()]) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".rank = ", a.rank(), " is assigned twice"));
    }
    if (a.tp_index() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".tp_index = ", a.tp_index(),
                       ": the reference trainer has no tensor parallelism"));
    }
    if (a.dp_index() >= static_cast<uint32_t>(world) ||
        a.pp_index() >= static_cast<uint32_t>(world)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " (dp ", a.dp_index(), ", pp ", a.pp_index(), ") is out of range"));
    }
    for (int j = 0; j < i; ++j) {
      const falcon::v1::RankAssignment& b = change.assignments(j);
      if (b.dp_index() == a.dp_index() && b.pp_index() == a.pp_index()) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology_change: ranks ", b.rank(), " and ", a.rank(),
                         " share position (dp=", a.dp_index(), ", pp=", a.pp_index(), ")"));
      }
    }
    seen[a.rank()] = true;
    ranks.push_back(analysis::plan::RankPlacement{static_cast<int32_t>(a.rank()), "",
                                                  static_cast<int32_t>(a.dp_index()),
                                                  static_cast<int32_t>(a.pp_index()), 0});
  }
  absl::StatusOr<analysis::plan::Layout> layout = analysis::plan::Layout::Create(std::move(ranks));
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("topology_change: ", layout.status().message()));
  }
  return layout;
}

bool IsTrainerDirective(const falcon::v1::Directive& d) {
  return d.kind_case() != falcon::v1::Directive::kProfiling &&
         d.kind_case() != falcon::v1::Directive::KIND_NOT_SET;
}

bool IsTarget(const falcon::v1::Directive& d, int rank) {
  return d.target_ranks().empty() ||
         std::find(d.target_ranks().begin(), d.target_ranks().end(), static_cast<uint32_t>(rank)) !=
             d.target_ranks().end();
}

absl::Status CheckDirective(const falcon::v1::Directive& d, const PlanState& s) {
  const analysis::plan::Layout& layout = *s.layout;
  if (d.directive_id() == 0) return absl::InvalidArgumentError("directive_id must be > 0");
  if (d.effective_iteration() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("effective_iteration = ", d.effective_iteration(), " must be >= 0"));
  }
  switch (d.kind_case()) {
    case falcon::v1::Directive::kMicroBatchPlan: {
      const auto& m = d.micro_batch_plan().micro_batches();
      return ValidateMicroBatchPlan(std::vector<int>(m.begin(), m.end()), layout.dp_size(),
                                    layout.pp_size(), s.total_micro_batches);
    }
    case falcon::v1::Directive::kLayerSplit:
      return common::ValidateLayerSplit(d.layer_split(), layout.dp_size(), layout.pp_size(),
                                        s.num_blocks, s.total_micro_batches);
    case falcon::v1::Directive::kTopologyChange: {
      absl::StatusOr<analysis::plan::Layout> next =
          LayoutFromTopologyChange(d.topology_change(), layout.world_size());
      if (!next.ok()) return next.status();
      if (s.total_micro_batches % next->pp_size() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("topology_change: PP = ", next->pp_size(), " does not divide the ",
                         s.total_micro_batches, " micro-batches of the global batch"));
      }
      if (next->pp_size() > s.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("topology_change: PP = ", next->pp_size(),
                                                       " exceeds the ", s.num_blocks,
                                                       " blocks of the model"));
      }
      return absl::OkStatus();
    }
    case falcon::v1::Directive::kCheckpointRestart: {
      const auto& c = d.checkpoint_restart();
      if (c.checkpoint_dir().empty()) {
        return absl::InvalidArgumentError("checkpoint_restart.checkpoint_dir must not be empty");
      }
      std::set<uint32_t> excluded;
      for (int i = 0; i < c.excluded_ranks_size(); ++i) {
        const uint32_t r = c.excluded_ranks(i);
        if (r >= static_cast<uint32_t>(layout.world_size()) || !excluded.insert(r).second) {
          return absl::InvalidArgumentError(
              absl::StrCat("checkpoint_restart.excluded_ranks[", i, "] = ", r,
                           " is a duplicate or outside the world of ", layout.world_size()));
        }
      }
      if (layout.world_size() - static_cast<int>(excluded.size()) < layout.pp_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "checkpoint_restart excludes ", excluded.size(), " of ", layout.world_size(),
            " ranks, leaving fewer than the ", layout.pp_size(), " a pipeline needs"));
      }
      return absl::OkStatus();
    }
    case falcon::v1::Directive::kPause: {
      const int64_t ns = d.pause().max_duration_ns();
      if (ns <= 0 || ns > int64_t{600} * 1000000000) {
        return absl::InvalidArgumentError(
            absl::StrCat("pause.max_duration_ns = ", ns, " is outside (0, 600e9]"));
      }
      return absl::OkStatus();
    }
    case falcon::v1::Directive::kResume:
      if (!s.paused) return absl::FailedPreconditionError("resume: the trainer is not paused");
      return absl::OkStatus();
    case falcon::v1::Directive::kProfiling:
    case falcon::v1::Directive::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("directive has no kind the trainer applies");
}

std::vector<falcon::v1::Directive> DirectiveQueue::Add(
    const std::vector<falcon::v1::Directive>& agreed) {
  std::vector<falcon::v1::Directive> added;
  for (const falcon::v1::Directive& d : agreed) {
    if (!IsTrainerDirective(d) || Known(d.directive_id())) continue;
    pending_.emplace(d.directive_id(), d);
    added.push_back(d);
  }
  return added;
}

std::vector<falcon::v1::Directive> DirectiveQueue::PopDue(int64_t iteration) {
  std::vector<falcon::v1::Directive> due;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.effective_iteration() <= iteration) {
      due.push_back(std::move(it->second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return due;
}

void DirectiveQueue::Record(uint64_t id, DirectiveOutcome outcome) {
  done_[id] = std::move(outcome);
}

const DirectiveOutcome* DirectiveQueue::OutcomeOf(uint64_t id) const {
  auto it = done_.find(id);
  return it == done_.end() ? nullptr : &it->second;
}

}  // namespace falcon::trainer::directives
