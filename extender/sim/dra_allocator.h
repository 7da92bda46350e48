#pragma once
// kube-scheduler's structured allocator with consumable capacity (k8s.io/dynamic-resource-
// allocation/structured, v0.37), as far as vgpu's ResourceSlices need it, over the slices a
// node publishes (built by the DRA plugin's own buildResourceSlices):
// - devices are tried in the allocator's order: pools by (driver, pool name), slices by
//   name, devices in slice order; the first solution found wins (no scoring);
// - a request's devices are distinct (each next one after the previous in that order);
//   two requests, or two claims, may take shares of one device with allowMultipleAllocations;
// - per capacity of a device, a request consumes: the requestPolicy's default (else the
//   whole value) when it names none; what it names rounded up to min + k*step of the
//   validRange (min when below it), or to the first validValue at or above it; a device
//   whose policy the amount breaks (above max, not a valid value) is skipped, as is one
//   lacking a capacity the request names;
// - the sum consumed on a device stays within each capacity's value;
// - a device without allowMultipleAllocations goes whole to one request;
// - a device with a NoSchedule or NoExecute taint that the request does not tolerate is
//   skipped (DRADeviceTaints, on from 1.36).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "dra_objects.h"
#include "vgpu/dra/resource_slices.h"
#include "vgpu/result.h"

namespace vgpu::simulator {

/// One capacity of a published device with its request policy, in the Quantity's base unit.
struct DraCapacity {
  std::int64_t value = 0;
  bool binary = false;  ///< published with a binary suffix (Mi): shown in Mi
  bool hasPolicy = false;
  std::optional<std::int64_t> defaultValue;
  std::optional<std::int64_t> min, max, step;  ///< validRange
  std::vector<std::int64_t> validValues;
};

/// One device of a node's slices, in the allocator's order.
struct DraPoolDevice {
  std::string driver;
  std::string pool;
  std::string name;
  std::string model;
  boost::json::object object;  ///< as published (selectors read its attributes)
  std::map<std::string, DraCapacity> capacity;
  bool multipleAllocations = false;
  std::vector<dra::DeviceTaint> taints;  ///< as published (timeAdded not read)
};

/// Whether `request` tolerates every taint of `device` that keeps new allocations off it.
bool toleratesTaints(const ClaimRequest& request, const DraPoolDevice& device);

/// The devices of `slices` (resource.k8s.io/v1 ResourceSlice objects) in allocator order.
/// Errors: a slice or capacity that is not what the API allows.
Result<std::vector<DraPoolDevice>> poolDevices(const std::vector<boost::json::object>& slices);

/// What a request naming `asked` (nullopt: not named) consumes of `capacity`, policy applied.
/// Errors: the rounded amount does not fit in 64 bits (kube-scheduler aborts such a claim).
Result<std::int64_t> consumedAmount(const std::optional<std::int64_t>& asked, const DraCapacity& capacity);

/// Whether `amount` breaks the capacity's policy (above max, off the step, not a valid value).
bool violatesPolicy(std::int64_t amount, const DraCapacity& capacity);

/// `amount` of `capacity` for people: "3000Mi" for memory, "30" for counts.
std::string formatAmount(std::int64_t amount, const DraCapacity& capacity);

/// One device share an allocation hands out.
struct DraShare {
  std::size_t claim = 0;  ///< index into the claims passed to allocate()
  std::string request;
  std::size_t device = 0;  ///< index into devices()
  std::map<std::string, std::int64_t> consumed;  ///< empty: the device went whole
};

/// A node's published devices and what is allocated on them.
class DraNode {
 public:
  /// `noSlices`: when `devices` is empty, why (shown as the node's reason).
  DraNode(std::string name, std::vector<DraPoolDevice> devices, std::string noSlices);

  const std::string& name() const { return name_; }
  const std::vector<DraPoolDevice>& devices() const { return devices_; }
  /// Per device, the sum consumed per capacity.
  const std::vector<std::map<std::string, std::int64_t>>& used() const { return used_; }
  /// Per device, how many shares (or whole allocations) it holds.
  const std::vector<int>& allocations() const { return allocations_; }

  /// The first allocation of all `claims` together on this node in the allocator's order,
  /// or, as the error, why there is none in words a person can act on (also: a class the
  /// claims name that `classes` lacks).
  Result<std::vector<DraShare>> allocate(const std::vector<const ClaimSpec*>& claims,
                                         const std::map<std::string, DeviceClass>& classes) const;
  /// Records an allocation allocate() returned.
  void commit(const std::vector<DraShare>& shares);

 private:
  std::string name_;
  std::vector<DraPoolDevice> devices_;
  std::string noSlices_;
  std::vector<std::map<std::string, std::int64_t>> used_;
  std::vector<int> allocations_;
};

}  // namespace vgpu::simulator
