// A tiny "trainer" linked against libfake_nccl.so: creates communicators (InitRank, Split,
// InitRankConfig), runs 5 iterations of every wrapped op (a Send/Recv pair inside a group), and
// prints a checksum of every result plus the fake NCCL call log. With argument "pause" it prints
// "ready" after 3 iterations and waits for a line on stdin before going on. With argument
// "session" it starts its own shim session (falcon_shim_init, found in the process as a
// trainer's falcon.init finds it) after making its communicators and before its first op, with
// a layout of its own (DP 2 x PP 2, rank 1 at dp_index 1), as a PyTorch job that creates NCCL
// communicators eagerly does.
//
// Output lines: "result <iteration> <op> <checksum>", "log <fake NCCL log line>", "done".
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "trainer_shim/falcon_shim.h"

extern "C" const char* fake_nccl_log(void);

namespace {

#define CHECK_NCCL(call)                                                    \
  do {                                                                      \
    ncclResult_t r_ = (call);                                               \
    if (r_ != ncclSuccess) {                                                \
      std::fprintf(stderr, "%s failed: %d\n", #call, static_cast<int>(r_)); \
      std::exit(2);                                                         \
    }                                                                       \
  } while (0)

template <typename T>
double Sum(const std::vector<T>& v) {
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += static_cast<double>(v[i]) * static_cast<double>(i + 1);
  return s;
}

template <typename T>
void Print(int it, const char* op, const std::vector<T>& v) {
  std::printf("result %d %s %.3f\n", it, op, Sum(v));
}

void Iteration(int it, ncclComm_t world, ncclComm_t sub, ncclComm_t cfg, int rank, int nranks) {
  cudaStream_t stream = nullptr;
  std::vector<float> f(1024), fout(1024);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.5f * i + it;
  CHECK_NCCL(ncclAllReduce(f.data(), fout.data(), f.size(), ncclFloat32, ncclSum, world, stream));
  Print(it, "all_reduce", fout);

  std::vector<int32_t> g(256), gout(256 * 2);
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<int32_t>(i * 3 + it);
  CHECK_NCCL(ncclAllGather(g.data(), gout.data(), g.size(), ncclInt32, sub, stream));
  Print(it, "all_gather", gout);

  std::vector<float> rs(128 * nranks), rsout(128);
  for (size_t i = 0; i < rs.size(); ++i) rs[i] = 1.0f * i - it;
  CHECK_NCCL(ncclReduceScatter(rs.data(), rsout.data(), 128, ncclFloat32, ncclSum, world, stream));
  Print(it, "reduce_scatter", rsout);

  std::vector<double> b(64), bout(64);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.125 * i * (it + 1);
  CHECK_NCCL(ncclBroadcast(b.data(), bout.data(), b.size(), ncclFloat64, 0, world, stream));
  Print(it, "broadcast", bout);

  std::vector<int64_t> r(32), rout(32);
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int64_t>(i) * 7 - it;
  CHECK_NCCL(ncclReduce(r.data(), rout.data(), r.size(), ncclInt64, ncclSum, 1, cfg, stream));
  Print(it, "reduce", rout);

  std::vector<float> s(100, 1.0f + it), sr(100);
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(s.data(), s.size(), ncclFloat32, (rank + 1) % nranks, world, stream));
  CHECK_NCCL(
      ncclRecv(sr.data(), sr.size(), ncclFloat32, (rank - 1 + nranks) % nranks, world, stream));
  CHECK_NCCL(ncclGroupEnd());
  Print(it, "send_recv", sr);
}

// The trainer's own session, started through the shim library already in the process (the
// interposer's dependency). Exits 4 when the library or its symbols are missing.
void StartSession(int rank, int nranks) {
  using OptionsInit = void (*)(falcon_shim_options*);
  using Init = falcon_shim_status (*)(const char*, uint32_t, uint32_t, const char*,
                                      const falcon_shim_options*);
  auto options_init =
      reinterpret_cast<OptionsInit>(dlsym(RTLD_DEFAULT, "falcon_shim_options_init"));
  auto init = reinterpret_cast<Init>(dlsym(RTLD_DEFAULT, "falcon_shim_init"));
  const char* socket = std::getenv("FALCON_AGENT_SOCKET");
  if (options_init == nullptr || init == nullptr || socket == nullptr) {
    std::fprintf(stderr, "no shim library in the process, or FALCON_AGENT_SOCKET unset\n");
    std::exit(4);
  }
  falcon_shim_options o;
  options_init(&o);
  o.dp_index = 1;
  o.pp_index = 0;
  o.tp_index = 0;
  o.dp_size = 2;
  o.pp_size = 2;
  o.tp_size = 1;
  o.global_micro_batches = 8;
  const char* profiling = std::getenv("FALCON_PROFILING");  // As falcon.init reads it.
  o.profiling = profiling != nullptr && std::strcmp(profiling, "1") == 0 ? 1 : 0;
  const falcon_shim_status status = init("nccljob", rank, nranks, socket, &o);
  std::printf("session %d\n", static_cast<int>(status));
}

}  // namespace

int main(int argc, char** argv) {
  const bool pause = argc > 1 && std::strcmp(argv[1], "pause") == 0;
  const bool session = argc > 1 && std::strcmp(argv[1], "session") == 0;
  const int rank = 1;
  const int nranks = 4;
  ncclUniqueId id, id2;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclGetUniqueId(&id2));
  ncclComm_t world = nullptr, sub = nullptr, cfg = nullptr, none = nullptr;
  CHECK_NCCL(ncclCommInitRank(&world, nranks, id, rank));
  CHECK_NCCL(ncclCommSplit(world, rank % 2, rank, &sub, nullptr));
  CHECK_NCCL(ncclCommSplit(world, NCCL_SPLIT_NOCOLOR, rank, &none, nullptr));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  CHECK_NCCL(ncclCommInitRankConfig(&cfg, 2, id2, 1, &config));
  if (session) StartSession(rank, nranks);
  for (int it = 0; it < 5; ++it) {
    if (pause && it == 3) {
      std::printf("ready\n");
      std::fflush(stdout);
      std::string line;
      if (!std::getline(std::cin, line)) return 3;
    }
    Iteration(it, world, sub, cfg, rank, nranks);
  }
  if (session) {  // The trainer's session is the trainer's to close (its records flushed),
                  // before its communicators go, as falcon's close() before destroy_process_group.
    using Shutdown = falcon_shim_status (*)();
    auto shutdown = reinterpret_cast<Shutdown>(dlsym(RTLD_DEFAULT, "falcon_shim_shutdown"));
    std::printf("shutdown %d\n", shutdown != nullptr ? static_cast<int>(shutdown()) : -1);
  }
  CHECK_NCCL(ncclCommDestroy(cfg));
  CHECK_NCCL(ncclCommDestroy(sub));
  CHECK_NCCL(ncclCommDestroy(world));
  std::string log = fake_nccl_log();
  size_t start = 0;
  while (start < log.size()) {
    size_t end = log.find('\n', start);
    std::printf("log %s\n", log.substr(start, end - start).c_str());
    start = end + 1;
  }
  std::printf("done\n");
  return 0;
}
