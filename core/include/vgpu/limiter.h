#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/assignment.h"
#include "vgpu/container_spec.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu {

/// Names a container whose device resources a limiter may hold.
struct ContainerRef {
  std::string holder;  ///< the agent's key for one container's devices (its host folder), not the pod UID
  std::string containerName;
  bool operator==(const ContainerRef&) const = default;
  auto operator<=>(const ContainerRef&) const = default;
};

/// One container about to start, with the devices of one backend it was granted.
struct ContainerGrant {
  ContainerRef container;
  std::string podNamespace;
  std::string podName;
  int containerIndex = 0;
  std::vector<DeviceGrant> devices;  ///< Only this backend's devices.
  std::string hostDir;               ///< A host folder the agent made for this container.
  Annotations podAnnotations;
  /// The pod the agent attributes the container to: a label for files and messages, never
  /// a key for what is held (that is `container`). May be empty.
  std::string podUid;
};

/// What one container uses of one device it holds, as the vendor library reports it.
struct ContainerUsage {
  ContainerRef container;
  std::string deviceId;
  int deviceIndex = 0;  ///< the device's index as the container sees it
  std::uint64_t memoryLimitBytes = 0;
  std::optional<std::uint64_t> memoryUsedBytes;  ///< unset: the vendor library cannot tell
  std::uint32_t computeLimitPercent = 0;         ///< the container's compute share, 0..100
  std::optional<std::uint32_t> utilizationPercent;  ///< busy percent of the whole device; unset: unknown
  bool operator==(const ContainerUsage&) const = default;
};

/// Node side ("enforcement"): what the kubelet must do so the container gets exactly its
/// slice, and undoing it when the container is gone. Called from the node agent's
/// Allocate handler; implementations must be safe to call from several threads.
class Limiter {
 public:
  virtual ~Limiter() = default;

  /// Env, mounts and device nodes for the container; may create a partition on the device.
  /// Errors: the grant names unknown devices, the partition cannot be made (in words).
  virtual Result<ContainerSpec> containerSpec(const ContainerGrant& grant) = 0;

  /// Undo what containerSpec created for one container. Unknown containers are fine.
  virtual Status release(const ContainerRef& container) = 0;

  /// Undo what is held for every container not in `live` (after an agent restart too).
  virtual Status reconcile(const std::vector<ContainerRef>& live) = 0;
};

/// Node side, optional: per-container usage for /metrics, from the vendor library's
/// per-partition, per-process or per-device queries. Thread-safe; called on scrapes.
class UsageReporter {
 public:
  virtual ~UsageReporter() = default;
  /// One entry per device of each container the limiter holds now.
  /// Errors: the vendor library fails (in words); the caller reports and goes on.
  virtual Result<std::vector<ContainerUsage>> containerUsage() = 0;
};

}  // namespace vgpu
