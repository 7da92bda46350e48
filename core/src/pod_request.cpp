#include "vgpu/pod_request.h"

#include "vgpu/annotations.h"
#include "vgpu/backend_loader.h"

namespace vgpu {

bool PodRequest::empty() const {
  for (const auto& c : containers)
    if (!c.requests.empty()) return false;
  return true;
}

Result<PodRequest> buildPodRequest(const BackendSet& backends, const std::string& podNamespace,
                                   const std::string& podName, const std::vector<ContainerResources>& containers,
                                   const Annotations& annotations) {
  const std::string pod = "pod " + podNamespace + "/" + podName;
  PodRequest out;
  out.podNamespace = podNamespace;
  out.podName = podName;
  if (auto it = annotations.find(std::string(keys::kPodNodePolicy)); it != annotations.end()) {
    out.nodePolicy = parseNodePolicy(it->second);
    if (!out.nodePolicy)
      return makeError(pod + ": annotation " + it->first + " must be \"binpack\" or \"spread\", got \"" + it->second + "\"");
  }
  if (auto it = annotations.find(std::string(keys::kPodDevicePolicy)); it != annotations.end()) {
    out.devicePolicy = parseDevicePolicy(it->second);
    if (!out.devicePolicy)
      return makeError(pod + ": annotation " + it->first + " must be \"binpack\", \"spread\" or \"topology\", got \"" +
                       it->second + "\"");
  } else if (auto hami = annotations.find(std::string(keys::kHamiPodDevicePolicy)); hami != annotations.end()) {
    out.devicePolicy = hami->second == "topology-aware" ? std::optional(DevicePolicy::kTopology)
                       : hami->second == "topology"     ? std::nullopt
                                                        : parseDevicePolicy(hami->second);
    if (!out.devicePolicy)
      return makeError(pod + ": annotation " + hami->first + " must be \"binpack\", \"spread\" or \"topology-aware\", got \"" +
                       hami->second + "\"");
  }
  // Init containers first, as Kubernetes runs them, keeping each group's order.
  for (bool init : {true, false}) {
    for (const auto& c : containers) {
      if (c.init != init) continue;
      PodRequest::Container container{c.name, c.init, {}};
      for (const auto& backend : backends.all()) {
        auto parsed = backend->allocator().parseRequest(c, annotations);
        if (!parsed.ok()) return std::move(parsed).error().prefix(pod);
        if (parsed->has_value()) container.requests.push_back(std::move(**parsed));
      }
      out.containers.push_back(std::move(container));
    }
  }
  return out;
}

}  // namespace vgpu
