#pragma once

#include <string>

#include "vgpu/allocator.h"
#include "vgpu/device_process.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"

namespace vgpu {

/// One vendor's support: always an Allocator; Discovery and Limiter where the backend
/// supplies them (null otherwise). Whether it came from a shared library or is built in
/// is invisible to its users.
class Backend {
 public:
  virtual ~Backend() = default;

  /// The backend's name ("nvidia"), as in device-config.yaml and libvgpu-backend-<name>.so.
  virtual const std::string& name() const = 0;
  virtual const Allocator& allocator() const = 0;
  virtual Discovery* discovery() = 0;
  virtual Limiter* limiter() = 0;
  /// Per-container usage, where the backend reports it (null otherwise).
  virtual UsageReporter* usageReporter() { return nullptr; }
  /// Per-process device usage, where the backend lists it (null otherwise).
  virtual ProcessReporter* processReporter() { return nullptr; }
  /// Null: the driver keeps no per-cgroup accounting this backend can read.
  virtual CgroupMemoryReporter* cgroupMemoryReporter() { return nullptr; }
};

}  // namespace vgpu
