// Backend-independent correctness checks of every Communicator op, run by every member of a
// communicator at once (same calls in the same order). Buffers are allocated in the
// communicator's memory kind, so the same checks run on Gloo (host) and NCCL (device): the Gloo
// tests fork ranks and call them; collective_op_check runs them under falcon_launch, on GPUs with
// --backend=nccl (tests/gpu/run_collective_gpu.sh).
#ifndef FALCON_COLLECTIVE_TESTING_OP_CONFORMANCE_H_
#define FALCON_COLLECTIVE_TESTING_OP_CONFORMANCE_H_

#include "absl/status/status.h"
#include "collective/communicator.h"

namespace falcon::collective::testing {

// All-reduce (every ReduceOp and DataType, in place and not, counts 1, 7, size+odd, 65539),
// all-gather, reduce-scatter, broadcast from every root, send/recv between every ordered pair,
// barrier, and agreement on the communicator id. `quick` trims dtypes and sizes (for
// sub-communicators). kInternal naming op, dtype, count, rank and index on the first wrong
// element; backend errors are returned as they are.
absl::Status CheckAllOps(Communicator& comm, bool quick = false);

// Splits `world` several ways (parity with reversed keys, half + kNoColor, nested, repeated) and
// checks members, ranks, ids (expected SplitCommId values, equal within a group, different
// across groups) and ops on the new communicators. Also checks that color -2 is rejected.
absl::Status CheckSplits(Communicator& world);

}  // namespace falcon::collective::testing

#endif  // FALCON_COLLECTIVE_TESTING_OP_CONFORMANCE_H_
