#include "cndev_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

namespace vgpu::cambricon {
namespace {

constexpr int kVersion = CNDEV_VERSION_6;

template <class T>
T versioned() {
  T value{};
  value.version = kVersion;
  return value;
}

std::string fixedString(const void* bytes, size_t capacity) {
  const char* text = static_cast<const char*>(bytes);
  return std::string(text, strnlen(text, capacity));
}

template <class Fn>
bool resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  return out != nullptr;
}

}  // namespace

const char* cndevCodeName(cndevRet_t code) {
  switch (code) {
    case CNDEV_SUCCESS:
      return "CNDEV_SUCCESS";
    case CNDEV_ERROR_NO_DRIVER:
      return "CNDEV_ERROR_NO_DRIVER";
    case CNDEV_ERROR_LOW_DRIVER_VERSION:
      return "CNDEV_ERROR_LOW_DRIVER_VERSION";
    case CNDEV_ERROR_UNSUPPORTED_API_VERSION:
      return "CNDEV_ERROR_UNSUPPORTED_API_VERSION";
    case CNDEV_ERROR_UNINITIALIZED:
      return "CNDEV_ERROR_UNINITIALIZED";
    case CNDEV_ERROR_INVALID_ARGUMENT:
      return "CNDEV_ERROR_INVALID_ARGUMENT";
    case CNDEV_ERROR_INVALID_DEVICE_ID:
      return "CNDEV_ERROR_INVALID_DEVICE_ID";
    case CNDEV_ERROR_UNKNOWN:
      return "CNDEV_ERROR_UNKNOWN";
    case CNDEV_ERROR_MALLOC:
      return "CNDEV_ERROR_MALLOC";
    case CNDEV_ERROR_INSUFFICIENT_SPACE:
      return "CNDEV_ERROR_INSUFFICIENT_SPACE";
    case CNDEV_ERROR_NOT_SUPPORTED:
      return "CNDEV_ERROR_NOT_SUPPORTED";
    case CNDEV_ERROR_INVALID_LINK:
      return "CNDEV_ERROR_INVALID_LINK";
    case CNDEV_ERROR_NO_DEVICES:
      return "CNDEV_ERROR_NO_DEVICES";
    case CNDEV_ERROR_NO_PERMISSION:
      return "CNDEV_ERROR_NO_PERMISSION";
    case CNDEV_ERROR_NOT_FOUND:
      return "CNDEV_ERROR_NOT_FOUND";
    case CNDEV_ERROR_IN_USE:
      return "CNDEV_ERROR_IN_USE";
    case CNDEV_ERROR_DUPLICATE:
      return "CNDEV_ERROR_DUPLICATE";
    case CNDEV_ERROR_TIMEOUT:
      return "CNDEV_ERROR_TIMEOUT";
  }
  return "unknown cnDev return code";
}

Error CndevLibrary::fail(const char* call, cndevRet_t code) const {
  std::string message = std::string(call) + " failed: " + cndevCodeName(code) + " (" + std::to_string(code);
  if (errorString_) {
    const char* words = errorString_(code);
    if (words && *words) message.append(", \"").append(words).append("\"");
  }
  message.append(") from ").append(path_);
  if (code == CNDEV_ERROR_UNSUPPORTED_API_VERSION)
    message.append(": this libcndev does not accept struct version ")
        .append(std::to_string(kVersion))
        .append(" (CNDEV_VERSION_6); install a newer Cambricon driver (neuware)");
  else if (code == CNDEV_ERROR_NO_DRIVER)
    message.append(": is the Cambricon kernel driver loaded (lsmod | grep cambricon)?");
  else if (code == CNDEV_ERROR_LOW_DRIVER_VERSION)
    message.append(": the kernel driver is older than this libcndev");
  return makeError(std::move(message));
}

Result<std::unique_ptr<CndevLibrary>> CndevLibrary::open(const std::vector<std::string>& paths) {
  std::unique_ptr<CndevLibrary> lib(new CndevLibrary());
  std::string tried;
  for (const auto& path : paths) {
    dlerror();
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      lib->handle_ = h;
      lib->path_ = path;
      break;
    }
    const char* why = dlerror();
    tried.append(tried.empty() ? "" : "; ").append(path).append(": ").append(why ? why : "not loadable");
  }
  if (!lib->handle_)
    return makeError("cannot load the Cambricon management library libcndev.so (tried " + tried +
                     "); install the Cambricon driver package (neuware) or set "
                     "backends.<name>.options.libraryPath to where libcndev.so is");

  void* h = lib->handle_;
  struct Required {
    const char* name;
    bool ok;
  };
  const Required required[] = {
      {"cndevInit", resolve(h, "cndevInit", lib->init_)},
      {"cndevRelease", resolve(h, "cndevRelease", lib->release_)},
      {"cndevGetDeviceCount", resolve(h, "cndevGetDeviceCount", lib->deviceCount_)},
      {"cndevGetDeviceHandleByIndex", resolve(h, "cndevGetDeviceHandleByIndex", lib->handleByIndex_)},
      {"cndevGetUUID", resolve(h, "cndevGetUUID", lib->uuid_)},
      {"cndevGetMemoryUsage", resolve(h, "cndevGetMemoryUsage", lib->memory_)},
      {"cndevGetCardHealthState", resolve(h, "cndevGetCardHealthState", lib->health_)},
  };
  for (const auto& r : required)
    if (!r.ok)
      return makeError(lib->path_ + " does not export " + r.name +
                       ": it is not a cnDev library this backend can use (too old, or not libcndev)");
  // Optional: older drivers lack sMLU; without it cards are offered whole only.
  resolve(h, "cndevGetErrorString", lib->errorString_);
  resolve(h, "cndevGetCardNameStringByDevId", lib->cardName_);
  resolve(h, "cndevGetNUMANodeIdByDevId", lib->numa_);
  resolve(h, "cndevGetMLULinkPortNumber", lib->linkPorts_);
  resolve(h, "cndevGetSMLUMode", lib->smluMode_);
  resolve(h, "cndevGetComputeMode", lib->computeMode_);
  resolve(h, "cndevGetDeviceUtilizationInfo", lib->utilization_);
  const bool smlu = resolve(h, "cndevCreateSMluProfileInfo", lib->createProfile_) &
                        resolve(h, "cndevDestroySMluProfileInfo", lib->destroyProfile_) &
                        resolve(h, "cndevGetSMluProfileIdInfo", lib->profileIds_) &
                        resolve(h, "cndevGetSMluProfileInfo", lib->profileInfo_) &
                        resolve(h, "cndevCreateSMluInstanceByProfileId", lib->createInstance_) &
                        resolve(h, "cndevDestroySMluInstanceByHandle", lib->destroyInstance_) &
                        resolve(h, "cndevGetSMluInstanceInfo", lib->instanceInfo_) &
                        resolve(h, "cndevGetAllSMluInstanceInfo", lib->allInstances_) &&
                    lib->smluMode_;
  if (!smlu) {
    lib->createProfile_ = nullptr;
    lib->smluMode_ = nullptr;
  }
  if (const cndevRet_t r = lib->init_(0); r != CNDEV_SUCCESS) return lib->fail("cndevInit", r);
  lib->initialized_ = true;
  return lib;
}

CndevLibrary::~CndevLibrary() {
  if (initialized_) release_();
  if (handle_) dlclose(handle_);
}

Result<bool> CndevLibrary::healthy(cndevDevice_t handle, std::string* detail) const {
  auto state = versioned<cndevCardHealthState_t>();
  if (const auto r = health_(&state, handle); r != CNDEV_SUCCESS) return fail("cndevGetCardHealthState", r);
  if (state.health != 1) {
    if (detail)
      *detail = "cnDev reports health " + std::to_string(state.health) + " (device state " +
                std::to_string(state.deviceState) + ", driver state " + std::to_string(state.driverState) + ")";
    return false;
  }
  // A PROHIBITED card lets no process use it, as Cambricon's own plugin treats it.
  if (computeMode_) {
    auto mode = versioned<cndevComputeMode_t>();
    if (computeMode_(&mode, handle) == CNDEV_SUCCESS && mode.mode == CNDEV_COMPUTEMODE_PROHIBITED) {
      if (detail) *detail = "its compute mode is PROHIBITED (no process may use it; set it back to default with cnmon)";
      return false;
    }
  }
  if (detail) detail->clear();
  return true;
}

Result<CardUsage> CndevLibrary::usage(cndevDevice_t handle) const {
  CardUsage out;
  auto memory = versioned<cndevMemoryInfo_t>();
  if (const auto r = memory_(&memory, handle); r != CNDEV_SUCCESS) return fail("cndevGetMemoryUsage", r);
  out.memoryUsedMiB = memory.physicalMemoryUsed > 0 ? static_cast<std::uint64_t>(memory.physicalMemoryUsed) : 0;
  if (utilization_) {
    auto util = versioned<cndevUtilizationInfo_t>();
    if (utilization_(&util, handle) == CNDEV_SUCCESS && util.averageCoreUtilization >= 0)
      out.utilizationPercent = static_cast<std::uint32_t>(std::min(util.averageCoreUtilization, 100));
  }
  return out;
}

Result<std::vector<CardInfo>> CndevLibrary::cards() const {
  auto count = versioned<cndevCardInfo_t>();
  if (const auto r = deviceCount_(&count); r != CNDEV_SUCCESS) {
    if (r == CNDEV_ERROR_NO_DEVICES) return std::vector<CardInfo>{};
    return fail("cndevGetDeviceCount", r);
  }
  std::vector<CardInfo> out;
  for (unsigned i = 0; i < count.number; ++i) {
    CardInfo card;
    card.index = static_cast<int>(i);
    if (const auto r = handleByIndex_(static_cast<int>(i), &card.handle); r != CNDEV_SUCCESS)
      return fail("cndevGetDeviceHandleByIndex", r).prefix("card " + std::to_string(i));
    auto uuid = versioned<cndevUUID_t>();
    if (const auto r = uuid_(&uuid, card.handle); r != CNDEV_SUCCESS)
      return fail("cndevGetUUID", r).prefix("card " + std::to_string(i));
    card.uuid = fixedString(uuid.uuid, CNDEV_UUID_SIZE);
    if (card.uuid.empty()) return makeError("card " + std::to_string(i) + ": cndevGetUUID returned an empty UUID");
    const char* name = cardName_ ? cardName_(card.handle) : nullptr;
    card.model = name && *name ? name : "MLU";
    auto memory = versioned<cndevMemoryInfo_t>();
    if (const auto r = memory_(&memory, card.handle); r != CNDEV_SUCCESS)
      return fail("cndevGetMemoryUsage", r).prefix("card " + std::to_string(i));
    card.memoryMiB = memory.physicalMemoryTotal > 0 ? static_cast<std::uint64_t>(memory.physicalMemoryTotal) : 0;
    if (numa_) {
      auto numa = versioned<cndevNUMANodeId_t>();
      if (numa_(&numa, card.handle) == CNDEV_SUCCESS && numa.nodeId >= 0) card.numaNode = numa.nodeId;
    }
    auto health = healthy(card.handle, &card.healthDetail);
    if (health.ok()) {
      card.healthKnown = true;
      card.healthy = *health;
    } else {
      card.healthDetail = health.error().message;
    }
    if (smluMode_) {
      auto mode = versioned<cndevSMLUMode_t>();
      card.smlu = smluMode_(&mode, card.handle) == CNDEV_SUCCESS && mode.smluMode == CNDEV_FEATURE_ENABLED;
    }
    if (linkPorts_) card.mluLinkPorts = std::max(0, linkPorts_(card.handle));
    out.push_back(std::move(card));
  }
  return out;
}

Result<std::vector<SmluProfile>> CndevLibrary::profiles(cndevDevice_t card) const {
  if (!profileIds_) return makeError(path_ + " has no sMLU functions (cndevGetSMluProfileIdInfo)");
  auto ids = versioned<cndevSMluProfileIdInfo_t>();
  if (const auto r = profileIds_(&ids, card); r != CNDEV_SUCCESS) return fail("cndevGetSMluProfileIdInfo", r);
  std::vector<SmluProfile> out;
  for (int i = 0; i < ids.count && i < 128; ++i) {
    auto info = versioned<cndevSMluProfileInfo_t>();
    const auto r = profileInfo_(&info, ids.profileId[i], card);
    if (r == CNDEV_ERROR_NOT_FOUND) continue;  // destroyed meanwhile
    if (r != CNDEV_SUCCESS) return fail("cndevGetSMluProfileInfo", r);
    out.push_back({ids.profileId[i], info.mluQuota[CNDEV_SMLU_MAX], info.memorySize[CNDEV_SMLU_MAX]});
  }
  return out;
}

Result<int> CndevLibrary::createProfile(cndevDevice_t card, std::uint32_t quota, std::uint64_t memoryBytes) const {
  if (!createProfile_) return makeError(path_ + " has no sMLU functions (cndevCreateSMluProfileInfo)");
  auto set = versioned<cndevSMluSet_t>();
  set.mluQuota = quota;
  set.memorySize = memoryBytes;
  int id = -1;
  if (const auto r = createProfile_(&set, &id, card); r != CNDEV_SUCCESS) return fail("cndevCreateSMluProfileInfo", r);
  return id;
}

Status CndevLibrary::destroyProfile(cndevDevice_t card, int profileId) const {
  if (!destroyProfile_) return makeError(path_ + " has no sMLU functions (cndevDestroySMluProfileInfo)");
  const auto r = destroyProfile_(profileId, card);
  if (r == CNDEV_SUCCESS || r == CNDEV_ERROR_NOT_FOUND) return {};
  return fail("cndevDestroySMluProfileInfo", r);
}

Result<std::vector<SmluInstance>> CndevLibrary::instances(cndevDevice_t card) const {
  if (!allInstances_) return makeError(path_ + " has no sMLU functions (cndevGetAllSMluInstanceInfo)");
  // Ask for the count first; the library answers INSUFFICIENT_SPACE with the real count.
  std::vector<cndevSMluInfo_t> infos(1);
  for (int attempt = 0; attempt < 4; ++attempt) {
    for (auto& i : infos) i.version = kVersion;
    int count = static_cast<int>(infos.size());
    const auto r = allInstances_(&count, infos.data(), card);
    if (r == CNDEV_ERROR_INSUFFICIENT_SPACE && count > static_cast<int>(infos.size())) {
      infos.resize(static_cast<size_t>(count));
      continue;
    }
    if (r != CNDEV_SUCCESS) return fail("cndevGetAllSMluInstanceInfo", r);
    std::vector<SmluInstance> out;
    for (int k = 0; k < count && k < static_cast<int>(infos.size()); ++k) {
      const auto& i = infos[static_cast<size_t>(k)];
      out.push_back({i.profileId, i.instanceId, fixedString(i.instanceName, sizeof(i.instanceName)),
                     fixedString(i.devNodeName, sizeof(i.devNodeName)), i.mluQuota[CNDEV_SMLU_MAX],
                     i.memorySize[CNDEV_SMLU_MAX], i.mluQuota[CNDEV_SMLU_USAGE], i.memorySize[CNDEV_SMLU_USAGE]});
    }
    return out;
  }
  return makeError("cndevGetAllSMluInstanceInfo kept changing its instance count; try again");
}

Result<cndevMluInstance_t> CndevLibrary::createInstance(cndevDevice_t card, int profileId,
                                                        const std::string& name) const {
  if (!createInstance_) return makeError(path_ + " has no sMLU functions (cndevCreateSMluInstanceByProfileId)");
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  cndevMluInstance_t handle = -1;
  if (const auto r = createInstance_(&handle, static_cast<unsigned>(profileId), card, buffer.data());
      r != CNDEV_SUCCESS)
    return fail("cndevCreateSMluInstanceByProfileId", r);
  return handle;
}

Result<SmluInstance> CndevLibrary::instance(cndevMluInstance_t handle) const {
  if (!instanceInfo_) return makeError(path_ + " has no sMLU functions (cndevGetSMluInstanceInfo)");
  auto info = versioned<cndevSMluInfo_t>();
  if (const auto r = instanceInfo_(&info, handle); r != CNDEV_SUCCESS) return fail("cndevGetSMluInstanceInfo", r);
  return SmluInstance{info.profileId,
                      info.instanceId,
                      fixedString(info.instanceName, sizeof(info.instanceName)),
                      fixedString(info.devNodeName, sizeof(info.devNodeName)),
                      info.mluQuota[CNDEV_SMLU_MAX],
                      info.memorySize[CNDEV_SMLU_MAX],
                      info.mluQuota[CNDEV_SMLU_USAGE],
                      info.memorySize[CNDEV_SMLU_USAGE]};
}

Status CndevLibrary::destroyInstance(cndevMluInstance_t handle) const {
  if (!destroyInstance_) return makeError(path_ + " has no sMLU functions (cndevDestroySMluInstanceByHandle)");
  const auto r = destroyInstance_(handle);
  if (r == CNDEV_SUCCESS || r == CNDEV_ERROR_NOT_FOUND) return {};
  return fail("cndevDestroySMluInstanceByHandle", r);
}

}  // namespace vgpu::cambricon
