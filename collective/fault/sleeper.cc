#include "collective/fault/sleeper.h"

#include <chrono>

#include "absl/time/clock.h"

namespace falcon::collective::fault {

void SleepingSleeper::Spend(absl::Duration d) {
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

void BurningSleeper::Spend(absl::Duration d) {
  if (d <= absl::ZeroDuration()) return;
  const auto end = std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(d);
  volatile uint64_t sink = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (int i = 0; i < 256; ++i) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

}  // namespace falcon::collective::fault
