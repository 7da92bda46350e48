#include "vendor_libs.h"

#include <dlfcn.h>

#include <filesystem>

namespace vgpu::hygon {
namespace {

template <class Fn>
Status resolve(const DynamicLibrary& lib, const char* name, Fn& out) {
  auto sym = lib.symbol(name);
  if (!sym.ok()) return std::move(sym).error();
  out = reinterpret_cast<Fn>(*sym);
  return {};
}

const char* rsmiStatusName(rsmi_status_t s) {
  switch (s) {
    case RSMI_STATUS_SUCCESS: return "RSMI_STATUS_SUCCESS";
    case RSMI_STATUS_INVALID_ARGS: return "RSMI_STATUS_INVALID_ARGS";
    case RSMI_STATUS_NOT_SUPPORTED: return "RSMI_STATUS_NOT_SUPPORTED";
    case RSMI_STATUS_FILE_ERROR: return "RSMI_STATUS_FILE_ERROR";
    case RSMI_STATUS_PERMISSION: return "RSMI_STATUS_PERMISSION";
    case RSMI_STATUS_OUT_OF_RESOURCES: return "RSMI_STATUS_OUT_OF_RESOURCES";
    case RSMI_STATUS_INTERNAL_EXCEPTION: return "RSMI_STATUS_INTERNAL_EXCEPTION";
    case RSMI_STATUS_INPUT_OUT_OF_BOUNDS: return "RSMI_STATUS_INPUT_OUT_OF_BOUNDS";
    case RSMI_STATUS_INIT_ERROR: return "RSMI_STATUS_INIT_ERROR";
    case RSMI_STATUS_NOT_YET_IMPLEMENTED: return "RSMI_STATUS_NOT_YET_IMPLEMENTED";
    case RSMI_STATUS_NOT_FOUND: return "RSMI_STATUS_NOT_FOUND";
    case RSMI_STATUS_INSUFFICIENT_SIZE: return "RSMI_STATUS_INSUFFICIENT_SIZE";
    case RSMI_STATUS_INTERRUPT: return "RSMI_STATUS_INTERRUPT";
    case RSMI_STATUS_UNEXPECTED_SIZE: return "RSMI_STATUS_UNEXPECTED_SIZE";
    case RSMI_STATUS_NO_DATA: return "RSMI_STATUS_NO_DATA";
    case RSMI_STATUS_UNEXPECTED_DATA: return "RSMI_STATUS_UNEXPECTED_DATA";
    case RSMI_STATUS_BUSY: return "RSMI_STATUS_BUSY";
    case RSMI_STATUS_REFCOUNT_OVERFLOW: return "RSMI_STATUS_REFCOUNT_OVERFLOW";
    case RSMI_STATUS_SETTING_UNAVAILABLE: return "RSMI_STATUS_SETTING_UNAVAILABLE";
    case RSMI_STATUS_AMDGPU_RESTART_ERR: return "RSMI_STATUS_AMDGPU_RESTART_ERR";
    case RSMI_STATUS_UNKNOWN_ERROR: break;
  }
  return "RSMI_STATUS_UNKNOWN_ERROR";
}

}  // namespace

Result<std::unique_ptr<DynamicLibrary>> DynamicLibrary::open(const std::string& fileName,
                                                             const std::vector<std::string>& dirs) {
  std::string tried;
  for (const auto& dir : dirs) {
    const std::string path = (std::filesystem::path(dir) / fileName).string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += "\n  " + path + ": not found";
      continue;
    }
    // RTLD_LOCAL: the vendor's symbols must not leak into the agent or other backends.
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(h, path));
    const char* why = dlerror();
    tried += "\n  " + path + ": " + (why ? why : "dlopen failed");
  }
  if (dirs.empty()) tried = " (no directories configured)";
  return makeError("cannot load " + fileName + "; paths tried:" + tried +
                   "\n  (install the DCU driver (hyhal) or set options.driverDir to the folder that holds it)");
}

DynamicLibrary::~DynamicLibrary() { dlclose(handle_); }

Result<void*> DynamicLibrary::symbol(const char* name) const {
  dlerror();
  void* p = dlsym(handle_, name);
  if (p == nullptr) return makeError(path_ + " has no symbol " + name + " (too old or not the Hygon library?)");
  return p;
}

Result<std::unique_ptr<RocmSmi>> RocmSmi::open(const std::vector<std::string>& dirs) {
  auto lib = DynamicLibrary::open(kFileName, dirs);
  if (!lib.ok()) return std::move(lib).error();
  std::unique_ptr<RocmSmi> r(new RocmSmi(std::move(*lib)));
  const DynamicLibrary& l = *r->lib_;
  rsmi_init_fn init = nullptr;
  for (Status s : {resolve(l, "rsmi_init", init), resolve(l, "rsmi_shut_down", r->shutDown_),
                   resolve(l, "rsmi_num_monitor_devices", r->numMonitorDevices),
                   resolve(l, "rsmi_dev_id_get", r->devIdGet), resolve(l, "rsmi_dev_name_get", r->devNameGet),
                   resolve(l, "rsmi_dev_serial_number_get", r->devSerialNumberGet),
                   resolve(l, "rsmi_dev_unique_id_get", r->devUniqueIdGet),
                   resolve(l, "rsmi_dev_pci_id_get", r->devPciIdGet),
                   resolve(l, "rsmi_dev_memory_total_get", r->devMemoryTotalGet),
                   resolve(l, "rsmi_dev_busy_percent_get", r->devBusyPercentGet),
                   resolve(l, "rsmi_dev_drm_render_minor_get", r->devDrmRenderMinorGet),
                   resolve(l, "rsmi_topo_get_numa_node_number", r->topoGetNumaNodeNumber)})
    if (!s.ok()) return s.error();
  if (auto sym = l.symbol("rsmi_dev_memory_usage_get"); sym.ok())
    r->devMemoryUsageGet = reinterpret_cast<rsmi_dev_memory_usage_get_fn>(*sym);
  if (const rsmi_status_t st = init(0); st != RSMI_STATUS_SUCCESS) {
    r->shutDown_ = nullptr;  // never initialised: nothing to shut down
    return makeError(r->path() + ": " + describe("rsmi_init", -1, st) + " (is the DCU driver loaded?)");
  }
  return r;
}

RocmSmi::~RocmSmi() {
  if (shutDown_) shutDown_();
}

std::string RocmSmi::describe(const char* call, int device, rsmi_status_t status) {
  std::string s = call;
  if (device >= 0) s += "(" + std::to_string(device) + ")";
  return s + " failed: status " + std::to_string(static_cast<std::uint32_t>(status)) + " (" + rsmiStatusName(status) + ")";
}

Result<std::unique_ptr<Hydmi>> Hydmi::open(const std::vector<std::string>& dirs) {
  auto lib = DynamicLibrary::open(kFileName, dirs);
  if (!lib.ok()) return std::move(lib).error();
  std::unique_ptr<Hydmi> h(new Hydmi(std::move(*lib)));
  const DynamicLibrary& l = *h->lib_;
  for (Status s : {resolve(l, "dmiGetDeviceCount", h->getDeviceCount), resolve(l, "dmiGetDeviceInfo", h->getDeviceInfo),
                   resolve(l, "dmiGetMaxVDeviceCount", h->getMaxVDeviceCount),
                   resolve(l, "dmiGetVDeviceCount", h->getVDeviceCount),
                   resolve(l, "dmiGetDeviceRemainingInfo", h->getDeviceRemainingInfo),
                   resolve(l, "dmiGetVDeviceInfo", h->getVDeviceInfo),
                   resolve(l, "dmiCreateVDevices", h->createVDevices),
                   resolve(l, "dmiDestroyVDevices", h->destroyVDevices),
                   resolve(l, "dmiDestroySingleVDevice", h->destroySingleVDevice)})
    if (!s.ok()) return s.error();
  // Optional: only used for words in messages.
  if (auto sym = l.symbol("dmiGetStatusString"); sym.ok()) h->getStatusString_ = reinterpret_cast<dmiGetStatusString_fn>(*sym);
  if (auto sym = l.symbol("dmiGetVDevBusyPercent"); sym.ok())
    h->getVDevBusyPercent = reinterpret_cast<dmiGetVDevBusyPercent_fn>(*sym);
  return h;
}

std::string Hydmi::describe(const char* call, int id, dmiStatus status) const {
  std::string s = std::string(call) + "(" + std::to_string(id) + ") failed: status " + std::to_string(static_cast<int>(status));
  const char* text = nullptr;
  if (getStatusString_ && getStatusString_(status, &text) == DMI_STATUS_SUCCESS && text && *text) s += std::string(" (") + text + ")";
  return s;
}

}  // namespace vgpu::hygon
