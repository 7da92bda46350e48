#include "namespace_quota.h"

#include <algorithm>

#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include "vgpu/k8s/object.h"
#include "vgpu/quantity.h"

namespace vgpu::scheduler {
namespace {

constexpr std::string_view kQuotaPrefixes[] = {"requests.", "limits."};

/// MiB per unit of `backend`'s memory resource, as its parser reads one unit of it.
std::uint64_t probeUnitMiB(const Backend& backend, const std::string& countResource, const std::string& memoryResource) {
  ContainerResources probe{"probe", false, {{memoryResource, 1}}};
  if (!countResource.empty()) probe.limits[countResource] = 1;
  auto request = backend.allocator().parseRequest(probe, {});
  return request.ok() && *request && (*request)->memoryMiB > 0 ? (*request)->memoryMiB : 1;
}

/// Per resource, max(sum over app containers, largest init container) of `perContainer`.
QuotaUsage podTotal(const std::vector<std::pair<bool, QuotaUsage>>& perContainer) {
  QuotaUsage app, init;
  for (const auto& [isInit, usage] : perContainer)
    for (const auto& [resource, amount] : usage) {
      if (isInit) init[resource] = std::max(init[resource], amount);
      else app[resource] += amount;
    }
  for (const auto& [resource, amount] : init) app[resource] = std::max(app[resource], amount);
  std::erase_if(app, [](const auto& kv) { return kv.second == 0; });
  return app;
}

}  // namespace

QuotaResources::QuotaResources(const BackendSet& backends) {
  for (const auto& b : backends.all()) {
    std::string count, memory, cores;
    for (const auto& r : b->allocator().resources()) {
      if (r.role == VGPU_RESOURCE_COUNT && count.empty()) count = r.name;
      if (r.role == VGPU_RESOURCE_MEMORY && memory.empty()) memory = r.name;
      if (r.role == VGPU_RESOURCE_CORES && cores.empty()) cores = r.name;
    }
    if (!memory.empty()) entries_.push_back({memory, true, probeUnitMiB(*b, count, memory)});
    if (!cores.empty()) entries_.push_back({cores, false, 1});
    byBackend_[b->name()] = {memory, cores};
  }
}

const QuotaResources::Entry* QuotaResources::find(std::string_view resource) const {
  for (const auto& e : entries_)
    if (e.resource == resource) return &e;
  return nullptr;
}

bool QuotaResources::known(std::string_view resource) const { return find(resource) != nullptr; }

std::uint64_t QuotaResources::unitMiB(std::string_view resource) const {
  const Entry* e = find(resource);
  return e ? e->unitMiB : 1;
}

std::int64_t QuotaResources::inUnits(std::string_view resource, std::int64_t amount) const {
  const auto unit = static_cast<std::int64_t>(unitMiB(resource));
  return (amount + unit - 1) / unit;
}

bool QuotaResources::isMemory(std::string_view resource) const {
  const Entry* e = find(resource);
  return e && e->memory;
}

void QuotaResources::add(QuotaUsage& usage, const std::string& backend, std::int64_t memoryMiB, std::int64_t compute) const {
  auto names = byBackend_.find(backend);
  if (names == byBackend_.end()) return;
  if (!names->second.first.empty()) usage[names->second.first] += memoryMiB;
  if (!names->second.second.empty()) usage[names->second.second] += compute;
}

QuotaUsage QuotaResources::usage(const Assignment& assignment) const {
  std::vector<std::pair<bool, QuotaUsage>> perContainer;
  for (const auto& c : assignment.containers) {
    QuotaUsage u;
    for (const auto& g : c.devices) add(u, g.backend, static_cast<std::int64_t>(g.memoryMiB), g.compute);
    perContainer.emplace_back(c.init, std::move(u));
  }
  return podTotal(perContainer);
}

QuotaUsage QuotaResources::leastUsage(const PodRequest& request) const {
  std::vector<std::pair<bool, QuotaUsage>> perContainer;
  for (const auto& c : request.containers) {
    QuotaUsage u;
    for (const auto& r : c.requests)
      add(u, r.backend, static_cast<std::int64_t>(r.count * r.memoryMiB), static_cast<std::int64_t>(r.count) * r.computePercent);
    perContainer.emplace_back(c.init, std::move(u));
  }
  return podTotal(perContainer);
}

std::vector<QuotaLimit> parseResourceQuota(const boost::json::object& quota, const QuotaResources& resources) {
  std::vector<QuotaLimit> out;
  const auto* spec = quota.if_contains("spec");
  const auto* hard = spec && spec->is_object() ? spec->as_object().if_contains("hard") : nullptr;
  if (!hard || !hard->is_object()) return out;
  for (const auto& [key, value] : hard->as_object()) {
    for (std::string_view prefix : kQuotaPrefixes) {
      if (key.substr(0, prefix.size()) != prefix || !resources.known(key.substr(prefix.size()))) continue;
      const std::string resource(key.substr(prefix.size()));
      auto amount = value.is_string() ? parseQuantityInteger(std::string_view(value.as_string()))
                                      : Result<std::int64_t>(makeError("expected a quantity string"));
      if (!amount.ok()) {
        spdlog::warn("resourcequota={}/{} {} is not counted: {}", k8s::namespaceOf(quota), k8s::name(quota),
                     std::string_view(key), amount.error().message);
        continue;
      }
      out.push_back({std::string(k8s::name(quota)), std::string(key), resource, *amount,
                     *amount * static_cast<std::int64_t>(resources.unitMiB(resource))});
    }
  }
  return out;
}

std::string quotaExceeded(const std::string& ns, const std::vector<QuotaLimit>& limits, const QuotaUsage& used,
                          const QuotaUsage& asked, const QuotaResources& resources) {
  for (const auto& limit : limits) {
    auto a = asked.find(limit.resource);
    if (a == asked.end() || a->second == 0) continue;
    auto u = used.find(limit.resource);
    const std::int64_t inUse = u == used.end() ? 0 : u->second;
    if (inUse + a->second <= limit.hardAmount) continue;
    const bool memory = resources.isMemory(limit.resource);
    const std::uint64_t unit = resources.unitMiB(limit.resource);
    const std::string what = memory ? " MiB" : "%";
    std::string hard = std::to_string(limit.hard);
    if (memory && unit != 1) hard += " (x " + std::to_string(unit) + " MiB = " + std::to_string(limit.hardAmount) + " MiB)";
    else if (memory) hard += " MiB";
    else hard += "%";
    std::string out = "namespace " + ns + ": ResourceQuota " + limit.quota + " limits " + limit.key + " to " + hard +
                      "; the pod asks for " + std::to_string(a->second) + what;
    if (inUse > 0) out += " and the namespace's pods hold " + std::to_string(inUse) + what;
    return out;
  }
  return {};
}

void addUsage(QuotaUsage& total, const QuotaUsage& delta, int sign) {
  for (const auto& [resource, amount] : delta) {
    auto& t = total[resource];
    t += sign * amount;
    if (t <= 0) total.erase(resource);
  }
}

}  // namespace vgpu::scheduler
