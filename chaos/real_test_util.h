// Helpers of the fault driver's real tests (root): two network namespaces joined by a veth pair,
// TCP throughput between them, and the CPU share of a busy process.
#ifndef FALCON_CHAOS_REAL_TEST_UTIL_H_
#define FALCON_CHAOS_REAL_TEST_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chaos/runner.h"
#include "cluster/cluster_spec.h"
#include "common/subprocess.h"

namespace falcon::chaos {

// Namespaces PREFIX-node0 and PREFIX-node1 (PREFIX = "fcrt" + this process's pid), joined by a
// veth pair PREFIXa (in node0, 10.213.0.1/24) <-> PREFIXb (in node1, 10.213.0.2/24). Create
// first deletes namespaces of earlier runs whose pid is gone (a test killed before its clean-up);
// the destructor deletes both namespaces (and so the pair).
class VethNamespaces {
 public:
  static absl::StatusOr<std::unique_ptr<VethNamespaces>> Create(Runner* runner);
  ~VethNamespaces();
  VethNamespaces(const VethNamespaces&) = delete;
  VethNamespaces& operator=(const VethNamespaces&) = delete;

  // A netns cluster of the two nodes (host_veth: names that do not exist; there is no bridge).
  const cluster::ClusterSpec& cluster() const { return cluster_; }

 private:
  VethNamespaces(Runner* runner, cluster::ClusterSpec cluster)
      : runner_(runner), cluster_(std::move(cluster)) {}
  absl::Status Run(const std::vector<std::string>& argv);

  Runner* runner_;
  cluster::ClusterSpec cluster_;
};

// Bytes per second of one TCP connection from namespace `from_netns` to `to_address` in
// `to_netns`, sending as fast as it can for `window`.
absl::StatusOr<double> TcpThroughput(const std::string& from_netns, const std::string& to_netns,
                                     const std::string& to_address, absl::Duration window);

// A child that spins on the CPU until killed, at nice 0 (whatever the caller's niceness), so that
// its share is not the leftover of a niced test.
absl::StatusOr<common::Subprocess> SpawnBusyLoop(std::vector<int> cpus = {});

// CPU seconds per wall second of `pid` over `window` (/proc/PID/stat utime + stime).
absl::StatusOr<double> CpuShare(int pid, absl::Duration window);

}  // namespace falcon::chaos

#endif  // FALCON_CHAOS_REAL_TEST_UTIL_H_
