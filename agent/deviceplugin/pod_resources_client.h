#pragma once
// Reads the kubelet's PodResources API (v1.PodResourcesLister/List): which device IDs each
// container of each pod on the node holds. No gRPC type appears here.

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// container -> resource -> device IDs
using HeldDevices = std::map<std::string, std::map<std::string, std::vector<std::string>>>;

/// "namespace/name" -> what its containers hold: every pod the kubelet lists (its active
/// pods) with every container it lists (app containers and sidecars), also those holding
/// nothing. Errors name the socket.
Result<std::map<std::string, HeldDevices>> listPodResources(const std::string& socketPath,
                                                            std::chrono::milliseconds timeout);

}  // namespace vgpu::deviceplugin
