#pragma once
// libamd_smi.so opened with dlopen, and the GPU processors it lists (one per whole GPU, or
// one per compute partition of a partitioned MI300-class GPU), with amdsmi's codes in words.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amdsmi_api.h"
#include "vgpu/result.h"

namespace vgpu::amd {

/// One GPU processor handle as amdsmi describes it.
struct Processor {
  std::string uuid;             ///< amdsmi_get_gpu_device_uuid (includes the partition index)
  std::uint64_t bdf = 0;        ///< amdsmi_bdf_t as one word
  std::string market;           ///< asic info's market name, "AMD Instinct MI300X"
  std::uint64_t memoryMiB = 0;  ///< VRAM this processor sees
  int numaNode = -1;
  std::string computePartition;  ///< "SPX", "DPX", "QPX", "CPX"; "" = not supported (not an MI300-class GPU)
  std::string memoryPartition;   ///< "NPS1", "NPS4"; "" = not supported
  std::uint32_t partitionId = 0;  ///< kfd info's current_partition_id (0 when not supported)
  std::optional<std::uint32_t> kfdNode;      ///< kfd info's node_id (the KFD topology node)
  std::optional<std::uint32_t> renderMinor;  ///< enumeration info (amdsmi of ROCm 6.4+)
  std::optional<std::uint32_t> cardMinor;
};

struct ProcessUse {
  std::uint32_t pid = 0;
  std::uint64_t vramBytes = 0;
};

class AmdSmiLibrary {
 public:
  /// Opens the first of `paths` that loads and calls amdsmi_init(AMDSMI_INIT_AMD_GPUS).
  static Result<std::unique_ptr<AmdSmiLibrary>> open(const std::vector<std::string>& paths);
  ~AmdSmiLibrary();
  AmdSmiLibrary(const AmdSmiLibrary&) = delete;
  AmdSmiLibrary& operator=(const AmdSmiLibrary&) = delete;

  /// Every GPU processor of every socket, in amdsmi's order.
  Result<std::vector<Processor>> processors() const;
  /// The processes on every processor and their VRAM, by processor UUID, in one pass.
  Result<std::map<std::string, std::vector<ProcessUse>>> processes() const;

 private:
  AmdSmiLibrary() = default;
  Result<std::vector<amdsmi_processor_handle>> handles() const;
  Result<Processor> describe(amdsmi_processor_handle h) const;
  std::string words(const char* call, amdsmi_status_t rc) const;

  void* handle_ = nullptr;
  std::string path_;
  bool newProcLayout_ = true;  ///< amdsmi 26+ (ROCm 7): amdsmi_proc_info_t with 256-byte strings
  amdsmi_init_fn init_ = nullptr;
  amdsmi_shut_down_fn shutDown_ = nullptr;
  amdsmi_status_code_to_string_fn statusText_ = nullptr;
  amdsmi_get_socket_handles_fn sockets_ = nullptr;
  amdsmi_get_processor_handles_fn processors_ = nullptr;
  amdsmi_get_gpu_device_uuid_fn uuid_ = nullptr;
  amdsmi_get_gpu_device_bdf_fn bdf_ = nullptr;
  amdsmi_get_gpu_asic_info_fn asic_ = nullptr;
  amdsmi_get_gpu_memory_total_fn memoryTotal_ = nullptr;
  amdsmi_get_gpu_topo_numa_affinity_fn numa_ = nullptr;
  amdsmi_get_gpu_compute_partition_fn computePartition_ = nullptr;
  amdsmi_get_gpu_memory_partition_fn memoryPartition_ = nullptr;
  amdsmi_get_gpu_kfd_info_fn kfd_ = nullptr;
  amdsmi_get_gpu_enumeration_info_fn enumeration_ = nullptr;
  amdsmi_get_gpu_process_list_fn processList_ = nullptr;
};

}  // namespace vgpu::amd
