#include "chaos/clear.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "chaos/cgroup.h"
#include "chaos/tc.h"

namespace falcon::chaos {

ClearReport ClearCluster(const cluster::ClusterSpec& cluster, Runner* runner,
                         const std::string& sys_fs_cgroup) {
  ClearReport report;
  auto fail = [&](const absl::Status& s) { report.errors.push_back(std::string(s.message())); };
  Tc tc(runner);
  if (cluster.kind == cluster::ClusterKind::kNetns) {
    for (const cluster::NodeSpec& node : cluster.nodes) {
      for (const Interface& iface :
           {Interface{node.netns, node.iface}, Interface{"", node.host_veth}}) {
        absl::StatusOr<bool> ours = tc.HasChaosRoot(iface);
        if (!ours.ok()) {
          if (Tc::IsGone(ours.status())) {
            report.notes.push_back(
                absl::StrCat("interface ", iface.ToString(), " of node ", node.name, " is gone"));
          } else {
            fail(ours.status());
          }
          continue;
        }
        if (!*ours) continue;
        if (absl::Status s = tc.DeleteRoot(iface); !s.ok()) {
          fail(s);
          continue;
        }
        report.removed.push_back(absl::StrCat("qdisc ", Tc::kHandle, " on ", iface.ToString()));
      }
    }
  }
  absl::StatusOr<CgroupHierarchy> h = DetectCgroupHierarchy(runner, sys_fs_cgroup);
  if (!h.ok()) {
    report.notes.push_back(absl::StrCat("no cgroups looked at: ", h.status().message()));
  } else {
    Cgroups cgroups(runner, *h);
    const std::string tag = ChaosCgroupTag(cluster.prefix);
    absl::StatusOr<std::vector<std::string>> removed =
        cgroups.RemoveChaosCgroups([&](const ChaosCgroupName& n) {
          return n.tag == tag || !runner->Exists(absl::StrCat("/proc/", n.driver_pid, "/status"));
        });
    if (!removed.ok()) {
      fail(removed.status());
    } else {
      for (const std::string& path : *removed) report.removed.push_back("cgroup " + path);
    }
  }
  return report;
}

}  // namespace falcon::chaos
