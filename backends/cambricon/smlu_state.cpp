#include "smlu_state.h"

#include <boost/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace vgpu::cambricon {
namespace json = boost::json;
namespace {

constexpr int kStateVersion = 1;

Result<std::string> stringField(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (!v || !v->is_string()) return makeError(std::string("\"") + key + "\" must be a string");
  return std::string(v->as_string());
}

Result<std::int64_t> intField(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (!v) return makeError(std::string("\"") + key + "\" is missing");
  if (v->is_int64()) return v->as_int64();
  if (v->is_uint64() && v->as_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v->as_uint64());
  return makeError(std::string("\"") + key + "\" must be a whole number");
}

}  // namespace

std::string instanceNameFor(const ContainerRef& owner) {
  std::uint64_t hash = 14695981039346656037ull;  // FNV-1a
  auto mix = [&](const std::string& s) {
    for (unsigned char c : s) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(owner.holder);
  mix(std::string(1, '\0'));
  mix(owner.containerName);
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return std::string("vgpu-") + hex;
}

Result<SmluState> loadSmluState(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return SmluState{};
  std::ifstream in(path);
  if (!in) return makeError("sMLU state file " + path.string() + " cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const auto where = [&](const std::string& what) {
    return makeError("sMLU state file " + path.string() + ": " + what +
                     " (fix or remove it; instances it recorded must then be destroyed with cnmon)");
  };
  json::error_code jec;
  const json::value root = json::parse(text.str(), jec);
  if (jec) return where("not valid JSON: " + jec.message());
  if (!root.is_object()) return where("expected a JSON object");
  const auto& top = root.as_object();
  auto version = intField(top, "version");
  if (!version.ok()) return where(version.error().message);
  if (*version != kStateVersion) return where("version " + std::to_string(*version) + " is not known (expected 1)");
  SmluState state;
  if (const auto* list = top.if_contains("instances")) {
    if (!list->is_array()) return where("\"instances\" must be a list");
    size_t n = 0;
    for (const auto& item : list->as_array()) {
      const std::string at = "instances[" + std::to_string(n++) + "]: ";
      if (!item.is_object()) return where(at + "expected an object");
      const auto& o = item.as_object();
      InstanceRecord r;
      auto pod = stringField(o, "holder");
      auto container = stringField(o, "container");
      auto card = stringField(o, "card");
      auto name = stringField(o, "name");
      auto devNode = stringField(o, "devNode");
      for (auto* s : {&pod, &container, &card, &name, &devNode})
        if (!s->ok()) return where(at + s->error().message);
      r.owner = {*pod, *container};
      r.cardId = *card;
      r.name = *name;
      r.devNode = *devNode;
      auto cardIndex = intField(o, "cardIndex");
      auto profile = intField(o, "profileId");
      auto handle = intField(o, "handle");
      auto instanceId = intField(o, "instanceId");
      auto quota = intField(o, "quota");
      auto memory = intField(o, "memoryMiB");
      for (auto* v : {&cardIndex, &profile, &handle, &instanceId, &quota, &memory})
        if (!v->ok()) return where(at + v->error().message);
      r.cardIndex = static_cast<int>(*cardIndex);
      r.profileId = static_cast<int>(*profile);
      r.handle = static_cast<int>(*handle);
      r.instanceId = static_cast<int>(*instanceId);
      r.quota = static_cast<std::uint32_t>(*quota);
      r.memoryMiB = static_cast<std::uint64_t>(*memory);
      state.instances.push_back(std::move(r));
    }
  }
  if (const auto* list = top.if_contains("profiles")) {
    if (!list->is_array()) return where("\"profiles\" must be a list");
    size_t n = 0;
    for (const auto& item : list->as_array()) {
      const std::string at = "profiles[" + std::to_string(n++) + "]: ";
      if (!item.is_object()) return where(at + "expected an object");
      auto card = stringField(item.as_object(), "card");
      auto id = intField(item.as_object(), "profileId");
      if (!card.ok()) return where(at + card.error().message);
      if (!id.ok()) return where(at + id.error().message);
      state.profiles.push_back({*card, static_cast<int>(*id)});
    }
  }
  if (const auto* list = top.if_contains("wholeCards")) {
    if (!list->is_array()) return where("\"wholeCards\" must be a list");
    size_t n = 0;
    for (const auto& item : list->as_array()) {
      const std::string at = "wholeCards[" + std::to_string(n++) + "]: ";
      if (!item.is_object()) return where(at + "expected an object");
      const auto& o = item.as_object();
      auto holder = stringField(o, "holder");
      auto container = stringField(o, "container");
      auto card = stringField(o, "card");
      for (auto* v : {&holder, &container, &card})
        if (!v->ok()) return where(at + v->error().message);
      auto index = intField(o, "cardIndex");
      auto memory = intField(o, "memoryMiB");
      for (auto* v : {&index, &memory})
        if (!v->ok()) return where(at + v->error().message);
      state.wholeCards.push_back(
          {{*holder, *container}, *card, static_cast<int>(*index), static_cast<std::uint64_t>(*memory)});
    }
  }
  return state;
}

Status saveSmluState(const std::filesystem::path& path, const SmluState& state) {
  json::array instances;
  for (const auto& r : state.instances)
    instances.push_back(json::object{{"holder", r.owner.holder},
                                     {"container", r.owner.containerName},
                                     {"card", r.cardId},
                                     {"cardIndex", r.cardIndex},
                                     {"profileId", r.profileId},
                                     {"handle", r.handle},
                                     {"instanceId", r.instanceId},
                                     {"name", r.name},
                                     {"devNode", r.devNode},
                                     {"quota", r.quota},
                                     {"memoryMiB", r.memoryMiB}});
  json::array profiles;
  for (const auto& p : state.profiles) profiles.push_back(json::object{{"card", p.cardId}, {"profileId", p.profileId}});
  json::array whole;
  for (const auto& w : state.wholeCards)
    whole.push_back(json::object{{"holder", w.owner.holder},
                                 {"container", w.owner.containerName},
                                 {"card", w.cardId},
                                 {"cardIndex", w.cardIndex},
                                 {"memoryMiB", w.memoryMiB}});
  const json::object root{
      {"version", kStateVersion}, {"instances", instances}, {"profiles", profiles}, {"wholeCards", whole}};

  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return makeError("cannot create the sMLU state folder " + path.parent_path().string() + ": " + ec.message());
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json::serialize(root) << "\n";
    out.flush();
    if (!out) return makeError("cannot write the sMLU state file " + tmp.string());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return makeError("cannot replace the sMLU state file " + path.string() + ": " + ec.message());
  return {};
}

}  // namespace vgpu::cambricon
