// Issue 42 item 2: an idle node agent renews its Lease and writes its Node only when the
// inventory changes (every scheduler and controller watches Nodes); without Lease rights (an
// older chart's RBAC) the Node's annotation keeps the node alive, as before.
#include <gmock/gmock.h>

#include <thread>

#include "agent_fixture.h"
#include "vgpu/k8s/node_lease.h"
#include "vgpu/k8s/object.h"

namespace vgpu::deviceplugin::testing {
namespace {

constexpr const char* kLeaseNamespace = "vgpu-system";

class DevicePluginNodeLease : public AgentFixture {
 protected:
  void startLeasedSimNode(const std::string& leaseNamespace) {
    writeSimNode();
    startKubelet();
    AgentOptions o = options();
    o.heartbeatInterval = std::chrono::milliseconds(100);
    o.leaseNamespace = leaseNamespace;
    startAgent(o);
    ASSERT_TRUE(kubelet->waitForDevices(kSimCount, std::chrono::seconds(10)));
  }
  std::optional<boost::json::object> lease() const {
    return api->get("leases", kLeaseNamespace, nodeLeaseName(kNode));
  }
  /// Requests since `from` (an index into requests()) of `method` whose path starts with `prefix`.
  int requestsSince(std::size_t from, const std::string& method, const std::string& prefix) const {
    const auto all = api->requests();
    int n = 0;
    for (std::size_t i = from; i < all.size(); ++i)
      if (all[i].method == method && all[i].path.rfind(prefix, 0) == 0) ++n;
    return n;
  }
  /// Counts Node and Lease writes of an idle agent over 1.2 s (twelve heartbeats).
  std::pair<int, int> idleWrites() {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // start-up publishing done
    const std::size_t from = api->requests().size();
    std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    return {requestsSince(from, "PATCH", std::string("/api/v1/nodes/") + kNode),
            requestsSince(from, "PATCH", "/apis/coordination.k8s.io/v1/namespaces/" + std::string(kLeaseNamespace))};
  }
};

TEST_F(DevicePluginNodeLease, AnIdleNodeRenewsItsLeaseAndWritesNoNode) {
  startLeasedSimNode(kLeaseNamespace);
  ASSERT_TRUE(waitFor([&] { return lease().has_value(); }));
  // The Node still carries its inventory and when it was published.
  auto node = api->get("nodes", "", kNode);
  ASSERT_TRUE(node);
  ASSERT_TRUE(k8s::annotation(*node, keys::nodeDevices("sim")));
  ASSERT_TRUE(k8s::annotation(*node, keys::kNodeHeartbeat));

  const auto [nodeWrites, leaseWrites] = idleWrites();
  std::printf("idle for 1.2 s at a 100 ms heartbeat: %d Node writes, %d Lease renewals\n", nodeWrites, leaseWrites);
  EXPECT_EQ(nodeWrites, 0);
  EXPECT_GE(leaseWrites, 6);
  auto renewal = parseNodeLease(*lease());
  ASSERT_TRUE(renewal) << boost::json::serialize(*lease());
  EXPECT_EQ(renewal->node, kNode);
  EXPECT_LT(std::chrono::system_clock::now() - renewal->renewed, std::chrono::seconds(2));
  EXPECT_EQ(agent->stats().nodePublishes, 1u) << "only the start-up publish";

  // Stopping takes the node out: annotations and Lease gone.
  agent->stop();
  EXPECT_FALSE(lease().has_value());
  EXPECT_FALSE(k8s::annotation(*api->get("nodes", "", kNode), keys::kNodeHeartbeat));
}

TEST_F(DevicePluginNodeLease, WithoutALeaseNamespaceTheNodeIsRewrittenEveryHeartbeatAsBefore) {
  startLeasedSimNode("");
  const auto [nodeWrites, leaseWrites] = idleWrites();
  std::printf("idle for 1.2 s at a 100 ms heartbeat, no Lease: %d Node writes\n", nodeWrites);
  EXPECT_GE(nodeWrites, 6);
  EXPECT_EQ(leaseWrites, 0);
  EXPECT_TRUE(api->list("leases").empty());
}

TEST_F(DevicePluginNodeLease, WithoutLeaseRightsTheAnnotationKeepsTheNodeAlive) {
  fakes::Fault forbidden;
  forbidden.pathPrefix = "/apis/coordination.k8s.io/";
  forbidden.action = fakes::Fault::Action::kStatus;
  forbidden.status = 403;
  forbidden.times = -1;
  api->addFault(forbidden);
  startLeasedSimNode(kLeaseNamespace);
  const auto [nodeWrites, leaseWrites] = idleWrites();
  EXPECT_GE(nodeWrites, 6) << "a node without its Lease must keep its heartbeat annotation fresh";
  EXPECT_FALSE(lease().has_value());
  // Rights granted (the chart upgraded): back to the Lease alone.
  api->clearFaults();
  ASSERT_TRUE(waitFor([&] { return lease().has_value(); }));
  EXPECT_EQ(idleWrites().first, 0);
}

}  // namespace
}  // namespace vgpu::deviceplugin::testing
