#include "cluster/netns_subnet.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/json_parse.h"
#include "nlohmann/json.hpp"

namespace falcon::cluster {
namespace {

using nlohmann::json;

uint32_t Mask(int length) { return length == 0 ? 0 : ~uint32_t{0} << (32 - length); }

bool Overlaps(const Ipv4Prefix& a, const Ipv4Prefix& b) {
  const uint32_t mask = Mask(std::min(a.length, b.length));
  return (a.address & mask) == (b.address & mask);
}

absl::Status ShapeError(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

}  // namespace

absl::StatusOr<Ipv4Prefix> ParseIpv4Prefix(absl::string_view text, absl::string_view source) {
  const absl::string_view::size_type slash = text.find('/');
  const std::string address(text.substr(0, slash));
  Ipv4Prefix p;
  in_addr addr;
  bool ok = inet_pton(AF_INET, address.c_str(), &addr) == 1;
  if (ok && slash != absl::string_view::npos) {
    ok = absl::SimpleAtoi(text.substr(slash + 1), &p.length) && p.length >= 0 && p.length <= 32;
  }
  if (!ok) return ShapeError(source, absl::StrCat("'", text, "' is not an IPv4 prefix"));
  p.address = ntohl(addr.s_addr) & Mask(p.length);
  return p;
}

std::string Ipv4ToString(uint32_t address) {
  return absl::StrCat(address >> 24, ".", (address >> 16) & 255, ".", (address >> 8) & 255, ".",
                      address & 255);
}

absl::StatusOr<std::vector<Ipv4Prefix>> PrefixesInUse(absl::string_view addr_json,
                                                      absl::string_view route_json) {
  constexpr absl::string_view kAddrSource = "`ip -j -4 addr show`";
  constexpr absl::string_view kRouteSource = "`ip -j -4 route show table all`";
  std::vector<Ipv4Prefix> used;
  absl::StatusOr<json> links = common::ParseJson(addr_json.empty() ? "[]" : addr_json, kAddrSource);
  if (!links.ok()) return links.status();
  if (!links->is_array()) return ShapeError(kAddrSource, "not a JSON array");
  for (const json& link : *links) {
    auto info = link.find("addr_info");
    if (info == link.end()) continue;
    if (!info->is_array()) return ShapeError(kAddrSource, "addr_info is not an array");
    for (const json& a : *info) {
      auto local = a.find("local");
      auto len = a.find("prefixlen");
      if (local == a.end() || !local->is_string() || len == a.end() || !len->is_number_integer()) {
        return ShapeError(kAddrSource, absl::StrCat("address without local/prefixlen: ", a.dump()));
      }
      absl::StatusOr<Ipv4Prefix> p = ParseIpv4Prefix(
          absl::StrCat(local->get<std::string>(), "/", len->get<int64_t>()), kAddrSource);
      if (!p.ok()) return p.status();
      used.push_back(*p);
    }
  }
  absl::StatusOr<json> routes =
      common::ParseJson(route_json.empty() ? "[]" : route_json, kRouteSource);
  if (!routes.ok()) return routes.status();
  if (!routes->is_array()) return ShapeError(kRouteSource, "not a JSON array");
  for (const json& r : *routes) {
    auto dst = r.find("dst");
    if (dst == r.end() || !dst->is_string()) {
      return ShapeError(kRouteSource, absl::StrCat("route without dst: ", r.dump()));
    }
    if (*dst == "default") continue;
    absl::StatusOr<Ipv4Prefix> p = ParseIpv4Prefix(dst->get<std::string>(), kRouteSource);
    if (!p.ok()) return p.status();
    used.push_back(*p);
  }
  return used;
}

absl::StatusOr<uint32_t> ChooseSubnet(const std::vector<Ipv4Prefix>& in_use) {
  for (uint32_t net = kSubnetFirst; net <= kSubnetLast; net += 256) {
    const Ipv4Prefix candidate{net, 24};
    bool free = true;
    for (const Ipv4Prefix& used : in_use) {
      if (Overlaps(candidate, used)) {
        free = false;
        break;
      }
    }
    if (free) return net;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no free /24 between ", Ipv4ToString(kSubnetFirst), " and ", Ipv4ToString(kSubnetLast),
      ": every one overlaps an address or route of this network namespace"));
}

}  // namespace falcon::cluster
