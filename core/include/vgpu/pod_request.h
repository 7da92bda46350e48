#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vgpu/config.h"
#include "vgpu/device_request.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu {

class BackendSet;

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
