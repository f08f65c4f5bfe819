#include "trainer_shim/nccl/interposer_config.h"

#include <initializer_list>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace falcon::trainer_shim::nccl {
namespace {

bool FirstInt(const std::function<const char*(const char*)>& getenv,
              std::initializer_list<const char*> names, int64_t* out) {
  for (const char* name : names) {
    const char* v = getenv(name);
    int64_t parsed = 0;
    if (v != nullptr && absl::SimpleAtoi(v, &parsed) && parsed >= 0) {
      *out = parsed;
      return true;
    }
  }
  return false;
}

bool Flag(const std::function<const char*(const char*)>& getenv, const char* name, bool dflt) {
  const char* v = getenv(name);
  if (v == nullptr || v[0] == '\0') return dflt;
  if (absl::EqualsIgnoreCase(v, "off")) return false;
  return !(v[0] == '0' || v[0] == 'f' || v[0] == 'F' || v[0] == 'n' || v[0] == 'N');
}

}  // namespace

OpTiming OpTimingFromEnv(const std::function<const char*(const char*)>& getenv) {
  const char* v = getenv("FALCON_NCCL_OP_TIMING");
  return v != nullptr && absl::EqualsIgnoreCase(v, "plugin") ? OpTiming::kPlugin
                                                             : OpTiming::kInterposer;
}

InterposerConfig ConfigFromEnv(const std::function<const char*(const char*)>& getenv) {
  InterposerConfig c;
  if (const char* s = getenv("FALCON_AGENT_SOCKET"); s != nullptr && s[0] != '\0') {
    c.agent_socket = s;
  }
  c.enabled = !c.agent_socket.empty() && !Flag(getenv, "FALCON_NCCL_DISABLE", false);
  if (const char* j = getenv("FALCON_JOB"); j != nullptr && j[0] != '\0') c.job = j;
  FirstInt(getenv, {"FALCON_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"},
           &c.rank);
  FirstInt(getenv,
           {"FALCON_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"},
           &c.world_size);
  if (c.world_size <= 0 || c.rank < 0 || c.rank >= c.world_size) {
    c.rank = -1;  // Inconsistent or partial: learn both from the first communicator.
    c.world_size = -1;
  }
  int64_t v = 0;
  if (FirstInt(getenv,
               {"FALCON_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"},
               &v)) {
    c.local_rank = static_cast<uint32_t>(v);
  }
  if (FirstInt(getenv, {"FALCON_EPOCH"}, &v)) c.epoch = static_cast<uint64_t>(v);
  c.profiling = Flag(getenv, "FALCON_PROFILING", false);
  c.exchange_membership = Flag(getenv, "FALCON_NCCL_MEMBERSHIP", true);
  if (FirstInt(getenv, {"FALCON_NCCL_EVENT_POOL"}, &v) && v <= 65536) {
    c.event_pool = static_cast<uint32_t>(v);
  }
  if (FirstInt(getenv, {"FALCON_SHIM_EXIT_FLUSH_MS"}, &v) && v <= 600000) {
    c.exit_flush_ms = static_cast<uint32_t>(v);
  }
  c.op_timing = OpTimingFromEnv(getenv);
  return c;
}

}  // namespace falcon::trainer_shim::nccl
