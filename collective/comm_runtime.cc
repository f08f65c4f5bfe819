#include "collective/comm_runtime.h"

namespace falcon::collective {

CommRuntime::CommRuntime(CommRuntimeOptions options) : rank_(options.rank) {
  if (options.clock == nullptr) {
    owned_clock_ = std::make_unique<common::RealClock>();
    clock_ = owned_clock_.get();
  } else {
    clock_ = options.clock;
  }
  std::vector<fault::LinkFault> mine;
  for (const fault::LinkFault& f : options.link_faults) {
    if (f.src == rank_) mine.push_back(f);
  }
  if (!mine.empty()) {
    fault::Sleeper* sleeper = options.link_sleeper;
    if (sleeper == nullptr) {
      owned_sleeper_ = std::make_unique<fault::SleepingSleeper>();
      sleeper = owned_sleeper_.get();
    }
    link_shaper_ = std::make_unique<fault::LinkShaper>(std::move(mine), sleeper);
  }
}

}  // namespace falcon::collective
