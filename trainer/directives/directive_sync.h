// Agreement at iteration boundaries: every rank contributes what its hooks delivered (directives,
// validation tasks), its share of the loss of the iteration just finished and a pause-expired
// flag; every rank gets back the same union. This is what makes every rank apply a directive at
// the same iteration even when the shims deliver it to different ranks at slightly different
// times (a directive any rank has by the boundary is applied by all).
//
// Wire: one AllGather of 3 int64 per rank {payload bytes, loss bits, flags} on the world
// communicator, and only when some payload is non-empty a second AllGather of max-payload bytes.
// Payload: items of {1 byte tag 'D' | 'T', 4 byte little-endian length, serialized proto}.
//
// Pure functions plus AgreeAtBoundary (one collective); thread-compatible.
#ifndef FALCON_TRAINER_DIRECTIVES_DIRECTIVE_SYNC_H_
#define FALCON_TRAINER_DIRECTIVES_DIRECTIVE_SYNC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collective/communicator.h"
#include "proto/falcon/v1/common.pb.h"

namespace falcon::trainer::directives {

// One rank's contribution.
struct BoundaryMessage {
  std::vector<falcon::v1::Directive> directives;
  std::vector<falcon::v1::ValidationTask> tasks;
  double loss_sum = 0;         // Summed cross-entropy of this rank's micro-batches (last stage).
  bool pause_expired = false;  // This rank's pause deadline has passed.
};

// What every rank agrees on.
struct AgreedBoundary {
  // Union by directive_id, ascending (the first copy in rank order wins).
  std::vector<falcon::v1::Directive> directives;
  // Union by task_id, ascending.
  std::vector<falcon::v1::ValidationTask> tasks;
  double loss_sum = 0;         // Sum over ranks, in rank order (bitwise identical everywhere).
  bool pause_expired = false;  // Any rank's.
};

std::string EncodePayload(const BoundaryMessage& message);
// kDataLoss when the payload is truncated or a proto does not parse.
absl::Status DecodePayload(absl::string_view payload, BoundaryMessage* message);
// Union of the ranks' messages (index = rank).
AgreedBoundary MergeBoundary(const std::vector<BoundaryMessage>& messages);

// Runs the agreement on `world` (every rank calls it at the same boundary). Communicator errors
// pass through; kDataLoss for a malformed payload from a peer.
absl::StatusOr<AgreedBoundary> AgreeAtBoundary(collective::Communicator& world,
                                               const BoundaryMessage& mine);

}  // namespace falcon::trainer::directives

#endif  // FALCON_TRAINER_DIRECTIVES_DIRECTIVE_SYNC_H_
