#include "collective/fault/rank_faults.h"

namespace falcon::collective::fault {
namespace {

std::unique_ptr<Sleeper> MakeSleeper(bool burn) {
  if (burn) return std::make_unique<BurningSleeper>();
  return std::make_unique<SleepingSleeper>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankFaults>> RankFaults::Create(absl::string_view spec, int rank,
                                                               bool burn,
                                                               ContentionOptions contention) {
  auto plan = LoadFaultSpec(spec);
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<RankFaults>(
      new RankFaults(std::move(*plan), rank, burn, std::move(contention)));
}

RankFaults::RankFaults(FaultPlan plan, int rank, bool burn, ContentionOptions contention)
    : plan_(std::move(plan)),
      sleeper_(MakeSleeper(burn)),
      compute_(plan_.compute, rank, sleeper_.get()),
      contention_(plan_.contention, rank, std::move(contention)) {}

}  // namespace falcon::collective::fault
