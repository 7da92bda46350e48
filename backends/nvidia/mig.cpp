#include "mig.h"

#include <string_view>

namespace vgpu::nvidia {
namespace {

constexpr unsigned kMaxProfileIndex = 64;  // far past nvml.h's last (0x11); NVML says where they end

const MigProfile* profileById(const std::vector<MigProfile>& profiles, unsigned id) {
  for (const auto& p : profiles)
    if (p.id == id) return &p;
  return nullptr;
}

}  // namespace

std::string migProfileName(const char* nvmlName, unsigned slices, std::uint64_t memoryMiB) {
  if (nvmlName != nullptr && *nvmlName != '\0') {
    std::string_view name(nvmlName);
    if (name.starts_with("MIG ")) name.remove_prefix(4);
    return std::string(name);
  }
  return std::to_string(slices) + "g." + std::to_string((memoryMiB + 1023) / 1024) + "gb";
}

std::string migResourceName(const std::string& countResource, const std::string& profile) {
  const auto slash = countResource.find('/');
  const std::string domain = slash == std::string::npos ? "nvidia.com" : countResource.substr(0, slash);
  return domain + "/mig-" + profile;
}

Partition migPartition(const std::string& parentUuid, const MigDevice& mig) {
  return {mig.uuid,
          parentUuid,
          "mig",
          mig.profile,
          std::to_string(mig.start) + ":" + std::to_string(mig.size),
          std::to_string(mig.gpuInstanceId),
          std::to_string(mig.computeInstanceId)};
}

std::string describeSlices(unsigned start, unsigned size) {
  if (size <= 1) return "slice " + std::to_string(start);
  return "slices " + std::to_string(start) + "\u2013" + std::to_string(start + size - 1);
}

Result<std::vector<MigProfile>> readMigProfiles(const NvmlSession& nvml, nvml::Device gpu) {
  const NvmlFunctions& f = nvml.fn();
  std::vector<MigProfile> out;
  if (!f.deviceGetGpuInstanceProfileInfo || !f.deviceGetGpuInstancePossiblePlacements) return out;
  // NVML's documented way to list every profile: indices from 0 until INVALID_ARGUMENT.
  for (unsigned index = 0; index < kMaxProfileIndex; ++index) {
    nvmlGpuInstanceProfileInfo_t info{};
    const auto rc = f.deviceGetGpuInstanceProfileInfo(gpu, index, &info);
    if (rc == NVML_ERROR_INVALID_ARGUMENT) break;
    if (rc == nvml::kErrorNotSupported) continue;
    if (rc != nvml::kSuccess) return makeError(nvml.describe("nvmlDeviceGetGpuInstanceProfileInfo", rc));
    MigProfile p;
    p.id = info.id;
    p.slices = info.sliceCount;
    p.instances = info.instanceCount;
    p.memoryMiB = info.memorySizeMB;
    nvmlGpuInstanceProfileInfo_v2_t named{};
    named.version = nvmlGpuInstanceProfileInfo_v2;
    const bool hasName = f.deviceGetGpuInstanceProfileInfoV && f.deviceGetGpuInstanceProfileInfoV(gpu, index, &named) == nvml::kSuccess;
    p.name = migProfileName(hasName ? named.name : nullptr, p.slices, p.memoryMiB);
    unsigned count = 0;
    if (auto r = f.deviceGetGpuInstancePossiblePlacements(gpu, p.id, nullptr, &count); r != nvml::kSuccess)
      return makeError(nvml.describe("nvmlDeviceGetGpuInstancePossiblePlacements_v2", r));
    std::vector<nvmlGpuInstancePlacement_t> placements(count);
    if (count > 0) {
      if (auto r = f.deviceGetGpuInstancePossiblePlacements(gpu, p.id, placements.data(), &count); r != nvml::kSuccess)
        return makeError(nvml.describe("nvmlDeviceGetGpuInstancePossiblePlacements_v2", r));
      placements.resize(count);
    }
    for (const auto& pl : placements) {
      p.starts.push_back(pl.start);
      p.placementSize = pl.size;
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<MigDevice>> readMigDevices(const NvmlSession& nvml, nvml::Device gpu,
                                              const std::vector<MigProfile>& profiles) {
  const NvmlFunctions& f = nvml.fn();
  std::vector<MigDevice> out;
  if (!f.deviceGetMaxMigDeviceCount || !f.deviceGetMigDeviceHandleByIndex || !f.deviceGetGpuInstanceId ||
      !f.deviceGetComputeInstanceId || !f.deviceGetGpuInstanceById || !f.gpuInstanceGetInfo)
    return makeError("the driver's NVML lacks the MIG device calls (nvmlDeviceGetMigDeviceHandleByIndex...)");
  unsigned max = 0;
  if (auto rc = f.deviceGetMaxMigDeviceCount(gpu, &max); rc != nvml::kSuccess)
    return makeError(nvml.describe("nvmlDeviceGetMaxMigDeviceCount", rc));
  for (unsigned i = 0; i < max; ++i) {
    nvml::Device mig = nullptr;
    const auto rc = f.deviceGetMigDeviceHandleByIndex(gpu, i, &mig);
    if (rc == nvml::kErrorNotFound) continue;  // no MIG device at this index
    if (rc != nvml::kSuccess) return makeError(nvml.describe("nvmlDeviceGetMigDeviceHandleByIndex", rc));
    MigDevice d;
    char uuid[nvml::kUuidBufferSize] = {};
    if (auto r = f.deviceGetUUID(mig, uuid, sizeof uuid); r != nvml::kSuccess)
      return makeError("MIG device " + std::to_string(i) + ": " + nvml.describe("nvmlDeviceGetUUID", r));
    d.uuid = uuid;
    const std::string where = "MIG device " + d.uuid + ": ";
    nvml::Memory memory{};
    if (auto r = f.deviceGetMemoryInfo(mig, &memory); r != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetMemoryInfo", r));
    d.memoryMiB = memory.total >> 20;
    if (auto r = f.deviceGetGpuInstanceId(mig, &d.gpuInstanceId); r != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetGpuInstanceId", r));
    if (auto r = f.deviceGetComputeInstanceId(mig, &d.computeInstanceId); r != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetComputeInstanceId", r));
    nvmlGpuInstance_t gi = nullptr;
    nvmlGpuInstanceInfo_t info{};
    if (auto r = f.deviceGetGpuInstanceById(gpu, d.gpuInstanceId, &gi); r != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetGpuInstanceById", r));
    if (auto r = f.gpuInstanceGetInfo(gi, &info); r != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlGpuInstanceGetInfo", r));
    d.profileId = info.profileId;
    d.start = info.placement.start;
    d.size = info.placement.size;
    const MigProfile* p = profileById(profiles, d.profileId);
    d.profile = p ? p->name : "profile-" + std::to_string(d.profileId);
    nvmlDeviceAttributes_t a{};
    if (p && f.deviceGetAttributes && f.deviceGetAttributes(mig, &a) == nvml::kSuccess &&
        a.computeInstanceSliceCount < a.gpuInstanceSliceCount)
      d.profile = std::to_string(a.computeInstanceSliceCount) + "c." + d.profile;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace vgpu::nvidia
