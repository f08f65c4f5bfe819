// Test helper of cgroup_real_test: `busy_threads NAME...` starts one thread per NAME, named NAME
// (pthread_setname_np: /proc/PID/task/TID/comm), each spinning on the CPU at nice 0 (whatever
// the caller's niceness, where allowed), and waits to be killed. It stands in for a rank whose
// device work runs on a thread of its own.
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace falcon::chaos {
namespace {

void Spin() {
  volatile uint64_t spins = 0;
  for (;;) spins = spins + 1;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: busy_threads NAME...\n");
    return 2;
  }
  setpriority(PRIO_PROCESS, 0, 0);  // Root may lower a niceness; elsewhere it stays.
  std::vector<std::thread> threads;
  for (int i = 1; i < argc; ++i) {
    threads.emplace_back(Spin);
    const int err = pthread_setname_np(threads.back().native_handle(), argv[i]);
    if (err != 0) {
      std::fprintf(stderr, "cannot name a thread '%s' (error %d)\n", argv[i], err);
      return 1;
    }
  }
  for (;;) pause();
}

}  // namespace
}  // namespace falcon::chaos

int main(int argc, char** argv) { return falcon::chaos::Main(argc, argv); }
