#pragma once
// ROCm-SMI and hydmi opened with dlopen from the host's driver directories, each as a table
// of the functions this backend calls. Sessions are long-lived: opened once, closed with
// the object.

#include <memory>
#include <string>
#include <vector>

#include "hygon_api.h"
#include "vgpu/result.h"

namespace vgpu::hygon {

/// A library opened from the first directory that has it.
class DynamicLibrary {
 public:
  /// Tries `<dir>/<fileName>` for each dir in order. The error lists every path tried and
  /// why each failed (missing, or dlopen's message).
  static Result<std::unique_ptr<DynamicLibrary>> open(const std::string& fileName, const std::vector<std::string>& dirs);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  const std::string& path() const { return path_; }
  /// The symbol, or an error naming it and the library.
  Result<void*> symbol(const char* name) const;

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_;
  std::string path_;
};

class RocmSmi {
 public:
  static constexpr const char* kFileName = "librocm_smi64.so";
  /// Opens the library, resolves every function and calls rsmi_init(0).
  static Result<std::unique_ptr<RocmSmi>> open(const std::vector<std::string>& dirs);
  ~RocmSmi();
  RocmSmi(const RocmSmi&) = delete;
  RocmSmi& operator=(const RocmSmi&) = delete;

  const std::string& path() const { return lib_->path(); }
  /// "rsmi_dev_memory_total_get(2) failed: status 8 (RSMI_STATUS_INIT_ERROR)".
  static std::string describe(const char* call, int device, rsmi_status_t status);

  rsmi_num_monitor_devices_fn numMonitorDevices = nullptr;
  rsmi_dev_id_get_fn devIdGet = nullptr;
  rsmi_dev_name_get_fn devNameGet = nullptr;
  rsmi_dev_serial_number_get_fn devSerialNumberGet = nullptr;
  rsmi_dev_unique_id_get_fn devUniqueIdGet = nullptr;
  rsmi_dev_pci_id_get_fn devPciIdGet = nullptr;
  rsmi_dev_memory_total_get_fn devMemoryTotalGet = nullptr;
  rsmi_dev_memory_usage_get_fn devMemoryUsageGet = nullptr;  ///< optional (usage metrics)
  rsmi_dev_busy_percent_get_fn devBusyPercentGet = nullptr;
  rsmi_dev_drm_render_minor_get_fn devDrmRenderMinorGet = nullptr;
  rsmi_topo_get_numa_node_number_fn topoGetNumaNodeNumber = nullptr;

 private:
  explicit RocmSmi(std::unique_ptr<DynamicLibrary> lib) : lib_(std::move(lib)) {}
  std::unique_ptr<DynamicLibrary> lib_;
  rsmi_shut_down_fn shutDown_ = nullptr;
};

class Hydmi {
 public:
  static constexpr const char* kFileName = "libhydmi.so";
  static Result<std::unique_ptr<Hydmi>> open(const std::vector<std::string>& dirs);
  Hydmi(const Hydmi&) = delete;
  Hydmi& operator=(const Hydmi&) = delete;

  const std::string& path() const { return lib_->path(); }
  /// "dmiCreateVDevices(1) failed: status 11 (out of resources)", with hydmi's own words
  /// when dmiGetStatusString gives them.
  std::string describe(const char* call, int id, dmiStatus status) const;

  dmiGetDeviceCount_fn getDeviceCount = nullptr;
  dmiGetDeviceInfo_fn getDeviceInfo = nullptr;
  dmiGetMaxVDeviceCount_fn getMaxVDeviceCount = nullptr;
  dmiGetVDeviceCount_fn getVDeviceCount = nullptr;
  dmiGetDeviceRemainingInfo_fn getDeviceRemainingInfo = nullptr;
  dmiGetVDeviceInfo_fn getVDeviceInfo = nullptr;
  dmiCreateVDevices_fn createVDevices = nullptr;
  dmiDestroyVDevices_fn destroyVDevices = nullptr;
  dmiDestroySingleVDevice_fn destroySingleVDevice = nullptr;
  dmiGetVDevBusyPercent_fn getVDevBusyPercent = nullptr;  ///< optional (usage metrics)

 private:
  explicit Hydmi(std::unique_ptr<DynamicLibrary> lib) : lib_(std::move(lib)) {}
  std::unique_ptr<DynamicLibrary> lib_;
  dmiGetStatusString_fn getStatusString_ = nullptr;
};

}  // namespace vgpu::hygon
