#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu {

/// Resource names a backend section may override; unset means the backend's default.
struct ResourceNamesConfig {
  std::optional<std::string> count;
  std::optional<std::string> memory;
  std::optional<std::string> memoryPercent;
  std::optional<std::string> cores;
  std::optional<std::string> priority;
  bool operator==(const ResourceNamesConfig&) const = default;
};

/// Which of the node agent's two front ends hands a backend's devices to containers on a
/// node (DESIGN.md 8a): the kubelet device plugin API with the scheduler extender placing
/// pods, or Dynamic Resource Allocation with kube-scheduler's allocator placing claims.
enum class FrontEnd : std::uint8_t { kDevicePlugin, kDra };
/// "devicePlugin" / "dra"; parse returns nullopt for anything else.
const char* toString(FrontEnd frontEnd);
std::optional<FrontEnd> parseFrontEnd(std::string_view text);

/// The settings of a backend section that a per-node override may change.
/// Unset fields mean "the backend's default".
struct BackendSettings {
  std::optional<std::uint32_t> splitCount;
  std::optional<double> memoryScaling;  ///< > 1 oversubscribes memory.
  std::optional<double> coreScaling;
  std::optional<std::uint64_t> memoryUnitMiB;  ///< MiB per unit of the memory resource.
  std::optional<std::uint64_t> defaultMemoryMiB;
  std::optional<std::uint32_t> defaultCores;
  std::optional<std::uint32_t> defaultCount;
  std::map<std::string, std::string> options;  ///< Backend-specific keys, checked by the backend.
  /// Unset = the device plugin. One front end per backend on a node: vgpu-device-plugin
  /// serves the backends in kDevicePlugin mode, vgpu-dra-plugin those in kDra mode.
  std::optional<FrontEnd> frontEnd;

  /// This, with every field `override` sets taking its value (options merged key by key).
  BackendSettings overriddenBy(const BackendSettings& override) const;
  bool operator==(const BackendSettings&) const = default;
};

/// One `backends.<name>` section of device-config.yaml.
struct BackendConfig {
  std::string name;
  bool enabled = false;
  ResourceNamesConfig resources;
  BackendSettings settings;
  bool operator==(const BackendConfig&) const = default;
};

enum class NodePolicy : std::uint8_t { kBinpack, kSpread };
/// kTopology: multi-device requests get the best-linked set of devices (docs/placement.md).
enum class DevicePolicy : std::uint8_t { kBinpack, kSpread, kTopology };

/// "binpack" / "spread" (/ "topology" for devices); parse returns nullopt for anything else.
const char* toString(NodePolicy policy);
const char* toString(DevicePolicy policy);
std::optional<NodePolicy> parseNodePolicy(std::string_view text);
std::optional<DevicePolicy> parseDevicePolicy(std::string_view text);

/// The `scheduler` section.
struct SchedulerConfig {
  NodePolicy nodePolicy = NodePolicy::kBinpack;
  DevicePolicy devicePolicy = DevicePolicy::kSpread;
  /// A node whose heartbeat annotation is older than this is not offered devices.
  std::chrono::seconds heartbeatTimeout{90};
  bool operator==(const SchedulerConfig&) const = default;
};

/// One entry of the `nodes` list: settings that differ on one node.
struct NodeOverride {
  std::string name;
  std::map<std::string, BackendSettings> backends;
  bool operator==(const NodeOverride&) const = default;
};

/// The whole device-config.yaml, typed. See docs/device-config.yaml for every key.
struct DeviceConfig {
  int version = 1;
  SchedulerConfig scheduler;
  std::vector<BackendConfig> backends;  ///< In file order.
  std::vector<NodeOverride> nodes;

  const BackendConfig* backend(std::string_view name) const;
  std::vector<const BackendConfig*> enabledBackends() const;
  /// A backend's settings on `node` (its override applied; `node` empty = no override).
  BackendSettings settingsFor(std::string_view backend, std::string_view node) const;
  bool operator==(const DeviceConfig&) const = default;
};

/// Parses device-config.yaml text. Every error names `fileName`, the key path
/// ("backends.nvidia.splitCount") and what was expected; unknown keys are errors.
Result<DeviceConfig> parseDeviceConfig(const std::string& yamlText, const std::string& fileName);

/// Reads and parses a device-config.yaml file (a missing or unreadable file is an error).
Result<DeviceConfig> loadDeviceConfig(const std::filesystem::path& path);

}  // namespace vgpu
