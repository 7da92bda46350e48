#include "dra_node.h"

#include <stdlib.h>

#include <chrono>
#include <map>
#include <sstream>

#include <boost/json.hpp>

#include "cdi_runtime.h"
#include "container_runtime.h"
#include "e2e_harness.h"
#include "e2e_paths.h"
#include "vgpu/config.h"

namespace vgpu::e2e {
namespace fs = std::filesystem;
namespace json = boost::json;

std::string draDriver(const std::string& backend) { return backend + ".vgpu.io"; }

namespace {

/// The backends with devices on the node: each becomes a DRA driver there.
std::vector<std::string> backendsOf(const NodeSpec& spec) {
  std::vector<std::string> out;
  if (!spec.gpus.empty()) out.push_back("nvidia");
  if (!spec.mlus.empty()) out.push_back("cambricon");
  if (!spec.dcus.empty()) out.push_back("hygon");
  return out;
}

}  // namespace

DraNode::DraNode() {
  std::string pattern = "/tmp/vdra-XXXXXX";  // short: unix socket paths are limited to 107 bytes
  if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
}

DraNode::~DraNode() {
  if (plugin_) plugin_->kill();
  if (kubelet_) kubelet_->stop();
  if (api_) api_->stop();
  if (std::getenv("VGPU_E2E_KEEP") == nullptr && !dir_.empty()) removeTree(dir_);
}

std::string DraNode::pluginLog() const { return plugin_ ? plugin_->log() : ""; }

Status DraNode::writeFiles(int splitCount) {
  // The same backend options as the device-plugin cluster's (e2e_harness.cpp).
  std::map<std::string, std::string> options;
  options["nvidia"] = "      discovery: nvml\n      nvmlLibrary: " + std::string(paths::kFakeGpuDir) +
                      "/libnvidia-ml.so.1\n      hostSysRoot: " + (dir_ / "no-sys").string() +
                      "\n      memoryEnforcement: libvgpu\n      libvgpuPath: " + paths::kLibvgpu +
                      "\n      libvgpuContainerPath: " + kLibvgpuInContainer +
                      "\n      ldPreloadPath: " + (dir_ / "ld.so.preload").string() + "\n";
#ifdef VGPU_E2E_FAKE_CNDEV
  options["cambricon"] = "      libraryPath: " + std::string(VGPU_E2E_FAKE_CNDEV) + "\n      stateDir: " +
                         (dir_ / "cambricon").string() + "\n      devRoot: " + (dir_ / "dev-mlu").string() + "\n";
#endif
#ifdef VGPU_E2E_FAKE_ROCM_DIR
  options["hygon"] = "      driverDir: " + std::string(VGPU_E2E_FAKE_ROCM_DIR) +
                     "\n      enforcement: vdev-file\n      sysfsRoot: " + (dir_ / "sys").string() +
                     "\n      devRoot: " + (dir_ / "dev").string() + "\n      stateDir: " + (dir_ / "hygon").string() +
                     "\n      vdevCopyDir: " + (dir_ / "etc-vdev").string() + "\n";
#endif
  std::string config = "version: 1\nbackends:\n";
  for (const auto& backend : backendsOf(spec_)) {
    if (!options.contains(backend)) return makeError("the " + backend + " backend or its fake driver is not built");
    config += "  " + backend + ":\n    enabled: true\n    frontEnd: dra\n    splitCount: " +
              std::to_string(splitCount) + "\n    options:\n" + options[backend];
  }
  if (auto s = writeText(configPath(), config); !s.ok()) return s;
  if (auto s = writeText(dir_ / "ld.so.preload", std::string(kLibvgpuInContainer) + "\n"); !s.ok()) return s;
  if (auto s = writeText(dir_ / "gpus.conf", fakeGpuMachine(spec_.gpus)); !s.ok()) return s;
  if (auto s = writeFakeMluNode(dir_, spec_.mlus); !s.ok()) return s;
  if (auto s = writeFakeDcuNode(dir_, spec_.dcus); !s.ok()) return s;
  return writeText(dir_ / "kubeconfig",
                   "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: " + api_->url() +
                       "\nusers:\n- name: e2e\n  user:\n    token: e2e\ncontexts:\n- name: e2e\n  context:\n"
                       "    cluster: e2e\n    user: e2e\ncurrent-context: e2e\n");
}

Status DraNode::start(NodeSpec spec, int splitCount) {
  if (dir_.empty()) return makeError("cannot create a temp folder under /tmp");
  if (auto s = checkContainerSupport(); !s.ok()) return s;
  spec_ = std::move(spec);
  if (backendsOf(spec_).empty()) return makeError("node " + spec_.name + " has no devices");
  auto api = fakes::FakeApiServer::start();
  if (!api.ok()) return makeError("apiserver double: " + api.error().message);
  api_ = std::move(api).value();
  if (auto c = api_->create("nodes", {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", spec_.name}}}});
      !c.ok())
    return makeError("creating Node " + spec_.name + ": " + c.error().message);
  if (auto s = writeFiles(splitCount); !s.ok()) return s;
  fakes::FakeDraKubeletOptions ko;
  ko.registrationDir = (dir_ / "plugins_registry").string();
  std::error_code ec;
  fs::create_directories(ko.registrationDir, ec);
  auto kubelet = fakes::FakeDraKubelet::start(ko);
  if (!kubelet.ok()) return makeError("kubelet DRA double: " + kubelet.error().message);
  kubelet_ = std::move(kubelet).value();
  return startPlugin();
}

Status DraNode::startPlugin() {
  ProcessOptions o;
  o.program = paths::kDraPlugin;
  o.env = baseEnv();
  o.env["NODE_NAME"] = spec_.name;
  o.env["VGPU_CONFIG"] = configPath().string();
  o.env["VGPU_BACKEND_DIR"] = paths::kBackendDir;
  o.env["KUBECONFIG_FILE"] = (dir_ / "kubeconfig").string();
  o.env["VGPU_PLUGINS_REGISTRY_DIR"] = (dir_ / "plugins_registry").string();
  o.env["VGPU_KUBELET_PLUGINS_DIR"] = (dir_ / "plugins").string();
  o.env["VGPU_CDI_DIR"] = cdiDir().string();
  o.env["VGPU_STATE_DIR"] = stateDir().string();
  o.env["VGPU_DRA_METRICS_ADDRESS"] = "127.0.0.1:0";
  // As root on this machine, a tmpfs per claim would be mounted on the host and outlive a
  // plugin a scenario kills (the mounts are tested in private namespaces: claim_tmpfs_test).
  o.args = {"--region-tmpfs=off"};
  // The node's "hardware": what its fake vendor libraries report.
  o.env["VGPU_FAKE_GPU_CONFIG"] = (dir_ / "gpus.conf").string();
  o.env["VGPU_FAKE_CNDEV_CONFIG"] = (dir_ / "cndev.conf").string();
  o.env["VGPU_FAKE_ROCM_CONFIG"] = (dir_ / "rocm.conf").string();
  o.logFile = (dir_ / "dra-plugin.log").string();
  auto started = ChildProcess::start(std::move(o));
  if (!started.ok()) return makeError("vgpu-dra-plugin: " + started.error().message);
  plugin_ = std::move(started).value();
  for (const auto& backend : backendsOf(spec_)) {
    const std::string driver = draDriver(backend);
    auto p = kubelet_->waitForPlugin(driver, kWait);
    if (!p || !p->accepted)
      return makeError("vgpu-dra-plugin did not register " + driver + " with the kubelet" +
                       (p ? " (refused: " + p->error + ")" : "") + "; its log:\n" + pluginLog());
    if (!Cluster::waitUntil([&] { return !publishedDevices(driver).empty(); }))
      return makeError("vgpu-dra-plugin published no devices of " + driver + "; its log:\n" + pluginLog());
  }
  return {};
}

std::vector<json::object> DraNode::publishedDevices(const std::string& driver) const {
  std::vector<json::object> out;
  for (const auto& slice : api_->list("resourceslices")) {
    const auto& spec = slice.at("spec").as_object();
    if (spec.at("driver") != driver.c_str() || spec.at("nodeName") != spec_.name.c_str()) continue;
    if (const auto* devices = spec.if_contains("devices"); devices && devices->is_array())
      for (const auto& d : devices->get_array()) out.push_back(d.as_object());
  }
  return out;
}

Result<fakes::DraClaim> DraNode::createAllocatedClaim(const std::string& name, const std::string& driver,
                                                      const std::string& device, const ShareRequest& share) {
  char shareId[40];
  std::snprintf(shareId, sizeof shareId, "5a4e0000-0000-4000-8000-%012d", ++shares_);
  const json::object amounts{{"memory", share.memory}, {"cores", share.cores}};
  json::object request{{"name", "gpu"},
                       {"exactly",
                        {{"deviceClassName", driver},
                         {"allocationMode", "ExactCount"},
                         {"count", 1},
                         {"capacity", {{"requests", amounts}}}}}};
  json::object consumed = amounts;
  consumed["shares"] = "1";
  json::object result{{"request", "gpu"}, {"driver", driver},   {"pool", spec_.name},
                      {"device", device}, {"shareID", shareId}, {"consumedCapacity", std::move(consumed)}};
  json::object claim{{"apiVersion", "resource.k8s.io/v1"},
                     {"kind", "ResourceClaim"},
                     {"metadata", {{"name", name}, {"namespace", "default"}}}};
  claim["spec"] = {{"devices", {{"requests", json::array{std::move(request)}}}}};
  claim["status"] = {{"allocation", {{"devices", {{"results", json::array{std::move(result)}}}}}}};
  auto made = api_->create("resourceclaims", std::move(claim));
  if (!made.ok()) return makeError("creating ResourceClaim " + name + ": " + made.error().message);
  return fakes::DraClaim{"default", std::string(made->at("metadata").at("uid").as_string()), name};
}

std::string DraNode::shareIdOf(const fakes::DraClaim& claim) const {
  auto c = api_->get("resourceclaims", claim.ns, claim.name);
  if (!c) return "";
  return std::string(c->at("status").at("allocation").at("devices").at("results").at(0).at("shareID").as_string());
}

Result<ContainerSpec> DraNode::containerSpec(const std::vector<std::string>& cdiIds) const {
  // The runtime's two folders, lowest priority first; nothing of ours is in /etc/cdi.
  return applyCdiDevices({dir_ / "etc-cdi", cdiDir()}, cdiIds);
}

Result<std::unique_ptr<ChildProcess>> DraNode::startContainer(const std::vector<std::string>& cdiIds,
                                                              const std::string& program,
                                                              const std::vector<std::string>& args) {
  auto spec = containerSpec(cdiIds);
  if (!spec.ok()) return std::move(spec).error();
  return startContainer(*spec, program, args);
}

Result<std::unique_ptr<ChildProcess>> DraNode::startContainer(const ContainerSpec& spec, const std::string& program,
                                                              const std::vector<std::string>& args) {
  ContainerLaunch launch;
  launch.spec = spec;
  launch.program = program;
  launch.args = args;
  launch.scratchDir = (dir_ / ("c" + std::to_string(++containers_))).string();
  launch.logFile = launch.scratchDir + "/stderr.log";
  std::error_code ec;
  fs::create_directories(launch.scratchDir, ec);
  launch.runtimeEnv = baseEnv();
  if (auto s = addNvidiaToolkit(launch, spec_); !s.ok()) return s.error();
  return e2e::startContainer(launch);
}

Result<ContainerSpec> DraNode::devicePluginSpec(const std::string& backend, ContainerGrant grant) {
  if (!devicePluginBackends_) {
    auto config = loadDeviceConfig(configPath());
    if (!config.ok()) return makeError("the node's device-config.yaml: " + config.error().message);
    // The fake drivers read their machine from the environment when they are loaded.
    ::setenv("VGPU_FAKE_GPU_CONFIG", (dir_ / "gpus.conf").c_str(), 1);
    ::setenv("VGPU_FAKE_CNDEV_CONFIG", (dir_ / "cndev.conf").c_str(), 1);
    ::setenv("VGPU_FAKE_ROCM_CONFIG", (dir_ / "rocm.conf").c_str(), 1);
    devicePluginBackends_ =
        std::make_unique<BackendLoadOutcome>(loadEnabledBackends(*config, paths::kBackendDir, spec_.name));
    for (const auto& f : devicePluginBackends_->failures) return makeError("loading a backend: " + f.message);
  }
  Backend* b = devicePluginBackends_->backends.find(backend);
  if (!b || !b->limiter() || !b->discovery()) return makeError("backend " + backend + " has no limiter here");
  if (auto found = b->discovery()->discover(); !found.ok()) return found.error();
  grant.hostDir = (dir_ / ("device-plugin-" + std::to_string(++containers_))).string();
  std::error_code ec;
  fs::create_directories(grant.hostDir, ec);
  if (ec) return makeError("cannot create " + grant.hostDir + ": " + ec.message());
  return b->limiter()->containerSpec(grant);
}

}  // namespace vgpu::e2e
