#include "vdev_state.h"

#include <boost/json.hpp>

#include <fstream>
#include <sstream>

namespace vgpu::hygon {
namespace json = boost::json;
namespace {

constexpr std::int64_t kVersion = 1;

json::object toJson(const Holding& h) {
  return json::object{{"holder", h.container.holder},
                      {"container", h.container.containerName},
                      {"podUid", h.podUid},
                      {"deviceId", h.deviceId},
                      {"deviceIndex", h.deviceIndex},
                      {"whole", h.whole},
                      {"cuMask", json::array{toHex(h.mask.low), toHex(h.mask.high)}},
                      {"memoryMiB", h.memoryMiB},
                      {"vdevId", h.vdevId},
                      {"pipeId", h.pipeId},
                      {"hydmi", h.hydmi},
                      {"confDir", h.confDir},
                      {"copyPath", h.copyPath}};
}

class Fields {
 public:
  Fields(const json::object& o, std::string where) : o_(o), where_(std::move(where)) {}
  Result<std::string> str(const char* key) const {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_string()) return err(key, "a string");
    return std::string(v->as_string());
  }
  Result<std::int64_t> num(const char* key) const {
    const auto* v = o_.if_contains(key);
    if (!v || !(v->is_int64() || v->is_uint64())) return err(key, "a whole number");
    return v->is_int64() ? v->as_int64() : static_cast<std::int64_t>(v->as_uint64());
  }
  Result<bool> flag(const char* key) const {
    const auto* v = o_.if_contains(key);
    if (!v || !v->is_bool()) return err(key, "true or false");
    return v->as_bool();
  }
  Error err(const char* key, const char* expected) const {
    return makeError(where_ + "." + key + ": expected " + expected);
  }
  const json::object& object() const { return o_; }
  const std::string& where() const { return where_; }

 private:
  const json::object& o_;
  std::string where_;
};

Result<Holding> fromJson(const json::value& v, const std::string& where) {
  if (!v.is_object()) return makeError(where + ": expected an object");
  const Fields f(v.as_object(), where);
  Holding h;
#define VGPU_TAKE(expr, target)              \
  {                                          \
    auto r = (expr);                         \
    if (!r.ok()) return std::move(r).error(); \
    target = *r;                             \
  }
  VGPU_TAKE(f.str("holder"), h.container.holder)
  VGPU_TAKE(f.str("container"), h.container.containerName)
  if (f.object().contains("podUid")) VGPU_TAKE(f.str("podUid"), h.podUid)  // absent before per-pod folders
  VGPU_TAKE(f.str("deviceId"), h.deviceId)
  std::int64_t n = 0;
  VGPU_TAKE(f.num("deviceIndex"), n)
  h.deviceIndex = static_cast<int>(n);
  VGPU_TAKE(f.flag("whole"), h.whole)
  VGPU_TAKE(f.num("memoryMiB"), n)
  if (n < 0) return f.err("memoryMiB", "a non-negative number");
  h.memoryMiB = static_cast<std::uint64_t>(n);
  VGPU_TAKE(f.num("vdevId"), n)
  h.vdevId = static_cast<int>(n);
  VGPU_TAKE(f.num("pipeId"), n)
  h.pipeId = static_cast<int>(n);
  VGPU_TAKE(f.flag("hydmi"), h.hydmi)
  VGPU_TAKE(f.str("confDir"), h.confDir)
  VGPU_TAKE(f.str("copyPath"), h.copyPath)
#undef VGPU_TAKE
  const auto* mask = f.object().if_contains("cuMask");
  if (!mask || !mask->is_array() || mask->as_array().size() != 2 || !mask->as_array()[0].is_string() ||
      !mask->as_array()[1].is_string())
    return f.err("cuMask", "two hex strings");
  auto low = parseHex(std::string(mask->as_array()[0].as_string()));
  auto high = parseHex(std::string(mask->as_array()[1].as_string()));
  if (!low.ok()) return std::move(low).error().prefix(where + ".cuMask[0]");
  if (!high.ok()) return std::move(high).error().prefix(where + ".cuMask[1]");
  h.mask = {*low, *high};
  if (h.container.holder.empty() || h.deviceId.empty()) return makeError(where + ": holder and deviceId must be set");
  // Release deletes these paths: never trust the file with anything but our own names
  // (the backend also checks confDir is in its folder, which it alone knows).
  if (!h.confDir.empty() && !std::filesystem::path(h.confDir).is_absolute())
    return makeError(where + ".confDir: \"" + h.confDir + "\" is not an absolute folder");
  if (!h.copyPath.empty()) {
    const std::string name = std::filesystem::path(h.copyPath).filename().string();
    if (name.size() < 10 || name.rfind("vdev", 0) != 0 || name.substr(name.size() - 5) != ".conf")
      return makeError(where + ".copyPath: \"" + h.copyPath + "\" is not a vdev<id>.conf file");
  }
  return h;
}

}  // namespace

std::filesystem::path stateFilePath(const std::filesystem::path& stateDir) { return stateDir / "holdings.json"; }

Result<std::vector<Holding>> loadHoldings(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::vector<Holding>{};
  std::ifstream in(file);
  if (!in) return makeError("state file " + file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string prefix = "state file " + file.string();
  json::value root;
  try {
    root = json::parse(text.str());
  } catch (const std::exception& e) {
    return makeError(prefix + ": not valid JSON: " + e.what() + " (move it aside to start afresh)");
  }
  if (!root.is_object()) return makeError(prefix + ": expected an object");
  const auto* version = root.as_object().if_contains("version");
  if (!version || !version->is_int64() || version->as_int64() != kVersion)
    return makeError(prefix + ": unsupported version (expected " + std::to_string(kVersion) + ")");
  const auto* list = root.as_object().if_contains("holdings");
  if (!list || !list->is_array()) return makeError(prefix + ": expected a `holdings` array");
  std::vector<Holding> out;
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    auto h = fromJson(list->as_array()[i], prefix + ": holdings[" + std::to_string(i) + "]");
    if (!h.ok()) return std::move(h).error();
    out.push_back(std::move(*h));
  }
  return out;
}

Status saveHoldings(const std::filesystem::path& file, const std::vector<Holding>& holdings) {
  json::array list;
  for (const auto& h : holdings) list.push_back(toJson(h));
  const std::string text = json::serialize(json::object{{"version", kVersion}, {"holdings", std::move(list)}}) + "\n";
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) return makeError("state dir " + file.parent_path().string() + ": cannot be created: " + ec.message());
  const std::filesystem::path tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return makeError("state file " + tmp.string() + ": cannot be written");
  }
  std::filesystem::rename(tmp, file, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    return makeError("state file " + file.string() + ": cannot be replaced: " + why);
  }
  return {};
}

}  // namespace vgpu::hygon
