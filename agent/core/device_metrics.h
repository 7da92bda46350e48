#pragma once
// The device families both front ends serve on /metrics (what each device offers, its health and
// what holds containers to their memory on it), registered and set in one place so the device
// plugin and vgpu-dra-plugin export the same names, labels and help texts.

#include <string>

#include "vgpu/device.h"
#include "vgpu/metrics/registry.h"

namespace vgpu::deviceplugin {

/// vgpu_device_memory_bytes, _compute_units, _split_slots, _healthy and _memory_enforcement,
/// labelled (backend, device_id, device_index, model[, mode]).
class DeviceGauges {
 public:
  explicit DeviceGauges(metrics::Registry& registry);

  /// Forgets every series (a scrape sets the devices of now).
  void clear();
  /// The series of `device`, served by backend `backend`.
  void set(const std::string& backend, const Device& device);

 private:
  metrics::Gauge& memory_;
  metrics::Gauge& compute_;
  metrics::Gauge& split_;
  metrics::Gauge& healthy_;
  metrics::Gauge& memoryEnforcement_;
};

/// The labels every per-device family of the agent shares.
metrics::LabelValues deviceLabels(const std::string& backend, const Device& device);

}  // namespace vgpu::deviceplugin
