// libvgpu.so as a container runs it: each scenario is a separate process (limiter_probe)
// started with LD_PRELOAD and the limiter's environment, against the fake driver.
//
// The same tests run (ctest registers them several times):
// - against the default fake driver (R580, CUDA 13.0);
// - against the R470-like one (VGPU_TEST_FAKE_GPU_DIR: CUDA 11.4, nothing newer exported);
// - inside a Debian 11 root (VGPU_TEST_OLD_ROOT: glibc 2.31), where the library, the probe
//   and the fakes are copied and every probe runs chroot'ed, in a mount namespace of its own
//   with /proc mounted.

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "hook_list.h"
#include "probe_process.h"
#include "vgpu/cuda/nvml_api.h"
#include "vgpu/shared_region.h"

namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr int kDeviceMiB = 1024;
constexpr int kContextMiB = 8;

using vgpu::test::libvgpuPath;
using vgpu::test::ProbeResult;
using vgpu::test::readAll;

// The value of `key=` in the probe's output, or "" if absent.
std::string field(const std::string& out, const std::string& key) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

uint64_t fieldU64(const std::string& out, const std::string& key) {
  return strtoull(field(out, key).c_str(), nullptr, 10);
}

// The driver functions libvgpu.so wraps.
const std::set<std::string>& hooked() {
  static const std::set<std::string> names = [] {
    std::set<std::string> n;
#define VGPU_NAME(name, params) n.insert(#name);
    VGPU_CUDA_HOOKS(VGPU_NAME)
#undef VGPU_NAME
    return n;
  }();
  return names;
}

// Where the fake driver is: VGPU_TEST_FAKE_GPU_DIR (a colon list) or the default fakes.
std::string fakeLibPath() {
  const char* dir = getenv("VGPU_TEST_FAKE_GPU_DIR");
  return dir != nullptr && dir[0] != '\0' ? dir : VGPU_FAKE_LIB_PATH;
}

// A Debian 11 (or other old) root to run the probes in, or "" to run them here.
std::string oldRoot() {
  const char* root = getenv("VGPU_TEST_OLD_ROOT");
  return root != nullptr ? root : "";
}

// Copies what the probes need into `dst`, the test's own folder in the root (each test: the
// build may have changed them, and tests run side by side).
void copyIntoRoot(const std::string& dst) {
  std::string cmd = "mkdir -p '" + dst + "/fakegpu' && cp '" + libvgpuPath() + "' '" VGPU_PROBE "' '" + dst + "/'";
  std::string libs = fakeLibPath();
  for (size_t start = 0; start <= libs.size();) {
    size_t end = libs.find(':', start);
    if (end == std::string::npos) end = libs.size();
    // The first folder that has a library wins, as on LD_LIBRARY_PATH: copy without overwriting.
    cmd += " && cp -n '" + libs.substr(start, end - start) + "'/lib*.so.1 '" + dst + "/fakegpu/'";
    start = end + 1;
  }
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// In a forked child: a mount namespace of its own, /proc mounted in the root, and (when
// `preloadFile` is given) that file bind-mounted over the root's /etc/ld.so.preload, so no
// other process in the root sees it; then chroot. Returns false (errno set) on failure.
bool enterRoot(const std::string& root, const std::string& preloadFile) {
  if (unshare(CLONE_NEWNS) != 0) return false;
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (mount("proc", (root + "/proc").c_str(), "proc", 0, nullptr) != 0) return false;
  if (!preloadFile.empty() &&
      mount(preloadFile.c_str(), (root + "/etc/ld.so.preload").c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return false;
  }
  return chroot(root.c_str()) == 0 && chdir("/") == 0;
}

// A probe started in the background (its stdin and stdout are pipes).
struct Running {
  pid_t pid = -1;
  int in = -1;   // write end of its stdin
  int out = -1;  // read end of its stdout
  std::string errPath;
};

class LimiterPreload : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);  // a probe that died must fail the test, not kill it
    root_ = oldRoot();
    if (!root_.empty() && geteuid() != 0) GTEST_SKIP() << "needs root: the probes run chroot'ed in " << root_;
    std::string tmpl = root_ + "/tmp/vgpu-preload-test-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    inner_ = dir_.substr(root_.size());  // the same folder as the probes see it
    if (!root_.empty()) {
      copyIntoRoot(dir_ + "/bin");
      probe_ = inner_ + "/bin/vgpu_limiter_probe";
      libvgpu_ = inner_ + "/bin/libvgpu.so";
      libPath_ = inner_ + "/bin/fakegpu";
    }
    config_ = dir_ + "/gpus.conf";
    std::ofstream(config_) << "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20 name=\"Fake H100\" "
                           << "memory_mib=" << kDeviceMiB << " sm_count=132 cc=9.0 context_mib=" << kContextMiB << "\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  double reachableAround(double before, double share, int limit, const std::vector<std::string>& bare);

  // A path under the test's folder, as the probes see it (inside the old root, if any).
  std::string probePath(const std::string& name) const { return inner_ + "/" + name; }

  std::map<std::string, std::string> env(const std::map<std::string, std::string>& extra, bool preload) const {
    std::map<std::string, std::string> e{
        {"PATH", "/usr/bin:/bin"},
        {"LD_LIBRARY_PATH", libPath_},
        {"VGPU_FAKE_GPU_CONFIG", probePath("gpus.conf")},
        {"VGPU_FAKE_GPU_STATE", probePath("fake-state")},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath("region")},
        {"PROBE_EXPORTER_REGION", probePath("exporter-region")},
    };
    if (preload) e["LD_PRELOAD"] = libvgpu_;
    for (const auto& [k, v] : extra) e[k] = v;
    return e;
  }

  // `newPidNamespace`: the probe is the first process (pid 1) of a PID namespace of its own,
  // as in a container started inside a container; exit code 77 if that cannot be made here.
  Running start(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra,
                bool preload = true, bool newPidNamespace = false) {
    std::vector<std::string> envStrings;
    for (const auto& [k, v] : env(extra, preload)) envStrings.push_back(k + "=" + v);
    int inPipe[2], outPipe[2];
    // Close-on-exec: a probe must not hold the other probes' pipes open.
    EXPECT_EQ(pipe2(inPipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(outPipe, O_CLOEXEC), 0);
    Running r;
    r.errPath = dir_ + "/stderr." + std::to_string(++runs_);
    r.pid = fork();
    if (r.pid == 0) {
      dup2(inPipe[0], 0);
      dup2(outPipe[1], 1);
      int err = open(r.errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> argv{const_cast<char*>(probe_.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      std::vector<char*> envp;
      for (auto& s : envStrings) envp.push_back(s.data());
      envp.push_back(nullptr);
      if (!root_.empty() && !enterRoot(root_, "")) {
        dprintf(2, "cannot enter %s: %s\n", root_.c_str(), strerror(errno));
        _exit(126);
      }
      if (newPidNamespace) {
        if (unshare(CLONE_NEWPID) != 0) _exit(77);
        pid_t inner = fork();
        if (inner < 0) _exit(126);
        if (inner > 0) {  // stands for the probe: its exit status, and killing it kills the probe
          int status = 0;
          waitpid(inner, &status, 0);
          _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
      }
      execve(probe_.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    close(inPipe[0]);
    close(outPipe[1]);
    r.in = inPipe[1];
    r.out = outPipe[0];
    return r;
  }

  // Reads the probe's stdout until `marker` appears or `timeoutMs` passes.
  static std::string readUntil(Running& r, const std::string& marker, int timeoutMs) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (out.find(marker) == std::string::npos) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      pollfd p{r.out, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
      char buf[512];
      ssize_t n = read(r.out, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }

  // Closes its stdin, collects the rest of stdout and the exit status (killed after timeout).
  static ProbeResult finish(Running& r, int timeoutMs, std::string out = "") {
    if (r.in >= 0) close(r.in);
    r.in = -1;
    out += readUntil(r, "\x01never", timeoutMs);  // to EOF or the deadline
    close(r.out);
    ProbeResult res;
    int status = 0;
    // Its stdout is closed, so it is exiting: wait for that, but never forever.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    while (waitpid(r.pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, &status, 0);
        ADD_FAILURE() << "probe timed out";
        break;
      }
      timespec ts{0, 1'000'000};
      nanosleep(&ts, nullptr);
    }
    res.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    res.out = out;
    res.err = readAll(r.errPath);
    return res;
  }

  ProbeResult run(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra = {},
                  bool preload = true, int timeoutMs = 30000) {
    Running r = start(args, extra, preload);
    return finish(r, timeoutMs);
  }

  std::string root_;  // the old root the probes run in, "" for this machine
  std::string probe_ = VGPU_PROBE;
  std::string libvgpu_ = libvgpuPath();
  std::string libPath_ = fakeLibPath();
  std::string dir_;    // the test's folder, as this process sees it
  std::string inner_;  // the same, as the probes see it
  std::string config_;
  int runs_ = 0;
};

// ---- every allocation path: counted, refused at the limit with nothing allocated ----

struct PathCase {
  const char* path;
  const char* limit;
  int aMiB;  // fits
  int bMiB;  // does not fit on top of A, fits alone
};

void PrintTo(const PathCase& c, std::ostream* os) { *os << c.path; }

class LimiterAllocationPath : public LimiterPreload, public ::testing::WithParamInterface<PathCase> {};

TEST_P(LimiterAllocationPath, IsCountedAndRefusedAtTheLimit) {
  const PathCase& c = GetParam();
  ProbeResult r =
      run({"path", c.path, std::to_string(c.aMiB), std::to_string(c.bMiB)}, {{"CUDA_DEVICE_MEMORY_LIMIT", c.limit}});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GE(fieldU64(r.out, "charged_a"), static_cast<uint64_t>(c.aMiB) * kMiB) << r.out;
}

INSTANTIATE_TEST_SUITE_P(Paths, LimiterAllocationPath,
                         ::testing::Values(PathCase{"plain", "64m", 24, 36}, PathCase{"pitch", "64m", 24, 36},
                                           PathCase{"managed", "64m", 24, 36}, PathCase{"async", "64m", 24, 36},
                                           PathCase{"pool", "64m", 24, 36}, PathCase{"array", "64m", 24, 36},
                                           PathCase{"array3d", "64m", 24, 36}, PathCase{"mipmap", "64m", 24, 36},
                                           PathCase{"vmm", "64m", 24, 36}, PathCase{"graph", "64m", 24, 36},
                                           PathCase{"ipc", "64m", 24, 36}, PathCase{"import", "64m", 24, 36},
                                           PathCase{"context", "20m", kContextMiB, kContextMiB}),
                         [](const ::testing::TestParamInfo<PathCase>& info) { return std::string(info.param.path); });

// ---- what is charged to whom: contexts, handles, graphs, pools (issue 25) ----

struct AccountingCase {
  const char* scenario;
  const char* what;
};

void PrintTo(const AccountingCase& c, std::ostream* os) { *os << c.scenario; }

class LimiterAccounting : public LimiterPreload, public ::testing::WithParamInterface<AccountingCase> {};

// Each scenario (limiter_probe.c) checks, under a 64 MiB limit with 8 MiB per context, that
// what the container is charged is what it holds, and that the limit holds on the device.
TEST_P(LimiterAccounting, ChargesWhatIsHeldAndGivesBackWhatIsFreed) {
  ProbeResult r = run({GetParam().scenario}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << GetParam().what << "\n" << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LimiterAccounting,
    ::testing::Values(
        AccountingCase{"ctxdestroy", "cuCtxDestroy gives back what the context held"},
        AccountingCase{"ctxreset", "a primary context's reset gives back what it held, not another context's"},
        AccountingCase{"primaryrelease", "the last primary release leaves another context's memory charged"},
        AccountingCase{"vmmrelease", "cuMemCreate, map, release: charged until the unmap"},
        AccountingCase{"graphexec", "an executable graph allocates at launch after its graph is destroyed"},
        AccountingCase{"pools", "pools are charged for what they keep; trimmed, threshold, eight of them"},
        AccountingCase{"freeasync", "cuMemFreeAsync gives back when the device reaches the free"}),
    [](const ::testing::TestParamInfo<AccountingCase>& info) { return std::string(info.param.scenario); });

// ---- what the container is told ----

TEST_F(LimiterPreload, MemGetInfoReportsTheLimitAndWhatIsLeftOfIt) {
  ProbeResult r = run({"meminfo"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "256m"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total"), 256 * kMiB);
  EXPECT_EQ(fieldU64(r.out, "free"), (256 - kContextMiB) * kMiB);  // the context is charged
  EXPECT_EQ(fieldU64(r.out, "device_total"), 256 * kMiB);
  // Measured undisturbed, so published for the container's later processes.
  const vgpu_region* region = nullptr;
  ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region").c_str(), &region, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(region->devices[0].context_overhead, kContextMiB * kMiB);
  EXPECT_STREQ(region->devices[0].uuid, "GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20");
  EXPECT_EQ(region->devices[0].memory_limit, 256 * kMiB);
  EXPECT_EQ(region->devices[0].memory_used, 0u);  // the process has exited and detached
  vgpu_region_close(region);
}

// Inside a container whose cgroup has a driver memory limit (R615+, set by vgpu-cdi-hook:
// issue 40), libvgpu.so reports the smaller of the two views: the driver's (what the cgroup
// may still take) and its own (what is left of its limit).
TEST_F(LimiterPreload, InADriverLimitedCgroupMemGetInfoIsTheSmallerOfTheTwoViews) {
  if (!root_.empty()) GTEST_SKIP() << "the cgroup's path differs inside the old root";
  if (geteuid() != 0) GTEST_SKIP() << "NVML sets memory limits for root only";
  std::ofstream(dir_ + "/cgroup") << "0::/ctr\n";
  const std::string ns = dir_ + "/sys/fs/cgroup/ctr";
  ASSERT_EQ(std::system(("mkdir -p '" + ns + "'").c_str()), 0);
  // The driver's limit, set as the hook would, by a process of its own.
  const pid_t setter = fork();
  if (setter == 0) {
    setenv("VGPU_FAKE_GPU_CONFIG", config_.c_str(), 1);
    setenv("VGPU_FAKE_GPU_STATE", (dir_ + "/fake-state").c_str(), 1);
    const std::string libs = fakeLibPath();
    void* nvml = nullptr;
    for (size_t at = 0; nvml == nullptr && at <= libs.size();) {
      const size_t colon = std::min(libs.find(':', at), libs.size());
      nvml = dlopen((libs.substr(at, colon - at) + "/libnvidia-ml.so.1").c_str(), RTLD_NOW | RTLD_LOCAL);
      at = colon + 1;
    }
    using Init = nvmlReturn_t (*)();
    using Handle = nvmlReturn_t (*)(unsigned, nvmlDevice_t*);
    using Set = nvmlReturn_t (*)(nvmlDevice_t, nvmlSetMemoryLimits_v1_t*);
    auto init = nvml ? reinterpret_cast<Init>(dlsym(nvml, "nvmlInit_v2")) : nullptr;
    auto handle = nvml ? reinterpret_cast<Handle>(dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2")) : nullptr;
    auto set = nvml ? reinterpret_cast<Set>(dlsym(nvml, "nvmlDeviceSetMemoryLimits_v1")) : nullptr;
    if (set == nullptr) _exit(77);  // a driver without per-cgroup limits
    nvmlDevice_t dev = nullptr;
    nvmlSetMemoryLimits_v1_t limits{ns.c_str(), 0, 128 * kMiB};
    _exit(init() == NVML_SUCCESS && handle(0, &dev) == NVML_SUCCESS && set(dev, &limits) == NVML_SUCCESS ? 0 : 1);
  }
  int status = 0;
  waitpid(setter, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << "this fake NVML has no per-cgroup limits";
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::map<std::string, std::string> inCgroup{{"VGPU_FAKE_GPU_PROC_CGROUP", probePath("cgroup")},
                                                    {"VGPU_FAKE_GPU_SYSFS", probePath("sys")}};
  auto with = [&](const char* limit) {
    auto e = inCgroup;
    e["CUDA_DEVICE_MEMORY_LIMIT_0"] = limit;
    return e;
  };
  ProbeResult driverSmaller = run({"meminfo"}, with("256m"));
  ASSERT_EQ(driverSmaller.exitCode, 0) << driverSmaller.err;
  EXPECT_EQ(fieldU64(driverSmaller.out, "total"), 128 * kMiB);
  EXPECT_EQ(fieldU64(driverSmaller.out, "free"), (128 - kContextMiB) * kMiB);
  ProbeResult ownSmaller = run({"meminfo"}, with("64m"));
  ASSERT_EQ(ownSmaller.exitCode, 0) << ownSmaller.err;
  EXPECT_EQ(fieldU64(ownSmaller.out, "total"), 64 * kMiB);
  EXPECT_EQ(fieldU64(ownSmaller.out, "free"), (64 - kContextMiB) * kMiB);
  // Without the preload (a static binary, its own loader): the driver's view and its refusal.
  ProbeResult bare = run({"meminfo"}, with("64m"), false);
  ASSERT_EQ(bare.exitCode, 0) << bare.err;
  EXPECT_EQ(fieldU64(bare.out, "total"), 128 * kMiB);
}

// On a MIG device CUDA answers the MIG device's UUID; NVML and the metrics call it "MIG-...".
// The container was given it by that name, so the region must say it too (the fake's CUDA
// answers the configured bytes, as the driver answers a MIG device's).
TEST_F(LimiterPreload, AMigDeviceIsPublishedByItsMigUuid) {
  const std::string hex = "6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c20";
  for (const auto& [visible, expected] : std::vector<std::pair<std::string, std::string>>{
           {"MIG-" + hex, "MIG-" + hex},
           {"MIG-0c8d2e4f-1a3b-4c5d-8e9f-0a1b2c3d4e5f,MIG-" + hex, "MIG-" + hex},
           {"MIG-" + hex + "0", "GPU-" + hex},  // another, longer name
           {"GPU-" + hex, "GPU-" + hex}}) {
    unlink((dir_ + "/region").c_str());
    ProbeResult r = run({"meminfo"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "256m"}, {"NVIDIA_VISIBLE_DEVICES", visible}});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const vgpu_region* region = nullptr;
    ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region").c_str(), &region, nullptr, 0), VGPU_REGION_OK);
    EXPECT_STREQ(region->devices[0].uuid, expected.c_str()) << "NVIDIA_VISIBLE_DEVICES=" << visible;
    vgpu_region_close(region);
  }
}

// With more than one visible device the wrapper must follow the current context, however
// the application switches it (with one device it knows the answer without asking).
TEST_F(LimiterPreload, MemGetInfoFollowsTheCurrentContextAcrossDevices) {
  std::ofstream(config_, std::ios::app) << "gpu uuid=GPU-0c8d2e4f-1a3b-4c5d-8e9f-0a1b2c3d4e5f memory_mib="
                                        << kDeviceMiB << " sm_count=132 cc=9.0 context_mib=" << kContextMiB << "\n";
  ProbeResult r = run({"meminfo2"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "256m"}, {"CUDA_DEVICE_MEMORY_LIMIT_1", "512m"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total0"), 256 * kMiB);
  EXPECT_EQ(fieldU64(r.out, "total1"), 512 * kMiB);
  EXPECT_EQ(fieldU64(r.out, "total2"), 256 * kMiB);
  EXPECT_EQ(fieldU64(r.out, "total3"), 512 * kMiB);
}

TEST_F(LimiterPreload, ProcessesThatNeverUseCudaAreLeftAlone) {
  ProbeResult r = run({"nothing"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "1g"}, {"LIBVGPU_LOG_LEVEL", "4"}});
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");                                    // not even a debug line
  EXPECT_NE(access((dir_ + "/region").c_str(), F_OK), 0);  // no region opened or created
}

TEST_F(LimiterPreload, WithoutALimitTheDeviceLooksPhysical) {
  ProbeResult with = run({"meminfo"});
  ProbeResult without = run({"meminfo"}, {}, false);
  ASSERT_EQ(with.exitCode, 0) << with.err;
  EXPECT_EQ(fieldU64(with.out, "total"), kDeviceMiB * kMiB);
  EXPECT_EQ(with.out, without.out);
}

TEST_F(LimiterPreload, LimitsFileBeatsTheEnvironment) {
  std::ofstream(dir_ + "/limits.env") << "CUDA_DEVICE_MEMORY_LIMIT=128m\n";
  ProbeResult r = run({"meminfo"}, {{"VGPU_LIMITS_FILE", probePath("limits.env")},
                                    {"CUDA_DEVICE_MEMORY_LIMIT", "512m"},
                                    {"CUDA_DEVICE_MEMORY_LIMIT_0", "768m"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total"), 128 * kMiB);
}

TEST_F(LimiterPreload, BadLimitValuesAreRefusedClearlyAtStart) {
  for (const char* bad : {"1GB", "1Gi", "lots", "-5", "0x100"}) {
    ProbeResult r = run({"init"}, {{"CUDA_DEVICE_MEMORY_LIMIT", bad}});
    EXPECT_EQ(r.exitCode, 3) << bad;  // cuInit fails: no silently different limit
    EXPECT_NE(r.err.find("CUDA_DEVICE_MEMORY_LIMIT"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(LimiterPreload, NvmlReportsTheLimitAndTheContainersUsage) {
  ProbeResult r = run({"nvml", "100"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "256m"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total"), 256 * kMiB);
  EXPECT_EQ(fieldU64(r.out, "used"), (100 + kContextMiB) * kMiB);
  EXPECT_EQ(fieldU64(r.out, "free"), (256 - 100 - kContextMiB) * kMiB);
  if (!field(r.out, "v2_total").empty()) {
    EXPECT_EQ(fieldU64(r.out, "v2_total"), 256 * kMiB);
    EXPECT_EQ(fieldU64(r.out, "v2_used"), (100 + kContextMiB) * kMiB);
  }
}

TEST_F(LimiterPreload, OversubscriptionFallsBackToManagedMemory) {
  // Managed memory larger than the device must work for this to be testable at all.
  ProbeResult managed = run({"alloc", "1536", "managed"}, {}, false);
  if (managed.exitCode != 0) {
    GTEST_SKIP() << "this driver cannot hold 1.5 GiB of managed memory on a 1 GiB device "
                    "(the fake charges managed memory to the device)";
  }
  // 1.5 GiB on a 1 GiB device: the driver refuses, unless the limit allows oversubscription.
  ProbeResult refused = run({"alloc", "1536"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"}});
  EXPECT_EQ(refused.exitCode, 2) << refused.err;
  ProbeResult over = run({"alloc", "1536"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"}, {"CUDA_OVERSUBSCRIBE", "true"}});
  EXPECT_EQ(over.exitCode, 0) << over.err;
  ProbeResult beyondLimit =
      run({"alloc", "5000"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "4g"}, {"CUDA_OVERSUBSCRIBE", "true"}});
  EXPECT_EQ(beyondLimit.exitCode, 2) << beyondLimit.err;
}

// ---- several processes of one container ----

TEST_F(LimiterPreload, EightRacingProcessesNeverExceedTheLimitTogether) {
  constexpr uint64_t kLimit = 200 * kMiB;
  std::vector<Running> probes;
  for (int i = 0; i < 8; ++i) probes.push_back(start({"race", "7"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "200m"}}));
  // All have a context first (its overhead is measured while nothing else allocates),
  // then all are let go at once.
  for (auto& p : probes) ASSERT_NE(readUntil(p, "ready\n", 30000).find("ready"), std::string::npos);
  for (auto& p : probes) ASSERT_EQ(write(p.in, "g", 1), 1);
  uint64_t total = 0;
  std::vector<std::string> outs;
  for (auto& p : probes) {
    std::string out = readUntil(p, "\n", 30000);
    outs.push_back(out);
    total += fieldU64(out, "got");
  }
  // All eight hold their memory now (a late one may not even have got a context):
  // neither the charged sum nor the simulated device exceeds the limit.
  EXPECT_LE(total, kLimit);
  const vgpu_region* region = nullptr;
  ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region").c_str(), &region, nullptr, 0), VGPU_REGION_OK);
  EXPECT_LE(region->devices[0].memory_used, kLimit);
  EXPECT_GE(region->devices[0].memory_used, total + kContextMiB * kMiB);
  // Each stopped only when refused, so the container is full to within one chunk.
  EXPECT_GT(region->devices[0].memory_used, kLimit - 7 * kMiB);
  vgpu_region_close(region);
  // Every probe holds its memory; ask one for what the simulated device really holds.
  EXPECT_EQ(write(probes[0].in, "p", 1), 1) << outs[0] << readAll(probes[0].errPath);
  std::string phys = readUntil(probes[0], "phys=", 10000);
  phys += readUntil(probes[0], "\n", 5000);
  outs[0] += phys;
  ASSERT_NE(phys.find("phys="), std::string::npos) << phys;
  EXPECT_LE(fieldU64(phys.substr(phys.find("phys=")), "phys"), kLimit) << phys;
  for (size_t i = 0; i < probes.size(); ++i) {
    ProbeResult r = finish(probes[i], 30000, outs[i]);
    EXPECT_EQ(r.exitCode, 0) << r.err;
  }
}

// The container's other processes hold all 1024 slots (idle, alive): the next process cannot
// be counted with them, so it gets no device memory, and says why, rather than a limit of
// its own.
TEST_F(LimiterPreload, AProcessFindingEverySlotTakenIsRefusedNotLetLoose) {
  vgpu_region* region = nullptr;
  char err[256] = "";
  ASSERT_EQ(vgpu_region_open((dir_ + "/region").c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  int slot = -1;
  for (int i = 0; i < VGPU_REGION_MAX_PROCS; ++i) ASSERT_EQ(vgpu_region_attach(region, &slot, err, sizeof err), VGPU_REGION_OK);
  ProbeResult r = run({"alloc", "10"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  EXPECT_EQ(r.exitCode, 2) << r.err;  // out of memory, from its first charge (its context) on
  EXPECT_NE(r.err.find("not counted in the container's shared region"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("all 1024 process slots"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  vgpu_region_detach(region, 5);  // one process of the container exits
  ProbeResult ok = run({"alloc", "10"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  vgpu_region_close(region);
}

// Two processes that are each pid 1 of a PID namespace of their own (a container in a
// container) are two processes of the container: neither takes the other's slot for its own.
TEST_F(LimiterPreload, ProcessesInNestedPidNamespacesAreCountedApart) {
  Running holder = start({"hold", "40"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}}, true, true);
  std::string held = readUntil(holder, "held", 30000);
  if (held.find("held") == std::string::npos) {
    ProbeResult h = finish(holder, 5000);
    if (h.exitCode == 77) GTEST_SKIP() << "no PID namespaces here (needs root)";
    FAIL() << "the holder did not start: " << h.err;
  }
  // 8 + 40 held, 8 + 40 more would be 96 MiB of 64.
  Running second = start({"alloc", "40"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}}, true, true);
  ProbeResult r = finish(second, 30000);
  EXPECT_EQ(r.exitCode, 2) << "the second pid 1 got memory the first one holds\n" << r.err;
  kill(holder.pid, SIGKILL);
  finish(holder, 5000);
}

TEST_F(LimiterPreload, KilledProcessDoesNotBlockOthersAndItsMemoryIsReclaimed) {
  Running holder = start({"hold", "150"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "200m"}});
  ASSERT_NE(readUntil(holder, "held", 30000).find("held"), std::string::npos);
  kill(holder.pid, SIGKILL);
  finish(holder, 5000);
  auto t0 = std::chrono::steady_clock::now();
  ProbeResult r = run({"alloc", "150"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "200m"}}, true, 15000);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// ---- a hostile tenant rewriting its region (issue 26; ctest label security) ----

class LimiterSecurity : public LimiterPreload {};

// One process holds 40 of 64 MiB; another process of the container zeroes the device's usage
// in the region. The next process must not get a fresh 64 MiB: the counters contradict each
// other (a slot holds more than the device sum), so it is refused, saying why.
TEST_F(LimiterSecurity, ZeroedUsageInTheRegionIsDetectedAndMemoryRefused) {
  Running holder = start({"hold", "40"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  ASSERT_NE(readUntil(holder, "held", 30000).find("held"), std::string::npos);
  vgpu_region* region = nullptr;
  char err[256] = "";
  ASSERT_EQ(vgpu_region_open((dir_ + "/region").c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  ASSERT_GE(region->devices[0].memory_used, 40 * kMiB);
  __atomic_store_n(&region->devices[0].memory_used, 0, __ATOMIC_RELAXED);  // the attack
  ProbeResult r = run({"alloc", "40"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  EXPECT_EQ(r.exitCode, 2) << "40 MiB more were handed out on top of the 40 held:\n" << r.err;
  EXPECT_NE(r.err.find("the region was rewritten"), std::string::npos) << r.err;
  kill(holder.pid, SIGKILL);
  finish(holder, 5000);
  vgpu_region_close(region);
}

// A region that cannot be used (here: the right size, the wrong contents) leaves no process
// with limits of its own: CUDA is refused, naming the region and the problem. A compute limit
// alone used to run on a private, full bucket.
TEST_F(LimiterSecurity, AnUnusableRegionRefusesCudaNamingTheProblem) {
  std::ofstream(dir_ + "/region") << std::string(sizeof(vgpu_region), 'x');
  for (const auto& limit : std::vector<std::map<std::string, std::string>>{
           {{"CUDA_DEVICE_SM_LIMIT", "25"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}},
           {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}}}) {
    ProbeResult r = run({"alloc", "10"}, limit);
    EXPECT_NE(r.exitCode, 0) << limit.begin()->first << ": " << r.err;
    EXPECT_NE(r.err.find("CUDA refused: the container's shared region"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is not a vgpu shared region"), std::string::npos) << r.err;
  }
  // Without any limit there is nothing to enforce: the region's state does not matter.
  ProbeResult free = run({"alloc", "10"});
  EXPECT_EQ(free.exitCode, 0) << free.err;
}

// The node agent made the region and named it by inode in the read-only limits file: a
// tenant that deletes or replaces it to start afresh gets CUDA refused, saying why.
TEST_F(LimiterSecurity, ADeletedOrReplacedRegionRefusesCuda) {
  vgpu_region* region = nullptr;
  char err[256] = "";
  ASSERT_EQ(vgpu_region_open((dir_ + "/region").c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  vgpu_region_close(region);
  struct stat st {};
  ASSERT_EQ(stat((dir_ + "/region").c_str(), &st), 0);
  std::ofstream(dir_ + "/limits.env") << "CUDA_DEVICE_MEMORY_LIMIT=64m\nVGPU_REGION_INODE=" << st.st_ino << "\n";
  const std::map<std::string, std::string> managed{{"VGPU_LIMITS_FILE", probePath("limits.env")}};
  ProbeResult ok = run({"alloc", "10"}, managed);
  ASSERT_EQ(ok.exitCode, 0) << ok.err;
  // A fresh region, made while the agent's still exists (so another inode), moved in its place.
  ASSERT_EQ(vgpu_region_open((dir_ + "/fresh").c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  vgpu_region_close(region);
  ASSERT_EQ(rename((dir_ + "/fresh").c_str(), (dir_ + "/region").c_str()), 0);
  ProbeResult replaced = run({"alloc", "10"}, managed);
  EXPECT_NE(replaced.exitCode, 0);
  EXPECT_NE(replaced.err.find("was replaced"), std::string::npos) << replaced.err;
  EXPECT_NE(replaced.err.find("CUDA refused"), std::string::npos) << replaced.err;
  ASSERT_EQ(unlink((dir_ + "/region").c_str()), 0);
  ProbeResult deleted = run({"alloc", "10"}, managed);
  EXPECT_NE(deleted.exitCode, 0);
  EXPECT_NE(deleted.err.find("it was deleted"), std::string::npos) << deleted.err;
}

// ---- HAMi-core's variables (issue 28) ----

// The node agent's limits file is what HAMi-core's environment is to HAMi-core: a container
// may narrow it (a script giving one process less), never widen it.
TEST_F(LimiterSecurity, TheEnvironmentCanTightenTheLimitsFileButNeverLoosenIt) {
  std::ofstream(dir_ + "/limits.env") << "CUDA_DEVICE_MEMORY_LIMIT_0=256m\n";
  const std::string file = probePath("limits.env");
  ProbeResult tighter = run({"meminfo"}, {{"VGPU_LIMITS_FILE", file}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "128m"}});
  ASSERT_EQ(tighter.exitCode, 0) << tighter.err;
  EXPECT_EQ(fieldU64(tighter.out, "total"), 128 * kMiB);
  ProbeResult looser = run({"meminfo"}, {{"VGPU_LIMITS_FILE", file},
                                         {"CUDA_DEVICE_MEMORY_LIMIT_0", "768m"},
                                         {"CUDA_OVERSUBSCRIBE", "true"},
                                         {"CUDA_DISABLE_CONTROL", "true"}});
  ASSERT_EQ(looser.exitCode, 0) << looser.err;
  EXPECT_EQ(fieldU64(looser.out, "total"), 256 * kMiB);
  ProbeResult refused = run({"alloc", "300"}, {{"VGPU_LIMITS_FILE", file}, {"CUDA_DISABLE_CONTROL", "true"}});
  EXPECT_EQ(refused.exitCode, 2) << "300 MiB given under a 256 MiB limit:\n" << refused.err;
}

// Said (at the warning level, HAMi-core's default) so nobody believes the container runs unlimited.
TEST_F(LimiterSecurity, CudaDisableControlIgnoredBesideALimitsFileIsSaid) {
  std::ofstream(dir_ + "/limits.env") << "CUDA_DEVICE_MEMORY_LIMIT_0=128m\n";
  ProbeResult r = run({"meminfo"}, {{"VGPU_LIMITS_FILE", probePath("limits.env")},
                                    {"CUDA_DISABLE_CONTROL", "true"},
                                    {"LIBCUDA_LOG_LEVEL", "2"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total"), 128 * kMiB);
  EXPECT_NE(r.err.find("CUDA_DISABLE_CONTROL=true is ignored"), std::string::npos) << r.err;
}

// Without a limits file (HAMi's device plugin sets the environment), CUDA_DISABLE_CONTROL=true
// means what it means there: the container runs as if the library were not loaded.
TEST_F(LimiterPreload, CudaDisableControlWithoutALimitsFileLeavesTheContainerUnlimited) {
  ProbeResult r = run({"meminfo"}, {{"CUDA_DISABLE_CONTROL", "true"},
                                    {"CUDA_DEVICE_MEMORY_LIMIT_0", "256m"},
                                    {"CUDA_DEVICE_SM_LIMIT", "30"},
                                    {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ProbeResult without = run({"meminfo"}, {}, false);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(fieldU64(r.out, "total"), kDeviceMiB * kMiB);
  EXPECT_EQ(r.out, without.out);
  EXPECT_NE(access((dir_ + "/region").c_str(), F_OK), 0);  // the container's region is left alone
  ProbeResult big = run({"alloc", "300"}, {{"CUDA_DISABLE_CONTROL", "1"}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "256m"}});
  EXPECT_EQ(big.exitCode, 0) << big.err;
}

// LIBCUDA_LOG_LEVEL as HAMi-core reads it (errors always; 2 warnings, 3 info, 4 debug) when
// LIBVGPU_LOG_LEVEL is unset; LIBVGPU_LOG_LEVEL wins.
TEST_F(LimiterPreload, LibcudaLogLevelMeansWhatItMeansToHamiCore) {
  ProbeResult info = run({"init"}, {{"LIBCUDA_LOG_LEVEL", "3"}});
  EXPECT_EQ(info.exitCode, 0) << info.err;
  EXPECT_NE(info.err.find("started: region"), std::string::npos) << info.err;
  EXPECT_EQ(info.out, "");
  ProbeResult ours = run({"init"}, {{"LIBCUDA_LOG_LEVEL", "3"}, {"LIBVGPU_LOG_LEVEL", "1"}});
  EXPECT_EQ(ours.err, "");
  for (const char* level : {"0", "1", "junk"}) {  // HAMi-core prints errors at every level
    ProbeResult err = run({"init"}, {{"LIBCUDA_LOG_LEVEL", level}, {"CUDA_DEVICE_MEMORY_LIMIT", "1GB"}});
    EXPECT_EQ(err.exitCode, 3) << level;
    EXPECT_NE(err.err.find("refusing to start"), std::string::npos) << level << ": " << err.err;
    EXPECT_EQ(err.err.find("started: region"), std::string::npos) << level << ": " << err.err;
  }
  ProbeResult none = run({"init"}, {{"LIBCUDA_LOG_LEVEL", "2"}, {"LIBVGPU_LOG_LEVEL", "0"},
                                    {"CUDA_DEVICE_MEMORY_LIMIT", "1GB"}});
  EXPECT_EQ(none.exitCode, 3);
  EXPECT_EQ(none.err.find("libvgpu"), std::string::npos) << none.err;  // the probe's own line only
}

// ---- interposition ----

TEST_F(LimiterPreload, ProcAddressReturnsTheWrapperOfExactlyTheRequestedVariant) {
  ProbeResult with = run({"procaddr"});
  ProbeResult without = run({"procaddr"}, {}, false);
  ASSERT_EQ(with.exitCode, 0) << with.err;
  ASSERT_EQ(without.exitCode, 0) << without.err;
  // Line by line: the same variant as the driver picks, ours where we wrap it.
  std::istringstream a(with.out), b(without.out);
  std::string la, lb;
  int lines = 0;
  while (std::getline(a, la) && std::getline(b, lb)) {
    ++lines;
    std::string va = la.substr(0, la.rfind(' ')), vb = lb.substr(0, lb.rfind(' '));
    EXPECT_EQ(va, vb);
    // "<request> -> rc=<n> <variant> <whose>": ours exactly when that variant is wrapped.
    std::string variant = va.substr(va.rfind(' ') + 1);
    EXPECT_EQ(la.substr(la.rfind(' ') + 1), hooked().count(variant) ? "vgpu" : "driver") << la;
  }
  EXPECT_EQ(lines, 29);
  // The driver hands out entry points of its own, not its exports, so these can only be
  // right if the wrapper is chosen by name, version and flags (CUDA 11.4: both fakes).
  for (const char* line : {"cuLaunchKernel@11040/2 -> rc=0 cuLaunchKernel_ptsz vgpu",
                           "cuLaunchKernel@11040/1 -> rc=0 cuLaunchKernel vgpu",
                           "cuLaunchKernel@6050/2 -> rc=0 cuLaunchKernel vgpu",
                           "cuMemAlloc@11040/0 -> rc=0 cuMemAlloc_v2 vgpu", "cuMemAlloc@3000/0 -> rc=0 cuMemAlloc vgpu",
                           "cuCtxCreate@11040/0 -> rc=0 cuCtxCreate_v3 vgpu",
                           "cuCtxCreate@3000/0 -> rc=0 cuCtxCreate vgpu",
                           "cuMemAllocAsync@11040/2 -> rc=0 cuMemAllocAsync_ptsz vgpu",
                           "cuGetProcAddress@11040/0 -> rc=0 cuGetProcAddress vgpu",
                           "cuCtxDestroy@3000/0 -> rc=0 cuCtxDestroy vgpu",  // wrapped since issue 36
                           // wrapped since the coverage follow-up of issue 36
                           "cuDevicePrimaryCtxRelease@10000/0 -> rc=0 cuDevicePrimaryCtxRelease vgpu",
                           // Older ABIs that are not wrapped stay the driver's, never another ABI's wrapper.
                           "cuDeviceTotalMem@3000/0 -> rc=0 cuDeviceTotalMem driver",
                           "cuDeviceGetName@11040/0 -> rc=0 cuDeviceGetName driver"}) {
    EXPECT_NE(with.out.find(line), std::string::npos) << line << "\n" << with.out;
  }
}

TEST_F(LimiterPreload, PassthroughFunctionsBehaveExactlyAsWithoutTheLibrary) {
  ProbeResult with = run({"passthrough"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "512m"}});
  ProbeResult without = run({"passthrough"}, {}, false);
  ASSERT_EQ(without.exitCode, 0) << without.err;
  EXPECT_EQ(with.exitCode, 0) << with.err;
  EXPECT_EQ(with.out, without.out);
  EXPECT_NE(with.out.find("unwrapped symbol from driver"), std::string::npos);
  EXPECT_NE(with.out.find("rtld_next matches default: yes"), std::string::npos);
}

TEST_F(LimiterPreload, StdoutStaysCleanEvenWithDebugLogging) {
  ProbeResult ok = run({"alloc", "10"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}, {"LIBVGPU_LOG_LEVEL", "4"}});
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_EQ(ok.out, "");
  EXPECT_NE(ok.err.find("libvgpu"), std::string::npos);  // the log went to stderr
  ProbeResult refused = run({"alloc", "100"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}, {"LIBVGPU_LOG_LEVEL", "4"}});
  EXPECT_EQ(refused.exitCode, 2);
  EXPECT_EQ(refused.out, "");
  ProbeResult quiet = run({"alloc", "100"}, {{"CUDA_DEVICE_MEMORY_LIMIT", "64m"}});
  EXPECT_EQ(quiet.exitCode, 2);
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(quiet.err.find("libvgpu"), std::string::npos) << "diagnostics must be off by default";
}

// ---- compute ----

class LimiterCompute : public LimiterPreload, public ::testing::WithParamInterface<int> {};

// What an unthrottled workload reaches moves with the machine's load between two runs (seen:
// 64 % before a limited run that then got 58.7 % of a 90 % limit, the unreachable part
// only capped). When the limited run fell short of what was measured before it, the
// workload is measured again after it, and the lower of the two bounds it from below.
double LimiterPreload::reachableAround(double before, double share, int limit, const std::vector<std::string>& bare) {
  if (share >= std::min<double>(limit, before) - 5.0) return before;
  ProbeResult after = run(bare, {}, false);
  if (after.exitCode != 0) return before;
  return std::min(before, strtod(field(after.out, "share").c_str(), nullptr) * 100);
}

TEST_P(LimiterCompute, BusyWorkloadTracksTheLimitWithinFivePoints) {
  int limit = GetParam();
  // What this workload reaches unthrottled on this machine right now (its own launch and
  // synchronisation gaps): a limit above that cannot be reached, only capped.
  double reachable = 100.0;
  if (limit > 50) {
    ProbeResult bare = run({"compute", "700", "1000"}, {}, false);
    ASSERT_EQ(bare.exitCode, 0) << bare.err;
    reachable = strtod(field(bare.out, "share").c_str(), nullptr) * 100;
  }
  ProbeResult r = run({"compute", "1500", "1000"},
                      {{"CUDA_DEVICE_SM_LIMIT", std::to_string(limit)}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  double share = strtod(field(r.out, "share").c_str(), nullptr) * 100;
  // The cap always holds; below it the share reaches the limit, or what the workload
  // reaches at all (measured a moment before, so it only bounds from below).
  EXPECT_LE(share, limit + 5.0) << r.out;
  if (limit > 50) reachable = reachableAround(reachable, share, limit, {"compute", "700", "1000"});
  EXPECT_GE(share, std::min<double>(limit, reachable) - 5.0) << r.out << "unthrottled: " << reachable;
}

INSTANTIATE_TEST_SUITE_P(Limits, LimiterCompute, ::testing::Values(10, 30, 50, 90));

// Short and long kernels alike (issue 25: 20 us kernels got 42 % of a 50 % limit): the
// limit is met within five points from 20 us to 10 ms per kernel.
struct KernelCase {
  int kernelUs;
  int limit;
  int syncEvery;  // launches between two waits for the device
};

std::string kernelCaseName(const KernelCase& c) {
  return std::to_string(c.kernelUs) + "us_" + std::to_string(c.limit) + "pct_sync" + std::to_string(c.syncEvery);
}
void PrintTo(const KernelCase& c, std::ostream* os) { *os << kernelCaseName(c); }

class LimiterComputeKernels : public LimiterPreload, public ::testing::WithParamInterface<KernelCase> {};

TEST_P(LimiterComputeKernels, MeetTheLimitWithinFivePoints) {
  const KernelCase& c = GetParam();
  std::string us = std::to_string(c.kernelUs), sync = std::to_string(c.syncEvery);
  double reachable = 100.0;
  if (c.limit > 50) {
    ProbeResult bare = run({"compute", "700", us, "0", sync}, {}, false);
    ASSERT_EQ(bare.exitCode, 0) << bare.err;
    reachable = strtod(field(bare.out, "share").c_str(), nullptr) * 100;
  }
  ProbeResult r = run({"compute", "1500", us, "200", sync},
                      {{"CUDA_DEVICE_SM_LIMIT", std::to_string(c.limit)}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  double share = strtod(field(r.out, "share").c_str(), nullptr) * 100;
  EXPECT_LE(share, c.limit + 5.0) << r.out;
  if (c.limit > 50) reachable = reachableAround(reachable, share, c.limit, {"compute", "700", us, "0", sync});
  EXPECT_GE(share, std::min<double>(c.limit, reachable) - 5.0) << r.out << "unthrottled: " << reachable;
}

INSTANTIATE_TEST_SUITE_P(Kernels, LimiterComputeKernels,
                         ::testing::Values(KernelCase{20, 50, 8}, KernelCase{20, 90, 8}, KernelCase{20, 50, 32},
                                           KernelCase{100, 30, 8}, KernelCase{10000, 50, 32},
                                           KernelCase{10000, 90, 32}),
                         [](const ::testing::TestParamInfo<KernelCase>& info) { return kernelCaseName(info.param); });

// ---- when the limit applies (GPU_CORE_UTILIZATION_POLICY) and priorities ----

double ownShare(const ProbeResult& r) { return strtod(field(r.out, "own").c_str(), nullptr) * 100; }

// HAMi's default: a tenant alone on its GPU is not held to its compute limit.
TEST_F(LimiterPreload, TheDefaultPolicyLeavesATenantAloneOnItsGpuUnthrottled) {
  ProbeResult r = run({"compute", "1200", "1000", "300"}, {{"CUDA_DEVICE_SM_LIMIT", "30"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_GE(ownShare(r), 70.0) << r.out;
}

// Two containers (two regions) on one GPU, each limited to 30 %: once each sees the other
// running kernels, both are held to their limit; with `disable`, neither is.
TEST_F(LimiterPreload, TheDefaultPolicyThrottlesWhileAnotherTenantRunsKernels) {
  for (const char* policy : {"default", "disable"}) {
    std::vector<Running> tenants;
    for (const char* name : {"a", "b"}) {
      tenants.push_back(start({"compute", "1500", "1000", "700"},
                              {{"CUDA_DEVICE_SM_LIMIT", "30"},
                               {"GPU_CORE_UTILIZATION_POLICY", policy},
                               {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath(std::string("region-") + policy + name)}}));
    }
    for (auto& t : tenants) {
      ProbeResult r = finish(t, 30000);
      ASSERT_EQ(r.exitCode, 0) << r.err;
      if (std::string(policy) == "default") {
        // At most the limit; somewhat below it, since a burst's GPU time also holds the other
        // tenant's kernels that ran between its own (docs/limiter.md, section 5).
        EXPECT_LE(ownShare(r), 35.0) << policy << "\n" << r.out;
        EXPECT_GE(ownShare(r), 20.0) << policy << "\n" << r.out;
      } else {
        EXPECT_GE(ownShare(r), 40.0) << policy << "\n" << r.out;  // about half of the device each
      }
    }
  }
}

// CUDA_TASK_PRIORITY: while a high-priority (0) tenant runs kernels on the GPU, a low-priority
// (1) tenant's launches wait; neither has a compute limit. The two announce and read through
// the node's activity board.
TEST_F(LimiterPreload, ALowPriorityTenantWaitsWhileAHighPriorityOneRunsKernels) {
  ASSERT_EQ(mkdir((dir_ + "/board").c_str(), 0777), 0);
  Running high = start({"compute", "1500", "1000", "500"}, {{"CUDA_TASK_PRIORITY", "0"},
                                                            {"VGPU_ACTIVITY_BOARD", probePath("board")},
                                                            {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath("region-high")}});
  Running low = start({"compute", "1500", "1000"}, {{"CUDA_TASK_PRIORITY", "1"},
                                                           {"VGPU_ACTIVITY_BOARD", probePath("board")},
                                                           {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath("region-low")}});
  ProbeResult h = finish(high, 30000);
  ProbeResult l = finish(low, 30000);
  ASSERT_EQ(h.exitCode, 0) << h.err;
  ASSERT_EQ(l.exitCode, 0) << l.err;  // and it did run, once the high-priority tenant was done
  // Over the high-priority tenant's measured second and a half, the device ran its kernels
  // and (nearly) nobody else's.
  double all = strtod(field(h.out, "share").c_str(), nullptr) * 100;
  EXPECT_GE(ownShare(h), 80.0) << "high:\n" << h.out << "low:\n" << l.out;
  EXPECT_LE(all - ownShare(h), 10.0) << "high:\n" << h.out << "low:\n" << l.out;
  const vgpu_region* view = nullptr;
  ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region-low").c_str(), &view, nullptr, 0), VGPU_REGION_OK);
  EXPECT_GT(view->devices[0].compute_held_ns, 500'000'000u);  // it waited, and the agent can see it
  vgpu_region_close(view);
}

TEST_F(LimiterPreload, ComputeLimitOfHundredOrZeroDoesNotThrottle) {
  for (const char* limit : {"100", "0"}) {
    std::string region = dir_ + "/region-" + limit;
    ProbeResult r = run({"compute", "300", "1000"},
                        {{"CUDA_DEVICE_SM_LIMIT", limit},
                         {"GPU_CORE_UTILIZATION_POLICY", "force"},
                         {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath("region-") + limit}});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    // The throttle never engaged: no burst was measured, nothing was held back.
    const vgpu_region* view = nullptr;
    ASSERT_EQ(vgpu_region_open_readonly(region.c_str(), &view, nullptr, 0), VGPU_REGION_OK);
    EXPECT_EQ(view->devices[0].compute_busy_ns, 0u) << limit;
    EXPECT_EQ(view->devices[0].compute_held_ns, 0u) << limit;
    vgpu_region_close(view);
    EXPECT_GT(fieldU64(r.out, "launches"), 0u) << limit << ": " << r.out;
  }
  // And the same program with a limit does engage it (the check above can fail).
  std::string region = dir_ + "/region-50";
  ProbeResult r = run({"compute", "300", "1000"}, {{"CUDA_DEVICE_SM_LIMIT", "50"},
                                                   {"GPU_CORE_UTILIZATION_POLICY", "force"},
                                                   {"CUDA_DEVICE_MEMORY_SHARED_CACHE", probePath("region-50")}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const vgpu_region* view = nullptr;
  ASSERT_EQ(vgpu_region_open_readonly(region.c_str(), &view, nullptr, 0), VGPU_REGION_OK);
  EXPECT_GT(view->devices[0].compute_busy_ns, 0u);
  EXPECT_GT(view->devices[0].compute_held_ns, 0u);
  vgpu_region_close(view);
}

// A limit is a cap whatever else the program does: more contexts than any fixed table would
// hold, or a context whose events the driver freed (cuDevicePrimaryCtxReset).
TEST_F(LimiterPreload, FortyContextsAreThrottledLikeOne) {
  ProbeResult r = run({"manyctx", "40", "1000"}, {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  double share = strtod(field(r.out, "share").c_str(), nullptr) * 100;
  EXPECT_LE(share, 35.0) << r.out;
  EXPECT_GE(share, 25.0) << r.out;
}

TEST_F(LimiterPreload, ThrottlingGoesOnAfterThePrimaryContextIsReset) {
  ProbeResult r = run({"primaryreset", "800"}, {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  double before = strtod(field(r.out, "share_before").c_str(), nullptr) * 100;
  double after = strtod(field(r.out, "share_after").c_str(), nullptr) * 100;
  EXPECT_LE(before, 35.0) << r.out;
  EXPECT_LE(after, 35.0) << r.out;
  EXPECT_GE(after, 25.0) << r.out;
}

// A kernel that waits (cuStreamWaitValue32) for a value another thread writes after launches
// of its own on another stream: the throttle must never wait on the GPU while that thread
// needs to get through, nor wait on a burst that cannot finish before later launches.
TEST_F(LimiterPreload, AKernelWaitingForALaterLaunchDoesNotDeadlockTheThrottle) {
  auto t0 = std::chrono::steady_clock::now();
  ProbeResult r = run({"twostreams"}, {{"CUDA_DEVICE_SM_LIMIT", "50"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}}, true,
                      20000);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(field(r.out, "done"), "1") << r.out;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// The limiter and this test must agree on which fake driver runs (ctest registers R470.*
// with the R470-like one, lib/fakegpu-r470).
TEST_F(LimiterPreload, RunsAgainstTheDriverItWasRegisteredFor) {
  ProbeResult r = run({"driverversion"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::string dir = fakeLibPath();
  bool r470 = dir.size() >= 12 && dir.compare(dir.size() - 12, 12, "fakegpu-r470") == 0;
  EXPECT_EQ(field(r.out, "driver"), r470 ? "11040" : "13000") << dir;
}

// A driver without event timing at all (a broken one: every supported driver has
// cuEventElapsedTime) leaves a compute limit that cannot be enforced: said once on stderr at
// start, published in the region for the node agent, and no pretending in between.
TEST_F(LimiterPreload, AComputeLimitThatCannotBeEnforcedIsSaidOnceAndPublished) {
  if (!root_.empty() || getenv("VGPU_TEST_FAKE_GPU_DIR") != nullptr) GTEST_SKIP() << "runs with the default fakes only";
  libPath_ = std::string(VGPU_FAKE_NO_TIMING_LIB_PATH) + ":" + libPath_;
  ProbeResult r = run({"compute", "300", "1000"}, {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::string said = "the compute limit is NOT enforced: the driver has no cuEventElapsedTime";
  ASSERT_NE(r.err.find(said), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(said), r.err.rfind(said)) << "said more than once: " << r.err;
  EXPECT_EQ(r.out.find("NOT"), std::string::npos);  // stdout stays the program's
  const vgpu_region* view = nullptr;
  ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region").c_str(), &view, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(view->devices[0].unenforced, VGPU_REGION_UNENFORCED_COMPUTE);
  EXPECT_EQ(view->devices[0].compute_held_ns, 0u);  // not half-throttled either
  vgpu_region_close(view);
  // With the driver's timing present, nothing is unenforced and nothing is said.
  libPath_ = fakeLibPath();
  std::system(("rm -f " + dir_ + "/region").c_str());
  ProbeResult ok = run({"compute", "300", "1000"}, {{"CUDA_DEVICE_SM_LIMIT", "30"}, {"GPU_CORE_UTILIZATION_POLICY", "force"}});
  ASSERT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
  ASSERT_EQ(vgpu_region_open_readonly((dir_ + "/region").c_str(), &view, nullptr, 0), VGPU_REGION_OK);
  EXPECT_EQ(view->devices[0].unenforced, 0u);
  vgpu_region_close(view);
}

// ---- an old userland: every process of the container loads the library ----

// /etc/ld.so.preload names the library, so every program of the root loads it, CUDA or not:
// with a symbol version its glibc lacks, none would start. LD_BIND_NOW makes the loader
// resolve every symbol at start, not only those a program happens to call.
TEST_F(LimiterPreload, EveryProgramOfTheRootStartsWithTheLibraryInLdSoPreload) {
  if (root_.empty()) GTEST_SKIP() << "runs only in an old root (VGPU_TEST_OLD_ROOT; ctest's OldRoot.* tests)";
  // The root's own file stays empty; each program here gets the listing bind-mounted over it.
  std::string rootPreload = root_ + "/etc/ld.so.preload";
  if (access(rootPreload.c_str(), F_OK) != 0) std::ofstream(rootPreload).flush();
  std::ofstream(dir_ + "/ld.so.preload") << libvgpu_ << "\n";
  struct Program {
    std::vector<std::string> argv;
    std::string out;
  } programs[] = {
      {{"/bin/true"}, ""},
      {{"/bin/sh", "-c", "echo started"}, "started\n"},
      {{"/bin/ls", "-d", "/etc"}, "/etc\n"},
      {{"/usr/bin/apt-get", "--version"}, ""},  // C++ (libstdc++ of the root)
  };
  for (bool bindNow : {false, true}) {
    for (const Program& p : programs) {
      int outPipe[2];
      ASSERT_EQ(pipe(outPipe), 0);
      std::string errPath = dir_ + "/stderr.preload";
      pid_t pid = fork();
      if (pid == 0) {
        dup2(outPipe[1], 1);
        int err = open(errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(err, 2);
        if (!enterRoot(root_, dir_ + "/ld.so.preload")) _exit(126);
        std::vector<char*> argv;
        for (const auto& a : p.argv) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        std::string bind = "LD_BIND_NOW=1";
        char* envp[] = {const_cast<char*>("PATH=/usr/bin:/bin"), bindNow ? bind.data() : nullptr, nullptr};
        execve(argv[0], argv.data(), envp);
        _exit(127);
      }
      close(outPipe[1]);
      std::string out;
      char buf[4096];
      ssize_t n;
      while ((n = read(outPipe[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
      close(outPipe[0]);
      int status = 0;
      waitpid(pid, &status, 0);
      std::string what = p.argv[0] + (bindNow ? " (LD_BIND_NOW)" : "");
      ASSERT_TRUE(WIFEXITED(status)) << what;
      EXPECT_EQ(WEXITSTATUS(status), 0) << what << ": " << readAll(errPath);
      EXPECT_EQ(readAll(errPath), "") << what;
      if (!p.out.empty()) {
        EXPECT_EQ(out, p.out) << what;
      }
    }
  }
}

}  // namespace
