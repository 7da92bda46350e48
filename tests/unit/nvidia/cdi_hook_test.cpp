// vgpu-cdi-hook: cgroup resolution (both drivers, both cgroup versions), its arguments, and
// the program itself run as a runtime runs it: OCI state on stdin, a bundle, a cgroup tree,
// against the fake NVML, whose state file then holds the limit under the cgroup's path.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cgroup_path.h"
#include "fake_gpu_state.h"
#include "memory_limit_hook.h"
#include "nvidia_test_support.h"

namespace vgpu::nvidia::hook {
namespace {
namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::TempDir;

TEST(CdiHookCgroup, FindsTheMemoryCgroupInProcCgroup) {
  EXPECT_EQ(memoryCgroupFromProc("0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope\n").value(),
            "kubepods.slice/kubepods-pod1.slice/cri-containerd-c1.scope");
  // v1 (and hybrid: memory is the v1 controller's).
  EXPECT_EQ(memoryCgroupFromProc("12:cpu,cpuacct:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n0::/\n").value(),
            "memory/kubepods/pod1/c1");
  EXPECT_EQ(memoryCgroupFromProc("3:memory,hugetlb:/kubepods/burstable/pod2/c2\n").value(),
            "memory/kubepods/burstable/pod2/c2");
  EXPECT_THAT(memoryCgroupFromProc("0::/\n").error().message, HasSubstr("root cgroup"));
  EXPECT_THAT(memoryCgroupFromProc("4:memory:/\n").error().message, HasSubstr("root memory cgroup"));
  EXPECT_THAT(memoryCgroupFromProc("garbage\n").error().message, HasSubstr("no cgroup v2 line"));
  EXPECT_THAT(memoryCgroupFromProc("").error().message, HasSubstr("no cgroup v2 line"));
}

TEST(CdiHookCgroup, ExpandsCgroupsPathOfBothCgroupDrivers) {
  // systemd driver: slice:prefix:name.
  EXPECT_EQ(memoryCgroupFromCgroupsPath("kubepods-burstable-pod1.slice:cri-containerd:c1", false).value(),
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-c1.scope");
  EXPECT_EQ(memoryCgroupFromCgroupsPath("kubepods-pod1.slice:crio:c1", true).value(),
            "memory/kubepods.slice/kubepods-pod1.slice/crio-c1.scope");
  EXPECT_EQ(memoryCgroupFromCgroupsPath("-.slice:docker:c1", false).value(), "docker-c1.scope");
  // cgroupfs driver: a path.
  EXPECT_EQ(memoryCgroupFromCgroupsPath("/kubepods/burstable/pod1/c1", false).value(), "kubepods/burstable/pod1/c1");
  EXPECT_EQ(memoryCgroupFromCgroupsPath("/kubepods/pod1/c1", true).value(), "memory/kubepods/pod1/c1");
  EXPECT_THAT(memoryCgroupFromCgroupsPath("kubepods/pod1", false).error().message, HasSubstr("neither"));
  EXPECT_THAT(memoryCgroupFromCgroupsPath("pods:crio:c1", false).error().message, HasSubstr("not a systemd slice"));
  EXPECT_THAT(memoryCgroupFromCgroupsPath("a--b.slice:crio:c1", false).error().message, HasSubstr("empty part"));
  EXPECT_THAT(memoryCgroupFromCgroupsPath("/kubepods/../etc", false).error().message, HasSubstr(".."));
  EXPECT_THAT(memoryCgroupFromCgroupsPath("/", false).error().message, HasSubstr("root cgroup"));
}

TEST(CdiHookArgs, ParsesDevicesAndPolicies) {
  auto o = parseHookArgs({"memory-limits", "--device", "GPU-a=8000", "--device", "GPU-b=100", "--soft-limit", "hard",
                          "--on-failure", "preload-only"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->devices.size(), 2u);
  EXPECT_EQ(o->devices[0].uuid, "GPU-a");
  EXPECT_EQ(o->devices[0].memoryMiB, 8000u);
  EXPECT_EQ(o->soft, SoftLimit::kHard);
  EXPECT_TRUE(o->preloadOnlyAcceptable);
  EXPECT_EQ(o->sysRoot, "/sys");
  for (const auto& [args, why] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "expected the command memory-limits"},
           {{"set-limits"}, "expected the command memory-limits"},
           {{"memory-limits"}, "no --device"},
           {{"memory-limits", "--device"}, "--device needs a value"},
           {{"memory-limits", "--device", "GPU-a"}, "expected <GPU UUID>=<MiB>"},
           {{"memory-limits", "--device", "GPU-a=0"}, "expected <GPU UUID>=<MiB>"},
           {{"memory-limits", "--device", "GPU-a=12x"}, "expected <GPU UUID>=<MiB>"},
           {{"memory-limits", "--device", "=12"}, "expected <GPU UUID>=<MiB>"},
           {{"memory-limits", "--device", "GPU-a=1", "--soft-limit", "half"}, "expected none or hard"},
           {{"memory-limits", "--device", "GPU-a=1", "--on-failure", "ignore"}, "expected fail or preload-only"},
           {{"memory-limits", "--device", "GPU-a=1", "--sys-root", "sys"}, "absolute path"},
           {{"memory-limits", "--device", "GPU-a=1", "--bogus", "x"}, "unknown argument --bogus"},
       }) {
    auto bad = parseHookArgs(args);
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.error().message, HasSubstr(why));
  }
}

constexpr const char* kGpu0 = "GPU-fa4e0000-0000-4000-8000-000000000000";
constexpr const char* kGpu1 = "GPU-fa4e0000-0000-4000-8000-000000000001";
constexpr std::uint64_t kMiB = 1ull << 20;

struct HookRun {
  int exitCode = -1;
  std::string err;
};

// The hook as a runtime runs it: a process, the OCI state on its stdin.
class CdiHookProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "NVML sets memory limits for root only";
    sys_ = dir_.path() / "sys";
    fs::create_directories(sys_ / "fs/cgroup");
    dir_.write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n");
    rel_ = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-c1.scope";
    fs::create_directories(sys_ / "fs/cgroup" / rel_);
    dir_.write("proc/4242/cgroup", "0::/" + rel_ + "\n");
    dir_.write("bundle/config.json",
               R"({"ociVersion":"1.2.0","linux":{"cgroupsPath":"kubepods-burstable-pod1.slice:cri-containerd:c1"}})");
    conf_ = dir_.write("gpus.conf", "gpu memory_mib=16384\ngpu memory_mib=16384\n").string();
    state_ = (dir_.path() / "gpu.state").string();
  }
  std::string ociState(int pid = 4242) const {
    return R"({"ociVersion":"1.2.0","id":"c1","status":"creating","pid":)" + std::to_string(pid) +
           R"(,"bundle":")" + (dir_.path() / "bundle").string() + "\"}";
  }
  std::vector<std::string> args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{"vgpu-cdi-hook", "memory-limits", "--device", std::string(kGpu0) + "=8000",
                               "--device", std::string(kGpu1) + "=4000", "--sys-root", sys_.string(),
                               "--proc-root", (dir_.path() / "proc").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  HookRun run(const std::vector<std::string>& argv, const std::string& stdinText,
          const std::string& libDir = VGPU_FAKE_GPU_LIB_DIR) const {
    int in[2], err[2];
    if (pipe(in) != 0 || pipe(err) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(err[1], 2);
      close(in[1]);
      close(err[0]);
      setenv("LD_LIBRARY_PATH", libDir.c_str(), 1);
      setenv("VGPU_FAKE_GPU_CONFIG", conf_.c_str(), 1);
      setenv("VGPU_FAKE_GPU_STATE", state_.c_str(), 1);
      std::vector<char*> cargv;
      for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
      cargv.push_back(nullptr);
      execv(VGPU_CDI_HOOK_BINARY, cargv.data());
      _exit(127);
    }
    close(in[0]);
    close(err[1]);
    (void)!write(in[1], stdinText.data(), stdinText.size());
    close(in[1]);
    HookRun r;
    char buf[4096];
    for (ssize_t n; (n = read(err[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<size_t>(n));
    close(err[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }
  // The limits the fake NVML recorded, read from its state file.
  std::vector<vgpu_fake_memory_limit> recorded() const {
    std::vector<vgpu_fake_memory_limit> out;
    const int fd = open(state_.c_str(), O_RDONLY);
    if (fd < 0) return out;
    void* m = mmap(nullptr, sizeof(vgpu_fake_gpu_state), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return out;
    for (const auto& l : static_cast<const vgpu_fake_gpu_state*>(m)->memory_limits.limits)
      if (l.dev >= 0) out.push_back(l);
    munmap(m, sizeof(vgpu_fake_gpu_state));
    return out;
  }
  TempDir dir_;
  fs::path sys_;
  std::string rel_, conf_, state_;
};

TEST_F(CdiHookProcess, SetsTheHardLimitOfTheContainerCgroupOnEachGpu) {
  auto r = run(args(), ociState());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("driver memory limit set for cgroup " + (sys_ / "fs/cgroup" / rel_).string()));
  auto limits = recorded();
  ASSERT_EQ(limits.size(), 2u);
  for (const auto& l : limits) {
    EXPECT_EQ(std::string(l.name_space), (sys_ / "fs/cgroup" / rel_).string());
    EXPECT_EQ(l.soft_bytes, 0u);
    EXPECT_EQ(l.hard_bytes, (l.dev == 0 ? 8000 : 4000) * kMiB);
  }
  // --soft-limit hard: the slice is guaranteed too.
  ASSERT_EQ(run(args({"--soft-limit", "hard"}), ociState()).exitCode, 0);
  for (const auto& l : recorded()) EXPECT_EQ(l.soft_bytes, l.hard_bytes);
}

TEST_F(CdiHookProcess, UsesTheV1MemoryControllerAndTheCgroupsPathWhenProcHasNone) {
  fs::remove(sys_ / "fs/cgroup/cgroup.controllers");  // v1
  fs::create_directories(sys_ / "fs/cgroup/memory/kubepods/pod1/c1");
  dir_.write("proc/4242/cgroup", "7:devices:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n");
  ASSERT_EQ(run(args(), ociState()).exitCode, 0);
  auto limits = recorded();
  ASSERT_FALSE(limits.empty());
  EXPECT_EQ(std::string(limits[0].name_space), (sys_ / "fs/cgroup/memory/kubepods/pod1/c1").string());

  // No /proc entry (the runtime's view of the process is gone): config.json's cgroupsPath.
  dir_.write("bundle/config.json", R"({"linux":{"cgroupsPath":"/kubepods/pod1/c2"}})");
  fs::create_directories(sys_ / "fs/cgroup/memory/kubepods/pod1/c2");
  auto r = run(args(), ociState(5151));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  bool found = false;
  for (const auto& l : recorded()) found = found || std::string(l.name_space) == (sys_ / "fs/cgroup/memory/kubepods/pod1/c2").string();
  EXPECT_TRUE(found);
}

// A createContainer hook runs in the container's namespaces, the cgroup namespace too: there
// /proc/<pid>/cgroup reads "0::/" and the bundle's linux.cgroupsPath says where it is.
TEST_F(CdiHookProcess, InTheContainersCgroupNamespaceTheCgroupsPathNamesTheCgroup) {
  dir_.write("proc/4242/cgroup", "0::/\n");
  auto r = run(args(), ociState());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto limits = recorded();
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_EQ(std::string(limits[0].name_space), (sys_ / "fs/cgroup" / rel_).string());
}

TEST_F(CdiHookProcess, AnyFailureFailsTheContainerStartWithAClearMessage) {
  // A cgroup that is not there.
  fs::remove_all(sys_ / "fs/cgroup" / rel_);
  auto noCgroup = run(args(), ociState());
  EXPECT_EQ(noCgroup.exitCode, 1);
  EXPECT_THAT(noCgroup.err, HasSubstr("refusing to start it"));
  EXPECT_THAT(noCgroup.err, HasSubstr("which does not exist"));
  fs::create_directories(sys_ / "fs/cgroup" / rel_);
  // Not an OCI state.
  auto garbage = run(args(), "not json");
  EXPECT_EQ(garbage.exitCode, 1);
  EXPECT_THAT(garbage.err, HasSubstr("the OCI state on stdin is not a JSON object"));
  EXPECT_THAT(run(args(), R"({"bundle":"/x"})").err, HasSubstr("has no pid"));
  // A GPU the node does not have.
  auto unknown = run({"vgpu-cdi-hook", "memory-limits", "--device", "GPU-00000000-dead-beef-0000-000000000000=10",
                      "--sys-root", sys_.string(), "--proc-root", (dir_.path() / "proc").string()},
                     ociState());
  EXPECT_EQ(unknown.exitCode, 1);
  EXPECT_THAT(unknown.err, HasSubstr("nvmlDeviceGetHandleByUUID returned"));
  // Bad arguments: exit 2.
  auto usage = run({"vgpu-cdi-hook", "memory-limits"}, ociState());
  EXPECT_EQ(usage.exitCode, 2);
  EXPECT_THAT(usage.err, HasSubstr("no --device"));
  EXPECT_TRUE(recorded().empty());
}

TEST_F(CdiHookProcess, ADriverWithoutTheCallFailsUnlessPreloadOnlyIsAcceptable) {
  const std::string older = VGPU_FAKE_GPU_NO_MEMLIMITS_LIB_DIR ":" VGPU_FAKE_GPU_LIB_DIR;
  auto refused = run(args(), ociState(), older);
  EXPECT_EQ(refused.exitCode, 1);
  EXPECT_THAT(refused.err, HasSubstr("has no nvmlDeviceSetMemoryLimits_v1"));
  auto warned = run(args({"--on-failure", "preload-only"}), ociState(), older);
  EXPECT_EQ(warned.exitCode, 0) << warned.err;
  EXPECT_THAT(warned.err, HasSubstr("warning: no driver memory limit, libvgpu.so alone enforces memory"));
  EXPECT_TRUE(recorded().empty());
}

TEST_F(CdiHookProcess, RemovingTheContainerCgroupClearsItsLimits) {
  ASSERT_EQ(run(args(), ociState()).exitCode, 0);
  ASSERT_EQ(recorded().size(), 2u);
  fs::remove_all(sys_ / "fs/cgroup" / rel_);  // the container is gone
  // The next NVML call (here: the hook of another container) finds the limits cleared.
  const std::string other = "kubepods.slice/kubepods-pod2.slice/cri-containerd-c2.scope";
  fs::create_directories(sys_ / "fs/cgroup" / other);
  dir_.write("proc/4343/cgroup", "0::/" + other + "\n");
  ASSERT_EQ(run(args(), ociState(4343)).exitCode, 0);
  auto limits = recorded();
  ASSERT_EQ(limits.size(), 2u);
  for (const auto& l : limits) EXPECT_EQ(std::string(l.name_space), (sys_ / "fs/cgroup" / other).string());
}

// The runtime runs the hook on the host, whatever its distribution: it asks for no glibc newer
// than 2.17 and no libstdc++ newer than GCC 5's (GLIBCXX_3.4.21, CXXABI_1.3.9), so it runs on
// CentOS 7 / RHEL 8 / Ubuntu 18.04 hosts too (the build machine has glibc 2.36, GCC 12).
TEST(CdiHookBinary, NeedsNoGlibcNewerThan217NorLibstdcxxNewerThanGcc5) {
  std::string out;
  if (FILE* p = popen("readelf -V --wide " VGPU_CDI_HOOK_BINARY, "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  std::istringstream lines(out);
  std::string line;
  const std::regex need(R"(Name: (GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+))");
  int seen = 0;
  auto newer = [](const std::string& version, std::vector<int> most) {
    std::istringstream parts(version);
    std::string part;
    for (size_t i = 0; std::getline(parts, part, '.'); ++i) {
      const int v = std::stoi(part), m = i < most.size() ? most[i] : 0;
      if (v != m) return v > m;
    }
    return false;
  };
  while (std::getline(lines, line)) {
    std::smatch m;
    if (line.find("File:") != std::string::npos || !std::regex_search(line, m, need)) continue;
    ++seen;
    const std::string lib = m[1], v = m[2];
    const std::map<std::string, std::vector<int>> most{
        {"GLIBC", {2, 17}}, {"GLIBCXX", {3, 4, 21}}, {"CXXABI", {1, 3, 9}}, {"GCC", {4, 2}}};
    EXPECT_FALSE(newer(v, most.at(lib))) << line;
  }
  EXPECT_GT(seen, 0) << "readelf -V listed no version needs for " VGPU_CDI_HOOK_BINARY << "\n" << out;
}

}  // namespace
}  // namespace vgpu::nvidia::hook
