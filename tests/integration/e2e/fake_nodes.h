#pragma once
// The devices of one simulated node and the files that make the fake vendor libraries
// report them: the fake NVML/libcuda machine file, the fake cnDev config, and for DCUs the
// fake ROCm-SMI/hydmi config plus the sysfs and /dev entries the Hygon backend reads.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::e2e {

/// An NVIDIA GPU of the fake NVML / libcuda (tests/fakes/gpu/README.md).
struct FakeGpu {
  std::string uuid{};  ///< GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx
  std::string model = "NVIDIA A100-SXM4-40GB";
  std::uint64_t memoryMiB = 40960;
};

/// A Cambricon card of the fake cnDev (tests/fakes/cndev/fake_cndev.cpp).
struct FakeMlu {
  std::string uuid{};  ///< 36 characters; the device id is "MLU-<uuid>"
  std::string model = "MLU370-X8";
  std::uint64_t memoryMiB = 24576;
  bool smlu = true;  ///< sMLU mode: can be shared
};

/// A Hygon DCU of the fake ROCm-SMI / hydmi (tests/fakes/rocm/README.md); the harness
/// builds its sysfs and /dev entries. The device id is "DCU-<serial>".
struct FakeDcu {
  std::string serial{};
  std::string pciId = "54b7";  ///< Z100
  std::uint64_t memoryMiB = 16368;
  int computeUnits = 60;
};

/// A Huawei Ascend chip of the fake DCMI (tests/fakes/dcmi/fake_dcmi.cpp); its physical id
/// is its position on the node, its device id "Ascend-<die>000...".
struct FakeNpu {
  std::string chip = "910B3";
  unsigned aiCores = 20;
  std::uint64_t memoryMiB = 65536;
  std::string die = "A0";  ///< hex
};

/// An AMD GPU of the fake AMD SMI (tests/fakes/amdsmi/fake_amdsmi.cpp): whole (SPX), or in
/// a compute partition mode with `partitions` processors of memoryMiB / partitions each.
struct FakeAmdGpu {
  std::string uuid = "AMD-0";
  std::string computePartition = "SPX";
  unsigned partitions = 1;
  std::uint64_t memoryMiB = 196608;
};

struct NodeSpec {
  std::string name{};
  std::vector<FakeGpu> gpus{};
  std::vector<FakeMlu> mlus{};
  std::vector<FakeDcu> dcus{};
  std::vector<FakeNpu> npus{};
  std::vector<FakeAmdGpu> amdGpus{};
};

/// VGPU_FAKE_GPU_CONFIG text for these GPUs (no `gpu` line: a node without NVIDIA GPUs).
std::string fakeGpuMachine(const std::vector<FakeGpu>& gpus);
/// Writes `root`/cndev.conf (VGPU_FAKE_CNDEV_CONFIG; without cards, a node without the
/// Cambricon driver) and the cards' device nodes under `root`/dev-mlu (the backend's devRoot).
Status writeFakeMluNode(const std::filesystem::path& root, const std::vector<FakeMlu>& mlus);
/// Writes `root`/rocm.conf (VGPU_FAKE_ROCM_CONFIG), `root`/sys and `root`/dev for these
/// DCUs (empty trees without DCUs: no Hygon device there).
Status writeFakeDcuNode(const std::filesystem::path& root, const std::vector<FakeDcu>& dcus);
/// Writes `root`/dcmi.conf (VGPU_FAKE_DCMI_CONFIG; no chip line without NPUs) and the chips'
/// device nodes under `root`/dev-npu (the backend's devRoot, where the fake makes vNPU nodes).
Status writeFakeNpuNode(const std::filesystem::path& root, const std::vector<FakeNpu>& npus);
/// Writes `root`/amdsmi.conf (VGPU_FAKE_AMDSMI_CONFIG) and /dev/kfd with each processor's
/// render and card nodes under `root`/dev-amd (the backend's devRoot); render minors from 128.
Status writeFakeAmdNode(const std::filesystem::path& root, const std::vector<FakeAmdGpu>& gpus);
/// The lines of one kind ("profile", "instance") in the fake cnDev's driver state under `root`.
std::vector<std::string> fakeCndevState(const std::filesystem::path& root, const std::string& kind);
/// The whole file; empty when it cannot be read.
std::string readText(const std::filesystem::path& path);
/// Writes `text` to `path`, creating its folders.
Status writeText(const std::filesystem::path& path, const std::string& text);

}  // namespace vgpu::e2e
