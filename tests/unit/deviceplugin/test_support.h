#pragma once
// Builders for the node agent's tests: a temp folder, a sim (or NVIDIA) node config, pods
// bound with the assignment annotation the scheduler would write, the apiserver and kubelet
// doubles, and waiting for conditions instead of sleeping.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <algorithm>

#include <boost/json.hpp>

#include "agent.h"
#include "handout_store.h"
#include "temp_dir.h"
#include "vgpu/annotations.h"
#include "vgpu/assignment.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/timestamp.h"
#include "vgpu/fakes/fake_apiserver.h"
#include "vgpu/fakes/fake_kubelet.h"
#include "vgpu/virtual_device_id.h"

namespace vgpu::deviceplugin::testing {
namespace fs = std::filesystem;

inline bool waitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

/// A simulated device: id, memory, health.
struct SimDevice {
  std::string id;
  std::uint64_t memoryMiB = 16384;
  bool healthy = true;
  int numa = -1;
};

inline std::string simDevicesYaml(const std::vector<SimDevice>& devices) {
  std::string y = "devices:\n";
  if (devices.empty()) return "devices: []\n";
  for (const auto& d : devices) {
    y += "  - id: " + d.id + "\n    model: Sim GPU\n    memoryMiB: " + std::to_string(d.memoryMiB) +
         "\n    health: " + (d.healthy ? "healthy" : "unhealthy") + "\n";
    if (d.numa >= 0) y += "    numa: " + std::to_string(d.numa) + "\n";
  }
  return y;
}

inline std::string simConfigYaml(const std::string& devicesFile, int splitCount) {
  return "version: 1\nbackends:\n  sim:\n    enabled: true\n    splitCount: " + std::to_string(splitCount) +
         "\n    options:\n      devicesFile: " + devicesFile + "\n";
}

inline constexpr const char* kSimCount = "vgpu.io/sim";
inline constexpr const char* kSimMemory = "vgpu.io/sim-memory";
inline constexpr const char* kSimCores = "vgpu.io/sim-cores";
inline constexpr const char* kNode = "node-1";

/// One container of a pod to create: what it asks for and what the scheduler gave it.
struct PodContainer {
  PodContainer() = default;
  PodContainer(std::string n, std::map<std::string, std::int64_t> l, std::vector<DeviceGrant> d, bool i = false)
      : name(std::move(n)), limits(std::move(l)), devices(std::move(d)), init(i) {}
  std::string name;
  std::map<std::string, std::int64_t> limits;
  std::vector<DeviceGrant> devices;  ///< the assignment (empty = none)
  bool init = false;
};

struct PodSpec {
  PodSpec() = default;
  PodSpec(std::string n, std::vector<PodContainer> c, bool assigned = true, std::string t = {})
      : name(std::move(n)), containers(std::move(c)), withAssignment(assigned), bindTime(std::move(t)) {}
  std::string name;
  std::vector<PodContainer> containers;
  bool withAssignment = true;
  std::string bindTime;  ///< RFC 3339; empty = now
};

inline boost::json::object podJson(const PodSpec& spec, const std::string& node = kNode) {
  boost::json::array containers, initContainers;
  Assignment a{node, {}};
  for (const auto& c : spec.containers) {
    boost::json::object limits;
    for (const auto& [k, v] : c.limits) limits[k] = std::to_string(v);
    boost::json::object ctr{{"name", c.name}, {"image", "busybox"}, {"resources", {{"limits", limits}}}};
    (c.init ? initContainers : containers).push_back(ctr);
    a.containers.push_back({c.name, c.init, c.devices});
  }
  boost::json::object annotations;
  if (spec.withAssignment) {
    annotations[std::string(keys::kPodAssignment)] = encodeAssignment(a);
    annotations[std::string(keys::kPodBindPhase)] = "allocating";
    annotations[std::string(keys::kPodBindTime)] =
        spec.bindTime.empty() ? formatTimestamp(std::chrono::system_clock::now()) : spec.bindTime;
  }
  boost::json::object podSpec{{"nodeName", node}, {"containers", containers}};
  if (!initContainers.empty()) podSpec["initContainers"] = initContainers;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", spec.name}, {"namespace", "default"}, {"annotations", annotations}}},
          {"spec", podSpec},
          {"status", {{"phase", "Pending"}}}};
}

inline fakes::KubeletPod kubeletPod(const PodSpec& spec, const std::string& uid) {
  fakes::KubeletPod p;
  p.name = spec.name;
  p.uid = uid;
  for (const auto& c : spec.containers) {
    fakes::KubeletContainer kc{c.name, c.init, {}};
    for (const auto& [k, v] : c.limits)
      if (k == kSimCount || k == "nvidia.com/gpu") kc.limits[k] = v;
    p.containers.push_back(kc);
  }
  // The kubelet allocates init containers first.
  std::stable_partition(p.containers.begin(), p.containers.end(), [](const auto& c) { return c.init; });
  return p;
}

inline DeviceGrant grant(const std::string& id, int index, std::uint64_t mem, std::uint32_t compute, int slot,
                         const std::string& backend = "sim") {
  return DeviceGrant{backend, id, index, mem, compute, slot};
}

/// A small scheduler stand-in: first fit by memory, compute and free slots, lowest slot.
class MiniPlacer {
 public:
  MiniPlacer(std::vector<SimDevice> devices, int split) : devices_(std::move(devices)), split_(split) {
    usedSlots_.resize(devices_.size());
    mem_.resize(devices_.size());
    compute_.resize(devices_.size());
  }
  /// `count` devices with `mem` MiB and `compute` each; empty when it does not fit.
  std::vector<DeviceGrant> place(int count, std::uint64_t mem, std::uint32_t compute) {
    std::vector<DeviceGrant> out;
    for (size_t i = 0; i < devices_.size() && static_cast<int>(out.size()) < count; ++i) {
      if (static_cast<int>(usedSlots_[i].size()) >= split_) continue;
      if (mem_[i] + mem > devices_[i].memoryMiB || compute_[i] + compute > 100) continue;
      int slot = 0;
      while (usedSlots_[i].contains(slot)) ++slot;
      out.push_back(grant(devices_[i].id, static_cast<int>(i), mem, compute, slot));
    }
    if (static_cast<int>(out.size()) < count) return {};
    for (const auto& g : out) {
      usedSlots_[g.deviceIndex].insert(g.slot);
      mem_[g.deviceIndex] += mem;
      compute_[g.deviceIndex] += compute;
    }
    return out;
  }

 private:
  std::vector<SimDevice> devices_;
  int split_;
  std::vector<std::set<int>> usedSlots_;
  std::vector<std::uint64_t> mem_;
  std::vector<std::uint32_t> compute_;
};

}  // namespace vgpu::deviceplugin::testing
