// Fake libnvidia-ml.so.1, Multi-Instance GPU: GPU and compute instances with the profiles and
// placement rules of the product a `gpu` line names (mig_profiles=, mig_profiles.cpp).
//
// Instances live in the shared state file, so they outlive the process that created them, as
// on the real driver: a node agent killed after creating one finds it again when it restarts.
// Creation follows the hardware's rules: a placement must be one the profile allows, its
// memory slices must be free, the compute slices of all instances fit in the GPU's, and a
// profile has at most its instance count.

#include <cstdio>
#include <cstring>

#include "mig_profiles.h"
#include "nvml_internal.h"

struct nvmlGpuInstance_st {
  unsigned dev = 0;
  unsigned slot = 0;
};

struct nvmlComputeInstance_st {
  unsigned dev = 0;
  unsigned gi = 0;
  unsigned slot = 0;
};

namespace vgpu::fakegpu {
namespace {

constexpr unsigned kProfileIndexLimit = 0x12;  // nvml.h's NVML_GPU_INSTANCE_PROFILE_COUNT (API 13)
constexpr unsigned kComputeProfileIndexLimit = 0x9;
constexpr unsigned kComputeProfileSlices[] = {1, 2, 3, 4, 7};  // NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE

// Handles are fixed addresses per slot, as NVML reuses handles ("Handles may be reused").
nvmlDevice_st gMigDevices[VGPU_FAKE_STATE_MAX_DEVICES][VGPU_FAKE_MIG_MAX_GI][VGPU_FAKE_MIG_MAX_CI];
nvmlGpuInstance_st gGpuInstances[VGPU_FAKE_STATE_MAX_DEVICES][VGPU_FAKE_MIG_MAX_GI];
nvmlComputeInstance_st gComputeInstances[VGPU_FAKE_STATE_MAX_DEVICES][VGPU_FAKE_MIG_MAX_GI][VGPU_FAKE_MIG_MAX_CI];

struct HandleInit {
  HandleInit() {
    for (unsigned d = 0; d < VGPU_FAKE_STATE_MAX_DEVICES; ++d)
      for (unsigned g = 0; g < VGPU_FAKE_MIG_MAX_GI; ++g) {
        gGpuInstances[d][g] = {d, g};
        for (unsigned c = 0; c < VGPU_FAKE_MIG_MAX_CI; ++c) {
          gMigDevices[d][g][c] = {d, static_cast<int>(g), static_cast<int>(c)};
          gComputeInstances[d][g][c] = {d, g, c};
        }
      }
  }
} gHandleInit;

class MigLock : public RobustLock {
 public:
  explicit MigLock(unsigned dev) : RobustLock(&nvmlShared()->raw()->mig[dev].lock) {}
};

vgpu_fake_mig_state& migState(unsigned dev) { return nvmlShared()->raw()->mig[dev]; }

const MigModel* modelOf(const GpuSpec& g) { return g.migModel.empty() ? nullptr : findMigModel(g.migModel); }

const MigProfileSpec* profileById(const MigModel& m, unsigned id) {
  for (const auto& p : m.profiles)
    if (p.id == id) return &p;
  return nullptr;
}

// A whole GPU that supports MIG: its model. `needEnabled`: MIG mode must be on as well.
nvmlReturn_t migGpu(nvmlDevice_t h, const GpuSpec*& g, const MigModel*& m, bool needEnabled) {
  if (nvmlReturn_t r = gpuDevice(h, g)) return r;
  m = modelOf(*g);
  if (m == nullptr || (needEnabled && !g->mig)) return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}

nvmlReturn_t gpuInstance(nvmlGpuInstance_t h, vgpu_fake_mig_gi*& gi) {
  if (!nvmlReady()) return NVML_ERROR_UNINITIALIZED;
  if (h == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* base = &gGpuInstances[0][0];
  if (h < base || h >= base + VGPU_FAKE_STATE_MAX_DEVICES * VGPU_FAKE_MIG_MAX_GI) return NVML_ERROR_INVALID_ARGUMENT;
  if (h->dev >= nvmlMachine().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  gi = &migState(h->dev).gi[h->slot];
  if (!gi->used) return NVML_ERROR_INVALID_ARGUMENT;  // destroyed: the handle is stale
  return NVML_SUCCESS;
}

nvmlReturn_t computeInstance(nvmlComputeInstance_t h, vgpu_fake_mig_gi*& gi, vgpu_fake_mig_ci*& ci) {
  if (!nvmlReady()) return NVML_ERROR_UNINITIALIZED;
  if (h == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* base = &gComputeInstances[0][0][0];
  if (h < base || h >= base + VGPU_FAKE_STATE_MAX_DEVICES * VGPU_FAKE_MIG_MAX_GI * VGPU_FAKE_MIG_MAX_CI)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (h->dev >= nvmlMachine().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  gi = &migState(h->dev).gi[h->gi];
  ci = &gi->ci[h->slot];
  if (!gi->used || !ci->used) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

nvmlReturn_t migDevice(nvmlDevice_t h, const vgpu_fake_mig_gi*& gi, const vgpu_fake_mig_ci*& ci) {
  if (!nvmlReady()) return NVML_ERROR_UNINITIALIZED;
  if (!isMigHandle(h) || h->index >= nvmlMachine().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  gi = &migState(h->index).gi[h->gi];
  ci = &gi->ci[h->ci];
  if (!gi->used || !ci->used) return NVML_ERROR_INVALID_ARGUMENT;
  return NVML_SUCCESS;
}

bool overlaps(unsigned aStart, unsigned aSize, unsigned bStart, unsigned bSize) {
  return aStart < bStart + bSize && bStart < aStart + aSize;
}

// Why `p` cannot go at `start` on this device now (caller holds the lock); SUCCESS if it can.
nvmlReturn_t placementFree(const MigModel& m, const vgpu_fake_mig_state& s, const MigProfileSpec& p, unsigned start) {
  unsigned sameProfile = 0, computeUsed = 0;
  for (const auto& gi : s.gi) {
    if (!gi.used) continue;
    if (gi.profile_id == p.id) ++sameProfile;
    computeUsed += gi.slices;
    if (overlaps(gi.start, gi.size, start, p.memorySlices)) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  if (sameProfile >= p.instances || computeUsed + p.slices > m.computeSlices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  return NVML_SUCCESS;
}

nvmlReturn_t createGpuInstance(nvmlDevice_t dev, unsigned profileId, const nvmlGpuInstancePlacement_t* placement,
                               nvmlGpuInstance_t* out) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, true)) return r;
  const MigProfileSpec* p = profileById(*m, profileId);
  if (p == nullptr || out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (placement != nullptr) {
    bool allowed = placement->size == p->memorySlices;
    bool listed = false;
    for (unsigned s : p->starts) listed = listed || s == placement->start;
    if (!allowed || !listed) return NVML_ERROR_INVALID_ARGUMENT;
  }
  MigLock lock(dev->index);
  auto& s = migState(dev->index);
  unsigned start = 0;
  nvmlReturn_t why = NVML_ERROR_INSUFFICIENT_RESOURCES;
  for (unsigned candidate : p->starts) {
    if (placement != nullptr && candidate != placement->start) continue;
    why = placementFree(*m, s, *p, candidate);
    if (why == NVML_SUCCESS) {
      start = candidate;
      break;
    }
  }
  if (why != NVML_SUCCESS) return why;
  int slot = -1;
  unsigned id = 1;  // the lowest id not in use, from 1
  auto taken = [&s](unsigned candidate) {
    for (const auto& gi : s.gi)
      if (gi.used && gi.id == candidate) return true;
    return false;
  };
  while (taken(id)) ++id;
  for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_GI && slot < 0; ++k)
    if (!s.gi[k].used) slot = static_cast<int>(k);
  if (slot < 0) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  vgpu_fake_mig_gi& gi = s.gi[slot];
  std::memset(&gi, 0, sizeof gi);
  gi.id = id;
  gi.profile_id = p->id;
  gi.start = start;
  gi.size = p->memorySlices;
  gi.slices = p->slices;
  gi.used = 1;
  *out = &gGpuInstances[dev->index][slot];
  return NVML_SUCCESS;
}

void fillProfileInfo(const MigProfileSpec& p, nvmlGpuInstanceProfileInfo_t& i) {
  i.id = p.id;
  i.isP2pSupported = 0;
  i.sliceCount = p.slices;
  i.instanceCount = p.instances;
  i.multiprocessorCount = p.sms;
  i.copyEngineCount = p.copyEngines;
  i.decoderCount = p.decoders;
  i.encoderCount = p.encoders;
  i.jpegCount = p.jpegs;
  i.ofaCount = p.ofas;
  i.memorySizeMB = p.memoryMb;
}

nvmlReturn_t profileByIndex(nvmlDevice_t dev, unsigned index, bool needEnabled, const MigProfileSpec*& out) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, needEnabled)) return r;
  if (index >= kProfileIndexLimit) return NVML_ERROR_INVALID_ARGUMENT;
  for (const auto& p : m->profiles) {
    if (p.index == index) {
      out = &p;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

// One of a MIG device handle's instance ids; a whole GPU's handle has none.
template <class Pick>
nvmlReturn_t migDeviceId(nvmlDevice_t dev, unsigned* id, Pick pick) {
  const vgpu_fake_mig_gi* gi = nullptr;
  const vgpu_fake_mig_ci* ci = nullptr;
  if (!isMigHandle(dev)) return nvmlReady() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED;
  if (nvmlReturn_t r = migDevice(dev, gi, ci)) return r;
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *id = pick(*gi, *ci);
  return NVML_SUCCESS;
}

std::string migUuid(const GpuSpec& g, const vgpu_fake_mig_gi& gi, const vgpu_fake_mig_ci& ci) {
  unsigned char b[16];
  std::memcpy(b, g.uuidBytes, sizeof b);
  b[0] ^= 0x3c;
  b[12] = static_cast<unsigned char>(gi.id);
  b[13] = static_cast<unsigned char>(ci.id);
  b[14] = static_cast<unsigned char>(gi.profile_id);
  b[15] = static_cast<unsigned char>(gi.start << 4 | ci.start);
  char text[64];
  std::snprintf(text, sizeof text, "MIG-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return text;
}

}  // namespace

bool isMigHandle(nvmlDevice_t h) {
  const auto* base = &gMigDevices[0][0][0];
  return h >= base && h < base + VGPU_FAKE_STATE_MAX_DEVICES * VGPU_FAKE_MIG_MAX_GI * VGPU_FAKE_MIG_MAX_CI;
}

nvmlReturn_t migDeviceUuid(nvmlDevice_t h, char* out, unsigned len) {
  const vgpu_fake_mig_gi* gi = nullptr;
  const vgpu_fake_mig_ci* ci = nullptr;
  if (nvmlReturn_t r = migDevice(h, gi, ci)) return r;
  return copyNvmlString(migUuid(nvmlMachine().gpus[h->index], *gi, *ci), out, len);
}

nvmlReturn_t migDeviceMemory(nvmlDevice_t h, nvmlMemory_t* mem) {
  const vgpu_fake_mig_gi* gi = nullptr;
  const vgpu_fake_mig_ci* ci = nullptr;
  if (nvmlReturn_t r = migDevice(h, gi, ci)) return r;
  if (mem == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfileSpec* p = profileById(*modelOf(nvmlMachine().gpus[h->index]), gi->profile_id);
  mem->total = p->memoryMb << 20;
  mem->used = 0;
  mem->free = mem->total;
  return NVML_SUCCESS;
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t dev, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  const MigProfileSpec* p = nullptr;
  if (nvmlReturn_t r = profileByIndex(dev, profile, false, p)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  fillProfileInfo(*p, *info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t dev, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  const MigProfileSpec* p = nullptr;
  if (nvmlReturn_t r = profileByIndex(dev, profile, true, p)) return r;
  if (info == nullptr || info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlGpuInstanceProfileInfo_t v1{};
  fillProfileInfo(*p, v1);
  info->id = v1.id;
  info->isP2pSupported = v1.isP2pSupported;
  info->sliceCount = v1.sliceCount;
  info->instanceCount = v1.instanceCount;
  info->multiprocessorCount = v1.multiprocessorCount;
  info->copyEngineCount = v1.copyEngineCount;
  info->decoderCount = v1.decoderCount;
  info->encoderCount = v1.encoderCount;
  info->jpegCount = v1.jpegCount;
  info->ofaCount = v1.ofaCount;
  info->memorySizeMB = v1.memorySizeMB;
  std::snprintf(info->name, sizeof info->name, "%s", p->name);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t dev, unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t* placements, unsigned int* count) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, false)) return r;  // "regardless of whether MIG is enabled"
  const MigProfileSpec* p = profileById(*m, profileId);
  if (p == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = static_cast<unsigned>(p->starts.size());
  if (placements == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned k = 0; k < n; ++k) placements[k] = {p->starts[k], p->memorySlices};
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t dev, unsigned int profileId, unsigned int* count) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, true)) return r;
  const MigProfileSpec* p = profileById(*m, profileId);
  if (p == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(dev->index);
  // How many more fit, placing them one after another at their first free placement.
  vgpu_fake_mig_state s = migState(dev->index);
  unsigned n = 0;
  for (bool placed = true; placed;) {
    placed = false;
    for (unsigned start : p->starts) {
      if (placementFree(*m, s, *p, start) != NVML_SUCCESS) continue;
      for (auto& gi : s.gi) {
        if (gi.used) continue;
        gi.used = 1;
        gi.profile_id = p->id;
        gi.start = start;
        gi.size = p->memorySlices;
        gi.slices = p->slices;
        placed = true;
        ++n;
        break;
      }
      break;
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t dev, unsigned int profileId, nvmlGpuInstance_t* gi) {
  return createGpuInstance(dev, profileId, nullptr, gi);
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t dev, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gi) {
  if (placement == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return createGpuInstance(dev, profileId, placement, gi);
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t h) {
  vgpu_fake_mig_gi* gi = nullptr;
  if (nvmlReturn_t r = gpuInstance(h, gi)) return r;
  MigLock lock(h->dev);
  for (const auto& ci : gi->ci)
    if (ci.used) return NVML_ERROR_IN_USE;  // compute instances are active on it
  gi->used = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t dev, unsigned int profileId, nvmlGpuInstance_t* out,
                                       unsigned int* count) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, true)) return r;
  if (profileById(*m, profileId) == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(dev->index);
  const auto& s = migState(dev->index);
  unsigned n = 0;
  for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_GI; ++k) {
    if (!s.gi[k].used || s.gi[k].profile_id != profileId) continue;
    if (out != nullptr && n < *count) out[n] = &gGpuInstances[dev->index][k];
    ++n;
  }
  if (out == nullptr && n > 0) return NVML_ERROR_INVALID_ARGUMENT;
  const bool fits = n <= *count;
  *count = n;
  return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t dev, unsigned int id, nvmlGpuInstance_t* out) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, true)) return r;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(dev->index);
  const auto& s = migState(dev->index);
  for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_GI; ++k) {
    if (s.gi[k].used && s.gi[k].id == id) {
      *out = &gGpuInstances[dev->index][k];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t* info) {
  vgpu_fake_mig_gi* gi = nullptr;
  if (nvmlReturn_t r = gpuInstance(h, gi)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = gpuHandle(h->dev);
  info->id = gi->id;
  info->profileId = gi->profile_id;
  info->placement = {gi->start, gi->size};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t h, unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  vgpu_fake_mig_gi* gi = nullptr;
  if (nvmlReturn_t r = gpuInstance(h, gi)) return r;
  if (info == nullptr || profile >= kComputeProfileIndexLimit ||
      engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (profile >= sizeof kComputeProfileSlices / sizeof kComputeProfileSlices[0]) return NVML_ERROR_NOT_SUPPORTED;
  const unsigned slices = kComputeProfileSlices[profile];
  if (slices > gi->slices) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfileSpec* p = profileById(*modelOf(nvmlMachine().gpus[h->dev]), gi->profile_id);
  std::memset(info, 0, sizeof *info);
  info->id = profile;  // compute instance profile ids are the profile indices
  info->sliceCount = slices;
  info->instanceCount = gi->slices / slices;
  info->multiprocessorCount = p->sms * slices / gi->slices;
  info->sharedCopyEngineCount = p->copyEngines;
  info->sharedDecoderCount = p->decoders;
  info->sharedEncoderCount = p->encoders;
  info->sharedJpegCount = p->jpegs;
  info->sharedOfaCount = p->ofas;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h, unsigned int profileId,
                                                  nvmlComputeInstance_t* out) {
  vgpu_fake_mig_gi* gi = nullptr;
  if (nvmlReturn_t r = gpuInstance(h, gi)) return r;
  if (out == nullptr || profileId >= sizeof kComputeProfileSlices / sizeof kComputeProfileSlices[0])
    return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned slices = kComputeProfileSlices[profileId];
  if (slices > gi->slices) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(h->dev);
  // First free run of compute slices within the GPU instance.
  for (unsigned start = 0; start + slices <= gi->slices; ++start) {
    bool free = true;
    for (const auto& ci : gi->ci) free = free && !(ci.used && overlaps(ci.start, ci.size, start, slices));
    if (!free) continue;
    unsigned id = 0;
    for (bool taken = true; taken;) {
      taken = false;
      for (const auto& ci : gi->ci) taken = taken || (ci.used && ci.id == id);
      if (taken) ++id;
    }
    for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_CI; ++k) {
      if (gi->ci[k].used) continue;
      gi->ci[k] = {1, id, profileId, start, slices};
      *out = &gComputeInstances[h->dev][h->slot][k];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t h) {
  vgpu_fake_mig_gi* gi = nullptr;
  vgpu_fake_mig_ci* ci = nullptr;
  if (nvmlReturn_t r = computeInstance(h, gi, ci)) return r;
  MigLock lock(h->dev);
  ci->used = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h, unsigned int profileId,
                                                nvmlComputeInstance_t* out, unsigned int* count) {
  vgpu_fake_mig_gi* gi = nullptr;
  if (nvmlReturn_t r = gpuInstance(h, gi)) return r;
  if (count == nullptr || profileId >= kComputeProfileIndexLimit) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(h->dev);
  unsigned n = 0;
  for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_CI; ++k) {
    if (!gi->ci[k].used || gi->ci[k].profile_id != profileId) continue;
    if (out != nullptr && n < *count) out[n] = &gComputeInstances[h->dev][h->slot][k];
    ++n;
  }
  if (out == nullptr && n > 0) return NVML_ERROR_INVALID_ARGUMENT;
  const bool fits = n <= *count;
  *count = n;
  return fits ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t h, nvmlComputeInstanceInfo_t* info) {
  vgpu_fake_mig_gi* gi = nullptr;
  vgpu_fake_mig_ci* ci = nullptr;
  if (nvmlReturn_t r = computeInstance(h, gi, ci)) return r;
  if (info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = gpuHandle(h->dev);
  info->gpuInstance = &gGpuInstances[h->dev][h->gi];
  info->id = ci->id;
  info->profileId = ci->profile_id;
  info->placement = {ci->start, ci->size};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned int* isMig) {
  if (!nvmlReady()) return NVML_ERROR_UNINITIALIZED;
  if (isMig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (isMigHandle(dev)) {
    *isMig = 1;
    return NVML_SUCCESS;
  }
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = gpuDevice(dev, g)) return r;
  *isMig = 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int* id) {
  return migDeviceId(dev, id, [](const vgpu_fake_mig_gi& gi, const vgpu_fake_mig_ci&) { return gi.id; });
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int* id) {
  return migDeviceId(dev, id, [](const vgpu_fake_mig_gi&, const vgpu_fake_mig_ci& ci) { return ci.id; });
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int* count) {
  const GpuSpec* g = nullptr;
  if (nvmlReturn_t r = gpuDevice(dev, g)) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigModel* m = modelOf(*g);
  *count = (m != nullptr && g->mig) ? m->computeSlices : 0;  // "zero if MIG is not supported or enabled"
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index, nvmlDevice_t* out) {
  const GpuSpec* g = nullptr;
  const MigModel* m = nullptr;
  if (nvmlReturn_t r = migGpu(dev, g, m, true)) return r;
  if (out == nullptr || index >= m->computeSlices) return NVML_ERROR_INVALID_ARGUMENT;
  MigLock lock(dev->index);
  const auto& s = migState(dev->index);
  unsigned n = 0;
  for (unsigned k = 0; k < VGPU_FAKE_MIG_MAX_GI; ++k) {
    if (!s.gi[k].used) continue;
    for (unsigned c = 0; c < VGPU_FAKE_MIG_MAX_CI; ++c) {
      if (!s.gi[k].ci[c].used) continue;
      if (n++ == index) {
        *out = &gMigDevices[dev->index][k][c];
        return NVML_SUCCESS;
      }
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t* out) {
  const vgpu_fake_mig_gi* gi = nullptr;
  const vgpu_fake_mig_ci* ci = nullptr;
  if (nvmlReturn_t r = migDevice(mig, gi, ci)) return r;
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *out = gpuHandle(mig->index);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t dev, nvmlDeviceAttributes_t* a) {
  const vgpu_fake_mig_gi* gi = nullptr;
  const vgpu_fake_mig_ci* ci = nullptr;
  if (!isMigHandle(dev)) return nvmlReady() ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_UNINITIALIZED;
  if (nvmlReturn_t r = migDevice(dev, gi, ci)) return r;
  if (a == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const MigProfileSpec* p = profileById(*modelOf(nvmlMachine().gpus[dev->index]), gi->profile_id);
  a->multiprocessorCount = p->sms * ci->size / gi->slices;
  a->sharedCopyEngineCount = p->copyEngines;
  a->sharedDecoderCount = p->decoders;
  a->sharedEncoderCount = p->encoders;
  a->sharedJpegCount = p->jpegs;
  a->sharedOfaCount = p->ofas;
  a->gpuInstanceSliceCount = gi->slices;
  a->computeInstanceSliceCount = ci->size;
  a->memorySizeMB = p->memoryMb;
  return NVML_SUCCESS;
}

}  // extern "C"
