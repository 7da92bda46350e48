// The NVIDIA backend on the real node (part of RealNode.<release>): vgpu-device-plugin runs
// the NVIDIA backend over the project's fake driver, and runc starts the CUDA program of
// the vgpu-test-workload image under libvgpu.so, which reaches it only through Allocate.
//
// Only the GPU is faked. The agent's NVML is the fake libnvidia-ml.so.1 (backend option
// nvmlLibrary; no VGPU_FAKE_GPU_CONFIG: the fake's one default GPU, 16384 MiB). In the
// container the fake libcuda.so.1 / libnvidia-ml.so.1 are in the image where the NVIDIA
// container toolkit would mount the real ones, and describe the same GPU. The backend hands
// out no device node (the toolkit would, from NVIDIA_VISIBLE_DEVICES), so none is made.
// Memory enforcement `auto` with vgpu-cdi-hook (docs/backends/nvidia.md, Driver mode): the
// hook reaches the runtime as the CDI device of ContainerAllocateResponse.cdi_devices. The
// fake driver keeps its per-cgroup limits in its state file (VGPU_FAKE_GPU_STATE; a real
// driver, in the kernel) and runc gives a hook only the spec's env, so cdiHookPath is a
// two-line wrapper naming that file before it runs this build's vgpu-cdi-hook.

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sys/stat.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include "fake_nodes.h"
#include "project_images.h"
#include "real_cluster.h"
#include "real_node.h"
#include "realnode_support.h"
#include "scenario_support.h"
#include "vgpu/cuda/nvml_api.h"

namespace vgpu::realk8s {

extern std::string gRelease;  // --release (release_main.cpp)

namespace {
namespace fs = std::filesystem;
namespace json = boost::json;

constexpr const char* kFakeGpuDir = VGPU_REALNODE_FAKE_GPU_DIR;  // the fake libcuda.so.1, libnvidia-ml.so.1
constexpr const char* kLibvgpu = VGPU_REALNODE_LIBVGPU;
/// The host folder standing for the chart's devicePlugin.libvgpu.hostDir: the preload file
/// the chart's init container writes (naming libvgpu.so's path in the container).
constexpr const char* kHostVgpuDir = VGPU_REALNODE_BUILD_DIR "/realnode-nvidia";
constexpr const char* kLibvgpuInContainer = "/usr/local/vgpu/libvgpu.so";
constexpr const char* kCdiHook = VGPU_REALNODE_CDI_HOOK;
constexpr const char* kFakeGpuState = VGPU_REALNODE_BUILD_DIR "/realnode-nvidia/fake-gpu.state";
constexpr const char* kCdiDir = "/var/run/cdi";  // the chart's devicePlugin.cdiDir
constexpr std::uint64_t kMiB = 1024 * 1024;
/// Every scenario's container: one GPU, 3000 MiB, 30 % of its compute.
const std::map<std::string, std::string> kSlice{
    {"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}};
constexpr int kCudaOutOfMemory = 2;

/// The chart's NVIDIA devices (sim off), pointed at the fake driver and this build's
/// libvgpu.so, memory capped by the driver where the runtime runs vgpu-cdi-hook and by
/// libvgpu.so always (`auto`); everything else the chart's defaults (splitCount 10).
std::string nvidiaChartValues() {
  std::ostringstream v;
  v << "devices:\n  sim:\n    enabled: false\n  nvidia:\n    enabled: true\n    options:\n"
    << "      discovery: nvml\n      nvmlLibrary: " << kFakeGpuDir << "/libnvidia-ml.so.1\n"
    << "      hostSysRoot: " << kHostVgpuDir << "/no-sys\n"
    << "      libvgpuPath: " << kLibvgpu << "\n      libvgpuContainerPath: " << kLibvgpuInContainer << "\n"
    << "      ldPreloadPath: " << kHostVgpuDir << "/ld.so.preload\n"
    << "      memoryEnforcement: auto\n      cdiHookPath: " << kHostVgpuDir << "/vgpu-cdi-hook\n";
  return v.str();
}

/// key=value lines of a program's output (later keys of the same name win).
std::map<std::string, std::string> keyValues(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (const auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  return out;
}

/// What the fake driver holds for a cgroup: its per-cgroup limit on GPU 0, read through the
/// fake NVML with the state file the agent and the hook share (loaded once in this process).
struct DriverLimit {
  nvmlReturn_t rc = NVML_ERROR_UNINITIALIZED;
  unsigned long long soft = 0, hard = 0;
  std::string error;
};
/// The fake NVML in this process, initialised, on the state file the agent and the hook
/// share; null when it cannot be loaded.
void* fakeNvml() {
  static void* nvml = []() -> void* {
    ::setenv("VGPU_FAKE_GPU_STATE", kFakeGpuState, 1);
    void* lib = ::dlopen((std::string(kFakeGpuDir) + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
    auto init = lib ? reinterpret_cast<nvmlReturn_t (*)()>(::dlsym(lib, "nvmlInit_v2")) : nullptr;
    return init && init() == NVML_SUCCESS ? lib : nullptr;
  }();
  return nvml;
}

DriverLimit driverLimit(const std::string& nameSpace) {
  DriverLimit out;
  void* nvml = fakeNvml();
  if (!nvml) return out.error = "cannot load the fake NVML from " + std::string(kFakeGpuDir), out;
  using Handle = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
  using Get = nvmlReturn_t (*)(nvmlDevice_t, nvmlGetMemoryLimits_v1_t*);
  auto handle = reinterpret_cast<Handle>(::dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"));
  auto get = reinterpret_cast<Get>(::dlsym(nvml, "nvmlDeviceGetMemoryLimits_v1"));
  nvmlDevice_t dev{};
  if (!handle || !get || handle(0, &dev) != NVML_SUCCESS) return out.error = "the fake NVML did not open GPU 0", out;
  nvmlGetMemoryLimits_v1_t limits{};
  limits.nameSpace = nameSpace.c_str();
  out.rc = get(dev, &limits);
  out.soft = limits.softLimit;
  out.hard = limits.hardLimit;
  return out;
}

/// The sysfs path of the memory cgroup in a /proc/<pid>/cgroup text ("N:memory:/kubepods/...";
/// cgroup v1 here, where runc gives containers no cgroup namespace).
std::string memoryCgroup(const std::string& procCgroup) {
  std::istringstream lines(procCgroup);
  for (std::string line; std::getline(lines, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",memory,") != std::string::npos) return "/sys/fs/cgroup/memory" + line.substr(b + 1);
  }
  return {};
}

/// The CDI specs of vgpu-cdi-hook the agent wrote (kind vgpu.io/container) in the runtime's folder.
std::vector<std::string> containerCdiSpecs() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCdiDir, ec))
    if (e.path().filename().string().rfind("vgpu.io-container_", 0) == 0) out.push_back(e.path().string());
  return out;
}

class RealNodeNvidiaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new RealCluster({.release = gRelease,
                                .startVgpu = true,
                                .chartValues = nvidiaChartValues(),
                                .startControllerManager = true});
    startStatus_ = new Status(startAll());
  }
  static Status startAll() {
    if (auto s = cluster_->start(); !s.ok()) return s;
    auto images = projectImages(*cluster_, {"vgpu-test-workload"});
    if (!images.ok()) return images.error();
    workloadImage_ = (*images)[0].ref;
    node_ = new RealNode(*cluster_, {.images = {(*images)[0].archive}});
    if (auto s = node_->start(); !s.ok()) return s;
    // What the chart's init container writes on the host (device-plugin-daemonset.yaml).
    if (auto s = e2e::writeText(std::string(kHostVgpuDir) + "/ld.so.preload", std::string(kLibvgpuInContainer) + "\n");
        !s.ok())
      return s;
    const std::string wrapper = std::string(kHostVgpuDir) + "/vgpu-cdi-hook";
    if (auto s = e2e::writeText(wrapper, "#!/bin/sh\nVGPU_FAKE_GPU_STATE=" + std::string(kFakeGpuState) + " exec " +
                                             kCdiHook + " \"$@\"\n");
        !s.ok())
      return s;
    ::chmod(wrapper.c_str(), 0755);
    std::error_code ec;
    fs::remove(kFakeGpuState, ec);  // a crashed run's
    if (auto s = cluster_->startVgpuAgent(node_->name(), node_->agentPaths(), {{"VGPU_FAKE_GPU_STATE", kFakeGpuState}});
        !s.ok())
      return s;
    if (auto s = cluster_->waitForVgpuInventory(node_->name()); !s.ok()) return s;
    // One GPU x the chart's splitCount 10.
    return waitForAllocatable(*cluster_, *node_, "nvidia.com/gpu", "10");
  }
  static void TearDownTestSuite() {
    stopRealNodeSuite(cluster_, node_, startStatus_);
    std::error_code ec;
    fs::remove_all(kHostVgpuDir, ec);
  }
  void SetUp() override {
    ASSERT_TRUE(startStatus_->ok()) << "the " << gRelease << " cluster with a real NVIDIA node did not start: "
                                    << startStatus_->error().message;
  }

  RealCluster& cluster() { return *cluster_; }
  RealNode& node() { return *node_; }

  /// A vgpu-test-workload pod on the real node running `script` with the slice `limits`
  /// (host network: the node's CNI is loopback-only). Nothing of vgpu is added here: the
  /// preload, libvgpu.so, the limits and the region come from Allocate.
  json::object workloadPod(const std::string& name, const std::string& script,
                           const std::map<std::string, std::string>& limits) {
    json::object l;
    for (const auto& [k, v] : limits) l[k] = v;
    json::object container{{"name", "main"},
                           {"image", workloadImage_},
                           {"imagePullPolicy", "Never"},
                           {"command", json::array{"/bin/sh", "-c", script.c_str()}},
                           {"resources", {{"limits", l}}}};
    return json::object{{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata", {{"name", name}}},
                        {"spec",
                         {{"schedulerName", cluster().schedulerName()},
                          {"hostNetwork", true},
                          {"restartPolicy", "Never"},
                          {"terminationGracePeriodSeconds", 1},
                          {"containers", json::array{container}}}}};
  }
  void create(const std::string& ns, const json::object& p) {
    auto r = cluster().api().post("/api/v1/namespaces/" + ns + "/pods", json::serialize(p));
    ASSERT_EQ(r.status, 201) << r.describe();
  }
  /// The pod once it ended (Succeeded or Failed); the kubelet's and agent's logs otherwise.
  json::object waitEnded(const std::string& ns, const std::string& name) {
    json::object last;
    const bool ok = RealCluster::waitFor(
        [&] {
          auto p = cluster().getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
          if (!p.ok()) return false;
          last = *p;
          const std::string phase = str(at(last, {"status", "phase"}));
          return phase == "Succeeded" || phase == "Failed";
        },
        std::chrono::seconds(120));
    EXPECT_TRUE(ok) << ns << "/" << name << " never ended: " << json::serialize(last) << "\nthe kubelet's log ends:\n"
                    << node().logTail("kubelet", 30) << "\nthe agent's log ends:\n"
                    << cluster().logTail("vgpu-device-plugin@" + node().name());
    return last;
  }
  std::string log(const std::string& ns, const std::string& name) { return podLog(cluster(), ns, name); }
  void remove(const std::string& ns, const std::string& name) { removePod(cluster(), node(), ns, name); }

  /// A pod in its own namespace `ns` with the test's slice (1 GPU, 3000 MiB, 30 %) whose
  /// container prints its /proc/self/cgroup and sleeps; `cgroup`: the container's memory
  /// cgroup in sysfs, once printed.
  void startSleeper(const std::string& ns, const std::string& name, std::string& cgroup) {
    ASSERT_TRUE(cluster().createNamespace(ns).ok());
    create(ns, workloadPod(name, "cat /proc/self/cgroup; echo printed; exec sleep 3600", kSlice));
    std::string out;
    ASSERT_TRUE(RealCluster::waitFor([&] { return (out = log(ns, name)).find("printed\n") != std::string::npos; },
                                     std::chrono::seconds(120)))
        << out << "\nthe kubelet's log ends:\n"
        << node().logTail("kubelet", 30);
    cgroup = memoryCgroup(out);
    ASSERT_FALSE(cgroup.empty()) << out;
  }

  static RealCluster* cluster_;
  static RealNode* node_;
  static Status* startStatus_;
  static std::string workloadImage_;
};

RealCluster* RealNodeNvidiaTest::cluster_ = nullptr;
RealNode* RealNodeNvidiaTest::node_ = nullptr;
Status* RealNodeNvidiaTest::startStatus_ = nullptr;
std::string RealNodeNvidiaTest::workloadImage_;

TEST_F(RealNodeNvidiaTest, CudaProgramUnderRuncGetsExactlyItsSliceThroughAllocateAndNvmlShowsIt) {
  ASSERT_TRUE(cluster().createNamespace("nvidia-slice").ok());
  // The e2e CUDA program takes 3000 MiB and one byte more; then the limiter probe reads NVML.
  const std::uint64_t limit = 3000 * kMiB;
  create("nvidia-slice",
         workloadPod("slice",
                     "/usr/local/bin/vgpu_e2e_cuda_app " + std::to_string(limit) +
                         " && /usr/local/bin/vgpu_limiter_probe nvml 0 && cat /etc/ld.so.preload",
                     kSlice));
  auto p = waitEnded("nvidia-slice", "slice");
  const std::string out = log("nvidia-slice", "slice");
  std::cout << "[" << cluster().kubernetesVersion() << "] the container printed:\n" << out << std::endl;
  EXPECT_EQ(str(at(p, {"status", "phase"})), "Succeeded") << json::serialize(p);
  EXPECT_TRUE(str(at(p, {"status", "reason"})).empty()) << "the kubelet refused it: " << json::serialize(p);
  // `auto` with the hook: the agent counts on the driver (and libvgpu.so keeps its limit).
  EXPECT_EQ(str(at(p, {"metadata", "annotations", "nvidia.com/vgpu-memory-enforcer"})), "driver")
      << json::serialize(p);
  const auto report = keyValues(out);
  // cuMemGetInfo under libvgpu.so: the slice; 3000 MiB granted, one byte more refused.
  EXPECT_EQ(report.count("info") ? report.at("info") : "", "0") << out;
  // The probe prints total= again (NVML's): both show the slice, never the 16384 MiB GPU.
  EXPECT_EQ(report.count("total") ? report.at("total") : "", std::to_string(limit)) << out;
  EXPECT_EQ(report.count("alloc") ? report.at("alloc") : "", "0") << out;
  EXPECT_EQ(report.count("extra") ? report.at("extra") : "", std::to_string(kCudaOutOfMemory)) << out;
  EXPECT_EQ(report.count("v2_total") ? report.at("v2_total") : "", std::to_string(limit)) << out;
  EXPECT_NE(out.find("total=" + std::to_string(limit) + "\nfree=" + std::to_string(limit) + "\nalloc=0\nextra=2\n"),
            std::string::npos)
      << "cuMemGetInfo did not show exactly the slice before the allocations: " << out;
  EXPECT_NE(out.find(std::string(kLibvgpuInContainer) + "\n"), std::string::npos)
      << "the container's /etc/ld.so.preload is not the one the agent mounted: " << out;
  remove("nvidia-slice", "slice");
}

TEST_F(RealNodeNvidiaTest, CdiHookCapsTheContainersRealCgroupInTheDriverAndTheCapGoesWithIt) {
  std::string cgroup;
  ASSERT_NO_FATAL_FAILURE(startSleeper("nvidia-cdi", "capped", cgroup));
  ASSERT_TRUE(fs::is_directory(cgroup)) << cgroup << " (the container's memory cgroup) is not on the host";
  const auto specs = containerCdiSpecs();
  EXPECT_EQ(specs.size(), 1u) << "the agent's CDI spec for the container in " << kCdiDir;
  const DriverLimit running = driverLimit(cgroup);
  ASSERT_TRUE(running.error.empty()) << running.error;
  // "containerd 1.6.20~ds1" (Debian's) or "containerd 2.4.2+unknown" (built from its module).
  const std::string version = node().containerdVersion().substr(std::strlen("containerd "));
  const bool cdi = !version.empty() && version[version[0] == 'v' ? 1 : 0] >= '2';
  std::cout << "[" << cluster().kubernetesVersion() << "] " << node().containerdVersion() << ": driver limit of " << cgroup
            << ": rc " << running.rc << " hard " << running.hard << " soft " << running.soft << std::endl;
  if (cdi) {
    // containerd 2 applies the CDI device the kubelet passed on (cdi_devices): runc ran the
    // hook at createContainer, and the driver holds exactly the slice for the container's
    // own cgroup (soft: driverSoftLimit none).
    EXPECT_EQ(running.rc, NVML_SUCCESS);
    EXPECT_EQ(running.hard, 3000ull * kMiB) << "the driver's hard limit for " << cgroup;
    EXPECT_EQ(running.soft, 0ull);
  } else {
    // containerd 1.6 has no CDI: neither the CRI's CDI devices nor the cdi.k8s.io annotation
    // reach runc, so no hook runs and the driver holds no limit; libvgpu.so alone holds the
    // slice (the test above), as `auto` promises.
    EXPECT_EQ(running.hard, NVML_DEVICE_MEMORY_LIMIT_MAX) << "a driver limit on containerd 1.6: " << running.hard;
    // The agent cannot tell a runtime without CDI: the pod still says the driver enforces.
    auto p = cluster().getObject("/api/v1/namespaces/nvidia-cdi/pods/capped");
    if (p.ok() && str(at(*p, {"metadata", "annotations", "nvidia.com/vgpu-memory-enforcer"})) == "driver")
      std::cout << "KNOWN DEFECT: on " << node().containerdVersion()
                << " (no CDI) the pod's nvidia.com/vgpu-memory-enforcer says \"driver\" though no hook ran; "
                   "libvgpu.so holds the slice"
                << std::endl;
  }
  remove("nvidia-cdi", "capped");
  // The runtime removed the container's cgroup, and with it the driver's limit; the agent
  // removed its spec.
  EXPECT_TRUE(RealCluster::waitFor([&] { return !fs::exists(cgroup); }, std::chrono::seconds(60))) << cgroup;
  const DriverLimit gone = driverLimit(cgroup);
  EXPECT_TRUE(gone.rc != NVML_SUCCESS || gone.hard == NVML_DEVICE_MEMORY_LIMIT_MAX)
      << "the driver still holds " << gone.hard << " for " << cgroup;
  EXPECT_TRUE(RealCluster::waitFor([&] { return containerCdiSpecs().empty(); }, std::chrono::seconds(30)))
      << ::testing::PrintToString(containerCdiSpecs());
}

TEST_F(RealNodeNvidiaTest, WatchdogFindsTheRealContainerOfAProcessOverItsSliceAndKillsItWithinTwoSeconds) {
  std::string cgroup;
  ASSERT_NO_FATAL_FAILURE(startSleeper("nvidia-watchdog", "bypass", cgroup));
  // The container's process (the sleep its shell became), by the host's pid in its cgroup.
  const std::string procs = e2e::readText(cgroup + "/cgroup.procs");
  ASSERT_FALSE(procs.empty()) << cgroup;
  const pid_t pid = static_cast<pid_t>(std::stol(procs));
  // A bypass of the preload: the driver (the fake's state, which the agent's NVML reads)
  // shows that process holding 3500 MiB on the GPU, where its slice is 3000 MiB (+128 MiB
  // tolerance). No static CUDA program: the fake driver's memory is charged per process in
  // its state file, so the injected figure is what such a program would leave there.
  void* nvml = fakeNvml();
  ASSERT_NE(nvml, nullptr);
  auto setUsage = reinterpret_cast<int (*)(int, int, unsigned long long)>(::dlsym(nvml, "vgpuFakeNvmlSetProcessUsage"));
  ASSERT_NE(setUsage, nullptr);
  ASSERT_EQ(setUsage(pid, 0, 3500ull * kMiB), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const bool killed = RealCluster::waitFor([&] { return !fs::exists("/proc/" + std::to_string(pid) + "/cmdline") ||
                                                        e2e::readText("/proc/" + std::to_string(pid) + "/cmdline").empty(); },
                                           std::chrono::seconds(10));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[" << cluster().kubernetesVersion() << "] the watchdog's kill came after " << seconds << " s" << std::endl;
  ASSERT_TRUE(killed) << "pid " << pid << " of " << cgroup << " still runs; the agent's log ends:\n"
                      << cluster().logTail("vgpu-device-plugin@" + node().name());
  EXPECT_LE(seconds, 2.0) << "the watchdog took longer than 2 s";
  // SIGKILL: the container ends with 137 and the pod (restartPolicy Never) fails.
  json::object p;
  EXPECT_TRUE(RealCluster::waitFor([&] {
    auto got = cluster().getObject("/api/v1/namespaces/nvidia-watchdog/pods/bypass");
    if (got.ok()) p = *got;
    return str(at(p, {"status", "phase"})) == "Failed";
  })) << json::serialize(p);
  const auto* statuses = at(p, {"status", "containerStatuses"});
  ASSERT_TRUE(statuses && statuses->is_array() && !statuses->as_array().empty()) << json::serialize(p);
  const auto* code = at(statuses->as_array()[0].as_object(), {"state", "terminated", "exitCode"});
  EXPECT_TRUE(code && code->is_int64() && code->as_int64() == 137) << json::serialize(p);
  setUsage(pid, 0, 0);
  remove("nvidia-watchdog", "bypass");
}

}  // namespace
}  // namespace vgpu::realk8s
