#include "vgpu/sdk/standard_rules.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace vgpu::sdk {
namespace {

bool containsIgnoringCase(std::string_view haystack, std::string_view needle) {
  if (needle.empty()) return true;
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != haystack.end();
}

bool anyModelMatches(const vgpu_str_list& list, const char* model) {
  if (list.count == 0) return false;
  for (size_t i = 0; i < list.count; ++i)
    if (containsIgnoringCase(model, list.items[i])) return true;
  return false;
}

bool anyIdEquals(const vgpu_str_list& list, const char* id) {
  if (list.count == 0) return false;
  for (size_t i = 0; i < list.count; ++i)
    if (std::string_view(list.items[i]) == id) return true;
  return false;
}

void refuse(vgpu_fit_result& r, vgpu_reason reason, std::uint64_t needed, std::uint64_t available) {
  r.fits = 0;
  r.reason = reason;
  r.needed = needed;
  r.available = available;
}

std::optional<std::int64_t> limitOf(const ContainerResources& c, const std::string& name) {
  if (name.empty()) return std::nullopt;
  auto it = c.limits.find(name);
  if (it == c.limits.end()) return std::nullopt;
  return it->second;
}

std::string annotationOf(const Annotations& a, const std::string& key) {
  if (key.empty()) return {};
  auto it = a.find(key);
  return it == a.end() ? std::string() : it->second;
}

Error invalid(const ContainerResources& c, const std::string& what) {
  return makeError("container \"" + c.name + "\": " + what);
}

}  // namespace

StandardResourceNames StandardResourceNames::resolve(const StandardResourceNames& d,
                                                     const ResourceNamesConfig& c) {
  StandardResourceNames out = d;
  if (c.count) out.count = *c.count;
  if (c.memory) out.memory = *c.memory;
  if (c.memoryPercent) out.memoryPercent = *c.memoryPercent;
  if (c.cores) out.cores = *c.cores;
  if (c.priority) out.priority = *c.priority;
  return out;
}

std::vector<ResourceName> StandardResourceNames::list() const {
  std::vector<ResourceName> out;
  if (!count.empty()) out.push_back({count, VGPU_RESOURCE_COUNT, true});
  if (!memory.empty()) out.push_back({memory, VGPU_RESOURCE_MEMORY, false});
  if (!memoryPercent.empty()) out.push_back({memoryPercent, VGPU_RESOURCE_MEMORY_PERCENT, false});
  if (!cores.empty()) out.push_back({cores, VGPU_RESOURCE_CORES, false});
  if (!priority.empty()) out.push_back({priority, VGPU_RESOURCE_PRIORITY, false});
  return out;
}

StandardRequestRules StandardRequestRules::withSettings(const BackendSettings& s) const {
  StandardRequestRules out = *this;
  if (s.memoryUnitMiB) out.memoryUnitMiB = *s.memoryUnitMiB;
  if (s.defaultMemoryMiB) out.defaultMemoryMiB = *s.defaultMemoryMiB;
  if (s.defaultCores) out.defaultCores = *s.defaultCores;
  if (s.defaultCount) out.defaultCount = *s.defaultCount;
  return out;
}

std::vector<std::string> splitList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = end + 1;
  }
  return out;
}

Result<std::optional<DeviceRequest>> parseStandardRequest(const StandardRequestRules& rules,
                                                          const ContainerResources& c,
                                                          const Annotations& annotations) {
  const auto& n = rules.names;
  const auto count = limitOf(c, n.count);
  const auto memory = limitOf(c, n.memory);
  const auto percent = limitOf(c, n.memoryPercent);
  const auto cores = limitOf(c, n.cores);
  const auto priority = limitOf(c, n.priority);
  if (!count && !memory && !percent && !cores) {
    if (priority) return invalid(c, n.priority + " is set but no " + n.count + " is requested");
    return std::optional<DeviceRequest>{};
  }

  DeviceRequest r;
  r.backend = rules.backend;
  if (count) {
    if (*count < 1) return invalid(c, n.count + " must be at least 1, got " + std::to_string(*count));
    if (*count > 1024) return invalid(c, n.count + " of " + std::to_string(*count) + " is more than any node has");
    r.count = static_cast<std::uint32_t>(*count);
  } else {
    r.count = rules.defaultCount;
  }
  if (memory && percent)
    return invalid(c, "set either " + n.memory + " or " + n.memoryPercent + ", not both");
  if (memory) {
    if (*memory < 1) return invalid(c, n.memory + " must be at least 1, got " + std::to_string(*memory));
    const auto maxUnits = static_cast<std::int64_t>((std::uint64_t{1} << 40) / rules.memoryUnitMiB);
    if (*memory > maxUnits) return invalid(c, n.memory + " of " + std::to_string(*memory) + " is too large");
    r.memoryMiB = static_cast<std::uint64_t>(*memory) * rules.memoryUnitMiB;
  } else if (percent) {
    if (*percent < 1 || *percent > 100)
      return invalid(c, n.memoryPercent + " must be between 1 and 100, got " + std::to_string(*percent));
    r.memoryPercent = static_cast<std::uint32_t>(*percent);
  } else {
    r.memoryMiB = rules.defaultMemoryMiB;  // 0 = whole device
  }
  if (cores) {
    if (*cores < 0 || *cores > 100)
      return invalid(c, n.cores + " must be between 0 and 100, got " + std::to_string(*cores));
    r.computePercent = static_cast<std::uint32_t>(*cores);
  } else {
    const bool wholeMemory = r.memoryMiB == 0 && (r.memoryPercent == 0 || r.memoryPercent == 100);
    r.computePercent = (wholeMemory && rules.defaultCores == 0) ? 100 : rules.defaultCores;
  }
  if (priority) {
    if (*priority < 0 || *priority > rules.maxPriority)
      return invalid(c, n.priority + " must be between 0 and " + std::to_string(rules.maxPriority) + ", got " +
                            std::to_string(*priority));
    r.priority = static_cast<std::int32_t>(*priority);
  }

  const auto& keys = rules.annotations;
  auto& k = r.constraints;
  k.includeModels = splitList(annotationOf(annotations, keys.includeModels));
  k.excludeModels = splitList(annotationOf(annotations, keys.excludeModels));
  k.includeIds = splitList(annotationOf(annotations, keys.includeIds));
  k.excludeIds = splitList(annotationOf(annotations, keys.excludeIds));
  const std::string numa = annotationOf(annotations, keys.numaBind);
  if (numa == "true") {
    k.numaBind = true;
  } else if (!numa.empty() && numa != "false") {
    return makeError("pod annotation " + keys.numaBind + " must be \"true\" or \"false\", got \"" + numa + "\"");
  }
  return std::optional<DeviceRequest>{std::move(r)};
}

Result<std::map<std::string, std::int64_t>> standardAdmissionDefaults(const StandardRequestRules& rules,
                                                                      const ContainerResources& c,
                                                                      const Annotations& annotations) {
  auto parsed = parseStandardRequest(rules, c, annotations);
  if (!parsed.ok()) return std::move(parsed).error();
  std::map<std::string, std::int64_t> add;
  if (!parsed->has_value()) return add;
  const DeviceRequest& r = **parsed;
  const auto& n = rules.names;
  if (!n.count.empty() && !c.limits.contains(n.count)) add[n.count] = r.count;
  if (!n.cores.empty() && !c.limits.contains(n.cores) && r.computePercent > 0) add[n.cores] = r.computePercent;
  return add;
}

std::uint64_t requestedMemoryMiB(const vgpu_device_request& request, const vgpu_device& device) {
  if (request.memory_mib != 0) return request.memory_mib;
  const std::uint32_t percent = request.memory_percent == 0 ? 100 : request.memory_percent;
  return device.memory_mib * percent / 100;
}

bool passesStandardFilters(const vgpu_device_request& q, const vgpu_device& d, vgpu_fit_result& r, std::string* why,
                           std::string_view noun) {
  // The hot path (every device of every node): words only for a caller that asks for them.
  auto refused = [&](vgpu_reason reason, std::uint64_t excluded) {
    refuse(r, reason, excluded, 0);
    if (why) {
      const std::string id = d.id ? d.id : "";
      *why = reason == VGPU_REASON_UNHEALTHY        ? id + " is unhealthy"
             : reason == VGPU_REASON_MODEL_MISMATCH ? std::string(d.model ? d.model : "") + " is not a model the pod asks for"
                                                    : id + " is not a " + std::string(noun) + " the pod asks for";
    }
    return false;
  };
  if (d.health != VGPU_HEALTHY) return refused(VGPU_REASON_UNHEALTHY, 0);
  if (q.include_models.count != 0 && !anyModelMatches(q.include_models, d.model))
    return refused(VGPU_REASON_MODEL_MISMATCH, 0);
  if (anyModelMatches(q.exclude_models, d.model)) return refused(VGPU_REASON_MODEL_MISMATCH, 1);
  if (q.include_ids.count != 0 && !anyIdEquals(q.include_ids, d.id)) return refused(VGPU_REASON_ID_MISMATCH, 0);
  if (anyIdEquals(q.exclude_ids, d.id)) return refused(VGPU_REASON_ID_MISMATCH, 1);
  return true;
}

void standardFit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                 vgpu_fit_result& r) {
  if (!passesStandardFilters(q, d, r)) return;

  const std::uint64_t memory = requestedMemoryMiB(q, d);
  if (memory > d.memory_mib) return refuse(r, VGPU_REASON_REQUEST_TOO_LARGE, memory, d.memory_mib);
  if (u.shares >= d.split_count) return refuse(r, VGPU_REASON_SHARES_EXHAUSTED, 1, d.split_count);
  // 100% means the device alone: all its compute units, whatever core scaling made of them.
  const bool alone = q.compute_percent >= 100;
  const std::uint32_t compute = alone ? d.compute_units : q.compute_percent;
  if (alone && u.shares > 0) return refuse(r, VGPU_REASON_EXCLUSIVE_CONFLICT, 100, u.shares);
  if (compute == 0 && u.compute >= d.compute_units) return refuse(r, VGPU_REASON_EXCLUSIVE_CONFLICT, 0, u.shares);
  const std::uint64_t freeMemory = d.memory_mib > u.memory_mib ? d.memory_mib - u.memory_mib : 0;
  if (memory > freeMemory) return refuse(r, VGPU_REASON_INSUFFICIENT_MEMORY, memory, freeMemory);
  const std::uint32_t freeCompute = d.compute_units > u.compute ? d.compute_units - u.compute : 0;
  if (compute > freeCompute) return refuse(r, VGPU_REASON_INSUFFICIENT_COMPUTE, compute, freeCompute);

  r.fits = 1;
  r.reason = VGPU_REASON_NONE;
  r.take = {1, compute, memory};
}

}  // namespace vgpu::sdk
