// A rank program for launcher tests. Usage (under falcon_launch):
//   launch_test_child env OUTDIR          write OUTDIR/rank<R>.env (the FALCON_* variables), exit 0
//   launch_test_child fail R CODE OUTDIR  rank R exits CODE after 200 ms; others wait for SIGTERM
//   launch_test_child crash R OUTDIR      rank R kills itself with SIGKILL; others wait
//   launch_test_child wait OUTDIR         every rank writes OUTDIR/ready<R> and waits for SIGTERM
//   launch_test_child tree OUTDIR         every rank starts a child of its own (same process
//                                         group), writes "PID CHILD_PID" to OUTDIR/pids<R> and
//                                         sleeps 30 s (SIGTERM kills both; the child sleeps 30 s)
// Waiting ranks write OUTDIR/term<R> when SIGTERM arrives and exit 0; they exit 9 after 30 s.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "common/subprocess.h"

namespace {

char g_term_marker[512];  // Written before the handler is installed; read-only afterwards.

void OnTerm(int) {
  const int fd = open(g_term_marker, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
  _exit(0);
}

int WaitForTerm(const std::string& outdir, int rank) {
  std::snprintf(g_term_marker, sizeof(g_term_marker), "%s/term%d", outdir.c_str(), rank);
  signal(SIGTERM, OnTerm);
  std::ofstream(outdir + "/ready" + std::to_string(rank)) << "ready\n";
  for (int i = 0; i < 300; ++i) usleep(100 * 1000);
  return 9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* rank_env = std::getenv("FALCON_RANK");
  const int rank = rank_env != nullptr ? std::atoi(rank_env) : -1;
  const std::string mode = argv[1];
  if (mode == "env") {
    std::ofstream out(std::string(argv[2]) + "/rank" + std::to_string(rank) + ".env");
    for (const char* name :
         {"FALCON_RANK", "FALCON_WORLD_SIZE", "FALCON_LOCAL_RANK", "FALCON_LOCAL_WORLD_SIZE",
          "FALCON_NODE", "FALCON_NODE_INDEX", "FALCON_NNODES", "FALCON_RENDEZVOUS", "FALCON_DP",
          "FALCON_PP", "FALCON_TP", "FALCON_FAULTS", "FALCON_BACKEND"}) {
      const char* v = std::getenv(name);
      out << name << "=" << (v != nullptr ? v : "<unset>") << "\n";
    }
    return 0;
  }
  if (mode == "fail" && argc == 5) {
    if (rank == std::atoi(argv[2])) {
      usleep(200 * 1000);
      return std::atoi(argv[3]);
    }
    return WaitForTerm(argv[4], rank);
  }
  if (mode == "crash" && argc == 4) {
    if (rank == std::atoi(argv[2])) {
      usleep(200 * 1000);
      raise(SIGKILL);
    }
    return WaitForTerm(argv[3], rank);
  }
  if (mode == "wait") return WaitForTerm(argv[2], rank);
  if (mode == "tree") {
    falcon::common::SpawnOptions options;
    options.name = "tree child";
    auto spawned = falcon::common::Subprocess::SpawnFunction(options, [] {
      for (int i = 0; i < 300; ++i) usleep(100 * 1000);
      return 9;
    });
    if (!spawned.ok()) {
      std::fprintf(stderr, "%s\n", spawned.status().ToString().c_str());
      return 2;
    }
    const pid_t child = spawned->pid();
    const std::string path = std::string(argv[2]) + "/pids" + std::to_string(rank);
    std::ofstream(path + ".tmp") << getpid() << " " << child << "\n";
    std::rename((path + ".tmp").c_str(), path.c_str());
    for (int i = 0; i < 300; ++i) usleep(100 * 1000);
    return 9;
  }
  return 2;
}
