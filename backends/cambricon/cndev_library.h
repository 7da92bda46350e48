#pragma once
// libcndev.so opened with dlopen: the cnDev calls the backend makes, each returning a
// Result whose error names the call, cnDev's words for the code and the library path.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cndev_api.h"
#include "vgpu/result.h"

namespace vgpu::cambricon {

/// One MLU card as cnDev reports it.
struct CardInfo {
  int index = 0;
  cndevDevice_t handle = 0;
  std::string uuid;  ///< As cnDev gives it, without the "MLU-" prefix.
  std::string model;
  std::uint64_t memoryMiB = 0;
  int numaNode = -1;
  bool healthKnown = false;
  bool healthy = false;
  std::string healthDetail;  ///< Why a card is not healthy, in words.
  bool smlu = false;
  int mluLinkPorts = 0;
};

/// What a card is using now (for a card held whole, the container's use).
struct CardUsage {
  std::uint64_t memoryUsedMiB = 0;
  std::optional<std::uint32_t> utilizationPercent;  ///< unset: cnDev has no utilization query
};

/// An sMLU instance as cnDev lists it.
struct SmluInstance {
  int profileId = 0;
  int instanceId = 0;
  std::string name;
  std::string devNode;
  std::uint32_t quota = 0;
  std::uint64_t memoryBytes = 0;
  std::uint32_t quotaUsed = 0;        ///< mluQuota[USAGE]: how busy the instance is
  std::uint64_t memoryUsedBytes = 0;  ///< memorySize[USAGE]
};

/// An sMLU profile of one card.
struct SmluProfile {
  int id = 0;
  std::uint32_t quota = 0;
  std::uint64_t memoryBytes = 0;
};

class CndevLibrary {
 public:
  /// The first of `paths` that dlopen accepts, its symbols resolved and cndevInit called.
  /// Errors list every path tried and what dlopen said, or name the missing symbol, or
  /// explain cndevInit's answer (no driver, driver too old).
  static Result<std::unique_ptr<CndevLibrary>> open(const std::vector<std::string>& paths);
  ~CndevLibrary();
  CndevLibrary(const CndevLibrary&) = delete;
  CndevLibrary& operator=(const CndevLibrary&) = delete;

  const std::string& path() const { return path_; }

  /// Every card, unhealthy ones included.
  Result<std::vector<CardInfo>> cards() const;
  /// Health of one card (for the health loop): cnDev's health state, and not PROHIBITED.
  Result<bool> healthy(cndevDevice_t handle, std::string* detail) const;
  /// Memory in use and core utilization of one card.
  Result<CardUsage> usage(cndevDevice_t handle) const;

  Result<std::vector<SmluProfile>> profiles(cndevDevice_t card) const;
  Result<int> createProfile(cndevDevice_t card, std::uint32_t quota, std::uint64_t memoryBytes) const;
  /// Success also when the profile is already gone.
  Status destroyProfile(cndevDevice_t card, int profileId) const;
  Result<std::vector<SmluInstance>> instances(cndevDevice_t card) const;
  /// The new instance's handle.
  Result<cndevMluInstance_t> createInstance(cndevDevice_t card, int profileId, const std::string& name) const;
  Result<SmluInstance> instance(cndevMluInstance_t handle) const;
  /// Success also when the instance is already gone.
  Status destroyInstance(cndevMluInstance_t handle) const;
  bool supportsSmlu() const { return createProfile_ != nullptr; }

 private:
  CndevLibrary() = default;
  Error fail(const char* call, cndevRet_t code) const;

  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string path_;
  cndevInit_fn init_ = nullptr;
  cndevRelease_fn release_ = nullptr;
  cndevGetErrorString_fn errorString_ = nullptr;
  cndevGetDeviceCount_fn deviceCount_ = nullptr;
  cndevGetDeviceHandleByIndex_fn handleByIndex_ = nullptr;
  cndevGetUUID_fn uuid_ = nullptr;
  cndevGetCardNameStringByDevId_fn cardName_ = nullptr;
  cndevGetMemoryUsage_fn memory_ = nullptr;
  cndevGetCardHealthState_fn health_ = nullptr;
  cndevGetNUMANodeIdByDevId_fn numa_ = nullptr;
  cndevGetMLULinkPortNumber_fn linkPorts_ = nullptr;
  cndevGetSMLUMode_fn smluMode_ = nullptr;
  cndevGetComputeMode_fn computeMode_ = nullptr;
  cndevGetDeviceUtilizationInfo_fn utilization_ = nullptr;
  cndevCreateSMluProfileInfo_fn createProfile_ = nullptr;
  cndevDestroySMluProfileInfo_fn destroyProfile_ = nullptr;
  cndevGetSMluProfileIdInfo_fn profileIds_ = nullptr;
  cndevGetSMluProfileInfo_fn profileInfo_ = nullptr;
  cndevCreateSMluInstanceByProfileId_fn createInstance_ = nullptr;
  cndevDestroySMluInstanceByHandle_fn destroyInstance_ = nullptr;
  cndevGetSMluInstanceInfo_fn instanceInfo_ = nullptr;
  cndevGetAllSMluInstanceInfo_fn allInstances_ = nullptr;
};

/// cnDev's name for a return code ("CNDEV_ERROR_NO_DRIVER").
const char* cndevCodeName(cndevRet_t code);

}  // namespace vgpu::cambricon
