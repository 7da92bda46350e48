#pragma once
// Reading a ResourceClaim (resource.k8s.io/v1) at prepare time (reference/k8s-protocols.md
// 6.5): the allocation results for our driver, each a share of one device keyed by
// (pool, device, shareID), with the capacity the scheduler made it consume.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/result.h"

namespace vgpu::dra {

/// The claim as the kubelet names it.
struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;
  bool operator==(const ClaimRef&) const = default;
};

/// One allocation result of our driver.
struct ClaimShare {
  std::string request;  ///< the claim's request (or "<request>/<subrequest>")
  std::string pool;
  std::string device;
  std::string shareId;  ///< empty: the device was allocated whole (not shared)
  /// From consumedCapacity; unset when the result has none (an exclusive allocation).
  std::optional<std::uint64_t> memoryMiB;
  std::optional<std::uint32_t> cores;
  bool operator==(const ClaimShare&) const = default;
};

/// The results of `claim` whose driver is `driver`, in the allocation's order.
/// Errors, naming the claim: a different object than the kubelet asked for (uid), not
/// allocated, a result without pool or device, a consumedCapacity that is not a Quantity
/// or is negative.
Result<std::vector<ClaimShare>> claimShares(const boost::json::object& claim, const ClaimRef& ref,
                                            std::string_view driver);

}  // namespace vgpu::dra
