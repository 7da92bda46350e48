#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <boost/json/fwd.hpp>

#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu {

/// The fields of a Pod that placement and allocation read, from its JSON (v1 Pod).
struct PodInfo {
  std::string podNamespace = "default";
  std::string name;
  std::string uid;
  std::string nodeName;       ///< spec.nodeName; empty until bound.
  std::string schedulerName;  ///< spec.schedulerName
  std::string phase;          ///< status.phase
  bool deleting = false;      ///< metadata.deletionTimestamp is set
  std::int32_t priority = 0;  ///< spec.priority (the admission plugin resolves the class); 0 when unset
  std::string nominatedNodeName;  ///< status.nominatedNodeName: where preemption made room for it
  Annotations annotations;
  std::map<std::string, std::string> labels;
  /// Init containers first, then app containers, each group in spec order; only extended
  /// resources (names with a '/') are kept.
  std::vector<ContainerResources> containers;

  std::string key() const { return podNamespace + "/" + name; }
  /// A pod that finished (Succeeded/Failed) no longer holds its devices.
  bool terminated() const { return phase == "Succeeded" || phase == "Failed"; }
};

/// Parses a v1 Pod. Extended resources come from limits, or from requests when a resource
/// has no limit. Errors name the pod, the container and the field (a non-integer quantity,
/// a wrong type, a missing metadata.name).
Result<PodInfo> parsePod(const boost::json::value& pod);

}  // namespace vgpu
