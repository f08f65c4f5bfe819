#include "trainer_shim/shim_global.h"

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/synchronization/mutex.h"

namespace falcon::trainer_shim {
namespace {

absl::Mutex g_mu(absl::kConstInit);
std::atomic<Shim*> g_shim{nullptr};
// Retired instances; intentionally leaked (see header).
std::vector<Shim*>* g_retired ABSL_GUARDED_BY(g_mu) = nullptr;
void (*g_shutdown_hook)(void*) ABSL_GUARDED_BY(g_mu) = nullptr;
void* g_shutdown_hook_data ABSL_GUARDED_BY(g_mu) = nullptr;

}  // namespace

absl::Status InitGlobalShim(ShimOptions options) {
  absl::MutexLock lock(&g_mu);
  if (g_shim.load(std::memory_order_acquire) != nullptr) {
    return absl::FailedPreconditionError("falcon shim already initialized in this process");
  }
  absl::StatusOr<std::unique_ptr<Shim>> shim = Shim::Create(std::move(options));
  if (!shim.ok()) return shim.status();
  g_shim.store(shim->release(), std::memory_order_release);
  return absl::OkStatus();
}

Shim* GlobalShim() { return g_shim.load(std::memory_order_acquire); }

absl::Status ShutdownGlobalShim() {
  absl::MutexLock lock(&g_mu);
  if (g_shim.load(std::memory_order_acquire) == nullptr) {
    return absl::FailedPreconditionError("falcon shim is not initialized");
  }
  // Records the hook hands over go into the running shim (RecordOp takes no lock here).
  if (g_shutdown_hook != nullptr) g_shutdown_hook(g_shutdown_hook_data);
  Shim* shim = g_shim.exchange(nullptr, std::memory_order_acq_rel);
  shim->Shutdown();
  if (g_retired == nullptr) g_retired = new std::vector<Shim*>();
  g_retired->push_back(shim);
  return absl::OkStatus();
}

void SetGlobalShutdownHook(void (*fn)(void*), void* user_data) {
  absl::MutexLock lock(&g_mu);
  g_shutdown_hook = fn;
  g_shutdown_hook_data = fn != nullptr ? user_data : nullptr;
}

NcclCommBindings& GlobalNcclCommBindings() {
  static NcclCommBindings* bindings = new NcclCommBindings();  // Never destroyed (see header).
  return *bindings;
}

}  // namespace falcon::trainer_shim
