// A real single-process NCCL program (one rank, one GPU) for tests/gpu/run_shim_gpu.sh: creates
// communicators with ncclCommInitRank, ncclCommSplit and ncclCommInitRankConfig, then runs
// iterations of every op libfalcon_nccl.so wraps (Send/Recv to itself inside a group), checks the
// results on the host, and prints them with the mean iteration time.
//
//   nccl_real_app [iterations=50] [elements=1048576]
// Output: "result <op> <checksum>" lines, "ops_issued <n>", "ops_self_p2p <n>" (of them, the
// sends and receives to itself, which the shim refuses to record: no link), "iteration_us
// <mean>", "done".
// Exit 1 on a wrong result, 2 on a CUDA/NCCL error.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(call)                                               \
  do {                                                                 \
    cudaError_t e_ = (call);                                           \
    if (e_ != cudaSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                    \
    }                                                                  \
  } while (0)
#define CHECK_NCCL(call)                                               \
  do {                                                                 \
    ncclResult_t r_ = (call);                                          \
    if (r_ != ncclSuccess) {                                           \
      std::fprintf(stderr, "%s: %s\n", #call, ncclGetErrorString(r_)); \
      std::exit(2);                                                    \
    }                                                                  \
  } while (0)

namespace {

double Checksum(const float* device, size_t n) {
  std::vector<float> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
  double s = 0;
  for (size_t i = 0; i < n; i += 97) s += host[i] * static_cast<double>(i % 13 + 1);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  const size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (size_t{1} << 20);
  CHECK_CUDA(cudaSetDevice(0));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  ncclUniqueId id, id2;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclGetUniqueId(&id2));
  ncclComm_t world, sub, cfg;
  CHECK_NCCL(ncclCommInitRank(&world, 1, id, 0));
  CHECK_NCCL(ncclCommSplit(world, 0, 0, &sub, nullptr));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  CHECK_NCCL(ncclCommInitRankConfig(&cfg, 1, id2, 0, &config));

  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i % 1000) * 0.5f;
  float *a, *b;
  CHECK_CUDA(cudaMalloc(&a, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&b, n * sizeof(float)));
  CHECK_CUDA(cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));

  long ops = 0;
  long self_p2p = 0;  // Sends and receives to this rank itself (the shim refuses to record them).
  double allreduce_sum = 0, recv_sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) {
    CHECK_NCCL(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, world, stream));
    CHECK_NCCL(ncclAllGather(a, b, n, ncclFloat32, sub, stream));
    CHECK_NCCL(ncclReduceScatter(a, b, n, ncclFloat32, ncclSum, world, stream));
    CHECK_NCCL(ncclBroadcast(a, b, n, ncclFloat32, 0, world, stream));
    CHECK_NCCL(ncclReduce(a, b, n, ncclFloat32, ncclSum, 0, cfg, stream));
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(a, n, ncclFloat32, 0, world, stream));
    CHECK_NCCL(ncclRecv(b, n, ncclFloat32, 0, world, stream));
    CHECK_NCCL(ncclGroupEnd());
    ops += 7;
    self_p2p += 2;
    CHECK_CUDA(cudaStreamSynchronize(stream));
  }
  const auto t1 = std::chrono::steady_clock::now();
  recv_sum = Checksum(b, n);
  CHECK_NCCL(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, world, stream));
  ++ops;
  CHECK_CUDA(cudaStreamSynchronize(stream));
  allreduce_sum = Checksum(b, n);
  const double expected = Checksum(a, n);  // One rank: every op copies a.
  std::printf("result send_recv %.3f\n", recv_sum);
  std::printf("result all_reduce %.3f\n", allreduce_sum);
  std::printf("ops_issued %ld\n", ops);
  std::printf("ops_self_p2p %ld\n", self_p2p);
  std::printf("iteration_us %.3f\n",
              std::chrono::duration<double, std::micro>(t1 - t0).count() / iterations);
  CHECK_NCCL(ncclCommDestroy(cfg));
  CHECK_NCCL(ncclCommDestroy(sub));
  CHECK_NCCL(ncclCommDestroy(world));
  CHECK_CUDA(cudaFree(a));
  CHECK_CUDA(cudaFree(b));
  if (recv_sum != expected || allreduce_sum != expected) {
    std::fprintf(stderr, "wrong result: %.3f %.3f expected %.3f\n", recv_sum, allreduce_sum,
                 expected);
    return 1;
  }
  std::printf("done\n");
  return 0;
}
