#pragma once
// Compute-unit masks of a vDCU: two 64-bit bitmaps (CUs 0-63 and 64-127), as the vDCU
// configuration file writes them.

#include <bit>
#include <cstdint>
#include <optional>
#include <string>

#include "vgpu/result.h"

namespace vgpu::hygon {

inline constexpr std::uint32_t kMaxComputeUnits = 128;

struct CuMask {
  std::uint64_t low = 0;   ///< CUs 0..63
  std::uint64_t high = 0;  ///< CUs 64..127

  std::uint32_t count() const { return static_cast<std::uint32_t>(std::popcount(low) + std::popcount(high)); }
  bool empty() const { return low == 0 && high == 0; }
  bool overlaps(const CuMask& o) const { return (low & o.low) != 0 || (high & o.high) != 0; }
  bool test(std::uint32_t cu) const { return cu < 64 ? (low >> cu) & 1u : (high >> (cu - 64)) & 1u; }
  void set(std::uint32_t cu) { (cu < 64 ? low : high) |= std::uint64_t{1} << (cu % 64); }
  CuMask& operator|=(const CuMask& o) { low |= o.low; high |= o.high; return *this; }
  CuMask& operator&=(const CuMask& o) { low &= o.low; high &= o.high; return *this; }
  CuMask operator~() const { return {~low, ~high}; }
  bool operator==(const CuMask&) const = default;

  /// The first `n` CUs set (n <= 128).
  static CuMask firstN(std::uint32_t n);
};

/// "0x" and 16 lowercase hex digits, the form of a `cu_mask:` line.
std::string toHex(std::uint64_t bits);
/// Parses toHex's form (any case, 1..16 digits); errors name the text.
Result<std::uint64_t> parseHex(const std::string& text);

/// `want` CUs of a device with `total` CUs that are not in `used`: the smallest contiguous
/// free run that holds them (keeps larger runs free for larger requests), else the lowest
/// free CUs. nullopt when fewer than `want` are free.
std::optional<CuMask> allocateComputeUnits(const CuMask& used, std::uint32_t total, std::uint32_t want);

}  // namespace vgpu::hygon
