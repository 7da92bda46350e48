// The real node's fixtures' shared steps (realnode_support.h).
#include "realnode_support.h"

#include <gtest/gtest.h>

#include "scenario_support.h"

namespace vgpu::realk8s {

std::size_t deviceRegistrations(RealNode& node, const std::string& resource) {
  const std::string log = node.logTail("kubelet", 1000000);
  const std::string line = "\"Got registration request from device plugin with resource\" resourceName=\"" + resource + "\"";
  std::size_t n = 0;
  for (auto at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++n;
  return n;
}

Status waitForAllocatable(RealCluster& cluster, RealNode& node, const std::string& resource, const std::string& want) {
  std::string last;
  if (!RealCluster::waitFor([&] {
        auto n = cluster.getObject("/api/v1/nodes/" + node.name());
        last = n.ok() ? str(at(*n, {"status", "allocatable", resource})) : "";
        return last == want;
      }))
    return makeError("the Node's allocatable " + resource + " is '" + last + "', not " + want +
                     "; the kubelet's log ends:\n" + node.logTail("kubelet"));
  return {};
}

std::string podLog(RealCluster& cluster, const std::string& ns, const std::string& name, bool previous) {
  auto r = cluster.api().get("/api/v1/namespaces/" + ns + "/pods/" + name + "/log?container=main" +
                             (previous ? "&previous=true" : ""));
  return r.status == 200 ? r.body : "(" + r.describe() + ")";
}

void removePod(RealCluster& cluster, RealNode& node, const std::string& ns, const std::string& name) {
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  auto r = cluster.api().del(path);
  ASSERT_TRUE(r.status == 200 || r.status == 404) << r.describe();
  EXPECT_TRUE(RealCluster::waitFor([&] { return cluster.api().get(path).status == 404; }, std::chrono::seconds(60)))
      << path << " was not removed by the kubelet; its log ends:\n"
      << node.logTail("kubelet", 30);
}

void stopRealNodeSuite(RealCluster*& cluster, RealNode*& node, Status*& startStatus) {
  if (cluster && node) cluster->stopVgpuAgent(node->name());
  delete node;  // before the cluster: its folder holds the node's
  delete cluster;
  delete startStatus;
  node = nullptr;
  cluster = nullptr;
  startStatus = nullptr;
}

}  // namespace vgpu::realk8s
