#pragma once
// C views of the vocabulary for the backend boundary and the placement hot path: built
// once per inventory or request, then passed by pointer with no conversion per call.

#include <memory>
#include <string>
#include <vector>

#include "vgpu/backend_abi.h"
#include "vgpu/device.h"
#include "vgpu/device_request.h"
#include "vgpu/device_usage.h"

namespace vgpu {

/// A Device with its vgpu_device view, links included (what discovery hands over). The view
/// points into the Device, so a move
/// re-points it (kept inline in vectors for locality: placement reads every device of
/// every node); copies are not needed and not allowed.
class DeviceRecord {
 public:
  explicit DeviceRecord(Device device);
  DeviceRecord(DeviceRecord&& other) noexcept : DeviceRecord(std::move(other.device_)) {}
  DeviceRecord(const DeviceRecord&) = delete;
  DeviceRecord& operator=(const DeviceRecord&) = delete;
  DeviceRecord& operator=(DeviceRecord&&) = delete;

  const Device& device() const { return device_; }
  const vgpu_device& c() const { return view_; }

  /// The view of `device` whose attributes are `attributes` (both must outlive it), without
  /// links: the view `fit` gets.
  static vgpu_device viewOf(const Device& device, const std::vector<vgpu_kv>& attributes);

 private:
  Device device_;
  std::vector<vgpu_kv> attributes_;
  std::vector<vgpu_device_link> links_;
  vgpu_device view_{};
};

/// A DeviceRequest with its vgpu_device_request view (same ownership rules as DeviceRecord).
class RequestRecord {
 public:
  explicit RequestRecord(DeviceRequest request);
  RequestRecord(const RequestRecord&) = delete;
  RequestRecord& operator=(const RequestRecord&) = delete;

  const DeviceRequest& request() const { return request_; }
  const vgpu_device_request& c() const { return view_; }

 private:
  DeviceRequest request_;
  std::vector<const char*> includeModels_, excludeModels_, includeIds_, excludeIds_;
  vgpu_device_request view_{};
};

inline vgpu_device_usage toC(const DeviceUsage& u) { return {u.shares, u.compute, u.memoryMiB}; }
inline DeviceUsage fromC(const vgpu_device_usage& u) { return {u.shares, u.memory_mib, u.compute}; }

/// Copies of C structs into the vocabulary (strings copied). A device's links are read only
/// when its struct_size covers them (a backend built before ABI 1.4 has none).
Device deviceFromC(const vgpu_device& device, const std::string& backend);
DeviceRequest requestFromC(const vgpu_device_request& request, const std::string& backend);

}  // namespace vgpu
