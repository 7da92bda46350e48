// A stand-in for ROCm's libamd_smi.so: the real C symbols, GPU processors described in a small
// text file that is read on every call (so a test can take a GPU away).
//
// Config (file named by VGPU_FAKE_AMDSMI_CONFIG), one item per line, '#' starts a comment:
//   gpu uuid=<id> bdf=0x500 partition=0 compute=SPX memory=NPS1 vramMiB=196608
//       name=AMD_Instinct_MI300X numa=0 render=128 card=0
//       (one line per processor: a GPU in CPX mode is 8 lines with one bdf and partitions 0..7;
//        '_' in name is a space; compute=/memory= empty: the call is not supported; render=-1:
//        amdsmi_get_gpu_enumeration_info is not supported)
//   proc uuid=<id> pid=1234 vramBytes=1048576     a process amdsmi_get_gpu_process_list lists
//   option noDriver=1      amdsmi_init fails
//   option version=24      amdsmi_get_lib_version's first word, and the process list's layout
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "amdsmi_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Gpu {
  std::string uuid, name = "AMD Instinct MI300X", compute = "SPX", memory = "NPS1";
  std::uint64_t bdf = 0, vramMiB = 196608;
  std::uint32_t partition = 0;
  int numa = 0, render = 128, card = 0;
};
struct Proc {
  std::string uuid;
  std::uint32_t pid = 0;
  std::uint64_t vramBytes = 0;
};
struct Config {
  std::vector<Gpu> gpus;
  std::vector<Proc> procs;
  bool noDriver = false;
  std::uint32_t version = 26;
};

Config readConfig() {
  Config c;
  const char* path = std::getenv("VGPU_FAKE_AMDSMI_CONFIG");
  if (!path) return c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string kind, kv;
    if (!(words >> kind)) continue;
    Gpu g;
    Proc p;
    while (words >> kv) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = kv.substr(0, eq);
      std::string v = kv.substr(eq + 1);
      const long long n = std::strtoll(v.c_str(), nullptr, 0);
      if (kind == "gpu") {
        if (k == "uuid") g.uuid = v;
        else if (k == "name") std::replace(v.begin(), v.end(), '_', ' '), g.name = v;
        else if (k == "compute") g.compute = v;
        else if (k == "memory") g.memory = v;
        else if (k == "bdf") g.bdf = static_cast<std::uint64_t>(n);
        else if (k == "vramMiB") g.vramMiB = static_cast<std::uint64_t>(n);
        else if (k == "partition") g.partition = static_cast<std::uint32_t>(n);
        else if (k == "numa") g.numa = static_cast<int>(n);
        else if (k == "render") g.render = static_cast<int>(n);
        else if (k == "card") g.card = static_cast<int>(n);
      } else if (kind == "proc") {
        if (k == "uuid") p.uuid = v;
        else if (k == "pid") p.pid = static_cast<std::uint32_t>(n);
        else if (k == "vramBytes") p.vramBytes = static_cast<std::uint64_t>(n);
      } else if (kind == "option") {
        if (k == "noDriver") c.noDriver = n != 0;
        else if (k == "version") c.version = static_cast<std::uint32_t>(n);
      }
    }
    if (kind == "gpu") c.gpus.push_back(g);
    else if (kind == "proc") c.procs.push_back(p);
  }
  return c;
}

// A processor handle is its position in the config, plus one (null is no handle).
const Gpu* gpuAt(const Config& c, amdsmi_processor_handle h) {
  const auto i = reinterpret_cast<std::uintptr_t>(h);
  return i >= 1 && i <= c.gpus.size() ? &c.gpus[i - 1] : nullptr;
}

amdsmi_status_t copyText(const std::string& s, char* out, std::uint32_t len) {
  if (!out || len == 0) return AMDSMI_STATUS_INVAL;
  if (s.empty()) return AMDSMI_STATUS_NOT_SUPPORTED;
  std::memset(out, 0, len);
  std::memcpy(out, s.data(), std::min<size_t>(s.size(), len - 1));
  return s.size() < len ? AMDSMI_STATUS_SUCCESS : AMDSMI_STATUS_INSUFFICIENT_SIZE;
}

template <typename Info>
amdsmi_status_t listProcesses(const Config& c, const Gpu& g, std::uint32_t* max, void* list) {
  std::vector<Info> found;
  for (const auto& p : c.procs)
    if (p.uuid == g.uuid) {
      Info info{};
      info.pid = p.pid;
      info.mem = p.vramBytes;
      info.memory_usage.vram_mem = p.vramBytes;
      found.push_back(info);
    }
  const std::uint32_t room = *max;
  *max = static_cast<std::uint32_t>(found.size());
  if (list) std::memcpy(list, found.data(), std::min<size_t>(room, found.size()) * sizeof(Info));
  return found.size() > room ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
}

}  // namespace

FAKE_EXPORT amdsmi_status_t amdsmi_init(uint64_t flags) {
  if (!(flags & AMDSMI_INIT_AMD_GPUS)) return AMDSMI_STATUS_INVAL;
  return readConfig().noDriver ? 8u /* AMDSMI_STATUS_DRIVER_NOT_LOADED */ : AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_shut_down(void) { return AMDSMI_STATUS_SUCCESS; }

FAKE_EXPORT amdsmi_status_t amdsmi_get_lib_version(void* version) {
  if (!version) return AMDSMI_STATUS_INVAL;
  const std::uint32_t first = readConfig().version;
  std::memcpy(version, &first, sizeof first);
  return AMDSMI_STATUS_SUCCESS;
}

FAKE_EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char** text) {
  if (!text) return AMDSMI_STATUS_INVAL;
  *text = status == 8u ? "AMDSMI_STATUS_DRIVER_NOT_LOADED" : status == AMDSMI_STATUS_NOT_FOUND ? "AMDSMI_STATUS_NOT_FOUND"
                                                                                               : "AMDSMI_STATUS_INVAL";
  return AMDSMI_STATUS_SUCCESS;
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_socket_handles(uint32_t* count, amdsmi_socket_handle* handles) {
  if (!count) return AMDSMI_STATUS_INVAL;
  const std::uint32_t room = *count;
  *count = 1;
  if (handles && room >= 1) handles[0] = reinterpret_cast<amdsmi_socket_handle>(std::uintptr_t{1});
  return AMDSMI_STATUS_SUCCESS;
}

FAKE_EXPORT amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t* count,
                                                         amdsmi_processor_handle* handles) {
  if (!count || reinterpret_cast<std::uintptr_t>(socket) != 1) return AMDSMI_STATUS_INVAL;
  const auto n = static_cast<std::uint32_t>(readConfig().gpus.size());
  const std::uint32_t room = *count;
  *count = n;
  if (handles)
    for (std::uint32_t i = 0; i < std::min(room, n); ++i) handles[i] = reinterpret_cast<amdsmi_processor_handle>(std::uintptr_t{i + 1});
  return room < n && handles ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
}

#define FAKE_GPU(h)                        \
  const Config c = readConfig();           \
  const Gpu* g = gpuAt(c, h);              \
  if (!g) return AMDSMI_STATUS_NOT_FOUND;

FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned int* length, char* uuid) {
  FAKE_GPU(h)
  if (!length || !uuid) return AMDSMI_STATUS_INVAL;
  const auto rc = copyText(g->uuid, uuid, *length);
  *length = static_cast<unsigned int>(g->uuid.size());
  return rc;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, uint64_t* bdf) {
  FAKE_GPU(h)
  if (!bdf) return AMDSMI_STATUS_INVAL;
  *bdf = g->bdf;
  return AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, void* info) {
  FAKE_GPU(h)
  if (!info) return AMDSMI_STATUS_INVAL;
  return copyText(g->name, static_cast<char*>(info), 256);  // market_name[256] leads the struct
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_memory_total(amdsmi_processor_handle h, uint32_t type, uint64_t* bytes) {
  FAKE_GPU(h)
  if (!bytes || type != AMDSMI_MEM_TYPE_VRAM) return AMDSMI_STATUS_INVAL;
  *bytes = g->vramMiB << 20;
  return AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_topo_numa_affinity(amdsmi_processor_handle h, int32_t* numa) {
  FAKE_GPU(h)
  if (!numa) return AMDSMI_STATUS_INVAL;
  *numa = g->numa;
  return AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_compute_partition(amdsmi_processor_handle h, char* out, uint32_t len) {
  FAKE_GPU(h)
  return copyText(g->compute, out, len);
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_memory_partition(amdsmi_processor_handle h, char* out, uint32_t len) {
  FAKE_GPU(h)
  return copyText(g->memory, out, len);
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h, void* info) {
  FAKE_GPU(h)
  if (!info) return AMDSMI_STATUS_INVAL;
  vgpu_amdsmi_kfd_head kfd{};
  kfd.kfd_id = 1000 + reinterpret_cast<std::uintptr_t>(h);
  kfd.node_id = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(h));
  kfd.current_partition_id = g->partition;
  std::memcpy(info, &kfd, sizeof kfd);
  return AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_enumeration_info(amdsmi_processor_handle h, void* info) {
  FAKE_GPU(h)
  if (!info) return AMDSMI_STATUS_INVAL;
  if (g->render < 0) return AMDSMI_STATUS_NOT_SUPPORTED;
  vgpu_amdsmi_enumeration_head e{};
  e.drm_render = static_cast<std::uint32_t>(g->render);
  e.drm_card = static_cast<std::uint32_t>(g->card);
  e.hsa_id = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(h));
  e.hip_id = e.hsa_id - 1;
  std::memcpy(info, &e, sizeof e);
  return AMDSMI_STATUS_SUCCESS;
}
FAKE_EXPORT amdsmi_status_t amdsmi_get_gpu_process_list(amdsmi_processor_handle h, uint32_t* max, void* list) {
  FAKE_GPU(h)
  if (!max) return AMDSMI_STATUS_INVAL;
  return c.version >= 26 ? listProcesses<vgpu_amdsmi_proc_info_v26>(c, *g, max, list)
                         : listProcesses<vgpu_amdsmi_proc_info_v24>(c, *g, max, list);
}
