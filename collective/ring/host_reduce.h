// Element-wise reduction on host memory: acc[i] = op(acc[i], in[i]). Thread-compatible.
#ifndef FALCON_COLLECTIVE_RING_HOST_REDUCE_H_
#define FALCON_COLLECTIVE_RING_HOST_REDUCE_H_

#include <cstddef>

#include "collective/types.h"

namespace falcon::collective::ring {

// `acc` and `in` hold `count` elements of `dtype`; they may not overlap partially.
void ReduceInto(DataType dtype, ReduceOp op, void* acc, const void* in, size_t count);

}  // namespace falcon::collective::ring

#endif  // FALCON_COLLECTIVE_RING_HOST_REDUCE_H_
