// A double of librocm_smi64.so: the real C symbols, devices from $VGPU_FAKE_ROCM_CONFIG.
#include <cstring>
#include <type_traits>

#include "fake_rocm_state.h"
#include "hygon_api.h"

using vgpu::fakerocm::FakeConfig;
using vgpu::fakerocm::FakeDevice;

namespace {

int initCount = 0;

/// Common prologue: a forced failure, init, the device index. Returns SUCCESS and sets
/// `device` when the call may go on.
rsmi_status_t enter(const char* fn, FakeConfig& config, uint32_t index, const FakeDevice** device) {
  config = vgpu::fakerocm::loadConfig();
  if (auto f = vgpu::fakerocm::failureFor(config, fn)) return static_cast<rsmi_status_t>(*f);
  if (initCount == 0) return RSMI_STATUS_INIT_ERROR;
  if (device == nullptr) return RSMI_STATUS_SUCCESS;
  if (index >= config.devices.size()) return RSMI_STATUS_INVALID_ARGS;
  *device = &config.devices[index];
  return RSMI_STATUS_SUCCESS;
}

rsmi_status_t copyText(const std::string& text, char* out, size_t len) {
  if (out == nullptr || len == 0) return RSMI_STATUS_INVALID_ARGS;
  std::strncpy(out, text.c_str(), len - 1);
  out[len - 1] = '\0';
  return text.size() >= len ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))
#define ENTER(fn, idx)                                       \
  FakeConfig config;                                         \
  const FakeDevice* d = nullptr;                             \
  if (auto st = enter(fn, config, idx, &d); st != RSMI_STATUS_SUCCESS) return st

FAKE_EXPORT rsmi_status_t rsmi_init(uint64_t) {
  const FakeConfig config = vgpu::fakerocm::loadConfig();
  if (auto f = vgpu::fakerocm::failureFor(config, "rsmi_init")) return static_cast<rsmi_status_t>(*f);
  if (!config.valid) return RSMI_STATUS_INIT_ERROR;
  ++initCount;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_shut_down(void) {
  if (initCount == 0) return RSMI_STATUS_INIT_ERROR;
  --initCount;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_num_monitor_devices(uint32_t* n) {
  FakeConfig config;
  if (auto st = enter("rsmi_num_monitor_devices", config, 0, nullptr); st != RSMI_STATUS_SUCCESS) return st;
  if (n == nullptr) return RSMI_STATUS_INVALID_ARGS;
  *n = static_cast<uint32_t>(config.devices.size());
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_id_get(uint32_t dv, uint16_t* id) {
  ENTER("rsmi_dev_id_get", dv);
  if (id == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (!d->pciId) return RSMI_STATUS_NOT_SUPPORTED;
  *id = *d->pciId;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_name_get(uint32_t dv, char* name, size_t len) {
  ENTER("rsmi_dev_name_get", dv);
  if (!d->name) return RSMI_STATUS_NOT_SUPPORTED;
  return copyText(*d->name, name, len);
}

FAKE_EXPORT rsmi_status_t rsmi_dev_serial_number_get(uint32_t dv, char* serial, uint32_t len) {
  ENTER("rsmi_dev_serial_number_get", dv);
  if (!d->serial) return RSMI_STATUS_NOT_SUPPORTED;
  return copyText(*d->serial, serial, len);
}

FAKE_EXPORT rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t* id) {
  ENTER("rsmi_dev_unique_id_get", dv);
  if (id == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (d->uniqueId == 0) return RSMI_STATUS_NOT_SUPPORTED;
  *id = d->uniqueId;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t* bdfid) {
  ENTER("rsmi_dev_pci_id_get", dv);
  if (bdfid == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (!d->bdfid) return RSMI_STATUS_NOT_SUPPORTED;
  *bdfid = *d->bdfid;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, rsmi_memory_type_t type, uint64_t* total) {
  ENTER("rsmi_dev_memory_total_get", dv);
  if (total == nullptr || type > RSMI_MEM_TYPE_GTT) return RSMI_STATUS_INVALID_ARGS;
  *total = type == RSMI_MEM_TYPE_GTT ? 0 : d->vramMiB * 1024 * 1024;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, rsmi_memory_type_t type, uint64_t* used) {
  ENTER("rsmi_dev_memory_usage_get", dv);
  if (used == nullptr || type > RSMI_MEM_TYPE_GTT) return RSMI_STATUS_INVALID_ARGS;
  *used = type == RSMI_MEM_TYPE_GTT ? 0 : d->vramUsedMiB * 1024 * 1024;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t* busy) {
  ENTER("rsmi_dev_busy_percent_get", dv);
  if (busy == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (d->lost) return RSMI_STATUS_AMDGPU_RESTART_ERR;
  *busy = d->busy;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_dev_drm_render_minor_get(uint32_t dv, uint32_t* minor) {
  ENTER("rsmi_dev_drm_render_minor_get", dv);
  if (minor == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (!d->renderMinor) return RSMI_STATUS_NOT_SUPPORTED;
  *minor = *d->renderMinor;
  return RSMI_STATUS_SUCCESS;
}

FAKE_EXPORT rsmi_status_t rsmi_topo_get_numa_node_number(uint32_t dv, uint32_t* numa) {
  ENTER("rsmi_topo_get_numa_node_number", dv);
  if (numa == nullptr) return RSMI_STATUS_INVALID_ARGS;
  if (!d->numa) return RSMI_STATUS_NOT_SUPPORTED;
  *numa = *d->numa;
  return RSMI_STATUS_SUCCESS;
}

// The fake must have exactly the signatures the backend resolves with dlsym.
static_assert(std::is_same_v<decltype(&rsmi_init), rsmi_init_fn>);
static_assert(std::is_same_v<decltype(&rsmi_shut_down), rsmi_shut_down_fn>);
static_assert(std::is_same_v<decltype(&rsmi_num_monitor_devices), rsmi_num_monitor_devices_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_id_get), rsmi_dev_id_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_name_get), rsmi_dev_name_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_serial_number_get), rsmi_dev_serial_number_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_unique_id_get), rsmi_dev_unique_id_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_pci_id_get), rsmi_dev_pci_id_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_memory_total_get), rsmi_dev_memory_total_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_memory_usage_get), rsmi_dev_memory_usage_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_busy_percent_get), rsmi_dev_busy_percent_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_dev_drm_render_minor_get), rsmi_dev_drm_render_minor_get_fn>);
static_assert(std::is_same_v<decltype(&rsmi_topo_get_numa_node_number), rsmi_topo_get_numa_node_number_fn>);
