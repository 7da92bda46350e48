#include "vgpu/link_sets.h"

#include <algorithm>
#include <array>
#include <bit>
#include <map>
#include <mutex>
#include <vector>

namespace vgpu {
namespace {

/// C(n, k), saturating at kMaxLinkSets + 1: only "too many" matters beyond that.
std::uint64_t setCount(std::size_t n, std::size_t k) {
  std::uint64_t c = 1;
  for (std::size_t i = 1; i <= k; ++i) {
    c = c * (n - k + i) / i;
    if (c > kMaxLinkSets) return kMaxLinkSets + 1;
  }
  return c;
}

/// The pair ranks among the candidates, copied once per search (the inventory's matrix is
/// indexed by position, the search by candidate).
struct Matrix {
  std::size_t n = 0;
  std::vector<std::uint16_t> rank;
  std::vector<std::uint64_t> rowSum;  // each candidate's ranks to all the others
  std::uint64_t total = 0;            // every pair once

  std::uint16_t at(std::size_t a, std::size_t b) const { return rank[a * n + b]; }
};

/// Of two sets of equal size, the one first member by member: the one holding the lowest
/// index where they differ.
constexpr std::uint64_t firstMemberwise(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t differ = a ^ b;
  return (a & differ & (~differ + 1)) != 0 ? a : b;
}

Matrix& scratchMatrix() {
  thread_local Matrix m;
  return m;
}

std::string indexRange(const NodeInventory& inventory, std::span<const std::uint32_t> positions) {
  std::vector<int> indices;
  for (std::uint32_t p : positions) indices.push_back(inventory.entries()[p].device().index);
  std::sort(indices.begin(), indices.end());
  std::string out;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(indices[i]);
    if (j > i) out += (j == i + 1 ? "," : "-") + std::to_string(indices[j]);
    i = j + 1;
  }
  return out;
}

/// The link class and lanes of the slowest pair among `positions`.
std::string slowestLink(const NodeInventory& inventory, std::span<const std::uint32_t> positions) {
  const DeviceLink* slowest = nullptr;
  bool unknown = false;
  for (std::uint32_t a : positions) {
    for (std::uint32_t b : positions) {
      if (a == b) continue;
      const Device& d = inventory.entries()[a].device();
      const std::string& peer = inventory.entries()[b].device().id;
      auto link = std::find_if(d.links.begin(), d.links.end(), [&](const DeviceLink& l) { return l.peer == peer; });
      if (link == d.links.end() || link->rank == 0) {
        unknown = true;
      } else if (slowest == nullptr || link->rank < slowest->rank) {
        slowest = &*link;
      }
    }
  }
  if (unknown || slowest == nullptr) return "links unknown";
  std::string words = toString(slowest->linkClass);
  if (slowest->lanes > 1) words += " x" + std::to_string(slowest->lanes);
  return words + (positions.size() > 2 ? " all-to-all" : "");
}

}  // namespace

std::optional<std::uint64_t> bestLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> candidates,
                                           std::span<const int> numa, std::size_t count, LinkSetScore* score,
                                           std::vector<std::uint64_t>* tied) {
  const std::size_t n = candidates.size();
  if (count == 0 || count > n || n > kMaxLinkCandidates || setCount(n, count) > kMaxLinkSets) return std::nullopt;
  Matrix& m = scratchMatrix();
  m.n = n;
  m.rank.assign(n * n, 0);
  m.rowSum.assign(n, 0);
  m.total = 0;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const auto r = static_cast<std::uint16_t>(inventory.linkRank(candidates[a], candidates[b]));
      m.rank[a * n + b] = r;
      m.rowSum[a] += r;
      if (a < b) m.total += r;
    }
  }
  std::optional<std::uint64_t> best;
  LinkSetScore bestScore{};
  if (tied) tied->clear();
  std::array<std::uint8_t, kMaxLinkCandidates> members{};
  // Every `count`-bit mask below 2^n, in increasing order (Gosper's hack).
  const std::uint64_t limit = std::uint64_t{1} << n;
  for (std::uint64_t set = (std::uint64_t{1} << count) - 1; set < limit;) {
    std::size_t k = 0;
    for (std::uint64_t bits = set; bits != 0; bits &= bits - 1)
      members[k++] = static_cast<std::uint8_t>(std::countr_zero(bits));
    bool sameNuma = true;
    if (!numa.empty())
      for (std::size_t i = 1; i < k && sameNuma; ++i) sameNuma = numa[members[i]] == numa[members[0]];
    if (sameNuma) {
      LinkSetScore s;
      std::uint64_t rows = 0;
      for (std::size_t i = 0; i < k; ++i) {
        rows += m.rowSum[members[i]];
        for (std::size_t j = i + 1; j < k; ++j) {
          const std::uint16_t r = m.at(members[i], members[j]);
          s.worst = std::min<std::uint32_t>(s.worst, r);
          s.sum += r;
        }
      }
      // rows counts the set's inner pairs twice and each pair to the rest once.
      s.remainder = m.total - (rows - s.sum);
      if (!best || s > bestScore) {
        best = set;
        bestScore = s;
        if (tied) tied->clear();
      } else if (s == bestScore) {
        best = firstMemberwise(*best, set);
      }
      if (tied && s == bestScore) tied->push_back(set);
    }
    const std::uint64_t low = set & (~set + 1);
    const std::uint64_t ripple = set + low;
    set = ripple | (((ripple ^ set) >> 2) / low);
  }
  if (best && score) *score = bestScore;
  return best;
}

std::shared_ptr<const LinkTable> LinkTable::forGroup(const NodeInventory& inventory,
                                                    std::span<const std::uint32_t> positions) {
  const std::size_t n = positions.size();
  if (n == 0 || n > kMaxDevices) return nullptr;
  // The shape: ranks between the group's devices, then their NUMA nodes.
  std::vector<std::int32_t> shape;
  shape.reserve(n * n + n);
  for (std::uint32_t a : positions)
    for (std::uint32_t b : positions) shape.push_back(static_cast<std::int32_t>(inventory.linkRank(a, b)));
  for (std::uint32_t a : positions) shape.push_back(inventory.entries()[a].c().numa_node);
  static std::mutex mutex;
  static std::map<std::vector<std::int32_t>, std::weak_ptr<const LinkTable>> shared;
  std::lock_guard lock(mutex);
  if (auto known = shared[shape].lock()) return known;

  auto table = std::make_shared<LinkTable>();
  table->size_ = n;
  table->any_.assign(n << n, {});
  table->sameNuma_.assign(n << n, {});
  std::vector<std::uint32_t> fitting;
  std::vector<int> numa;
  std::vector<std::uint64_t> tied;
  for (std::uint32_t mask = 1; mask < (1u << n); ++mask) {
    fitting.clear();
    numa.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if ((mask >> i & 1u) == 0) continue;
      fitting.push_back(positions[i]);
      numa.push_back(inventory.entries()[positions[i]].c().numa_node);
    }
    // Set bits of the answer are indices into `fitting`: back to the group's indices.
    auto toGroup = [&](std::uint64_t chosen) {
      std::uint16_t out = 0;
      std::size_t k = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (mask >> i & 1u) {
          if (chosen >> k & 1u) out = static_cast<std::uint16_t>(out | 1u << i);
          ++k;
        }
      return out;
    };
    // The sets of an answer, the one first by position first (fitting is in group order).
    auto keep = [&](std::uint64_t first, Answer& answer) {
      answer.at = static_cast<std::uint32_t>(table->sets_.size());
      answer.sets = static_cast<std::uint32_t>(tied.size());
      table->sets_.push_back(toGroup(first));
      for (std::uint64_t set : tied)
        if (set != first) table->sets_.push_back(toGroup(set));
    };
    for (std::size_t count = 1; count <= fitting.size(); ++count) {
      const std::size_t at = ((count - 1) << n) | mask;
      if (auto any = bestLinkedSet(inventory, fitting, {}, count, nullptr, &tied)) keep(*any, table->any_[at]);
      if (auto one = bestLinkedSet(inventory, fitting, numa, count, nullptr, &tied)) keep(*one, table->sameNuma_[at]);
    }
  }
  for (auto it = shared.begin(); it != shared.end();) it = it->second.expired() ? shared.erase(it) : std::next(it);
  shared[shape] = table;
  return table;
}

std::string describeLinkedSet(const NodeInventory& inventory, std::span<const std::uint32_t> chosen,
                              std::span<const std::uint32_t> left) {
  std::string out = (chosen.size() == 1 ? "device " : "devices ") + indexRange(inventory, chosen);
  if (chosen.size() > 1) out += ": " + slowestLink(inventory, chosen);
  // What is left, in islands: devices joined by the best link among them.
  std::uint32_t top = 0;
  for (std::uint32_t a : left)
    for (std::uint32_t b : left)
      if (a != b) top = std::max(top, inventory.linkRank(a, b));
  if (top == 0) return out;
  std::vector<bool> seen(left.size(), false);
  for (std::size_t i = 0; i < left.size(); ++i) {
    if (seen[i]) continue;
    std::vector<std::uint32_t> island{left[i]};
    seen[i] = true;
    for (std::size_t grown = 0; grown < island.size(); ++grown)
      for (std::size_t j = 0; j < left.size(); ++j)
        if (!seen[j] && inventory.linkRank(island[grown], left[j]) == top) {
          seen[j] = true;
          island.push_back(left[j]);
        }
    if (island.size() < 2) continue;
    out += "; " + indexRange(inventory, island) + " kept whole (" + slowestLink(inventory, island) + ")";
  }
  return out;
}

}  // namespace vgpu
