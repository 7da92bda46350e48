// A double of libhydmi.so: the real C symbols; physical devices from $VGPU_FAKE_ROCM_CONFIG,
// virtual devices in a state file. Creation enforces the device's remaining CUs and memory
// and the node's vDCU limit, as the driver does.
#include <algorithm>
#include <cstring>
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
  if (static_cast<int>(vdevs.size()) + count > config.maxVdevs) return DMI_STATUS_OUT_OF_RESOURCES;
  for (int i = 0; i < count; ++i) {
    int vid = 0;
    while (std::any_of(vdevs.begin(), vdevs.end(), [&](const FakeVdev& v) { return v.id == vid; })) ++vid;
    vdevs.push_back({vid, device, cus[i], memMiB[i]});
  }
  return saveVdevs(config, vdevs) ? DMI_STATUS_SUCCESS : DMI_STATUS_CREATE_VDEV_FAILED;
}

FAKE_EXPORT dmiStatus dmiDestroyVDevices(int device) {
  ENTER("dmiDestroyVDevices");
  if (!validDevice(config, device)) return DMI_STATUS_INVALID_ARGUMENTS;
  auto vdevs = loadVdevs(config);
  std::erase_if(vdevs, [&](const FakeVdev& v) { return v.device == device; });
  return saveVdevs(config, vdevs) ? DMI_STATUS_SUCCESS : DMI_STATUS_DESTROY_VDEV_FAILED;
}

FAKE_EXPORT dmiStatus dmiDestroySingleVDevice(int vid) {
  ENTER("dmiDestroySingleVDevice");
  auto vdevs = loadVdevs(config);
  const auto before = vdevs.size();
  std::erase_if(vdevs, [&](const FakeVdev& v) { return v.id == vid; });
  if (vdevs.size() == before) return DMI_STATUS_VDEV_NOT_EXIST;
  return saveVdevs(config, vdevs) ? DMI_STATUS_SUCCESS : DMI_STATUS_DESTROY_VDEV_FAILED;
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
