#include "fake_rocm_state.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace vgpu::fakerocm {
namespace {

bool parseBdf(const std::string& text, std::uint64_t& out) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return false;
  out = (std::uint64_t{domain} << 32) | (std::uint64_t{bus} << 8) | (std::uint64_t{dev & 0x1f} << 3) | (fn & 0x7);
  return true;
}

bool parseDevice(std::istringstream& in, FakeDevice& d) {
  std::string token;
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq == std::string::npos) return false;
    const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
    try {
      if (key == "serial") d.serial = value;
      else if (key == "pciId") d.pciId = static_cast<std::uint16_t>(std::stoul(value, nullptr, 16));
      else if (key == "name") d.name = value;
      else if (key == "vramMiB") d.vramMiB = std::stoull(value);
      else if (key == "cus") d.cus = std::stoi(value);
      else if (key == "numa") d.numa = static_cast<std::uint32_t>(std::stoul(value));
      else if (key == "renderMinor") d.renderMinor = static_cast<std::uint32_t>(std::stoul(value));
      else if (key == "uniqueId") d.uniqueId = std::stoull(value, nullptr, 16);
      else if (key == "state") d.lost = value == "lost";
      else if (key == "vramUsedMiB") d.vramUsedMiB = std::stoull(value);
      else if (key == "busy") d.busy = static_cast<std::uint32_t>(std::stoul(value));
      else if (key == "bdf") {
        std::uint64_t b = 0;
        if (!parseBdf(value, b)) return false;
        d.bdfid = b;
      } else return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

}  // namespace

FakeConfig loadConfig() {
  FakeConfig c;
  const char* path = std::getenv("VGPU_FAKE_ROCM_CONFIG");
  if (path == nullptr || *path == '\0') return c;
  std::ifstream in(path);
  if (!in) return c;
  c.stateFile = std::string(path) + ".vdevs";
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind) || kind[0] == '#') continue;
    if (kind == "device") {
      FakeDevice d;
      if (!parseDevice(words, d)) return FakeConfig{};
      c.devices.push_back(d);
    } else if (kind == "hydmi") {
      std::string token;
      while (words >> token) {
        if (token.rfind("maxVdevs=", 0) == 0) c.maxVdevs = std::atoi(token.c_str() + 9);
        else if (token.rfind("stateFile=", 0) == 0) c.stateFile = token.substr(10);
        else if (token.rfind("vdevDir=", 0) == 0) c.vdevDir = token.substr(8);
        else return FakeConfig{};
      }
    } else if (kind == "vdevUsage") {
      int id = -1;
      FakeVdevUsage u;
      std::string token;
      while (words >> token) {
        if (token.rfind("id=", 0) == 0) id = std::atoi(token.c_str() + 3);
        else if (token.rfind("usedMiB=", 0) == 0) u.usedMiB = std::strtoull(token.c_str() + 8, nullptr, 10);
        else if (token.rfind("busy=", 0) == 0) u.busy = std::atoi(token.c_str() + 5);
        else return FakeConfig{};
      }
      if (id < 0) return FakeConfig{};
      c.vdevUsage[id] = u;
    } else if (kind == "fail") {
      std::string fn;
      int status = 0;
      if (!(words >> fn >> status)) return FakeConfig{};
      c.failures[fn] = status;
    } else {
      return FakeConfig{};
    }
  }
  c.valid = true;
  return c;
}

std::optional<int> failureFor(const FakeConfig& config, const char* function) {
  auto it = config.failures.find(function);
  if (it == config.failures.end()) return std::nullopt;
  return it->second;
}

std::vector<FakeVdev> loadVdevs(const FakeConfig& config) {
  std::vector<FakeVdev> out;
  std::ifstream in(config.stateFile);
  FakeVdev v;
  std::string word;
  while (in >> word >> v.id >> v.device >> v.cus >> v.memMiB >> v.pipe >> v.maskLow >> v.maskHigh)
    if (word == "vdev") out.push_back(v);
  return out;
}

bool saveVdevs(const FakeConfig& config, const std::vector<FakeVdev>& vdevs) {
  std::ofstream out(config.stateFile, std::ios::trunc);
  for (const auto& v : vdevs)
    out << "vdev " << v.id << ' ' << v.device << ' ' << v.cus << ' ' << v.memMiB << ' ' << v.pipe << ' ' << v.maskLow
        << ' ' << v.maskHigh << '\n';
  return static_cast<bool>(out);
}

}  // namespace vgpu::fakerocm
