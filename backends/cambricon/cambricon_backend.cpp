#include "cambricon_backend.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "vgpu/allocator.h"

namespace vgpu::cambricon {
namespace {

const sdk::StandardResourceNames kDefaultNames{"cambricon.com/vmlu", "cambricon.com/mlu.smlu.vmemory", "",
                                               "cambricon.com/mlu.smlu.vcore", ""};
const sdk::ConstraintAnnotationKeys kAnnotationKeys{"cambricon.com/use-mlutype", "cambricon.com/nouse-mlutype",
                                                    "cambricon.com/use-gpuuuid", "cambricon.com/nouse-gpuuuid",
                                                    "cambricon.com/numa-bind"};
constexpr std::uint64_t kDefaultMemoryUnitMiB = 256;  // one vmemory unit, as HAMi and the vendor plugin use
constexpr std::uint32_t kDefaultSplitCount = 10;
constexpr const char* kCapsDir = "/dev/cambricon-caps/";

std::string deviceIdFor(const std::string& uuid) { return uuid.rfind("MLU-", 0) == 0 ? uuid : "MLU-" + uuid; }

bool wholeMemory(const DeviceRequest& r) {
  return r.memoryMiB == 0 && (r.memoryPercent == 0 || r.memoryPercent == 100);
}

const char* attribute(const vgpu_device& d, const char* key) {
  for (size_t i = 0; i < d.attributes.count; ++i)
    if (d.attributes.items[i].key && std::strcmp(d.attributes.items[i].key, key) == 0)
      return d.attributes.items[i].value;
  return nullptr;
}

/// Cards published without the attribute (a vgpu-sim cluster file) are whole-only when
/// their split count is 1, which is how discovery publishes cards not in sMLU mode.
bool wholeOnly(const vgpu_device& d) {
  if (const char* mode = attribute(d, kSmluAttribute)) return std::strcmp(mode, "on") != 0;
  return d.split_count <= 1;
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out.append(out.empty() ? "" : separator).append(item);
  return out;
}

std::string devNodePath(const std::string& name) { return name.empty() || name[0] == '/' ? name : kCapsDir + name; }

/// Whether something accepts connections on the unix socket `path`.
bool socketAnswers(const std::filesystem::path& path) {
  sockaddr_un addr{};
  if (path.string().size() >= sizeof(addr.sun_path)) return false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

std::optional<std::filesystem::path> runningVendorPluginSocket(const std::filesystem::path& pluginDir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(pluginDir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 5 || name.substr(name.size() - 5) != ".sock" || name.rfind("vgpu-", 0) == 0) continue;
    const bool vendors = name == "cambricon.sock" || name == "real-mlu-counts.sock" ||
                         name.find("smlu") != std::string::npos || name.rfind("cambricon", 0) == 0;
    if (vendors && socketAnswers(it->path())) return it->path();
  }
  return std::nullopt;
}

CambriconBackend::CambriconBackend(BackendParams params, sdk::StandardRequestRules rules, CambriconOptions options)
    : params_(std::move(params)),
      rules_(std::move(rules)),
      options_(std::move(options)),
      resources_(rules_.names.list()) {}

CambriconBackend::~CambriconBackend() = default;

Result<std::unique_ptr<CambriconBackend>> CambriconBackend::create(const BackendParams& params) {
  const std::string section = "backends." + params.name;
  CambriconOptions options;
  for (const auto& [key, value] : params.settings.options) {
    const std::string at = section + ".options." + key;
    if (key == "libraryPath") {
      if (value.empty()) return makeError(at + ": must name the libcndev.so to load");
      options.libraryPaths = {value};
    } else if (key == "stateDir") {
      if (value.empty() || value[0] != '/')
        return makeError(at + ": must be an absolute folder, got \"" + value + "\"");
      options.stateDir = value;
    } else if (key == "vendorPluginAnnotations" || key == "multiCardSmlu") {
      if (value != "true" && value != "false")
        return makeError(at + ": must be \"true\" or \"false\", got \"" + value + "\"");
      (key == "multiCardSmlu" ? options.multiCardSmlu : options.vendorAnnotations) = value == "true";
    } else if (key == "devRoot" || key == "kubeletPluginDir") {
      if (value.empty() || value[0] != '/')
        return makeError(at + ": must be an absolute folder, got \"" + value + "\"");
      (key == "devRoot" ? options.devRoot : options.kubeletPluginDir) = value;
    } else {
      return makeError(at +
                       ": unknown option (the cambricon backend knows libraryPath, stateDir, vendorPluginAnnotations, "
                       "multiCardSmlu, devRoot, kubeletPluginDir)");
    }
  }
  // The driver enforces each partition; it cannot hand out more than the card has.
  if (params.settings.memoryScaling && *params.settings.memoryScaling > 1.0)
    return makeError(section +
                     ".memoryScaling: sMLU memory is enforced by the driver and cannot be oversubscribed; "
                     "use a value of at most 1");
  // A quota is a percentage of the card, and a whole card must remain possible (100%).
  if (params.settings.coreScaling && *params.settings.coreScaling != 1.0)
    return makeError(section +
                     ".coreScaling: sMLU compute quotas are percentages of a card enforced by the "
                     "driver; coreScaling must be 1 (it cannot oversubscribe, and below 1 no whole card would fit)");

  sdk::StandardRequestRules rules;
  rules.backend = params.name;
  rules.names = sdk::StandardResourceNames::resolve(kDefaultNames, params.resources);
  rules.annotations = kAnnotationKeys;
  rules.memoryUnitMiB = kDefaultMemoryUnitMiB;
  rules = rules.withSettings(params.settings);
  return std::unique_ptr<CambriconBackend>(new CambriconBackend(params, std::move(rules), std::move(options)));
}

Result<std::optional<DeviceRequest>> CambriconBackend::parseRequest(const ContainerResources& container,
                                                                    const Annotations& annotations) const {
  auto parsed = sdk::parseStandardRequest(rules_, container, annotations);
  if (!parsed.ok() || !parsed->has_value()) return parsed;
  const DeviceRequest& r = **parsed;
  const bool partial = r.computePercent < 100 || !wholeMemory(r);
  if (partial && r.computePercent == 0)
    return makeError("container \"" + container.name + "\": " + rules_.names.cores +
                     " must be at least 1 when a card is shared: every sMLU instance gets a compute quota "
                     "(set the limit, or backends." +
                     params_.name + ".defaultCores)");
  if (partial && r.count > 1 && options_.vendorAnnotations)
    return makeError("container \"" + container.name + "\": with backends." + params_.name +
                     ".options.vendorPluginAnnotations on, a shared request can use only one card (Cambricon's "
                     "plugin reads one card per container); ask for " +
                     rules_.names.count + ": 1 or for whole cards");
  if (partial && r.count > 1 && !options_.multiCardSmlu)
    return makeError("container \"" + container.name + "\": " + rules_.names.count + " of " + std::to_string(r.count) +
                     " with a share of each card: the MLU driver gives a container one sMLU instance, so a share "
                     "can be of one card only; ask for " + rules_.names.count +
                     ": 1, or for whole cards (no " + rules_.names.memory + ", " + rules_.names.cores +
                     " 100). If your driver and container runtime take several, set backends." + params_.name +
                     ".options.multiCardSmlu: \"true\"");
  return parsed;
}

void CambriconBackend::fit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
                           vgpu_fit_result& r) const {
  sdk::standardFit(q, d, u, r);
  if (!r.fits && (r.reason == VGPU_REASON_UNHEALTHY || r.reason == VGPU_REASON_MODEL_MISMATCH ||
                  r.reason == VGPU_REASON_ID_MISMATCH))
    return;
  const bool partial = q.compute_percent < 100 || sdk::requestedMemoryMiB(q, d) < d.memory_mib;
  if (partial && wholeOnly(d)) {
    r = vgpu_fit_result{};
    r.reason = kReasonNotSmlu;
    r.needed = q.compute_percent;
    r.available = 100;
  }
}

std::string CambriconBackend::explain(const vgpu_fit_result& result) const {
  if (result.reason == kReasonNotSmlu)
    return "the MLU is not in sMLU mode, so it is given only whole (100 percent of " + rules_.names.cores +
           " and all its memory); ask for the whole card, or enable sMLU on it (cnmon set -c <card> -smlu on)";
  if (result.reason < VGPU_REASON_BACKEND) return explainCoreReason(result);
  return "refused by the cambricon backend (reason " + std::to_string(result.reason) + ")";
}

std::vector<ProtectedEnv> CambriconBackend::protectedEnv() const {
  return {{kVisibleDevicesEnv, ProtectedEnv::Scope::kEveryContainer},
          {kVirtualDevicesEnv, ProtectedEnv::Scope::kBackendContainers}};
}

Result<std::map<std::string, std::int64_t>> CambriconBackend::admissionDefaults(const ContainerResources& container,
                                                                                const Annotations& annotations) const {
  auto parsed = parseRequest(container, annotations);
  if (!parsed.ok()) return std::move(parsed).error();
  return sdk::standardAdmissionDefaults(rules_, container, annotations);
}

Result<CndevLibrary*> CambriconBackend::library() {
  std::lock_guard lock(libraryMutex_);
  if (!library_) {
    auto opened = CndevLibrary::open(options_.libraryPaths);
    if (!opened.ok()) return std::move(opened).error().prefix("backend " + params_.name);
    library_ = std::move(opened).value();
  }
  return library_.get();
}

Result<std::vector<CardInfo>> CambriconBackend::cards() {
  auto lib = library();
  if (!lib.ok()) return std::move(lib).error();
  auto cards = (*lib)->cards();
  if (!cards.ok()) return std::move(cards).error().prefix("backend " + params_.name);
  return cards;
}

std::uint64_t CambriconBackend::publishedMemoryMiB(const CardInfo& card) const {
  const double scaling = params_.settings.memoryScaling.value_or(1.0);
  return static_cast<std::uint64_t>(std::floor(static_cast<double>(card.memoryMiB) * scaling));
}

Device CambriconBackend::toDevice(const CardInfo& card) const {
  Device d;
  d.id = deviceIdFor(card.uuid);
  d.index = card.index;
  d.backend = params_.name;
  d.model = card.model;
  d.memoryMiB = publishedMemoryMiB(card);
  d.computeUnits = 100;
  d.splitCount = card.smlu ? params_.settings.splitCount.value_or(kDefaultSplitCount) : 1;
  d.numaNode = card.numaNode;
  d.health = !card.healthKnown ? Health::kUnknown : card.healthy ? Health::kHealthy : Health::kUnhealthy;
  d.attributes[kSmluAttribute] = card.smlu ? "on" : "off";
  if (card.mluLinkPorts > 0) d.attributes[kMluLinkAttribute] = std::to_string(card.mluLinkPorts);
  if (!card.healthDetail.empty()) d.attributes["healthDetail"] = card.healthDetail;
  return d;
}

Status CambriconBackend::checkNoVendorPlugin() const {
  if (auto socket = runningVendorPluginSocket(options_.kubeletPluginDir))
    return makeError("backend " + params_.name + ": Cambricon's own device plugin is running on this node (its socket " +
                     socket->string() +
                     " answers). Its resync destroys every sMLU instance it did not make, so the two cannot share "
                     "the MLUs: remove Cambricon's device plugin (its DaemonSet) from this node, or disable backends." +
                     params_.name + " for this node");
  return {};
}

Result<std::vector<Device>> CambriconBackend::discover() {
  if (auto s = checkNoVendorPlugin(); !s.ok()) return s.error();
  auto cards = this->cards();
  if (!cards.ok()) return std::move(cards).error();
  std::vector<Device> out;
  std::set<std::string> ids;
  for (const auto& card : *cards) {
    Device d = toDevice(card);
    if (!ids.insert(d.id).second)
      return makeError("backend " + params_.name + ": two cards report the UUID " + d.id + " (cnDev at " +
                       library_->path() + ")");
    lastHealth_[d.id] = d.health;
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<HealthEvent>> CambriconBackend::waitForHealthEvents(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    // Started after us: say so in the agent's log (Allocate refuses it too).
    if (auto s = checkNoVendorPlugin(); !s.ok()) return s.error();
    auto cards = this->cards();
    if (!cards.ok()) return std::move(cards).error();
    std::vector<HealthEvent> events;
    for (const auto& card : *cards) {
      const Device d = toDevice(card);
      auto [it, inserted] = lastHealth_.try_emplace(d.id, d.health);
      if (!inserted && it->second != d.health) {
        it->second = d.health;
        events.push_back(
            {d.id, d.health, card.healthDetail.empty() ? "cnDev reports the card healthy" : card.healthDetail});
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (!events.empty() || now >= deadline) return events;
    std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(std::chrono::milliseconds(250), deadline - now));
  }
}

Status CambriconBackend::destroyRecords(const std::vector<InstanceRecord>& records, const std::vector<CardInfo>& cards,
                                        SmluState& state) {
  auto lib = library();
  if (!lib.ok()) return lib.error();
  std::optional<Error> first;
  for (const auto& r : records) {
    if (auto s = (*lib)->destroyInstance(r.handle); !s.ok()) {
      if (!first)
        first = makeError("destroying sMLU instance " + r.name + " (handle " + std::to_string(r.handle) + ") on " +
                          r.cardId + ": " + s.error().message);
      continue;
    }
    std::erase(state.instances, r);
  }
  // Profiles this backend made and that no instance uses any more.
  for (auto it = state.profiles.begin(); it != state.profiles.end();) {
    auto card =
        std::find_if(cards.begin(), cards.end(), [&](const CardInfo& c) { return deviceIdFor(c.uuid) == it->cardId; });
    if (card == cards.end()) {
      ++it;
      continue;
    }
    auto live = (*lib)->instances(card->handle);
    if (!live.ok()) {
      if (!first) first = live.error();
      ++it;
      continue;
    }
    const bool used =
        std::any_of(live->begin(), live->end(), [&](const SmluInstance& i) { return i.profileId == it->profileId; });
    if (used) {
      ++it;
      continue;
    }
    if (auto s = (*lib)->destroyProfile(card->handle, it->profileId); !s.ok()) {
      if (!first) first = s.error();
      ++it;
      continue;
    }
    it = state.profiles.erase(it);
  }
  if (first) return *first;
  return {};
}

DeviceNode CambriconBackend::nodeAt(const std::string& containerPath) const {
  // The host's path under devRoot; the container sees it where the driver made it.
  const std::string rel = containerPath.rfind("/dev/", 0) == 0 ? containerPath.substr(5) : containerPath;
  return {(options_.devRoot / rel).string(), containerPath, "rw"};
}

Result<std::vector<DeviceNode>> CambriconBackend::cardNodes(int index) const {
  const std::string n = std::to_string(index);
  std::error_code ec;
  std::vector<DeviceNode> out;
  const DeviceNode card = nodeAt("/dev/cambricon_dev" + n);
  if (!std::filesystem::exists(card.hostPath, ec))
    return makeError(card.hostPath + " does not exist (is the Cambricon driver loaded?)");
  out.push_back(card);
  // The card's other nodes, as Cambricon's plugin passes them, where the driver made them:
  // which exist depends on the model and the driver version.
  for (const std::string& name : {"/dev/cambricon_ipcm" + n, "/dev/commu" + n, "/dev/cmsg_ctrl" + n,
                                  "/dev/cambr-msgq:" + n, "/dev/cambr-rpc:" + n}) {
    DeviceNode node = nodeAt(name);
    if (std::filesystem::exists(node.hostPath, ec)) out.push_back(std::move(node));
  }
  return out;
}

Result<ContainerSpec> CambriconBackend::containerSpec(const ContainerGrant& grant) {
  const std::string who = "container " + grant.podNamespace + "/" + grant.podName + "/" + grant.container.containerName;
  if (grant.devices.empty()) return makeError(who + " was granted no MLU");
  if (auto s = checkNoVendorPlugin(); !s.ok()) return makeError(who + ": " + s.error().message);
  std::lock_guard lock(limiterMutex_);
  auto cards = this->cards();
  if (!cards.ok()) return std::move(cards).error().prefix(who);
  auto lib = library();
  if (!lib.ok()) return std::move(lib).error().prefix(who);
  auto loaded = loadSmluState(statePath());
  if (!loaded.ok()) return std::move(loaded).error().prefix(who);
  SmluState state = std::move(loaded).value();

  // The driver gives a container one sMLU instance of a card, and one card's at most unless
  // the operator says the driver takes more.
  std::set<std::string> seen;
  std::size_t shared = 0;
  for (const auto& g : grant.devices) {
    if (!seen.insert(g.deviceId).second)
      return makeError(who + ": card " + g.deviceId +
                       " is granted twice; a container gets at most one sMLU instance of a card");
    auto card = std::find_if(cards->begin(), cards->end(),
                             [&](const CardInfo& c) { return deviceIdFor(c.uuid) == g.deviceId; });
    const std::uint64_t published = card == cards->end() ? 0 : publishedMemoryMiB(*card);
    if (g.compute < 100 || (g.memoryMiB != 0 && g.memoryMiB < published)) ++shared;
  }
  if (shared > 1 && !options_.multiCardSmlu)
    return makeError(who + ": shares of " + std::to_string(shared) +
                     " cards are granted; the MLU driver gives a container one sMLU instance (set backends." +
                     params_.name + ".options.multiCardSmlu only if yours takes more)");

  std::vector<InstanceRecord> made;
  // Undo this call's instances and the profiles left unused, so a failure leaks nothing.
  auto abandon = [&](Error error) -> Error {
    if (auto s = destroyRecords(made, *cards, state); !s.ok())
      error.message += "; cleaning up also failed: " + s.error().message;
    std::erase_if(state.wholeCards, [&](const WholeCardRecord& w) { return w.owner == grant.container; });
    if (auto s = saveSmluState(statePath(), state); !s.ok()) error.message += "; " + s.error().message;
    return error.prefix(who);
  };
  std::erase_if(state.wholeCards, [&](const WholeCardRecord& w) { return w.owner == grant.container; });

  ContainerSpec spec;
  std::set<std::string> passed;
  auto pass = [&](const DeviceNode& node) {
    if (passed.insert(node.containerPath).second) spec.devices.push_back(node);
  };
  std::vector<std::string> visible;
  std::string virtualDevices;
  bool annotated = false;
  for (const auto& g : grant.devices) {
    auto card = std::find_if(cards->begin(), cards->end(),
                             [&](const CardInfo& c) { return deviceIdFor(c.uuid) == g.deviceId; });
    if (card == cards->end()) {
      std::vector<std::string> have;
      for (const auto& c : *cards) have.push_back(deviceIdFor(c.uuid));
      return abandon(makeError("granted card " + g.deviceId + " is not on this node (cnDev lists: " +
                               (have.empty() ? std::string("no cards") : join(have, ", ")) + ")"));
    }
    const std::string idx = std::to_string(card->index);
    const std::string dev = "/dev/cambricon_dev" + idx;
    const std::string ipcm = "/dev/cambricon_ipcm" + idx;
    const std::uint64_t published = publishedMemoryMiB(*card);
    const bool whole = g.compute >= 100 && (g.memoryMiB == 0 || g.memoryMiB >= published);
    const std::uint32_t quota = std::min<std::uint32_t>(g.compute, 100);
    const std::uint64_t memoryMiB = g.memoryMiB == 0 ? published : g.memoryMiB;
    const std::string size = std::to_string(quota) + "% and " + std::to_string(memoryMiB) + " MiB";
    auto nodes = cardNodes(card->index);
    if (!nodes.ok()) return abandon(makeError("card " + g.deviceId + ": " + nodes.error().message));

    // A repeated Allocate for the same container reuses its instance; one of another size
    // (or one left from a slice when the card is now given whole) goes.
    std::optional<InstanceRecord> reuse;
    std::vector<InstanceRecord> stale;
    for (const auto& r : state.instances) {
      if (r.owner != grant.container || r.cardId != g.deviceId) continue;
      if (!whole && !reuse && r.quota == quota && r.memoryMiB == memoryMiB && (*lib)->instance(r.handle).ok())
        reuse = r;
      else
        stale.push_back(r);
    }
    if (!stale.empty()) {
      if (auto s = destroyRecords(stale, *cards, state); !s.ok()) return abandon(s.error());
    }
    for (const auto& node : *nodes) pass(node);
    if (whole) {
      visible.push_back(idx);
      state.wholeCards.push_back({grant.container, g.deviceId, card->index, published});
      continue;
    }
    if (!card->smlu)
      return abandon(makeError("card " + g.deviceId + " (index " + idx +
                               ") is not in sMLU mode, so it cannot be "
                               "shared: ask for the whole card, or enable sMLU (cnmon set -c " +
                               idx + " -smlu on)"));
    if (g.compute == 0)
      return abandon(makeError("card " + g.deviceId + ": an sMLU instance needs a compute quota of at least 1%"));
    InstanceRecord record;
    if (reuse) {
      record = *reuse;
    } else {
      auto profiles = (*lib)->profiles(card->handle);
      if (!profiles.ok()) return abandon(profiles.error());
      int profileId = -1;
      for (const auto& p : *profiles)
        if (p.quota == quota && p.memoryBytes == memoryMiB << 20) profileId = p.id;
      if (profileId < 0) {
        auto created = (*lib)->createProfile(card->handle, quota, memoryMiB << 20);
        if (!created.ok())
          return abandon(makeError("creating an sMLU profile of " + size + " on card " + g.deviceId + ": " +
                                   created.error().message));
        profileId = *created;
        state.profiles.push_back({g.deviceId, profileId});
        if (auto s = saveSmluState(statePath(), state); !s.ok()) return abandon(s.error());
      }
      const std::string name = instanceNameFor(grant.container);
      auto handle = (*lib)->createInstance(card->handle, profileId, name);
      if (!handle.ok())
        return abandon(makeError("creating an sMLU instance of " + size + " on card " + g.deviceId + ": " +
                                 handle.error().message));
      record = {grant.container, g.deviceId, card->index, profileId, *handle, 0, name, "", quota, memoryMiB};
      state.instances.push_back(record);
      made.push_back(record);
      // Recorded before anything else can fail, so that the instance is never orphaned.
      if (auto s = saveSmluState(statePath(), state); !s.ok()) return abandon(s.error());
      auto info = (*lib)->instance(*handle);
      if (!info.ok()) return abandon(info.error());
      auto stored = std::find(state.instances.begin(), state.instances.end(), record);
      record.instanceId = info->instanceId;
      record.devNode = devNodePath(info->devNode);
      *stored = record;
      made.back() = record;
      if (record.devNode.empty()) return abandon(makeError("cnDev gave sMLU instance " + name + " no device node"));
    }
    // The driver makes the instance's node; give udev a moment before calling it missing.
    const DeviceNode instanceNode = nodeAt(record.devNode);
    std::error_code ec;
    for (int i = 0; i < 20 && !std::filesystem::exists(instanceNode.hostPath, ec); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!std::filesystem::exists(instanceNode.hostPath, ec))
      return abandon(makeError("sMLU instance " + record.name + " on card " + g.deviceId + ": its device node " +
                               instanceNode.hostPath + " does not exist"));
    pass(instanceNode);
    virtualDevices += dev + "," + ipcm + "," + record.devNode + ";";
    if (options_.vendorAnnotations && !annotated) {
      annotated = true;
      const std::uint64_t units = memoryMiB / std::max<std::uint64_t>(rules_.memoryUnitMiB, 1);
      spec.podAnnotations[kVendorProfileKey] = idx + "_" + std::to_string(quota) + "_" + std::to_string(units);
      spec.podAnnotations[kVendorAssignedKey] = "true";
      spec.podAnnotations[kVendorInstanceKey] = std::to_string(record.profileId) + "_" + std::to_string(record.handle) +
                                                "_" + idx + "_" + std::to_string(record.instanceId);
    }
  }
  // Nodes of the whole driver, not of one card, where they exist.
  for (const char* shared : {"/dev/cambricon_ctl", "/dev/cambricon_gdr"}) {
    const DeviceNode node = nodeAt(shared);
    std::error_code ec;
    if (std::filesystem::exists(node.hostPath, ec)) pass(node);
  }
  if (auto s = saveSmluState(statePath(), state); !s.ok()) return abandon(s.error());
  if (!visible.empty()) spec.env[kVisibleDevicesEnv] = join(visible, ",");
  if (!virtualDevices.empty()) spec.env[kVirtualDevicesEnv] = virtualDevices;
  return spec;
}

Status CambriconBackend::release(const ContainerRef& container) {
  std::lock_guard lock(limiterMutex_);
  auto loaded = loadSmluState(statePath());
  if (!loaded.ok()) return loaded.error();
  SmluState state = std::move(loaded).value();
  const auto wholeBefore = state.wholeCards.size();
  std::erase_if(state.wholeCards, [&](const WholeCardRecord& w) { return w.owner == container; });
  std::vector<InstanceRecord> mine;
  for (const auto& r : state.instances)
    if (r.owner == container) mine.push_back(r);
  if (mine.empty()) {
    if (state.wholeCards.size() != wholeBefore) return saveSmluState(statePath(), state);
    return {};
  }
  auto cards = this->cards();
  if (!cards.ok()) return cards.error();
  const Status destroyed = destroyRecords(mine, *cards, state);
  if (auto s = saveSmluState(statePath(), state); !s.ok()) return s;
  if (!destroyed.ok())
    return makeError("releasing container " + container.containerName + " (" + container.holder + ")" + ": " +
                     destroyed.error().message);
  return {};
}

Status CambriconBackend::reconcile(const std::vector<ContainerRef>& live) {
  std::lock_guard lock(limiterMutex_);
  auto loaded = loadSmluState(statePath());
  if (!loaded.ok()) return loaded.error();
  SmluState state = std::move(loaded).value();
  const std::set<ContainerRef> keep(live.begin(), live.end());
  const auto wholeBefore = state.wholeCards.size();
  std::erase_if(state.wholeCards, [&](const WholeCardRecord& w) { return !keep.contains(w.owner); });
  std::vector<InstanceRecord> gone;
  for (const auto& r : state.instances)
    if (!keep.contains(r.owner)) gone.push_back(r);
  if (gone.empty() && state.profiles.empty()) {
    if (state.wholeCards.size() != wholeBefore) return saveSmluState(statePath(), state);
    return {};
  }
  auto cards = this->cards();
  if (!cards.ok()) return cards.error();
  const Status destroyed = destroyRecords(gone, *cards, state);
  if (auto s = saveSmluState(statePath(), state); !s.ok()) return s;
  if (!destroyed.ok()) return makeError("reconciling sMLU instances: " + destroyed.error().message);
  return {};
}

Result<std::vector<ContainerUsage>> CambriconBackend::containerUsage() {
  std::lock_guard lock(limiterMutex_);
  auto loaded = loadSmluState(statePath());
  if (!loaded.ok()) return loaded.error();
  const SmluState& state = *loaded;
  std::vector<ContainerUsage> out;
  if (state.instances.empty() && state.wholeCards.empty()) return out;
  auto cards = this->cards();
  if (!cards.ok()) return cards.error();
  auto lib = library();
  if (!lib.ok()) return lib.error();
  auto handleOf = [&](const std::string& id) -> std::optional<cndevDevice_t> {
    for (const auto& c : *cards)
      if (deviceIdFor(c.uuid) == id) return c.handle;
    return std::nullopt;
  };
  // The container sees its cards in the order it was given them; whole and shared ones
  // are recorded apart, so number them by card index, which is that order's as well.
  std::map<ContainerRef, std::vector<std::pair<int, ContainerUsage>>> byContainer;
  for (const auto& w : state.wholeCards) {
    ContainerUsage u;
    u.container = w.owner;
    u.deviceId = w.cardId;
    u.memoryLimitBytes = w.memoryMiB << 20;
    u.computeLimitPercent = 100;
    if (auto h = handleOf(w.cardId))
      if (auto used = (*lib)->usage(*h); used.ok()) {
        u.memoryUsedBytes = used->memoryUsedMiB << 20;  // held alone: the card's use is the container's
        u.utilizationPercent = used->utilizationPercent;
      }
    byContainer[w.owner].emplace_back(w.cardIndex, std::move(u));
  }
  for (const auto& r : state.instances) {
    ContainerUsage u;
    u.container = r.owner;
    u.deviceId = r.cardId;
    u.memoryLimitBytes = r.memoryMiB << 20;
    u.computeLimitPercent = r.quota;
    if (auto info = (*lib)->instance(r.handle); info.ok()) {
      u.memoryUsedBytes = info->memoryUsedBytes;
      u.utilizationPercent = std::min<std::uint32_t>(info->quotaUsed, 100);
    }
    byContainer[r.owner].emplace_back(r.cardIndex, std::move(u));
  }
  for (auto& [owner, list] : byContainer) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    int position = 0;
    for (auto& [index, u] : list) {
      u.deviceIndex = position++;
      out.push_back(std::move(u));
    }
  }
  return out;
}

}  // namespace vgpu::cambricon
