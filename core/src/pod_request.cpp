#include "vgpu/pod_request.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "vgpu/annotations.h"
#include "vgpu/backend_loader.h"
#include "vgpu/sdk/standard_rules.h"

namespace vgpu {

bool PodRequest::empty() const {
  for (const auto& c : containers)
    if (!c.requests.empty()) return false;
  return true;
}

Result<std::optional<DevicePolicy>> parseHamiDevicePolicy(std::string_view text, DeviceChoice& choice) {
  std::optional<DevicePolicy> order;  // the first of binpack / spread
  bool topology = false, numaBeforeOrder = false, numa = false, any = false;
  for (const std::string& word : sdk::splitList(text)) {
    any = true;
    if (word == "binpack" || word == "spread") {
      if (!order) order = word == "binpack" ? DevicePolicy::kBinpack : DevicePolicy::kSpread;
    } else if (word == "numa") {
      if (!numa) numaBeforeOrder = !order;
      numa = true;
    } else if (word == "mutex") {
      choice.mutex = true;
    } else if (word == "topology-aware") {
      topology = true;
    } else {
      return makeError("\"" + word + "\" is not one of binpack, spread, numa, mutex, topology-aware");
    }
  }
  if (!any) return makeError("no policy given");
  if (numa) choice.numa = numaBeforeOrder ? DeviceChoice::Numa::kFirst : DeviceChoice::Numa::kTiebreak;
  if (!topology) return order;
  choice.packUnlinked = order == DevicePolicy::kBinpack;
  return std::optional(DevicePolicy::kTopology);
}

Result<LoadWeights> parseScoringWeights(std::string_view text) {
  LoadWeights w;
  const std::vector<std::string> parts = sdk::splitList(text);
  if (parts.size() != 3 || std::count(text.begin(), text.end(), ',') != 2)
    return makeError("expected slot=<n>,core=<n>,memory=<n>");
  std::set<std::string> seen;
  for (const std::string& part : parts) {
    const size_t eq = part.find('=');
    if (eq == std::string::npos) return makeError("\"" + part + "\" is not key=value");
    std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    auto trim = [](std::string& t) {
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
    };
    trim(key);
    trim(value);
    double* slot = key == "slot" ? &w.shares : key == "core" ? &w.compute : key == "memory" ? &w.memory : nullptr;
    if (slot == nullptr) return makeError("unknown weight \"" + key + "\" (slot, core, memory)");
    if (!seen.insert(key).second) return makeError("weight \"" + key + "\" given twice");
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc() || end != value.data() + value.size() || value.empty())
      return makeError("weight \"" + key + "\" must be a whole number, got \"" + value + "\"");
    if (n < 0) return makeError("weight \"" + key + "\" must not be negative, got " + value);
    *slot = static_cast<double>(n);
  }
  if (w.shares == 0 && w.compute == 0 && w.memory == 0) return makeError("at least one weight must be above 0");
  return w;
}

Result<PodRequest> buildPodRequest(const BackendSet& backends, const std::string& podNamespace,
                                   const std::string& podName, const std::vector<ContainerResources>& containers,
                                   const Annotations& annotations) {
  const std::string pod = "pod " + podNamespace + "/" + podName;
  PodRequest out;
  out.podNamespace = podNamespace;
  out.podName = podName;
  auto annotation = [&](std::string_view key) -> const std::pair<const std::string, std::string>* {
    auto it = annotations.find(std::string(key));
    return it == annotations.end() ? nullptr : &*it;
  };
  const auto* nodePolicy = annotation(keys::kPodNodePolicy);
  if (!nodePolicy) nodePolicy = annotation(keys::kHamiPodNodePolicy);
  if (nodePolicy) {
    out.nodePolicy = parseNodePolicy(nodePolicy->second);
    if (!out.nodePolicy)
      return makeError(pod + ": annotation " + nodePolicy->first + " must be \"binpack\" or \"spread\", got \"" +
                       nodePolicy->second + "\"");
  }
  if (const auto* ours = annotation(keys::kPodDevicePolicy)) {
    out.devicePolicy = parseDevicePolicy(ours->second);
    if (!out.devicePolicy)
      return makeError(pod + ": annotation " + ours->first + " must be \"binpack\", \"spread\" or \"topology\", got \"" +
                       ours->second + "\"");
  } else if (const auto* hami = annotation(keys::kHamiPodDevicePolicy)) {
    auto policy = parseHamiDevicePolicy(hami->second, out.deviceChoice);
    if (!policy.ok())
      return std::move(policy).error().prefix(pod + ": annotation " + hami->first + " \"" + hami->second + "\"");
    out.devicePolicy = *policy;
  }
  if (const auto* weights = annotation(keys::kHamiDeviceScoringWeights)) {
    auto parsed = parseScoringWeights(weights->second);
    if (!parsed.ok())
      return std::move(parsed).error().prefix(pod + ": annotation " + weights->first + " \"" + weights->second + "\"");
    out.deviceChoice.weights = *parsed;
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
