#pragma once
// The measure of the `topology` device policy: how well a set of devices is linked, and
// the search for the best set (docs/placement.md, "The topology policy").

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "vgpu/node_state.h"

namespace vgpu {

/// How well a set of devices is linked, compared field by field (higher is better).
struct LinkSetScore {
  /// The slowest pair's rank; kMaxLinkRank for a single device (no pair to be slow).
  std::uint32_t worst = kMaxLinkRank;
  std::uint64_t sum = 0;        ///< The ranks of all pairs in the set, added.
  std::uint64_t remainder = 0;  ///< The same sum over the candidates left out: what later pods get.

  auto operator<=>(const LinkSetScore&) const = default;
};

/// The most candidates and sets bestLinkedSet searches; beyond either it gives up (nullopt)
/// and the caller falls back to its ordinary order.
inline constexpr std::size_t kMaxLinkCandidates = 63;
inline constexpr std::uint64_t kMaxLinkSets = 1u << 16;

/// The best `count` of `candidates` (positions in `inventory`) by LinkSetScore; ties go to
/// the set with the lower positions. `numa` (one per candidate, or empty) restricts the
/// sets to one NUMA node. Returns a mask of chosen candidate indices (bit i = candidates[i])
/// and fills `score`; nullopt when no set qualifies or the search would be too large.
std::optional<std::uint64_t> bestLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> candidates,
                                           std::span<const int> numa, std::size_t count, LinkSetScore* score = nullptr);

/// Words for a chosen set and what it left whole, by device index, e.g.
/// "devices 0-3: switch-fabric all-to-all; 4-7 kept whole (direct)". `chosen` and `left`
/// are positions in `inventory` (left: the free devices of the same backend not chosen).
std::string describeLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> chosen,
                              std::span<const std::uint32_t> left);

}  // namespace vgpu
