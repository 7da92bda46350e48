#pragma once
// Shared by the fake librocm_smi64.so and libhydmi.so: the devices come from a small text
// file named by $VGPU_FAKE_ROCM_CONFIG, re-read on every call so a test can change a
// device (or inject a failure) between calls. Virtual devices live in a state file so
// they outlive the process that made them, as they outlive the agent on a real node.
//
//   # one DCU per line; keys may be left out (the query then answers NOT_SUPPORTED)
//   device serial=SN01 pciId=54b7 name=Z100 vramMiB=16368 cus=60 numa=0 renderMinor=128 bdf=0000:03:00.0
//   device serial=SN02 pciId=62b7 vramMiB=65520 cus=120 numa=1 renderMinor=129 bdf=0000:43:00.0 state=lost
//          (vramUsedMiB=N busy=P: what rsmi_dev_memory_usage_get / rsmi_dev_busy_percent_get say)
//   hydmi maxVdevs=16 stateFile=/tmp/x/vdevs vdevDir=/tmp/x/etc-vdev
//          (maxVdevs per DCU; default stateFile <config>.vdevs; vdevDir: where hydmi writes
//           its vdev<id>.conf, none when unset)
//   vdevUsage id=3 usedMiB=512 busy=40             (what hydmi reports for vDCU 3)
//   fail dmiCreateVDevices 8                       (that function returns this status)

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vgpu::fakerocm {

struct FakeDevice {
  std::optional<std::string> serial;
  std::optional<std::uint16_t> pciId;
  std::optional<std::string> name;
  std::uint64_t vramMiB = 0;
  int cus = 0;
  std::optional<std::uint32_t> numa;
  std::optional<std::uint32_t> renderMinor;
  std::optional<std::uint64_t> bdfid;
  std::uint64_t uniqueId = 0;
  bool lost = false;  ///< state=lost: the device stops answering health queries
  std::uint64_t vramUsedMiB = 0;
  std::uint32_t busy = 0;
};

/// What hydmi reports a vDCU uses (vdevUsage lines).
struct FakeVdevUsage {
  std::uint64_t usedMiB = 0;
  int busy = 0;
};

/// vDCU ids are node-wide: at most this many on a node, whatever the DCU.
inline constexpr int kNodeVdevIds = 200;
/// Pipe ids per DCU.
inline constexpr int kPipesPerDevice = 20;

struct FakeConfig {
  std::vector<FakeDevice> devices;
  int maxVdevs = 16;  ///< per DCU, as dmiGetMaxVDeviceCount reports it
  std::string stateFile;
  std::string vdevDir;  ///< where dmiCreateVDevices writes vdev<id>.conf; empty: nowhere
  std::map<int, FakeVdevUsage> vdevUsage;
  std::map<std::string, int> failures;  ///< function name -> status it returns
  bool valid = false;                   ///< false: no config or a malformed one
};

/// The config now (re-read each call). A malformed file reads as no devices.
FakeConfig loadConfig();

/// The status a function is told to fail with, if any.
std::optional<int> failureFor(const FakeConfig& config, const char* function);

struct FakeVdev {
  int id = 0;
  int device = 0;
  int cus = 0;
  int memMiB = 0;
  int pipe = 0;
  std::uint64_t maskLow = 0;  ///< CUs 0..63 the driver placed the vDCU on
  std::uint64_t maskHigh = 0;
};

std::vector<FakeVdev> loadVdevs(const FakeConfig& config);
bool saveVdevs(const FakeConfig& config, const std::vector<FakeVdev>& vdevs);

}  // namespace vgpu::fakerocm
