// The Gloo backend: communicators over TCP (one Gloo context per communicator, full mesh, all on
// one shared TCP device), bootstrapped through a RendezvousStore directory. Host memory only.
// Every collective is a ring/tree of point-to-point messages (ring/ring_collectives.h) on a
// GlooTransport, so injected link faults act on exactly the steps that cross the slow link.
//
// Errors as Communicator; creation fails with kDeadlineExceeded when a member does not arrive
// within the timeout and kUnavailable when connections fail. Thread-safety as Communicator.
#ifndef FALCON_COLLECTIVE_GLOO_GLOO_COMMUNICATOR_H_
#define FALCON_COLLECTIVE_GLOO_GLOO_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collective/comm_runtime.h"
#include "collective/communicator.h"

namespace falcon::collective::gloo {

struct GlooWorldOptions {
  int rank = -1;                       // Global rank, [0, world_size).
  int world_size = 0;                  // > 0.
  std::string rendezvous_dir;          // Shared store directory (FALCON_RENDEZVOUS); non-empty.
  std::string hostname = "127.0.0.1";  // Address the rank listens on.
  // Rendezvous wait and per-op progress timeout: a hung peer fails an op after this long.
  absl::Duration timeout = absl::Seconds(60);
  uint64_t world_comm_id = 0;  // 0: WorldCommId(world_size).
};

// Connects this rank to the world communicator (blocks until every rank arrived or timeout).
// kInvalidArgument for bad options (naming the field).
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooWorld(const GlooWorldOptions& options,
                                                              std::shared_ptr<CommRuntime> runtime);

}  // namespace falcon::collective::gloo

#endif  // FALCON_COLLECTIVE_GLOO_GLOO_COMMUNICATOR_H_
