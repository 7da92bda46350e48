#include "processes.h"

#include <map>
#include <string>

namespace vgpu::nvidia {
namespace {

using ListFn = decltype(NvmlFunctions::deviceGetComputeRunningProcesses);

/// One of NVML's process lists of `device`. The list can grow between the sizing call and
/// the read (INSUFFICIENT_SIZE again): asked a few times with room to spare.
Result<std::vector<nvml::ProcessInfo>> processList(const NvmlSession& nvml, ListFn list, const char* name,
                                                   nvml::Device device) {
  unsigned count = 0;
  nvml::Return rc = list(device, &count, nullptr);
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (rc == nvml::kSuccess && count == 0) return std::vector<nvml::ProcessInfo>{};
    if (rc != nvml::kSuccess && rc != nvml::kErrorInsufficientSize) break;
    std::vector<nvml::ProcessInfo> out(count + 8);
    count = static_cast<unsigned>(out.size());
    rc = list(device, &count, out.data());
    if (rc == nvml::kSuccess) {
      out.resize(count);
      return out;
    }
  }
  return makeError(nvml.describe(name, rc));
}

/// SM utilization per pid over NVML's last sample window; empty where NVML has no samples.
std::map<unsigned, unsigned> utilizationByPid(const NvmlSession& nvml, nvml::Device device) {
  std::map<unsigned, unsigned> out;
  const auto sample = nvml.fn().deviceGetProcessUtilization;
  if (sample == nullptr) return out;
  unsigned count = 0;
  if (sample(device, nullptr, &count, 0) != nvml::kSuccess || count == 0) return out;
  std::vector<nvml::ProcessUtilization> samples(count + 8);
  count = static_cast<unsigned>(samples.size());
  if (sample(device, samples.data(), &count, 0) != nvml::kSuccess) return out;
  for (unsigned i = 0; i < count && i < samples.size(); ++i) out[samples[i].pid] = samples[i].smUtil;
  return out;
}

}  // namespace

Result<std::vector<DeviceProcess>> listDeviceProcesses(const NvmlSession& nvml) {
  const NvmlFunctions& f = nvml.fn();
  if (f.deviceGetComputeRunningProcesses == nullptr)
    return makeError("NVML (" + nvml.library() +
                     ") lacks nvmlDeviceGetComputeRunningProcesses_v3: the driver is too old to list processes");
  unsigned count = 0;
  if (const auto rc = f.deviceGetCount(&count); rc != nvml::kSuccess)
    return makeError(nvml.describe("nvmlDeviceGetCount_v2", rc));
  std::vector<DeviceProcess> out;
  for (unsigned i = 0; i < count; ++i) {
    const std::string where = "GPU " + std::to_string(i) + ": ";
    nvml::Device h = nullptr;
    if (auto rc = f.deviceGetHandleByIndex(i, &h); rc != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetHandleByIndex_v2", rc));
    char uuid[nvml::kUuidBufferSize] = {};
    if (auto rc = f.deviceGetUUID(h, uuid, sizeof uuid); rc != nvml::kSuccess)
      return makeError(where + nvml.describe("nvmlDeviceGetUUID", rc));
    unsigned index = i;
    if (f.deviceGetIndex) f.deviceGetIndex(h, &index);

    // A process with both a compute and a graphics context is listed twice: counted once,
    // with the larger figure (both report the same process's memory).
    std::map<unsigned, std::optional<std::uint64_t>> memory;
    auto take = [&](const std::vector<nvml::ProcessInfo>& list) {
      for (const auto& p : list) {
        std::optional<std::uint64_t> used;
        if (p.usedGpuMemory != nvml::kValueNotAvailable) used = p.usedGpuMemory;
        auto [it, fresh] = memory.emplace(p.pid, used);
        if (!fresh && used && (!it->second || *it->second < *used)) it->second = used;
      }
    };
    auto compute = processList(nvml, f.deviceGetComputeRunningProcesses, "nvmlDeviceGetComputeRunningProcesses_v3", h);
    if (!compute.ok()) return std::move(compute).error().prefix("GPU " + std::to_string(i));
    take(*compute);
    if (f.deviceGetGraphicsRunningProcesses) {
      auto graphics =
          processList(nvml, f.deviceGetGraphicsRunningProcesses, "nvmlDeviceGetGraphicsRunningProcesses_v3", h);
      if (!graphics.ok()) return std::move(graphics).error().prefix("GPU " + std::to_string(i));
      take(*graphics);
    }
    const auto utilization = utilizationByPid(nvml, h);
    for (const auto& [pid, used] : memory) {
      DeviceProcess p;
      p.pid = pid;
      p.deviceId = uuid;
      p.deviceIndex = static_cast<int>(index);
      p.memoryUsedBytes = used;
      if (auto u = utilization.find(pid); u != utilization.end()) p.utilizationPercent = u->second;
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace vgpu::nvidia
