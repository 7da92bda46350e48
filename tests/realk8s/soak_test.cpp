// The chaos soak's test (issue 43): a control plane of its own with 10 vgpu nodes, each
// agent reaching kube-apiserver through a TcpProxy, and runSoak (soak/soak_driver.h).
// Flags besides --release: --soak-seconds=N (default 300), --soak-seed=N (default: random,
// printed), --soak-figures=PATH (default soak-<release>.txt in the working folder).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "real_cluster.h"
#include "scenario_support.h"
#include "soak/soak_driver.h"

namespace vgpu::realk8s {
extern std::string gRelease;

namespace {
std::string flag(const std::string& name, const std::string& fallback) {
  for (const auto& a : ::testing::internal::GetArgvs())
    if (a.rfind("--" + name + "=", 0) == 0) return a.substr(name.size() + 3);
  return fallback;
}

std::string joinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}
}  // namespace

TEST(Soak, RandomFaultsWhilePodsComeAndGoBreakNoInvariant) {
  soak::SoakOptions o;
  o.seed = std::stoull(flag("soak-seed", std::to_string(std::random_device{}())));
  o.duration = std::chrono::seconds(std::stoi(flag("soak-seconds", "300")));
  o.figuresFile = flag("soak-figures", "soak-" + gRelease + ".txt");
  RealCluster c({.release = gRelease, .startVgpu = true, .chartValues = suiteChartValues()});
  ASSERT_TRUE(c.start().ok()) << "the " << gRelease << " control plane did not start";
  ASSERT_TRUE(c.createNamespace(o.ns).ok());
  std::vector<std::unique_ptr<TcpProxy>> proxies;
  for (int i = 0; i < 10; ++i) {
    const std::string node = "soak-" + std::to_string(i);
    auto proxy = TcpProxy::start(c.apiServerPort());
    ASSERT_TRUE(proxy.ok()) << proxy.error().message;
    c.routeAgentApi(node, (*proxy)->port());
    o.proxies[node] = proxy->get();
    proxies.push_back(std::move(proxy).value());
    o.nodes.push_back(node);
    const auto s = c.addVgpuNode(node, {{kGroupLabel, o.ns}});
    ASSERT_TRUE(s.ok()) << s.error().message;
  }
  const auto result = soak::runSoak(c, o);
  EXPECT_TRUE(result.violations.empty()) << result.violations.size() << " invariant violations (seed " << o.seed
                                         << "):" << joinLines(result.violations);
  EXPECT_TRUE(result.settleFailures.empty()) << "after the last fault (seed " << o.seed
                                             << "):" << joinLines(result.settleFailures);
}

}  // namespace vgpu::realk8s
