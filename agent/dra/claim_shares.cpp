// Reads a ResourceClaim's allocation results for our driver (claim_shares.h): each share of a
// device with the capacity the scheduler made it consume.

#include "claim_shares.h"

#include <boost/json.hpp>

#include "vgpu/k8s/object.h"
#include "vgpu/quantity.h"

namespace vgpu::dra {
namespace json = boost::json;

namespace {

std::string text(const json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

/// A consumed amount in whole units of `perUnit` (rounded up); errors name the capacity.
Result<std::uint64_t> consumed(const json::value& v, std::int64_t perUnit, const std::string& what) {
  if (!v.is_string()) return makeError(what + " is not a Quantity string");
  auto q = parseQuantityValue(v.get_string());
  if (!q.ok()) return makeError(what + ": " + q.error().message);
  if (*q < 0) return makeError(what + " is negative (" + std::string(v.get_string()) + ")");
  return static_cast<std::uint64_t>((*q + perUnit - 1) / perUnit);
}

}  // namespace

Result<std::vector<ClaimShare>> claimShares(const json::object& claim, const ClaimRef& ref, std::string_view driver) {
  const std::string who = "ResourceClaim " + ref.ns + "/" + ref.name;
  if (k8s::uid(claim) != ref.uid)
    return makeError(who + " is uid " + std::string(k8s::uid(claim)) + ", not " + ref.uid +
                     " as the kubelet asked (deleted and created again?)");
  const json::value* results = k8s::findPath(claim, {"status", "allocation", "devices", "results"});
  if (!k8s::findPath(claim, {"status", "allocation"}) || k8s::findPath(claim, {"status", "allocation"})->is_null())
    return makeError(who + " is not allocated (status.allocation is empty)");
  std::vector<ClaimShare> out;
  if (!results || !results->is_array()) return out;
  std::size_t i = 0;
  for (const auto& r : results->get_array()) {
    const std::string at = who + " status.allocation.devices.results[" + std::to_string(i++) + "]";
    if (!r.is_object()) return makeError(at + " is not an object");
    const auto& o = r.get_object();
    if (text(o, "driver") != driver) continue;
    ClaimShare s;
    s.request = text(o, "request");
    s.pool = text(o, "pool");
    s.device = text(o, "device");
    s.shareId = text(o, "shareID");
    if (s.pool.empty() || s.device.empty()) return makeError(at + " names no pool or device");
    if (const auto* cc = o.if_contains("consumedCapacity"); cc && cc->is_object()) {
      const auto& caps = cc->get_object();
      if (const auto* m = caps.if_contains("memory")) {
        auto mib = consumed(*m, std::int64_t{1} << 20, at + " consumedCapacity.memory");
        if (!mib.ok()) return mib.error();
        s.memoryMiB = *mib;
      }
      if (const auto* c = caps.if_contains("cores")) {
        auto cores = consumed(*c, 1, at + " consumedCapacity.cores");
        if (!cores.ok()) return cores.error();
        if (*cores > 100000) return makeError(at + " consumedCapacity.cores is out of range");
        s.cores = static_cast<std::uint32_t>(*cores);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace vgpu::dra
