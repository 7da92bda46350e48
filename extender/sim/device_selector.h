#pragma once
// The part of a DRA device selector's CEL that vgpu-sim evaluates: equality of the
// device's driver or of one of its attributes with a literal, several joined by `&&`:
//   device.driver == "nvidia.vgpu.io"
//   device.attributes["nvidia.vgpu.io"].model == "NVIDIA A100-SXM4-80GB" && device.attributes["nvidia.vgpu.io"].index == 0
// Anything else (other operators, functions, capacity, `||`) is refused when the input
// is read, so no claim is placed on a guess.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/result.h"

namespace vgpu::simulator {

/// One `subject == literal` term.
struct SelectorTerm {
  bool driver = false;     ///< device.driver; else device.attributes[domain].name
  std::string domain;
  std::string name;
  std::variant<std::string, std::int64_t, bool> literal;
};

/// A parsed CEL expression: every term must hold.
struct DeviceSelector {
  std::string expression;
  std::vector<SelectorTerm> terms;
};

/// Parses `expression`. Errors say what part is beyond the subset and what the subset is.
Result<DeviceSelector> parseDeviceSelector(const std::string& expression);

/// Whether `device` (a ResourceSlice's device object, attributes as published) of driver
/// `driver` satisfies `selector`. An attribute name without a domain is in the driver's
/// domain, as in the API; a device without the attribute does not match.
bool selectorMatches(const DeviceSelector& selector, const std::string& driver, const boost::json::object& device);

}  // namespace vgpu::simulator
