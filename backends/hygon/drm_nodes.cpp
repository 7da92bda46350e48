#include "drm_nodes.h"

#include <algorithm>
#include <cctype>
#include <fstream>

#include "device_table.h"

namespace vgpu::hygon {
namespace fs = std::filesystem;
namespace {

std::string firstLine(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

bool isHygon(const fs::path& sysfsRoot, const std::string& entry) {
  std::string vendor = firstLine(sysfsRoot / "class" / "drm" / entry / "device" / "vendor");
  std::transform(vendor.begin(), vendor.end(), vendor.begin(), [](unsigned char c) { return std::tolower(c); });
  return vendor == kHygonPciVendor;
}

fs::path pciDeviceOf(const fs::path& sysfsRoot, const std::string& entry) {
  std::error_code ec;
  fs::path p = fs::canonical(sysfsRoot / "class" / "drm" / entry / "device", ec);
  return ec ? fs::path() : p;
}

bool isCard(const std::string& name) {
  if (name.size() <= 4 || name.compare(0, 4, "card") != 0) return false;
  return std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); });
}

bool isRender(const std::string& name) { return name.size() > 7 && name.compare(0, 7, "renderD") == 0; }

}  // namespace

bool naturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      std::string_view na(a.data() + i, ei - i), nb(b.data() + j, ej - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> hygonDrmEntries(const fs::path& sysfsRoot, const fs::path& devRoot) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(devRoot / "dri", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if ((isCard(name) || isRender(name)) && isHygon(sysfsRoot, name)) out.push_back(name);
  }
  std::sort(out.begin(), out.end(), naturalLess);
  return out;
}

Result<DrmNodes> findDrmNodes(const fs::path& sysfsRoot, const fs::path& devRoot, int renderMinor, int deviceIndex) {
  const fs::path dri = devRoot / "dri";
  std::error_code ec;
  if (renderMinor < 0) {
    std::vector<std::string> cards, renders;
    for (const auto& e : hygonDrmEntries(sysfsRoot, devRoot)) (isCard(e) ? cards : renders).push_back(e);
    const auto i = static_cast<size_t>(deviceIndex);
    if (deviceIndex < 0 || i >= cards.size() || i >= renders.size())
      return makeError("DCU " + std::to_string(deviceIndex) + ": " + dri.string() + " has " +
                       std::to_string(cards.size()) + " card and " + std::to_string(renders.size()) +
                       " render nodes of vendor " + std::string(kHygonPciVendor) + ", too few for this device");
    return DrmNodes{cards[i], renders[i]};
  }

  DrmNodes nodes;
  nodes.render = "renderD" + std::to_string(renderMinor);
  if (!fs::exists(dri / nodes.render, ec))
    return makeError("render node " + (dri / nodes.render).string() + " does not exist");
  const fs::path pci = pciDeviceOf(sysfsRoot, nodes.render);
  if (pci.empty())
    return makeError("no PCI device for " + nodes.render + " under " + (sysfsRoot / "class" / "drm").string());
  std::vector<std::string> candidates;
  for (fs::directory_iterator it(sysfsRoot / "class" / "drm", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (isCard(name) && pciDeviceOf(sysfsRoot, name) == pci) candidates.push_back(name);
  }
  std::sort(candidates.begin(), candidates.end(), naturalLess);
  if (candidates.empty())
    return makeError("no card node shares the PCI device " + pci.filename().string() + " of " + nodes.render + " in " +
                     (sysfsRoot / "class" / "drm").string());
  nodes.card = candidates.front();
  if (!fs::exists(dri / nodes.card, ec)) return makeError("card node " + (dri / nodes.card).string() + " does not exist");
  return nodes;
}

}  // namespace vgpu::hygon
