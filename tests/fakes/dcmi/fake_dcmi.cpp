// A stand-in for Huawei's libdcmi.so: the real C symbols and struct layouts, with chips
// described in a small text file and the vNPUs it creates kept in a state file, so that what
// one process creates the next sees (as the driver keeps them across agent restarts).
//
// Config (file named by VGPU_FAKE_DCMI_CONFIG), one item per line, '#' starts a comment:
//   chip card=0 device=0 logic=0 phy=0 name=910B3 aicores=20 memoryMB=65536 health=0 die=1A2B
//        (hbm=0: the chip answers dcmi_get_device_memory_info_v3, not the HBM call, as a 310P)
//   proc card=0 device=0 pid=1234 bytes=1048576     a process dcmi_get_device_resource_info lists
//   option devRoot=<dir>    where the driver makes (and removes) each vNPU's vdavinci<id>
//   option noDriver=1       dcmi_init fails
// State: "<config>.vnpus", one "card device vdev template cores" line per vNPU. Without a
// config the library has no chips. vNPUs are refused when the chip lacks AI cores for them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "dcmi_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kErrInvalid = -8001;   // DCMI_ERR_CODE_INVALID_PARAMETER
constexpr int kErrNoDevice = -8007;  // the chip is not there
constexpr int kErrNoRoom = -8005;    // no resources left for the template
constexpr unsigned kFirstVdev = 100;

struct Chip {
  int card = 0, device = 0, logic = 0, phy = 0;
  std::string name = "910B3";
  unsigned aicores = 20;
  unsigned long long memoryMB = 65536;
  unsigned health = 0;
  unsigned die = 0;
  bool hbm = true;
};
struct Proc {
  int card = 0, device = 0, pid = 0;
  unsigned long bytes = 0;
};
struct Vnpu {
  int card = 0, device = 0;
  unsigned vdev = 0;
  std::string tmpl;
  unsigned cores = 0;
};
struct Config {
  std::vector<Chip> chips;
  std::vector<Proc> procs;
  std::string devRoot;
  bool noDriver = false;
};

std::mutex g_mutex;

std::string configPath() {
  const char* p = std::getenv("VGPU_FAKE_DCMI_CONFIG");
  return p ? p : "";
}

Config readConfig() {
  Config c;
  std::ifstream in(configPath());
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string kind, kv;
    if (!(words >> kind)) continue;
    Chip chip;
    Proc proc;
    while (words >> kv) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      const long n = std::strtol(v.c_str(), nullptr, 0);
      if (kind == "chip") {
        if (k == "card") chip.card = static_cast<int>(n);
        else if (k == "device") chip.device = static_cast<int>(n);
        else if (k == "logic") chip.logic = static_cast<int>(n);
        else if (k == "phy") chip.phy = static_cast<int>(n);
        else if (k == "name") chip.name = v;
        else if (k == "aicores") chip.aicores = static_cast<unsigned>(n);
        else if (k == "memoryMB") chip.memoryMB = static_cast<unsigned long long>(n);
        else if (k == "health") chip.health = static_cast<unsigned>(n);
        else if (k == "die") chip.die = static_cast<unsigned>(std::strtoul(v.c_str(), nullptr, 16));
        else if (k == "hbm") chip.hbm = n != 0;
      } else if (kind == "proc") {
        if (k == "card") proc.card = static_cast<int>(n);
        else if (k == "device") proc.device = static_cast<int>(n);
        else if (k == "pid") proc.pid = static_cast<int>(n);
        else if (k == "bytes") proc.bytes = static_cast<unsigned long>(n);
      } else if (kind == "option") {
        if (k == "devRoot") c.devRoot = v;
        else if (k == "noDriver") c.noDriver = n != 0;
      }
    }
    if (kind == "chip") c.chips.push_back(chip);
    else if (kind == "proc") c.procs.push_back(proc);
  }
  return c;
}

std::vector<Vnpu> readVnpus() {
  std::vector<Vnpu> out;
  std::ifstream in(configPath() + ".vnpus");
  Vnpu v;
  while (in >> v.card >> v.device >> v.vdev >> v.tmpl >> v.cores) out.push_back(v);
  return out;
}

void writeVnpus(const std::vector<Vnpu>& vnpus) {
  std::ofstream out(configPath() + ".vnpus", std::ios::trunc);
  for (const auto& v : vnpus) out << v.card << ' ' << v.device << ' ' << v.vdev << ' ' << v.tmpl << ' ' << v.cores << '\n';
}

const Chip* find(const Config& c, int card, int device) {
  for (const auto& chip : c.chips)
    if (chip.card == card && chip.device == device) return &chip;
  return nullptr;
}

std::vector<int> cards(const Config& c) {
  std::vector<int> out;
  for (const auto& chip : c.chips)
    if (std::find(out.begin(), out.end(), chip.card) == out.end()) out.push_back(chip.card);
  return out;
}

void copyName(unsigned char* dst, size_t cap, const std::string& s) {
  std::memset(dst, 0, cap);
  std::memcpy(dst, s.data(), std::min(s.size(), cap - 1));
}

/// "vir05_1c_16g" -> 5: the AI cores a template name states.
unsigned templateCores(const char* name) {
  if (std::strncmp(name, "vir", 3) != 0) return 0;
  return static_cast<unsigned>(std::strtoul(name + 3, nullptr, 10));
}

}  // namespace

FAKE_EXPORT int dcmi_init(void) {
  std::lock_guard lock(g_mutex);
  return readConfig().noDriver ? -8020 : 0;
}

FAKE_EXPORT int dcmi_get_card_num_list(int* card_num, int* card_list, int list_len) {
  if (!card_num || !card_list) return kErrInvalid;
  std::lock_guard lock(g_mutex);
  const auto list = cards(readConfig());
  *card_num = static_cast<int>(std::min<size_t>(list.size(), static_cast<size_t>(list_len)));
  for (int i = 0; i < *card_num; ++i) card_list[i] = list[static_cast<size_t>(i)];
  return 0;
}

FAKE_EXPORT int dcmi_get_device_num_in_card(int card_id, int* device_num) {
  if (!device_num) return kErrInvalid;
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  *device_num = static_cast<int>(std::count_if(c.chips.begin(), c.chips.end(), [&](const Chip& x) { return x.card == card_id; }));
  return *device_num ? 0 : kErrNoDevice;
}

FAKE_EXPORT int dcmi_get_device_logic_id(int* device_logic_id, int card_id, int device_id) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !device_logic_id) return chip ? kErrInvalid : kErrNoDevice;
  *device_logic_id = chip->logic;
  return 0;
}

FAKE_EXPORT int dcmi_get_device_phyid_from_logicid(unsigned int logicid, unsigned int* phyid) {
  std::lock_guard lock(g_mutex);
  for (const auto& chip : readConfig().chips)
    if (chip.logic == static_cast<int>(logicid)) {
      *phyid = static_cast<unsigned>(chip.phy);
      return 0;
    }
  return kErrNoDevice;
}

FAKE_EXPORT int dcmi_get_device_chip_info(int card_id, int device_id, struct dcmi_chip_info* info) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !info) return chip ? kErrInvalid : kErrNoDevice;
  copyName(info->chip_type, sizeof(info->chip_type), "Ascend");
  copyName(info->chip_name, sizeof(info->chip_name), chip->name);
  copyName(info->chip_ver, sizeof(info->chip_ver), "V1");
  info->aicore_cnt = chip->aicores;
  return 0;
}

FAKE_EXPORT int dcmi_get_device_hbm_info(int card_id, int device_id, struct dcmi_hbm_info* hbm) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !hbm) return chip ? kErrInvalid : kErrNoDevice;
  if (!chip->hbm) return -8255;  // DCMI_ERR_CODE_NOT_SUPPORT on a chip with DDR
  *hbm = {};
  hbm->memory_size = chip->memoryMB;
  return 0;
}

FAKE_EXPORT int dcmi_get_device_memory_info_v3(int card_id, int device_id, struct dcmi_get_memory_info_stru* mem) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !mem) return chip ? kErrInvalid : kErrNoDevice;
  *mem = {};
  mem->memory_size = chip->memoryMB;
  mem->memory_available = chip->memoryMB;
  return 0;
}

FAKE_EXPORT int dcmi_get_device_die_v2(int card_id, int device_id, enum dcmi_die_type, struct dcmi_die_id* die) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !die) return chip ? kErrInvalid : kErrNoDevice;
  *die = {};
  die->soc_die[0] = chip->die;
  die->soc_die[4] = static_cast<unsigned>(chip->logic);
  return 0;
}

FAKE_EXPORT int dcmi_get_device_health(int card_id, int device_id, unsigned int* health) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip || !health) return chip ? kErrInvalid : kErrNoDevice;
  *health = chip->health;
  return 0;
}

FAKE_EXPORT int dcmi_create_vdevice(int card_id, int device_id, struct dcmi_create_vdev_res_stru* vdev,
                                    struct dcmi_create_vdev_out* out) {
  if (!vdev || !out) return kErrInvalid;
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  const Chip* chip = find(c, card_id, device_id);
  if (!chip) return kErrNoDevice;
  char name[ASCEND_DCMI_TEMPLATE_NAME_LEN + 1] = {};
  std::memcpy(name, vdev->template_name, ASCEND_DCMI_TEMPLATE_NAME_LEN);
  const unsigned cores = templateCores(name);
  if (cores == 0) return kErrInvalid;
  auto vnpus = readVnpus();
  unsigned used = 0, next = kFirstVdev;
  for (const auto& v : vnpus) {
    if (v.card == card_id && v.device == device_id) used += v.cores;
    next = std::max(next, v.vdev + 1);
  }
  if (used + cores > chip->aicores) return kErrNoRoom;
  vnpus.push_back({card_id, device_id, next, name, cores});
  writeVnpus(vnpus);
  if (!c.devRoot.empty()) std::ofstream(c.devRoot + "/vdavinci" + std::to_string(next)).put('\n');
  *out = {};
  out->vdev_id = next;
  return 0;
}

FAKE_EXPORT int dcmi_set_destroy_vdevice(int card_id, int device_id, unsigned int vdevid) {
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  auto vnpus = readVnpus();
  const auto it = std::find_if(vnpus.begin(), vnpus.end(), [&](const Vnpu& v) {
    return v.card == card_id && v.device == device_id && v.vdev == vdevid;
  });
  if (it == vnpus.end()) return kErrNoDevice;
  vnpus.erase(it);
  writeVnpus(vnpus);
  if (!c.devRoot.empty()) std::remove((c.devRoot + "/vdavinci" + std::to_string(vdevid)).c_str());
  return 0;
}

FAKE_EXPORT int dcmi_get_device_resource_info(int card_id, int device_id, struct dcmi_proc_mem_info* procs,
                                              int* proc_num) {
  if (!procs || !proc_num) return kErrInvalid;
  std::lock_guard lock(g_mutex);
  const Config c = readConfig();
  if (!find(c, card_id, device_id)) return kErrNoDevice;
  int n = 0;
  for (const auto& p : c.procs)
    if (p.card == card_id && p.device == device_id && n < *proc_num) procs[n++] = {p.pid, p.bytes};
  *proc_num = n;
  return 0;
}
