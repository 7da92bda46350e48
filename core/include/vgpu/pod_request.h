#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/config.h"
#include "vgpu/device_request.h"
#include "vgpu/device_usage.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu {

class BackendSet;

/// How each request's devices are chosen beyond the device policy: what HAMi's policy
/// lists and scoring weights add (docs/placement.md, "HAMi's policy annotations").
struct DeviceChoice {
  /// Where the NUMA node comes in ordering a request's candidate devices.
  enum class Numa : std::uint8_t {
    kIgnore,     ///< not at all (the lower position breaks ties)
    kFirst,      ///< before the load: devices of one NUMA node together, lowest node first
    kTiebreak,   ///< among devices of equal load, the lower NUMA node first
  };
  bool mutex = false;       ///< only devices no container uses ("mutex")
  Numa numa = Numa::kIgnore;
  /// Under the topology policy, where links do not decide: the most loaded devices first
  /// (binpack) instead of the least loaded (spread).
  bool packUnlinked = false;
  LoadWeights weights;

  bool operator==(const DeviceChoice&) const = default;
};

/// HAMi's device policy (hami.io/gpu-scheduler-policy): a comma list of "binpack",
/// "spread", "numa" (sort keys, in the order written), "mutex" and "topology-aware"; the
/// first of binpack/spread, or topology-aware, sets the policy (none: the configured one
/// stays), the rest fills `choice`. Errors name the word that is none of these.
Result<std::optional<DevicePolicy>> parseHamiDevicePolicy(std::string_view text, DeviceChoice& choice);

/// HAMi's hami.io/device-scoring-weights: exactly "slot=<n>", "core=<n>" and "memory=<n>",
/// comma-separated in any order, whole numbers >= 0, not all 0. Errors say what is wrong.
Result<LoadWeights> parseScoringWeights(std::string_view text);

/// What a pod asks of our backends: per container (init containers first, in spec order),
/// one DeviceRequest per backend it uses; plus the pod's policy overrides.
struct PodRequest {
  struct Container {
    std::string name;
    bool init = false;
    std::vector<DeviceRequest> requests;  ///< Empty for a container that asks for no device.
  };
  std::string podNamespace;
  std::string podName;
  std::vector<Container> containers;
  std::optional<NodePolicy> nodePolicy;
  std::optional<DevicePolicy> devicePolicy;
  DeviceChoice deviceChoice;

  /// True when no container asks for any device: the pod is not ours to place.
  bool empty() const;
};

/// Builds the request from the containers' limits and the pod's annotations, asking each
/// backend of `backends` to parse its resources. Errors name the pod, the container and
/// the value (invalid values, a bad policy annotation).
Result<PodRequest> buildPodRequest(const BackendSet& backends, const std::string& podNamespace,
                                   const std::string& podName, const std::vector<ContainerResources>& containers,
                                   const Annotations& podAnnotations);

}  // namespace vgpu
