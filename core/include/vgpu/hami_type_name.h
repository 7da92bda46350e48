#pragma once
// HAMi's name for a device's type: what its `use-<x>type` / `nouse-<x>type` annotations match
// and its metrics' `device_type` label carry.

#include <string>
#include <string_view>

namespace vgpu {

/// The model with `vendor` (HAMi's vendor word, e.g. "NVIDIA") and a dash in front, unless
/// the model already starts with it: "Tesla T4" -> "NVIDIA-Tesla T4"; "NVIDIA A100-SXM4-80GB"
/// stays as it is.
inline std::string hamiTypeName(std::string_view vendor, std::string_view model) {
  if (model.starts_with(vendor)) return std::string(model);
  std::string name;
  name.reserve(vendor.size() + 1 + model.size());
  return name.append(vendor).append("-").append(model);
}

}  // namespace vgpu
