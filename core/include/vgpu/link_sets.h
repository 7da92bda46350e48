#pragma once
// The measure of the `topology` device policy: how well a set of devices is linked, and
// the search for the best set (docs/placement.md, "The topology policy").

#include <cstdint>
#include <memory>
#include <vector>
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

/// The best `count` of `candidates` (positions in `inventory`) by LinkSetScore; among sets
/// of equal score, the one first by candidate index (compared member by member, the lowest
/// first): callers list the candidates in their policy's order, so that where links do not
/// decide, load does (docs/placement.md, "Tie-breaks"). `numa` (one per candidate, or empty)
/// restricts the sets to one NUMA node. Returns a mask of chosen candidate indices (bit i =
/// candidates[i]) and fills `score`; `tied`, when given, receives every set of the best
/// score in increasing mask order. nullopt when no set qualifies or the search would be too
/// large.
std::optional<std::uint64_t> bestLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> candidates,
                                           std::span<const int> numa, std::size_t count, LinkSetScore* score = nullptr,
                                           std::vector<std::uint64_t>* tied = nullptr);

/// bestLinkedSet answered ahead for one backend group of a node: for every set of fitting
/// devices and every count, the best sets (several where links tie; placement's order
/// picks among them, as load cannot be known ahead). Built once per distinct group shape (its link
/// ranks and NUMA nodes: on a cluster of like nodes, once) and shared by every inventory of
/// that shape; placement then looks up instead of searching. Immutable, thread-safe.
class LinkTable {
 public:
  /// Groups of more devices get no table; placement searches for them instead.
  static constexpr std::size_t kMaxDevices = 10;

  /// The table for the group at `positions` of `inventory`, or null when it is too large.
  static std::shared_ptr<const LinkTable> forGroup(const NodeInventory& inventory,
                                                   std::span<const std::uint32_t> positions);

  /// Every best `count` of `fitting` (bit i = the group's i-th device) by LinkSetScore,
  /// within one NUMA node when `sameNuma`: one set, or several of equal score that the
  /// caller's order must separate; the first is the one first by device position. Empty
  /// when no set qualifies.
  std::span<const std::uint16_t> best(std::uint32_t fitting, std::size_t count, bool sameNuma) const {
    if (count == 0 || count > size_ || fitting >> size_ != 0) return {};
    const Answer& a = (sameNuma ? sameNuma_ : any_)[((count - 1) << size_) | fitting];
    return {sets_.data() + a.at, a.sets};
  }

 private:
  struct Answer {
    std::uint32_t at = 0;    // the first of its sets in sets_
    std::uint32_t sets = 0;  // how many sets tie for best
  };
  std::size_t size_ = 0;
  std::vector<Answer> any_, sameNuma_;  // [(count - 1) << size | fitting]
  std::vector<std::uint16_t> sets_;     // the answers' sets, each answer's together
};

/// Words for a chosen set and what it left whole, by device index, e.g.
/// "devices 0-3: switch-fabric all-to-all; 4-7 kept whole (direct)". `chosen` and `left`
/// are positions in `inventory` (left: the free devices of the same backend not chosen).
std::string describeLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> chosen,
                              std::span<const std::uint32_t> left);

}  // namespace vgpu
