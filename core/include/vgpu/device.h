#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu {

/// Whether a device can take new work. Unknown is what a device is before its first check.
enum class Health : std::uint8_t { kHealthy, kUnhealthy, kUnknown };

/// How two devices of one node are connected, in vendor-neutral words, worst first. The
/// placement engine orders by DeviceLink::rank, never by the class: the class is for people.
enum class LinkClass : std::uint8_t {
  kUnknown,        ///< The backend cannot tell.
  kCrossNuma,      ///< Through the link between CPU sockets (NUMA nodes).
  kSameNuma,       ///< Through PCIe host bridges of one NUMA node.
  kPcieHostBridge, ///< Through one PCIe host bridge.
  kPcieSwitches,   ///< Through several PCIe switches, without a host bridge.
  kPcieSwitch,     ///< Through one PCIe switch.
  kSameBoard,      ///< Two devices on one board.
  kDirect,         ///< Direct device-to-device links (NVLink bridges, xGMI, MLU-Link), `lanes` of them.
  kSwitchFabric,   ///< A device-to-device switch fabric, every device at full speed (NVSwitch).
};

/// The link from one device to a peer on the same node.
struct DeviceLink {
  std::string peer;  ///< Device::id of the peer (same backend, same node).
  LinkClass linkClass = LinkClass::kUnknown;
  std::uint32_t lanes = 0;  ///< For kDirect and kSwitchFabric: how many device links carry it.
  /// Higher is faster, 0 = unknown, at most kMaxLinkRank; comparable across nodes and
  /// backends (scale: docs/wire-format.md, "Device links").
  std::uint32_t rank = 0;

  bool operator==(const DeviceLink&) const = default;
};

inline constexpr std::uint32_t kMaxLinkRank = 1000;

/// The rank of a link class (kDirect and kSwitchFabric by their lanes); what a backend
/// publishes unless it knows better.
std::uint32_t standardLinkRank(LinkClass linkClass, std::uint32_t lanes);

/// "cross-numa", "same-numa", "pcie-host-bridge", "pcie-switches", "pcie-switch",
/// "same-board", "direct", "switch-fabric", "unknown"; parse returns nullopt for other words.
const char* toString(LinkClass linkClass);
std::optional<LinkClass> parseLinkClass(std::string_view text);

/// One physical device as discovery reports it and the node inventory publishes it.
/// Memory is in MiB after the backend's memory scaling; compute is in units where 100 is
/// the whole device (more than 100 means the operator oversubscribes compute).
/// Device attribute a backend may publish: what holds a container to its memory on the
/// device, "driver" (the vendor driver itself, per container) or "preload" (libvgpu.so or the
/// vendor's own in-container library). The node agent exports it as
/// vgpu_device_memory_enforcement{mode} (docs/metrics.md).
inline constexpr const char* kMemoryEnforcementAttribute = "memoryEnforcement";

struct Device {
  std::string id;             ///< Stable identifier (the vendor UUID), unique on the node.
  int index = 0;              ///< Position in the vendor's enumeration on the node.
  std::string backend;        ///< Name of the backend that owns the device ("nvidia").
  std::string model;          ///< Marketing name ("NVIDIA A100-SXM4-80GB").
  std::uint64_t memoryMiB = 0;
  std::uint32_t computeUnits = 100;
  std::uint32_t splitCount = 1;  ///< How many containers may share the device at once.
  int numaNode = -1;             ///< -1 when unknown.
  Health health = Health::kUnknown;
  std::map<std::string, std::string> attributes;  ///< Free-form: MIG mode, links, minor...
  /// Memory (MiB, as the vendor library reports it) that processes outside vgpu's containers
  /// hold on the device (host processes, pods vgpu did not place), as the node agent's
  /// watchdog last saw it; the scheduler counts it as taken. 0 when unknown.
  std::uint64_t foreignUsedMiB = 0;
  /// Links to the other devices of the same backend on the node; empty when the backend
  /// cannot tell (placement then treats every pair as unknown, rank 0).
  std::vector<DeviceLink> links;

  bool operator==(const Device&) const = default;
};

/// "healthy", "unhealthy" or "unknown".
const char* toString(Health health);

}  // namespace vgpu
