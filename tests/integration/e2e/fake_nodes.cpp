#include "fake_nodes.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace vgpu::e2e {
namespace fs = std::filesystem;

std::string fakeGpuMachine(const std::vector<FakeGpu>& gpus) {
  std::string text = "# written by the e2e harness\n";
  for (const auto& g : gpus)
    text += "gpu uuid=" + g.uuid + " name=\"" + g.model + "\" memory_mib=" + std::to_string(g.memoryMiB) + "\n";
  return text;
}

Status writeFakeMluNode(const fs::path& root, const std::vector<FakeMlu>& mlus) {
  if (mlus.empty()) return writeText(root / "cndev.conf", "option noDriver=1\n");
  // The card's device node, which the backend requires on the host (under devRoot), and
  // where the fake driver makes each sMLU instance's node.
  const fs::path dev = root / "dev-mlu";
  std::string text = "option devRoot=" + dev.string() + "\n";
  for (size_t i = 0; i < mlus.size(); ++i) {
    const auto& m = mlus[i];
    if (auto s = writeText(dev / ("cambricon_dev" + std::to_string(i)), ""); !s.ok()) return s;
    text += "card uuid=" + m.uuid + " name=" + m.model + " memoryMB=" + std::to_string(m.memoryMiB) +
            " numa=0 health=1 smlu=" + (m.smlu ? "on" : "off") + "\n";
  }
  return writeText(root / "cndev.conf", text);
}

Status writeFakeNpuNode(const fs::path& root, const std::vector<FakeNpu>& npus) {
  const fs::path dev = root / "dev-npu";
  std::string text = "option devRoot=" + dev.string() + "\n";
  for (const char* name : {"davinci_manager", "devmm_svm", "hisi_hdc"})
    if (auto s = writeText(dev / name, ""); !s.ok()) return s;
  for (size_t i = 0; i < npus.size(); ++i) {
    const auto& n = npus[i];
    const std::string id = std::to_string(i);
    if (auto s = writeText(dev / ("davinci" + id), ""); !s.ok()) return s;
    text += "chip card=0 device=" + id + " logic=" + id + " phy=" + id + " name=" + n.chip +
            " aicores=" + std::to_string(n.aiCores) + " memoryMB=" + std::to_string(n.memoryMiB) + " die=" + n.die +
            (n.chip.rfind("310P", 0) == 0 ? " hbm=0" : "") + "\n";
  }
  return writeText(root / "dcmi.conf", text);
}

Status writeFakeAmdNode(const fs::path& root, const std::vector<FakeAmdGpu>& gpus) {
  const fs::path dev = root / "dev-amd";
  std::string text;
  if (auto s = writeText(dev / "kfd", ""); !s.ok()) return s;
  int minor = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const auto& g = gpus[i];
    for (unsigned p = 0; p < g.partitions; ++p, ++minor) {
      for (const std::string& node : {"dri/renderD" + std::to_string(128 + minor), "dri/card" + std::to_string(minor)})
        if (auto s = writeText(dev / node, ""); !s.ok()) return s;
      text += "gpu uuid=" + g.uuid + (g.partitions > 1 ? "-" + std::to_string(p) : "") + " bdf=" +
              std::to_string((i + 1) << 8) + " partition=" + std::to_string(p) + " compute=" + g.computePartition +
              " memory=NPS1 vramMiB=" + std::to_string(g.memoryMiB / g.partitions) +
              " render=" + std::to_string(128 + minor) + " card=" + std::to_string(minor) + "\n";
    }
  }
  return writeText(root / "amdsmi.conf", text);
}

std::vector<std::string> fakeCndevState(const fs::path& root, const std::string& kind) {
  std::vector<std::string> out;
  std::istringstream lines(readText(root / "cndev.conf.state"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(kind + " ", 0) == 0) out.push_back(line);
  return out;
}

std::string readText(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status writeText(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush()) return makeError("cannot write " + path.string());
  return {};
}

namespace {

std::string hex2(int v) {
  char b[8];
  std::snprintf(b, sizeof b, "%02x", v);
  return b;
}

}  // namespace

Status writeFakeDcuNode(const fs::path& root, const std::vector<FakeDcu>& dcus) {
  const fs::path sys = root / "sys", dev = root / "dev";
  std::error_code ec;
  fs::create_directories(sys / "class" / "drm", ec);
  fs::create_directories(dev / "dri", ec);
  if (ec) return makeError("cannot create " + sys.string() + ": " + ec.message());
  std::string conf = "# written by the e2e harness\n";
  for (size_t i = 0; i < dcus.size(); ++i) {
    const auto& d = dcus[i];
    const int index = static_cast<int>(i);
    const std::string bdf = "0000:" + hex2(0x10 + 0x10 * index) + ":00.0";
    const int render = 128 + index;
    // What the Hygon backend reads to tie a DCU to its /dev/dri nodes: the PCI vendor and
    // the drm class links, as sysfs has them.
    const fs::path pci = sys / "devices" / "pci0000:00" / bdf;
    if (auto s = writeText(pci / "vendor", "0x1d94\n"); !s.ok()) return s;
    for (const std::string& n : {"card" + std::to_string(index), "renderD" + std::to_string(render)}) {
      fs::create_directories(sys / "class" / "drm" / n, ec);
      fs::create_directory_symlink(fs::path("../../../devices/pci0000:00") / bdf, sys / "class" / "drm" / n / "device",
                                   ec);
      if (ec) return makeError("cannot link " + n + ": " + ec.message());
      if (auto s = writeText(dev / "dri" / n, ""); !s.ok()) return s;
    }
    conf += "device serial=" + d.serial + " pciId=" + d.pciId + " vramMiB=" + std::to_string(d.memoryMiB) +
            " cus=" + std::to_string(d.computeUnits) + " numa=0 bdf=" + bdf + " renderMinor=" + std::to_string(render) +
            "\n";
  }
  if (!dcus.empty()) {
    if (auto s = writeText(dev / "kfd", ""); !s.ok()) return s;
    if (auto s = writeText(dev / "mkfd", ""); !s.ok()) return s;
  }
  return writeText(root / "rocm.conf", conf);
}

}  // namespace vgpu::e2e
