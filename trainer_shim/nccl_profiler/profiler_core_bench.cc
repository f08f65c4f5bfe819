// What NCCL's profiler plugin costs NCCL's threads (prints a table; a few seconds): one
// collective as NCCL reports it to the plugin, on `channels` channels of `steps` network steps
// each, half sends and half receives: group, op, ProxyOp, ProxyStep (three state changes each) and
// KernelCh events, then the op's emission (peer transfers and an op record into a counting sink).
// Figures: CPU time per op and per step event, single thread, real clock.
#include <time.h>

#include <cstdio>

#include "common/clock.h"
#include "trainer_shim/nccl_profiler/profiler_core.h"

namespace falcon::trainer_shim::nccl_profiler {
namespace {

class CountingSink : public RecordSink {
 public:
  bool RecordPeerTransfer(const falcon_shim_peer_transfer&) override {
    ++transfers;
    return true;
  }
  bool RecordOp(const falcon_shim_op&) override {
    ++ops;
    return true;
  }
  uint64_t transfers = 0;
  uint64_t ops = 0;
};

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// One op: returns the number of step events.
int OneOp(ProfilerCore& core, int channels, int steps) {
  void* g = core.StartGroup();
  void* op = core.StartColl(g, "AllReduce", 1 << 20, "ncclFloat32");
  ProfilerCore::StopEvent(g);
  ProfilerCore::StopEvent(op);
  void* k = core.StartKernelCh(op, 0, 1000);
  int step_events = 0;
  for (int c = 0; c < channels; ++c) {
    const bool send = c % 2 == 0;
    void* p = core.StartProxyOp(op, 0, c, 1 + c % 3, send);
    for (int s = 0; s < steps; ++s) {
      void* st = core.StartProxyStep(p);
      EventStateArgs a{};
      a.proxyStep.transSize = 128 << 10;
      if (send) {
        ProfilerCore::RecordEventState(st, kProxyStepSendGpuWait, &a);
        ProfilerCore::RecordEventState(st, kProxyStepSendWait, &a);
      } else {
        ProfilerCore::RecordEventState(st, kProxyStepRecvWait, &a);
        ProfilerCore::RecordEventState(st, kProxyStepRecvFlushWait, &a);
      }
      ProfilerCore::StopEvent(st);
      ++step_events;
    }
    ProfilerCore::StopEvent(p);
  }
  ProfilerCore::StopEvent(k);
  return step_events;
}

void Run(int channels, int steps, int ops) {
  common::RealClock clock;
  CountingSink sink;
  CoreCounters counters;
  ProfilerCore::Options o;
  o.handle = 1;
  o.nranks = 8;
  o.rank = 0;
  o.pid = 0;
  o.emit_ops = true;
  ProfilerCore core(o, clock, &sink, &counters);
  for (int i = 0; i < 100; ++i) OneOp(core, channels, steps);  // Warm-up.
  const double t0 = CpuSeconds();
  int step_events = 0;
  for (int i = 0; i < ops; ++i) step_events += OneOp(core, channels, steps);
  core.Flush();
  const double cpu = CpuSeconds() - t0;
  std::printf("%8d %5d %10d %12.2f %14.1f %10llu\n", channels, steps, ops, cpu / ops * 1e6,
              cpu / step_events * 1e9, static_cast<unsigned long long>(sink.transfers));
}

}  // namespace
}  // namespace falcon::trainer_shim::nccl_profiler

int main() {
  std::printf("NCCL profiler plugin core: CPU per op as NCCL reports it (1 thread)\n");
  std::printf("%8s %5s %10s %12s %14s %10s\n", "channels", "steps", "ops", "us/op", "ns/step",
              "transfers");
  falcon::trainer_shim::nccl_profiler::Run(2, 4, 20000);
  falcon::trainer_shim::nccl_profiler::Run(8, 8, 5000);
  falcon::trainer_shim::nccl_profiler::Run(32, 16, 1000);
  return 0;
}
