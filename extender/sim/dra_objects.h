#pragma once
// The DRA objects vgpu-sim reads beside Pods (resource.k8s.io/v1, as users write them):
// ResourceClaims, ResourceClaimTemplates and DeviceClasses, and a Pod's spec.resourceClaims.
// What kube-scheduler would do with a field vgpu-sim does not model (firstAvailable,
// allocationMode All, adminAccess, CEL beyond device_selector.h) is an error
// that names the field, never silently ignored.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "device_selector.h"
#include "vgpu/result.h"

namespace vgpu::simulator {

/// One `capacity.requests` entry: the amount in the Quantity's base unit (bytes for "3000Mi"),
/// rounded up to a whole number as kube-scheduler's integer path reads it.
struct CapacityAsk {
  std::int64_t amount = 0;
  std::string text;  ///< as written
};

/// One `tolerations` entry of a request (resource.k8s.io/v1 DeviceToleration).
struct DeviceToleration {
  std::string key;              ///< empty with Exists: every key
  bool exists = false;          ///< operator Exists (else Equal)
  std::string value;            ///< for Equal
  std::string effect;           ///< empty: every effect
};

/// One request of a claim (`exactly`, allocationMode ExactCount).
struct ClaimRequest {
  std::string name;
  std::string deviceClassName;
  std::int64_t count = 1;
  std::map<std::string, CapacityAsk> capacity;
  std::vector<DeviceSelector> selectors;
  std::vector<DeviceToleration> tolerations;
};

/// spec.devices.constraints[]: the devices of `requests` (empty: all of the claim's) share
/// one value of `attribute` (matchAttribute) or all differ in it (distinctAttribute).
struct ClaimConstraint {
  std::vector<std::string> requests;
  std::string attribute;  ///< fully qualified: "<domain>/<name>"
  bool distinct = false;
};

/// A ResourceClaim's spec (or a template's spec.spec).
struct ClaimSpec {
  std::string ns = "default";
  std::string name;
  std::vector<ClaimRequest> requests;
  std::vector<ClaimConstraint> constraints;
  std::string key() const { return ns + "/" + name; }
};

struct DeviceClass {
  std::string name;
  std::vector<DeviceSelector> selectors;
};

/// One entry of a Pod's spec.resourceClaims: exactly one of claimName / templateName.
struct PodClaimRef {
  std::string name;
  std::string claimName;
  std::string templateName;
};

/// The claims, templates and classes of an input, and each pod's references.
struct DraInputs {
  std::map<std::string, ClaimSpec> claims;     ///< "ns/name", in name order
  std::vector<std::string> claimOrder;         ///< claims in input order
  std::map<std::string, ClaimSpec> templates;  ///< "ns/name"
  std::map<std::string, DeviceClass> classes;  ///< given in the input
};

/// kind: ResourceClaim. Errors name the claim and the field path.
Result<ClaimSpec> parseResourceClaim(const boost::json::object& manifest);
/// kind: ResourceClaimTemplate (its spec.spec).
Result<ClaimSpec> parseResourceClaimTemplate(const boost::json::object& manifest);
/// kind: DeviceClass.
Result<DeviceClass> parseDeviceClass(const boost::json::object& manifest);
/// spec.resourceClaims of a Pod (empty when it has none).
Result<std::vector<PodClaimRef>> parsePodClaims(const boost::json::object& pod);

/// The DeviceClass the chart installs for a backend: named after its driver
/// ("<backend>.<domain>"), selecting `device.driver == "<driver>"`.
DeviceClass chartDeviceClass(const std::string& driver);

}  // namespace vgpu::simulator
