#include "chaos/schedule.h"

#include <algorithm>
#include <utility>

namespace falcon::chaos {

Schedule::Schedule(std::vector<FaultSpec> specs, absl::Time start) : start_(start) {
  for (FaultSpec& s : specs) entries_.push_back({std::move(s), std::nullopt, false});
}

absl::Status Schedule::Step(Driver& driver, absl::Time now) {
  const absl::Duration elapsed = now - start_;
  for (Entry& e : entries_) {
    if (e.id.has_value() && !e.removed && e.spec.until.has_value() && elapsed >= *e.spec.until) {
      e.removed = true;
      if (absl::Status s = driver.Remove(*e.id); !s.ok()) return s;
    }
  }
  for (Entry& e : entries_) {
    if (e.id.has_value() || elapsed < e.spec.from) continue;
    absl::StatusOr<int> id = driver.Apply(e.spec);
    if (!id.ok()) return id.status();
    e.id = *id;
    if (e.spec.until.has_value() && elapsed >= *e.spec.until) {
      // Started late (a long step before): it still ran, for the shortest time possible.
      e.removed = true;
      if (absl::Status s = driver.Remove(*e.id); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

std::optional<absl::Time> Schedule::Next() const {
  std::optional<absl::Time> next;
  auto consider = [&](absl::Duration at) {
    const absl::Time t = start_ + at;
    if (!next.has_value() || t < *next) next = t;
  };
  for (const Entry& e : entries_) {
    if (!e.id.has_value()) {
      consider(e.spec.from);
    } else if (!e.removed && e.spec.until.has_value()) {
      consider(*e.spec.until);
    }
  }
  return next;
}

bool Schedule::Done() const {
  return std::all_of(entries_.begin(), entries_.end(),
                     [](const Entry& e) { return e.id.has_value() && e.removed; });
}

}  // namespace falcon::chaos
