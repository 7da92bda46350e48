#pragma once
// libdcmi.so opened with dlopen, and the chips it lists: what discovery, the limiter and the
// process listing ask of the Ascend driver, with DCMI's error codes turned into words.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dcmi_api.h"
#include "vgpu/result.h"

namespace vgpu::ascend {

/// One NPU chip as DCMI describes it.
struct ChipInfo {
  int card = 0;      ///< DCMI's card id
  int device = 0;    ///< the chip's device id within the card
  int logicId = 0;   ///< the driver's logic id (npu-smi's "NPU ID")
  int phyId = 0;     ///< the physical id: /dev/davinci<phyId>
  std::string chipName;  ///< "910B3", "310P3"
  std::uint32_t aiCores = 0;
  std::uint64_t memoryMiB = 0;
  unsigned int health = 0;  ///< DCMI's: 0 healthy, 1..3 alarms of rising severity
  std::string id;           ///< "Ascend-<die id>", stable across reboots
};

struct DcmiProcess {
  std::uint32_t pid = 0;
  std::uint64_t memoryBytes = 0;
};

class DcmiLibrary {
 public:
  /// Opens the first of `paths` that loads and calls dcmi_init.
  static Result<std::unique_ptr<DcmiLibrary>> open(const std::vector<std::string>& paths);
  ~DcmiLibrary();
  DcmiLibrary(const DcmiLibrary&) = delete;
  DcmiLibrary& operator=(const DcmiLibrary&) = delete;

  Result<std::vector<ChipInfo>> chips() const;
  Result<unsigned int> health(int card, int device) const;
  /// Creates a vNPU of `templateName` on the chip; returns its vdev id (/dev/vdavinci<id>).
  Result<unsigned int> createVnpu(int card, int device, const std::string& templateName) const;
  Status destroyVnpu(int card, int device, unsigned int vdevId) const;
  /// The processes on the chip and their memory; an error when the driver cannot list them.
  Result<std::vector<DcmiProcess>> processes(int card, int device) const;

 private:
  DcmiLibrary() = default;
  Result<ChipInfo> chipAt(int card, int device) const;
  void* handle_ = nullptr;
  std::string path_;
  dcmi_init_fn init_ = nullptr;
  dcmi_get_card_num_list_fn cardList_ = nullptr;
  dcmi_get_device_num_in_card_fn deviceNum_ = nullptr;
  dcmi_get_device_logic_id_fn logicId_ = nullptr;
  dcmi_get_device_phyid_from_logicid_fn phyId_ = nullptr;
  dcmi_get_device_chip_info_fn chipInfo_ = nullptr;
  dcmi_get_device_hbm_info_fn hbmInfo_ = nullptr;
  dcmi_get_device_memory_info_v3_fn memoryInfo_ = nullptr;
  dcmi_get_device_die_v2_fn die_ = nullptr;
  dcmi_get_device_health_fn health_ = nullptr;
  dcmi_create_vdevice_fn create_ = nullptr;
  dcmi_set_destroy_vdevice_fn destroy_ = nullptr;
  dcmi_get_device_resource_info_fn resources_ = nullptr;
};

}  // namespace vgpu::ascend
