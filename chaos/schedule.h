// The timing of falcon_chaos: applies each fault when its `from` has come and removes it when its
// `until` has passed (both relative to the driver's start, fault_spec.h). The caller sleeps until
// Next() (or a stop signal) and calls Step again.
#ifndef FALCON_CHAOS_SCHEDULE_H_
#define FALCON_CHAOS_SCHEDULE_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chaos/driver.h"
#include "chaos/fault_spec.h"

namespace falcon::chaos {

class Schedule {
 public:
  Schedule(std::vector<FaultSpec> specs, absl::Time start);

  // Applies what is due at `now` (in spec order, removals first) through `driver`. The first
  // failure stops the step and is returned (the caller removes everything and gives up): a
  // schedule that cannot be run as written is not run at all.
  absl::Status Step(Driver& driver, absl::Time now);
  // When the next Step has something to do; nullopt when nothing is left but faults without an
  // `until`, which stay until the driver stops.
  std::optional<absl::Time> Next() const;
  // Every fault applied and removed.
  bool Done() const;

 private:
  struct Entry {
    FaultSpec spec;
    std::optional<int> id;  // Set once applied.
    bool removed = false;
  };
  std::vector<Entry> entries_;
  absl::Time start_;
};

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_SCHEDULE_H_
