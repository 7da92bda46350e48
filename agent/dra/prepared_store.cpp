// The DRA front end's checkpoint of prepared claims (prepared_store.h): its entries in the
// node's handout journal, read at start so a repeated NodePrepareResources gets the same answer.

#include "prepared_store.h"

#include <fstream>
#include <sstream>

#include <boost/json.hpp>


namespace vgpu::dra {
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

json::object toJson(const PreparedClaim& c) {
  json::array shares;
  for (const auto& s : c.shares)
    shares.push_back(json::object{{"request", s.request},       {"pool", s.pool},
                                  {"device", s.device},         {"shareID", s.shareId},
                                  {"deviceId", s.deviceId},     {"deviceIndex", s.deviceIndex},
                                  {"memoryMiB", s.memoryMiB},   {"cores", s.cores}});
  json::object o{{"namespace", c.ref.ns}, {"uid", c.ref.uid},     {"name", c.ref.name},
                 {"holder", c.holder},    {"cdiIds", json::value_from(c.cdiIds)},     {"shares", std::move(shares)}};
  if (c.region) o["region"] = {{"path", c.region->path}, {"inode", c.region->inode}};
  return o;
}

PreparedClaim fromJson(const json::object& o) {
  // json::value_to throws on a wrong shape; load() turns that into an error naming the file.
  PreparedClaim c;
  c.ref.ns = json::value_to<std::string>(o.at("namespace"));
  c.ref.uid = json::value_to<std::string>(o.at("uid"));
  c.ref.name = json::value_to<std::string>(o.at("name"));
  c.holder = json::value_to<std::string>(o.at("holder"));
  c.cdiIds = json::value_to<std::vector<std::string>>(o.at("cdiIds"));
  for (const auto& v : o.at("shares").as_array()) {
    const auto& s = v.as_object();
    PreparedShare p;
    p.request = json::value_to<std::string>(s.at("request"));
    p.pool = json::value_to<std::string>(s.at("pool"));
    p.device = json::value_to<std::string>(s.at("device"));
    p.shareId = json::value_to<std::string>(s.at("shareID"));
    p.deviceId = json::value_to<std::string>(s.at("deviceId"));
    p.deviceIndex = json::value_to<int>(s.at("deviceIndex"));
    p.memoryMiB = json::value_to<std::uint64_t>(s.at("memoryMiB"));
    p.cores = json::value_to<std::uint32_t>(s.at("cores"));
    c.shares.push_back(std::move(p));
  }
  if (const auto* r = o.if_contains("region"))  // absent in entries of plugins before it was kept
    c.region = RegionFile{json::value_to<std::string>(r->at("path")), json::value_to<std::uint64_t>(r->at("inode"))};
  return c;
}

/// The driver's checkpoint from before the journal: {"claims": [<claim>...]}.
Result<std::vector<PreparedClaim>> readLegacy(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return makeError("cannot read the DRA checkpoint " + file.string());
  std::stringstream text;
  text << in.rdbuf();
  std::vector<PreparedClaim> out;
  try {
    const json::value v = json::parse(text.str());
    for (const auto& c : v.as_object().at("claims").as_array()) out.push_back(fromJson(c.as_object()));
  } catch (const std::exception& e) {
    return makeError("the DRA checkpoint " + file.string() + " cannot be read (" + e.what() +
                     "); remove it only after unpreparing its claims by hand");
  }
  return out;
}

}  // namespace

PreparedStore::PreparedStore(fs::path journal, std::string driver, std::string backend, fs::path legacy)
    : driver_(std::move(driver)),
      backend_(std::move(backend)),
      legacy_(std::move(legacy)),
      journal_(std::move(journal), FrontEnd::kDra) {}

deviceplugin::JournalEntry PreparedStore::entryOf(const PreparedClaim& claim) const {
  deviceplugin::JournalEntry e;
  e.frontEnd = FrontEnd::kDra;
  e.key = driver_ + "/" + claim.ref.uid;
  e.holder = {"", "", claim.ref.uid,
              "ResourceClaim " + claim.ref.ns + "/" + claim.ref.name + " (uid " + claim.ref.uid + ", driver " + driver_ + ")"};
  for (const auto& s : claim.shares) e.devices.push_back({backend_, s.deviceId, s.memoryMiB, s.cores, s.shareId});
  e.record = toJson(claim);
  return e;
}

Result<std::vector<std::string>> PreparedStore::load() {
  std::lock_guard lock(mu_);
  claims_.clear();
  auto migrate = [this](const fs::path& file) -> Result<deviceplugin::HandoutJournal::Migrated> {
    auto claims = readLegacy(file);
    if (!claims.ok()) return claims.error();
    deviceplugin::HandoutJournal::Migrated out;
    for (const auto& c : *claims) out.entries.push_back(entryOf(c));
    return out;
  };
  auto problems = journal_.open(legacy_, migrate);
  if (!problems.ok()) return problems.error();
  const std::string prefix = driver_ + "/";
  for (const auto& e : journal_.mine()) {
    if (e.key.rfind(prefix, 0) != 0) continue;  // another driver's
    try {
      PreparedClaim claim = fromJson(e.record);
      claims_[claim.ref.uid] = std::move(claim);
    } catch (const std::exception& ex) {
      claims_.clear();
      return makeError("the prepared ResourceClaim " + e.key + " in the handout journal " + journal_.file().string() +
                       " cannot be read (" + ex.what() + "); unprepare it by hand");
    }
  }
  return problems;
}

Status PreparedStore::hold(const PreparedClaim& claim) {
  std::lock_guard lock(mu_);
  if (auto s = journal_.hold(entryOf(claim)); !s.ok()) return s;
  claims_[claim.ref.uid] = claim;
  return {};
}

Status PreparedStore::put(PreparedClaim claim) {
  std::lock_guard lock(mu_);
  if (auto s = journal_.update(entryOf(claim)); !s.ok()) return s;
  claims_[claim.ref.uid] = std::move(claim);
  return {};
}

Status PreparedStore::erase(const std::string& uid) {
  std::lock_guard lock(mu_);
  if (!claims_.contains(uid)) return {};
  if (auto s = journal_.release(driver_ + "/" + uid); !s.ok()) return s;
  claims_.erase(uid);
  // Unprepare is where the journal stops growing on a node that runs only this front end
  // (the device plugin compacts in its cleanup pass); it is not on the hot path.
  return journal_.compactIfLarge();
}

std::optional<PreparedClaim> PreparedStore::find(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = claims_.find(uid);
  if (it == claims_.end()) return std::nullopt;
  return it->second;
}

std::vector<PreparedClaim> PreparedStore::all() const {
  std::lock_guard lock(mu_);
  std::vector<PreparedClaim> out;
  for (const auto& [uid, c] : claims_) out.push_back(c);
  return out;
}

}  // namespace vgpu::dra
