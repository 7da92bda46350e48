// Memory shared between the processes of one container is charged once (issue 36): each
// scenario of share_probe.c runs the container's processes with LD_PRELOAD=libvgpu.so against
// the fake driver and checks after every step that what the region says the container uses
// is what the device holds. Every scenario runs twice: with VMM exports that are memfds (each
// its own inode) and with exports that are descriptors of one device node, as the real
// driver's are of /dev/nvidiactl (VGPU_FAKE_EXPORT_DEVICE_FD). VGPU_TEST_LIBVGPU names
// another build of libvgpu.so (to see these fail on an older one).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "probe_process.h"

namespace {

using Result = vgpu::test::ProbeResult;
using vgpu::test::libvgpuPath;

// How the fake driver exports VMM memory.
enum class Exports { kMemfd, kDeviceNode };

class LimiterSharing : public ::testing::TestWithParam<Exports> {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    std::string tmpl = "/tmp/vgpu-share-test-XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  // Runs the scenario with `devices` fake GPUs of 1 GiB (2 MiB per context) and the limits in
  // `limits`; the probe's stdout, stderr and exit code.
  Result run(const std::vector<std::string>& args, const std::map<std::string, std::string>& limits, int devices = 1) {
    std::ofstream conf(dir_ + "/gpus.conf");
    for (int d = 0; d < devices; ++d)
      conf << "gpu uuid=GPU-6b1f7c2a-0f4e-4a8e-9d2c-3a5b7e9f1c2" << d << " name=\"Fake H100\" memory_mib=1024 "
           << "sm_count=132 cc=9.0 context_mib=2\n";
    conf.close();
    std::map<std::string, std::string> env{
        {"PATH", "/usr/bin:/bin"},
        {"LD_LIBRARY_PATH", VGPU_FAKE_LIB_PATH},
        {"LD_PRELOAD", libvgpuPath()},
        {"VGPU_FAKE_GPU_CONFIG", dir_ + "/gpus.conf"},
        {"VGPU_FAKE_GPU_STATE", dir_ + "/fake-state"},
        {"CUDA_DEVICE_MEMORY_SHARED_CACHE", dir_ + "/region"},
    };
    if (GetParam() == Exports::kDeviceNode) env["VGPU_FAKE_EXPORT_DEVICE_FD"] = "1";
    for (const auto& [k, v] : limits) env[k] = v;
    // Never hangs: a probe that takes longer than a minute is killed (with its workers, whose
    // sockets then close).
    return vgpu::test::runProbe(VGPU_SHARE_PROBE, args, env, dir_);
  }

  std::string dir_;
};

// The defect of issue 36: a process holds 48 MiB of a 64 MiB slice and another process of the
// container opens it with cuIpcOpenMemHandle; the open was charged again and refused. The
// bytes stay charged while the importer has them open after the exporter freed them.
TEST_P(LimiterSharing, MemoryOpenedByIpcIsChargedOnce) {
  Result r = run({"ipc"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// The same through VMM: exported as a POSIX descriptor, imported, mapped twice, retained;
// and a multicast object bound to it, exported, imported and mapped.
TEST_P(LimiterSharing, ImportedVmmMemoryIsChargedOnce) {
  Result r = run({"vmm"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// NCCL- and vLLM-shaped: 2, 4 and 8 processes, one pre-allocating 90 % of the slice and
// sharing it by IPC, then all-to-all descriptor exchange of VMM buffers.
TEST_P(LimiterSharing, ProcessesExchangingBuffersFitTheSliceTheyHold) {
  for (const char* n : {"2", "4", "8"}) {
    SCOPED_TRACE(std::string(n) + " processes");
    Result r = run({"ring", n, "512"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "512m"}});
    EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
    std::system(("rm -f " + dir_ + "/region " + dir_ + "/fake-state").c_str());
  }
}

// No smuggling: memory exported by a process without libvgpu.so is charged to the limited
// process that opens or maps it, and refused over its limit.
TEST_P(LimiterSharing, MemoryFromOutsideTheContainerIsChargedToTheImporter) {
  Result r = run({"smuggle"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// Two devices with a limit each: device 0's memory opened and mapped from device 1, peer
// access, and host memory charge neither device again.
TEST_P(LimiterSharing, SharingAcrossDevicesChargesNeitherAgain) {
  Result r = run({"two-devices"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "128m"}, {"CUDA_DEVICE_MEMORY_LIMIT_1", "128m"}}, 2);
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// Whatever a process of the container writes into the region's share table: imports from
// outside are still charged, nothing crashes.
TEST_P(LimiterSharing, EntriesWrittenIntoTheRegionDoNotLetOutsideMemoryInNorCrash) {
  Result r = run({"hostile"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// A memory pool exported by a process of the container: a pointer another process imports
// from it is charged once (to the exporter's pool), at every step.
TEST_P(LimiterSharing, PointersOfAPoolExportedInTheContainerAreChargedOnce) {
  Result r = run({"pool"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

// No smuggling through pools: cuMemPoolImportPointer of a pool that a process without
// libvgpu.so exported took 48 MiB past a 64 MiB limit uncharged.
TEST_P(LimiterSharing, PointersOfAPoolFromOutsideTheContainerAreChargedToTheImporter) {
  Result r = run({"poolsmuggle"}, {{"CUDA_DEVICE_MEMORY_LIMIT_0", "64m"}});
  EXPECT_EQ(r.exitCode, 0) << r.err << r.out;
}

INSTANTIATE_TEST_SUITE_P(Exports, LimiterSharing, ::testing::Values(Exports::kMemfd, Exports::kDeviceNode),
                         [](const ::testing::TestParamInfo<Exports>& info) {
                           return std::string(info.param == Exports::kMemfd ? "memfd" : "device_node");
                         });

}  // namespace
