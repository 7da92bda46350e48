#pragma once
// The part of NVML this backend calls, declared here from the documented ABI (nvml.h is not
// installed on build machines, and the library is opened with dlopen, never linked), and a
// long-lived session on libnvidia-ml.so.1.

#include <cstdint>
#include <memory>
#include <string>

#include "vgpu/result.h"

namespace vgpu::nvidia {

namespace nvml {

using Return = int;  // nvmlReturn_t
using Device = struct nvmlDevice_st*;
using EventSet = struct nvmlEventSet_st*;

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorTimeout = 10;

inline constexpr unsigned kMigDisable = 0;
inline constexpr unsigned kMigEnable = 1;
inline constexpr unsigned kUuidBufferSize = 96;
inline constexpr unsigned kNameBufferSize = 96;
inline constexpr unsigned kDriverVersionBufferSize = 80;

inline constexpr unsigned long long kEventSingleBitEcc = 0x1ULL;
inline constexpr unsigned long long kEventDoubleBitEcc = 0x2ULL;
inline constexpr unsigned long long kEventXidCritical = 0x8ULL;

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};

struct EventData {
  Device device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};

}  // namespace nvml

/// Function pointers resolved from libnvidia-ml.so.1, by their versioned symbol names.
/// The optional ones are null when the driver does not have them.
struct NvmlFunctions {
  nvml::Return (*init)() = nullptr;  // nvmlInit_v2
  nvml::Return (*shutdown)() = nullptr;
  const char* (*errorString)(nvml::Return) = nullptr;
  nvml::Return (*systemGetDriverVersion)(char*, unsigned) = nullptr;
  nvml::Return (*deviceGetCount)(unsigned*) = nullptr;                  // _v2
  nvml::Return (*deviceGetHandleByIndex)(unsigned, nvml::Device*) = nullptr;  // _v2
  nvml::Return (*deviceGetUUID)(nvml::Device, char*, unsigned) = nullptr;
  nvml::Return (*deviceGetName)(nvml::Device, char*, unsigned) = nullptr;
  nvml::Return (*deviceGetIndex)(nvml::Device, unsigned*) = nullptr;
  nvml::Return (*deviceGetMinorNumber)(nvml::Device, unsigned*) = nullptr;
  nvml::Return (*deviceGetMemoryInfo)(nvml::Device, nvml::Memory*) = nullptr;
  nvml::Return (*deviceGetPciInfo)(nvml::Device, nvml::PciInfo*) = nullptr;  // _v3
  // Optional:
  nvml::Return (*deviceGetCudaComputeCapability)(nvml::Device, int*, int*) = nullptr;
  nvml::Return (*deviceGetMigMode)(nvml::Device, unsigned*, unsigned*) = nullptr;
  nvml::Return (*deviceGetNumaNodeId)(nvml::Device, unsigned*) = nullptr;
  nvml::Return (*eventSetCreate)(nvml::EventSet*) = nullptr;
  nvml::Return (*deviceGetSupportedEventTypes)(nvml::Device, unsigned long long*) = nullptr;
  nvml::Return (*deviceRegisterEvents)(nvml::Device, unsigned long long, nvml::EventSet) = nullptr;
  nvml::Return (*eventSetWait)(nvml::EventSet, nvml::EventData*, unsigned) = nullptr;  // _v2
  nvml::Return (*eventSetFree)(nvml::EventSet) = nullptr;
  /// r615+: the driver's own memory cap (only probed, never called by this backend).
  void* deviceSetMemoryLimits = nullptr;  // nvmlDeviceSetMemoryLimits_v1
};

/// One NVML session: dlopen + nvmlInit_v2 at open, nvmlShutdown + dlclose when destroyed.
/// nvmlInit serialises across processes on a node, so the backend keeps one for its life.
class NvmlSession {
 public:
  /// Opens `library` (a soname or a path). Errors say which file could not be opened, which
  /// required symbol is missing, or what nvmlInit_v2 returned.
  static Result<std::unique_ptr<NvmlSession>> open(const std::string& library);
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  const NvmlFunctions& fn() const { return fn_; }
  /// "nvmlDeviceGetUUID returned 15 (GPU is lost)".
  std::string describe(const char* function, nvml::Return rc) const;
  const std::string& library() const { return library_; }

 private:
  NvmlSession(void* handle, std::string library, NvmlFunctions fn)
      : handle_(handle), library_(std::move(library)), fn_(fn) {}
  void* handle_;
  std::string library_;
  NvmlFunctions fn_;
};

}  // namespace vgpu::nvidia
