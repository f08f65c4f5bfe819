// The process's one Shim: the single global state object the style allows for the shim, reached
// only from the C entry points (falcon_shim.cc) and the NCCL interposer (nccl/).
//
// A shut-down instance is never freed: another thread may still be inside RecordOp on it, so it
// is retired (kept, stopped) until the process exits. Thread-safe.
#ifndef FALCON_TRAINER_SHIM_SHIM_GLOBAL_H_
#define FALCON_TRAINER_SHIM_SHIM_GLOBAL_H_

#include "absl/status/status.h"
#include "trainer_shim/nccl_comm_bindings.h"
#include "trainer_shim/shim.h"
#include "trainer_shim/shim_options.h"

namespace falcon::trainer_shim {

// kFailedPrecondition when one is running; otherwise Shim::Create's errors.
absl::Status InitGlobalShim(ShimOptions options);
// The running shim, or null. Lock-free.
Shim* GlobalShim();
// Shuts the running shim down and retires it, after calling the shutdown hook (while the shim still
// takes records). kFailedPrecondition when none is running.
absl::Status ShutdownGlobalShim();
// The hook ShutdownGlobalShim calls first (falcon_shim_set_shutdown_hook); fn null removes it.
void SetGlobalShutdownHook(void (*fn)(void*), void* user_data);
// The process's NCCL profiler communicator bindings; they outlive shim restarts (the plugin's
// communicators do).
NcclCommBindings& GlobalNcclCommBindings();

}  // namespace falcon::trainer_shim

#endif  // FALCON_TRAINER_SHIM_SHIM_GLOBAL_H_
