// Send-side shaping of slow links (fault kind "link", fault_spec.h): the transport calls Apply()
// right before it hands a message to the wire, the way a network plugin adding sleeps would, so a
// slow (src, dst) link delays exactly the messages that cross it, collective steps included.
//
// Model per message of B bytes on a link with active faults: wait sum(delay) + B * 8 / (min
// bandwidth cap in bit/s). Loopback transfer time is negligible next to the cap, so the cap is
// modelled as serialization time added before the send.
//
// Thread-safe (immutable after construction).
#ifndef FALCON_COLLECTIVE_FAULT_LINK_SHAPER_H_
#define FALCON_COLLECTIVE_FAULT_LINK_SHAPER_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "collective/fault/fault_spec.h"
#include "collective/fault/sleeper.h"

namespace falcon::collective::fault {

class LinkShaper {
 public:
  // `sleeper` must outlive the shaper.
  LinkShaper(std::vector<LinkFault> faults, Sleeper* sleeper);

  bool empty() const { return faults_.empty(); }
  // True when some fault (in any window) has `src` as its sender: a cheap pre-check.
  bool HasLinksFrom(int src) const;
  // Extra time for a `bytes` message from global rank `src` to `dst` at `iteration` (< 0 counts
  // as 0). Zero when no fault is active on that link.
  absl::Duration DelayFor(int src, int dst, uint64_t bytes, int64_t iteration) const;
  // Spends DelayFor(...) through the sleeper and returns it.
  absl::Duration Apply(int src, int dst, uint64_t bytes, int64_t iteration) const;
  // Spends `steps` x DelayFor(src, dst, bytes_per_step, iteration) at once and returns it: the
  // cost of `steps` messages over the link, for transports that cannot shape each message.
  absl::Duration ApplySteps(int src, int dst, uint64_t bytes_per_step, int steps,
                            int64_t iteration) const;

 private:
  std::vector<LinkFault> faults_;
  Sleeper* sleeper_;
};

}  // namespace falcon::collective::fault

#endif  // FALCON_COLLECTIVE_FAULT_LINK_SHAPER_H_
