#include "allocator.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gpu_info.h"
#include "mig_planner.h"
#include "vgpu/allocator.h"
#include "vgpu/hami_type_name.h"
#include "vgpu/sdk/backend_adapter.h"

namespace vgpu::nvidia {
namespace {

const char* attribute(const vgpu_device& d, const char* key) {
  for (size_t i = 0; i < d.attributes.count; ++i) {
    const vgpu_kv& kv = d.attributes.items[i];
    if (kv.key != nullptr && std::strcmp(kv.key, key) == 0) return kv.value;
  }
  return nullptr;
}

void refuse(vgpu_fit_result& r, std::int32_t reason) {
  r = vgpu_fit_result{};
  r.reason = reason;
}

/// The standard rules, with the pod's type filters (nvidia.com/use-gputype, nouse-gputype)
/// read against HAMi's type name of the GPU: the NVML name with "NVIDIA-" in front unless it
/// starts with "NVIDIA" ("Tesla T4" is "NVIDIA-Tesla T4").
void fitByType(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u, vgpu_fit_result& r) {
  if (q.include_models.count == 0 && q.exclude_models.count == 0) return sdk::standardFit(q, d, u, r);
  const std::string type = hamiTypeName("NVIDIA", d.model);
  vgpu_device typed = d;
  typed.model = type.c_str();
  sdk::standardFit(q, typed, u, r);
}

}  // namespace

sdk::StandardResourceNames defaultResourceNames() {
  return {"nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores",
          "nvidia.com/priority"};
}

sdk::ConstraintAnnotationKeys annotationKeys() {
  return {"nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "nvidia.com/use-gpuuuid", "nvidia.com/nouse-gpuuuid",
          "nvidia.com/numa-bind"};
}

NvidiaAllocator::NvidiaAllocator(const BackendParams& params, MigServing mig) : mig_(std::move(mig)) {
  rules_.backend = params.name.empty() ? "nvidia" : params.name;
  rules_.names = sdk::StandardResourceNames::resolve(defaultResourceNames(), params.resources);
  rules_.annotations = annotationKeys();
  // libvgpu.so orders work by CUDA_TASK_PRIORITY 0 (high) or 1 (low), as HAMi-core does.
  rules_.maxPriority = 1;
  rules_ = rules_.withSettings(params.settings);
  resources_ = rules_.names.list();
  if (mig_.strategy == MigStrategy::kMixed) {
    for (const auto& profile : mig_.profiles) {
      const std::string name = migResourceName(rules_.names.count, profile);
      migResources_[name] = profile;
      resources_.push_back({name, VGPU_RESOURCE_COUNT, true});
    }
  }
}

Result<std::optional<DeviceRequest>> NvidiaAllocator::parseRequest(const ContainerResources& container,
                                                                   const Annotations& annotations) const {
  std::string asked, profile;
  for (const auto& [name, value] : container.limits) {
    auto it = migResources_.find(name);
    if (it == migResources_.end() || value == 0) continue;
    if (!asked.empty())
      return makeError("container \"" + container.name + "\" asks for " + asked + " and " + name +
                       "; a container takes MIG devices of one profile");
    asked = name;
    profile = it->second;
  }
  if (asked.empty()) return sdk::parseStandardRequest(rules_, container, annotations);
  if (auto count = container.limits.find(rules_.names.count); count != container.limits.end() && count->second != 0)
    return makeError("container \"" + container.name + "\" asks for both " + rules_.names.count + " and " + asked +
                     "; with migStrategy mixed, " + rules_.names.count + " is whole GPUs and " + asked +
                     " is MIG devices: ask for one of them");
  // The MIG resource is the count; gpumem / gpucores still slice each MIG device.
  ContainerResources asCount = container;
  asCount.limits.erase(asked);
  asCount.limits[rules_.names.count] = container.limits.at(asked);
  auto request = sdk::parseStandardRequest(rules_, asCount, annotations);
  if (!request.ok() || !*request) return request;
  (*request)->constraints.includeModels.push_back(kMigProfileConstraint + profile);
  return request;
}

Result<std::map<std::string, std::int64_t>> NvidiaAllocator::admissionDefaults(const ContainerResources& container,
                                                                               const Annotations& annotations) const {
  return sdk::standardAdmissionDefaults(rules_, container, annotations);
}

void NvidiaAllocator::fit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                          vgpu_fit_result& r) const {
  fitWith(q, d, u, nullptr, r);
}

bool NvidiaAllocator::placesGrants(const vgpu_device& d) const { return attribute(d, attr::kMigManaged) != nullptr; }

void NvidiaAllocator::fitPlaced(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                                vgpu_placement& placement, vgpu_fit_result& r) const {
  fitWith(q, d, u, &placement, r);
}

void NvidiaAllocator::fitWith(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                              vgpu_placement* placement, vgpu_fit_result& r) const {
  if (d.health != VGPU_HEALTHY) {
    sdk::standardFit(q, d, u, r);
    return;
  }
  // Only mixed puts a MIG profile among the model filters (parseRequest).
  if (mig_.strategy == MigStrategy::kMixed) return fitMixed(q, d, u, placement, r);
  fitGpu(q, d, u, placement, r);
}

void NvidiaAllocator::fitMixed(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                               vgpu_placement* placement, vgpu_fit_result& r) const {
  // Take the MIG profile constraint out of the model filters: it is no model name.
  constexpr std::size_t kInline = 16;
  const char* inlineKept[kInline];
  std::vector<const char*> manyKept;
  const char** kept = inlineKept;
  if (q.include_models.count > kInline) {
    manyKept.resize(q.include_models.count);
    kept = manyKept.data();
  }
  const char* wanted = nullptr;
  std::size_t keptCount = 0;
  const std::size_t prefix = std::strlen(kMigProfileConstraint);
  for (std::size_t i = 0; i < q.include_models.count; ++i) {
    const char* item = q.include_models.items[i];
    if (item != nullptr && std::strncmp(item, kMigProfileConstraint, prefix) == 0) wanted = item + prefix;
    else kept[keptCount++] = item;
  }
  const char* profile = attribute(d, attr::kMigProfile);
  if (profile != nullptr && wanted == nullptr) return refuse(r, kReasonMigDeviceNeedsMigResource);
  if (profile == nullptr && wanted != nullptr) return refuse(r, kReasonNotAMigDevice);
  if (profile != nullptr && std::strcmp(profile, wanted) != 0) return refuse(r, kReasonMigProfileMismatch);
  vgpu_device_request rest = q;
  rest.include_models = {kept, keptCount};
  fitGpu(rest, d, u, placement, r);
}

void NvidiaAllocator::fitGpu(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                             vgpu_placement* placement, vgpu_fit_result& r) const {
  if (attribute(d, attr::kMigManaged) != nullptr) return fitManaged(q, d, u, placement, r);
  if (const char* mig = attribute(d, attr::kMigMode); mig != nullptr && std::strcmp(mig, "enabled") == 0)
    return refuse(r, kReasonMigEnabled);
  fitByType(q, d, u, r);
}

void NvidiaAllocator::fitManaged(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                                 vgpu_placement* placement, vgpu_fit_result& r) const {
  // The filters (model, ids, shares, a GPU held whole) as for any GPU; memory and compute
  // are the instance's.
  vgpu_device_request filters = q;
  filters.memory_mib = 1;
  filters.memory_percent = 0;
  filters.compute_percent = 0;
  fitByType(filters, d, u, r);
  if (!r.fits) return;
  const char* text = attribute(d, attr::kMigProfiles);
  auto profiles = decodeMigProfiles(text ? text : "");
  if (!profiles.ok() || profiles->empty()) return refuse(r, kReasonMigInventory);
  const char* instances = attribute(d, attr::kMigInstances);
  auto listed = decodeMigOccupants(instances ? instances : "");
  if (!listed.ok()) return refuse(r, kReasonMigInventory);
  const MigPlanner planner(*profiles, mig_.allowed);
  const std::uint64_t memory = sdk::requestedMemoryMiB(q, d);
  const MigProfile* smallest = planner.smallestWith(memory);
  if (smallest == nullptr) {
    refuse(r, kReasonMigNoProfile);
    r.needed = memory;
    for (const auto& p : planner.profiles()) r.available = std::max<std::uint64_t>(r.available, p.memoryMiB);
    return;
  }
  const std::uint64_t freeMiB = d.memory_mib > u.memory_mib ? d.memory_mib - u.memory_mib : 0;
  auto occupants = occupantsWith(planner, std::move(listed).value(), placement ? placement->placed : vgpu_str_list{});
  if (!occupants.ok()) return refuse(r, kReasonMigInventory);
  auto plan = planner.plan(memory, *occupants);
  if (!plan.ok()) {
    refuse(r, kReasonMigNoPlacement);
    r.needed = smallest->memoryMiB;
    r.available = freeMiB;
    if (placement) sdk::writeText(placement->why, placement->why_capacity, plan.error().message);
    return;
  }
  const MigProfile& p = *plan->profile;
  unsigned computeSlices = 0;
  for (const auto& each : *profiles) computeSlices = std::max(computeSlices, each.slices);
  const auto compute = static_cast<std::uint32_t>(p.slices * 100 / computeSlices);
  // Totals too: grants placed before placements travelled with them have none, so only
  // their memory and compute tell that they are there.
  if (u.memory_mib + p.memoryMiB > d.memory_mib || u.compute + compute > d.compute_units) {
    refuse(r, kReasonMigNoRoom);
    r.needed = p.memoryMiB;
    r.available = freeMiB;
    return;
  }
  r = vgpu_fit_result{};
  r.fits = 1;
  r.take = {1, compute, p.memoryMiB};
  if (placement) sdk::writeText(placement->token, placement->token_capacity, MigPlanner::token(*plan));
}

std::string NvidiaAllocator::explain(const vgpu_fit_result& r) const {
  switch (r.reason) {
    case kReasonMigEnabled:
      return "GPU is in MIG mode; vgpu shares whole GPUs through libvgpu.so, so a MIG-partitioned GPU "
             "takes no shared containers (serve its MIG devices with options.migStrategy single or mixed, "
             "or disable MIG with nvidia-smi -mig 0)";
    case kReasonMigDeviceNeedsMigResource:
      return "MIG device; with migStrategy mixed it serves only its nvidia.com/mig-<profile> resource";
    case kReasonNotAMigDevice:
      return "whole GPU; the container asks for a MIG device (nvidia.com/mig-<profile>)";
    case kReasonMigProfileMismatch:
      return "MIG device of another profile than the one the container asks for";
    case kReasonMigNoProfile:
      return "no MIG profile of this GPU has " + std::to_string(r.needed) + " MiB (the largest allowed has " +
             std::to_string(r.available) + " MiB)";
    case kReasonMigNoRoom:
      return "no room for a MIG instance of " + std::to_string(r.needed) + " MiB: " + std::to_string(r.available) +
             " MiB of the GPU are not in instances, or its compute slices are taken";
    case kReasonMigInventory:
      return "the GPU's MIG profiles or instances in the node's inventory cannot be read";
    case kReasonMigNoPlacement:
      return "no free placement for a MIG instance of " + std::to_string(r.needed) + " MiB next to the GPU's instances";
    default:
      break;
  }
  std::string core = explainCoreReason(r);
  return core.empty() ? "refused for reason " + std::to_string(r.reason) : core;
}

}  // namespace vgpu::nvidia
