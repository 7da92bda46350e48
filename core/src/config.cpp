// device-config.yaml: parsed strictly, so a typo is an error at start-up that names the
// file, line and key, not a default silently used later. docs/device-config.yaml is the
// annotated example.

#include "vgpu/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include "text_codec.h"

namespace vgpu {

const char* toString(NodePolicy policy) { return policy == NodePolicy::kBinpack ? "binpack" : "spread"; }
const char* toString(DevicePolicy policy) {
  switch (policy) {
    case DevicePolicy::kBinpack: return "binpack";
    case DevicePolicy::kSpread: return "spread";
    case DevicePolicy::kTopology: return "topology";
  }
  return "spread";
}

std::optional<NodePolicy> parseNodePolicy(std::string_view text) {
  if (text == "binpack") return NodePolicy::kBinpack;
  if (text == "spread") return NodePolicy::kSpread;
  return std::nullopt;
}

std::optional<DevicePolicy> parseDevicePolicy(std::string_view text) {
  if (text == "binpack") return DevicePolicy::kBinpack;
  if (text == "spread") return DevicePolicy::kSpread;
  if (text == "topology" || text == "topology-aware") return DevicePolicy::kTopology;  // HAMi's name for it
  return std::nullopt;
}

const char* toString(FrontEnd frontEnd) { return frontEnd == FrontEnd::kDra ? "dra" : "devicePlugin"; }

std::optional<FrontEnd> parseFrontEnd(std::string_view text) {
  if (text == "devicePlugin") return FrontEnd::kDevicePlugin;
  if (text == "dra") return FrontEnd::kDra;
  return std::nullopt;
}

BackendSettings BackendSettings::overriddenBy(const BackendSettings& o) const {
  BackendSettings r = *this;
  if (o.splitCount) r.splitCount = o.splitCount;
  if (o.memoryScaling) r.memoryScaling = o.memoryScaling;
  if (o.coreScaling) r.coreScaling = o.coreScaling;
  if (o.memoryUnitMiB) r.memoryUnitMiB = o.memoryUnitMiB;
  if (o.defaultMemoryMiB) r.defaultMemoryMiB = o.defaultMemoryMiB;
  if (o.defaultCores) r.defaultCores = o.defaultCores;
  if (o.defaultCount) r.defaultCount = o.defaultCount;
  if (o.frontEnd) r.frontEnd = o.frontEnd;
  for (const auto& [key, value] : o.options) r.options[key] = value;
  return r;
}

const BackendConfig* DeviceConfig::backend(std::string_view name) const {
  for (const auto& b : backends)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<const BackendConfig*> DeviceConfig::enabledBackends() const {
  std::vector<const BackendConfig*> out;
  for (const auto& b : backends)
    if (b.enabled) out.push_back(&b);
  return out;
}

BackendSettings DeviceConfig::settingsFor(std::string_view backendName, std::string_view node) const {
  const BackendConfig* b = backend(backendName);
  BackendSettings settings = b ? b->settings : BackendSettings{};
  if (node.empty()) return settings;
  for (const auto& n : nodes) {
    if (n.name != node) continue;
    auto it = n.backends.find(std::string(backendName));
    if (it != n.backends.end()) settings = settings.overriddenBy(it->second);
    break;
  }
  return settings;
}

namespace {

// Thrown only inside this file and caught in parseDeviceConfig: the walk below is deep and
// every leaf can fail, so unwinding keeps each check a single line.
struct ConfigError {
  std::string message;
};

// Where a value sits: its key path and the line of its key in the file.
struct Where {
  std::string path;
  YAML::Mark mark;

  Where child(const std::string& key, const YAML::Mark& keyMark) const {
    return {path.empty() ? key : path + "." + key, keyMark};
  }
  Where item(std::size_t index, const YAML::Mark& itemMark) const {
    return {path + "[" + std::to_string(index) + "]", itemMark};
  }
};

class Parser {
 public:
  explicit Parser(const std::string& fileName) : fileName_(fileName) {}

  [[noreturn]] void fail(const Where& at, const std::string& what) const {
    std::string message = fileName_;
    if (!at.mark.is_null()) {
      message += ":" + std::to_string(at.mark.line + 1) + ":" + std::to_string(at.mark.column + 1);
    }
    message += ": ";
    if (!at.path.empty()) message += at.path + ": ";
    throw ConfigError{message + what};
  }

  DeviceConfig document(const YAML::Node& root) {
    DeviceConfig config;
    Where top{"", root.Mark()};
    if (!root.IsMap()) fail(top, "expected a map with keys version, scheduler, backends, nodes; got " + kind(root));
    std::vector<std::pair<Where, std::string>> nodeBackendRefs;
    forEachKey(root, top, [&](const std::string& key, const YAML::Node& value, const Where& at) {
      if (key == "version") {
        auto version = unsignedInt(value, at, 0, std::numeric_limits<int>::max());
        if (version != 1) fail(at, "unsupported version " + std::to_string(version) + " (this build reads version 1)");
        config.version = 1;
      } else if (key == "scheduler") {
        config.scheduler = scheduler(value, at);
      } else if (key == "backends") {
        forEachKey(value, at, [&](const std::string& name, const YAML::Node& section, const Where& bat) {
          checkBackendName(name, bat);
          config.backends.push_back(backend(name, section, bat));
        });
      } else if (key == "nodes") {
        config.nodes = nodes(value, at, nodeBackendRefs);
      } else {
        unknownKey(key, at, "version, scheduler, backends, nodes");
      }
    });
    // Checked after the walk: `nodes` may come before `backends` in the file.
    for (const auto& [at, name] : nodeBackendRefs) {
      if (config.backend(name) == nullptr) {
        fail(at, "overrides backend " + detail::quoteForMessage(name) +
                     ", which has no section under backends (add backends." + name + " first)");
      }
    }
    checkResourceNamesUnique();
    return config;
  }

 private:
  static std::string kind(const YAML::Node& node) {
    switch (node.Type()) {
      case YAML::NodeType::Null:
        return "nothing";
      case YAML::NodeType::Scalar:
        return "the scalar " + detail::quoteForMessage(node.Scalar());
      case YAML::NodeType::Sequence:
        return "a list";
      case YAML::NodeType::Map:
        return "a map";
      default:
        return "an undefined value";
    }
  }

  [[noreturn]] void unknownKey(const std::string& key, const Where& at, const char* allowed) const {
    std::string hint;
    if (auto near = nearestKey(key, allowed); !near.empty()) hint = "; did you mean " + near + "?";
    fail(at, "unknown key " + detail::quoteForMessage(key) + " (expected one of: " + std::string(allowed) + ")" +
                 hint);
  }

  // The allowed key closest to a misspelt one (at most two edits away), or "".
  static std::string nearestKey(const std::string& key, std::string_view allowed) {
    std::string best;
    std::size_t bestDistance = 3;
    while (!allowed.empty()) {
      std::size_t end = allowed.find_first_of(", ");
      std::string_view word = allowed.substr(0, end);
      allowed.remove_prefix(end == std::string_view::npos ? allowed.size() : end + 1);
      if (word.empty() || key.size() > 64) continue;
      std::size_t d = editDistance(key, word);
      if (d < bestDistance) {
        bestDistance = d;
        best = std::string(word);
      }
    }
    return best;
  }

  static std::size_t editDistance(std::string_view a, std::string_view b) {
    auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      std::size_t diagonal = row[0];
      row[0] = i;
      for (std::size_t j = 1; j <= b.size(); ++j) {
        std::size_t above = row[j];
        // Case differences are free: "nodepolicy" is plainly "nodePolicy".
        std::size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
        row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
        diagonal = above;
      }
    }
    return row[b.size()];
  }

  // Calls f(key, value, where) for each entry of a map; nothing is a valid empty map. Keys
  // must be plain strings and unique (yaml-cpp itself keeps duplicates silently).
  template <class F>
  void forEachKey(const YAML::Node& map, const Where& at, F&& f) {
    if (map.IsNull()) return;
    if (!map.IsMap()) fail(at, "expected a map, got " + kind(map));
    std::set<std::string> seen;
    for (const auto& kv : map) {
      const YAML::Node& keyNode = kv.first;
      if (!keyNode.IsScalar()) fail({at.path, keyNode.Mark()}, "keys must be strings, got " + kind(keyNode));
      const std::string& key = keyNode.Scalar();
      Where child = at.child(key, keyNode.Mark());
      if (!seen.insert(key).second) fail(child, "duplicate key");
      f(key, kv.second, child);
    }
  }

  static bool isPlain(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    return tag == "?" || tag == "tag:yaml.org,2002:int" || tag == "tag:yaml.org,2002:float" ||
           tag == "tag:yaml.org,2002:bool";
  }

  const std::string& scalar(const YAML::Node& node, const Where& at, const std::string& expected) const {
    if (!node.IsScalar()) fail(at, "expected " + expected + ", got " + kind(node));
    return node.Scalar();
  }

  std::string string(const YAML::Node& node, const Where& at) const {
    const std::string& text = scalar(node, at, "a string");
    if (text.empty()) fail(at, "must not be empty");
    return text;
  }

  std::uint64_t unsignedInt(const YAML::Node& node, const Where& at, std::uint64_t min, std::uint64_t max) const {
    std::string expected = "an integer from " + std::to_string(min) + " to " + std::to_string(max);
    const std::string& text = scalar(node, at, expected);
    if (!isPlain(node)) fail(at, "expected " + expected + ", got the quoted string " + detail::quoteForMessage(text));
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    bool allDigits = !digits.empty() && end == digits.data() + digits.size();
    if (!allDigits || (ec != std::errc() && ec != std::errc::result_out_of_range) || digits.front() == '-') {
      fail(at, "expected " + expected + ", got " + detail::quoteForMessage(text));
    }
    if (ec == std::errc::result_out_of_range || value < min || value > max) {
      fail(at, "expected " + expected + ", got " + detail::quoteForMessage(text));
    }
    return value;
  }

  double positiveNumber(const YAML::Node& node, const Where& at) const {
    const char* expected = "a number greater than 0 (such as 1 or 1.5)";
    const std::string& text = scalar(node, at, expected);
    if (!isPlain(node)) {
      fail(at, std::string("expected ") + expected + ", got the quoted string " + detail::quoteForMessage(text));
    }
    std::string_view digits = text;
    if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
    double value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(value) ||
        value <= 0) {
      fail(at, std::string("expected ") + expected + ", got " + detail::quoteForMessage(text));
    }
    return value;
  }

  bool boolean(const YAML::Node& node, const Where& at) const {
    const std::string& text = scalar(node, at, "true or false");
    if (isPlain(node)) {
      if (text == "true" || text == "True" || text == "TRUE") return true;
      if (text == "false" || text == "False" || text == "FALSE") return false;
    }
    fail(at, "expected true or false, got " + detail::quoteForMessage(text));
  }

  // Whole seconds as <n>h, <n>m and <n>s parts in that order ("90s", "2m", "1h30m").
  std::chrono::seconds duration(const YAML::Node& node, const Where& at) const {
    const std::string& text = scalar(node, at, "a duration such as 90s, 2m or 1h30m");
    auto bad = [&]() {
      fail(at, "expected a duration of whole seconds such as 90s, 2m or 1h30m (units h, m, s), got " +
                   detail::quoteForMessage(text));
    };
    if (text.empty()) bad();
    std::int64_t total = 0;
    int lastUnit = 4;  // units must appear largest first, each at most once
    std::size_t i = 0;
    while (i < text.size()) {
      std::size_t start = i;
      std::int64_t n = 0;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
        if (n > 1'000'000'000) bad();
        n = n * 10 + (text[i] - '0');
        ++i;
      }
      if (i == start || i == text.size()) bad();
      int unit = text[i] == 'h' ? 3 : text[i] == 'm' ? 2 : text[i] == 's' ? 1 : 0;
      if (unit == 0 || unit >= lastUnit) bad();
      lastUnit = unit;
      total += n * (unit == 3 ? 3600 : unit == 2 ? 60 : 1);
      ++i;
    }
    if (total <= 0) fail(at, "must be longer than 0s");
    return std::chrono::seconds{total};
  }

  SchedulerConfig scheduler(const YAML::Node& node, const Where& at) {
    SchedulerConfig s;
    forEachKey(node, at, [&](const std::string& key, const YAML::Node& value, const Where& kat) {
      if (key == "nodePolicy") {
        auto p = parseNodePolicy(scalar(value, kat, "binpack or spread"));
        if (!p) fail(kat, "expected binpack or spread, got " + kind(value));
        s.nodePolicy = *p;
      } else if (key == "devicePolicy") {
        auto p = parseDevicePolicy(scalar(value, kat, "binpack, spread or topology"));
        if (!p) fail(kat, "expected binpack, spread or topology, got " + kind(value));
        s.devicePolicy = *p;
      } else if (key == "heartbeatTimeout") {
        s.heartbeatTimeout = duration(value, kat);
      } else {
        unknownKey(key, kat, "nodePolicy, devicePolicy, heartbeatTimeout");
      }
    });
    return s;
  }

  // Backend names become annotation keys (vgpu.io/devices-<name>) and library names
  // (libvgpu-backend-<name>.so), so they follow the DNS label rules both accept.
  void checkBackendName(const std::string& name, const Where& at) const {
    bool ok = !name.empty() && name.size() <= 55 && name.front() != '-' && name.back() != '-';
    for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
    if (!ok) {
      fail(at, "backend name " + detail::quoteForMessage(name) +
                   " must be 1-55 lower-case letters, digits or '-', not starting or ending with '-'");
    }
  }

  // An extended resource name: "<dns-subdomain>/<name>", as the apiserver requires.
  void checkResourceName(const std::string& text, const Where& at) const {
    auto slash = text.find('/');
    bool ok = slash != std::string::npos && slash > 0 && slash <= 253 && slash + 1 < text.size() &&
              text.size() - slash - 1 <= 63;
    if (ok) {
      std::string_view prefix(text.data(), slash);
      std::string_view name(text.data() + slash + 1);
      auto alnumLower = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
      auto alnum = [&](char c) { return alnumLower(c) || (c >= 'A' && c <= 'Z'); };
      ok = alnumLower(prefix.front()) && alnumLower(prefix.back()) && alnum(name.front()) && alnum(name.back());
      for (char c : prefix) ok = ok && (alnumLower(c) || c == '-' || c == '.');
      for (char c : name) ok = ok && (alnum(c) || c == '-' || c == '_' || c == '.');
    }
    if (!ok) {
      fail(at, "expected an extended resource name such as example.com/gpu (a DNS domain, '/', then up to 63 "
               "letters, digits, '-', '_' or '.'), got " +
                   detail::quoteForMessage(text));
    }
  }

  ResourceNamesConfig resources(const YAML::Node& node, const Where& at) {
    ResourceNamesConfig r;
    forEachKey(node, at, [&](const std::string& key, const YAML::Node& value, const Where& kat) {
      std::optional<std::string>* slot = key == "count"              ? &r.count
                                         : key == "memory"           ? &r.memory
                                         : key == "memoryPercentage" ? &r.memoryPercent
                                         : key == "cores"            ? &r.cores
                                         : key == "priority"         ? &r.priority
                                                                     : nullptr;
      if (slot == nullptr) unknownKey(key, kat, "count, memory, memoryPercentage, cores, priority");
      std::string name = string(value, kat);
      checkResourceName(name, kat);
      *slot = name;
      resourceMarks_[name].push_back(kat);
    });
    return r;
  }

  // One key of the settings a node may override; false if `key` is not one of them.
  bool setting(const std::string& key, const YAML::Node& value, const Where& at, BackendSettings& s) {
    constexpr auto kU32 = std::numeric_limits<std::uint32_t>::max();
    constexpr auto kU64 = std::numeric_limits<std::uint64_t>::max();
    if (key == "splitCount") {
      if (scalarIs(value, "0")) fail(at, "must be at least 1 (1 means the device is not shared)");
      s.splitCount = static_cast<std::uint32_t>(unsignedInt(value, at, 1, kU32));
    } else if (key == "memoryScaling") {
      s.memoryScaling = positiveNumber(value, at);
    } else if (key == "coreScaling") {
      s.coreScaling = positiveNumber(value, at);
    } else if (key == "memoryUnitMiB") {
      s.memoryUnitMiB = unsignedInt(value, at, 1, kU64);
    } else if (key == "defaultMemory") {
      s.defaultMemoryMiB = unsignedInt(value, at, 0, kU64);
    } else if (key == "defaultCores") {
      s.defaultCores = static_cast<std::uint32_t>(unsignedInt(value, at, 0, kU32));
    } else if (key == "defaultCount") {
      s.defaultCount = static_cast<std::uint32_t>(unsignedInt(value, at, 1, kU32));
    } else if (key == "frontEnd") {
      const std::string text = scalar(value, at, "devicePlugin or dra");
      s.frontEnd = parseFrontEnd(text);
      if (!s.frontEnd) fail(at, "expected devicePlugin or dra, got " + detail::quoteForMessage(text));
    } else if (key == "options") {
      forEachKey(value, at, [&](const std::string& name, const YAML::Node& v, const Where& oat) {
        // Kept as text: the backend owns the meaning (and the errors) of its options.
        s.options[name] = scalar(v, oat, "a scalar (options are passed to the backend as text)");
      });
    } else {
      return false;
    }
    return true;
  }

  static bool scalarIs(const YAML::Node& node, const char* text) { return node.IsScalar() && node.Scalar() == text; }

  BackendConfig backend(const std::string& name, const YAML::Node& node, const Where& at) {
    BackendConfig b;
    b.name = name;
    if (!node.IsMap() && !node.IsNull()) fail(at, "expected a map (the backend's settings), got " + kind(node));
    forEachKey(node, at, [&](const std::string& key, const YAML::Node& value, const Where& kat) {
      if (key == "enabled") {
        b.enabled = boolean(value, kat);
      } else if (key == "resources") {
        b.resources = resources(value, kat);
      } else if (!setting(key, value, kat, b.settings)) {
        unknownKey(key, kat,
                   "enabled, resources, splitCount, memoryScaling, coreScaling, memoryUnitMiB, defaultMemory, "
                   "defaultCores, defaultCount, frontEnd, options");
      }
    });
    return b;
  }

  std::vector<NodeOverride> nodes(const YAML::Node& node, const Where& at,
                                  std::vector<std::pair<Where, std::string>>& refs) {
    std::vector<NodeOverride> out;
    if (node.IsNull()) return out;
    if (!node.IsSequence()) fail(at, "expected a list of {name, backends}, got " + kind(node));
    std::set<std::string> names;
    for (std::size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& entry = node[i];
      Where eat = at.item(i, entry.Mark());
      if (!entry.IsMap()) fail(eat, "expected a map with keys name, backends; got " + kind(entry));
      NodeOverride n;
      forEachKey(entry, eat, [&](const std::string& key, const YAML::Node& value, const Where& kat) {
        if (key == "name") {
          n.name = string(value, kat);
          if (!names.insert(n.name).second) fail(kat, "duplicate node name " + detail::quoteForMessage(n.name));
        } else if (key == "backends") {
          forEachKey(value, kat, [&](const std::string& backend, const YAML::Node& section, const Where& bat) {
            refs.emplace_back(bat, backend);
            if (!section.IsMap() && !section.IsNull()) fail(bat, "expected a map of settings, got " + kind(section));
            BackendSettings s;
            forEachKey(section, bat, [&](const std::string& skey, const YAML::Node& v, const Where& sat) {
              if (!setting(skey, v, sat, s)) {
                unknownKey(skey, sat,
                           "splitCount, memoryScaling, coreScaling, memoryUnitMiB, defaultMemory, defaultCores, "
                           "defaultCount, frontEnd, options (enabled and resources are cluster-wide)");
              }
            });
            n.backends.emplace(backend, std::move(s));
          });
        } else {
          unknownKey(key, kat, "name, backends");
        }
      });
      if (n.name.empty()) fail(eat, "missing name (the Kubernetes node name)");
      out.push_back(std::move(n));
    }
    return out;
  }

  // The scheduler maps a resource name back to one backend and one meaning.
  void checkResourceNamesUnique() const {
    for (const auto& [name, wheres] : resourceMarks_) {
      if (wheres.size() > 1) {
        fail(wheres[1], "resource name " + detail::quoteForMessage(name) + " is already used by " + wheres[0].path);
      }
    }
  }

  std::string fileName_;
  std::map<std::string, std::vector<Where>> resourceMarks_;
};

// Counts a stream's documents from parser events, stopping at the first one whose root is
// null. YAML::LoadAll cannot be used: yaml-cpp 0.7 loops forever, allocating, on a stray
// ',' in block context (jbeder/yaml-cpp#1040; fixed upstream in LoadAll by stopping at
// the first empty root, which is what this does).
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override { depth_ = 0; nullRoot_ = false; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { nullRoot_ = nullRoot_ || depth_ == 0; }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++depth_;
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    ++depth_;
  }
  void OnMapEnd() override { --depth_; }

  static int count(const std::string& text) {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    int documents = 0;
    while (documents < 2 && parser.HandleNextDocument(counter)) {
      if (counter.nullRoot_) break;
      ++documents;
    }
    return documents;
  }

 private:
  int depth_ = 0;
  bool nullRoot_ = false;
};

}  // namespace

Result<DeviceConfig> parseDeviceConfig(const std::string& yamlText, const std::string& fileName) {
  try {
    int documents = DocumentCounter::count(yamlText);
    if (documents == 0) {
      return makeError(fileName + ": holds no settings (the file is empty or its document is null); expected a "
                                  "map with keys version, scheduler, backends, nodes");
    }
    if (documents > 1) return makeError(fileName + ": holds more than one YAML document; expected exactly one");
    YAML::Node root = YAML::Load(yamlText);
    return Parser(fileName).document(root);
  } catch (const ConfigError& e) {
    return makeError(e.message);
  } catch (const YAML::Exception& e) {
    std::string where = e.mark.is_null() ? std::string()
                                         : ":" + std::to_string(e.mark.line + 1) + ":" +
                                               std::to_string(e.mark.column + 1);
    return makeError(fileName + where + ": not valid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return makeError(fileName + ": could not be parsed: " + e.what());
  }
}

Result<DeviceConfig> loadDeviceConfig(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return makeError("device config " + path.string() + ": " +
                     (ec ? ec.message() : std::string("not found or not a regular file")) +
                     " (check the ConfigMap mount and the --config flag)");
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return makeError("device config " + path.string() + ": could not be read");
  return parseDeviceConfig(text.str(), path.string());
}

}  // namespace vgpu
