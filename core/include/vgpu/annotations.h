#pragma once

#include <string>
#include <string_view>

namespace vgpu {

/// The Kubernetes annotation and label keys vgpu reads and writes. docs/wire-format.md
/// specifies each value's format.
namespace keys {

/// Node: a backend's device inventory (JSON, codec/inventory.h); key = prefix + backend.
inline constexpr std::string_view kNodeDevicesPrefix = "vgpu.io/devices-";
/// Node: when the node agent last published (RFC 3339, UTC).
inline constexpr std::string_view kNodeHeartbeat = "vgpu.io/heartbeat";
/// Node: comma-separated device ids an operator took out of scheduling.
inline constexpr std::string_view kNodeDeviceCordon = "vgpu.io/device-cordon";

/// Pod: the placement (JSON, codec/assignment_codec.h), written at bind.
inline constexpr std::string_view kPodAssignment = "vgpu.io/assignment";
/// Pod: "allocating" (bound, waiting for Allocate), "success" or "failed".
inline constexpr std::string_view kPodBindPhase = "vgpu.io/bind-phase";
/// Pod: when it was bound (RFC 3339, UTC).
inline constexpr std::string_view kPodBindTime = "vgpu.io/bind-time";
/// Pod: why Allocate failed, in words.
inline constexpr std::string_view kPodAllocateError = "vgpu.io/allocate-error";
/// Pod: written by vgpu-scheduler when capacity frees where a refused pod would fit:
/// "<node> <time> #<n>" (distinct each time, or the patch would change nothing and
/// kube-scheduler would see no update).
inline constexpr std::string_view kPodCapacityFreed = "vgpu.io/capacity-freed";
/// Pod annotations only vgpu-scheduler and the node agent write: the admission webhook
/// removes them from pods others create and refuses others' updates that change them
/// (docs/security.md, "Reserved annotations").
inline constexpr std::string_view kReservedPodAnnotations[] = {kPodAssignment, kPodBindPhase, kPodBindTime,
                                                              kPodAllocateError, kPodCapacityFreed};

/// Pod: per-pod override of the node policy ("binpack" / "spread").
inline constexpr std::string_view kPodNodePolicy = "vgpu.io/node-scheduler-policy";
/// Pod: per-pod override of the device policy ("binpack" / "spread" / "topology").
inline constexpr std::string_view kPodDevicePolicy = "vgpu.io/device-scheduler-policy";
/// Pod: HAMi's node policy annotation ("binpack" / "spread"), read when kPodNodePolicy is
/// absent so pods written for HAMi keep their intent.
inline constexpr std::string_view kHamiPodNodePolicy = "hami.io/node-scheduler-policy";
/// Pod: HAMi's device policy annotation, a comma list of "binpack", "spread", "numa",
/// "mutex", "topology-aware" (parseHamiDevicePolicy), read when kPodDevicePolicy is absent.
inline constexpr std::string_view kHamiPodDevicePolicy = "hami.io/gpu-scheduler-policy";
/// Pod: HAMi's weights of a device's load, "slot=<n>,core=<n>,memory=<n>" (LoadWeights).
inline constexpr std::string_view kHamiDeviceScoringWeights = "hami.io/device-scoring-weights";
/// Pod/namespace label: the webhook leaves pods with this label set to "ignore" alone (its
/// defaults and scheduler name; never its security checks, docs/security.md).
inline constexpr std::string_view kWebhookOptOutLabel = "vgpu.io/webhook";
/// HAMi's label of the same meaning, honoured the same way.
inline constexpr std::string_view kHamiWebhookOptOutLabel = "hami.io/webhook";

inline std::string nodeDevices(std::string_view backend) {
  return std::string(kNodeDevicesPrefix) + std::string(backend);
}

}  // namespace keys
}  // namespace vgpu
