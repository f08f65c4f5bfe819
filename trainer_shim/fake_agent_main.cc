// fake_agent_main: serves FakeAgent on a unix socket until SIGINT/SIGTERM (or --duration_s), then
// prints a JSON summary of what the shims sent (for tests/gpu/run_shim_gpu.sh and manual runs).
//
//   fake_agent_main --socket=/tmp/agent.sock [--duration_s=0] [--profiling]
#include <csignal>
#include <cstdio>
#include <map>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "trainer_shim/fake_agent.h"

ABSL_FLAG(std::string, socket, "", "Unix socket path to serve falcon.v1.Shim on.");
ABSL_FLAG(int, duration_s, 0, "Stop after this many seconds; 0 = until SIGINT/SIGTERM.");
ABSL_FLAG(bool, profiling, false, "Ask shims for device-event profiling in ShimWelcome.");

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string socket = absl::GetFlag(FLAGS_socket);
  if (socket.empty()) {
    std::fprintf(stderr, "--socket is required\n");
    return 2;
  }
  falcon::trainer_shim::FakeAgent::Options options;
  options.profiling = absl::GetFlag(FLAGS_profiling);
  auto agent = falcon::trainer_shim::FakeAgent::Start(socket, options);
  if (!agent.ok()) {
    std::fprintf(stderr, "%s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::fprintf(stderr, "fake agent listening on unix:%s\n", socket.c_str());
  const absl::Time end = absl::GetFlag(FLAGS_duration_s) > 0
                             ? absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_duration_s))
                             : absl::InfiniteFuture();
  while (!g_stop && absl::Now() < end) absl::SleepFor(absl::Milliseconds(50));
  (*agent)->Stop();

  nlohmann::json out;
  out["hellos"] = (*agent)->hellos().size();
  nlohmann::json layouts = nlohmann::json::array();
  for (const auto& h : (*agent)->hellos()) {
    layouts.push_back({{"job", h.job()},
                       {"rank", h.rank().rank()},
                       {"gpu", h.rank().gpu()},
                       {"dp_size", h.dp_size()},
                       {"pp_size", h.pp_size()},
                       {"global_micro_batches", h.global_micro_batches()}});
  }
  out["hello_layouts"] = layouts;
  nlohmann::json comms = nlohmann::json::array();
  for (const auto& c : (*agent)->communicators()) {
    comms.push_back(
        {{"comm_id", c.comm_id()},
         {"kind", c.kind()},
         {"members", std::vector<uint32_t>(c.member_ranks().begin(), c.member_ranks().end())}});
  }
  out["communicators"] = comms;
  std::map<std::string, int> by_kind;
  std::map<std::string, int> by_comm;  // Decimal comm id -> records (JSON keys are strings).
  int64_t with_device_time = 0;
  const auto records = (*agent)->acked_records();
  for (const auto& r : records) {
    ++by_kind[falcon::v1::OpKind_Name(r.op_kind())];
    ++by_comm[std::to_string(r.comm_id())];
    if (r.device_duration_ns() > 0) ++with_device_time;
  }
  out["records"] = records.size();
  out["records_by_kind"] = by_kind;
  out["records_by_comm"] = by_comm;
  out["records_with_device_time"] = with_device_time;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
