// libnccl-profiler-falcon.so end to end, without a GPU: plugin_driver (a subprocess, so that the
// shim library and this test's FakeAgent each hold their own protobuf descriptors) loads the plugin
// by NCCL_PROFILER_PLUGIN=falcon from LD_LIBRARY_PATH, plays NCCL's calls with synthetic timings
// (see plugin_driver.cc) and sends through libfalcon_shim.so to the FakeAgent here.
#include <climits>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "common/text_file.h"
#include "gtest/gtest.h"
#include "trainer_shim/fake_agent.h"

extern char** environ;

namespace falcon::trainer_shim::nccl_profiler {
namespace {

using falcon::v1::OpRecord;

std::string Abs(const char* env_name) {
  const char* rel = std::getenv(env_name);
  if (rel == nullptr) return "";
  char buf[PATH_MAX];
  return realpath(rel, buf) != nullptr ? std::string(buf) : std::string(rel);
}

struct DriverRun {
  std::vector<OpRecord> records;
  std::map<std::string, std::string> values;  // Driver output: "key value" lines.
  uint64_t Count(const std::string& key) const {
    auto it = values.find(key);
    uint64_t v = 0;
    return it != values.end() && absl::SimpleAtoi(it->second, &v) ? v : ~uint64_t{0};
  }
};

// Runs the driver against a fresh FakeAgent, with `extra_env`, and returns what the agent got
// (waiting for at least `records` records).
DriverRun RunDriver(const std::string& name, const std::vector<std::string>& extra_env,
                    size_t records) {
  DriverRun run;
  const std::string socket = TestSocketPath(name + ".sock");
  absl::StatusOr<std::unique_ptr<FakeAgent>> agent = FakeAgent::Start(socket);
  EXPECT_TRUE(agent.ok()) << agent.status();
  if (!agent.ok()) return run;
  const std::string plugin = Abs("PLUGIN_SO");
  const std::string out = std::string(std::getenv("TEST_TMPDIR")) + "/" + name + ".out";
  common::SpawnOptions options;
  options.argv = {Abs("PLUGIN_DRIVER"), socket};
  options.env.emplace();
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "FALCON_") && !absl::StartsWith(*e, "LD_LIBRARY_PATH=") &&
        !absl::StartsWith(*e, "NCCL_")) {
      options.env->push_back(*e);
    }
  }
  // As a user would: the plugin's directory on the library path, selected by name.
  options.env->push_back("LD_LIBRARY_PATH=" + plugin.substr(0, plugin.rfind('/')));
  options.env->push_back("NCCL_PROFILER_PLUGIN=falcon");
  options.env->insert(options.env->end(), extra_env.begin(), extra_env.end());
  options.stdout_stream = common::Stdio::File(out);
  absl::StatusOr<common::Subprocess> proc = common::Subprocess::Spawn(options);
  EXPECT_TRUE(proc.ok()) << proc.status();
  if (!proc.ok()) return run;
  absl::StatusOr<std::optional<common::ExitStatus>> status = proc->WaitFor(absl::Seconds(60));
  EXPECT_TRUE(status.ok() && status->has_value() && (*status)->success())
      << (status.ok() && status->has_value() ? (*status)->ToString() : "did not end");
  absl::StatusOr<std::string> text = common::ReadTextFile(out);
  EXPECT_TRUE(text.ok()) << text.status();
  if (text.ok()) {
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      std::vector<std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
      if (kv.size() == 2) run.values[kv[0]] = kv[1];
    }
  }
  FakeAgent& a = **agent;
  EXPECT_TRUE(a.WaitFor([&a, records] { return a.records().size() >= records; }));
  run.records = a.records();
  return run;
}

std::vector<OpRecord> Of(const DriverRun& run, falcon::v1::OpKind kind, uint64_t comm) {
  std::vector<OpRecord> out;
  for (const OpRecord& r : run.records) {
    if (r.op_kind() == kind && r.comm_id() == comm) out.push_back(r);
  }
  return out;
}

constexpr uint64_t kMiB = 1 << 20;

TEST(PluginDriverTest, PeerTransfersSingleOutTheSlowPeer) {
  const DriverRun run = RunDriver("default", {}, 4);
  EXPECT_EQ(run.values.at("v4.name"), "falcon");
  EXPECT_EQ(run.values.at("v5.name"), "falcon");
  EXPECT_EQ(run.values.at("v6.name"), "falcon");
  EXPECT_EQ(run.Count("activation_mask"), 0x5eu);  // Coll, P2p, ProxyOp, ProxyStep, KernelCh.

  // Comm A, per AllReduce: sends to comm rank 2 = global 4, receives from comm rank 0 = global 0,
  // each on 2 channels x 4 steps of 1 MiB; wire time 10 us per send step, 200 us per recv step.
  const std::vector<OpRecord> sends = Of(run, falcon::v1::OP_KIND_PEER_SEND, 1001);
  const std::vector<OpRecord> recvs = Of(run, falcon::v1::OP_KIND_PEER_RECV, 1001);
  ASSERT_EQ(sends.size(), 2u);
  ASSERT_EQ(recvs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const OpRecord& s = sends[i];
    const OpRecord& r = recvs[i];
    EXPECT_EQ(s.peer(), 4);
    EXPECT_EQ(r.peer(), 0);
    EXPECT_EQ(s.bytes(), 8 * kMiB);
    EXPECT_EQ(r.bytes(), 8 * kMiB);
    EXPECT_EQ(s.device_duration_ns(), 8 * 10'000);  // busy_ns: the network phases only.
    EXPECT_EQ(r.device_duration_ns(), 8 * 200'000);
    EXPECT_GE(s.host_end_ns() - s.host_start_ns(), s.device_duration_ns());
    // Derived per-peer bandwidth: the slow peer stands out by the ratio of wire times.
    const double send_bw = static_cast<double>(s.bytes()) / s.device_duration_ns();
    const double recv_bw = static_cast<double>(r.bytes()) / r.device_duration_ns();
    EXPECT_NEAR(send_bw / recv_bw, 20.0, 1e-9);
  }
  // Comm B is intra-node (kernel events only): no transfers. Comm C is never bound: refused.
  for (const OpRecord& r : run.records) {
    EXPECT_NE(r.comm_id(), 1002u);
    EXPECT_TRUE(r.op_kind() == falcon::v1::OP_KIND_PEER_SEND ||
                r.op_kind() == falcon::v1::OP_KIND_PEER_RECV)
        << "op records stay the interposer's by default";
  }
  EXPECT_EQ(run.records.size(), 4u);
  EXPECT_EQ(run.Count("plugin.op_timing_plugin"), 0u);
  EXPECT_EQ(run.Count("plugin.contexts_opened"), 3u);
  EXPECT_EQ(run.Count("plugin.contexts_finalized"), 3u);
  EXPECT_EQ(run.Count("plugin.init_failures"), 1u);
  EXPECT_EQ(run.Count("plugin.ops_emitted"), 4u);  // 2 on A, 1 on B, 1 on C.
  EXPECT_EQ(run.Count("plugin.transfers_sent"), 4u);
  EXPECT_EQ(run.Count("plugin.transfers_refused"), 1u);
  EXPECT_EQ(run.Count("shim.records_unbound"), 1u);
  EXPECT_EQ(run.Count("plugin.pxn_proxy_ops"), 2u);
  EXPECT_EQ(run.Count("plugin.orphan_events"), 0u);
  EXPECT_EQ(run.Count("plugin.op_records_sent"), 0u);
  EXPECT_EQ(run.Count("plugin.events_dropped"), 0u);
  EXPECT_EQ(run.Count("plugin.steps_without_network"), 0u);
  EXPECT_EQ(run.Count("plugin.internal_errors"), 0u);
}

TEST(PluginDriverTest, PluginSendsOpRecordsWhenAsked) {
  const DriverRun run = RunDriver("plugin_ops", {"FALCON_NCCL_OP_TIMING=plugin"}, 7);
  EXPECT_EQ(run.Count("plugin.op_timing_plugin"), 1u);
  const std::vector<OpRecord> all_reduce = Of(run, falcon::v1::OP_KIND_ALL_REDUCE, 1001);
  ASSERT_EQ(all_reduce.size(), 2u);
  for (const OpRecord& r : all_reduce) {
    EXPECT_EQ(r.bytes(), 4 * kMiB);
    EXPECT_EQ(r.peer(), -1);
    EXPECT_EQ(r.device_duration_ns(), 2'500'000);  // Latest KernelCh stop - earliest start.
    EXPECT_GT(r.host_end_ns(), r.host_start_ns());
  }
  const std::vector<OpRecord> all_gather = Of(run, falcon::v1::OP_KIND_ALL_GATHER, 1002);
  ASSERT_EQ(all_gather.size(), 1u);
  EXPECT_EQ(all_gather[0].bytes(), 2000u);
  EXPECT_EQ(all_gather[0].device_duration_ns(), 30'000);
  EXPECT_EQ(all_gather[0].host_end_ns() - all_gather[0].host_start_ns(), 45'000);
  EXPECT_EQ(Of(run, falcon::v1::OP_KIND_PEER_SEND, 1001).size(), 2u);
  EXPECT_EQ(run.Count("plugin.op_records_sent"), 3u);
  EXPECT_EQ(run.Count("plugin.op_records_refused"), 1u);  // Comm C's Send: not bound.
  EXPECT_EQ(run.Count("shim.records_unbound"), 2u);
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl_profiler
