#pragma once
// What the DRA front end publishes: one ResourceSlice pool per node and driver
// (resource.k8s.io/v1, reference/k8s-protocols.md 6.1), one device per physical device
// with consumable capacities `memory`, `cores` and `shares` whose request policies give a
// claim that asks nothing what a container of the device-plugin path gets when it asks
// nothing (the backend's allocator says what that is), and the check that the apiserver
// kept the fields a cluster without DRAConsumableCapacity silently drops.

#include <cstdint>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/allocator.h"
#include "vgpu/device.h"
#include "vgpu/result.h"

namespace vgpu::dra {

/// A consumable capacity and its request policy as a range: a claim that names no amount
/// consumes `defaultValue`; one that does is rounded up to min + k*step, at most max.
/// `unit` is the Quantity suffix of every number ("Mi" for memory, "" for counts).
struct CapacityPolicy {
  std::int64_t value = 0;
  std::int64_t min = 0;
  std::int64_t max = 0;
  std::int64_t step = 1;
  std::int64_t defaultValue = 0;
  std::string unit;
  bool operator==(const CapacityPolicy&) const = default;
};

/// A ResourceSlice device taint (resource.k8s.io/v1 DeviceTaint, gate DRADeviceTaints).
struct DeviceTaint {
  std::string key;     ///< a label name
  std::string value;   ///< a label value; empty = none
  std::string effect;  ///< "NoSchedule": no new allocations, existing ones stay
  std::string timeAdded;  ///< RFC 3339; empty = the apiserver sets it
  bool operator==(const DeviceTaint&) const = default;
};

/// The taint of an unhealthy device: key "<domain>/unhealthy", effect NoSchedule, so
/// kube-scheduler places no new claim there while claims already allocated stay.
DeviceTaint unhealthyTaint(const std::string& domain, std::string timeAdded);

/// One physical device as a DRA device of our driver.
struct DraDevice {
  std::string name;  ///< a DNS label, stable across restarts: "<backend>-<index>"
  Device device;
  CapacityPolicy memory;  ///< MiB
  CapacityPolicy cores;   ///< percent of the device, 100 = whole
  std::uint32_t shares = 1;  ///< the split count: every allocation consumes one
  std::vector<DeviceTaint> taints;
  bool operator==(const DraDevice&) const = default;
};

/// "<backend>-<index>" as a DNS label.
std::string draDeviceName(const Device& device);

/// The device with policies derived from what `allocator` makes of a container asking one
/// device (the device-plugin path's defaults): memory defaults to what a container that
/// names no memory gets (the configured default, else the whole device) in steps of the
/// backend's memory unit; cores default to what one naming no cores gets, 0..100 in steps
/// of 1; where the allocator refuses a share naming no cores, cores default to the whole
/// device and are at least 1. Errors: the backend has no count, memory or cores resource,
/// or its allocator refuses a share that names cores (its words).
Result<DraDevice> draDevice(const Allocator& allocator, const Device& device);

struct SliceParams {
  std::string driver;    ///< "sim.vgpu.io"
  std::string nodeName;  ///< also the pool's name
  std::string nodeUid;   ///< for the ownerReference; empty = none
  std::int64_t generation = 1;
  std::size_t maxDevicesPerSlice = 128;  ///< the apiserver's limit (64 where a device has taints)
};

/// "<node>-<driver>-<i>": deterministic, so a restarted driver finds and replaces its slices.
std::string sliceName(const SliceParams& params, std::size_t index);

/// The pool's slices: devices split at maxDevicesPerSlice (at most 64 when any device has
/// taints, the apiserver's limit for such slices), every slice naming the pool, its
/// generation and the slice count. No devices still gives one (empty) slice, so readers see
/// the pool is empty rather than stale.
std::vector<boost::json::object> buildResourceSlices(const SliceParams& params, const std::vector<DraDevice>& devices);

/// What the apiserver stored differs from what was sent in a way that turns shared devices
/// exclusive: the names of the devices that lost allowMultipleAllocations or a capacity's
/// requestPolicy (e.g. "sim-0: allowMultipleAllocations"). Empty when everything was kept.
std::vector<std::string> droppedSharingFields(const boost::json::object& sent, const boost::json::object& stored);

/// The devices sent with taints that the apiserver stored without them (DRADeviceTaints
/// off: alpha, off by default in 1.34 and 1.35). Empty when every taint was kept.
std::vector<std::string> droppedTaints(const boost::json::object& sent, const boost::json::object& stored);

}  // namespace vgpu::dra
