// A double of libhydmi.so: the real C symbols; physical devices from $VGPU_FAKE_ROCM_CONFIG,
// virtual devices in a state file. As the driver does: creation enforces the device's
// remaining CUs and memory and its vDCU limit (dmiGetMaxVDeviceCount is per DCU), vDCU ids
// are node-wide (0..199, the lowest free one, whatever the DCU), the driver places the CUs
// and picks the pipe itself, and hydmi writes its own vdev<id>.conf (and removes it on
// destroy) in `vdevDir`.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <type_traits>

#include "fake_rocm_state.h"
#include "hygon_api.h"

using namespace vgpu::fakerocm;

namespace {

dmiStatus enter(const char* fn, FakeConfig& config) {
  config = loadConfig();
  if (auto f = failureFor(config, fn)) return static_cast<dmiStatus>(*f);
  if (!config.valid) return DMI_STATUS_OPEN_MKFD_FAILED;
  return DMI_STATUS_SUCCESS;
}

void remaining(const FakeConfig& c, const std::vector<FakeVdev>& vdevs, int device, int& cus, long long& memMiB) {
  cus = c.devices[static_cast<size_t>(device)].cus;
  memMiB = static_cast<long long>(c.devices[static_cast<size_t>(device)].vramMiB);
  for (const auto& v : vdevs)
    if (v.device == device) {
      cus -= v.cus;
      memMiB -= v.memMiB;
    }
}

bool validDevice(const FakeConfig& c, int device) { return device >= 0 && static_cast<size_t>(device) < c.devices.size(); }

std::string hex16(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

std::string pciBusId(const FakeDevice& d) {
  const std::uint64_t b = d.bdfid.value_or(0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", static_cast<unsigned>(b >> 32), static_cast<unsigned>((b >> 8) & 0xff),
                static_cast<unsigned>((b >> 3) & 0x1f), static_cast<unsigned>(b & 7));
  return buf;
}

std::filesystem::path confPath(const FakeConfig& c, int vid) {
  return std::filesystem::path(c.vdevDir) / ("vdev" + std::to_string(vid) + ".conf");
}

/// hydmi's own file for a vDCU, in the layout Hygon's stack reads (device_id: the DCU).
void writeConf(const FakeConfig& c, const FakeVdev& v) {
  if (c.vdevDir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(c.vdevDir, ec);
  std::ofstream out(confPath(c, v.id), std::ios::trunc);
  out << "PciBusId: " << pciBusId(c.devices[static_cast<size_t>(v.device)]) << "\n"
      << "cu_mask: " << hex16(v.maskLow) << "\n"
      << "cu_mask: " << hex16(v.maskHigh) << "\n"
      << "cu_count: " << v.cus << "\n"
      << "mem: " << v.memMiB << " MiB\n"
      << "device_id: " << v.device << "\n"
      << "vdev_id: " << v.id << "\n"
      << "pipe_id: " << v.pipe << "\n"
      << "enable: 1\n";
}

void removeConf(const FakeConfig& c, int vid) {
  if (c.vdevDir.empty()) return;
  std::error_code ec;
  std::filesystem::remove(confPath(c, vid), ec);
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))
#define ENTER(fn)                                                    \
  FakeConfig config;                                                 \
  if (auto st = enter(fn, config); st != DMI_STATUS_SUCCESS) return st

FAKE_EXPORT dmiStatus dmiGetDeviceCount(int* count) {
  ENTER("dmiGetDeviceCount");
  if (count == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  *count = static_cast<int>(config.devices.size());
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetDeviceInfo(int id, dmiDeviceInfo* info) {
  ENTER("dmiGetDeviceInfo");
  if (info == nullptr || !validDevice(config, id)) return DMI_STATUS_INVALID_ARGUMENTS;
  const FakeDevice& d = config.devices[static_cast<size_t>(id)];
  *info = dmiDeviceInfo{};
  std::strncpy(info->name, d.name.value_or("DCU").c_str(), sizeof info->name - 1);
  info->compute_unit_count = d.cus;
  info->global_mem_size = d.vramMiB * 1024 * 1024;
  info->device_id = id;
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetMaxVDeviceCount(int* count) {
  ENTER("dmiGetMaxVDeviceCount");
  if (count == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  *count = config.maxVdevs;
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetVDeviceCount(int* count) {
  ENTER("dmiGetVDeviceCount");
  if (count == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  *count = static_cast<int>(loadVdevs(config).size());
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetDeviceRemainingInfo(int device, size_t* cus, size_t* mem) {
  ENTER("dmiGetDeviceRemainingInfo");
  if (cus == nullptr || mem == nullptr || !validDevice(config, device)) return DMI_STATUS_INVALID_ARGUMENTS;
  int c = 0;
  long long m = 0;
  remaining(config, loadVdevs(config), device, c, m);
  *cus = static_cast<size_t>(std::max(c, 0));
  *mem = static_cast<size_t>(std::max(m, 0LL)) * 1024 * 1024;
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetVDeviceInfo(int vid, dmiDeviceInfo* info) {
  ENTER("dmiGetVDeviceInfo");
  if (info == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  for (const auto& v : loadVdevs(config)) {
    if (v.id != vid) continue;
    *info = dmiDeviceInfo{};
    std::snprintf(info->name, sizeof info->name, "vDCU %d", vid);
    info->compute_unit_count = v.cus;
    info->global_mem_size = static_cast<size_t>(v.memMiB) * 1024 * 1024;
    if (auto u = config.vdevUsage.find(vid); u != config.vdevUsage.end())
      info->usage_mem_size = static_cast<size_t>(u->second.usedMiB) * 1024 * 1024;
    info->device_id = v.device;
    return DMI_STATUS_SUCCESS;
  }
  return DMI_STATUS_VDEV_NOT_EXIST;
}

FAKE_EXPORT dmiStatus dmiCreateVDevices(int device, int count, int* cus, int* memMiB) {
  ENTER("dmiCreateVDevices");
  if (!validDevice(config, device) || count < 1 || cus == nullptr || memMiB == nullptr)
    return DMI_STATUS_INVALID_ARGUMENTS;
  auto vdevs = loadVdevs(config);
  int freeCus = 0;
  long long freeMem = 0;
  remaining(config, vdevs, device, freeCus, freeMem);
  for (int i = 0; i < count; ++i) {
    if (cus[i] < 1 || memMiB[i] < 1) return DMI_STATUS_INVALID_ARGUMENTS;
    freeCus -= cus[i];
    freeMem -= memMiB[i];
  }
  if (freeCus < 0 || freeMem < 0) return DMI_STATUS_OUT_OF_RESOURCES;
  const auto onDevice = std::count_if(vdevs.begin(), vdevs.end(), [&](const FakeVdev& v) { return v.device == device; });
  if (onDevice + count > config.maxVdevs) return DMI_STATUS_OUT_OF_RESOURCES;
  std::vector<FakeVdev> made;
  for (int i = 0; i < count; ++i) {
    int vid = 0;
    while (vid < kNodeVdevIds &&
           std::any_of(vdevs.begin(), vdevs.end(), [&](const FakeVdev& v) { return v.id == vid; }))
      ++vid;
    int pipe = 0;
    while (pipe < kPipesPerDevice &&
           std::any_of(vdevs.begin(), vdevs.end(), [&](const FakeVdev& v) { return v.device == device && v.pipe == pipe; }))
      ++pipe;
    if (vid == kNodeVdevIds || pipe == kPipesPerDevice) return DMI_STATUS_OUT_OF_RESOURCES;
    // The driver places the CUs: the lowest ones no other vDCU of the device holds.
    std::uint64_t usedLow = 0, usedHigh = 0;
    for (const auto& v : vdevs)
      if (v.device == device) {
        usedLow |= v.maskLow;
        usedHigh |= v.maskHigh;
      }
    FakeVdev v{vid, device, cus[i], memMiB[i], pipe, 0, 0};
    for (int cu = 0, left = cus[i]; cu < 128 && left > 0; ++cu) {
      std::uint64_t& mask = cu < 64 ? v.maskLow : v.maskHigh;
      const std::uint64_t used = cu < 64 ? usedLow : usedHigh;
      const std::uint64_t bit = std::uint64_t{1} << (cu % 64);
      if ((used & bit) == 0) {
        mask |= bit;
        --left;
      }
    }
    vdevs.push_back(v);
    made.push_back(v);
  }
  if (!saveVdevs(config, vdevs)) return DMI_STATUS_CREATE_VDEV_FAILED;
  for (const auto& v : made) writeConf(config, v);
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiDestroyVDevices(int device) {
  ENTER("dmiDestroyVDevices");
  if (!validDevice(config, device)) return DMI_STATUS_INVALID_ARGUMENTS;
  auto vdevs = loadVdevs(config);
  for (const auto& v : vdevs)
    if (v.device == device) removeConf(config, v.id);
  std::erase_if(vdevs, [&](const FakeVdev& v) { return v.device == device; });
  return saveVdevs(config, vdevs) ? DMI_STATUS_SUCCESS : DMI_STATUS_DESTROY_VDEV_FAILED;
}

FAKE_EXPORT dmiStatus dmiDestroySingleVDevice(int vid) {
  ENTER("dmiDestroySingleVDevice");
  auto vdevs = loadVdevs(config);
  const auto before = vdevs.size();
  std::erase_if(vdevs, [&](const FakeVdev& v) { return v.id == vid; });
  if (vdevs.size() == before) return DMI_STATUS_VDEV_NOT_EXIST;
  if (!saveVdevs(config, vdevs)) return DMI_STATUS_DESTROY_VDEV_FAILED;
  removeConf(config, vid);
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetDevBusyPercent(int device, int* busy) {
  ENTER("dmiGetDevBusyPercent");
  if (busy == nullptr || !validDevice(config, device)) return DMI_STATUS_INVALID_ARGUMENTS;
  *busy = static_cast<int>(config.devices[static_cast<size_t>(device)].busy);
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetVDevBusyPercent(int vid, int* busy) {
  ENTER("dmiGetVDevBusyPercent");
  if (busy == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  const auto vdevs = loadVdevs(config);
  if (std::none_of(vdevs.begin(), vdevs.end(), [&](const FakeVdev& v) { return v.id == vid; }))
    return DMI_STATUS_VDEV_NOT_EXIST;
  auto u = config.vdevUsage.find(vid);
  *busy = u == config.vdevUsage.end() ? 0 : u->second.busy;
  return DMI_STATUS_SUCCESS;
}

FAKE_EXPORT dmiStatus dmiGetStatusString(dmiStatus status, const char** text) {
  if (text == nullptr) return DMI_STATUS_INVALID_ARGUMENTS;
  switch (status) {
    case DMI_STATUS_SUCCESS: *text = "success"; break;
    case DMI_STATUS_OUT_OF_RESOURCES: *text = "out of resources"; break;
    case DMI_STATUS_CREATE_VDEV_FAILED: *text = "create vdev failed"; break;
    case DMI_STATUS_DESTROY_VDEV_FAILED: *text = "destroy vdev failed"; break;
    case DMI_STATUS_VDEV_NOT_EXIST: *text = "vdev does not exist"; break;
    case DMI_STATUS_INVALID_ARGUMENTS: *text = "invalid arguments"; break;
    case DMI_STATUS_OPEN_MKFD_FAILED: *text = "open /dev/mkfd failed"; break;
    default: *text = "error"; break;
  }
  return DMI_STATUS_SUCCESS;
}

// The fake must have exactly the signatures the backend resolves with dlsym.
static_assert(std::is_same_v<decltype(&dmiGetDeviceCount), dmiGetDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&dmiGetDeviceInfo), dmiGetDeviceInfo_fn>);
static_assert(std::is_same_v<decltype(&dmiGetMaxVDeviceCount), dmiGetMaxVDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&dmiGetVDeviceCount), dmiGetVDeviceCount_fn>);
static_assert(std::is_same_v<decltype(&dmiGetDeviceRemainingInfo), dmiGetDeviceRemainingInfo_fn>);
static_assert(std::is_same_v<decltype(&dmiGetVDeviceInfo), dmiGetVDeviceInfo_fn>);
static_assert(std::is_same_v<decltype(&dmiCreateVDevices), dmiCreateVDevices_fn>);
static_assert(std::is_same_v<decltype(&dmiDestroyVDevices), dmiDestroyVDevices_fn>);
static_assert(std::is_same_v<decltype(&dmiDestroySingleVDevice), dmiDestroySingleVDevice_fn>);
static_assert(std::is_same_v<decltype(&dmiGetStatusString), dmiGetStatusString_fn>);
static_assert(std::is_same_v<decltype(&dmiGetDevBusyPercent), dmiGetDevBusyPercent_fn>);
static_assert(std::is_same_v<decltype(&dmiGetVDevBusyPercent), dmiGetVDevBusyPercent_fn>);
