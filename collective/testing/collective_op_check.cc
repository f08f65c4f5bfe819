// Runs the backend-independent op checks (op_conformance.h) on the world communicator of a rank
// started by falcon_launch, on the backend FALCON_BACKEND names (gloo by default, nccl on GPUs):
//   falcon_launch --nproc 4 --nodes 2 [--backend nccl] -- collective_op_check [--quick] [--profile]
// --profile turns device timing on and checks that NCCL ops report device durations (Gloo ops
// never do). --die_rank=R: after connecting, rank R exits 0 at once (a silent death the
// launcher does not count as a failure) and every other rank checks that its next all-reduce
// fails with kUnavailable or kDeadlineExceeded instead of hanging. Exits 0 when every check
// passed on this rank, 1 otherwise.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collective/buffer.h"
#include "collective/testing/op_conformance.h"
#include "collective/testing/recording_observer.h"
#include "collective/world.h"

namespace falcon::collective::testing {
namespace {

int Run(bool quick, bool profile, int die_rank) {
  auto env = launch::RankEnvFromEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "collective_op_check: %s\n", env.status().ToString().c_str());
    return 1;
  }
  auto runtime = MakeRuntime(*env);
  if (!runtime.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env->rank, runtime.status().ToString().c_str());
    return 1;
  }
  RecordingObserver observer;
  (*runtime)->SetObserver(&observer);
  (*runtime)->SetProfiling(profile);
  auto options = WorldOptionsFrom(*env);
  if (!options.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env->rank, options.status().ToString().c_str());
    return 1;
  }
  auto world = CreateWorld(*options, *runtime);
  if (!world.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", env->rank, world.status().ToString().c_str());
    return 1;
  }
  if (die_rank >= 0) {
    absl::Status s = (*world)->Barrier();
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: barrier: %s\n", env->rank, s.ToString().c_str());
      return 1;
    }
    if (env->rank == die_rank) _exit(0);
    auto buf = OwnedBuffer::Allocate((*world)->memory_kind(), DataType::kFloat32, 1024);
    if (!buf.ok()) return 1;
    s = (*world)->AllReduce(buf->view(), buf->view(), ReduceOp::kSum);
    if (s.code() != absl::StatusCode::kUnavailable &&
        s.code() != absl::StatusCode::kDeadlineExceeded) {
      std::fprintf(stderr, "rank %d: all-reduce with a dead member gave %s\n", env->rank,
                   s.ToString().c_str());
      return 1;
    }
    std::printf("rank %d: dead peer detected: %s\n", env->rank, s.ToString().c_str());
    std::fflush(stdout);
    return 0;
  }
  absl::Status s = CheckAllOps(**world, quick);
  if (s.ok()) s = CheckSplits(**world);
  if (s.ok()) {
    const bool device = (*world)->memory_kind() == MemoryKind::kDevice;
    int timed = 0;
    for (const OpEvent& e : observer.events()) {
      if (e.device_duration_ns < 0 || (!device && e.device_duration_ns != 0)) {
        s = absl::InternalError("bad device duration");
      }
      if (e.device_duration_ns > 0) ++timed;
    }
    // Tiny ops on one rank may take no measurable GPU time; bigger ones must.
    if (s.ok() && profile && device && timed == 0) {
      s = absl::InternalError("profiling on but no NCCL op reported a device duration");
    }
  }
  (*runtime)->SetObserver(nullptr);
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d (%s): FAILED: %s\n", env->rank, env->backend.c_str(),
                 s.ToString().c_str());
    return 1;
  }
  std::printf("rank %d/%d (%s, %s): all ops and splits OK, %zu ops observed\n", env->rank,
              env->world_size, env->node.c_str(), env->backend.c_str(), observer.events().size());
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace falcon::collective::testing

int main(int argc, char** argv) {
  bool quick = false;
  bool profile = false;
  int die_rank = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--profile") == 0) {
      profile = true;
    } else if (std::strncmp(argv[i], "--die_rank=", 11) == 0) {
      die_rank = std::atoi(argv[i] + 11);
    } else {
      std::fprintf(stderr, "usage: collective_op_check [--quick] [--profile] [--die_rank=R]\n");
      return 2;
    }
  }
  return falcon::collective::testing::Run(quick, profile, die_rank);
}
