#include "allocator.h"

#include <cstring>
#include <string>

#include "gpu_info.h"
#include "vgpu/allocator.h"

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

/// HAMi's name of a GPU's type, which its nvidia.com/use-gputype / nouse-gputype match: the
/// NVML name with "NVIDIA-" in front unless it starts with "NVIDIA" ("Tesla T4" is
/// "NVIDIA-Tesla T4"; "NVIDIA A100-SXM4-80GB" stays).
std::string hamiType(const char* model) {
  return std::strncmp(model, "NVIDIA", 6) == 0 ? std::string(model) : "NVIDIA-" + std::string(model);
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

NvidiaAllocator::NvidiaAllocator(const BackendParams& params) {
  rules_.backend = params.name.empty() ? "nvidia" : params.name;
  rules_.names = sdk::StandardResourceNames::resolve(defaultResourceNames(), params.resources);
  rules_.annotations = annotationKeys();
  // libvgpu.so orders work by CUDA_TASK_PRIORITY 0 (high) or 1 (low), as HAMi-core does.
  rules_.maxPriority = 1;
  rules_ = rules_.withSettings(params.settings);
  resources_ = rules_.names.list();
}

Result<std::optional<DeviceRequest>> NvidiaAllocator::parseRequest(const ContainerResources& container,
                                                                   const Annotations& annotations) const {
  return sdk::parseStandardRequest(rules_, container, annotations);
}

Result<std::map<std::string, std::int64_t>> NvidiaAllocator::admissionDefaults(const ContainerResources& container,
                                                                               const Annotations& annotations) const {
  return sdk::standardAdmissionDefaults(rules_, container, annotations);
}

void NvidiaAllocator::fit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                          vgpu_fit_result& r) const {
  if (d.health != VGPU_HEALTHY) {
    sdk::standardFit(q, d, u, r);
    return;
  }
  if (const char* mig = attribute(d, attr::kMigMode); mig != nullptr && std::strcmp(mig, "enabled") == 0)
    return refuse(r, kReasonMigEnabled);
  if (q.include_models.count == 0 && q.exclude_models.count == 0) return sdk::standardFit(q, d, u, r);
  // The pod's type filters are written against HAMi's type names ("NVIDIA-Tesla T4").
  const std::string type = hamiType(d.model);
  vgpu_device typed = d;
  typed.model = type.c_str();
  sdk::standardFit(q, typed, u, r);
}

std::string NvidiaAllocator::explain(const vgpu_fit_result& r) const {
  switch (r.reason) {
    case kReasonMigEnabled:
      return "GPU is in MIG mode; vgpu shares whole GPUs through libvgpu.so, so a MIG-partitioned GPU "
             "takes no shared containers (disable MIG with nvidia-smi -mig 0)";
    default:
      break;
  }
  std::string core = explainCoreReason(r);
  return core.empty() ? "refused for reason " + std::to_string(r.reason) : core;
}

}  // namespace vgpu::nvidia
