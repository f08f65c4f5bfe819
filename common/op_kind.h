// The op-kind vocabulary: falcon.v1.OpKind (proto/falcon/v1/common.proto) is its single source.
// C++ modules (collective, the shim, the trainer) use this alias of the proto enum; the C ABI
// (trainer_shim/falcon_shim.h) repeats the values as integer constants, tied to the proto enum by
// static_asserts in trainer_shim/falcon_shim.cc.
#ifndef FALCON_COMMON_OP_KIND_H_
#define FALCON_COMMON_OP_KIND_H_

#include <string>

#include "proto/falcon/v1/common.pb.h"

namespace falcon::common {

using OpKind = ::falcon::v1::OpKind;

// The lower-case name without the OP_KIND_ prefix ("all_reduce", "unspecified"); "invalid" for a
// value outside the enum.
std::string OpKindName(OpKind kind);

// A peer transfer (PEER_SEND / PEER_RECV): the network part of an enclosing op, per peer, from
// NCCL's profiler plugin; never an op of its own (not communicator busy time).
bool IsPeerTransfer(OpKind kind);
// Whether records of this kind name a peer rank (SEND, RECV and peer transfers); the others carry
// peer -1.
bool HasPeer(OpKind kind);

}  // namespace falcon::common

#endif  // FALCON_COMMON_OP_KIND_H_
