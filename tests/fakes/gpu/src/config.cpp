// Parser for the fake GPU machine description (format in ../README.md).

#include "config.h"

#include "mig_profiles.h"

#include "vgpu/cuda/driver_api.h"
#include "vgpu/cuda/nvml_api.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

namespace vgpu::fakegpu {
namespace {

struct NamedCode {
  int code;
  const char* name;
};

#define X(code, text) {code, #code},
constexpr NamedCode kCuNames[] = {
#include "cu_result_names.inc"
};
constexpr NamedCode kNvmlNames[] = {
#include "nvml_return_names.inc"
};
#undef X

// The tables name every code driver_api.h / nvml_api.h declare: each name compiles only if
// declared, and the counts match.
#define VGPU_COUNT(name, value) +1
static_assert(std::size(kCuNames) == 0 VGPU_CU_ALL_RESULTS(VGPU_COUNT), "cu_result_names.inc misses a CUresult");
static_assert(std::size(kNvmlNames) == 0 VGPU_NVML_ALL_RETURNS(VGPU_COUNT), "nvml_return_names.inc misses a code");
#undef VGPU_COUNT

int codeFromName(const std::string& s, const NamedCode* table, size_t n, const std::string& prefix,
                 const std::string& errPrefix) {
  if (s.empty()) return -1;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v < 0 || v > 100000) return -1;
    return static_cast<int>(v);
  }
  for (size_t i = 0; i < n; ++i) {
    std::string full = table[i].name;
    if (s == full) return table[i].code;
    if (full.rfind(errPrefix, 0) == 0 && s == full.substr(errPrefix.size())) return table[i].code;
    if (full.rfind(prefix, 0) == 0 && s == full.substr(prefix.size())) return table[i].code;
  }
  return -1;
}

// Splits a line into words; a double-quoted value may hold spaces (key="a b").
bool splitWords(const std::string& line, std::vector<std::string>& out, std::string& why) {
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i >= line.size()) break;
    std::string word;
    bool quoted = false;
    while (i < line.size() && (quoted || !std::isspace(static_cast<unsigned char>(line[i])))) {
      char c = line[i++];
      if (c == '"') {
        quoted = !quoted;
        continue;
      }
      word += c;
    }
    if (quoted) {
      why = "unterminated quote";
      return false;
    }
    out.push_back(word);
  }
  return true;
}

bool parseUnsigned(const std::string& s, unsigned long long max, unsigned long long& out) {
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v > max) return false;
  out = v;
  return true;
}

bool parseUuid(const std::string& s, unsigned char bytes[16]) {
  // GPU-8-4-4-4-12 hex digits.
  if (s.size() != 40 || s.rfind("GPU-", 0) != 0) return false;
  static constexpr int kDash[] = {8, 13, 18, 23};
  std::string hex;
  for (size_t i = 4; i < s.size(); ++i) {
    int pos = static_cast<int>(i - 4);
    bool dash = false;
    for (int d : kDash) dash = dash || pos == d;
    if (dash) {
      if (s[i] != '-') return false;
    } else {
      if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
      hex += s[i];
    }
  }
  for (int b = 0; b < 16; ++b) bytes[b] = static_cast<unsigned char>(std::stoul(hex.substr(b * 2, 2), nullptr, 16));
  return true;
}

bool parsePciBusId(const std::string& s, GpuSpec& g) {
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  char tail = 0;
  // Accept the NVML form (8-digit domain) and the short sysfs form (4-digit domain).
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) return false;
  size_t colon = s.find(':');
  if (colon != 4 && colon != 8) return false;
  if (bus > 0xff || dev > 0x1f || fn > 7) return false;
  g.pciDomain = dom;
  g.pciBus = bus;
  g.pciDevice = dev;
  g.pciFunction = fn;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
  g.pciBusId = buf;
  return true;
}

GpuSpec defaultGpu(unsigned index) {
  GpuSpec g;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-fa4e0000-0000-4000-8000-%012x", index);
  g.uuid = uuid;
  parseUuid(g.uuid, g.uuidBytes);
  g.name = "NVIDIA Fake GPU";
  g.memoryMib = 16384;
  g.smCount = 80;
  g.ccMajor = 8;
  g.ccMinor = 0;
  char pci[32];
  std::snprintf(pci, sizeof pci, "00000000:%02X:00.0", 0x17 + index);
  parsePciBusId(pci, g);
  g.minor = index;
  g.numa = -1;
  return g;
}

std::string lineError(const std::string& origin, int line, const std::string& why) {
  return "vgpu fake GPU: " + origin + ":" + std::to_string(line) + ": " + why;
}

}  // namespace

int nvmlReturnFromName(const std::string& name) {
  return codeFromName(name, kNvmlNames, std::size(kNvmlNames), "NVML_", "NVML_ERROR_");
}

int cuResultFromName(const std::string& name) {
  return codeFromName(name, kCuNames, std::size(kCuNames), "CUDA_", "CUDA_ERROR_");
}

MachineConfig parseMachineConfig(const std::string& text, const std::string& origin) {
  MachineConfig cfg;
  cfg.source = origin;
  std::istringstream in(text);
  std::string raw;
  int lineNo = 0;
  std::set<std::string> uuids;
  auto fail = [&](const std::string& why) {
    cfg.error = lineError(origin, lineNo, why);
    cfg.gpus.clear();
    cfg.xids.clear();
    return cfg;
  };
  struct PendingDeviceError {
    unsigned gpu;
    int code;
    int line;
  };
  std::vector<PendingDeviceError> deviceErrors;
  std::vector<std::pair<XidSpec, int>> xidLines;
  struct PendingLink {
    unsigned gpu;
    int peer;  // -1: an NVSwitch
    unsigned links;
    int line;
  };
  std::vector<PendingLink> linkLines;
  std::vector<std::pair<PciePathSpec, int>> pcieLines;
  while (std::getline(in, raw)) {
    ++lineNo;
    std::string line = raw;
    bool inQuote = false;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '"') inQuote = !inQuote;
      if (line[i] == '#' && !inQuote) {
        line.resize(i);
        break;
      }
    }
    std::vector<std::string> words;
    std::string why;
    if (!splitWords(line, words, why)) return fail(why);
    if (words.empty()) continue;
    const std::string kind = words[0];
    std::map<std::string, std::string> kv;
    for (size_t i = 1; i < words.size(); ++i) {
      size_t eq = words[i].find('=');
      if (eq == std::string::npos || eq == 0) return fail("expected key=value, got '" + words[i] + "'");
      std::string key = words[i].substr(0, eq);
      if (kv.count(key)) return fail("key '" + key + "' given twice");
      kv[key] = words[i].substr(eq + 1);
    }
    auto take = [&](const char* key) -> std::string* {
      auto it = kv.find(key);
      return it == kv.end() ? nullptr : &it->second;
    };
    auto unknownKeys = [&](std::initializer_list<const char*> known) -> std::string {
      for (auto& [k, v] : kv) {
        bool ok = false;
        for (const char* n : known) ok = ok || k == n;
        if (!ok) return k;
      }
      return {};
    };
    if (kind == "gpu") {
      std::string bad = unknownKeys(
          {"uuid", "name", "memory_mib", "sm_count", "cc", "pci_bus_id", "minor", "numa", "mig", "context_mib",
           "pci_device_id", "mig_profiles"});
      if (!bad.empty()) return fail("unknown gpu key '" + bad + "'");
      unsigned index = static_cast<unsigned>(cfg.gpus.size());
      if (index >= 16) return fail("more than 16 gpu lines");
      GpuSpec g = defaultGpu(index);
      unsigned long long v = 0;
      if (auto* s = take("uuid")) {
        if (!parseUuid(*s, g.uuidBytes)) return fail("uuid '" + *s + "' is not GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
        g.uuid = *s;
      }
      if (!uuids.insert(g.uuid).second) return fail("uuid " + g.uuid + " used twice");
      if (auto* s = take("name")) {
        if (s->empty() || s->size() >= 96) return fail("name must be 1 to 95 characters");
        g.name = *s;
      }
      if (auto* s = take("memory_mib")) {
        if (!parseUnsigned(*s, 1ull << 24, v) || v == 0) return fail("memory_mib '" + *s + "' is not a number in 1..16777216");
        g.memoryMib = v;
      }
      if (auto* s = take("sm_count")) {
        if (!parseUnsigned(*s, 100000, v) || v == 0) return fail("sm_count '" + *s + "' is not a positive number");
        g.smCount = static_cast<int>(v);
      }
      if (auto* s = take("cc")) {
        unsigned long long maj = 0, min = 0;
        size_t dot = s->find('.');
        if (dot == std::string::npos || !parseUnsigned(s->substr(0, dot), 99, maj) ||
            !parseUnsigned(s->substr(dot + 1), 9, min) || maj == 0)
          return fail("cc '" + *s + "' is not major.minor (e.g. 9.0)");
        g.ccMajor = static_cast<int>(maj);
        g.ccMinor = static_cast<int>(min);
      }
      if (auto* s = take("pci_bus_id")) {
        if (!parsePciBusId(*s, g)) return fail("pci_bus_id '" + *s + "' is not DDDDDDDD:BB:DD.F");
      }
      if (auto* s = take("pci_device_id")) {
        char* end = nullptr;
        unsigned long id = std::strtoul(s->c_str(), &end, 16);
        if (s->empty() || *end != '\0' || id > 0xffffffffUL) return fail("pci_device_id '" + *s + "' is not hex");
        g.pciDeviceId = static_cast<unsigned>(id);
      }
      if (auto* s = take("minor")) {
        if (!parseUnsigned(*s, 255, v)) return fail("minor '" + *s + "' is not a number in 0..255");
        g.minor = static_cast<unsigned>(v);
      }
      if (auto* s = take("numa")) {
        if (*s == "-1") {
          g.numa = -1;
        } else if (!parseUnsigned(*s, 1023, v)) {
          return fail("numa '" + *s + "' is not -1 or a node number");
        } else {
          g.numa = static_cast<int>(v);
        }
      }
      if (auto* s = take("mig")) {
        if (*s != "on" && *s != "off") return fail("mig '" + *s + "' is not on/off");
        g.mig = *s == "on";
      }
      if (auto* s = take("mig_profiles")) {
        if (findMigModel(*s) == nullptr) return fail("mig_profiles '" + *s + "' is not one of " + migModelKeys());
        g.migModel = *s;
      }
      if (auto* s = take("context_mib")) {
        if (!parseUnsigned(*s, 1ull << 20, v)) return fail("context_mib '" + *s + "' is not a number");
        g.contextMib = v;
      }
      cfg.gpus.push_back(g);
    } else if (kind == "nvml_init_error" || kind == "cuinit_error") {
      std::string bad = unknownKeys({"code"});
      if (!bad.empty()) return fail("unknown " + kind + " key '" + bad + "'");
      auto* s = take("code");
      if (!s) return fail(kind + " needs code=<name or number>");
      bool nvml = kind == "nvml_init_error";
      int code = nvml ? nvmlReturnFromName(*s) : cuResultFromName(*s);
      if (code <= 0) return fail("code '" + *s + "' is not a known " + (nvml ? "nvmlReturn_t" : "CUresult") + " error");
      (nvml ? cfg.nvmlInitError : cfg.cuInitError) = code;
    } else if (kind == "nvml_device_error") {
      std::string bad = unknownKeys({"gpu", "code"});
      if (!bad.empty()) return fail("unknown nvml_device_error key '" + bad + "'");
      auto* g = take("gpu");
      auto* s = take("code");
      unsigned long long idx = 0;
      if (!g || !parseUnsigned(*g, 15, idx)) return fail("nvml_device_error needs gpu=<index>");
      if (!s) return fail("nvml_device_error needs code=<name or number>");
      int code = nvmlReturnFromName(*s);
      if (code <= 0) return fail("code '" + *s + "' is not a known nvmlReturn_t error");
      deviceErrors.push_back({static_cast<unsigned>(idx), code, lineNo});
    } else if (kind == "xid") {
      std::string bad = unknownKeys({"gpu", "code", "delay_ms"});
      if (!bad.empty()) return fail("unknown xid key '" + bad + "'");
      XidSpec x;
      unsigned long long v = 0;
      auto* g = take("gpu");
      if (!g || !parseUnsigned(*g, 15, v)) return fail("xid needs gpu=<index>");
      x.gpu = static_cast<unsigned>(v);
      auto* c = take("code");
      if (!c || !parseUnsigned(*c, 1000000, v)) return fail("xid needs code=<number>");
      x.code = v;
      if (auto* d = take("delay_ms")) {
        if (!parseUnsigned(*d, 3600000, v)) return fail("delay_ms '" + *d + "' is not a number of milliseconds");
        x.delayMs = static_cast<unsigned>(v);
      }
      xidLines.push_back({x, lineNo});
    } else if (kind == "nvlink" || kind == "nvswitch") {
      const bool bridge = kind == "nvlink";
      std::string bad = bridge ? unknownKeys({"gpu", "peer", "links"}) : unknownKeys({"gpu", "links"});
      if (!bad.empty()) return fail("unknown " + kind + " key '" + bad + "'");
      unsigned long long gpu = 0, peer = 0, links = 0;
      auto* g = take("gpu");
      auto* p = take("peer");
      auto* l = take("links");
      if (!g || !parseUnsigned(*g, 15, gpu)) return fail(kind + " needs gpu=<index>");
      if (bridge && (!p || !parseUnsigned(*p, 15, peer) || peer == gpu))
        return fail("nvlink needs peer=<index> of another gpu");
      if (!l || !parseUnsigned(*l, NVML_NVLINK_MAX_LINKS, links) || links == 0)
        return fail(kind + " needs links=<1.." + std::to_string(NVML_NVLINK_MAX_LINKS) + ">");
      linkLines.push_back({static_cast<unsigned>(gpu), bridge ? static_cast<int>(peer) : -1,
                           static_cast<unsigned>(links), lineNo});
    } else if (kind == "pcie") {
      std::string bad = unknownKeys({"gpu", "peer", "level"});
      if (!bad.empty()) return fail("unknown pcie key '" + bad + "'");
      unsigned long long gpu = 0, peer = 0;
      auto* g = take("gpu");
      auto* p = take("peer");
      auto* l = take("level");
      if (!g || !parseUnsigned(*g, 15, gpu) || !p || !parseUnsigned(*p, 15, peer) || peer == gpu)
        return fail("pcie needs gpu=<index> peer=<index of another gpu>");
      static const std::map<std::string, int> kLevels{
          {"internal", NVML_TOPOLOGY_INTERNAL},     {"single", NVML_TOPOLOGY_SINGLE},
          {"multiple", NVML_TOPOLOGY_MULTIPLE},     {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
          {"node", NVML_TOPOLOGY_NODE},             {"system", NVML_TOPOLOGY_SYSTEM}};
      auto level = l ? kLevels.find(*l) : kLevels.end();
      if (level == kLevels.end())
        return fail("pcie needs level=internal|single|multiple|hostbridge|node|system");
      pcieLines.push_back({{static_cast<unsigned>(gpu), static_cast<unsigned>(peer), level->second}, lineNo});
    } else {
      return fail("unknown line kind '" + kind +
                  "' (expected gpu, nvml_init_error, cuinit_error, nvml_device_error, xid, nvlink, nvswitch, pcie)");
    }
  }
  for (auto& e : deviceErrors) {
    if (e.gpu >= cfg.gpus.size()) {
      lineNo = e.line;
      return fail("nvml_device_error names gpu " + std::to_string(e.gpu) + " but only " +
                  std::to_string(cfg.gpus.size()) + " gpu lines exist");
    }
    cfg.gpus[e.gpu].nvmlError = e.code;
  }
  for (auto& [x, line] : xidLines) {
    if (x.gpu >= cfg.gpus.size()) {
      lineNo = line;
      return fail("xid names gpu " + std::to_string(x.gpu) + " but only " + std::to_string(cfg.gpus.size()) +
                  " gpu lines exist");
    }
    cfg.xids.push_back(x);
  }
  for (const auto& k : linkLines) {
    lineNo = k.line;
    for (int end : {static_cast<int>(k.gpu), k.peer}) {
      if (end < 0) continue;
      if (static_cast<std::size_t>(end) >= cfg.gpus.size())
        return fail("the line names gpu " + std::to_string(end) + " but only " + std::to_string(cfg.gpus.size()) +
                    " gpu lines exist");
      auto& peers = cfg.gpus[static_cast<std::size_t>(end)].nvlinkPeers;
      if (peers.size() + k.links > NVML_NVLINK_MAX_LINKS)
        return fail("gpu " + std::to_string(end) + " would have more than " + std::to_string(NVML_NVLINK_MAX_LINKS) +
                    " NVLinks");
      // A bridge is seen from both ends.
      const int far = end == k.peer ? static_cast<int>(k.gpu) : k.peer;
      peers.insert(peers.end(), k.links, far);
    }
  }
  for (const auto& [path, line] : pcieLines) {
    lineNo = line;
    if (path.gpu >= cfg.gpus.size() || path.peer >= cfg.gpus.size())
      return fail("pcie names a gpu beyond the " + std::to_string(cfg.gpus.size()) + " gpu lines");
    cfg.pciePaths.push_back(path);
  }
  return cfg;
}

MachineConfig loadMachineConfig() {
  const char* path = std::getenv("VGPU_FAKE_GPU_CONFIG");
  if (path == nullptr || *path == '\0') {
    MachineConfig cfg;
    cfg.source = "(default)";
    cfg.gpus.push_back(defaultGpu(0));
    return cfg;
  }
  std::ifstream f(path);
  if (!f) {
    MachineConfig cfg;
    cfg.source = path;
    cfg.error = std::string("vgpu fake GPU: cannot read VGPU_FAKE_GPU_CONFIG file ") + path;
    return cfg;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parseMachineConfig(ss.str(), path);
}

}  // namespace vgpu::fakegpu
