#include "cluster/cluster_spec.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json_parse.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace falcon::cluster {
namespace {

using nlohmann::json;

// Cluster and rank files are a few KiB; 16 MiB leaves room for any cluster a machine can hold.
constexpr uint64_t kMaxFileBytes = uint64_t{16} << 20;

absl::Status FieldError(absl::string_view source, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, ": ", what));
}

absl::StatusOr<std::string> GetString(const json& object, absl::string_view source,
                                      const std::string& prefix, const char* key, bool required) {
  const std::string field = prefix + key;
  auto it = object.find(key);
  if (it == object.end()) {
    if (required) return FieldError(source, field, "missing");
    return std::string();
  }
  if (!it->is_string()) return FieldError(source, field, "must be a string");
  return it->get<std::string>();
}

absl::StatusOr<int64_t> GetInt(const json& object, absl::string_view source,
                               const std::string& prefix, const char* key, int64_t min,
                               int64_t max) {
  const std::string field = prefix + key;
  auto it = object.find(key);
  if (it == object.end()) return FieldError(source, field, "missing");
  if (!it->is_number_integer()) return FieldError(source, field, "must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < min || v > max) {
    return FieldError(source, field, absl::StrCat(v, " is outside [", min, ", ", max, "]"));
  }
  return v;
}

bool IsIpv4(const std::string& s) {
  in_addr addr;
  return inet_pton(AF_INET, s.c_str(), &addr) == 1;
}

}  // namespace

absl::string_view ClusterKindName(ClusterKind kind) {
  return kind == ClusterKind::kNetns ? "netns" : "loopback";
}

absl::StatusOr<const NodeSpec*> ClusterSpec::Node(absl::string_view name) const {
  std::vector<std::string> names;
  for (const NodeSpec& n : nodes) {
    if (n.name == name) return &n;
    names.push_back(n.name);
  }
  return absl::NotFoundError(absl::StrCat(
      "no node '", name, "' in the cluster (nodes: ", absl::StrJoin(names, ", "), ")"));
}

absl::StatusOr<const NodeSpec*> ClusterSpec::NodeByAddress(absl::string_view address) const {
  for (const NodeSpec& n : nodes) {
    if (n.address == address) return &n;
  }
  return absl::NotFoundError(absl::StrCat("no node has address ", address));
}

absl::StatusOr<const RankEntry*> RankTable::Rank(int rank) const {
  for (const RankEntry& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return absl::NotFoundError(absl::StrCat("no rank ", rank, " in the rank table (world size ",
                                          ranks.size(), ", generation ", generation, ")"));
}

absl::StatusOr<ClusterSpec> ParseClusterSpec(absl::string_view text, absl::string_view source) {
  auto doc = common::ParseJson(text, source);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return FieldError(source, "(document)", "must be a JSON object");
  ClusterSpec spec;
  auto kind = GetString(*doc, source, "", "kind", true);
  if (!kind.ok()) return kind.status();
  if (*kind == "netns") {
    spec.kind = ClusterKind::kNetns;
  } else if (*kind == "loopback") {
    spec.kind = ClusterKind::kLoopback;
  } else {
    return FieldError(source, "kind", absl::StrCat("'", *kind, "' is not netns or loopback"));
  }
  const bool netns = spec.kind == ClusterKind::kNetns;
  struct Field {
    const char* key;
    std::string* out;
    bool required;
  };
  for (const Field& f : {Field{"prefix", &spec.prefix, netns}, Field{"bridge", &spec.bridge, netns},
                         Field{"subnet", &spec.subnet, netns},
                         Field{"controller_address", &spec.controller_address, true}}) {
    auto v = GetString(*doc, source, "", f.key, f.required);
    if (!v.ok()) return v.status();
    *f.out = *std::move(v);
  }
  if (!IsIpv4(spec.controller_address)) {
    return FieldError(source, "controller_address",
                      absl::StrCat("'", spec.controller_address, "' is not an IPv4 address"));
  }
  auto nodes = doc->find("nodes");
  if (nodes == doc->end()) return FieldError(source, "nodes", "missing");
  if (!nodes->is_array() || nodes->empty()) {
    return FieldError(source, "nodes", "must be a non-empty array");
  }
  std::set<std::string> names, addresses;
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    const std::string prefix = absl::StrCat("nodes[", i, "].");
    if (!n.is_object()) return FieldError(source, absl::StrCat("nodes[", i, "]"), "not an object");
    NodeSpec node;
    for (const Field& f :
         {Field{"name", &node.name, true}, Field{"netns", &node.netns, netns},
          Field{"address", &node.address, true}, Field{"iface", &node.iface, netns},
          Field{"host_veth", &node.host_veth, netns}}) {
      auto v = GetString(n, source, prefix, f.key, f.required);
      if (!v.ok()) return v.status();
      if (f.required && v->empty()) return FieldError(source, prefix + f.key, "is empty");
      *f.out = *std::move(v);
    }
    if (!IsIpv4(node.address)) {
      return FieldError(source, prefix + "address",
                        absl::StrCat("'", node.address, "' is not an IPv4 address"));
    }
    if (!names.insert(node.name).second) {
      return FieldError(source, prefix + "name", absl::StrCat("duplicate node '", node.name, "'"));
    }
    if (netns && !addresses.insert(node.address).second) {
      return FieldError(source, prefix + "address",
                        absl::StrCat("duplicate address ", node.address));
    }
    spec.nodes.push_back(std::move(node));
  }
  return spec;
}

std::string ClusterSpecToJson(const ClusterSpec& spec) {
  json doc = {{"kind", std::string(ClusterKindName(spec.kind))},
              {"prefix", spec.prefix},
              {"bridge", spec.bridge},
              {"subnet", spec.subnet},
              {"controller_address", spec.controller_address}};
  json nodes = json::array();
  for (const NodeSpec& n : spec.nodes) {
    nodes.push_back({{"name", n.name},
                     {"netns", n.netns},
                     {"address", n.address},
                     {"iface", n.iface},
                     {"host_veth", n.host_veth}});
  }
  doc["nodes"] = std::move(nodes);
  return doc.dump();
}

absl::StatusOr<ClusterSpec> ReadClusterSpec(const std::string& path) {
  auto text = common::ReadTextFile(path, kMaxFileBytes);
  if (!text.ok()) return text.status();
  return ParseClusterSpec(*text, path);
}

absl::Status WriteClusterSpec(const std::string& path, const ClusterSpec& spec) {
  return common::WriteTextFileAtomically(path, ClusterSpecToJson(spec) + "\n");
}

absl::StatusOr<RankTable> ParseRankTable(absl::string_view text, absl::string_view source) {
  auto doc = common::ParseJson(text, source);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return FieldError(source, "(document)", "must be a JSON object");
  RankTable table;
  auto generation = GetInt(*doc, source, "", "generation", 0, int64_t{1} << 40);
  if (!generation.ok()) return generation.status();
  table.generation = *generation;
  auto ranks = doc->find("ranks");
  if (ranks == doc->end()) return FieldError(source, "ranks", "missing");
  if (!ranks->is_array()) return FieldError(source, "ranks", "must be an array");
  std::set<int> seen;
  for (size_t i = 0; i < ranks->size(); ++i) {
    const json& r = (*ranks)[i];
    const std::string prefix = absl::StrCat("ranks[", i, "].");
    if (!r.is_object()) return FieldError(source, absl::StrCat("ranks[", i, "]"), "not an object");
    RankEntry entry;
    auto rank = GetInt(r, source, prefix, "rank", 0, (1 << 24) - 1);
    if (!rank.ok()) return rank.status();
    entry.rank = static_cast<int>(*rank);
    auto node = GetString(r, source, prefix, "node", true);
    if (!node.ok()) return node.status();
    if (node->empty()) return FieldError(source, prefix + "node", "is empty");
    entry.node = *std::move(node);
    auto pid = GetInt(r, source, prefix, "pid", 1, (int64_t{1} << 31) - 1);
    if (!pid.ok()) return pid.status();
    entry.pid = static_cast<pid_t>(*pid);
    if (!seen.insert(entry.rank).second) {
      return FieldError(source, prefix + "rank", absl::StrCat("duplicate rank ", entry.rank));
    }
    table.ranks.push_back(std::move(entry));
  }
  std::sort(table.ranks.begin(), table.ranks.end(),
            [](const RankEntry& a, const RankEntry& b) { return a.rank < b.rank; });
  return table;
}

std::string RankTableToJson(const RankTable& table) {
  json ranks = json::array();
  for (const RankEntry& r : table.ranks) {
    ranks.push_back({{"rank", r.rank}, {"node", r.node}, {"pid", static_cast<int64_t>(r.pid)}});
  }
  return json{{"generation", table.generation}, {"ranks", std::move(ranks)}}.dump();
}

absl::StatusOr<RankTable> ReadRankTable(const std::string& path) {
  auto text = common::ReadTextFile(path, kMaxFileBytes);
  if (!text.ok()) return text.status();
  return ParseRankTable(*text, path);
}

absl::Status WriteRankTable(const std::string& path, const RankTable& table) {
  return common::WriteTextFileAtomically(path, RankTableToJson(table) + "\n");
}

absl::Status CheckRankTable(const ClusterSpec& spec, const RankTable& table) {
  for (const RankEntry& r : table.ranks) {
    if (!spec.Node(r.node).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", r.rank, " runs on node '", r.node,
                                                     "', which the cluster (", spec.nodes.size(),
                                                     " nodes) does not have"));
    }
  }
  return absl::OkStatus();
}

std::string IpBinary() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      dirs.emplace_back(dir);
    }
  }
  dirs.emplace_back("/usr/sbin");
  dirs.emplace_back("/sbin");
  for (const std::string& dir : dirs) {
    const std::string candidate = absl::StrCat(dir, "/ip");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "ip";
}

std::vector<std::string> CommandInNode(const NodeSpec& node, std::vector<std::string> argv) {
  if (node.netns.empty()) return argv;
  std::vector<std::string> out = {IpBinary(), "netns", "exec", node.netns};
  out.insert(out.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return out;
}

}  // namespace falcon::cluster
