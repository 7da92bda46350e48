#pragma once
// The soak's fault injector: the kinds of fault a real cluster meets (issue 43 item 1), a
// random pick of kind, target and length from the run's seed, and doing it to a RealCluster
// until the broken part is back (or the pause/hold/unhealthy spell is over).

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "real_cluster.h"
#include "tcp_proxy.h"

namespace vgpu::realk8s::soak {

enum class FaultKind {
  kKillEtcd,
  kKillApiServer,
  kKillKubeScheduler,
  kKillVgpuScheduler,
  kKillAgent,
  kRestartKubelet,
  kPauseApiServer,      ///< SIGSTOP for `seconds`, then SIGCONT
  kCompactEtcd,         ///< as kube-apiserver's compactor does it
  kDropAgentConnections,  ///< the agent's connections to kube-apiserver reset (TcpProxy)
  kHoldAgentConnections,  ///< no byte moves for `seconds`
  kDeviceUnhealthy,     ///< a device unhealthy in the sim devices file for `seconds`, then healthy
};
inline constexpr int kFaultKinds = 11;
const char* faultName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kCompactEtcd;
  std::string target;  ///< the node (agent, kubelet, connection) or device; empty otherwise
  int seconds = 0;     ///< how long a pause, hold or unhealthy spell lasts
  double at = 0;       ///< seconds since the run's start
  std::string outcome; ///< "ok" or why doing it failed
  std::string describe() const;
};

class FaultInjector {
 public:
  /// `proxies`: the TcpProxy between each node's agent and kube-apiserver. `componentsMu` is
  /// held while a fault stops or starts a component (the supervisor takes it too).
  FaultInjector(RealCluster& c, std::vector<std::string> nodes, std::map<std::string, TcpProxy*> proxies,
                std::mutex& componentsMu);
  /// A fault of a kind chosen uniformly, its target and length from `rng` alone (the run's
  /// seed replays the same sequence).
  Fault pick(std::mt19937_64& rng) const;
  /// Does it; returns once the component is ready again or the spell is over.
  Status inject(const Fault& f);

 private:
  Status setDeviceHealth(const std::string& device, bool healthy);

  RealCluster& c_;
  std::vector<std::string> nodes_;
  std::map<std::string, TcpProxy*> proxies_;
  std::mutex& componentsMu_;
  std::string healthyDevicesText_;  ///< the sim devices file as the chart wrote it
};

}  // namespace vgpu::realk8s::soak
