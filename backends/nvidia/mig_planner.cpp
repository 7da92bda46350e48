#include "mig_planner.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "vgpu/sdk/standard_rules.h"

namespace vgpu::nvidia {
namespace {

bool overlaps(unsigned aStart, unsigned aSize, unsigned bStart, unsigned bSize) {
  return aStart < bStart + bSize && bStart < aStart + aSize;
}

bool hasMediaExtensions(const MigProfile& p) { return p.name.find("+me") != std::string::npos; }

std::optional<unsigned> number(std::string_view s) {
  unsigned v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  for (char c : s) {
    if (c == sep) {
      out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(item);
  return out;
}

}  // namespace

MigPlanner::MigPlanner(std::vector<MigProfile> profiles, std::vector<std::string> allowed) : all_(std::move(profiles)) {
  for (const auto& p : all_) {
    computeSlices_ = std::max(computeSlices_, p.slices);
    const bool listed = allowed.empty() || std::find(allowed.begin(), allowed.end(), p.name) != allowed.end();
    if (listed && !hasMediaExtensions(p) && !p.starts.empty()) profiles_.push_back(p);
  }
  std::stable_sort(profiles_.begin(), profiles_.end(), [](const MigProfile& a, const MigProfile& b) {
    return std::tie(a.memoryMiB, a.slices) < std::tie(b.memoryMiB, b.slices);
  });
}

const MigProfile* MigPlanner::byId(unsigned id) const {
  for (const auto& p : all_)
    if (p.id == id) return &p;
  return nullptr;
}

const MigProfile* MigPlanner::byName(const std::string& name) const {
  for (const auto& p : all_)
    if (p.name == name) return &p;
  return nullptr;
}

std::optional<std::string> MigPlanner::blocked(const MigProfile& p, unsigned start,
                                               const std::vector<MigOccupant>& occupants) const {
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end())
    return "slice " + std::to_string(start) + " is no place for a " + p.name;
  std::string holders;
  unsigned holderCount = 0, same = 0, computeUsed = 0;
  for (const auto& o : occupants) {
    const MigProfile* op = byId(o.profileId);
    if (o.profileId == p.id) ++same;
    computeUsed += op ? op->slices : 0;
    if (!overlaps(o.start, o.size, start, p.placementSize)) continue;
    holders += std::string(holderCount++ ? " and " : "") + "a " + (op ? op->name : "profile " + std::to_string(o.profileId));
  }
  if (holderCount > 0)
    return describeSlices(start, p.placementSize) + (p.placementSize > 1 ? " hold " : " holds ") + holders;
  if (same >= p.instances)
    return "the GPU already has its " + std::to_string(p.instances) + " " + p.name + " instance" +
           (p.instances > 1 ? "s" : "");
  if (computeUsed + p.slices > computeSlices_)
    return std::to_string(computeSlices_ - std::min(computeUsed, computeSlices_)) + " of the GPU's " +
           std::to_string(computeSlices_) + " compute slices are free, a " + p.name + " takes " +
           std::to_string(p.slices);
  return std::nullopt;
}

const MigProfile* MigPlanner::smallestWith(std::uint64_t memoryMiB) const {
  for (const auto& p : profiles_)
    if (p.memoryMiB >= memoryMiB) return &p;
  return nullptr;
}

std::string MigPlanner::token(const MigPlan& plan) {
  const unsigned size = std::max(plan.profile->placementSize, 1u);
  return plan.profile->name + '@' + std::to_string(plan.start) +
         (size > 1 ? '-' + std::to_string(plan.start + size - 1) : std::string());
}

Result<MigPlan> MigPlanner::fromToken(const std::string& text) const {
  auto bad = [&](const std::string& why) {
    return makeError("MIG placement \"" + text + "\" " + why);
  };
  const auto at = text.rfind('@');
  if (at == std::string::npos || at == 0) return bad("is not <profile>@<first slice>-<last slice>");
  const MigProfile* p = byName(text.substr(0, at));
  if (p == nullptr) return bad("names a profile this GPU does not have");
  const std::string_view place = std::string_view(text).substr(at + 1);
  const auto dash = place.find('-');
  const auto first = number(place.substr(0, dash));
  const auto last = dash == std::string_view::npos ? first : number(place.substr(dash + 1));
  if (!first || !last || *last < *first) return bad("is not <profile>@<first slice>-<last slice>");
  if (*last - *first + 1 != std::max(p->placementSize, 1u) ||
      std::find(p->starts.begin(), p->starts.end(), *first) == p->starts.end())
    return bad("is no place of a " + p->name + " on this GPU");
  return MigPlan{p, *first};
}

Result<std::vector<MigOccupant>> occupantsWith(const MigPlanner& planner, std::vector<MigOccupant> inventory,
                                               const vgpu_str_list& tokens) {
  const std::size_t listed = inventory.size();
  for (std::size_t i = 0; i < tokens.count; ++i) {
    auto plan = planner.fromToken(tokens.items[i] ? tokens.items[i] : "");
    if (!plan.ok()) return std::move(plan).error();
    const MigOccupant o{plan->profile->id, plan->start, plan->profile->placementSize};
    const auto seen = std::find_if(inventory.begin(), inventory.begin() + static_cast<std::ptrdiff_t>(listed),
                                   [&](const MigOccupant& x) { return x.start == o.start && x.size == o.size; });
    if (seen == inventory.begin() + static_cast<std::ptrdiff_t>(listed)) inventory.push_back(o);
  }
  return inventory;
}

Result<MigPlan> MigPlanner::plan(std::uint64_t memoryMiB, const std::vector<MigOccupant>& occupants) const {
  const MigProfile* firstFitting = nullptr;
  for (const auto& p : profiles_) {
    if (p.memoryMiB < memoryMiB) continue;
    if (firstFitting == nullptr) firstFitting = &p;
    std::optional<MigPlan> best;
    std::tuple<std::uint64_t, unsigned, unsigned> bestRoom{};
    for (unsigned start : p.starts) {
      if (blocked(p, start, occupants)) continue;
      // Room left for more instances: the largest profile still placeable, then how many
      // placements of every profile stay free, then the higher start (fill from the end).
      std::vector<MigOccupant> after = occupants;
      after.push_back({p.id, start, p.placementSize});
      std::uint64_t largest = 0;
      unsigned freePlacements = 0;
      for (const auto& q : profiles_) {
        for (unsigned s : q.starts) {
          if (blocked(q, s, after)) continue;
          ++freePlacements;
          largest = std::max(largest, q.memoryMiB);
        }
      }
      const auto room = std::make_tuple(largest, freePlacements, start);
      if (!best || room > bestRoom) {
        best = MigPlan{&p, start};
        bestRoom = room;
      }
    }
    if (best) return *best;
  }
  if (firstFitting == nullptr) {
    if (profiles_.empty()) return makeError("no MIG profile of this GPU is allowed");
    const MigProfile& largest = *std::max_element(profiles_.begin(), profiles_.end(), [](const auto& a, const auto& b) {
      return a.memoryMiB < b.memoryMiB;
    });
    return makeError("no MIG profile of this GPU has " + std::to_string(memoryMiB) + " MiB (the largest allowed, " +
                     largest.name + ", has " + std::to_string(largest.memoryMiB) + " MiB)");
  }
  std::string why;
  for (unsigned start : firstFitting->starts) {
    auto b = blocked(*firstFitting, start, occupants);
    if (b && why.find(*b) == std::string::npos) why += (why.empty() ? "" : "; ") + *b;
  }
  return makeError("no free " + firstFitting->name + " placement: " + why);
}

std::string encodeMigProfiles(const std::vector<MigProfile>& profiles) {
  std::string out;
  for (const auto& p : profiles) {
    if (!out.empty()) out += ';';
    out += p.name + ':' + std::to_string(p.id) + ':' + std::to_string(p.slices) + ':' + std::to_string(p.instances) +
           ':' + std::to_string(p.memoryMiB) + ':' + std::to_string(p.placementSize) + ':';
    for (std::size_t i = 0; i < p.starts.size(); ++i) out += (i ? "," : "") + std::to_string(p.starts[i]);
  }
  return out;
}

Result<std::vector<MigProfile>> decodeMigProfiles(const std::string& text) {
  std::vector<MigProfile> out;
  if (text.empty()) return out;
  for (const auto& item : split(text, ';')) {
    auto f = split(item, ':');
    auto bad = [&] { return makeError("MIG profile \"" + item + "\" is not name:id:slices:instances:MiB:size:starts"); };
    if (f.size() != 7 || f[0].empty()) return bad();
    MigProfile p;
    p.name = f[0];
    auto id = number(f[1]), slices = number(f[2]), instances = number(f[3]), size = number(f[5]);
    std::uint64_t memory = 0;
    auto [end, ec] = std::from_chars(f[4].data(), f[4].data() + f[4].size(), memory);
    if (!id || !slices || !instances || !size || ec != std::errc() || end != f[4].data() + f[4].size()) return bad();
    p.id = *id;
    p.slices = *slices;
    p.instances = *instances;
    p.memoryMiB = memory;
    p.placementSize = *size;
    for (const auto& s : sdk::splitList(f[6])) {
      auto start = number(s);
      if (!start) return bad();
      p.starts.push_back(*start);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string encodeMigOccupants(const std::vector<MigOccupant>& occupants) {
  std::string out;
  for (const auto& o : occupants)
    out += (out.empty() ? "" : ",") + std::to_string(o.profileId) + '@' + std::to_string(o.start) + ':' +
           std::to_string(o.size);
  return out;
}

Result<std::vector<MigOccupant>> decodeMigOccupants(const std::string& text) {
  std::vector<MigOccupant> out;
  for (const auto& item : sdk::splitList(text)) {
    const auto at = item.find('@'), colon = item.find(':');
    if (at == std::string::npos || colon == std::string::npos || colon < at)
      return makeError("MIG instance \"" + item + "\" is not profile@start:size");
    auto id = number(std::string_view(item).substr(0, at));
    auto start = number(std::string_view(item).substr(at + 1, colon - at - 1));
    auto size = number(std::string_view(item).substr(colon + 1));
    if (!id || !start || !size) return makeError("MIG instance \"" + item + "\" is not profile@start:size");
    out.push_back({*id, *start, *size});
  }
  return out;
}

}  // namespace vgpu::nvidia
