// The DRA front end's checkpoint of prepared claims (prepared_store.h): written on every
// change, read at start so a repeated NodePrepareResources gets the same answer.

#include "prepared_store.h"

#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "cdi_spec.h"

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
  return {{"namespace", c.ref.ns}, {"uid", c.ref.uid},     {"name", c.ref.name},
          {"holder", c.holder},    {"cdiIds", json::value_from(c.cdiIds)},     {"shares", std::move(shares)}};
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
  return c;
}

}  // namespace

PreparedStore::PreparedStore(fs::path file) : file_(std::move(file)) {}

Status PreparedStore::load() {
  std::lock_guard lock(mu_);
  claims_.clear();
  std::error_code ec;
  if (!fs::exists(file_, ec)) return {};
  std::ifstream in(file_);
  if (!in) return makeError("cannot read the DRA checkpoint " + file_.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json::value v = json::parse(text.str());
    for (const auto& c : v.as_object().at("claims").as_array()) {
      PreparedClaim claim = fromJson(c.as_object());
      claims_[claim.ref.uid] = std::move(claim);
    }
  } catch (const std::exception& e) {
    claims_.clear();
    return makeError("the DRA checkpoint " + file_.string() + " cannot be read (" + e.what() +
                     "); remove it only after unpreparing its claims by hand");
  }
  return {};
}

Status PreparedStore::put(PreparedClaim claim) {
  std::lock_guard lock(mu_);
  auto before = claims_;
  claims_[claim.ref.uid] = std::move(claim);
  if (auto s = saveLocked(); !s.ok()) {
    claims_ = std::move(before);
    return s;
  }
  return {};
}

Status PreparedStore::erase(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = claims_.find(uid);
  if (it == claims_.end()) return {};
  PreparedClaim gone = it->second;
  claims_.erase(it);
  if (auto s = saveLocked(); !s.ok()) {
    claims_[uid] = std::move(gone);
    return s;
  }
  return {};
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

Status PreparedStore::saveLocked() const {
  json::array claims;
  for (const auto& [uid, c] : claims_) claims.push_back(toJson(c));
  // A crash leaves the old file or the new one.
  return writeJsonAtomically(file_.parent_path(), file_.filename().string(), json::object{{"claims", std::move(claims)}});
}

}  // namespace vgpu::dra
