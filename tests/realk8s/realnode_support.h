#pragma once
// What the real node's fixtures share (realnode_test.cpp, realnode_nvidia_test.cpp): the wait
// for the device counts the kubelet publishes, a container's log, a pod's deletion, the end.

#include <cstddef>
#include <string>

#include "real_cluster.h"
#include "real_node.h"
#include "vgpu/result.h"

namespace vgpu::realk8s {

/// Until the Node's allocatable `resource` is `want`: the kubelet's device manager publishes
/// what the agent registered. The error has the kubelet's log.
Status waitForAllocatable(RealCluster& cluster, RealNode& node, const std::string& resource, const std::string& want);
/// How often a device plugin registered `resource` with the running kubelet (its log).
std::size_t deviceRegistrations(RealNode& node, const std::string& resource);
/// The log of the pod's container "main" (the previous one's), read through the apiserver
/// from the kubelet; the reply in parentheses when there is none.
std::string podLog(RealCluster& cluster, const std::string& ns, const std::string& name, bool previous = false);
/// Graceful deletion, confirmed by the real kubelet once the containers are gone (gtest
/// failures otherwise, with the kubelet's log).
void removePod(RealCluster& cluster, RealNode& node, const std::string& ns, const std::string& name);
/// A fixture's end: the node's agent stopped, the node (its folder is in the cluster's),
/// then the cluster; all three set to null.
void stopRealNodeSuite(RealCluster*& cluster, RealNode*& node, Status*& startStatus);

}  // namespace vgpu::realk8s
