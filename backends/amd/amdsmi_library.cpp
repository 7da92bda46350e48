// libamd_smi.so through dlopen: symbols looked up once, every failing call's code in words.
#include "amdsmi_library.h"

#include <dlfcn.h>

#include <cstring>
#include <type_traits>

#include "vgpu/sdk/vendor_library.h"

namespace vgpu::amd {
namespace {

constexpr std::uint32_t kMaxSockets = 64;
constexpr std::uint32_t kMaxProcessors = 256;
constexpr std::uint32_t kMaxProcesses = 512;

/// "SPX" from a buffer amdsmi filled (NUL-terminated, or as long as the buffer).
std::string text(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

}  // namespace

Result<std::unique_ptr<AmdSmiLibrary>> AmdSmiLibrary::open(const std::vector<std::string>& paths) {
  auto opened = sdk::openFirstLibrary(paths, "cannot load libamd_smi.so (ROCm's AMD SMI library)");
  if (!opened.ok()) return opened.error();
  void* handle = opened->handle;
  const std::string path = opened->path;
  std::unique_ptr<AmdSmiLibrary> lib(new AmdSmiLibrary());
  lib->handle_ = handle;
  lib->path_ = path;
  auto sym = [&](auto& slot, const char* name) { sdk::lookUp(handle, slot, name); };
  sym(lib->init_, "amdsmi_init");
  sym(lib->shutDown_, "amdsmi_shut_down");
  sym(lib->statusText_, "amdsmi_status_code_to_string");
  sym(lib->sockets_, "amdsmi_get_socket_handles");
  sym(lib->processors_, "amdsmi_get_processor_handles");
  sym(lib->uuid_, "amdsmi_get_gpu_device_uuid");
  sym(lib->bdf_, "amdsmi_get_gpu_device_bdf");
  sym(lib->asic_, "amdsmi_get_gpu_asic_info");
  sym(lib->memoryTotal_, "amdsmi_get_gpu_memory_total");
  sym(lib->numa_, "amdsmi_get_gpu_topo_numa_affinity");
  sym(lib->computePartition_, "amdsmi_get_gpu_compute_partition");
  sym(lib->memoryPartition_, "amdsmi_get_gpu_memory_partition");
  sym(lib->kfd_, "amdsmi_get_gpu_kfd_info");
  sym(lib->enumeration_, "amdsmi_get_gpu_enumeration_info");  // ROCm 6.4+; render node from it
  sym(lib->processList_, "amdsmi_get_gpu_process_list");
  amdsmi_get_lib_version_fn version = nullptr;
  sym(version, "amdsmi_get_lib_version");
  if (!lib->init_ || !lib->sockets_ || !lib->processors_ || !lib->uuid_ || !lib->memoryTotal_)
    return makeError(path + " lacks AMD SMI's discovery calls (amdsmi_init, amdsmi_get_socket_handles, "
                            "amdsmi_get_processor_handles, amdsmi_get_gpu_device_uuid, "
                            "amdsmi_get_gpu_memory_total): is it libamd_smi.so?");
  if (const auto rc = lib->init_(AMDSMI_INIT_AMD_GPUS); rc != AMDSMI_STATUS_SUCCESS)
    return makeError(path + ": " + lib->words("amdsmi_init", rc) + " (is the amdgpu driver loaded, and /dev/kfd there?)");
  if (version) {
    // amdsmi 24/25 start the struct with the year (24, 25); amdsmi 26 dropped it and starts
    // with the major version (26): either way a first word of 26 or more is the new layout.
    alignas(8) unsigned char buf[VGPU_AMDSMI_STRUCT_BYTES] = {};
    if (version(buf) == AMDSMI_STATUS_SUCCESS) {
      std::uint32_t first = 0;
      std::memcpy(&first, buf, sizeof first);
      lib->newProcLayout_ = first >= 26;
    }
  }
  return lib;
}

AmdSmiLibrary::~AmdSmiLibrary() {
  if (shutDown_) shutDown_();
  if (handle_) ::dlclose(handle_);
}

std::string AmdSmiLibrary::words(const char* call, amdsmi_status_t rc) const {
  const char* said = nullptr;
  if (statusText_ && statusText_(rc, &said) != AMDSMI_STATUS_SUCCESS) said = nullptr;
  return std::string("libamd_smi: ") + call + " failed with status " + std::to_string(rc) +
         (said && *said ? std::string(" (") + said + ")" : "");
}

Result<std::vector<amdsmi_processor_handle>> AmdSmiLibrary::handles() const {
  std::uint32_t socketCount = kMaxSockets;
  amdsmi_socket_handle sockets[kMaxSockets] = {};
  if (const auto rc = sockets_(&socketCount, sockets); rc != AMDSMI_STATUS_SUCCESS)
    return makeError(words("amdsmi_get_socket_handles", rc));
  std::vector<amdsmi_processor_handle> out;
  for (std::uint32_t s = 0; s < std::min(socketCount, kMaxSockets); ++s) {
    std::uint32_t count = kMaxProcessors;
    amdsmi_processor_handle found[kMaxProcessors] = {};
    if (const auto rc = processors_(sockets[s], &count, found); rc != AMDSMI_STATUS_SUCCESS)
      return makeError(words("amdsmi_get_processor_handles", rc));
    out.insert(out.end(), found, found + std::min(count, kMaxProcessors));
  }
  return out;
}

Result<Processor> AmdSmiLibrary::describe(amdsmi_processor_handle h) const {
  Processor p;
  char uuid[64] = {};
  unsigned int length = sizeof uuid;
  if (const auto rc = uuid_(h, &length, uuid); rc != AMDSMI_STATUS_SUCCESS)
    return makeError(words("amdsmi_get_gpu_device_uuid", rc));
  p.uuid = text(uuid, sizeof uuid);
  std::uint64_t bytes = 0;
  if (const auto rc = memoryTotal_(h, AMDSMI_MEM_TYPE_VRAM, &bytes); rc != AMDSMI_STATUS_SUCCESS)
    return makeError(words("amdsmi_get_gpu_memory_total", rc) + " for " + p.uuid);
  p.memoryMiB = bytes >> 20;
  if (bdf_) (void)bdf_(h, &p.bdf);
  alignas(8) unsigned char buf[VGPU_AMDSMI_STRUCT_BYTES] = {};
  if (asic_ && asic_(h, buf) == AMDSMI_STATUS_SUCCESS) p.market = text(reinterpret_cast<const char*>(buf), 256);
  if (std::int32_t numa = -1; numa_ && numa_(h, &numa) == AMDSMI_STATUS_SUCCESS) p.numaNode = numa;
  char mode[32] = {};
  if (computePartition_ && computePartition_(h, mode, sizeof mode) == AMDSMI_STATUS_SUCCESS)
    p.computePartition = text(mode, sizeof mode);
  std::memset(mode, 0, sizeof mode);
  if (memoryPartition_ && memoryPartition_(h, mode, sizeof mode) == AMDSMI_STATUS_SUCCESS)
    p.memoryPartition = text(mode, sizeof mode);
  std::memset(buf, 0, sizeof buf);
  if (kfd_ && kfd_(h, buf) == AMDSMI_STATUS_SUCCESS) {
    vgpu_amdsmi_kfd_head kfd;
    std::memcpy(&kfd, buf, sizeof kfd);
    if (kfd.current_partition_id != 0xFFFFFFFFu) p.partitionId = kfd.current_partition_id;
    if (kfd.node_id != 0xFFFFFFFFu) p.kfdNode = kfd.node_id;
  }
  std::memset(buf, 0, sizeof buf);
  if (enumeration_ && enumeration_(h, buf) == AMDSMI_STATUS_SUCCESS) {
    vgpu_amdsmi_enumeration_head e;
    std::memcpy(&e, buf, sizeof e);
    if (e.drm_render != 0xFFFFFFFFu) p.renderMinor = e.drm_render;
    if (e.drm_card != 0xFFFFFFFFu) p.cardMinor = e.drm_card;
  }
  return p;
}

Result<std::vector<Processor>> AmdSmiLibrary::processors() const {
  auto hs = handles();
  if (!hs) return hs.error();
  std::vector<Processor> out;
  for (auto h : *hs) {
    auto p = describe(h);
    if (!p) return p.error();
    out.push_back(std::move(*p));
  }
  return out;
}

Result<std::map<std::string, std::vector<ProcessUse>>> AmdSmiLibrary::processes() const {
  if (!processList_) return makeError(path_ + " has no amdsmi_get_gpu_process_list");
  auto hs = handles();
  if (!hs) return hs.error();
  std::map<std::string, std::vector<ProcessUse>> out;
  for (auto h : *hs) {
    char id[64] = {};
    unsigned int length = sizeof id;
    if (const auto rc = uuid_(h, &length, id); rc != AMDSMI_STATUS_SUCCESS)
      return makeError(words("amdsmi_get_gpu_device_uuid", rc));
    const std::string uuid = text(id, sizeof id);
    auto& found = out[uuid];
    std::uint32_t count = kMaxProcesses;
    auto list = [&](auto* items) -> Status {
      const auto rc = processList_(h, &count, items);
      // OUT_OF_RESOURCES: the buffer is full and more run; the first kMaxProcesses are kept.
      if (rc != AMDSMI_STATUS_SUCCESS && rc != AMDSMI_STATUS_OUT_OF_RESOURCES)
        return makeError(words("amdsmi_get_gpu_process_list", rc) + " for " + uuid);
      for (std::uint32_t i = 0; i < std::min(count, kMaxProcesses); ++i)
        found.push_back({items[i].pid, items[i].memory_usage.vram_mem});
      return {};
    };
    const Status listed = newProcLayout_ ? list(std::make_unique<vgpu_amdsmi_proc_info_v26[]>(kMaxProcesses).get())
                                         : list(std::make_unique<vgpu_amdsmi_proc_info_v24[]>(kMaxProcesses).get());
    if (!listed.ok()) return listed.error();
  }
  return out;
}

}  // namespace vgpu::amd
