#include "collective/launch/rank_env.h"

#include <arpa/inet.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace falcon::collective::launch {
namespace {

absl::Status ReadInt(const std::function<const char*(const char*)>& lookup, const char* name,
                     bool required, int min, int* out) {
  const char* v = lookup(name);
  if (v == nullptr) {
    if (required) return absl::InvalidArgumentError(absl::StrCat(name, " is not set"));
    return absl::OkStatus();
  }
  int x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < min) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", v, "': want an integer >= ", min));
  }
  *out = x;
  return absl::OkStatus();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RankEnv::ToVariables() const {
  std::vector<std::pair<std::string, std::string>> v = {
      {"FALCON_RANK", absl::StrCat(rank)},
      {"FALCON_WORLD_SIZE", absl::StrCat(world_size)},
      {"FALCON_LOCAL_RANK", absl::StrCat(local_rank)},
      {"FALCON_LOCAL_WORLD_SIZE", absl::StrCat(local_world_size)},
      {"FALCON_NODE", node},
      {"FALCON_NODE_INDEX", absl::StrCat(node_index)},
      {"FALCON_NNODES", absl::StrCat(num_nodes)},
      {"FALCON_RENDEZVOUS", rendezvous_dir},
      {"FALCON_DP", absl::StrCat(dp)},
      {"FALCON_PP", absl::StrCat(pp)},
      {"FALCON_TP", absl::StrCat(tp)},
      {"FALCON_BACKEND", backend},
      {"FALCON_COMM_TIMEOUT_MS", absl::StrCat(absl::ToInt64Milliseconds(comm_timeout))},
  };
  if (!faults.empty()) v.emplace_back("FALCON_FAULTS", faults);
  if (host_address != "127.0.0.1") v.emplace_back("FALCON_HOST_ADDRESS", host_address);
  return v;
}

absl::StatusOr<RankEnv> ParseRankEnv(const std::function<const char*(const char*)>& lookup) {
  if (lookup("FALCON_RANK") == nullptr) {
    return absl::FailedPreconditionError(
        "FALCON_RANK is not set: start ranks with falcon_launch (or set the FALCON_* variables)");
  }
  RankEnv e;
  if (auto s = ReadInt(lookup, "FALCON_RANK", true, 0, &e.rank); !s.ok()) return s;
  if (auto s = ReadInt(lookup, "FALCON_WORLD_SIZE", true, 1, &e.world_size); !s.ok()) return s;
  if (e.rank >= e.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("FALCON_RANK=", e.rank, " is not below FALCON_WORLD_SIZE=", e.world_size));
  }
  e.local_rank = e.rank;
  e.local_world_size = e.world_size;
  if (auto s = ReadInt(lookup, "FALCON_LOCAL_RANK", false, 0, &e.local_rank); !s.ok()) return s;
  if (auto s = ReadInt(lookup, "FALCON_LOCAL_WORLD_SIZE", false, 1, &e.local_world_size); !s.ok()) {
    return s;
  }
  if (auto s = ReadInt(lookup, "FALCON_NODE_INDEX", false, 0, &e.node_index); !s.ok()) return s;
  if (auto s = ReadInt(lookup, "FALCON_NNODES", false, 1, &e.num_nodes); !s.ok()) return s;
  if (const char* node = lookup("FALCON_NODE"); node != nullptr) e.node = node;
  const char* dir = lookup("FALCON_RENDEZVOUS");
  if (dir == nullptr || *dir == '\0') {
    return absl::InvalidArgumentError("FALCON_RENDEZVOUS is not set");
  }
  e.rendezvous_dir = dir;
  e.dp = e.world_size;
  if (auto s = ReadInt(lookup, "FALCON_DP", false, 1, &e.dp); !s.ok()) return s;
  if (auto s = ReadInt(lookup, "FALCON_PP", false, 1, &e.pp); !s.ok()) return s;
  if (auto s = ReadInt(lookup, "FALCON_TP", false, 1, &e.tp); !s.ok()) return s;
  if (int64_t{e.dp} * e.pp * e.tp != int64_t{e.world_size}) {
    return absl::InvalidArgumentError(
        absl::StrCat("FALCON_DP x FALCON_PP x FALCON_TP = ", e.dp, " x ", e.pp, " x ", e.tp,
                     " differs from FALCON_WORLD_SIZE=", e.world_size));
  }
  if (const char* f = lookup("FALCON_FAULTS"); f != nullptr) e.faults = f;
  if (const char* b = lookup("FALCON_BACKEND"); b != nullptr && *b != '\0') e.backend = b;
  if (e.backend != "gloo" && e.backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("FALCON_BACKEND='", e.backend, "': want gloo or nccl"));
  }
  int timeout_ms = 0;
  if (auto s = ReadInt(lookup, "FALCON_COMM_TIMEOUT_MS", false, 1, &timeout_ms); !s.ok()) return s;
  if (timeout_ms > 0) e.comm_timeout = absl::Milliseconds(timeout_ms);
  if (const char* a = lookup("FALCON_HOST_ADDRESS"); a != nullptr && *a != '\0') {
    in_addr addr;
    if (inet_pton(AF_INET, a, &addr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("FALCON_HOST_ADDRESS='", a, "': not an IPv4 address"));
    }
    e.host_address = a;
  }
  return e;
}

absl::StatusOr<RankEnv> RankEnvFromEnvironment() {
  return ParseRankEnv([](const char* name) { return std::getenv(name); });
}

}  // namespace falcon::collective::launch
