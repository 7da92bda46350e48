#pragma once
// The fit and request rules most backends share (health, model and id filters, shares,
// memory, compute, exclusive use), so that each backend states only what differs.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/backend_abi.h"
#include "vgpu/config.h"
#include "vgpu/device_request.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu::sdk {

/// A backend's resource names for the standard roles; empty = the backend has no such
/// resource.
struct StandardResourceNames {
  std::string count;
  std::string memory;
  std::string memoryPercent;
  std::string cores;
  std::string priority;

  /// `defaults` with every name `configured` sets replacing it.
  static StandardResourceNames resolve(const StandardResourceNames& defaults,
                                       const ResourceNamesConfig& configured);
  /// As ResourceName entries; only the count is advertised to the kubelet.
  std::vector<ResourceName> list() const;
};

/// Pod annotation keys a backend reads for device filters; empty = not supported.
struct ConstraintAnnotationKeys {
  std::string includeModels;  ///< e.g. "nvidia.com/use-gputype"
  std::string excludeModels;
  std::string includeIds;
  std::string excludeIds;
  std::string numaBind;  ///< "true" / "false"
};

/// Everything parseStandardRequest needs to know about a backend.
struct StandardRequestRules {
  std::string backend;
  StandardResourceNames names;
  ConstraintAnnotationKeys annotations;
  std::uint64_t memoryUnitMiB = 1;     ///< MiB per unit of the memory resource.
  std::uint64_t defaultMemoryMiB = 0;  ///< 0 = the whole device's memory.
  std::uint32_t defaultCores = 0;
  std::uint32_t defaultCount = 1;
  std::int64_t maxPriority = 1;

  /// Rules with `settings` (defaults, memory unit) applied over these.
  StandardRequestRules withSettings(const BackendSettings& settings) const;
};

/// A container's limits and the pod's annotations as a DeviceRequest:
/// - none of the backend's resources: nullopt;
/// - memory or cores without a count: `defaultCount` devices;
/// - no memory: `defaultMemoryMiB`, else the whole device; no cores: `defaultCores`;
/// - a count with neither memory nor cores, when no defaults are configured: the whole
///   device (memory 100% and cores 100, i.e. exclusive).
/// Errors, in words naming the resource: count < 1, memory < 1 unit, both memory and
/// memory percentage, percentage outside 1..100, cores outside 0..100, priority outside
/// 0..maxPriority, a numa-bind annotation other than true/false.
Result<std::optional<DeviceRequest>> parseStandardRequest(const StandardRequestRules& rules,
                                                          const ContainerResources& container,
                                                          const Annotations& podAnnotations);

/// The limits the webhook adds so the pod states what parseStandardRequest will assume:
/// the count when only memory or cores were given, and cores 100 for a whole device.
Result<std::map<std::string, std::int64_t>> standardAdmissionDefaults(const StandardRequestRules& rules,
                                                                      const ContainerResources& container,
                                                                      const Annotations& podAnnotations);

/// Whether `request` fits one device; the checks in order: health, model filters, id
/// filters, request larger than the device, shares, exclusive use, memory, compute.
void standardFit(const vgpu_device_request& request, const vgpu_device& device,
                 const vgpu_device_usage& usage, vgpu_fit_result& result);

/// The first checks of standardFit alone (health, model filters, id filters), for a backend
/// whose own rules judge the sizes: true when the device passes, else `result` holds the
/// refusal and, when `why` is set, its words ("<id> is not a <noun> the pod asks for").
bool passesStandardFilters(const vgpu_device_request& request, const vgpu_device& device, vgpu_fit_result& result,
                           std::string* why = nullptr, std::string_view noun = "device");
/// What standardFit reads of the device (Allocator::fitReads): its id only against the
/// request's id lists. A backend adds the fields its own checks read.
inline constexpr std::uint32_t kStandardFitReads = VGPU_FIT_READS_MODEL | VGPU_FIT_READS_MEMORY |
                                                   VGPU_FIT_READS_COMPUTE | VGPU_FIT_READS_SPLIT_COUNT |
                                                   VGPU_FIT_READS_HEALTH;

/// Memory (MiB) `request` takes on `device`.
std::uint64_t requestedMemoryMiB(const vgpu_device_request& request, const vgpu_device& device);

/// Comma-separated list, items trimmed, empty items dropped.
std::vector<std::string> splitList(std::string_view text);

}  // namespace vgpu::sdk
