// Choosing the /24 of a new netns cluster: the first one in kSubnetFirst .. kSubnetLast that no
// address or route of the creator's network namespace touches, so the nodes' addresses can never
// shadow a real network of the machine or another cluster's (each cluster's bridge holds its
// .254, so its /24 shows up as an address here). The caller holds the subnet lock (NetnsCluster)
// from the listing until its bridge has its address, so concurrent creators never pick the same.
//
// Input: the JSON printed by `ip -j -4 addr show` and `ip -j -4 route show table all` (iproute2).
// Errors: kInvalidArgument naming the source and the entry for output that is not of that shape;
// kResourceExhausted when every candidate is in use.
#ifndef FALCON_CLUSTER_NETNS_SUBNET_H_
#define FALCON_CLUSTER_NETNS_SUBNET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace falcon::cluster {

// An IPv4 prefix, address in host byte order (low bits beyond `length` zero).
struct Ipv4Prefix {
  uint32_t address = 0;
  int length = 32;
};

// Candidates: 10.77.0.0/24, 10.77.1.0/24, ..., 10.99.255.0/24.
inline constexpr uint32_t kSubnetFirst = (10u << 24) | (77u << 16);
inline constexpr uint32_t kSubnetLast = (10u << 24) | (99u << 16) | (255u << 8);

// "a.b.c.d/n" or "a.b.c.d" (a /32); kInvalidArgument "SOURCE: 'x' is not an IPv4 prefix".
absl::StatusOr<Ipv4Prefix> ParseIpv4Prefix(absl::string_view text, absl::string_view source);
// Dotted quad of a host-order address.
std::string Ipv4ToString(uint32_t address);

// The prefixes the namespace uses: every address's network (local/prefixlen) and every route's
// destination except "default".
absl::StatusOr<std::vector<Ipv4Prefix>> PrefixesInUse(absl::string_view addr_json,
                                                      absl::string_view route_json);

// The network address of the first free /24 candidate.
absl::StatusOr<uint32_t> ChooseSubnet(const std::vector<Ipv4Prefix>& in_use);

}  // namespace falcon::cluster

#endif  // FALCON_CLUSTER_NETNS_SUBNET_H_
