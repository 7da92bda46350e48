// NodePrepareResources and NodeUnprepareResources for one backend (claim_preparer.h): a
// claim's shares as one container grant, asked of the backend's limiter, recorded.

#include "claim_preparer.h"

#include <dirent.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include "cdi_spec.h"
#include "limiter_call.h"
#include "slice_publisher.h"
#include "vgpu/host_files.h"

namespace vgpu::dra {
namespace fs = std::filesystem;

ClaimPreparer::ClaimPreparer(PreparerOptions options, Backend& backend, k8s::Client& client)
    : options_(std::move(options)),
      backend_(backend),
      client_(client),
      store_(options_.journal, options_.driver, backend.name(), options_.stateDir / "prepared.json") {}

void ClaimPreparer::setDevices(std::vector<DraDevice> devices) {
  std::lock_guard lock(mu_);
  for (auto& d : devices) devices_[d.name] = std::move(d);
}

Result<std::vector<std::string>> ClaimPreparer::restore() {
  std::lock_guard lock(mu_);
  auto problems = store_.load();
  if (!problems.ok()) return problems.error();
  std::vector<ContainerRef> live;
  std::set<std::string> holders;
  for (const auto& claim : store_.all()) holders.insert(claim.holder);
  // Folders of claims unprepared while the plugin was down (or half made by a crash): their
  // tmpfs and files go.
  if (auto claims = openOwnDir(options_.stateDir / "claims"); claims) {
    std::vector<std::string> stray;
    if (DIR* d = ::fdopendir(::dup(claims->get()))) {
      while (const dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0 && !holders.count(e->d_name))
          stray.emplace_back(e->d_name);
      ::closedir(d);
    }
    for (const auto& name : stray) (void)removeFolder(name);
  }
  for (auto claim : store_.all()) {
    auto named = handOut(claim);
    if (!named.ok())
      return makeError("ResourceClaim " + claim.ref.ns + "/" + claim.ref.name + " prepared before the restart: " +
                       named.error().message);
    // Recorded before the limiter answered (a crash came between), or by a plugin that did
    // not keep the region: its CDI devices and region now.
    if (!claim.shares.empty() && (claim.cdiIds.empty() || claim.region != named->region)) {
      if (claim.cdiIds.empty()) claim.cdiIds = cdiIdsOf(claim.ref, named->named);
      claim.region = named->region;
      if (auto s = store_.put(claim); !s.ok()) return s.error();
    }
    live.push_back(grantOf(claim).container);
  }
  if (Limiter* limiter = backend_.limiter())
    if (auto s = limiter->reconcile(live); !s.ok()) return makeError("backend " + backend_.name() + ": " + s.error().message);
  return problems;
}

PrepareResult ClaimPreparer::prepare(const ClaimRef& claim) {
  std::lock_guard lock(mu_);
  // Asked again (the kubelet restarted, or retried after a lost answer): the same answer,
  // the CDI spec made again if it went missing.
  if (auto done = store_.find(claim.uid)) {
    if (!fs::exists(options_.cdiDir / cdiFile(claim)))
      if (auto s = handOut(*done); !s.ok()) return {{}, s.error().message};
    return {devicesOf(*done), ""};
  }
  auto made = prepareNew(claim);
  if (!made.ok()) return {{}, made.error().message};
  return {devicesOf(*made), ""};
}

Result<PreparedClaim> ClaimPreparer::prepareNew(const ClaimRef& ref) {
  auto obj = client_.get(kResourceClaims, ref.ns, ref.name);
  if (!obj.ok()) return makeError("reading ResourceClaim " + ref.ns + "/" + ref.name + ": " + obj.error().describe());
  auto shares = claimShares(*obj, ref, options_.driver);
  if (!shares.ok()) return shares.error();
  PreparedClaim claim;
  claim.ref = ref;
  // The limiter's key: unique among live claims, stable across restarts.
  claim.holder = "dra-" + ref.uid;
  for (const auto& s : *shares) {
    const std::string where = "ResourceClaim " + ref.ns + "/" + ref.name + " device " + s.pool + "/" + s.device;
    if (s.pool != options_.nodeName) return makeError(where + ": pool is not this node's (" + options_.nodeName + ")");
    auto it = devices_.find(s.device);
    if (it == devices_.end()) return makeError(where + ": no such device on this node (not discovered yet?)");
    const DraDevice& d = it->second;
    PreparedShare p;
    p.request = s.request;
    p.pool = s.pool;
    p.device = s.device;
    p.shareId = s.shareId;
    p.deviceId = d.device.id;
    p.deviceIndex = d.device.index;
    // An exclusive allocation (no consumedCapacity: a cluster without DRAConsumableCapacity)
    // is the whole device, as a container asking a whole card gets on the device-plugin path.
    p.memoryMiB = s.memoryMiB.value_or(d.device.memoryMiB);
    p.cores = s.cores.value_or(100);
    if (p.memoryMiB == 0 || p.memoryMiB > d.device.memoryMiB)
      return makeError(where + ": consumed memory " + std::to_string(p.memoryMiB) + " MiB is not within the device's " +
                       std::to_string(d.device.memoryMiB) + " MiB");
    claim.shares.push_back(std::move(p));
  }
  if (claim.shares.empty()) return claim;  // nothing of ours in it: nothing to prepare
  // Recorded first, so the device-plugin front end cannot take the devices meanwhile (and is
  // refused here when it holds one).
  if (auto s = store_.hold(claim); !s.ok())
    return makeError("ResourceClaim " + ref.ns + "/" + ref.name + ": " + s.error().message);
  auto named = handOut(claim);
  if (!named.ok()) {
    (void)store_.erase(ref.uid);
    return named.error();
  }
  claim.cdiIds = cdiIdsOf(ref, named->named);
  claim.region = named->region;
  if (auto s = store_.put(claim); !s.ok()) {
    if (Limiter* limiter = backend_.limiter()) (void)limiter->release(grantOf(claim).container);
    std::error_code ec;
    fs::remove(options_.cdiDir / cdiFile(ref), ec);
    (void)store_.erase(ref.uid);
    return s.error();
  }
  return claim;
}

Result<ClaimPreparer::HandedOut> ClaimPreparer::handOut(const PreparedClaim& claim) {
  if (claim.shares.empty()) return HandedOut{};
  const ContainerGrant grant = grantOf(claim);
  {
    // Made without following a link (a tenant cannot reach <stateDir>/claims, but the folder
    // is checked like every tenant folder), then bounded before the backend creates anything
    // in it; a folder already on its tmpfs (a repeated prepare) keeps it and the region.
    auto claims = openOwnDir(options_.stateDir / "claims");
    if (!claims) return makeError("cannot create the claim's host folder " + grant.hostDir + ": " + claims.error().message);
    if (auto made = makeOwnDirAt(claims->get(), claim.holder, 0755, grant.hostDir); !made)
      return makeError("cannot create the claim's host folder: " + made.error().message);
    if (auto s = deviceplugin::boundFolderAt(options_.bound, claims->get(), claim.holder, grant.hostDir); !s.ok())
      return makeError("claim folder: " + s.error().message);
  }
  auto spec = deviceplugin::containerSpecFor(backend_, grant, options_.bound);
  if (!spec.ok()) return spec.error();
  if (auto s = node::writeJsonAtomically(options_.cdiDir, cdiFile(claim.ref),
                                         node::cdiSpec(node::cdiKind(options_.driver), claim.ref.uid, *spec));
      !s.ok())
    return s.error();
  return HandedOut{node::cdiDevicesFromAnnotations(spec->annotations), spec->region};
}

std::string ClaimPreparer::unprepare(const ClaimRef& ref) {
  std::lock_guard lock(mu_);
  auto claim = store_.find(ref.uid);
  if (!claim) return "";
  if (Limiter* limiter = backend_.limiter())
    if (auto s = limiter->release(grantOf(*claim).container); !s.ok())
      return "backend " + backend_.name() + " cannot release ResourceClaim " + ref.ns + "/" + ref.name + ": " +
             s.error().message;
  std::error_code ec;
  fs::remove(options_.cdiDir / cdiFile(ref), ec);
  if (auto s = removeFolder(claim->holder); !s.ok())
    return "cannot remove ResourceClaim " + ref.ns + "/" + ref.name + "'s folder: " + s.error().message;
  if (auto s = store_.erase(ref.uid); !s.ok()) return s.error().message;
  return "";
}

std::size_t ClaimPreparer::preparedClaims() const { return store_.all().size(); }

std::vector<deviceplugin::RegionSource> ClaimPreparer::regionSources() const {
  std::vector<deviceplugin::RegionSource> out;
  for (const auto& claim : store_.all())
    if (claim.region) out.push_back({hostDir(claim), *claim.region, {claim.ref.ns, claim.ref.name}});
  return out;
}

std::vector<Device> ClaimPreparer::devices() const {
  std::lock_guard lock(mu_);
  std::vector<Device> out;
  for (const auto& [name, d] : devices_) out.push_back(d.device);
  return out;
}

ContainerGrant ClaimPreparer::grantOf(const PreparedClaim& claim) const {
  ContainerGrant g;
  g.container = {claim.holder, claim.ref.name};
  g.podNamespace = claim.ref.ns;
  g.podName = claim.ref.name;  // a label only: a claim may serve several pods
  g.hostDir = hostDir(claim).string();
  for (const auto& s : claim.shares)
    g.devices.push_back(DeviceGrant{backend_.name(), s.deviceId, s.deviceIndex, s.memoryMiB, s.cores, -1, -1, {}});
  return g;
}

std::vector<PreparedDevice> ClaimPreparer::devicesOf(const PreparedClaim& claim) const {
  // One CDI device carries the whole claim's edits (the limiter's env numbers the devices of
  // one grant, so they cannot be split per device); it goes with the first device, whose
  // request names cover every request, so every container using the claim gets it once.
  std::vector<PreparedDevice> out;
  std::vector<std::string> requests;
  std::set<std::string> seen;
  for (const auto& s : claim.shares)
    if (seen.insert(s.request).second) requests.push_back(s.request);
  for (std::size_t i = 0; i < claim.shares.size(); ++i) {
    const auto& s = claim.shares[i];
    PreparedDevice d;
    d.requestNames = i == 0 ? requests : std::vector<std::string>{s.request};
    d.pool = s.pool;
    d.device = s.device;
    if (i == 0) d.cdiDeviceIds = claim.cdiIds;
    d.shareId = s.shareId;
    out.push_back(std::move(d));
  }
  return out;
}

fs::path ClaimPreparer::hostDir(const PreparedClaim& claim) const { return options_.stateDir / "claims" / claim.holder; }

Status ClaimPreparer::removeFolder(const std::string& holder) const {
  const std::string shown = (options_.stateDir / "claims" / holder).string();
  auto claims = openOwnDir(options_.stateDir / "claims");
  if (!claims) return makeError("cannot open " + shown + ": " + claims.error().message);
  // Lazily (MNT_DETACH): a container still using the tmpfs keeps it until it lets go.
  if (auto s = unmountAt(claims->get(), holder, shown); !s.ok()) return s;
  return removeAt(claims->get(), holder, shown);
}

std::vector<std::string> ClaimPreparer::cdiIdsOf(const ClaimRef& claim, const std::vector<std::string>& named) const {
  std::vector<std::string> ids{node::cdiDeviceId(node::cdiKind(options_.driver), claim.uid)};
  ids.insert(ids.end(), named.begin(), named.end());
  return ids;
}

std::string ClaimPreparer::cdiFile(const ClaimRef& claim) const {
  return node::cdiSpecFileName(node::cdiKind(options_.driver), claim.uid);
}

}  // namespace vgpu::dra
