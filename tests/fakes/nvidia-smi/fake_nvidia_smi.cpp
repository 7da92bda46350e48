// A fake `nvidia-smi` that answers `-q -x` with real-shaped XML (DTD v12), for tests on
// machines without a GPU. Where the GPUs come from (see README.md):
//   VGPU_FAKE_NVIDIA_SMI_XML=<file>  print that file as it is (bad XML, missing fields...);
//   VGPU_FAKE_GPU_CONFIG=<file>      the fake NVML's machine description (gpu lines), so both
//                                    views of one machine agree; nvml_init_error makes it fail
//                                    as the real tool does, nvml_device_error blanks that GPU;
//   neither                          the fake NVML's one default GPU.
// VGPU_FAKE_NVIDIA_SMI_DELAY_MS=<n> sleeps first (for timeouts).
// `topo -m` prints the link matrix of the config's nvlink, nvswitch and pcie lines.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Gpu {
  std::string uuid, name = "NVIDIA Fake GPU", pciBusId;
  unsigned long long memoryMib = 16384;
  int minor = 0;
  std::string cc = "8.0";
  bool mig = false;
  bool broken = false;
  int smCount = 80;
  int numa = -1;
  std::map<int, int> nvlinks;  // peer GPU -> NVLinks bridging them
  int nvswitchLinks = 0;
};

/// `topo -m`'s word for the pair (a, b), from the same lines the fake NVML reads.
std::string topoCell(const std::vector<Gpu>& gpus, const std::map<std::pair<int, int>, std::string>& pcie, int a, int b) {
  if (a == b) return " X ";
  const Gpu& ga = gpus[static_cast<size_t>(a)];
  const Gpu& gb = gpus[static_cast<size_t>(b)];
  if (auto it = ga.nvlinks.find(b); it != ga.nvlinks.end()) return "NV" + std::to_string(it->second);
  if (ga.nvswitchLinks > 0 && gb.nvswitchLinks > 0) return "NV" + std::to_string(std::min(ga.nvswitchLinks, gb.nvswitchLinks));
  if (auto it = pcie.find({std::min(a, b), std::max(a, b)}); it != pcie.end()) {
    static const std::map<std::string, std::string> kWords{{"internal", "PIX"}, {"single", "PIX"}, {"multiple", "PXB"},
                                                           {"hostbridge", "PHB"}, {"node", "NODE"}, {"system", "SYS"}};
    auto w = kWords.find(it->second);
    if (w != kWords.end()) return w->second;
  }
  return ga.numa == gb.numa ? "NODE" : "SYS";
}

/// The matrix as the real tool lays it out (tabs, an underlined header, the legend).
void printTopology(const std::vector<Gpu>& gpus, const std::map<std::pair<int, int>, std::string>& pcie) {
  std::cout << "\t\x1b[4m";
  for (size_t i = 0; i < gpus.size(); ++i) std::cout << "GPU" << i << "\t";
  std::cout << "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n";
  for (size_t a = 0; a < gpus.size(); ++a) {
    std::cout << "GPU" << a << "\t";
    for (size_t b = 0; b < gpus.size(); ++b) std::cout << topoCell(gpus, pcie, static_cast<int>(a), static_cast<int>(b)) << "\t";
    const int numa = gpus[a].numa < 0 ? 0 : gpus[a].numa;
    std::cout << (numa * 48) << "-" << (numa * 48 + 47) << "\t" << numa << "\t\tN/A\n";
  }
  std::cout << "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes\n"
               "  NV#  = Connection traversing a bonded set of # NVLinks\n";
}

Gpu defaultGpu(unsigned index) {
  Gpu g;
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-fa4e0000-0000-4000-8000-%012x", index);
  g.uuid = buf;
  std::snprintf(buf, sizeof buf, "00000000:%02X:00.0", 0x17 + index);
  g.pciBusId = buf;
  g.minor = static_cast<int>(index);
  return g;
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) out.push_back(word);
      word.clear();
      any = false;
    } else if (!quoted && c == '#') {
      break;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) out.push_back(word);
  return out;
}

int fail(const std::string& why, int code = 1) {
  std::cerr << "fake nvidia-smi: " << why << "\n";
  return code;
}

std::string architecture(const std::string& cc) {
  const int major = std::atoi(cc.c_str());
  if (cc == "8.9") return "Ada Lovelace";
  if (cc == "7.5") return "Turing";
  switch (major) {
    case 7: return "Volta";
    case 8: return "Ampere";
    case 9: return "Hopper";
    case 10:
    case 12: return "Blackwell";
    default: return "N/A";
  }
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

void printGpu(std::ostream& o, const Gpu& g) {
  const std::string na = "N/A";
  const bool b = g.broken;
  o << "\t<gpu id=\"" << g.pciBusId << "\">\n";
  o << "\t\t<product_name>" << (b ? "Unknown Error" : escape(g.name)) << "</product_name>\n";
  o << "\t\t<product_brand>" << (b ? na : "NVIDIA") << "</product_brand>\n";
  o << "\t\t<product_architecture>" << (b ? na : architecture(g.cc)) << "</product_architecture>\n";
  o << "\t\t<persistence_mode>Enabled</persistence_mode>\n";
  o << "\t\t<mig_mode>\n\t\t\t<current_mig>" << (b ? na : g.mig ? "Enabled" : "Disabled")
    << "</current_mig>\n\t\t\t<pending_mig>" << (b ? na : g.mig ? "Enabled" : "Disabled")
    << "</pending_mig>\n\t\t</mig_mode>\n";
  if (g.mig && !b) {
    o << "\t\t<mig_devices>\n\t\t\t<mig_device>\n\t\t\t\t<index>0</index>\n\t\t\t\t<gpu_instance_id>1</gpu_instance_id>\n"
      << "\t\t\t\t<compute_instance_id>0</compute_instance_id>\n\t\t\t\t<device_attributes>\n\t\t\t\t\t<shared>\n"
      << "\t\t\t\t\t\t<multiprocessor_count>" << g.smCount / 7 << "</multiprocessor_count>\n"
      << "\t\t\t\t\t</shared>\n\t\t\t\t</device_attributes>\n\t\t\t\t<fb_memory_usage>\n\t\t\t\t\t<total>"
      << g.memoryMib / 8 << " MiB</total>\n\t\t\t\t\t<used>0 MiB</used>\n\t\t\t\t\t<free>" << g.memoryMib / 8
      << " MiB</free>\n\t\t\t\t</fb_memory_usage>\n\t\t\t</mig_device>\n\t\t</mig_devices>\n";
  } else {
    o << "\t\t<mig_devices>None</mig_devices>\n";
  }
  o << "\t\t<uuid>" << (b ? "Unknown Error" : g.uuid) << "</uuid>\n";
  o << "\t\t<minor_number>" << (b ? na : std::to_string(g.minor)) << "</minor_number>\n";
  const std::string bus = g.pciBusId.size() >= 11 ? g.pciBusId.substr(9, 2) : "00";
  o << "\t\t<pci>\n\t\t\t<pci_bus>" << bus << "</pci_bus>\n\t\t\t<pci_device>00</pci_device>\n"
    << "\t\t\t<pci_domain>0000</pci_domain>\n\t\t\t<pci_device_id>233010DE</pci_device_id>\n"
    << "\t\t\t<pci_bus_id>" << g.pciBusId << "</pci_bus_id>\n\t\t\t<pci_gpu_link_info>\n\t\t\t\t<link_widths>\n"
    << "\t\t\t\t\t<current_link_width>16x</current_link_width>\n\t\t\t\t</link_widths>\n\t\t\t</pci_gpu_link_info>\n"
    << "\t\t</pci>\n";
  // bar1 comes first in some drivers' output and reuses the child names: parsers must not mix them up.
  o << "\t\t<bar1_memory_usage>\n\t\t\t<total>131072 MiB</total>\n\t\t\t<used>1 MiB</used>\n\t\t\t<free>131071 MiB</free>\n"
    << "\t\t</bar1_memory_usage>\n";
  o << "\t\t<fb_memory_usage>\n";
  if (b) {
    o << "\t\t\t<total>N/A</total>\n\t\t\t<reserved>N/A</reserved>\n\t\t\t<used>N/A</used>\n\t\t\t<free>N/A</free>\n";
  } else {
    o << "\t\t\t<total>" << g.memoryMib << " MiB</total>\n\t\t\t<reserved>" << (g.memoryMib > 1024 ? 523 : 0)
      << " MiB</reserved>\n\t\t\t<used>" << (g.mig ? na : "0 MiB") << "</used>\n\t\t\t<free>"
      << (g.mig ? na : std::to_string(g.memoryMib) + " MiB") << "</free>\n";
  }
  o << "\t\t</fb_memory_usage>\n";
  o << "\t\t<utilization>\n\t\t\t<gpu_util>" << (b ? na : "0 %") << "</gpu_util>\n\t\t\t<memory_util>"
    << (b ? na : "0 %") << "</memory_util>\n\t\t</utilization>\n";
  o << "\t\t<temperature>\n\t\t\t<gpu_temp>" << (b ? na : "31 C") << "</gpu_temp>\n\t\t</temperature>\n";
  o << "\t\t<processes>\n\t\t</processes>\n";
  o << "\t</gpu>\n";
}

}  // namespace

int main(int argc, char** argv) {
  bool q = false, x = false, topo = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-q" || a == "--query") q = true;
    else if (a == "-x" || a == "--xml-format") x = true;
    else if (a == "-qx" || a == "-xq") q = x = true;
    else if (a == "topo" && i + 1 < argc && std::string(argv[i + 1]) == "-m") {
      topo = true;
      ++i;
    }
    else return fail("this fake knows only -q -x and topo -m, got " + a, 2);
  }
  if (!topo && (!q || !x)) return fail("this fake knows only -q -x and topo -m", 2);
  if (const char* delay = std::getenv("VGPU_FAKE_NVIDIA_SMI_DELAY_MS")) usleep(static_cast<useconds_t>(std::atoi(delay)) * 1000);

  if (const char* xml = std::getenv("VGPU_FAKE_NVIDIA_SMI_XML"); xml && *xml) {
    std::ifstream in(xml);
    if (!in) return fail(std::string("cannot read VGPU_FAKE_NVIDIA_SMI_XML file ") + xml);
    std::cout << in.rdbuf();
    return 0;
  }

  std::vector<Gpu> gpus;
  std::map<std::pair<int, int>, std::string> pcie;  // (lower, higher) GPU -> level word
  std::map<int, bool> brokenByIndex;
  bool initFails = false;
  if (const char* config = std::getenv("VGPU_FAKE_GPU_CONFIG"); config && *config) {
    std::ifstream in(config);
    if (!in) return fail(std::string("cannot read VGPU_FAKE_GPU_CONFIG file ") + config);
    std::string line;
    int lineNo = 0;
    while (std::getline(in, line)) {
      ++lineNo;
      const auto w = words(line);
      if (w.empty()) continue;
      std::map<std::string, std::string> kv;
      for (size_t i = 1; i < w.size(); ++i) {
        const auto eq = w[i].find('=');
        if (eq == std::string::npos) return fail(std::string(config) + ":" + std::to_string(lineNo) + ": expected key=value");
        kv[w[i].substr(0, eq)] = w[i].substr(eq + 1);
      }
      if (w[0] == "gpu") {
        Gpu g = defaultGpu(static_cast<unsigned>(gpus.size()));
        if (kv.count("uuid")) g.uuid = kv["uuid"];
        if (kv.count("name")) g.name = kv["name"];
        if (kv.count("memory_mib")) g.memoryMib = std::strtoull(kv["memory_mib"].c_str(), nullptr, 10);
        if (kv.count("pci_bus_id")) g.pciBusId = kv["pci_bus_id"];
        if (kv.count("minor")) g.minor = std::atoi(kv["minor"].c_str());
        if (kv.count("cc")) g.cc = kv["cc"];
        if (kv.count("sm_count")) g.smCount = std::atoi(kv["sm_count"].c_str());
        if (kv.count("mig")) g.mig = kv["mig"] == "on";
        if (kv.count("numa")) g.numa = std::atoi(kv["numa"].c_str());
        gpus.push_back(g);
      } else if (w[0] == "nvlink" || w[0] == "nvswitch" || w[0] == "pcie") {
        // After the gpu lines they name, as for the fake NVML (which checks them).
        const int a = std::atoi(kv["gpu"].c_str());
        const int b = kv.count("peer") ? std::atoi(kv["peer"].c_str()) : -1;
        if (a < 0 || static_cast<size_t>(a) >= gpus.size() || (w[0] != "nvswitch" && (b < 0 || static_cast<size_t>(b) >= gpus.size())))
          return fail(std::string(config) + ":" + std::to_string(lineNo) + ": names a gpu not given before");
        if (w[0] == "nvlink") {
          const int links = std::atoi(kv["links"].c_str());
          gpus[static_cast<size_t>(a)].nvlinks[b] += links;
          gpus[static_cast<size_t>(b)].nvlinks[a] += links;
        } else if (w[0] == "nvswitch") {
          gpus[static_cast<size_t>(a)].nvswitchLinks += std::atoi(kv["links"].c_str());
        } else {
          pcie[{std::min(a, b), std::max(a, b)}] = kv["level"];
        }
      } else if (w[0] == "nvml_init_error") {
        initFails = true;
      } else if (w[0] == "nvml_device_error") {
        brokenByIndex[std::atoi(kv["gpu"].c_str())] = true;
      }
    }
  } else {
    gpus.push_back(defaultGpu(0));
  }
  if (initFails) {
    // What the real tool prints when NVML cannot talk to the driver.
    std::cout << "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                 "latest NVIDIA driver is installed and running.\n\n";
    return 9;
  }
  for (auto& [index, broken] : brokenByIndex)
    if (index >= 0 && static_cast<size_t>(index) < gpus.size()) gpus[static_cast<size_t>(index)].broken = broken;
  if (topo) {
    printTopology(gpus, pcie);
    return 0;
  }

  std::ostringstream o;
  o << "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n<nvidia_smi_log>\n"
    << "\t<timestamp>Wed Dec  2 09:00:00 2026</timestamp>\n\t<driver_version>550.54.15</driver_version>\n"
    << "\t<cuda_version>12.4</cuda_version>\n\t<attached_gpus>" << gpus.size() << "</attached_gpus>\n";
  for (const auto& g : gpus) printGpu(o, g);
  o << "</nvidia_smi_log>\n";
  std::cout << o.str();
  return 0;
}
