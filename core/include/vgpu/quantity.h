#pragma once

#include <cstdint>
#include <string_view>

#include "vgpu/result.h"

namespace vgpu {

/// Kubernetes resource.Quantity strings ("3000", "3Gi", "1.5", "500m", "1e3"), parsed
/// exactly by the grammar in apimachinery (reference/k8s-protocols.md section 5), with
/// integer arithmetic. Rounding is away from zero ("-500m" -> -1), as on Go's int64 path.
/// One deliberate difference: text without any digit ("-", ".", "Gi"), which Go reads as
/// zero, is an error here. No function throws; errors quote the (shortened) text.

/// The value as an integer, rounded up like Go's Quantity.Value() ("500m" -> 1).
/// Errors: malformed text, or a value outside int64.
Result<std::int64_t> parseQuantityValue(std::string_view text);

/// The value in thousandths, rounded up like Go's Quantity.MilliValue() ("1.5" -> 1500).
Result<std::int64_t> parseQuantityMilli(std::string_view text);

/// For extended resources: the value when it is a whole number ("must be an integer"
/// otherwise, as the apiserver says).
Result<std::int64_t> parseQuantityInteger(std::string_view text);

}  // namespace vgpu
