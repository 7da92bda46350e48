// libdcmi.so through dlopen: symbols looked up once, every call's error code in words.
#include "dcmi_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <optional>

#include "vgpu/sdk/vendor_library.h"

namespace vgpu::ascend {
namespace {

constexpr int kMaxCards = 64;  // DCMI's MAX_CARD_NUM
constexpr int kMaxProcesses = 256;

std::string failed(const char* call, int code, int card, int device) {
  return std::string("libdcmi: ") + call + " on card " + std::to_string(card) + " chip " + std::to_string(device) +
         " failed with DCMI error " + std::to_string(code);
}

std::string text(const unsigned char* bytes, size_t size) {
  const char* s = reinterpret_cast<const char*>(bytes);
  return std::string(s, strnlen(s, size));
}

}  // namespace

Result<std::unique_ptr<DcmiLibrary>> DcmiLibrary::open(const std::vector<std::string>& paths) {
  auto opened = sdk::openFirstLibrary(paths, "cannot load libdcmi.so (the Ascend driver's management library)");
  if (!opened.ok()) return opened.error();
  void* handle = opened->handle;
  const std::string path = opened->path;
  std::unique_ptr<DcmiLibrary> lib(new DcmiLibrary());
  lib->handle_ = handle;
  lib->path_ = path;
  auto sym = [&](auto& slot, const char* name) { sdk::lookUp(handle, slot, name); };
  sym(lib->init_, "dcmi_init");
  sym(lib->cardList_, "dcmi_get_card_num_list");
  sym(lib->deviceNum_, "dcmi_get_device_num_in_card");
  sym(lib->logicId_, "dcmi_get_device_logic_id");
  sym(lib->phyId_, "dcmi_get_device_phyid_from_logicid");
  sym(lib->chipInfo_, "dcmi_get_device_chip_info");
  sym(lib->hbmInfo_, "dcmi_get_device_hbm_info");
  sym(lib->memoryInfo_, "dcmi_get_device_memory_info_v3");
  sym(lib->die_, "dcmi_get_device_die_v2");
  sym(lib->health_, "dcmi_get_device_health");
  sym(lib->create_, "dcmi_create_vdevice");
  sym(lib->destroy_, "dcmi_set_destroy_vdevice");
  sym(lib->resources_, "dcmi_get_device_resource_info");
  if (!lib->init_ || !lib->cardList_ || !lib->deviceNum_ || !lib->logicId_ || !lib->chipInfo_ || !lib->health_)
    return makeError(path + " lacks DCMI's discovery calls (dcmi_init, dcmi_get_card_num_list, "
                            "dcmi_get_device_num_in_card, dcmi_get_device_logic_id, dcmi_get_device_chip_info, "
                            "dcmi_get_device_health): is it libdcmi.so?");
  if (const int rc = lib->init_(); rc != 0)
    return makeError(path + ": dcmi_init failed with DCMI error " + std::to_string(rc) +
                     " (is the Ascend driver loaded, and /dev/davinci_manager there?)");
  return lib;
}

DcmiLibrary::~DcmiLibrary() {
  if (handle_) ::dlclose(handle_);
}

Result<std::vector<ChipInfo>> DcmiLibrary::chips() const {
  int cardCount = 0;
  int cards[kMaxCards] = {};
  if (const int rc = cardList_(&cardCount, cards, kMaxCards); rc != 0)
    return makeError("libdcmi: dcmi_get_card_num_list failed with DCMI error " + std::to_string(rc));
  std::vector<ChipInfo> out;
  std::optional<Error> firstError;  // a chip that fails is left out; all failing fails the call
  for (int c = 0; c < std::min(cardCount, kMaxCards); ++c) {
    const int card = cards[c];
    int devices = 0;
    if (const int rc = deviceNum_(card, &devices); rc != 0) {
      if (!firstError) firstError = makeError(failed("dcmi_get_device_num_in_card", rc, card, 0));
      continue;
    }
    for (int device = 0; device < devices; ++device) {
      if (auto chip = chipAt(card, device)) out.push_back(std::move(*chip));
      else if (!firstError) firstError = chip.error();
    }
  }
  if (out.empty() && firstError) return *firstError;
  return out;
}

Result<ChipInfo> DcmiLibrary::chipAt(int card, int device) const {
  ChipInfo chip;
  chip.card = card;
  chip.device = device;
  if (const int rc = logicId_(&chip.logicId, card, device); rc != 0)
    return makeError(failed("dcmi_get_device_logic_id", rc, card, device));
  chip.phyId = chip.logicId;
  if (unsigned int phy = 0; phyId_ && phyId_(static_cast<unsigned int>(chip.logicId), &phy) == 0)
    chip.phyId = static_cast<int>(phy);
  dcmi_chip_info info{};
  if (const int rc = chipInfo_(card, device, &info); rc != 0)
    return makeError(failed("dcmi_get_device_chip_info", rc, card, device));
  chip.chipName = text(info.chip_name, sizeof(info.chip_name));
  chip.aiCores = info.aicore_cnt;
  // Training chips report HBM, inference cards DDR: whichever the chip answers.
  if (dcmi_hbm_info hbm{}; hbmInfo_ && hbmInfo_(card, device, &hbm) == 0 && hbm.memory_size > 0)
    chip.memoryMiB = hbm.memory_size;
  else if (dcmi_get_memory_info_stru mem{}; memoryInfo_ && memoryInfo_(card, device, &mem) == 0)
    chip.memoryMiB = mem.memory_size;
  if (chip.memoryMiB == 0)
    return makeError("libdcmi: neither dcmi_get_device_hbm_info nor dcmi_get_device_memory_info_v3 reports the "
                     "memory of card " + std::to_string(card) + " chip " + std::to_string(device));
  if (const int rc = health_(card, device, &chip.health); rc != 0)
    return makeError(failed("dcmi_get_device_health", rc, card, device));
  dcmi_die_id die{};
  if (die_ && die_(card, device, NDIE, &die) == 0) {
    char hex[ASCEND_DCMI_DIE_ID_COUNT * 9 + 1] = {};
    for (int i = 0; i < ASCEND_DCMI_DIE_ID_COUNT; ++i)
      std::snprintf(hex + i * 8, sizeof(hex) - static_cast<size_t>(i) * 8, "%08X", die.soc_die[i]);
    chip.id = "Ascend-" + std::string(hex);
  } else {
    // Without a die id the logic id is the best the driver gives; it is stable while the
    // cards stay in their slots.
    chip.id = "Ascend-" + chip.chipName + "-" + std::to_string(chip.logicId);
  }
  return chip;
}

Result<unsigned int> DcmiLibrary::health(int card, int device) const {
  unsigned int h = 0;
  if (const int rc = health_(card, device, &h); rc != 0) return makeError(failed("dcmi_get_device_health", rc, card, device));
  return h;
}

Result<unsigned int> DcmiLibrary::createVnpu(int card, int device, const std::string& templateName) const {
  if (!create_) return makeError(path_ + " has no dcmi_create_vdevice: this driver cannot make vNPUs");
  dcmi_create_vdev_res_stru in{};
  if (templateName.size() >= sizeof(in.template_name))
    return makeError("vNPU template name \"" + templateName + "\" is longer than DCMI takes");
  std::memcpy(in.template_name, templateName.c_str(), templateName.size());
  dcmi_create_vdev_out out{};
  if (const int rc = create_(card, device, &in, &out); rc != 0)
    return makeError(failed(("dcmi_create_vdevice (template " + templateName + ")").c_str(), rc, card, device) +
                     " (is the chip in vNPU mode, with room for the template's AI cores?)");
  return out.vdev_id;
}

Status DcmiLibrary::destroyVnpu(int card, int device, unsigned int vdevId) const {
  if (!destroy_) return makeError(path_ + " has no dcmi_set_destroy_vdevice");
  if (const int rc = destroy_(card, device, vdevId); rc != 0)
    return makeError(failed(("dcmi_set_destroy_vdevice (vNPU " + std::to_string(vdevId) + ")").c_str(), rc, card, device));
  return {};
}

Result<std::vector<DcmiProcess>> DcmiLibrary::processes(int card, int device) const {
  if (!resources_) return makeError(path_ + " has no dcmi_get_device_resource_info");
  dcmi_proc_mem_info procs[kMaxProcesses] = {};
  int count = kMaxProcesses;
  if (const int rc = resources_(card, device, procs, &count); rc != 0)
    return makeError(failed("dcmi_get_device_resource_info", rc, card, device));
  std::vector<DcmiProcess> out;
  for (int i = 0; i < std::min(count, kMaxProcesses); ++i)
    if (procs[i].proc_id > 0) out.push_back({static_cast<std::uint32_t>(procs[i].proc_id), procs[i].proc_mem_usage});
  return out;
}

}  // namespace vgpu::ascend
