// A stand-in for Cambricon's libcndev.so: the real C symbols and struct layouts, with cards
// described in a small text file and the sMLU profiles and instances kept in a state file,
// so that what one process creates is seen by the next (as the driver keeps them across
// restarts of the node agent).
//
// Config (file named by VGPU_FAKE_CNDEV_CONFIG), one item per line, '#' starts a comment:
//   card uuid=<36 chars> name=MLU370-X8 memoryMB=24576 numa=0 health=1 smlu=on mlulink=0
//        (healthError=1: cndevGetCardHealthState fails for the card; computeMode=2: PROHIBITED;
//         memoryUsedMB=N util=P: what cndevGetMemoryUsage / cndevGetDeviceUtilizationInfo say)
//   instanceUsage card=0 id=1 memMiB=512 util=30   what cnDev reports as the instance's USAGE
//   option devRoot=<dir>         where the driver makes (and removes) each instance's node,
//                                cambricon-caps/cap_dev<card>_mi<id>, as the real one does in /dev
//   option apiVersion=6          struct version the library accepts (others: UNSUPPORTED_API_VERSION)
//   option noDriver=1            cndevInit answers NO_DRIVER
//   option failProfileCreate=N   the Nth profile creation (counted in the state) fails
//   option failInstanceCreate=N  the Nth instance creation fails
// State: VGPU_FAKE_CNDEV_STATE, default "<config>.state".
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "cndev_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kHandleBase = 1000;  // device handles differ from indices, as they may on real cards

struct Card {
  std::string uuid;
  std::string name = "MLU370-X8";
  int64_t memoryMB = 24576;
  int numa = 0;
  int health = 1;
  bool smlu = true;
  int mlulink = 0;
  bool healthError = false;  // cndevGetCardHealthState fails for this card
  int computeMode = CNDEV_COMPUTEMODE_DEFAULT;
  int64_t memoryUsedMB = -1;  // -1: what the instances' profiles take
  int util = 0;
};

struct InstanceUsage {
  uint64_t memMiB = 0;
  uint32_t util = 0;
};

struct Config {
  std::vector<Card> cards;
  int apiVersion = CNDEV_VERSION_6;
  bool noDriver = false;
  int failProfileCreate = 0;
  int failInstanceCreate = 0;
  std::string devRoot;
  std::map<std::pair<int, int>, InstanceUsage> instanceUsage;  // (card, instance id)
  bool ok = false;
};

struct Profile {
  int card = 0;
  int id = 0;
  uint32_t quota = 0;
  uint64_t memory = 0;
};

struct Instance {
  int card = 0;
  int handle = 0;
  int id = 0;
  int profile = 0;
  std::string name;
};

struct State {
  int profileCreates = 0;
  int instanceCreates = 0;
  std::vector<Profile> profiles;
  std::vector<Instance> instances;
};

std::mutex gMutex;
// cndevInit/cndevRelease pair up per user, so two users in one process do not end each other.
int gInitCount = 0;

std::map<std::string, std::string> fields(std::istringstream& in) {
  std::map<std::string, std::string> out;
  std::string token;
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq != std::string::npos) out[token.substr(0, eq)] = token.substr(eq + 1);
  }
  return out;
}

long number(const std::map<std::string, std::string>& f, const std::string& key, long fallback) {
  auto it = f.find(key);
  return it == f.end() ? fallback : std::strtol(it->second.c_str(), nullptr, 10);
}

std::string configPath() {
  const char* p = std::getenv("VGPU_FAKE_CNDEV_CONFIG");
  return p ? p : "";
}

std::string statePath() {
  const char* p = std::getenv("VGPU_FAKE_CNDEV_STATE");
  if (p && *p) return p;
  return configPath() + ".state";
}

Config loadConfig() {
  Config c;
  std::ifstream in(configPath());
  if (!in) return c;
  c.ok = true;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    auto f = fields(words);
    if (kind == "card") {
      Card card;
      card.uuid = f["uuid"];
      if (f.count("name")) card.name = f["name"];
      card.memoryMB = number(f, "memoryMB", card.memoryMB);
      card.numa = static_cast<int>(number(f, "numa", 0));
      card.health = static_cast<int>(number(f, "health", 1));
      card.smlu = f.count("smlu") == 0 || f["smlu"] == "on";
      card.mlulink = static_cast<int>(number(f, "mlulink", 0));
      card.healthError = number(f, "healthError", 0) != 0;
      card.computeMode = static_cast<int>(number(f, "computeMode", CNDEV_COMPUTEMODE_DEFAULT));
      card.memoryUsedMB = number(f, "memoryUsedMB", -1);
      card.util = static_cast<int>(number(f, "util", 0));
      c.cards.push_back(card);
    } else if (kind == "instanceUsage") {
      c.instanceUsage[{static_cast<int>(number(f, "card", 0)), static_cast<int>(number(f, "id", 0))}] = {
          static_cast<uint64_t>(number(f, "memMiB", 0)), static_cast<uint32_t>(number(f, "util", 0))};
    } else if (kind == "option") {
      c.apiVersion = static_cast<int>(number(f, "apiVersion", c.apiVersion));
      c.noDriver = number(f, "noDriver", c.noDriver) != 0;
      c.failProfileCreate = static_cast<int>(number(f, "failProfileCreate", c.failProfileCreate));
      c.failInstanceCreate = static_cast<int>(number(f, "failInstanceCreate", c.failInstanceCreate));
      if (f.count("devRoot")) c.devRoot = f["devRoot"];
    }
  }
  return c;
}

State loadState() {
  State s;
  std::ifstream in(statePath());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind)) continue;
    auto f = fields(words);
    if (kind == "counters") {
      s.profileCreates = static_cast<int>(number(f, "profileCreates", 0));
      s.instanceCreates = static_cast<int>(number(f, "instanceCreates", 0));
    } else if (kind == "profile") {
      s.profiles.push_back({static_cast<int>(number(f, "card", 0)), static_cast<int>(number(f, "id", 0)),
                            static_cast<uint32_t>(number(f, "quota", 0)),
                            std::strtoull(f["memory"].c_str(), nullptr, 10)});
    } else if (kind == "instance") {
      s.instances.push_back({static_cast<int>(number(f, "card", 0)), static_cast<int>(number(f, "handle", 0)),
                             static_cast<int>(number(f, "id", 0)), static_cast<int>(number(f, "profile", 0)),
                             f["name"]});
    }
  }
  return s;
}

void saveState(const State& s) {
  const std::string path = statePath();
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << "counters profileCreates=" << s.profileCreates << " instanceCreates=" << s.instanceCreates << "\n";
    for (const auto& p : s.profiles)
      out << "profile card=" << p.card << " id=" << p.id << " quota=" << p.quota << " memory=" << p.memory << "\n";
    for (const auto& i : s.instances)
      out << "instance card=" << i.card << " handle=" << i.handle << " id=" << i.id << " profile=" << i.profile
          << " name=" << i.name << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

/// Checks that the library is initialised, the struct version and the device handle;
/// returns the card index through `card` when `device` is given.
cndevRet_t check(const Config& c, int version, const cndevDevice_t* device, int* card) {
  if (gInitCount == 0) return CNDEV_ERROR_UNINITIALIZED;
  if (version != c.apiVersion) return CNDEV_ERROR_UNSUPPORTED_API_VERSION;
  if (device) {
    const int index = *device - kHandleBase;
    if (index < 0 || index >= static_cast<int>(c.cards.size())) return CNDEV_ERROR_INVALID_DEVICE_ID;
    if (card) *card = index;
  }
  return CNDEV_SUCCESS;
}

void copyString(char* dst, size_t capacity, const std::string& src) {
  const size_t n = std::min(src.size(), capacity - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

const Profile* findProfile(const State& s, int card, int id) {
  for (const auto& p : s.profiles)
    if (p.card == card && p.id == id) return &p;
  return nullptr;
}

void usedOn(const State& s, int card, uint32_t& quota, uint64_t& memory) {
  quota = 0;
  memory = 0;
  for (const auto& i : s.instances) {
    if (i.card != card) continue;
    if (const Profile* p = findProfile(s, card, i.profile)) {
      quota += p->quota;
      memory += p->memory;
    }
  }
}

uint64_t cardBytes(const Card& card) { return static_cast<uint64_t>(card.memoryMB) * 1024 * 1024; }

std::string instanceNode(int card, int id) {
  return "/dev/cambricon-caps/cap_dev" + std::to_string(card) + "_mi" + std::to_string(id);
}

/// The driver makes an instance's character device when it makes the instance.
void makeNode(const Config& c, int card, int id, bool present) {
  if (c.devRoot.empty()) return;
  const std::string path = c.devRoot + instanceNode(card, id).substr(4);  // under devRoot, without "/dev"
  if (present) {
    const std::string dir = path.substr(0, path.rfind('/'));
    for (size_t i = 1; i <= dir.size(); ++i)
      if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
    std::ofstream(path).put('\0');
  } else {
    std::remove(path.c_str());
  }
}

void fillInstance(const Config& c, const State& s, const Instance& i, cndevSMluInfo_t* out) {
  const int version = out->version;
  std::memset(out, 0, sizeof(*out));
  out->version = version;
  out->profileId = i.profile;
  out->instanceId = i.id;
  const std::string uuid = c.cards[i.card].uuid.substr(0, 30) + "-mi" + std::to_string(i.id);
  copyString(reinterpret_cast<char*>(out->uuid), CNDEV_UUID_SIZE, uuid);
  out->bus = i.card + 1;
  const Profile* p = findProfile(s, i.card, i.profile);
  copyString(out->profileName, sizeof(out->profileName),
             p ? "smlu-" + std::to_string(p->quota) + "-" + std::to_string(p->memory >> 20) + "m" : "");
  copyString(out->instanceName, sizeof(out->instanceName), i.name);
  copyString(out->devNodeName, sizeof(out->devNodeName), instanceNode(i.card, i.id));
  if (p) {
    out->mluQuota[CNDEV_SMLU_MAX] = p->quota;
    out->memorySize[CNDEV_SMLU_MAX] = p->memory;
  }
  if (auto u = c.instanceUsage.find({i.card, i.id}); u != c.instanceUsage.end()) {
    out->mluQuota[CNDEV_SMLU_USAGE] = u->second.util;
    out->memorySize[CNDEV_SMLU_USAGE] = u->second.memMiB << 20;
  }
}

}  // namespace

FAKE_EXPORT const char* cndevGetErrorString(cndevRet_t error) {
  static const char* const kNames[] = {"success",
                                       "no driver",
                                       "driver version too low",
                                       "unsupported API version",
                                       "not initialized",
                                       "invalid argument",
                                       "invalid device id",
                                       "unknown error",
                                       "malloc failed",
                                       "insufficient space",
                                       "not supported",
                                       "invalid link",
                                       "no devices",
                                       "no permission",
                                       "not found",
                                       "in use",
                                       "duplicate",
                                       "timeout"};
  const int e = static_cast<int>(error);
  return e >= 0 && e < static_cast<int>(sizeof(kNames) / sizeof(kNames[0])) ? kNames[e] : "Cndev_ERROR not found!";
}

FAKE_EXPORT cndevRet_t cndevInit(int reserved) {
  std::lock_guard lock(gMutex);
  if (reserved != 0) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  if (!c.ok || c.noDriver) return CNDEV_ERROR_NO_DRIVER;
  ++gInitCount;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevRelease() {
  std::lock_guard lock(gMutex);
  if (gInitCount > 0) --gInitCount;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetDeviceCount(cndevCardInfo_t* info) {
  std::lock_guard lock(gMutex);
  if (!info) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  if (auto r = check(c, info->version, nullptr, nullptr); r != CNDEV_SUCCESS) return r;
  info->number = static_cast<unsigned>(c.cards.size());
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetDeviceHandleByIndex(int index, cndevDevice_t* handle) {
  std::lock_guard lock(gMutex);
  if (gInitCount == 0) return CNDEV_ERROR_UNINITIALIZED;
  const Config c = loadConfig();
  if (!handle || index < 0 || index >= static_cast<int>(c.cards.size())) return CNDEV_ERROR_INVALID_DEVICE_ID;
  *handle = kHandleBase + index;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetUUID(cndevUUID_t* uuid, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!uuid) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, uuid->version, &device, &card); r != CNDEV_SUCCESS) return r;
  copyString(reinterpret_cast<char*>(uuid->uuid), CNDEV_UUID_SIZE, c.cards[card].uuid);
  uuid->ncsUUID64 = 0x1000u + static_cast<uint64_t>(card);
  return CNDEV_SUCCESS;
}

FAKE_EXPORT const char* cndevGetCardNameStringByDevId(cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  // The real library returns static storage; these strings live as long as the library.
  static std::map<int, std::string> names;
  const Config c = loadConfig();
  const int index = device - kHandleBase;
  if (gInitCount == 0 || index < 0 || index >= static_cast<int>(c.cards.size())) return "Unknown";
  return (names[index] = c.cards[index].name).c_str();
}

FAKE_EXPORT cndevRet_t cndevGetMemoryUsage(cndevMemoryInfo_t* info, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!info) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, info->version, &device, &card); r != CNDEV_SUCCESS) return r;
  const State s = loadState();
  uint32_t quota = 0;
  uint64_t memory = 0;
  usedOn(s, card, quota, memory);
  info->physicalMemoryTotal = c.cards[card].memoryMB;
  info->physicalMemoryUsed =
      c.cards[card].memoryUsedMB >= 0 ? c.cards[card].memoryUsedMB : static_cast<int64_t>(memory >> 20);
  info->virtualMemoryTotal = c.cards[card].memoryMB;
  info->virtualMemoryUsed = info->physicalMemoryUsed;
  info->channelNumber = 0;
  info->globalMemory = static_cast<uint64_t>(c.cards[card].memoryMB);
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetCardHealthState(cndevCardHealthState_t* state, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!state) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, state->version, &device, &card); r != CNDEV_SUCCESS) return r;
  if (c.cards[card].healthError) return CNDEV_ERROR_UNKNOWN;
  const bool good = c.cards[card].health == 1;
  state->health = c.cards[card].health;
  state->deviceState = good ? CNDEV_HEALTH_STATE_DEVICE_GOOD : CNDEV_HEALTH_STATE_DEVICE_IN_PROBLEM;
  state->driverState = good ? CNDEV_HEALTH_STATE_DRIVER_RUNNING : CNDEV_HEALTH_STATE_DRIVER_BOOT_ERROR;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetNUMANodeIdByDevId(cndevNUMANodeId_t* numa, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!numa) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, numa->version, &device, &card); r != CNDEV_SUCCESS) return r;
  numa->nodeId = c.cards[card].numa;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT int cndevGetMLULinkPortNumber(cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  const Config c = loadConfig();
  const int index = device - kHandleBase;
  if (gInitCount == 0 || index < 0 || index >= static_cast<int>(c.cards.size())) return 0;
  return c.cards[index].mlulink;
}

FAKE_EXPORT cndevRet_t cndevGetComputeMode(cndevComputeMode_t* mode, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!mode) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, mode->version, &device, &card); r != CNDEV_SUCCESS) return r;
  mode->mode = static_cast<cndevComputeModeEnum_t>(c.cards[card].computeMode);
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetDeviceUtilizationInfo(cndevUtilizationInfo_t* info, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!info) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, info->version, &device, &card); r != CNDEV_SUCCESS) return r;
  info->averageCoreUtilization = c.cards[card].util;
  for (auto& core : info->coreUtilization) core = c.cards[card].util;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetSMLUMode(cndevSMLUMode_t* mode, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!mode) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, mode->version, &device, &card); r != CNDEV_SUCCESS) return r;
  mode->smluMode = c.cards[card].smlu ? CNDEV_FEATURE_ENABLED : CNDEV_FEATURE_DISABLED;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevCreateSMluProfileInfo(cndevSMluSet_t* profile, int* profileId, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!profile || !profileId) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, profile->version, &device, &card); r != CNDEV_SUCCESS) return r;
  if (!c.cards[card].smlu) return CNDEV_ERROR_NOT_SUPPORTED;
  if (profile->mluQuota < 1 || profile->mluQuota > 100 || profile->memorySize == 0 ||
      profile->memorySize > cardBytes(c.cards[card]))
    return CNDEV_ERROR_INVALID_ARGUMENT;
  State s = loadState();
  for (const auto& p : s.profiles)
    if (p.card == card && p.quota == profile->mluQuota && p.memory == profile->memorySize) return CNDEV_ERROR_DUPLICATE;
  ++s.profileCreates;
  if (c.failProfileCreate != 0 && s.profileCreates == c.failProfileCreate) {
    saveState(s);
    return CNDEV_ERROR_UNKNOWN;
  }
  int next = 1;
  for (const auto& p : s.profiles)
    if (p.card == card) next = std::max(next, p.id + 1);
  s.profiles.push_back({card, next, profile->mluQuota, profile->memorySize});
  saveState(s);
  *profileId = next;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevDestroySMluProfileInfo(int profileId, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, c.apiVersion, &device, &card); r != CNDEV_SUCCESS) return r;
  State s = loadState();
  for (const auto& i : s.instances)
    if (i.card == card && i.profile == profileId) return CNDEV_ERROR_IN_USE;
  const auto before = s.profiles.size();
  std::erase_if(s.profiles, [&](const Profile& p) { return p.card == card && p.id == profileId; });
  if (s.profiles.size() == before) return CNDEV_ERROR_NOT_FOUND;
  saveState(s);
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetSMluProfileIdInfo(cndevSMluProfileIdInfo_t* ids, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!ids) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, ids->version, &device, &card); r != CNDEV_SUCCESS) return r;
  const State s = loadState();
  ids->count = 0;
  for (const auto& p : s.profiles)
    if (p.card == card && ids->count < 128) ids->profileId[ids->count++] = p.id;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetSMluProfileInfo(cndevSMluProfileInfo_t* info, int profileId, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!info) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, info->version, &device, &card); r != CNDEV_SUCCESS) return r;
  const State s = loadState();
  const Profile* p = findProfile(s, card, profileId);
  if (!p) return CNDEV_ERROR_NOT_FOUND;
  uint32_t usedQuota = 0;
  uint64_t usedMemory = 0;
  usedOn(s, card, usedQuota, usedMemory);
  uint32_t existing = 0;
  for (const auto& i : s.instances)
    if (i.card == card && i.profile == profileId) ++existing;
  const uint64_t byQuota = (100 - std::min<uint32_t>(usedQuota, 100)) / p->quota;
  const uint64_t byMemory = (cardBytes(c.cards[card]) - std::min(usedMemory, cardBytes(c.cards[card]))) / p->memory;
  info->profileId = p->id;
  copyString(info->name, sizeof(info->name),
             "smlu-" + std::to_string(p->quota) + "-" + std::to_string(p->memory >> 20) + "m");
  info->remainCapacity = static_cast<uint32_t>(std::min(byQuota, byMemory));
  info->totalCapacity = info->remainCapacity + existing;
  info->mluQuota[CNDEV_SMLU_MAX] = p->quota;
  info->mluQuota[CNDEV_SMLU_USAGE] = 0;
  info->memorySize[CNDEV_SMLU_MAX] = p->memory;
  info->memorySize[CNDEV_SMLU_USAGE] = 0;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevCreateSMluInstanceByProfileId(cndevMluInstance_t* handle, unsigned int profileId,
                                                          cndevDevice_t device, char* name) {
  std::lock_guard lock(gMutex);
  if (!handle) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (auto r = check(c, c.apiVersion, &device, &card); r != CNDEV_SUCCESS) return r;
  if (!c.cards[card].smlu) return CNDEV_ERROR_NOT_SUPPORTED;
  State s = loadState();
  const Profile* p = findProfile(s, card, static_cast<int>(profileId));
  if (!p) return CNDEV_ERROR_NOT_FOUND;
  const std::string instanceName = name ? name : "";
  for (const auto& i : s.instances)
    if (!instanceName.empty() && i.card == card && i.name == instanceName) return CNDEV_ERROR_DUPLICATE;
  uint32_t usedQuota = 0;
  uint64_t usedMemory = 0;
  usedOn(s, card, usedQuota, usedMemory);
  if (usedQuota + p->quota > 100 || usedMemory + p->memory > cardBytes(c.cards[card]))
    return CNDEV_ERROR_INSUFFICIENT_SPACE;
  ++s.instanceCreates;
  if (c.failInstanceCreate != 0 && s.instanceCreates == c.failInstanceCreate) {
    saveState(s);
    return CNDEV_ERROR_UNKNOWN;
  }
  int id = 1;
  while (std::any_of(s.instances.begin(), s.instances.end(),
                     [&](const Instance& i) { return i.card == card && i.id == id; }))
    ++id;
  Instance made{card, ((card + 1) << 8) | id, id, p->id,
                instanceName.empty() ? "mi" + std::to_string(id) : instanceName};
  s.instances.push_back(made);
  saveState(s);
  makeNode(c, card, id, true);
  *handle = made.handle;
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevDestroySMluInstanceByHandle(cndevMluInstance_t handle) {
  std::lock_guard lock(gMutex);
  if (gInitCount == 0) return CNDEV_ERROR_UNINITIALIZED;
  const Config c = loadConfig();
  State s = loadState();
  auto it = std::find_if(s.instances.begin(), s.instances.end(), [&](const Instance& i) { return i.handle == handle; });
  if (it == s.instances.end()) return CNDEV_ERROR_NOT_FOUND;
  const Instance gone = *it;
  s.instances.erase(it);
  saveState(s);
  makeNode(c, gone.card, gone.id, false);
  return CNDEV_SUCCESS;
}

FAKE_EXPORT cndevRet_t cndevGetSMluInstanceInfo(cndevSMluInfo_t* info, cndevMluInstance_t handle) {
  std::lock_guard lock(gMutex);
  if (!info) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  if (auto r = check(c, info->version, nullptr, nullptr); r != CNDEV_SUCCESS) return r;
  const State s = loadState();
  for (const auto& i : s.instances) {
    if (i.handle != handle) continue;
    fillInstance(c, s, i, info);
    return CNDEV_SUCCESS;
  }
  return CNDEV_ERROR_NOT_FOUND;
}

FAKE_EXPORT cndevRet_t cndevGetAllSMluInstanceInfo(int* count, cndevSMluInfo_t* infos, cndevDevice_t device) {
  std::lock_guard lock(gMutex);
  if (!count) return CNDEV_ERROR_INVALID_ARGUMENT;
  const Config c = loadConfig();
  int card = 0;
  if (infos != nullptr && *count > 0) {
    if (auto r = check(c, infos->version, &device, &card); r != CNDEV_SUCCESS) return r;
  } else if (auto r = check(c, c.apiVersion, &device, &card); r != CNDEV_SUCCESS) {
    return r;
  }
  const State s = loadState();
  std::vector<const Instance*> mine;
  for (const auto& i : s.instances)
    if (i.card == card) mine.push_back(&i);
  const int n = static_cast<int>(mine.size());
  if (infos == nullptr || *count < n) {
    *count = n;
    return n == 0 ? CNDEV_SUCCESS : CNDEV_ERROR_INSUFFICIENT_SPACE;
  }
  for (int k = 0; k < n; ++k) {
    infos[k].version = infos[0].version;
    fillInstance(c, s, *mine[k], &infos[k]);
  }
  *count = n;
  return CNDEV_SUCCESS;
}
